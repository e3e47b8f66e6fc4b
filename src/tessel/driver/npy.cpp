#include "tessel/driver/npy.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "tessel/support/error.h"

namespace tessel {

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;

// ---- UTF-8 <-> code points -------------------------------------------------

// Decodes UTF-8 leniently: a malformed byte becomes U+FFFD, so that any
// std::string a model produces can be written.
std::vector<uint32_t> utf8_to_cps(const std::string& s) {
  std::vector<uint32_t> out;
  size_t i = 0;
  while (i < s.size()) {
    const auto b0 = static_cast<uint8_t>(s[i]);
    int len = 0;
    uint32_t cp = 0;
    if (b0 < 0x80) {
      len = 1, cp = b0;
    } else if ((b0 & 0xE0) == 0xC0) {
      len = 2, cp = b0 & 0x1F;
    } else if ((b0 & 0xF0) == 0xE0) {
      len = 3, cp = b0 & 0x0F;
    } else if ((b0 & 0xF8) == 0xF0) {
      len = 4, cp = b0 & 0x07;
    }
    bool ok = len > 0 && i + static_cast<size_t>(len) <= s.size();
    for (int k = 1; ok && k < len; ++k) {
      const auto b = static_cast<uint8_t>(s[i + static_cast<size_t>(k)]);
      if ((b & 0xC0) != 0x80) ok = false;
      cp = (cp << 6) | (b & 0x3F);
    }
    if (ok) {
      static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
      if (cp < kMin[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) ok = false;
    }
    if (!ok) {
      out.push_back(0xFFFD);
      ++i;
      continue;
    }
    out.push_back(cp);
    i += static_cast<size_t>(len);
  }
  return out;
}

void append_utf8(std::string* s, uint32_t cp) {
  if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) cp = 0xFFFD;
  if (cp < 0x80) {
    s->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    s->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    s->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    s->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    s->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    s->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    s->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    s->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    s->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    s->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

// ---- header ----------------------------------------------------------------

struct Header {
  std::string descr;
  bool fortran = false;
  std::vector<int64_t> shape;
};

// A parser for the Python dict literal of an .npy header.
class HeaderParser {
 public:
  explicit HeaderParser(const std::string& s) : s_(s) {}

  Header parse() {
    Header h;
    bool have_descr = false, have_order = false, have_shape = false;
    expect('{');
    while (true) {
      ws();
      if (peek() == '}') break;
      const std::string key = str();
      expect(':');
      ws();
      if (key == "descr") {
        if (peek() == '[') fail("npy header: structured dtypes are not supported");
        h.descr = str();
        have_descr = true;
      } else if (key == "fortran_order") {
        h.fortran = boolean();
        have_order = true;
      } else if (key == "shape") {
        h.shape = tuple();
        have_shape = true;
      } else {
        fail("npy header: unexpected key '", key, "'");
      }
      ws();
      if (peek() == ',') {
        ++i_;
        continue;
      }
      ws();
      if (peek() != '}') fail("npy header: expected ',' or '}' at offset ", i_);
    }
    TS_CHECK(have_descr && have_order && have_shape, "npy header: needs 'descr', 'fortran_order' and 'shape'");
    return h;
  }

 private:
  char peek() const { return i_ < s_.size() ? s_[i_] : '\0'; }
  void ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) ++i_;
  }
  void expect(char c) {
    ws();
    TS_CHECK(peek() == c, "npy header: expected '", c, "' at offset ", i_);
    ++i_;
  }
  std::string str() {
    ws();
    const char q = peek();
    TS_CHECK(q == '\'' || q == '"', "npy header: expected a string at offset ", i_);
    ++i_;
    std::string out;
    while (i_ < s_.size() && s_[i_] != q) out.push_back(s_[i_++]);
    TS_CHECK(i_ < s_.size(), "npy header: unterminated string");
    ++i_;
    return out;
  }
  bool boolean() {
    if (s_.compare(i_, 4, "True") == 0) {
      i_ += 4;
      return true;
    }
    if (s_.compare(i_, 5, "False") == 0) {
      i_ += 5;
      return false;
    }
    fail("npy header: expected True or False at offset ", i_);
  }
  std::vector<int64_t> tuple() {
    expect('(');
    std::vector<int64_t> out;
    while (true) {
      ws();
      if (peek() == ')') {
        ++i_;
        break;
      }
      TS_CHECK(peek() >= '0' && peek() <= '9', "npy header: expected a dimension at offset ", i_);
      int64_t v = 0;
      while (peek() >= '0' && peek() <= '9') {
        v = checked_add(checked_mul(v, 10), peek() - '0');
        ++i_;
      }
      if (peek() == 'L') ++i_;  // Python 2 long
      out.push_back(v);
      TS_CHECK(out.size() <= 64, "npy header: too many dimensions");
      ws();
      if (peek() == ',') {
        ++i_;
      } else {
        TS_CHECK(peek() == ')', "npy header: expected ',' or ')' at offset ", i_);
      }
    }
    return out;
  }

  const std::string& s_;
  size_t i_ = 0;
};

// A parsed descr: byte order, kind and item size.
struct Descr {
  char order = '<';  // '<', '>', '|'
  char kind = 'f';   // f i u b U S V
  int64_t size = 0;  // bytes per item (for U: bytes, i.e. 4 * chars)
};

Descr parse_descr(const std::string& d) {
  TS_CHECK(!d.empty(), "npy header: empty descr");
  Descr out;
  size_t i = 0;
  if (d[0] == '<' || d[0] == '>' || d[0] == '|' || d[0] == '=') {
    out.order = d[0] == '=' ? '<' : d[0];
    i = 1;
  }
  TS_CHECK(i < d.size(), "npy: bad dtype '", d, "'");
  out.kind = d[i++];
  int64_t n = 0;
  bool digits = false;
  for (; i < d.size(); ++i) {
    TS_CHECK(d[i] >= '0' && d[i] <= '9', "npy: unsupported dtype '", d, "'");
    n = checked_add(checked_mul(n, 10), d[i] - '0');
    digits = true;
  }
  switch (out.kind) {
    case 'O':
      fail("npy: object arrays (pickled Python objects) are not supported");
    case 'c':
      fail("npy: complex dtype '", d, "' is not supported");
    case 'M':
    case 'm':
      fail("npy: datetime dtype '", d, "' is not supported");
    case 'f': case 'i': case 'u': case 'b': case 'S': case 'V':
      TS_CHECK(digits, "npy: bad dtype '", d, "'");
      out.size = n;
      break;
    case 'U':
      TS_CHECK(digits, "npy: bad dtype '", d, "'");
      out.size = checked_mul(n, 4);
      break;
    default:
      fail("npy: unsupported dtype '", d, "'");
  }
  return out;
}

// The tessel dtype of a NumPy-native descr; Undefined for V.
DType native_dtype(const Descr& d, const std::string& text) {
  auto bad = [&]() -> DType { fail("npy: unsupported dtype '", text, "'"); };
  switch (d.kind) {
    case 'f':
      if (d.size == 1) return DType::Undefined;  // ml_dtypes float8_e5m2 says '<f1'
      if (d.size == 2) return DType::F16;
      if (d.size == 4) return DType::F32;
      if (d.size == 8) return DType::F64;
      return bad();
    case 'i':
      if (d.size == 1) return DType::I8;
      if (d.size == 2) return DType::I16;
      if (d.size == 4) return DType::I32;
      if (d.size == 8) return DType::I64;
      return bad();
    case 'u':
      if (d.size == 1) return DType::U8;
      if (d.size == 2) return DType::U16;
      if (d.size == 4) return DType::U32;
      if (d.size == 8) return DType::U64;
      return bad();
    case 'b':
      if (d.size == 1) return DType::Bool;
      return bad();
    case 'U':
    case 'S':
      return DType::String;
    default:
      return DType::Undefined;
  }
}

// Checks that every stored byte of a raw 'V' array is a valid item of `t`
// and converts signed sub-byte items to tessel's storage. ml_dtypes keeps
// int4/int2 in the low bits with the high bits zero (-1 is 0x0F); tessel
// sign-extends (-1 is 0xFF). Both forms are accepted.
void import_raw(Tensor* t) {
  const DType dt = t->dtype();
  int bits = 8;
  bool is_signed = false;
  switch (dt) {
    case DType::U4: case DType::F4E2M1: bits = 4; break;
    case DType::U2: bits = 2; break;
    case DType::I4: bits = 4, is_signed = true; break;
    case DType::I2: bits = 2, is_signed = true; break;
    case DType::Bool: bits = 1; break;
    default: return;  // every bit pattern is a value
  }
  uint8_t* p = t->mutable_raw();
  const unsigned mask = (1u << bits) - 1;
  for (int64_t i = 0; i < t->numel(); ++i) {
    const unsigned b = p[i], low = b & mask, high = b >> bits;
    const bool negative = is_signed && (low >> (bits - 1)) != 0;
    const bool ok = high == 0 || (negative && high == (0xFFu >> bits));
    TS_CHECK(ok, "npy: element ", i, " (byte ", b, ") is not a valid ", dtype_name(dt), " value");
    p[i] = static_cast<uint8_t>(negative ? (low | ~mask) : low);
  }
}

// Converts the C-order position `ci` of `shape` into the position of the same
// element in Fortran order.
int64_t fortran_index(int64_t ci, const std::vector<int64_t>& shape) {
  int64_t fi = 0, stride = 1;
  std::vector<int64_t> idx(shape.size());
  for (size_t k = shape.size(); k-- > 0;) {
    idx[k] = ci % shape[k];
    ci /= shape[k];
  }
  for (size_t k = 0; k < shape.size(); ++k) {
    fi += idx[k] * stride;
    stride *= shape[k];
  }
  return fi;
}

void put_le(std::vector<uint8_t>* out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out->push_back(static_cast<uint8_t>(v >> (8 * i)));
}

}  // namespace

