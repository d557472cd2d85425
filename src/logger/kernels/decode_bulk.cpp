// Format version 2's bulk parser: the first try of the x86-64 builds at
// every frame (their decode_frame_v2_best), compiled once per instruction set
// that has it.
//
// Why a second parser: decode_frame_v2 reads each varint (or group of four)
// only when a record asks for it, so every read waits for the previous one's
// length: load, find the terminator, look up, add — a chain of ~12 cycles per
// group, and a sim record of 16 values makes ~12 of them (110-130 ns a record
// in all). Here each region's varints are decoded ahead of the records, eight
// bytes at a time and without a chain between groups (VarintQueue), and the
// records then read plain arrays; the predictor reads a sentinel-padded arena
// (FrameState, the encoder's) instead of masked loads at both ends of every
// record.
//
// It checks everything decode_frame_v2 checks, but does not say what was
// wrong: on anything it does not take (a malformed or truncated varint, a
// count or index out of range, bytes left over, a record of an unknown
// stream) it returns false and decode_frame_v2_best re-parses the frame with
// decode_frame_v2, which then throws the exact error naming the record (or
// decodes what this parser chose not to). A frame either parses here to the
// same bits as decode_frame_v2 gives or goes to it.
// It reads A2PACK_LOGGER_ISA; decode_build.hpp turns it into the macros the
// code below reads (A2PACK_LOGGER_NS, _FEATURES, _AVX2, _AVX512). The
// portable build (0) has no bulk parser: there this unit is empty.
#include "logger/kernels/decode_build.hpp"

#if defined(A2PACK_LOGGER_AVX2)
// The region this build's code is compiled for (target_region.hpp says why
// a region rather than -m flags for the whole unit). The kernels' own
// headers come inside it: each build gets its own copy of them.
#if defined(A2PACK_LOGGER_FEATURES)
A2PACK_TARGET_BEGIN(A2PACK_LOGGER_FEATURES)
#endif
#if A2PACK_LOGGER_ISA == 2 && !defined(__clang__)
// GCC 12's own AVX-512 headers trip -Wmaybe-uninitialized (their
// _mm512_undefined_* placeholders); nothing of ours is silenced by this.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include "logger/kernels/decode_values.hpp"

namespace a2pack::logger::A2PACK_LOGGER_NS {


// Values and indices a record's parse takes from a queue at once (a record
// of more goes in blocks).
inline constexpr size_t kBulkBlock = 64;

// Compaction: for an 8-bit mask, the lanes of its set bits in order (one byte
// each), for vpermd.
inline constexpr auto kCompact8 = [] {
  std::array<uint64_t, 256> t{};
  for (unsigned m = 0; m < 256; ++m) {
    uint64_t v = 0;
    unsigned k = 0;
    for (unsigned i = 0; i < 8; ++i)
      if (m >> i & 1) v |= static_cast<uint64_t>(i) << (8 * k++);
    t[m] = v;
  }
  return t;
}();

// The varints of one region, decoded ahead into a small buffer. Eight bytes
// at a time: for each position whose byte ends a varint (top bit clear), the
// varint's value from that byte and the (up to two) continuation bytes before
// it, computed in eight 32-bit lanes at once; the lanes of the terminators
// are then packed to the front (vpermd through kCompact8) and stored, and the
// output count grows by their popcount. No step waits on the previous group's
// length. Varints of four or more bytes (rare: values of 2^21 and up) and the
// last bytes of the region are read one at a time, checked.
class VarintQueue {
 public:
  static constexpr size_t kCap = 256;  // decoded varints held at once

  VarintQueue(const uint8_t* start, const uint8_t* end)
      : start_(start), p_(start), end_(end) {}

  // At least m (<= kCap - 16) decoded varints at data(); false when the region
  // has fewer left or the next one is malformed.
  [[gnu::always_inline]] bool ensure(size_t m) {
    return tail_ - head_ >= m || refill(m);
  }
  const uint64_t* data() const { return buf_ + head_; }
  void consume(size_t m) { head_ += m; }
  // Every byte of the region decoded and every varint consumed.
  bool finished() const { return head_ == tail_ && p_ == end_ && !bad_; }

