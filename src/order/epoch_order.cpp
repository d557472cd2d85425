#include "order/epoch_order.hpp"

#include <algorithm>
#include <cstring>
#include <system_error>

#include "base/error.hpp"

namespace a2pack::order {

EpochOrder::EpochOrder(std::vector<int64_t> indices, bool all_rows, uint64_t rows,
                       const Options& o)
    : o_(o),
      all_rows_(all_rows),
      // The samplers of the epochs share the selection (unshuffled batches
      // are slices of it) and each has its own permutation; the template
      // keeps none (a stored one costs 4 bytes a row).
      base_(std::move(indices), all_rows, all_rows ? rows : indices.size(), o.seed,
            static_cast<size_t>(o.batch_size), o.drop_last, /*ordered=*/false, o.shuffle_kind) {
  batch_count_ = base_.batch_count();
  if (batch_count_ == 0)
    fail(A2PACK_E_INVALID_ARGUMENT,
         "feed: {} rows make no whole batch of {} (drop_last is set): an epoch would be empty",
         base_.size(), o_.batch_size);
}

EpochOrder::EpochOrder(const EpochOrder& o, dataset::Sampler base)
    : Order(o), o_(o.o_), all_rows_(o.all_rows_), epochs_limit_(o.epochs_limit_),
      base_(std::move(base)), batch_count_(o.batch_count_) {}

EpochOrder::~EpochOrder() { stop(); }

size_t EpochOrder::max_rows() const {
  const size_t len = std::min<uint64_t>(o_.batch_size, base_.size());
  return static_cast<size_t>((len + o_.world - 1) / o_.world);
}

std::shared_ptr<const dataset::Sampler> EpochOrder::make_epoch(uint64_t epoch) const {
  // A copy of the template (O(1)) shuffled for the epoch (stored: O(n)).
  auto s = std::make_shared<dataset::Sampler>(base_);
  s->set_epoch(epoch, o_.shuffle);
  return s;
}

void EpochOrder::add_epoch(std::shared_ptr<const dataset::Sampler> s) const {
  building_.erase(std::remove(building_.begin(), building_.end(), s->epoch()), building_.end());
  uint64_t newest = s->epoch();
  for (const auto& x : epochs_) newest = std::max(newest, x->epoch());
  epochs_.push_back(std::move(s));
  keep_epochs_up_to(newest);
  made_.notify_all();
}

void EpochOrder::keep_epochs_up_to(uint64_t newest) const {
  // The newest, the current one before it and the previous one. Older ones
  // live on in the fills that hold them (a thread stalled that long remakes
  // its epoch).
  epochs_.erase(std::remove_if(epochs_.begin(), epochs_.end(),
                               [newest](const auto& x) { return x->epoch() + 2 < newest; }),
                epochs_.end());
}

std::shared_ptr<const dataset::Sampler> EpochOrder::sampler_for(uint64_t epoch) const {
  std::unique_lock<std::mutex> lk(mu_);
  for (;;) {
    for (const auto& s : epochs_)
      if (s->epoch() == epoch) {
        auto found = s;  // prepare() may drop older entries
        prepare(epoch + 1);
        return found;
      }
    if (std::find(building_.begin(), building_.end(), epoch) == building_.end()) break;
    made_.wait(lk);  // being made (ahead, or by another producer)
  }
  building_.push_back(epoch);
  lk.unlock();
  std::shared_ptr<const dataset::Sampler> s;
  try {
    s = make_epoch(epoch);
  } catch (...) {
    lk.lock();
    building_.erase(std::remove(building_.begin(), building_.end(), epoch), building_.end());
    made_.notify_all();
    throw;
  }
  lk.lock();
  add_epoch(s);
  prepare(epoch + 1);
  return s;
}

void EpochOrder::prepare(uint64_t epoch) const {
  // Only a stored permutation is worth making ahead.
  if (!o_.shuffle || base_.shuffle() != dataset::Shuffle::kStored || stopped_) return;
  if (epochs_limit_ != 0 && epoch >= epochs_limit_) return;
  for (const auto& s : epochs_)
    if (s->epoch() == epoch) return;
  if (std::find(building_.begin(), building_.end(), epoch) != building_.end()) return;
  if (prep_.joinable()) {
    if (!prep_done_) return;  // one at a time
    prep_.join();             // finished: it no longer needs the lock
  }
  keep_epochs_up_to(epoch);  // before the next one is made, not after
  building_.push_back(epoch);
  prep_done_ = false;
  try {
    prep_ = std::thread([this, epoch] {
      if (helper_entry_) helper_entry_();
      std::shared_ptr<const dataset::Sampler> s;
      try {
        s = make_epoch(epoch);
      } catch (...) {
        // Made again on demand, where the error reaches the consumer.
      }
      std::lock_guard<std::mutex> lk(mu_);
      if (s) {
        add_epoch(std::move(s));
      } else {
        building_.erase(std::remove(building_.begin(), building_.end(), epoch), building_.end());
        made_.notify_all();
      }
      prep_done_ = true;
    });
  } catch (const std::system_error&) {
    // No thread to make it ahead (out of threads or memory): the producer
    // that first needs the epoch makes it (sampler_for).
    building_.erase(std::remove(building_.begin(), building_.end(), epoch), building_.end());
    prep_done_ = true;
  }
}

void EpochOrder::restart(Position p) {
  std::lock_guard<std::mutex> lk(mu_);
  stopped_ = false;
  keep_epochs_up_to(p.epoch + 1);
}

void EpochOrder::stop() {
  std::thread t;
  {
    std::lock_guard<std::mutex> lk(mu_);
    stopped_ = true;
    t = std::move(prep_);
  }
  if (t.joinable()) t.join();
  std::lock_guard<std::mutex> lk(mu_);
  prep_done_ = true;
}

size_t EpochOrder::fill(Position p, Out& o) const {
  const size_t len = base_.batch_length(static_cast<size_t>(p.batch));
  o.global_rows = len;
  int64_t* out = o.indices;
  if (o_.shuffle) {
    return sampler_for(p.epoch)->fill_part(static_cast<size_t>(p.batch), o_.rank, o_.world, out);
  }
  size_t lo, hi;
  dataset::Sampler::part_bounds(len, o_.rank, o_.world, &lo, &hi);
  const size_t rows = hi - lo;
  const uint64_t first = p.batch * o_.batch_size + lo;
  if (all_rows_) {
    for (size_t i = 0; i < rows; ++i) out[i] = static_cast<int64_t>(first + i);
  } else {
    std::memcpy(out, base_.selection().data() + first, rows * sizeof(int64_t));
  }
  return rows;
}

std::string EpochOrder::save_state(Position next) const {
  dataset::Sampler s(base_);
  s.set_epoch(next.epoch, false);  // the epoch's number; no permutation
  return s.save_state(next.batch);
}

std::unique_ptr<Order> EpochOrder::load_state(const void* data, size_t len,
                                              Position* next) const {
  // Checked before anything changes; the state's seed and kind of
  // permutation go to the template for every later epoch.
  dataset::Sampler s(base_);
  const uint64_t batch = s.load_state(data, len);
  const uint64_t epoch = s.epoch();
  auto o = std::unique_ptr<EpochOrder>(new EpochOrder(*this, std::move(s)));
  *next = {epoch, batch};
  // The loaded epoch's permutation is made here, where a failure is the
  // caller's error rather than the first batch's.
  if (o_.shuffle && o->base_.shuffle() == dataset::Shuffle::kStored) {
    std::lock_guard<std::mutex> lk(o->mu_);
    o->epochs_.assign(1, o->make_epoch(epoch));
  }
  return o;
}

}  // namespace a2pack::order
