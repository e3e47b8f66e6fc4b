// pad_conv_inputs (CPU target): a convolution with padding reads an
// explicitly padded copy of its input,
//
//   y = Conv(x, W, b, pads=p)   =>   y = Conv(Pad(x, p), W, b, pads=0)
//
// so that its implicit GEMM reads rows in place. Over an unpadded input of
// width W', the CPU lowers an unpadded stride-1 convolution on the grid of
// (output row, input column) positions j = oh * W' + ow (conv_gemm.cpp):
// B[(c, kh, kw), j] = x[c, oh + kh * dh, ow + kw * dw] is then the flat
// element c * H' * W' + kh * dh * W' + kw * dw + j, consecutive in j, and B's
// packing copies whole vectors. With the padding inside the convolution, B
// is a select over clamped per-element indices (16 gathers a vector); the
// copy made here costs one pass over the input, the convolution reads it
// K = C * KH * KW times.
//
// A strided convolution gains the same way: its implicit GEMM reads the
// taps without a zero test and clamped indices per element (ResNet's
// 7x7/2 stem and strided 3x3s).
//
// Only 2-D group-1 convolutions with explicit pads, f32, constant shapes
// and a pad of at most the kernel's reach (a larger pad adds only
// bias columns, not worth a copy). The Pad stays its own kernel: fusion does
// not fold a Pad into a contraction's operand (fusion.cpp).
#include <utility>

#include "tessel/passes/infer_util.h"
#include "tessel/passes/pass_manager.h"

namespace tessel {

namespace {

// The pads of a Conv this pass rewrites ([top, left, bottom, right]), or an
// empty vector.
std::vector<int64_t> rewritable_pads(const Node& n) {
  if (!n.domain.empty() || n.op != "Conv" || n.outputs.size() != 1 || !n.outputs[0]) return {};
  const Value *x = n.input(0), *w = n.input(1);
  std::vector<int64_t> xd, wd;
  if (!static_dims_of(x, &xd) || !static_dims_of(w, &wd) || xd.size() != 4 || wd.size() != 4) return {};
  if (x->type.dtype != DType::F32 || n.attr_int("group", 1) != 1) return {};
  if (n.attr_string("auto_pad", "NOTSET") != "NOTSET") return {};
  const std::vector<int64_t> pads = n.attr_ints("pads", {0, 0, 0, 0});
  const std::vector<int64_t> dil = n.attr_ints("dilations", {1, 1});
  if (pads.size() != 4 || dil.size() != 2) return {};
  bool any = false;
  for (size_t i = 0; i < 4; ++i) {
    const int64_t reach = (wd[2 + i % 2] - 1) * dil[i % 2];
    if (pads[i] < 0 || pads[i] > reach) return {};
    any = any || pads[i] > 0;
  }
  return any ? pads : std::vector<int64_t>{};
}

}  // namespace

bool pad_conv_inputs(Model& m) {
  Graph& g = *m.graph;
  std::vector<std::pair<Node*, std::vector<int64_t>>> convs;  // collected first: the loop inserts nodes
  for (auto& n : g.nodes())
    if (std::vector<int64_t> p = rewritable_pads(*n); !p.empty()) convs.emplace_back(n.get(), std::move(p));
  for (const auto& [n, p] : convs) {
    Value* x = n->input(0);
    const Shape& xs = *x->type.shape;
    Value* pads = g.add_initializer(g.fresh_name(x->name + "_pads"), Tensor::from_i64({0, 0, p[0], p[1], 0, 0, p[2], p[3]}));
    Node* pad = g.insert_node_before(n, "Pad", {x, pads}, 1, {{"mode", Attribute::of_string("constant")}});
    pad->outputs[0]->type =
        Type::tensor(DType::F32, {xs[0], xs[1], Dim(xs[2].value() + p[0] + p[2]), Dim(xs[3].value() + p[1] + p[3])});
    n->inputs[0] = pad->outputs[0];
    n->attrs["pads"] = Attribute::of_ints({0, 0, 0, 0});
  }
  return !convs.empty();
}

}  // namespace tessel
