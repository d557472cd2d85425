#include "dataset/manifest.hpp"

#include <fcntl.h>
#include <sys/stat.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <ctime>

#include <nlohmann/json.hpp>

#include "base/error.hpp"
#include "base/file_io.hpp"
#include "dataset/npy.hpp"

namespace a2pack::dataset {

using nlohmann::json;

std::string utc_now() {
  std::time_t t = std::time(nullptr);
  // Reproducible builds (reproducible-builds.org/specs/source-date-epoch):
  // with SOURCE_DATE_EPOCH set, the time written is that one, so two builds
  // of the same runs (the CLI's and a2pack.beam's) are identical files.
  if (const char* sde = std::getenv("SOURCE_DATE_EPOCH"); sde && *sde) {
    char* end = nullptr;
    errno = 0;
    long long v = std::strtoll(sde, &end, 10);
    if (*end != '\0' || errno != 0 || v < 0 || !std::isdigit(static_cast<unsigned char>(*sde)))
      fail(A2PACK_E_INVALID_ARGUMENT,
           "SOURCE_DATE_EPOCH=\"{}\": not a count of seconds since 1970 (unset it, or give an "
           "integer)",
           std::string(sde));
    t = static_cast<std::time_t>(v);
  }
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string printable(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (unsigned char c : s) {
    if (c >= 0x20 && c < 0x7F) out += static_cast<char>(c);
    else out += fmt::format("\\x{:02x}", c);
  }
  return out;
}

std::string json_error_text(const std::exception& e) {
  // nlohmann quotes the token it stopped in ("; last read: '...'"), which
  // may be any length of the file's text: the file is named and the offset
  // given instead.
  std::string w = e.what();
  if (auto at = w.find("; last read: "); at != std::string::npos) w.erase(at);
  if (auto at = w.find("] "); w.rfind("[json.exception.", 0) == 0 && at != std::string::npos)
    w.erase(0, at + 2);
  return printable(w);
}

std::string json_parse_error(const std::exception& e, size_t byte, const std::string& text,
                             const std::string& path) {
  // byte: the 1-based position of the byte the parser stopped at (an
  // invalid UTF-8 byte inside a string, say). That one byte is shown as
  // \xNN, no more of the text.
  const size_t at = byte ? byte - 1 : 0;
  std::string msg = fmt::format("{}: not valid JSON at byte offset {}: {}", path, at,
                                json_error_text(e));
  if (at < text.size())
    msg += fmt::format(" (byte \\x{:02x})", static_cast<unsigned char>(text[at]));
  return msg;
}

std::string read_own_file(const std::string& path, uint64_t max_bytes, const char* what) {
  // Not through a link: a dataset's manifest and journal are files in its
  // folder, and one pointing elsewhere would have its text parsed (and
  // quoted in errors) as if it were the dataset's.
  ReadFd f(path, O_NOFOLLOW);
  const uint64_t n = f.size();
  if (n > max_bytes)
    fail(A2PACK_E_CORRUPT, "{}: {} bytes is too large for {}", path, n, what);
  std::string text(static_cast<size_t>(n), '\0');
  if (n) f.pread_exact(text.data(), text.size(), 0);
  return text;
}

std::string to_json(const Manifest& m) {
  json j;
  j["format"] = kFormatName;
  j["format_version"] = m.format_version;
  j["rows"] = m.rows;
  j["runs"] = m.runs;
  j["next_run_id"] = m.next_run_id;
  j["steps_crc32c"] = m.steps_crc32c;
  j["row_bytes"] = 32;
  j["dtype"] = kStepDescr;
  j["created"] = m.created_utc;
  j["updated"] = m.updated_utc;
  j["generator"] = m.generator;
  json s = json::array();
  for (const auto& r : m.sources) {
    json e = {{"input", r.input}, {"kind", r.kind}, {"runs", r.runs}, {"rows", r.rows},
              {"first_run_id", r.first_run_id}, {"added", r.added_utc}};
    if (r.local_run_ids) e["row_run_ids"] = "local";
    s.push_back(std::move(e));
  }
  j["sources"] = s;
  if (m.sharded) {
    j["layout"] = "sharded";
    j["shard_rows"] = m.shard_rows;
    json sh = json::array();
    for (const auto& r : m.shards)
      sh.push_back({{"file", r.file}, {"first_row", r.first_row}, {"rows", r.rows},
                    {"runs", r.runs}, {"crc32c", r.crc32c}});
    j["shards"] = std::move(sh);
  }
  if (m.has_metadata_stamp)
    j["metadata_db"] = {{"bytes", m.metadata_bytes}, {"crc32c", m.metadata_crc32c}};
  if (m.run_digests) j["run_digests"] = kRunDigestKind;
  // A source's input is the path given, which need not be UTF-8: such bytes
  // are written as U+FFFD (the path is a record, never read back as a path).
  return j.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

namespace {

template <typename T>
T get(const json& j, const char* key, const std::string& path) {
  auto it = j.find(key);
  if (it == j.end()) fail(A2PACK_E_CORRUPT, "{}: missing key \"{}\"", path, key);
  try {
    if constexpr (std::is_unsigned_v<T>) {
      if (!it->is_number_unsigned())
        fail(A2PACK_E_CORRUPT, "{}: \"{}\" must be a non-negative integer, found {}", path, key,
             it->is_number() ? "a negative or fractional number" : it->type_name());
      uint64_t v = it->get<uint64_t>();
      if (v > std::numeric_limits<T>::max())
        fail(A2PACK_E_CORRUPT, "{}: \"{}\" = {} is out of range", path, key, v);
      return static_cast<T>(v);
    } else {
      return it->get<T>();
    }
  } catch (const json::exception& e) {
    fail(A2PACK_E_CORRUPT, "{}: \"{}\" has the wrong type: {}", path, key, json_error_text(e));
  }
}

std::string get_str(const json& j, const char* key, const std::string& path) {
  auto it = j.find(key);
  if (it == j.end()) return "";
  if (!it->is_string()) fail(A2PACK_E_CORRUPT, "{}: \"{}\" must be a string", path, key);
  return it->get<std::string>();
}

// The shard list: named like a2pack names them (nothing that leaves the
// folder), contiguous from row 0, adding up to the manifest's rows.
void parse_shards(const json& j, const std::string& path, Manifest& m) {
  std::string layout = get_str(j, "layout", path);
  if (layout.empty() || layout == "single") return;
  if (layout != "sharded")
    fail(A2PACK_E_UNSUPPORTED, "{}: \"layout\" is \"{}\", expected \"sharded\" or \"single\"",
         path, printable(layout));
  m.sharded = true;
  m.shard_rows = get<uint64_t>(j, "shard_rows", path);
  auto it = j.find("shards");
  if (it == j.end() || !it->is_array())
    fail(A2PACK_E_CORRUPT, "{}: a sharded manifest needs a \"shards\" array", path);
  uint64_t row = 0, runs = 0;
  for (const auto& e : *it) {
    if (!e.is_object()) fail(A2PACK_E_CORRUPT, "{}: a \"shards\" entry is not an object", path);
    ShardRecord r;
    r.file = get<std::string>(e, "file", path);
    r.first_row = get<uint64_t>(e, "first_row", path);
    r.rows = get<uint64_t>(e, "rows", path);
    r.runs = get<uint64_t>(e, "runs", path);
    r.crc32c = get<uint32_t>(e, "crc32c", path);
    const size_t i = m.shards.size();
    if (r.file != shard_file_name(i))
      fail(A2PACK_E_CORRUPT, "{}: shard {} is named \"{}\", expected \"{}\"", path, i,
           printable(r.file), shard_file_name(i));
    if (r.first_row != row)
      fail(A2PACK_E_CORRUPT, "{}: shard {} ({}) starts at row {}, expected {}", path, i, r.file,
           r.first_row, row);
    if (r.rows > m.rows - row)
      fail(A2PACK_E_CORRUPT, "{}: shard {} ({}) ends past the manifest's {} rows", path, i,
           r.file, m.rows);
    row += r.rows;
    runs += r.runs;
    m.shards.push_back(std::move(r));
  }
  if (row != m.rows || runs != m.runs)
    fail(A2PACK_E_CORRUPT,
         "{}: the shards hold {} rows of {} runs, but the manifest records {} rows of {} runs",
         path, row, runs, m.rows, m.runs);
}

}  // namespace

std::string shard_file_name(size_t i) { return fmt::format("steps-{:05d}.npy", i); }

std::optional<size_t> shard_index(const std::string& name) {
  if (name.size() != 15 || name.compare(0, 6, "steps-") != 0 || name.compare(11, 4, ".npy") != 0)
    return std::nullopt;
  size_t i = 0;
  for (size_t c = 6; c < 11; ++c) {
    if (name[c] < '0' || name[c] > '9') return std::nullopt;
    i = i * 10 + static_cast<size_t>(name[c] - '0');
  }
  return i;
}

Manifest parse_manifest(const std::string& text, const std::string& path) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::parse_error& e) {
    throw Error(A2PACK_E_CORRUPT, json_parse_error(e, e.byte, text, path));
  } catch (const json::exception& e) {
    fail(A2PACK_E_CORRUPT, "{}: not valid JSON: {}", path, json_error_text(e));
  }
  if (!j.is_object()) fail(A2PACK_E_CORRUPT, "{}: not a JSON object", path);
  std::string format = get_str(j, "format", path);
  if (format != kFormatName)
    fail(A2PACK_E_CORRUPT, "{}: \"format\" is \"{}\", expected \"{}\"", path,
         printable(format.substr(0, 40)) + (format.size() > 40 ? "..." : ""), kFormatName);
  Manifest m;
  m.format_version = get<uint32_t>(j, "format_version", path);
  if (m.format_version == 0 || m.format_version > kFormatVersion)
    fail(A2PACK_E_UNSUPPORTED, "{}: format_version {} is not supported (this build reads 1..{})",
         path, m.format_version, kFormatVersion);
  m.rows = get<uint64_t>(j, "rows", path);
  m.runs = get<uint64_t>(j, "runs", path);
  m.next_run_id = get<uint64_t>(j, "next_run_id", path);
  m.steps_crc32c = get<uint32_t>(j, "steps_crc32c", path);
  if (get<uint32_t>(j, "row_bytes", path) != 32)
    fail(A2PACK_E_UNSUPPORTED, "{}: row_bytes must be 32", path);
  if (m.runs > m.next_run_id)
    fail(A2PACK_E_CORRUPT, "{}: runs ({}) exceeds next_run_id ({})", path, m.runs,
         m.next_run_id);
  m.created_utc = get_str(j, "created", path);
  m.updated_utc = get_str(j, "updated", path);
  m.generator = get_str(j, "generator", path);
  if (auto it = j.find("metadata_db"); it != j.end()) {
    if (!it->is_object()) fail(A2PACK_E_CORRUPT, "{}: \"metadata_db\" must be an object", path);
    m.metadata_bytes = get<uint64_t>(*it, "bytes", path);
    m.metadata_crc32c = get<uint32_t>(*it, "crc32c", path);
    m.has_metadata_stamp = true;
  }
  // Another value (a later layout of the digests) is read as "not known to
  // be complete": an append then records this build's digests where missing.
  if (auto it = j.find("run_digests"); it != j.end())
    m.run_digests = it->is_string() && it->get<std::string>() == kRunDigestKind;
  parse_shards(j, path, m);
  if (m.sharded != (m.format_version == kShardedFormatVersion))
    fail(A2PACK_E_CORRUPT, "{}: format_version {} with {} layout (sharded datasets are version {})",
         path, m.format_version, m.sharded ? "a sharded" : "a single-file", kShardedFormatVersion);
  if (auto it = j.find("sources"); it != j.end()) {
    if (!it->is_array()) fail(A2PACK_E_CORRUPT, "{}: \"sources\" must be an array", path);
    for (const auto& s : *it) {
      if (!s.is_object()) fail(A2PACK_E_CORRUPT, "{}: a \"sources\" entry is not an object", path);
      SourceRecord r;
      r.input = get_str(s, "input", path);
      r.kind = get_str(s, "kind", path);
      r.runs = get<uint64_t>(s, "runs", path);
      r.rows = get<uint64_t>(s, "rows", path);
      r.first_run_id = get<uint64_t>(s, "first_run_id", path);
      r.added_utc = get_str(s, "added", path);
      std::string ids = get_str(s, "row_run_ids", path);
      if (!ids.empty() && ids != "local" && ids != "global")
        fail(A2PACK_E_CORRUPT, "{}: \"row_run_ids\" is \"{}\", expected \"local\" or \"global\"",
             path, ids);
      r.local_run_ids = ids == "local";
      m.sources.push_back(std::move(r));
    }
  }
  return m;
}

std::optional<Manifest> read_manifest(const std::string& dir) {
  std::string path = dir + "/manifest.json";
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return std::nullopt;
    fail_errno("stat", path, errno);
  }
  if (S_ISLNK(st.st_mode))
    fail(A2PACK_E_CORRUPT,
         "{}: is a symbolic link; a dataset's manifest is a file in its folder, and a2pack does "
         "not read one that points elsewhere (replace the link with a copy of its file)",
         path);
  return parse_manifest(read_own_file(path, 16 << 20, "a manifest"), path);
}

}  // namespace a2pack::dataset
