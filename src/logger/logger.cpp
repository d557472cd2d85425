#include "logger/logger.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <new>

// For ZSTD_c_literalCompressionMode, an experimental parameter: safe to use
// because the header and the library always come together (the zstd built
// into liba2pack, or the system's libzstd-dev with its own library).
#define ZSTD_STATIC_LINKING_ONLY
#include <zstd.h>

#include "base/error.hpp"
#include "base/stale_temps.hpp"
#include "base/file_io.hpp"
#include "logger/format.hpp"
#include "logger/segment.hpp"
#include "logger/sequence.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define A2PACK_CPU_RELAX() _mm_pause()
#else
#define A2PACK_CPU_RELAX() ((void)0)
#endif

namespace a2pack::logger {

// One frame's raw bytes being filled by a recording thread, in format
// version 2's two regions: the structure grows in `data` after the prefix,
// the values in the thread's Slot::vals; sealing the chunk appends the values
// to the structure and fills in the prefix (one memcpy per frame). A record
// is admitted when the whole payload stays within `cap`, so neither buffer
// overflows, and only `data` is ever queued (ring_bytes counts all of it).
struct Chunk {
  std::unique_ptr<uint8_t[]> data;  // cap bytes: prefix, structure, then (sealed) values
  size_t cap = 0;
  size_t slen = 0;  // structure bytes
  size_t vlen = 0;  // value bytes
  size_t len() const { return kV2Prefix + slen + vlen; }
  uint32_t records = 0;
  uint64_t values = 0;
  int64_t opened_ns = 0;
};

// Per (thread, logger) recording state. Everything but the atomics is
// guarded by `lock`.
struct Slot {
  std::atomic<uint32_t> lock{0};
  Chunk* open = nullptr;
  FrameState frame;
  std::unique_ptr<uint8_t[]> vals;  // the open chunk's value region
  size_t vals_cap = 0;
  SortScratch scratch;
  bool closed = false;              // the logger was closed
  std::atomic<bool> dead{false};    // the owning thread exited
  std::atomic<bool> retired{false}; // the logger is gone: drop from caches
  ~Slot() { delete open; }
};

namespace {

std::atomic<uint64_t> g_next_uid{1};


int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// The slot spin lock. The owner holds it for one record (or batch); others
// (flush, close, the writer's timer) are rare, so contention is rare too,
// but an owner may hold it while waiting for queue space: back off to
// yielding and then sleeping rather than burning a core.
void lock_slot(Slot* s) {
  if (!s->lock.exchange(1, std::memory_order_acquire)) return;
  for (unsigned spins = 0;; ++spins) {
    if (!s->lock.load(std::memory_order_relaxed) &&
        !s->lock.exchange(1, std::memory_order_acquire))
      return;
    if (spins < 64) A2PACK_CPU_RELAX();
    else if (spins < 256) std::this_thread::yield();
    else std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}
bool try_lock_slot(Slot* s) {
  return !s->lock.load(std::memory_order_relaxed) &&
         !s->lock.exchange(1, std::memory_order_acquire);
}
void unlock_slot(Slot* s) { s->lock.store(0, std::memory_order_release); }

struct SlotGuard {
  Slot* s;
  explicit SlotGuard(Slot* slot) : s(slot) { lock_slot(s); }
  ~SlotGuard() { unlock_slot(s); }
};

// This thread's slots, one per logger it recorded to. The destructor runs at
// thread exit and tells the writer the open chunk has no owner any more.
struct TlsEntry {
  uint64_t uid;
  std::shared_ptr<Slot> slot;
};
struct TlsCache {
  uint64_t last_uid = 0;
  Slot* last = nullptr;
  std::vector<TlsEntry> entries;
  ~TlsCache() {
    for (auto& e : entries) e.slot->dead.store(true, std::memory_order_release);
  }
};
thread_local TlsCache t_cache;

// Creates folder `path` or checks that it is one. The logger's own folder
// may be reached through a link (the caller named it); the subfolders inside
// it (`inside`) may not: a link planted there would have the logger write
// segments or sidecars wherever it points.
void make_dir(const std::string& path, bool inside) {
  if (::mkdir(path.c_str(), 0755) == 0) {
    fsync_dir(parent_dir(path));
    return;
  }
  if (errno != EEXIST) fail_errno("create folder", path, errno);
  struct stat st;
  if ((inside ? ::lstat(path.c_str(), &st) : ::stat(path.c_str(), &st)) != 0)
    fail_errno("stat", path, errno);
  if (S_ISLNK(st.st_mode))
    fail(A2PACK_E_INVALID_ARGUMENT,
         "{}: is a symbolic link, not a folder: the logger writes only into real folders inside "
         "its own, refusing to write through it",
         path);
  if (!S_ISDIR(st.st_mode))
    fail(A2PACK_E_INVALID_ARGUMENT, "{}: exists and is not a folder", path);
}

// The logger's lock file, never through a link (O_CREAT would create a
// dangling link's target wherever it points) and only a regular file.
int open_lock(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
  if (fd < 0) {
    if (errno == ELOOP)
      fail(A2PACK_E_INVALID_ARGUMENT,
           "{}: the lock file is a symbolic link: refusing to open or create anything through it",
           path);
    fail_errno("open lock file", path, errno);
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    fail(A2PACK_E_INVALID_ARGUMENT, "{}: the lock file is not a regular file", path);
  }
  return fd;
}

// The segments folder, open for the appender's openat(): checked to be a
// real folder as it is opened, so swapping it for a link later changes
// nothing.
int open_segments_dir(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ELOOP || errno == ENOTDIR)
      fail(A2PACK_E_INVALID_ARGUMENT,
           "{}: is a symbolic link or not a folder: refusing to write segments through it", path);
    fail_errno("open folder", path, errno);
  }
  return fd;
}

}  // namespace

