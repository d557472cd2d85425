// Page-locking host memory for CUDA without linking CUDA: the runtime's
// cudaHostRegister / cudaHostUnregister are looked up at run time in a
// libcudart the process already has loaded (torch, jax or cupy load one), in
// the library $A2PACK_CUDART names, or (when asked to insist) in one the
// dynamic loader finds. A host without CUDA gets plain memory and a reason.
#pragma once

#include <cstddef>
#include <string>

namespace a2pack::feed {

class CudaHost {
 public:
  // Find the runtime. `search_loader`: also dlopen libcudart by name when
  // none is loaded yet (that initialises CUDA in this process, so it is only
  // done when pinning was asked for explicitly). Returns null with `why` set
  // when there is none.
  static const CudaHost* find(bool search_loader, std::string* why);

  // Register [p, p + n) as page-locked, portable across contexts. False
  // with `why` set when the runtime refuses (no device, say).
  bool register_memory(void* p, size_t n, std::string* why) const;
  void unregister_memory(void* p) const;
  const std::string& library() const { return library_; }

 private:
  using RegisterFn = int (*)(void*, size_t, unsigned);
  using UnregisterFn = int (*)(void*);
  using ErrorStringFn = const char* (*)(int);
  RegisterFn reg_ = nullptr;
  UnregisterFn unreg_ = nullptr;
  ErrorStringFn error_string_ = nullptr;
  std::string library_;
};

}  // namespace a2pack::feed
