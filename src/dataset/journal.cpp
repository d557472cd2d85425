#include "dataset/journal.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include <nlohmann/json.hpp>

#include "base/error.hpp"
#include "base/file_io.hpp"
#include "dataset/fsutil.hpp"
#include "dataset/manifest.hpp"

namespace a2pack::dataset {

using nlohmann::json;

Journal Journal::starting_from(const Manifest& m, uint64_t new_runs) {
  Journal j;
  j.pid = ::getpid();
  j.started_utc = utc_now();
  j.old_rows = m.rows;
  j.old_runs = m.runs;
  j.old_next_run_id = m.next_run_id;
  j.old_sources = m.sources.size();
  j.old_crc = m.steps_crc32c;
  j.first_new_id = m.next_run_id;
  j.end_new_id = m.next_run_id + new_runs;
  return j;
}

bool Journal::describes_uncommitted(const Manifest& m) const {
  return damage.empty() && m.rows == old_rows && m.runs == old_runs && m.next_run_id == old_next_run_id &&
         m.steps_crc32c == old_crc && m.sources.size() == old_sources;
}

bool Journal::owns_steps(const Manifest& m, int fd) const {
  struct stat st;
  if (::fstat(fd, &st) != 0) return false;
  return describes_uncommitted(m) && static_cast<uint64_t>(st.st_dev) == steps_dev &&
         static_cast<uint64_t>(st.st_ino) == steps_ino;
}

void write_journal(const std::string& dir, const Journal& j) {
  json o;
  o["format"] = "a2pack-append-journal";
  o["pid"] = j.pid;
  o["started"] = j.started_utc;
  o["old"] = {{"rows", j.old_rows},
              {"runs", j.old_runs},
              {"next_run_id", j.old_next_run_id},
              {"sources", j.old_sources},
              {"steps_crc32c", j.old_crc}};
  o["new_run_ids"] = {j.first_new_id, j.end_new_id};
  o["new_steps"] = {{"dev", j.steps_dev}, {"ino", j.steps_ino}};
  o["mode"] = j.sharded ? "new-shards" : j.in_place ? "in-place" : "new-file";
  if (j.sharded) o["new_shards"] = {j.first_new_shard, j.end_new_shard};
  std::string text = o.dump(2) + "\n";
  TempFile t(dir + "/" + kJournalName);
  t.write(text.data(), text.size());
  t.sync();
  t.install();
}

namespace {

// The journal in `text` (the file at `path`); CORRUPT naming the file and
// what is wrong when it is not one a2pack wrote.
Journal parse_journal(const std::string& text, const std::string& path) {
  json o;
  try {
    o = json::parse(text);
  } catch (const json::parse_error& e) {
    throw Error(A2PACK_E_CORRUPT, json_parse_error(e, e.byte, text, path));
  }
  try {
    if (!o.is_object() || o.value("format", "") != "a2pack-append-journal")
      fail(A2PACK_E_CORRUPT, "{}: not an a2pack append journal", path);
    Journal j;
    j.pid = o.at("pid").get<long>();
    j.started_utc = o.value("started", "");
    const json& old = o.at("old");
    j.old_rows = old.at("rows").get<uint64_t>();
    j.old_runs = old.at("runs").get<uint64_t>();
    j.old_next_run_id = old.at("next_run_id").get<uint64_t>();
    j.old_sources = old.at("sources").get<uint64_t>();
    j.old_crc = old.at("steps_crc32c").get<uint32_t>();
    const json& ids = o.at("new_run_ids");
    j.first_new_id = ids.at(0).get<uint64_t>();
    j.end_new_id = ids.at(1).get<uint64_t>();
    if (j.end_new_id < j.first_new_id || j.first_new_id != j.old_next_run_id)
      fail(A2PACK_E_CORRUPT, "{}: new_run_ids [{}, {}) do not follow next_run_id {}", path,
           j.first_new_id, j.end_new_id, j.old_next_run_id);
    j.steps_dev = o.at("new_steps").at("dev").get<uint64_t>();
    j.steps_ino = o.at("new_steps").at("ino").get<uint64_t>();
    const std::string mode = o.value("mode", "new-file");
    if (mode == "new-shards") {
      j.sharded = true;
      j.first_new_shard = o.at("new_shards").at(0).get<uint64_t>();
      j.end_new_shard = o.at("new_shards").at(1).get<uint64_t>();
      if (j.end_new_shard < j.first_new_shard || j.end_new_shard - j.first_new_shard > 99999)
        fail(A2PACK_E_CORRUPT, "{}: new_shards [{}, {}) is not a range of shard indexes", path,
             j.first_new_shard, j.end_new_shard);
      return j;
    }
    if (mode != "in-place" && mode != "new-file")
      fail(A2PACK_E_CORRUPT, "{}: unknown append mode '{}'", path, printable(mode.substr(0, 40)));
    j.in_place = mode == "in-place";
    return j;
  } catch (const json::exception& e) {
    fail(A2PACK_E_CORRUPT, "{}: damaged append journal: {}", path, json_error_text(e));
  }
}

}  // namespace

std::optional<Journal> read_journal(const std::string& dir) {
  const std::string path = dir + "/" + kJournalName;
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return std::nullopt;
    fail_errno("stat", path, errno);
  }
  try {
    if (S_ISLNK(st.st_mode))
      fail(A2PACK_E_CORRUPT, "{}: is a symbolic link, not the file an append of a2pack writes",
           path);
    return parse_journal(read_own_file(path, 1 << 20, "a journal"), path);
  } catch (const Error& e) {
    if (e.status() != A2PACK_E_CORRUPT && e.status() != A2PACK_E_INVALID_ARGUMENT) throw;
    // Evidence of nothing: it names no runs, rows or shards as an
    // interrupted append's (describes_uncommitted() is false).
    Journal damaged;
    damaged.damage = e.what();
    return damaged;
  }
}

void remove_journal(const std::string& dir) {
  const std::string path = dir + "/" + kJournalName;
  if (::unlink(path.c_str()) != 0) {
    if (errno == ENOENT) return;
    fail_errno("remove", path, errno);
  }
  fsync_dir(dir);
}

}  // namespace a2pack::dataset
