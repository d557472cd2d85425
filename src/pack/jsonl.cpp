#include "pack/jsonl.hpp"

#include <algorithm>
#include <cstring>
#include <exception>
#include <future>
#include <thread>
#include <vector>

#include "base/error.hpp"
#include "base/file_io.hpp"
#include "base/worker_pool.hpp"
#include "pack/json_number.hpp"
#include "storage/object_store.hpp"

namespace a2pack::pack {
namespace {

template <size_t N>
char* lit(char* p, const char (&s)[N]) {
  std::memcpy(p, s, N - 1);
  return p + N - 1;
}

// "UP", "DOWN", "LEFT", "RIGHT" with their quotes, padded to 8 bytes so one
// fixed-size copy writes any of them.
constexpr char kMoveJson[4][8] = {"\"UP\"", "\"DOWN\"", "\"LEFT\"", "\"RIGHT\""};
constexpr uint8_t kMoveJsonLen[4] = {4, 6, 6, 7};

char* write_move(char* p, unsigned m) {
  std::memcpy(p, kMoveJson[m & 3], 8);  // callers reserve room for 8
  return p + kMoveJsonLen[m & 3];
}

char* write_hex8(char* p, uint32_t v) {
  static const char kHex[] = "0123456789abcdef";
  for (int i = 7; i >= 0; --i) p[7 - i] = kHex[(v >> (4 * i)) & 0xF];
  return p + 8;
}

}  // namespace

void decode_reusing(run::Run& r, const uint8_t* data, size_t len) {
  run::Header h = run::parse_header(data, len);
  r.meta = std::move(h.meta);
  r.source = h.kind;
  r.resize(h.n_steps);
  r.final_board = run::decode_steps(
      data, len, h, {r.boards.data(), r.moves.data(), r.values.data(), r.legal.data(), r.present.data()});
}

namespace {

// Values above this are written as exactly 1.0 for the chosen move.
constexpr float kChosenOne = 1.0f - 1e-6f;

}  // namespace

char* JsonBuf::reserve(size_t n) {
  if (cap_ - size_ < n) {
    size_t cap = std::max(size_ + n, 2 * cap_);
    std::unique_ptr<char[]> q(new char[cap]);
    if (size_) std::memcpy(q.get(), p_.get(), size_);
    p_ = std::move(q);
    cap_ = cap;
  }
  return p_.get() + size_;
}

void append_run_json(JsonBuf& out, uint64_t run_idx, const run::Run& r) {
  const size_t n = r.size();
  // Fixed fields < 256 bytes; each state <= 21 bytes; each move <= 8 bytes.
  char* p = out.reserve(256 + 21 * (n + 1) + 8 * n);
  p = lit(p, "{\"run_idx\":");
  p = json::write_u64(p, run_idx);
  p = lit(p, ",\"steps\":");
  p = json::write_u64(p, r.meta.steps);
  p = lit(p, ",\"start_unix_s\":");
  p = json::write_u64(p, r.meta.start_unix_s);
  p = lit(p, ",\"elapsed_s\":");
  p = json::write_f32(p, r.meta.elapsed_s);
  p = lit(p, ",\"max_score\":");
  p = json::write_u64(p, r.meta.max_score);
  p = lit(p, ",\"highest_tile\":");
  p = json::write_u64(p, r.meta.highest_tile);
  p = lit(p, ",\"final_board\":");
  p = json::write_u64(p, r.final_board);
  p = lit(p, ",\"states\":[");
  for (size_t i = 0; i < n; ++i) {
    p = json::write_u64(p, r.boards[i]);
    *p++ = ',';
  }
  p = json::write_u64(p, r.final_board);
  p = lit(p, "],\"moves\":[");
  for (size_t i = 0; i < n; ++i) {
    if (i) *p++ = ',';
    p = write_move(p, r.moves[i]);
  }
  p = lit(p, "]}\n");
  out.commit(p);
}

void append_steps_json(JsonBuf& out, uint64_t run_idx, uint32_t payload_crc, const run::Run& r) {
  const size_t n = r.size();
  // The line prefix up to "step_idx": is the same for every step of the run.
  char prefix[96];
  char* q = lit(prefix, "{\"run_idx\":");
  q = json::write_u64(q, run_idx);
  q = lit(q, ",\"run_uuid\":\"a2r-");
  q = write_hex8(q, payload_crc);
  *q++ = '-';
  q = write_hex8(q, static_cast<uint32_t>(run_idx));
  q = lit(q, "\",\"step_idx\":");
  const size_t plen = static_cast<size_t>(q - prefix);

  // Per step: prefix + index + 16 exponents (<= 3 bytes each) + move + 4
  // branches (<= 40 bytes each) stays under plen + 320. Reserved in blocks so
  // a huge run never asks for its whole output at once.
  constexpr size_t kBlock = 1024;
  for (size_t first = 0; first < n; first += kBlock) {
    const size_t last = std::min(n, first + kBlock);
    char* p = out.reserve((plen + 320) * (last - first));
    for (size_t i = first; i < last; ++i) {
      std::memcpy(p, prefix, plen);
      p += plen;
      p = json::write_u64(p, i);
      p = lit(p, ",\"pre_board\":[");
      const uint64_t b = r.boards[i];
      for (unsigned c = 0; c < 16; ++c) {
        unsigned e = static_cast<unsigned>((b >> (60 - 4 * c)) & 0xF);
        if (e >= 10) *p++ = '1', e -= 10;
        *p++ = static_cast<char>('0' + e);
        *p++ = ',';
      }
      p[-1] = ']';
      const unsigned chosen = r.moves[i];
      p = lit(p, ",\"chosen\":");
      p = write_move(p, chosen);
      p = lit(p, ",\"branches\":[");
      for (unsigned k = 0; k < 4; ++k) {
        if (k) *p++ = ',';
        bool legal;
        float v;
        if (r.present[i]) {
          legal = r.legal[i] >> k & 1;
          v = legal ? r.values[4 * i + k] : 0.0f;
          if (legal && k == chosen && v > kChosenOne) v = 1.0f;
        } else {  // no branches stored: the chosen move Legal(1.0), the rest Illegal
          legal = k == chosen;
          v = legal ? 1.0f : 0.0f;
        }
        if (legal) {
          p = lit(p, "{\"legal\":true,\"value\":");
          p = json::write_f32(p, v);
          *p++ = '}';
        } else {
          p = lit(p, "{\"legal\":false,\"value\":0.0}");
        }
      }
      p = lit(p, "]}\n");
    }
    out.commit(p);
  }
}

JsonlSummary export_jsonl(const Reader& reader, const std::string& output, JsonlMode mode,
                          uint32_t workers, bool verify, const ProgressFn& progress,
                          bool durable) {
  const uint64_t n = reader.size();
  // Shards are fixed in size (never derived from the worker count); steps
  // mode writes ~20x more per run, so its shards are smaller.
  const uint64_t shard = mode == JsonlMode::steps ? 4 : 16;
  const uint64_t n_shards = (n + shard - 1) / shard;
  const unsigned w = resolve_workers(workers);
  const uint64_t wave = 4 * uint64_t{w} + 4;

  // A local file (atomic rename at commit) or an object upload (s3://,
  // gs://: parts sent as the waves are written; the object appears at
  // commit; an exception aborts the upload when `out` goes).
  std::unique_ptr<storage::WriteObject> out = storage::open_write(output, durable);
  JsonlSummary sum;
  std::vector<run::Run> scratch(w);
  std::vector<JsonBuf> bufs, writing;
  std::vector<uint64_t> lines;
  std::thread writer;
  std::exception_ptr write_error;
  auto join_writer = [&] {
    if (writer.joinable()) writer.join();
    if (write_error) std::rethrow_exception(write_error);
  };
  auto fetch_wave = [&](uint64_t first) {
    const uint64_t lo = first * shard, hi = std::min(n, (first + wave) * shard);
    std::vector<uint64_t> ids(hi - lo);
    for (uint64_t i = lo; i < hi; ++i) ids[i - lo] = i;
    return reader.read_stored(ids.data(), ids.size());
  };
  std::future<std::vector<std::vector<uint8_t>>> next_wave;
  try {
    for (uint64_t first = 0; first < n_shards; first += wave) {
      const uint64_t count = std::min(wave, n_shards - first);
      bufs.resize(count);
      lines.assign(count, 0);
      // A remote pack: the wave's entries in one batch of ranged requests
      // (merged, parallel) rather than a request per entry from each worker,
      // and the next wave's batch fetched while this one is decoded.
      const uint64_t wave_lo = first * shard;
      std::vector<std::vector<uint8_t>> stored;
      if (reader.remote()) {
        stored = next_wave.valid() ? next_wave.get() : fetch_wave(first);
        if (first + wave < n_shards)
          next_wave = std::async(std::launch::async, fetch_wave, first + wave);
      }
      parallel_for_worker(count, workers, [&](unsigned worker, size_t s) {
        JsonBuf& buf = bufs[s];
        buf.clear();
        run::Run& r = scratch[worker];
        const uint64_t lo = (first + s) * shard, hi = std::min(n, lo + shard);
        for (uint64_t i = lo; i < hi; ++i) {
          uint32_t crc = 0;
          EntryBytes b = stored.empty() ? reader.payload_and_crc(i, verify, crc)
                                        : reader.payload_from(i, std::move(stored[i - wave_lo]), verify, crc);
          try {
            decode_reusing(r, b.data, b.size);
          } catch (const Error& e) {
            rethrow_with_context(e, fmt::format("{}: entry {}", reader.path(), i));
          }
          if (mode == JsonlMode::runs) {
            append_run_json(buf, i, r);
            lines[s] += 1;
          } else {
            append_steps_json(buf, i, crc, r);
            lines[s] += r.size();
          }
        }
      });
      join_writer();  // the previous wave is on disk (or in the page cache)
      for (size_t s = 0; s < count; ++s) {
        sum.bytes += bufs[s].size();
        sum.lines += lines[s];
      }
      std::swap(bufs, writing);
      writer = std::thread([&out, &writing, &write_error] {
        try {
          for (auto& b : writing) out->write(b.data(), b.size());
        } catch (...) {
          write_error = std::current_exception();
        }
      });
      uint64_t done = std::min(n, (first + count) * shard);
      if (progress && !progress(done, n)) {
        join_writer();
        fail(A2PACK_E_INTERRUPTED, "{}: JSONL export interrupted", output);
      }
    }
    join_writer();
  } catch (...) {
    if (writer.joinable()) writer.join();
    throw;
  }
  out->commit();
  sum.runs = n;
  return sum;
}

}  // namespace a2pack::pack
