#include "run/batch.hpp"

#include <algorithm>
#include <cstring>

#include "base/crc32c.hpp"
#include "base/error.hpp"
#include "base/file_io.hpp"
#include "base/worker_pool.hpp"

namespace a2pack::run {

namespace {
void check_crc(const Payload& p) {
  if (!p.crc) return;
  uint32_t c = crc32c::compute(p.data, p.len);
  if (c != p.crc)
    fail(A2PACK_E_CHECKSUM, "payload CRC32C mismatch: expected {:#010x}, computed {:#010x}", p.crc,
         c);
}

// Runs fn(), naming payload i (label(i)) in any error it throws.
template <typename Label, typename Fn>
void with_context(const Label& label, size_t i, Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    rethrow_with_context(e, label(i));
  }
}

Header parse_checked(const Payload& p) {
  try {
    return parse_header(p.data, p.len);
  } catch (const Error&) {
    check_crc(p);  // a damaged payload reports its checksum, not a symptom
    throw;
  }
}

// The batch of payloads whose headers are known: sized from the headers,
// then each run's steps decoded into its own slice of the columns.
template <typename Label>
Batch decode_parsed(const Payload* payloads, const std::vector<Header>& headers, size_t n,
                    uint32_t workers, const Label& label) {
  Batch b;
  b.step_offsets.resize(n + 1);
  b.engine_offsets.resize(n + 1);
  uint64_t steps = 0, engine_bytes = 0;
  for (size_t i = 0; i < n; ++i) {
    b.step_offsets[i] = steps;
    b.engine_offsets[i] = engine_bytes;
    steps += headers[i].n_steps;
    if (headers[i].meta.engine) engine_bytes += headers[i].meta.engine->size();
  }
  b.step_offsets[n] = steps;
  b.engine_offsets[n] = engine_bytes;
  for (size_t i = 0; i < n; ++i) b.payload_bytes += payloads[i].len;
  b.boards.resize(steps);
  b.moves.resize(steps);
  b.values.resize(4 * steps);
  b.legal.resize(steps);
  b.present.resize(steps);
  b.final_boards.resize(n);
  b.meta_steps.resize(n);
  b.start_unix_s.resize(n);
  b.elapsed_s.resize(n);
  b.max_score.resize(n);
  b.highest_tile.resize(n);
  b.source_kind.resize(n);
  b.has_engine.resize(n);
  b.engine_bytes.resize(engine_bytes);

  // Each run's metadata and steps, on the workers: only the offsets above
  // need every header before them.
  parallel_for(n, workers, [&](size_t i) {
    const Meta& m = headers[i].meta;
    b.meta_steps[i] = m.steps;
    b.start_unix_s[i] = m.start_unix_s;
    b.elapsed_s[i] = m.elapsed_s;
    b.max_score[i] = m.max_score;
    b.highest_tile[i] = m.highest_tile;
    b.source_kind[i] = static_cast<uint8_t>(headers[i].kind);
    b.has_engine[i] = m.engine.has_value();
    if (m.engine)
      std::memcpy(b.engine_bytes.data() + b.engine_offsets[i], m.engine->data(), m.engine->size());
    with_context(label, i, [&] {
      size_t o = b.step_offsets[i];
      // The checksum is verified here, just before the payload is decoded
      // while it is in cache, rather than in a pass of its own.
      check_crc(payloads[i]);
      StepColumns out{b.boards.data() + o, b.moves.data() + o, b.values.data() + 4 * o,
                      b.legal.data() + o, b.present.data() + o};
      b.final_boards[i] = decode_steps(payloads[i].data, payloads[i].len, headers[i], out);
    });
  });
  return b;
}

template <typename Label>
Batch decode_with(const Payload* payloads, size_t n, uint32_t workers, const Label& label) {
  std::vector<Header> headers(n);
  parallel_for(n, workers, [&](size_t i) {
    with_context(label, i, [&] { headers[i] = parse_checked(payloads[i]); });
  });
  return decode_parsed(payloads, headers, n, workers, label);
}
}  // namespace

Batch decode_batch(const Payload* payloads, size_t n, uint32_t workers, const char* what,
                   const uint64_t* ids) {
  return decode_with(payloads, n, workers,
                     [&](size_t i) { return fmt::format("{} {}", what, ids ? ids[i] : i); });
}

Batch decode_batch_labelled(const Payload* payloads, size_t n, uint32_t workers,
                            const std::string* labels) {
  return decode_with(payloads, n, workers, [&](size_t i) { return labels[i]; });
}

namespace {

// The bytes of the files one worker reads, back to back in chunks, so that
// reading a file costs no allocation and no fstat: a file is read into the
// free end of the current chunk (at least kMinFree bytes), and only one that
// fills it is sized, and its head moved to a chunk that holds it all.
class FileArena {
 public:
  static constexpr size_t kChunk = size_t{4} << 20;
  static constexpr size_t kMinFree = size_t{64} << 10;

  Payload read(const char* path) {
    ReadFd f(path);
    if (chunks_.empty() || chunks_.back().size() - used_ < kMinFree) start_chunk(kChunk);
    uint8_t* at = chunks_.back().data() + used_;
    size_t free = chunks_.back().size() - used_;
    size_t n = f.read_head(at, free);
    if (n == free) {  // maybe more: size it and read the rest
      uint64_t size = f.size();
      if (size > free) {
        const uint8_t* head = at;  // its chunk stays alive in chunks_
        start_chunk(std::max<size_t>(kChunk, size));
        at = chunks_.back().data();
        std::memcpy(at, head, free);
        f.pread_exact(at + free, size - free, free);
        n = size;
      }
    }
    used_ += n;
    return {at, n};  // empty: refused by the decoder
  }

 private:
  void start_chunk(size_t size) {
    chunks_.emplace_back();
    chunks_.back().resize(size);
    used_ = 0;
  }
  std::vector<uninit_vector<uint8_t>> chunks_;
  size_t used_ = 0;
};

}  // namespace

Batch load_batch(const char* const* paths, size_t n, uint32_t workers) {
  // Each file is read and its header parsed by the worker that reads it,
  // while the bytes are in cache: the calling thread does no I/O, and the
  // kernel's page-cache copies run on every worker.
  std::vector<FileArena> arenas(resolve_workers(workers));
  std::vector<Payload> payloads(n);
  std::vector<Header> headers(n);
  auto label = [&](size_t i) { return std::string(paths[i]); };
  parallel_for_worker(n, workers, [&](unsigned w, size_t i) {
    payloads[i] = arenas[w].read(paths[i]);
    with_context(label, i, [&] { headers[i] = parse_checked(payloads[i]); });
  });
  return decode_parsed(payloads.data(), headers, n, workers, label);
}

}  // namespace a2pack::run
