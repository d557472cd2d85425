#include "pack/reader.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <new>

#include "base/bytes.hpp"
#include "base/crc32c.hpp"
#include "base/error.hpp"
#include "base/mapped_guard.hpp"
#include "base/uninit_vector.hpp"
#include "base/worker_pool.hpp"
#include "pack/lz4_entry.hpp"
#include "pack/zstd_entry.hpp"

namespace a2pack::pack {

EntryBytes& EntryBytes::operator=(EntryBytes&& o) noexcept {
  bool owned = o.data && o.data == o.storage.data();
  storage = std::move(o.storage);
  data = owned ? storage.data() : o.data;
  size = o.size;
  o.data = nullptr;
  o.size = 0;
  return *this;
}

// ------------------------------------------------------------------ source
PackSource::PackSource(const std::string& path, bool use_mmap) : path_(path), mapped_(use_mmap) {
  if (storage::is_remote(path)) {
    obj_ = storage::open_read(path);
    mapped_ = false;
    size_ = obj_->size();
  } else if (use_mmap) {
    map_ = MappedFile(path);
    size_ = map_.size();
  } else {
    fd_ = std::make_unique<ReadFd>(path);
    size_ = fd_->size();
  }
}

void PackSource::read(void* buf, size_t len, uint64_t offset) const {
  if (len == 0) return;
  if (obj_)
    obj_->read(offset, len, static_cast<uint8_t*>(buf));
  else if (mapped_)
    guarded_copy(buf, map_.data() + offset, len);  // a file cut short raises (mapped_guard.hpp)
  else
    fd_->pread_exact(buf, len, offset);
}

void PackSource::read_many(storage::ReadRange* ranges, size_t n) const {
  if (obj_) {
    obj_->read_many(ranges, n);
    return;
  }
  for (size_t k = 0; k < n; ++k) read(ranges[k].dst, ranges[k].len, ranges[k].offset);
}

// ------------------------------------------------------------------ open
Reader::Reader(const std::string& path, ReaderOptions opts)
    : src_(path, opts.use_mmap), opts_(opts) {
  try {
    open();
  } catch (const Error& e) {
    rethrow_with_context(e, path);
  }
}

void Reader::open() {
  const uint64_t size = src_.size();
  if (size < kHeaderSize + kFooterSize)
    fail(A2PACK_E_CORRUPT, "file is {} bytes, shorter than the {}-byte header and {}-byte footer",
         size, kHeaderSize, kFooterSize);

  uint8_t hb[kHeaderSize];
  src_.read(hb, kHeaderSize, 0);
  if (std::memcmp(hb, kMagic, sizeof kMagic) != 0)
    fail(A2PACK_E_CORRUPT, "offset 0: bad magic (expected \"A2PACK\\0\\0\"): not a packfile");
  uint32_t stored_hcrc = le::load<uint32_t>(hb + 24);
  uint32_t hcrc = crc32c::compute(hb, 24);
  if (stored_hcrc != hcrc)
    fail(A2PACK_E_CHECKSUM, "offset 24: header CRC32C mismatch: stored {:#010x}, computed {:#010x}",
         stored_hcrc, hcrc);
  header_.version = le::load<uint32_t>(hb + 8);
  header_.flags = le::load<uint32_t>(hb + 12);
  header_.count = le::load<uint64_t>(hb + 16);
  if (header_.version != kVersion && header_.version != kVersionCompressed)
    fail(A2PACK_E_UNSUPPORTED,
         "offset 8: unsupported packfile version {} (this build reads {} and {})", header_.version,
         kVersion, kVersionCompressed);
  if (header_.flags != 0)
    fail(A2PACK_E_UNSUPPORTED, "offset 12: unknown header flags {:#x}", header_.flags);
  const uint64_t room = (size - kHeaderSize - kFooterSize) / kEntrySize;
  if (header_.count > room)
    fail(A2PACK_E_CORRUPT,
         "offset 16: count {} needs {} index bytes but the file has room for {} entries",
         header_.count, header_.count > UINT64_MAX / kEntrySize ? UINT64_MAX : header_.count * kEntrySize,
         room);

  const uint64_t fstart = size - kFooterSize;
  uint8_t fb[kFooterSize];
  src_.read(fb, kFooterSize, fstart);
  uint32_t stored_fcrc = le::load<uint32_t>(fb + 24);
  uint32_t fcrc = crc32c::compute(fb, 24);
  if (stored_fcrc != fcrc)
    fail(A2PACK_E_CHECKSUM, "offset {}: footer CRC32C mismatch: stored {:#010x}, computed {:#010x}",
         fstart + 24, stored_fcrc, fcrc);
  for (size_t k = 28; k < kFooterSize; ++k)
    if (fb[k] != 0)
      fail(A2PACK_E_CORRUPT, "offset {}: footer padding byte is {:#04x}, must be 0", fstart + k,
           fb[k]);
  footer_.data_end = le::load<uint64_t>(fb);
  footer_.index_crc = le::load<uint32_t>(fb + 8);
  footer_.data_crc = le::load<uint32_t>(fb + 12);
  footer_.stats_offset = le::load<uint64_t>(fb + 16);

  // Index: CRC first, then every entry's bounds.
  const size_t count = static_cast<size_t>(header_.count);
  const size_t index_bytes = count * kEntrySize;
  std::vector<uint8_t> index_copy;
  const uint8_t* index;
  if (src_.mapped()) {
    index = src_.view(kHeaderSize);
  } else {
    index_copy.resize(index_bytes);
    src_.read(index_copy.data(), index_bytes, kHeaderSize);
    index = index_copy.data();
  }
  // The index is read once, here: its CRC and every entry decoded into
  // entries_ (under a guard when mapped), checked below from entries_.
  entries_.resize(count);
  uint32_t icrc = 0;
  auto read_index = [&] {
    icrc = crc32c::compute(index, index_bytes);
    for (size_t i = 0; i < count; ++i) entries_[i] = decode_entry(index + i * kEntrySize);
  };
  if (src_.mapped())
    guarded_read(read_index);
  else
    read_index();
  if (icrc != footer_.index_crc)
    fail(A2PACK_E_CHECKSUM, "index CRC32C mismatch: footer says {:#010x}, computed {:#010x}",
         footer_.index_crc, icrc);
  const uint64_t iend = kHeaderSize + index_bytes;
  uint64_t max_end = 0, min_offset = fstart;
  // Overlaps are checked in the same pass while the index is sorted by
  // offset (as every writer lays it out): `owner` is the non-empty entry
  // whose payload ends furthest so far.
  bool sorted = true;
  uint64_t last_offset = 0;
  size_t owner = SIZE_MAX;
  StepCapacity cap;  // for the stats block's lengths
  for (size_t i = 0; i < count; ++i) {
    const Entry e = entries_[i];
    if (e.offset < iend || e.offset > fstart || e.length > fstart - e.offset)
      fail(A2PACK_E_CORRUPT,
           "entry {}: payload [{}, {}) lies outside the data region [{}, {}) between the index "
           "and the footer",
           i, e.offset, e.offset + e.length, iend, fstart);
    max_end = std::max(max_end, e.end());
    min_offset = std::min(min_offset, e.offset);
    cap.add(e);
    if (e.offset < last_offset) sorted = false;
    last_offset = e.offset;
    if (sorted && e.length > 0) {
      if (owner != SIZE_MAX && e.offset < entries_[owner].end()) fail_overlap(owner, i);
      if (owner == SIZE_MAX || e.end() > entries_[owner].end()) owner = i;
    }
  }
  if (!sorted) check_overlaps_unsorted();
  if (footer_.data_end != max_end)
    fail(A2PACK_E_CORRUPT, "offset {}: footer data_end is {} but the entries end at {}", fstart,
         footer_.data_end, max_end);

  uint64_t region_end = fstart;  // where the data region's padding stops
  if (footer_.stats_offset != 0) {
    const uint64_t so = footer_.stats_offset;
    const uint64_t lo = std::max(max_end, iend);
    if (so < lo || so > fstart || fstart - so < 4)
      fail(A2PACK_E_CORRUPT,
           "offset {}: stats_offset {} lies outside [{}, {}) after the data and before the footer",
           fstart + 16, so, lo, fstart - 4);
    uint8_t lb[4];
    src_.read(lb, 4, so);
    uint32_t len = le::load<uint32_t>(lb);
    if (len > fstart - so - 4)
      fail(A2PACK_E_CORRUPT, "offset {}: stats block length {} runs past the footer at {}", so,
           len, fstart);
    std::vector<uint8_t> body(len);
    src_.read(body.data(), len, so + 4);
    stats_block_ = decode_stats_block(body.data(), len, so + 4);
    if (stats_block_->count != header_.count)
      fail(A2PACK_E_CORRUPT, "offset {}: stats block counts {} runs, the header {}", so + 4,
           stats_block_->count, header_.count);
    stats_block_end_ = so + 4 + len;
    // The block has no checksum: what can be checked without reading a run
    // is checked here. A pack whose block fails keeps its entries readable;
    // stats() and validate() refuse the block.
    std::string problem = stats_block_problem(*stats_block_);
    if (!problem.empty()) stats_problem_ = fmt::format("offset {}: {}", so + 4, problem);
    problem = stats_capacity_problem(*stats_block_, cap);
    if (!problem.empty()) capacity_problem_ = fmt::format("offset {}: {}", so + 4, problem);
    if (count == 0) region_end = so;
  }
  // The padding between the index and the first payload is checked here
  // (bounded, so a hostile gap cannot make open slow); validate(full) checks
  // every gap.
  uint64_t pad_end = count ? min_offset : region_end;
  uint64_t pad = std::min<uint64_t>(pad_end - iend, kOpenPadCheck);
  if (auto at = first_nonzero(iend, pad))
    fail(A2PACK_E_CORRUPT, "offset {}: non-zero byte in the padding after the index", *at);
}

void Reader::fail_overlap(size_t a, size_t b) const {
  const Entry& x = entries_[a];
  const Entry& y = entries_[b];
  fail(A2PACK_E_CORRUPT,
       "entries {} and {} overlap: payloads [{}, {}) and [{}, {}) share the bytes from offset {}{}",
       a, b, x.offset, x.end(), y.offset, y.end(), std::max(x.offset, y.offset),
       x.offset == y.offset && x.length == y.length
           ? " (the same payload twice: one entry points at another's run)"
           : "");
}

void Reader::check_overlaps_unsorted() const {
  // Non-empty entries by (offset, index): O(n log n), only for an index not
  // laid out in offset order (no writer produces one).
  std::vector<size_t> order;
  order.reserve(entries_.size());
  for (size_t i = 0; i < entries_.size(); ++i)
    if (entries_[i].length > 0) order.push_back(i);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return entries_[a].offset < entries_[b].offset || (entries_[a].offset == entries_[b].offset && a < b);
  });
  size_t owner = SIZE_MAX;
  for (size_t i : order) {
    if (owner != SIZE_MAX && entries_[i].offset < entries_[owner].end())
      fail_overlap(std::min(owner, i), std::max(owner, i));
    if (owner == SIZE_MAX || entries_[i].end() > entries_[owner].end()) owner = i;
  }
}

