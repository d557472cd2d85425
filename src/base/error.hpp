// Errors inside the library are C++ exceptions carrying an a2pack_status; the
// C ABI layer (src/capi) turns them into a status plus a thread-local message.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "a2pack.h"

namespace a2pack {

class Error : public std::runtime_error {
 public:
  Error(a2pack_status status, std::string message)
      : std::runtime_error(std::move(message)), status_(status) {}
  a2pack_status status() const noexcept { return status_; }

 private:
  a2pack_status status_;
};

template <typename... Args>
[[noreturn]] void fail(a2pack_status status, fmt::format_string<Args...> f, Args&&... args) {
  throw Error(status, fmt::format(f, std::forward<Args>(args)...));
}

// errno-based I/O failure naming the operation and path.
[[noreturn]] void fail_errno(const std::string& what, const std::string& path, int err);

// Prefix an error's message with context ("file.a2pack: entry 12: ...") and
// rethrow it with the same status; a message that already begins with the
// context is rethrown as it is.
[[noreturn]] void rethrow_with_context(const Error& e, const std::string& context);

}  // namespace a2pack
