// conv_im2col (CUDA target only): a Conv whose implicit-GEMM operand would be
// read one element at a time becomes tessel::Im2Col + MatMul.
//
// The GPU lowers Conv as an implicit GEMM: M = output channels, N = output
// positions, K = C * KH * KW, B[k, j] read from the NCHW input through the
// window arithmetic. Outside 1x1 stride-1 convolutions over images whose
// H * W is a multiple of 8, no 8 consecutive k or j are 8 consecutive
// elements, so B is gathered per element with 64-bit div/mod index math:
// ResNet-50's 3x3 and 7x7-image convolutions ran at 1.6-2% tensor-pipe use
// on the H200 (docs/performance.md). Rewritten,
//
//   col = tessel::Im2Col(X)              [N, OH * OW, Kp]   one pass over memory
//   y   = MatMul(Wm, Transpose(col))     [N, OC, OH * OW]   Wm: W as [OC, Kp], zero-padded
//   out = Reshape(y (+ bias[OC, 1]), [N, OC, OH, OW])
//
// the GEMM reads Wm and col k-contiguous in 16-byte vectors (Kp = K rounded
// up to 8), and the Transpose is a view of its operand. Where OH * OW is a
// multiple of 8 the patches are stored k-major instead, col [N, Kp, OH *
// OW] (Im2Col's k_major) and y = MatMul(Wm, col): the copy's threads then
// write consecutive positions, reading consecutive input columns of one
// channel and tap (coalesced on both sides; with positions innermost each
// warp read 32 channels at once), and the GEMM reads col N-major, 16 bytes
// at a time along the positions. Only group-1 2-D
// convolutions with constant weights (and bias), explicit pads and constant
// shapes whose output is not a graph output; the rest stay Conv.
#include <cstring>

#include "tessel/passes/infer_util.h"
#include "tessel/passes/pass_manager.h"

