// Content digests of a dataset's runs (docs/dataset.md, "Run digests"): what
// lets a writer refuse runs the dataset already holds, and `verify` report
// runs that are there twice.
//
// A run's digest is the SHA-256 of its canonical content: the game, the same
// bytes whichever file it came from (.a2run2 v1 or v2, a packfile entry, a
// bag record, rows computed by a Beam worker), because it is taken from
// what the dataset itself holds: the run's metadata.db row (but its id and
// first_step_idx, which say where it was put) and, of each of its rows of
// steps.npy, the board and the move. ev_legal and ev_values are left out:
// they annotate the game (branch values, which a v1 file cannot hold and a
// deeper search may compute again) and the same positions and moves
// annotated twice still weigh double in training; run_id and step_index
// only number the rows. So an existing dataset's digests can be computed
// from its own files, with no run file in sight. In order, little-endian:
//
//   "a2pack run digest 1\n"              20 bytes, the version of this layout
//   num_steps, max_score, highest_tile,  5 x 8 bytes: u64, i64, i64, i64, and
//   start_time, elapsed_s                the IEEE-754 bits of the f64
//   len(engine) u32, engine UTF-8        an empty or NULL engine: length 0
//   each row's bytes 0..8                board u64, move u8: 9 bytes a step
//
// Why SHA-256, from OpenSSL's libcrypto: the library already carries it for
// object storage (loaded on first use, storage/crypto.hpp), it runs at about
// 2 GB/s on one core with the SHA extensions of current x86 and ARM CPUs
// (the rows of a build are hashed by its decode threads while they are in
// cache), and any language's standard library computes it, so a user can
// check a digest (Python: hashlib.sha256) without a2pack. Its 256 bits make
// an accidental collision between two different games a non-event.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "dataset/manifest.hpp"
#include "dataset/metadata.hpp"
#include "storage/crypto.hpp"

namespace a2pack::dataset {

using RunDigest = std::array<uint8_t, 32>;

// Hashes runs one after another (one per thread).
class RunHasher {
 public:
  // `r` is the run's metadata.db row (num_steps and the metadata; id and
  // first_step_idx are not hashed); `rows` its r.num_steps rows of 32 bytes.
  RunDigest digest(const RunRow& r, const uint8_t* rows);

 private:
  storage::Sha256 sha_;
  std::vector<uint8_t> buf_;
};

std::string to_hex(const RunDigest& d);

// metadata.db's table of digests (docs/dataset.md): one row per run that has
// one, beside upstream's `runs` table, which stays as upstream writes it.
//   run_digests(id INTEGER PRIMARY KEY, sha256 BLOB NOT NULL, duplicate_of INTEGER)
// duplicate_of: set for a run written with allow_duplicates that repeats the
// earlier run of that id (NULL otherwise), so that `verify` knows the copy
// was wanted.
bool has_digest_table(Db& db);
void create_digest_table(Db& db);  // with its index; IF NOT EXISTS
// Inside the caller's transaction: runs[i].id gets digests[i] and, when
// dup_of[i] >= 0, duplicate_of (dup_of may be empty: none).
void insert_digests(Db& db, const std::vector<RunRow>& runs, const std::vector<RunDigest>& digests,
                    const std::vector<int64_t>& dup_of);

// The lowest id of a run in `runs` whose stored digest is `d`.
class DigestLookup {
 public:
  explicit DigestLookup(Db& db);
  std::optional<int64_t> find(const RunDigest& d);

 private:
  std::optional<Stmt> q_;
};

// The runs a writer is given, checked for runs the dataset already holds
// (`existing`, may be null: a build) and for repeats among themselves, in
// the order they will be written. Without `allow` the first duplicate
// makes refusing() true: the writer then writes nothing more, goes on
// decoding to count them all, and throws with refusal().
class DuplicateCheck {
 public:
  // label(i): names input run i in messages (a file, a packfile entry).
  DuplicateCheck(DigestLookup* existing, bool allow, std::function<std::string(size_t)> label)
      : existing_(existing), allow_(allow), label_(std::move(label)) {}

  // Input run `index`, about to get run id `id`: the id of the run it
  // repeats (-1 for none), which becomes its duplicate_of when duplicates
  // are allowed.
  int64_t add(const RunDigest& d, int64_t id, size_t index);
  bool refusing() const { return !allow_ && duplicates() != 0; }
  uint64_t duplicates() const { return in_dataset_ + repeated_; }
  // What a refused write says: how many, which (the first few), that nothing
  // was changed, and how to write them anyway. `where`: the dataset folder;
  // `runs`: how many runs were given; `append`: an append (else a build).
  std::string refusal(const std::string& where, uint64_t runs, bool append) const;

 private:
  struct Key {
    uint64_t a, b;  // the digest's first 128 bits: ample to tell runs apart
    bool operator==(const Key& o) const { return a == o.a && b == o.b; }
  };
  struct KeyHash {
    size_t operator()(const Key& k) const noexcept { return static_cast<size_t>(k.a); }
  };
  struct Found {
    size_t index;     // the input run
    int64_t same_as;  // the run it repeats: a dataset run's id, or
    size_t same_as_index;  // the earlier input run's index (when !in_dataset)
    bool in_dataset;
  };

  DigestLookup* existing_;
  bool allow_;
  std::function<std::string(size_t)> label_;
  std::unordered_map<Key, std::pair<int64_t, size_t>, KeyHash> seen_;  // id, input index
  uint64_t in_dataset_ = 0, repeated_ = 0;
  std::vector<Found> found_;  // the first few
};

// Every committed run of the dataset in `dir` (manifest `m`, after recovery,
// under the caller's exclusive lock) gets its digest in metadata.db: those
// without one (`recheck`: every run, replacing digests that do not match
// the rows) are computed from the rows, and digests of ids that are no run
// are removed. Commits in one SQLite transaction; the caller then stamps and
// writes the manifest. Returns what it did, one line each (none when nothing
// was missing).
struct DigestRepair {
  uint64_t added = 0, replaced = 0, orphans = 0;
  std::vector<std::string> actions;
};
DigestRepair record_digests(const std::string& dir, const Manifest& m, bool recheck,
                            uint32_t workers);

}  // namespace a2pack::dataset
