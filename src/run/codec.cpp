#include "run/codec.hpp"

#include <array>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "base/bytes.hpp"
#include "base/crc32c.hpp"
#include "base/error.hpp"
#include "base/file_io.hpp"
#include "base/varint.hpp"
#include "base/utf8.hpp"

namespace a2pack::run {
namespace {

constexpr uint8_t kV1Magic[4] = {'A', '2', 'T', '1'};
constexpr size_t kV1HeaderSize = 36;  // magic .. engine_len
constexpr size_t kV1MinSize = kV1HeaderSize + 4;
// The smallest v2 step is a 1-byte board, a move and a None branch tag.
constexpr size_t kV2MinStepBytes = 3;

[[noreturn]] void corrupt(size_t offset, const char* what) {
  fail(A2PACK_E_CORRUPT, "offset {}: {}", offset, what);
}

// ------------------------------------------------------------------ v1
Header parse_header_v1(const uint8_t* d, size_t len) {
  if (len < kV1MinSize)
    fail(A2PACK_E_CORRUPT, "v1 run is {} bytes, shorter than the {}-byte header and checksum", len,
         kV1MinSize);
  uint32_t stored = le::load<uint32_t>(d + len - 4);
  uint32_t actual = crc32c::compute(d, len - 4);
  if (stored != actual)
    fail(A2PACK_E_CHECKSUM, "offset {}: v1 CRC32C mismatch: stored {:#010x}, computed {:#010x}",
         len - 4, stored, actual);
  if (std::memcmp(d, kV1Magic, 4) != 0) corrupt(0, "bad v1 magic (expected \"A2T1\")");
  if (d[4] != 1) fail(A2PACK_E_UNSUPPORTED, "offset 4: unsupported v1 version {}", d[4]);
  if (d[5] != 0) fail(A2PACK_E_UNSUPPORTED, "offset 5: unsupported endianness {} (0 = little)", d[5]);
  Header h;
  h.kind = Kind::v1;
  h.meta.steps = le::load<uint32_t>(d + 6);
  h.meta.start_unix_s = le::load<uint64_t>(d + 10);
  h.meta.elapsed_s = le::load<float>(d + 18);
  h.meta.max_score = le::load<uint64_t>(d + 22);
  h.meta.highest_tile = le::load<uint32_t>(d + 30);
  size_t engine_len = le::load<uint16_t>(d + 34);
  uint64_t steps = h.meta.steps;
  // Everything in u64: (2^32) * 9 cannot overflow.
  uint64_t expected = kV1HeaderSize + engine_len + 8 * (steps + 1) + steps + 4;
  if (expected != len)
    fail(A2PACK_E_CORRUPT,
         "v1 run with {} steps and a {}-byte engine string must be {} bytes, file has {}", steps,
         engine_len, expected, len);
  if (engine_len) {
    const char* e = reinterpret_cast<const char*>(d + kV1HeaderSize);
    if (!utf8::valid(e, engine_len)) corrupt(kV1HeaderSize, "engine string is not valid UTF-8");
    h.meta.engine.emplace(e, engine_len);
  }
  h.n_steps = steps;
  h.body = kV1HeaderSize + engine_len;
  return h;
}

uint64_t decode_steps_v1(const uint8_t* d, const Header& h, const StepColumns& out) {
  const size_t n = h.n_steps;
  const uint8_t* states = d + h.body;
  const uint8_t* moves = states + 8 * (n + 1);
  if (n == 0) return le::load<uint64_t>(states);  // the columns may be NULL then
  std::memcpy(out.boards, states, 8 * n);  // little-endian host
  for (size_t i = 0; i < n; ++i) {
    uint8_t m = moves[i];
    if (m > 3)
      fail(A2PACK_E_CORRUPT, "offset {}: step {}: move {} out of range (0..3)",
           static_cast<size_t>(moves - d) + i, i, m);
    out.moves[i] = m;
  }
  std::memset(out.values, 0, 16 * n);
  std::memset(out.legal, 0, n);
  std::memset(out.present, 0, n);
  return le::load<uint64_t>(states + 8 * n);
}

// ------------------------------------------------------------------ v2
// A bounds-checked cursor; errors carry the absolute offset.
struct Cursor {
  const uint8_t* base;
  const uint8_t* p;
  const uint8_t* end;
  size_t offset() const { return static_cast<size_t>(p - base); }

