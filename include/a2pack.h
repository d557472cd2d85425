/*
 * a2pack.h — the one public header of liba2pack.
 *
 * Everything between "a game of 2048 was played" and "a GPU got its batch":
 * run files (.a2run2 v1/v2), packfiles, step datasets, Bagz record files and a
 * sparse-vector data logger, behind one C ABI.
 *
 * Conventions (they hold for every function below):
 *
 *  - Names are a2pack_<noun>_<verb>. Objects are opaque handles opened into an
 *    out-parameter (`a2pack_<noun>_open(..., a2pack_<noun> **out)`) and released
 *    by exactly one function (`a2pack_<noun>_close(h)`), which accepts NULL.
 *    On failure the out-parameter is set to NULL.
 *  - Every fallible call returns an a2pack_status: A2PACK_OK (0) or a negative
 *    code. After a failure, a2pack_last_error() returns a message for the
 *    calling thread naming the file, offset or index and what was wrong.
 *  - Option structs begin with their own `size` field. Fill them with the
 *    matching a2pack_<x>_options_init() and then change what you need; the
 *    library reads only the first `size` bytes, so fields can be appended in
 *    later versions without breaking compiled callers. Passing NULL options
 *    means "all defaults".
 *  - Output structs that also begin with `size` (e.g. a2pack_run_meta) are
 *    filled up to the caller's `size`; set it to sizeof(the struct).
 *  - Memory handed out is one of two kinds, always documented:
 *      view  — pointer into a handle's memory, valid until that handle is
 *              closed (or the documented call that invalidates it);
 *      owned — allocated by the library, released by the caller with
 *              a2pack_free().
 *  - Thread safety: different handles may be used from different threads
 *    freely. One handle may be used from several threads at once only where
 *    its section says so (readers are; writers are not unless stated).
 *  - Enum-typed fields and arguments are checked as the integers they hold:
 *    any value other than the listed enumerators is A2PACK_E_INVALID_ARGUMENT
 *    naming the field, never undefined behaviour.
 *  - Batch calls exist so that a binding crosses the boundary once per batch.
 *  - No C++ type, exception or name crosses this ABI.
 *
 * A host that dlopen()s the library by absolute path needs exactly one symbol,
 * a2pack_api(), which returns a table of every function (section "api table").
 */
#ifndef A2PACK_H
#define A2PACK_H

/* A2PACK_CDEF is defined when this header is preprocessed to produce the
 * declarations for the Python cffi binding: no system includes, no
 * attributes, just the declarations. */
#ifndef A2PACK_CDEF
#include <stddef.h>
#include <stdint.h>
#endif

#if defined(A2PACK_CDEF)
#define A2PACK_API
#elif defined(A2PACK_BUILDING_LIBRARY)
#define A2PACK_API __attribute__((visibility("default")))
#else
#define A2PACK_API
#endif

#ifndef A2PACK_CDEF
#define A2PACK_VERSION_MAJOR 0
#define A2PACK_VERSION_MINOR 1
#define A2PACK_VERSION_PATCH 0
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ======================================================================
 * Section: core — status codes, errors, versions, memory
 * ====================================================================== */

/* The ABI version this header describes; pass it to a2pack_api(). */
enum { A2PACK_ABI_VERSION = 0 };

typedef int32_t a2pack_status;

enum a2pack_status_code {
  A2PACK_OK = 0,
  A2PACK_E_IO = -1,               /* an operating-system I/O call failed */
  A2PACK_E_NOT_FOUND = -2,        /* a file, key or entry does not exist */
  A2PACK_E_CORRUPT = -3,          /* malformed bytes: bad magic, bad length, bad varint... */
  A2PACK_E_CHECKSUM = -4,         /* a stored CRC does not match the data */
  A2PACK_E_UNSUPPORTED = -5,      /* a version, endianness or feature this build does not read */
  A2PACK_E_OUT_OF_RANGE = -6,     /* an index or value outside its valid range */
  A2PACK_E_INVALID_ARGUMENT = -7, /* the caller passed something invalid (NULL, bad option...) */
  A2PACK_E_NO_MEMORY = -8,        /* an allocation failed */
  A2PACK_E_CLOSED = -9,           /* the handle was already closed / finished */
  A2PACK_E_INTERRUPTED = -10,     /* a callback asked the operation to stop */
  A2PACK_E_FULL = -11,            /* a bounded buffer is full (non-blocking mode) */
  A2PACK_E_INTERNAL = -12         /* a bug in a2pack; please report it */
};

/* Symbolic name of a status ("A2PACK_E_CORRUPT"); never NULL, static storage. */
A2PACK_API const char *a2pack_status_name(a2pack_status status);

/* Message of the last failed call on this thread ("" when none). The string is
 * a view valid until the next a2pack call on this thread. Thread-safe. */
A2PACK_API const char *a2pack_last_error(void);

/* Status of the last failed call on this thread (A2PACK_OK when none). */
A2PACK_API a2pack_status a2pack_last_status(void);

/* Forget the last error of this thread. */
A2PACK_API void a2pack_clear_error(void);

/* Library version as "MAJOR.MINOR.PATCH"; static storage. */
A2PACK_API const char *a2pack_version(void);

/* The ABI version of the loaded library (compare with A2PACK_ABI_VERSION). */
A2PACK_API uint32_t a2pack_abi_version(void);

/* The zstd release the library compresses and decompresses with, as
 * "MAJOR.MINOR.PATCH" (a bundled 1.5.7 unless the build fell back to the
 * system libzstd; speed, not format, depends on it). Static storage. */
A2PACK_API const char *a2pack_zstd_version(void);

/* The LZ4 release the library compresses and decompresses packfile entries
 * with, as "MAJOR.MINOR.PATCH" (a bundled 1.10.0 unless the build fell back
 * to the system liblz4). Static storage. */
A2PACK_API const char *a2pack_lz4_version(void);

/* Release memory the library handed out as "owned". Accepts NULL. */
A2PACK_API void a2pack_free(void *ptr);

/* Progress callback used by long operations: `done` of `total` units.
 * Return 0 to continue, non-zero to stop the operation, which then fails with
 * A2PACK_E_INTERRUPTED. Called from the thread that started the operation. */
typedef int (*a2pack_progress_fn)(void *user, uint64_t done, uint64_t total);

/* Temporaries of killed writers. Every writer of a pack, bag or export
 * writes "<out>.tmp-<pid>-<n>" beside its output, holds an flock on it while
 * it lives and renames it over <out> when done; pack and bag writers remove
 * the stale temporaries of their output when they open it. This removes
 * those of `path` (an output file: its "<name>.tmp-<pid>-<n>" siblings) or,
 * when `path` is a folder, of every output in it: only regular files with
 * exactly that name, whose process no longer exists and which no process
 * holds locked. `fn` (may be NULL) is called with each removed path;
 * `*removed` (may be NULL) gets the count. A2PACK_E_NOT_FOUND when `path`
 * does not exist and is not inside an existing folder. */
typedef void (*a2pack_removed_fn)(void *user, const char *path);
A2PACK_API a2pack_status a2pack_clean_temps(const char *path, a2pack_removed_fn fn, void *user,
                                            uint64_t *removed);

/* ======================================================================
 * Section: board — 2048 boards (docs/run-files.md)
 * A board is a uint64_t of 16 nibbles; cell i (row-major, 0 = top-left) is
 * (board >> (60 - 4*i)) & 0xF, the tile exponent (0 = empty).
 * All functions here are pure and thread-safe.
 * ====================================================================== */

enum a2pack_move {
  A2PACK_MOVE_UP = 0,
  A2PACK_MOVE_DOWN = 1,
  A2PACK_MOVE_LEFT = 2,
  A2PACK_MOVE_RIGHT = 3
};

/* Classic merge score of a board: sum over tiles 2^e (e >= 2) of (e-1)*2^e. */
A2PACK_API uint64_t a2pack_board_score(uint64_t board);

/* Value of the highest tile (e.g. 2048), 0 for an empty board. */
A2PACK_API uint32_t a2pack_board_highest_tile(uint64_t board);

/* Board after sliding in `move` (no spawn). Equal to `board` when the move is
 * illegal. `move` must be 0..3, otherwise `board` is returned. */
A2PACK_API uint64_t a2pack_board_apply_move(uint64_t board, uint32_t move);

/* Bit i set when move i changes the board (Up 1, Down 2, Left 4, Right 8). */
A2PACK_API uint32_t a2pack_board_legal_moves(uint64_t board);

/* The upstream per-step branch normalisation (docs/run-files.md): `ev` holds the
 * raw expected values of the 4 moves, `legal_mask` which are legal; `out`
 * receives the normalised values (0 for illegal moves). */
A2PACK_API void a2pack_branches_normalise(const float ev[4], uint32_t legal_mask,
                                          float out[4]);

/* The same normalisation on raw double values, as the upstream tool's
 * normalize_branches computes it (min and max in double, the ratio in float;
 * equal values within DBL_EPSILON give 0.5 each). */
A2PACK_API void a2pack_branches_normalise_f64(const double ev[4], uint32_t legal_mask,
                                              float out[4]);

/* The upstream ai-2048 tool's random stream (Rust rand 0.8 StdRng, ChaCha12,
 * seeded as SeedableRng::seed_from_u64): a seed gives the boards and orders
 * that tool gives. Behind a2pack's `ai_2048` Python module (docs/ai_2048.md).
 * A handle is not thread-safe. */
typedef struct a2pack_stdrng a2pack_stdrng;
A2PACK_API a2pack_status a2pack_stdrng_open(uint64_t seed, a2pack_stdrng **out);
/* An independent copy that continues the same stream. */
A2PACK_API a2pack_status a2pack_stdrng_clone(const a2pack_stdrng *rng, a2pack_stdrng **out);
/* Accepts NULL. */
A2PACK_API void a2pack_stdrng_close(a2pack_stdrng *rng);
/* Permute items[0..n) as the tool's slice.shuffle(&mut rng) does. */
A2PACK_API a2pack_status a2pack_stdrng_shuffle(a2pack_stdrng *rng, uint64_t *items, size_t n);
/* The tool's Board::with_random_tile: a 2 (p 0.9) or a 4 in a random empty
 * cell. A2PACK_E_INVALID_ARGUMENT for a full board (which the tool panics on). */
A2PACK_API a2pack_status a2pack_board_spawn_stdrng(uint64_t board, a2pack_stdrng *rng,
                                                   uint64_t *out);
/* The tool's Board::make_move: slide, then spawn only if the board changed.
 * `move` must be 0..3. */
A2PACK_API a2pack_status a2pack_board_make_move_stdrng(uint64_t board, uint32_t move,
                                                       a2pack_stdrng *rng, uint64_t *out);

/* ======================================================================
 * Section: run — .a2run2 run files, v1 (A2T1) and v2 (postcard)
 * ====================================================================== */

typedef enum a2pack_run_kind {
  A2PACK_RUN_KIND_UNKNOWN = 0,
  A2PACK_RUN_V1 = 1,
  A2PACK_RUN_V2 = 2
} a2pack_run_kind;

/* A decoded run, always in v2 shape (a v1 file is upgraded on decode). */
typedef struct a2pack_run a2pack_run;

/* Run metadata. Filled by a2pack_run_get_meta up to `size` bytes. */
typedef struct a2pack_run_meta {
  size_t size;            /* sizeof(a2pack_run_meta), set by the caller */
  uint32_t steps;         /* meta.steps as stored */
  uint64_t start_unix_s;  /* 0 = unknown */
  float elapsed_s;
  uint64_t max_score;
  uint32_t highest_tile;  /* tile value, e.g. 2048 */
  int32_t has_engine;     /* 0: engine_str is None */
  const char *engine;     /* UTF-8, not NUL-terminated; view valid while the run lives
                             (when passed to a2pack_run_create it is copied) */
  size_t engine_len;
} a2pack_run_meta;

/* Kind of a run payload by its first bytes: "A2T1" 0x01 → V1, otherwise V2
 * (docs/run-files.md). Never fails; a payload shorter than 6 bytes is V2. */
A2PACK_API a2pack_run_kind a2pack_run_detect_kind(const uint8_t *data, size_t len);

/* Decode a run from bytes (kind detected; v1 upgraded to v2). The bytes are
 * copied out; `data` need not outlive the run. `*out` is owned: release with
 * a2pack_run_close(). */
A2PACK_API a2pack_status a2pack_run_decode(const uint8_t *data, size_t len, a2pack_run **out);

/* Read and decode a run file. Errors name the path. */
A2PACK_API a2pack_status a2pack_run_load(const char *path, a2pack_run **out);

/* Build a run from arrays. `boards` and `moves` have `n_steps` entries
 * (boards[i] = the board before step i). `values` (n_steps*4 floats, UDLR) and
 * `legal_masks` (n_steps bytes, bit i = move i legal) are both NULL for a run
 * without branches, or both given; `branch_present` (n_steps bytes, may be
 * NULL = all present when values are given) marks which steps carry branches.
 * Illegal moves' values are ignored. All input is copied. */
A2PACK_API a2pack_status a2pack_run_create(const a2pack_run_meta *meta, size_t n_steps,
                                           const uint64_t *boards, const uint8_t *moves,
                                           const float *values, const uint8_t *legal_masks,
                                           const uint8_t *branch_present,
                                           uint64_t final_board, a2pack_run **out);

/* Release a run. Accepts NULL. */
A2PACK_API void a2pack_run_close(a2pack_run *run);

/* Kind of the bytes the run was decoded from (V2 for runs made by create). */
A2PACK_API a2pack_run_kind a2pack_run_source_kind(const a2pack_run *run);

/* Metadata; `out->size` must be set. The engine pointer is a view. */
A2PACK_API a2pack_status a2pack_run_get_meta(const a2pack_run *run, a2pack_run_meta *out);

/* Number of steps (length of the steps vector, which may differ from
 * meta.steps in a hand-made file). */
A2PACK_API size_t a2pack_run_step_count(const a2pack_run *run);

/* The board after the last step. */
A2PACK_API uint64_t a2pack_run_final_board(const a2pack_run *run);

/* Non-zero when at least one step carries branch values. */
A2PACK_API int32_t a2pack_run_has_branches(const a2pack_run *run);

/* Copy steps [first, first+n) into caller arrays; any output may be NULL.
 * values: n*4 floats (0 where illegal or absent); legal_masks: bit i = move i
 * legal (0 when absent); branch_present: 1 when the step stores branches.
 * A2PACK_E_OUT_OF_RANGE when first+n exceeds the step count. */
A2PACK_API a2pack_status a2pack_run_get_steps(const a2pack_run *run, size_t first, size_t n,
                                              uint64_t *boards, uint8_t *moves, float *values,
                                              uint8_t *legal_masks, uint8_t *branch_present);

/* Encode flags. */
enum a2pack_encode_flags {
  /* v1 cannot store branch values: without this flag encoding a run that has
   * branches as v1 fails with A2PACK_E_INVALID_ARGUMENT. */
  A2PACK_ENCODE_DROP_BRANCHES = 1
};

/* Encode as v1 or v2 into owned memory (*out_data, release with a2pack_free).
 * v1 needs meta.steps == step count and fits the v1 limits (u16 engine length). */
A2PACK_API a2pack_status a2pack_run_encode(const a2pack_run *run, a2pack_run_kind kind,
                                           uint32_t flags, uint8_t **out_data,
                                           size_t *out_len);

/* Encode and write to `path` atomically (temporary file + rename). */
A2PACK_API a2pack_status a2pack_run_save(const a2pack_run *run, const char *path,
                                         a2pack_run_kind kind, uint32_t flags);

/* Upgrade a v1 payload to v2 bytes (owned; release with a2pack_free). A v2
 * payload is validated and copied unchanged. */
A2PACK_API a2pack_status a2pack_run_upgrade_v1(const uint8_t *data, size_t len,
                                               uint8_t **out_data, size_t *out_len);

/* ---- columnar run batch ------------------------------------------------
 * Many runs decoded into flat arrays, the form the packfile and dataset
 * layers hand to training code. All arrays are views valid while the batch
 * lives. Steps of run r are [step_offsets[r], step_offsets[r+1]). */
typedef struct a2pack_run_batch a2pack_run_batch;

typedef struct a2pack_run_columns {
  size_t size;                   /* sizeof(a2pack_run_columns), set by the caller */
  size_t n_runs;
  size_t n_steps;
  const uint64_t *step_offsets;  /* n_runs + 1 */
  const uint64_t *boards;        /* n_steps: board before each step */
  const uint8_t *moves;          /* n_steps: chosen move 0..3 */
  const float *branch_values;    /* n_steps * 4 (UDLR); 0 where illegal/absent */
  const uint8_t *legal_masks;    /* n_steps: bit i = move i legal; 0 when absent */
  const uint8_t *branch_present; /* n_steps: 1 when the step stored branches */
  const uint64_t *final_boards;  /* n_runs */
  const uint32_t *meta_steps;    /* n_runs: meta.steps */
  const uint64_t *start_unix_s;  /* n_runs */
  const float *elapsed_s;        /* n_runs */
  const uint64_t *max_score;     /* n_runs */
  const uint32_t *highest_tile;  /* n_runs */
  const uint8_t *source_kind;    /* n_runs: a2pack_run_kind of the payload */
  const uint8_t *has_engine;     /* n_runs */
  const uint64_t *engine_offsets;/* n_runs + 1, into engine_bytes */
  const char *engine_bytes;
} a2pack_run_columns;

/* Decode `n` payloads (v1 or v2, detected per payload) into one batch, using
 * up to `workers` threads for this call only (0 = all cores). A payload that
 * fails makes the whole call fail; the message names its index. The payload
 * memory is only read during the call. */
A2PACK_API a2pack_status a2pack_run_batch_decode(const uint8_t *const *payloads,
                                                 const size_t *lengths, size_t n,
                                                 uint32_t workers, a2pack_run_batch **out);

/* Read run files (v1 or v2 each) and decode them into one batch, using up to
 * `workers` threads for this call only (0 = all cores): each worker reads
 * whole files and parses them, so reading is as parallel as decoding. A file
 * that cannot be read or decoded makes the whole call fail; the message
 * names its path. Memory: the files' bytes during the call, then the batch.
 * Decode a folder in windows of a few hundred files to bound memory. */
A2PACK_API a2pack_status a2pack_run_batch_load(const char *const *paths, size_t n,
                                               uint32_t workers, a2pack_run_batch **out);

/* Total encoded bytes the batch was decoded from (payloads or files). */
A2PACK_API uint64_t a2pack_run_batch_payload_bytes(const a2pack_run_batch *batch);

/* Fill `out` (set out->size first) with views of the batch's arrays. */
A2PACK_API a2pack_status a2pack_run_batch_columns(const a2pack_run_batch *batch,
                                                  a2pack_run_columns *out);

/* Release a batch. Accepts NULL. */
A2PACK_API void a2pack_run_batch_close(a2pack_run_batch *batch);

/* ======================================================================
 * Section: gen — a 2048 engine and run generator
 * ====================================================================== */

typedef enum a2pack_policy {
  A2PACK_POLICY_EXPECTIMAX = 0, /* default: depth-limited expectimax, stores branch EVs */
  A2PACK_POLICY_GREEDY = 1,     /* one-ply heuristic, stores normalised branch values */
  A2PACK_POLICY_RANDOM = 2      /* uniform over legal moves, no branches */
} a2pack_policy;

typedef struct a2pack_gen_options {
  size_t size;              /* sizeof(a2pack_gen_options) */
  a2pack_policy policy;     /* default EXPECTIMAX */
  uint32_t depth;           /* expectimax search depth in moves, default 2 */
  a2pack_run_kind format;   /* file format for a2pack_gen_dir, default V2 */
  uint32_t jobs;            /* worker threads for a2pack_gen_dir, 0 = all cores */
  uint64_t start_unix_s;    /* start time written into the first run's meta;
                               later runs are spaced deterministically */
  uint32_t max_steps;       /* stop a game after this many moves (0 = until game over) */
} a2pack_gen_options;

A2PACK_API void a2pack_gen_options_init(a2pack_gen_options *opts);

/* Play one game with `seed` (same seed and options → same run). */
A2PACK_API a2pack_status a2pack_gen_run(const a2pack_gen_options *opts, uint64_t seed,
                                        a2pack_run **out);

/* Play `n_runs` games and write them as DIR/run-NNNNNN.a2run2 (created if
 * missing). Run i uses a seed derived from (seed, i), so the files are the
 * same bytes whatever opts->jobs is. `progress` may be NULL. */
A2PACK_API a2pack_status a2pack_gen_dir(const a2pack_gen_options *opts, const char *out_dir,
                                        uint64_t n_runs, uint64_t seed,
                                        a2pack_progress_fn progress, void *progress_user);

/* The upstream ai-2048 tool's single-threaded expectimax, node for node:
 * depth max(3, distinct tiles - 2) (capped by depth_cap), its heuristic,
 * probability pruning and per-call transposition cache, so branch values are
 * bit-identical to the tool's. Behind `ai_2048.Expectimax`
 * (docs/ai_2048.md). A handle is not thread-safe. */
typedef struct a2pack_expectimax_options {
  size_t size;            /* sizeof(a2pack_expectimax_options) */
  float prob_cutoff;      /* default 1e-4: rarer chance nodes take the heuristic */
  int32_t has_depth_cap;  /* default 0: no cap */
  uint64_t depth_cap;
  int32_t cache_enabled;  /* default 1 */
} a2pack_expectimax_options;

A2PACK_API void a2pack_expectimax_options_init(a2pack_expectimax_options *opts);

typedef struct a2pack_expectimax a2pack_expectimax;
/* opts may be NULL (defaults). */
A2PACK_API a2pack_status a2pack_expectimax_open(const a2pack_expectimax_options *opts,
                                                a2pack_expectimax **out);
/* Accepts NULL. */
A2PACK_API void a2pack_expectimax_close(a2pack_expectimax *ex);
/* Raw expected value of each move (UDLR) from `board`; 0 and bit clear in
 * *legal_mask for a move that does not change the board. */
A2PACK_API a2pack_status a2pack_expectimax_branch_evals(a2pack_expectimax *ex, uint64_t board,
                                                        double ev[4], uint32_t *legal_mask);
/* Best move 0..3, or -1 when none is legal. */
A2PACK_API a2pack_status a2pack_expectimax_best_move(a2pack_expectimax *ex, uint64_t board,
                                                     int32_t *move);
/* Value of the root (the best move's value; 0 when none is legal). */
A2PACK_API a2pack_status a2pack_expectimax_state_value(a2pack_expectimax *ex, uint64_t board,
                                                       double *value);
/* Nodes visited by the last call, and the most of any call since the last
 * reset. Either pointer may be NULL. */
A2PACK_API void a2pack_expectimax_stats(const a2pack_expectimax *ex, uint64_t *nodes,
                                        uint64_t *peak_nodes);
/* The same function in the one spelling every section uses; a2pack_expectimax_stats is
 * its alias, kept for compiled callers. */
