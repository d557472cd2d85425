#include "dataset/npy.hpp"

#include <algorithm>
#include <cstring>
#include <vector>

#include "base/bytes.hpp"
#include "base/error.hpp"
#include "dataset/row.hpp"

namespace a2pack::dataset {

const char* const kStepDescr =
    "[('board', '<u8'), ('move', '|u1'), ('ev_legal', '|u1'), ('ev_values', '<f4', (4,)), "
    "('run_id', '<u4'), ('step_index', '<u2')]";

namespace {

constexpr uint8_t kMagic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
constexpr size_t kAlign = 64;               // numpy's ARRAY_ALIGN
constexpr size_t kGrowthDigits = 21;        // numpy's GROWTH_AXIS_MAX_DIGITS
constexpr uint64_t kMaxHeader = 1u << 20;   // far above anything a writer produces

// ------------------------------------------------------------ header dict
// The header is a Python literal. This reads the subset numpy writes: dicts,
// lists, tuples, quoted strings, integers, True/False/None.
struct PyVal {
  enum Kind { str, integer, boolean, none, list, tuple, dict } kind = none;
  std::string s;
  uint64_t i = 0;
  bool negative = false;
  bool b = false;
  std::vector<PyVal> items;
  // A dict: keys[k] maps to items[k]. (Not a vector of pair<string, PyVal>:
  // pair needs PyVal complete here, which only libstdc++ lets pass.)
  std::vector<std::string> keys;
};

class Parser {
 public:
  Parser(const char* p, size_t n, const std::string& path) : p_(p), end_(p + n), path_(path) {}

  PyVal parse_all() {
    PyVal v = value(0);
    skip();
    if (p_ != end_) bad("unexpected text after the header dict");
    return v;
  }

 private:
  [[noreturn]] void bad(const char* what) {
    fail(A2PACK_E_CORRUPT, "{}: NPY header: {} at header byte {}", path_, what,
         static_cast<size_t>(p_ - start_));
  }
  void skip() {
    while (p_ != end_ && (*p_ == ' ' || *p_ == '\t' || *p_ == '\n' || *p_ == '\r')) ++p_;
  }
  bool eat(char c) {
    skip();
    if (p_ != end_ && *p_ == c) {
      ++p_;
      return true;
    }
    return false;
  }
  bool word(const char* w) {
    size_t n = std::strlen(w);
    if (static_cast<size_t>(end_ - p_) >= n && std::memcmp(p_, w, n) == 0) {
      p_ += n;
      return true;
    }
    return false;
  }

  // Items up to `close`, with Python's optional trailing comma.
  void sequence(char close, std::vector<PyVal>& out, int depth) {
    if (eat(close)) return;
    for (;;) {
      out.push_back(value(depth + 1));
      if (eat(close)) return;
      if (!eat(',')) bad("expected ',' in a list or tuple");
      if (eat(close)) return;
    }
  }

  PyVal value(int depth) {
    if (depth > 16) bad("nesting too deep");
    skip();
    if (p_ == end_) bad("unexpected end");
    PyVal v;
    char c = *p_;
    if (c == '{') {
      ++p_;
      v.kind = PyVal::dict;
      if (eat('}')) return v;
      for (;;) {
        PyVal k = value(depth + 1);
        if (k.kind != PyVal::str) bad("a dict key is not a string");
        if (!eat(':')) bad("expected ':' after a dict key");
        v.keys.push_back(std::move(k.s));
        v.items.push_back(value(depth + 1));
        if (eat('}')) return v;
        if (!eat(',')) bad("expected ',' in the dict");
        if (eat('}')) return v;
      }
    }
    if (c == '[' || c == '(') {
      ++p_;
      v.kind = c == '[' ? PyVal::list : PyVal::tuple;
      sequence(c == '[' ? ']' : ')', v.items, depth);
      return v;
    }
    if (c == '\'' || c == '"') {
      ++p_;
      v.kind = PyVal::str;
      while (p_ != end_ && *p_ != c) {
        if (*p_ == '\\') bad("escapes in strings are not part of a step dtype");
        v.s.push_back(*p_++);
      }
      if (p_ == end_) bad("unterminated string");
      ++p_;
      return v;
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
      v.kind = PyVal::integer;
      if (c == '-') {
        v.negative = true;
        ++p_;
      }
      if (p_ == end_ || *p_ < '0' || *p_ > '9') bad("expected a digit");
      while (p_ != end_ && *p_ >= '0' && *p_ <= '9') {
        uint64_t d = static_cast<uint64_t>(*p_ - '0');
        if (v.i > (UINT64_MAX - d) / 10) bad("integer too large");
        v.i = v.i * 10 + d;
        ++p_;
      }
      if (p_ != end_ && *p_ == 'L') ++p_;  // Python 2 era writers
      return v;
    }
    if (word("True")) { v.kind = PyVal::boolean; v.b = true; return v; }
    if (word("False")) { v.kind = PyVal::boolean; v.b = false; return v; }
    if (word("None")) { v.kind = PyVal::none; return v; }
    bad("unexpected character");
  }

