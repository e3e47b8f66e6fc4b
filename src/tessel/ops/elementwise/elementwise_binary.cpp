// Binary ops with numpy broadcasting: Add Sub Mul Div Pow Mod, BitShift
// BitwiseAnd BitwiseOr BitwiseXor, And Or Xor, Equal Greater GreaterOrEqual
// Less LessOrEqual.
//
// Each op is a struct read by one of three kernel templates (arithmetic,
// comparison, logic). The structs also give the op's meaning on symbolic
// integer values, so that shape arithmetic (Mul(Gather(Shape(x), 0), 64))
// stays an expression of the model's input symbols.
#include <cmath>
#include <type_traits>

#include "tessel/ops/elementwise/elementwise.h"

namespace tessel::ew {

namespace {

using OptDim = std::optional<Dim>;

// ---- arithmetic: output has the inputs' dtype ------------------------------------------
//
// Op: constructed from the node; static DTypeSet types(); double on_float(double, double);
// template <class T> T on_int(T, T); OptDim on_dim(const Dim&, const Dim&).

template <class Op>
void arith_infer(InferContext& ctx) {
  const DType dt = ctx.input_dtype(0);
  require_dtype(ctx.node, 0, dt, Op::types());
  require_dtype(ctx.node, 1, ctx.input_dtype(1), Op::types());
  require_same_dtype(ctx.node, 1, dt, ctx.input_dtype(1));
  const Op op(ctx.node);
  infer_broadcast_output(ctx, {0, 1}, dt);
  if (!is_int(dt)) return;
  infer_sym_nary(ctx, {0, 1}, [&](const std::vector<Dim>& v) { return op.on_dim(v[0], v[1]); });
}

template <class Op>
void arith_kernel(KernelContext& ctx) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  require_dtype(ctx.node, 0, a.dtype(), Op::types());
  require_same_dtype(ctx.node, 1, a.dtype(), b.dtype());
  const Op op(ctx.node);
  if (is_float(a.dtype())) {
    ctx.set_output(0, visit_float(a.dtype(), ctx.node, [&]<class IO>() {
      using S = typename IO::S;
      return broadcast_binary<S, S, S>(a, b, a.dtype(), ctx.node,
                                       [&](S x, S y) { return IO::store(op.on_float(IO::load(x), IO::load(y))); });
    }));
    return;
  }
  ctx.set_output(0, visit_int(a.dtype(), ctx.node, [&]<class T>() {
    return broadcast_binary<T, T, T>(a, b, a.dtype(), ctx.node, [&](T x, T y) { return op.template on_int<T>(x, y); });
  }));
}

struct AddOp {
  explicit AddOp(const Node&) {}
  static DTypeSet types() { return kNumeric; }
  double on_float(double a, double b) const { return a + b; }
  template <class T>
  T on_int(T a, T b) const { return wrap_add(a, b); }
  OptDim on_dim(const Dim& a, const Dim& b) const { return a + b; }
};

struct SubOp {
  explicit SubOp(const Node&) {}
  static DTypeSet types() { return kNumeric; }
  double on_float(double a, double b) const { return a - b; }
  template <class T>
  T on_int(T a, T b) const { return wrap_sub(a, b); }
  OptDim on_dim(const Dim& a, const Dim& b) const { return a - b; }
};

struct MulOp {
  explicit MulOp(const Node&) {}
  static DTypeSet types() { return kNumeric; }
  double on_float(double a, double b) const { return a * b; }
  template <class T>
  T on_int(T a, T b) const { return wrap_mul(a, b); }
  OptDim on_dim(const Dim& a, const Dim& b) const { return a * b; }
};

// Integer division truncates toward zero (C semantics, as ONNX specifies).
struct DivOp {
  const Node& node;
  explicit DivOp(const Node& n) : node(n) {}
  static DTypeSet types() { return kNumeric; }
  double on_float(double a, double b) const { return a / b; }
  template <class T>
  T on_int(T a, T b) const {
    TS_CHECK(b != 0, node.describe(), ": integer division by zero");
    if constexpr (std::is_signed_v<T>) {
      if (b == -1) return wrap_neg(a);  // INT_MIN / -1 wraps
    }
    return static_cast<T>(a / b);
  }
  OptDim on_dim(const Dim& a, const Dim& b) const {
    const auto ca = a.const_value(), cb = b.const_value();
    if (ca && cb) {
      if (*cb == 0) return std::nullopt;
      if (*cb == -1) return Dim(static_cast<int64_t>(0 - static_cast<uint64_t>(*ca)));
      return Dim(*ca / *cb);
    }
    // Truncation equals floor division when both sides are non-negative.
    if (b != Dim(0) && dim_nonneg(a) && dim_nonneg(b)) return Dim::floordiv(a, b);
    return std::nullopt;
  }
};

// fmod=0: the result takes the divisor's sign (Python's %); fmod=1: the
// dividend's sign (C's fmod / %).
struct ModOp {
  const Node& node;
  bool c_style;
  explicit ModOp(const Node& n) : node(n) {
    const int64_t f = n.attr_int("fmod", 0);
    TS_CHECK(f == 0 || f == 1, n.describe(), ": fmod must be 0 or 1, got ", f);
    c_style = f == 1;
  }
  static DTypeSet types() { return kNumeric; }
  double on_float(double a, double b) const {
    const double r = std::fmod(a, b);  // NaN for a = ±inf, b = 0 or NaN operands
    if (c_style || std::isnan(r)) return r;
    if (r == 0) return std::copysign(0.0, b);
    return (r < 0) != (b < 0) ? r + b : r;  // b = ±inf: r + b = b, as the spec asks
  }
  template <class T>
  T on_int(T a, T b) const {
    TS_CHECK(b != 0, node.describe(), ": integer modulo by zero");
    if constexpr (std::is_signed_v<T>) {
      if (b == -1) return 0;  // avoids INT_MIN % -1
      const T r = static_cast<T>(a % b);
      if (!c_style && r != 0 && ((r < 0) != (b < 0))) return static_cast<T>(r + b);
      return r;
    } else {
      return static_cast<T>(a % b);
    }
  }
  OptDim on_dim(const Dim& a, const Dim& b) const {
    const auto ca = a.const_value(), cb = b.const_value();
    if (cb && *cb == 0) return std::nullopt;
    if (ca && cb) {
      if (*cb == -1) return Dim(0);
      int64_t r = *ca % *cb;
      if (!c_style && r != 0 && ((r < 0) != (*cb < 0))) r += *cb;
      return Dim(r);
    }
    if (!dim_nonneg(b) || b == Dim(0)) return std::nullopt;
    if (c_style && !dim_nonneg(a)) return std::nullopt;
    return Dim::mod(a, b);
  }
};

// BitShift: out-of-range shift amounts give what the sign fill alone gives.
struct BitShiftOp {
  bool left;
  explicit BitShiftOp(const Node& n) {
    const std::string d = n.attr_string("direction", "");
    TS_CHECK(d == "LEFT" || d == "RIGHT", n.describe(), ": direction must be LEFT or RIGHT, got '", d, "'");
    left = d == "LEFT";
  }
  static DTypeSet types() { return kInt; }
  double on_float(double, double) const { return 0; }  // not reachable: integer types only
  template <class T>
  T on_int(T x, T y) const {
    constexpr int bits = static_cast<int>(sizeof(T) * 8);
    bool out_of_range = static_cast<uint64_t>(y) >= static_cast<uint64_t>(bits);
    if constexpr (std::is_signed_v<T>) out_of_range = y < 0 || y >= bits;
    if (out_of_range) {
      if constexpr (std::is_signed_v<T>) {
        if (!left && x < 0) return T{-1};
      }
      return T{0};
    }
    if (left) {
      using U = std::make_unsigned_t<T>;
      return static_cast<T>(static_cast<uint64_t>(static_cast<U>(x)) << y);
    }
    return static_cast<T>(x >> y);  // arithmetic for signed T (C++20)
  }
  OptDim on_dim(const Dim&, const Dim&) const { return std::nullopt; }
};

template <int Kind>  // 0 and, 1 or, 2 xor
struct BitwiseOp {
  explicit BitwiseOp(const Node&) {}
  static DTypeSet types() { return kInt; }
  double on_float(double, double) const { return 0; }  // not reachable: integer types only
  template <class T>
  T on_int(T a, T b) const {
    if constexpr (Kind == 0) return static_cast<T>(a & b);
    if constexpr (Kind == 1) return static_cast<T>(a | b);
    return static_cast<T>(a ^ b);
  }
  OptDim on_dim(const Dim&, const Dim&) const { return std::nullopt; }
};

// ---- Pow: base and exponent may have different dtypes ----------------------------------

constexpr DTypeSet kPowBase = {DType::F16, DType::F32, DType::F64, DType::BF16, DType::I32, DType::I64};

// Integer power by squaring, wrapping like repeated multiplication.
template <class T>
T int_pow(T base, int64_t e, const Node& n) {
  if (e < 0) {
    // Truncated 1/base^|e|: non-zero only for base ±1.
    if (base == 1) return 1;
    if constexpr (std::is_signed_v<T>) {
      if (base == -1) return (e & 1) ? T{-1} : T{1};
    }
    TS_CHECK(base != 0, n.describe(), ": zero raised to a negative integer power");
    return 0;
  }
  uint64_t result = 1, b = static_cast<uint64_t>(base);
  for (uint64_t k = static_cast<uint64_t>(e); k; k >>= 1) {
    if (k & 1) result *= b;
    b *= b;
  }
  return static_cast<T>(result);
}

// Float to integer the way a C cast does within range; NaN and out-of-range
// values (undefined in ONNX) saturate instead of being undefined behaviour.
int64_t float_to_i64(double v) {
  if (std::isnan(v)) return 0;
  if (v >= 9.2233720368547758e18) return INT64_MAX;
  if (v <= -9.2233720368547758e18) return INT64_MIN;
  return static_cast<int64_t>(v);
}

void pow_infer(InferContext& ctx) {
  const DType dt = ctx.input_dtype(0);
  require_dtype(ctx.node, 0, dt, kPowBase);
  require_dtype(ctx.node, 1, ctx.input_dtype(1), kNumeric);
  infer_broadcast_output(ctx, {0, 1}, dt);
  if (!is_int(dt) || !is_int(ctx.input_dtype(1))) return;
  infer_sym_nary(ctx, {0, 1}, [&](const std::vector<Dim>& v) -> OptDim {
    const auto b = v[0].const_value(), e = v[1].const_value();
    if (!b || !e || (*b == 0 && *e < 0)) return std::nullopt;
    return Dim(int_pow<int64_t>(*b, *e, ctx.node));
  });
}

void pow_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& y = ctx.input(1);
  require_dtype(ctx.node, 0, x.dtype(), kPowBase);
  require_dtype(ctx.node, 1, y.dtype(), kNumeric);
  // The exponent is usually a scalar: read it once into double / int64.
  const bool int_exp = is_int(y.dtype());
  std::vector<double> yf(static_cast<size_t>(y.numel()));
  std::vector<int64_t> yi(int_exp ? static_cast<size_t>(y.numel()) : 0);
  for (int64_t i = 0; i < y.numel(); ++i) {
    yf[i] = y.get_f64(i);
    if (int_exp) yi[i] = y.get_i64(i);
  }
  Tensor out(x.dtype(), broadcast_dims(x.shape(), y.shape(), ctx.node));
  const auto walk = [&](auto&& fn) { broadcast_walk<2>(out.shape(), {&x.shape(), &y.shape()}, fn); };
  if (is_float(x.dtype())) {
    visit_float(x.dtype(), ctx.node, [&]<class IO>() {
      using S = typename IO::S;
      const S* px = x.data<S>();
      S* po = out.mutable_data<S>();
      walk([&](int64_t o, const std::array<int64_t, 2>& ix) {
        const double b = IO::load(px[ix[0]]), e = yf[ix[1]];
        // x*x is exact in double and equals pow(x, 2) for every x; the
        // square is the common case (variance in decomposed LayerNorm).
        po[o] = IO::store(e == 2.0 ? b * b : std::pow(b, e));
      });
    });
  } else {
    visit_int(x.dtype(), ctx.node, [&]<class T>() {
      const T* px = x.data<T>();
      T* po = out.mutable_data<T>();
      walk([&](int64_t o, const std::array<int64_t, 2>& ix) {
        po[o] = int_exp ? int_pow<T>(px[ix[0]], yi[ix[1]], ctx.node)
                        : static_cast<T>(float_to_i64(std::pow(static_cast<double>(px[ix[0]]), yf[ix[1]])));
      });
    });
  }
  ctx.set_output(0, std::move(out));
}