 private:
  [[gnu::noinline]] bool refill(size_t m) {
    const size_t left = tail_ - head_;
    std::memmove(buf_, buf_ + head_, left * sizeof(uint64_t));
    head_ = 0;
    tail_ = left;
    while (tail_ + kGroup <= kCap && !bad_ && p_ != end_) {
      const uint8_t* before = p_;
      // groups() reads the three bytes before its start: none may lie
      // before the region, so its first varints go one at a time.
      if (end_ - p_ >= static_cast<ptrdiff_t>(kGroupReach) && p_ - start_ >= 3) groups();
      // Every pass ends at least one varint (or finds one malformed).
      if (p_ == before && !bad_) one();
    }
    return tail_ >= m;
  }

  // Groups of kGroup bytes from p_ (a varint boundary at least three bytes
  // into the region) while a whole group's reads stay inside the region and
  // the buffer has room for kGroup more entries; p_ ends after the last
  // terminator seen (the start of a varint not yet complete).
  void groups() {
    // Locals, not the members: the stores into buf_ (u64) could alias
    // tail_ (size_t) and would make the compiler reload it every group.
    const uint8_t* q = p_;
    size_t tail = tail_;
    uint64_t* const buf = buf_;
    // The last group's start and terminators: p_ is computed from them
    // once, not per group ("ends at q" before the first).
    const uint8_t* last_q = q - kGroup;
    unsigned last_term = 1u << (kGroup - 1);
    for (;;) {
      // Groups that fit both limits whatever their contents: no per-group
      // check.
      if (end_ - q < static_cast<ptrdiff_t>(kGroupReach)) break;
      size_t groups = std::min<size_t>(
          (kCap - tail) / kGroup, static_cast<size_t>(end_ - q - (kGroupReach - kGroup)) / kGroup);
      if (groups == 0) break;
      for (; groups; --groups) {
        const unsigned term = group(q, buf + tail);
        if (term == 0) [[unlikely]] {  // a varint of four bytes or more, or garbage
          p_ = last_q + (32 - __builtin_clz(last_term));
          tail_ = tail;
          if (!long_group(q)) return;
          q = p_;
          tail = tail_;
          last_q = q - kGroup;
          last_term = 1u << (kGroup - 1);
          break;  // recount the groups that fit
        }
        tail += static_cast<size_t>(__builtin_popcount(term));
        last_q = q;
        last_term = term;
        q += kGroup;
      }
    }
    p_ = last_q + (32 - __builtin_clz(last_term));
    tail_ = tail;
  }

#ifdef A2PACK_LOGGER_AVX512
  // Bytes a group decodes, and how far from its start it reads (q - 3 ..
  // q + 28: the 32-byte continuation load).
  static constexpr size_t kGroup = 16, kGroupReach = 29;

  // One group at q: the varints of one to three bytes that end in it, into
  // out (sixteen entries written); returns the terminator mask (bit i:
  // position i ends a varint), or 0 when a varint of four bytes or more ends
  // in it or none ends in it (out then unspecified). The lane masks come
  // straight from the continuation bits into mask registers, the three byte
  // forms are merged by masked shifts and ORs, and the terminators' lanes
  // packed by one vpcompressd (register form: the store form is microcoded
  // on AMD).
  [[gnu::always_inline]] static unsigned group(const uint8_t* q, uint64_t* out) {
    // Continuation bits of the bytes q - 3 .. q + 28 (bit j: byte q - 3 + j).
    const unsigned mk = static_cast<unsigned>(
        _mm256_movemask_epi8(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(q - 3))));
    const unsigned term = ~mk >> 3 & 0xFFFF;  // position i ends a varint
    const unsigned c1 = mk >> 2 & 0xFFFF;     // byte i - 1 continues
    const unsigned c2 = mk >> 1 & c1;         // and byte i - 2
    if (term & c2 & mk) return 0;  // a terminator after three continuation bytes
    const __m512i low7 = _mm512_set1_epi32(0x7F);
    const __m512i a = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q)));
    const __m512i b1 = _mm512_and_si512(
        _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q - 1))), low7);
    const __m512i b2 = _mm512_and_si512(
        _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q - 2))), low7);
    const __mmask16 k1 = static_cast<__mmask16>(c1), k2 = static_cast<__mmask16>(c2);
    // One byte: a. Two: a << 7 | b1. Three: (a << 7 | b1) << 7 | b2.
    __m512i v = _mm512_mask_slli_epi32(a, k1, a, 7);
    v = _mm512_mask_or_epi32(v, k1, v, b1);
    v = _mm512_mask_slli_epi32(v, k2, v, 7);
    v = _mm512_mask_or_epi32(v, k2, v, b2);
    v = _mm512_maskz_compress_epi32(static_cast<__mmask16>(term), v);
    _mm512_storeu_si512(out, _mm512_cvtepu32_epi64(_mm512_castsi512_si256(v)));
    _mm512_storeu_si512(out + 8, _mm512_cvtepu32_epi64(_mm512_extracti64x4_epi64(v, 1)));
    return term;
  }
