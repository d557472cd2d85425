#include "dataset/writing.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/crc32c.hpp"
#include "base/error.hpp"
#include "base/path_prefix.hpp"
#include "dataset/fsutil.hpp"
#include "dataset/row.hpp"

namespace a2pack::dataset {

namespace {

// Size and CRC32C of a file's bytes (metadata.db: tens of MB per million
// runs, read from the page cache at memory speed).
void file_crc(const std::string& path, uint64_t& bytes, uint32_t& crc) {
  MappedFile f(path, MappedFile::Advice::sequential);
  bytes = f.size();
  crc = crc32c::compute(f.data(), f.size());
}

}  // namespace

bool path_exists(const std::string& p) {
  struct stat st;
  return ::lstat(p.c_str(), &st) == 0;
}

std::string generator_name() { return std::string("a2pack ") + A2PACK_VERSION_STRING; }

void stamp_metadata(Manifest& m, const std::string& db_path) {
  file_crc(db_path, m.metadata_bytes, m.metadata_crc32c);
  m.has_metadata_stamp = true;
}

bool metadata_unchanged(const Manifest& m, const std::string& db_path) {
  if (!m.has_metadata_stamp || path_exists(db_path + "-wal")) return false;
  uint64_t bytes = 0;
  uint32_t crc = 0;
  file_crc(db_path, bytes, crc);
  return bytes == m.metadata_bytes && crc == m.metadata_crc32c;
}

void write_manifest(const std::string& dir, const Manifest& m, const char* crash_name) {
  TempFile t(dir + "/manifest.json");
  std::string text = to_json(m);
  t.write(text.data(), text.size());
  t.sync();
  crash_point(crash_name);
  t.install();
}

void require_dataset_files(const std::string& dir) {
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) fail_errno("open dataset", dir, errno);
  if (!S_ISDIR(st.st_mode)) fail(A2PACK_E_INVALID_ARGUMENT, "{}: not a dataset folder", dir);
  // A sharded dataset keeps its rows in the shards its manifest lists.
  const bool sharded = !path_exists(dir + "/steps.npy") && path_exists(dir + "/manifest.json") &&
                       read_manifest(dir)->sharded;
  for (const char* f : {"steps.npy", "metadata.db"})
    if (!(sharded && std::strcmp(f, "steps.npy") == 0))
    if (!path_exists(dir + "/" + f))
      fail(A2PACK_E_NOT_FOUND, "{}/{}: missing (a dataset holds steps.npy, metadata.db and "
           "manifest.json)", dir, f);
}

void require_db_not_linked(const std::string& dir) {
  const std::string db = dir + "/metadata.db";
  struct stat st;
  if (::lstat(db.c_str(), &st) != 0) fail_errno("stat", db, errno);
  if (S_ISLNK(st.st_mode))
    fail(A2PACK_E_INVALID_ARGUMENT,
         "{}: is a symbolic link; a2pack writes a dataset's metadata.db only as a file in the "
         "dataset folder, never through a link into the file it points at. Nothing was "
         "changed; replace the link with a copy of its file to write to this dataset",
         db);
}

void require_writable(const std::string& dir) {
  require_db_not_linked(dir);
  const std::string db = dir + "/metadata.db";
  if (::faccessat(AT_FDCWD, db.c_str(), W_OK, AT_EACCESS) != 0)
    fail_errno("not writable, so the new runs cannot be added to it (nothing was changed)", db,
               errno);
  if (::faccessat(AT_FDCWD, dir.c_str(), W_OK | X_OK, AT_EACCESS) != 0)
    fail_errno("folder not writable, so SQLite cannot create metadata.db-journal and a2pack "
               "cannot write its journal and temporary files there (nothing was changed)",
               dir, errno);
}

void require_local(const std::string& dir) {
  if (is_remote_path(dir))
    fail(A2PACK_E_UNSUPPORTED,
         "{}: datasets are built and appended in a local folder; build one locally and upload its "
         "files (remote datasets are read-only)",
         dir);
}

bool extendable_in_place(const ReadFd& steps, const NpyInfo& info) {
  struct stat st;
  if (::fstat(steps.fd(), &st) != 0) fail_errno("stat", steps.path(), errno);
  struct stat lst;
  if (::lstat(steps.path().c_str(), &lst) != 0) fail_errno("stat", steps.path(), errno);
  return info.data_offset == npy_header_size() && st.st_nlink == 1 && S_ISREG(lst.st_mode) &&
         ::faccessat(AT_FDCWD, steps.path().c_str(), W_OK, AT_EACCESS) == 0;
}

void cut_own_tail(const std::string& steps_path, uint64_t data_offset, uint64_t rows) {
  ExtendFile f(steps_path);
  const std::string hdr = npy_header(rows);
  f.pwrite(hdr.data(), hdr.size(), 0);
  f.sync();
  f.truncate(data_offset + rows * kRowBytes);
  f.sync();
}

void truncate_steps(const std::string& steps_path, const ReadFd& steps, const NpyInfo& info,
                    uint64_t rows) {
  TempFile t(steps_path);
  std::string hdr = npy_header(rows);
  t.write(hdr.data(), hdr.size());
  t.copy_from(steps.fd(), steps_path, info.data_offset, rows * kRowBytes);
  t.sync();
  t.install();
}

}  // namespace a2pack::dataset
