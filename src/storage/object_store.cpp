#include "storage/object_store.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "base/error.hpp"
#include "base/path_prefix.hpp"
#include "base/worker_pool.hpp"
#include "storage/backends.hpp"
#include "storage/options.hpp"

namespace a2pack::storage {
namespace {

// A gap this small is fetched rather than paying another request (Arrow's
// S3 reads use 8 KiB holes); larger ones would multiply the bytes moved by
// dense random batches.
constexpr uint64_t kMergeGap = 16u << 10;
constexpr uint64_t kMaxRequest = 8u << 20;     // largest merged request: keeps big reads parallel
constexpr uint64_t kPart = 4u << 20;           // part size of a large direct read

}  // namespace

ReadObject::~ReadObject() { drain(); }

void ReadObject::drain() noexcept {
  std::vector<Part> parts;
  std::vector<std::shared_future<void>> retired;
  {
    std::lock_guard<std::mutex> l(ra_mu_);
    forget_parent_parts();
    parts.swap(parts_);
    retired.swap(retired_);
  }
  for (auto& p : parts)
    if (p.ready.valid()) p.ready.wait();
  for (auto& f : retired)
    if (f.valid()) f.wait();
}

void ReadObject::read(uint64_t offset, size_t len, uint8_t* dst) const {
  if (offset > size_ || len > size_ - offset)
    fail(A2PACK_E_CORRUPT, "{}: read of {} bytes at offset {} is past the end of the {}-byte object",
         url_, len, offset, size_);
  if (len == 0) return;
  ReadRange r{offset, len, dst};
  if (read_ahead_) {
    read_ahead_many(&r, 1, 0);
    return;
  }
  if (len > kMaxRequest) {
    fetch_parallel(&r, 1, 0);
    return;
  }
  fetch(offset, len, dst);
}

void ReadObject::read_many(const ReadRange* ranges, size_t n, uint32_t parallelism) const {
  std::vector<ReadRange> todo;
  todo.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const ReadRange& r = ranges[i];
    if (r.offset > size_ || r.len > size_ - r.offset)
      fail(A2PACK_E_CORRUPT, "{}: read of {} bytes at offset {} is past the end of the {}-byte object",
           url_, r.len, r.offset, size_);
    if (r.len) todo.push_back(r);
  }
  if (todo.empty()) return;
  if (read_ahead_)
    read_ahead_many(todo.data(), todo.size(), parallelism);
  else
    fetch_parallel(todo.data(), todo.size(), parallelism);
}

// Sort, merge neighbours into requests, run the requests in parallel and
// copy each merged request's bytes out to the ranges it covers.
void ReadObject::fetch_parallel(const ReadRange* ranges, size_t n, uint32_t parallelism) const {
  if (parallelism == 0) parallelism = settings().parallelism;
  std::vector<ReadRange> rs(ranges, ranges + n);
  std::sort(rs.begin(), rs.end(), [](const ReadRange& a, const ReadRange& b) { return a.offset < b.offset; });
  struct Request {
    uint64_t offset, len;
    size_t r0, r1;  // ranges [r0, r1) lie inside it
  };
  std::vector<Request> reqs;
  for (size_t i = 0; i < rs.size(); ++i) {
    const ReadRange& r = rs[i];
    if (!reqs.empty()) {
      Request& q = reqs.back();
      uint64_t qend = q.offset + q.len, rend = r.offset + r.len;
      if (r.offset <= qend + kMergeGap && std::max(qend, rend) - q.offset <= kMaxRequest) {
        q.len = std::max(qend, rend) - q.offset;
        q.r1 = i + 1;
        continue;
      }
    }
    reqs.push_back({r.offset, r.len, i, i + 1});
  }
  // Large single ranges become kPart-sized direct parts.
  struct Job {
    uint64_t offset, len;
    uint8_t* direct;  // non-null: fetch straight into it
    size_t req;
  };
  std::vector<Job> jobs;
  for (size_t k = 0; k < reqs.size(); ++k) {
    const Request& q = reqs[k];
    if (q.r1 - q.r0 == 1 && rs[q.r0].offset == q.offset && rs[q.r0].len == q.len) {
      for (uint64_t o = 0; o < q.len; o += kPart)
        jobs.push_back({q.offset + o, std::min<uint64_t>(kPart, q.len - o), rs[q.r0].dst + o, k});
    } else {
      jobs.push_back({q.offset, q.len, nullptr, k});
    }
  }
  uint32_t w = static_cast<uint32_t>(std::min<size_t>(parallelism, jobs.size()));
  parallel_for(jobs.size(), w, [&](size_t j) {
    const Job& job = jobs[j];
    if (job.direct) {
      fetch(job.offset, static_cast<size_t>(job.len), job.direct);
      return;
    }
    std::vector<uint8_t> buf(static_cast<size_t>(job.len));
    fetch(job.offset, buf.size(), buf.data());
    const Request& q = reqs[job.req];
    for (size_t i = q.r0; i < q.r1; ++i)
      std::memcpy(rs[i].dst, buf.data() + (rs[i].offset - q.offset), rs[i].len);
  });
}