#else
  // Bytes a group decodes, and how far from its start it reads (q - 3 ..
  // q + 15).
  static constexpr size_t kGroup = 8, kGroupReach = 16;

  // One group at q, as the AVX-512 group() above (eight entries written):
  // the value of every position in eight 32-bit lanes from its byte and the
  // two before it, the terminators' lanes packed by one vpermd through
  // kCompact8.
  [[gnu::always_inline]] static unsigned group(const uint8_t* q, uint64_t* out) {
    // Continuation bits of the bytes q - 3 .. q + 12 (bit j: byte q - 3 + j).
    const unsigned mk = static_cast<unsigned>(
        _mm_movemask_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q - 3))));
    const unsigned term = ~mk >> 3 & 0xFF;  // position i ends a varint
    const unsigned c1 = mk >> 2 & 0xFF;     // byte i - 1 continues
    const unsigned c2 = mk >> 1 & c1;       // and byte i - 2
    if (term & c2 & mk) return 0;  // a terminator after three continuation bytes
    const __m256i lane_bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
    const __m256i low7 = _mm256_set1_epi32(0x7F);
    const __m256i seven = _mm256_set1_epi32(7);
    const __m256i a = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(q)));
    const __m256i b1 = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(q - 1)));
    const __m256i b2 = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(q - 2)));
    const __m256i m1 = _mm256_cmpeq_epi32(
        _mm256_and_si256(_mm256_set1_epi32(static_cast<int>(c1)), lane_bit), lane_bit);
    const __m256i m2 = _mm256_cmpeq_epi32(
        _mm256_and_si256(_mm256_set1_epi32(static_cast<int>(c2)), lane_bit), lane_bit);
    // One byte: a. Two: b1 | a << 7. Three: b2 | b1 << 7 | a << 14.
    const __m256i s2 = _mm256_and_si256(m2, seven);
    __m256i v = _mm256_sllv_epi32(a, _mm256_add_epi32(_mm256_and_si256(m1, seven), s2));
    v = _mm256_or_si256(v, _mm256_sllv_epi32(_mm256_and_si256(b1, _mm256_and_si256(m1, low7)), s2));
    v = _mm256_or_si256(v, _mm256_and_si256(b2, _mm256_and_si256(m2, low7)));
    const __m256i perm =
        _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<int64_t>(kCompact8[term])));
    v = _mm256_permutevar8x32_epi32(v, perm);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out),
                        _mm256_cvtepu32_epi64(_mm256_castsi256_si128(v)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 4),
                        _mm256_cvtepu32_epi64(_mm256_extracti128_si256(v, 1)));
    return term;
  }
#endif

  // A group with a varint of four bytes or more: read varints one at a time
  // from p_ until past the group (at most kGroup: the group's terminators).
  // False when one is malformed (bad_ set).
  bool long_group(const uint8_t* q) {
    while (p_ < q + kGroup && p_ != end_) {
      if (!one()) return false;
    }
    return true;
  }

  // One varint at p_, checked against the region's end.
  bool one() {
    uint64_t v;
    if (varint::read<64>(p_, end_, v) != varint::Result::ok) {
      bad_ = true;
      return false;
    }
    buf_[tail_++] = v;
    return true;
  }

  alignas(64) uint64_t buf_[kCap + 8];
  size_t head_ = 0, tail_ = 0;
  const uint8_t* const start_;
  const uint8_t* p_;
  const uint8_t* const end_;
  bool bad_ = false;
};

