#include "base/direct_ring.hpp"

#include <cerrno>
#include <system_error>

#include "base/batch_read.hpp"

#ifdef A2PACK_HAVE_URING
#include <liburing.h>
#endif

namespace a2pack {

#ifdef A2PACK_HAVE_URING

struct DirectRing::Impl {
  io_uring ring{};
  bool ready = false;
  ~Impl() {
    if (ready) io_uring_queue_exit(&ring);
  }
};

std::unique_ptr<DirectRing> DirectRing::open(unsigned depth) {
  if (io_uring_disabled_by_env()) return nullptr;
  auto impl = std::make_unique<Impl>();
  if (io_uring_queue_init(depth, &impl->ring, 0) < 0) return nullptr;
  impl->ready = true;
  return std::unique_ptr<DirectRing>(new DirectRing(std::move(impl)));
}

bool DirectRing::write(int fd, const void* data, size_t len, uint64_t offset, uint64_t tag) {
  io_uring_sqe* sqe = io_uring_get_sqe(&impl_->ring);
  if (!sqe) return false;
  io_uring_prep_write(sqe, fd, data, static_cast<unsigned>(len), offset);
  io_uring_sqe_set_data64(sqe, tag);
  int rc;
  do rc = io_uring_submit(&impl_->ring);
  while (rc == -EINTR);
  return rc >= 1;
}

DirectRing::Done DirectRing::wait() {
  io_uring_cqe* cqe = nullptr;
  int rc;
  do rc = io_uring_wait_cqe(&impl_->ring, &cqe);
  while (rc == -EINTR || rc == -EAGAIN);
  if (rc < 0) throw std::system_error(-rc, std::generic_category(), "io_uring_wait_cqe");
  Done d{io_uring_cqe_get_data64(cqe), cqe->res};
  io_uring_cqe_seen(&impl_->ring, cqe);
  return d;
}

#else  // built without liburing

struct DirectRing::Impl {};
std::unique_ptr<DirectRing> DirectRing::open(unsigned) { return nullptr; }
bool DirectRing::write(int, const void*, size_t, uint64_t, uint64_t) { return false; }
DirectRing::Done DirectRing::wait() { return {0, -ENOSYS}; }

#endif

DirectRing::DirectRing(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
DirectRing::~DirectRing() = default;

}  // namespace a2pack