// ---- comparisons: bool output ------------------------------------------------------------
//
// Op: static bool cmp(auto a, auto b) on numbers of one type;
// OptDim on_dim(a, b) giving 0/1 when the answer is known statically.

// Equal also compares bools and strings.
constexpr DTypeSet kEqualTypes = {DType::F16, DType::F32, DType::F64, DType::BF16, DType::I8,
                                  DType::I16, DType::I32, DType::I64, DType::U8,   DType::U16,
                                  DType::U32, DType::U64, DType::Bool, DType::String};

template <class Op>
void compare_infer(InferContext& ctx) {
  const DType dt = ctx.input_dtype(0);
  require_dtype(ctx.node, 0, dt, Op::types());
  require_dtype(ctx.node, 1, ctx.input_dtype(1), Op::types());
  require_same_dtype(ctx.node, 1, dt, ctx.input_dtype(1));
  infer_broadcast_output(ctx, {0, 1}, DType::Bool);
  if (is_float(dt) || dt == DType::String) return;
  // Decided by the sign of a - b: batch == -1 is false because batch >= 1.
  infer_sym_nary(ctx, {0, 1}, [](const std::vector<Dim>& v) -> OptDim {
    const std::optional<int> sign = dim_sign(v[0] - v[1]);
    if (!sign) return std::nullopt;
    return Dim(Op::cmp(*sign, 0) ? 1 : 0);
  });
}

