// Which way a whole buffer of a background writer goes to the file: through
// the page cache (a buffered pwrite) or around it (O_DIRECT), chosen from
// what each way measured on this file.
//
// Why measure: neither way is faster everywhere. Where the kernel keeps
// dirty pages at memory speed, a buffered write returns at 3-4 GB/s and
// O_DIRECT waits for the disk (1.1-1.5 GB/s on this project's VMs). But on
// a virtual machine whose host takes back the guest's free memory
// (virtio-balloon free page reporting), each page the page cache takes
// first faults on the host: the same buffered writes then ran at 0.6-0.9
// GB/s, 78 % of their time in the kernel's copy, minutes apart on one
// machine with nothing else running, while O_DIRECT from the writer's own,
// already-backed buffers kept the disk's speed. Past the dirty limits the
// kernel throttles buffered writes to its writeback rate, which the
// measurement sees too.
//
// The chooser starts buffered, tries O_DIRECT early and then every
// kProbeEvery buffers tries the way it is not using, so a change of state
// (the page cache filling, memory coming back) is seen within a few MiB.
// Timings are per buffer (all buffers are the same size).
// Not thread-safe: the writer's thread owns it.
#pragma once

#include <cstdint>

namespace a2pack {

class WritePathChooser {
 public:
  static constexpr uint64_t kBufferedFirst = 2;  // buffered samples before the first probe
  static constexpr uint64_t kProbeEvery = 64;    // buffers from one probe to the next
  static constexpr uint64_t kProbeLength = 2;    // buffers a probe sends the other way

  // `direct_from`: at and past this offset every buffer goes direct (the
  // page cache room a non-durable writer allows itself is used up).
  explicit WritePathChooser(uint64_t direct_from) : direct_from_(direct_from) {}
  uint64_t direct_from() const { return direct_from_; }

  // Whether the buffer at `offset` goes with O_DIRECT.
  bool direct_for(uint64_t offset) {
    probe_ = false;
    if (offset >= direct_from_) return true;
    const uint64_t k = chosen_++;
    if (k < kBufferedFirst) return false;
    const bool direct_faster = direct_.seen && direct_.ns < buffered_.ns;
    // A probe of the way not in use keeps its figure current; the first
    // one measures O_DIRECT at all.
    const uint64_t phase = (k - kBufferedFirst) % kProbeEvery;
    if (phase == 0) probe_direct_ = !direct_faster;  // the whole probe goes one way
    probe_ = phase < kProbeLength;
    return probe_ ? probe_direct_ : direct_faster;
  }

  // How long the whole buffer just chosen took. A probe's figure is the
  // fastest of its buffers (noise only ever adds time) and replaces the
  // old one, kProbeEvery buffers stale; the way in use takes the median of
  // its last three buffers, so one slow write does not move the writer.
  void took(bool direct, double ns) {
    Figure& f = direct ? direct_ : buffered_;
    if (!probe_) f.add(ns);
    else if (probing_ != &f) f.restart(ns);  // the probe's first buffer
    else f.restart(ns < f.ns ? ns : f.ns);
    probing_ = probe_ ? &f : nullptr;
  }

 private:
  struct Figure {
    double ns = 0;  // per buffer
    bool seen = false;
    double last[3] = {0, 0, 0};  // the recent buffers, ns when fewer
    unsigned next = 0;
    void restart(double v) {
      last[0] = last[1] = last[2] = ns = v;
      seen = true;
    }
    void add(double v) {
      if (!seen) return restart(v);
      last[next++ % 3] = v;
      const double a = last[0], b = last[1], c = last[2];
      ns = a < b ? (b < c ? b : (a < c ? c : a)) : (a < c ? a : (b < c ? c : b));
    }
  };
  uint64_t direct_from_;
  uint64_t chosen_ = 0;  // buffers before direct_from_ decided so far
  bool probe_ = false;   // the buffer just chosen is a probe's
  bool probe_direct_ = false;  // the way the current or last probe goes
  const Figure* probing_ = nullptr;  // the figure the probe in progress sets
  Figure buffered_, direct_;
};

}  // namespace a2pack
