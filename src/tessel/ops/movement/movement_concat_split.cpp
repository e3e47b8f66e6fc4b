// Layout operators that join and cut along axes: Concat (inputs end to end),
// Split (one input into pieces) and Tile (copies of one input end to end
// along every axis).
#include "tessel/ops/movement/movement_common.h"
#include "tessel/ops/movement/movement_layout.h"
#include "tessel/support/error.h"

namespace tessel::movement {
namespace {

// ---- Concat -----------------------------------------------------------------------------

void concat_infer(InferContext& ctx) {
  TS_CHECK(ctx.num_inputs() >= 1, ctx.node.describe(), ": needs at least one input");
  const DType dt = ctx.input_dtype(0);
  for (size_t i = 1; i < ctx.num_inputs(); ++i)
    TS_CHECK(ctx.input_dtype(i) == dt || ctx.input_dtype(i) == DType::Undefined || dt == DType::Undefined,
             ctx.node.describe(), ": input ", i, " has dtype ", dtype_name(ctx.input_dtype(i)), ", input 0 has ",
             dtype_name(dt));
  const Shape* ref = nullptr;
  bool all_known = true;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    if (ctx.has_shape(i)) {
      if (!ref) ref = &ctx.input_shape(i);
    } else {
      all_known = false;
    }
  }
  if (!ref) {
    ctx.set_output_unknown_shape(0, dt);
    return;
  }
  const int64_t rank = static_cast<int64_t>(ref->size());
  TS_CHECK(rank >= 1, ctx.node.describe(), ": inputs must have rank >= 1");
  const int64_t axis = normalize_axis(ctx.node.attr("axis", Attribute::Kind::Int).i, rank, ctx.node);
  Shape out = *ref;
  Dim total = 0;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_shape(i)) continue;
    const Shape& s = ctx.input_shape(i);
    TS_CHECK(static_cast<int64_t>(s.size()) == rank, ctx.node.describe(), ": input ", i, " has shape ", shape_str(s),
             ", input 0 has rank ", rank);
    for (int64_t d = 0; d < rank; ++d) {
      const Dim& x = s[static_cast<size_t>(d)];
      if (d == axis) continue;
      Dim& o = out[static_cast<size_t>(d)];
      TS_CHECK(!(x.is_const() && o.is_const()) || x == o, ctx.node.describe(), ": input ", i, " has shape ",
               shape_str(s), ", which does not match ", shape_str(*ref), " outside axis ", axis);
      if (x.is_const()) o = x;  // prefer the constant when one side is symbolic
    }
    total = total + s[static_cast<size_t>(axis)];
  }
  out[static_cast<size_t>(axis)] = all_known ? total : fresh_dim(ctx, 0, static_cast<size_t>(axis));
  ctx.set_output(0, dt, out);
  if (rank == 1 && all_known) {
    SymValue v;
    for (size_t i = 0; i < ctx.num_inputs(); ++i) {
      auto part = ctx.input_dims_value(i);
      if (!part) return;
      v.insert(v.end(), part->begin(), part->end());
    }
    maybe_set_sym(ctx, 0, std::move(v));
  }
}

void concat_kernel(KernelContext& ctx) {
  TS_CHECK(ctx.num_inputs() >= 1, ctx.node.describe(), ": needs at least one input");
  const Tensor& first = ctx.input(0);
  const int64_t rank = static_cast<int64_t>(first.rank());
  TS_CHECK(rank >= 1, ctx.node.describe(), ": inputs must have rank >= 1");
  const int64_t axis = normalize_axis(ctx.node.attr("axis", Attribute::Kind::Int).i, rank, ctx.node);
  std::vector<int64_t> out_dims = first.shape();
  out_dims[static_cast<size_t>(axis)] = 0;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    const Tensor& t = ctx.input(i);
    TS_CHECK(t.dtype() == first.dtype(), ctx.node.describe(), ": input ", i, " has dtype ", dtype_name(t.dtype()),
             ", input 0 has ", dtype_name(first.dtype()));
    TS_CHECK(static_cast<int64_t>(t.rank()) == rank, ctx.node.describe(), ": input ", i, " has shape ",
             dims_str(t.shape()), ", input 0 has ", dims_str(first.shape()));
    for (int64_t d = 0; d < rank; ++d)
      TS_CHECK(d == axis || t.dim(static_cast<int>(d)) == first.dim(static_cast<int>(d)), ctx.node.describe(),
               ": input ", i, " has shape ", dims_str(t.shape()), ", input 0 has ", dims_str(first.shape()));
    out_dims[static_cast<size_t>(axis)] = checked_add(out_dims[static_cast<size_t>(axis)], t.dim(static_cast<int>(axis)));
  }
  Tensor out(first.dtype(), out_dims);
  // Each input contributes one contiguous chunk per outer index.
  const int64_t outer = checked_numel(std::vector<int64_t>(out_dims.begin(), out_dims.begin() + axis));
  const int64_t inner = checked_numel(std::vector<int64_t>(out_dims.begin() + axis + 1, out_dims.end()));
  const int64_t out_row = out_dims[static_cast<size_t>(axis)] * inner;
  int64_t col = 0;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    const Tensor& t = ctx.input(i);
    const int64_t chunk = t.dim(static_cast<int>(axis)) * inner;
    for (int64_t o = 0; o < outer; ++o) copy_elems(t, o * chunk, out, o * out_row + col, chunk);
    col += chunk;
  }
  ctx.set_output(0, std::move(out));
}

