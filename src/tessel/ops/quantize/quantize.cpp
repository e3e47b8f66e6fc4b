// Linear quantization: QuantizeLinear, DequantizeLinear (per-tensor,
// per-axis and blocked scales; integer, float8, float4, int4/uint4 and
// int2/uint2 quantized types) and DynamicQuantizeLinear.
//
// Arithmetic follows the ONNX reference semantics: the quotient x / scale is
// rounded to the precision type (the `precision` attribute, else the common
// type of x and scale) before rounding half to even and saturating; a
// dequantized value is (x - zero_point) * scale computed in float32 and then
// converted to the output type.
#include <cmath>

#include "tessel/ops/common.h"
#include "tessel/ops/registry.h"

namespace tessel {

void register_quantize_ops(OpRegistry& r);

namespace {

bool is_f8(DType t) {
  return t == DType::F8E4M3FN || t == DType::F8E4M3FNUZ || t == DType::F8E5M2 || t == DType::F8E5M2FNUZ;
}

// Quantized storage types (zero point / y of QuantizeLinear, x of Dequantize).
bool is_quant_type(DType t) {
  switch (t) {
    case DType::I8: case DType::U8: case DType::I16: case DType::U16: case DType::I4: case DType::U4:
    case DType::I2: case DType::U2: case DType::F4E2M1: case DType::F8E4M3FN: case DType::F8E4M3FNUZ:
    case DType::F8E5M2: case DType::F8E5M2FNUZ:
      return true;
    default:
      return false;
  }
}

// Saturation range of the integer quantized types.
void int_range(DType t, int64_t* lo, int64_t* hi) {
  const int bits = int_bits(t);
  if (is_signed_int(t)) {
    *lo = -(int64_t{1} << (bits - 1));
    *hi = (int64_t{1} << (bits - 1)) - 1;
  } else {
    *lo = 0;
    *hi = (int64_t{1} << bits) - 1;
  }
}

// Rounds v to the nearest value of float type p (f64 leaves it).
double round_to(DType p, double v) {
  switch (p) {
    case DType::F32: return static_cast<float>(v);
    case DType::F16: return f16_bits_to_f32(f32_to_f16_bits(static_cast<float>(v)));
    case DType::BF16: return bf16_bits_to_f32(f32_to_bf16_bits(static_cast<float>(v)));
    default: return v;
  }
}

// Maps a flat index of x to the flat index of its scale / zero point.
struct ScaleMap {
  enum class Mode { Tensor, Axis, Block } mode = Mode::Tensor;
  int64_t axis_dim = 1, inner = 1, block = 1, scale_axis_dim = 1;