template <class Op>
void compare_kernel(KernelContext& ctx) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  require_dtype(ctx.node, 0, a.dtype(), Op::types());
  require_same_dtype(ctx.node, 1, a.dtype(), b.dtype());
  if (a.dtype() == DType::String) {
    Tensor out(DType::Bool, broadcast_dims(a.shape(), b.shape(), ctx.node));
    const auto& sa = a.strings();
    const auto& sb = b.strings();
    uint8_t* po = out.mutable_data<uint8_t>();
    broadcast_walk<2>(out.shape(), {&a.shape(), &b.shape()}, [&](int64_t o, const std::array<int64_t, 2>& ix) {
      po[o] = Op::cmp(sa[ix[0]], sb[ix[1]]) ? 1 : 0;
    });
    ctx.set_output(0, std::move(out));
  } else if (a.dtype() == DType::Bool) {
    ctx.set_output(0, broadcast_binary<uint8_t, uint8_t, uint8_t>(a, b, DType::Bool, ctx.node, [](uint8_t x, uint8_t y) {
      return static_cast<uint8_t>(Op::cmp(x != 0, y != 0) ? 1 : 0);
    }));
  } else if (is_float(a.dtype())) {
    ctx.set_output(0, visit_float(a.dtype(), ctx.node, [&]<class IO>() {
      using S = typename IO::S;
      return broadcast_binary<S, S, uint8_t>(a, b, DType::Bool, ctx.node, [](S x, S y) {
        return static_cast<uint8_t>(Op::cmp(IO::load(x), IO::load(y)) ? 1 : 0);
      });
    }));
  } else {
    ctx.set_output(0, visit_int(a.dtype(), ctx.node, [&]<class T>() {
      return broadcast_binary<T, T, uint8_t>(a, b, DType::Bool, ctx.node,
                                             [](T x, T y) { return static_cast<uint8_t>(Op::cmp(x, y) ? 1 : 0); });
    }));
  }
}