A2PACK_API void a2pack_expectimax_stats_get(const a2pack_expectimax *ex,
                                            uint64_t *nodes,
                                            uint64_t *peak_nodes);
A2PACK_API void a2pack_expectimax_reset_stats(a2pack_expectimax *ex);
/* The same function in the one spelling every section uses; a2pack_expectimax_reset_stats is
 * its alias, kept for compiled callers. */
A2PACK_API void a2pack_expectimax_stats_reset(a2pack_expectimax *ex);

/* ======================================================================
 * Section: pack — A2PACK packfiles (docs/pack.md): many runs in one
 * read-only file with an index, for O(1) random access and fast scans.
 *
 * A pack handle (reader) is thread-safe: every function taking an
 * a2pack_pack* may be called from several threads at once. Writers and
 * iterators are not: use one from one thread at a time.
 * Entry indices are uint64_t; an index >= a2pack_pack_len() fails with
 * A2PACK_E_OUT_OF_RANGE. Errors name the pack path and the entry.
 * ====================================================================== */

typedef struct a2pack_pack a2pack_pack;

typedef struct a2pack_pack_options {
  size_t size;         /* sizeof(a2pack_pack_options) */
  int32_t use_mmap;    /* 1 (default): memory-map the file; 0: positional reads (pread) */
  int32_t verify_crc;  /* 1 (default): entry reads check the entry's stored CRC32C */
} a2pack_pack_options;

A2PACK_API void a2pack_pack_options_init(a2pack_pack_options *opts);

/* Open a pack. Checks the header, footer and index CRCs, every entry's
 * bounds, data_end and the stats block, in O(count), without touching any
 * payload. Rejections: A2PACK_E_CORRUPT (short file, bad magic, entry outside
 * the data region, entries sharing payload bytes, bad data_end, bad stats
 * block, non-zero padding), A2PACK_E_CHECKSUM (header, index or footer CRC),
 * A2PACK_E_UNSUPPORTED (version or header flags), A2PACK_E_INVALID_ARGUMENT
 * (a FIFO, socket or device: refused, never waited on). `opts` may be NULL.
 * Close with a2pack_pack_close. */
A2PACK_API a2pack_status a2pack_pack_open(const char *path, const a2pack_pack_options *opts,
                                          a2pack_pack **out);

/* Release a pack. Accepts NULL. Iterators opened from it stay usable. */
A2PACK_API void a2pack_pack_close(a2pack_pack *pack);

/* Number of entries (0 for NULL). */
A2PACK_API uint64_t a2pack_pack_len(const a2pack_pack *pack);

/* Flags of the read calls below. */
enum a2pack_pack_read_flags {
  /* Skip the entry CRC check for this call (trusted sequential scans). */
  A2PACK_PACK_NO_VERIFY = 1,
  /* Exports (a2pack_pack_to_jsonl): fsync the output before renaming it into
   * place, and its folder after. Without it the output still appears only
   * when complete (temporary name, then rename) but a power cut soon after
   * may lose it - what upstream's exporter does, and much faster. */
  A2PACK_PACK_DURABLE = 2
};

/* Index entry `flags`: how the payload is stored. */
enum a2pack_pack_entry_flags {
  A2PACK_PACK_ENTRY_STORED = 0, /* the run file's bytes verbatim */
  A2PACK_PACK_ENTRY_ZSTD = 1,   /* one zstd frame of the run file's bytes */
  A2PACK_PACK_ENTRY_LZ4 = 2     /* one LZ4 frame (lz4frame format) of the run file's bytes */
};

typedef struct a2pack_pack_entry {
  size_t size;          /* sizeof(a2pack_pack_entry), set by the caller */
  uint64_t offset;      /* absolute file offset of the stored bytes */
  uint32_t length;      /* stored bytes */
  uint16_t kind;        /* 1 = v1, 2 = v2, as the index says */
  uint16_t flags;       /* a2pack_pack_entry_flags */
  uint32_t crc32c;      /* CRC32C of the stored bytes, 0 = none */
  uint32_t raw_length;  /* bytes of the run file (after decompression) */
} a2pack_pack_entry;

/* Index entry i, as stored (no payload is read). */
A2PACK_API a2pack_status a2pack_pack_entry_info(const a2pack_pack *pack, uint64_t i,
                                                a2pack_pack_entry *out);
/* The same function in the one spelling every section uses; a2pack_pack_entry_info is
 * its alias, kept for compiled callers. */
A2PACK_API a2pack_status a2pack_pack_entry_info_get(const a2pack_pack *pack,
                                                    uint64_t i,
                                                    a2pack_pack_entry *out);

/* Run format of entry i by the index: A2PACK_RUN_V1 or A2PACK_RUN_V2
 * (A2PACK_E_UNSUPPORTED for any other kind value). */
A2PACK_API a2pack_status a2pack_pack_kind(const a2pack_pack *pack, uint64_t i,
                                          a2pack_run_kind *out);

/* Zero-copy view of entry i's stored bytes (for A2PACK_PACK_ENTRY_ZSTD
 * entries, the compressed frame). The CRC is checked unless verification is
 * off. `*data` is a view valid until the pack is closed. Needs a mapped pack:
 * A2PACK_E_UNSUPPORTED when opened with use_mmap = 0. */
A2PACK_API a2pack_status a2pack_pack_get_slice(const a2pack_pack *pack, uint64_t i, uint32_t flags,
                                               const uint8_t **data, size_t *len);

/* Entry i's run-file bytes exactly as they were packed (decompressed, CRC
 * checked unless verification is off, kind checked against the index).
 * `*out_data` is owned: release with a2pack_free. Works in both open modes. */
A2PACK_API a2pack_status a2pack_pack_read(const a2pack_pack *pack, uint64_t i, uint32_t flags,
                                          uint8_t **out_data, size_t *out_len);

/* Decode entry i (v1 upgraded to v2). `*out` is owned: a2pack_run_close. A
 * corrupt entry fails alone: every other entry still decodes. */
A2PACK_API a2pack_status a2pack_pack_decode(const a2pack_pack *pack, uint64_t i, uint32_t flags,
                                            a2pack_run **out);

/* Decode entries indices[0..n) in parallel on up to `workers` threads for
 * this call only (0 = all cores) into out_runs[0..n) (caller's array; each
 * run owned, release with a2pack_run_close). On failure every out_runs[k] is
 * NULL. */
A2PACK_API a2pack_status a2pack_pack_decode_runs(const a2pack_pack *pack, const uint64_t *indices,
                                                 size_t n, uint32_t workers, uint32_t flags,
                                                 a2pack_run **out_runs);

/* Decode entries indices[0..n) in parallel (workers as above) into one
 * columnar batch, run r of the batch being entry indices[r]. `*out` is owned:
 * a2pack_run_batch_close. Errors name the entry. */
A2PACK_API a2pack_status a2pack_pack_decode_batch(const a2pack_pack *pack,
                                                  const uint64_t *indices, size_t n,
                                                  uint32_t workers, uint32_t flags,
                                                  a2pack_run_batch **out);

/* The order of an epoch over all entries: 0..len-1, or with `shuffle` a
 * permutation that depends only on (len, seed) (SplitMix64 Fisher-Yates),
 * never on threads or platform. `out` has room for a2pack_pack_len entries. */
A2PACK_API a2pack_status a2pack_pack_permutation(const a2pack_pack *pack, int32_t shuffle,
                                                 uint64_t seed, uint64_t *out, size_t out_len);

/* ---- batch iterator: an epoch in batches of columnar runs ------------- */
typedef struct a2pack_pack_iter a2pack_pack_iter;

typedef struct a2pack_pack_iter_options {
  size_t size;          /* sizeof(a2pack_pack_iter_options) */
  uint64_t batch_size;  /* runs per batch, default 256 (the last may be short) */
  int32_t shuffle;      /* 0 (default): pack order; 1: a2pack_pack_permutation(seed) */
  uint64_t seed;        /* default 0 */
  uint32_t workers;     /* decode threads per batch, 0 (default) = all cores */
  uint32_t flags;       /* a2pack_pack_read_flags */
} a2pack_pack_iter_options;

A2PACK_API void a2pack_pack_iter_options_init(a2pack_pack_iter_options *opts);

/* Start an epoch. The batches (which entries, in which order) depend only on
 * the pack, batch_size, shuffle and seed. The iterator keeps the pack's file
 * open. `opts` may be NULL. */
A2PACK_API a2pack_status a2pack_pack_iter_open(a2pack_pack *pack,
                                               const a2pack_pack_iter_options *opts,
                                               a2pack_pack_iter **out);

/* The next batch: `*out` (owned, a2pack_run_batch_close) and, when
 * `indices`/`n` are not NULL, the entry indices of its runs (a view valid
 * until the iterator is closed). At the end: A2PACK_OK with *out NULL, *n 0.
 * A batch that fails (a corrupt entry) is not skipped: the error names the
 * entry and the next call tries the same batch again. */
A2PACK_API a2pack_status a2pack_pack_iter_next(a2pack_pack_iter *it, a2pack_run_batch **out,
                                               const uint64_t **indices, size_t *n);

/* Release an iterator. Accepts NULL. */
A2PACK_API void a2pack_pack_iter_close(a2pack_pack_iter *it);

/* ---- statistics ---------------------------------------------------------- */
typedef struct a2pack_pack_stats {
  size_t size;           /* sizeof(a2pack_pack_stats), set by the caller */
  uint64_t count;
  uint64_t total_steps;  /* run lengths are the runs' meta.steps */
  uint32_t min_len;
  uint32_t max_len;
  double mean_len;
  uint32_t p50;          /* element round(q * (n - 1)) of the sorted lengths */
  uint32_t p90;
  uint32_t p99;
  int32_t from_block;    /* 1: read from the pack's stats block; 0: computed */
} a2pack_pack_stats;

/* The pack's stats block when it has one; otherwise computed once from the
 * runs' headers in parallel (workers: 0 = all cores) and cached. A stats
 * block that cannot be right (docs/pack.md: checked at open against itself
 * and the index) is A2PACK_E_CORRUPT, the message naming fields and values. */
A2PACK_API a2pack_status a2pack_pack_stats_get(a2pack_pack *pack, uint32_t workers,
                                               a2pack_pack_stats *out);

typedef struct a2pack_pack_histograms {
  size_t size;                    /* sizeof(a2pack_pack_histograms), set by the caller */
  size_t n_tiles;
  const uint32_t *tile_values;    /* ascending meta.highest_tile values */
  const uint64_t *tile_counts;
  size_t n_engines;               /* distinct engine strings ("none" first, then by bytes) */
  const uint8_t *engine_present;  /* 0: runs that store no engine string */
  const uint64_t *engine_offsets; /* n_engines + 1, into engine_bytes */
  const char *engine_bytes;       /* UTF-8, not NUL-terminated */
  const uint64_t *engine_counts;
} a2pack_pack_histograms;

/* Highest-tile and engine-string histograms, computed once from the runs'
 * headers in parallel and cached. All arrays are views valid until the pack
 * is closed. */
A2PACK_API a2pack_status a2pack_pack_histograms_get(a2pack_pack *pack, uint32_t workers,
                                                    a2pack_pack_histograms *out);

/* Validate. full = 0: the open-time checks plus a CRC check and decode of up
 * to 16 entries spread over the pack. full = 1: every entry's CRC and full
 * decode, the stats block against the runs, all padding zero, no overlapping
 * entries, and the data CRC when one is stored. The error message lists the
 * failing entries (up to 10); the status is the first one's. `progress` may
 * be NULL. */
A2PACK_API a2pack_status a2pack_pack_validate(a2pack_pack *pack, int32_t full, uint32_t workers,
                                              a2pack_progress_fn progress, void *progress_user);

/* JSONL export modes (docs/pack.md, upstream's schemas). */
typedef enum a2pack_pack_jsonl_mode {
  A2PACK_PACK_JSONL_RUNS = 0,  /* one line per run */
  A2PACK_PACK_JSONL_STEPS = 1  /* one line per step */
} a2pack_pack_jsonl_mode;

/* Write every entry as JSONL to `path` (atomically), decoded and serialised
 * in parallel (workers: 0 = all cores) and written in pack order: the bytes
 * are the same for any worker count. `out_bytes` (may be NULL) receives the
 * size written. `flags`: a2pack_pack_read_flags. */
A2PACK_API a2pack_status a2pack_pack_to_jsonl(a2pack_pack *pack, const char *path,
                                              a2pack_pack_jsonl_mode mode, uint32_t workers,
                                              uint32_t flags, a2pack_progress_fn progress,
                                              void *progress_user, uint64_t *out_bytes);

/* ---- building packs ------------------------------------------------------ */
typedef struct a2pack_pack_writer a2pack_pack_writer;

typedef enum a2pack_pack_compression {
  A2PACK_PACK_COMPRESS_NONE = 0,
  A2PACK_PACK_COMPRESS_ZSTD = 1, /* per entry; an entry zstd does not shrink is stored */
  A2PACK_PACK_COMPRESS_LZ4 = 2   /* per entry, one LZ4 frame; an entry lz4 does not shrink is
                                    stored. Faster to decode than zstd, larger. */
} a2pack_pack_compression;

/* Told about each bad input that skip_bad skips: its path, the error status
 * and message. Called from the thread that called the library. */
typedef void (*a2pack_pack_bad_input_fn)(void *user, const char *path, a2pack_status status,
                                         const char *message);

typedef struct a2pack_pack_writer_options {
  size_t size;                  /* sizeof(a2pack_pack_writer_options) */
  uint32_t align;               /* payload alignment, power of two 1..1048576; default 4096 */
  int32_t entry_crc;            /* store each payload's CRC32C; default 1 */
  a2pack_pack_compression compression; /* default A2PACK_PACK_COMPRESS_NONE */
  int32_t zstd_level;           /* default 3 */
  uint64_t expected_count;      /* entries to come, 0 (default) = unknown: payloads
                                   are then staged in a temporary file and copied
                                   once at finish. A known count writes them in
                                   place; adding more than it fails. */
  uint32_t workers;             /* threads of add_files / a2pack_pack_dir, 0 = all cores */
  int32_t skip_bad;             /* add_files / pack_dir: skip unreadable or corrupt runs
                                   (counted, reported to on_bad_input) instead of failing */
  a2pack_pack_bad_input_fn on_bad_input; /* may be NULL */
  void *on_bad_input_user;
  int32_t lz4_level;            /* added later. For A2PACK_PACK_COMPRESS_LZ4: 0 (default) =
                                   LZ4's fast mode, negative = faster (down to -65536),
                                   3..12 = LZ4 HC (smaller, slower to write, as fast to
                                   read) */
} a2pack_pack_writer_options;

A2PACK_API void a2pack_pack_writer_options_init(a2pack_pack_writer_options *opts);

typedef struct a2pack_pack_build_summary {
  size_t size;                  /* sizeof(a2pack_pack_build_summary), set by the caller */
  uint64_t entries;             /* runs in the pack */
  uint64_t skipped;             /* bad inputs skipped */
  uint64_t input_bytes;         /* run-file bytes of the entries */
  uint64_t stored_bytes;        /* payload bytes stored (after compression) */
  uint64_t compressed_entries;  /* entries stored compressed (zstd or lz4) */
  uint64_t file_bytes;          /* size of the pack file */
} a2pack_pack_build_summary;

/* Start a pack at `path`. Nothing appears under that name before
 * a2pack_pack_writer_finish succeeds. `opts` may be NULL. */
A2PACK_API a2pack_status a2pack_pack_writer_open(const char *path,
                                                 const a2pack_pack_writer_options *opts,
                                                 a2pack_pack_writer **out);

/* Append one run file's bytes (v1 or v2), fully decoded first: invalid bytes
 * fail (the writer stays usable) and nothing is added. */
A2PACK_API a2pack_status a2pack_pack_writer_add(a2pack_pack_writer *w, const uint8_t *data,
                                                size_t len);

/* Append a run file read from `path`. */
A2PACK_API a2pack_status a2pack_pack_writer_add_file(a2pack_pack_writer *w, const char *path);

/* Append run files read, checked and compressed in parallel (options.workers)
 * and appended in the given order. A bad file stops the call with an error
 * naming it (entries before it stay added) unless options.skip_bad. */
A2PACK_API a2pack_status a2pack_pack_writer_add_files(a2pack_pack_writer *w,
                                                      const char *const *paths, size_t n,
                                                      a2pack_progress_fn progress,
                                                      void *progress_user);

/* Entries added so far. */
A2PACK_API uint64_t a2pack_pack_writer_count(const a2pack_pack_writer *w);

/* Write the index, stats block and footer and move the pack into place.
 * `out` may be NULL. Later calls other than close fail with A2PACK_E_CLOSED. */
A2PACK_API a2pack_status a2pack_pack_writer_finish(a2pack_pack_writer *w,
                                                   a2pack_pack_build_summary *out);

/* Release a writer; an unfinished pack is abandoned (no file is left). */
A2PACK_API void a2pack_pack_writer_close(a2pack_pack_writer *w);

/* Pack every *.a2run2 file under `input_dir` (recursively, in path order)
 * into `output`. A2PACK_E_NOT_FOUND when there are none. Uses options'
 * align, entry_crc, compression, zstd_level, lz4_level, workers, skip_bad and
 * on_bad_input (expected_count is the number of files). `progress` counts
 * files; `out` may be NULL. */
A2PACK_API a2pack_status a2pack_pack_dir(const char *input_dir, const char *output,
                                         const a2pack_pack_writer_options *opts,
                                         a2pack_progress_fn progress, void *progress_user,
                                         a2pack_pack_build_summary *out);

typedef struct a2pack_pack_api {
  size_t size;
  void (*options_init)(a2pack_pack_options *);
  a2pack_status (*open)(const char *, const a2pack_pack_options *, a2pack_pack **);
  void (*close)(a2pack_pack *);
  uint64_t (*len)(const a2pack_pack *);
  a2pack_status (*entry_info)(const a2pack_pack *, uint64_t, a2pack_pack_entry *);
  a2pack_status (*kind)(const a2pack_pack *, uint64_t, a2pack_run_kind *);
  a2pack_status (*get_slice)(const a2pack_pack *, uint64_t, uint32_t, const uint8_t **, size_t *);
  a2pack_status (*read)(const a2pack_pack *, uint64_t, uint32_t, uint8_t **, size_t *);
  a2pack_status (*decode)(const a2pack_pack *, uint64_t, uint32_t, a2pack_run **);
  a2pack_status (*decode_runs)(const a2pack_pack *, const uint64_t *, size_t, uint32_t, uint32_t,
                               a2pack_run **);
  a2pack_status (*decode_batch)(const a2pack_pack *, const uint64_t *, size_t, uint32_t, uint32_t,
                                a2pack_run_batch **);
  a2pack_status (*permutation)(const a2pack_pack *, int32_t, uint64_t, uint64_t *, size_t);
  void (*iter_options_init)(a2pack_pack_iter_options *);
  a2pack_status (*iter_open)(a2pack_pack *, const a2pack_pack_iter_options *, a2pack_pack_iter **);
  a2pack_status (*iter_next)(a2pack_pack_iter *, a2pack_run_batch **, const uint64_t **, size_t *);
  void (*iter_close)(a2pack_pack_iter *);
  a2pack_status (*stats_get)(a2pack_pack *, uint32_t, a2pack_pack_stats *);
  a2pack_status (*histograms_get)(a2pack_pack *, uint32_t, a2pack_pack_histograms *);
  a2pack_status (*validate)(a2pack_pack *, int32_t, uint32_t, a2pack_progress_fn, void *);
  a2pack_status (*to_jsonl)(a2pack_pack *, const char *, a2pack_pack_jsonl_mode, uint32_t,
                            uint32_t, a2pack_progress_fn, void *, uint64_t *);
  void (*writer_options_init)(a2pack_pack_writer_options *);
  a2pack_status (*writer_open)(const char *, const a2pack_pack_writer_options *,
                               a2pack_pack_writer **);
  a2pack_status (*writer_add)(a2pack_pack_writer *, const uint8_t *, size_t);
  a2pack_status (*writer_add_file)(a2pack_pack_writer *, const char *);
  a2pack_status (*writer_add_files)(a2pack_pack_writer *, const char *const *, size_t,
                                    a2pack_progress_fn, void *);
  uint64_t (*writer_count)(const a2pack_pack_writer *);
  a2pack_status (*writer_finish)(a2pack_pack_writer *, a2pack_pack_build_summary *);
  void (*writer_close)(a2pack_pack_writer *);
  a2pack_status (*dir)(const char *, const char *, const a2pack_pack_writer_options *,
                       a2pack_progress_fn, void *, a2pack_pack_build_summary *);
  /* added later: the one spelling of info (entry_info is its alias) */
  a2pack_status (*entry_info_get)(const a2pack_pack *, uint64_t, a2pack_pack_entry *);
} a2pack_pack_api;
/* (end of section pack) */

/* ======================================================================
 * Section: dataset — step datasets (docs/dataset.md): a folder
 * holding steps.npy (one 32-byte row per step, loadable with np.load),
 * metadata.db (SQLite, one row per run) and manifest.json (the commit record:
 * row and run counts, CRC32C of the rows, sources).
 *
 * Row layout (little-endian, packed, numpy dtype
 * [('board','<u8'),('move','u1'),('ev_legal','u1'),('ev_values','<f4',(4,)),
 *  ('run_id','<u4'),('step_index','<u2')]):
 *   offset 0 board u64 · 8 move u8 · 9 ev_legal u8 (bit i = move i legal) ·
 *   10 ev_values f32[4] (the chosen move 1.0, illegal 0.0) · 26 run_id u32 ·
 *   30 step_index u16.
 *
 * An open dataset (a2pack_dataset*) is read-only and thread-safe: every
 * function taking a const a2pack_dataset* may be called from several threads
 * at once. A sampler is not: use one from one thread at a time (or one per
 * thread). Builds and appends are atomic: an error or a crash at any point
 * leaves the previous dataset (or none, for a first build), never a mix.
 * ====================================================================== */

enum { A2PACK_DATASET_ROW_BYTES = 32 };

typedef struct a2pack_dataset a2pack_dataset;
typedef struct a2pack_dataset_sampler a2pack_dataset_sampler;

/* A message from a dataset writer (see on_warning). Called from the thread
 * that called the library. */
typedef void (*a2pack_dataset_message_fn)(void *user, const char *message);
/* Told about each run that skip_bad skips: its label (file, or packfile and
 * entry), the error status and message. Called from the calling thread. */
typedef void (*a2pack_dataset_bad_input_fn)(void *user, const char *label, a2pack_status status,
                                            const char *message);