namespace tessel {

namespace {

bool low_or_f32(DType t) { return t == DType::F32 || t == DType::BF16 || t == DType::F16; }

// W [OC, C, KH, KW] as [OC, kp], zero-padded.
Tensor padded_rows(const Tensor& w, int64_t kp) {
  const int64_t oc = w.dim(0), k = w.numel() / oc;
  Tensor out(w.dtype(), {oc, kp});
  const size_t es = static_cast<size_t>(dtype_storage_size(w.dtype()));
  std::memset(out.mutable_raw(), 0, out.nbytes());
  for (int64_t r = 0; r < oc; ++r)
    std::memcpy(out.mutable_raw() + static_cast<size_t>(r * kp) * es, w.raw() + static_cast<size_t>(r * k) * es,
                static_cast<size_t>(k) * es);
  return out;
}

struct ConvShape {
  std::vector<int64_t> x, w, y, strides, pads, dilations;
};

// The shapes of a Conv this pass rewrites, or nullopt.
std::optional<ConvShape> rewritable(const Graph& g, const Node& n) {
  if (!n.domain.empty() || n.op != "Conv" || n.outputs.size() != 1 || !n.outputs[0]) return std::nullopt;
  ConvShape s;
  const Value *x = n.input(0), *w = n.input(1), *b = n.input(2);
  if (!static_dims_of(x, &s.x) || !w || !w->is_constant() || !static_dims_of(n.outputs[0], &s.y)) return std::nullopt;
  if (s.x.size() != 4 || w->constant->rank() != 4 || n.attr_int("group", 1) != 1) return std::nullopt;
  if (n.attr_string("auto_pad", "NOTSET") != "NOTSET" || (b && !b->is_constant())) return std::nullopt;
  if (!low_or_f32(x->type.dtype) || w->constant->dtype() != x->type.dtype) return std::nullopt;
  if (g.is_output(n.outputs[0])) return std::nullopt;
  s.w = w->constant->shape();
  s.strides = n.attr_ints("strides", {1, 1});
  s.pads = n.attr_ints("pads", {0, 0, 0, 0});
  s.dilations = n.attr_ints("dilations", {1, 1});
  if (s.strides.size() != 2 || s.pads.size() != 4 || s.dilations.size() != 2) return std::nullopt;
  // Already vector loads: a 1x1, stride-1, unpadded convolution reads B[c, hw]
  // contiguous in hw when H * W is a multiple of 8.
  const bool pointwise = s.w[2] == 1 && s.w[3] == 1 && s.strides == std::vector<int64_t>{1, 1} &&
                         s.pads == std::vector<int64_t>{0, 0, 0, 0};
  if (pointwise && s.x[2] * s.x[3] % 8 == 0) return std::nullopt;
  return s;
}

void rewrite(Graph& g, Node* n, const ConvShape& s) {
  const DType t = n->input(0)->type.dtype;
  const int64_t batch = s.x[0], oc = s.w[0], k = s.w[1] * s.w[2] * s.w[3], kp = (k + 7) / 8 * 8;
  const int64_t positions = s.y[2] * s.y[3];
  const bool k_major = positions % 8 == 0;
  Node* col = g.insert_node_before(n, "Im2Col", {n->input(0)}, 1,
                                   {{"kernel_shape", Attribute::of_ints({s.w[2], s.w[3]})},
                                    {"strides", Attribute::of_ints(s.strides)},
                                    {"pads", Attribute::of_ints(s.pads)},
                                    {"dilations", Attribute::of_ints(s.dilations)},
                                    {"k_padded", Attribute::of_int(kp)},
                                    {"k_major", Attribute::of_int(k_major ? 1 : 0)}});
  col->domain = "tessel";
  const Type kp_by_p = Type::tensor(t, {Dim(batch), Dim(kp), Dim(positions)});
  Value* cols = col->outputs[0];
  if (k_major) {
    cols->type = kp_by_p;
  } else {
    cols->type = Type::tensor(t, {Dim(batch), Dim(positions), Dim(kp)});
    Node* tr = g.insert_node_before(n, "Transpose", {cols}, 1, {{"perm", Attribute::of_ints({0, 2, 1})}});
    tr->outputs[0]->type = kp_by_p;
    cols = tr->outputs[0];
  }
  Value* wm = g.add_initializer(g.fresh_name(n->input(1)->name + "_rows"), padded_rows(*n->input(1)->constant, kp));
  Node* mm = g.insert_node_before(n, "MatMul", {wm, cols}, 1);
  const Type flat = Type::tensor(n->outputs[0]->type.dtype, {Dim(batch), Dim(oc), Dim(positions)});
  mm->outputs[0]->type = flat;
  Value* y = mm->outputs[0];
  if (const Value* b = n->input(2)) {
    Tensor column(b->constant->dtype(), {oc, 1});
    std::memcpy(column.mutable_raw(), b->constant->raw(), b->constant->nbytes());
    Node* add = g.insert_node_before(n, "Add", {y, g.add_initializer(g.fresh_name(b->name + "_column"), column)}, 1);
    add->outputs[0]->type = flat;
    y = add->outputs[0];
  }
  Value* shape = g.add_initializer(g.fresh_name(n->outputs[0]->name + "_shape"), Tensor::from_i64(s.y));
  Node* r = g.insert_node_before(n, "Reshape", {y, shape}, 1);
  r->outputs[0]->type = n->outputs[0]->type;
  g.replace_all_uses(n->outputs[0], r->outputs[0]);
  g.remove_node(n);
}

}  // namespace

bool convs_to_im2col(Model& m) {
  Graph& g = *m.graph;
  std::vector<std::pair<Node*, ConvShape>> todo;
  for (const auto& n : g.nodes())
    if (auto s = rewritable(g, *n)) todo.emplace_back(n.get(), *s);
  for (auto& [n, s] : todo) rewrite(g, n, s);
  if (!todo.empty()) g.remove_unused_values();
  return !todo.empty();
}

}  // namespace tessel