struct EqualOp {
  static DTypeSet types() { return kEqualTypes; }
  template <class T>
  static bool cmp(const T& a, const T& b) { return a == b; }
};
struct GreaterOp {
  static DTypeSet types() { return kNumeric; }
  template <class T>
  static bool cmp(const T& a, const T& b) { return a > b; }
};
struct GreaterOrEqualOp {
  static DTypeSet types() { return kNumeric; }
  template <class T>
  static bool cmp(const T& a, const T& b) { return a >= b; }
};
struct LessOp {
  static DTypeSet types() { return kNumeric; }
  template <class T>
  static bool cmp(const T& a, const T& b) { return a < b; }
};
struct LessOrEqualOp {
  static DTypeSet types() { return kNumeric; }
  template <class T>
  static bool cmp(const T& a, const T& b) { return a <= b; }
};

// ---- logic on bools ----------------------------------------------------------------------

template <int Kind>  // 0 and, 1 or, 2 xor
bool logic(bool a, bool b) {
  if constexpr (Kind == 0) return a && b;
  if constexpr (Kind == 1) return a || b;
  return a != b;
}

template <int Kind>
void logic_infer(InferContext& ctx) {
  require_dtype(ctx.node, 0, ctx.input_dtype(0), kBool);
  require_dtype(ctx.node, 1, ctx.input_dtype(1), kBool);
  infer_broadcast_output(ctx, {0, 1}, DType::Bool);
  infer_sym_nary(ctx, {0, 1}, [](const std::vector<Dim>& v) -> OptDim {
    const auto a = v[0].const_value(), b = v[1].const_value();
    if (!a || !b) return std::nullopt;
    return Dim(logic<Kind>(*a != 0, *b != 0) ? 1 : 0);
  });
}

