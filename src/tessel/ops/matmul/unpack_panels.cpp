// tessel::UnpackPanels: a GEMM weight stored in the CPU micro-kernel's panel
// layout, read back as the plain matrix. The CPU target's prepack_weights
// pass (passes/) stores a constant B [K, N] of a MatMul or Gemm as panels of
// W consecutive columns, each k-major, so that the packed GEMM
// (schedule/gemm.h) reads it where it lies instead of packing it on every
// call:
//
//   P [panels, K, W] -> B [K, N]     B[k, j] = P[j / W, k, j % W]
//
// with panels * W >= N (the pass pads to a multiple of 64 columns, so that
// every tile width of the search space reads whole panels; P holds zeros
// past N). Attribute: columns (N), required.
//
// With the optional attribute row_dims (a convolution's weight, prepacked
// for the convolution GEMM whose columns are the output channels,
// lower/conv_gemm.cpp) the output is B transposed, its K rows unflattened:
//
//   P [panels, K, W] -> Wt [N, row_dims...]   Wt[j, r...] = P[j / W, k(r), j % W]
//
// with k(r) the row-major position of r in row_dims, whose product is K:
// [OC, C, KH, KW] for a convolution's weight. The optional row_order (a
// permutation of row_dims' axes) orders the digits of k: with [1, 2, 0],
// k = (kh * KW + kw) * C + c.
// With the optional attribute batch (B, without row_dims) the panels hold
// a batch of matrices, each's panels after the previous one's (a batched
// MatMul by a constant: the Winograd transform of a convolution's weight):
//
//   P [B * panels, K, W] -> B [B, K, N]   B[b, k, j] = P[b * panels + j / W, k, j % W]
//
// Injective: it joins the GEMM's operand as an index expression, which the
// GEMM lowering recognises (lower/contraction.cpp) as already packed.
#include <algorithm>
#include <cstring>

#include "tessel/ops/registry.h"

