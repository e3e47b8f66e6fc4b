// Internal helpers of the elementwise op family (unary math, activations,
// binary arithmetic/comparison/logic, variadic ops, Where, Clip, Cast).
// The family is split over several files, each registering its ops through
// one of the functions declared at the bottom:
//   elementwise_unary.cpp       Abs Neg ... Erf Ceil Floor Round Sign IsNaN IsInf Not BitwiseNot
//   elementwise_activation.cpp  Relu LeakyRelu PRelu Elu ... Gelu Swish SwiGLU Shrink
//   elementwise_binary.cpp      Add Sub Mul Div Pow Mod BitShift Bitwise* And Or Xor comparisons
//   elementwise_variadic.cpp    Sum Mean Max Min Where Clip
//   cast.cpp                    Cast CastLike BitCast
//
// Numeric policy: floating inputs are loaded into double, computed in double
// and rounded once to the output type (f16/bf16 included, so an f16 Add is
// exactly IEEE half addition). Integer arithmetic is done in the integer type
// itself through uint64 so that overflow wraps instead of being undefined.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "tessel/ir/graph.h"
#include "tessel/ops/common.h"
#include "tessel/ops/registry.h"
#include "tessel/support/error.h"

namespace tessel::ew {

// ---- dtype sets --------------------------------------------------------------

using DTypeSet = std::initializer_list<DType>;
// "tensor(float16|float|double|bfloat16)".
inline constexpr DTypeSet kFloat = {DType::F16, DType::F32, DType::F64, DType::BF16};
// Every 8..64-bit integer.
inline constexpr DTypeSet kInt = {DType::I8, DType::I16, DType::I32, DType::I64,
                                  DType::U8, DType::U16, DType::U32, DType::U64};
// Floats plus every 8..64-bit integer (Add, Mul, Max, Clip, comparisons...).
inline constexpr DTypeSet kNumeric = {DType::F16, DType::F32, DType::F64, DType::BF16, DType::I8,  DType::I16,
                                      DType::I32, DType::I64, DType::U8,  DType::U16,  DType::U32, DType::U64};
// Floats plus signed integers (Neg, Relu).
inline constexpr DTypeSet kSignedNumeric = {DType::F16, DType::F32, DType::F64, DType::BF16,
                                            DType::I8,  DType::I16, DType::I32, DType::I64};
inline constexpr DTypeSet kBool = {DType::Bool};

bool in_set(DType t, DTypeSet set);
// Throws "<node>: input K has dtype X, expected a|b|c" unless t is in `set`.
// Undefined (unknown during inference) is accepted.
void require_dtype(const Node& n, size_t input, DType t, DTypeSet set);
// Throws unless input `i` has the same dtype as input 0 (both known).
void require_same_dtype(const Node& n, size_t i, DType t0, DType ti);

// ---- storage access for floating types ----------------------------------------

// Single-rounding conversions from double (the double->float->half path would
// round twice).
uint16_t double_to_f16_bits(double v);
uint16_t double_to_bf16_bits(double v);
// All 65536 f16 patterns decoded to float (decoding through _Float16 is a
// library call per element).
const float* f16_table();

// Loads a stored element as double and stores a double with one rounding.
struct F32IO {
  using S = float;
  static double load(S v) { return v; }
  static S store(double v) { return static_cast<float>(v); }
};
struct F64IO {
  using S = double;
  static double load(S v) { return v; }
  static S store(double v) { return v; }
};
struct F16IO {
  using S = uint16_t;
  static double load(S v) { return f16_table()[v]; }
  static S store(double v) { return double_to_f16_bits(v); }
};
struct BF16IO {
  using S = uint16_t;
  static double load(S v) { return bf16_bits_to_f32(v); }
  static S store(double v) { return double_to_bf16_bits(v); }
};

// Calls f.template operator()<IO>() with the IO struct of a float dtype.
template <class F>
decltype(auto) visit_float(DType t, const Node& n, F&& f) {
  switch (t) {
    case DType::F32: return f.template operator()<F32IO>();
    case DType::F64: return f.template operator()<F64IO>();
    case DType::F16: return f.template operator()<F16IO>();
    case DType::BF16: return f.template operator()<BF16IO>();
    default: fail(n.describe(), ": dtype ", dtype_name(t), " is not a supported float type");
  }
}

// Calls f.template operator()<T>() with the C++ type of an 8..64-bit integer dtype.
template <class F>
decltype(auto) visit_int(DType t, const Node& n, F&& f) {
  switch (t) {
    case DType::I8: return f.template operator()<int8_t>();
    case DType::I16: return f.template operator()<int16_t>();
    case DType::I32: return f.template operator()<int32_t>();
    case DType::I64: return f.template operator()<int64_t>();
    case DType::U8: return f.template operator()<uint8_t>();
    case DType::U16: return f.template operator()<uint16_t>();
    case DType::U32: return f.template operator()<uint32_t>();
    case DType::U64: return f.template operator()<uint64_t>();
    default: fail(n.describe(), ": dtype ", dtype_name(t), " is not a supported integer type");
  }
}

// Integer arithmetic that wraps: computed in uint64 (modular) and narrowed,
// which C++20 defines as modular for every integer type.
template <class T>
T wrap_add(T a, T b) { return static_cast<T>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b)); }
template <class T>
T wrap_sub(T a, T b) { return static_cast<T>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b)); }
template <class T>
T wrap_mul(T a, T b) { return static_cast<T>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b)); }
template <class T>
T wrap_neg(T a) { return static_cast<T>(uint64_t{0} - static_cast<uint64_t>(a)); }