typedef struct a2pack_dataset_build_options {
  size_t size;                    /* sizeof(a2pack_dataset_build_options) */
  uint32_t workers;               /* decode threads, 0 (default) = all cores */
  int32_t allow_missing_branches; /* 0 (default): a run without branch values is an error
                                     naming it; 1: only the chosen move is legal, at 1.0 */
  int32_t overwrite;              /* build only. 0 (default): an existing output folder is an
                                     error; 1: replace it (it must be empty, or hold only
                                     dataset files with an a2pack manifest or upstream's
                                     steps.npy and metadata.db; otherwise
                                     A2PACK_E_INVALID_ARGUMENT saying why) */
  a2pack_progress_fn progress;    /* runs done of total; may be NULL (default) */
  void *progress_user;
  /* append: told about content the dataset holds that a2pack did not write
   * and keeps (runs another tool appended, adopted into the manifest), one
   * message each, before anything is added. May be NULL (default). */
  a2pack_dataset_message_fn on_warning;
  void *on_warning_user;
  int32_t skip_bad;               /* 0 (default): the first unreadable or corrupt run is an
                                     error naming it; 1: skip it (no run id is used), tell
                                     on_bad_input and count it in runs_skipped */
  a2pack_dataset_bad_input_fn on_bad_input; /* may be NULL */
  void *on_bad_input_user;
  int64_t lock_timeout_ms;        /* append / replacing build: how long to wait for readers
                                     that are loading the dataset (or another writer) to
                                     let go of its lock. Default 60000; 0: fail at once;
                                     < 0: wait as long as it takes. */
  int32_t copy_steps;             /* append only. 0 (default): extend steps.npy in place,
                                     writing the new rows and its header only; 1: write a
                                     new steps.npy (the old rows copied) and rename it into
                                     place - a copy of the whole file, for folders other
                                     programs read without a2pack's lock while appending.
                                     A file whose header has no room for the new count, or
                                     that has another hard link, is always copied. */
  uint64_t shard_rows;            /* build: 0 (default) writes one steps.npy; N writes the
                                     sharded layout, shards of whole runs of at most N rows
                                     (docs/dataset.md). append to a sharded dataset: the new
                                     shards' size, 0 = the dataset's; an append writes new
                                     shards only. Not for a single-file dataset's append. */
  /* Told what a build or an append did besides its work, one message each:
   * build, the folders that builds of out_dir which died left beside it,
   * removed (only folders a2pack marked as its own, holding only dataset
   * files) or left alone and why; append, what its recovery did first (an
   * interrupted append undone, leftover files removed). May be NULL
   * (default). */
  a2pack_dataset_message_fn on_note;
  void *on_note_user;
  int32_t allow_duplicates;       /* 0 (default): a run whose content digest (docs/dataset.md,
                                     "Run digests") matches a run the dataset holds, or
                                     another run of the same build or append, makes the call
                                     fail with A2PACK_E_INVALID_ARGUMENT saying how many and
                                     which, changing nothing; 1: write them, each copy
                                     recorded as one (result.runs_duplicated; `verify` then
                                     notes them instead of reporting them) */
} a2pack_dataset_build_options;

A2PACK_API void a2pack_dataset_build_options_init(a2pack_dataset_build_options *opts);

typedef struct a2pack_dataset_build_result {
  size_t size;          /* sizeof(a2pack_dataset_build_result), set by the caller */
  uint64_t runs_added;
  uint64_t rows_added;
  uint64_t total_runs;  /* of the dataset after the call */
  uint64_t total_rows;
  uint64_t runs_skipped;  /* bad runs skipped (skip_bad) */
  uint64_t runs_adopted;  /* runs another tool had appended, now recorded (append) */
  int32_t steps_copied;   /* append: 1 when steps.npy was rewritten rather than extended */
  uint64_t runs_duplicated;  /* allow_duplicates: runs written that repeat another run */
  uint64_t digests_recorded; /* append: existing runs that had no content digest (a dataset
                                written before a2pack recorded them, runs another tool
                                added) and got one first */
} a2pack_dataset_build_result;

/* Build a dataset in `out_dir` from `input`: a folder (every *.a2run2 under
 * it, in path order) or a packfile (its entries in order). Run ids are
 * 0..n-1. Runs that repeat another run of the input are refused unless
 * opts->allow_duplicates (see there). The folder is written under a
 * temporary sibling name and renamed into place. `opts` and `result` may be
 * NULL. */
A2PACK_API a2pack_status a2pack_dataset_build(const char *input, const char *out_dir,
                                              const a2pack_dataset_build_options *opts,
                                              a2pack_dataset_build_result *result);

/* Append the runs of `input` (as for build) to the dataset in `dataset_dir`,
 * with fresh run ids and first_step_idx after the existing ones. Runs the
 * dataset already holds, or that repeat each other, are refused unless
 * opts->allow_duplicates (see there); existing runs without a content
 * digest get one first (computed from their rows, once). Takes an
 * exclusive lock on the folder, waiting up to opts->lock_timeout_ms for
 * readers that are loading it (then A2PACK_E_IO naming the folder and the
 * holders' pids), and first repairs what an interrupted append of a2pack
 * left (as its journal records). Runs another tool appended without updating
 * the manifest are kept: adopted when consistent (opts->on_warning is told),
 * otherwise the append fails with A2PACK_E_CORRUPT naming them, changing
 * nothing. `overwrite` is ignored. `opts` and `result` may be NULL. */
A2PACK_API a2pack_status a2pack_dataset_append(const char *dataset_dir, const char *input,
                                               const a2pack_dataset_build_options *opts,
                                               a2pack_dataset_build_result *result);

/* One run of a2pack_dataset_build_from_rows: its row of metadata.db's `runs`
 * table (docs/dataset.md) but for id and first_step_idx, which the call
 * numbers. An element of an array, so this layout never changes. */
typedef struct a2pack_dataset_run_record {
  uint64_t num_steps;   /* its rows, 0..65536 */
  int64_t max_score;
  int64_t highest_tile;
  int64_t start_time;   /* unix seconds */
  double elapsed_s;
  const char *engine;   /* UTF-8, NUL-terminated; NULL: none (SQL NULL) */
} a2pack_dataset_run_record;

typedef struct a2pack_dataset_rows_options {
  size_t size;               /* sizeof(a2pack_dataset_rows_options) */
  int32_t overwrite;         /* as a2pack_dataset_build_options.overwrite (default 0) */
  int64_t lock_timeout_ms;   /* as a2pack_dataset_build_options (default 60000) */
  const char *source_input;  /* manifest.json's sources[0].input; NULL (default): "rows" */
  const char *source_kind;   /* its kind ("dir", "pack", ...); NULL (default): "rows" */
  uint64_t shard_rows;       /* as a2pack_dataset_build_options.shard_rows (default 0: one
                                steps.npy; N: shards of whole runs of at most N rows) */
  a2pack_dataset_message_fn on_note; /* as a2pack_dataset_build_options.on_note (default
                                        NULL) */
  void *on_note_user;
  int32_t allow_duplicates;  /* as a2pack_dataset_build_options.allow_duplicates (default 0:
                                runs that repeat each other are refused, naming them) */
} a2pack_dataset_rows_options;

A2PACK_API void a2pack_dataset_rows_options_init(a2pack_dataset_rows_options *opts);

/* Build a dataset in `out_dir` from rows computed elsewhere (by distributed
 * workers, e.g. a2pack.beam's BuildDataset): `rows` holds n_rows 32-byte rows
 * (the row layout above), run i's runs[i].num_steps rows in turn, with run_id
 * i and step_index 0, 1, ...; runs[i] is run i's metadata. The folder is
 * written exactly as a2pack_dataset_build writes it (same code: steps.npy,
 * metadata.db and manifest.json are byte-identical to a build of the same runs
 * in the same order, given the same source_input/source_kind and time stamp,
 * see SOURCE_DATE_EPOCH in docs/dataset.md), under a temporary sibling name
 * renamed into place. Checked before anything is written: rows whose run_id or
 * step_index disagree with the runs' num_steps, a num_steps above 65536, or
 * counts that do not add up are A2PACK_E_INVALID_ARGUMENT naming the row or
 * run. `rows` and `runs` are read during the call only (the caller keeps
 * ownership). Any thread; `opts` and `result` may be NULL. */
A2PACK_API a2pack_status a2pack_dataset_build_from_rows(const char *out_dir, const void *rows,
                                                        uint64_t n_rows,
                                                        const a2pack_dataset_run_record *runs,
                                                        uint64_t n_runs,
                                                        const a2pack_dataset_rows_options *opts,
                                                        a2pack_dataset_build_result *result);

/* One run of a2pack_dataset_append_runs: the bytes of an .a2run2 file, in
 * memory or in a file. An element of an array, so this layout never changes. */
typedef struct a2pack_dataset_run_bytes {
  const void *data;   /* `length` bytes, read during the call only; NULL: read them from
                         `path` at `offset` */
  const char *path;   /* with data NULL: the file holding them (a run file with offset 0
                         and length its size, or a file of many runs end to end) */
  uint64_t offset;
  uint64_t length;
  const char *label;  /* names the run in errors, to on_bad_input and in skip_bad's report
                         (UTF-8); NULL: "run <i>" */
} a2pack_dataset_run_bytes;

/* Append the runs `runs[0..n_runs)` to the dataset in `dataset_dir` exactly as
 * a2pack_dataset_append appends the runs of a folder in that order (same
 * code, same locking, recovery, duplicate checks and commit: the dataset's
 * files are byte-identical to that append's but for the manifest's source),
 * for runs that are not a folder of files: made in memory by a game loop, or
 * staged by distributed writers. `source_input` and `source_kind` are what the
 * manifest records as the append's source (NULL: "runs"). A range that lies
 * beyond its file is A2PACK_E_CORRUPT naming the run; nothing is changed on
 * any error. `runs` and what it points to are read during the call only. Any
 * thread; `opts` and `result` may be NULL. */
A2PACK_API a2pack_status a2pack_dataset_append_runs(const char *dataset_dir,
                                                    const a2pack_dataset_run_bytes *runs,
                                                    uint64_t n_runs, const char *source_input,
                                                    const char *source_kind,
                                                    const a2pack_dataset_build_options *opts,
                                                    a2pack_dataset_build_result *result);

enum a2pack_dataset_verify_flags {
  /* First bring an interrupted append back to the committed state: remove
   * temporary files, and the uncommitted runs and rows of a2pack's own
   * append as its journal (append-journal.json) names them; then record in
   * the manifest consistent runs another tool appended (never deleted); then
   * record every run's content digest in metadata.db where it is missing or
   * wrong (datasets written before a2pack recorded them). */
  A2PACK_DATASET_VERIFY_REPAIR = 1,
  /* SQLite's integrity_check on metadata.db instead of quick_check (also
   * compares each index with its table; slower). */
  A2PACK_DATASET_VERIFY_FULL = 2,
  /* With REPAIR: delete runs and rows the manifest does not record that no
   * append journal of a2pack explains and that cannot be adopted (they do
   * not fit the rows). Without it such content makes repair fail, naming it. */
  A2PACK_DATASET_VERIFY_DISCARD_UNRECORDED = 4
};

/* Check a dataset completely: files, header and dtype, manifest CRC, row
 * counts, every row against its run (run_id, step_index, move, values), and
 * every run's content digest against the stored one. A2PACK_OK when sound;
 * otherwise the status of the first problem, with the problems in the
 * message: runs that repeat earlier runs of the dataset and were not written
 * with allow_duplicates are A2PACK_E_INVALID_ARGUMENT (when nothing else is
 * wrong). `*out_report_json` (may be NULL; owned, release with a2pack_free)
 * receives {"ok", "rows", "runs", "errors", "notes", "warnings", "actions",
 * "duplicates": {"runs", "allowed", "listed": [{"id", "same_as",
 * "allowed"}, ...the first 100]}, "runs_without_digest"} in both cases. */
A2PACK_API a2pack_status a2pack_dataset_verify(const char *dataset_dir, uint32_t flags,
                                               uint32_t workers, char **out_report_json);

typedef struct a2pack_dataset_open_options {
  size_t size;                /* sizeof(a2pack_dataset_open_options) */
  int32_t mmap;               /* 0 (default): read the rows into RAM with large parallel
                                 reads; 1: map steps.npy (MADV_RANDOM, MADV_HUGEPAGE) */
  int32_t verify_crc;         /* 1 (default): check the rows against manifest.json's CRC32C */
  int32_t huge_pages;         /* 1 (default): back RAM rows with transparent huge pages;
                                 with mmap, hint them for the mapping: faster gathers once
                                 the file is cached, but a cold fault reads 2 MiB - set 0
                                 to map a file larger than RAM (or use a shard stream) */
  uint32_t workers;           /* threads for loading and checking, 0 (default) = all cores */
  int32_t allow_extra_files;  /* 0 (default): a file a dataset does not hold is an error */
} a2pack_dataset_open_options;

A2PACK_API void a2pack_dataset_open_options_init(a2pack_dataset_open_options *opts);

/* Open a dataset and load its committed rows. Refuses, naming the file: a
 * missing steps.npy or metadata.db, an unexpected file, an NPY header or
 * dtype other than the step dtype (A2PACK_E_UNSUPPORTED), a truncated
 * steps.npy or row counts that disagree between steps.npy, manifest.json and
 * metadata.db (A2PACK_E_CORRUPT), a CRC mismatch (A2PACK_E_CHECKSUM). A
 * dataset without manifest.json (written by the upstream tool) opens without
 * a CRC check. A sharded dataset (built with shard_rows) is read into RAM as
 * one array, each shard checked against its CRC; mapping one is
 * A2PACK_E_UNSUPPORTED (stream it: a2pack_shard_stream_open). `opts` may be
 * NULL. Close with a2pack_dataset_close. */
A2PACK_API a2pack_status a2pack_dataset_open(const char *dataset_dir,
                                             const a2pack_dataset_open_options *opts,
                                             a2pack_dataset **out);

/* Release a dataset (its rows too). Accepts NULL. */
A2PACK_API void a2pack_dataset_close(a2pack_dataset *ds);

typedef struct a2pack_dataset_info {
  size_t size;               /* sizeof(a2pack_dataset_info), set by the caller */
  uint64_t rows;             /* committed rows */
  uint64_t runs;             /* committed runs */
  uint64_t next_run_id;      /* the id the next appended run gets */
  const uint8_t *data;       /* view: rows * 32 bytes, row 0 first (NULL when rows is 0);
                                64-byte aligned in RAM mode */
  int32_t mapped;            /* 1 when the rows are a mapping of steps.npy */
  int32_t huge_pages;        /* 1 when the kernel accepted the huge-page hint */
  int32_t has_manifest;      /* 0 for a dataset from the upstream tool */
  uint32_t steps_crc32c;     /* from the manifest (0 without one) */
  uint64_t uncommitted_rows; /* rows past the committed ones (interrupted append), ignored */
} a2pack_dataset_info;

/* Fill `out` (set out->size first). */
A2PACK_API a2pack_status a2pack_dataset_get_info(const a2pack_dataset *ds,
                                                 a2pack_dataset_info *out);
/* The same function in the one spelling every section uses; a2pack_dataset_get_info is
 * its alias, kept for compiled callers. */
A2PACK_API a2pack_status a2pack_dataset_info_get(const a2pack_dataset *ds,
                                                 a2pack_dataset_info *out);

/* Copy rows idx[0..n) into out_rows (n * 32 bytes), in index order, splitting
 * the batch over up to `workers` threads (0 = all cores; 1 = the calling
 * thread only; small batches stay on the calling thread). An index outside
 * [0, rows) fails with A2PACK_E_OUT_OF_RANGE naming it, before anything is
 * written. */
A2PACK_API a2pack_status a2pack_dataset_gather(const a2pack_dataset *ds, const int64_t *idx,
                                               size_t n, void *out_rows, uint32_t workers);

/* Destination arrays of a column gather; NULL members are skipped. */
typedef struct a2pack_dataset_columns {
  size_t size;             /* sizeof(a2pack_dataset_columns) */
  uint8_t *exponents;      /* n * 16: tile exponents, cell 0 (top-left) first */
  uint64_t *boards;        /* n */
  uint8_t *moves;          /* n: chosen move 0..3 */
  uint8_t *legal;          /* n * 4: 1 where the move is legal, else 0 (a numpy bool array) */
  uint8_t *legal_mask;     /* n: the ev_legal bitmask */
  float *ev_values;        /* n * 4 */
  uint32_t *run_ids;       /* n */
  uint16_t *step_indices;  /* n */
} a2pack_dataset_columns;

/* Gather rows idx[0..n) straight into training arrays (see
 * a2pack_dataset_columns), in one pass. Indices and workers as for
 * a2pack_dataset_gather. */
A2PACK_API a2pack_status a2pack_dataset_gather_columns(const a2pack_dataset *ds,
                                                       const int64_t *idx, size_t n,
                                                       const a2pack_dataset_columns *out,
                                                       uint32_t workers);

/* A value bound to a `?` of a filter. */
typedef enum a2pack_sql_type {
  A2PACK_SQL_NULL = 0,
  A2PACK_SQL_INTEGER = 1,
  A2PACK_SQL_REAL = 2,
  A2PACK_SQL_TEXT = 3
} a2pack_sql_type;

typedef struct a2pack_sql_param {
  a2pack_sql_type type;
  int64_t integer;
  double real;
  const char *text;  /* UTF-8, text_len bytes (copied during the call) */
  size_t text_len;
} a2pack_sql_param;

/* Step indices (ascending, owned int64 array: release with a2pack_free) of
 * the committed runs matching `where`: an SQL expression over the columns of
 * metadata.db's `runs` table (id, first_step_idx, num_steps, max_score,
 * highest_tile, engine, start_time, elapsed_s), e.g.
 * "max_score BETWEEN ? AND ?", with `?` bound to params[0..n_params). NULL or
 * "" selects every run. An SQL error, a statement that writes, or a wrong
 * parameter count is A2PACK_E_INVALID_ARGUMENT with SQLite's message. With no
 * match, *out_indices is NULL and *out_n 0. The query runs to its end:
 * a2pack_dataset_select_opts (end of this section) can stop it. */
A2PACK_API a2pack_status a2pack_dataset_select(const a2pack_dataset *ds, const char *where,
                                               const a2pack_sql_param *params, size_t n_params,
                                               int64_t **out_indices, size_t *out_n);

/* Ids (ascending, owned int64 array) of the committed runs matching `where`. */
A2PACK_API a2pack_status a2pack_dataset_select_runs(const a2pack_dataset *ds, const char *where,
                                                    const a2pack_sql_param *params,
                                                    size_t n_params, int64_t **out_ids,
                                                    size_t *out_n);

/* Run-disjoint train/validation split of the runs matching `where` (as for
 * select; NULL = all). With `val_where` (an SQL expression, its parameters
 * following `params` in one numbering: use plain `?`), the matching runs are
 * the validation set; otherwise each run goes to validation with probability
 * `val_fraction` by a hash of (seed, run id), so a run keeps its side when the
 * dataset grows. Outputs are owned int64 step-index arrays (ascending). */
A2PACK_API a2pack_status a2pack_dataset_split(const a2pack_dataset *ds, const char *where,
                                              const a2pack_sql_param *params, size_t n_params,
                                              double val_fraction, uint64_t seed,
                                              const char *val_where,
                                              const a2pack_sql_param *val_params,
                                              size_t n_val_params, int64_t **out_train,
                                              size_t *out_n_train, int64_t **out_val,
                                              size_t *out_n_val);

/* Statistics as a JSON object (owned string, release with a2pack_free): rows,
 * runs, run_steps and max_score {min,max,mean}, highest_tile and engine
 * counts, moves and legal-move-count histograms, manifest fields. */
A2PACK_API a2pack_status a2pack_dataset_stats_json(const a2pack_dataset *ds, uint32_t workers,
                                                   char **out_json);

/* Epoch sampler over `indices[0..n)` (copied), or over 0..n-1 when `indices`
 * is NULL: batches of `batch_size` of a permutation that depends only on
 * (seed, epoch) — same seed, same batches, on any platform. The last batch is
 * short unless `drop_last`. At most 2^32 - 1 indices. Starts at epoch 0. */
A2PACK_API a2pack_status a2pack_dataset_sampler_open(const int64_t *indices, uint64_t n,
                                                     uint64_t seed, size_t batch_size,
                                                     int32_t drop_last,
                                                     a2pack_dataset_sampler **out);

/* Release a sampler. Accepts NULL. */
A2PACK_API void a2pack_dataset_sampler_close(a2pack_dataset_sampler *s);

/* Reshuffle for `epoch` (O(n)). */
A2PACK_API a2pack_status a2pack_dataset_sampler_set_epoch(a2pack_dataset_sampler *s,
                                                          uint64_t epoch);

/* Number of batches per epoch (0 for NULL). */
A2PACK_API size_t a2pack_dataset_sampler_batch_count(const a2pack_dataset_sampler *s);

/* Batch `b` of the current epoch into out (room for batch_size values);
 * `*out_n` receives its length. A2PACK_E_OUT_OF_RANGE for b >= batch count. */
A2PACK_API a2pack_status a2pack_dataset_sampler_batch(const a2pack_dataset_sampler *s, size_t b,
                                                      int64_t *out, size_t *out_n);

/* ---- checkpoints and elastic ranks --------------------------------------
 * A sampler's position is (seed, epoch, next batch): a checkpoint is that
 * triple plus checks, a small versioned byte string, never the permutation.
 * Ranks share one global sequence of batches whatever their number; rank r
 * of `world` takes a contiguous slice of each global batch, so at every step
 * the ranks' slices are disjoint and together make the one-rank batch, and a
 * run saved at one world size resumes at another without a row seen twice or
 * dropped in that epoch. */

/* The epoch the sampler is at (0 for NULL). */
A2PACK_API uint64_t a2pack_dataset_sampler_epoch(const a2pack_dataset_sampler *s);

/* Rank `rank` of `world`'s part of global batch `b` of the current epoch:
 * positions [floor(rank*L/world), floor((rank+1)*L/world)) of the batch (L
 * its length) into out (room for batch_size values); `*out_n` gets the
 * part's length, which may be 0. A2PACK_E_INVALID_ARGUMENT for world == 0 or
 * rank >= world; A2PACK_E_OUT_OF_RANGE for b >= batch count. */
A2PACK_API a2pack_status a2pack_dataset_sampler_part(const a2pack_dataset_sampler *s, size_t b,
                                                     uint32_t rank, uint32_t world, int64_t *out,
                                                     size_t *out_n);

/* Checkpoint with `next_batch` the first global batch not yet consumed: an
 * owned byte string (release with a2pack_free) of a fixed small size holding
 * a magic, a version, seed, epoch, next batch, batch size, drop_last, the
 * number and a hash of the sampled indices, and a CRC32C. */
A2PACK_API a2pack_status a2pack_dataset_sampler_state(const a2pack_dataset_sampler *s,
                                                      uint64_t next_batch, uint8_t **out_data,
                                                      size_t *out_len);
/* The same function in the one spelling every section uses; a2pack_dataset_sampler_state is
 * its alias, kept for compiled callers. */
A2PACK_API a2pack_status a2pack_dataset_sampler_state_save(const a2pack_dataset_sampler *s,
                                                           uint64_t next_batch,
                                                           uint8_t **out_data,
                                                           size_t *out_len);