  const char* p_;
  const char* end_;
  const char* start_ = p_;
  const std::string& path_;
};

std::string repr(const PyVal& v) {
  switch (v.kind) {
    case PyVal::str: return "'" + v.s + "'";
    // fmt, not "-" + std::to_string(): GCC 12 warns (-Wrestrict, a false
    // positive) on operator+(const char*, string&&).
    case PyVal::integer: return fmt::format("{}{}", v.negative ? "-" : "", v.i);
    case PyVal::boolean: return v.b ? "True" : "False";
    case PyVal::none: return "None";
    case PyVal::list:
    case PyVal::tuple: {
      std::string s = v.kind == PyVal::list ? "[" : "(";
      for (size_t k = 0; k < v.items.size(); ++k) s += (k ? ", " : "") + repr(v.items[k]);
      if (v.kind == PyVal::tuple && v.items.size() == 1) s += ",";
      return s + (v.kind == PyVal::list ? "]" : ")");
    }
    case PyVal::dict: {
      std::string s = "{";
      for (size_t k = 0; k < v.keys.size(); ++k)
        s += (k ? ", '" : "'") + v.keys[k] + "': " + repr(v.items[k]);
      return s + "}";
    }
  }
  return "?";
}

// A one-byte type has no byte order: numpy writes '|u1', npyz and
// hand-written headers use 'u1' or '<u1'.
bool same_type(const std::string& got, const char* want) {
  if (got == want) return true;
  if (std::strcmp(want, "|u1") == 0) return got == "u1" || got == "<u1" || got == "=u1" || got == ">u1";
  return false;
}

void check_descr(const PyVal& d, const std::string& path) {
  auto wrong = [&](const std::string& why) {
    fail(A2PACK_E_UNSUPPORTED, "{}: not the a2pack step dtype ({}): found {}, expected {}", path,
         why, repr(d), kStepDescr);
  };
  if (d.kind != PyVal::list) wrong("not a structured dtype");
  struct Want {
    const char* name;
    const char* type;
    int count;  // 0: scalar, else a (count,) subarray
  };
  static const Want kWant[6] = {{"board", "<u8", 0},    {"move", "|u1", 0},
                                {"ev_legal", "|u1", 0}, {"ev_values", "<f4", 4},
                                {"run_id", "<u4", 0},   {"step_index", "<u2", 0}};
  if (d.items.size() != 6) wrong(std::to_string(d.items.size()) + " fields instead of 6");
  for (size_t k = 0; k < 6; ++k) {
    const PyVal& f = d.items[k];
    const Want& w = kWant[k];
    if (f.kind != PyVal::tuple || f.items.size() < 2 || f.items.size() > 3 ||
        f.items[0].kind != PyVal::str || f.items[1].kind != PyVal::str)
      wrong(fmt::format("field {} is malformed", k));
    if (f.items[0].s != w.name)
      wrong(fmt::format("field {} is named '{}', expected '{}'", k, f.items[0].s, w.name));
    if (!same_type(f.items[1].s, w.type))
      wrong(fmt::format("field '{}' has type '{}', expected '{}'", w.name, f.items[1].s, w.type));
    bool has_shape = f.items.size() == 3;
    if (w.count == 0 && has_shape) {
      const PyVal& s = f.items[2];
      bool scalar = s.kind == PyVal::tuple && s.items.empty();
      if (!scalar) wrong(fmt::format("field '{}' has a shape, expected a scalar", w.name));
    }
    if (w.count != 0) {
      const PyVal* s = has_shape ? &f.items[2] : nullptr;
      bool ok = s && ((s->kind == PyVal::tuple && s->items.size() == 1 &&
                       s->items[0].kind == PyVal::integer && !s->items[0].negative &&
                       s->items[0].i == static_cast<uint64_t>(w.count)) ||
                      (s->kind == PyVal::integer && !s->negative &&
                       s->i == static_cast<uint64_t>(w.count)));
      if (!ok) wrong(fmt::format("field '{}' must have shape ({},)", w.name, w.count));
    }
  }
}

}  // namespace

std::string npy_header(uint64_t rows) {
  // numpy: "{'descr': ..., 'fortran_order': False, 'shape': (N,), }" plus
  // GROWTH_AXIS_MAX_DIGITS - len(repr(N)) spaces, then spaces and a newline up
  // to the 64-byte alignment.
  std::string n = std::to_string(rows);
  std::string dict = std::string("{'descr': ") + kStepDescr +
                     ", 'fortran_order': False, 'shape': (" + n + ",), }";
  if (n.size() < kGrowthDigits) dict.append(kGrowthDigits - n.size(), ' ');
  size_t hlen = dict.size() + 1;  // + '\n'
  size_t pad = kAlign - ((sizeof kMagic + 2 + 2 + hlen) % kAlign);
  if (pad == kAlign) pad = 0;
  dict.append(pad, ' ');
  dict.push_back('\n');
  std::string out(reinterpret_cast<const char*>(kMagic), sizeof kMagic);
  out.push_back('\x01');
  out.push_back('\x00');
  le::append<uint16_t>(out, static_cast<uint16_t>(dict.size()));
  return out + dict;
}

size_t npy_header_size() {
  static const size_t n = npy_header(0).size();
  return n;
}

uint64_t npy_header_length(const uint8_t* d, size_t len, uint64_t file_size,
                           const std::string& path) {
  if (file_size < 10 || len < 10)
    fail(A2PACK_E_CORRUPT, "{}: {} bytes is too short for an NPY file (truncated?)", path,
         file_size);
  if (std::memcmp(d, kMagic, sizeof kMagic) != 0)
    fail(A2PACK_E_CORRUPT, "{}: not an NPY file (bad magic; expected \\x93NUMPY)", path);
  int major = d[6];
  uint64_t total;
  if (major == 1) {
    total = 10 + le::load<uint16_t>(d + 8);
  } else if (major == 2 || major == 3) {
    if (len < 12 || file_size < 12)
      fail(A2PACK_E_CORRUPT, "{}: truncated NPY {}.0 header", path, major);
    total = 12 + static_cast<uint64_t>(le::load<uint32_t>(d + 8));
  } else {
    fail(A2PACK_E_UNSUPPORTED, "{}: NPY format version {}.{} is not supported (1.0 to 3.0)", path,
         major, d[7]);
  }
  if (total > kMaxHeader)
    fail(A2PACK_E_CORRUPT, "{}: NPY header claims {} bytes (limit {})", path, total, kMaxHeader);
  if (total > file_size)
    fail(A2PACK_E_CORRUPT, "{}: NPY header of {} bytes runs past the end of the {}-byte file",
         path, total, file_size);
  return total;
}

NpyInfo parse_npy_header(const uint8_t* d, size_t len, uint64_t file_size,
                         const std::string& path, bool allow_tail) {
  uint64_t total = npy_header_length(d, len, file_size, path);
  if (len < total) fail(A2PACK_E_INTERNAL, "{}: header buffer too short", path);
  NpyInfo info;
  info.version = d[6];
  size_t dict_start = info.version == 1 ? 10 : 12;
  Parser parser(reinterpret_cast<const char*>(d + dict_start), total - dict_start, path);
  PyVal h = parser.parse_all();
  if (h.kind != PyVal::dict) fail(A2PACK_E_CORRUPT, "{}: NPY header is not a dict", path);
  const PyVal *descr = nullptr, *fortran = nullptr, *shape = nullptr;
  for (size_t i = 0; i < h.keys.size(); ++i) {
    const std::string& k = h.keys[i];
    const PyVal& v = h.items[i];
    if (k == "descr") descr = &v;
    else if (k == "fortran_order") fortran = &v;
    else if (k == "shape") shape = &v;
    else fail(A2PACK_E_CORRUPT, "{}: NPY header has an unknown key '{}'", path, k);
  }
  if (!descr || !fortran || !shape)
    fail(A2PACK_E_CORRUPT, "{}: NPY header lacks '{}'", path,
         !descr ? "descr" : !fortran ? "fortran_order" : "shape");
  check_descr(*descr, path);
  if (fortran->kind != PyVal::boolean || fortran->b)
    fail(A2PACK_E_UNSUPPORTED, "{}: fortran_order must be False, found {}", path, repr(*fortran));
  if (shape->kind != PyVal::tuple || shape->items.size() != 1 ||
      shape->items[0].kind != PyVal::integer || shape->items[0].negative)
    fail(A2PACK_E_UNSUPPORTED, "{}: shape must be (N,), found {}", path, repr(*shape));
  info.rows = shape->items[0].i;
  info.data_offset = total;
  uint64_t avail = file_size - total;
  if (allow_tail && info.rows <= avail / kRowBytes) {
    info.tail_bytes = avail - info.rows * kRowBytes;
    return info;
  }
  if (info.rows > avail / kRowBytes || avail != info.rows * kRowBytes) {
    if (info.rows > avail / kRowBytes)
      fail(A2PACK_E_CORRUPT,
           "{}: truncated: the header says {} rows ({} bytes of data after the {}-byte header) "
           "but the file holds {} bytes there",
           path, info.rows, info.rows <= UINT64_MAX / kRowBytes ? info.rows * kRowBytes : UINT64_MAX,
           total, avail);
    fail(A2PACK_E_CORRUPT,
         "{}: {} unexpected bytes after the {} rows the header declares (file {} bytes)", path,
         avail - info.rows * kRowBytes, info.rows, file_size);
  }
  return info;
}

NpyInfo read_npy_info(const ReadFd& f, bool allow_tail) {
  uint64_t size = f.size();
  std::vector<uint8_t> head(static_cast<size_t>(std::min<uint64_t>(size, 4096)));
  if (!head.empty()) f.pread_exact(head.data(), head.size(), 0);
  uint64_t total = npy_header_length(head.data(), head.size(), size, f.path());
  if (total > head.size()) {
    head.resize(static_cast<size_t>(total));
    f.pread_exact(head.data(), head.size(), 0);
  }
  return parse_npy_header(head.data(), head.size(), size, f.path(), allow_tail);
}

}  // namespace a2pack::dataset
