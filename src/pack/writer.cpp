#include "pack/writer.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <optional>

#include "base/crc32c.hpp"
#include "base/file_io.hpp"
#include "base/stale_temps.hpp"
#include "base/worker_pool.hpp"
#include "pack/lz4_entry.hpp"
#include "pack/zstd_entry.hpp"
#include "run/codec.hpp"
#include "storage/head_first.hpp"

namespace fs = std::filesystem;

namespace a2pack::pack {

// ------------------------------------------------------------------ staging
// An anonymous temporary file in the output's folder (so the final copy stays
// on one filesystem): O_TMPFILE where supported, else a name unlinked at once.
// Nothing is left behind whatever happens to the process.
class SpillFile {
 public:
  explicit SpillFile(const std::string& dir) : dir_(dir) {
    fd_ = ::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd_ < 0) {
      std::string tmpl = dir + "/.a2pack-stage-XXXXXX";
      fd_ = ::mkostemp(tmpl.data(), O_CLOEXEC);
      if (fd_ < 0) fail_errno("create a staging file in", dir, errno);
      ::unlink(tmpl.c_str());
    }
    buf_.reserve(kBuffer);
  }
  ~SpillFile() {
    if (fd_ >= 0) ::close(fd_);
  }
  void write(const void* data, size_t len) {
    const auto* p = static_cast<const uint8_t*>(data);
    if (buf_.size() + len > kBuffer) flush();
    if (len >= kBuffer)
      write_all(fd_, p, len, staging_name());
    else
      buf_.insert(buf_.end(), p, p + len);
  }
  void flush() {
    write_all(fd_, buf_.data(), buf_.size(), staging_name());
    buf_.clear();
  }
  // Copy [0, len) of what was written into `out`.
  void copy_to(AtomicFile& out, uint64_t len) {
    flush();
    std::vector<uint8_t> chunk(kBuffer);
    for (uint64_t off = 0; off < len;) {
      size_t n = static_cast<size_t>(std::min<uint64_t>(kBuffer, len - off));
      ssize_t got = ::pread(fd_, chunk.data(), n, static_cast<off_t>(off));
      if (got < 0) {
        if (errno == EINTR) continue;
        fail_errno("read the staging file in", dir_, errno);
      }
      if (got == 0) fail(A2PACK_E_IO, "{}: staging file ended early at {}", dir_, off);
      out.write(chunk.data(), static_cast<size_t>(got));
      off += static_cast<uint64_t>(got);
    }
  }

 private:
  static constexpr size_t kBuffer = 1 << 20;
  std::string staging_name() const { return "the staging file in " + dir_; }
  std::string dir_;
  int fd_ = -1;
  std::vector<uint8_t> buf_;
};

namespace {

const uint8_t kZeros[4096] = {};

template <typename Sink>
void write_zeros(Sink& sink, uint64_t n) {
  while (n) {
    size_t k = static_cast<size_t>(std::min<uint64_t>(n, sizeof kZeros));
    sink.write(kZeros, k);
    n -= k;
  }
}

void check_options(const WriterOptions& o) {
  if (o.align == 0 || o.align > (1u << 20) || (o.align & (o.align - 1)))
    fail(A2PACK_E_INVALID_ARGUMENT, "align must be a power of two from 1 to 1048576, got {}",
         o.align);
  if (o.compression != Compression::none && o.compression != Compression::zstd &&
      o.compression != Compression::lz4)
    fail(A2PACK_E_INVALID_ARGUMENT, "unknown compression {} (0 = none, 1 = zstd, 2 = lz4)",
         static_cast<uint32_t>(o.compression));
  if (o.compression == Compression::lz4 && (o.lz4_level < kLz4MinLevel || o.lz4_level > kLz4MaxLevel))
    fail(A2PACK_E_INVALID_ARGUMENT,
         "lz4 level must be from {} to {} (0 = LZ4's fast default, negative = faster, 3 and up = "
         "LZ4 HC), got {}",
         kLz4MinLevel, kLz4MaxLevel, o.lz4_level);
  if (o.expected_count > (uint64_t{1} << 32))
    fail(A2PACK_E_INVALID_ARGUMENT, "expected_count {} is impossibly large", o.expected_count);
}

}  // namespace

// ------------------------------------------------------------------ prepare
Prepared prepare(const uint8_t* data, size_t len, const WriterOptions& opts) {
  if (len > UINT32_MAX)
    fail(A2PACK_E_INVALID_ARGUMENT, "run is {} bytes; a pack entry holds at most {}", len,
         UINT32_MAX);
  // A full decode: whatever goes in must come out.
  run::Run r = run::decode(data, len);
  Prepared p;
  p.view = data;
  p.kind = r.source == run::Kind::v1 ? kKindV1 : kKindV2;
  p.raw_len = static_cast<uint32_t>(len);
  p.meta_steps = r.meta.steps;
  if (opts.compression != Compression::none && len <= kMaxDecompressed) {
    const bool zstd = opts.compression == Compression::zstd;
    std::string z = zstd ? zstd_compress(data, len, opts.zstd_level) : lz4_compress(data, len, opts.lz4_level);
    if (z.size() < len) {  // stored verbatim when compression does not pay
      p.compressed = std::move(z);
      p.flags = zstd ? kEntryZstd : kEntryLz4;
    }
  }
  if (opts.entry_crc) p.crc = crc32c::compute(p.stored(), p.stored_size());
  return p;
}

