#include "order/priorities.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <mutex>

#include "base/error.hpp"
#include "base/file_io.hpp"
#include "base/splitmix.hpp"
#include "dataset/fsutil.hpp"

namespace a2pack::order {

namespace {

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

// p^alpha, with the common exponents exact and cheap.
float power(float p, double alpha) {
  if (alpha == 1.0) return p;
  if (alpha == 0.5) return std::sqrt(p);
  if (alpha == 0.0) return 1.0f;
  return std::pow(p, static_cast<float>(alpha));
}

}  // namespace

Priorities::Priorities(uint64_t n, double alpha, double beta, float initial)
    : alpha_(alpha), beta_(beta) {
  if (n == 0) fail(A2PACK_E_INVALID_ARGUMENT, "priorities: n must be at least 1");
  check_parameter("alpha", alpha);
  check_parameter("beta", beta);
  check_value(initial, 0);
  p_.assign(n, initial);
  pa_.assign(n, power(initial, alpha_));
  rebuild();
}

void Priorities::check_value(float v, size_t position) const {
  if (!std::isfinite(v) || v < 0)
    fail(A2PACK_E_INVALID_ARGUMENT,
         "priorities: value {} (position {}) must be finite and at least 0", v, position);
}

uint64_t Priorities::size() const {
  std::shared_lock<std::shared_mutex> lk(mu_);
  return p_.size();
}

double Priorities::total() const {
  std::shared_lock<std::shared_mutex> lk(mu_);
  return tree_[1];
}

void Priorities::rebuild() {
  const uint64_t blocks = (p_.size() + kBlock - 1) / kBlock;
  leaves_ = 1;
  while (leaves_ < blocks) leaves_ *= 2;
  tree_.assign(2 * leaves_, 0.0);
  for (uint64_t b = 0; b < blocks; ++b) {
    double s = 0;
    for (uint64_t i = b * kBlock; i < std::min<uint64_t>(p_.size(), (b + 1) * kBlock); ++i) s += pa_[i];
    tree_[leaves_ + b] = s;
  }
  for (uint64_t i = leaves_ - 1; i >= 1; --i) tree_[i] = tree_[2 * i] + tree_[2 * i + 1];
}

void Priorities::get(const int64_t* idx, size_t k, float* out) const {
  std::shared_lock<std::shared_mutex> lk(mu_);
  for (size_t i = 0; i < k; ++i) {
    if (idx[i] < 0 || static_cast<uint64_t>(idx[i]) >= p_.size())
      fail(A2PACK_E_OUT_OF_RANGE, "priorities: index {} (position {}) is outside the {} rows",
           idx[i], i, p_.size());
    out[i] = p_[static_cast<size_t>(idx[i])];
  }
}

void Priorities::update(const int64_t* idx, const float* values, size_t k) {
  std::unique_lock<std::shared_mutex> lk(mu_);
  for (size_t i = 0; i < k; ++i) {
    if (idx[i] < 0 || static_cast<uint64_t>(idx[i]) >= p_.size())
      fail(A2PACK_E_OUT_OF_RANGE, "priorities: index {} (position {}) is outside the {} rows",
           idx[i], i, p_.size());
    check_value(values[i], i);
  }
  for (size_t i = 0; i < k; ++i) {
    const auto r = static_cast<size_t>(idx[i]);
    p_[r] = values[i];
    pa_[r] = power(values[i], alpha_);
  }
  // Each touched block once (sorted), however many of its rows changed.
  thread_local std::vector<uint64_t> blocks;
  blocks.resize(k);
  for (size_t i = 0; i < k; ++i) blocks[i] = static_cast<uint64_t>(idx[i]) / kBlock;
  std::sort(blocks.begin(), blocks.end());
  blocks.erase(std::unique(blocks.begin(), blocks.end()), blocks.end());
  // The blocks' sums, then each level's touched nodes once (the upper
  // levels are shared by many blocks).
  for (uint64_t& b : blocks) {
    double sum = 0;
    for (uint64_t i = b * kBlock; i < std::min<uint64_t>(p_.size(), (b + 1) * kBlock); ++i)
      sum += pa_[i];
    b += leaves_;
    tree_[b] = sum;
  }
  while (!blocks.empty() && blocks.front() > 1) {
    size_t m = 0;
    for (uint64_t node : blocks) {
      const uint64_t up = node / 2;
      if (m == 0 || blocks[m - 1] != up) blocks[m++] = up;
    }
    blocks.resize(m);
    // Recomputed from the children, not adjusted by a difference, so that
    // rounding never accumulates over updates.
    for (uint64_t node : blocks) tree_[node] = tree_[2 * node] + tree_[2 * node + 1];
  }
}

void Priorities::grow(uint64_t new_n, float initial) {
  check_value(initial, 0);
  std::unique_lock<std::shared_mutex> lk(mu_);
  if (new_n <= p_.size()) return;
  p_.resize(new_n, initial);
  pa_.resize(new_n, power(initial, alpha_));
  rebuild();
}

double Priorities::prefix(uint64_t row) const {
  // The blocks before row's block (walking down the tree), then its leaves.
  const uint64_t b = row / kBlock;
  double s = 0;
  uint64_t node = 1, lo = 0, width = leaves_;
  while (node < leaves_) {
    width /= 2;
    if (b >= lo + width) {
      s += tree_[2 * node];
      lo += width;
      node = 2 * node + 1;
    } else {
      node = 2 * node;
    }
  }
  for (uint64_t i = b * kBlock; i < row; ++i) s += pa_[i];
  return s;
}

void Priorities::descend(uint64_t node, double before, const double* t, size_t a, size_t b,
                         uint64_t lo, uint64_t hi, int64_t* out) const {
  if (node >= leaves_) {
    for (size_t i = a; i < b; ++i)
      out[i] = static_cast<int64_t>(find_in_block(node - leaves_, t[i] - before, lo, hi));
    return;
  }
  const double left = before + tree_[2 * node];
  const size_t split = static_cast<size_t>(std::lower_bound(t + a, t + b, left,
                                                            [](double x, double v) {
                                                              return !(x >= v);
                                                            }) - t);
  if (a < split) descend(2 * node, before, t, a, split, lo, hi, out);
  if (split < b) descend(2 * node + 1, left, t, split, b, lo, hi, out);
}

uint64_t Priorities::find_in_block(uint64_t block, double target, uint64_t lo,
                                   uint64_t hi) const {
  uint64_t row = block * kBlock;
  const uint64_t end = std::min<uint64_t>(p_.size(), row + kBlock);
  uint64_t last = UINT64_MAX;
  for (; row < end; ++row) {
    if (pa_[row] > 0) last = row;
    if (target < pa_[row]) break;
    target -= pa_[row];
  }
  if (row >= end) row = last;  // rounding ran past the block: its last row with mass
  // Rounding may also land just outside the range or on a row without mass:
  // the nearest row of the range that has some.
  if (row == UINT64_MAX || row < lo || row >= hi || pa_[row] <= 0) {
    const uint64_t from = std::clamp<uint64_t>(row == UINT64_MAX ? lo : row, lo, hi - 1);
    for (uint64_t d = 0; d < hi - lo; ++d) {
      if (from + d < hi && pa_[from + d] > 0) return from + d;
      if (from >= lo + d && pa_[from - d] > 0) return from - d;
    }
  }
  return row;
}

void Priorities::sample(uint64_t lo, uint64_t hi, size_t k, uint64_t seed, uint64_t stream,
                        int64_t* out, float* weights) const {
  std::shared_lock<std::shared_mutex> lk(mu_);
  if (hi > p_.size() || lo >= hi)
    fail(A2PACK_E_OUT_OF_RANGE, "priorities: rows [{}, {}) of {}", lo, hi, p_.size());
  const double base = prefix(lo);
  const double mass = prefix(hi) - base;
  if (!(mass > 0))
    fail(A2PACK_E_INVALID_ARGUMENT,
         "priorities: every priority of rows [{}, {}) is 0: there is nothing to draw", lo, hi);
  SplitMix64 r{seed ^ 0x7A3F8C5D1E2B4096ull};
  SplitMix64 s{r.next() ^ stream * 0x9E3779B97F4A7C15ull};
  const double part = mass / static_cast<double>(k);
  thread_local std::vector<double> targets;
  targets.resize(k);
  for (size_t i = 0; i < k; ++i)
    targets[i] = std::min(base + part * (static_cast<double>(i) + uniform01(s)), base + mass);
  // Stratified targets are ascending: one walk down the tree serves them
  // all, each node visited once however many targets pass through it.
  descend(1, 0.0, targets.data(), 0, k, lo, hi, out);
  if (!weights) return;
  // w = (N * P)^-beta / max w; the largest weight is the smallest P's.
  const double n = static_cast<double>(hi - lo);
  double least = INFINITY;
  for (size_t i = 0; i < k; ++i) least = std::min<double>(least, pa_[static_cast<size_t>(out[i])]);
  const double wmax = std::pow(n * least / mass, -beta_);
  for (size_t i = 0; i < k; ++i)
    weights[i] = static_cast<float>(
        std::pow(n * pa_[static_cast<size_t>(out[i])] / mass, -beta_) / wmax);
}

void Priorities::save(const std::string& path) const {
  std::shared_lock<std::shared_mutex> lk(mu_);
  dataset::TempFile f(path);
  const std::string h = npy_f32_header(p_.size());
  f.write(h.data(), h.size());
  f.write(p_.data(), p_.size() * sizeof(float));  // one write: the disk's speed
  f.sync();
  f.install();
}

std::unique_ptr<Priorities> Priorities::load(const std::string& path, double alpha, double beta,
                                             uint64_t expected_n) {
  const std::vector<uint8_t> raw = read_file(path);
  const std::string bytes(reinterpret_cast<const char*>(raw.data()), raw.size());
  auto bad = [&](const std::string& what) {
    return Error(A2PACK_E_CORRUPT, fmt::format("{}: not a priorities file: {}", path, what));
  };
  if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0) throw bad("no NPY magic");
  const int major = static_cast<unsigned char>(bytes[6]);
  size_t header_len, dict_at;
  if (major == 1) {
    header_len = static_cast<unsigned char>(bytes[8]) | static_cast<unsigned char>(bytes[9]) << 8;
    dict_at = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) throw bad("truncated header");
    header_len = 0;
    for (int i = 0; i < 4; ++i) header_len |= size_t{static_cast<unsigned char>(bytes[8 + i])} << (8 * i);
    dict_at = 12;
  } else {
    throw bad(fmt::format("NPY version {}", major));
  }
  if (dict_at + header_len > bytes.size()) throw bad("truncated header");
  const std::string dict = bytes.substr(dict_at, header_len);
  auto has = [&](const char* s) { return dict.find(s) != std::string::npos; };
  if (!has("'descr': '<f4'")) throw bad("its dtype is not '<f4' (little-endian float32)");
  if (!has("'fortran_order': False")) throw bad("Fortran order");
  const size_t sh = dict.find("'shape': (");
  if (sh == std::string::npos) throw bad("no shape");
  char* end = nullptr;
  const unsigned long long n = std::strtoull(dict.c_str() + sh + 10, &end, 10);
  if (!end || std::strncmp(end, ",)", 2) != 0) throw bad("its shape is not (n,)");
  const size_t data = dict_at + header_len;
  if (bytes.size() != data + n * sizeof(float))
    throw bad(fmt::format("{} bytes of data for {} priorities (4 each)", bytes.size() - data, n));
  if (expected_n && n != expected_n)
    fail(A2PACK_E_INVALID_ARGUMENT,
         "{}: {} priorities, for {} rows: a priorities file of another dataset (or of this one "
         "at another size)",
         path, n, expected_n);
  auto p = std::make_unique<Priorities>(n, alpha, beta, 0.0f);
  std::memcpy(p->p_.data(), bytes.data() + data, n * sizeof(float));
  for (uint64_t i = 0; i < n; ++i) {
    if (!std::isfinite(p->p_[i]) || p->p_[i] < 0)
      fail(A2PACK_E_CORRUPT, "{}: priority {} of row {} is not finite and at least 0", path,
           p->p_[i], i);
    p->pa_[i] = power(p->p_[i], alpha);
  }
  p->rebuild();
  return p;
}

}  // namespace a2pack::order
