#include "bag/reader.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <future>
#include <mutex>
#include <new>

#include "bag/shard_spec.hpp"
#include "base/batch_read.hpp"
#include "base/error.hpp"
#include "base/mapped_guard.hpp"
#include "base/worker_pool.hpp"
#include "storage/object_store.hpp"

namespace a2pack::bag {
namespace {

constexpr uint64_t kMaxSpan = 4u << 20;       // largest single read: keeps big ranges parallel
constexpr uint64_t kSerialBytes = 256u << 10;  // below this a pread batch is not worth a thread hop
constexpr uint64_t kSerialMappedBytes = 16u << 20;  // the same for copies out of a mapping
constexpr uint64_t kFillGroupBytes = 256u << 10;  // decoded bytes a fill worker takes at a time
// Most decoded bytes a batch holds twice (decoded while the rest of its
// reads wait, then copied to the caller's buffers): a training batch fits
// whole; a huge read decodes the rest in fill(), as it arrives.
constexpr uint64_t kDecodeAheadBytes = 64u << 20;

// Spans of shards in object storage go out as one batch per object
// (storage::ReadObject::read_many: ranged requests in parallel, neighbours
// merged), the objects of several shards at once, instead of one blocking
// read per span on the CPU workers. Returns which spans it read.
template <typename Spans, typename Dest>
std::vector<char> read_remote_spans(const std::vector<std::unique_ptr<Shard>>& shards,
                                    const Spans& spans, Dest dest) {
  std::vector<char> done(spans.size(), 0);
  std::vector<std::vector<storage::ReadRange>> per(shards.size());
  size_t objects = 0;
  for (size_t i = 0; i < spans.size(); ++i) {
    if (!shards[spans[i].shard]->records().object()) continue;
    auto& v = per[spans[i].shard];
    objects += v.empty();
    v.push_back({spans[i].off, static_cast<size_t>(spans[i].len), dest(i)});
    done[i] = 1;
  }
  if (objects == 0) return done;
  std::vector<std::future<void>> running;
  for (size_t s = 0; s < shards.size(); ++s) {
    if (per[s].empty()) continue;
    const storage::ReadObject* obj = shards[s]->records().object();
    if (objects == 1) {
      obj->read_many(per[s].data(), per[s].size());
      break;
    }
    running.push_back(std::async(std::launch::async, [obj, &r = per[s]] { obj->read_many(r.data(), r.size()); }));
  }
  for (auto& f : running) f.wait();
  for (auto& f : running) f.get();  // the first error
  return done;
}

// Whether span i of a batch is read with pread from a local file (not
// mapped, not already read from object storage).
template <typename Spans>
bool read_locally(const std::vector<std::unique_ptr<Shard>>& shards, const Spans& spans,
                  const std::vector<char>& remote, size_t i) {
  return !remote[i] && !shards[spans[i].shard]->records().is_mapped();
}

// The spans of a batch read locally, read all at once
// (RecordFile::read_many: io_uring, else up to `workers` threads).
// `on_span_read`, when given, hears the index of each span as its bytes
// arrive (see RecordFile::read_many).
template <typename Spans, typename Dest>
void read_pread_spans(const std::vector<std::unique_ptr<Shard>>& shards, const Spans& spans,
                      const std::vector<char>& remote, Dest dest, uint32_t workers,
                      const std::function<void(size_t)>* on_span_read = nullptr) {
  std::vector<RecordFile::Span> reads;
  std::vector<size_t> span_of;
  reads.reserve(spans.size());
  for (size_t i = 0; i < spans.size(); ++i) {
    if (!read_locally(shards, spans, remote, i)) continue;
    reads.push_back({&shards[spans[i].shard]->records(), spans[i].off, static_cast<size_t>(spans[i].len), dest(i)});
    if (on_span_read) span_of.push_back(i);
  }
  const std::function<void(size_t)> arrived = [&](size_t r) { (*on_span_read)(span_of[r]); };
  RecordFile::read_many(reads.data(), reads.size(), workers, on_span_read ? &arrived : nullptr);
}

// Decodes the records of a batch's spans as their reads complete, on pool
// threads, while the calling thread is still waiting for the other reads:
// a batch kept out of the page cache otherwise reads everything, then
// decodes everything, and the disk and the cores take turns. Push span
// indices with arrived(); finish() decodes what is left and reports the
// first error. Records go into buffers of their own (decoded_ of the
// PendingRead), as many as the budget allows; the rest are sized now and
// decoded by fill() as before.
template <typename Spans>
class DecodeAhead {
 public:
  DecodeAhead(const Spans& spans, unsigned workers,
              std::function<void(size_t k)> record)
      : spans_(spans), record_(std::move(record)),
        background_(workers, workers, [this](unsigned, size_t) { drain(); }) {}
  ~DecodeAhead() { close(); }  // before background_ waits for the drains
  DecodeAhead(const DecodeAhead&) = delete;
  DecodeAhead& operator=(const DecodeAhead&) = delete;