Prepared prepare(std::vector<uint8_t>&& bytes, const WriterOptions& opts) {
  Prepared p = prepare(bytes.data(), bytes.size(), opts);
  p.view = nullptr;
  p.owned = std::move(bytes);  // the buffer (and so stored()) does not move
  return p;
}

Prepared prepare_file(const std::string& path, const WriterOptions& opts) {
  std::vector<uint8_t> bytes = read_file(path);  // errors name the path
  try {
    return prepare(std::move(bytes), opts);
  } catch (const Error& e) {
    rethrow_with_context(e, path);
  }
}

// ------------------------------------------------------------------ writer
Writer::Writer(std::string path, WriterOptions opts) : path_(std::move(path)), opts_(opts) {
  check_options(opts_);
  if (storage::is_remote(path_)) {
    // s3:// / gs://: the payloads stream to the object and the header and
    // index are put in front at finish() (storage/head_first.hpp), since an
    // object cannot be patched in place. The layout is the local one's.
    remote_ = std::make_unique<storage::HeadFirstWriter>(path_);
    path_ = remote_->url();
    if (opts_.expected_count)
      data_start_ = align_up(kHeaderSize + kEntrySize * opts_.expected_count, opts_.align);
    return;
  }
  remove_stale_temps(path_);  // left by earlier writers of this pack that were killed
  if (opts_.expected_count) {
    out_ = std::make_unique<AtomicFile>(path_);
    data_start_ = align_up(kHeaderSize + kEntrySize * opts_.expected_count, opts_.align);
    write_zeros(*out_, data_start_);  // header and index, written in place at finish()
  } else {
    spill_ = std::make_unique<SpillFile>(parent_dir(path_));
  }
}

Writer::~Writer() = default;

void Writer::check_open() const {
  if (finished_) fail(A2PACK_E_CLOSED, "{}: the pack writer is already finished", path_);
  if (broken_)
    fail(A2PACK_E_CLOSED, "{}: the pack writer failed earlier and cannot continue", path_);
}

void Writer::write_data(const void* p, size_t n) {
  if (remote_)
    remote_->write(p, n);
  else if (out_)
    out_->write(p, n);
  else
    spill_->write(p, n);
  rel_pos_ += n;
}

void Writer::write_zeros_data(uint64_t n) {
  if (remote_)
    write_zeros(*remote_, n);
  else if (out_)
    write_zeros(*out_, n);
  else
    write_zeros(*spill_, n);
  rel_pos_ += n;
}

void Writer::append(const Prepared& p) {
  check_open();
  if (opts_.expected_count && entries_.size() >= opts_.expected_count)
    fail(A2PACK_E_INVALID_ARGUMENT,
         "{}: the writer was opened for {} entries; open it with expected_count 0 (unknown) or "
         "a larger count to add more",
         path_, opts_.expected_count);
  broken_ = true;  // until the entry is completely written
  Entry e;
  uint64_t at = align_up(rel_pos_, opts_.align);
  write_zeros_data(at - rel_pos_);
  e.offset = at;
  e.length = static_cast<uint32_t>(p.stored_size());
  e.kind = p.kind;
  e.flags = p.flags;
  e.crc = p.crc;
  e.reserved = p.flags != kEntryStored ? p.raw_len : 0;
  write_data(p.stored(), p.stored_size());
  entries_.push_back(e);
  lengths_.push_back(p.meta_steps);
  summary_.entries++;
  summary_.input_bytes += p.raw_len;
  summary_.stored_bytes += e.length;
  summary_.compressed_entries += p.flags != kEntryStored;
  broken_ = false;
}

void Writer::add_files(const std::vector<std::string>& paths, uint32_t workers, bool skip_bad,
                       const BadInputFn& on_bad, const ProgressFn& progress) {
  check_open();
  const size_t wave = std::max<size_t>(64, 16 * size_t{resolve_workers(workers)});
  std::vector<std::optional<Prepared>> ready;
  std::vector<std::optional<Error>> errors;
  for (size_t first = 0; first < paths.size(); first += wave) {
    const size_t n = std::min(wave, paths.size() - first);
    ready.assign(n, std::nullopt);
    errors.assign(n, std::nullopt);
    parallel_for(n, workers, [&](size_t k) {
      try {
        ready[k] = prepare_file(paths[first + k], opts_);
      } catch (const Error& e) {
        errors[k] = e;
      }
    });
    for (size_t k = 0; k < n; ++k) {
      if (errors[k]) {
        if (!skip_bad) throw *errors[k];
        summary_.skipped++;
        if (on_bad) on_bad(paths[first + k], *errors[k]);
        continue;
      }
      append(*ready[k]);
      ready[k].reset();
    }
    if (progress && !progress(first + n, paths.size()))
      fail(A2PACK_E_INTERRUPTED, "{}: packing interrupted", path_);
  }
}

