// Credentials out of error messages. Every storage message that shows a URL
// or text a server sent goes through redact(): the user info of URLs
// ("http://user:pass@host" prints as "http://host"), the values of
// Authorization headers, SigV4 credentials and signatures, security tokens
// and GCS session ids, bearer tokens, and any credential the storage layer
// holds (remember_secret: keys, secrets, session and access tokens, wherever
// a server echoed them) become "***".
#pragma once

#include <string>
#include <utility>

#include <fmt/format.h>

#include "base/error.hpp"

namespace a2pack::storage {

// `text` with the credentials in it replaced (see above).
std::string redact(const std::string& text);

// "scheme://[user[:pass]@]host..." without the user info; anything else as is.
std::string strip_userinfo(const std::string& url);

// Remember a credential this process holds, so that redact() hides it
// wherever it appears. Values shorter than 8 bytes cannot be told from
// ordinary words and are not remembered (the patterns above still apply).
void remember_secret(const std::string& value);

// fail(), with the message redacted: for every storage error that shows a
// URL or a server's words.
template <typename... Args>
[[noreturn]] void fail_redacted(a2pack_status status, fmt::format_string<Args...> f,
                                Args&&... args) {
  throw Error(status, redact(fmt::format(f, std::forward<Args>(args)...)));
}

}  // namespace a2pack::storage
