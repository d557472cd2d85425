#include "dataset/db_check.hpp"

#include <sqlite3.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "base/crc32c.hpp"
#include "base/error.hpp"

namespace a2pack::dataset {

namespace {

uint64_t mix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// a2pack_digest(v1, v2, ...): an aggregate summing a hash of each row's
// values, so the result does not depend on the order the rows are visited
// in (table order for the table, key order for an index).
void digest_step(sqlite3_context* ctx, int argc, sqlite3_value** argv) {
  auto* acc = static_cast<uint64_t*>(sqlite3_aggregate_context(ctx, sizeof(uint64_t)));
  if (!acc) {
    sqlite3_result_error_nomem(ctx);
    return;
  }
  uint64_t h = 0x243F6A8885A308D3ull;
  for (int i = 0; i < argc; ++i) {
    uint64_t v = 0, tag = 0;
    switch (sqlite3_value_type(argv[i])) {
      case SQLITE_INTEGER:
        v = static_cast<uint64_t>(sqlite3_value_int64(argv[i]));
        tag = 1;
        break;
      case SQLITE_FLOAT: {
        double d = sqlite3_value_double(argv[i]);
        std::memcpy(&v, &d, sizeof v);
        tag = 2;
        break;
      }
      case SQLITE_TEXT:
      case SQLITE_BLOB: {
        bool text = sqlite3_value_type(argv[i]) == SQLITE_TEXT;
        const void* p = text ? static_cast<const void*>(sqlite3_value_text(argv[i]))
                             : sqlite3_value_blob(argv[i]);
        auto n = static_cast<size_t>(sqlite3_value_bytes(argv[i]));
        v = (uint64_t{p ? crc32c::compute(p, n) : 0u} << 32) ^ n;
        tag = text ? 3 : 4;
        break;
      }
      default:
        tag = 5;  // NULL
    }
    h = mix64(h ^ mix64(v ^ (tag << 60) ^ static_cast<uint64_t>(i)));
  }
  *acc += h;
}

void digest_final(sqlite3_context* ctx) {
  auto* acc = static_cast<uint64_t*>(sqlite3_aggregate_context(ctx, 0));
  sqlite3_result_int64(ctx, acc ? static_cast<int64_t>(*acc) : 0);
}

void register_digest(Db& db) {
  int flags = SQLITE_UTF8 | SQLITE_DETERMINISTIC;
#ifdef SQLITE_DIRECTONLY
  flags |= SQLITE_DIRECTONLY;  // not callable from a schema's views or triggers
#endif
  int rc = sqlite3_create_function_v2(db.raw(), "a2pack_digest", -1, flags, nullptr, nullptr,
                                      digest_step, digest_final, nullptr);
  if (rc != SQLITE_OK) db.fail_sqlite(rc, "registering a2pack_digest");
}

std::string quote_id(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

int64_t pragma_int(Db& db, const char* sql) {
  Stmt s = db.prepare(sql);
  return s.step() ? s.col_int(0) : 0;
}

}  // namespace

void check_db_size(Db& db) {
  const int64_t page_size = pragma_int(db, "PRAGMA main.page_size");
  const int64_t pages = pragma_int(db, "PRAGMA main.page_count");
  std::string mode;
  {
    Stmt s = db.prepare("PRAGMA main.journal_mode");
    if (s.step()) mode = s.col_text(0);
  }
  struct stat st;
  if (::stat(db.path().c_str(), &st) != 0) fail_errno("stat", db.path(), errno);
  const auto size = static_cast<int64_t>(st.st_size);
  if (page_size <= 0) return;
  // SQLite writes whole pages, in every journal mode; in WAL mode the newest
  // pages may still be in the -wal file, so the main file may hold fewer.
  const bool short_file = mode != "wal" && size < pages * page_size;
  if (size % page_size != 0 || short_file)
    fail(A2PACK_E_CORRUPT,
         "{}: the file is {} bytes, but it should hold {} whole pages of {} bytes ({} bytes): it "
         "was cut short (an interrupted copy or a full disk), and its last page would read back "
         "partly zeroed, so filters could return wrong runs; restore metadata.db from a copy or "
         "rebuild the dataset",
         db.path(), size, pages, page_size, pages * page_size);
}

void check_db_indexes(Db& db, const char* table) {
  struct Index {
    std::string name;
    std::vector<std::string> cols;
  };
  std::vector<Index> indexes;
  {
    Stmt l = db.prepare("SELECT name FROM pragma_index_list(?1, 'main') WHERE partial = 0");
    l.bind(1, std::string(table));
    while (l.step()) indexes.push_back({l.col_text(0), {}});
  }
  std::vector<Index> plain;
  for (auto& ix : indexes) {
    Stmt c = db.prepare("SELECT cid, name FROM pragma_index_info(?1, 'main') ORDER BY seqno");
    c.bind(1, ix.name);
    bool ok = true;
    while (c.step()) {
      if (c.col_int(0) < 0 || c.col_null(1)) ok = false;  // an expression, not a column
      else ix.cols.push_back(c.col_text(1));
    }
    if (ok && !ix.cols.empty()) plain.push_back(std::move(ix));
  }
  if (plain.empty()) return;
  register_digest(db);
  auto digest_of = [](const Index& ix) {
    std::string e = "a2pack_digest(rowid";
    for (const auto& c : ix.cols) e += ", " + quote_id(c);
    return e + ")";
  };
  std::string table_sql = "SELECT ";
  for (size_t i = 0; i < plain.size(); ++i) table_sql += (i ? ", " : "") + digest_of(plain[i]);
  table_sql += " FROM main." + quote_id(table) + " NOT INDEXED";
  std::vector<int64_t> want(plain.size());
  {
    Stmt t = db.prepare(table_sql);
    if (t.step())
      for (size_t i = 0; i < plain.size(); ++i) want[i] = t.col_int(static_cast<int>(i));
  }
  for (size_t i = 0; i < plain.size(); ++i) {
    const Index& ix = plain[i];
    std::string sql =
        "SELECT " + digest_of(ix) + " FROM main." + quote_id(table) + " INDEXED BY " +
        quote_id(ix.name);
    std::optional<Stmt> s;
    try {
      s.emplace(db.prepare(sql));
    } catch (const Error& e) {
      // SQLite cannot scan this index on its own (an unusual schema another
      // tool wrote): nothing to compare it with here; verify --full does.
      if (e.status() == A2PACK_E_INVALID_ARGUMENT) continue;
      throw;
    }
    int64_t got = s->step() ? s->col_int(0) : 0;
    if (got != want[i])
      fail(A2PACK_E_CORRUPT,
           "{}: index {} does not hold what table `{}` holds (the file is damaged), so {} "
           "would {}; `a2pack dataset verify --full` lists the damage; restore metadata.db from "
           "a copy or rebuild the dataset",
           db.path(), ix.name, table,
           std::strcmp(table, "runs") == 0 ? "filters that use it" : "lookups of run digests",
           std::strcmp(table, "runs") == 0 ? "return wrong runs" : "miss runs already present");
  }
}

}  // namespace a2pack::dataset
