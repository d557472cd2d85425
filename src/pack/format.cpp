#include "pack/format.hpp"

#include <cstring>

#include "base/bytes.hpp"
#include "base/crc32c.hpp"
#include "base/error.hpp"
#include "base/varint.hpp"

namespace a2pack::pack {

void encode_header(const Header& h, uint8_t* out) {
  std::memcpy(out, kMagic, 8);
  le::store(out + 8, h.version);
  le::store(out + 12, h.flags);
  le::store(out + 16, h.count);
  le::store(out + 24, crc32c::compute(out, 24));
}

void encode_entry(const Entry& e, uint8_t* out) {
  le::store(out, e.offset);
  le::store(out + 8, e.length);
  le::store(out + 12, e.kind);
  le::store(out + 14, e.flags);
  le::store(out + 16, e.crc);
  le::store(out + 20, e.reserved);
  std::memset(out + 24, 0, 8);
}

void encode_footer(const Footer& f, uint8_t* out) {
  le::store(out, f.data_end);
  le::store(out + 8, f.index_crc);
  le::store(out + 12, f.data_crc);
  le::store(out + 16, f.stats_offset);
  le::store(out + 24, crc32c::compute(out, 24));
  std::memset(out + 28, 0, 4);
}

Entry decode_entry(const uint8_t* in) {
  Entry e;
  e.offset = le::load<uint64_t>(in);
  e.length = le::load<uint32_t>(in + 8);
  e.kind = le::load<uint16_t>(in + 12);
  e.flags = le::load<uint16_t>(in + 14);
  e.crc = le::load<uint32_t>(in + 16);
  e.reserved = le::load<uint32_t>(in + 20);
  return e;
}

std::string encode_stats_block(const StatsBlock& s) {
  std::string body;
  varint::append(body, s.count);
  varint::append(body, s.total_steps);
  varint::append(body, s.min_len);
  varint::append(body, s.max_len);
  le::append(body, s.mean_len);  // postcard f64: 8 raw little-endian bytes
  varint::append(body, s.p50);
  varint::append(body, s.p90);
  varint::append(body, s.p99);
  std::string out;
  le::append(out, static_cast<uint32_t>(body.size()));
  return out + body;
}

namespace {
template <unsigned Bits>
uint64_t read_varint(const uint8_t*& p, const uint8_t* begin, const uint8_t* end, uint64_t base,
                     const char* field) {
  uint64_t v = 0;
  const uint8_t* start = p;
  switch (varint::read<Bits>(p, end, v)) {
    case varint::Result::ok: return v;
    case varint::Result::truncated:
      fail(A2PACK_E_CORRUPT, "offset {}: stats block: truncated varint in {}",
           base + static_cast<uint64_t>(start - begin), field);
    case varint::Result::overlong:
      fail(A2PACK_E_CORRUPT, "offset {}: stats block: varint in {} overflows u{}",
           base + static_cast<uint64_t>(start - begin), field, Bits);
  }
  return 0;
}
}  // namespace

StatsBlock decode_stats_block(const uint8_t* data, size_t len, uint64_t offset) {
  const uint8_t* p = data;
  const uint8_t* end = data + len;
  StatsBlock s;
  s.count = read_varint<64>(p, data, end, offset, "count");
  s.total_steps = read_varint<64>(p, data, end, offset, "total_steps");
  s.min_len = static_cast<uint32_t>(read_varint<32>(p, data, end, offset, "min_len"));
  s.max_len = static_cast<uint32_t>(read_varint<32>(p, data, end, offset, "max_len"));
  if (end - p < 8)
    fail(A2PACK_E_CORRUPT, "offset {}: stats block: truncated f64 mean_len",
         offset + static_cast<uint64_t>(p - data));
  s.mean_len = le::load<double>(p);
  p += 8;
  s.p50 = static_cast<uint32_t>(read_varint<32>(p, data, end, offset, "p50"));
  s.p90 = static_cast<uint32_t>(read_varint<32>(p, data, end, offset, "p90"));
  s.p99 = static_cast<uint32_t>(read_varint<32>(p, data, end, offset, "p99"));
  if (p != end)
    fail(A2PACK_E_CORRUPT, "offset {}: stats block: {} trailing bytes after the postcard value",
         offset + static_cast<uint64_t>(p - data), end - p);
  return s;
}

}  // namespace a2pack::pack