std::optional<uint64_t> Reader::first_nonzero(uint64_t offset, uint64_t len) const {
  constexpr size_t kChunk = 1 << 16;
  std::vector<uint8_t> buf;
  while (len) {
    size_t n = static_cast<size_t>(std::min<uint64_t>(len, kChunk));
    const uint8_t* p;
    size_t at = n;
    auto scan = [&] {
      for (size_t k = 0; k < n; ++k)
        if (p[k]) {
          at = k;
          return;
        }
    };
    if (src_.mapped()) {
      p = src_.view(offset);
      guarded_read(scan);
    } else {
      buf.resize(n);
      src_.read(buf.data(), n, offset);
      p = buf.data();
      scan();
    }
    if (at < n) return offset + at;
    offset += n;
    len -= n;
  }
  return std::nullopt;
}

void Reader::check_gaps(const std::vector<Gap>& gaps,
                        const std::function<void(uint64_t, const char*)>& found) const {
  constexpr uint64_t kBatchBytes = 32u << 20;  // bytes read per batch of gaps
  size_t first = 0;
  while (first < gaps.size()) {
    size_t last = first;
    uint64_t bytes = 0;
    while (last < gaps.size() && (last == first || bytes + gaps[last].len <= kBatchBytes))
      bytes += gaps[last++].len;
    std::vector<uint8_t> buf(static_cast<size_t>(bytes));
    std::vector<storage::ReadRange> ranges;
    uint64_t at = 0;
    for (size_t k = first; k < last; ++k) {
      ranges.push_back({gaps[k].offset, static_cast<size_t>(gaps[k].len), buf.data() + at});
      at += gaps[k].len;
    }
    src_.read_many(ranges.data(), ranges.size());
    at = 0;
    for (size_t k = first; k < last; ++k) {
      for (uint64_t j = 0; j < gaps[k].len; ++j)
        if (buf[at + j]) {
          found(gaps[k].offset + j, gaps[k].where);
          break;
        }
      at += gaps[k].len;
    }
    first = last;
  }
}