std::string npy_descr_for(DType t) {
  switch (t) {
    case DType::F32: return "<f4";
    case DType::F64: return "<f8";
    case DType::F16: return "<f2";
    case DType::I8: return "|i1";
    case DType::U8: return "|u1";
    case DType::I16: return "<i2";
    case DType::U16: return "<u2";
    case DType::I32: return "<i4";
    case DType::U32: return "<u4";
    case DType::I64: return "<i8";
    case DType::U64: return "<u8";
    case DType::Bool: return "|b1";
    case DType::String: return "<U";
    case DType::BF16: return "|V2";
    case DType::F8E4M3FN: case DType::F8E4M3FNUZ: case DType::F8E5M2: case DType::F8E5M2FNUZ:
    case DType::U4: case DType::I4: case DType::F4E2M1: case DType::F8E8M0: case DType::U2: case DType::I2:
      return "|V1";
    case DType::Undefined:
      break;
  }
  fail("npy: cannot write a tensor of dtype ", dtype_name(t));
}

std::vector<uint8_t> npy_encode(const Tensor& t) {
  TS_CHECK(t.defined(), "npy: cannot write an undefined tensor");
  std::string descr = npy_descr_for(t.dtype());
  std::vector<std::vector<uint32_t>> cps;
  int64_t width = 1;
  if (t.dtype() == DType::String) {
    cps.reserve(t.strings().size());
    for (const auto& s : t.strings()) {
      cps.push_back(utf8_to_cps(s));
      width = std::max<int64_t>(width, static_cast<int64_t>(cps.back().size()));
    }
    descr += std::to_string(width);
  }
  std::string shape = "(";
  for (size_t i = 0; i < t.rank(); ++i) {
    shape += std::to_string(t.shape()[i]);
    if (t.rank() == 1 || i + 1 < t.rank()) shape += t.rank() == 1 ? "," : ", ";
  }
  shape += ")";
  std::string header = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  // Pad so that the data starts at a multiple of 64 bytes, as NumPy does.
  size_t prefix = kMagicLen + 2 + 2;
  bool v2 = false;
  if (prefix + header.size() + 1 > 65535) {
    v2 = true;
    prefix = kMagicLen + 2 + 4;
  }
  const size_t total = (prefix + header.size() + 1 + 63) / 64 * 64;
  header.append(total - prefix - header.size() - 1, ' ');
  header.push_back('\n');

  std::vector<uint8_t> out(kMagic, kMagic + kMagicLen);
  out.push_back(v2 ? 2 : 1);
  out.push_back(0);
  put_le(&out, header.size(), v2 ? 4 : 2);
  out.insert(out.end(), header.begin(), header.end());
  if (t.dtype() == DType::String) {
    out.reserve(out.size() + cps.size() * static_cast<size_t>(width) * 4);
    for (const auto& s : cps) {
      for (uint32_t c : s) put_le(&out, c, 4);
      for (size_t k = s.size(); k < static_cast<size_t>(width); ++k) put_le(&out, 0, 4);
    }
  } else if (t.dtype() == DType::I4 || t.dtype() == DType::I2) {
    // ml_dtypes layout: the value bits only, high bits zero.
    const uint8_t mask = t.dtype() == DType::I4 ? 0x0F : 0x03;
    for (int64_t i = 0; i < t.numel(); ++i) out.push_back(t.raw()[i] & mask);
  } else {
    out.insert(out.end(), t.raw(), t.raw() + t.nbytes());
  }
  return out;
}