  template <unsigned Bits>
  uint64_t varint(const char* what) {
    uint64_t v;
    const uint8_t* start = p;
    switch (varint::read<Bits>(p, end, v)) {
      case varint::Result::ok: return v;
      case varint::Result::truncated:
        fail(A2PACK_E_CORRUPT, "offset {}: truncated varint in {}", start - base, what);
      case varint::Result::overlong:
        fail(A2PACK_E_CORRUPT, "offset {}: varint in {} overflows u{}", start - base, what, Bits);
    }
    return 0;
  }
  uint8_t byte(const char* what) {
    if (p == end) fail(A2PACK_E_CORRUPT, "offset {}: unexpected end of data in {}", offset(), what);
    return *p++;
  }
  float f32(const char* what) {
    if (end - p < 4) fail(A2PACK_E_CORRUPT, "offset {}: unexpected end of data in {}", offset(), what);
    float f = le::load<float>(p);
    p += 4;
    return f;
  }
};

Header parse_header_v2(const uint8_t* d, size_t len) {
  Cursor c{d, d, d + len};
  Header h;
  h.kind = Kind::v2;
  h.meta.steps = static_cast<uint32_t>(c.varint<32>("meta.steps"));
  h.meta.start_unix_s = c.varint<64>("meta.start_unix_s");
  h.meta.elapsed_s = c.f32("meta.elapsed_s");
  h.meta.max_score = c.varint<64>("meta.max_score");
  h.meta.highest_tile = static_cast<uint32_t>(c.varint<32>("meta.highest_tile"));
  size_t tag_at = c.offset();
  uint8_t tag = c.byte("meta.engine_str option tag");
  if (tag == 1) {
    uint64_t n = c.varint<64>("meta.engine_str length");
    if (n > static_cast<uint64_t>(c.end - c.p))
      fail(A2PACK_E_CORRUPT, "offset {}: engine string length {} exceeds the {} bytes left",
           c.offset(), n, c.end - c.p);
    const char* s = reinterpret_cast<const char*>(c.p);
    if (!utf8::valid(s, n)) corrupt(c.offset(), "engine string is not valid UTF-8");
    h.meta.engine.emplace(s, n);
    c.p += n;
  } else if (tag != 0) {
    fail(A2PACK_E_CORRUPT, "offset {}: option tag {} for meta.engine_str (expected 0 or 1)", tag_at,
         tag);
  }
  size_t count_at = c.offset();
  uint64_t n = c.varint<64>("steps length");
  // Checked before anything is sized by it: every step takes >= 3 bytes and
  // the final board >= 1.
  uint64_t left = static_cast<uint64_t>(c.end - c.p);
  if (left == 0 || n > (left - 1) / kV2MinStepBytes)
    fail(A2PACK_E_CORRUPT, "offset {}: steps length {} cannot fit in the {} bytes left", count_at,
         n, left);
  h.n_steps = n;
  h.body = c.offset();
  return h;
}

// ---- fast path ------------------------------------------------------
// Most of a v2 run is steps of ~29 bytes; the fast path decodes a step with
// 8-byte loads and no per-byte branches while at least kFastMargin bytes
// remain, and hands anything unusual (an error, a near-end step) to the
// checked path, which then produces the precise message.

// Compact eight 7-bit groups (continuation bits already cleared) into 56 bits.
inline uint64_t compact7(uint64_t w) {
  w = ((w & 0x7f007f007f007f00ull) >> 1) | (w & 0x007f007f007f007full);
  w = ((w & 0x3fff00003fff0000ull) >> 2) | (w & 0x00003fff00003fffull);
  w = ((w & 0x0fffffff00000000ull) >> 4) | (w & 0x000000000fffffffull);
  return w;
}

// u64 varint with >= 10 readable bytes. False on a value that overflows u64.
inline bool fast_varint64(const uint8_t*& p, uint64_t& out) {
  uint64_t w = le::load<uint64_t>(p);
  uint64_t stop = ~w & 0x8080808080808080ull;
  if (stop) {
    // Keep bytes up to and including the first one without continuation.
    uint64_t keep = stop ^ (stop - 1);
    out = compact7(w & keep & 0x7f7f7f7f7f7f7f7full);
    p += (static_cast<unsigned>(__builtin_ctzll(stop)) >> 3) + 1;
    return true;
  }
  // 9 or 10 bytes. A branch on which, rather than arithmetic: predicted,
  // it keeps the load of byte 8 off the chain that advances p.
  uint64_t v = compact7(w & 0x7f7f7f7f7f7f7f7full);
  uint64_t b8 = p[8];
  if (b8 < 0x80) {
    out = v | (b8 << 56);
    p += 9;
    return true;
  }
  uint64_t b9 = p[9];
  if (b9 > 1) return false;
  out = v | ((b8 & 0x7f) << 56) | (b9 << 63);
  p += 10;
  return true;
}

// Longest step: 10-byte board + move + tag + 4 * 5 = 32 bytes. The branch
// decoder reads 16 bytes from the first tag and 4 past the last one, which
// stay within the same 32; keep 8 more.
constexpr ptrdiff_t kFastMargin = 40;

// One bit per byte of w: bit k set when byte k is zero / is one.
inline unsigned zero_bytes(uint64_t w) {
  constexpr uint64_t lo7 = 0x7f7f7f7f7f7f7f7full;
  uint64_t t = ~(((w & lo7) + lo7) | w | lo7);  // 0x80 where the byte is zero
  return static_cast<unsigned>(((t >> 7) * 0x0102040810204080ull) >> 56);
}
inline unsigned one_bytes(uint64_t w) { return zero_bytes(w ^ 0x0101010101010101ull); }

// Where the four branch tags of a step lie: tag k at offset pos[k] from the
// first, the branches taking `end` bytes, `mask` the legal ones.
struct BranchLayout {
  uint8_t pos[4];
  uint8_t end;
  uint8_t mask;
  uint16_t tags;  // one bit per tag offset
};

// The ten byte offsets a tag can have (0; 1, 5; 2, 6, 10; 3, 7, 11, 15)
// gathered from a 16-bit mask into ten bits.
constexpr unsigned tag_bits(unsigned z) {
  return (z & 0xf) | ((z >> 1) & 0x70) | ((z >> 3) & 0x180) | ((z >> 6) & 0x200);
}

// The inverse of tag_bits: a 16-bit mask with the ten bits of idx at the ten
// offsets.
constexpr unsigned tag_mask(unsigned idx) {
  return (idx & 0xf) | ((idx & 0x70) << 1) | ((idx & 0x180) << 3) | ((idx & 0x200) << 6);
}

// The layout that the zero bytes `z` at those offsets spell: tag 0 is at
// 0, and each tag after it lies 1 byte (after an Illegal) or 5 (after a
// Legal and its f32) after the one before. One table of 1 024 entries
// (8 KiB), indexed by tag_bits(z): a single load from the zero bytes to the
// layout, on the chain that finds where the next step starts.
constexpr std::array<BranchLayout, 1024> make_layouts() {
  std::array<BranchLayout, 1024> t{};
  for (unsigned idx = 0; idx < 1024; ++idx) {
    const unsigned z = tag_mask(idx);
    BranchLayout l{};
    unsigned at = 0;
    for (unsigned k = 0; k < 4; ++k) {
      unsigned legal = (z >> at) & 1;
      l.pos[k] = static_cast<uint8_t>(at);
      l.tags = static_cast<uint16_t>(l.tags | 1u << at);
      l.mask = static_cast<uint8_t>(l.mask | legal << k);
      at += 1 + 4 * legal;
    }
    l.end = static_cast<uint8_t>(at);
    t[idx] = l;
  }
  return t;
}
constexpr std::array<BranchLayout, 1024> kLayouts = make_layouts();
static_assert(tag_bits(tag_mask(1023)) == 1023 && tag_mask(1023) == 0x8cef);

// For each legal mask, all-ones in the lanes of the legal branches.
struct alignas(16) LegalLanes {
  uint32_t lane[4];
};
constexpr std::array<LegalLanes, 16> make_legal_lanes() {
  std::array<LegalLanes, 16> t{};
  for (unsigned m = 0; m < 16; ++m)
    for (unsigned k = 0; k < 4; ++k) t[m].lane[k] = ((m >> k) & 1) ? ~0u : 0u;
  return t;
}
constexpr std::array<LegalLanes, 16> kLegalLanes = make_legal_lanes();

// The four branches of a step with its branches present. Each is a tag, 0
// (Legal, then an f32) or 1 (Illegal), so where tag k lies depends on every
// tag before it. Rather than follow that chain through memory (a load's
// latency per tag), the zero bytes of the 16 bytes that can hold the tags
// give the layout in one table lookup.
// False when a tag is neither 0 nor 1.
inline bool fast_branches(const uint8_t*& q, float* v, uint8_t& legal) {
#if defined(__SSE2__)
  const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q));
  const unsigned z = static_cast<unsigned>(_mm_movemask_epi8(_mm_cmpeq_epi8(x, _mm_setzero_si128())));
  const unsigned o = static_cast<unsigned>(_mm_movemask_epi8(_mm_cmpeq_epi8(x, _mm_set1_epi8(1))));
#else
  const uint64_t w0 = le::load<uint64_t>(q), w1 = le::load<uint64_t>(q + 8);
  const unsigned z = zero_bytes(w0) | zero_bytes(w1) << 8;
  const unsigned o = one_bytes(w0) | one_bytes(w1) << 8;
#endif
  const BranchLayout& l = kLayouts[tag_bits(z)];
  const unsigned mask = l.mask;
  if (~(z | o) & l.tags) return false;
  // An Illegal branch's value is 0; the 4 bytes after its tag are read and
  // masked off rather than branched over.
#if defined(__SSE2__)
  const __m128i values = _mm_setr_epi32(le::load<int32_t>(q + 1), le::load<int32_t>(q + l.pos[1] + 1),
                                        le::load<int32_t>(q + l.pos[2] + 1),
                                        le::load<int32_t>(q + l.pos[3] + 1));
  const __m128i lanes = _mm_load_si128(reinterpret_cast<const __m128i*>(kLegalLanes[mask].lane));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(v), _mm_and_si128(values, lanes));
