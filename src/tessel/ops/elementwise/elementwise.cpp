// The elementwise op family: registration and the helpers its files share
// (see elementwise.h for the split over files and the numeric policy).
#include "tessel/ops/elementwise/elementwise.h"

#include <cfloat>
#include <cmath>

namespace tessel {

namespace ew {

bool in_set(DType t, DTypeSet set) {
  for (DType d : set)
    if (d == t) return true;
  return false;
}

void require_dtype(const Node& n, size_t input, DType t, DTypeSet set) {
  if (t == DType::Undefined || in_set(t, set)) return;
  std::string names;
  for (DType d : set) names += (names.empty() ? "" : "|") + std::string(dtype_name(d));
  fail(n.describe(), ": input ", input, " has dtype ", dtype_name(t), ", expected ", names);
}

void require_same_dtype(const Node& n, size_t i, DType t0, DType ti) {
  if (t0 == DType::Undefined || ti == DType::Undefined) return;
  TS_CHECK(t0 == ti, n.describe(), ": input ", i, " has dtype ", dtype_name(ti), " but input 0 has dtype ",
           dtype_name(t0), " (they must match)");
}

uint16_t double_to_f16_bits(double v) {
  // Directly from the double's bits with one round-to-nearest-even (the
  // compiler's _Float16 conversion is a slow library call on most x86).
  uint64_t u;
  std::memcpy(&u, &v, 8);
  const uint16_t sign = static_cast<uint16_t>((u >> 48) & 0x8000);
  const uint64_t a = u & 0x7FFFFFFFFFFFFFFFull;
  if (a >= 0x7FF0000000000000ull) {  // inf, or NaN (kept quiet, top payload bits kept)
    if (a == 0x7FF0000000000000ull) return sign | 0x7C00;
    return static_cast<uint16_t>(sign | 0x7E00 | ((a >> 42) & 0x3FF));
  }
  const int e = static_cast<int>(a >> 52) - 1023;
  if (e > 15) return sign | 0x7C00;  // beyond the largest binade: inf
  if (e < -25) return sign;          // below half the smallest subnormal: ±0
  const uint64_t mant = (a & ((uint64_t{1} << 52) - 1)) | (uint64_t{1} << 52);
  // Normal halves keep 11 significant bits; subnormals count units of 2^-24.
  const int shift = e >= -14 ? 42 : 28 - e;
  uint64_t q = mant >> shift;
  const uint64_t rem = mant & ((uint64_t{1} << shift) - 1), half = uint64_t{1} << (shift - 1);
  if (rem > half || (rem == half && (q & 1))) ++q;
  // For normals q is in [1024, 2048]: a carry moves into the exponent (and
  // to inf past the top binade) by plain addition.
  const uint64_t bits = e >= -14 ? (static_cast<uint64_t>(e + 15) << 10) + (q - 1024) : q;
  return static_cast<uint16_t>(sign | bits);
}

const float* f16_table() {
  static const std::vector<float> table = [] {
    std::vector<float> t(65536);
    for (uint32_t b = 0; b < 65536; ++b) t[b] = f16_bits_to_f32(static_cast<uint16_t>(b));
    return t;
  }();
  return table.data();
}

uint16_t double_to_bf16_bits(double v) {
  if (std::isnan(v)) return f32_to_bf16_bits(static_cast<float>(v));
  // Round to float with round-to-odd, then to bf16 with round-to-nearest-even:
  // float keeps more than two extra bits, so this equals one direct rounding.
  float f = static_cast<float>(v);
  if (std::isinf(f) && std::isfinite(v)) {
    f = std::copysign(FLT_MAX, static_cast<float>(v));  // odd mantissa already
  } else if (static_cast<double>(f) != v) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if (std::fabs(static_cast<double>(f)) > std::fabs(v)) u -= 1;  // truncate toward zero
    u |= 1;
    std::memcpy(&f, &u, 4);
  }
  return f32_to_bf16_bits(f);
}

// ---- inference helpers ---------------------------------------------------------------

void infer_broadcast_output(InferContext& ctx, const std::vector<size_t>& inputs, DType dt) {
  std::optional<Shape> out;
  for (size_t i : inputs) {
    if (!ctx.has_shape(i)) {
      ctx.set_output_unknown_shape(0, dt);
      return;
    }
    out = out ? broadcast_shapes(*out, ctx.input_shape(i), ctx.node) : ctx.input_shape(i);
  }
  ctx.set_output(0, dt, out ? *out : Shape{});
}

void infer_float_unary(InferContext& ctx) {
  require_dtype(ctx.node, 0, ctx.input_dtype(0), kFloat);
  infer_same_shape(ctx, ctx.input_dtype(0));
}

void infer_same_shape(InferContext& ctx, DType dt) {
  if (ctx.has_shape(0)) {
    ctx.set_output(0, dt, ctx.input_shape(0));
  } else {
    ctx.set_output_unknown_shape(0, dt);
  }
}

std::optional<SymInput> sym_input(const InferContext& ctx, size_t i) {
  if (!ctx.has_shape(i)) return std::nullopt;
  const size_t rank = ctx.input_shape(i).size();
  if (rank > 1) return std::nullopt;
  if (const SymValue* s = ctx.input_sym(i)) return SymInput{*s, rank};
  if (const Tensor* c = ctx.input_const(i)) {
    if (!(is_int(c->dtype()) || c->dtype() == DType::Bool) || c->rank() > 1) return std::nullopt;
    SymInput in{{}, c->rank()};
    for (int64_t k = 0; k < c->numel(); ++k) in.v.push_back(c->get_i64(k));
    return in;
  }
  return std::nullopt;
}

void infer_sym_nary(InferContext& ctx, const std::vector<size_t>& inputs,
                    const std::function<std::optional<Dim>(const std::vector<Dim>&)>& fn) {
  std::vector<SymInput> ins;
  size_t rank = 0, len = 1;
  for (size_t i : inputs) {
    std::optional<SymInput> s = sym_input(ctx, i);
    if (!s) return;
    rank = std::max(rank, s->rank);
    if (s->v.size() != 1) {
      if (len != 1 && len != s->v.size()) return;
      len = s->v.size();
    }
    ins.push_back(std::move(*s));
  }
  for (const SymInput& s : ins)
    if (s.v.empty() && len != 0) return;  // an empty input broadcasts only with empty ones
  SymValue out;
  for (size_t k = 0; k < len; ++k) {
    std::vector<Dim> args;
    for (const SymInput& s : ins) args.push_back(s.v.size() == 1 ? s.v[0] : s.v[k]);
    std::optional<Dim> d = fn(args);
    if (!d) return;
    out.push_back(*d);
  }
  if (rank == 0 && out.size() != 1) return;
  ctx.set_output_sym(0, std::move(out));
}

namespace {
// True when the atom is >= 1 for every value of its symbols (each >= 1).
bool atom_positive(const DimAtom& a) {
  switch (a.kind) {
    case DimAtom::Kind::Symbol: return true;
    case DimAtom::Kind::Max: return dim_sign(a.args[0]) == 1 || dim_sign(a.args[1]) == 1;
    case DimAtom::Kind::Min: return dim_sign(a.args[0]) == 1 && dim_sign(a.args[1]) == 1;
    case DimAtom::Kind::FloorDiv: return false;  // floordiv(seq, 2) may be 0
    case DimAtom::Kind::Mod: return false;
  }
  return false;
}
}  // namespace

std::optional<int> dim_sign(const Dim& d) {
  if (auto c = d.const_value()) return *c > 0 ? 1 : *c < 0 ? -1 : 0;
  // A sum of products of positive atoms with coefficients of one sign (and a
  // constant term of that sign or 0) is non-zero with that sign.
  int sign = 0;
  for (const Dim::Term& t : d.terms()) {
    const int ts = t.coef > 0 ? 1 : -1;
    if (sign != 0 && ts != sign) return std::nullopt;
    sign = ts;
    for (const DimAtomPtr& a : t.atoms)
      if (!atom_positive(*a)) return std::nullopt;
  }
  if (sign == 0) return std::nullopt;
  return sign;
}

bool dim_nonneg(const Dim& d) {
  for (const Dim::Term& t : d.terms())
    if (t.coef < 0) return false;
  return true;
}

// ---- legacy-opset upgrades ------------------------------------------------------------

void drop_consumed_inputs(Node& node) { node.attrs.erase("consumed_inputs"); }

namespace {
// Rank of a value when known from its type or constant.
std::optional<size_t> known_rank(const Value* v) {
  if (!v) return std::nullopt;
  if (v->constant) return v->constant->rank();
  if (v->type.has_shape()) return v->type.shape->size();
  return std::nullopt;
}
}  // namespace

void upgrade_legacy_broadcast(Node& node, int64_t opset) {
  if (opset >= 7) return;
  const bool bcast = node.attr_int("broadcast", 0) != 0;
  const bool has_axis = node.has_attr("axis");
  const int64_t axis = node.attr_int("axis", 0);
  node.attrs.erase("broadcast");
  node.attrs.erase("axis");
  if (!bcast || !has_axis || node.inputs.size() < 2) return;  // trailing alignment = numpy rules
  const std::optional<size_t> ra = known_rank(node.input(0)), rb = known_rank(node.input(1));
  TS_CHECK(ra && rb, node.describe(), ": legacy broadcast with 'axis' needs the ranks of both inputs");
  const int64_t ax = axis < 0 ? axis + static_cast<int64_t>(*ra) : axis;
  TS_CHECK(ax >= 0 && ax + static_cast<int64_t>(*rb) <= static_cast<int64_t>(*ra), node.describe(),
           ": legacy broadcast axis ", axis, " does not fit input ranks ", *ra, " and ", *rb);
  const int64_t trailing = static_cast<int64_t>(*ra) - ax - static_cast<int64_t>(*rb);
  if (trailing == 0) return;
  Value* b = node.input(1);
  Graph* g = node.owner;
  if (b->constant) {
    std::vector<int64_t> shape = b->constant->shape();
    shape.insert(shape.end(), static_cast<size_t>(trailing), 1);
    node.inputs[1] = g->add_initializer(g->fresh_name(b->name + "_bcast"), b->constant->reshaped(shape));
    return;
  }
  // Unsqueeze B with trailing unit axes (positions rb .. rb+trailing-1 of its output).
  std::vector<int64_t> axes;
  for (int64_t k = 0; k < trailing; ++k) axes.push_back(static_cast<int64_t>(*rb) + k);
  Value* axes_v = g->add_initializer(g->fresh_name(node.name + "_bcast_axes"), Tensor::from_i64(axes));
  Node* u = g->insert_node_before(&node, "Unsqueeze", {b, axes_v}, 1);
  node.inputs[1] = u->outputs[0];
}

void upgrade_legacy_binary(Node& node, int64_t opset) {
  drop_consumed_inputs(node);
  upgrade_legacy_broadcast(node, opset);
}

void upgrade_legacy_unary(Node& node, int64_t opset) { drop_consumed_inputs(node); }

}  // namespace ew

void register_elementwise_ops(OpRegistry& r) {
  ew::register_unary_ops(r);
  ew::register_activation_ops(r);
  ew::register_binary_ops(r);
  ew::register_variadic_ops(r);
  ew::register_cast_ops(r);
}

}  // namespace tessel
