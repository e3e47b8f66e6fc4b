// Helpers shared by the convolution, pooling and image operator families:
// sliding-window attributes (kernel, strides, dilations, pads, auto_pad,
// ceil_mode) and the output sizes they give, static and symbolic; tensors read
// into flat float/double buffers; and the im2col / col2im / row-product
// kernels that Conv, ConvTranspose, ConvInteger, QLinearConv, DeformConv and
// Col2Im are built from.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "tessel/ops/common.h"

namespace tessel::convutil {

enum class AutoPad { NotSet, SameUpper, SameLower, Valid };

// Sliding-window attributes resolved for `rank()` spatial dims. `pads` holds
// the begin pads then the end pads, as in ONNX.
struct Window {
  std::vector<int64_t> kernel, strides, dilations, pads;
  AutoPad auto_pad = AutoPad::NotSet;
  bool ceil_mode = false;

  size_t rank() const { return kernel.size(); }
  // Extent of the dilated kernel along spatial dim i.
  int64_t extent(size_t i) const { return (kernel[i] - 1) * dilations[i] + 1; }
};

AutoPad parse_auto_pad(const Node& n);

// Reads the window attributes of `n` for `nsp` spatial dims and validates
// them (positive kernel/strides/dilations, non-negative pads, lengths). When
// `kernel_from_w` is given (conv ops), kernel_shape may be absent and must
// otherwise agree with it; otherwise kernel_shape is required (pools).
// `with_dilations`/`with_ceil` say whether the op has those attributes.
Window read_window(const Node& n, size_t nsp, const std::vector<int64_t>* kernel_from_w, bool with_dilations,
                   bool with_ceil);

// Output spatial sizes of a forward window (Conv, pools) for concrete input
// sizes; for auto_pad SAME_*/VALID it also rewrites w.pads to the padding
// actually applied. Throws when an output size would be < 1... except that
// an empty input axis gives an empty output.
std::vector<int64_t> forward_out_sizes(Window& w, const std::vector<int64_t>& in, const Node& n);
// The same over symbolic dims (for shape inference).
Shape forward_out_dims(const Window& w, const Shape& in);

// Row-major size of a shape, checked.
int64_t prod(const std::vector<int64_t>& v);
// Throws unless a buffer of n elements fits the tensor size limit, so that a
// hostile shape fails before any large allocation.
int64_t check_elements(const Node& n, int64_t count);

// The concrete spatial dims of a tensor (all dims after the first `skip`).
std::vector<int64_t> dims_from(const Tensor& t, size_t skip);

// Flat copies of a float tensor's values. f16/bf16/f32 fit a float exactly.
std::vector<float> to_f32(const Tensor& t);
std::vector<double> to_f64(const Tensor& t);
// Writes `vals` (one per element) into a new tensor of dtype dt.
Tensor from_f64(DType dt, std::vector<int64_t> shape, const std::vector<double>& vals);

// True for the float types the conv/pool ops accept (f16, bf16, f32, f64).
bool is_conv_float(DType dt);

// ---- im2col / col2im ------------------------------------------------------------

// One image's receptive fields as a matrix: row r = (c, k_0, ..., k_{n-1})
// over `channels` channels, column j = output position (row-major over
// out). Positions that fall into the padding get `pad_value`.
template <class T>
void im2col(const T* x, int64_t channels, const std::vector<int64_t>& in, const Window& w,
            const std::vector<int64_t>& out, T pad_value, T* col);

// The adjoint of im2col: adds col[r, j] into image position of (r, j); values
// landing in the padding are dropped. `img` has `channels` x prod(in) items.
template <class Acc, class T>
void col2im_add(const T* col, int64_t channels, const std::vector<int64_t>& in, const Window& w,
                const std::vector<int64_t>& out, Acc* img);

// acc[m, j] += sum_r a[m, r] * b[r, j] for m < rows_a, r < inner, j < cols,
// with every product formed and summed in Acc (exact products for float
// inputs in double). Rows of acc/b are contiguous; a is row-major.
template <class Acc, class T>
void row_product(const T* a, const T* b, int64_t rows_a, int64_t inner, int64_t cols, Acc* acc);

// ---- template definitions -------------------------------------------------------

template <class T>
void im2col(const T* x, int64_t channels, const std::vector<int64_t>& in, const Window& w,
            const std::vector<int64_t>& out, T pad_value, T* col) {
  const size_t nd = in.size();
  const int64_t in_size = prod(in), out_size = prod(out), ksize = prod(w.kernel);
  const int64_t last_out = nd ? out[nd - 1] : 1, last_in = nd ? in[nd - 1] : 1;
  const int64_t outer = last_out ? out_size / last_out : 0;
  std::vector<int64_t> k(nd, 0), o(nd, 0);
  for (int64_t c = 0; c < channels; ++c) {
    const T* xc = x + c * in_size;
    for (int64_t kf = 0; kf < ksize; ++kf) {
      // Kernel offsets of row (c, kf).
      for (int64_t t = kf, d = static_cast<int64_t>(nd) - 1; d >= 0; --d) {
        k[d] = t % w.kernel[d];
        t /= w.kernel[d];
      }
      T* row = col + (c * ksize + kf) * out_size;
      if (nd == 0) {
        row[0] = xc[0];
        continue;
      }
      // Inner dim: positions ow with 0 <= ow*s + off < last_in.
      const int64_t s = w.strides[nd - 1];
      const int64_t off = k[nd - 1] * w.dilations[nd - 1] - w.pads[nd - 1];
      int64_t lo = off >= 0 ? 0 : (-off + s - 1) / s;
      int64_t hi = last_in - off <= 0 ? 0 : (last_in - off + s - 1) / s;
      lo = std::min(lo, last_out);
      hi = std::max(lo, std::min(hi, last_out));
      std::fill(o.begin(), o.end(), 0);
      for (int64_t p = 0; p < outer; ++p) {
        // Offset of the outer dims in the input, or -1 when in the padding.
        int64_t base = 0;
        bool inside = true;
        for (size_t d = 0; d + 1 < nd; ++d) {
          const int64_t i = o[d] * w.strides[d] + k[d] * w.dilations[d] - w.pads[d];
          if (i < 0 || i >= in[d]) inside = false;
          base = base * in[d] + i;
        }
        T* dst = row + p * last_out;
        if (!inside) {
          std::fill(dst, dst + last_out, pad_value);
        } else {
          // Input index of output j along the inner dim is j*s + off, inside
          // the row exactly for j in [lo, hi).
          const T* src = xc + base * last_in;
          std::fill(dst, dst + lo, pad_value);
          if (s == 1) {
            if (hi > lo) std::copy(src + lo + off, src + hi + off, dst + lo);
          } else {
            for (int64_t j = lo; j < hi; ++j) dst[j] = src[j * s + off];
          }
          std::fill(dst + hi, dst + last_out, pad_value);
        }
        for (int64_t d = static_cast<int64_t>(nd) - 2; d >= 0; --d) {
          if (++o[d] < out[d]) break;
          o[d] = 0;
        }
      }
    }
  }
}

template <class Acc, class T>
void col2im_add(const T* col, int64_t channels, const std::vector<int64_t>& in, const Window& w,
                const std::vector<int64_t>& out, Acc* img) {
  const size_t nd = in.size();
  const int64_t in_size = prod(in), out_size = prod(out), ksize = prod(w.kernel);
  std::vector<int64_t> k(nd, 0), o(nd, 0);
  for (int64_t c = 0; c < channels; ++c) {
    Acc* ic = img + c * in_size;
    for (int64_t kf = 0; kf < ksize; ++kf) {
      for (int64_t t = kf, d = static_cast<int64_t>(nd) - 1; d >= 0; --d) {
        k[d] = t % w.kernel[d];
        t /= w.kernel[d];
      }
      const T* row = col + (c * ksize + kf) * out_size;
      std::fill(o.begin(), o.end(), 0);
      for (int64_t j = 0; j < out_size; ++j) {
        int64_t idx = 0;
        bool inside = true;
        for (size_t d = 0; d < nd; ++d) {
          const int64_t i = o[d] * w.strides[d] + k[d] * w.dilations[d] - w.pads[d];
          if (i < 0 || i >= in[d]) inside = false;
          idx = idx * in[d] + i;
        }
        if (inside) ic[idx] += static_cast<Acc>(row[j]);
        for (int64_t d = static_cast<int64_t>(nd) - 1; d >= 0; --d) {
          if (++o[d] < out[d]) break;
          o[d] = 0;
        }
      }
    }
  }
}

template <class Acc, class T>
void row_product(const T* a, const T* b, int64_t rows_a, int64_t inner, int64_t cols, Acc* acc) {
  // Four rows of a at a time so that each row of b is loaded once per four
  // output rows; the innermost loop runs over contiguous columns.
  int64_t m = 0;
  for (; m + 4 <= rows_a; m += 4) {
    Acc* y0 = acc + m * cols;
    Acc* y1 = y0 + cols;
    Acc* y2 = y1 + cols;
    Acc* y3 = y2 + cols;
    const T* a0 = a + m * inner;
    for (int64_t r = 0; r < inner; ++r) {
      const Acc w0 = static_cast<Acc>(a0[r]), w1 = static_cast<Acc>(a0[inner + r]);
      const Acc w2 = static_cast<Acc>(a0[2 * inner + r]), w3 = static_cast<Acc>(a0[3 * inner + r]);
      const T* br = b + r * cols;
      for (int64_t j = 0; j < cols; ++j) {
        const Acc v = static_cast<Acc>(br[j]);
        y0[j] += w0 * v;
        y1[j] += w1 * v;
        y2[j] += w2 * v;
        y3[j] += w3 * v;
      }
    }
  }
  for (; m < rows_a; ++m) {
    Acc* y = acc + m * cols;
    for (int64_t r = 0; r < inner; ++r) {
      const Acc wv = static_cast<Acc>(a[m * inner + r]);
      const T* br = b + r * cols;
      for (int64_t j = 0; j < cols; ++j) y[j] += wv * static_cast<Acc>(br[j]);
    }
  }
}

}  // namespace tessel::convutil