// Indices m of a record from its varints g (the first index when `first`,
// then gaps): index = previous + gap + 1, into oi (u32) and, when kArena, ia
// (the predictor arena's int64). While every gap and every sum so far is
// below 2^32 the u64 sum cannot wrap; the first that is not leaves high bits
// in `overflow`, which the caller checks. Four at a time: +1, an in-register
// prefix sum, the running total added; the only chain between groups is one
// scalar add of each group's total.
template <bool kArena>
[[gnu::always_inline]] inline void bulk_indices(const uint64_t* g, size_t m, bool first,
                                                uint32_t* oi, int64_t* ia, uint64_t& cur_io,
                                                uint64_t& overflow_out) {
  // Locals: stores through ia (int64) may alias the caller's u64s. The
  // first index counts as a gap after index -1: a running total of 0 and no
  // +1 in its lane, so it goes through the same groups as the gaps.
  uint64_t cur = first ? 0 : cur_io, overflow = overflow_out;
  size_t i = 0;
  const __m256i one = _mm256_set1_epi64x(1);
  const __m256i lows = _mm256_setr_epi32(0, 2, 4, 6, 0, 0, 0, 0);
  __m256i plus = first ? _mm256_setr_epi64x(0, 1, 1, 1) : one;
  __m256i ov = _mm256_setzero_si256();
  for (; i + 4 <= m; i += 4) {
    const __m256i gv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(g + i));
    __m256i x = _mm256_add_epi64(gv, plus);
    plus = one;
    x = _mm256_add_epi64(x, _mm256_slli_si256(x, 8));  // pairs within each half
    x = _mm256_add_epi64(x, _mm256_blend_epi32(_mm256_setzero_si256(),
                                               _mm256_permute4x64_epi64(x, 0x55), 0xF0));
    const uint64_t total = static_cast<uint64_t>(_mm256_extract_epi64(x, 3));
    x = _mm256_add_epi64(x, _mm256_set1_epi64x(static_cast<int64_t>(cur)));
    ov = _mm256_or_si256(ov, _mm256_or_si256(gv, x));
    if constexpr (kArena) {
      // The arena holds the u32 index zero-extended (what the predictor
      // compares with); a wrapped sum is refused by the caller anyway.
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(ia + i),
                          _mm256_and_si256(x, _mm256_set1_epi64x(0xFFFFFFFFll)));
    }
    _mm_storeu_si128(reinterpret_cast<__m128i*>(oi + i),
                     _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(x, lows)));
    cur += total;
  }
  alignas(32) uint64_t lanes[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), ov);
  overflow |= lanes[0] | lanes[1] | lanes[2] | lanes[3];
  for (; i < m; ++i) {
    cur += g[i] + (first && i == 0 ? 0 : 1);
    overflow |= g[i] | cur;
    oi[i] = static_cast<uint32_t>(cur);
    if constexpr (kArena) ia[i] = static_cast<uint32_t>(cur);
  }
  cur_io = cur;
  overflow_out = overflow;
}