// ------------------------------------------------------------------ entries
void Reader::fail_entry(uint64_t i, const Error& e) const {
  rethrow_with_context(e, fmt::format("{}: entry {}", path(), i));
}

const Entry& Reader::entry(uint64_t i) const {
  if (i >= entries_.size())
    fail(A2PACK_E_OUT_OF_RANGE, "{}: entry {} out of range: the pack has {} entries", path(), i,
         entries_.size());
  return entries_[i];
}

run::Kind Reader::kind(uint64_t i) const {
  const Entry& e = entry(i);
  if (e.kind == kKindV1) return run::Kind::v1;
  if (e.kind == kKindV2) return run::Kind::v2;
  fail(A2PACK_E_UNSUPPORTED, "{}: entry {}: unknown run kind {} (1 = v1, 2 = v2)", path(), i,
       e.kind);
}

namespace {
void check_crc(const Entry& e, const uint8_t* data) {
  if (e.crc == 0) return;
  uint32_t c = crc32c::compute(data, e.length);
  if (c != e.crc)
    fail(A2PACK_E_CHECKSUM, "offset {}: payload CRC32C mismatch: index says {:#010x}, computed {:#010x}",
         e.offset, e.crc, c);
}
}  // namespace

const uint8_t* Reader::stored_view(uint64_t i, bool verify) const {
  const Entry& e = entry(i);
  if (!src_.mapped())
    fail(A2PACK_E_UNSUPPORTED,
         "{}: zero-copy slices need a memory-mapped pack (opened with use_mmap = 0); read the "
         "entry instead",
         path());
  const uint8_t* p = src_.view(e.offset);
  try {
    if (verify) guarded_read([&] { check_crc(e, p); });
  } catch (const Error& err) {
    fail_entry(i, err);
  }
  return p;
}