  int64_t operator()(int64_t i) const {
    switch (mode) {
      case Mode::Tensor: return 0;
      case Mode::Axis: return (i / inner) % axis_dim;
      case Mode::Block: {
        const int64_t in = i % inner, a = (i / inner) % axis_dim, outer = i / (inner * axis_dim);
        return (outer * scale_axis_dim + a / block) * inner + in;
      }
    }
    return 0;
  }
};

ScaleMap make_scale_map(const std::vector<int64_t>& x, const std::vector<int64_t>& scale, const Node& n) {
  ScaleMap m;
  const int64_t numel = checked_numel(scale);
  const int64_t block = n.attr_int("block_size", 0);
  TS_CHECK(block >= 0, n.describe(), ": block_size must not be negative");
  if (scale.empty() || (scale.size() == 1 && numel == 1 && block == 0)) return m;
  const int64_t rank = static_cast<int64_t>(x.size());
  const int64_t axis = normalize_axis(n.attr_int("axis", 1), rank, n);
  m.axis_dim = x[static_cast<size_t>(axis)];
  for (size_t d = static_cast<size_t>(axis) + 1; d < x.size(); ++d) m.inner *= x[d];
  if (block == 0) {
    TS_CHECK(scale.size() == 1 && scale[0] == m.axis_dim, n.describe(), ": per-axis scale must have shape [",
             m.axis_dim, "], got ", dims_str(scale));
    m.mode = ScaleMap::Mode::Axis;
    return m;
  }
  TS_CHECK(static_cast<int64_t>(scale.size()) == rank, n.describe(), ": blocked scale must have the rank of x, got ",
           dims_str(scale), " for ", dims_str(x));
  for (int64_t d = 0; d < rank; ++d) {
    const int64_t want = d == axis ? (x[static_cast<size_t>(d)] + block - 1) / block : x[static_cast<size_t>(d)];
    TS_CHECK(scale[static_cast<size_t>(d)] == want, n.describe(), ": blocked scale has shape ", dims_str(scale),
             ", expected dim ", d, " = ", want, " for x ", dims_str(x), " and block_size ", block);
  }
  m.mode = ScaleMap::Mode::Block;
  m.block = block;
  m.scale_axis_dim = scale[static_cast<size_t>(axis)];
  return m;
}

// The zero point has the scale's shape; a one-element zero point also goes
// with a scalar scale (exporters write [1] for per-tensor parameters).
void check_zero_point_shape(const std::vector<int64_t>& zp, const std::vector<int64_t>& scale, const Node& n) {
  const bool both_single = checked_numel(zp) == 1 && checked_numel(scale) == 1 && zp.size() <= 1 && scale.size() <= 1;
  TS_CHECK(zp == scale || both_single, n.describe(), ": zero point shape ", dims_str(zp), " differs from the scale's ",
           dims_str(scale));
}

// Static shape validation of scale against x in inference, where both are known.
void check_scale_shape(const InferContext& ctx, size_t x, size_t scale) {
  if (!ctx.has_shape(x) || !ctx.has_shape(scale)) return;
  const Shape& xs = ctx.input_shape(x);
  const Shape& ss = ctx.input_shape(scale);
  if (!is_static(xs) || !is_static(ss)) return;
  make_scale_map(static_dims(xs), static_dims(ss), ctx.node);
  if (ctx.has_shape(scale + 1) && is_static(ctx.input_shape(scale + 1)))
    check_zero_point_shape(static_dims(ctx.input_shape(scale + 1)), static_dims(ss), ctx.node);
}

DType attr_dtype(const Node& n, const char* name) {
  const int64_t code = n.attr_int(name, 0);
  if (code == 0) return DType::Undefined;
  DType dt;
  TS_CHECK(code == static_cast<int>(code) && dtype_from_onnx(static_cast<int>(code), &dt), n.describe(), ": ", name,
           " ", code, " is not a supported type");
  return dt;
}

// ---- QuantizeLinear ------------------------------------------------------------

bool is_q_input(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16 || t == DType::I32; }
bool is_q_scale(DType t) { return is_q_input(t) || t == DType::F8E8M0; }

DType quantize_out_type(const Node& n, DType zero_point) {
  const DType attr = attr_dtype(n, "output_dtype");
  if (zero_point != DType::Undefined) {
    TS_CHECK(attr == DType::Undefined || attr == zero_point, n.describe(), ": output_dtype ", dtype_name(attr),
             " differs from the zero point's ", dtype_name(zero_point));
    return zero_point;
  }
  const DType out = attr == DType::Undefined ? DType::U8 : attr;
  TS_CHECK(is_quant_type(out), n.describe(), ": ", dtype_name(out), " is not a quantized type");
  return out;
}

// The type the division is carried out in.
DType division_type(const Node& n, DType x, DType scale) {
  const DType p = attr_dtype(n, "precision");
  if (p != DType::Undefined) {
    TS_CHECK(p == DType::F32 || p == DType::F16 || p == DType::BF16 || p == DType::F64, n.describe(),
             ": precision must be a float type, got ", dtype_name(p));
    return p;
  }
  if (x == scale && x != DType::I32) return x;
  if (x == DType::I32 || scale == DType::I32) return DType::F64;
  return DType::F32;
}

void infer_quantize(InferContext& ctx) {
  const Node& n = ctx.node;
  check_dtype(n, 0, ctx.input_dtype(0), is_q_input, "float, float16, bfloat16 or int32");
  check_dtype(n, 1, ctx.input_dtype(1), is_q_scale, "float, float16, bfloat16, int32 or float8e8m0");
  const DType zp = ctx.has_input(2) ? ctx.input_dtype(2) : DType::Undefined;
  if (zp != DType::Undefined) check_dtype(n, 2, zp, is_quant_type, "a quantized type");
  check_scale_shape(ctx, 0, 1);
  const DType out = quantize_out_type(n, zp);
  if (ctx.has_shape(0)) ctx.set_output(0, out, ctx.input_shape(0));
  else ctx.set_output_unknown_shape(0, out);
}

void kernel_quantize(KernelContext& ctx) {
  const Node& n = ctx.node;
  const Tensor& x = ctx.input(0);
  const Tensor& scale = ctx.input(1);
  check_dtype(n, 0, x.dtype(), is_q_input, "float, float16, bfloat16 or int32");
  check_dtype(n, 1, scale.dtype(), is_q_scale, "float, float16, bfloat16, int32 or float8e8m0");
  const Tensor* zp = ctx.has_input(2) ? &ctx.input(2) : nullptr;
  if (zp) {
    check_dtype(n, 2, zp->dtype(), is_quant_type, "a quantized type");
    check_zero_point_shape(zp->shape(), scale.shape(), n);
  }
  const DType out_t = quantize_out_type(n, zp ? zp->dtype() : DType::Undefined);
  const ScaleMap map = make_scale_map(x.shape(), scale.shape(), n);
  const DType prec = division_type(n, x.dtype(), scale.dtype() == DType::F8E8M0 ? DType::F32 : scale.dtype());
  const bool saturate = n.attr_int("saturate", 1) != 0;
  Tensor y(out_t, x.shape());
  int64_t lo = 0, hi = 0;
  if (is_int(out_t)) int_range(out_t, &lo, &hi);
  for (int64_t i = 0; i < x.numel(); ++i) {
    const int64_t si = map(i);
    const double q = round_to(prec, round_to(prec, x.get_f64(i)) / round_to(prec, scale.get_f64(si)));
    if (is_int(out_t)) {
      // Round half to even (the default rounding mode), then shift and saturate.
      double r = std::nearbyint(q);
      if (std::isnan(r)) r = 0;
      r = std::min(std::max(r, -1e18), 1e18);
      int64_t v = static_cast<int64_t>(r) + (zp ? zp->get_i64(si) : 0);
      y.set_i64(i, std::min(std::max(v, lo), hi));
    } else {
      const double z = zp ? zp->get_f64(si) : 0.0;
      const double v = z != 0 ? q + z : q;  // adding +0 would turn -0 into +0
      if (is_f8(out_t)) y.mutable_raw()[i] = double_to_f8_bits(out_t, v, saturate);
      else y.mutable_raw()[i] = double_to_f4e2m1_bits(v);  // float4 saturates by construction
    }
  }
  ctx.set_output(0, y);
}

// ---- DequantizeLinear ----------------------------------------------------------

bool is_dq_input(DType t) { return is_quant_type(t) || t == DType::I32; }
bool is_dq_scale(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16 || t == DType::F8E8M0; }

DType dequantize_out_type(const Node& n, DType scale) {
  const DType attr = attr_dtype(n, "output_dtype");
  const DType out = attr != DType::Undefined ? attr : scale;
  TS_CHECK(out == DType::F32 || out == DType::F16 || out == DType::BF16 || out == DType::Undefined, n.describe(),
           ": output type must be float, float16 or bfloat16, got ", dtype_name(out),
           attr == DType::Undefined ? " (set output_dtype)" : "");
  return out;
}

void infer_dequantize(InferContext& ctx) {
  const Node& n = ctx.node;
  const DType xt = ctx.input_dtype(0);
  check_dtype(n, 0, xt, is_dq_input, "a quantized type or int32");
  check_dtype(n, 1, ctx.input_dtype(1), is_dq_scale, "float, float16, bfloat16 or float8e8m0");
  if (ctx.has_input(2))
    TS_CHECK(ctx.input_dtype(2) == xt, n.describe(), ": zero point dtype ", dtype_name(ctx.input_dtype(2)),
             " differs from x's ", dtype_name(xt));
  check_scale_shape(ctx, 0, 1);
  const DType out = dequantize_out_type(n, ctx.input_dtype(1));
  if (ctx.has_shape(0)) ctx.set_output(0, out, ctx.input_shape(0));
  else ctx.set_output_unknown_shape(0, out);
}

void kernel_dequantize(KernelContext& ctx) {
  const Node& n = ctx.node;
  const Tensor& x = ctx.input(0);
  const Tensor& scale = ctx.input(1);
  check_dtype(n, 0, x.dtype(), is_dq_input, "a quantized type or int32");
  check_dtype(n, 1, scale.dtype(), is_dq_scale, "float, float16, bfloat16 or float8e8m0");
  const Tensor* zp = ctx.has_input(2) ? &ctx.input(2) : nullptr;
  if (zp) {
    TS_CHECK(zp->dtype() == x.dtype(), n.describe(), ": zero point dtype ", dtype_name(zp->dtype()),
             " differs from x's ", dtype_name(x.dtype()));
    check_zero_point_shape(zp->shape(), scale.shape(), n);
  }
  const DType out_t = dequantize_out_type(n, scale.dtype());
  const ScaleMap map = make_scale_map(x.shape(), scale.shape(), n);
  Tensor y(out_t, x.shape());
  for (int64_t i = 0; i < x.numel(); ++i) {
    const int64_t si = map(i);
    const float dx = static_cast<float>(x.get_f64(i)) - (zp ? static_cast<float>(zp->get_f64(si)) : 0.0f);
    y.set_f64(i, static_cast<double>(dx * static_cast<float>(scale.get_f64(si))));
  }
  ctx.set_output(0, y);
}

// ---- DynamicQuantizeLinear -----------------------------------------------------

void infer_dynamic_quantize(InferContext& ctx) {
  check_dtype(ctx.node, 0, ctx.input_dtype(0), [](DType t) { return t == DType::F32; }, "float");
  if (ctx.has_shape(0)) ctx.set_output(0, DType::U8, ctx.input_shape(0));
  else ctx.set_output_unknown_shape(0, DType::U8);
  if (ctx.out_types.size() > 1) ctx.set_output(1, DType::F32, {});
  if (ctx.out_types.size() > 2) ctx.set_output(2, DType::U8, {});
}

void kernel_dynamic_quantize(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  check_dtype(ctx.node, 0, x.dtype(), [](DType t) { return t == DType::F32; }, "float");
  const float* xd = x.data<float>();
  // The range always includes 0 so that 0 is exactly representable.
  float mx = 0, mn = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    mx = std::max(mx, xd[i]);
    mn = std::min(mn, xd[i]);
  }
  const float scale = (mx == mn ? 1.0f : mx - mn) / 255.0f;
  const float zp_f = std::min(std::max(0.0f - mn / scale, 0.0f), 255.0f);
  const float zp = std::nearbyint(zp_f);
  Tensor y(DType::U8, x.shape());
  uint8_t* yd = y.mutable_data<uint8_t>();
  for (int64_t i = 0; i < x.numel(); ++i) {
    float v = std::nearbyint(xd[i] / scale) + zp;
    if (std::isnan(v)) v = 0;
    yd[i] = static_cast<uint8_t>(std::min(std::max(v, 0.0f), 255.0f));
  }
  ctx.set_output(0, y);
  if (ctx.num_outputs() > 1) ctx.set_output(1, Tensor::scalar_f32(scale));
  if (ctx.num_outputs() > 2) {
    Tensor z(DType::U8, {});
    z.set_i64(0, static_cast<int64_t>(zp));
    ctx.set_output(2, z);
  }
}

}  // namespace

void register_quantize_ops(OpRegistry& r) {
  r.add(OpSchema{"QuantizeLinear", "", 2, 3, 1, 1, infer_quantize, kernel_quantize, nullptr, 10});
  r.add(OpSchema{"DequantizeLinear", "", 2, 3, 1, 1, infer_dequantize, kernel_dequantize, nullptr, 10});
  r.add(OpSchema{"DynamicQuantizeLinear", "", 1, 1, 3, 3, infer_dynamic_quantize, kernel_dynamic_quantize, nullptr,
                 11});
}

}  // namespace tessel