template <int Kind>
void logic_kernel(KernelContext& ctx) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  require_dtype(ctx.node, 0, a.dtype(), kBool);
  require_dtype(ctx.node, 1, b.dtype(), kBool);
  ctx.set_output(0, broadcast_binary<uint8_t, uint8_t, uint8_t>(a, b, DType::Bool, ctx.node, [](uint8_t x, uint8_t y) {
    return static_cast<uint8_t>(logic<Kind>(x != 0, y != 0) ? 1 : 0);
  }));
}

// ---- registration ----------------------------------------------------------------------------

OpSchema binary(const char* name, InferFn infer, KernelFn kernel, int since, UpgradeFn upgrade = nullptr) {
  return OpSchema{.name = name, .domain = "", .min_inputs = 2, .max_inputs = 2, .min_outputs = 1,
                  .max_outputs = 1, .infer = infer, .kernel = kernel, .upgrade = upgrade,
                  .since_version = since};
}

}  // namespace

void register_binary_ops(OpRegistry& r) {
  // Opset < 7 forms carried broadcast/axis (and consumed_inputs before 6).
  r.add(binary("Add", arith_infer<AddOp>, arith_kernel<AddOp>, 1, upgrade_legacy_binary));
  r.add(binary("Sub", arith_infer<SubOp>, arith_kernel<SubOp>, 1, upgrade_legacy_binary));
  r.add(binary("Mul", arith_infer<MulOp>, arith_kernel<MulOp>, 1, upgrade_legacy_binary));
  r.add(binary("Div", arith_infer<DivOp>, arith_kernel<DivOp>, 1, upgrade_legacy_binary));
  r.add(binary("Pow", pow_infer, pow_kernel, 1, upgrade_legacy_binary));
  r.add(binary("Mod", arith_infer<ModOp>, arith_kernel<ModOp>, 10));
  r.add(binary("BitShift", arith_infer<BitShiftOp>, arith_kernel<BitShiftOp>, 11));
  r.add(binary("BitwiseAnd", arith_infer<BitwiseOp<0>>, arith_kernel<BitwiseOp<0>>, 18));
  r.add(binary("BitwiseOr", arith_infer<BitwiseOp<1>>, arith_kernel<BitwiseOp<1>>, 18));
  r.add(binary("BitwiseXor", arith_infer<BitwiseOp<2>>, arith_kernel<BitwiseOp<2>>, 18));

  r.add(binary("And", logic_infer<0>, logic_kernel<0>, 1, upgrade_legacy_binary));
  r.add(binary("Or", logic_infer<1>, logic_kernel<1>, 1, upgrade_legacy_binary));
  r.add(binary("Xor", logic_infer<2>, logic_kernel<2>, 1, upgrade_legacy_binary));

  r.add(binary("Equal", compare_infer<EqualOp>, compare_kernel<EqualOp>, 1, upgrade_legacy_binary));
  r.add(binary("Greater", compare_infer<GreaterOp>, compare_kernel<GreaterOp>, 1, upgrade_legacy_binary));
  r.add(binary("Less", compare_infer<LessOp>, compare_kernel<LessOp>, 1, upgrade_legacy_binary));
  r.add(binary("GreaterOrEqual", compare_infer<GreaterOrEqualOp>, compare_kernel<GreaterOrEqualOp>, 12));
  r.add(binary("LessOrEqual", compare_infer<LessOrEqualOp>, compare_kernel<LessOrEqualOp>, 12));
}

}  // namespace tessel::ew
