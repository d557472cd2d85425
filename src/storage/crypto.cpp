#include "storage/crypto.hpp"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>

#include <memory>

#include "base/error.hpp"
#include "storage/lazy_library.hpp"

namespace a2pack::storage {

namespace {

// The OpenSSL entry points used here, as one table: loaded on first use in
// the default build (storage/lazy_library.hpp says why).
struct CryptoApi {
  decltype(&::EVP_Digest) Digest;
  decltype(&::EVP_sha256) sha256;
  decltype(&::HMAC) Hmac;
  decltype(&::EVP_EncodeBlock) EncodeBlock;
  decltype(&::BIO_new_mem_buf) BIO_new_mem_buf;
  decltype(&::BIO_free) BIO_free;
  decltype(&::PEM_read_bio_PrivateKey) PEM_read_bio_PrivateKey;
  decltype(&::EVP_PKEY_free) PKEY_free;
  decltype(&::ERR_clear_error) ERR_clear_error;
  decltype(&::EVP_MD_CTX_new) MD_CTX_new;
  decltype(&::EVP_MD_CTX_free) MD_CTX_free;
  decltype(&::EVP_DigestSignInit) DigestSignInit;
  decltype(&::EVP_DigestSign) DigestSign;
  decltype(&::EVP_DigestInit_ex) DigestInit_ex;
  decltype(&::EVP_DigestUpdate) DigestUpdate;
  decltype(&::EVP_DigestFinal_ex) DigestFinal_ex;
};

#ifdef A2PACK_CURL_DLOPEN
CryptoApi load() {
  // OpenSSL 3's SONAME, then 1.1's (RHEL 8, Ubuntu 20.04: the machines
  // the manylinux_2_28 wheel reaches); the unversioned name covers
  // development-only installs. The functions used here exist with these
  // names and types since OpenSSL 1.1.1.
  void* lib = open_library({"libcrypto.so.3", "libcrypto.so.1.1", "libcrypto.so"},
                           "SHA-256 (object storage signing, dataset run digests)",
                           "install OpenSSL's libcrypto (Debian/Ubuntu: apt-get install libssl3; "
                           "RHEL/Rocky/Fedora: dnf install openssl-libs)");
  CryptoApi api{};
  SymbolBinder bind(lib);
  bind("EVP_Digest", api.Digest);
  bind("EVP_sha256", api.sha256);
  bind("HMAC", api.Hmac);
  bind("EVP_EncodeBlock", api.EncodeBlock);
  bind("BIO_new_mem_buf", api.BIO_new_mem_buf);
  bind("BIO_free", api.BIO_free);
  bind("PEM_read_bio_PrivateKey", api.PEM_read_bio_PrivateKey);
  bind("EVP_PKEY_free", api.PKEY_free);
  bind("ERR_clear_error", api.ERR_clear_error);
  bind("EVP_MD_CTX_new", api.MD_CTX_new);
  bind("EVP_MD_CTX_free", api.MD_CTX_free);
  bind("EVP_DigestSignInit", api.DigestSignInit);
  bind("EVP_DigestSign", api.DigestSign);
  bind("EVP_DigestInit_ex", api.DigestInit_ex);
  bind("EVP_DigestUpdate", api.DigestUpdate);
  bind("EVP_DigestFinal_ex", api.DigestFinal_ex);
  if (!bind.missing().empty())
    fail(A2PACK_E_IO, "the libcrypto that was loaded lacks {}; object storage needs OpenSSL 1.1.1 or later",
         bind.missing());
  return api;
}
#else
CryptoApi load() {
  return CryptoApi{::EVP_Digest,      ::EVP_sha256,         ::HMAC,
                   ::EVP_EncodeBlock, ::BIO_new_mem_buf,    ::BIO_free,
                   ::PEM_read_bio_PrivateKey, ::EVP_PKEY_free, ::ERR_clear_error,
                   ::EVP_MD_CTX_new,  ::EVP_MD_CTX_free,    ::EVP_DigestSignInit,
                   ::EVP_DigestSign,  ::EVP_DigestInit_ex,  ::EVP_DigestUpdate,
                   ::EVP_DigestFinal_ex};
}
#endif

const CryptoApi& ssl() { return lazily<CryptoApi>(load); }

}  // namespace

std::string sha256_hex(const void* data, size_t len) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  if (!ssl().Digest(data, len, md, &n, ssl().sha256(), nullptr))
    fail(A2PACK_E_INTERNAL, "OpenSSL SHA-256 failed");
  return to_hex(std::string(reinterpret_cast<char*>(md), n));
}

std::string hmac_sha256(const std::string& key, const std::string& msg) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  if (!ssl().Hmac(ssl().sha256(), key.data(), static_cast<int>(key.size()),
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
  int n = ssl().EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
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
  const CryptoApi& api = ssl();
  std::unique_ptr<BIO, decltype(api.BIO_free)> bio(
      api.BIO_new_mem_buf(pem_key.data(), static_cast<int>(pem_key.size())), api.BIO_free);
  std::unique_ptr<EVP_PKEY, decltype(api.PKEY_free)> key(
      bio ? api.PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr) : nullptr,
      api.PKEY_free);
  if (!key) {
    api.ERR_clear_error();
    fail(A2PACK_E_INVALID_ARGUMENT, "{}: private_key is not a PEM private key OpenSSL can read", what);
  }
  std::unique_ptr<EVP_MD_CTX, decltype(api.MD_CTX_free)> ctx(api.MD_CTX_new(), api.MD_CTX_free);
  size_t len = 0;
  if (!ctx || api.DigestSignInit(ctx.get(), nullptr, api.sha256(), nullptr, key.get()) != 1 ||
      api.DigestSign(ctx.get(), nullptr, &len, reinterpret_cast<const unsigned char*>(msg.data()),
                     msg.size()) != 1) {
    api.ERR_clear_error();
    fail(A2PACK_E_INVALID_ARGUMENT, "{}: signing with the private key failed", what);
  }
  std::string sig(len, '\0');
  if (api.DigestSign(ctx.get(), reinterpret_cast<unsigned char*>(sig.data()), &len,
                     reinterpret_cast<const unsigned char*>(msg.data()), msg.size()) != 1) {
    api.ERR_clear_error();
    fail(A2PACK_E_INVALID_ARGUMENT, "{}: signing with the private key failed", what);
  }
  sig.resize(len);
  return sig;
}

Sha256::Sha256() {
  const CryptoApi& api = ssl();
  ctx_ = api.MD_CTX_new();
  if (!ctx_ || api.DigestInit_ex(ctx_, api.sha256(), nullptr) != 1) {
    if (ctx_) api.MD_CTX_free(ctx_);
    api.ERR_clear_error();
    fail(A2PACK_E_NO_MEMORY, "OpenSSL could not start a SHA-256");
  }
}

Sha256::~Sha256() {
  if (ctx_) ssl().MD_CTX_free(ctx_);
}

void Sha256::update(const void* data, size_t len) {
  if (len && ssl().DigestUpdate(ctx_, data, len) != 1)
    fail(A2PACK_E_INTERNAL, "OpenSSL SHA-256 failed");
}

std::array<uint8_t, 32> Sha256::final() {
  const CryptoApi& api = ssl();
  std::array<uint8_t, 32> out{};
  unsigned int n = 0;
  if (api.DigestFinal_ex(ctx_, out.data(), &n) != 1 || n != out.size() ||
      api.DigestInit_ex(ctx_, api.sha256(), nullptr) != 1)
    fail(A2PACK_E_INTERNAL, "OpenSSL SHA-256 failed");
  return out;
}

}  // namespace a2pack::storage