/* Restore a checkpoint: the sampler adopts its seed and epoch (reshuffling)
 * and `*out_next_batch` (may be NULL) gets its next batch. Refused, with a
 * message naming what differs and the sampler unchanged: another format or a
 * damaged state (A2PACK_E_INVALID_ARGUMENT / A2PACK_E_CORRUPT), another
 * version (A2PACK_E_UNSUPPORTED), a state taken over other indices or with
 * another batch size or drop_last (A2PACK_E_INVALID_ARGUMENT). */
A2PACK_API a2pack_status a2pack_dataset_sampler_load_state(a2pack_dataset_sampler *s,
                                                           const void *data, size_t len,
                                                           uint64_t *out_next_batch);
/* The same function in the one spelling every section uses; a2pack_dataset_sampler_load_state is
 * its alias, kept for compiled callers. */
A2PACK_API a2pack_status a2pack_dataset_sampler_state_load(a2pack_dataset_sampler *s,
                                                           const void *data,
                                                           size_t len,
                                                           uint64_t *out_next_batch);

/* ---- mixing sampler ------------------------------------------------------
 * One endless global sequence of batches drawn from several sources (index
 * selections of one dataset, or of several datasets) with weights. Batch b
 * holds exactly floor(w_i*B) or ceil(w_i*B) rows of source i (w normalised
 * to sum 1): floors first, the rest by largest remainder; when g sources tie
 * for t leftover rows, the rows rotate through them one place per batch, so
 * every g batches each gets t. The counts never drift. Each source walks its own seeded permutation and reshuffles
 * (its own epoch) when it runs out; the rows of a batch are then shuffled
 * together, so every rank's part (as a2pack_dataset_sampler_part) holds the
 * sources in proportion. Any batch can be fetched directly, in any order,
 * from batch 0 or the last weight change / loaded state on. Not thread-safe:
 * one thread at a time. At most 256 sources; batch size 1..2^32-1. */
typedef struct a2pack_dataset_mix a2pack_dataset_mix;

typedef struct a2pack_dataset_mix_source {
  const int64_t *indices; /* the rows to sample (copied), or NULL for 0..n-1 */
  uint64_t n;
} a2pack_dataset_mix_source;

/* Open a mix of `n_sources` sources with `weights` (finite, >= 0, positive
 * sum; a source with a positive weight must have rows). */
A2PACK_API a2pack_status a2pack_dataset_mix_open(const a2pack_dataset_mix_source *sources,
                                                 const double *weights, size_t n_sources,
                                                 uint64_t seed, size_t batch_size,
                                                 a2pack_dataset_mix **out);

/* Release a mix. Accepts NULL. */
A2PACK_API void a2pack_dataset_mix_close(a2pack_dataset_mix *m);

/* Rank `rank` of `world`'s part of global batch `b` (world 1, rank 0: the
 * whole batch): step indices to out_indices and source numbers to
 * out_sources (either may be NULL; room for batch_size values each);
 * `*out_n` gets the part's length. A2PACK_E_OUT_OF_RANGE for a batch before
 * the last set_weights / load_state. */
A2PACK_API a2pack_status a2pack_dataset_mix_batch(a2pack_dataset_mix *m, uint64_t b,
                                                  uint32_t rank, uint32_t world,
                                                  int64_t *out_indices, uint32_t *out_sources,
                                                  size_t *out_n);

/* Rows of each source in batch `b` (out_counts: n_sources values). */
A2PACK_API a2pack_status a2pack_dataset_mix_counts(const a2pack_dataset_mix *m, uint64_t b,
                                                   uint64_t *out_counts);

/* Rows of each source consumed by batches before `b` (n_sources values):
 * a source's epoch is that over its row count. */
A2PACK_API a2pack_status a2pack_dataset_mix_consumed(const a2pack_dataset_mix *m, uint64_t b,
                                                     uint64_t *out_consumed);

/* The current weights, as given (n_sources values). */
A2PACK_API a2pack_status a2pack_dataset_mix_get_weights(const a2pack_dataset_mix *m,
                                                        double *out_weights);

/* Mix with `weights` from batch `from_batch` on (batches before it keep the
 * old proportions and can no longer be fetched). */
A2PACK_API a2pack_status a2pack_dataset_mix_set_weights(a2pack_dataset_mix *m,
                                                        const double *weights, size_t n,
                                                        uint64_t from_batch);

/* Checkpoint with `next_batch` the first batch not yet consumed: owned bytes
 * (release with a2pack_free), 44 + 32 per source: magic, version, seed,
 * batch size, next batch, and per source its row count, index hash, weight
 * and rows consumed; CRC32C. */
A2PACK_API a2pack_status a2pack_dataset_mix_state(const a2pack_dataset_mix *m,
                                                  uint64_t next_batch, uint8_t **out_data,
                                                  size_t *out_len);
/* The same function in the one spelling every section uses; a2pack_dataset_mix_state is
 * its alias, kept for compiled callers. */
A2PACK_API a2pack_status a2pack_dataset_mix_state_save(const a2pack_dataset_mix *m,
                                                       uint64_t next_batch,
                                                       uint8_t **out_data,
                                                       size_t *out_len);

/* Restore a checkpoint: the mix adopts its seed and weights (call
 * set_weights afterwards to change them) and `*out_next_batch` (may be
 * NULL) gets its next batch. Refused, naming what differs and leaving the
 * mix unchanged: another format, version, source count, batch size, a
 * source with other rows, or a damaged state. */
A2PACK_API a2pack_status a2pack_dataset_mix_load_state(a2pack_dataset_mix *m, const void *data,
                                                       size_t len, uint64_t *out_next_batch);
/* The same function in the one spelling every section uses; a2pack_dataset_mix_load_state is
 * its alias, kept for compiled callers. */
A2PACK_API a2pack_status a2pack_dataset_mix_state_load(a2pack_dataset_mix *m,
                                                       const void *data,
                                                       size_t len,
                                                       uint64_t *out_next_batch);

/* Limits on one selection (the _opts forms of select, select_runs and
 * split). A filter is any SQL expression, so a query can run for very long
 * (a recursive CTE never ends); these stop it. A stopped query fails with
 * A2PACK_E_INTERRUPTED, its message naming the query (and the deadline when
 * that stopped it), and hands out nothing. */
typedef struct a2pack_dataset_query_options {
  size_t size;          /* sizeof(a2pack_dataset_query_options) */
  int64_t timeout_ms;   /* > 0: stop the call after this long; 0 (default): no deadline */
  /* Called from the calling thread about every 10 ms while the query runs,
   * with done = milliseconds since the call began and total = timeout_ms;
   * non-zero stops the query (a binding's way to let Ctrl-C through). NULL
   * (default): none. */
  a2pack_progress_fn progress;
  void *progress_user;
} a2pack_dataset_query_options;

A2PACK_API void a2pack_dataset_query_options_init(a2pack_dataset_query_options *opts);

/* As a2pack_dataset_select, a2pack_dataset_select_runs and
 * a2pack_dataset_split, within `opts` (NULL: no limits). */
A2PACK_API a2pack_status a2pack_dataset_select_opts(const a2pack_dataset *ds, const char *where,
                                                    const a2pack_sql_param *params,
                                                    size_t n_params,
                                                    const a2pack_dataset_query_options *opts,
                                                    int64_t **out_indices, size_t *out_n);
A2PACK_API a2pack_status a2pack_dataset_select_runs_opts(const a2pack_dataset *ds,
                                                         const char *where,
                                                         const a2pack_sql_param *params,
                                                         size_t n_params,
                                                         const a2pack_dataset_query_options *opts,
                                                         int64_t **out_ids, size_t *out_n);
A2PACK_API a2pack_status a2pack_dataset_split_opts(
    const a2pack_dataset *ds, const char *where, const a2pack_sql_param *params, size_t n_params,
    double val_fraction, uint64_t seed, const char *val_where, const a2pack_sql_param *val_params,
    size_t n_val_params, const a2pack_dataset_query_options *opts, int64_t **out_train,
    size_t *out_n_train, int64_t **out_val, size_t *out_n_val);

typedef struct a2pack_dataset_api {
  size_t size;
  void (*build_options_init)(a2pack_dataset_build_options *);
  a2pack_status (*build)(const char *, const char *, const a2pack_dataset_build_options *,
                         a2pack_dataset_build_result *);
  a2pack_status (*append)(const char *, const char *, const a2pack_dataset_build_options *,
                          a2pack_dataset_build_result *);
  a2pack_status (*verify)(const char *, uint32_t, uint32_t, char **);
  void (*open_options_init)(a2pack_dataset_open_options *);
  a2pack_status (*open)(const char *, const a2pack_dataset_open_options *, a2pack_dataset **);
  void (*close)(a2pack_dataset *);
  a2pack_status (*get_info)(const a2pack_dataset *, a2pack_dataset_info *);
  a2pack_status (*gather)(const a2pack_dataset *, const int64_t *, size_t, void *, uint32_t);
  a2pack_status (*gather_columns)(const a2pack_dataset *, const int64_t *, size_t,
                                  const a2pack_dataset_columns *, uint32_t);
  a2pack_status (*select)(const a2pack_dataset *, const char *, const a2pack_sql_param *, size_t,
                          int64_t **, size_t *);
  a2pack_status (*select_runs)(const a2pack_dataset *, const char *, const a2pack_sql_param *,
                               size_t, int64_t **, size_t *);
  a2pack_status (*split)(const a2pack_dataset *, const char *, const a2pack_sql_param *, size_t,
                         double, uint64_t, const char *, const a2pack_sql_param *, size_t,
                         int64_t **, size_t *, int64_t **, size_t *);
  a2pack_status (*stats_json)(const a2pack_dataset *, uint32_t, char **);
  a2pack_status (*sampler_open)(const int64_t *, uint64_t, uint64_t, size_t, int32_t,
                                a2pack_dataset_sampler **);
  void (*sampler_close)(a2pack_dataset_sampler *);
  a2pack_status (*sampler_set_epoch)(a2pack_dataset_sampler *, uint64_t);
  size_t (*sampler_batch_count)(const a2pack_dataset_sampler *);
  a2pack_status (*sampler_batch)(const a2pack_dataset_sampler *, size_t, int64_t *, size_t *);
  /* added later */
  void (*rows_options_init)(a2pack_dataset_rows_options *);
  a2pack_status (*build_from_rows)(const char *, const void *, uint64_t,
                                   const a2pack_dataset_run_record *, uint64_t,
                                   const a2pack_dataset_rows_options *,
                                   a2pack_dataset_build_result *);
  /* added later: checkpoints, elastic ranks, mixing */
  uint64_t (*sampler_epoch)(const a2pack_dataset_sampler *);
  a2pack_status (*sampler_part)(const a2pack_dataset_sampler *, size_t, uint32_t, uint32_t,
                                int64_t *, size_t *);
  a2pack_status (*sampler_state)(const a2pack_dataset_sampler *, uint64_t, uint8_t **, size_t *);
  a2pack_status (*sampler_load_state)(a2pack_dataset_sampler *, const void *, size_t,
                                      uint64_t *);
  a2pack_status (*mix_open)(const a2pack_dataset_mix_source *, const double *, size_t, uint64_t,
                            size_t, a2pack_dataset_mix **);
  void (*mix_close)(a2pack_dataset_mix *);
  a2pack_status (*mix_batch)(a2pack_dataset_mix *, uint64_t, uint32_t, uint32_t, int64_t *,
                             uint32_t *, size_t *);
  a2pack_status (*mix_counts)(const a2pack_dataset_mix *, uint64_t, uint64_t *);
  a2pack_status (*mix_consumed)(const a2pack_dataset_mix *, uint64_t, uint64_t *);
  a2pack_status (*mix_get_weights)(const a2pack_dataset_mix *, double *);
  a2pack_status (*mix_set_weights)(a2pack_dataset_mix *, const double *, size_t, uint64_t);
  a2pack_status (*mix_state)(const a2pack_dataset_mix *, uint64_t, uint8_t **, size_t *);
  a2pack_status (*mix_load_state)(a2pack_dataset_mix *, const void *, size_t, uint64_t *);
  /* added later: limits on selections */
  void (*query_options_init)(a2pack_dataset_query_options *);
  a2pack_status (*select_opts)(const a2pack_dataset *, const char *, const a2pack_sql_param *,
                               size_t, const a2pack_dataset_query_options *, int64_t **,
                               size_t *);
  a2pack_status (*select_runs_opts)(const a2pack_dataset *, const char *,
                                    const a2pack_sql_param *, size_t,
                                    const a2pack_dataset_query_options *, int64_t **, size_t *);
  a2pack_status (*split_opts)(const a2pack_dataset *, const char *, const a2pack_sql_param *,
                              size_t, double, uint64_t, const char *, const a2pack_sql_param *,
                              size_t, const a2pack_dataset_query_options *, int64_t **, size_t *,
                              int64_t **, size_t *);
  /* added later: the one spelling of info and state (get_info, sampler_state,
   * sampler_load_state, mix_state and mix_load_state are their aliases) */
  a2pack_status (*info_get)(const a2pack_dataset *, a2pack_dataset_info *);
  a2pack_status (*sampler_state_save)(const a2pack_dataset_sampler *, uint64_t, uint8_t **,
                                      size_t *);
  a2pack_status (*sampler_state_load)(a2pack_dataset_sampler *, const void *, size_t,
                                      uint64_t *);
  a2pack_status (*mix_state_save)(const a2pack_dataset_mix *, uint64_t, uint8_t **, size_t *);
  a2pack_status (*mix_state_load)(a2pack_dataset_mix *, const void *, size_t, uint64_t *);
  /* added later: runs handed over rather than a folder */
  a2pack_status (*append_runs)(const char *, const a2pack_dataset_run_bytes *, uint64_t,
                               const char *, const char *, const a2pack_dataset_build_options *,
                               a2pack_dataset_build_result *);
} a2pack_dataset_api;

/* (end of section dataset) */

/* ======================================================================
 * Section: bag
 * Bagz / Säckli record files (docs/bag.md), format-compatible with the
 * `bagz` and `sackli` packages: a records section (each record stored, or one
 * zstd frame per non-empty record in .bagz) and a limits section of u64 end
 * offsets, at the file's tail or in a sibling "limits.<name>" file.
 * ====================================================================== */

typedef enum a2pack_bag_compression {
  A2PACK_BAG_COMPRESSION_AUTO = 0, /* by extension: .bagz → zstd, anything else → none */
  A2PACK_BAG_COMPRESSION_NONE = 1,
  A2PACK_BAG_COMPRESSION_ZSTD = 2
} a2pack_bag_compression;

typedef enum a2pack_bag_limits_placement {
  A2PACK_BAG_LIMITS_TAIL = 0,    /* limits appended to the records file */
  A2PACK_BAG_LIMITS_SEPARATE = 1 /* limits in "limits.<basename>" beside it */
} a2pack_bag_limits_placement;

typedef enum a2pack_bag_limits_storage {
  A2PACK_BAG_LIMITS_ON_DISK = 0,  /* read limits from the file on each lookup */
  A2PACK_BAG_LIMITS_IN_MEMORY = 1 /* load (and fully check) all limits at open */
} a2pack_bag_limits_storage;

typedef enum a2pack_bag_access_pattern {
  A2PACK_BAG_ACCESS_SYSTEM = 0,     /* no hint */
  A2PACK_BAG_ACCESS_RANDOM = 1,     /* madvise / posix_fadvise RANDOM */
  A2PACK_BAG_ACCESS_SEQUENTIAL = 2  /* madvise / posix_fadvise SEQUENTIAL */
} a2pack_bag_access_pattern;

typedef enum a2pack_bag_cache_policy {
  A2PACK_BAG_CACHE_SYSTEM = 0,          /* mmap; the page cache keeps what was read */
  A2PACK_BAG_CACHE_DROP_AFTER_READ = 1, /* pread + posix_fadvise(DONTNEED) */
  A2PACK_BAG_CACHE_DIRECT_IO = 2        /* O_DIRECT, aligned reads; buffered DROP_AFTER_READ
                                           where the filesystem refuses O_DIRECT */
} a2pack_bag_cache_policy;

typedef enum a2pack_bag_sharding {
  A2PACK_BAG_SHARDING_CONCATENATED = 0, /* shards one after another */
  A2PACK_BAG_SHARDING_INTERLEAVED = 1   /* round-robin: index g → shard g % S, record g / S */
} a2pack_bag_sharding;

/* ---- writer ------------------------------------------------------------ */

typedef struct a2pack_bag_writer a2pack_bag_writer;

typedef struct a2pack_bag_writer_options {
  size_t size;                                 /* sizeof(a2pack_bag_writer_options) */
  a2pack_bag_compression compression;          /* default AUTO */
  int32_t zstd_level;                          /* 0 = zstd's default (3), as bagz */
  const uint8_t *zstd_dictionary;              /* NULL/0 = none; copied at open */
  size_t zstd_dictionary_len;
  a2pack_bag_limits_placement limits_placement; /* default TAIL */
  uint32_t workers;                            /* threads compressing write_batch, 0 = all cores */
  int32_t durable; /* default 1: commit fsyncs the files before the rename (and writeback
                      starts as records are written); 0: rename only, as bagz, which never
                      fsyncs — the file still appears only when complete, but a power loss
                      may leave it with missing data */
  int32_t direct_io; /* default 1: whole 1 MiB blocks of the records file may be written with
                        O_DIRECT, around the page cache (the last partial block through it),
                        where the filesystem allows it, else buffered as with 0. With
                        `durable`, every whole block goes direct: the fsync then has little
                        left. Without it, blocks go through the page cache and with O_DIRECT
                        at the same time (io_uring), the page cache taking them only until
                        the kernel would start throttling writers. Large files write faster
                        and leave the page cache to readers; the direct part is then not
                        cached after close. 0: every byte through the page cache */
} a2pack_bag_writer_options;

A2PACK_API void a2pack_bag_writer_options_init(a2pack_bag_writer_options *opts);

/* Start writing `path`. Nothing appears under `path` (or, for SEPARATE,
 * "limits.<name>") until a2pack_bag_writer_commit() succeeds: the bytes go to
 * temporary names in the same folder. `*out` is owned: release with
 * a2pack_bag_writer_close(). A writer is used by one thread at a time.
 * A sharded spec "dir/name@N.ext" writes the N files bagz names
 * "name-00000-of-0000N.ext" ..., record i going to shard i mod N (round
 * robin), each shard atomic as above and committed in order; "@*" and
 * comma-separated lists are A2PACK_E_INVALID_ARGUMENT for a writer. */
A2PACK_API a2pack_status a2pack_bag_writer_open(const char *path,
                                                const a2pack_bag_writer_options *opts,
                                                a2pack_bag_writer **out);

/* Append one record (copied; compressed when the file is). After any failed
 * write the writer only accepts close: commit fails with A2PACK_E_CLOSED. */
A2PACK_API a2pack_status a2pack_bag_writer_write(a2pack_bag_writer *w, const uint8_t *data,
                                                 size_t len);

/* Append `n` records in order: record i is data[offsets[i] - offsets[0],
 * offsets[i+1] - offsets[0]); `offsets` has n+1 non-decreasing entries.
 * Compression runs in parallel (options.workers). One call per batch. */
A2PACK_API a2pack_status a2pack_bag_writer_write_batch(a2pack_bag_writer *w, const uint8_t *data,
                                                       const uint64_t *offsets, size_t n);

/* Hand buffered bytes to the operating system (the file is still under its
 * temporary name). */
A2PACK_API a2pack_status a2pack_bag_writer_flush(a2pack_bag_writer *w);

/* Finish the file: write the limits, fsync (unless options.durable is 0) and
 * rename into place (for SEPARATE: the old records file is removed first, then
 * limits and records are renamed in). Calling it again is a no-op; writes after it fail with
 * A2PACK_E_CLOSED. */
A2PACK_API a2pack_status a2pack_bag_writer_commit(a2pack_bag_writer *w);

/* Records written so far. */
A2PACK_API uint64_t a2pack_bag_writer_count(const a2pack_bag_writer *w);

/* Release the writer. An uncommitted writer's temporary files are removed, so
 * closing without commit abandons the file. Accepts NULL. */
A2PACK_API void a2pack_bag_writer_close(a2pack_bag_writer *w);

/* ---- reader ------------------------------------------------------------ */

typedef struct a2pack_bag_reader a2pack_bag_reader;

typedef struct a2pack_bag_reader_options {
  size_t size;                                  /* sizeof(a2pack_bag_reader_options) */
  a2pack_bag_compression compression;           /* default AUTO (per shard, by extension) */
  const uint8_t *zstd_dictionary;               /* NULL/0 = none; copied at open */
  size_t zstd_dictionary_len;
  a2pack_bag_limits_placement limits_placement; /* default TAIL */
  a2pack_bag_limits_storage limits_storage;     /* default ON_DISK */
  a2pack_bag_access_pattern access_pattern;     /* default SYSTEM */
  a2pack_bag_cache_policy cache_policy;         /* default SYSTEM */
  a2pack_bag_sharding sharding;                 /* default CONCATENATED */
  uint32_t max_parallelism;                     /* threads per batch read, 0 = all cores */
  /* Appended: */
  uint64_t max_record_bytes; /* largest decoded size of a compressed record, checked from its
                                frame header before anything is allocated; larger records fail
                                with A2PACK_E_UNSUPPORTED naming file, record and limit.
                                Default A2PACK_BAG_DEFAULT_MAX_RECORD_BYTES; 0 = the default */
  uint32_t strict;           /* non-zero: bytes of a separate-limits records file after its
                                last limit fail the open (A2PACK_E_CORRUPT) instead of being
                                a note (a2pack_bag_reader_notes). Default 0 */
} a2pack_bag_reader_options;

/* Default of a2pack_bag_reader_options.max_record_bytes: 1 GiB. */
#define A2PACK_BAG_DEFAULT_MAX_RECORD_BYTES (UINT64_C(1) << 30)

A2PACK_API void a2pack_bag_reader_options_init(a2pack_bag_reader_options *opts);

/* Open a file spec: "f.bagz", "name@N.bagz" (name-00000-of-0000N.bagz ...),
 * "name@*.bagz" (N found on disk), or a comma-separated list of these. A
 * missing file, a missing limits file or malformed limits fail here with a
 * message naming the file. `*out` is owned: release with
 * a2pack_bag_reader_close(). A reader may be used from many threads at once. */
A2PACK_API a2pack_status a2pack_bag_reader_open(const char *spec,
                                                const a2pack_bag_reader_options *opts,
                                                a2pack_bag_reader **out);

/* Open the `n` files in `paths` (no spec expansion) as shards, in order. */
A2PACK_API a2pack_status a2pack_bag_reader_open_paths(const char *const *paths, size_t n,
                                                      const a2pack_bag_reader_options *opts,
                                                      a2pack_bag_reader **out);

/* Release a reader. Batches and indexes made from it stay valid. Accepts NULL. */
A2PACK_API void a2pack_bag_reader_close(a2pack_bag_reader *r);