EntryBytes Reader::payload_and_crc(uint64_t i, bool verify, uint32_t& crc) const {
  const Entry& e = entry(i);
  // Mapped or not, the stored bytes are copied out first (from a mapping
  // under a guard, in src_.read): decompressing and decoding work on a2pack's
  // own memory, so a pack cut short under the mapping fails with an error
  // naming it instead of ending the process.
  std::vector<uint8_t> buf;
  try {
    buf.resize(e.length);
    src_.read(buf.data(), e.length, e.offset);
  } catch (const Error& err) {
    fail_entry(i, err);
  } catch (const std::bad_alloc&) {
    fail(A2PACK_E_NO_MEMORY, "{}: entry {}: out of memory allocating {} bytes for its stored bytes",
         path(), i, e.length);
  }
  const uint8_t* stored = buf.data();
  return finish_payload(i, stored, std::move(buf), verify, crc);
}

std::vector<std::vector<uint8_t>> Reader::read_stored(const uint64_t* idx, size_t n) const {
  for (size_t k = 0; k < n; ++k) entry(idx[k]);  // range errors before any work
  std::vector<std::vector<uint8_t>> out(n);
  std::vector<storage::ReadRange> ranges(n);
  uint64_t total = 0;
  try {
    for (size_t k = 0; k < n; ++k) {
      const Entry& e = entry(idx[k]);
      total += e.length;
      out[k].resize(e.length);
      ranges[k] = {e.offset, static_cast<size_t>(e.length), out[k].data()};
    }
  } catch (const std::bad_alloc&) {
    fail(A2PACK_E_NO_MEMORY, "{}: out of memory allocating {} bytes for the stored bytes of {} entries",
         path(), total, n);
  }
  try {
    src_.read_many(ranges.data(), n);
  } catch (const Error& err) {
    rethrow_with_context(err, fmt::format("{}: reading {} entries", path(), n));
  }
  return out;
}

EntryBytes Reader::payload_from(uint64_t i, std::vector<uint8_t>&& stored, bool verify,
                                uint32_t& crc) const {
  if (stored.size() != entry(i).length)
    fail(A2PACK_E_INVALID_ARGUMENT, "{}: entry {}: {} stored bytes given, the entry has {}", path(), i,
         stored.size(), entry(i).length);
  const uint8_t* p = stored.data();
  return finish_payload(i, p, std::move(stored), verify, crc);
}