void check_options(const Options& o) {
  if (o.frame_bytes < 4096 || o.frame_bytes > (1u << 28))
    fail(A2PACK_E_INVALID_ARGUMENT, "frame_bytes must be in [4096, 2^28], got {}", o.frame_bytes);
  if (o.ring_bytes < o.frame_bytes)
    fail(A2PACK_E_INVALID_ARGUMENT, "ring_bytes ({}) must be at least frame_bytes ({})",
         o.ring_bytes, o.frame_bytes);
  if (o.rotate_bytes < 4096)
    fail(A2PACK_E_INVALID_ARGUMENT, "rotate_bytes must be at least 4096, got {}", o.rotate_bytes);
  if (o.zstd_level < ZSTD_minCLevel() || o.zstd_level > ZSTD_maxCLevel())
    fail(A2PACK_E_INVALID_ARGUMENT, "zstd_level must be in [{}, {}], got {}", ZSTD_minCLevel(),
         ZSTD_maxCLevel(), o.zstd_level);
}

Logger::Logger(std::string dir, const Options& opts)
    : dir_(std::move(dir)), opts_(opts), uid_(g_next_uid.fetch_add(1)), pid_(::getpid()) {
  check_options(opts_);
  if (dir_.empty()) fail(A2PACK_E_INVALID_ARGUMENT, "the logger folder name is empty");
  while (dir_.size() > 1 && dir_.back() == '/') dir_.pop_back();
  make_dir(dir_, /*inside=*/false);
  std::string lock_path = dir_ + "/.lock";
  lock_fd_ = open_lock(lock_path);
  if (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    int err = errno;
    ::close(lock_fd_);
    lock_fd_ = -1;
    if (err == EWOULDBLOCK)
      fail(A2PACK_E_IO, "{}: another logger has this folder open (lock file {})", dir_,
           lock_path);
    fail_errno("lock", lock_path, err);
  }
  try {
    make_dir(dir_ + "/segments", /*inside=*/true);
    make_dir(dir_ + "/streams", /*inside=*/true);
    segments_fd_ = open_segments_dir(dir_ + "/segments");
    // Sidecar temporaries of a logger killed inside register_stream (we
    // hold the folder lock, so no live logger is writing one).
    remove_stale_temps_in(dir_ + "/streams");
    // Streams of earlier sessions stay usable; ids continue after them.
    for (uint32_t id : list_sidecars(dir_)) {
      StreamMeta m = read_sidecar(sidecar_path(dir_, id), id);
      streams_.publish(id, m.info);
      next_stream_ = id + 1;
    }
    auto segs = list_segments(dir_ + "/segments");
    if (!segs.empty() && segs.back() == UINT32_MAX)
      fail(A2PACK_E_OUT_OF_RANGE, "{}: no segment number left", dir_);
    first_segment_ = segs.empty() ? 0 : segs.back() + 1;
    // A newest segment without its closing frame was left by a killed
    // logger: the first new segment begins by saying so (and how large the
    // segment was), so readers tell it from one cut later.
    resume_.needed =
        needs_resume(dir_ + "/segments", segs, resume_.segment, resume_.size);
    unsigned wt = opts_.writer_threads ? opts_.writer_threads
                                       : std::min(2u, std::max(1u, std::thread::hardware_concurrency()));
    writer_ = std::thread([this] { appender_loop(); });
    try {
      for (unsigned i = 1; i < wt; ++i) compressors_.emplace_back([this] { compressor_loop(); });
    } catch (...) {
      // A thread that cannot start (EAGAIN: a process or container limit)
      // after others did: stop and join those, or their std::thread objects
      // would end the process as the members are destroyed.
      {
        std::lock_guard<std::mutex> lk(q_mu_);
        stop_threads_locked();
      }
      join_threads();
      throw;
    }
  } catch (...) {
    if (segments_fd_ >= 0) ::close(segments_fd_);
    segments_fd_ = -1;
    ::close(lock_fd_);
    lock_fd_ = -1;
    throw;
  }
}