/* Number of records over all shards. */
A2PACK_API uint64_t a2pack_bag_reader_count(const a2pack_bag_reader *r);

/* Size of all records sections (stored bytes: compressed for .bagz). */
A2PACK_API uint64_t a2pack_bag_reader_stored_bytes(const a2pack_bag_reader *r);

/* Number of shards. */
A2PACK_API size_t a2pack_bag_reader_shard_count(const a2pack_bag_reader *r);

/* Shard `i`: its path (view valid while the reader lives; NULL when i is out
 * of range), its record count, whether it is decompressed, and how its bytes
 * are read ("mmap", "pread+dontneed", "o_direct/<alignment>", "buffered
 * fallback (O_DIRECT refused)"; view). Any output may be NULL. */
A2PACK_API a2pack_status a2pack_bag_reader_shard_info(const a2pack_bag_reader *r, size_t i,
                                                      const char **path, uint64_t *records,
                                                      int32_t *compressed, const char **mode);
/* The same function in the one spelling every section uses; a2pack_bag_reader_shard_info is
 * its alias, kept for compiled callers. */
A2PACK_API a2pack_status a2pack_bag_reader_shard_info_get(const a2pack_bag_reader *r,
                                                          size_t i,
                                                          const char **path,
                                                          uint64_t *records,
                                                          int32_t *compressed,
                                                          const char **mode);

/* A batch of records in one contiguous buffer. */
typedef struct a2pack_bag_batch a2pack_bag_batch;

/* Read records by global index (any order, repeats allowed) into one batch,
 * reading and decompressing on up to `workers` threads (0 = the reader's
 * max_parallelism). A2PACK_E_OUT_OF_RANGE names the first index >= count;
 * A2PACK_E_CORRUPT names shard and record for bad limits or a bad zstd frame.
 * `*out` is owned: release with a2pack_bag_batch_close(). */
A2PACK_API a2pack_status a2pack_bag_reader_read(const a2pack_bag_reader *r,
                                                const uint64_t *indices, size_t n,
                                                uint32_t workers, a2pack_bag_batch **out);

/* Read records [start, start + count) into one batch. */
A2PACK_API a2pack_status a2pack_bag_reader_read_range(const a2pack_bag_reader *r, uint64_t start,
                                                      uint64_t count, uint32_t workers,
                                                      a2pack_bag_batch **out);

/* Where records lie without reading them, for bindings that copy each record
 * once straight from the mapping: shards[k] and [begins[k], ends[k]) of record
 * indices[k] within that shard's mapping (see a2pack_bag_reader_shard_map).
 * Checked like a read (OUT_OF_RANGE, CORRUPT limits). Caller's arrays of n. */
A2PACK_API a2pack_status a2pack_bag_reader_spans(const a2pack_bag_reader *r,
                                                 const uint64_t *indices, size_t n,
                                                 uint32_t *shards, uint64_t *begins,
                                                 uint64_t *ends);

/* As a2pack_bag_reader_spans for records [start, start + count). */
A2PACK_API a2pack_status a2pack_bag_reader_spans_range(const a2pack_bag_reader *r, uint64_t start,
                                                       uint64_t count, uint32_t *shards,
                                                       uint64_t *begins, uint64_t *ends);

/* The read-only mapping of shard i (a view valid while the reader lives) when
 * every shard of the reader is read through mmap (cache policy SYSTEM) and
 * stores records uncompressed; A2PACK_E_UNSUPPORTED otherwise. `*base` may be
 * NULL for an empty file. Records are the bytes [begin, end) given by
 * a2pack_bag_reader_spans. */
A2PACK_API a2pack_status a2pack_bag_reader_shard_map(const a2pack_bag_reader *r, size_t i,
                                                     const uint8_t **base, uint64_t *size);

/* Views of a batch: record i is data[offsets[i], offsets[i+1]); offsets has
 * n+1 entries. Valid until the batch is closed. Any output may be NULL. */
A2PACK_API void a2pack_bag_batch_view(const a2pack_bag_batch *b, const uint8_t **data,
                                      const uint64_t **offsets, size_t *n);

/* Release a batch. Accepts NULL. */
A2PACK_API void a2pack_bag_batch_close(a2pack_bag_batch *b);

/* A batch read in two steps, for callers that want each record in memory of
 * their own (a binding's Python bytes objects, say): no intermediate buffer,
 * no second copy, and the copying or decompressing - including the first
 * touch of freshly allocated memory - runs on all the workers. */
typedef struct a2pack_bag_pending a2pack_bag_pending;

/* Step 1: locate, fetch and size records indices[0, n) (any order, repeats
 * allowed; checked as a2pack_bag_reader_read checks them). `*sizes` receives
 * a view of n decoded sizes, valid until the pending read is closed. Files
 * read with pread are read here; zstd frames that do not record their size
 * are decoded here. `*out` is owned: release with a2pack_bag_pending_close();
 * it keeps what it needs of the reader alive. */
A2PACK_API a2pack_status a2pack_bag_reader_prepare(const a2pack_bag_reader *r,
                                                   const uint64_t *indices, size_t n,
                                                   uint32_t workers, a2pack_bag_pending **out,
                                                   const uint64_t **sizes);

/* Step 2: copy or decompress record k into dests[k] for every k < n, on the
 * workers given to step 1. dests[k] is caller's memory of at least sizes[k]
 * bytes; it is not touched (and may be NULL) when sizes[k] is 0. May be
 * repeated; one thread at a time per pending read. A2PACK_E_CORRUPT names
 * shard and record for a bad zstd frame. */
A2PACK_API a2pack_status a2pack_bag_pending_fill(a2pack_bag_pending *p, uint8_t *const *dests);

/* Release a pending read. Accepts NULL. */
A2PACK_API void a2pack_bag_pending_close(a2pack_bag_pending *p);

/* Warnings found at open, one line each ending in '\n' ("" when none): a
 * separate-limits records file that continues past its last limit (the
 * records read are those the limits describe, as bagz reads them). A view
 * owned by the reader. Never NULL for a valid reader; "" for NULL. */
A2PACK_API const char *a2pack_bag_reader_notes(const a2pack_bag_reader *r);

/* Decoded size of records indices[0..n) into sizes[0..n), without decoding
 * them: zstd sizes come from the frame headers (frames without a content size
 * are decompressed into a small scratch buffer and counted, failing past
 * max_record_bytes). Only the stored bytes are read; nothing is allocated per
 * record. A2PACK_E_OUT_OF_RANGE for an index >= count. */
A2PACK_API a2pack_status a2pack_bag_reader_sizes(const a2pack_bag_reader *r,
                                                 const uint64_t *indices, size_t n,
                                                 uint32_t workers, uint64_t *sizes);

/* ---- reverse index ------------------------------------------------------ */

/* Positions of every distinct record: bagz's Index (first position) and
 * MultiIndex (all positions) in one. */
typedef struct a2pack_bag_index a2pack_bag_index;

/* Index records reader[indices[k]] for k < n, reporting positions k; with
 * indices == NULL, every record of the reader (n ignored; positions are
 * global indices). Reads on up to `workers` threads. `*out` is owned: release
 * with a2pack_bag_index_close(). */
A2PACK_API a2pack_status a2pack_bag_index_build(const a2pack_bag_reader *r,
                                                const uint64_t *indices, uint64_t n,
                                                uint32_t workers, a2pack_bag_index **out);

/* Positions (ascending) of records equal to key[0, len). `*positions` is a
 * view valid while the index lives; `*count` is 0 when the key is absent.
 * Thread-safe. */
A2PACK_API a2pack_status a2pack_bag_index_find(const a2pack_bag_index *idx, const uint8_t *key,
                                               size_t len, const uint64_t **positions,
                                               uint64_t *count);

/* Number of distinct records. */
A2PACK_API uint64_t a2pack_bag_index_unique(const a2pack_bag_index *idx);

/* Release an index. Accepts NULL. */
A2PACK_API void a2pack_bag_index_close(a2pack_bag_index *idx);

/* Every function of this section, for a2pack_api_table.bag. */
typedef struct a2pack_bag_api {
  size_t size;
  void (*writer_options_init)(a2pack_bag_writer_options *);
  a2pack_status (*writer_open)(const char *, const a2pack_bag_writer_options *,
                               a2pack_bag_writer **);
  a2pack_status (*writer_write)(a2pack_bag_writer *, const uint8_t *, size_t);
  a2pack_status (*writer_write_batch)(a2pack_bag_writer *, const uint8_t *, const uint64_t *,
                                      size_t);
  a2pack_status (*writer_flush)(a2pack_bag_writer *);
  a2pack_status (*writer_commit)(a2pack_bag_writer *);
  uint64_t (*writer_count)(const a2pack_bag_writer *);
  void (*writer_close)(a2pack_bag_writer *);
  void (*reader_options_init)(a2pack_bag_reader_options *);
  a2pack_status (*reader_open)(const char *, const a2pack_bag_reader_options *,
                               a2pack_bag_reader **);
  a2pack_status (*reader_open_paths)(const char *const *, size_t,
                                     const a2pack_bag_reader_options *, a2pack_bag_reader **);
  void (*reader_close)(a2pack_bag_reader *);
  uint64_t (*reader_count)(const a2pack_bag_reader *);
  uint64_t (*reader_stored_bytes)(const a2pack_bag_reader *);
  size_t (*reader_shard_count)(const a2pack_bag_reader *);
  a2pack_status (*reader_shard_info)(const a2pack_bag_reader *, size_t, const char **,
                                     uint64_t *, int32_t *, const char **);
  a2pack_status (*reader_read)(const a2pack_bag_reader *, const uint64_t *, size_t, uint32_t,
                               a2pack_bag_batch **);
  a2pack_status (*reader_read_range)(const a2pack_bag_reader *, uint64_t, uint64_t, uint32_t,
                                     a2pack_bag_batch **);
  a2pack_status (*reader_spans)(const a2pack_bag_reader *, const uint64_t *, size_t, uint32_t *,
                                uint64_t *, uint64_t *);
  a2pack_status (*reader_spans_range)(const a2pack_bag_reader *, uint64_t, uint64_t, uint32_t *,
                                      uint64_t *, uint64_t *);
  a2pack_status (*reader_shard_map)(const a2pack_bag_reader *, size_t, const uint8_t **,
                                    uint64_t *);
  void (*batch_view)(const a2pack_bag_batch *, const uint8_t **, const uint64_t **, size_t *);
  void (*batch_close)(a2pack_bag_batch *);
  a2pack_status (*index_build)(const a2pack_bag_reader *, const uint64_t *, uint64_t, uint32_t,
                               a2pack_bag_index **);
  a2pack_status (*index_find)(const a2pack_bag_index *, const uint8_t *, size_t,
                              const uint64_t **, uint64_t *);
  uint64_t (*index_unique)(const a2pack_bag_index *);
  void (*index_close)(a2pack_bag_index *);
  a2pack_status (*reader_prepare)(const a2pack_bag_reader *, const uint64_t *, size_t, uint32_t,
                                  a2pack_bag_pending **, const uint64_t **);
  a2pack_status (*pending_fill)(a2pack_bag_pending *, uint8_t *const *);
  void (*pending_close)(a2pack_bag_pending *);
  const char *(*reader_notes)(const a2pack_bag_reader *);
  a2pack_status (*reader_sizes)(const a2pack_bag_reader *, const uint64_t *, size_t, uint32_t,
                                uint64_t *);
  /* added later: the one spelling of info (reader_shard_info is its alias) */
  a2pack_status (*reader_shard_info_get)(const a2pack_bag_reader *, size_t, const char **,
                                         uint64_t *, int32_t *, const char **);
} a2pack_bag_api;

/* (end of section bag) */

/* ======================================================================
 * Section: logger — sparse-vector data logger (docs/logger.md)
 *
 * Records (stream id, epoch, sparse vector of uint32 indices and float64
 * values) from any number of threads into <dir>/segments/NNNNN.seg.zst:
 * fixed-point quantised, varint encoded, many records per zstd frame, each
 * frame behind a checksummed header so a reader detects a torn tail and
 * resynchronises. Streams are described by <dir>/streams/<id>.json.
 *
 * Thread safety: register_stream, record, record_batch, flush, stats and
 * finish may be called from any number of threads at once on one logger.
 * a2pack_logger_close must not race with other calls on the same handle
 * (use finish to stop a logger other threads may still touch).
 * ====================================================================== */

typedef struct a2pack_logger a2pack_logger;

/* What record() does when the writer is behind and ring_bytes are queued. */
typedef enum a2pack_logger_when_full {
  A2PACK_LOGGER_BLOCK = 0,      /* wait for the writer (default) */
  A2PACK_LOGGER_RETURN_FULL = 1 /* fail with A2PACK_E_FULL; nothing of the record is kept */
} a2pack_logger_when_full;

typedef struct a2pack_logger_options {
  size_t size;                /* sizeof(a2pack_logger_options) */
  uint64_t ring_bytes;        /* memory for frames waiting for the writer; default 1<<27.
                                 Total memory is about ring_bytes + one frame per
                                 recording thread. Must be >= frame_bytes. */
  uint64_t rotate_bytes;      /* start a new segment before one would pass this; default
                                 256<<20, at least 4096 */
  int32_t zstd_level;         /* default 1; negative levels are zstd's fast modes */
  uint32_t frame_bytes;       /* uncompressed bytes per frame; default 256 KiB, 4096..2^28 */
  uint32_t flush_interval_ms; /* a partly filled frame is handed to the writer after at most
                                 this long, so an idle thread's records reach the file;
                                 default 100; 0 = only full frames and flush() write */
  uint32_t when_full;         /* a2pack_logger_when_full; default A2PACK_LOGGER_BLOCK */
  uint32_t writer_threads;    /* threads compressing frames, one of which also appends them
                                 in order; 0 = auto (2, or 1 on a one-core machine) */
  uint32_t compress_literals; /* 1: zstd Huffman-codes the literals (its choice at this level);
                                 0 (default): literals are stored raw, which decompresses
                                 about 2x faster for ~16 % more bytes on typical data.
                                 Readers handle both; the files stay plain zstd. */
} a2pack_logger_options;

A2PACK_API void a2pack_logger_options_init(a2pack_logger_options *opts);

/* Stream flags for a2pack_logger_register_stream. */
enum a2pack_logger_stream_flags {
  /* Sort each record's (index, value) pairs when the indices are not strictly
   * increasing (duplicates are still refused). Without it such a record fails
   * with A2PACK_E_INVALID_ARGUMENT. */
  A2PACK_LOGGER_SORT = 1
};

/* Open a logger on folder `dir` (created when missing, with segments/ and
 * streams/). A folder another open logger holds is refused (lock file
 * <dir>/.lock). Streams registered by earlier sessions in the folder remain
 * valid ids; new segments are numbered after existing ones. `opts` may be NULL
 * (defaults). `*out` is owned: release with a2pack_logger_close(). Starts one
 * background writer thread. */
A2PACK_API a2pack_status a2pack_logger_open(const char *dir, const a2pack_logger_options *opts,
                                            a2pack_logger **out);

/* Register a stream and write its sidecar streams/<id>.json durably (atomic
 * write). `labels_json`: a JSON object as UTF-8 text (NULL or "" = {}), e.g.
 * {"entity":"x","measure":"y"}. Scales must be positive normal numbers:
 * epoch ticks are round(epoch / epoch_scale) and values are stored as
 * round(value / value_scale) (round half to even). `flags`:
 * a2pack_logger_stream_flags. Ids are dense, from 0 (or after the streams of
 * earlier sessions). */
A2PACK_API a2pack_status a2pack_logger_register_stream(a2pack_logger *logger,
                                                       const char *labels_json,
                                                       double epoch_scale, double value_scale,
                                                       uint32_t flags, uint32_t *out_stream_id);

/* Record one sparse vector: `n` indices (strictly increasing, unless the
 * stream has A2PACK_LOGGER_SORT) and `n` finite values; both may be NULL when
 * n == 0. Encodes into this thread's frame buffer and returns; the writer
 * thread compresses and appends. Errors (nothing of the record is kept):
 * A2PACK_E_INVALID_ARGUMENT for an unknown stream, NaN/inf epoch or value,
 * indices out of order or repeated, n > 2^26; A2PACK_E_OUT_OF_RANGE when a
 * quantised value or tick does not fit in int64; A2PACK_E_FULL in
 * RETURN_FULL mode when the queue is full (retry later); A2PACK_E_CLOSED after
 * finish/close; the writer's I/O error once it has failed. The arrays are only
 * read during the call. */
A2PACK_API a2pack_status a2pack_logger_record(a2pack_logger *logger, uint32_t stream_id,
                                              double epoch, const uint32_t *indices,
                                              const double *values, size_t n);

/* Record `n_records` records at once: record i is (stream_ids[i], epochs[i],
 * indices/values[offsets[i] .. offsets[i+1])); `offsets` has n_records + 1
 * entries, non-decreasing. Records are taken in order; on an error
 * `*n_done` (may be NULL) tells how many were accepted before the failing
 * one, which the message names ("record 17 of the batch: ..."), and nothing
 * of that record or later ones is kept. */
A2PACK_API a2pack_status a2pack_logger_record_batch(a2pack_logger *logger, size_t n_records,
                                                    const uint32_t *stream_ids,
                                                    const double *epochs,
                                                    const uint64_t *offsets,
                                                    const uint32_t *indices,
                                                    const double *values, size_t *n_done);

/* Make everything recorded (by any thread) before this call durable: written,
 * fdatasync'ed, and the directory entries of new segments fsync'ed. */
A2PACK_API a2pack_status a2pack_logger_flush(a2pack_logger *logger);

/* Flush, stop the writer and release the folder, keeping the handle valid:
 * later record/flush/register calls fail with A2PACK_E_CLOSED. Idempotent
 * (later calls return A2PACK_OK). Returns the writer's I/O error, if it met
 * one. */
A2PACK_API a2pack_status a2pack_logger_finish(a2pack_logger *logger);

/* finish, then release the handle (also when finish fails, whose status is
 * returned). Accepts NULL (returns A2PACK_OK). */
A2PACK_API a2pack_status a2pack_logger_close(a2pack_logger *logger);

typedef struct a2pack_logger_stats {
  size_t size;               /* sizeof(a2pack_logger_stats), set by the caller */
  uint64_t records;          /* records handed to the kernel so far */
  uint64_t values;           /* their non-zeros */
  uint64_t raw_bytes;        /* encoded bytes before compression */
  uint64_t frames;           /* zstd frames written */
  uint64_t file_bytes;       /* bytes appended to segments, headers included */
  uint64_t segments;         /* segments this logger created */
  uint64_t full_events;      /* records that found the queue full (waited or failed) */
  uint64_t queued_bytes;     /* frame memory queued for the writer now */
  uint64_t max_queued_bytes; /* its high-water mark (<= ring_bytes + a frame per thread) */
  uint64_t flushes;          /* flush barriers completed */
} a2pack_logger_stats;

/* Counters of a logger (also after finish). `out->size` must be set. */
A2PACK_API a2pack_status a2pack_logger_stats_get(const a2pack_logger *logger,
                                                 a2pack_logger_stats *out);

/* ---- decoding ------------------------------------------------------------
 * A whole logger folder decoded into columns, in parallel across segments
 * and frames. Damage never stops a decode: a torn or corrupt frame is
 * skipped and reported as a problem (file, offset, message) and every good
 * frame is returned. Records come in file order: segments ascending, frames
 * and records as written (one thread's records of a stream keep their
 * order). */
typedef struct a2pack_logger_data a2pack_logger_data;

typedef struct a2pack_logger_decode_options {
  size_t size;      /* sizeof(a2pack_logger_decode_options) */
  uint32_t workers; /* threads for this call, 0 = all cores (default) */
  uint32_t strict;  /* non-zero: the first problem (or note) fails the decode (default 0) */
  /* Limits against decompression bombs, checked against verified frame
   * headers before anything is allocated by them (docs/logger.md, "Limits").
   * 0 = the default. A frame past a per-frame limit is skipped as a problem
   * naming the segment, offset and limit; from the frame that would pass a
   * per-decode limit on, nothing more is decoded (one problem). */
  uint64_t max_frame_records; /* records per frame; default 2^24 */
  uint64_t max_frame_bytes;   /* decompressed bytes per frame; default 2^28 (256 MiB) */
  uint64_t max_records;       /* records per decode; default 2^30 */
  uint64_t max_bytes;         /* decompressed frame bytes per decode; default 2^35 (32 GiB) */
  /* A frame may decompress to at most this many times its bytes on disk, so
   * that a decode's memory and time stay proportional to the bytes it
   * reads; a frame past it is skipped as a problem. Default 1024. */
  uint64_t max_expansion;
} a2pack_logger_decode_options;

A2PACK_API void a2pack_logger_decode_options_init(a2pack_logger_decode_options *opts);

/* Decode <dir>/segments/NNNNN.seg.zst with the scales of <dir>/streams/ID.json.
 * A missing folder or segments/ is A2PACK_E_NOT_FOUND; damage inside is
 * reported through a2pack_logger_data_problem unless `strict`. May be called
 * while a logger records into the folder (frames being written then show as
 * a torn tail). `*out` is owned: release with a2pack_logger_data_close(). */
A2PACK_API a2pack_status a2pack_logger_decode(const char *dir,
                                              const a2pack_logger_decode_options *opts,
                                              a2pack_logger_data **out);

/* The decoded records as columns (views valid while the data lives).
 * Record r: stream_ids[r], epochs[r] (= tick * epoch_scale), non-zeros
 * indices/values[offsets[r] .. offsets[r+1]) (values = q * value_scale). */
typedef struct a2pack_logger_columns {
  size_t size;                /* sizeof(a2pack_logger_columns), set by the caller */
  size_t n_records;
  size_t n_values;
  const uint32_t *stream_ids; /* n_records */
  const double *epochs;       /* n_records */
  const uint64_t *offsets;    /* n_records + 1 */
  const uint32_t *indices;    /* n_values */
  const double *values;       /* n_values */
} a2pack_logger_columns;

A2PACK_API a2pack_status a2pack_logger_data_columns(const a2pack_logger_data *data,
                                                    a2pack_logger_columns *out);

typedef struct a2pack_logger_summary {
  size_t size;         /* sizeof(a2pack_logger_summary), set by the caller */
  uint64_t segments;   /* segment files read */
  uint64_t frames;     /* good frames decoded */
  uint64_t bad_frames; /* frames or damaged byte ranges skipped */
  uint64_t file_bytes; /* bytes of all segments */
  uint64_t raw_bytes;  /* decompressed bytes of the good frames */
  uint64_t records;
  uint64_t values;
  uint64_t streams;    /* sidecars read */
  uint64_t problems;
  uint64_t notes;      /* how many of the problems are notes (nothing lost) */
} a2pack_logger_summary;

A2PACK_API a2pack_status a2pack_logger_data_summary(const a2pack_logger_data *data,
                                                    a2pack_logger_summary *out);