EntryBytes Reader::finish_payload(uint64_t i, const uint8_t* stored, std::vector<uint8_t>&& buf,
                                  bool verify, uint32_t& crc) const {
  const Entry& e = entry(i);
  run::Kind k = kind(i);
  EntryBytes out;
  try {
    if (e.flags != kEntryStored && !entry_compressed(e.flags))
      fail(A2PACK_E_UNSUPPORTED, "unknown entry flags {:#x} (0 = stored, 1 = zstd, 2 = lz4)",
           e.flags);
    if (verify) check_crc(e, stored);
    if (entry_compressed(e.flags)) {
      if (e.flags == kEntryZstd)
        zstd_decompress(stored, e.length, e.reserved, out.storage);
      else
        lz4_decompress(stored, e.length, e.reserved, out.storage);
      out.data = out.storage.data();
      out.size = out.storage.size();
      crc = crc32c::compute(out.data, out.size);
    } else {
      if (buf.empty()) {
        out.data = stored;  // an empty entry
      } else {
        out.storage = std::move(buf);
        out.data = out.storage.data();
      }
      out.size = e.length;
      crc = e.crc ? e.crc : crc32c::compute(out.data, out.size);
    }
    run::Kind actual = run::detect_kind(out.data, out.size);
    if (actual != k)
      fail(A2PACK_E_CORRUPT, "the index says a v{} run but the payload is a v{} run",
           static_cast<int>(k), static_cast<int>(actual));
  } catch (const Error& err) {
    fail_entry(i, err);
  } catch (const std::bad_alloc&) {
    fail(A2PACK_E_NO_MEMORY, "{}: entry {}: out of memory allocating {} bytes for its {}", path(), i,
         entry_compressed(e.flags) ? e.reserved : e.length,
         entry_compressed(e.flags) ? "decompressed run" : "stored bytes");
  }
  return out;
}

EntryBytes Reader::payload(uint64_t i, bool verify) const {
  uint32_t crc;
  return payload_and_crc(i, verify, crc);
}

run::Run Reader::decode_payload(uint64_t i, const EntryBytes& b) const {
  try {
    return run::decode(b.data, b.size);
  } catch (const Error& err) {
    fail_entry(i, err);
  }
}

run::Run Reader::decode(uint64_t i, bool verify) const {
  return decode_payload(i, payload(i, verify));
}

run::Run Reader::decode_from(uint64_t i, std::vector<uint8_t>&& stored, bool verify) const {
  uint32_t crc;
  return decode_payload(i, payload_from(i, std::move(stored), verify, crc));
}

std::vector<run::Run> Reader::decode_many(const uint64_t* idx, size_t n, uint32_t workers,
                                          bool verify) const {
  for (size_t k = 0; k < n; ++k) entry(idx[k]);  // range errors before any work
  std::vector<run::Run> out(n);
  // Remote: one batch of ranged requests for every entry, then decode.
  std::vector<std::vector<uint8_t>> stored;
  if (src_.remote()) stored = read_stored(idx, n);
  parallel_for(n, workers, [&](size_t k) {
    out[k] = stored.empty() ? decode(idx[k], verify) : decode_from(idx[k], std::move(stored[k]), verify);
  });
  return out;
}

run::Batch Reader::decode_batch(const uint64_t* idx, size_t n, uint32_t workers,
                                bool verify) const {
  bool stored_and_mapped = src_.mapped();
  for (size_t k = 0; k < n; ++k) stored_and_mapped &= entry(idx[k]).flags == kEntryStored;
  std::vector<EntryBytes> bytes;
  std::vector<run::Payload> p(n);
  uninit_vector<uint8_t> copied;
  if (stored_and_mapped) {
    // The stored payloads copied out of the mapping into one buffer, each
    // under a guard (mapped_guard.hpp), in parallel; the decoder then reads
    // that buffer and checks each entry's CRC in its own first parallel pass.
    std::vector<uint64_t> at(n + 1, 0);
    for (size_t k = 0; k < n; ++k) at[k + 1] = at[k] + entry(idx[k]).length;
    try {
      copied.resize(static_cast<size_t>(at[n]));
    } catch (const std::bad_alloc&) {
      fail(A2PACK_E_NO_MEMORY, "{}: out of memory allocating {} bytes for the stored bytes of {} entries",
           path(), at[n], n);
    }
    parallel_for(n, workers, [&](size_t k) {
      guarded_copy(copied.data() + at[k], src_.view(entry(idx[k]).offset), entry(idx[k]).length);
    }, 16);
    for (size_t k = 0; k < n; ++k) {
      const Entry& e = entry(idx[k]);
      const uint8_t* stored = copied.data() + at[k];
      if (run::detect_kind(stored, e.length) != kind(idx[k]))
        fail_entry(idx[k], Error(A2PACK_E_CORRUPT, "the index kind does not match the payload"));
      p[k] = {stored, e.length, verify ? e.crc : 0u};
    }
  } else {
    run::Batch b;
    if (!src_.remote() && decode_batch_local(idx, n, workers, verify, b)) return b;
    bytes.resize(n);
    if (src_.remote()) {
      // Remote: the batch's ranges in one read_many (merged, parallel,
      // bounded), not a request per entry.
      std::vector<std::vector<uint8_t>> stored = read_stored(idx, n);
      parallel_for(n, workers, [&](size_t k) {
        uint32_t crc;
        bytes[k] = payload_from(idx[k], std::move(stored[k]), verify, crc);
      });
    } else {
      parallel_for(n, workers, [&](size_t k) { bytes[k] = payload(idx[k], verify); });
    }
    for (size_t k = 0; k < n; ++k) p[k] = {bytes[k].data, bytes[k].size};
  }
  try {
    return run::decode_batch(p.data(), n, workers, "entry", idx);
  } catch (const Error& err) {
    rethrow_with_context(err, path());
  }
}

