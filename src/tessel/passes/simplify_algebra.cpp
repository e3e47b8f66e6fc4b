// Algebraic simplification: rewrite rules that read like rules.
//
// Rewrites (each rule below is one function; "exact" means the simplified
// graph computes the same bits as the original for every input):
//   x * 1, 1 * x, x / 1                      => x   (exact)
//   x + (-0.0), x - 0                        => x   (exact)
//   x + 0, x - (-0.0)                        => x   (exact except the sign of
//                                                    a zero: -0.0 + 0 is +0.0)
//   Identity(x)                              => x   (exact)
//   Neg(Neg(x))                              => x   (exact)
//   Transpose(x) with the identity perm      => x   (exact)
//   Transpose(Transpose(x, p), q)            => Transpose(x, p∘q), or x (exact)
//   Reshape(Reshape(x)), Flatten, Squeeze and Unsqueeze inside
//                                            => Reshape(x) (exact)
//   Reshape / Flatten / Squeeze / Unsqueeze / Expand to x's own type,
//   a reshape chain ending in x's own type   => x   (exact)
//   Slice with unit steps that keeps x's type => x  (exact)
//   Concat(x)                                => x   (exact)
//   Cast(x) to x's dtype                     => x   (exact)
//   Cast(Cast(x, T1), T2) where T1 holds every value of x's dtype
//                                            => Cast(x, T2) (exact; then x
//                                                    when T2 is x's dtype)
//   a*b + a*c                                => a*(b+c) (exact for integers;
//       floats only with allow_inexact: (a*b + a*c) rounds three times,
//       a*(b+c) twice, and the results differ in the last bits)
//
// Rules that depend on broadcasting (x * 1 and the like) fire only when the
// result has x's type exactly, so that dropping the node changes neither the
// shape nor the dtype anyone reads. Shape equality is symbolic: inference
// names a dim by the same symbol only when it proved the sizes equal.
//
// Graph outputs keep their names: when the value a rule drops is an output
// of its graph, the value it equals is renamed to it where that value is a
// node result of the same graph used nowhere as an output; otherwise the
// node becomes Identity(x). Subgraphs (If/Loop/Scan bodies) are simplified
// with the same rules; their outputs are treated like the main graph's.
//
// Rules run to a fixed point; dead-code elimination then drops the nodes
// they bypassed.
//
// Assumes: types are inferred (runs after shape inference and constant
// folding, so that shape operands are constants), before fusion.
#include <cmath>
#include <numeric>
#include <unordered_map>

#include "tessel/passes/pass_manager.h"

namespace tessel {

namespace {

class Simplifier;
using Rule = bool (*)(Simplifier&, Node&);

class Simplifier {
 public:
  Simplifier(Model& m, bool allow_inexact) : m_(m), allow_inexact_(allow_inexact) {}

  Graph* graph = nullptr;  // the graph of the node a rule looks at
  std::unordered_map<const Value*, int> uses;
  bool allow_inexact() const { return allow_inexact_; }

  bool run();

  // The node's only output equals `x` (same type where anyone reads it):
  // its uses read x and the node goes.
  bool forward(Node& n, Value* x);