/* Stream i (0 <= i < summary.streams, ascending id) of the decoded folder. */
typedef struct a2pack_logger_stream_info {
  size_t size;             /* sizeof(a2pack_logger_stream_info), set by the caller */
  uint32_t stream_id;
  uint32_t flags;          /* a2pack_logger_stream_flags */
  double epoch_scale;
  double value_scale;
  const char *labels_json; /* compact JSON object, NUL-terminated; view valid while the
                              data lives */
} a2pack_logger_stream_info;

A2PACK_API a2pack_status a2pack_logger_data_stream(const a2pack_logger_data *data, size_t i,
                                                   a2pack_logger_stream_info *out);

/* Problem i (0 <= i < summary.problems): what was skipped and where. */
typedef struct a2pack_logger_problem {
  size_t size;         /* sizeof(a2pack_logger_problem), set by the caller */
  a2pack_status status;/* A2PACK_E_CORRUPT, _CHECKSUM, _UNSUPPORTED, _NOT_FOUND... */
  uint64_t offset;     /* byte offset in the file */
  const char *path;    /* NUL-terminated views valid while the data lives */
  const char *message;
  uint32_t note;       /* 1: a note, not damage: nothing was lost (e.g. an empty segment
                          followed by others); status is then A2PACK_OK */
} a2pack_logger_problem;

A2PACK_API a2pack_status a2pack_logger_data_problem(const a2pack_logger_data *data, size_t i,
                                                    a2pack_logger_problem *out);

/* Release decoded data. Accepts NULL. */
A2PACK_API void a2pack_logger_data_close(a2pack_logger_data *data);

typedef struct a2pack_logger_api {
  size_t size;
  void (*options_init)(a2pack_logger_options *);
  a2pack_status (*open)(const char *, const a2pack_logger_options *, a2pack_logger **);
  a2pack_status (*register_stream)(a2pack_logger *, const char *, double, double, uint32_t,
                                   uint32_t *);
  a2pack_status (*record)(a2pack_logger *, uint32_t, double, const uint32_t *, const double *,
                          size_t);
  a2pack_status (*record_batch)(a2pack_logger *, size_t, const uint32_t *, const double *,
                                const uint64_t *, const uint32_t *, const double *, size_t *);
  a2pack_status (*flush)(a2pack_logger *);
  a2pack_status (*finish)(a2pack_logger *);
  a2pack_status (*close)(a2pack_logger *);
  a2pack_status (*stats_get)(const a2pack_logger *, a2pack_logger_stats *);
  void (*decode_options_init)(a2pack_logger_decode_options *);
  a2pack_status (*decode)(const char *, const a2pack_logger_decode_options *,
                          a2pack_logger_data **);
  a2pack_status (*data_columns)(const a2pack_logger_data *, a2pack_logger_columns *);
  a2pack_status (*data_summary)(const a2pack_logger_data *, a2pack_logger_summary *);
  a2pack_status (*data_stream)(const a2pack_logger_data *, size_t, a2pack_logger_stream_info *);
  a2pack_status (*data_problem)(const a2pack_logger_data *, size_t, a2pack_logger_problem *);
  void (*data_close)(a2pack_logger_data *);
} a2pack_logger_api;
/* (end of section logger) */

/* ======================================================================
 * Section: arrow — the Arrow C Data Interface (docs/arrow.md)
 *
 * Run batches, dataset rows, pack tables, bag records and decoded logs handed
 * out as Arrow record batches: an ArrowSchema (a struct type, one child per
 * column) plus an ArrowArray, or an ArrowArrayStream of them, as defined by
 * https://arrow.apache.org/docs/format/CDataInterface.html - the structs
 * below are the spec's, copied as the spec intends, so any Arrow consumer
 * (pyarrow, Polars, DuckDB, nanoarrow, arrow-rs) imports them with no Arrow
 * library in a2pack itself.
 *
 * Ownership follows the spec: the caller passes uninitialised structs; on
 * A2PACK_OK they are filled and the caller (or whoever it moves them to)
 * calls their `release` exactly once. On failure nothing is filled (release
 * stays NULL). Each function says whether the array's buffers are views of
 * the library's memory (zero-copy, kept alive by the export itself, so the
 * source handle may be closed first) or one fresh copy. Release callbacks may
 * run on any thread.
 * ====================================================================== */
#ifndef ARROW_C_DATA_INTERFACE
#define ARROW_C_DATA_INTERFACE

#define ARROW_FLAG_DICTIONARY_ORDERED 1
#define ARROW_FLAG_NULLABLE 2
#define ARROW_FLAG_MAP_KEYS_SORTED 4

struct ArrowSchema {
  /* Array type description */
  const char *format;
  const char *name;
  const char *metadata;
  int64_t flags;
  int64_t n_children;
  struct ArrowSchema **children;
  struct ArrowSchema *dictionary;
  /* Release callback */
  void (*release)(struct ArrowSchema *);
  /* Opaque producer-specific data */
  void *private_data;
};

struct ArrowArray {
  /* Array data description */
  int64_t length;
  int64_t null_count;
  int64_t offset;
  int64_t n_buffers;
  int64_t n_children;
  const void **buffers;
  struct ArrowArray **children;
  struct ArrowArray *dictionary;
  /* Release callback */
  void (*release)(struct ArrowArray *);
  /* Opaque producer-specific data */
  void *private_data;
};

#endif /* ARROW_C_DATA_INTERFACE */

#ifndef ARROW_C_STREAM_INTERFACE
#define ARROW_C_STREAM_INTERFACE

struct ArrowArrayStream {
  int (*get_schema)(struct ArrowArrayStream *, struct ArrowSchema *out);
  int (*get_next)(struct ArrowArrayStream *, struct ArrowArray *out);
  const char *(*get_last_error)(struct ArrowArrayStream *);
  void (*release)(struct ArrowArrayStream *);
  void *private_data;
};

#endif /* ARROW_C_STREAM_INTERFACE */

/* Which rows a run-batch export has. */
typedef enum a2pack_arrow_layout {
  A2PACK_ARROW_STEPS = 0, /* one row per step */
  A2PACK_ARROW_RUNS = 1   /* one row per run */
} a2pack_arrow_layout;

/* A run batch (a2pack_run_batch_decode, a2pack_pack_decode_batch,
 * a2pack_pack_iter_next) as one record batch.
 *
 * A2PACK_ARROW_STEPS, n_steps rows: run uint32 (index of the run in the
 * batch), step uint32 (index within its run), board uint64, exponents
 * fixed_size_list<uint8>[16] (tile exponents, cell 0 = top-left), move uint8,
 * legal_mask uint8, ev_values fixed_size_list<float32>[4] (UDLR), has_ev
 * uint8. board, move, legal_mask, ev_values and has_ev are ZERO-COPY views of
 * the batch; run, step and exponents are computed (one copy).
 *
 * A2PACK_ARROW_RUNS, n_runs rows: run uint32, first_step uint64, num_steps
 * uint32 (meta.steps), final_board uint64, max_score uint64, highest_tile
 * uint32, start_unix_s uint64, elapsed_s float32, source_kind uint8, engine
 * large_utf8 (null when the run stores none). All ZERO-COPY but run and
 * engine's validity bitmap.
 *
 * Zero-copy buffers keep the batch alive: a2pack_run_batch_close may be
 * called while an export lives; the memory goes with the last release. */
A2PACK_API a2pack_status a2pack_run_batch_export_arrow(const a2pack_run_batch *batch,
                                                       a2pack_arrow_layout layout,
                                                       struct ArrowSchema *out_schema,
                                                       struct ArrowArray *out_array);

/* Dataset rows idx[0..n) (every bounds check as a2pack_dataset_gather) as one
 * record batch: board uint64, exponents fixed_size_list<uint8>[16], move
 * uint8, legal_mask uint8, ev_values fixed_size_list<float32>[4], run_id
 * uint32, step_index uint16. ONE COPY: the rows are stored row-wise (32 bytes
 * each), so the columns are gathered into fresh buffers owned by the export,
 * which does not refer to the dataset afterwards. */
A2PACK_API a2pack_status a2pack_dataset_export_arrow(const a2pack_dataset *ds, const int64_t *idx,
                                                     size_t n, uint32_t workers,
                                                     struct ArrowSchema *out_schema,
                                                     struct ArrowArray *out_array);

/* A whole dataset, or rows idx[0..n) when idx is not NULL (idx is copied), as
 * a stream of record batches of up to `chunk_rows` rows (0 = 65536), columns
 * as a2pack_dataset_export_arrow. Each batch is ONE COPY made when the
 * consumer asks for it. The stream holds the dataset's rows: the handle may be
 * closed while the stream lives. Out-of-range indices fail here, before the
 * stream is filled. A stream is used by one thread at a time. */
A2PACK_API a2pack_status a2pack_dataset_export_arrow_stream(const a2pack_dataset *ds,
                                                            const int64_t *idx, size_t n,
                                                            size_t chunk_rows, uint32_t workers,
                                                            struct ArrowArrayStream *out);

/* The pack's index as one record batch of a2pack_pack_len rows: entry
 * uint64, offset uint64, length uint32, kind uint16, flags uint16, crc32c
 * uint32, raw_length uint32. ONE COPY (the on-disk index is not columnar). */
A2PACK_API a2pack_status a2pack_pack_export_arrow_entries(const a2pack_pack *pack,
                                                          struct ArrowSchema *out_schema,
                                                          struct ArrowArray *out_array);

/* a2pack_pack_stats_get as a one-row record batch (count, total_steps,
 * min_len, max_len, mean_len float64, p50, p90, p99, from_block bool), plus
 * the highest-tile histogram as a second export: highest_tile uint32, runs
 * uint64 (out_hist_* may be NULL). ONE COPY. */
A2PACK_API a2pack_status a2pack_pack_export_arrow_stats(a2pack_pack *pack, uint32_t workers,
                                                        struct ArrowSchema *out_schema,
                                                        struct ArrowArray *out_array,
                                                        struct ArrowSchema *out_hist_schema,
                                                        struct ArrowArray *out_hist_array);

/* The runs of a pack as a stream of record batches, decoded `batch_runs`
 * entries at a time (0 = 1024) on up to `workers` threads as the consumer
 * asks: entries[0..n) in that order, or every entry when `entries` is NULL
 * (entries is copied; an entry >= a2pack_pack_len fails here). Columns as
 * a2pack_run_batch_export_arrow in `layout`, with `run` replaced by `entry`
 * uint64 (the pack entry). Zero-copy from each decoded batch, which the
 * stream's arrays hold. `flags`: A2PACK_PACK_NO_VERIFY or 0. The stream holds
 * the pack's file: the handle may be closed while it lives. A stream is used
 * by one thread at a time; a damaged entry makes get_next fail naming it. */
A2PACK_API a2pack_status a2pack_pack_export_arrow_stream(const a2pack_pack *pack,
                                                         a2pack_arrow_layout layout,
                                                         const uint64_t *entries, size_t n,
                                                         size_t batch_runs, uint32_t workers,
                                                         uint32_t flags,
                                                         struct ArrowArrayStream *out);

/* A bag batch (a2pack_bag_reader_read / _read_range) as one record batch with
 * one column, record large_binary. ZERO-COPY, and the export TAKES the batch:
 * on A2PACK_OK the handle belongs to the export (its release closes it) and
 * the caller must not use or close it; on failure it is still the caller's. */
A2PACK_API a2pack_status a2pack_bag_batch_export_arrow(a2pack_bag_batch *batch,
                                                       struct ArrowSchema *out_schema,
                                                       struct ArrowArray *out_array);

/* Decoded log records (a2pack_logger_decode) as one record batch: stream_id
 * uint32, epoch float64, indices large_list<uint32>, values
 * large_list<float64>. ONE COPY: the export is independent of `data`. */
A2PACK_API a2pack_status a2pack_logger_data_export_arrow(const a2pack_logger_data *data,
                                                         struct ArrowSchema *out_schema,
                                                         struct ArrowArray *out_array);

/* Every function of this section, for a2pack_api_table.arrow. */
typedef struct a2pack_arrow_api {
  size_t size;
  a2pack_status (*run_batch_export)(const a2pack_run_batch *, a2pack_arrow_layout,
                                    struct ArrowSchema *, struct ArrowArray *);
  a2pack_status (*dataset_export)(const a2pack_dataset *, const int64_t *, size_t, uint32_t,
                                  struct ArrowSchema *, struct ArrowArray *);
  a2pack_status (*dataset_export_stream)(const a2pack_dataset *, const int64_t *, size_t, size_t,
                                         uint32_t, struct ArrowArrayStream *);
  a2pack_status (*pack_export_entries)(const a2pack_pack *, struct ArrowSchema *,
                                       struct ArrowArray *);
  a2pack_status (*pack_export_stats)(a2pack_pack *, uint32_t, struct ArrowSchema *,
                                     struct ArrowArray *, struct ArrowSchema *,
                                     struct ArrowArray *);
  a2pack_status (*bag_batch_export)(a2pack_bag_batch *, struct ArrowSchema *,
                                    struct ArrowArray *);
  a2pack_status (*logger_data_export)(const a2pack_logger_data *, struct ArrowSchema *,
                                      struct ArrowArray *);
  a2pack_status (*pack_export_stream)(const a2pack_pack *, a2pack_arrow_layout, const uint64_t *,
                                      size_t, size_t, uint32_t, uint32_t,
                                      struct ArrowArrayStream *);
} a2pack_arrow_api;
/* (end of section arrow) */

/* ======================================================================
 * Section: feed — batches for a training step, filled ahead by library
 * threads (docs/training.md)
 *
 * A feed walks an epoch sampler's global batch sequence over a dataset
 * (a2pack_dataset_sampler's permutation of (seed, epoch): the same batches,
 * in the same order, whatever the thread count, depth or rank count) and
 * gathers each batch's columns into a ring of reusable, 4 KiB-aligned
 * buffers ("slots") ahead of the consumer. With `world` > 1 each rank's feed
 * takes its contiguous part of every global batch (elastic: the global
 * sequence does not depend on the world size). After the last batch of an
 * epoch the feed goes on with the next epoch by itself, until `epochs`.
 *
 * Ring slots: ownership and thread safety.
 *  - A batch (a2pack_feed_batch*) is one slot. a2pack_feed_next() hands it
 *    out holding one reference; a2pack_feed_batch_retain() adds one and
 *    a2pack_feed_batch_release() drops one. The slot goes back to the
 *    producers only when its last reference is dropped, so every column
 *    pointer (a view) stays valid and unchanged until then, however far the
 *    feed has moved on: a consumer that keeps batches keeps them valid, and
 *    producers wait for a free slot instead (backpressure).
 *  - The ring has `slots` slots (default depth + 2: `depth` filled ahead
 *    plus two for the consumer, e.g. the batch of the running step and the
 *    one whose copy to the GPU is in flight). A consumer that holds more
 *    takes them from the producers' share; when it holds every slot, next()
 *    fails with A2PACK_E_FULL instead of waiting for ever.
 *  - The ring's memory is reference counted: a2pack_feed_close() stops and
 *    joins the producer threads, and batches still held stay valid until
 *    released. Releasing, retaining and reading batches is thread-safe (any
 *    thread, any time, also after close). The feed handle itself (next,
 *    stats, state, load_state, close) is used from one thread at a time.
 *  - Besides the ring, a feed holds a copy of the selection (8 bytes a row;
 *    none over all rows) and nothing else that grows with the rows: the
 *    default index shuffle is computed batch by batch. With
 *    A2PACK_FEED_SHUFFLE_STORED it also holds the permutations of at most
 *    three epochs (4 bytes a row each: the previous one while its last
 *    batches are filled, the current one, the next one made ahead). Memory
 *    does not grow with the batches served.
 *  - Slot memory is page-locked (pinned) when a CUDA runtime is found at run
 *    time (see a2pack_feed_pin), so a host-to-device copy of a column can run
 *    asynchronously; never a link-time dependency.
 *  - In a process forked from the one that opened the feed, the producer
 *    threads do not exist: next() and load_state() fail with
 *    A2PACK_E_CLOSED; close() frees nothing it cannot free safely.
 *  - next() and release do not wake the producers while batches are ready:
 *    idle producers look again when the consumer's pace says its next take
 *    is due (at most 20 ms later), so the consumer's calls cost no context
 *    switch; they are woken at once when none is ready or the consumer
 *    takes batches less than 250 us apart. While the consumer is the slower
 *    side they also keep off its CPU (spare_consumer_cpu).
 * ====================================================================== */

typedef struct a2pack_feed a2pack_feed;
typedef struct a2pack_feed_batch a2pack_feed_batch;

/* The columns a feed can fill; select them with bits (1u << column) of
 * a2pack_feed_options.columns. */
typedef enum a2pack_feed_column {
  A2PACK_FEED_EXPONENTS = 0,    /* uint8 [rows, 16]: tile exponents, cell 0 (top-left) first */
  A2PACK_FEED_MOVES = 1,        /* [rows] chosen move 0..3, in moves_dtype */
  A2PACK_FEED_LEGAL = 2,        /* bool (uint8 0/1) [rows, 4] */
  A2PACK_FEED_EV_VALUES = 3,    /* float32 [rows, 4] */
  A2PACK_FEED_BOARDS = 4,       /* uint64 [rows]: the packed board */
  A2PACK_FEED_RUN_IDS = 5,      /* uint32 [rows] */
  A2PACK_FEED_STEP_INDICES = 6, /* uint16 [rows]: the step within its run */
  A2PACK_FEED_LEGAL_MASK = 7,   /* uint8 [rows]: the ev_legal bitmask */
  A2PACK_FEED_INDICES = 8,      /* int64 [rows]: the dataset rows of the batch (always filled) */
  A2PACK_FEED_VALID = 9,        /* bool (uint8 0/1) [rows]: 0 where a window of a run shorter than
                                   the window is padded (a2pack_feed_open_replay), else 1 */
  A2PACK_FEED_WEIGHTS = 10      /* float32 [rows]: importance weights of prioritized orders, else 1 */
} a2pack_feed_column;

enum {
  A2PACK_FEED_COLUMN_COUNT = 11,
  /* The default selection: exponents, moves, legal, ev_values. */
  A2PACK_FEED_COLUMNS_DEFAULT = 15
};

/* Element types of feed columns. */
typedef enum a2pack_feed_dtype {
  A2PACK_FEED_DTYPE_U8 = 0,
  A2PACK_FEED_DTYPE_BOOL = 1, /* one byte, 0 or 1 */
  A2PACK_FEED_DTYPE_U16 = 2,
  A2PACK_FEED_DTYPE_U32 = 3,
  A2PACK_FEED_DTYPE_U64 = 4,
  A2PACK_FEED_DTYPE_I32 = 5,
  A2PACK_FEED_DTYPE_I64 = 6,
  A2PACK_FEED_DTYPE_F32 = 7
} a2pack_feed_dtype;

/* What a feed column is: the library's one table of column names, element
 * types and shapes, from which bindings take theirs (a column's view in a
 * batch, a2pack_feed_batch_column, says the same of that batch). */
typedef struct a2pack_feed_column_info {
  size_t size;             /* sizeof(a2pack_feed_column_info), set by the caller */
  const char *name;        /* "exponents", "moves", ...: static, never freed */
  a2pack_feed_dtype dtype; /* the moves column: its default type (a feed's moves_dtype wins) */
  uint32_t ndim;           /* of a batch's array: 1 ([rows]) or 2 ([rows, width]) */
  uint32_t width;          /* elements per row */
  uint32_t itemsize;       /* bytes per element of dtype */
  int32_t is_default;      /* 1 for a column of A2PACK_FEED_COLUMNS_DEFAULT */
  int32_t always;          /* 1 for a column filled whatever the selection (indices) */
} a2pack_feed_column_info;

/* Fill `out` with what column `column` is. A2PACK_E_INVALID_ARGUMENT for a
 * value that is not an a2pack_feed_column (0 .. A2PACK_FEED_COLUMN_COUNT - 1).
 * Thread-safe; needs no feed. */
A2PACK_API a2pack_status a2pack_feed_column_info_get(a2pack_feed_column column,
                                                    a2pack_feed_column_info *out);

/* Page-locking of the ring. */
typedef enum a2pack_feed_pin {
  /* Pin when a CUDA runtime is present: $A2PACK_CUDART (a path) when set,
   * else a libcudart already loaded in the process (torch, jax, cupy); plain
   * memory when there is none or cudaHostRegister fails. */
  A2PACK_FEED_PIN_AUTO = 0,
  A2PACK_FEED_PIN_OFF = 1, /* plain memory */
  A2PACK_FEED_PIN_ON = 2   /* as AUTO, else load libcudart by name; or fail naming why */
} a2pack_feed_pin;

/* The order a feed's epochs walk (its options' `shuffle`). */
typedef enum a2pack_feed_shuffle {
  A2PACK_FEED_SHUFFLE_NONE = 0,   /* the rows in the order given, every epoch */
  /* A keyed bijection of the positions, computed batch by batch from
   * (seed, epoch): nothing stored beside the ring and nothing made before
   * the first batch, at any row count. The default. */
  A2PACK_FEED_SHUFFLE_INDEX = 1,
  /* A Fisher-Yates permutation of (seed, epoch), made for each epoch and
   * kept while its batches are filled (4 bytes a row, up to three at once):
   * the order of a2pack_dataset_sampler and of feeds from before the index
   * shuffle. */
  A2PACK_FEED_SHUFFLE_STORED = 2
} a2pack_feed_shuffle;