bool Reader::decode_batch_local(const uint64_t* idx, size_t n, uint32_t workers, bool verify,
                                run::Batch& out) const {
  // Bytes each entry decodes from: a compressed entry's claim is checked
  // when it is decompressed, one claiming more than may be counted 0 here.
  auto run_size = [&](const Entry& e) -> uint64_t {
    if (e.flags == kEntryStored) return e.length;
    return entry_compressed(e.flags) && e.reserved <= kMaxDecompressed ? e.reserved : 0;
  };
  std::vector<uint64_t> at(n + 1, 0);
  for (size_t k = 0; k < n; ++k) at[k + 1] = at[k] + run_size(entry(idx[k]));
  // A hostile index may claim up to 1 GiB for every entry: past this the
  // entries go one buffer each, as payload() reads them.
  constexpr uint64_t kMaxLaidOut = uint64_t{4} << 30;
  if (at[n] > kMaxLaidOut) return false;
  uninit_vector<uint8_t> runs;
  try {
    runs.resize(static_cast<size_t>(at[n]));
  } catch (const std::bad_alloc&) {
    return false;
  }
  std::vector<run::Payload> p(n);
  parallel_for(n, workers, [&](size_t k) {
    const uint64_t i = idx[k];
    const Entry& e = entry(i);
    const run::Kind want = kind(i);  // names the entry itself
    uint8_t* dst = runs.data() + at[k];
    try {
      if (e.flags == kEntryStored) {
        src_.read(dst, e.length, e.offset);
        if (verify) check_crc(e, dst);
      } else {
        if (!entry_compressed(e.flags))
          fail(A2PACK_E_UNSUPPORTED, "unknown entry flags {:#x} (0 = stored, 1 = zstd, 2 = lz4)",
               e.flags);
        uninit_vector<uint8_t> stored(e.length);
        src_.read(stored.data(), e.length, e.offset);
        if (verify) check_crc(e, stored.data());
        if (e.flags == kEntryZstd)
          zstd_decompress_into(stored.data(), e.length, e.reserved, dst);
        else
          lz4_decompress_into(stored.data(), e.length, e.reserved, dst);
      }
      const size_t size = static_cast<size_t>(at[k + 1] - at[k]);
      run::Kind actual = run::detect_kind(dst, size);
      if (actual != want)
        fail(A2PACK_E_CORRUPT, "the index says a v{} run but the payload is a v{} run",
             static_cast<int>(want), static_cast<int>(actual));
      p[k] = {dst, size};
    } catch (const Error& err) {
      fail_entry(i, err);
    } catch (const std::bad_alloc&) {
      fail(A2PACK_E_NO_MEMORY, "{}: entry {}: out of memory allocating {} bytes for its stored bytes",
           path(), i, e.length);
    }
  }, 4);
  try {
    out = run::decode_batch(p.data(), n, workers, "entry", idx);
  } catch (const Error& err) {
    rethrow_with_context(err, path());
  }
  return true;
}

