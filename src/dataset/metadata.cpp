#include "dataset/metadata.hpp"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <set>

#include "base/error.hpp"
#include "base/file_io.hpp"

namespace a2pack::dataset {

// ---------------------------------------------------------------- Db
Db::Db(const std::string& path, Mode mode) : path_(path) {
  int flags = SQLITE_OPEN_NOMUTEX;
  if (mode == Mode::create) flags |= SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
  else if (mode == Mode::read_write) flags |= SQLITE_OPEN_READWRITE;
  else flags |= SQLITE_OPEN_READONLY;
  // A file that is written is never reached through a link: SQLite would
  // write into (and create its journal beside) the file it points at, which
  // may be outside the dataset.
  if (mode != Mode::read_only) {
    flags |= SQLITE_OPEN_NOFOLLOW;
    struct stat st;
    if (::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode))
      fail(A2PACK_E_INVALID_ARGUMENT,
           "{}: is a symbolic link; refusing to open it for writing (a2pack writes a dataset's "
           "metadata.db only as a file in the dataset folder)",
           path);
  }
  // SQLite opens a FIFO or a device as it would a file and then fails with
  // "disk I/O error"; say what the path is instead (open_for_reading refuses
  // any kind but a regular file, naming it, without blocking).
  if (int fd = open_for_reading(path); fd >= 0) ::close(fd);
  int rc = sqlite3_open_v2(path.c_str(), &db_, flags, nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
    sqlite3_close_v2(db_);
    db_ = nullptr;
    fail(rc == SQLITE_CANTOPEN ? A2PACK_E_NOT_FOUND : A2PACK_E_IO, "{}: cannot open SQLite database: {}",
         path, msg);
  }
  sqlite3_extended_result_codes(db_, 1);
  sqlite3_busy_timeout(db_, 10000);
}

Db::~Db() {
  if (db_) sqlite3_close_v2(db_);
}

std::string Db::explain(int rc, std::string msg) const {
  // Once the database is open, SQLite's "unable to open database file" is
  // about a file it makes beside it for a write: the rollback journal (the
  // write-ahead log in WAL mode), typically because the folder is not
  // writable. Say which file and what the system said.
  if ((rc & 0xFF) != SQLITE_CANTOPEN || !db_) return msg;
  struct stat st;
  const bool wal = ::stat((path_ + "-wal").c_str(), &st) == 0;
  // The folder is asked first (SQLite's own errno is often that of a later
  // call: ENOENT for a journal it then looked for).
  const auto slash = path_.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : path_.substr(0, slash ? slash : 1);
  int err = ::faccessat(AT_FDCWD, dir.c_str(), W_OK | X_OK, AT_EACCESS) != 0 ? errno : 0;
  if (!err) err = sqlite3_system_errno(db_);
  return fmt::format("{} ({}{}: SQLite cannot create it{}{}; writing {} needs a folder this "
                     "process may create files in)",
                     msg, path_, wal ? "-wal" : "-journal", err ? ": " : "",
                     err ? std::strerror(err) : "", path_);
}

void Db::fail_sqlite(int rc, const std::string& what) const {
  a2pack_status st = A2PACK_E_IO;
  int prim = rc & 0xFF;
  if (prim == SQLITE_CORRUPT || prim == SQLITE_NOTADB) st = A2PACK_E_CORRUPT;
  else if (prim == SQLITE_ERROR || prim == SQLITE_RANGE || prim == SQLITE_MISMATCH)
    st = A2PACK_E_INVALID_ARGUMENT;
  else if (prim == SQLITE_NOMEM) st = A2PACK_E_NO_MEMORY;
  else if (prim == SQLITE_CANTOPEN) st = A2PACK_E_IO;  // the database itself is open
  else if (prim == SQLITE_INTERRUPT) st = A2PACK_E_INTERRUPTED;
  fail(st, "{}: {}: {}", path_, what,
       explain(rc, db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc)));
}

void Db::exec(const std::string& sql) {
  char* err = nullptr;
  int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err);
  if (rc != SQLITE_OK) {
    std::string msg = err ? err : sqlite3_errstr(rc);
    sqlite3_free(err);
    a2pack_status st = (rc & 0xFF) == SQLITE_CORRUPT || (rc & 0xFF) == SQLITE_NOTADB
                           ? A2PACK_E_CORRUPT
                           : A2PACK_E_IO;
    fail(st, "{}: SQL failed ({}): {}", path_, sql.substr(0, 80), explain(rc, msg));
  }
}

Stmt Db::prepare(const std::string& sql) {
  sqlite3_stmt* s = nullptr;
  const char* tail = nullptr;
  int rc = sqlite3_prepare_v2(db_, sql.c_str(), static_cast<int>(sql.size()), &s, &tail);
  if (rc != SQLITE_OK) fail_sqlite(rc, "SQL error in \"" + sql + "\"");
  if (!s) fail(A2PACK_E_INVALID_ARGUMENT, "{}: empty SQL statement", path_);
  Stmt st(*this, s);
  for (const char* p = tail; p && *p; ++p)
    if (!std::isspace(static_cast<unsigned char>(*p)) && *p != ';')
      fail(A2PACK_E_INVALID_ARGUMENT, "{}: SQL \"{}\" has text after its first statement: \"{}\"",
           path_, sql, p);
  return st;
}

int64_t Db::changes() const { return sqlite3_changes(db_); }

