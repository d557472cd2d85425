#include "dataset/source.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <utility>

#include "base/error.hpp"
#include "base/file_io.hpp"

namespace a2pack::dataset {

namespace fs = std::filesystem;

DirSource::DirSource(const std::string& dir) : dir_(dir) {
  std::error_code ec;
  auto st = fs::status(dir, ec);
  if (ec || !fs::exists(st)) fail(A2PACK_E_NOT_FOUND, "{}: no such folder", dir);
  if (!fs::is_directory(st)) fail(A2PACK_E_INVALID_ARGUMENT, "{}: not a folder", dir);
  std::vector<std::string> rel;
  fs::recursive_directory_iterator it(dir, fs::directory_options::none, ec), end;
  if (ec) fail(A2PACK_E_IO, "{}: cannot list: {}", dir, ec.message());
  for (; it != end; it.increment(ec)) {
    if (ec) fail(A2PACK_E_IO, "{}: cannot list: {}", dir, ec.message());
    std::error_code e2;
    if (!it->is_regular_file(e2)) continue;
    const fs::path& p = it->path();
    if (p.extension() != ".a2run2") continue;
    rel.push_back(p.lexically_relative(dir).string());
  }
  if (rel.empty()) fail(A2PACK_E_NOT_FOUND, "{}: no .a2run2 files in this folder", dir);
  std::sort(rel.begin(), rel.end());
  std::string prefix = dir.empty() || dir.back() == '/' ? dir : dir + "/";
  files_.reserve(rel.size());
  for (auto& r : rel) files_.push_back(prefix + r);
}

PayloadView DirSource::payload(size_t i, std::vector<uint8_t>& scratch) const {
  ReadFd f(files_[i]);
  uint64_t size = f.size();
  if (size > (uint64_t{1} << 32))
    fail(A2PACK_E_UNSUPPORTED, "{}: {} bytes is too large for a run file", files_[i], size);
  scratch.resize(size);
  if (size) f.pread_exact(scratch.data(), size, 0);
  return {scratch.data(), scratch.size()};
}

BytesSource::BytesSource(std::vector<Entry> entries, std::string input, std::string kind)
    : entries_(std::move(entries)), input_(std::move(input)), kind_(std::move(kind)) {
  if (entries_.empty()) fail(A2PACK_E_INVALID_ARGUMENT, "{}: no runs given", input_);
  for (const Entry& e : entries_) {
    if (e.length > (uint64_t{1} << 32))
      fail(A2PACK_E_UNSUPPORTED, "{}: {} bytes is too large for a run file", e.label, e.length);
    if (!e.data && e.path.empty())
      fail(A2PACK_E_INVALID_ARGUMENT, "{}: neither bytes nor a file holding them", e.label);
  }
}

PayloadView BytesSource::payload(size_t i, std::vector<uint8_t>& scratch) const {
  const Entry& e = entries_[i];
  if (e.data) return {e.data, static_cast<size_t>(e.length)};
  ReadFd f(e.path);
  uint64_t size = f.size();
  if (e.offset > size || e.length > size - e.offset)
    fail(A2PACK_E_CORRUPT, "{}: bytes {}..{} of {} asked for, but the file has {}", e.label,
         e.offset, e.offset + e.length, e.path, size);
  scratch.resize(e.length);
  if (e.length) f.pread_exact(scratch.data(), e.length, e.offset);
  return {scratch.data(), scratch.size()};
}

std::unique_ptr<RunSource> open_source(const std::string& input) {
  struct stat st;
  if (::stat(input.c_str(), &st) != 0) fail_errno("stat", input, errno);
  if (S_ISDIR(st.st_mode)) return std::make_unique<DirSource>(input);
  fail(A2PACK_E_UNSUPPORTED,
       "{}: not a folder; packfile (.a2pack) input to datasets is not wired in this build "
       "yet: pass a folder of .a2run2 files",
       input);
}

}  // namespace a2pack::dataset