  void arrived(size_t span) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      ready_.push_back(span);
    }
    cv_.notify_one();
  }

  void finish() {
    close();
    background_.finish();
  }

 private:
  void close() {
    {
      std::lock_guard<std::mutex> lk(mu_);
      closed_ = true;
    }
    cv_.notify_all();
  }

  void drain() {
    for (;;) {
      size_t i;
      {
        std::unique_lock<std::mutex> lk(mu_);
        cv_.wait(lk, [&] { return !ready_.empty() || closed_; });
        if (ready_.empty()) return;
        i = ready_.back();
        ready_.pop_back();
      }
      for (size_t k = spans_[i].k0; k < spans_[i].k1; ++k) record_(k);
    }
  }

  const Spans& spans_;
  std::function<void(size_t)> record_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<size_t> ready_;
  bool closed_ = false;
  BackgroundFor background_;  // last: it starts draining as it is made
};

}  // namespace

Reader::Reader(const std::vector<std::string>& paths, const ReaderOptions& o) : options_(o) {
  if (paths.empty()) fail(A2PACK_E_INVALID_ARGUMENT, "no files to read");
  if (paths.size() > UINT32_MAX) fail(A2PACK_E_INVALID_ARGUMENT, "too many shards");
  bool any_compressed = false;
  shards_.reserve(paths.size());
  starts_.reserve(paths.size() + 1);
  for (const auto& p : paths) {
    shards_.push_back(std::make_unique<Shard>(p, o));
    starts_.push_back(total_);
    total_ += shards_.back()->count();
    records_bytes_ += shards_.back()->records_bytes();
    any_compressed |= shards_.back()->compressed();
  }
  starts_.push_back(total_);
  if (o.sharding == ShardingLayout::interleaved) {
    for (size_t i = 1; i < shards_.size(); ++i) {
      uint64_t a = shards_[0]->count(), b = shards_[i]->count(), prev = shards_[i - 1]->count();
      if (b > prev)
        fail(A2PACK_E_INVALID_ARGUMENT,
             "interleaved layout needs shard sizes that never increase: {} has {} records, the "
             "shard before it {}",
             shards_[i]->path(), b, prev);
      if (a - b > 1)
        fail(A2PACK_E_INVALID_ARGUMENT,
             "interleaved layout needs shard sizes within 1 of each other: {} has {} records, {} "
             "has {}",
             shards_[0]->path(), a, shards_[i]->path(), b);
    }
  }
  if (any_compressed) codec_ = std::make_unique<ZstdCodec>(o.zstd);
}

std::string Reader::notes() const {
  std::string out;
  for (const auto& s : shards_)
    if (!s->note().empty()) out += s->note() + "\n";
  return out;
}

namespace {
// A buffer of `n` bytes for a batch, or NO_MEMORY naming what it was for.
PooledBuffer batch_buffer(uint64_t n, const char* what, const Shard& first, size_t records) {
  try {
    return PooledBuffer(n);
  } catch (const std::bad_alloc&) {
    fail(A2PACK_E_NO_MEMORY, "{}: out of memory allocating {} bytes for the {} of {} records", first.path(),
         n, what, records);
  }
}

[[noreturn]] void too_large(const Shard& sh, uint64_t record, uint64_t size, uint64_t limit) {
  fail(A2PACK_E_UNSUPPORTED,
       "{}: record {}: decodes to {} bytes, more than the reader's limit of {} bytes "
       "(max_record_bytes; raise it to read this record)",
       sh.path(), record, size, limit);
}
}  // namespace