 private:
  Model& m_;
  bool allow_inexact_;
  bool simplify_graph(Graph& g);
};

// ---- helpers ------------------------------------------------------------------

bool is(const Node* n, const char* op) { return n && n->domain.empty() && n->op == op; }

// The node that defines v, when it is the op `op`.
Node* producer(const Value* v, const char* op) { return v && is(v->producer, op) ? v->producer : nullptr; }

bool same_type(const Value* a, const Value* b) {
  return a && b && a->type.has_shape() && a->type.dtype != DType::Undefined && a->type == b->type;
}

// A constant every element of which satisfies `pred`.
template <class Pred>
bool constant_all(const Value* v, Pred pred) {
  if (!v || !v->is_constant() || v->constant->dtype() == DType::String) return false;
  const Tensor& t = *v->constant;
  for (int64_t i = 0; i < t.numel(); ++i)
    if (!pred(t.get_f64(i))) return false;
  return true;
}
bool is_one(const Value* v) { return constant_all(v, [](double d) { return d == 1.0; }); }
bool is_zero(const Value* v) { return constant_all(v, [](double d) { return d == 0.0; }); }  // -0.0 too

// Transpose's permutation (absent: reversed axes, which needs the rank).
std::vector<int64_t> perm_of(const Node& t) {
  if (t.has_attr("perm")) return t.attr_ints("perm");
  const Value* x = t.input(0);
  if (!x || !x->type.has_shape()) return {};
  std::vector<int64_t> p(x->type.shape->size());
  std::iota(p.rbegin(), p.rend(), 0);
  return p;
}

// Ops that only change the shape: the elements stay in row-major order.
bool is_reshape_like(const Node* n) {
  return is(n, "Reshape") || is(n, "Flatten") || is(n, "Squeeze") || is(n, "Unsqueeze");
}

// Significand bits, implicit bit included; 0 for types other than the IEEE
// f64, f32, f16 and bf16.
int significand_bits(DType t) {
  return t == DType::F64 ? 53 : t == DType::F32 ? 24 : t == DType::F16 ? 11 : t == DType::BF16 ? 8 : 0;
}

// Bool, the integers of 8 bits or more and the IEEE floats: their Casts
// depend on the value alone (not float8, sub-byte or string types, whose
// Casts saturate, give 0 out of range, or print).
bool plain_numeric(DType t) {
  return t == DType::Bool || (is_int(t) && int_bits(t) >= 8) || significand_bits(t) > 0;
}

// Every value of `from` (NaN and infinities included) is a value of `to`, so
// a Cast from -> to loses nothing.
bool holds_every_value(DType from, DType to) {
  if (!plain_numeric(from) || !plain_numeric(to)) return false;
  if (from == to || from == DType::Bool) return true;  // bool: 0 and 1
  if (to == DType::Bool) return false;
  if (is_int(from) && is_int(to)) {
    if (is_signed_int(from)) return is_signed_int(to) && int_bits(to) >= int_bits(from);
    return int_bits(to) > int_bits(from) || (is_unsigned_int(to) && int_bits(to) == int_bits(from));
  }
  if (is_int(from)) {
    // A magnitude below 2^p is exact; a signed type's -2^(b-1) is a power of two.
    const int magnitude_bits = is_signed_int(from) ? int_bits(from) - 1 : int_bits(from);
    return magnitude_bits <= significand_bits(to);
  }
  if (is_int(to)) return false;
  // Floats: f16 and bf16 widen into f32 and f64, f32 into f64.
  return to == DType::F64 || (to == DType::F32 && from != DType::F64);
}

// ---- rules: arithmetic ----------------------------------------------------------

// op(x, k) => x, and op(k, x) => x when the op commutes, for a constant k
// whose every element is neutral, when the result has x's type.
bool drop_neutral(Simplifier& s, Node& n, bool (*neutral)(const Value*), bool commutes) {
  for (size_t i = 0; i < (commutes ? 2u : 1u); ++i)
    if (neutral(n.input(1 - i)) && same_type(n.input(i), n.outputs[0])) return s.forward(n, n.input(i));
  return false;
}

// x * 1 => x, 1 * x => x (exact)
bool mul_by_one(Simplifier& s, Node& n) { return drop_neutral(s, n, is_one, true); }

// x / 1 => x (exact)
bool div_by_one(Simplifier& s, Node& n) { return drop_neutral(s, n, is_one, false); }

// x + (-0.0) => x (exact); x + 0 => x (exact except x = -0.0, where x + 0
// is +0.0: the sign of a zero is the only difference, and they compare
// equal). Integers have one zero.
bool add_zero(Simplifier& s, Node& n) { return drop_neutral(s, n, is_zero, true); }

// x - 0 => x (exact: x - (+0.0) is x + (-0.0)); x - (-0.0) => x (exact
// except x = -0.0, as x + 0).
bool sub_zero(Simplifier& s, Node& n) { return drop_neutral(s, n, is_zero, false); }

// Neg(Neg(x)) => x (exact: a sign flip twice; integers wrap, so even the
// most negative value comes back)
bool neg_neg(Simplifier& s, Node& n) {
  Node* inner = producer(n.input(0), "Neg");
  return inner && s.forward(n, inner->input(0));
}

// a*b + a*c => a*(b+c) (exact for integers, whose wrapping arithmetic
// distributes; not exact in floating point: allow_inexact only). Only when
// both products have no other use, so that the node count drops, and b and c
// have one type, so the sum's type is known.
bool distribute(Simplifier& s, Node& n) {
  const Value* y = n.outputs[0];
  if (!y || !(is_int(y->type.dtype) || s.allow_inexact())) return false;
  Node* l = producer(n.input(0), "Mul");
  Node* r = producer(n.input(1), "Mul");
  if (!l || !r || l == r || s.uses[l->outputs[0]] != 1 || s.uses[r->outputs[0]] != 1) return false;
  for (size_t i = 0; i < 2; ++i)
    for (size_t j = 0; j < 2; ++j) {
      Value* a = l->input(i);
      Value* b = l->input(1 - i);
      Value* c = r->input(1 - j);
      if (a != r->input(j) || !same_type(b, c)) continue;
      Node* sum = s.graph->insert_node_before(&n, "Add", {b, c}, 1);
      sum->outputs[0]->type = b->type;
      n.op = "Mul";
      n.inputs = {a, sum->outputs[0]};
      return true;
    }
  return false;
}

// ---- rules: data movement ---------------------------------------------------------

// Identity(x) => x (exact)
bool identity(Simplifier& s, Node& n) { return s.forward(n, n.input(0)); }

// Transpose(x) with perm [0, 1, ..., r-1] => x (exact)
bool transpose_identity(Simplifier& s, Node& n) {
  const std::vector<int64_t> p = perm_of(n);
  for (size_t i = 0; i < p.size(); ++i)
    if (p[i] != static_cast<int64_t>(i)) return false;
  return !p.empty() && s.forward(n, n.input(0));
}

// Transpose(Transpose(x, p), q) => Transpose(x, r) with r[i] = p[q[i]]
// (exact: output axis i is the inner output's axis q[i], which is x's axis
// p[q[i]]); the identity r is then dropped by transpose_identity.
bool transpose_transpose(Simplifier&, Node& n) {
  Node* inner = producer(n.input(0), "Transpose");
  if (!inner) return false;
  const std::vector<int64_t> p = perm_of(*inner), q = perm_of(n);
  if (p.empty() || p.size() != q.size()) return false;
  std::vector<int64_t> r(q.size());
  for (size_t i = 0; i < q.size(); ++i) {
    if (q[i] < 0 || q[i] >= static_cast<int64_t>(p.size())) return false;
    r[i] = p[static_cast<size_t>(q[i])];
  }
  n.inputs[0] = inner->input(0);
  n.attrs["perm"] = Attribute::of_ints(r);
  return true;
}

// Reshape(R(x), shape) => Reshape(x, shape) for R a Reshape, Flatten, Squeeze
// or Unsqueeze (exact: reshapes keep the row-major order). The shape must
// not depend on R's result: no 0 ("copy the input's dim") unless allowzero,
// else it is replaced by the inferred output shape when that is static. A -1
// is fine: R's result and x have as many elements.
bool reshape_chain(Simplifier& s, Node& n) {
  Node* inner = n.input(0) ? n.input(0)->producer : nullptr;
  if (!is_reshape_like(inner) || !n.input(1)) return false;
  const Value* shape = n.input(1);
  const bool literal_zeros = n.attr_int("allowzero", 0) != 0;
  if (!shape->is_constant() || !(literal_zeros || constant_all(shape, [](double d) { return d != 0; }))) {
    const Type& t = n.outputs[0]->type;
    if (!t.has_shape()) return false;
    std::vector<int64_t> dims;
    for (const Dim& d : *t.shape)
      if (!d.is_const() || d.value() == 0) return false;
      else dims.push_back(d.value());
    Tensor st(DType::I64, {static_cast<int64_t>(dims.size())});
    for (size_t i = 0; i < dims.size(); ++i) st.set_i64(static_cast<int64_t>(i), dims[i]);
    n.inputs[1] = s.graph->add_initializer(s.graph->fresh_name(n.outputs[0]->name + "_shape"), std::move(st));
  }
  n.inputs[0] = inner->input(0);
  return true;
}

// Reshape/Flatten/Squeeze/Unsqueeze/Expand(x) with x's own type => x (exact:
// no element moves or repeats). Reached through a chain of reshapes (an
// Unsqueeze undone by a Squeeze), the chain is dropped too.
bool same_shape(Simplifier& s, Node& n) {
  Value* x = n.input(0);
  if (same_type(x, n.outputs[0])) return s.forward(n, x);
  if (!is_reshape_like(&n)) return false;
  for (Node* r = x ? x->producer : nullptr; is_reshape_like(r); r = r->input(0) ? r->input(0)->producer : nullptr)
    if (same_type(r->input(0), n.outputs[0])) return s.forward(n, r->input(0));
  return false;
}

// Slice(x) with unit steps whose result has x's type => x (exact: a range of
// full length with step 1 starts at 0 on every axis)
bool slice_whole(Simplifier& s, Node& n) {
  const Value* steps = n.input(4);
  if (steps && !is_one(steps)) return false;
  return same_type(n.input(0), n.outputs[0]) && s.forward(n, n.input(0));
}

// Concat(x) => x (exact)
bool concat_single(Simplifier& s, Node& n) { return n.inputs.size() == 1 && s.forward(n, n.input(0)); }

// ---- rules: casts ------------------------------------------------------------------

// Cast(x) to x's dtype => x (exact)
bool cast_same(Simplifier& s, Node& n) {
  const Value* x = n.input(0);
  return x && x->type.dtype != DType::Undefined && x->type.dtype == n.outputs[0]->type.dtype &&
         s.forward(n, n.input(0));
}

// Cast(Cast(x, T1), T2) => Cast(x, T2) when T1 holds every value of x's
// dtype (exact: the inner Cast changes no value, so the outer one converts
// x's values as they are; f32 -> f64 -> f32 so becomes x). Not when T2 is
// a string or a float8 (printing and saturation see the type, not the value).
bool cast_chain(Simplifier&, Node& n) {
  Node* inner = producer(n.input(0), "Cast");
  if (!inner || !inner->input(0)) return false;
  const DType from = inner->input(0)->type.dtype, via = n.input(0)->type.dtype, to = n.outputs[0]->type.dtype;
  if (!plain_numeric(to) || !holds_every_value(from, via)) return false;
  n.inputs[0] = inner->input(0);
  return true;
}

// ---- the rule table and the driver --------------------------------------------------

struct Entry {
  const char* op;
  Rule rule;
};

// Tried in order; the first that fires ends the node's turn.
const Entry kRules[] = {
    {"Mul", mul_by_one},
    {"Div", div_by_one},
    {"Add", add_zero},
    {"Add", distribute},
    {"Sub", sub_zero},
    {"Neg", neg_neg},
    {"Identity", identity},
    {"Transpose", transpose_identity},
    {"Transpose", transpose_transpose},
    {"Reshape", same_shape},
    {"Reshape", reshape_chain},
    {"Flatten", same_shape},
    {"Squeeze", same_shape},
    {"Unsqueeze", same_shape},
    {"Expand", same_shape},
    {"Slice", slice_whole},
    {"Concat", concat_single},
    {"Cast", cast_same},
    {"Cast", cast_chain},
};

bool Simplifier::forward(Node& n, Value* x) {
  Graph& g = *graph;
  Value* y = n.outputs.size() == 1 ? n.outputs[0] : nullptr;
  if (!x || !y) return false;
  if (!g.is_output(y)) {
    g.replace_all_uses(y, x);
    g.remove_node(&n);
    return true;
  }
  // y is an output of g: its name stays. x's producer can define y instead
  // when x is a result of this graph that is no output itself.
  Node* p = x->producer;
  if (p && x->owner == &g && !g.is_output(x) && x->type == y->type) {
    g.remove_node(&n);
    const int k = x->producer_output;
    p->outputs[static_cast<size_t>(k)] = y;
    y->producer = p;
    y->producer_output = k;
    x->producer = nullptr;
    x->producer_output = -1;
    g.replace_all_uses(x, y);
    return true;
  }
  if (is(&n, "Identity")) return false;
  n.op = "Identity";
  n.inputs = {x};
  n.attrs.clear();
  return true;
}

bool Simplifier::simplify_graph(Graph& g) {
  graph = &g;
  bool changed = false;
  auto& nodes = g.nodes();
  for (auto it = nodes.begin(); it != nodes.end();) {
    Node& n = **it++;  // forward() may remove n
    if (!n.domain.empty() || n.outputs.size() != 1 || !n.outputs[0]) continue;
    for (const Entry& e : kRules)
      if (n.op == e.op && e.rule(*this, n)) {
        changed = true;
        break;
      }
  }
  return changed;
}

bool Simplifier::run() {
  bool changed = false;
  constexpr int kMaxRounds = 64;  // each round shortens or drops a chain; a guard
  for (int round = 0; round < kMaxRounds; ++round) {
    uses.clear();
    count_uses(*m_.graph, &uses);
    bool any = false;
    for_each_graph(*m_.graph, [&](Graph& g) { any |= simplify_graph(g); });
    changed |= any;
    if (!any) break;
  }
  if (changed) eliminate_dead_code(m_);
  return changed;
}

}  // namespace

bool simplify_algebra(Model& m, bool allow_inexact) { return Simplifier(m, allow_inexact).run(); }

}  // namespace tessel