// ---- broadcasting iteration -------------------------------------------------------

// Visits every element of the broadcast output `out` in row-major order and
// calls fn(out_flat_index, in_flat_indices) where in_flat_indices[k] is the
// element of input k (shape *ins[k], numpy-broadcast to `out`). Offsets are
// advanced incrementally, so there is no division per element.
template <size_t K, class Fn>
void broadcast_walk(const std::vector<int64_t>& out, const std::array<const std::vector<int64_t>*, K>& ins, Fn&& fn) {
  const size_t r = out.size();
  int64_t total = 1;
  for (int64_t d : out) total *= d;
  if (total == 0) return;
  bool same = true;
  for (size_t k = 0; k < K; ++k) same = same && *ins[k] == out;
  std::array<int64_t, K> ix{};
  if (same) {
    for (int64_t o = 0; o < total; ++o) {
      ix.fill(o);
      fn(o, ix);
    }
    return;
  }
  if (r == 0) {
    fn(int64_t{0}, ix);
    return;
  }
  // Per-input strides over the output's axes (0 where the input broadcasts).
  std::array<std::vector<int64_t>, K> st;
  for (size_t k = 0; k < K; ++k) {
    const std::vector<int64_t>& in = *ins[k];
    st[k].assign(r, 0);
    const size_t off = r - in.size();
    int64_t stride = 1;
    for (size_t i = in.size(); i-- > 0;) {
      st[k][i + off] = in[i] == 1 ? 0 : stride;
      stride *= in[i];
    }
  }
  const int64_t inner = out[r - 1];
  std::array<int64_t, K> inner_st;
  for (size_t k = 0; k < K; ++k) inner_st[k] = st[k][r - 1];
  std::vector<int64_t> ctr(r, 0);
  std::array<int64_t, K> base{};
  int64_t o = 0;
  while (true) {
    ix = base;
    for (int64_t j = 0; j < inner; ++j) {
      fn(o++, ix);
      for (size_t k = 0; k < K; ++k) ix[k] += inner_st[k];
    }
    // Advance the odometer over the outer axes.
    size_t d = r - 1;
    while (true) {
      if (d == 0) return;
      --d;
      ++ctr[d];
      for (size_t k = 0; k < K; ++k) base[k] += st[k][d];
      if (ctr[d] < out[d]) break;
      for (size_t k = 0; k < K; ++k) base[k] -= st[k][d] * out[d];
      ctr[d] = 0;
    }
  }
}

// Applies fn(a_elem, b_elem) -> SO over the broadcast of a and b (storage
// types SA, SB) into a new tensor of dtype out_dt.
template <class SA, class SB, class SO, class Fn>
Tensor broadcast_binary(const Tensor& a, const Tensor& b, DType out_dt, const Node& n, Fn&& fn) {
  Tensor out(out_dt, broadcast_dims(a.shape(), b.shape(), n));
  const SA* pa = a.data<SA>();
  const SB* pb = b.data<SB>();
  SO* po = out.mutable_data<SO>();
  broadcast_walk<2>(out.shape(), {&a.shape(), &b.shape()},
                    [&](int64_t o, const std::array<int64_t, 2>& ix) { po[o] = fn(pa[ix[0]], pb[ix[1]]); });
  return out;
}

// Applies fn(elem) -> SO elementwise into a new tensor of dtype out_dt.
template <class SI, class SO, class Fn>
Tensor map_unary(const Tensor& x, DType out_dt, Fn&& fn) {
  Tensor out(out_dt, x.shape());
  const SI* px = x.data<SI>();
  SO* po = out.mutable_data<SO>();
  const int64_t n = x.numel();
  for (int64_t i = 0; i < n; ++i) po[i] = fn(px[i]);
  return out;
}