bool Logger::forked() const { return fork_stamp_.forked(); }

void Logger::stop_threads_locked() {
  stop_ = true;
  append_cv_.notify_all();
  compress_cv_.notify_all();
}

void Logger::join_threads() {
  writer_.join();
  for (auto& t : compressors_) t.join();
  compressors_.clear();
}

Logger::~Logger() {
  if (forked()) {
    // Misuse (see forked()): at least do not abort on the thread objects.
    new (&writer_) std::thread();
    for (auto& t : compressors_) new (&t) std::thread();
    return;
  }
  try {
    close();
  } catch (...) {
    // A destructor cannot report; close() callers see the error.
  }
  std::lock_guard<std::mutex> lk(q_mu_);
  for (auto& it : queue_) {
    delete it.chunk;
    delete it.out;
  }
  for (Chunk* c : free_) delete c;
  for (auto* o : free_out_) delete o;
}

// ------------------------------------------------------------------ streams

uint32_t Logger::register_stream(const std::string& labels_json, double epoch_scale,
                                 double value_scale, uint32_t flags) {
  std::lock_guard<std::mutex> lk(register_mu_);
  if (closed_.load()) fail(A2PACK_E_CLOSED, "{}: the logger is closed", dir_);
  check_scales(epoch_scale, value_scale);
  if (flags & ~kStreamSort) fail(A2PACK_E_INVALID_ARGUMENT, "unknown stream flags {:#x}", flags);
  if (next_stream_ >= kMaxStreams)
    fail(A2PACK_E_OUT_OF_RANGE, "{}: at most {} streams can be registered", dir_, kMaxStreams);
  StreamInfo info{epoch_scale, value_scale, flags};
  uint32_t id = next_stream_;
  // Sidecar first: a record can only name a published stream, so every
  // stream id found in a segment has its sidecar on disk.
  write_sidecar(dir_, id, info, labels_json);
  streams_.publish(id, info);
  next_stream_ = id + 1;
  return id;
}

// ------------------------------------------------------------------ hot path

Slot* Logger::my_slot() {
  TlsCache& c = t_cache;
  if (c.last_uid == uid_) return c.last;
  for (auto& e : c.entries)
    if (e.uid == uid_) {
      c.last_uid = uid_;
      c.last = e.slot.get();
      return c.last;
    }
  // Forget slots of loggers that were closed, so long-lived threads that
  // record into many short-lived loggers do not accumulate them.
  std::erase_if(c.entries, [](const TlsEntry& e) { return e.slot->retired.load(); });
  c.last_uid = 0;
  c.last = nullptr;
  auto s = std::make_shared<Slot>();
  {
    std::lock_guard<std::mutex> lk(reg_mu_);
    if (closed_.load()) fail(A2PACK_E_CLOSED, "{}: the logger is closed", dir_);
    slots_.push_back(s);
  }
  c.entries.push_back({uid_, s});
  c.last_uid = uid_;
  c.last = s.get();
  return c.last;
}