void Reader::sizes(const uint64_t* indices, size_t n, uint64_t* out, uint32_t workers) const {
  if (workers == 0) workers = options_.max_parallelism;
  const uint32_t cpu_workers = std::min(resolve_workers(workers), hardware_threads());
  for (size_t k = 0; k < n; ++k)
    if (indices[k] >= total_)
      fail(A2PACK_E_OUT_OF_RANGE, "indices[{}] = {} out of range [0, {})", k, indices[k], total_);
  // The limits and the stored frames may be read from mappings: each
  // record under a guard (mapped_guard.hpp), so a file cut short fails the
  // call with an error naming it. Only plain locals and thread_local
  // scratch live while a mapping is read.
  parallel_for(n, cpu_workers, [&](size_t k) { guarded_read([&] {
    size_t s;
    uint64_t local, b, e;
    locate(indices[k], s, local);
    const Shard& sh = *shards_[s];
    sh.range(local, b, e);
    if (!sh.compressed() || e == b) {
      out[k] = e - b;
      return;
    }
    // The stored frame only (compressed bytes, bounded by the file).
    thread_local std::vector<uint8_t> stored;
    const uint8_t* src;
    if (sh.records().is_mapped()) {
      src = sh.records().mapped() + b;
    } else {
      try {
        stored.resize(e - b);
      } catch (const std::bad_alloc&) {
        fail(A2PACK_E_NO_MEMORY, "{}: record {}: out of memory allocating {} bytes for its stored frame",
             sh.path(), local, e - b);
      }
      sh.records().read(b, e - b, stored.data());
      src = stored.data();
    }
    uint64_t size = ZstdCodec::content_size(src, e - b, sh.path(), local);
    if (size == ZstdCodec::kUnknown)
      size = codec_->decoded_length(src, e - b, sh.path(), local, options_.max_record_bytes);
    out[k] = size;
  }); });
}

std::unique_ptr<Reader> Reader::open(const std::string& spec, const ReaderOptions& o) {
  return std::make_unique<Reader>(expand_spec(spec), o);
}

void Reader::locate(uint64_t g, size_t& shard, uint64_t& local) const {
  if (options_.sharding == ShardingLayout::interleaved) {
    shard = static_cast<size_t>(g % shards_.size());
    local = g / shards_.size();
    return;
  }
  // The last start <= g whose shard is non-empty.
  auto it = std::upper_bound(starts_.begin(), starts_.end() - 1, g);
  shard = static_cast<size_t>(it - starts_.begin()) - 1;
  local = g - starts_[shard];
}

bool Reader::zero_copy() const {
  for (const auto& s : shards_)
    if (s->compressed() || !s->records().is_mapped()) return false;
  return true;
}

void Reader::spans(const uint64_t* indices, size_t n, uint32_t* shard, uint64_t* begin,
                   uint64_t* end) const {
  guarded_read([&] { spans_unguarded(indices, n, shard, begin, end); });  // limits may be mapped
}

void Reader::spans_unguarded(const uint64_t* indices, size_t n, uint32_t* shard, uint64_t* begin,
                             uint64_t* end) const {
  for (size_t k = 0; k < n; ++k) {
    uint64_t g = indices[k];
    if (g >= total_)
      fail(A2PACK_E_OUT_OF_RANGE, "indices[{}] = {} out of range [0, {})", k, g, total_);
    size_t s;
    uint64_t local;
    locate(g, s, local);
    shards_[s]->range(local, begin[k], end[k]);
    shard[k] = static_cast<uint32_t>(s);
  }
}

void Reader::spans_range(uint64_t start, uint64_t count, uint32_t* shard, uint64_t* begin,
                         uint64_t* end) const {
  if (start > total_ || count > total_ - start)
    fail(A2PACK_E_OUT_OF_RANGE, "records [{}, {}) out of range [0, {})", start, start + count, total_);
  guarded_read([&] {  // the limits may be read from a mapping
    for (uint64_t k = 0; k < count; ++k) {
      size_t s;
      uint64_t local;
      locate(start + k, s, local);
      shards_[s]->range(local, begin[k], end[k]);
      shard[k] = static_cast<uint32_t>(s);
    }
  });
}

