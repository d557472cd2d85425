// The data logger: sparse-vector records from many threads into rotating,
// crash-safe zstd segments (docs/logger.md).
//
// Design, briefly:
//  - record() runs on the caller's thread: it validates and encodes the record
//    into that thread's open frame buffer (a "chunk"), guarded by a per-thread
//    spin lock that only flush/close and the writer's timer ever contend. No
//    syscall, no shared cache line except in the rare chunk hand-over.
//  - A full chunk is sealed and queued. Writer threads compress queued chunks
//    (in parallel when there are several) into zstd frames behind the
//    checksummed block header; one of them, the appender, writes the frames
//    in queue order to the current segment and handles flush barriers. Chunks of idle threads are taken by the writer
//    after `flush_interval_ms`, so data never sits in memory indefinitely.
//  - Memory is bounded: queued chunks may hold at most `ring_bytes`; past
//    that record() waits for the writer (or fails with A2PACK_E_FULL when
//    `fail_when_full`). Open chunks add one frame per recording thread.
//  - flush() seals every thread's chunk, queues a barrier and waits until the
//    writer has written and fdatasync'ed everything before it.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "a2pack.h"
#include "base/fork_stamp.hpp"
#include "logger/encoder.hpp"
#include "logger/format.hpp"
#include "logger/segment.hpp"
#include "logger/streams.hpp"

namespace a2pack::logger {

struct Options {
  uint64_t ring_bytes = 1ull << 27;
  uint64_t rotate_bytes = 256ull << 20;
  int zstd_level = 1;
  // Huffman-code zstd's literals (zstd's own choice at this level). Off by
  // default: the quantised varints are nearly incompressible bytes, and raw
  // literals decompress ~2x faster for ~16 % more bytes (docs/logger.md).
  bool compress_literals = false;
  uint32_t frame_bytes = 256u << 10;
  uint32_t flush_interval_ms = 100;  // 0: only full frames and flush() write
  bool fail_when_full = false;
  uint32_t writer_threads = 0;  // threads compressing frames (one also appends); 0 = auto
};

// Check options; throws INVALID_ARGUMENT naming the bad field.
void check_options(const Options& o);

struct Stats {
  uint64_t records = 0;     // records handed to the kernel
  uint64_t values = 0;      // their non-zeros
  uint64_t raw_bytes = 0;   // encoded bytes before compression
  uint64_t frames = 0;
  uint64_t file_bytes = 0;  // bytes appended to segments (headers included)
  uint64_t segments = 0;    // segments this logger created
  uint64_t full_events = 0; // times a record found the queue full (waited or failed)
  uint64_t queued_bytes = 0;
  uint64_t max_queued_bytes = 0;
  uint64_t flushes = 0;
};

struct Chunk;
struct Slot;

class Logger {
 public:
  // Open (creating when missing) a logger folder. Refuses a folder another
  // logger holds (lock file <dir>/.lock). Streams of earlier sessions in the
  // folder stay registered; new segments are numbered after existing ones.
  Logger(std::string dir, const Options& opts);
  ~Logger();  // close(), errors swallowed
  Logger(const Logger&) = delete;
  Logger& operator=(const Logger&) = delete;

  // Register a stream: writes streams/<id>.json durably, returns the id.
  // Thread-safe.
  uint32_t register_stream(const std::string& labels_json, double epoch_scale,
                           double value_scale, uint32_t flags);

  // Record one sparse vector. Thread-safe; see the header comment for the
  // blocking rules. On error nothing of the record is kept.
  void record(uint32_t stream_id, double epoch, const uint32_t* indices, const double* values,
              size_t n);

  // Record `n` records; record i has stream_ids[i], epochs[i] and the
  // non-zeros [offsets[i], offsets[i+1]) of indices/values. *done receives
  // how many were accepted (all of them, or those before the one that threw).
  void record_batch(size_t n, const uint32_t* stream_ids, const double* epochs,
                    const uint64_t* offsets, const uint32_t* indices, const double* values,
                    size_t* done);

  // Everything recorded before the call is on disk and durable on return.
  void flush();

  // flush, stop the writer, release the folder. Idempotent: later calls
  // return at once. Records, flushes and registrations afterwards fail with
  // A2PACK_E_CLOSED. Throws the first write error the logger met, if any.
  void close();