void write_npy_file(const std::string& path, const Tensor& t) {
  const std::vector<uint8_t> bytes = npy_encode(t);
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  TS_CHECK(f, "cannot open '", path, "' for writing: ", std::strerror(errno));
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  f.close();
  TS_CHECK(f, "error writing '", path, "'");
}

Tensor npy_decode(const uint8_t* data, size_t size, DType want) {
  TS_CHECK(size >= kMagicLen + 4 && std::memcmp(data, kMagic, kMagicLen) == 0,
           "not a NumPy .npy file (bad magic)");
  const int major = data[kMagicLen];
  TS_CHECK(major >= 1 && major <= 3, "npy: unsupported format version ", major, ".", int{data[kMagicLen + 1]});
  size_t pos = kMagicLen + 2;
  size_t hlen = 0;
  if (major == 1) {
    hlen = data[pos] | (size_t{data[pos + 1]} << 8);
    pos += 2;
  } else {
    TS_CHECK(size >= pos + 4, "npy: truncated header");
    hlen = data[pos] | (size_t{data[pos + 1]} << 8) | (size_t{data[pos + 2]} << 16) | (size_t{data[pos + 3]} << 24);
    pos += 4;
  }
  TS_CHECK(hlen <= size - pos, "npy: truncated header");
  const std::string text(reinterpret_cast<const char*>(data + pos), hlen);
  pos += hlen;
  const Header h = HeaderParser(text).parse();
  const Descr d = parse_descr(h.descr);
  const int64_t numel = checked_numel(h.shape);

  DType dt = native_dtype(d, h.descr);
  if (dt == DType::Undefined && d.kind == 'f') {  // one-byte float: some float8 type
    TS_CHECK(want != DType::Undefined && is_float(want) && dtype_storage_size(want) == 1, "npy: dtype '", h.descr,
             "' (a one-byte float) does not match the expected dtype ", dtype_name(want));
    dt = want;
  } else if (dt == DType::Undefined) {  // raw 'V'
    TS_CHECK(want != DType::Undefined, "npy: raw '", h.descr,
             "' data has no type of its own; it can only be read for a model input of a declared dtype");
    TS_CHECK(want != DType::String && dtype_storage_size(want) == d.size, "npy: dtype '", h.descr,
             "' does not match the expected dtype ", dtype_name(want), " (", npy_descr_for(want), ")");
    dt = want;
  } else if (want != DType::Undefined && dt != want) {
    fail("npy: dtype '", h.descr, "' (", dtype_name(dt), ") does not match the expected dtype ", dtype_name(want),
         " (", want == DType::String ? std::string("<U") : npy_descr_for(want), ")");
  }

  const int64_t nbytes = checked_mul(numel, d.size);
  const size_t avail = size - pos;
  TS_CHECK(static_cast<uint64_t>(nbytes) <= avail, "npy: truncated data (expected ", nbytes, " bytes, found ",
           avail, ")");
  TS_CHECK(static_cast<uint64_t>(nbytes) == avail, "npy: ", avail - static_cast<size_t>(nbytes),
           " unexpected bytes after the data");
  const uint8_t* src = data + pos;
  const bool swap = d.order == '>' && d.size > 1;

  Tensor t(dt, h.shape);
  auto src_index = [&](int64_t ci) { return h.fortran ? fortran_index(ci, h.shape) : ci; };
  if (dt == DType::String) {
    auto& strs = t.mutable_strings();
    for (int64_t i = 0; i < numel; ++i) {
      const uint8_t* item = src + src_index(i) * d.size;
      std::string s;
      if (d.kind == 'S') {
        int64_t n = d.size;
        while (n > 0 && item[n - 1] == 0) --n;
        s.assign(reinterpret_cast<const char*>(item), static_cast<size_t>(n));
      } else {
        const int64_t chars = d.size / 4;
        std::vector<uint32_t> cps;
        for (int64_t k = 0; k < chars; ++k) {
          const uint8_t* c = item + 4 * k;
          cps.push_back(d.order == '>' ? (uint32_t{c[0]} << 24 | uint32_t{c[1]} << 16 | uint32_t{c[2]} << 8 | c[3])
                                       : (uint32_t{c[3]} << 24 | uint32_t{c[2]} << 16 | uint32_t{c[1]} << 8 | c[0]));
        }
        while (!cps.empty() && cps.back() == 0) cps.pop_back();
        for (uint32_t c : cps) append_utf8(&s, c);
      }
      strs[static_cast<size_t>(i)] = std::move(s);
    }
    return t;
  }
  uint8_t* dst = t.mutable_raw();
  const auto isz = static_cast<size_t>(d.size);
  if (!h.fortran && !swap) {
    if (nbytes > 0) std::memcpy(dst, src, static_cast<size_t>(nbytes));
  } else {
    for (int64_t i = 0; i < numel; ++i) {
      const uint8_t* item = src + src_index(i) * d.size;
      uint8_t* o = dst + static_cast<size_t>(i) * isz;
      for (size_t k = 0; k < isz; ++k) o[k] = swap ? item[isz - 1 - k] : item[k];
    }
  }
  if (d.kind == 'V' || dt == DType::Bool) import_raw(&t);
  return t;
}

Tensor read_npy_file(const std::string& path, DType want) {
  std::error_code ec;
  TS_CHECK(!std::filesystem::is_directory(path, ec), "'", path, "' is a directory, not an .npy file");
  std::ifstream f(path, std::ios::binary);
  TS_CHECK(f, "cannot open '", path, "': ", std::strerror(errno));
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  TS_CHECK(!f.bad(), "error reading '", path, "'");
  return npy_decode(bytes.data(), bytes.size(), want);
}

}  // namespace tessel
