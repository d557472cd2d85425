#include "order/priorities.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "base/error.hpp"
#include "base/file_io.hpp"
#include "base/splitmix.hpp"
#include "dataset/fsutil.hpp"

namespace a2pack::order {

namespace {

// checked_power's position for the priority new rows start with.
constexpr size_t kInitial = SIZE_MAX;

void check_parameter(const char* name, double v) {
  if (!std::isfinite(v) || v < 0)
    fail(A2PACK_E_INVALID_ARGUMENT, "priorities: {} {} must be finite and at least 0", name, v);
}

// numpy's header for a (n,) array of little-endian f32: NPY 1.0, padded
// with spaces and a newline so that the data starts on a 64-byte boundary.
std::string npy_f32_header(uint64_t n) {
  std::string dict = fmt::format("{{'descr': '<f4', 'fortran_order': False, 'shape': ({},), }}", n);
  const size_t unpadded = 10 + dict.size() + 1;
  dict.append((64 - unpadded % 64) % 64, ' ');
  dict += '\n';
  std::string h("\x93NUMPY\x01\x00", 8);
  h += static_cast<char>(dict.size() & 0xFF);
  h += static_cast<char>(dict.size() >> 8);
  return h + dict;
}

double uniform01(SplitMix64& r) { return static_cast<double>(r.next() >> 11) * 0x1.0p-53; }

// p^alpha, with the common exponents exact and cheap. A priority of 0 has
// no mass whatever alpha (0^0 included): 0 is how a row is left out.
float power(float p, double alpha) {
  if (p == 0) return 0.0f;
  if (alpha == 1.0) return p;
  if (alpha == 0.5) return std::sqrt(p);
  if (alpha == 0.0) return 1.0f;
  return std::pow(p, static_cast<float>(alpha));
}

// power() of k values: the exponent's cases taken once for them all (the
// common ones then vectorise), a value repeated from the one before not
// raised again (rows made or grown at one priority). The same results as
// power() value by value.
void powers_of(const float* p, unsigned k, double alpha, float* out) {
  if (alpha == 1.0) {
    for (unsigned x = 0; x < k; ++x) out[x] = p[x] == 0 ? 0.0f : p[x];
  } else if (alpha == 0.5) {
    for (unsigned x = 0; x < k; ++x) out[x] = p[x] == 0 ? 0.0f : std::sqrt(p[x]);
  } else if (alpha == 0.0) {
    for (unsigned x = 0; x < k; ++x) out[x] = p[x] == 0 ? 0.0f : 1.0f;
  } else {
    const auto a = static_cast<float>(alpha);
    float in = 0, was = 0;  // power(0) is 0
    for (unsigned x = 0; x < k; ++x) {
      if (p[x] != in) {
        in = p[x];
        was = in == 0 ? 0.0f : std::pow(in, a);
      }
      out[x] = was;
    }
  }
}

}  // namespace

Priorities::Priorities(uint64_t n, double alpha, double beta, float initial)
    : alpha_(alpha), beta_(beta) {
  if (n == 0) fail(A2PACK_E_INVALID_ARGUMENT, "priorities: n must be at least 1");
  check_parameter("alpha", alpha);
  check_parameter("beta", beta);
  checked_power(initial, kInitial);  // refused here; p^alpha is computed where read
  p_.assign(n, initial);
  largest_ = initial;
  rebuild(0);
}

float Priorities::largest() const {
  auto lk = read_lock();
  return largest_;
}

float Priorities::checked_power(float v, size_t position) const {
  auto name = [&] {
    return position == kInitial ? fmt::format("initial priority {}", v)
                                : fmt::format("value {} (position {})", v, position);
  };
  if (!std::isfinite(v) || v < 0)
    fail(A2PACK_E_INVALID_ARGUMENT, "priorities: {} must be finite and at least 0", name());
  const float pa = power(v, alpha_);
  // An infinite p^alpha would make every sum above it infinite.
  if (!std::isfinite(pa))
    fail(A2PACK_E_INVALID_ARGUMENT, "priorities: {} to the power alpha {} is beyond a float",
         name(), alpha_);
  return pa;
}

std::shared_lock<std::shared_mutex> Priorities::read_lock() const {
  // Updates left pending are part of the priorities already (update() has
  // returned): a reader applies them before it reads. The object is not
  // const underneath (every Priorities is made by new), only this view of it.
  if (pending_.load(std::memory_order_acquire)) {
    auto* self = const_cast<Priorities*>(this);
    auto lk = self->write_lock();
    self->take_pending();
  }
  { std::lock_guard<std::mutex> pass(gate_); }
  return std::shared_lock<std::shared_mutex>(mu_);
}

void Priorities::take_pending() {
  // The queue is taken under pending_mu_ and applied after it is let go: a
  // learner's update meanwhile waits for the swap only, not for the tree.
  {
    std::lock_guard<std::mutex> pl(pending_mu_);
    if (!pending_.load(std::memory_order_relaxed)) return;
    taken_idx_.swap(later_idx_);
    taken_p_.swap(later_p_);
    pending_.store(false, std::memory_order_release);
  }
  apply(taken_idx_.data(), taken_p_.data(), taken_idx_.size());
  taken_idx_.clear();  // (their room kept for the next swap)
  taken_p_.clear();
}

std::unique_lock<std::shared_mutex> Priorities::write_lock() {
  std::lock_guard<std::mutex> hold(gate_);
  return std::unique_lock<std::shared_mutex>(mu_);
}

uint64_t Priorities::size() const {
  auto lk = read_lock();
  return p_.size();
}

double Priorities::total() const {
  auto lk = read_lock();
  return tree_[0];
}

void Priorities::powers(uint64_t first, unsigned k, float* out) const {
  powers_of(p_.data() + first, k, alpha_, out);
}

uint64_t Priorities::bytes() const {
  auto lk = read_lock();
  return p_.capacity() * sizeof(float) + tree_.capacity() * sizeof(double) +
         (level_at_.capacity() + level_nodes_.capacity()) * sizeof(uint64_t);
}

double Priorities::rows_mass(uint64_t first, uint64_t end) const {
  const auto k = static_cast<unsigned>(end - first);
  float m[kBlock];
  powers(first, k, m);
  double s = 0;
  for (unsigned x = 0; x < k; ++x) s += m[x];
  return s;
}

double Priorities::block_sum(uint64_t block) const {
  const uint64_t first = block * kBlock;
  return rows_mass(first, std::min<uint64_t>(p_.size(), first + kBlock));
}

double Priorities::children_sum(int d, uint64_t j) const {
  const double* c = tree_.data() + level_at_[static_cast<size_t>(d) + 1] + j * kFan;
  return ((c[0] + c[1]) + (c[2] + c[3])) + ((c[4] + c[5]) + (c[6] + c[7]));
}

void Priorities::rebuild(uint64_t capacity) {
  const uint64_t blocks = (p_.size() + kBlock - 1) / kBlock;
  capacity_ = std::max<uint64_t>({capacity, blocks, 1});
  depth_ = 0;
  while (span(0) < capacity_) ++depth_;
  level_at_.assign(static_cast<size_t>(depth_) + 1, 0);
  level_nodes_.assign(static_cast<size_t>(depth_) + 1, 0);
  uint64_t at = 0;
  for (int d = 0; d <= depth_; ++d) {
    const uint64_t s = span(d);
    const uint64_t nodes = (capacity_ + s - 1) / s;
    level_at_[static_cast<size_t>(d)] = at;
    level_nodes_[static_cast<size_t>(d)] = nodes;
    at += (nodes + kFan - 1) / kFan * kFan;
  }
  tree_.assign(at, 0.0);
  refresh_blocks(0, blocks);
}

void Priorities::refresh_blocks(uint64_t first, uint64_t end) {
  if (first >= end) return;
  for (uint64_t b = first; b < end; ++b) node(depth_, b) = block_sum(b);
  // Each level's nodes above the blocks, from their children.
  uint64_t lo = first, hi = end - 1;
  for (int d = depth_ - 1; d >= 0; --d) {
    lo /= kFan;
    hi /= kFan;
    for (uint64_t j = lo; j <= hi; ++j) node(d, j) = children_sum(d, j);
  }
}

void Priorities::get(const int64_t* idx, size_t k, float* out) const {
  auto lk = read_lock();
  for (size_t i = 0; i < k; ++i) {
    if (idx[i] < 0 || static_cast<uint64_t>(idx[i]) >= p_.size())
      fail(A2PACK_E_OUT_OF_RANGE, "priorities: index {} (position {}) is outside the {} rows",
           idx[i], i, p_.size());
    out[i] = p_[static_cast<size_t>(idx[i])];
  }
}

void Priorities::update(const int64_t* idx, const float* values, size_t k) {
  // Checked under pending_mu_, which every change of the row count holds.
  std::unique_lock<std::mutex> pl(pending_mu_);
  // With alpha <= 1 every finite p >= 0 has a finite p^alpha (at most
  // max(p, 1)), so p^alpha waits for apply(); above 1 it is computed here
  // to refuse one a float cannot hold.
  const bool may_overflow = alpha_ > 1;
  bool bad = false;
  for (size_t i = 0; i < k; ++i) {
    bad |= idx[i] < 0 || static_cast<uint64_t>(idx[i]) >= p_.size();
    bad |= !(values[i] >= 0 && values[i] <= std::numeric_limits<float>::max());
  }
  if (bad || may_overflow)
    for (size_t i = 0; i < k; ++i) {
      if (idx[i] < 0 || static_cast<uint64_t>(idx[i]) >= p_.size())
        fail(A2PACK_E_OUT_OF_RANGE, "priorities: index {} (position {}) is outside the {} rows",
             idx[i], i, p_.size());
      checked_power(values[i], i);
    }
  // Left for the next reader (a producer about to draw its next batch, or
  // a get, save or total), which applies them before it reads: the learner
  // neither waits out a draw under way nor spends its own step on the tree
  // (the rows, blocks and ancestors of 4 096 rows far apart: most of an
  // update's time); the batch being drawn keeps the priorities it began
  // with, every later one sees these. Past kMaxPending rows waiting (no
  // reader comes), this update applies them itself.
  later_idx_.insert(later_idx_.end(), idx, idx + k);
  later_p_.insert(later_p_.end(), values, values + k);
  pending_.store(true, std::memory_order_release);
  if (later_idx_.size() < kMaxPending) return;
  pl.unlock();
  auto lk = write_lock();  // mu_ before pending_mu_, as every reader takes them
  take_pending();
}

void Priorities::apply(const int64_t* idx, const float* values, size_t k) {
  // Rows, blocks and nodes far apart in a large tree each miss the cache:
  // the ones kAhead positions on are asked for while these are written.
  constexpr size_t kAhead = 16;
  for (size_t i = 0; i < k; ++i) {
    if (i + kAhead < k) __builtin_prefetch(p_.data() + idx[i + kAhead], 1);
    const auto r = static_cast<size_t>(idx[i]);
    p_[r] = values[i];
    largest_ = std::max(largest_, values[i]);
  }
  // Each touched block once (sorted), however many of its rows changed.
  thread_local std::vector<uint64_t> blocks;
  blocks.resize(k);
  for (size_t i = 0; i < k; ++i) blocks[i] = static_cast<uint64_t>(idx[i]) / kBlock;
  // A learner usually gives back the rows of a batch just drawn, which
  // ascend already.
  if (!std::is_sorted(blocks.begin(), blocks.end())) std::sort(blocks.begin(), blocks.end());
  blocks.erase(std::unique(blocks.begin(), blocks.end()), blocks.end());
  // The blocks' sums, then each level's touched nodes once (the upper
  // levels are shared by many blocks).
  for (size_t j = 0; j < blocks.size(); ++j) {
    if (j + kAhead < blocks.size()) __builtin_prefetch(&node(depth_, blocks[j + kAhead]), 1);
    node(depth_, blocks[j]) = block_sum(blocks[j]);
  }
  for (int d = depth_ - 1; d >= 0; --d) {
    size_t m = 0;
    for (uint64_t b : blocks) {
      const uint64_t up = b / kFan;
      if (m == 0 || blocks[m - 1] != up) blocks[m++] = up;
    }
    blocks.resize(m);
    const double* below = tree_.data() + level_at_[static_cast<size_t>(d) + 1];
    for (size_t j = 0; j < m; ++j) {
      if (j + kAhead < m) __builtin_prefetch(below + blocks[j + kAhead] * kFan);
      node(d, blocks[j]) = children_sum(d, blocks[j]);
    }
  }
}

void Priorities::grow(uint64_t new_n, float initial) {
  checked_power(initial, kInitial);  // refused here; p^alpha is computed where read
  auto lk = write_lock();
  take_pending();
  std::lock_guard<std::mutex> pl(pending_mu_);  // updates check their rows under it
  const uint64_t old = p_.size();
  if (new_n <= old) return;
  // Room for a quarter more rows at a time rather than the vector's double:
  // a live dataset's appends still move each row a bounded number of times
  // (four on average), and the room unused is a byte a row, not four.
  if (new_n > p_.capacity()) p_.reserve(std::max<uint64_t>(new_n, p_.capacity() + p_.capacity() / 4));
  p_.resize(new_n, initial);
  largest_ = std::max(largest_, initial);
  const uint64_t blocks = (new_n + kBlock - 1) / kBlock;
  if (blocks > capacity_)
    // The tree takes a quarter more blocks (or all the new ones), built
    // again: amortised over the rows that filled it, as the values' room is.
    rebuild(capacity_ + capacity_ / 4);
  else
    refresh_blocks(old / kBlock, blocks);
}

void Priorities::pieces(uint64_t lo, uint64_t hi, std::vector<Piece>& out) const {
  out.clear();
  auto rows = [&](uint64_t first, uint64_t end) {  // at most a block's
    out.push_back({-1, 0, first, end, rows_mass(first, end)});
  };
  const uint64_t first_block = (lo + kBlock - 1) / kBlock, end_block = hi / kBlock;
  if (first_block > end_block) {  // inside one block
    rows(lo, hi);
    return;
  }
  if (lo < first_block * kBlock) rows(lo, first_block * kBlock);
  if (first_block < end_block) cover(0, 0, first_block, end_block, out);
  if (end_block * kBlock < hi) rows(end_block * kBlock, hi);
}

void Priorities::cover(int level, uint64_t index, uint64_t first, uint64_t end,
                       std::vector<Piece>& out) const {
  const uint64_t width = span(level), node_first = index * width;
  if (node_first >= end || node_first + width <= first) return;
  if (first <= node_first && node_first + width <= end) {
    out.push_back({level, index, node_first * kBlock, (node_first + width) * kBlock,
                   node(level, index)});
    return;
  }
  for (uint64_t c = 0; c < kFan; ++c) cover(level + 1, index * kFan + c, first, end, out);
}

void Priorities::descend(int level, uint64_t index, double before, const double* t, size_t k,
                         int64_t* out, float* mass) const {
  // Level by level rather than target by target: every target steps down
  // one level before any steps down the next, so the loads of a level are
  // independent of each other and overlap in memory (a depth-first walk
  // waits on each miss in turn, and below the cached top of a 10^8-row tree
  // nearly every node is one), and the children target i + kAhead reads
  // next are prefetched while target i steps. Each target takes the child
  // whose mass range holds it, never one without mass.
  //
  // The top of the subtree is not walked at all: the targets ascend, so one
  // pass along the nodes `skip` levels down (no more than two per target,
  // side by side in memory) puts each target on its node there, with the
  // mass before it.
  constexpr size_t kAhead = 16;
  thread_local std::vector<uint64_t> at;
  thread_local std::vector<double> base;
  at.resize(k);
  base.resize(k);
  int skip = 0;
  while (level + skip < depth_ && (uint64_t{1} << (3 * (skip + 1))) <= 2 * k) ++skip;
  {
    const int d = level + skip;
    const uint64_t first = index << (3 * skip);
    const uint64_t count =
        std::min(uint64_t{1} << (3 * skip), level_nodes_[static_cast<size_t>(d)] - first);
    const double* m = &node(d, first);
    uint64_t last = count - 1;  // the last node with mass (the subtree has some)
    while (last > 0 && !(m[last] > 0)) --last;
    uint64_t j = 0;
    double acc = before;
    for (size_t i = 0; i < k; ++i) {
      while (j < last && (!(m[j] > 0) || !(t[i] < acc + m[j]))) acc += m[j++];
      at[i] = first + j;
      base[i] = acc;
    }
  }
  for (int d = level + skip; d < depth_; ++d) {
    const double* below = tree_.data() + level_at_[static_cast<size_t>(d) + 1];
    for (size_t i = 0; i < k; ++i) {
      if (i + kAhead < k) __builtin_prefetch(below + at[i + kAhead] * kFan);
      const double* c = below + at[i] * kFan;
      // The ends of the children's mass ranges; the target's child is the
      // first whose end lies above it (counted without a branch).
      double end[kFan];
      double acc = base[i];
      unsigned q = 0;
      for (unsigned x = 0; x < kFan; ++x) {
        acc += c[x];
        end[x] = acc;
        q += !(t[i] < acc) ? 1u : 0u;
      }
      if (q == kFan || !(c[q] > 0)) {
        // Rounding put the target past the last child with mass, or before
        // the first: the nearest child with mass.
        if (q == kFan) {
          q = kFan - 1;
          while (q > 0 && !(c[q] > 0)) --q;
        } else {
          while (q + 1 < kFan && !(c[q] > 0)) ++q;
        }
      }
      base[i] = q ? end[q - 1] : base[i];
      at[i] = at[i] * kFan + q;
    }
  }
  // Then the rows of each target's block, their cache lines asked for
  // ahead in the same way.
  const uint64_t rows = p_.size();
  for (size_t i = 0; i < k; ++i) {
    if (i + kAhead < k) __builtin_prefetch(p_.data() + at[i + kAhead] * kBlock);
    const uint64_t first = at[i] * kBlock;
    out[i] = static_cast<int64_t>(
        find_in_rows(first, std::min<uint64_t>(rows, first + kBlock), t[i] - base[i], mass + i));
  }
}

uint64_t Priorities::find_in_rows(uint64_t first, uint64_t end, double target,
                                  float* mass) const {
  // At most a block's rows, each one's p^alpha computed as the scan reaches
  // it: the first row whose mass range ends above the target. (Stopping
  // there mispredicts once a draw, and spares the rows after it their
  // powers, half a block's on average: the larger cost.) A row without mass
  // is never the answer: rounding can put the target before the first row
  // with mass (the next with some is taken) or past the last (the last).
  double acc = 0;
  uint64_t last = end;
  float last_mass = 0;
  for (uint64_t row = first; row < end; ++row) {
    const float m = power(p_[row], alpha_);
    acc += m;
    if (!(m > 0)) continue;
    if (target < acc) {
      *mass = m;
      return row;
    }
    last = row;
    last_mass = m;
  }
  if (last == end)
    fail(A2PACK_E_INTERNAL, "priorities: rows [{}, {}) have no mass where their sum had some",
         first, end);
  *mass = last_mass;
  return last;
}

float* Priorities::masses_to(float* weights, size_t k) {
  // The drawn rows' p^alpha go where their weights will, or, where none are
  // asked for, to a buffer of the thread's.
  if (weights) return weights;
  thread_local std::vector<float> scratch;
  scratch.resize(k);
  return scratch.data();
}

void Priorities::sample(uint64_t lo, uint64_t hi, size_t k, uint64_t seed, uint64_t stream,
                        int64_t* out, float* weights) const {
  float* mass = masses_to(weights, k);
  auto lk = read_lock();
  draw(lo, hi, k, seed, stream, out, mass);
  if (weights) weigh(weights, k);
}

size_t Priorities::sample_where(uint64_t lo, uint64_t hi, size_t k, uint64_t seed,
                                uint64_t stream, const std::function<bool(uint64_t)>& accept,
                                int max_rounds, int64_t* out, float* weights) const {
  // A producer's, reused batch after batch.
  thread_local std::vector<size_t> redo;
  thread_local std::vector<int64_t> again;
  thread_local std::vector<float> again_mass;
  float* mass = masses_to(weights, k);
  auto lk = read_lock();  // every round sees the same priorities
  draw(lo, hi, k, seed, stream, out, mass);
  redo.clear();
  for (size_t i = 0; i < k; ++i)
    if (!accept(static_cast<uint64_t>(out[i]))) redo.push_back(i);
  for (int round = 1; round <= max_rounds && !redo.empty(); ++round) {
    again.resize(redo.size());
    again_mass.resize(redo.size());
    draw(lo, hi, redo.size(), seed, stream ^ (uint64_t{static_cast<unsigned>(round)} << 56),
         again.data(), again_mass.data());
    size_t m = 0;
    for (size_t j = 0; j < redo.size(); ++j) {
      out[redo[j]] = again[j];
      mass[redo[j]] = again_mass[j];
      if (!accept(static_cast<uint64_t>(again[j]))) redo[m++] = redo[j];
    }
    redo.resize(m);
  }
  if (redo.empty() && weights) weigh(weights, k);
  return redo.size();
}

void Priorities::draw(uint64_t lo, uint64_t hi, size_t k, uint64_t seed, uint64_t stream,
                      int64_t* out, float* mass_out) const {
  if (hi > p_.size() || lo >= hi)
    fail(A2PACK_E_OUT_OF_RANGE, "priorities: rows [{}, {}) of {}", lo, hi, p_.size());
  thread_local std::vector<Piece> parts;
  pieces(lo, hi, parts);
  double mass = 0;
  size_t last = 0;
  for (size_t j = 0; j < parts.size(); ++j) {
    mass += parts[j].mass;
    if (parts[j].mass > 0) last = j;
  }
  if (!(mass > 0))
    fail(A2PACK_E_INVALID_ARGUMENT,
         "priorities: every priority of rows [{}, {}) is 0: there is nothing to draw", lo, hi);
  SplitMix64 r{seed ^ 0x7A3F8C5D1E2B4096ull};
  SplitMix64 s{r.next() ^ stream * 0x9E3779B97F4A7C15ull};
  const double part = mass / static_cast<double>(k);
  thread_local std::vector<double> targets;
  targets.resize(k);
  for (size_t i = 0; i < k; ++i)
    targets[i] = std::min(part * (static_cast<double>(i) + uniform01(s)), mass);
  // Stratified targets ascend: each piece of the range takes those below
  // its end (the last piece with mass the rest), and one walk down its
  // subtree serves them all.
  const double* t = targets.data();
  double before = 0;
  size_t a = 0;
  for (size_t j = 0; j < parts.size() && a < k; ++j) {
    const Piece& piece = parts[j];
    const double end = before + piece.mass;
    const size_t b =
        j == last ? k : static_cast<size_t>(std::lower_bound(t + a, t + k, end) - t);
    if (a < b && piece.mass > 0) {
      if (piece.level >= 0)
        descend(piece.level, piece.index, before, t + a, b - a, out + a, mass_out + a);
      else
        for (size_t i = a; i < b; ++i)
          out[i] = static_cast<int64_t>(
              find_in_rows(piece.first, piece.end, t[i] - before, mass_out + i));
    }
    a = b;
    before = end;
  }
}

void Priorities::weigh(float* mass, size_t k) const {
  // w = (N * P)^-beta / max w, where the largest weight is the smallest P's:
  // (P / P_min)^-beta, which no beta makes overflow (the ratio is >= 1).
  // In float (powf is a third of pow's time): the ratio and the weight are floats anyway.
  float least = INFINITY;
  for (size_t i = 0; i < k; ++i) least = std::min(least, mass[i]);
  const auto exponent = static_cast<float>(-beta_);
  for (size_t i = 0; i < k; ++i) mass[i] = std::pow(mass[i] / least, exponent);
}

void Priorities::save(const std::string& path) const {
  auto lk = read_lock();
  dataset::TempFile f(path);
  const std::string h = npy_f32_header(p_.size());
  f.write(h.data(), h.size());
  f.write(p_.data(), p_.size() * sizeof(float));  // one write: the disk's speed
  f.sync();
  f.install();
}

std::unique_ptr<Priorities> Priorities::load(const std::string& path, double alpha, double beta,
                                             uint64_t expected_n) {
  check_parameter("alpha", alpha);
  check_parameter("beta", beta);
  auto bad = [&](const std::string& what) {
    return Error(A2PACK_E_CORRUPT, fmt::format("{}: not a priorities file: {}", path, what));
  };
  ReadFd f(path);
  const uint64_t size = f.size();
  unsigned char head[12] = {};
  f.pread_exact(head, static_cast<size_t>(std::min<uint64_t>(size, sizeof head)), 0);
  if (size < 6 || std::memcmp(head, "\x93NUMPY", 6) != 0) throw bad("no NPY magic");
  if (size < 10) throw bad("truncated header");
  const int major = head[6];
  uint64_t header_len, dict_at;
  if (major == 1) {
    header_len = head[8] | head[9] << 8;
    dict_at = 10;
  } else if (major == 2 || major == 3) {
    if (size < 12) throw bad("truncated header");
    header_len = 0;
    for (int i = 0; i < 4; ++i) header_len |= uint64_t{head[8 + i]} << (8 * i);
    dict_at = 12;
  } else {
    throw bad(fmt::format("NPY version {}", major));
  }
  if (dict_at + header_len > size) throw bad("truncated header");
  std::string dict(static_cast<size_t>(header_len), '\0');
  f.pread_exact(dict.data(), dict.size(), dict_at);
  auto has = [&](const char* s) { return dict.find(s) != std::string::npos; };
  if (!has("'descr': '<f4'")) throw bad("its dtype is not '<f4' (little-endian float32)");
  if (!has("'fortran_order': False")) throw bad("Fortran order");
  const size_t sh = dict.find("'shape': (");
  if (sh == std::string::npos) throw bad("no shape");
  char* end = nullptr;
  const unsigned long long n = std::strtoull(dict.c_str() + sh + 10, &end, 10);
  if (!end || std::strncmp(end, ",)", 2) != 0) throw bad("its shape is not (n,)");
  const uint64_t data = dict_at + header_len, stored = size - data;
  // Compared by division: a claimed length whose bytes wrap around 64 bits
  // must not pass.
  if (stored % sizeof(float) != 0 || stored / sizeof(float) != n)
    throw bad(fmt::format("{} bytes of data for {} priorities (4 each)", stored, n));
  if (n == 0) throw bad("no priorities (shape (0,))");
  if (expected_n && n != expected_n)
    fail(A2PACK_E_INVALID_ARGUMENT,
         "{}: {} priorities, for {} rows: a priorities file of another dataset (or of this one "
         "at another size)",
         path, n, expected_n);
  std::unique_ptr<Priorities> p(new Priorities(alpha, beta));
  p->p_.resize(n);
  f.pread_exact(p->p_.data(), n * sizeof(float), data);  // one read: the disk's speed
  for (uint64_t i = 0; i < n; ++i) {
    const float v = p->p_[i];
    if (!std::isfinite(v) || v < 0)
      fail(A2PACK_E_CORRUPT, "{}: priority {} of row {} is not finite and at least 0", path, v, i);
    p->largest_ = std::max(p->largest_, v);
    // (Only where alpha > 1 can a finite priority's power be beyond a float.)
    if (alpha > 1 && !std::isfinite(power(v, alpha)))
      fail(A2PACK_E_INVALID_ARGUMENT, "{}: priority {} of row {} to the power alpha {} is beyond a float",
           path, v, i, alpha);
  }
  p->rebuild(0);
  return p;
}

}  // namespace a2pack::order