#else
  for (unsigned k = 0; k < 4; ++k) {
    const uint32_t bits = le::load<uint32_t>(q + l.pos[k] + 1) & kLegalLanes[mask].lane[k];
    std::memcpy(v + k, &bits, 4);
  }
#endif
  legal = static_cast<uint8_t>(mask);
  q += l.end;
  return true;
}

// Decode step i at p into the columns. False (p unchanged) when anything is
// out of the ordinary; the caller then uses the checked path.
inline bool fast_step(const uint8_t*& p, size_t i, const StepColumns& out) {
  const uint8_t* q = p;
  uint64_t board;
  if (!fast_varint64(q, board)) return false;
  uint8_t m = q[0], tag = q[1];
  if (m > 3 || tag > 1) return false;
  q += 2;
  float* v = out.values + 4 * i;
  uint8_t legal = 0;
  if (tag) {
    if (!fast_branches(q, v, legal)) return false;
  } else {
    v[0] = v[1] = v[2] = v[3] = 0.0f;
  }
  out.boards[i] = board;
  out.moves[i] = m;
  out.legal[i] = legal;
  out.present[i] = tag;
  p = q;
  return true;
}

// The checked decoder of one step: exact error messages with offsets.
// Kept out of line so that the fast loop keeps its values in registers.
[[gnu::noinline]] void checked_step(Cursor& c, size_t i, const StepColumns& out) {
  out.boards[i] = c.varint<64>("step board");
  size_t move_at = c.offset();
  uint8_t m = c.byte("step move");
  if (m > 3)
    fail(A2PACK_E_CORRUPT, "offset {}: step {}: move variant {} out of range (0..3)", move_at, i,
         m);
  out.moves[i] = m;
  size_t tag_at = c.offset();
  uint8_t tag = c.byte("step branches option tag");
  float* v = out.values + 4 * i;
  if (tag == 0) {
    v[0] = v[1] = v[2] = v[3] = 0.0f;
    out.legal[i] = 0;
    out.present[i] = 0;
    return;
  }
  if (tag != 1)
    fail(A2PACK_E_CORRUPT, "offset {}: step {}: branches option tag {} (expected 0 or 1)", tag_at,
         i, tag);
  uint8_t mask = 0;
  for (int k = 0; k < 4; ++k) {
    size_t at = c.offset();
    uint8_t bt = c.byte("branch variant");
    if (bt == 0) {
      v[k] = c.f32("branch value");
      mask |= static_cast<uint8_t>(1u << k);
    } else if (bt == 1) {
      v[k] = 0.0f;
    } else {
      fail(A2PACK_E_CORRUPT, "offset {}: step {}: branch {} variant {} out of range (0..1)", at, i,
           k, bt);
    }
  }
  out.legal[i] = mask;
  out.present[i] = 1;
}

