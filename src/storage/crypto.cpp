#include "storage/crypto.hpp"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>

#include <memory>

#include "base/error.hpp"

namespace a2pack::storage {

std::string sha256_hex(const void* data, size_t len) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  if (!EVP_Digest(data, len, md, &n, EVP_sha256(), nullptr))
    fail(A2PACK_E_INTERNAL, "OpenSSL SHA-256 failed");
  return to_hex(std::string(reinterpret_cast<char*>(md), n));
}

std::string hmac_sha256(const std::string& key, const std::string& msg) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  if (!HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
            reinterpret_cast<const unsigned char*>(msg.data()), msg.size(), md, &n))
    fail(A2PACK_E_INTERNAL, "OpenSSL HMAC-SHA256 failed");
  return std::string(reinterpret_cast<char*>(md), n);
}

std::string to_hex(const std::string& raw) {
  static const char* hex = "0123456789abcdef";
  std::string out;
  out.reserve(raw.size() * 2);
  for (unsigned char c : raw) {
    out.push_back(hex[c >> 4]);
    out.push_back(hex[c & 15]);
  }
  return out;
}

std::string base64url(const std::string& raw) {
  std::string out(4 * ((raw.size() + 2) / 3) + 1, '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(raw.data()), static_cast<int>(raw.size()));
  out.resize(static_cast<size_t>(n));
  while (!out.empty() && out.back() == '=') out.pop_back();
  for (char& c : out) {
    if (c == '+') c = '-';
    else if (c == '/') c = '_';
  }
  return out;
}

std::string rsa_sha256_sign(const std::string& pem_key, const std::string& msg, const std::string& what) {
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new_mem_buf(pem_key.data(), static_cast<int>(pem_key.size())),
                                                BIO_free);
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(
      bio ? PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr) : nullptr, EVP_PKEY_free);
  if (!key) {
    ERR_clear_error();
    fail(A2PACK_E_INVALID_ARGUMENT, "{}: private_key is not a PEM private key OpenSSL can read", what);
  }
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  size_t len = 0;
  if (!ctx || EVP_DigestSignInit(ctx.get(), nullptr, EVP_sha256(), nullptr, key.get()) != 1 ||
      EVP_DigestSign(ctx.get(), nullptr, &len, reinterpret_cast<const unsigned char*>(msg.data()),
                     msg.size()) != 1) {
    ERR_clear_error();
    fail(A2PACK_E_INVALID_ARGUMENT, "{}: signing with the private key failed", what);
  }
  std::string sig(len, '\0');
  if (EVP_DigestSign(ctx.get(), reinterpret_cast<unsigned char*>(sig.data()), &len,
                     reinterpret_cast<const unsigned char*>(msg.data()), msg.size()) != 1) {
    ERR_clear_error();
    fail(A2PACK_E_INVALID_ARGUMENT, "{}: signing with the private key failed", what);
  }
  sig.resize(len);
  return sig;
}

}  // namespace a2pack::storage
