// Object-storage layer internals that need no server: path parsing, the
// OpenSSL helpers against published vectors, credentials kept out of
// messages, and the local backend's ranged and batch reads (merging,
// overlaps, read-ahead). S3 and GCS themselves are
// tested against real servers by tests/python/test_storage_*.py.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "base/path_prefix.hpp"
#include "storage/crypto.hpp"
#include "storage/http.hpp"
#include "storage/object_store.hpp"
#include "storage/redact.hpp"

namespace a2pack {
namespace {

TEST(StoragePaths, SchemesAndPathlibSpellings) {
  for (const char* p : {"s3://b/k/x.bag", "/s3://b/k/x.bag", "s3:/b/k/x.bag", "/s3:/b/k/x.bag"}) {
    ParsedPath q = parse_path(p);
    EXPECT_EQ(q.scheme, PathScheme::s3) << p;
    EXPECT_EQ(q.bucket, "b") << p;
    EXPECT_EQ(q.key, "k/x.bag") << p;
    EXPECT_EQ(q.url(), "s3://b/k/x.bag") << p;
    EXPECT_TRUE(is_remote_path(p)) << p;
  }
  ParsedPath g = parse_path("/gs:/bucket/a@8.bagz");
  EXPECT_EQ(g.scheme, PathScheme::gs);
  EXPECT_EQ(g.url(), "gs://bucket/a@8.bagz");
  EXPECT_EQ(parse_path("gs://bucket").key, "");
  for (const char* p : {"posix:/tmp/x.bag", "fs:/tmp/x.bag"}) {
    ParsedPath q = parse_path(p);
    EXPECT_EQ(q.scheme, PathScheme::local);
    EXPECT_EQ(q.local, "/tmp/x.bag");
  }
  EXPECT_EQ(parse_path("dir/s3:x.bag").scheme, PathScheme::local);
  EXPECT_EQ(parse_path("s3x://b/k").scheme, PathScheme::local);
  EXPECT_FALSE(is_remote_path("/tmp/gs/x.bag"));
  for (const char* p : {"s3://", "/gs:/"}) {
    try {
      parse_path(p);
      FAIL() << "no error for " << p;
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), A2PACK_E_INVALID_ARGUMENT);
      EXPECT_NE(std::string(e.what()).find("no bucket"), std::string::npos);
    }
  }
}