uint64_t decode_steps_v2(const uint8_t* d, size_t len, const Header& h, const StepColumns& out) {
  Cursor c{d, d + h.body, d + len};
  const size_t n = h.n_steps;
  // A local copy of the column pointers: stores through the byte columns may
  // alias anything, so pointers read through `out` would be reloaded per step.
  const StepColumns fast = out;
  const uint8_t* p = c.p;
  for (size_t i = 0; i < n; ++i) {
    if (c.end - p >= kFastMargin && fast_step(p, i, fast)) continue;
    c.p = p;
    checked_step(c, i, out);
    p = c.p;
  }
  c.p = p;
  uint64_t final_board = c.varint<64>("final_board");
  if (c.p != c.end)
    fail(A2PACK_E_CORRUPT, "offset {}: {} trailing bytes after the run", c.offset(), c.end - c.p);
  return final_board;
}

}  // namespace

Kind detect_kind(const uint8_t* data, size_t len) {
  if (len >= 6 && std::memcmp(data, kV1Magic, 4) == 0 && data[4] == 1) return Kind::v1;
  return Kind::v2;
}

Header parse_header(const uint8_t* data, size_t len) {
  if (len == 0) fail(A2PACK_E_CORRUPT, "empty run payload");
  return detect_kind(data, len) == Kind::v1 ? parse_header_v1(data, len)
                                              : parse_header_v2(data, len);
}