Batch Reader::read_range(uint64_t start, uint64_t count, uint32_t workers) const {
  if (start > total_ || count > total_ - start)
    fail(A2PACK_E_OUT_OF_RANGE, "records [{}, {}) out of range [0, {})", start, start + count, total_);
  std::vector<uint64_t> idx(count);
  for (uint64_t i = 0; i < count; ++i) idx[i] = start + i;
  return read(idx.data(), idx.size(), workers);
}

Reader::Located Reader::locate_all(const uint64_t* indices, size_t n) const {
  Located at;
  at.locs.resize(n);
  // The limits may be read from a mapping: one guard for the batch. `at`
  // lives outside it; inside, only push_back allocates, never while a
  // mapping is read.
  guarded_read([&] { locate_into(at, indices, n); });
  return at;
}

void Reader::locate_into(Located& at, const uint64_t* indices, size_t n) const {
  for (size_t k = 0; k < n; ++k) {
    uint64_t g = indices[k];
    if (g >= total_)
      fail(A2PACK_E_OUT_OF_RANGE, "indices[{}] = {} out of range [0, {})", k, g, total_);
    size_t s;
    uint64_t local, b, e;
    locate(g, s, local);
    const Shard& sh = *shards_[s];
    sh.range(local, b, e);
    at.locs[k] = {static_cast<uint32_t>(s), local, b, e - b};
    at.stored_bytes += e - b;
    at.any_compressed |= sh.compressed() && e > b;
    at.all_mapped &= sh.records().is_mapped();
    if (!at.spans.empty()) {
      Span& sp = at.spans.back();
      if (sp.shard == s && sp.off + sp.len == b && sp.len + (e - b) <= kMaxSpan) {
        sp.k1 = k + 1;
        sp.len += e - b;
        continue;
      }
    }
    at.spans.push_back({k, k + 1, static_cast<uint32_t>(s), b, e - b});
  }
}

Batch Reader::read(const uint64_t* indices, size_t n, uint32_t workers) const {
  // `workers` caps the threads of this call. Reads through pread wait on the
  // disk, so they use all of it (a deep queue is what makes cold random
  // reads fast); copying and decompressing are CPU work, capped at the cores.
  if (workers == 0) workers = options_.max_parallelism;
  Batch out;
  out.offsets.assign(n + 1, 0);
  if (n == 0) return out;
  Located at = locate_all(indices, n);

  // Uncompressed: spans land directly in the output, which is laid out
  // exactly like them.
  if (!at.any_compressed) {
    const uint32_t cpu_workers = std::min(resolve_workers(workers), hardware_threads());
    for (size_t k = 0; k < n; ++k) out.offsets[k + 1] = out.offsets[k] + at.locs[k].len;
    out.bytes = at.stored_bytes;
    out.data = batch_buffer(out.bytes, "batch", *shards_[at.locs[0].shard], n);
    // Copies out of a mapping are memory-bound: threads pay off only for big
    // batches. Local files that are not mapped are read with pread under
    // DROP_AFTER_READ or DIRECT_IO, which keep them out of the page cache:
    // every read waits on the disk, so even a small batch goes out at once,
    // all of it queued together.
    auto dest = [&](size_t i) { return out.data.get() + out.offsets[at.spans[i].k0]; };
    const std::vector<char> remote = read_remote_spans(shards_, at.spans, dest);
    if (!at.all_mapped) read_pread_spans(shards_, at.spans, remote, dest, workers);
    uint32_t w = out.bytes < kSerialMappedBytes ? 1 : cpu_workers;
    parallel_for(at.spans.size(), w, [&](size_t i) {
      const Span& sp = at.spans[i];
      const RecordFile& f = shards_[sp.shard]->records();
      if (remote[i] || !f.is_mapped()) return;
      guarded_copy(dest(i), f.mapped() + sp.off, sp.len);
    });
    return out;
  }

  // Compressed: every record decompressed straight into its place.
  PendingRead p = prepare_located(std::move(at), workers);
  for (size_t k = 0; k < n; ++k) out.offsets[k + 1] = out.offsets[k] + p.sizes_[k];
  out.bytes = out.offsets[n];
  out.data = batch_buffer(out.bytes, "decoded batch", *shards_[p.locs_[0].shard], n);
  std::vector<uint8_t*> dests(n);
  for (size_t k = 0; k < n; ++k) dests[k] = out.data.get() + out.offsets[k];
  p.fill(dests.data());
  return out;
}

