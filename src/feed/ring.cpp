#include "feed/ring.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>

#include "base/error.hpp"
#include "feed/cuda_host.hpp"

namespace a2pack::feed {

namespace {
// Columns start on cache lines (and, the first, on a page): vector loads and
// DMA engines like them so, and no two columns share a line.
constexpr size_t kColumnAlign = 64;
constexpr size_t kPage = 4096;
size_t round_up(size_t v, size_t a) { return (v + a - 1) / a * a; }
}  // namespace

Ring::Ring(size_t slots, const std::vector<size_t>& column_bytes, Pin pin)
    : column_bytes_(column_bytes), offsets_(column_bytes.size(), 0) {
  size_t at = 0;
  for (size_t c = 0; c < column_bytes.size(); ++c) {
    offsets_[c] = at;
    at += round_up(column_bytes[c], kColumnAlign);
  }
  slot_bytes_ = round_up(at ? at : 1, kPage);
  map_bytes_ = slot_bytes_ * slots;
  // One mapping for the whole ring: page-aligned, zeroed, faulted in now
  // (MAP_POPULATE) rather than during the first batches, and a single
  // cudaHostRegister call pins it all.
  void* p = ::mmap(nullptr, map_bytes_, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  if (p == MAP_FAILED)
    fail(A2PACK_E_NO_MEMORY, "feed: cannot map a ring of {} slots of {} bytes: errno {}", slots,
         slot_bytes_, errno);
  map_ = static_cast<uint8_t*>(p);
  if (pin != Pin::kOff) {
    std::string why;
    const CudaHost* cuda = CudaHost::find(pin == Pin::kOn, &why);
    if (cuda && cuda->register_memory(map_, map_bytes_, &why)) {
      cuda_ = cuda;
      pinned_ = true;
    } else {
      pin_note_ = why;
      if (pin == Pin::kOn) {
        ::munmap(map_, map_bytes_);
        fail(A2PACK_E_UNSUPPORTED, "feed: the ring cannot be page-locked: {}", why);
      }
    }
  }
  slots_.reserve(slots);
  free_list.reserve(slots);
  for (size_t i = 0; i < slots; ++i) {
    auto s = std::make_unique<Slot>();
    s->ring = this;
    s->base = map_ + i * slot_bytes_;
    free_list.push_back(s.get());
    slots_.push_back(std::move(s));
  }
  // Slots are taken from the back: hand out slot 0 first.
  std::reverse(free_list.begin(), free_list.end());
}

Ring::~Ring() {
  // A forked child's copy of a pinned mapping is not registered in the
  // child's CUDA runtime; only the owner unregisters.
  if (cuda_ && !stamp.forked()) cuda_->unregister_memory(map_);
  ::munmap(map_, map_bytes_);
}

void Ring::release(Slot* s) {
  if (s->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  Ring* r = s->ring;
  if (r->stamp.forked()) return;
  // Taken out first and dropped last, after the lock is released: this may
  // be the ring's last owner, and the lock lives in the ring.
  std::shared_ptr<Ring> keep = std::move(s->keep);
  bool wake;
  {
    std::lock_guard<std::mutex> lk(r->mu);
    r->free_list.push_back(s);
    --r->held;
    wake = r->urgent();
  }
  // Otherwise a producer finds the slot at its next look (feed/pace.hpp).
  // One slot is room for one batch: one producer.
  if (wake) r->freed.notify_one();
}

}  // namespace a2pack::feed