namespace tessel {

namespace {

int64_t columns_of(const Node& n) {
  const int64_t c = n.attr_int("columns", -1);
  TS_CHECK(c >= 1, n.describe(), ": columns must be a positive integer");
  return c;
}

// The row_dims attribute (empty when absent), checked against P's K.
std::vector<int64_t> row_dims_of(const Node& n, const Dim& k) {
  const std::vector<int64_t> dims = n.attr_ints("row_dims", {});
  if (dims.empty()) return dims;
  int64_t prod = 1;
  for (int64_t d : dims) {
    TS_CHECK(d >= 1 && prod <= (int64_t{1} << 40) / d, n.describe(), ": row_dims must be positive and small");
    prod *= d;
  }
  TS_CHECK(k.is_const() && k.value() == prod, n.describe(), ": row_dims hold ", prod, " rows, the panels ",
           k.str());
  return dims;
}

// row_order (the identity when absent), checked to be a permutation.
std::vector<int64_t> row_order_of(const Node& n, size_t rank) {
  std::vector<int64_t> order = n.attr_ints("row_order", {});
  if (order.empty())
    for (size_t d = 0; d < rank; ++d) order.push_back(static_cast<int64_t>(d));
  std::vector<int64_t> sorted = order;
  std::sort(sorted.begin(), sorted.end());
  for (size_t d = 0; d < sorted.size(); ++d)
    TS_CHECK(sorted.size() == rank && sorted[d] == static_cast<int64_t>(d), n.describe(),
             ": row_order must be a permutation of row_dims' axes");
  return order;
}

// P's panel count and width, checked against `columns`.
void check_panels(const Node& n, const Dim& panels, const Dim& width, int64_t columns) {
  TS_CHECK(panels.is_const() && width.is_const() && width.value() >= 1, n.describe(),
           ": panels and panel width must be constant");
  TS_CHECK(panels.value() * width.value() >= columns, n.describe(), ": ", panels.value(), " panels of ",
           width.value(), " columns do not hold ", columns, " columns");
}

// The batch attribute (1 when absent), checked against the panel count and
// the other attributes.
int64_t batch_of(const Node& n, const Dim& panels) {
  const int64_t b = n.attr_int("batch", 1);
  TS_CHECK(b >= 1 && panels.is_const() && panels.value() % b == 0, n.describe(), ": batch ", b,
           " must be positive and divide the ", panels.str(), " panels");
  TS_CHECK(b == 1 || n.attr_ints("row_dims", {}).empty(), n.describe(), ": batch and row_dims do not go together");
  return b;
}

void unpack_infer(InferContext& ctx) {
  const DType dt = ctx.input_dtype(0);
  const int64_t columns = columns_of(ctx.node);
  if (!ctx.has_shape(0)) return ctx.set_output_unknown_shape(0, dt);
  const Shape& p = ctx.input_shape(0);
  TS_CHECK(p.size() == 3, ctx.node.describe(), ": input must have rank 3 (panels, K, width)");
  const int64_t batch = batch_of(ctx.node, p[0]);
  check_panels(ctx.node, Dim(p[0].value() / batch), p[2], columns);
  const std::vector<int64_t> rows = row_dims_of(ctx.node, p[1]);
  row_order_of(ctx.node, rows.size());
  if (batch > 1) return ctx.set_output(0, dt, {Dim(batch), p[1], Dim(columns)});
  if (rows.empty()) return ctx.set_output(0, dt, {p[1], Dim(columns)});
  Shape out{Dim(columns)};
  for (int64_t d : rows) out.push_back(Dim(d));
  ctx.set_output(0, dt, out);
}

// B [batch, K, N] from P [batch * panels, K, W].
Tensor unpack_batch(const Tensor& p, int64_t batch, int64_t columns) {
  const int64_t panels = p.dim(0) / batch, k = p.dim(1), w = p.dim(2);
  Tensor out(p.dtype(), {batch, k, columns});
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t r = 0; r < k; ++r)
      for (int64_t j = 0; j < columns; ++j)
        out.set_f64((b * k + r) * columns + j, p.get_f64(((b * panels + j / w) * k + r) * w + j % w));
  return out;
}

void unpack_kernel(KernelContext& ctx) {
  const Tensor& p = ctx.input(0);
  const int64_t columns = columns_of(ctx.node);
  TS_CHECK(p.rank() == 3, ctx.node.describe(), ": input must have rank 3 (panels, K, width)");
  const int64_t batch = batch_of(ctx.node, Dim(p.dim(0)));
  check_panels(ctx.node, Dim(p.dim(0) / batch), Dim(p.dim(2)), columns);
  const int64_t k = p.dim(1), w = p.dim(2);
  if (batch > 1) return ctx.set_output(0, unpack_batch(p, batch, columns));
  const std::vector<int64_t> rows = row_dims_of(ctx.node, Dim(k));
  std::vector<int64_t> shape{k, columns};
  if (!rows.empty()) {
    shape = {columns};
    shape.insert(shape.end(), rows.begin(), rows.end());
  }
  Tensor out(p.dtype(), shape);
  const size_t es = static_cast<size_t>(dtype_storage_size(p.dtype()));
  const std::vector<int64_t> order = row_order_of(ctx.node, rows.size());
  for (int64_t r = 0; r < k; ++r) {
    // The panel row of output row r (r is row-major over row_dims).
    int64_t pr = r;
    if (!rows.empty()) {
      std::vector<int64_t> digit(rows.size());
      for (size_t d = rows.size(), rest = static_cast<size_t>(r); d-- > 0;) {
        digit[d] = static_cast<int64_t>(rest) % rows[d];
        rest /= static_cast<size_t>(rows[d]);
      }
      pr = 0;
      for (int64_t d : order) pr = pr * rows[d] + digit[d];
    }
    for (int64_t j = 0; j < columns; ++j) {
      const int64_t at = rows.empty() ? r * columns + j : j * k + r;
      std::memcpy(out.mutable_raw() + static_cast<size_t>(at) * es,
                  p.raw() + static_cast<size_t>(((j / w) * k + pr) * w + j % w) * es, es);
    }
  }
  ctx.set_output(0, std::move(out));
}

loop::Expr lower_unpack(LowerContext& ctx, size_t, const std::vector<loop::Expr>& index) {
  const int64_t w = ctx.node.inputs[0]->type.shape->at(2).value();
  const int64_t batch = ctx.node.attr_int("batch", 1);
  if (batch > 1) {
    const int64_t panels = ctx.node.inputs[0]->type.shape->at(0).value() / batch;
    return ctx.input(0, {index[0] * loop::Expr(panels) + loop::floordiv(index[2], loop::Expr(w)), index[1],
                         loop::floormod(index[2], loop::Expr(w))});
  }
  const std::vector<int64_t> rows = ctx.node.attr_ints("row_dims", {});
  if (rows.empty())
    return ctx.input(0, {loop::floordiv(index[1], loop::Expr(w)), index[0], loop::floormod(index[1], loop::Expr(w))});
  const std::vector<int64_t> order = row_order_of(ctx.node, rows.size());
  loop::Expr k = index.at(order[0] + 1);
  for (size_t t = 1; t < order.size(); ++t) k = k * loop::Expr(rows[order[t]]) + index.at(order[t] + 1);
  return ctx.input(0, {loop::floordiv(index[0], loop::Expr(w)), k, loop::floormod(index[0], loop::Expr(w))});
}

}  // namespace

void register_unpack_panels_op(OpRegistry& r) {
  r.add({"UnpackPanels", "tessel", 1, 1, 1, 1, unpack_infer, unpack_kernel, nullptr, 1});
  r.set_lowering("tessel", "UnpackPanels", FusionKind::Injective, lower_unpack);
}

}  // namespace tessel