typedef struct a2pack_feed_options {
  size_t size;            /* sizeof(a2pack_feed_options) */
  uint64_t batch_size;    /* rows of a global batch (all ranks together), default 4096 */
  uint32_t depth;         /* batches filled ahead of the consumer, default 4; 0: each batch
                             is gathered inside next(), on the calling thread */
  uint32_t threads;       /* producer threads, default 1 (each gathers whole batches) */
  uint32_t slots;         /* ring slots, 0 (default) = depth + 2; at least depth + 1 */
  uint32_t columns;       /* bits (1u << a2pack_feed_column), default A2PACK_FEED_COLUMNS_DEFAULT */
  a2pack_feed_dtype moves_dtype; /* U8 (default), I32 or I64: the moves column is written
                                    in this type directly */
  uint64_t seed;          /* the sampler's seed, default 0 */
  int32_t shuffle;        /* an a2pack_feed_shuffle: A2PACK_FEED_SHUFFLE_INDEX (default),
                             _STORED or _NONE. A loaded state keeps the permutation
                             it was taken with. */
  int32_t drop_last;      /* 1: leave out an epoch's short last batch; default 0 */
  uint32_t rank;          /* this consumer's rank, default 0 */
  uint32_t world;         /* ranks sharing each global batch, default 1 */
  uint64_t epochs;        /* the feed ends before epoch `epochs` (counting from 0);
                             0 (default): never */
  uint64_t start_epoch;   /* the first epoch, default 0 (a loaded state overrides it) */
  a2pack_feed_pin pin;    /* default A2PACK_FEED_PIN_AUTO */
  int32_t spare_consumer_cpu; /* 1 (default): the producer threads keep off the CPU the
                                 consumer runs on (the thread that opened the feed, then the
                                 one calling next()), when the process may use another, so
                                 that their gathers do not evict the training loop's caches;
                                 0: they run anywhere */
  int32_t live;           /* 1: follow appends to the dataset (another process's `a2pack
                             dataset append`): a committed append is seen at the next batch
                             (one stat of manifest.json per batch; the folder is opened again
                             on a helper thread), its rows join the endless orders at once and
                             the epoch orders at the next epoch; never a row not committed.
                             For every row of a single-file dataset (a2pack_feed_open without
                             indices, a2pack_feed_open_replay) and for a sharded dataset
                             (a2pack_feed_open_shards: the shards an append adds join the
                             block shuffle at the next epoch); a state saved over N rows
                             resumes over N + k. Default 0 */
  /* Rate limiting, for self-play (live feeds): next() waits while the
   * learner is ahead of the actors, as Reverb's SampleToInsertRatio. A
   * batch is served when the dataset holds at least min_size rows and the
   * units (rows, or windows) the feed served before it are fewer than
   * samples_per_insert * (rows - min_size + 1); counted from the feed's
   * position, so a resumed feed keeps its count. */
  double samples_per_insert; /* 0 (default): no limit */
  uint64_t min_size;         /* rows before the first batch, default 0 */
  int64_t rate_timeout_ms;   /* how long next() waits for the actors before failing with
                                A2PACK_E_FULL naming the limit; default 60000, < 0: as long
                                as it takes */
} a2pack_feed_options;

A2PACK_API void a2pack_feed_options_init(a2pack_feed_options *opts);

/* Open a feed over the rows indices[0..n) of `ds` (copied), or over every
 * row when `indices` is NULL. The feed keeps the dataset's rows alive (the
 * handle may be closed first). Indices outside the dataset are
 * A2PACK_E_OUT_OF_RANGE naming the first; an empty selection, a batch size
 * of 0, rank >= world or slots <= depth are A2PACK_E_INVALID_ARGUMENT.
 * Producer threads start at once. `opts` may be NULL. */
A2PACK_API a2pack_status a2pack_feed_open(const a2pack_dataset *ds, const int64_t *indices,
                                          uint64_t n, const a2pack_feed_options *opts,
                                          a2pack_feed **out);

/* Stop and join the producers and release the feed. Batches still held stay
 * valid until released. Accepts NULL. */
A2PACK_API void a2pack_feed_close(a2pack_feed *f);

/* The next batch, in the sampler's order: `*out` holds one reference
 * (a2pack_feed_batch_release). Waits for it as long as it takes; at the end
 * (`epochs` reached) A2PACK_OK with *out NULL. A2PACK_E_FULL when the
 * consumer holds every slot of the ring. */
A2PACK_API a2pack_status a2pack_feed_next(a2pack_feed *f, a2pack_feed_batch **out);

/* As a2pack_feed_next, but waits at most `timeout_ms` (< 0: as long as it
 * takes; 0: not at all). *out is NULL when the wait timed out or at the end;
 * `*ended` (may be NULL) is 1 at the end, else 0. A binding that must react
 * to signals while waiting (Ctrl-C) waits in slices with this. */
A2PACK_API a2pack_status a2pack_feed_next_timeout(a2pack_feed *f, int64_t timeout_ms,
                                                  a2pack_feed_batch **out, int32_t *ended);

/* Add / drop one reference to a batch (see the section's introduction). Any
 * thread. release accepts NULL. */
A2PACK_API void a2pack_feed_batch_retain(a2pack_feed_batch *b);
A2PACK_API void a2pack_feed_batch_release(a2pack_feed_batch *b);

typedef struct a2pack_feed_batch_info {
  size_t size;          /* sizeof(a2pack_feed_batch_info), set by the caller */
  uint64_t epoch;
  uint64_t batch;       /* index of the global batch in its epoch */
  uint64_t rows;        /* this rank's rows of it (may be 0 when world > rows) */
  uint64_t global_rows; /* rows of the global batch (all ranks) */
  uint64_t sequence;    /* the epoch's batch count times epoch plus batch: the batch's
                           place in the feed's whole sequence */
} a2pack_feed_batch_info;

A2PACK_API a2pack_status a2pack_feed_batch_get_info(const a2pack_feed_batch *b,
                                                    a2pack_feed_batch_info *out);
/* The same function in the one spelling every section uses; a2pack_feed_batch_get_info is
 * its alias, kept for compiled callers. */
A2PACK_API a2pack_status a2pack_feed_batch_info_get(const a2pack_feed_batch *b,
                                                    a2pack_feed_batch_info *out);

/* One call per batch, for bindings where each call into the library costs
 * (Python through cffi, Julia): releases the `release_count` batches of
 * `release` (as a2pack_feed_batch_release each; NULL entries are skipped),
 * then takes the next batch as a2pack_feed_next_timeout does and, when it
 * hands one out and `info` is not NULL, fills `*info` as
 * a2pack_feed_batch_get_info does. The releases happen whatever the rest
 * returns. Not for one batch from two threads at once (as release). */
A2PACK_API a2pack_status a2pack_feed_advance(a2pack_feed *f, a2pack_feed_batch *const *release,
                                             size_t release_count, int64_t timeout_ms,
                                             a2pack_feed_batch **out,
                                             a2pack_feed_batch_info *info, int32_t *ended);

/* A column of a batch: a view into its slot, C-contiguous, valid until the
 * batch's last reference is released. */
typedef struct a2pack_feed_column_view {
  size_t size;             /* sizeof(a2pack_feed_column_view), set by the caller */
  void *data;              /* view; 64-byte aligned (NULL when the batch has no rows) */
  a2pack_feed_dtype dtype;
  uint32_t ndim;           /* 1 or 2 */
  uint64_t rows;           /* shape[0] */
  uint64_t width;          /* shape[1] (1 when ndim is 1) */
  uint64_t nbytes;         /* rows * width * element size */
  int32_t pinned;          /* 1 when the memory is page-locked for CUDA */
} a2pack_feed_column_view;

/* Fill `out` with column `column` of the batch. A2PACK_E_NOT_FOUND when the
 * feed was opened without that column. */
A2PACK_API a2pack_status a2pack_feed_batch_column(const a2pack_feed_batch *b,
                                                  a2pack_feed_column column,
                                                  a2pack_feed_column_view *out);

/* DLPack 1.0, the tensor exchange every array library takes without a
 * copy (numpy, torch, JAX, CuPy: from_dlpack). These are the standard's own
 * declarations, as the DLPack project's <dlpack/dlpack.h> makes them, made
 * here when that header was not included first; an older dlpack.h, without
 * versioned tensors, is refused. */
#if defined(DLPACK_DLPACK_H_) && (!defined(DLPACK_MAJOR_VERSION) || DLPACK_MAJOR_VERSION < 1)
#error "a2pack.h needs DLPack 1.0 or later (DLManagedTensorVersioned): include a newer dlpack.h"
#endif
#ifndef DLPACK_DLPACK_H_
#define DLPACK_DLPACK_H_
#define DLPACK_MAJOR_VERSION 1
#define DLPACK_MINOR_VERSION 0
typedef struct DLPackVersion {
  uint32_t major;
  uint32_t minor;
} DLPackVersion;
typedef enum {
  kDLCPU = 1,
  kDLCUDA = 2,
  kDLCUDAHost = 3, /* page-locked host memory, readable by the CPU */
  kDLOpenCL = 4,
  kDLVulkan = 7,
  kDLMetal = 8,
  kDLVPI = 9,
  kDLROCM = 10,
  kDLROCMHost = 11,
  kDLExtDev = 12,
  kDLCUDAManaged = 13,
  kDLOneAPI = 14,
  kDLWebGPU = 15,
  kDLHexagon = 16,
  kDLMAIA = 17
} DLDeviceType;
typedef struct DLDevice {
  DLDeviceType device_type;
  int32_t device_id;
} DLDevice;
typedef enum {
  kDLInt = 0,
  kDLUInt = 1,
  kDLFloat = 2,
  kDLOpaqueHandle = 3,
  kDLBfloat = 4,
  kDLComplex = 5,
  kDLBool = 6
} DLDataTypeCode;
typedef struct DLDataType {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
} DLDataType;
typedef struct DLTensor {
  void *data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t *shape;
  int64_t *strides; /* NULL: compact, row-major */
  uint64_t byte_offset;
} DLTensor;
#define DLPACK_FLAG_BITMASK_READ_ONLY (1UL << 0UL)
#define DLPACK_FLAG_BITMASK_IS_COPIED (1UL << 1UL)
typedef struct DLManagedTensorVersioned {
  DLPackVersion version;
  void *manager_ctx;
  void (*deleter)(struct DLManagedTensorVersioned *self);
  uint64_t flags;
  DLTensor dl_tensor;
} DLManagedTensorVersioned;
#endif

/* Columns `columns[0..n)` of the batch as DLPack tensors, out[i] for
 * columns[i], each holding a reference to the batch of its own: the slot
 * goes back to the producers when the batch's last reference goes, the
 * caller's (a2pack_feed_batch_release, which may come at once: the tensors
 * keep the slot) and every tensor's (its deleter, which the array library
 * that takes it calls when its last array over the column goes). Each is a
 * view of the slot, C-contiguous (strides NULL), writable, of the column's
 * element type (a2pack_feed_column_info; the moves column as the feed's
 * moves_dtype; bool as kDLBool), shape [rows] or [rows, width], or [units,
 * steps, ...] for a feed of windows; its device kDLCUDAHost when the ring
 * is page-locked, kDLCPU otherwise. An empty batch's data points at no row.
 * All or nothing: on an error no tensor is made, out is left NULL, no
 * reference taken. A2PACK_E_NOT_FOUND for a column the feed was not opened
 * with. Any thread; the deleters too. */
A2PACK_API a2pack_status a2pack_feed_batch_dlpack(a2pack_feed_batch *b,
                                                  const a2pack_feed_column *columns, size_t n,
                                                  DLManagedTensorVersioned **out);

typedef struct a2pack_feed_stats {
  size_t size;               /* sizeof(a2pack_feed_stats), set by the caller */
  uint64_t batches_served;   /* handed out by next() since open */
  uint64_t rows_served;
  uint64_t consumer_wait_ns; /* time next() waited for a batch (producers behind) */
  uint64_t producer_idle_ns; /* summed over producer threads: time they waited for a free
                                slot or for the consumer to fall within `depth` (consumer
                                behind); excludes the time after the end */
  uint64_t producer_busy_ns; /* summed over producer threads: time spent gathering */
  uint64_t epoch;            /* of the next batch next() hands out */
  uint64_t next_batch;       /* its index in that epoch */
  uint64_t batches_per_epoch;
  uint64_t slot_bytes;       /* bytes of one slot */
  uint32_t threads;
  uint32_t depth;
  uint32_t slots;
  uint32_t held;             /* slots handed out and not yet released */
  uint32_t ready;            /* slots filled and waiting for next() */
  int32_t pinned;            /* 1 when the ring is page-locked */
  uint64_t seed;             /* the sampler's seed (a loaded state's, after load_state) */
  int32_t spared_cpu;        /* the CPU the producers keep off (spare_consumer_cpu), or -1 */
} a2pack_feed_stats;

/* Fill `out` (set out->size first). Cheap; any time before close. */
A2PACK_API a2pack_status a2pack_feed_stats_get(const a2pack_feed *f, a2pack_feed_stats *out);

/* Checkpoint: the position after the batches next() has handed out, as a
 * small versioned byte string (owned, a2pack_free): a feed header (the
 * dataset's row count and CRC, the shuffle flag) around the epoch sampler's
 * state (seed, epoch, next global batch, batch size, a hash of the rows).
 * Never the permutation; not the world size, so a state can be loaded by a
 * job with another number of ranks. */
A2PACK_API a2pack_status a2pack_feed_state(const a2pack_feed *f, uint8_t **out_data,
                                           size_t *out_len);
/* The same function in the one spelling every section uses; a2pack_feed_state is
 * its alias, kept for compiled callers. */
A2PACK_API a2pack_status a2pack_feed_state_save(const a2pack_feed *f,
                                                uint8_t **out_data,
                                                size_t *out_len);

/* Move to a saved position: the next batch is the one after those handed
 * out when the state was taken (also across an epoch boundary). Batches
 * filled ahead are dropped and the producers restart there; batches the
 * consumer holds stay valid. Refused, naming what differs (nothing
 * changes): a damaged state, another version, a state taken over another
 * dataset, row set, batch size or shuffle setting. */
A2PACK_API a2pack_status a2pack_feed_load_state(a2pack_feed *f, const void *data, size_t len);
/* The same function in the one spelling every section uses; a2pack_feed_load_state is
 * its alias, kept for compiled callers. */
A2PACK_API a2pack_status a2pack_feed_state_load(a2pack_feed *f, const void *data, size_t len);

/* A feed over a mixing sampler (a2pack_dataset_mix, copied: changing `mix`
 * afterwards does not change the feed) of `ds`'s rows: the mix's global
 * batches from `first_batch` on (0, or the next batch a loaded mix state
 * gave), without end, rank opts->rank of opts->world taking its part of
 * each. The mix's batch size and seed are the feed's (opts->batch_size and
 * seed are not used, nor shuffle, drop_last, epochs and start_epoch); every
 * batch is in epoch 0 and stats' batches_per_epoch is 0. Checkpoints
 * (a2pack_feed_state) hold the mix's state: seed, weights, rows consumed per
 * source. A2PACK_E_OUT_OF_RANGE for a source row outside the dataset or a
 * first batch the mix cannot give (before its last weight change). */
A2PACK_API a2pack_status a2pack_feed_open_mix(const a2pack_dataset *ds,
                                              const a2pack_dataset_mix *mix,
                                              uint64_t first_batch,
                                              const a2pack_feed_options *opts, a2pack_feed **out);

/* A feed over a mix: mix with `weights` (`n` values, one per source) from
 * the batch next() hands out next on. Batches filled ahead are made again;
 * batches the consumer holds stay as they were. A2PACK_E_INVALID_ARGUMENT,
 * with the feed unchanged, for a feed over an epoch sampler or weights the
 * mix refuses. */
A2PACK_API a2pack_status a2pack_feed_set_weights(a2pack_feed *f, const double *weights, size_t n);

/* How a feed over a sharded dataset keeps its rows (a2pack_feed_open_shards). */
typedef struct a2pack_feed_shards_options {
  size_t size;           /* sizeof(a2pack_feed_shards_options) */
  uint64_t budget_bytes; /* memory for resident shards, default 1 GiB; at least two of the
                            largest shard (two windows are resident at once) */
  uint32_t window;       /* shards per window; 0 (default): as many as half the budget holds */
  int32_t verify_crc;    /* 1 (default): check each shard against the manifest as it loads */
  int32_t huge_pages;    /* 1 (default): ask for transparent huge pages for resident shards */
  /* added later */
  int32_t prefetch;      /* 1 (default): load the next window's shards on a background thread;
                            0: a producer loads them when its batch needs them */
} a2pack_feed_shards_options;

A2PACK_API void a2pack_feed_shards_options_init(a2pack_feed_shards_options *opts);

/* A feed over the sharded dataset in `dir` (a single-file dataset is one
 * shard) that keeps whole shards in memory within shards->budget_bytes,
 * least recently used out, loading the next window's shards ahead on a
 * background thread: the block shuffle of the shard streams (each epoch the
 * shards are dealt out to the ranks by the seed, and a rank reads its
 * shards a window at a time, each window's rows in a seeded random order),
 * with the ring, producers, pinning and checkpoints of every feed.
 * opts->batch_size is the global batch: each of opts->world ranks takes
 * batch_size / world rows of its own shards (it must divide); with one
 * rank the last batch of an epoch may be short unless drop_last. The shard
 * count, rank count and window are fixed within an epoch: a state taken
 * mid-epoch loads only into a feed of the same ranks and window, one taken
 * at an epoch's start into any. A2PACK_E_INVALID_ARGUMENT for a budget
 * that cannot hold two windows, shuffle NONE (the block shuffle is the
 * order), a batch size the ranks do not divide, fewer shards than ranks or
 * an epoch without a batch. `shards` and `opts` may be NULL. */
A2PACK_API a2pack_status a2pack_feed_open_shards(const char *dir,
                                                 const a2pack_feed_shards_options *shards,
                                                 const a2pack_feed_options *opts,
                                                 a2pack_feed **out);

/* The replay orders of a2pack_feed_open_replay. */
typedef struct a2pack_feed_replay_options {
  size_t size;          /* sizeof(a2pack_feed_replay_options) */
  uint64_t window;      /* steps per unit: 1 (default) single rows; T > 1 windows of T consecutive
                           steps of one run, never across a run's end */
  uint64_t stride;      /* 1 (default): a window at every step it fits after; `window`: the
                           run's non-overlapping tiles (a tail shorter than a window left out) */
  int32_t pad_short;    /* 0 (default): runs shorter than a window are left out; 1: each gives one
                           window of its steps, its last step repeated, the padding 0 in the
                           A2PACK_FEED_VALID column */
  int32_t replacement;  /* 0 (default): epochs, every unit once (shuffled as opts->shuffle says,
                           the index shuffle when it is on); 1: endless, each unit of each batch
                           drawn uniformly with replacement from (seed, batch, position) */
  uint64_t recent;      /* 0 (default): every row; K: only the newest K rows of the dataset
                           (windows wholly among them) */
  struct a2pack_priorities *priorities; /* NULL (default): uniform; else units drawn by
                           priority, endlessly (see the priorities section; one priority per
                           row of the dataset): rows, or windows by the priority of their
                           first step (update the starts' priorities); the feed keeps a
                           reference */
} a2pack_feed_replay_options;

A2PACK_API void a2pack_feed_replay_options_init(a2pack_feed_replay_options *opts);

/* A feed of a replay order over `ds`: opts->batch_size counts units (rows
 * or windows), a batch of B windows of T steps holding B * T rows (unit i's
 * steps at rows [i * T, (i + 1) * T), so a column of shape [rows, ...] is
 * [B, T, ...] in C order); rank opts->rank of opts->world takes its
 * contiguous part of the units. The order stores nothing per row (the runs'
 * table, one entry per run, and a stateless shuffle). Checkpoints hold the
 * position and refuse a feed of other windows, stride, padding, replacement,
 * recency or runs. A2PACK_E_INVALID_ARGUMENT, naming the value, for a window
 * of 0, a stride other than 1 or the window, or no unit (a window longer
 * than every run, without pad_short). `replay` and `opts` may be NULL. */
A2PACK_API a2pack_status a2pack_feed_open_replay(const a2pack_dataset *ds,
                                                 const a2pack_feed_replay_options *replay,
                                                 const a2pack_feed_options *opts,
                                                 a2pack_feed **out);

/* A live feed (a2pack_feed_options.live): take in now what was appended and
 * committed until this call (waiting for the folder to be opened again), so
 * that the next batch sees it; *rows (may be NULL) gets the rows the feed
 * reads. A2PACK_E_INVALID_ARGUMENT for a feed that is not live; what went
 * wrong in opening the folder again (the dataset rebuilt or replaced by
 * other rows, damaged) is returned, naming it. The consumer's thread, as
 * next(). */
A2PACK_API a2pack_status a2pack_feed_refresh(a2pack_feed *f, uint64_t *rows);

/* Give back the batch in *batch, the one next() (or advance) handed out
 * last, that the caller never passed on (an interrupt or an error came
 * between): the next next() hands out the same batch again (the same slot,
 * unchanged), and until then a2pack_feed_state and the stats count it as not
 * taken, so a checkpoint taken meanwhile resumes with it. Takes over the
 * reference and sets *batch to NULL; nothing to do when *batch is NULL.
 * A2PACK_E_INVALID_ARGUMENT, with *batch and the feed unchanged, for another
 * batch (or one handed out before a load_state or set_weights), one
 * retained (a2pack_feed_batch_retain) and not released, or one given back
 * already. */
A2PACK_API a2pack_status a2pack_feed_put_back(a2pack_feed *f, a2pack_feed_batch **batch);

/* This rank's dataset rows of batch `batch` of epoch `epoch` in the feed's
 * order, to out, nothing gathered; *n gets their count, 0 past the epoch's
 * batches. With out NULL, *n gets the room out needs: the most rows of a
 * rank's part of a batch (batch_size / world units, times the window for
 * windows). For a prioritized order, the rows it would draw with the
 * priorities of now. The consumer's thread, as next(). */
A2PACK_API a2pack_status a2pack_feed_batch_indices(a2pack_feed *f, uint64_t epoch, uint64_t batch,
                                                   int64_t *out, size_t *n);

/* Hand out batch `batch` of epoch `epoch` next (0: the epoch's start), as a
 * loaded state would: the batches filled ahead are made again from there,
 * batches the consumer holds stay valid. A2PACK_E_INVALID_ARGUMENT, with the
 * feed unchanged, past the epoch's batches or the feed's last epoch. The
 * consumer's thread, as next(). */
A2PACK_API a2pack_status a2pack_feed_seek(a2pack_feed *f, uint64_t epoch, uint64_t batch);

/* A feed over a sharded dataset (a2pack_feed_open_shards): its shards, what
 * this rank reads in one epoch, and the resident shards' counters. */
typedef struct a2pack_feed_shards_info {
  size_t size;              /* sizeof(a2pack_feed_shards_info), set by the caller */
  uint64_t rows, runs, shards; /* the dataset's (a live feed: what it has taken in) */
  uint64_t max_shard_bytes;
  uint32_t window_shards;   /* shards per window */
  uint64_t batches;         /* batches in the epoch asked for (every rank the same) */
  uint64_t rank_shards;     /* this rank's shards in the epoch asked for */
  uint64_t rank_rows;       /* and their rows */
  uint64_t loads;           /* shards read from disk */
  uint64_t evictions;       /* shards dropped to stay within the budget */
  uint64_t bytes_read;
  uint64_t resident_bytes;  /* now */
  uint64_t resident_shards;
  double load_wait_s;       /* the producers waited for shards to load */
  double load_s;            /* spent loading, on any thread */
} a2pack_feed_shards_info;

/* The shards of a feed opened by a2pack_feed_open_shards, this rank's in
 * epoch `epoch`. A2PACK_E_INVALID_ARGUMENT for a feed over other rows. Any
 * thread. */
A2PACK_API a2pack_status a2pack_feed_shards_info_get(const a2pack_feed *f, uint64_t epoch,
                                                     a2pack_feed_shards_info *out);

/* Release the batch in each of the `n` cells that holds one, and empty the
 * cell (NULL cells are skipped, and so are cells holding NULL): for a
 * caller that keeps each reference in a cell of its own and must release
 * none twice, whatever stops it between its own steps (an interrupt), as
 * the Python binding. Each cell is emptied atomically, so two threads
 * releasing the same cell release it once. Any thread, any time, as
 * a2pack_feed_batch_release. */