uint64_t decode_steps(const uint8_t* data, size_t len, const Header& h, const StepColumns& out) {
  return h.kind == Kind::v1 ? decode_steps_v1(data, h, out) : decode_steps_v2(data, len, h, out);
}

bool Run::has_branches() const {
  for (uint8_t p : present)
    if (p) return true;
  return false;
}

void Run::resize(size_t n) {
  boards.resize(n);
  moves.resize(n);
  values.resize(4 * n);
  legal.resize(n);
  present.resize(n);
}

Run decode(const uint8_t* data, size_t len) {
  Header h = parse_header(data, len);
  Run r;
  r.meta = std::move(h.meta);
  r.source = h.kind;
  r.resize(h.n_steps);
  r.final_board = decode_steps(data, len, h,
                               {r.boards.data(), r.moves.data(), r.values.data(), r.legal.data(),
                                r.present.data()});
  return r;
}

Run load(const std::string& path) {
  auto bytes = read_file(path);
  try {
    return decode(bytes.data(), bytes.size());
  } catch (const Error& e) {
    rethrow_with_context(e, path);
  }
}

// ------------------------------------------------------------------ encoders
size_t encoded_size_v2(const Run& r) {
  size_t s = varint::size(r.meta.steps) + varint::size(r.meta.start_unix_s) + 4 +
             varint::size(r.meta.max_score) + varint::size(r.meta.highest_tile) + 1;
  if (r.meta.engine) s += varint::size(r.meta.engine->size()) + r.meta.engine->size();
  s += varint::size(r.size());
  for (size_t i = 0; i < r.size(); ++i) {
    s += varint::size(r.boards[i]) + 2;
    if (r.present[i])
      for (int k = 0; k < 4; ++k) s += (r.legal[i] >> k & 1) ? 5 : 1;
  }
  return s + varint::size(r.final_board);
}

