// Brief polling before a thread blocks. Waking a sleeping thread goes through
// the kernel (futex + an inter-processor interrupt: 10-20 us on a VM, as long
// as a whole 4 096-row dataset gather), while batch callers come back within
// microseconds; a thread that finished its work therefore polls for a short
// window first. Past the window it costs nothing.
#pragma once

#include <chrono>

namespace a2pack {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// Polls `ready` for up to `window`; true as soon as it holds, false when the
// window passed without it (the caller then blocks).
template <class Pred>
bool spin_until(Pred ready, std::chrono::microseconds window) {
  auto deadline = std::chrono::steady_clock::now() + window;
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      if (ready()) return true;
      cpu_relax();
    }
    if (std::chrono::steady_clock::now() >= deadline) return ready();
  }
}

}  // namespace a2pack