// Opset < 4 defaulted the axis to 1.
void concat_upgrade(Node& n, int64_t opset) {
  if (opset < 4 && !n.has_attr("axis")) n.attrs["axis"] = Attribute::of_int(1);
}

// ---- Split -----------------------------------------------------------------------------

// Chunk sizes of Split without a split input: ceil(dim / n) each, the last
// one smaller when dim does not divide.
std::vector<int64_t> even_split(int64_t dim, int64_t n, const Node& node) {
  TS_CHECK(n >= 1, node.describe(), ": num_outputs must be >= 1");
  const int64_t chunk = (dim + n - 1) / n;
  std::vector<int64_t> sizes(static_cast<size_t>(n), chunk);
  sizes.back() = dim - chunk * (n - 1);
  TS_CHECK(sizes.back() >= 0, node.describe(), ": cannot split a dimension of ", dim, " into ", n, " outputs");
  return sizes;
}

int64_t split_count(const Node& n, size_t outputs) {
  if (n.has_attr("num_outputs")) {
    const int64_t k = n.attr_int("num_outputs", 0);
    TS_CHECK(k == static_cast<int64_t>(outputs), n.describe(), ": num_outputs is ", k, " but the node has ",
             outputs, " outputs");
    return k;
  }
  return static_cast<int64_t>(outputs);
}

void split_infer(InferContext& ctx) {
  const DType dt = ctx.input_dtype(0);
  check_index_input(ctx, 1, true);
  const size_t nout = ctx.out_types.size();
  if (!ctx.has_shape(0)) {
    for (size_t i = 0; i < nout; ++i) ctx.set_output_unknown_shape(i, dt);
    return;
  }
  const Shape& s = ctx.input_shape(0);
  const int64_t axis = normalize_axis(ctx.node.attr_int("axis", 0), static_cast<int64_t>(s.size()), ctx.node);
  const Dim& dim = s[static_cast<size_t>(axis)];
  std::vector<Dim> sizes;
  if (ctx.has_input(1)) {
    if (auto v = ctx.input_dims_value(1)) {
      TS_CHECK(v->size() == nout, ctx.node.describe(), ": split has ", v->size(), " entries for ", nout, " outputs");
      sizes = *v;
      Dim total = 0;
      for (const Dim& d : sizes) total = total + d;
      TS_CHECK(!(total.is_const() && dim.is_const()) || total == dim, ctx.node.describe(), ": split sizes sum to ",
               total.str(), " but the dimension is ", dim.str());
    } else {
      for (size_t i = 0; i < nout; ++i) sizes.push_back(fresh_dim(ctx, i, static_cast<size_t>(axis)));
    }
  } else {
    const int64_t n = split_count(ctx.node, nout);
    if (dim.is_const() && n >= 1 && (dim.value() + n - 1) / n * (n - 1) > dim.value()) {
      // Not splittable. The node may sit in an If branch that never runs for
      // this shape (the expanded AffineGrid does this), so only the kernel
      // reports it.
      for (size_t i = 0; i < nout; ++i) sizes.push_back(fresh_dim(ctx, i, static_cast<size_t>(axis)));
    } else if (dim.is_const()) {
      for (int64_t x : even_split(dim.value(), n, ctx.node)) sizes.push_back(x);
    } else {
      const Dim chunk = Dim::ceildiv(dim, n);
      sizes.assign(static_cast<size_t>(n), chunk);
      sizes.back() = dim - chunk * (n - 1);
    }
  }
  const auto in_val = ctx.input_dims_value(0);
  Dim offset = 0;
  for (size_t i = 0; i < nout; ++i) {
    Shape o = s;
    o[static_cast<size_t>(axis)] = sizes[i];
    ctx.set_output(i, dt, o);
    // Pieces of a 1-D symbolic value (a shape vector split in parts).
    if (in_val && s.size() == 1 && offset.is_const() && sizes[i].is_const()) {
      const int64_t a = offset.value(), b = a + sizes[i].value();
      if (a >= 0 && b <= static_cast<int64_t>(in_val->size()) && a <= b)
        ctx.set_output_sym(i, SymValue(in_val->begin() + a, in_val->begin() + b));
    }
    offset = offset + sizes[i];
  }
}

