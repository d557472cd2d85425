#include "logger/logger.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>

#include <zstd.h>

#include "base/error.hpp"
#include "base/file_io.hpp"
#include "logger/format.hpp"
#include "logger/segment.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define A2PACK_CPU_RELAX() _mm_pause()
#else
#define A2PACK_CPU_RELAX() ((void)0)
#endif

namespace a2pack::logger {

// One frame's raw bytes being filled by a recording thread.
struct Chunk {
  std::unique_ptr<uint8_t[]> data;
  size_t cap = 0;
  size_t len = 0;
  uint32_t records = 0;
  uint64_t values = 0;
  int64_t opened_ns = 0;
};

// Per (thread, logger) recording state. Everything but the atomics is
// guarded by `lock`.
struct Slot {
  std::atomic<uint32_t> lock{0};
  Chunk* open = nullptr;
  DeltaState delta;
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

void make_dir(const std::string& path) {
  if (::mkdir(path.c_str(), 0755) == 0) {
    fsync_dir(parent_dir(path));
    return;
  }
  if (errno != EEXIST) fail_errno("create folder", path, errno);
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    fail(A2PACK_E_INVALID_ARGUMENT, "{}: exists and is not a folder", path);
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
    : dir_(std::move(dir)), opts_(opts), uid_(g_next_uid.fetch_add(1)) {
  check_options(opts_);
  if (dir_.empty()) fail(A2PACK_E_INVALID_ARGUMENT, "the logger folder name is empty");
  while (dir_.size() > 1 && dir_.back() == '/') dir_.pop_back();
  make_dir(dir_);
  std::string lock_path = dir_ + "/.lock";
  lock_fd_ = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock_fd_ < 0) fail_errno("open lock file", lock_path, errno);
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
    make_dir(dir_ + "/segments");
    make_dir(dir_ + "/streams");
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
    writer_ = std::thread([this] { writer_loop(); });
  } catch (...) {
    ::close(lock_fd_);
    lock_fd_ = -1;
    throw;
  }
}

Logger::~Logger() {
  try {
    close();
  } catch (...) {
    // A destructor cannot report; close() callers see the error.
  }
  std::lock_guard<std::mutex> lk(q_mu_);
  for (auto& it : queue_) delete it.chunk;
  for (Chunk* c : free_) delete c;
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

void Logger::record_locked(Slot* sl, uint32_t sid, double epoch, const uint32_t* idx,
                           const double* val, size_t n) {
  if (sl->closed) [[unlikely]]
    fail(A2PACK_E_CLOSED, "{}: the logger is closed", dir_);
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
  if (!c || c->cap - c->len < need) [[unlikely]]
    c = rollover(sl, need);
  int64_t tick;
  uint8_t* end = encode_record(c->data.get() + c->len, sid, *s, epoch, sl->delta.base(sid), idx,
                               val, n, &tick, &sl->scratch);
  sl->delta.set(sid, tick);
  c->len = static_cast<size_t>(end - c->data.get());
  c->records += 1;
  c->values += n;
}

// The open chunk cannot take a record needing `need` bytes (or there is
// none): queue it (waiting for space) and open a fresh one.
Chunk* Logger::rollover(Slot* sl, size_t need) {
  Chunk* reuse = nullptr;
  {
    std::unique_lock<std::mutex> lk(q_mu_);
    Chunk* c = sl->open;
    if (c && c->len > 0) {
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
    size_t want = std::max<size_t>(opts_.frame_bytes, need);
    if (want == opts_.frame_bytes && !free_.empty()) {
      reuse = free_.back();
      free_.pop_back();
    }
  }
  if (!reuse) {
    reuse = new Chunk;
    reuse->cap = std::max<size_t>(opts_.frame_bytes, need);
    reuse->data.reset(new uint8_t[reuse->cap]);
  }
  reuse->len = 0;
  reuse->records = 0;
  reuse->values = 0;
  reuse->opened_ns = opts_.flush_interval_ms ? now_ns() : 0;
  sl->open = reuse;
  sl->delta.new_frame();
  return reuse;
}

void Logger::push_locked(Chunk* c) {
  queue_.push_back({c, 0});
  queued_ += c->cap;
  max_queued_ = std::max(max_queued_, queued_);
  writer_cv_.notify_one();
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
    if (s->open && s->open->len > 0) {
      // Past the ring limit by at most one chunk per thread: flush must not
      // wait behind recorders that are themselves waiting for space.
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
  queue_.push_back({nullptr, seq});
  writer_cv_.notify_one();
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
  if (failed_.load()) throw_failure();
  seal_all(false);
  wait_barrier(queue_barrier());
}

void Logger::close() {
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
    stop_ = true;
    writer_cv_.notify_one();
  }
  writer_.join();
  {
    std::lock_guard<std::mutex> lk(reg_mu_);
    slots_.clear();
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

void Logger::release_chunk(Chunk* c) {
  std::lock_guard<std::mutex> lk(q_mu_);
  queued_ -= c->cap;
  // Keep a frame's worth of spare chunks for reuse; oversized ones go.
  if (c->cap == opts_.frame_bytes && free_.size() * c->cap < opts_.ring_bytes) {
    free_.push_back(c);
  } else {
    delete c;
  }
  space_cv_.notify_all();
}

void Logger::steal_stale(int64_t now, bool all) {
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
    if (c && c->len > 0 && (all || dead || now - c->opened_ns >= limit)) {
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

void Logger::writer_loop() {
  SegmentWriter out(dir_ + "/segments", opts_.rotate_bytes, first_segment_);
  ZSTD_CCtx* cctx = ZSTD_createCCtx();
  if (!cctx) set_failure(A2PACK_E_NO_MEMORY, "cannot create a zstd context");
  else ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, opts_.zstd_level);
  std::vector<uint8_t> comp;
  uint8_t header[kHeaderSize];
  const int64_t tick_ns =
      opts_.flush_interval_ms ? std::max<int64_t>(1'000'000, opts_.flush_interval_ms * 500'000LL)
                              : 0;
  int64_t next_tick = tick_ns ? now_ns() + tick_ns : 0;
  bool dirty = false;  // bytes buffered in `out` not yet handed to the kernel

  auto process = [&](Chunk* c) {
    if (failed_.load()) return;
    try {
      size_t bound = ZSTD_compressBound(c->len);
      if (comp.size() < bound) comp.resize(bound);
      size_t r = ZSTD_compress2(cctx, comp.data(), comp.size(), c->data.get(), c->len);
      if (ZSTD_isError(r)) fail(A2PACK_E_INTERNAL, "zstd compression failed: {}", ZSTD_getErrorName(r));
      BlockHeader h;
      h.compressed_len = static_cast<uint32_t>(r);
      h.raw_len = static_cast<uint32_t>(c->len);
      h.n_records = c->records;
      h.payload_crc = crc32c::compute(comp.data(), r);
      write_header(header, h);
      uint32_t segs_before = out.segments_created();
      out.append(header, kHeaderSize, comp.data(), r);
      dirty = true;
      st_segments_.fetch_add(out.segments_created() - segs_before, std::memory_order_relaxed);
      st_frames_.fetch_add(1, std::memory_order_relaxed);
      st_raw_.fetch_add(c->len, std::memory_order_relaxed);
      st_file_.fetch_add(kHeaderSize + r, std::memory_order_relaxed);
      st_records_.fetch_add(c->records, std::memory_order_relaxed);
      st_values_.fetch_add(c->values, std::memory_order_relaxed);
    } catch (const Error& e) {
      set_failure(e.status(), e.what());
    } catch (const std::bad_alloc&) {
      set_failure(A2PACK_E_NO_MEMORY, "out of memory");
    }
  };

  std::deque<Item> batch;
  for (;;) {
    bool stopping;
    {
      std::unique_lock<std::mutex> lk(q_mu_);
      if (queue_.empty() && !stop_) {
        if (tick_ns) {
          auto wait_ns = std::max<int64_t>(0, next_tick - now_ns());
          writer_cv_.wait_for(lk, std::chrono::nanoseconds(wait_ns),
                              [&] { return !queue_.empty() || stop_; });
        } else {
          writer_cv_.wait(lk, [&] { return !queue_.empty() || stop_; });
        }
      }
      batch.swap(queue_);
      stopping = stop_;
    }
    uint64_t barrier = 0;
    for (auto& it : batch) {
      if (it.chunk) {
        process(it.chunk);
        release_chunk(it.chunk);
        continue;
      }
      barrier = std::max(barrier, it.barrier);
      if (!failed_.load()) {
        try {
          out.sync();
          dirty = false;
        } catch (const Error& e) {
          set_failure(e.status(), e.what());
        }
      }
      std::lock_guard<std::mutex> lk(q_mu_);
      durable_seq_ = std::max(durable_seq_, it.barrier);
      ++flushes_;
      done_cv_.notify_all();
    }
    batch.clear();
    // Nothing more queued: hand what is buffered to the kernel so a killed
    // process loses nothing the writer already had.
    if (dirty && !failed_.load()) {
      bool idle;
      {
        std::lock_guard<std::mutex> lk(q_mu_);
        idle = queue_.empty();
      }
      if (idle) {
        try {
          out.write_out();
          dirty = false;
        } catch (const Error& e) {
          set_failure(e.status(), e.what());
        }
      }
    }
    if (tick_ns && !stopping) {
      int64_t now = now_ns();
      if (now >= next_tick) {
        steal_stale(now, false);
        next_tick = now + tick_ns;
      }
    }
    if (stopping) {
      std::lock_guard<std::mutex> lk(q_mu_);
      if (queue_.empty()) break;
    }
  }
  try {
    out.close();
  } catch (const Error& e) {
    set_failure(e.status(), e.what());
  }
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
