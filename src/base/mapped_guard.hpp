// Reads of the library's own read-only file mappings that fail with an
// error, instead of ending the process with SIGBUS, when the file shrinks
// under them (another process truncates it, or rewrites it in place) or a
// page of it cannot be read (an I/O error).
//
// How it works: MappedFile registers every mapping it makes (address range
// and file). A process-wide SIGBUS handler, installed with the first
// mapping, looks at each fault: one at a registered address, taken by a
// thread inside guarded_read(), jumps back to that guard (siglongjmp), which
// throws Error naming the file, the offset and the file's size now. Every
// other SIGBUS goes on to the handler that was installed before a2pack's
// (Python's faulthandler, a JVM's, torch's DataLoader worker handler), or
// gets the default action, which ends the process as it would have without
// a2pack. A handler that another library installs over a2pack's later is
// chained to in turn when the next file is mapped. Until then it sees the
// fault first: a SIGBUS the process raises on a thread inside a guard is
// taken for such a handler handing the fault on (Python's faulthandler
// restores a2pack's handler and raises the signal again), and let through,
// so that the access runs again and faults into a2pack's handler.
//
// What a guarded read may do: read mappings and write memory that its caller
// owns - memcpy, CRC32C, zstd decoding, a loop over rows with plain local
// variables - and throw. It must not, while it reads a mapping, have an
// object with a destructor alive in a frame between the guard and the read
// (the jump back skips destructors), hold a lock, or be inside an allocation
// or a call that waits for another thread: keep it a plain loop, and do
// anything else on the copy it makes. Never put a parallel_for inside a
// guard; guard each body instead. A guard costs a sigsetjmp that saves no
// signal mask and three thread-specific loads and stores (tens of
// nanoseconds): one per batch, not one per row.
//
// Not covered: memory handed to users as a view of a mapping (the numpy
// array of Dataset.steps, zero-copy pack slices) is read by code a2pack does
// not run, so a fault there still ends the process, as for any mapped file.
// Bytes a file holds past its new end within the same page read as zeros
// (the kernel's rule for mappings), and bytes rewritten in place read as
// they are now: what a guard promises is an error instead of a crash.
#pragma once

#include <setjmp.h>

#include <atomic>
#include <cstddef>
#include <string>

namespace a2pack {

// The registry of mappings (MappedFile's). `fd` is the descriptor the
// mapping was made from (its identity tells a file cut short from one
// replaced under its name, when a fault is described).
void register_mapping(const void* base, size_t len, const std::string& path, int fd);
void unregister_mapping(const void* base);

// Error for a fault at `addr` in a registered mapping: CORRUPT naming the
// file, the offset and the file's size now when it shrank past the offset,
// IO when it did not (an I/O error reading the page).
[[noreturn]] void fail_mapped_read(const void* addr);

namespace mapped_guard_detail {
struct Frame {
  sigjmp_buf env;
  Frame* volatile prev = nullptr;
  const void* volatile fault = nullptr;
};
Frame* current() noexcept;
void set_current(Frame* f) noexcept;
}  // namespace mapped_guard_detail

// Runs read(); returns the address of a fault in a registered mapping that
// ended it early (nullptr when it ran to the end). Exceptions of read()
// pass through.
template <typename F>
[[gnu::noinline]] const void* guarded_fault(F&& read) {
  namespace d = mapped_guard_detail;
  d::Frame frame;
  frame.prev = d::current();
  if (sigsetjmp(frame.env, 0) != 0) {
    d::set_current(frame.prev);
    return frame.fault;
  }
  d::set_current(&frame);
  try {
    read();
  } catch (...) {
    d::set_current(frame.prev);
    throw;
  }
  d::set_current(frame.prev);
  return nullptr;
}

// Runs read(); a fault in one of the library's mappings throws the Error of
// fail_mapped_read instead of ending the process.
template <typename F>
void guarded_read(F&& read) {
  if (const void* at = guarded_fault(read)) fail_mapped_read(at);
}

// The first fault of the threads of one job, for bodies that must not throw
// (a gather's helper threads): each records what guarded_fault returned,
// the caller raises it once the job is over.
class MapFault {
 public:
  // Returns whether the read ran to the end (no fault).
  bool record(const void* addr) noexcept {
    if (!addr) return true;
    const void* none = nullptr;
    addr_.compare_exchange_strong(none, addr);
    return false;
  }
  void raise_if_any() const {
    if (const void* a = addr_.load()) fail_mapped_read(a);
  }

 private:
  std::atomic<const void*> addr_{nullptr};
};

// memcpy out of a mapping under a guard (one guard for the whole copy).
void guarded_copy(void* dst, const void* src, size_t n);

}  // namespace a2pack
