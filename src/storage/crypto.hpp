// The hashing and signing object storage needs, all from OpenSSL: SHA-256
// and HMAC-SHA256 for AWS SigV4, RSA-SHA256 and base64url for the JWT of a
// Google service account; and the streaming SHA-256 that step datasets use
// for their runs' content digests (dataset/digest.hpp).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

typedef struct evp_md_ctx_st EVP_MD_CTX;

namespace a2pack::storage {

std::string sha256_hex(const void* data, size_t len);
inline std::string sha256_hex(const std::string& s) { return sha256_hex(s.data(), s.size()); }
// Raw 32-byte HMAC-SHA256 of `msg` under `key`.
std::string hmac_sha256(const std::string& key, const std::string& msg);
std::string to_hex(const std::string& raw);
std::string base64url(const std::string& raw);
// RSASSA-PKCS1-v1_5 with SHA-256 of `msg` under a PEM private key.
// INVALID_ARGUMENT naming `what` when the key does not parse.
std::string rsa_sha256_sign(const std::string& pem_key, const std::string& msg, const std::string& what);

// A SHA-256 computed piece by piece. One object serves many digests in turn
// (final() starts the next one), so a thread hashing many small inputs
// allocates OpenSSL's context once. Not shared between threads.
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  void update(const void* data, size_t len);
  // The digest of everything given since the last final(); then starts anew.
  std::array<uint8_t, 32> final();

 private:
  EVP_MD_CTX* ctx_ = nullptr;
};

}  // namespace a2pack::storage