  Stats stats() const;
  const std::string& dir() const { return dir_; }

  // True in a child forked after the logger opened: it has the logger's
  // memory but none of its threads, and mutexes or condition variables the
  // parent's threads held stay held. Every call then fails with
  // A2PACK_E_CLOSED, and the object must be leaked, not destroyed (waiting
  // on or destroying those primitives would hang); a2pack_logger_close does.
  bool forked() const;

 private:
  Slot* my_slot();
  void record_locked(Slot* sl, uint32_t sid, double epoch, const uint32_t* idx,
                     const double* val, size_t n);
  Chunk* rollover(Slot* sl, size_t need);
  // Complete a slot's chunk before it is queued: append the values region
  // kept in the slot to the structure and write the prefix (slot locked).
  static void seal(Slot* sl, Chunk* c);
  void push_locked(Chunk* c);  // q_mu_ held
  void seal_all(bool closing);
  uint64_t queue_barrier();
  void wait_barrier(uint64_t seq);
  [[noreturn]] void throw_failure() const;
  void set_failure(a2pack_status st, const std::string& msg);
  struct Item;
  void appender_loop();
  void compressor_loop();
  // Tell the threads to stop (q_mu_ held), then wait for them (not held).
  void stop_threads_locked();
  void join_threads();
  void configure(void* cctx);  // a ZSTD_CCtx for this logger's options
  bool compress_one(std::unique_lock<std::mutex>& lk, void* cctx);
  void steal_stale(int64_t now_ns);
  void recycle_locked(Chunk* c);

  std::string dir_;
  Options opts_;
  uint64_t uid_;
  int lock_fd_ = -1;
  int segments_fd_ = -1;  // segments/, open from the constructor to close()
  uint32_t first_segment_ = 0;
  SegmentWriter::Resume resume_;  // what the first new segment says of the one before
  int pid_ = 0;             // the process that opened the logger (its threads live only there)
  ForkStamp fork_stamp_;    // see forked()

  StreamTable streams_;
  std::mutex register_mu_;
  uint32_t next_stream_ = 0;

  // Thread slots. reg_mu_ guards the vector only.
  mutable std::mutex reg_mu_;
  std::vector<std::shared_ptr<Slot>> slots_;
  std::atomic<bool> closed_{false};
  std::mutex close_mu_;

  // Queue between recorders and the writers, in order. Items before
  // `claimed_` were taken by a compressor (or are barriers passed over); the
  // appender pops the front once it is compressed. q_mu_ guards all below.
  struct Item {
    Chunk* chunk = nullptr;      // nullptr: a flush barrier
    uint64_t barrier = 0;
    uint64_t budget = 0;         // ring bytes charged until appended
    int state = 0;               // 0 queued, 1 compressing, 2 compressed
    uint32_t records = 0;        // of the compressed frame, for the statistics
    uint64_t values = 0, raw = 0;
    Column<uint8_t>* out = nullptr;  // header + zstd frame once compressed
    BlockHeader header;              // its lengths, counts and CRC (the appender numbers it)
  };
  mutable std::mutex q_mu_;
  std::condition_variable append_cv_, compress_cv_, space_cv_, done_cv_;
  std::deque<Item> queue_;
  size_t claimed_ = 0;
  std::vector<Chunk*> free_;
  std::vector<Column<uint8_t>*> free_out_;  // resized without zero-filling
  uint64_t queued_ = 0, max_queued_ = 0, full_events_ = 0;
  uint64_t barrier_seq_ = 0, durable_seq_ = 0, flushes_ = 0;
  bool stop_ = false;

  // Sticky failure of the writer (first error wins).
  std::atomic<bool> failed_{false};
  a2pack_status fail_status_ = A2PACK_OK;
  std::string fail_message_;

  // Written by the writer thread, read by stats().
  std::atomic<uint64_t> st_records_{0}, st_values_{0}, st_raw_{0}, st_frames_{0}, st_file_{0},
      st_segments_{0};

  std::thread writer_;                    // the appender
  std::vector<std::thread> compressors_;  // extra compressing threads
};

}  // namespace a2pack::logger
