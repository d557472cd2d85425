#include "bag/record_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <new>

#include "base/batch_read.hpp"
#include "base/error.hpp"
#include "base/mapped_guard.hpp"
#include "base/worker_pool.hpp"

namespace a2pack::bag {
namespace {

// How far ahead a file in object storage read forward (iteration) is
// fetched: 8 parts of storage::ReadObject::kReadAheadPart (8 MiB) in flight,
// about what `aws s3 cp` keeps (8 MiB parts on 10 threads).
constexpr size_t kRemoteReadAhead = 64u << 20;

MappedFile::Advice map_advice(AccessPattern a) {
  switch (a) {
    case AccessPattern::random: return MappedFile::Advice::random;
    case AccessPattern::sequential: return MappedFile::Advice::sequential;
    default: return MappedFile::Advice::normal;
  }
}

// statx(STATX_DIOALIGN) through the raw fields, so the build does not depend
// on the C library's headers knowing them (glibc 2.36 does not). Layout from
// linux/stat.h: mask at 0, stx_dio_mem_align at 0xC0 and
// stx_dio_offset_align at 0xC4 of a 256-byte struct.
size_t statx_dio_alignment(int fd) {
#ifdef SYS_statx
  alignas(8) unsigned char buf[256] = {};
  constexpr unsigned kDioAlign = 0x2000;  // STATX_DIOALIGN
  if (::syscall(SYS_statx, fd, "", AT_EMPTY_PATH, kDioAlign, buf) != 0) return 0;
  uint32_t mask;
  std::memcpy(&mask, buf, 4);
  if (!(mask & kDioAlign)) return 0;
  uint32_t mem, off;
  std::memcpy(&mem, buf + 0xC0, 4);
  std::memcpy(&off, buf + 0xC4, 4);
  if (!mem || !off) return 0;  // the filesystem does not support O_DIRECT
  size_t a = mem > off ? mem : off;
  return (a & (a - 1)) == 0 && a <= (1u << 16) ? a : 0;
#else
  return 0;
#endif
}

// Per-thread scratch for O_DIRECT reads, aligned to at least a page.
struct AlignedBuffer {
  uint8_t* p = nullptr;
  size_t cap = 0, align = 0;
  ~AlignedBuffer() { std::free(p); }
  uint8_t* get(size_t n, size_t want_align) {
    if (want_align < 4096) want_align = 4096;
    if (n <= cap && want_align <= align) return p;
    std::free(p);
    p = nullptr;
    cap = align = 0;
    void* q = nullptr;
    if (::posix_memalign(&q, want_align, n) != 0) throw std::bad_alloc();
    p = static_cast<uint8_t*>(q);
    cap = n;
    align = want_align;
    return p;
  }
};

}  // namespace

RecordFile::RecordFile(const std::string& path, AccessPattern access, CachePolicy cache,
                       bool refuse_direct_io)
    : path_(path), cache_(cache) {
  if (storage::is_remote(path)) {
    obj_ = storage::open_read(path);
    cache_ = CachePolicy::drop_after_read;  // not mapped: every read is a copy
    size_ = obj_->size();
    if (access != AccessPattern::random) obj_->set_read_ahead(kRemoteReadAhead);
    mode_ = "object storage";
    return;
  }
  if (cache == CachePolicy::system) {
    map_ = MappedFile(path, map_advice(access));
    size_ = map_.size();
    mode_ = describe();
    return;
  }
  int flags = O_RDONLY | O_CLOEXEC;
  if (cache == CachePolicy::direct_io && !refuse_direct_io) {
    fd_ = open_for_reading(path, flags | O_DIRECT);  // never blocks on a FIFO
    if (fd_ >= 0) {
      align_ = statx_dio_alignment(fd_);
      if (!align_) align_ = probe_alignment();
      if (!align_) {
        ::close(fd_);
        fd_ = -1;
      }
    } else if (errno != EINVAL) {
      fail_errno("open", path, errno);
    }
  }
  if (fd_ < 0) {
    fell_back_ = cache == CachePolicy::direct_io;
    fd_ = open_for_reading(path, flags);  // never blocks on a FIFO
    if (fd_ < 0) fail_errno("open", path, errno);
  }
  struct stat st;
  if (::fstat(fd_, &st) != 0) {
    int err = errno;
    ::close(fd_);
    fd_ = -1;
    fail_errno("stat", path, err);
  }
  if (S_ISDIR(st.st_mode)) {
    ::close(fd_);
    fd_ = -1;
    fail(A2PACK_E_INVALID_ARGUMENT, "{}: is a folder, not a file", path);
  }
  size_ = static_cast<uint64_t>(st.st_size);
  if (long page = ::sysconf(_SC_PAGESIZE); page > 0) page_ = static_cast<uint64_t>(page);
  int advice = access == AccessPattern::random       ? POSIX_FADV_RANDOM
               : access == AccessPattern::sequential ? POSIX_FADV_SEQUENTIAL
                                                     : POSIX_FADV_NORMAL;
  if (advice != POSIX_FADV_NORMAL) ::posix_fadvise(fd_, 0, 0, advice);  // a hint
  mode_ = describe();
}

RecordFile::~RecordFile() {
  if (fd_ >= 0) ::close(fd_);
}

// The smallest power of two from 512 up to the page size at which an
// O_DIRECT read of the file start succeeds; 0 when none does.
size_t RecordFile::probe_alignment() {
  size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  if (page < 4096) page = 4096;
  thread_local AlignedBuffer buf;
  uint8_t* p = buf.get(page, page);
  for (size_t a = 512; a <= page; a *= 2) {
    ssize_t n = ::pread(fd_, p, a, 0);
    if (n >= 0) return a;
    if (errno != EINVAL) return 0;
  }
  return 0;
}

std::string RecordFile::describe() const {
  if (cache_ == CachePolicy::system) return "mmap";
  if (align_) return "o_direct/" + std::to_string(align_);
  if (fell_back_) return "buffered fallback (O_DIRECT refused)";
  return "pread+dontneed";
}

void RecordFile::check_bounds(uint64_t offset, size_t len) const {
  if (offset > size_ || len > size_ - offset)
    fail(A2PACK_E_CORRUPT, "{}: read of {} bytes at offset {} is past the end of the {}-byte file",
         path_, len, offset, size_);
}

void RecordFile::read(uint64_t offset, size_t len, uint8_t* dst) const {
  check_bounds(offset, len);
  if (len == 0) return;
  if (obj_) {
    obj_->read(offset, len, dst);
    return;
  }
  if (cache_ == CachePolicy::system) {
    guarded_copy(dst, map_.data() + offset, len);  // a file cut short raises (mapped_guard.hpp)
    return;
  }
  if (align_) {
    read_direct(offset, len, dst);
    return;
  }
  size_t done = 0;
  while (done < len) {
    ssize_t n = ::pread(fd_, dst + done, len - done, static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      fail_errno(fmt::format("read {} bytes at offset {}", len, offset), path_, errno);
    }
    if (n == 0) fail(A2PACK_E_CORRUPT, "{}: file shrank while reading offset {}", path_, offset + done);
    done += static_cast<size_t>(n);
  }
  drop_pages(offset, len);
}

// DONTNEED releases only the whole pages inside the range (the kernel keeps
// partial pages at both ends), so a range that holds no whole page - most
// records of a few KiB - would be a system call that drops nothing; it is
// skipped. The call costs more than the read of a cached page: with many
// readers it serialises on the file's page cache.
void RecordFile::drop_pages(uint64_t offset, size_t len) const {
  const uint64_t first = (offset + page_ - 1) / page_ * page_;
  const uint64_t end = offset + len;
  // The kernel drops the last partial page too when the range ends the file.
  const uint64_t last = end == size_ ? end : end / page_ * page_;
  if (last <= first) return;
  ::posix_fadvise(fd_, static_cast<off_t>(offset), static_cast<off_t>(len), POSIX_FADV_DONTNEED);
}

void RecordFile::read_direct(uint64_t offset, size_t len, uint8_t* dst) const {
  thread_local AlignedBuffer buf;
  const uint64_t a = align_;
  uint64_t start = offset / a * a;
  uint64_t end = (offset + len + a - 1) / a * a;
  // Bounded chunks keep the aligned scratch small for huge spans.
  constexpr uint64_t kChunk = 8u << 20;
  uint8_t* p = buf.get(static_cast<size_t>(end - start < kChunk ? end - start : kChunk), align_);
  uint64_t pos = start;
  while (pos < end) {
    uint64_t want = end - pos < kChunk ? end - pos : kChunk;
    size_t got = 0;
    while (got < want) {
      ssize_t n = ::pread(fd_, p + got, want - got, static_cast<off_t>(pos + got));
      if (n < 0) {
        if (errno == EINTR) continue;
        fail_errno(fmt::format("O_DIRECT read {} bytes at offset {}", want, pos), path_, errno);
      }
      if (n == 0) break;  // end of file inside the last aligned block
      got += static_cast<size_t>(n);
    }
    // Copy the part of [pos, pos+got) that lies inside [offset, offset+len).
    uint64_t lo = pos > offset ? pos : offset;
    uint64_t hi = pos + got < offset + len ? pos + got : offset + len;
    if (hi > lo) std::memcpy(dst + (lo - offset), p + (lo - pos), hi - lo);
    if (got < want && pos + got < offset + len)
      fail(A2PACK_E_CORRUPT, "{}: file shrank while reading offset {}", path_, pos + got);
    pos += want;
  }
}

namespace {
// Aligned scratch of one wave of O_DIRECT reads in a batch: the reads of a
// batch go out in waves of at most this much scratch, so a huge batch does
// not double its memory.
constexpr uint64_t kDirectWaveBytes = 64u << 20;
}  // namespace

void RecordFile::read_many(const Span* spans, size_t n, uint32_t threads,
                           const std::function<void(size_t)>* on_read) {
  for (size_t i = 0; i < n; ++i) spans[i].file->check_bounds(spans[i].offset, spans[i].len);
  auto one_by_one = [&](size_t from) {
    parallel_for(n - from, threads, [&](size_t k) {
      const Span& s = spans[from + k];
      s.file->read(s.offset, s.len, s.dst);
      if (on_read) (*on_read)(from + k);
    });
  };
  if (n <= 1) return one_by_one(0);

  thread_local AlignedBuffer scratch;
  std::vector<FileRead> wave;
  std::vector<uint64_t> scratch_at;  // per read of the wave: its scratch offset (direct reads)
  for (size_t from = 0; from < n;) {
    // One wave: every buffered read, and direct reads up to kDirectWaveBytes
    // of aligned scratch (at least one).
    wave.clear();
    scratch_at.clear();
    uint64_t scratch_bytes = 0, scratch_align = 4096;
    size_t to = from;
    for (; to < n; ++to) {
      const Span& s = spans[to];
      const RecordFile& f = *s.file;
      if (!f.align_) {
        wave.push_back({f.fd_, s.offset, s.len, s.len, s.dst});
        scratch_at.push_back(0);
        continue;
      }
      const uint64_t a = f.align_;
      const uint64_t start = s.offset / a * a, end = (s.offset + s.len + a - 1) / a * a;
      const uint64_t at = (scratch_bytes + a - 1) / a * a;  // shards may differ in alignment
      if (scratch_bytes && at + (end - start) > kDirectWaveBytes) break;
      wave.push_back({f.fd_, start, static_cast<size_t>(end - start),
                      static_cast<size_t>(s.offset + s.len - start), nullptr});
      scratch_at.push_back(at);
      scratch_bytes = at + (end - start);
      if (a > scratch_align) scratch_align = a;
    }
    uint8_t* base =
        scratch_bytes ? scratch.get(static_cast<size_t>(scratch_bytes), static_cast<size_t>(scratch_align)) : nullptr;
    for (size_t k = 0; k < wave.size(); ++k)
      if (!wave[k].dst) wave[k].dst = base + scratch_at[k];

    // Buffered reads land in place and are announced as they complete;
    // direct ones once copied out of the scratch below.
    const std::function<void(size_t)> arrived = [&](size_t k) {
      if (!spans[from + k].file->align_) (*on_read)(from + k);
    };
    BatchReadFailure why;
    switch (read_batch(wave.data(), wave.size(), &why, on_read ? &arrived : nullptr)) {
      case BatchRead::unavailable: return one_by_one(from);
      case BatchRead::failed: {
        const Span& s = spans[from + why.index];
        const RecordFile& f = *s.file;
        if (why.err == 0)
          fail(A2PACK_E_CORRUPT, "{}: file shrank while reading offset {}", f.path_, why.offset);
        fail_errno(fmt::format("{}read {} bytes at offset {}", f.align_ ? "O_DIRECT " : "", s.len, s.offset),
                   f.path_, why.err);
      }
      case BatchRead::done: break;
    }
    for (size_t k = 0; k < wave.size(); ++k) {
      const Span& s = spans[from + k];
      if (s.file->align_) {
        std::memcpy(s.dst, wave[k].dst + (s.offset - wave[k].offset), s.len);
        if (on_read) (*on_read)(from + k);
      } else
        s.file->drop_pages(s.offset, s.len);
    }
    from = to;
  }
}

}  // namespace a2pack::bag
