// The hashing and signing object storage needs, all from OpenSSL: SHA-256
// and HMAC-SHA256 for AWS SigV4, RSA-SHA256 and base64url for the JWT of a
// Google service account.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

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

}  // namespace a2pack::storage
