// Matrix products: MatMul (numpy batch broadcasting, 1-D operands), Gemm,
// MatMulInteger and QLinearMatMul. Einsum and Det live in matmul_einsum.cpp
// and matmul_det.cpp.
//
// Float products are computed in double: a product of two floats is exact in
// double and the K-term sums are rounded once per output element, so the
// reference is far more exact than any float32 kernel it checks.
#include <cmath>

#include "tessel/ops/math_util.h"
#include "tessel/ops/matmul/matmul_core.h"
#include "tessel/ops/registry.h"

namespace tessel {

void register_einsum_ops(OpRegistry& r);  // matmul_einsum.cpp
void register_det_ops(OpRegistry& r);     // matmul_det.cpp

namespace {

using namespace mathops;

// ---- MatMul shapes --------------------------------------------------------------

// Batched layout of A·B: A is [a_batch.., M, K], B is [b_batch.., K, N]; a 1-D
// A is [1, K] and a 1-D B is [K, 1], their unit dim dropped from the result.
struct MatmulDims {
  std::vector<int64_t> a_batch, b_batch, batch, out_shape;
  int64_t M = 1, K = 1, N = 1;
};

MatmulDims matmul_dims(const Node& n, const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  TS_CHECK(!a.empty() && !b.empty(), n.describe(), ": MatMul operands must have rank >= 1, got ", dims_str(a),
           " and ", dims_str(b));
  MatmulDims d;
  const bool av = a.size() == 1, bv = b.size() == 1;
  d.M = av ? 1 : a[a.size() - 2];
  d.K = a.back();
  const int64_t kb = bv ? b[0] : b[b.size() - 2];
  d.N = bv ? 1 : b.back();
  TS_CHECK(d.K == kb, n.describe(), ": inner dimensions do not match: ", dims_str(a), " x ", dims_str(b));
  if (!av) d.a_batch.assign(a.begin(), a.end() - 2);
  if (!bv) d.b_batch.assign(b.begin(), b.end() - 2);
  d.batch = broadcast_dims(d.a_batch, d.b_batch, n);
  d.out_shape = d.batch;
  if (!av) d.out_shape.push_back(d.M);
  if (!bv) d.out_shape.push_back(d.N);
  checked_numel(d.out_shape);
  return d;
}

// C[batch] = A[batch] · B[batch] with broadcasting over the batch dims.
template <class T>
std::vector<T> batched_matmul(const MatmulDims& d, const std::vector<T>& A, const std::vector<T>& B) {
  const int64_t nb = checked_numel(d.batch);
  std::vector<T> C(static_cast<size_t>(checked_mul(nb, checked_mul(d.M, d.N))), T(0));
  // One B for every batch and A not broadcast: A is one [nb*M, K] matrix
  // (e.g. [seq, batch, K] x [K, N] from seq-first exports, where M is 1).
  if (checked_numel(d.b_batch) == 1 && d.a_batch == d.batch) {
    matmul_accumulate(A.data(), B.data(), C.data(), nb * d.M, d.K, d.N);
    return C;
  }
  const BroadcastIndexer ai(d.a_batch, d.batch), bi(d.b_batch, d.batch);
  for (int64_t b = 0; b < nb; ++b)
    matmul_accumulate(A.data() + ai(b) * d.M * d.K, B.data() + bi(b) * d.K * d.N, C.data() + b * d.M * d.N, d.M,
                      d.K, d.N);
  return C;
}

std::vector<uint64_t> to_uint64_bits(const Tensor& t) {
  std::vector<uint64_t> v(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) v[i] = t.get_u64(i);
  return v;
}

Tensor tensor_from_uint64_bits(DType dt, std::vector<int64_t> shape, const std::vector<uint64_t>& v) {
  Tensor t(dt, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) t.set_u64(i, v[i]);
  return t;
}

void matmul_kernel(KernelContext& c) {
  const Node& n = c.node;
  const Tensor& a = c.input(0);
  const Tensor& b = c.input(1);
  require_dtype(n, 0, a.dtype(), kNumericTypes);
  TS_CHECK(a.dtype() == b.dtype(), n.describe(), ": operands have different dtypes ", dtype_name(a.dtype()), " and ",
           dtype_name(b.dtype()));
  const MatmulDims d = matmul_dims(n, a.shape(), b.shape());
  if (is_float(a.dtype())) {
    c.set_output(0, tensor_from_doubles(a.dtype(), d.out_shape, batched_matmul(d, to_doubles(a), to_doubles(b))));
  } else {
    c.set_output(0, tensor_from_uint64_bits(a.dtype(), d.out_shape,
                                            batched_matmul(d, to_uint64_bits(a), to_uint64_bits(b))));
  }
}

// Symbolic output shape of MatMul (also used by MatMulInteger, QLinearMatMul).
Shape matmul_shape(const Node& n, const Shape& a, const Shape& b) {
  TS_CHECK(!a.empty() && !b.empty(), n.describe(), ": MatMul operands must have rank >= 1, got ", shape_str(a),
           " and ", shape_str(b));
  const bool av = a.size() == 1, bv = b.size() == 1;
  const Dim ka = a.back(), kb = bv ? b[0] : b[b.size() - 2];
  TS_CHECK(ka == kb || !ka.is_const() || !kb.is_const(), n.describe(), ": inner dimensions do not match: ",
           shape_str(a), " x ", shape_str(b));
  Shape ab = av ? Shape{} : Shape(a.begin(), a.end() - 2);
  Shape bb = bv ? Shape{} : Shape(b.begin(), b.end() - 2);
  Shape out = broadcast_shapes(ab, bb, n);
  if (!av) out.push_back(a[a.size() - 2]);
  if (!bv) out.push_back(b.back());
  return out;
}

void matmul_infer(InferContext& c) {
  const Node& n = c.node;
  const DType dt = c.input_dtype(0);
  if (dt != DType::Undefined) require_dtype(n, 0, dt, kNumericTypes);
  const DType bt = c.input_dtype(1);
  TS_CHECK(dt == DType::Undefined || bt == DType::Undefined || dt == bt, n.describe(),
           ": operands have different dtypes ", dtype_name(dt), " and ", dtype_name(bt));
  if (!c.has_shape(0) || !c.has_shape(1)) {
    c.set_output_unknown_shape(0, dt);
    return;
  }
  c.set_output(0, dt, matmul_shape(n, c.input_shape(0), c.input_shape(1)));
}

// ---- Gemm -------------------------------------------------------------------------

// Row-major transpose of a rows x cols matrix.
template <class T>
std::vector<T> transposed(const std::vector<T>& m, int64_t rows, int64_t cols) {
  std::vector<T> t(m.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) t[c * rows + r] = m[r * cols + c];
  return t;
}

struct GemmDims {
  int64_t M, K, N;
};

GemmDims gemm_dims(const Node& n, const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  TS_CHECK(a.size() == 2 && b.size() == 2, n.describe(), ": Gemm operands must be 2-D, got ", dims_str(a), " and ",
           dims_str(b));
  const bool ta = n.attr_int("transA", 0) != 0, tb = n.attr_int("transB", 0) != 0;
  GemmDims d{ta ? a[1] : a[0], ta ? a[0] : a[1], tb ? b[0] : b[1]};
  const int64_t kb = tb ? b[1] : b[0];
  TS_CHECK(d.K == kb, n.describe(), ": inner dimensions do not match: A ", dims_str(a), (ta ? "^T" : ""), " x B ",
           dims_str(b), (tb ? "^T" : ""));
  return d;
}

// C must broadcast to [M, N] in one direction only.
void check_gemm_bias(const Node& n, const std::vector<int64_t>& c, int64_t M, int64_t N) {
  TS_CHECK(c.size() <= 2, n.describe(), ": C must have rank <= 2, got ", dims_str(c));
  const int64_t want[2] = {M, N};
  for (size_t i = 0; i < c.size(); ++i) {
    const int64_t w = want[2 - c.size() + i];
    TS_CHECK(c[i] == w || c[i] == 1, n.describe(), ": C of shape ", dims_str(c), " does not broadcast to [", M, ",",
             N, "]");
  }
}

template <class T>
std::vector<T> gemm_product(const Node& n, const std::vector<T>& A, const std::vector<T>& B, const GemmDims& d) {
  const bool ta = n.attr_int("transA", 0) != 0, tb = n.attr_int("transB", 0) != 0;
  const std::vector<T> a = ta ? transposed(A, d.K, d.M) : A;
  const std::vector<T> b = tb ? transposed(B, d.N, d.K) : B;
  std::vector<T> y(static_cast<size_t>(checked_mul(d.M, d.N)), T(0));
  matmul_accumulate(a.data(), b.data(), y.data(), d.M, d.K, d.N);
  return y;
}

void gemm_kernel(KernelContext& c) {
  const Node& n = c.node;
  const Tensor& a = c.input(0);
  const Tensor& b = c.input(1);
  require_dtype(n, 0, a.dtype(), kNumericTypes);
  TS_CHECK(b.dtype() == a.dtype(), n.describe(), ": B has dtype ", dtype_name(b.dtype()), ", expected ",
           dtype_name(a.dtype()));
  const GemmDims d = gemm_dims(n, a.shape(), b.shape());
  const double alpha = n.attr_float("alpha", 1.0f), beta = n.attr_float("beta", 1.0f);
  const Tensor* cb = c.has_input(2) ? &c.input(2) : nullptr;
  std::vector<int64_t> out_shape{d.M, d.N};
  std::optional<BroadcastIndexer> ci;
  if (cb) {
    TS_CHECK(cb->dtype() == a.dtype(), n.describe(), ": C has dtype ", dtype_name(cb->dtype()), ", expected ",
             dtype_name(a.dtype()));
    check_gemm_bias(n, cb->shape(), d.M, d.N);
    ci.emplace(cb->shape(), out_shape);
  }
  const int64_t total = d.M * d.N;
  if (is_float(a.dtype())) {
    std::vector<double> y = gemm_product(n, to_doubles(a), to_doubles(b), d);
    const std::vector<double> cv = cb ? to_doubles(*cb) : std::vector<double>{};
    for (int64_t i = 0; i < total; ++i) {
      y[i] *= alpha;
      if (cb && beta != 0) y[i] += beta * cv[(*ci)(i)];
    }
    c.set_output(0, tensor_from_doubles(a.dtype(), out_shape, y));
    return;
  }
  // Integer Gemm: integral alpha/beta keep exact wrapping arithmetic.
  TS_CHECK(alpha == std::trunc(alpha) && beta == std::trunc(beta), n.describe(),
           ": integer Gemm needs integral alpha and beta");
  std::vector<uint64_t> y = gemm_product(n, to_uint64_bits(a), to_uint64_bits(b), d);
  const std::vector<uint64_t> cv = cb ? to_uint64_bits(*cb) : std::vector<uint64_t>{};
  const uint64_t ua = static_cast<uint64_t>(static_cast<int64_t>(alpha));
  const uint64_t ub = static_cast<uint64_t>(static_cast<int64_t>(beta));
  for (int64_t i = 0; i < total; ++i) {
    y[i] *= ua;
    if (cb) y[i] += ub * cv[(*ci)(i)];
  }
  c.set_output(0, tensor_from_uint64_bits(a.dtype(), out_shape, y));
}

void gemm_infer(InferContext& c) {
  const Node& n = c.node;
  const DType dt = c.input_dtype(0);
  if (dt != DType::Undefined) require_dtype(n, 0, dt, kNumericTypes);
  if (!c.has_shape(0) || !c.has_shape(1)) {
    c.set_output_unknown_shape(0, dt);
    return;
  }
  const Shape& a = c.input_shape(0);
  const Shape& b = c.input_shape(1);
  TS_CHECK(a.size() == 2 && b.size() == 2, n.describe(), ": Gemm operands must be 2-D, got ", shape_str(a), " and ",
           shape_str(b));
  const bool ta = n.attr_int("transA", 0) != 0, tb = n.attr_int("transB", 0) != 0;
  const Dim M = ta ? a[1] : a[0], K = ta ? a[0] : a[1];
  const Dim kb = tb ? b[1] : b[0], N = tb ? b[0] : b[1];
  TS_CHECK(K == kb || !K.is_const() || !kb.is_const(), n.describe(), ": inner dimensions do not match: ",
           shape_str(a), " x ", shape_str(b));
  if (c.has_shape(2)) {
    const Shape& cs = c.input_shape(2);
    TS_CHECK(cs.size() <= 2, n.describe(), ": C must have rank <= 2, got ", shape_str(cs));
    const Dim want[2] = {M, N};
    for (size_t i = 0; i < cs.size(); ++i) {
      const Dim& w = want[2 - cs.size() + i];
      TS_CHECK(cs[i] == w || cs[i] == Dim(1) || !cs[i].is_const() || !w.is_const(), n.describe(), ": C of shape ",
               shape_str(cs), " does not broadcast to [", M.str(), ",", N.str(), "]");
    }
  }
  c.set_output(0, dt, {M, N});
}

// Gemm-1..6 had a `broadcast` flag; broadcasting of C is always on since 7.
void gemm_upgrade(Node& n, int64_t opset) {
  if (opset < 7) drop_attrs(n, {"broadcast"});
}

// ---- MatMulInteger / QLinearMatMul --------------------------------------------

// Zero point (or scale) of a quantized operand, expanded to one value per
// element of the operand: a scalar (or 1-element tensor) applies everywhere;
// a 1-D tensor is per row of A (`per_row`) or per column of B; an N-D tensor
// broadcasts against the operand.
std::vector<double> expand_quant_param(const Node& n, const Tensor& p, const std::vector<int64_t>& shape,
                                       bool per_row, const char* what) {
  const int64_t total = checked_numel(shape);
  std::vector<double> out(static_cast<size_t>(total));
  const std::vector<double> v = to_doubles(p);
  if (p.numel() == 1) {
    std::fill(out.begin(), out.end(), v[0]);
    return out;
  }
  std::vector<int64_t> ps = p.shape();
  const size_t r = shape.size();
  if (ps.size() == 1 && r >= 1) {
    // Per row of A ([.., M, K]: index M) or per column of B ([.., K, N]: index N).
    const int64_t axis_len = per_row ? (r >= 2 ? shape[r - 2] : 1) : shape[r - 1];
    TS_CHECK(ps[0] == axis_len, n.describe(), ": ", what, " has ", ps[0], " elements, expected 1 or ", axis_len);
    ps = per_row ? std::vector<int64_t>{ps[0], 1} : std::vector<int64_t>{ps[0]};
  }
  TS_CHECK(ps.size() <= r, n.describe(), ": ", what, " of shape ", dims_str(p.shape()), " does not fit the operand ",
           dims_str(shape));
  for (size_t i = 0; i < ps.size(); ++i) {
    const int64_t want = shape[r - ps.size() + i];
    TS_CHECK(ps[i] == want || ps[i] == 1, n.describe(), ": ", what, " of shape ", dims_str(p.shape()),
             " does not broadcast to the operand ", dims_str(shape));
  }
  const BroadcastIndexer bi(ps, shape);
  for (int64_t i = 0; i < total; ++i) out[i] = v[bi(i)];
  return out;
}

bool is_q8(DType t) { return t == DType::I8 || t == DType::U8; }

void matmul_integer_kernel(KernelContext& c) {
  const Node& n = c.node;
  const Tensor& a = c.input(0);
  const Tensor& b = c.input(1);
  check_dtype(n, 0, a.dtype(), is_q8, "int8|uint8");
  check_dtype(n, 1, b.dtype(), is_q8, "int8|uint8");
  const MatmulDims d = matmul_dims(n, a.shape(), b.shape());
  std::vector<int64_t> A = to_int64s(a), B = to_int64s(b);
  if (c.has_input(2)) {
    TS_CHECK(c.input(2).dtype() == a.dtype(), n.describe(), ": a_zero_point must have A's dtype");
    const std::vector<double> zp = expand_quant_param(n, c.input(2), a.shape(), true, "a_zero_point");
    for (size_t i = 0; i < A.size(); ++i) A[i] -= static_cast<int64_t>(zp[i]);
  }
  if (c.has_input(3)) {
    TS_CHECK(c.input(3).dtype() == b.dtype(), n.describe(), ": b_zero_point must have B's dtype");
    const std::vector<double> zp = expand_quant_param(n, c.input(3), b.shape(), false, "b_zero_point");
    for (size_t i = 0; i < B.size(); ++i) B[i] -= static_cast<int64_t>(zp[i]);
  }
  c.set_output(0, tensor_from_int64s(DType::I32, d.out_shape, batched_matmul(d, A, B)));
}

void matmul_integer_infer(InferContext& c) {
  const Node& n = c.node;
  if (c.input_dtype(0) != DType::Undefined) check_dtype(n, 0, c.input_dtype(0), is_q8, "int8|uint8");
  if (c.input_dtype(1) != DType::Undefined) check_dtype(n, 1, c.input_dtype(1), is_q8, "int8|uint8");
  if (!c.has_shape(0) || !c.has_shape(1)) {
    c.set_output_unknown_shape(0, DType::I32);
    return;
  }
  c.set_output(0, DType::I32, matmul_shape(n, c.input_shape(0), c.input_shape(1)));
}

bool is_qlinear_type(DType t) {
  return dtype_in(t, {DType::I8, DType::U8, DType::F8E4M3FN, DType::F8E4M3FNUZ, DType::F8E5M2, DType::F8E5M2FNUZ});
}

// Value of a scale as stored in its own dtype (the reference multiplies scales
// in that dtype before applying them).
double round_to(DType t, double v) {
  Tensor s(t, {});
  s.set_f64(0, v);
  return s.get_f64(0);
}

void qlinear_matmul_kernel(KernelContext& c) {
  const Node& n = c.node;
  const Tensor& a = c.input(0);
  const Tensor& b = c.input(3);
  check_dtype(n, 0, a.dtype(), is_qlinear_type, "int8|uint8|float8");
  check_dtype(n, 3, b.dtype(), is_qlinear_type, "int8|uint8|float8");
  const Tensor& as = c.input(1);
  const Tensor& bs = c.input(4);
  const Tensor& ys = c.input(6);
  for (size_t i : {size_t{1}, size_t{4}, size_t{6}})
    check_dtype(n, i, c.input(i).dtype(), [](DType t) { return dtype_in(t, {DType::F32, DType::F16, DType::BF16}); },
                "float|float16|bfloat16");
  const DType out_t = c.has_input(7) ? c.input(7).dtype() : a.dtype();
  check_dtype(n, 7, out_t, is_qlinear_type, "int8|uint8|float8");
  const MatmulDims d = matmul_dims(n, a.shape(), b.shape());
  TS_CHECK(d.batch.empty() || checked_numel(d.batch) >= 0, n.describe(), ": bad batch shape");

  // Dequantized operands: (q - zero_point) * scale, exact in double.
  auto dequant = [&](const Tensor& q, size_t scale_i, size_t zp_i, bool per_row, std::vector<double>* out_int,
                     std::vector<double>* out_scale) {
    *out_int = to_doubles(q);
    if (c.has_input(zp_i)) {
      TS_CHECK(c.input(zp_i).dtype() == q.dtype(), n.describe(), ": zero point input ", zp_i,
               " must have the dtype of its operand");
      const std::vector<double> zp = expand_quant_param(n, c.input(zp_i), q.shape(), per_row, "zero point");
      for (size_t i = 0; i < out_int->size(); ++i) (*out_int)[i] -= zp[i];
    }
    *out_scale = expand_quant_param(n, c.input(scale_i), q.shape(), per_row, "scale");
  };
  std::vector<double> A, Asc, B, Bsc;
  dequant(a, 1, 2, true, &A, &Asc);
  dequant(b, 4, 5, false, &B, &Bsc);
  const bool scalar_scales = as.numel() == 1 && bs.numel() == 1 && ys.numel() == 1;
  std::vector<double> Y;
  double mult = 1;
  if (scalar_scales) {
    // As the ONNX reference: integer product, then one multiplier computed in
    // the scales' dtype.
    const DType st = as.dtype();
    mult = round_to(st, round_to(st, as.get_f64(0) * bs.get_f64(0)) / ys.get_f64(0));
    Y = batched_matmul(d, A, B);
  } else {
    TS_CHECK(ys.numel() == 1, n.describe(), ": y_scale must be a scalar");
    for (size_t i = 0; i < A.size(); ++i) A[i] *= Asc[i];
    for (size_t i = 0; i < B.size(); ++i) B[i] *= Bsc[i];
    Y = batched_matmul(d, A, B);
    mult = 1.0 / ys.get_f64(0);
  }
  const double yzp = c.has_input(7) ? c.input(7).get_f64(0) : 0.0;
  TS_CHECK(!c.has_input(7) || c.input(7).numel() == 1, n.describe(), ": y_zero_point must be a scalar");
  Tensor out(out_t, d.out_shape);
  const bool int_out = is_int(out_t);
  const double lo = out_t == DType::I8 ? -128 : 0, hi = out_t == DType::I8 ? 127 : 255;
  for (int64_t i = 0; i < out.numel(); ++i) {
    double v = Y[i] * mult + yzp;
    if (int_out) {
      v = std::nearbyint(v);  // round half to even (default rounding mode)
      v = std::isnan(v) ? 0 : std::min(hi, std::max(lo, v));
      out.set_i64(i, static_cast<int64_t>(v));
    } else {
      out.set_f64(i, v);
    }
  }
  c.set_output(0, out);
}

void qlinear_matmul_infer(InferContext& c) {
  const Node& n = c.node;
  if (c.input_dtype(0) != DType::Undefined) check_dtype(n, 0, c.input_dtype(0), is_qlinear_type, "int8|uint8|float8");
  if (c.input_dtype(3) != DType::Undefined) check_dtype(n, 3, c.input_dtype(3), is_qlinear_type, "int8|uint8|float8");
  const DType out_t = c.has_input(7) ? c.input_dtype(7) : c.input_dtype(0);
  if (!c.has_shape(0) || !c.has_shape(3)) {
    c.set_output_unknown_shape(0, out_t);
    return;
  }
  c.set_output(0, out_t, matmul_shape(n, c.input_shape(0), c.input_shape(3)));
}

OpSchema schema(const char* name, int min_in, int max_in, InferFn inf, KernelFn k, int since = 1) {
  OpSchema s;
  s.name = name;
  s.min_inputs = min_in;
  s.max_inputs = max_in;
  s.infer = inf;
  s.kernel = k;
  s.since_version = since;
  return s;
}

}  // namespace

void register_matmul_ops(OpRegistry& r) {
  r.add(schema("MatMul", 2, 2, matmul_infer, matmul_kernel));
  OpSchema gemm = schema("Gemm", 2, 3, gemm_infer, gemm_kernel);
  gemm.upgrade = gemm_upgrade;
  r.add(gemm);
  r.add(schema("MatMulInteger", 2, 4, matmul_integer_infer, matmul_integer_kernel, 10));
  r.add(schema("QLinearMatMul", 8, 8, qlinear_matmul_infer, qlinear_matmul_kernel, 10));
  register_einsum_ops(r);
  register_det_ops(r);
}

}  // namespace tessel