void ReadObject::set_read_ahead(size_t bytes) { read_ahead_ = bytes; }

// Ranges are copied out of the parts that cover them (waiting for a part
// still being fetched, so no byte is fetched twice); what no part covers, or
// a part whose fetch failed, is fetched directly (which reports the error if
// it persists, e.g. a changed object).
void ReadObject::read_ahead_many(const ReadRange* ranges, size_t n, uint32_t parallelism) const {
  uint64_t start = UINT64_MAX, end = 0, covered = 0;
  for (size_t i = 0; i < n; ++i) {
    start = std::min<uint64_t>(start, ranges[i].offset);
    end = std::max<uint64_t>(end, ranges[i].offset + ranges[i].len);
    covered += ranges[i].len;
  }
  if (end == 0) return;
  std::vector<Part> hits;
  {
    std::lock_guard<std::mutex> l(ra_mu_);
    forget_parent_parts();
    // Dense: a single read, or a batch of consecutive records (an iterating
    // reader's batch); a random batch is not a sign of sequential reading.
    schedule(start, end, covered * 10 >= (end - start) * 9);
    for (const Part& p : parts_)
      if (p.offset < end && p.offset + p.len > start) hits.push_back(p);
  }
  std::vector<ReadRange> direct;
  std::vector<char> failed(hits.size(), 0);
  for (size_t i = 0; i < n; ++i) {
    const ReadRange& r = ranges[i];
    const uint64_t rend = r.offset + r.len;
    uint64_t cur = r.offset;
    for (size_t k = 0; k < hits.size() && cur < rend; ++k) {
      const Part& p = hits[k];
      const uint64_t pend = p.offset + p.len;
      if (pend <= cur || p.offset >= rend) continue;
      if (p.offset > cur) {
        direct.push_back({cur, static_cast<size_t>(p.offset - cur), r.dst + (cur - r.offset)});
        cur = p.offset;
      }
      const uint64_t stop = std::min(rend, pend);
      if (!failed[k]) {
        try {
          p.ready.get();
        } catch (...) {
          failed[k] = 1;
        }
      }
      if (failed[k])
        direct.push_back({cur, static_cast<size_t>(stop - cur), r.dst + (cur - r.offset)});
      else
        std::memcpy(r.dst + (cur - r.offset), p.data->data() + (cur - p.offset), stop - cur);
      cur = stop;
    }
    if (cur < rend) direct.push_back({cur, static_cast<size_t>(rend - cur), r.dst + (cur - r.offset)});
  }
  if (std::find(failed.begin(), failed.end(), 1) != failed.end()) {
    // Forget failed parts (their fetches have ended) so later reads retry.
    std::lock_guard<std::mutex> l(ra_mu_);
    for (size_t k = 0; k < hits.size(); ++k) {
      if (!failed[k]) continue;
      auto it = std::find_if(parts_.begin(), parts_.end(),
                             [&](const Part& p) { return p.data == hits[k].data; });
      if (it != parts_.end()) parts_.erase(it);
    }
  }
  if (!direct.empty()) fetch_parallel(direct.data(), direct.size(), parallelism);
}

void ReadObject::forget_parent_parts() const {
  if (!fork_stamp_.forked()) return;
  // A forked child (a data-loader worker) has none of its parent's fetch
  // threads: waiting for their futures, or destroying the last handle of
  // one, would never return. They are left alone (a bounded leak, once per
  // fork) and the child fetches its own parts from here on.
  new std::vector<Part>(std::move(parts_));
  new std::vector<std::shared_future<void>>(std::move(retired_));
  parts_.clear();
  retired_.clear();
  fork_stamp_ = ForkStamp();
}

