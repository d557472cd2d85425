// metadata.db: one row per run in upstream's `runs` table (docs/dataset.md),
// through the system libsqlite3.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

struct sqlite3;
struct sqlite3_stmt;

namespace a2pack::dataset {

struct RunRow {
  int64_t id = 0;
  int64_t first_step_idx = 0;
  int64_t num_steps = 0;
  int64_t max_score = 0;
  int64_t highest_tile = 0;
  std::optional<std::string> engine;  // stored as '' when the run had none (as upstream)
  int64_t start_time = 0;
  double elapsed_s = 0;
};

// A value bound to a `?` of a filter.
struct SqlParam {
  enum Type { null, integer, real, text } type = null;
  int64_t i = 0;
  double d = 0;
  std::string s;
};

class Stmt;

// A connection. Errors name the database file and quote SQLite's message.
// Opened for writing (create, read_write), a symbolic link is refused
// (SQLITE_OPEN_NOFOLLOW).
class Db {
 public:
  enum class Mode { create, read_write, read_only };
  Db(const std::string& path, Mode mode);
  ~Db();
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;

  void exec(const std::string& sql);
  // Compile exactly one statement; text after it is an error.
  Stmt prepare(const std::string& sql);
  sqlite3* raw() const { return db_; }
  // Rows the last INSERT, UPDATE or DELETE changed.
  int64_t changes() const;
  const std::string& path() const { return path_; }
  [[noreturn]] void fail_sqlite(int rc, const std::string& what) const;

 private:
  // SQLite's message `msg` for `rc`, with the file it could not open named.
  std::string explain(int rc, std::string msg) const;

  sqlite3* db_ = nullptr;
  std::string path_;
};

class Stmt {
 public:
  Stmt(Db& db, sqlite3_stmt* s) : db_(&db), s_(s) {}
  ~Stmt();
  Stmt(Stmt&& o) noexcept : db_(o.db_), s_(o.s_) { o.s_ = nullptr; }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;

  void bind(int i, int64_t v);
  void bind(int i, double v);
  void bind(int i, const std::string& v);
  void bind_null(int i);
  void bind_blob(int i, const void* data, size_t len);
  void bind(int i, const SqlParam& p);
  int param_count() const;
  bool read_only() const;
  // Step once: true when a row is ready.
  bool step();
  void reset();
  int64_t col_int(int c) const;
  double col_double(int c) const;
  bool col_null(int c) const;
  std::string col_text(int c) const;
  // A BLOB (or any value) as its bytes; empty for NULL.
  std::string col_blob(int c) const;

 private:
  Db* db_;
  sqlite3_stmt* s_;
};

// Create the upstream schema (plus an index on engine) in an empty database.
void create_schema(Db& db);

// Check that a `runs` table with the upstream columns exists; errors name the
// file and the missing column.
void check_schema(Db& db);

// Insert runs inside the caller's transaction.
void insert_runs(Db& db, const std::vector<RunRow>& rows);

// The columns of `runs` a row of a query starts with, in the table's order
// from `first` on: id, first_step_idx, num_steps, max_score, highest_tile,
// engine, start_time, elapsed_s.
RunRow run_row_at(Stmt& q, int first = 0);

// Durable, single-file journaling: a rollback journal (deleted on commit)
// with full fsyncs, so a crash leaves either the old or the new table.
void set_durable(Db& db);

}  // namespace a2pack::dataset