// Inlined into record() and record_batch(): a call per record costs its
// register saves (~30 instructions of a ~900-instruction n = 16 record).
[[gnu::always_inline]] inline void Logger::record_locked(Slot* sl, uint32_t sid, double epoch,
                                                         const uint32_t* idx, const double* val,
                                                         size_t n) {
  if (sl->closed) [[unlikely]]
    fail(A2PACK_E_CLOSED, "{}: the logger is closed", dir_);
  if (forked()) [[unlikely]]
    fail(A2PACK_E_CLOSED, "{}: the logger belongs to process {}; a forked child cannot use it",
         dir_, pid_);
  if (failed_.load(std::memory_order_relaxed)) [[unlikely]]
    throw_failure();
  const StreamInfo* s = streams_.find(sid);
  if (!s) [[unlikely]]
    fail(A2PACK_E_INVALID_ARGUMENT, "stream {} is not registered ({} streams exist)", sid,
         streams_.count());
  if (n && (!idx || !val)) [[unlikely]]
    fail(A2PACK_E_INVALID_ARGUMENT, "stream {}: indices and values must not be NULL", sid);
  if (n > kMaxRecordValues) [[unlikely]]
    fail(A2PACK_E_INVALID_ARGUMENT, "stream {}: a record holds at most {} non-zeros, got {}",
         sid, kMaxRecordValues, n);
  size_t need = static_cast<size_t>(max_record_bytes(n));
  Chunk* c = sl->open;
  if (!c || c->cap - c->len() < need) [[unlikely]]
    c = rollover(sl, need);
  uint8_t* sp = c->data.get() + kV2Prefix + c->slen;
  uint8_t* vp = sl->vals.get() + c->vlen;
  encode_record_v2(sp, vp, sid, *s, epoch, sl->frame, idx, val, n, &sl->scratch);
  c->slen = static_cast<size_t>(sp - c->data.get()) - kV2Prefix;
  c->vlen = static_cast<size_t>(vp - sl->vals.get());
  c->records += 1;
  c->values += n;
}

void Logger::record(uint32_t sid, double epoch, const uint32_t* idx, const double* val,
                    size_t n) {
  Slot* sl = my_slot();
  SlotGuard g(sl);
  record_locked(sl, sid, epoch, idx, val, n);
}

void Logger::record_batch(size_t n, const uint32_t* sids, const double* epochs,
                          const uint64_t* offsets, const uint32_t* idx, const double* val,
                          size_t* done) {
  *done = 0;
  if (n == 0) return;
  Slot* sl = my_slot();
  SlotGuard g(sl);
  for (size_t i = 0; i < n; ++i) {
    if (offsets[i + 1] < offsets[i])
      fail(A2PACK_E_INVALID_ARGUMENT, "record {} of the batch: offsets[{}] = {} < offsets[{}] = {}",
           i, i + 1, offsets[i + 1], i, offsets[i]);
    try {
      record_locked(sl, sids[i], epochs[i], idx + offsets[i], val + offsets[i],
                    static_cast<size_t>(offsets[i + 1] - offsets[i]));
    } catch (const Error& e) {
      rethrow_with_context(e, fmt::format("record {} of the batch", i));
    }
    *done = i + 1;
  }
}