TEST(StorageCrypto, PublishedVectors) {
  EXPECT_EQ(storage::sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  // RFC 4231 test case 2.
  EXPECT_EQ(storage::to_hex(storage::hmac_sha256("Jefe", "what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  // The SigV4 signing key of AWS's documentation example (IAM, 2012-02-15).
  std::string k = storage::hmac_sha256("AWS4wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "20120215");
  k = storage::hmac_sha256(k, "us-east-1");
  k = storage::hmac_sha256(k, "iam");
  k = storage::hmac_sha256(k, "aws4_request");
  EXPECT_EQ(storage::to_hex(k), "f4780e2d9f65fa895f9c67b32ce1baf0b0d8a43505a000a1a9e090d414db404d");
  EXPECT_EQ(storage::base64url(std::string("\xfb\xff", 2)), "-_8");
  EXPECT_EQ(storage::base64url("ab"), "YWI");
  EXPECT_EQ(storage::url_encode("a b/c~-_.", true), "a%20b/c~-_.");
  EXPECT_EQ(storage::url_encode("a/b+c", false), "a%2Fb%2Bc");
  EXPECT_THROW(storage::rsa_sha256_sign("not a key", "msg", "key.json"), Error);
}

TEST(StorageRedact, UserInfoOfUrlsIsStripped) {
  EXPECT_EQ(storage::strip_userinfo("http://user:PASS@127.0.0.1:9000/b/k?x=1"),
            "http://127.0.0.1:9000/b/k?x=1");
  EXPECT_EQ(storage::strip_userinfo("https://token@host"), "https://host");
  EXPECT_EQ(storage::redact("GET http://u:p%40ss@h:1/b failed; endpoint https://a:b@c.example"),
            "GET http://h:1/b failed; endpoint https://c.example");
  // An '@' after the host is a name, not user info.
  EXPECT_EQ(storage::redact("s3://bucket/run@8.bagz and gs://b/x@y"),
            "s3://bucket/run@8.bagz and gs://b/x@y");
}

TEST(StorageRedact, EchoedCredentialsAreHidden) {
  const std::string auth =
      "AWS4-HMAC-SHA256 Credential=AKIAEXAMPLEKEY123456/20240101/us-east-1/s3/aws4_request, "
      "SignedHeaders=host;x-amz-date, Signature=0123abcd";
  for (const std::string& echo : {
           "Authorization: " + auth + "\nHost: h",
           "<Authorization>" + auth + "</Authorization>",
           "{\"authorization\": \"" + auth + "\"}",
       }) {
    std::string r = storage::redact("denied: " + echo);
    EXPECT_EQ(r.find("AKIAEXAMPLEKEY123456"), std::string::npos) << r;
    EXPECT_EQ(r.find("0123abcd"), std::string::npos) << r;
    EXPECT_NE(r.find("denied: "), std::string::npos) << r;
    EXPECT_NE(r.find("uthorization"), std::string::npos) << r;  // the name stays
  }
  std::string q = storage::redact(
      "GET /b/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAX%2F2024&"
      "X-Amz-Security-Token=FwoGZXIvYXdzEJr&X-Amz-Signature=deadbeef&partNumber=2 and "
      "x-amz-security-token: FwoGZXIvYXdzEJr2 then Bearer ya29.a0AfH6SM and "
      "https://storage.example/upload?uploadType=resumable&upload_id=ADPycdt7");
  for (const char* secret : {"AKIAX", "FwoGZXIvYXdzEJr", "deadbeef", "ya29", "ADPycdt7"})
    EXPECT_EQ(q.find(secret), std::string::npos) << secret << " in " << q;
  for (const char* kept : {"X-Amz-Algorithm=AWS4-HMAC-SHA256", "partNumber=2", "uploadType=resumable",
                           "X-Amz-Signature=***", "Bearer ***"})
    EXPECT_NE(q.find(kept), std::string::npos) << kept << " not in " << q;
  // Ordinary messages pass unchanged.
  const std::string plain =
      "s3://b/k: reading 10 bytes at offset 5: HTTP 403 SignatureDoesNotMatch: The request "
      "signature we calculated does not match (credentials from AWS_ACCESS_KEY_ID/"
      "AWS_SECRET_ACCESS_KEY; region us-east-1; endpoint http://127.0.0.1:9)";
  EXPECT_EQ(storage::redact(plain), plain);
}

TEST(StorageRedact, RememberedSecretsAreHiddenWhereverTheyAppear) {
  storage::remember_secret("wJalrXUtnFEMI/K7MDENG+bPxRfiCYzzKEY");
  storage::remember_secret("short");  // could be any word: not remembered
  std::string r = storage::redact(
      "<Message>secret wJalrXUtnFEMI/K7MDENG+bPxRfiCYzzKEY is wrong</Message> a short note");
  EXPECT_EQ(r, "<Message>secret *** is wrong</Message> a short note");
  // A server's long body is cut, not copied whole into the message.
  std::string huge = storage::redact(std::string(100000, 'x'));
  EXPECT_LT(huge.size(), 5000u);
  EXPECT_NE(huge.find("more bytes not shown"), std::string::npos);
}

class StorageLocal : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("a2pack-storage-test-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    path_ = (dir_ / "obj.bin").string();
    std::mt19937 rng(7);
    data_.resize(3 << 20);
    for (auto& b : data_) b = static_cast<uint8_t>(rng());
    std::ofstream(path_, std::ios::binary).write(reinterpret_cast<const char*>(data_.data()), data_.size());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
  std::string path_;
  std::vector<uint8_t> data_;
};

TEST_F(StorageLocal, RangesBatchesAndReadAhead) {
  auto obj = storage::open_read("posix:" + path_);
  ASSERT_EQ(obj->size(), data_.size());
  EXPECT_FALSE(obj->remote());
  // Unsorted, overlapping, adjacent, far apart, empty.
  std::vector<std::pair<uint64_t, size_t>> want = {
      {5000, 100}, {0, 10}, {5050, 200}, {5250, 3}, {2 << 20, 70000}, {100, 0}, {data_.size() - 1, 1}};
  std::vector<std::vector<uint8_t>> out(want.size());
  std::vector<storage::ReadRange> rs;
  for (size_t i = 0; i < want.size(); ++i) {
    out[i].resize(want[i].second);
    rs.push_back({want[i].first, want[i].second, out[i].data()});
  }
  obj->read_many(rs.data(), rs.size(), 4);
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_TRUE(std::equal(out[i].begin(), out[i].end(), data_.begin() + want[i].first)) << i;
  // Forward single reads through the read-ahead window.
  obj->set_read_ahead(256 << 10);
  std::vector<uint8_t> buf(1000);
  for (uint64_t off = 0; off + buf.size() <= 600000; off += buf.size()) {
    obj->read(off, buf.size(), buf.data());
    ASSERT_TRUE(std::equal(buf.begin(), buf.end(), data_.begin() + off)) << off;
  }
  // A range past the end: CORRUPT naming the object, nothing read.
  try {
    obj->read(data_.size() - 10, 11, buf.data());
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), A2PACK_E_CORRUPT);
    EXPECT_NE(std::string(e.what()).find(path_), std::string::npos);
  }
  std::vector<uint8_t> all = obj->read_all(0, data_.size());
  EXPECT_EQ(all, data_);
}

TEST_F(StorageLocal, WriterAppearsOnlyAtCommitAndListing) {
  const std::string out = (dir_ / "w.bin").string();
  {
    auto w = storage::open_write(out, /*durable=*/false);
    w->write("abc", 3);
    EXPECT_FALSE(std::filesystem::exists(out));
  }  // abandoned: nothing
  EXPECT_FALSE(std::filesystem::exists(out));
  auto w = storage::open_write(out, false);
  w->write("abc", 3);
  w->commit();
  EXPECT_EQ(std::filesystem::file_size(out), 3u);
  auto names = storage::list((dir_ / "").string() + "w");
  ASSERT_EQ(names.size(), 1u);
  EXPECT_EQ(names[0], out);
  EXPECT_TRUE(storage::list((dir_ / "nothing-").string()).empty());
}

}  // namespace
}  // namespace a2pack