// ------------------------------------------------------------------ stats
void Reader::compute_summary(uint32_t workers) const {
  const size_t n = entries_.size();
  std::vector<uint32_t> lengths(n);
  unsigned w = resolve_workers(workers);
  std::vector<HistogramBuilder> hist(w);
  // A remote pack is read in waves of entries, each wave one batch of ranged
  // requests (merged, parallel), not a request per entry.
  const size_t wave = src_.remote() ? 1024 : std::max<size_t>(n, 1);
  for (size_t first = 0; first < n; first += wave) {
    const size_t count = std::min(wave, n - first);
    std::vector<std::vector<uint8_t>> stored;
    if (src_.remote()) {
      std::vector<uint64_t> ids(count);
      for (size_t k = 0; k < count; ++k) ids[k] = first + k;
      stored = read_stored(ids.data(), count);
    }
    parallel_for_worker(
        count, workers,
        [&](unsigned worker, size_t k) {
          const size_t i = first + k;
          uint32_t crc;
          EntryBytes b = stored.empty() ? payload(i, opts_.verify_crc)
                                        : payload_from(i, std::move(stored[k]), opts_.verify_crc, crc);
          run::Header h;
          try {
            h = run::parse_header(b.data, b.size);
          } catch (const Error& err) {
            fail_entry(i, err);
          }
          lengths[i] = h.meta.steps;
          hist[worker].add(h.meta.highest_tile, h.meta.engine);
        },
        64);
  }
  for (unsigned k = 1; k < w; ++k) hist[0].merge(hist[k]);
  computed_stats_ = summarize_lengths(lengths);
  histograms_ = std::make_unique<Histograms>(hist[0].finish());
}

std::string Reader::stats_problem(uint32_t workers) const {
  if (!stats_problem_.empty()) return stats_problem_;
  std::lock_guard<std::mutex> lk(mu_);
  if (capacity_problem_.empty()) return {};
  // Either the block lies or a run's meta.steps does (which upstream
  // accepts): the runs' headers tell, read once in parallel.
  if (!computed_stats_) compute_summary(workers);
  if (*computed_stats_ == *stats_block_)
    capacity_problem_.clear();
  else
    capacity_problem_ = fmt::format("offset {}: {}", footer_.stats_offset + 4,
                                    stats_difference(*stats_block_, *computed_stats_));
  return capacity_problem_;
}

Reader::Stats Reader::stats(uint32_t workers) const {
  if (std::string problem = stats_problem(workers); !problem.empty())
    fail(A2PACK_E_CORRUPT,
         "{}: {}; refusing to report it (`a2pack validate --full` compares the block with the "
         "runs)",
         path(), problem);
  if (stats_block_) return {*stats_block_, true};
  std::lock_guard<std::mutex> lk(mu_);
  if (!computed_stats_) compute_summary(workers);
  return {*computed_stats_, false};
}

const Histograms& Reader::histograms(uint32_t workers) const {
  std::lock_guard<std::mutex> lk(mu_);
  if (!histograms_) compute_summary(workers);
  return *histograms_;
}

// ------------------------------------------------------------------ validate
namespace {
struct Failure {
  uint64_t order;  // entry index, or past the entries for file-level problems
  a2pack_status status;
  std::string message;
};
}  // namespace

