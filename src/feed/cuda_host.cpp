#include "feed/cuda_host.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>

#include <fmt/format.h>

namespace a2pack::feed {

namespace {

// The sonames of the CUDA runtimes in use (12.x and 13.x wheels of torch and
// jax, 11.x), then the development symlink.
constexpr const char* kNames[] = {"libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0",
                                  "libcudart.so"};

// cudaHostRegisterPortable: the memory counts as pinned in every CUDA
// context, not only the current one.
constexpr unsigned kRegisterPortable = 1;

}  // namespace

const CudaHost* CudaHost::find(bool search_loader, std::string* why) {
  // One CudaHost per library path, kept for the process's life (the
  // library is opened with RTLD_NODELETE: CUDA runtimes must not unload).
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<CudaHost>> found;
  std::lock_guard<std::mutex> lk(mu);

  void* h = nullptr;
  std::string name;
  if (const char* env = std::getenv("A2PACK_CUDART"); env && *env) {
    name = env;
    h = ::dlopen(env, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (!h) {
      const char* e = ::dlerror();
      *why = fmt::format("A2PACK_CUDART={}: {}", env, e ? e : "cannot be loaded");
      return nullptr;
    }
  } else {
    for (const char* n : kNames) {
      if ((h = ::dlopen(n, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE | RTLD_NOLOAD))) {
        name = n;
        break;
      }
    }
    if (!h && search_loader) {
      for (const char* n : kNames) {
        if ((h = ::dlopen(n, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE))) {
          name = n;
          break;
        }
      }
    }
    if (!h) {
      *why = search_loader ? "no CUDA runtime (libcudart) could be loaded"
                           : "no CUDA runtime (libcudart) is loaded in this process";
      return nullptr;
    }
  }
  auto it = found.find(name);
  if (it != found.end()) {
    ::dlclose(h);  // drops the reference this call took; the first one stays
    return it->second.get();
  }
  auto c = std::make_unique<CudaHost>();
  c->library_ = name;
  c->reg_ = reinterpret_cast<RegisterFn>(::dlsym(h, "cudaHostRegister"));
  c->unreg_ = reinterpret_cast<UnregisterFn>(::dlsym(h, "cudaHostUnregister"));
  c->error_string_ = reinterpret_cast<ErrorStringFn>(::dlsym(h, "cudaGetErrorString"));
  if (!c->reg_ || !c->unreg_) {
    *why = fmt::format("{} has no cudaHostRegister/cudaHostUnregister", name);
    ::dlclose(h);
    return nullptr;
  }
  return (found[name] = std::move(c)).get();
}

bool CudaHost::register_memory(void* p, size_t n, std::string* why) const {
  int rc = reg_(p, n, kRegisterPortable);
  if (rc == 0) return true;
  const char* msg = error_string_ ? error_string_(rc) : nullptr;
  *why = fmt::format("{}: cudaHostRegister of {} bytes failed with error {} ({})", library_, n, rc,
                     msg ? msg : "no message");
  return false;
}

void CudaHost::unregister_memory(void* p) const { (void)unreg_(p); }

}  // namespace a2pack::feed
