#include "storage/lazy_library.hpp"

#include <dlfcn.h>

namespace a2pack::storage {

void* SymbolBinder::lookup(const char* name) { return ::dlsym(lib_, name); }

void* open_library(std::initializer_list<const char*> sonames, const char* purpose,
                   const char* install_hint) {
  std::string why;
  for (const char* name : sonames) {
    if (void* lib = ::dlopen(name, RTLD_NOW | RTLD_LOCAL)) return lib;
    const char* e = ::dlerror();
    why += std::string(why.empty() ? "" : "; ") + (e ? e : name);
  }
  fail(A2PACK_E_IO, "{} needs a library that could not be loaded ({}); {}", purpose, why,
       install_hint);
}

}  // namespace a2pack::storage
