#include "storage/object_store.hpp"

#include <algorithm>
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
constexpr uint64_t kPart = 4u << 20;           // part size of a large read_all / window fetch

}  // namespace

ReadObject::~ReadObject() { drain(); }

void ReadObject::drain() noexcept {
  std::lock_guard<std::mutex> l(ra_mu_);
  if (window_.ready.valid()) window_.ready.wait();
}

void ReadObject::read(uint64_t offset, size_t len, uint8_t* dst) const {
  if (offset > size_ || len > size_ - offset)
    fail(A2PACK_E_CORRUPT, "{}: read of {} bytes at offset {} is past the end of the {}-byte object",
         url_, len, offset, size_);
  if (len == 0) return;
  if (read_ahead_) {
    if (from_window(offset, len, dst)) {
      advance_window(offset, offset + len);
      return;
    }
    ReadRange r{offset, len, dst};
    fetch_parallel(&r, 1, 0);
    advance_window(offset, offset + len);
    return;
  }
  if (len > kMaxRequest) {
    ReadRange r{offset, len, dst};
    fetch_parallel(&r, 1, 0);
    return;
  }
  fetch(offset, len, dst);
}

void ReadObject::read_many(const ReadRange* ranges, size_t n, uint32_t parallelism) const {
  // The window serves record-at-a-time readers. Batches (several ranges, or
  // one of 1 MiB or more) are the caller's own read-ahead unit - a binding
  // iterating reads the next batches concurrently - and a window beside them
  // would fetch their bytes twice.
  const bool window = read_ahead_ && n == 1 && ranges[0].len < (1u << 20);
  std::vector<ReadRange> todo;
  todo.reserve(n);
  uint64_t start = UINT64_MAX, end = 0;
  for (size_t i = 0; i < n; ++i) {
    const ReadRange& r = ranges[i];
    if (r.offset > size_ || r.len > size_ - r.offset)
      fail(A2PACK_E_CORRUPT, "{}: read of {} bytes at offset {} is past the end of the {}-byte object",
           url_, r.len, r.offset, size_);
    if (r.len == 0) continue;
    start = std::min<uint64_t>(start, r.offset);
    end = std::max<uint64_t>(end, r.offset + r.len);
    if (window && from_window(r.offset, r.len, r.dst)) continue;
    todo.push_back(r);
  }
  if (!todo.empty()) fetch_parallel(todo.data(), todo.size(), parallelism);
  if (window && end) advance_window(start, end);
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

bool ReadObject::from_window(uint64_t offset, size_t len, uint8_t* dst) const {
  Window w;
  {
    std::lock_guard<std::mutex> l(ra_mu_);
    w = window_;
  }
  if (!w.data || offset < w.offset || offset + len > w.offset + w.len) return false;
  try {
    w.ready.get();
  } catch (...) {
    // The background fetch failed: forget it and read directly (the direct
    // read reports the error if it persists).
    std::lock_guard<std::mutex> l(ra_mu_);
    if (window_.data == w.data) window_ = Window();
    return false;
  }
  std::memcpy(dst, w.data->data() + (offset - w.offset), len);
  return true;
}

// After a read of [start, end): when reads move forward (this one starts
// where the last ended, or inside the window), start fetching the window
// after `end` unless one covering it is under way. Random reads fetch nothing
// ahead.
void ReadObject::advance_window(uint64_t start, uint64_t end) const {
  std::lock_guard<std::mutex> l(ra_mu_);
  const bool forward = start == last_end_ ||
                       (window_.data && start >= window_.offset && start <= window_.offset + window_.len);
  last_end_ = end;
  if (!forward || end >= size_) return;
  if (window_.data && end >= window_.offset && end < window_.offset + window_.len / 2) return;
  if (window_.data && end >= window_.offset + window_.len / 2 && end < window_.offset + window_.len) {
    // Past the middle of the current window: fetch the next one from its end.
    end = window_.offset + window_.len;
    if (end >= size_) return;
  }
  if (window_.ready.valid()) window_.ready.wait();  // one fetch at a time
  Window w;
  w.offset = end;
  w.len = static_cast<size_t>(std::min<uint64_t>(read_ahead_, size_ - end));
  w.data = std::make_shared<std::vector<uint8_t>>(w.len);
  auto data = w.data;
  uint64_t off = w.offset;
  w.ready = std::async(std::launch::async, [this, data, off] {
              ReadRange r{off, data->size(), data->data()};
              fetch_parallel(&r, 1, 0);
            }).share();
  window_ = std::move(w);
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