#ifdef A2PACK_LOGGER_AVX512
// The AVX-512 build's record kernel: positions [b, b + m) of a record of n,
// indices and values in one pass of eight-lane groups (the last under a
// mask). Each group's indices (g: the first index when `first`, then gaps;
// +1, an in-register prefix sum, the running total kept in a register) are
// stored into oi and, when kArena, ia, and used from the register for the
// group's value predictions (the previous record's q at position k - 1, k
// or k + 1 with the same index, from the padded arena: its kTail sentinels
// cover the reads up to k + 8 for k <= pn), so nothing is read back from
// oi and a record takes one loop, not the AVX2 build's two. Values: ZigZag
// delta + prediction into qa (when kArena), vcvtqq2pd (rounds like
// static_cast<double>), then q / k or q * scale into ov. `cur` and
// `overflow` as bulk_indices'.
template <bool kDivide, bool kArena>
[[gnu::always_inline]] inline void bulk_record(const uint64_t* g, const uint64_t* z, size_t b,
                                               size_t m, bool first, uint32_t* oi, int64_t* ia,
                                               int64_t* qa, const FrameState::Prev pr,
                                               const Scaling& sc, double* ov, uint64_t& cur,
                                               uint64_t& overflow) {
  static_assert(FrameState::kTail >= 9, "eight-lane reads need nine tail sentinels");
  const __m512i zero = _mm512_setzero_si512();
  const __m512i one = _mm512_set1_epi64(1);
  const __m512i low32 = _mm512_set1_epi64(0xFFFFFFFFll);
  const __m512d kv = _mm512_set1_pd(sc.value_div), inv = _mm512_set1_pd(sc.value_inv);
  const __m512d scale = _mm512_set1_pd(sc.value_scale);
  // The first index counts as a gap after index -1: no +1 in its lane.
  __m512i plus = first ? _mm512_setr_epi64(0, 1, 1, 1, 1, 1, 1, 1) : one;
  __m512i total = _mm512_set1_epi64(static_cast<int64_t>(first ? 0 : cur));
  __m512i ovf = zero;
  for (size_t t = 0; t < m; t += 8) {
    const size_t left = m - t < 8 ? m - t : 8;
    const __mmask8 live = static_cast<__mmask8>((1u << left) - 1);
    const size_t k = b + t;  // position in the record
    const __m512i gv = _mm512_maskz_loadu_epi64(live, g + t);
    __m512i x = _mm512_add_epi64(gv, plus);
    plus = one;
    x = _mm512_add_epi64(x, _mm512_alignr_epi64(x, zero, 7));  // lanes shifted up by 1
    x = _mm512_add_epi64(x, _mm512_alignr_epi64(x, zero, 6));  // by 2
    x = _mm512_add_epi64(x, _mm512_alignr_epi64(x, zero, 4));  // by 4
    x = _mm512_add_epi64(x, total);
    total = _mm512_permutexvar_epi64(_mm512_set1_epi64(static_cast<int64_t>(left - 1)), x);
    ovf = _mm512_mask_or_epi64(ovf, live, ovf, _mm512_or_si512(gv, x));
    const __m512i c = _mm512_and_si512(x, low32);  // the u32 index, zero-extended
    if constexpr (kArena) _mm512_mask_storeu_epi64(ia + k, live, c);
    _mm256_mask_storeu_epi32(oi + k, live, _mm512_cvtepi64_epi32(x));
    const __m512i zz = _mm512_maskz_loadu_epi64(live, z + t);
    __m512i d = _mm512_xor_si512(_mm512_srli_epi64(zz, 1),
                                 _mm512_sub_epi64(zero, _mm512_and_si512(zz, one)));
    if (pr.n && k <= pr.n) {  // past pn every neighbour lies beyond the previous record
      for (int o = -1; o <= 1; ++o) {  // indices ascend: at most one of the three matches
        const ptrdiff_t at = static_cast<ptrdiff_t>(k) + o;
        const __m512i pi = _mm512_loadu_si512(pr.idx + at);
        d = _mm512_add_epi64(d, _mm512_maskz_loadu_epi64(_mm512_cmpeq_epi64_mask(pi, c), pr.q + at));
      }
    }
    if constexpr (kArena) _mm512_mask_storeu_epi64(qa + k, live, d);
    __m512d v = _mm512_cvtepi64_pd(d);
    if constexpr (kDivide) {
      const __m512d y = _mm512_mul_pd(v, inv);
      v = _mm512_fmadd_pd(_mm512_fnmadd_pd(y, kv, v), inv, y);  // div_by4's correction
    } else {
      v = _mm512_mul_pd(v, scale);
    }
    _mm512_mask_storeu_pd(ov + k, live, v);
  }
  cur = static_cast<uint64_t>(_mm_cvtsi128_si64(_mm512_castsi512_si128(total)));
  overflow |= static_cast<uint64_t>(_mm512_reduce_or_epi64(ovf));
}
#else
// Values [b, b + m) of a record of n from their ZigZag deltas z: q into qa
// (the arena, when the record is kept as a predictor), sc.value(q) into
// ov + b (kDivide: sc divides).
template <bool kDivide>
[[gnu::always_inline]] inline void bulk_values(const uint64_t* z, size_t b, size_t m, size_t n,
                                               const uint32_t* oi, const FrameState::Prev pr,
                                               int64_t* qa, const Scaling& sc, double* ov) {
  size_t k = 0;
  for (; k + 4 <= m; k += 4) {
    __m256i d = zigzag4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(z + k)));
    if (pr.n) d = _mm256_add_epi64(d, predict4_padded(b + k, n, oi, pr.idx, pr.q, pr.n));
    if (qa) _mm256_storeu_si256(reinterpret_cast<__m256i*>(qa + b + k), d);
    store_values4<kDivide>(d, ov + b + k, sc);
  }
  if (k < m) {
    int64_t pred[kBulkBlock];
    if (pr.n) predict_scalar(oi, b + k, m - k, pr.idx, pr.q, pr.n, pred);
    for (size_t i = k; i < m; ++i) {
      const uint64_t p = pr.n ? static_cast<uint64_t>(pred[i - k]) : 0;
      const int64_t x = static_cast<int64_t>(p + static_cast<uint64_t>(varint::zigzag_decode(z[i])));
      if (qa) qa[b + i] = x;
      ov[b + i] = sc.value(to_double(x));
    }
  }
}
#endif

