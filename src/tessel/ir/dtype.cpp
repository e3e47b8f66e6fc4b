#include "tessel/ir/dtype.h"

#include <array>
#include <cmath>
#include <cstring>
#include <limits>

namespace tessel {

namespace {

struct DTypeInfo {
  DType t;
  const char* name;
  int size;
};

constexpr DTypeInfo kInfos[] = {
    {DType::F32, "f32", 4},        {DType::U8, "u8", 1},
    {DType::I8, "i8", 1},          {DType::U16, "u16", 2},
    {DType::I16, "i16", 2},        {DType::I32, "i32", 4},
    {DType::I64, "i64", 8},        {DType::String, "str", 0},
    {DType::Bool, "bool", 1},      {DType::F16, "f16", 2},
    {DType::F64, "f64", 8},        {DType::U32, "u32", 4},
    {DType::U64, "u64", 8},        {DType::BF16, "bf16", 2},
    {DType::F8E4M3FN, "f8e4m3fn", 1}, {DType::F8E4M3FNUZ, "f8e4m3fnuz", 1},
    {DType::F8E5M2, "f8e5m2", 1},  {DType::F8E5M2FNUZ, "f8e5m2fnuz", 1},
    {DType::U4, "u4", 1},          {DType::I4, "i4", 1},
    {DType::F4E2M1, "f4e2m1", 1},  {DType::F8E8M0, "f8e8m0", 1},
    {DType::U2, "u2", 1},          {DType::I2, "i2", 1},
};

const DTypeInfo* info(DType t) {
  for (const auto& i : kInfos)
    if (i.t == t) return &i;
  return nullptr;
}

}  // namespace

std::string_view dtype_name(DType t) {
  const DTypeInfo* i = info(t);
  return i ? i->name : "undefined";
}

bool dtype_from_name(std::string_view name, DType* out) {
  for (const auto& i : kInfos)
    if (name == i.name) {
      *out = i.t;
      return true;
    }
  return false;
}

bool dtype_from_onnx(int code, DType* out) {
  const DTypeInfo* i = info(static_cast<DType>(code));
  if (code <= 0 || code > 255 || !i) return false;
  *out = i->t;
  return true;
}

int dtype_storage_size(DType t) {
  const DTypeInfo* i = info(t);
  return i ? i->size : 0;
}

bool is_float(DType t) {
  switch (t) {
    case DType::F32: case DType::F16: case DType::F64: case DType::BF16:
    case DType::F8E4M3FN: case DType::F8E4M3FNUZ: case DType::F8E5M2:
    case DType::F8E5M2FNUZ: case DType::F4E2M1: case DType::F8E8M0:
      return true;
    default:
      return false;
  }
}

bool is_signed_int(DType t) {
  return t == DType::I8 || t == DType::I16 || t == DType::I32 || t == DType::I64 ||
         t == DType::I4 || t == DType::I2;
}

bool is_unsigned_int(DType t) {
  return t == DType::U8 || t == DType::U16 || t == DType::U32 || t == DType::U64 ||
         t == DType::U4 || t == DType::U2;
}

int int_bits(DType t) {
  switch (t) {
    case DType::I2: case DType::U2: return 2;
    case DType::I4: case DType::U4: return 4;
    case DType::I8: case DType::U8: return 8;
    case DType::I16: case DType::U16: return 16;
    case DType::I32: case DType::U32: return 32;
    case DType::I64: case DType::U64: return 64;
    default: return 0;
  }
}

// ---- f16 / bf16 -----------------------------------------------------------

uint16_t f32_to_f16_bits(float v) {
  _Float16 h = static_cast<_Float16>(v);  // g++ rounds to nearest even
  uint16_t b;
  std::memcpy(&b, &h, 2);
  return b;
}

float f16_bits_to_f32(uint16_t b) {
  _Float16 h;
  std::memcpy(&h, &b, 2);
  return static_cast<float>(h);
}

uint16_t f32_to_bf16_bits(float v) {
  uint32_t u;
  std::memcpy(&u, &v, 4);
  if (std::isnan(v)) return static_cast<uint16_t>((u >> 16) | 0x40);  // keep it a NaN
  uint32_t rounding = 0x7FFF + ((u >> 16) & 1);  // round to nearest even
  return static_cast<uint16_t>((u + rounding) >> 16);
}

float bf16_bits_to_f32(uint16_t b) {
  uint32_t u = static_cast<uint32_t>(b) << 16;
  float v;
  std::memcpy(&v, &u, 4);
  return v;
}

// ---- float8 / float4 --------------------------------------------------------
//
// Small formats are decoded through a table of all bit patterns; encoding
// picks the nearest finite pattern with ties to the even pattern, which is
// exact round-to-nearest-even for these monotone encodings.

namespace {

struct SmallFloat {
  int exp_bits, man_bits, bias;
  bool has_inf;     // E5M2 only
  bool nan_all_ones_mantissa;  // E4M3FN: S.1111.111 is NaN
  bool uz;          // FNUZ: 0x80 is the single NaN, no negative zero
};

SmallFloat format_of(DType t) {
  switch (t) {
    case DType::F8E4M3FN: return {4, 3, 7, false, true, false};
    case DType::F8E4M3FNUZ: return {4, 3, 8, false, false, true};
    case DType::F8E5M2: return {5, 2, 15, true, false, false};
    case DType::F8E5M2FNUZ: return {5, 2, 16, false, false, true};
    case DType::F4E2M1: return {2, 1, 1, false, false, false};
    default: return {0, 0, 0, false, false, false};
  }
}

double decode_small(const SmallFloat& f, uint8_t b) {
  const int total = 1 + f.exp_bits + f.man_bits;
  b &= static_cast<uint8_t>((1u << total) - 1);
  const uint8_t sign_bit = static_cast<uint8_t>(1u << (total - 1));
  if (f.uz && b == sign_bit) return std::numeric_limits<double>::quiet_NaN();
  const bool neg = b & sign_bit;
  const int e = (b >> f.man_bits) & ((1 << f.exp_bits) - 1);
  const int m = b & ((1 << f.man_bits) - 1);
  const int emax = (1 << f.exp_bits) - 1;
  if (f.has_inf && e == emax) {
    if (m == 0) return neg ? -INFINITY : INFINITY;
    return std::numeric_limits<double>::quiet_NaN();
  }
  if (f.nan_all_ones_mantissa && e == emax && m == (1 << f.man_bits) - 1)
    return std::numeric_limits<double>::quiet_NaN();
  double v = e == 0 ? std::ldexp(m, 1 - f.bias - f.man_bits)
                    : std::ldexp((1 << f.man_bits) + m, e - f.bias - f.man_bits);
  return neg ? -v : v;
}

struct EncodeTable {
  // Non-negative finite patterns in increasing value order.
  std::array<uint8_t, 128> pats;
  std::array<double, 128> vals;
  int n = 0;
};

EncodeTable build_table(const SmallFloat& f) {
  EncodeTable t;
  const int total = 1 + f.exp_bits + f.man_bits;
  for (int b = 0; b < (1 << (total - 1)); ++b) {
    double v = decode_small(f, static_cast<uint8_t>(b));
    if (!std::isfinite(v)) continue;
    t.pats[t.n] = static_cast<uint8_t>(b);
    t.vals[t.n] = v;
    ++t.n;
  }
  return t;
}

uint8_t encode_small(const SmallFloat& f, const EncodeTable& t, double v, bool saturate) {
  const int total = 1 + f.exp_bits + f.man_bits;
  const uint8_t sign_bit = static_cast<uint8_t>(1u << (total - 1));
  // Positive quiet NaN pattern (S=0, all other bits set); FNUZ has only 0x80.
  const uint8_t nan = f.uz ? sign_bit : static_cast<uint8_t>((1u << (total - 1)) - 1);
  const bool neg = std::signbit(v);
  if (std::isnan(v)) return f.uz ? nan : static_cast<uint8_t>((neg ? sign_bit : 0) | nan);
  const double a = std::fabs(v);
  const uint8_t sign = neg ? sign_bit : 0;
  const double max = t.vals[t.n - 1];
  const uint8_t inf_pat = static_cast<uint8_t>(((1u << f.exp_bits) - 1) << f.man_bits);
  // Out of range: the largest finite value when saturating (ONNX Cast-19
  // maps ±inf there too), else ±inf where the format has it, else NaN (signed
  // for E4M3FN, the single 0x80 for FNUZ).
  auto overflow = [&]() -> uint8_t {
    if (saturate) return sign | t.pats[t.n - 1];
    if (f.has_inf) return sign | inf_pat;
    return f.uz ? nan : static_cast<uint8_t>(sign | nan);
  };
  if (std::isinf(a)) return overflow();
  // Values beyond max round to max only when within half an ulp of it.
  const double ulp_top = max - t.vals[t.n - 2];
  if (a >= max + ulp_top / 2 && !(a == max + ulp_top / 2 && (t.pats[t.n - 1] & 1) == 0))
    return overflow();
  int lo = 0;
  while (lo + 1 < t.n && t.vals[lo + 1] <= a) ++lo;
  uint8_t pat = t.pats[lo];
  if (lo + 1 < t.n && t.vals[lo] != a) {
    const double dlo = a - t.vals[lo], dhi = t.vals[lo + 1] - a;
    if (dhi < dlo || (dhi == dlo && (t.pats[lo + 1] & 1) == 0)) pat = t.pats[lo + 1];
  } else if (lo + 1 == t.n && a > max) {
    pat = t.pats[t.n - 1];
  }
  if (pat == 0 && f.uz) return 0;  // FNUZ has no negative zero
  return sign | pat;
}

const EncodeTable& table_for(DType t) {
  static const EncodeTable e4m3fn = build_table(format_of(DType::F8E4M3FN));
  static const EncodeTable e4m3fnuz = build_table(format_of(DType::F8E4M3FNUZ));
  static const EncodeTable e5m2 = build_table(format_of(DType::F8E5M2));
  static const EncodeTable e5m2fnuz = build_table(format_of(DType::F8E5M2FNUZ));
  static const EncodeTable f4 = build_table(format_of(DType::F4E2M1));
  switch (t) {
    case DType::F8E4M3FN: return e4m3fn;
    case DType::F8E4M3FNUZ: return e4m3fnuz;
    case DType::F8E5M2: return e5m2;
    case DType::F8E5M2FNUZ: return e5m2fnuz;
    default: return f4;
  }
}

}  // namespace

uint8_t double_to_f8_bits(DType t, double v, bool saturate) {
  if (t == DType::F8E8M0) {
    // Exponent-only format 2^(b-127), 0xFF = NaN. Follows ONNX Cast's default
    // round_mode "up" on the float32 bits of v: the exponent field is bumped
    // when any mantissa bit is set; NaN/inf give 0xFF; the sign is ignored;
    // saturation stops at 0xFE. (Cast itself also implements down/nearest.)
    const float f = static_cast<float>(v);
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    uint32_t e = (bits >> 23) & 0xFF;
    if (e == 0xFF) return 0xFF;
    if ((bits & 0x7FFFFF) != 0 && !(saturate && e == 0xFE)) ++e;
    return static_cast<uint8_t>(e);
  }
  return encode_small(format_of(t), table_for(t), v, saturate);
}

double f8_bits_to_double(DType t, uint8_t b) {
  if (t == DType::F8E8M0) {
    if (b == 0xFF) return std::numeric_limits<double>::quiet_NaN();
    return std::ldexp(1.0, static_cast<int>(b) - 127);
  }
  return decode_small(format_of(t), b);
}

uint8_t double_to_f4e2m1_bits(double v) {
  // E2M1 has no NaN; the ONNX reference (ml_dtypes) encodes NaN as 0b1000.
  if (std::isnan(v)) return 0x8;
  return encode_small(format_of(DType::F4E2M1), table_for(DType::F4E2M1), v, true);
}

double f4e2m1_bits_to_double(uint8_t b) { return decode_small(format_of(DType::F4E2M1), b); }

}  // namespace tessel