// The open chunk cannot take a record needing `need` bytes (or there is
// none): queue it (waiting for space) and open a fresh one.
Chunk* Logger::rollover(Slot* sl, size_t need) {
  // Once per frame: a forked child would otherwise queue frames for writer
  // threads that do not exist in it and wait forever.
  if (forked())
    fail(A2PACK_E_CLOSED, "{}: the logger belongs to process {}; a forked child cannot use it",
         dir_, pid_);
  Chunk* reuse = nullptr;
  // Outside the queue lock; harmless when the chunk then stays open (the
  // queue is full): the next seal copies the values again.
  if (sl->open && sl->open->records > 0) seal(sl, sl->open);
  {
    std::unique_lock<std::mutex> lk(q_mu_);
    Chunk* c = sl->open;
    if (c && c->records > 0) {
      // An empty queue always admits one chunk, so an oversized record
      // cannot wait forever.
      bool counted = false;
      while (queued_ > 0 && queued_ + c->cap > opts_.ring_bytes) {
        if (failed_.load()) {
          lk.unlock();
          throw_failure();
        }
        if (!counted) {
          ++full_events_;
          counted = true;
        }
        if (opts_.fail_when_full)
          fail(A2PACK_E_FULL,
               "{}: the writer is behind ({} bytes queued, ring_bytes {}); record not written",
               dir_, queued_, opts_.ring_bytes);
        space_cv_.wait(lk);
      }
      if (sl->closed) fail(A2PACK_E_CLOSED, "{}: the logger is closed", dir_);
      push_locked(c);
      sl->open = nullptr;
    } else if (c) {
      sl->open = nullptr;  // empty but too small: replaced below
      delete c;
    }
    size_t want = std::max<size_t>(opts_.frame_bytes, need + kV2Prefix);
    if (want == opts_.frame_bytes && !free_.empty()) {
      reuse = free_.back();
      free_.pop_back();
    }
  }
  if (!reuse) {
    reuse = new Chunk;
    reuse->cap = std::max<size_t>(opts_.frame_bytes, need + kV2Prefix);
    reuse->data.reset(new uint8_t[reuse->cap]);
  }
  reuse->slen = 0;
  reuse->vlen = 0;
  reuse->records = 0;
  reuse->values = 0;
  reuse->opened_ns = opts_.flush_interval_ms ? now_ns() : 0;
  if (sl->vals_cap < reuse->cap) {
    sl->vals.reset(new uint8_t[reuse->cap]);
    sl->vals_cap = reuse->cap;
  }
  sl->open = reuse;
  sl->frame.new_frame();
  return reuse;
}

void Logger::seal(Slot* sl, Chunk* c) {
  // The payload: structure length, structure, values (docs/logger.md).
  le::store<uint32_t>(c->data.get(), static_cast<uint32_t>(c->slen));
  std::memcpy(c->data.get() + kV2Prefix + c->slen, sl->vals.get(), c->vlen);
}

void Logger::push_locked(Chunk* c) {
  Item it;
  it.chunk = c;
  it.budget = c->cap;
  queue_.push_back(it);
  queued_ += c->cap;
  max_queued_ = std::max(max_queued_, queued_);
  compress_cv_.notify_one();
  append_cv_.notify_one();
}

// ------------------------------------------------------------------ flush / close

void Logger::seal_all(bool closing) {
  std::vector<std::shared_ptr<Slot>> snap;
  {
    std::lock_guard<std::mutex> lk(reg_mu_);
    snap = slots_;
  }
  for (auto& s : snap) {
    SlotGuard g(s.get());
    if (s->open && s->open->records > 0) {
      // Past the ring limit by at most one chunk per thread: flush must not
      // wait behind recorders that are themselves waiting for space.
      seal(s.get(), s->open);
      std::lock_guard<std::mutex> lk(q_mu_);
      push_locked(s->open);
      s->open = nullptr;
    }
    if (closing) {
      s->closed = true;
      s->retired.store(true);
    }
  }
}

uint64_t Logger::queue_barrier() {
  std::lock_guard<std::mutex> lk(q_mu_);
  if (stop_) fail(A2PACK_E_CLOSED, "{}: the logger is closed", dir_);
  uint64_t seq = ++barrier_seq_;
  Item it;
  it.barrier = seq;
  queue_.push_back(it);
  append_cv_.notify_one();
  return seq;
}

void Logger::wait_barrier(uint64_t seq) {
  std::unique_lock<std::mutex> lk(q_mu_);
  done_cv_.wait(lk, [&] { return durable_seq_ >= seq || failed_.load(); });
  if (failed_.load()) {
    lk.unlock();
    throw_failure();
  }
}

void Logger::flush() {
  if (closed_.load()) fail(A2PACK_E_CLOSED, "{}: the logger is closed", dir_);
  if (forked())
    fail(A2PACK_E_CLOSED, "{}: the logger belongs to process {}; a forked child cannot use it",
         dir_, pid_);
  if (failed_.load()) throw_failure();
  seal_all(false);
  wait_barrier(queue_barrier());
}