std::string encode_v2(const Run& r) {
  std::string out(encoded_size_v2(r), '\0');
  auto* p = reinterpret_cast<uint8_t*>(out.data());
  p = varint::write(p, r.meta.steps);
  p = varint::write(p, r.meta.start_unix_s);
  le::store(p, r.meta.elapsed_s);
  p += 4;
  p = varint::write(p, r.meta.max_score);
  p = varint::write(p, r.meta.highest_tile);
  if (r.meta.engine) {
    *p++ = 1;
    p = varint::write(p, r.meta.engine->size());
    std::memcpy(p, r.meta.engine->data(), r.meta.engine->size());
    p += r.meta.engine->size();
  } else {
    *p++ = 0;
  }
  p = varint::write(p, r.size());
  for (size_t i = 0; i < r.size(); ++i) {
    p = varint::write(p, r.boards[i]);
    *p++ = r.moves[i];
    if (!r.present[i]) {
      *p++ = 0;
      continue;
    }
    *p++ = 1;
    for (int k = 0; k < 4; ++k) {
      if (r.legal[i] >> k & 1) {
        *p++ = 0;
        le::store(p, r.values[4 * i + k]);
        p += 4;
      } else {
        *p++ = 1;
      }
    }
  }
  p = varint::write(p, r.final_board);
  if (p != reinterpret_cast<uint8_t*>(out.data()) + out.size())
    fail(A2PACK_E_INTERNAL, "v2 encoder size mismatch");
  // Kind detection (docs/run-files.md) reads every payload that starts "A2T1"
  // 0x01 as v1. v2 bytes spell that only for meta.steps = 65, start_unix_s =
  // 50 and an elapsed_s whose first bytes are "T1" 0x01 (a subnormal float,
  // never a real game; found by fuzzing) - and would then read back as a
  // broken v1 file, so they are refused instead of written.
  const auto* bytes = reinterpret_cast<const uint8_t*>(out.data());
  if (detect_kind(bytes, out.size()) == Kind::v1)
    fail(A2PACK_E_INVALID_ARGUMENT,
         "this run cannot be written as v2: its bytes would begin with the v1 magic "
         "\"A2T1\" 0x01 (meta.steps 65, start_unix_s 50, elapsed_s {}) and read back as v1; "
         "write it as v1",
         r.meta.elapsed_s);
  return out;
}

std::string encode_v1(const Run& r, bool drop_branches) {
  if (r.has_branches() && !drop_branches)
    fail(A2PACK_E_INVALID_ARGUMENT,
         "v1 cannot store branch values; pass A2PACK_ENCODE_DROP_BRANCHES to drop them");
  if (r.meta.steps != r.size())
    fail(A2PACK_E_INVALID_ARGUMENT, "v1 needs meta.steps ({}) equal to the step count ({})",
         r.meta.steps, r.size());
  size_t engine_len = r.meta.engine ? r.meta.engine->size() : 0;
  if (engine_len > 0xFFFF)
    fail(A2PACK_E_INVALID_ARGUMENT, "v1 engine string is limited to 65535 bytes, got {}",
         engine_len);
  for (size_t i = 0; i < r.size(); ++i)
    if (r.moves[i] > 3)
      fail(A2PACK_E_INVALID_ARGUMENT, "step {}: move {} out of range (0..3)", i, r.moves[i]);
  const size_t n = r.size();
  std::string out;
  out.reserve(kV1HeaderSize + engine_len + 9 * n + 12);
  out.append(reinterpret_cast<const char*>(kV1Magic), 4);
  out.push_back(1);
  out.push_back(0);
  le::append(out, r.meta.steps);
  le::append(out, r.meta.start_unix_s);
  le::append(out, r.meta.elapsed_s);
  le::append(out, r.meta.max_score);
  le::append(out, r.meta.highest_tile);
  le::append(out, static_cast<uint16_t>(engine_len));
  if (engine_len) out.append(*r.meta.engine);
  out.append(reinterpret_cast<const char*>(r.boards.data()), 8 * n);
  le::append(out, r.final_board);
  out.append(reinterpret_cast<const char*>(r.moves.data()), n);
  le::append(out, crc32c::compute(out.data(), out.size()));
  return out;
}

}  // namespace a2pack::run