void Reader::validate(bool full, uint32_t workers, const ProgressFn& progress) const {
  const size_t n = entries_.size();
  std::vector<uint64_t> todo;
  if (full) {
    todo.resize(n);
    for (size_t i = 0; i < n; ++i) todo[i] = i;
  } else {
    const size_t m = std::min<size_t>(n, 16);
    for (size_t k = 0; k < m; ++k) todo.push_back(m == 1 ? 0 : k * (n - 1) / (m - 1));
  }

  std::mutex fmu;
  std::vector<Failure> failures;
  auto record = [&](uint64_t order, const Error& e) {
    std::lock_guard<std::mutex> lk(fmu);
    failures.push_back({order, e.status(), e.what()});
  };
  std::vector<uint32_t> lengths(todo.size());
  std::atomic<bool> lengths_ok{true};

  // Entries in waves so progress is reported from this thread.
  const size_t wave = std::max<size_t>(256, 64 * size_t{resolve_workers(workers)});
  for (size_t first = 0; first < todo.size(); first += wave) {
    size_t count = std::min(wave, todo.size() - first);
    // Remote: the wave's entries in one batch of ranged requests (a network
    // failure there fails the validation as a whole, as any read would).
    std::vector<std::vector<uint8_t>> stored;
    if (src_.remote()) stored = read_stored(todo.data() + first, count);
    parallel_for(
        count, workers,
        [&](size_t k) {
          uint64_t i = todo[first + k];
          try {
            run::Run r = stored.empty() ? decode(i, true) : decode_from(i, std::move(stored[k]), true);
            lengths[first + k] = r.meta.steps;
          } catch (const Error& e) {
            lengths_ok = false;
            record(i, e);
          }
        },
        4);
    if (progress && !progress(first + count, todo.size()))
      fail(A2PACK_E_INTERRUPTED, "{}: validation interrupted", path());
  }

  auto file_problem = [&](a2pack_status st, std::string msg) {
    record(UINT64_MAX, Error(st, fmt::format("{}: {}", path(), msg)));
  };
  // The open-time check of the stats block; validate(full) reports it only
  // where its own comparison with the runs does not speak for the block.
  bool block_compared = false;
  if (full && stats_block_ && lengths_ok) {
    StatsBlock actual = summarize_lengths(lengths);
    if (!(actual == *stats_block_)) {
      block_compared = true;
      file_problem(A2PACK_E_CORRUPT, stats_difference(*stats_block_, actual));
    }
  }
  if (!block_compared) {
    std::string problem;
    try {
      problem = stats_problem(workers);
    } catch (const Error& e) {  // a run's header that cannot be read: reported above
      problem = stats_problem_;
    }
    if (!problem.empty()) file_problem(A2PACK_E_CORRUPT, problem);
  }

  if (full) {
    // Every byte that is neither header, index, payload, stats nor footer
    // must be zero; entries must not overlap.
    std::vector<uint64_t> order(n);
    for (size_t i = 0; i < n; ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](uint64_t a, uint64_t b) {
      return entries_[a].offset < entries_[b].offset ||
             (entries_[a].offset == entries_[b].offset && a < b);
    });
    uint64_t pos = index_end();
    // A remote pack's small gaps are read in batches (merged, parallel
    // ranged requests) rather than one request each; see check_gaps.
    std::vector<Gap> gaps;
    auto gap = [&](uint64_t end, const char* where) {
      if (end <= pos) return;
      if (src_.remote() && end - pos <= kBatchedGap) {
        gaps.push_back({pos, end - pos, where});
        return;
      }
      if (auto at = first_nonzero(pos, end - pos))
        file_problem(A2PACK_E_CORRUPT,
                     fmt::format("offset {}: non-zero byte in the padding {}", *at, where));
    };
    for (size_t k = 0; k < n; ++k) {
      const Entry& e = entries_[order[k]];
      if (e.offset < pos && k > 0 && e.length > 0)
        file_problem(A2PACK_E_CORRUPT, fmt::format("entries {} and {} overlap at offset {}",
                                                   order[k - 1], order[k], e.offset));
      gap(e.offset, k == 0 ? "after the index" : "between entries");
      pos = std::max(pos, e.end());
    }
    if (stats_block_) {
      gap(footer_.stats_offset, "before the stats block");
      pos = std::max(pos, stats_block_end_);
    }
    gap(footer_start(), "before the footer");
    check_gaps(gaps, [&](uint64_t at, const char* where) {
      file_problem(A2PACK_E_CORRUPT, fmt::format("offset {}: non-zero byte in the padding {}", at, where));
    });
    if (footer_.data_crc != 0) {
      uint32_t c = 0;
      uint64_t off = index_end();
      std::vector<uint8_t> buf;
      // Remote: 32 MiB reads, each fetched as parallel parts.
      const uint64_t chunk = src_.remote() ? 32u << 20 : 1u << 20;
      while (off < footer_.data_end) {
        size_t len = static_cast<size_t>(std::min<uint64_t>(footer_.data_end - off, chunk));
        if (src_.mapped()) {
          guarded_read([&] { c = crc32c::extend(c, src_.view(off), len); });
        } else {
          buf.resize(len);
          src_.read(buf.data(), len, off);
          c = crc32c::extend(c, buf.data(), len);
        }
        off += len;
      }
      if (c != footer_.data_crc)
        file_problem(A2PACK_E_CHECKSUM,
                     fmt::format("data CRC32C mismatch over [{}, {}): footer says {:#010x}, "
                                 "computed {:#010x}",
                                 index_end(), footer_.data_end, footer_.data_crc, c));
    }
  }

  if (failures.empty()) return;
  std::sort(failures.begin(), failures.end(),
            [](const Failure& a, const Failure& b) { return a.order < b.order; });
  if (failures.size() == 1) throw Error(failures[0].status, failures[0].message);
  std::string msg = fmt::format("{}: {} problems found:", path(), failures.size());
  for (size_t k = 0; k < failures.size() && k < 10; ++k) msg += "\n  " + failures[k].message;
  if (failures.size() > 10) msg += fmt::format("\n  ... and {} more", failures.size() - 10);
  throw Error(failures[0].status, msg);
}

}  // namespace a2pack::pack