void Logger::close() {
  if (forked()) {  // see ~Logger: nothing of the parent's logger works here
    closed_.store(true);
    return;
  }
  std::lock_guard<std::mutex> cl(close_mu_);
  if (!writer_.joinable()) return;  // closed already
  {
    std::lock_guard<std::mutex> lk(reg_mu_);
    closed_.store(true);
  }
  {
    std::lock_guard<std::mutex> lk(register_mu_);  // no registration in flight
  }
  seal_all(true);
  uint64_t seq = queue_barrier();
  {
    std::unique_lock<std::mutex> lk(q_mu_);
    done_cv_.wait(lk, [&] { return durable_seq_ >= seq || failed_.load(); });
    stop_threads_locked();
  }
  join_threads();
  {
    std::lock_guard<std::mutex> lk(reg_mu_);
    slots_.clear();
  }
  if (segments_fd_ >= 0) {
    ::close(segments_fd_);  // the appender that used it has ended
    segments_fd_ = -1;
  }
  if (lock_fd_ >= 0) {
    ::close(lock_fd_);  // releases the flock
    lock_fd_ = -1;
  }
  if (failed_.load()) throw_failure();
}

// ------------------------------------------------------------------ failure

void Logger::throw_failure() const {
  std::lock_guard<std::mutex> lk(q_mu_);
  throw Error(fail_status_, fail_message_);
}

void Logger::set_failure(a2pack_status st, const std::string& msg) {
  std::lock_guard<std::mutex> lk(q_mu_);
  if (!failed_.load()) {
    fail_status_ = st;
    fail_message_ = fmt::format("{}: the writer failed, records since the last flush may be "
                                "lost: {}",
                                dir_, msg);
    failed_.store(true);
  }
  space_cv_.notify_all();
  done_cv_.notify_all();
}

// ------------------------------------------------------------------ writer

void Logger::recycle_locked(Chunk* c) {
  // Keep a ring's worth of spare chunks for reuse; oversized ones go.
  if (c->cap == opts_.frame_bytes && free_.size() * c->cap < opts_.ring_bytes) {
    free_.push_back(c);
  } else {
    delete c;
  }
}

void Logger::steal_stale(int64_t now) {
  std::vector<std::shared_ptr<Slot>> snap;
  {
    std::lock_guard<std::mutex> lk(reg_mu_);
    snap = slots_;
  }
  int64_t limit = static_cast<int64_t>(opts_.flush_interval_ms) * 1'000'000;
  bool any_dead = false;
  for (auto& s : snap) {
    if (!try_lock_slot(s.get())) continue;  // its owner is recording: it will seal itself
    bool dead = s->dead.load(std::memory_order_acquire);
    Chunk* c = s->open;
    if (c && c->records > 0 && (dead || now - c->opened_ns >= limit)) {
      seal(s.get(), c);
      std::lock_guard<std::mutex> lk(q_mu_);
      push_locked(c);
      s->open = nullptr;
    }
    any_dead |= dead && !s->open;
    unlock_slot(s.get());
  }
  if (any_dead) {
    std::lock_guard<std::mutex> lk(reg_mu_);
    std::erase_if(slots_, [](const std::shared_ptr<Slot>& s) {
      return s->dead.load(std::memory_order_acquire) && !s->open;
    });
  }
}