PendingRead Reader::prepare(const uint64_t* indices, size_t n, uint32_t workers) const {
  if (workers == 0) workers = options_.max_parallelism;
  return prepare_located(locate_all(indices, n), workers);
}

PendingRead Reader::prepare_located(Located at, uint32_t workers) const {
  const size_t n = at.locs.size();
  PendingRead p;
  p.reader_ = this;
  p.cpu_workers_ = std::min(resolve_workers(workers), hardware_threads());
  p.locs_ = std::move(at.locs);
  if (n == 0) return p;

  // Each record's stored bytes: a view of the mapping, or read into scratch.
  const auto& locs = p.locs_;
  p.src_.resize(n);
  if (at.all_mapped) {
    for (size_t k = 0; k < n; ++k)
      p.src_[k] = shards_[locs[k].shard]->records().mapped() + locs[k].off;
  }
  p.sizes_.resize(n);
  p.unsized_.resize(n);
  p.decodes_ = at.any_compressed;
  std::vector<char> sized(n, 0);  // set by decode-ahead for the records it took
  if (!at.all_mapped) {
    std::vector<uint64_t> soff(n + 1, 0);
    for (size_t k = 0; k < n; ++k) soff[k + 1] = soff[k] + locs[k].len;
    p.scratch_ = batch_buffer(at.stored_bytes, "stored bytes", *shards_[locs[0].shard], n);
    for (size_t k = 0; k < n; ++k) {
      const RecordFile& f = shards_[locs[k].shard]->records();
      p.src_[k] = f.is_mapped() ? f.mapped() + locs[k].off : p.scratch_.get() + soff[k];
    }
    auto dest = [&](size_t i) { return p.scratch_.get() + soff[at.spans[i].k0]; };
    const std::vector<char> remote = read_remote_spans(shards_, at.spans, dest);
    // Disk-bound (see Reader::read): every span at once, whatever the size.
    // Mixed shards: mapped ones are viewed below. Frames are decoded as
    // their spans arrive when there is more than one read to wait for and
    // io_uring does the reading (without it, the reads already take a
    // thread each and the cores: decoding alongside measured slower).
    size_t local_reads = 0;
    for (size_t i = 0; i < at.spans.size() && local_reads < 2; ++i)
      local_reads += read_locally(shards_, at.spans, remote, i);
    if (at.any_compressed && local_reads >= 2 && batch_read_available()) {
      p.decoded_.resize(n);
      std::atomic<uint64_t> budget{kDecodeAheadBytes};
      DecodeAhead<decltype(at.spans)> ahead(at.spans, p.cpu_workers_, [&](size_t k) {
        size_record(p, k, &budget);
        sized[k] = 1;
      });
      const std::function<void(size_t)> arrived = [&](size_t i) { ahead.arrived(i); };
      read_pread_spans(shards_, at.spans, remote, dest, workers, &arrived);
      ahead.finish();
    } else {
      read_pread_spans(shards_, at.spans, remote, dest, workers);
    }
  }

  // Decoded sizes: stored records as they are; zstd frames from their
  // headers (frames without one are decoded now, once).
  if (!at.any_compressed) {
    for (size_t k = 0; k < n; ++k) p.sizes_[k] = locs[k].len;
  } else {
    size_t grain = std::max<size_t>(1, n / (static_cast<size_t>(p.cpu_workers_) * 8));
    parallel_for(
        n, p.cpu_workers_, [&](size_t k) { if (!sized[k]) size_record(p, k, nullptr); }, grain);
  }
  for (uint64_t s : p.sizes_) p.bytes_ += s;
  return p;
}