A2PACK_API void a2pack_feed_batch_release_cells(a2pack_feed_batch **const *cells, size_t n);

/* Every function of this section, for a2pack_api_table.feed. */
typedef struct a2pack_feed_api {
  size_t size;
  void (*options_init)(a2pack_feed_options *);
  a2pack_status (*open)(const a2pack_dataset *, const int64_t *, uint64_t,
                        const a2pack_feed_options *, a2pack_feed **);
  void (*close)(a2pack_feed *);
  a2pack_status (*next)(a2pack_feed *, a2pack_feed_batch **);
  a2pack_status (*next_timeout)(a2pack_feed *, int64_t, a2pack_feed_batch **, int32_t *);
  void (*batch_retain)(a2pack_feed_batch *);
  void (*batch_release)(a2pack_feed_batch *);
  a2pack_status (*batch_get_info)(const a2pack_feed_batch *, a2pack_feed_batch_info *);
  a2pack_status (*batch_column)(const a2pack_feed_batch *, a2pack_feed_column,
                                a2pack_feed_column_view *);
  a2pack_status (*stats_get)(const a2pack_feed *, a2pack_feed_stats *);
  a2pack_status (*state)(const a2pack_feed *, uint8_t **, size_t *);
  a2pack_status (*load_state)(a2pack_feed *, const void *, size_t);
  a2pack_status (*open_mix)(const a2pack_dataset *, const a2pack_dataset_mix *, uint64_t,
                            const a2pack_feed_options *, a2pack_feed **);
  a2pack_status (*set_weights)(a2pack_feed *, const double *, size_t);
  a2pack_status (*advance)(a2pack_feed *, a2pack_feed_batch *const *, size_t, int64_t,
                           a2pack_feed_batch **, a2pack_feed_batch_info *, int32_t *);
  a2pack_status (*put_back)(a2pack_feed *, a2pack_feed_batch **);
  void (*batch_release_cells)(a2pack_feed_batch **const *, size_t);
  /* added later: the one spelling of info and state (batch_get_info, state
   * and load_state are their aliases) */
  a2pack_status (*batch_info_get)(const a2pack_feed_batch *, a2pack_feed_batch_info *);
  a2pack_status (*state_save)(const a2pack_feed *, uint8_t **, size_t *);
  a2pack_status (*state_load)(a2pack_feed *, const void *, size_t);
  /* added later: feeds over sharded datasets */
  void (*shards_options_init)(a2pack_feed_shards_options *);
  a2pack_status (*open_shards)(const char *, const a2pack_feed_shards_options *,
                               const a2pack_feed_options *, a2pack_feed **);
  /* added later: replay orders */
  void (*replay_options_init)(a2pack_feed_replay_options *);
  a2pack_status (*open_replay)(const a2pack_dataset *, const a2pack_feed_replay_options *,
                               const a2pack_feed_options *, a2pack_feed **);
  /* added later: live feeds */
  a2pack_status (*refresh)(a2pack_feed *, uint64_t *);
  /* added later: the column table */
  a2pack_status (*column_info_get)(a2pack_feed_column, a2pack_feed_column_info *);
  /* added later: positions and shards */
  a2pack_status (*batch_indices)(a2pack_feed *, uint64_t, uint64_t, int64_t *, size_t *);
  a2pack_status (*seek)(a2pack_feed *, uint64_t, uint64_t);
  a2pack_status (*shards_info_get)(const a2pack_feed *, uint64_t, a2pack_feed_shards_info *);
  /* added later: DLPack columns */
  a2pack_status (*batch_dlpack)(a2pack_feed_batch *, const a2pack_feed_column *, size_t,
                                DLManagedTensorVersioned **);
} a2pack_feed_api;
/* (end of section feed) */

/* ------------------------------------------------------------------------
 * Priorities: prioritized experience replay
 *
 * One priority p >= 0 per row of a dataset. A replay feed given priorities
 * (a2pack_feed_replay_options.priorities) draws rows with probability
 * p^alpha / (the sum over the rows it reads), stratified over the batch and
 * deterministic in (seed, batch) and the priorities, and fills the
 * A2PACK_FEED_WEIGHTS column with importance weights (N * P)^-beta divided
 * by the batch's largest (N: the rows it reads). A learner updates
 * priorities (from its loss) while the feed's producers draw: a batch
 * filled ahead has the priorities of when it was filled, at most the feed's
 * depth of batches old. Sampling and updating are O(log n) per row; the
 * priorities take 5.14 bytes a row, up to 6.5 while they grow with a live
 * dataset (the priorities, and a sum tree of
 * doubles over blocks of 8 rows; p^alpha is computed where it is read).
 *
 * Thread safety: every call may come from any thread at any time; updates
 * and draws take turns under a reader-writer lock. The feed keeps its own
 * reference: closing the handle first is fine.
 * ------------------------------------------------------------------------ */
typedef struct a2pack_priorities a2pack_priorities;

/* n rows of priority `initial`. A2PACK_E_INVALID_ARGUMENT, naming the value,
 * for n == 0, alpha or beta negative or not finite, initial negative or not
 * finite. */
A2PACK_API a2pack_status a2pack_priorities_open(uint64_t n, double alpha, double beta,
                                                float initial, a2pack_priorities **out);
/* Priorities saved by a2pack_priorities_save (or numpy: '<f4', shape (n,)).
 * `expected_n` (0: any) refuses a file of another length (a priorities file
 * of another dataset), naming both; A2PACK_E_CORRUPT names what is wrong
 * with a damaged file. */
A2PACK_API a2pack_status a2pack_priorities_load(const char *path, double alpha, double beta,
                                                uint64_t expected_n, a2pack_priorities **out);
/* Write the priorities as a .npy of f32 (numpy reads it), to a temporary
 * file beside `path`, synced and renamed over it. */
A2PACK_API a2pack_status a2pack_priorities_save(const a2pack_priorities *p, const char *path);
/* Set rows indices[0..n) to values[0..n) (a row named twice takes the
 * last). Checked first, nothing changed when refused: A2PACK_E_OUT_OF_RANGE
 * for an index outside the rows, A2PACK_E_INVALID_ARGUMENT for a value
 * negative, NaN or infinite, each naming it and its position. Safe while
 * feeds draw from p, and it never waits for a draw under way: that draw
 * keeps the priorities it began with, and every draw or read after this
 * call returns sees the new values. */
A2PACK_API a2pack_status a2pack_priorities_update(a2pack_priorities *p, const int64_t *indices,
                                                  const float *values, size_t n);
/* The priorities of rows indices[0..n) to out. */
A2PACK_API a2pack_status a2pack_priorities_get(const a2pack_priorities *p,
                                               const int64_t *indices, size_t n, float *out);

typedef struct a2pack_priorities_info {
  size_t size;   /* sizeof(a2pack_priorities_info), set by the caller */
  uint64_t rows;
  double alpha;
  double beta;
  double total;  /* the sum of p^alpha over the rows */
  uint64_t bytes; /* the memory held for the rows: the priorities and the sum tree
                     (5.14 bytes a row, up to 6.5 grown; updates waiting for the next draw take
                     12 bytes each while they wait, 2^20 at most) */
} a2pack_priorities_info;

A2PACK_API a2pack_status a2pack_priorities_info_get(const a2pack_priorities *p,
                                                    a2pack_priorities_info *out);
/* Drop the handle's reference (a feed keeps its own). Accepts NULL. */
A2PACK_API void a2pack_priorities_close(a2pack_priorities *p);

/* Every function of this section, for a2pack_api_table.priorities. */
typedef struct a2pack_priorities_api {
  size_t size;
  a2pack_status (*open)(uint64_t, double, double, float, a2pack_priorities **);
  a2pack_status (*load)(const char *, double, double, uint64_t, a2pack_priorities **);
  a2pack_status (*save)(const a2pack_priorities *, const char *);
  a2pack_status (*update)(a2pack_priorities *, const int64_t *, const float *, size_t);
  a2pack_status (*get)(const a2pack_priorities *, const int64_t *, size_t, float *);
  a2pack_status (*info_get)(const a2pack_priorities *, a2pack_priorities_info *);
  void (*close)(a2pack_priorities *);
} a2pack_priorities_api;
/* (end of section priorities) */

/* ------------------------------------------------------------------------
 * Shard streams: a dataset larger than RAM, a memory budget at a time
 *
 * A sharded dataset (built with shard_rows) keeps its rows in several .npy
 * shards of whole runs. A shard stream keeps whole shards in memory within a
 * byte budget (least recently used out) and serves batches of a block
 * shuffle: each epoch the shards are permuted by the seed and dealt out to
 * the ranks (every rank computes the same deal, nothing is exchanged); a
 * rank reads its shards a window at a time, each window's rows in a seeded
 * random order, so a batch is drawn from the window's shards. While a window
 * is read a background thread loads the next one. The budget holds two
 * windows. docs/dataset.md says what this costs in shuffle quality.
 *
 * A single-file dataset is streamed as one shard. Streaming reads shard files
 * and never takes the folder's lock: committed shards never change, and an
 * append adds new ones, which join at the next epoch.
 *
 * Thread safety: one thread at a time per stream.
 * ------------------------------------------------------------------------ */
typedef struct a2pack_shard_stream a2pack_shard_stream;

typedef struct a2pack_shard_stream_options {
  size_t size;            /* sizeof(a2pack_shard_stream_options) */
  uint64_t budget_bytes;  /* memory for resident shards; default 1 GiB; at least two of
                             the largest shard */
  uint64_t batch_size;    /* rows per batch (per rank); default 4096 */
  uint64_t seed;          /* the same on every rank; default 0 */
  uint32_t rank, world;   /* default 0 of 1. With world > 1 every rank takes the same
                             number of full batches each epoch */
  uint32_t window_shards; /* shards a batch is drawn from; 0 (default): as many as half
                             the budget holds */
  int32_t drop_last;      /* one rank: 1 drops an epoch's short last batch; default 0 */
  int32_t verify_crc;     /* default 1: check each shard against the manifest on load */
  int32_t prefetch;       /* default 1: load the next window on a background thread */
} a2pack_shard_stream_options;

A2PACK_API void a2pack_shard_stream_options_init(a2pack_shard_stream_options *opts);

/* Open a stream over the dataset in `dir` at epoch 0, batch 0. Fails
 * (INVALID_ARGUMENT, naming the sizes) when the budget cannot hold two
 * windows of the largest shard, or there are fewer shards than ranks. */
A2PACK_API a2pack_status a2pack_shard_stream_open(const char *dir,
                                                  const a2pack_shard_stream_options *opts,
                                                  a2pack_shard_stream **out);
/* Stops the loader thread and frees every shard. NULL is a no-op. */
A2PACK_API void a2pack_shard_stream_close(a2pack_shard_stream *s);

typedef struct a2pack_shard_stream_info {
  size_t size;               /* sizeof(a2pack_shard_stream_info), set by the caller */
  uint64_t rows, runs, shards;  /* of the dataset */
  uint64_t max_shard_bytes;
  uint64_t window_shards;
  uint64_t epoch, next_batch;   /* where the stream is */
  uint64_t batches;             /* in this epoch (the same on every rank) */
  uint64_t rank_shards, rank_rows; /* this rank's share of this epoch */
} a2pack_shard_stream_info;

A2PACK_API a2pack_status a2pack_shard_stream_get_info(const a2pack_shard_stream *s,
                                                      a2pack_shard_stream_info *out);
/* The same function in the one spelling every section uses; a2pack_shard_stream_get_info is
 * its alias, kept for compiled callers. */
A2PACK_API a2pack_status a2pack_shard_stream_info_get(const a2pack_shard_stream *s,
                                                      a2pack_shard_stream_info *out);

/* Start epoch `epoch` at its first batch (the deal and the windows change
 * with the epoch; shards appended since the stream opened are not seen: open
 * a new stream to include them). */
A2PACK_API a2pack_status a2pack_shard_stream_set_epoch(a2pack_shard_stream *s, uint64_t epoch);

/* Gather the next batch into `out` (arrays of batch_size rows; NULL members
 * skipped) and, when idx is not NULL, its global row indices. *n gets its
 * length; 0 marks the end of an epoch, after which the stream stands at the
 * next epoch's first batch. Waits for shards still loading. */
A2PACK_API a2pack_status a2pack_shard_stream_next(a2pack_shard_stream *s,
                                                  const a2pack_dataset_columns *out,
                                                  int64_t *idx, size_t *n);

/* The global row indices of batch b of the current epoch (batch_size
 * values at most) without loading anything; *n = 0 past the epoch. */
A2PACK_API a2pack_status a2pack_shard_stream_batch_indices(a2pack_shard_stream *s, uint64_t b,
                                                           int64_t *out, size_t *n);

/* Checkpoint: the position (epoch, next batch) and everything it depends on,
 * as an owned byte string (release with a2pack_free), O(1) bytes. Loading it
 * into a stream of the same seed and batch size resumes exactly; mid-epoch
 * also the same rank count and window, and the same first shards (shards
 * appended since join at the next epoch). Errors name what differs. */
A2PACK_API a2pack_status a2pack_shard_stream_save_state(const a2pack_shard_stream *s,
                                                        uint8_t **out_data, size_t *out_len);
/* The same function in the one spelling every section uses; a2pack_shard_stream_save_state is
 * its alias, kept for compiled callers. */
A2PACK_API a2pack_status a2pack_shard_stream_state_save(const a2pack_shard_stream *s,
                                                        uint8_t **out_data,
                                                        size_t *out_len);
A2PACK_API a2pack_status a2pack_shard_stream_load_state(a2pack_shard_stream *s, const void *data,
                                                        size_t len);
/* The same function in the one spelling every section uses; a2pack_shard_stream_load_state is
 * its alias, kept for compiled callers. */
A2PACK_API a2pack_status a2pack_shard_stream_state_load(a2pack_shard_stream *s,
                                                        const void *data,
                                                        size_t len);

typedef struct a2pack_shard_stream_stats {
  size_t size;              /* sizeof(a2pack_shard_stream_stats), set by the caller */
  uint64_t batches;         /* handed out */
  uint64_t loads, evictions;
  uint64_t bytes_read;
  uint64_t resident_bytes, resident_shards;
  double load_wait_s;       /* time next() waited for shards */
  double load_s;            /* time spent loading shards, on either thread */
} a2pack_shard_stream_stats;

A2PACK_API a2pack_status a2pack_shard_stream_get_stats(const a2pack_shard_stream *s,
                                                       a2pack_shard_stream_stats *out);
/* The same function in the one spelling every section uses; a2pack_shard_stream_get_stats is
 * its alias, kept for compiled callers. */
A2PACK_API a2pack_status a2pack_shard_stream_stats_get(const a2pack_shard_stream *s,
                                                       a2pack_shard_stream_stats *out);

/* Every function of this section, for a2pack_api_table.shard_stream. */
typedef struct a2pack_shard_stream_api {
  size_t size;
  void (*options_init)(a2pack_shard_stream_options *);
  a2pack_status (*open)(const char *, const a2pack_shard_stream_options *, a2pack_shard_stream **);
  void (*close)(a2pack_shard_stream *);
  a2pack_status (*info_get)(const a2pack_shard_stream *, a2pack_shard_stream_info *);
  a2pack_status (*set_epoch)(a2pack_shard_stream *, uint64_t);
  a2pack_status (*next)(a2pack_shard_stream *, const a2pack_dataset_columns *, int64_t *,
                        size_t *);
  a2pack_status (*batch_indices)(a2pack_shard_stream *, uint64_t, int64_t *, size_t *);
  a2pack_status (*state_save)(const a2pack_shard_stream *, uint8_t **, size_t *);
  a2pack_status (*state_load)(a2pack_shard_stream *, const void *, size_t);
  a2pack_status (*stats_get)(const a2pack_shard_stream *, a2pack_shard_stream_stats *);
  /* the first names of info_get, state_save, state_load and stats_get */
  a2pack_status (*get_info)(const a2pack_shard_stream *, a2pack_shard_stream_info *);
  a2pack_status (*save_state)(const a2pack_shard_stream *, uint8_t **, size_t *);
  a2pack_status (*load_state)(a2pack_shard_stream *, const void *, size_t);
  a2pack_status (*get_stats)(const a2pack_shard_stream *, a2pack_shard_stream_stats *);
} a2pack_shard_stream_api;
/* (end of section shard streams) */

/* ======================================================================
 * Section: api table — every function, for hosts that dlopen() the library
 * ====================================================================== */

/* Capability tables declared in their sections. A pointer is NULL when the
 * capability is not part of this build. */
struct a2pack_pack_api;
struct a2pack_dataset_api;
struct a2pack_bag_api;
struct a2pack_logger_api;
struct a2pack_arrow_api;
struct a2pack_feed_api;
struct a2pack_shard_stream_api;

typedef struct a2pack_api_table {
  size_t size;          /* sizeof the table this library provides */
  uint32_t abi_version;
  /* core */
  const char *(*status_name)(a2pack_status);
  const char *(*last_error)(void);
  a2pack_status (*last_status)(void);
  void (*clear_error)(void);
  const char *(*version)(void);
  uint32_t (*abi_version_fn)(void);
  void (*free)(void *);
  /* board */
  uint64_t (*board_score)(uint64_t);
  uint32_t (*board_highest_tile)(uint64_t);
  uint64_t (*board_apply_move)(uint64_t, uint32_t);
  uint32_t (*board_legal_moves)(uint64_t);
  void (*branches_normalise)(const float *, uint32_t, float *);
  /* run */
  a2pack_run_kind (*run_detect_kind)(const uint8_t *, size_t);
  a2pack_status (*run_decode)(const uint8_t *, size_t, a2pack_run **);
  a2pack_status (*run_load)(const char *, a2pack_run **);
  a2pack_status (*run_create)(const a2pack_run_meta *, size_t, const uint64_t *, const uint8_t *,
                              const float *, const uint8_t *, const uint8_t *, uint64_t,
                              a2pack_run **);
  void (*run_close)(a2pack_run *);
  a2pack_run_kind (*run_source_kind)(const a2pack_run *);
  a2pack_status (*run_get_meta)(const a2pack_run *, a2pack_run_meta *);
  size_t (*run_step_count)(const a2pack_run *);
  uint64_t (*run_final_board)(const a2pack_run *);
  int32_t (*run_has_branches)(const a2pack_run *);
  a2pack_status (*run_get_steps)(const a2pack_run *, size_t, size_t, uint64_t *, uint8_t *,
                                 float *, uint8_t *, uint8_t *);
  a2pack_status (*run_encode)(const a2pack_run *, a2pack_run_kind, uint32_t, uint8_t **,
                              size_t *);
  a2pack_status (*run_save)(const a2pack_run *, const char *, a2pack_run_kind, uint32_t);
  a2pack_status (*run_upgrade_v1)(const uint8_t *, size_t, uint8_t **, size_t *);
  a2pack_status (*run_batch_decode)(const uint8_t *const *, const size_t *, size_t, uint32_t,
                                    a2pack_run_batch **);
  a2pack_status (*run_batch_columns)(const a2pack_run_batch *, a2pack_run_columns *);
  void (*run_batch_close)(a2pack_run_batch *);
  /* gen */
  void (*gen_options_init)(a2pack_gen_options *);
  a2pack_status (*gen_run)(const a2pack_gen_options *, uint64_t, a2pack_run **);
  a2pack_status (*gen_dir)(const a2pack_gen_options *, const char *, uint64_t, uint64_t,
                           a2pack_progress_fn, void *);
  /* capabilities (see their sections) */
  const struct a2pack_pack_api *pack;
  const struct a2pack_dataset_api *dataset;
  const struct a2pack_bag_api *bag;
  const struct a2pack_logger_api *logger;
  /* added after the capabilities: core */
  const char *(*zstd_version)(void);
  /* added later: the Arrow C Data Interface (section arrow) */
  const struct a2pack_arrow_api *arrow;
  /* added later: core */
  a2pack_status (*clean_temps)(const char *, a2pack_removed_fn, void *, uint64_t *);
  /* added later: run */
  a2pack_status (*run_batch_load)(const char *const *, size_t, uint32_t, a2pack_run_batch **);
  uint64_t (*run_batch_payload_bytes)(const a2pack_run_batch *);
  /* added later: the training feed (section feed; NULL without the dataset capability) */
  const struct a2pack_feed_api *feed;
  /* added later: the upstream ai-2048 tool's random stream and search (sections board, gen) */
  void (*branches_normalise_f64)(const double *, uint32_t, float *);
  a2pack_status (*stdrng_open)(uint64_t, a2pack_stdrng **);
  a2pack_status (*stdrng_clone)(const a2pack_stdrng *, a2pack_stdrng **);
  void (*stdrng_close)(a2pack_stdrng *);
  a2pack_status (*stdrng_shuffle)(a2pack_stdrng *, uint64_t *, size_t);
  a2pack_status (*board_spawn_stdrng)(uint64_t, a2pack_stdrng *, uint64_t *);
  a2pack_status (*board_make_move_stdrng)(uint64_t, uint32_t, a2pack_stdrng *, uint64_t *);
  void (*expectimax_options_init)(a2pack_expectimax_options *);
  a2pack_status (*expectimax_open)(const a2pack_expectimax_options *, a2pack_expectimax **);
  void (*expectimax_close)(a2pack_expectimax *);
  a2pack_status (*expectimax_branch_evals)(a2pack_expectimax *, uint64_t, double *, uint32_t *);
  a2pack_status (*expectimax_best_move)(a2pack_expectimax *, uint64_t, int32_t *);
  a2pack_status (*expectimax_state_value)(a2pack_expectimax *, uint64_t, double *);
  void (*expectimax_stats)(const a2pack_expectimax *, uint64_t *, uint64_t *);
  void (*expectimax_reset_stats)(a2pack_expectimax *);
  /* added later: core */
  const char *(*lz4_version)(void);
  /* added later: shard streams (their section; NULL without the dataset
   * capability), and the one spelling of stats, state and info in the
   * sections above (their first names are aliases, listed above too) */
  const struct a2pack_shard_stream_api *shard_stream;
  void (*expectimax_stats_get)(const a2pack_expectimax *, uint64_t *, uint64_t *);
  void (*expectimax_stats_reset)(a2pack_expectimax *);
  /* added later: priorities (their section; NULL without the dataset capability) */
  const struct a2pack_priorities_api *priorities;
} a2pack_api_table;

/* The table of every function, for `abi_version` == A2PACK_ABI_VERSION; NULL
 * for an ABI version this library does not implement. Static storage;
 * thread-safe. This is the one symbol a dlopen() host needs:
 *   void *h = dlopen("/opt/a2pack/lib/liba2pack.so.0", RTLD_NOW);
 *   const a2pack_api_table *(*get)(uint32_t) = dlsym(h, "a2pack_api");
 *   const a2pack_api_table *api = get(A2PACK_ABI_VERSION);               */
A2PACK_API const a2pack_api_table *a2pack_api(uint32_t abi_version);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* A2PACK_H */
