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
 *  - Batch calls exist so that a binding crosses the boundary once per batch.
 *  - No C++ type, exception or name crosses this ABI.
 *
 * A host that dlopen()s the library by absolute path needs exactly one symbol,
 * a2pack_api(), which returns a table of every function below.
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

/* Release memory the library handed out as "owned". Accepts NULL. */
A2PACK_API void a2pack_free(void *ptr);

/* Progress callback used by long operations: `done` of `total` units.
 * Return 0 to continue, non-zero to stop the operation, which then fails with
 * A2PACK_E_INTERRUPTED. Called from the thread that started the operation. */
typedef int (*a2pack_progress_fn)(void *user, uint64_t done, uint64_t total);

/* ======================================================================
 * Section: board — 2048 boards (FORMATS.md §1)
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

/* The upstream per-step branch normalisation (FORMATS.md §3): `ev` holds the
 * raw expected values of the 4 moves, `legal_mask` which are legal; `out`
 * receives the normalised values (0 for illegal moves). */
A2PACK_API void a2pack_branches_normalise(const float ev[4], uint32_t legal_mask,
                                          float out[4]);

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
 * (FORMATS.md §3). Never fails; a payload shorter than 6 bytes is V2. */
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

/* ======================================================================
 * Section: pack
 * ====================================================================== */
/* (end of section pack) */

/* ======================================================================
 * Section: dataset
 * ====================================================================== */
/* (end of section dataset) */

/* ======================================================================
 * Section: bag
 * ====================================================================== */
/* (end of section bag) */

/* ======================================================================
 * Section: logger
 * ====================================================================== */
/* (end of section logger) */

/* ======================================================================
 * Section: api table — every function, for hosts that dlopen() the library
 * ====================================================================== */

/* Capability tables declared in their sections. A pointer is NULL when the
 * capability is not part of this build. */
struct a2pack_pack_api;
struct a2pack_dataset_api;
struct a2pack_bag_api;
struct a2pack_logger_api;

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