void Reader::size_record(PendingRead& p, size_t k, std::atomic<uint64_t>* budget) const {
  const RecordLoc& l = p.locs_[k];
  const Shard& sh = *shards_[l.shard];
  if (!sh.compressed() || l.len == 0) {
    p.sizes_[k] = l.len;
    return;
  }
  const uint64_t limit = options_.max_record_bytes;
  // A stored frame in a mapping is read under a guard (mapped_guard.hpp).
  const bool mapped = sh.records().is_mapped();
  uint64_t s;
  if (mapped)
    guarded_read([&] { s = ZstdCodec::content_size(p.src_[k], l.len, sh.path(), l.local); });
  else
    s = ZstdCodec::content_size(p.src_[k], l.len, sh.path(), l.local);
  if (s == ZstdCodec::kUnknown) {
    // The streaming decoder grows a buffer as it goes, which a guard must
    // not hold: a mapped frame is copied out first (such frames are rare;
    // bagz writes the content size).
    const uint8_t* src = p.src_[k];
    thread_local std::vector<uint8_t> frame;
    if (mapped) {
      try {
        frame.resize(l.len);
      } catch (const std::bad_alloc&) {
        fail(A2PACK_E_NO_MEMORY, "{}: record {}: out of memory allocating {} bytes for its stored frame",
             sh.path(), l.local, l.len);
      }
      guarded_copy(frame.data(), src, l.len);
      src = frame.data();
    }
    p.unsized_[k] = codec_->decompress_unknown(src, l.len, sh.path(), l.local, limit);
    s = p.unsized_[k].size();
  } else if (s > limit) {
    too_large(sh, l.local, s, limit);  // before anything is allocated for it
  } else if (budget && s > 0) {
    // Decoded now if the batch's budget still has room (and memory allows);
    // otherwise fill() decodes it straight into its destination.
    uint64_t left = budget->load(std::memory_order_relaxed);
    while (left >= s && !budget->compare_exchange_weak(left, left - s, std::memory_order_relaxed)) {
    }
    if (left >= s) {
      std::unique_ptr<uint8_t[]> out(new (std::nothrow) uint8_t[s]);
      if (out) {
        auto decode = [&] { codec_->decompress_exact(p.src_[k], l.len, out.get(), s, sh.path(), l.local); };
        if (mapped)
          guarded_read(decode);
        else
          decode();
        p.decoded_[k] = std::move(out);
      }
    }
  }
  p.sizes_[k] = s;
}

void PendingRead::fill(uint8_t* const* dests) const {
  const size_t n = size();
  if (n == 0) return;
  const Reader& r = *reader_;
  // Small records are not worth a thread hop each; group them, but keep a
  // group to about kFillGroupBytes decoded so the workers finish together (a
  // group of 16 records of 48 KiB is ~0.8 ms of zstd). Plain copies of a
  // small batch stay on this thread.
  const size_t per_worker = n / (static_cast<size_t>(cpu_workers_) * 8);
  const uint64_t per_group = kFillGroupBytes * n / std::max<uint64_t>(1, bytes_);
  const size_t grain = std::max<size_t>(1, std::min<uint64_t>(per_worker, per_group));
  uint32_t workers = decodes_ || bytes_ >= kSerialBytes ? cpu_workers_ : 1;
  parallel_for(
      n, workers,
      [&](size_t k) {
        const RecordLoc& l = locs_[k];
        const Shard& sh = *r.shards_[l.shard];
        if (sizes_[k] == 0) return;
        uint8_t* dst = dests[k];
        if (!decoded_.empty() && decoded_[k]) {
          std::memcpy(dst, decoded_[k].get(), sizes_[k]);
        } else if (unsized_[k]) {
          std::memcpy(dst, unsized_[k].data(), sizes_[k]);
        } else {
          // From the stored bytes: a mapping's under a guard.
          auto from_stored = [&] {
            if (!sh.compressed())
              std::memcpy(dst, src_[k], l.len);
            else
              r.codec_->decompress_exact(src_[k], l.len, dst, sizes_[k], sh.path(), l.local);
          };
          if (sh.records().is_mapped())
            guarded_read(from_stored);
          else
            from_stored();
        }
      },
      grain);
}

}  // namespace a2pack::bag