BuildSummary Writer::finish() {
  check_open();
  broken_ = true;
  const uint64_t count = entries_.size();
  if (remote_) return finish_remote();
  std::unique_ptr<AtomicFile> staged;
  if (!out_) {
    // Staging mode: the count is known now; lay out header, index and pad in
    // a fresh output and copy the staged payloads behind them.
    staged = std::make_unique<AtomicFile>(path_);
    data_start_ = align_up(kHeaderSize + kEntrySize * count, opts_.align);
    write_zeros(*staged, data_start_);
    spill_->copy_to(*staged, rel_pos_);
  }
  AtomicFile& out = out_ ? *out_ : *staged;

  std::vector<uint8_t> index(kEntrySize * count);
  uint64_t data_end = 0;
  for (uint64_t i = 0; i < count; ++i) {
    Entry e = entries_[i];
    e.offset += data_start_;
    data_end = std::max(data_end, e.end());
    encode_entry(e, index.data() + i * kEntrySize);
  }
  // The stats block follows the last payload directly, as upstream writes it.
  Footer f;
  f.data_end = data_end;
  f.index_crc = crc32c::compute(index.data(), index.size());
  f.stats_offset = data_start_ + rel_pos_;
  out.write(encode_stats_block(summarize_lengths(lengths_)));
  uint8_t fb[kFooterSize];
  encode_footer(f, fb);
  out.write(fb, kFooterSize);

  uint8_t hb[kHeaderSize];
  // Version 2 marks compressed entries so that upstream readers, which
  // ignore entry flags, refuse the pack at open (format.hpp).
  encode_header(Header{summary_.compressed_entries ? kVersionCompressed : kVersion, 0, count}, hb);
  out.pwrite(hb, kHeaderSize, 0);
  if (!index.empty()) out.pwrite(index.data(), index.size(), kHeaderSize);
  summary_.file_bytes = out.bytes_written();
  out.commit();
  finished_ = true;
  broken_ = false;
  spill_.reset();
  return summary_;
}

// Object storage: the stats block and footer end the streamed body; the
// header, index and padding up to the first payload go in front at commit.
BuildSummary Writer::finish_remote() {
  const uint64_t count = entries_.size();
  if (!opts_.expected_count) data_start_ = align_up(kHeaderSize + kEntrySize * count, opts_.align);
  std::vector<uint8_t> head(data_start_);
  uint64_t data_end = 0;
  for (uint64_t i = 0; i < count; ++i) {
    Entry e = entries_[i];
    e.offset += data_start_;
    data_end = std::max(data_end, e.end());
    encode_entry(e, head.data() + kHeaderSize + i * kEntrySize);
  }
  Footer f;
  f.data_end = data_end;
  f.index_crc = crc32c::compute(head.data() + kHeaderSize, kEntrySize * count);
  f.stats_offset = data_start_ + rel_pos_;
  std::string stats = encode_stats_block(summarize_lengths(lengths_));
  remote_->write(stats.data(), stats.size());
  uint8_t fb[kFooterSize];
  encode_footer(f, fb);
  remote_->write(fb, kFooterSize);
  encode_header(Header{summary_.compressed_entries ? kVersionCompressed : kVersion, 0, count},
                head.data());
  remote_->commit(head.data(), head.size());
  summary_.file_bytes = head.size() + remote_->body_bytes();
  finished_ = true;
  broken_ = false;
  remote_.reset();
  return summary_;
}

// ------------------------------------------------------------------ pack_dir
std::vector<std::string> list_run_files(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    fail(A2PACK_E_NOT_FOUND, "{}: not a folder{}", dir, ec ? ": " + ec.message() : "");
  std::vector<fs::path> found;
  fs::recursive_directory_iterator it(dir, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    std::error_code fec;
    if (it->path().extension() == ".a2run2" && it->is_regular_file(fec)) found.push_back(it->path());
  }
  if (ec) fail(A2PACK_E_IO, "{}: cannot list the folder: {}", dir, ec.message());
  // fs::path compares component by component, as Rust's Path ordering does.
  std::sort(found.begin(), found.end());
  std::vector<std::string> out;
  out.reserve(found.size());
  for (auto& p : found) out.push_back(p.string());
  return out;
}

BuildSummary pack_dir(const std::string& dir, const std::string& output, WriterOptions opts,
                      uint32_t workers, bool skip_bad, const BadInputFn& on_bad,
                      const ProgressFn& progress) {
  std::vector<std::string> files = list_run_files(dir);
  if (files.empty()) fail(A2PACK_E_NOT_FOUND, "{}: no .a2run2 files found", dir);
  opts.expected_count = files.size();
  Writer w(output, opts);
  w.add_files(files, workers, skip_bad, on_bad, progress);
  return w.finish();
}

}  // namespace a2pack::pack