// decode_frame_v2 on the decoded-ahead queues; false: let decode_frame_v2
// parse this frame (see the top of this file).
bool decode_frame_v2_bulk(const uint8_t* raw, size_t len, uint32_t n_records,
                                 const ScaleTable& scales, const FrameSink& out, FrameCount& c) {
  if (len < kV2Prefix) return false;
  const uint32_t slen = le::load<uint32_t>(raw);
  if (slen > len - kV2Prefix) return false;
  const uint8_t* const s_begin = raw + kV2Prefix;
  VarintQueue sq(s_begin, s_begin + slen);
  VarintQueue vq(s_begin + slen, raw + len);
  // Per stream, once per frame: its Scaling.
  struct Divs {
    uint64_t frame = 0;
    Scaling sc;
  };
  thread_local std::vector<Divs> tl_divs;
  thread_local uint64_t tl_frame_no = 0;
  thread_local FrameState tl_state;
  // Plain locals from here on: in the shared library every use of a
  // thread_local can cost a __tls_get_addr call, and the loop below would
  // make one per record.
  FrameState& st = tl_state;
  const uint64_t frame_no = ++tl_frame_no;
  if (tl_divs.size() < scales.size()) tl_divs.resize(scales.size());
  Divs* const divs = tl_divs.data();
  st.new_frame();
  constexpr size_t kBlock = kBulkBlock;
  size_t nv = 0;
  for (uint32_t r = 0; r < n_records; ++r) {
    if (!sq.ensure(3)) return false;
    const uint64_t* h = sq.data();
    const uint64_t sid = h[0], zz = h[1], n = h[2];
    sq.consume(3);
    if (sid >= scales.size() || !scales[sid] || n > kMaxRecordValues || n > out.cap_values - nv ||
        r >= out.cap_records)
      return false;
    const StreamInfo* s = scales[sid];
    Divs& dv = divs[sid];
    if (dv.frame != frame_no) {
      dv.frame = frame_no;
      dv.sc = Scaling::of(*s);
    }
    const Scaling& sc = dv.sc;
    const FrameState::Record rec = st.begin(static_cast<uint32_t>(sid), static_cast<size_t>(n));
    int64_t* const qa = rec.q;
    int64_t* const ia = rec.idx;
    const FrameState::Prev pr = rec.prev;
    const uint64_t tick = static_cast<uint64_t>(pr.base_tick) +
                          static_cast<uint64_t>(varint::zigzag_decode(zz));  // wraps
    uint32_t* const oi = out.indices + nv;
    double* const ov = out.values + nv;
    uint64_t cur = 0, overflow = 0;
#ifdef A2PACK_LOGGER_AVX512
    // Indices and values together, a block at a time (bulk_record).
    auto block = [&](size_t b, size_t m, bool first, auto divide, auto arena) {
      bulk_record<decltype(divide)::value, decltype(arena)::value>(
          sq.data(), vq.data(), b, m, first, oi, ia, qa, pr, sc, ov, cur, overflow);
      sq.consume(m);
      vq.consume(m);
    };
    using Yes = std::true_type;
    using No = std::false_type;
    if (n <= kBlock) {
      // The usual record: one block that is a predictor (n <= 2^16), its
      // position, `first` and arena constant in the inlined kernel (~5 %
      // faster on sim frames than the general loop below).
      const size_t m = static_cast<size_t>(n);
      if (!sq.ensure(m) || !vq.ensure(m)) return false;
      sc.value_div != 0 ? block(0, m, true, Yes{}, Yes{}) : block(0, m, true, No{}, Yes{});
    } else {
      for (size_t b = 0; b < n; b += kBlock) {
        const size_t m = n - b < kBlock ? static_cast<size_t>(n - b) : kBlock;
        if (!sq.ensure(m) || !vq.ensure(m)) return false;
        if (sc.value_div != 0) {
          ia ? block(b, m, b == 0, Yes{}, Yes{}) : block(b, m, b == 0, Yes{}, No{});
        } else {
          ia ? block(b, m, b == 0, No{}, Yes{}) : block(b, m, b == 0, No{}, No{});
        }
      }
    }
    if (overflow > UINT32_MAX) return false;
#else
    // Indices: the first, then gaps + 1 summed.
    for (size_t b = 0; b < n; b += kBlock) {
      const size_t m = n - b < kBlock ? static_cast<size_t>(n - b) : kBlock;
      if (!sq.ensure(m)) return false;
      if (ia) {
        bulk_indices<true>(sq.data(), m, b == 0, oi + b, ia + b, cur, overflow);
      } else {
        bulk_indices<false>(sq.data(), m, b == 0, oi + b, nullptr, cur, overflow);
      }
      sq.consume(m);
    }
    if (overflow > UINT32_MAX) return false;
    // Values: q = prediction + ZigZag delta (wrapping like the encoder's
    // difference), then q / k or q * scale as decode_frame_v2 computes them.
    for (size_t b = 0; b < n; b += kBlock) {
      const size_t m = n - b < kBlock ? static_cast<size_t>(n - b) : kBlock;
      if (!vq.ensure(m)) return false;
      const uint64_t* z = vq.data();
      if (sc.value_div != 0) {
        bulk_values<true>(z, b, m, n, oi, pr, qa, sc, ov);
      } else {
        bulk_values<false>(z, b, m, n, oi, pr, qa, sc, ov);
      }
      vq.consume(m);
    }
#endif
    st.commit(static_cast<uint32_t>(sid), static_cast<int64_t>(tick), static_cast<size_t>(n));
    out.stream_ids[r] = static_cast<uint32_t>(sid);
    out.epochs[r] = sc.epoch(tick);
    nv += static_cast<size_t>(n);
    out.offsets[r] = out.value_base + nv;
  }
  if (!sq.finished() || !vq.finished()) return false;
  c.records = n_records;
  c.values = nv;
  c.parsed_values = nv;
  return true;
}

// The AVX2 build's version-2 entry point: the bulk parser, and
// decode_frame_v2 for whatever it leaves (exact errors included).
FrameCount decode_frame_v2_best(const uint8_t* raw, size_t len, uint32_t n_records,
                                const ScaleTable& scales, const FrameSink& out) {
  FrameCount c;
  if (decode_frame_v2_bulk(raw, len, n_records, scales, out, c)) return c;
  return decode_frame_v2(raw, len, n_records, scales, out);
}

}  // namespace a2pack::logger::A2PACK_LOGGER_NS

#if A2PACK_LOGGER_ISA == 2 && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#if defined(A2PACK_LOGGER_FEATURES)
A2PACK_TARGET_END
#endif
#endif  // A2PACK_LOGGER_AVX2