void ReadObject::retire(Part&& p) const {
  // Destroying the last handle of a std::async fetch waits for it: keep
  // running ones here, drop the ones that have ended.
  retired_.erase(std::remove_if(retired_.begin(), retired_.end(),
                                [](const std::shared_future<void>& f) {
                                  return f.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
                                }),
                 retired_.end());
  if (p.ready.valid() && p.ready.wait_for(std::chrono::seconds(0)) != std::future_status::ready)
    retired_.push_back(std::move(p.ready));
}

// Reads move forward when a dense read starts where the last one ended or
// inside the parts already queued (batches read concurrently may arrive out
// of order). Then parts behind it are dropped (with some slack for those
// batches) and parts are queued, each fetched on its own thread, up to
// read_ahead_ bytes past its end. Random reads queue nothing.
void ReadObject::schedule(uint64_t start, uint64_t end, bool dense) const {
  const bool have = !parts_.empty();
  const uint64_t lo = have ? parts_.front().offset : 0;
  const uint64_t hi = have ? parts_.back().offset + parts_.back().len : 0;
  const bool inside = have && start >= lo && start <= hi;
  const bool forward = dense && (start == last_end_ || inside);
  last_end_ = end;
  if (!forward) return;
  const uint64_t slack = read_ahead_ / 4;
  size_t drop = 0;
  if (!inside) {
    drop = parts_.size();  // a new sequential run elsewhere
  } else {
    while (drop < parts_.size() && parts_[drop].offset + parts_[drop].len + slack <= start) ++drop;
  }
  for (size_t k = 0; k < drop; ++k) retire(std::move(parts_[k]));
  parts_.erase(parts_.begin(), parts_.begin() + static_cast<std::ptrdiff_t>(drop));
  uint64_t next = parts_.empty() ? start : parts_.back().offset + parts_.back().len;
  const uint64_t target = std::min<uint64_t>(size_, end + read_ahead_);
  // At least four parts in flight, of 64 KiB up to kReadAheadPart.
  const uint64_t part = std::max<uint64_t>(64u << 10, std::min<uint64_t>(kReadAheadPart, read_ahead_ / 4));
  while (next < target) {
    Part p;
    p.offset = next;
    p.len = static_cast<size_t>(std::min<uint64_t>(part, size_ - next));
    p.data = std::make_shared<std::vector<uint8_t>>(p.len);
    auto data = p.data;
    p.ready = std::async(std::launch::async, [this, data, next] { fetch(next, data->size(), data->data()); })
                  .share();
    next += p.len;
    parts_.push_back(std::move(p));
  }
}

std::vector<uint8_t> ReadObject::read_all(uint64_t offset, size_t len) const {
  std::vector<uint8_t> out(len);
  if (len) {
    ReadRange r{offset, len, out.data()};
    read_many(&r, 1);
  }
  return out;
}

WriteObject::~WriteObject() = default;

void WriteObject::commit_with_head(const void*, size_t) {
  fail(A2PACK_E_INTERNAL, "{}: commit_with_head without a reserved first part", url_);
}

bool is_remote(const std::string& path) { return is_remote_path(path); }

std::unique_ptr<ReadObject> open_read(const std::string& path) {
  ParsedPath p = parse_path(path);
  switch (p.scheme) {
    case PathScheme::s3: return s3_open_read(p);
    case PathScheme::gs: return gcs_open_read(p);
    default: return local_open_read(p.local);
  }
}

std::unique_ptr<WriteObject> open_write(const std::string& path, bool durable) {
  ParsedPath p = parse_path(path);
  switch (p.scheme) {
    case PathScheme::s3: return s3_open_write(p);
    case PathScheme::gs: return gcs_open_write(p);
    default: return local_open_write(p.local, durable);
  }
}

void remove(const std::string& path) {
  ParsedPath p = parse_path(path);
  switch (p.scheme) {
    case PathScheme::s3: return s3_remove(p);
    case PathScheme::gs: return gcs_remove(p);
    default: return local_remove(p.local);
  }
}

std::vector<std::string> list(const std::string& prefix_path) {
  ParsedPath p = parse_path(prefix_path);
  std::vector<std::string> keys;
  switch (p.scheme) {
    case PathScheme::s3: keys = s3_list(p); break;
    case PathScheme::gs: keys = gcs_list(p); break;
    default: return local_list(p.local);
  }
  std::vector<std::string> out;
  out.reserve(keys.size());
  const char* scheme = p.scheme == PathScheme::s3 ? "s3://" : "gs://";
  for (auto& k : keys) out.push_back(scheme + p.bucket + "/" + k);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace a2pack::storage