// Claim the oldest queued chunk and compress it (lk held on entry and exit,
// released while compressing). False when there is nothing to claim.
bool Logger::compress_one(std::unique_lock<std::mutex>& lk, void* cctx_ptr) {
  while (claimed_ < queue_.size() && !queue_[claimed_].chunk) ++claimed_;
  if (claimed_ == queue_.size()) return false;
  // References to deque elements survive push_back and pop_front of others;
  // the appender pops this item only once it is compressed.
  Item& it = queue_[claimed_++];
  it.state = 1;
  Chunk* c = it.chunk;
  Column<uint8_t>* out;
  if (!free_out_.empty()) {
    out = free_out_.back();
    free_out_.pop_back();
  } else {
    out = new Column<uint8_t>();
  }
  lk.unlock();
  auto* cctx = static_cast<ZSTD_CCtx*>(cctx_ptr);
  bool ok = !failed_.load();
  BlockHeader h;
  if (ok) {
    try {
      size_t bound = kHeaderSize + ZSTD_compressBound(c->len());
      if (out->size() < bound) out->resize(bound);
      size_t r = ZSTD_compress2(cctx, out->data() + kHeaderSize, out->size() - kHeaderSize,
                                c->data.get(), c->len());
      if (ZSTD_isError(r))
        fail(A2PACK_E_INTERNAL, "zstd compression failed: {}", ZSTD_getErrorName(r));
      // Keep the frame within what readers accept for its size (format.hpp,
      // kWriterMaxExpansion): pad a frame that compressed too well.
      const uint64_t disk = (c->len() + kWriterMaxExpansion - 1) / kWriterMaxExpansion;
      if (kHeaderSize + r < disk) {
        const size_t pad = std::max<size_t>(disk - kHeaderSize - r, kPadMin);
        if (out->size() < kHeaderSize + r + pad) out->resize(kHeaderSize + r + pad);
        uint8_t* p = out->data() + kHeaderSize + r;
        le::store<uint32_t>(p, kPadMagic);
        le::store<uint32_t>(p + 4, static_cast<uint32_t>(pad - kPadMin));
        std::memset(p + kPadMin, 0, pad - kPadMin);
        r += pad;
      }
      h.compressed_len = static_cast<uint32_t>(r);
      h.raw_len = static_cast<uint32_t>(c->len());
      h.n_records = c->records;
      h.n_values = static_cast<uint32_t>(c->values);
      h.payload_crc = crc32c::compute(out->data() + kHeaderSize, r);
      write_header(out->data(), h);
      out->resize(kHeaderSize + r);
    } catch (const Error& e) {
      set_failure(e.status(), e.what());
      ok = false;
    } catch (const std::bad_alloc&) {
      set_failure(A2PACK_E_NO_MEMORY, "out of memory while compressing a frame");
      ok = false;
    }
  }
  lk.lock();
  it.records = c->records;
  it.values = c->values;
  it.raw = c->len();
  it.out = out;
  it.header = h;
  it.state = 2;
  it.chunk = nullptr;
  it.barrier = 0;
  recycle_locked(c);
  append_cv_.notify_one();
  return true;
}

// Every compressing thread's context: the level, and whether literals are
// Huffman-coded. Stored raw (the default), they cost ~16 % more bytes on the
// simulation workload but halve zstd's decompression time, 40 % of a whole
// decode with Huffman-coded literals (docs/logger.md, "Literals").
void Logger::configure(void* cctx_ptr) {
  auto* cctx = static_cast<ZSTD_CCtx*>(cctx_ptr);
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, opts_.zstd_level);
  size_t r = ZSTD_CCtx_setParameter(cctx, ZSTD_c_literalCompressionMode,
                                    opts_.compress_literals ? ZSTD_ps_auto : ZSTD_ps_disable);
  if (ZSTD_isError(r))  // a libzstd without the parameter: fail loudly rather than differ silently
    set_failure(A2PACK_E_INTERNAL,
                std::string("zstd refused the literal compression mode: ") + ZSTD_getErrorName(r));
}

void Logger::compressor_loop() {
  ZSTD_CCtx* cctx = ZSTD_createCCtx();
  if (!cctx) {
    set_failure(A2PACK_E_NO_MEMORY, "cannot create a zstd context");
    return;
  }
  configure(cctx);
  std::unique_lock<std::mutex> lk(q_mu_);
  for (;;) {
    if (compress_one(lk, cctx)) continue;
    if (stop_) break;
    compress_cv_.wait(lk);
  }
  lk.unlock();
  ZSTD_freeCCtx(cctx);
}