// ---- kernels of float -> float ops ------------------------------------------------

// Kernel of a float op y = f(x) where Op is constructed from the node (to read
// its attributes) and maps double -> double. Accepts f16/f32/f64/bf16.
template <class Op>
void float_unary_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  require_dtype(ctx.node, 0, x.dtype(), kFloat);
  const Op op(ctx.node);
  ctx.set_output(0, visit_float(x.dtype(), ctx.node, [&]<class IO>() {
    using S = typename IO::S;
    return map_unary<S, S>(x, x.dtype(), [&](S v) { return IO::store(op(IO::load(v))); });
  }));
}

// Infer of a float op y = f(x): dtype in kFloat, output like the input.
void infer_float_unary(InferContext& ctx);

// ---- inference helpers ------------------------------------------------------------

// Output 0 gets dtype `dt` and the broadcast shape of the given inputs
// (unknown when one input's rank is unknown).
void infer_broadcast_output(InferContext& ctx, const std::vector<size_t>& inputs, DType dt);
// Output 0 gets dtype `dt` and input 0's shape (or an unknown shape).
void infer_same_shape(InferContext& ctx, DType dt);

// Symbolic integer contents of input i (constants of integer or bool dtype,
// or a symbolic value), with the input's rank; nullopt when unknown or the
// rank is above 1.
struct SymInput {
  SymValue v;
  size_t rank = 0;
};
std::optional<SymInput> sym_input(const InferContext& ctx, size_t i);
// Sets out_syms[0] to fn applied elementwise over the broadcast of the given
// inputs' symbolic values, when all are known and fn gives a value for every
// element (fn returns nullopt for "not known statically").
void infer_sym_nary(InferContext& ctx, const std::vector<size_t>& inputs,
                    const std::function<std::optional<Dim>(const std::vector<Dim>&)>& fn);
// True when d is provably >= 0 (every term has a non-negative coefficient;
// symbols stand for sizes).
bool dim_nonneg(const Dim& d);
// Sign of d (-1, 0, 1) when provable for every value of its symbols (each >= 1).
std::optional<int> dim_sign(const Dim& d);

// ---- kernels of ops over floats and integers ------------------------------------------

// Kernel of an op defined on floats (through double) and integers (in the
// integer type). Op: constructed from the node; double operator()(double);
// template <class T> T on_int(T); static DTypeSet types().
template <class Op>
void numeric_unary_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  require_dtype(ctx.node, 0, x.dtype(), Op::types());
  const Op op(ctx.node);
  if (is_float(x.dtype())) {
    float_unary_kernel<Op>(ctx);
    return;
  }
  ctx.set_output(0, visit_int(x.dtype(), ctx.node, [&]<class T>() {
    return map_unary<T, T>(x, x.dtype(), [&](T v) { return op.template on_int<T>(v); });
  }));
}

template <class Op>
void numeric_unary_infer(InferContext& ctx) {
  require_dtype(ctx.node, 0, ctx.input_dtype(0), Op::types());
  infer_same_shape(ctx, ctx.input_dtype(0));
  if (!is_int(ctx.input_dtype(0))) return;
  const Op op(ctx.node);
  infer_sym_nary(ctx, {0}, [&](const std::vector<Dim>& a) { return op.on_dim(a[0]); });
}

// ---- legacy-opset upgrades ----------------------------------------------------------

// Removes `consumed_inputs` (opset < 6) from a node.
void drop_consumed_inputs(Node& node);
// Opset < 7 binary ops carried `broadcast`/`axis` attributes: with
// broadcast=1 input 1 is aligned to input 0 starting at `axis`. Rewrites input
// 1 so that numpy broadcasting gives the same result, and drops the attributes.
void upgrade_legacy_broadcast(Node& node, int64_t opset);
// drop_consumed_inputs + upgrade_legacy_broadcast, for the binary arithmetic ops.
void upgrade_legacy_binary(Node& node, int64_t opset);
// drop_consumed_inputs, for unary ops whose v1 carried it.
void upgrade_legacy_unary(Node& node, int64_t opset);

// ---- family registration --------------------------------------------------------------

void register_unary_ops(OpRegistry& r);
void register_activation_ops(OpRegistry& r);
void register_binary_ops(OpRegistry& r);
void register_variadic_ops(OpRegistry& r);
void register_cast_ops(OpRegistry& r);

}  // namespace tessel::ew
