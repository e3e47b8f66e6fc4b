// Cast, CastLike and BitCast.
//
// Cast converts between every pair of supported dtypes, strings included:
//   float -> float   one rounding to nearest even (float8 follow `saturate`,
//                    e8m0 follows `round_mode`);
//   float -> integer truncation toward zero, then wrap to the width (ONNX
//                    leaves out-of-range values undefined); for the sub-byte
//                    integers an out-of-range value gives 0, as the ONNX
//                    reference does;
//   integer -> integer keeps the low bits (two's complement);
//   anything -> bool  nonzero (NaN included) is true;
//   number <-> string the shortest decimal that reads back to the same value,
//                    in numpy's notation ("0.1", "100.0", "1e+20", "nan", "inf").
#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "tessel/ops/elementwise/elementwise.h"

namespace tessel::ew {

namespace {

enum class RoundMode { Up, Down, Nearest };

struct CastOptions {
  bool saturate = true;
  RoundMode round = RoundMode::Up;
};

CastOptions cast_options(const Node& n) {
  CastOptions o;
  o.saturate = n.attr_int("saturate", 1) != 0;
  const std::string m = n.attr_string("round_mode", "up");
  if (m == "up") {
    o.round = RoundMode::Up;
  } else if (m == "down") {
    o.round = RoundMode::Down;
  } else if (m == "nearest") {
    o.round = RoundMode::Nearest;
  } else {
    fail(n.describe(), ": round_mode must be up, down or nearest, got '", m, "'");
  }
  return o;
}

DType target_dtype(const Node& n) {
  const int64_t to = n.attr(std::string("to"), Attribute::Kind::Int).i;
  DType dt;
  TS_CHECK(to >= 0 && to < 256 && dtype_from_onnx(static_cast<int>(to), &dt), n.describe(), ": 'to' = ", to,
           " is not a supported data type");
  return dt;
}

bool is_f8(DType t) {
  return t == DType::F8E4M3FN || t == DType::F8E4M3FNUZ || t == DType::F8E5M2 || t == DType::F8E5M2FNUZ;
}
bool is_sub_byte_int(DType t) { return is_int(t) && int_bits(t) < 8; }

// E8M0 (exponent-only) from the float32 bits of v: NaN/inf give 0xFF, the
// exponent field is rounded by the mantissa according to `mode`, and
// saturation keeps it at the largest finite pattern 0xFE.
uint8_t to_e8m0(double v, const CastOptions& o) {
  const float f = static_cast<float>(v);
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  uint32_t e = (bits >> 23) & 0xFF;
  if (e == 0xFF) return 0xFF;
  const uint32_t m = bits & 0x7FFFFF;
  bool up = false;
  switch (o.round) {
    case RoundMode::Up: up = m != 0; break;
    case RoundMode::Down: up = false; break;
    case RoundMode::Nearest: {
      const bool guard = m & 0x400000, round = m & 0x200000, sticky = m & 0x1FFFFF;
      up = guard && (round || sticky || e > 0);
      break;
    }
  }
  if (up && !(o.saturate && e == 0xFE)) ++e;  // 0xFE + 1 = 0xFF: NaN without saturation
  return static_cast<uint8_t>(e);
}

// ---- numbers <-> strings -----------------------------------------------------------

// Renders a decimal `digits` x 10^(exp10 - digits.size() + 1) (that is
// d.ddd x 10^exp10) in numpy's style: positional for 1e-4 <= |v| < 1e16,
// otherwise scientific with at least two exponent digits.
std::string render_decimal(bool neg, const std::string& digits, int exp10) {
  std::string s = neg ? "-" : "";
  if (exp10 >= -4 && exp10 < 16) {
    if (exp10 >= 0) {
      std::string ip = digits.substr(0, std::min<size_t>(digits.size(), static_cast<size_t>(exp10) + 1));
      ip.append(static_cast<size_t>(exp10) + 1 - ip.size(), '0');
      std::string fp = digits.size() > ip.size() ? digits.substr(ip.size()) : "0";
      return s + ip + "." + fp;
    }
    return s + "0." + std::string(static_cast<size_t>(-exp10 - 1), '0') + digits;
  }
  s += digits.substr(0, 1);
  if (digits.size() > 1) s += "." + digits.substr(1);
  const int a = std::abs(exp10);
  return s + (exp10 < 0 ? "e-" : "e+") + (a < 10 ? "0" : "") + std::to_string(a);
}

// Splits a "%e"-style text (d.ddde±XX) into digits and exponent, dropping
// trailing zeros of the mantissa.
void split_scientific(const std::string& t, std::string* digits, int* exp10) {
  const size_t e = t.find('e');
  std::string m = t.substr(0, e);
  m.erase(std::remove(m.begin(), m.end(), '.'), m.end());
  while (m.size() > 1 && m.back() == '0') m.pop_back();
  *digits = m;
  *exp10 = std::atoi(t.c_str() + e + 1);
}

// Shortest decimal that converts back to the same value of dtype `t`.
std::string float_to_string(double v, DType t) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  if (v == 0) return std::signbit(v) ? "-0.0" : "0.0";
  const bool neg = v < 0;
  const double a = std::fabs(v);
  char buf[64];
  std::string text;
  if (t == DType::F64) {
    text = std::string(buf, std::to_chars(buf, buf + sizeof buf, a, std::chars_format::scientific).ptr);
  } else if (t == DType::F32) {
    text = std::string(buf, std::to_chars(buf, buf + sizeof buf, static_cast<float>(a), std::chars_format::scientific).ptr);
  } else {
    // Small formats: the first precision whose text reads back to the value
    // (every value of these types is exact in double).
    Tensor probe(t, {1});
    for (int p = 0; p < 17; ++p) {
      std::snprintf(buf, sizeof buf, "%.*e", p, a);
      probe.set_f64(0, std::strtod(buf, nullptr));
      if (probe.get_f64(0) == a) break;
    }
    text = buf;
  }
  std::string digits;
  int exp10 = 0;
  split_scientific(text, &digits, &exp10);
  return render_decimal(neg, digits, exp10);
}

std::string element_to_string(const Tensor& in, int64_t i) {
  const DType t = in.dtype();
  if (t == DType::Bool) return in.get_i64(i) ? "True" : "False";
  if (t == DType::U64) return std::to_string(in.get_u64(i));
  if (is_int(t)) return std::to_string(in.get_i64(i));
  return float_to_string(in.get_f64(i), t);
}

bool iequals(const std::string& a, const char* b) {
  if (a.size() != std::strlen(b)) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  return true;
}

// Parses a numeric literal ("3.14", "1e-5", "+INF", "NaN"...); the whole
// string must be consumed. Integers are parsed exactly when they are written
// as integers.
struct Parsed {
  double f = 0;
  bool is_int = false;
  int64_t i = 0;
  uint64_t u = 0;
  bool is_uint = false;
};

Parsed parse_number(const std::string& s, const Node& n) {
  Parsed p;
  if (s.empty()) fail(n.describe(), ": cannot convert an empty string to a number");
  errno = 0;
  char* end = nullptr;
  const long long iv = std::strtoll(s.c_str(), &end, 10);
  if (*end == '\0' && errno == 0) {
    p.is_int = true;
    p.i = iv;
    p.f = static_cast<double>(iv);
    return p;
  }
  errno = 0;
  const unsigned long long uv = std::strtoull(s.c_str(), &end, 10);
  if (*end == '\0' && errno == 0 && s[0] != '-') {
    p.is_uint = true;
    p.u = uv;
    p.f = static_cast<double>(uv);
    return p;
  }
  p.f = std::strtod(s.c_str(), &end);
  TS_CHECK(end != s.c_str() && *end == '\0', n.describe(), ": cannot convert string '", s, "' to a number");
  return p;
}

// ---- the conversion ---------------------------------------------------------------------

// Float value -> integer of dtype `to`, stored in `out[i]`.
void store_float_as_int(Tensor& out, int64_t i, double v) {
  const DType to = out.dtype();
  const double t = std::trunc(v);
  if (is_sub_byte_int(to)) {
    const int bits = int_bits(to);
    const double lo = is_signed_int(to) ? -std::ldexp(1.0, bits - 1) : 0.0;
    const double hi = is_signed_int(to) ? std::ldexp(1.0, bits - 1) - 1 : std::ldexp(1.0, bits) - 1;
    out.set_i64(i, std::isnan(t) || t < lo || t > hi ? 0 : static_cast<int64_t>(t));
    return;
  }
  if (to == DType::U64) {
    out.set_f64(i, t);  // saturates into [0, 2^64)
    return;
  }
  // Truncate, then keep the low bits (what a C cast through int64 gives).
  out.set_i64(i, double_to_i64(t));
}

// Stores a double into a float dtype with one rounding (and the float8 rules).
void store_float(Tensor& out, int64_t i, double v, const CastOptions& o) {
  const DType to = out.dtype();
  switch (to) {
    case DType::F32: out.mutable_data<float>()[i] = static_cast<float>(v); return;
    case DType::F64: out.mutable_data<double>()[i] = v; return;
    case DType::F16: out.mutable_data<uint16_t>()[i] = double_to_f16_bits(v); return;
    case DType::BF16: out.mutable_data<uint16_t>()[i] = double_to_bf16_bits(v); return;
    case DType::F8E8M0: out.mutable_data<uint8_t>()[i] = to_e8m0(v, o); return;
    case DType::F4E2M1: out.mutable_data<uint8_t>()[i] = double_to_f4e2m1_bits(v); return;
    default:
      TS_CHECK(is_f8(to), "store_float: ", dtype_name(to), " is not a float type");
      out.mutable_data<uint8_t>()[i] = double_to_f8_bits(to, v, o.saturate);
      return;
  }
}

// Float -> 8..64-bit integer: truncate, then keep the low bits of the int64
// value (uint64 saturates into its own range instead).
template <class T>
T float_to_int(double v) {
  const double t = std::trunc(v);
  if constexpr (std::is_same_v<T, uint64_t>) {
    if (std::isnan(t) || t <= 0) return 0;
    return t >= 1.8446744073709552e19 ? UINT64_MAX : static_cast<uint64_t>(t);
  } else {
    return static_cast<T>(double_to_i64(t));
  }
}

// Typed loops for the casts real models run on large tensors (between the
// f16/f32/f64/bf16 and 8..64-bit integer types). Returns false when the pair
// is not covered, leaving the generic element-by-element path to it.
bool cast_fast(const Tensor& in, Tensor& out, const Node& n) {
  const DType from = in.dtype(), to = out.dtype();
  const bool ff = in_set(from, kFloat), fi = in_set(from, kInt), tf = in_set(to, kFloat), ti = in_set(to, kInt);
  const int64_t count = in.numel();
  auto loop = [&]<class SI, class SO>(auto conv) {
    const SI* pi = in.data<SI>();
    SO* po = out.mutable_data<SO>();
    for (int64_t i = 0; i < count; ++i) po[i] = conv(pi[i]);
  };
  if (ff && tf) {
    visit_float(from, n, [&]<class A>() {
      visit_float(to, n, [&]<class B>() {
        loop.template operator()<typename A::S, typename B::S>([](typename A::S v) { return B::store(A::load(v)); });
      });
    });
  } else if (fi && tf) {
    visit_int(from, n, [&]<class A>() {
      visit_float(to, n, [&]<class B>() {
        loop.template operator()<A, typename B::S>([](A v) { return B::store(static_cast<double>(v)); });
      });
    });
  } else if (ff && ti) {
    visit_float(from, n, [&]<class A>() {
      visit_int(to, n, [&]<class B>() {
        loop.template operator()<typename A::S, B>([](typename A::S v) { return float_to_int<B>(A::load(v)); });
      });
    });
  } else if (fi && ti) {
    visit_int(from, n, [&]<class A>() {
      visit_int(to, n, [&]<class B>() { loop.template operator()<A, B>([](A v) { return static_cast<B>(v); }); });
    });
  } else {
    return false;
  }
  return true;
}

Tensor cast_tensor(const Tensor& in, DType to, const CastOptions& o, const Node& n) {
  const DType from = in.dtype();
  if (from == to) return in;
  Tensor out(to, in.shape());
  const int64_t count = in.numel();
  if (to == DType::String) {
    auto& s = out.mutable_strings();
    for (int64_t i = 0; i < count; ++i) s[i] = element_to_string(in, i);
    return out;
  }
  if (from == DType::String) {
    const auto& s = in.strings();
    for (int64_t i = 0; i < count; ++i) {
      if (to == DType::Bool && (iequals(s[i], "true") || iequals(s[i], "false"))) {
        out.set_i64(i, iequals(s[i], "true") ? 1 : 0);
        continue;
      }
      const Parsed p = parse_number(s[i], n);
      if (is_int(to) && p.is_int) {
        out.set_i64(i, p.i);
      } else if (is_int(to) && p.is_uint) {
        out.set_u64(i, p.u);
      } else if (is_int(to)) {
        store_float_as_int(out, i, p.f);
      } else if (to == DType::Bool) {
        out.set_i64(i, p.f != 0 ? 1 : 0);
      } else {
        store_float(out, i, p.f, o);
      }
    }
    return out;
  }
  if (cast_fast(in, out, n)) return out;
  // Numeric (and bool) source. Bool output: any nonzero value.
  const bool src_float = is_float(from);
  for (int64_t i = 0; i < count; ++i) {
    if (to == DType::Bool) {
      out.mutable_data<uint8_t>()[i] = (src_float ? in.get_f64(i) != 0 : in.get_u64(i) != 0) ? 1 : 0;
    } else if (is_float(to)) {
      store_float(out, i, in.get_f64(i), o);
    } else if (src_float) {
      store_float_as_int(out, i, in.get_f64(i));
    } else if (from == DType::U64) {
      out.set_u64(i, in.get_u64(i));
    } else {
      out.set_i64(i, in.get_i64(i));
    }
  }
  return out;
}

// ---- Cast, CastLike --------------------------------------------------------------------------

// Integer shape values keep their symbolic form through integer casts.
void cast_syms(InferContext& ctx, DType from, DType to) {
  if (!is_int(from) || !is_int(to)) return;
  infer_sym_nary(ctx, {0}, [](const std::vector<Dim>& v) -> std::optional<Dim> { return v[0]; });
}

void cast_infer(InferContext& ctx) {
  const DType to = target_dtype(ctx.node);
  cast_options(ctx.node);  // validates round_mode
  infer_same_shape(ctx, to);
  cast_syms(ctx, ctx.input_dtype(0), to);
}

void cast_kernel(KernelContext& ctx) {
  ctx.set_output(0, cast_tensor(ctx.input(0), target_dtype(ctx.node), cast_options(ctx.node), ctx.node));
}

void castlike_infer(InferContext& ctx) {
  const DType to = ctx.input_dtype(1);
  cast_options(ctx.node);
  infer_same_shape(ctx, to);
  cast_syms(ctx, ctx.input_dtype(0), to);
}

void castlike_kernel(KernelContext& ctx) {
  ctx.set_output(0, cast_tensor(ctx.input(0), ctx.input(1).dtype(), cast_options(ctx.node), ctx.node));
}

// Cast-1 named the target type with a string ("FLOAT"); later opsets use the
// TensorProto code.
void cast_upgrade(Node& node, int64_t opset) {
  auto it = node.attrs.find("to");
  if (it == node.attrs.end() || it->second.kind != Attribute::Kind::String) return;
  static const std::pair<const char*, int> kNames[] = {
      {"FLOAT", 1},   {"UINT8", 2},  {"INT8", 3},    {"UINT16", 4},  {"INT16", 5},   {"INT32", 6},
      {"INT64", 7},   {"STRING", 8}, {"BOOL", 9},    {"FLOAT16", 10}, {"DOUBLE", 11}, {"UINT32", 12},
      {"UINT64", 13}, {"BFLOAT16", 16}};
  for (const auto& [name, code] : kNames)
    if (iequals(it->second.s, name)) {
      it->second = Attribute::of_int(code);
      return;
    }
  fail(node.describe(), ": unknown type name '", it->second.s, "' in 'to'");
}

// ---- BitCast ----------------------------------------------------------------------------------

// Bits per element as BitCast sees them (bool is one byte).
int bit_width(DType t) {
  if (is_int(t)) return int_bits(t);
  switch (t) {
    case DType::F4E2M1: return 4;
    case DType::String: case DType::Undefined: return 0;
    default: return dtype_storage_size(t) * 8;
  }
}

void bitcast_check(const Node& n, DType from, DType to) {
  TS_CHECK(from != DType::String && to != DType::String, n.describe(), ": BitCast does not accept strings");
  if (from == DType::Undefined) return;
  TS_CHECK(bit_width(from) == bit_width(to), n.describe(), ": cannot bit-cast ", dtype_name(from), " (",
           bit_width(from), " bits) to ", dtype_name(to), " (", bit_width(to), " bits)");
}

void bitcast_infer(InferContext& ctx) {
  const DType to = target_dtype(ctx.node);
  bitcast_check(ctx.node, ctx.input_dtype(0), to);
  infer_same_shape(ctx, to);
}

void bitcast_kernel(KernelContext& ctx) {
  const Tensor& in = ctx.input(0);
  const DType to = target_dtype(ctx.node);
  bitcast_check(ctx.node, in.dtype(), to);
  Tensor out(to, in.shape());
  if (in.nbytes()) std::memcpy(out.mutable_raw(), in.raw(), in.nbytes());
  const int bits = bit_width(to);
  if (bits < 8) {
    // Sub-byte storage: keep the low bits, sign-extend for signed targets.
    uint8_t* p = out.mutable_raw();
    const uint8_t mask = static_cast<uint8_t>((1u << bits) - 1);
    for (int64_t i = 0; i < out.numel(); ++i) {
      uint8_t v = p[i] & mask;
      if (is_signed_int(to) && (v & (1u << (bits - 1)))) v |= static_cast<uint8_t>(~mask);
      p[i] = v;
    }
  }
  ctx.set_output(0, std::move(out));
}

OpSchema one_in(const char* name, int inputs, InferFn infer, KernelFn kernel, int since, UpgradeFn up = nullptr) {
  return OpSchema{.name = name, .domain = "", .min_inputs = inputs, .max_inputs = inputs, .min_outputs = 1,
                  .max_outputs = 1, .infer = infer, .kernel = kernel, .upgrade = up, .since_version = since};
}

}  // namespace

void register_cast_ops(OpRegistry& r) {
  r.add(one_in("Cast", 1, cast_infer, cast_kernel, 1, cast_upgrade));
  r.add(one_in("CastLike", 2, castlike_infer, castlike_kernel, 15));
  r.add(one_in("BitCast", 1, bitcast_infer, bitcast_kernel, 26));
}

}  // namespace tessel::ew
