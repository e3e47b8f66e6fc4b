#include "tessel/ops/conv/conv_util.h"

#include <algorithm>
#include <cstring>

namespace tessel::convutil {

AutoPad parse_auto_pad(const Node& n) {
  const std::string s = n.attr_string("auto_pad", "NOTSET");
  if (s == "NOTSET" || s.empty()) return AutoPad::NotSet;
  if (s == "SAME_UPPER") return AutoPad::SameUpper;
  if (s == "SAME_LOWER") return AutoPad::SameLower;
  if (s == "VALID") return AutoPad::Valid;
  fail(n.describe(), ": unknown auto_pad '", s, "'");
}

namespace {

std::vector<int64_t> ints_of_len(const Node& n, const char* name, size_t len, int64_t def) {
  std::vector<int64_t> v = n.attr_ints(name, std::vector<int64_t>(len, def));
  TS_CHECK(v.size() == len, n.describe(), ": attribute ", name, " has ", v.size(), " values, expected ", len);
  return v;
}

}  // namespace

Window read_window(const Node& n, size_t nsp, const std::vector<int64_t>* kernel_from_w, bool with_dilations,
                   bool with_ceil) {
  Window w;
  if (kernel_from_w) {
    w.kernel = *kernel_from_w;
    if (n.has_attr("kernel_shape")) {
      std::vector<int64_t> ks = n.attr_ints("kernel_shape");
      TS_CHECK(ks == *kernel_from_w, n.describe(), ": kernel_shape ", dims_str(ks),
               " does not match the weight's spatial shape ", dims_str(*kernel_from_w));
    }
  } else {
    TS_CHECK(n.has_attr("kernel_shape"), n.describe(), ": attribute kernel_shape is required");
    w.kernel = n.attr_ints("kernel_shape");
  }
  TS_CHECK(w.kernel.size() == nsp, n.describe(), ": kernel has ", w.kernel.size(), " spatial dims, input has ", nsp);
  w.strides = ints_of_len(n, "strides", nsp, 1);
  w.dilations = with_dilations ? ints_of_len(n, "dilations", nsp, 1) : std::vector<int64_t>(nsp, 1);
  w.pads = ints_of_len(n, "pads", 2 * nsp, 0);
  w.auto_pad = parse_auto_pad(n);
  w.ceil_mode = with_ceil && n.attr_int("ceil_mode", 0) != 0;
  for (size_t i = 0; i < nsp; ++i) {
    TS_CHECK(w.kernel[i] >= 1, n.describe(), ": kernel size ", w.kernel[i], " must be >= 1");
    TS_CHECK(w.strides[i] >= 1, n.describe(), ": stride ", w.strides[i], " must be >= 1");
    TS_CHECK(w.dilations[i] >= 1, n.describe(), ": dilation ", w.dilations[i], " must be >= 1");
    // Bound the window so that later index arithmetic cannot overflow.
    TS_CHECK(w.kernel[i] <= (int64_t{1} << 31) && w.strides[i] <= (int64_t{1} << 31) &&
                 w.dilations[i] <= (int64_t{1} << 31),
             n.describe(), ": window attributes are too large");
  }
  for (int64_t p : w.pads)
    TS_CHECK(p >= 0 && p <= (int64_t{1} << 31), n.describe(), ": pad ", p, " must be in [0, 2^31]");
  return w;
}

std::vector<int64_t> forward_out_sizes(Window& w, const std::vector<int64_t>& in, const Node& n) {
  const size_t nd = w.rank();
  TS_CHECK(in.size() == nd, n.describe(), ": input has ", in.size(), " spatial dims, window has ", nd);
  std::vector<int64_t> out(nd);
  for (size_t i = 0; i < nd; ++i) {
    const int64_t ext = w.extent(i), s = w.strides[i];
    switch (w.auto_pad) {
      case AutoPad::SameUpper:
      case AutoPad::SameLower: {
        out[i] = (in[i] + s - 1) / s;
        const int64_t total = std::max<int64_t>(0, (out[i] - 1) * s + ext - in[i]);
        const int64_t small = total / 2, big = total - small;
        w.pads[i] = w.auto_pad == AutoPad::SameUpper ? small : big;
        w.pads[nd + i] = w.auto_pad == AutoPad::SameUpper ? big : small;
        break;
      }
      case AutoPad::Valid:
        w.pads[i] = w.pads[nd + i] = 0;
        out[i] = in[i] >= ext ? (in[i] - ext) / s + 1 : 0;
        TS_CHECK(in[i] >= ext || in[i] == 0, n.describe(), ": input size ", in[i], " along spatial axis ", i,
                 " is smaller than the kernel extent ", ext);
        break;
      case AutoPad::NotSet: {
        const int64_t span = in[i] + w.pads[i] + w.pads[nd + i] - ext;
        TS_CHECK(span >= 0 || in[i] == 0, n.describe(), ": padded input size ", in[i] + w.pads[i] + w.pads[nd + i],
                 " along spatial axis ", i, " is smaller than the kernel extent ", ext);
        if (span < 0) {
          out[i] = 0;
        } else if (w.ceil_mode) {
          // PyTorch/ONNX rule: a window must start inside the input or the
          // begin padding, so the ceil result may drop by one.
          out[i] = std::min((span + s - 1) / s + 1, (in[i] + w.pads[i] + s - 1) / s);
        } else {
          out[i] = span / s + 1;
        }
        break;
      }
    }
  }
  return out;
}

Shape forward_out_dims(const Window& w, const Shape& in) {
  const size_t nd = w.rank();
  Shape out(nd);
  for (size_t i = 0; i < nd; ++i) {
    const int64_t ext = w.extent(i), s = w.strides[i];
    switch (w.auto_pad) {
      case AutoPad::SameUpper:
      case AutoPad::SameLower:
        out[i] = Dim::ceildiv(in[i], s);
        break;
      case AutoPad::Valid:
        out[i] = Dim::floordiv(in[i] - ext, s) + 1;
        break;
      case AutoPad::NotSet: {
        const Dim span = in[i] + (w.pads[i] + w.pads[nd + i] - ext);
        if (w.ceil_mode)
          out[i] = Dim::min(Dim::ceildiv(span, s) + 1, Dim::ceildiv(in[i] + w.pads[i], s));
        else
          out[i] = Dim::floordiv(span, s) + 1;
        break;
      }
    }
  }
  return out;
}

int64_t prod(const std::vector<int64_t>& v) {
  int64_t p = 1;
  for (int64_t d : v) p = checked_mul(p, d);
  return p;
}

int64_t check_elements(const Node& n, int64_t count) {
  TS_CHECK(count >= 0 && count <= Tensor::kMaxElements, n.describe(), ": a buffer of ", count,
           " elements exceeds the tensor size limit");
  return count;
}

std::vector<int64_t> dims_from(const Tensor& t, size_t skip) {
  const auto& s = t.shape();
  return skip >= s.size() ? std::vector<int64_t>{} : std::vector<int64_t>(s.begin() + static_cast<long>(skip), s.end());
}

std::vector<float> to_f32(const Tensor& t) {
  std::vector<float> v(static_cast<size_t>(t.numel()));
  if (t.dtype() == DType::F32) {
    if (!v.empty()) std::memcpy(v.data(), t.data<float>(), v.size() * sizeof(float));
    return v;
  }
  for (int64_t i = 0; i < t.numel(); ++i) v[static_cast<size_t>(i)] = static_cast<float>(t.get_f64(i));
  return v;
}

std::vector<double> to_f64(const Tensor& t) {
  std::vector<double> v(static_cast<size_t>(t.numel()));
  if (t.dtype() == DType::F64) {
    if (!v.empty()) std::memcpy(v.data(), t.data<double>(), v.size() * sizeof(double));
    return v;
  }
  if (t.dtype() == DType::F32) {
    const float* p = t.data<float>();
    for (size_t i = 0; i < v.size(); ++i) v[i] = p[i];
    return v;
  }
  for (int64_t i = 0; i < t.numel(); ++i) v[static_cast<size_t>(i)] = t.get_f64(i);
  return v;
}

Tensor from_f64(DType dt, std::vector<int64_t> shape, const std::vector<double>& vals) {
  Tensor t(dt, std::move(shape));
  TS_CHECK(static_cast<int64_t>(vals.size()) == t.numel(), "from_f64: value count does not match shape");
  if (dt == DType::F32) {
    float* p = t.mutable_data<float>();
    for (size_t i = 0; i < vals.size(); ++i) p[i] = static_cast<float>(vals[i]);
  } else if (dt == DType::F64) {
    if (!vals.empty()) std::memcpy(t.mutable_data<double>(), vals.data(), vals.size() * sizeof(double));
  } else {
    for (size_t i = 0; i < vals.size(); ++i) t.set_f64(static_cast<int64_t>(i), vals[i]);
  }
  return t;
}

bool is_conv_float(DType dt) {
  return dt == DType::F32 || dt == DType::F64 || dt == DType::F16 || dt == DType::BF16;
}

}  // namespace tessel::convutil