void split_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const size_t nout = ctx.num_outputs();
  const int64_t axis = normalize_axis(ctx.node.attr_int("axis", 0), static_cast<int64_t>(x.rank()), ctx.node);
  const int64_t dim = x.dim(static_cast<int>(axis));
  std::vector<int64_t> sizes;
  if (ctx.has_input(1)) {
    sizes = int_values(ctx.input(1), ctx.node, "split");
    TS_CHECK(sizes.size() == nout, ctx.node.describe(), ": split has ", sizes.size(), " entries for ", nout,
             " outputs");
    int64_t total = 0;
    for (int64_t v : sizes) {
      TS_CHECK(v >= 0, ctx.node.describe(), ": negative split size ", v);
      total = checked_add(total, v);
    }
    TS_CHECK(total == dim, ctx.node.describe(), ": split sizes sum to ", total, " but axis ", axis, " has size ", dim);
  } else {
    sizes = even_split(dim, split_count(ctx.node, nout), ctx.node);
  }
  const auto& shape = x.shape();
  const int64_t outer = checked_numel(std::vector<int64_t>(shape.begin(), shape.begin() + axis));
  const int64_t inner = checked_numel(std::vector<int64_t>(shape.begin() + axis + 1, shape.end()));
  int64_t col = 0;
  for (size_t i = 0; i < nout; ++i) {
    std::vector<int64_t> od = shape;
    od[static_cast<size_t>(axis)] = sizes[i];
    Tensor out(x.dtype(), od);
    const int64_t chunk = sizes[i] * inner;
    for (int64_t o = 0; o < outer; ++o) copy_elems(x, o * dim * inner + col, out, o * chunk, chunk);
    col += chunk;
    ctx.set_output(i, std::move(out));
  }
}

// Opset < 13 took split as an attribute; before 18 an absent split meant
// equal parts, one per output (now spelled num_outputs).
void split_upgrade(Node& n, int64_t opset) {
  if (opset < 13) attr_to_input(n, "split", 1);
  if (opset < 18 && !n.has_input(1) && !n.has_attr("num_outputs"))
    n.attrs["num_outputs"] = Attribute::of_int(static_cast<int64_t>(n.outputs.size()));
}

// ---- Tile ------------------------------------------------------------------------------

void tile_infer(InferContext& ctx) {
  const DType dt = ctx.input_dtype(0);
  check_index_input(ctx, 1, true);
  if (!ctx.has_shape(0)) {
    ctx.set_output_unknown_shape(0, dt);
    return;
  }
  const Shape& s = ctx.input_shape(0);
  const auto reps = ctx.input_dims_value(1);
  if (!reps) {
    ctx.set_output(0, dt, fresh_shape(ctx, 0, s.size()));
    return;
  }
  TS_CHECK(reps->size() == s.size(), ctx.node.describe(), ": repeats has ", reps->size(), " entries for rank ",
           s.size());
  Shape out;
  for (size_t d = 0; d < s.size(); ++d) {
    TS_CHECK(!(*reps)[d].is_const() || (*reps)[d].value() >= 0, ctx.node.describe(), ": negative repeat");
    out.push_back(s[d] * (*reps)[d]);
  }
  ctx.set_output(0, dt, std::move(out));
}

void tile_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& r = ctx.input(1);
  TS_CHECK(r.rank() == 1, ctx.node.describe(), ": repeats must be 1-D, got ", dims_str(r.shape()));
  const auto reps = int_values(r, ctx.node, "repeats");
  TS_CHECK(reps.size() == x.rank(), ctx.node.describe(), ": repeats has ", reps.size(), " entries for rank ", x.rank());
  const auto strides = strides_of(x.shape());
  std::vector<int64_t> out_dims;
  AxisTables tab;
  for (size_t d = 0; d < reps.size(); ++d) {
    TS_CHECK(reps[d] >= 0, ctx.node.describe(), ": negative repeat ", reps[d]);
    const int64_t n = x.shape()[d];
    out_dims.push_back(checked_mul(n, reps[d]));
    std::vector<int64_t> t(static_cast<size_t>(out_dims.back()));
    for (int64_t o = 0; o < out_dims.back(); ++o) t[static_cast<size_t>(o)] = (o % n) * strides[d];
    tab.push_back(std::move(t));
  }
  Tensor out(x.dtype(), out_dims);
  copy_box(x, tab, out, {}, out_dims);
  ctx.set_output(0, std::move(out));
}

}  // namespace

void register_concat_split_ops(OpRegistry& r) {
  add_op(r, {.name = "Concat", .min_inputs = 1, .max_inputs = -1, .infer = concat_infer, .kernel = concat_kernel,
             .upgrade = concat_upgrade});
  add_op(r, {.name = "Split", .min_inputs = 1, .max_inputs = 2, .infer = split_infer, .kernel = split_kernel,
             .upgrade = split_upgrade, .since_version = 1, .min_outputs = 1, .max_outputs = -1});
  add_op(r, {.name = "Tile", .min_inputs = 2, .max_inputs = 2, .infer = tile_infer, .kernel = tile_kernel,
             .since_version = 6});
}

}  // namespace tessel::movement