// ---------------------------------------------------------------- Stmt
Stmt::~Stmt() {
  if (s_) sqlite3_finalize(s_);
}
void Stmt::bind(int i, int64_t v) {
  int rc = sqlite3_bind_int64(s_, i, v);
  if (rc != SQLITE_OK) db_->fail_sqlite(rc, fmt::format("binding parameter {}", i));
}
void Stmt::bind(int i, double v) {
  int rc = sqlite3_bind_double(s_, i, v);
  if (rc != SQLITE_OK) db_->fail_sqlite(rc, fmt::format("binding parameter {}", i));
}
void Stmt::bind(int i, const std::string& v) {
  int rc = sqlite3_bind_text(s_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
  if (rc != SQLITE_OK) db_->fail_sqlite(rc, fmt::format("binding parameter {}", i));
}
void Stmt::bind_null(int i) {
  int rc = sqlite3_bind_null(s_, i);
  if (rc != SQLITE_OK) db_->fail_sqlite(rc, fmt::format("binding parameter {}", i));
}
void Stmt::bind_blob(int i, const void* data, size_t len) {
  int rc = sqlite3_bind_blob64(s_, i, data, len, SQLITE_TRANSIENT);
  if (rc != SQLITE_OK) db_->fail_sqlite(rc, fmt::format("binding parameter {}", i));
}
void Stmt::bind(int i, const SqlParam& p) {
  switch (p.type) {
    case SqlParam::null: bind_null(i); break;
    case SqlParam::integer: bind(i, p.i); break;
    case SqlParam::real: bind(i, p.d); break;
    case SqlParam::text: bind(i, p.s); break;
  }
}
int Stmt::param_count() const { return sqlite3_bind_parameter_count(s_); }
bool Stmt::read_only() const { return sqlite3_stmt_readonly(s_) != 0; }
bool Stmt::step() {
  int rc = sqlite3_step(s_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  db_->fail_sqlite(rc, fmt::format("running \"{}\"", sqlite3_sql(s_)));
}
void Stmt::reset() {
  sqlite3_reset(s_);
  sqlite3_clear_bindings(s_);
}
int64_t Stmt::col_int(int c) const { return sqlite3_column_int64(s_, c); }
double Stmt::col_double(int c) const { return sqlite3_column_double(s_, c); }
bool Stmt::col_null(int c) const { return sqlite3_column_type(s_, c) == SQLITE_NULL; }
std::string Stmt::col_blob(int c) const {
  const void* p = sqlite3_column_blob(s_, c);
  int n = sqlite3_column_bytes(s_, c);
  return p ? std::string(static_cast<const char*>(p), static_cast<size_t>(n)) : std::string();
}
std::string Stmt::col_text(int c) const {
  const unsigned char* t = sqlite3_column_text(s_, c);
  int n = sqlite3_column_bytes(s_, c);
  return t ? std::string(reinterpret_cast<const char*>(t), static_cast<size_t>(n)) : std::string();
}

// ---------------------------------------------------------------- schema
void create_schema(Db& db) {
  db.exec(
      "CREATE TABLE runs (id INTEGER PRIMARY KEY, first_step_idx INTEGER NOT NULL, "
      "num_steps INTEGER NOT NULL, max_score INTEGER NOT NULL, highest_tile INTEGER NOT NULL, "
      "engine TEXT, start_time INTEGER, elapsed_s REAL);"
      "CREATE INDEX idx_runs_score ON runs(max_score);"
      "CREATE INDEX idx_runs_len ON runs(num_steps);"
      "CREATE INDEX idx_runs_engine ON runs(engine);");
}

void check_schema(Db& db) {
  Stmt s = db.prepare("SELECT name FROM pragma_table_info('runs')");
  std::set<std::string> cols;
  while (s.step()) cols.insert(s.col_text(0));
  if (cols.empty()) fail(A2PACK_E_CORRUPT, "{}: no `runs` table", db.path());
  for (const char* c : {"id", "first_step_idx", "num_steps", "max_score", "highest_tile", "engine",
                        "start_time", "elapsed_s"})
    if (!cols.count(c))
      fail(A2PACK_E_CORRUPT, "{}: table `runs` has no column `{}`", db.path(), c);
}

void insert_runs(Db& db, const std::vector<RunRow>& rows) {
  Stmt s = db.prepare(
      "INSERT INTO runs (id, first_step_idx, num_steps, max_score, highest_tile, engine, "
      "start_time, elapsed_s) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)");
  for (const auto& r : rows) {
    s.bind(1, r.id);
    s.bind(2, r.first_step_idx);
    s.bind(3, r.num_steps);
    s.bind(4, r.max_score);
    s.bind(5, r.highest_tile);
    // Upstream stores a run without an engine as '' (unwrap_or_default), so
    // `WHERE engine = ''` selects the same runs in datasets of both tools.
    s.bind(6, r.engine ? *r.engine : std::string());
    s.bind(7, r.start_time);
    s.bind(8, r.elapsed_s);
    s.step();
    s.reset();
  }
}

void set_durable(Db& db) { db.exec("PRAGMA journal_mode=DELETE; PRAGMA synchronous=FULL;"); }

RunRow run_row_at(Stmt& q, int first) {
  RunRow r;
  r.id = q.col_int(first);
  r.first_step_idx = q.col_int(first + 1);
  r.num_steps = q.col_int(first + 2);
  r.max_score = q.col_int(first + 3);
  r.highest_tile = q.col_int(first + 4);
  if (!q.col_null(first + 5)) r.engine = q.col_text(first + 5);
  r.start_time = q.col_int(first + 6);
  r.elapsed_s = q.col_double(first + 7);
  return r;
}

}  // namespace a2pack::dataset