// The appender: takes the queue front in order, compressing it itself when no
// other thread has, writes compressed frames, serves barriers (sync), hands
// buffered bytes to the kernel whenever it runs out of work, and seals the
// partial frames of idle threads every half flush interval.
void Logger::appender_loop() {
  SegmentWriter out(segments_fd_, dir_ + "/segments", opts_.rotate_bytes, first_segment_, resume_);
  ZSTD_CCtx* cctx = ZSTD_createCCtx();
  if (!cctx) set_failure(A2PACK_E_NO_MEMORY, "cannot create a zstd context");
  else configure(cctx);
  const int64_t tick_ns =
      opts_.flush_interval_ms ? std::max<int64_t>(1'000'000, opts_.flush_interval_ms * 500'000LL)
                              : 0;
  int64_t next_tick = tick_ns ? now_ns() + tick_ns : 0;
  bool dirty = false;  // bytes buffered in `out` not yet handed to the kernel
  auto guarded = [&](auto&& fn) {
    try {
      fn();
    } catch (const Error& e) {
      set_failure(e.status(), e.what());
    }
  };

  std::unique_lock<std::mutex> lk(q_mu_);
  for (;;) {
    if (!queue_.empty()) {
      Item& f = queue_.front();
      if (f.chunk && f.state == 0 && failed_.load()) {
        // After a failure nothing more is written: drop the chunk so that
        // waiting recorders wake up (and see the error).
        recycle_locked(f.chunk);
        queued_ -= f.budget;
        queue_.pop_front();  // unclaimed front: claimed_ is 0
        space_cv_.notify_all();
        continue;
      }
      if (!f.chunk && f.state == 0) {  // a barrier
        uint64_t seq = f.barrier;
        queue_.pop_front();
        if (claimed_) --claimed_;
        lk.unlock();
        if (!failed_.load()) guarded([&] {
          out.sync();
          dirty = false;
        });
        lk.lock();
        durable_seq_ = std::max(durable_seq_, seq);
        ++flushes_;
        done_cv_.notify_all();
        continue;
      }
      if (f.state == 2) {  // compressed: append it
        Column<uint8_t>* buf = f.out;
        uint64_t budget = f.budget;
        Item done = f;
        queue_.pop_front();
        if (claimed_) --claimed_;
        lk.unlock();
        if (!failed_.load() && buf->size() >= kHeaderSize) guarded([&] {
          uint32_t before = out.segments_created();
          out.append(done.header, buf->data() + kHeaderSize, buf->size() - kHeaderSize);
          dirty = true;
          st_segments_.fetch_add(out.segments_created() - before, std::memory_order_relaxed);
          st_frames_.fetch_add(1, std::memory_order_relaxed);
          st_file_.fetch_add(buf->size(), std::memory_order_relaxed);
          st_records_.fetch_add(done.records, std::memory_order_relaxed);
          st_values_.fetch_add(done.values, std::memory_order_relaxed);
          st_raw_.fetch_add(done.raw, std::memory_order_relaxed);
        });
        lk.lock();
        buf->clear();
        free_out_.push_back(buf);
        queued_ -= budget;
        space_cv_.notify_all();
        continue;
      }
      if (cctx && compress_one(lk, cctx)) continue;
    }
    // Nothing to do right now.
    if (queue_.empty() && stop_) break;
    if (dirty && !failed_.load()) {
      lk.unlock();
      guarded([&] {
        out.write_out();
        dirty = false;
      });
      lk.lock();
      continue;
    }
    if (tick_ns && !stop_) {
      int64_t now = now_ns();
      if (now >= next_tick) {
        lk.unlock();
        steal_stale(now);
        lk.lock();
        next_tick = now + tick_ns;
        continue;
      }
      append_cv_.wait_for(lk, std::chrono::nanoseconds(next_tick - now));
    } else {
      append_cv_.wait(lk);
    }
  }
  lk.unlock();
  // No closing frame after a failure: records may have been lost, and the
  // segment must not read as closed cleanly.
  guarded([&] { out.close(!failed_.load()); });
  if (cctx) ZSTD_freeCCtx(cctx);
}

Stats Logger::stats() const {
  Stats s;
  s.records = st_records_.load();
  s.values = st_values_.load();
  s.raw_bytes = st_raw_.load();
  s.frames = st_frames_.load();
  s.file_bytes = st_file_.load();
  s.segments = st_segments_.load();
  std::lock_guard<std::mutex> lk(q_mu_);
  s.full_events = full_events_;
  s.queued_bytes = queued_;
  s.max_queued_bytes = max_queued_;
  s.flushes = flushes_;
  return s;
}

}  // namespace a2pack::logger
