// subsample_conv_inputs (CPU target): a strided 1x1 convolution reads a
// strided Slice of its input,
//
//   y = Conv(x, W, b, kernel 1x1, strides=s)   =>   y = Conv(Slice(x, steps=s), W, b, strides=1)
//
// which is the same sum (a 1x1 kernel reads exactly the positions o * s).
// The CPU lowers a convolution as an implicit GEMM whose B operand is packed
// per block of output channels (conv_gemm.cpp): strided, each packed element
// divides its position by the output width and gathers; stride 1, a 1x1
// conv's B rows are the input's rows, copied as whole vectors. The Slice is
// one pass over a 1/prod(s) share of the input, stored (fusion.cpp keeps a
// strided Slice in front of a contraction out of the contraction's kernel),
// against a packing that reads it once per M block. ResNet's downsampling
// shortcuts are such convolutions.
//
// Group-1 convolutions (the implicit GEMM's; a grouped one runs as a loop
// nest that reads its input in place) of any rank with every kernel dim 1,
// some stride above 1, no padding (a padded 1x1 conv adds bias-only border
// outputs) and constant shapes.
#include <utility>

#include "tessel/passes/infer_util.h"
#include "tessel/passes/pass_manager.h"

namespace tessel {

namespace {

// The strides of a Conv this pass rewrites, or an empty vector.
std::vector<int64_t> rewritable_strides(const Node& n) {
  if (!n.domain.empty() || n.op != "Conv" || n.outputs.size() != 1 || !n.outputs[0]) return {};
  const Value *x = n.input(0), *w = n.input(1);
  std::vector<int64_t> xd, wd;
  if (!static_dims_of(x, &xd) || !static_dims_of(w, &wd) || xd.size() < 3 || wd.size() != xd.size()) return {};
  if (n.attr_string("auto_pad", "NOTSET") != "NOTSET" || n.attr_int("group", 1) != 1) return {};
  const size_t spatial = xd.size() - 2;
  for (size_t i = 2; i < wd.size(); ++i)
    if (wd[i] != 1) return {};
  const std::vector<int64_t> pads = n.attr_ints("pads", std::vector<int64_t>(2 * spatial, 0));
  for (int64_t p : pads)
    if (p != 0) return {};
  std::vector<int64_t> strides = n.attr_ints("strides", std::vector<int64_t>(spatial, 1));
  if (strides.size() != spatial) return {};
  bool any = false;
  for (int64_t s : strides) {
    if (s < 1) return {};
    any = any || s > 1;
  }
  return any ? strides : std::vector<int64_t>{};
}

}  // namespace

bool subsample_conv_inputs(Model& m) {
  Graph& g = *m.graph;
  std::vector<std::pair<Node*, std::vector<int64_t>>> convs;  // collected first: the loop inserts nodes
  for (auto& n : g.nodes())
    if (std::vector<int64_t> s = rewritable_strides(*n); !s.empty()) convs.emplace_back(n.get(), std::move(s));
  for (const auto& [n, strides] : convs) {
    Value* x = n->input(0);
    std::vector<int64_t> xd;
    static_dims_of(x, &xd);
    std::vector<int64_t> starts, ends, axes;
    std::vector<Dim> out_dims = {Dim(xd[0]), Dim(xd[1])};
    for (size_t i = 0; i < strides.size(); ++i) {
      const int64_t extent = xd[2 + i];
      starts.push_back(0);
      ends.push_back(extent);
      axes.push_back(static_cast<int64_t>(2 + i));
      out_dims.push_back(Dim((extent + strides[i] - 1) / strides[i]));
    }
    auto constant = [&](const char* what, const std::vector<int64_t>& v) {
      return g.add_initializer(g.fresh_name(x->name + what), Tensor::from_i64(v));
    };
    Node* slice = g.insert_node_before(
        n, "Slice",
        {x, constant("_sub_starts", starts), constant("_sub_ends", ends), constant("_sub_axes", axes),
         constant("_sub_steps", strides)},
        1, {});
    slice->outputs[0]->type = Type::tensor(x->type.dtype, out_dims);
    n->inputs[0] = slice->outputs[0];
    n->attrs["strides"] = Attribute::of_ints(std::vector<int64_t>(strides.size(), 1));
  }
  return !convs.empty();
}

}  // namespace tessel
