// Dropout. In inference (the default, and every model before opset 12 as
// run by tessel) it is the identity with an all-true mask. In training mode
// the keep-mask is drawn as numpy's RandomState(seed).uniform(0, 1, shape) >=
// ratio (MT19937 with 53-bit doubles), which makes the reference
// deterministic and reproduces the ONNX test data; without a seed attribute
// seed 0 is used.
#include <random>

#include "tessel/ops/math_util.h"
#include "tessel/ops/registry.h"

namespace tessel {

namespace {

using namespace mathops;

constexpr std::initializer_list<DType> kDropoutTypes = {DType::F16,      DType::F32,        DType::F64,
                                                        DType::BF16,     DType::F8E4M3FN,   DType::F8E4M3FNUZ,
                                                        DType::F8E5M2,   DType::F8E5M2FNUZ};

// numpy's random_sample(): 53 random bits from two 32-bit MT19937 outputs.
double next_uniform(std::mt19937& g) {
  const uint32_t a = g() >> 5, b = g() >> 6;
  return (a * 67108864.0 + b) / 9007199254740992.0;
}

void dropout_kernel(KernelContext& c) {
  const Node& n = c.node;
  const Tensor& x = c.input(0);
  require_dtype(n, 0, x.dtype(), kDropoutTypes);
  double ratio = 0.5;
  if (c.has_input(1)) {
    const Tensor& r = c.input(1);
    require_dtype(n, 1, r.dtype(), kDropoutTypes);
    TS_CHECK(r.numel() == 1, n.describe(), ": ratio must be a scalar, got shape ", dims_str(r.shape()));
    ratio = r.get_f64(0);
  }
  bool training = false;
  if (c.has_input(2)) {
    const Tensor& t = c.input(2);
    TS_CHECK(t.dtype() == DType::Bool && t.numel() == 1, n.describe(), ": training_mode must be a bool scalar");
    training = t.get_i64(0) != 0;
  }
  Tensor mask(DType::Bool, x.shape());
  if (!training || ratio == 0) {
    c.set_output(0, x);
    uint8_t* m = mask.mutable_data<uint8_t>();
    for (int64_t i = 0; i < mask.numel(); ++i) m[i] = 1;
  } else {
    TS_CHECK(ratio >= 0 && ratio < 1, n.describe(), ": ratio must be in [0, 1) in training mode, got ", ratio);
    const int64_t seed = n.attr_int("seed", 0);
    std::mt19937 gen(static_cast<uint32_t>(seed));
    const double scale = 1.0 / (1.0 - ratio);
    std::vector<double> v = to_doubles(x);
    uint8_t* m = mask.mutable_data<uint8_t>();
    for (int64_t i = 0; i < x.numel(); ++i) {
      const bool keep = next_uniform(gen) >= ratio;
      m[i] = keep ? 1 : 0;
      v[i] = keep ? v[i] * scale : 0.0;
    }
    c.set_output(0, tensor_from_doubles(x.dtype(), x.shape(), v));
  }
  if (c.num_outputs() > 1) c.set_output(1, mask);
}

void dropout_infer(InferContext& c) {
  const Node& n = c.node;
  const DType dt = c.input_dtype(0);
  if (dt != DType::Undefined) require_dtype(n, 0, dt, kDropoutTypes);
  if (c.has_input(1) && c.input_dtype(1) != DType::Undefined) require_dtype(n, 1, c.input_dtype(1), kDropoutTypes);
  if (c.has_input(2) && c.input_dtype(2) != DType::Undefined)
    TS_CHECK(c.input_dtype(2) == DType::Bool, n.describe(), ": training_mode must be bool");
  for (size_t i = 0; i < c.out_types.size(); ++i) {
    const DType ot = i == 0 ? dt : DType::Bool;
    if (c.has_shape(0)) c.set_output(i, ot, c.input_shape(0));
    else c.set_output_unknown_shape(i, ot);
  }
}

// Before opset 12 the ratio was an attribute (and before 7 there was
// is_test); those models are run in inference mode, where ratio is unused.
void dropout_upgrade(Node& n, int64_t opset) {
  if (opset >= 12) return;
  // ratio's type (T1) is independent of the data's type, so f32 always fits.
  if (n.has_attr("ratio")) set_const_input(n, 1, Tensor::scalar_f32(n.attr_float("ratio", 0.5f)), "Dropout_ratio");
  drop_attrs(n, {"ratio", "is_test", "consumed_inputs"});
}

}  // namespace

void register_dropout_ops(OpRegistry& r) {
  OpSchema s;
  s.name = "Dropout";
  s.min_inputs = 1;
  s.max_inputs = 3;
  s.max_outputs = 2;
  s.infer = dropout_infer;
  s.kernel = dropout_kernel;
  s.upgrade = dropout_upgrade;
  r.add(s);
}

}  // namespace tessel
