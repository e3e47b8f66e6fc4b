// The IR verifier (interface in ir/verifier.h; it lives here because it needs
// the op registry). Checks structure first (SSA, scoping, outputs), then each
// node against its schema (registered, arity, types agree with inference).
//
// It runs after every pass of the pipeline, so it only complains about what
// is certainly wrong: a declared dim that is symbolic where inference found
// another expression is accepted (the exporter's names are unified by shape
// inference, not here); a node whose inference throws is not checked, and
// one whose inference knows less than the declared type is compared only
// where both sides are known.
#include "tessel/ir/verifier.h"

#include <functional>
#include <map>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "tessel/ir/printer.h"
#include "tessel/ops/registry.h"
#include "tessel/support/error.h"

namespace tessel {

namespace {

std::string vname(const Value* v) { return print_value_name(v->name); }

std::string where(const Graph& g) { return str_cat("graph @", g.name, ": "); }

bool is_ancestor(const Graph* a, const Graph* g) {
  for (const Graph* p = g; p; p = p->parent)
    if (p == a) return true;
  return false;
}

void subgraphs_of(const Node& n, std::vector<const Graph*>* out) {
  for (const auto& [k, a] : n.attrs) {
    if (a.kind == Attribute::Kind::Graph && a.g) out->push_back(a.g.get());
    if (a.kind == Attribute::Kind::Graphs)
      for (const auto& sg : a.graphs)
        if (sg) out->push_back(sg.get());
  }
}

// Values defined so far, per scope: the chain of visible sets from the root
// graph down to the graph being checked.
class StructureChecker {
 public:
  void check_model(const Model& m) {
    TS_CHECK(m.graph != nullptr, "model has no graph");
    check_graph(*m.graph, nullptr);
  }

 private:
  std::unordered_set<const Value*> defined_anywhere_;
  std::vector<std::unordered_set<const Value*>*> scopes_;
  std::vector<std::set<std::string>*> scope_names_;

  bool visible(const Value* v) const {
    for (auto* s : scopes_)
      if (s->count(v)) return true;
    return false;
  }

  void define(const Graph& g, const Value* v, const std::string& how) {
    TS_CHECK(v->owner == &g, where(g), how, " ", vname(v), " belongs to another graph");
    TS_CHECK(!defined_anywhere_.count(v), where(g), "value ", vname(v), " is defined more than once");
    for (auto* names : scope_names_)
      TS_CHECK(!names->count(v->name), where(g), "value name ", vname(v),
               " is defined more than once (names must be unique in their scope)");
    defined_anywhere_.insert(v);
    scopes_.back()->insert(v);
    scope_names_.back()->insert(v->name);
  }

  // Explains why `v`, used by `user` in graph `g`, is not visible.
  [[noreturn]] void bad_use(const Graph& g, const std::string& user, const Value* v) {
    if (v->owner == &g && v->producer && v->producer->owner == &g) {
      // Defined later in this graph: a cycle if its producer depends on the user.
      fail(where(g), user, " uses ", vname(v), " before its definition by ", v->producer->describe(),
           cycle_note(g, v->producer));
    }
    if (v->owner && !is_ancestor(v->owner, &g))
      fail(where(g), user, " uses ", vname(v), " of graph @", v->owner->name,
           ", which is not an enclosing graph (sibling or nested scope)");
    if (v->owner && v->owner != &g && v->producer)
      fail(where(g), user, " uses ", vname(v), " of an enclosing graph before its definition by ",
           v->producer->describe());
    fail(where(g), user, " uses ", vname(v), ", which is not defined (no producer, not an input or constant)");
  }

  // " (cycle: A -> B -> A)" when `from` reaches itself through node inputs.
  static std::string cycle_note(const Graph& g, const Node* from) {
    std::unordered_map<const Value*, const Node*> producer;
    for (const auto& n : g.nodes())
      for (const Value* o : n->outputs)
        if (o) producer[o] = n.get();
    std::vector<const Node*> path;
    std::unordered_set<const Node*> seen;
    std::function<bool(const Node*)> dfs = [&](const Node* n) -> bool {
      path.push_back(n);
      std::vector<const Value*> ins(n->inputs.begin(), n->inputs.end());
      std::vector<const Graph*> sgs;
      subgraphs_of(*n, &sgs);
      for (const Graph* sg : sgs)
        for_each_graph(const_cast<Graph&>(*sg), [&](Graph& inner) {
          for (const auto& m : inner.nodes()) ins.insert(ins.end(), m->inputs.begin(), m->inputs.end());
        });
      for (const Value* v : ins) {
        if (!v) continue;
        auto it = producer.find(v);
        if (it == producer.end()) continue;
        if (it->second == from) return true;
        if (seen.insert(it->second).second && dfs(it->second)) return true;
      }
      path.pop_back();
      return false;
    };
    if (!dfs(from)) return "";
    std::string s = " (cycle: ";
    for (const Node* n : path) s += n->describe() + " -> ";
    return s + from->describe() + ")";
  }

  void check_graph(const Graph& g, const Graph* parent) {
    TS_CHECK(g.parent == parent, where(g), "parent link is wrong");
    std::unordered_set<const Value*> here;
    std::set<std::string> names;
    scopes_.push_back(&here);
    scope_names_.push_back(&names);
    for (const Value* v : g.inputs) {
      TS_CHECK(v != nullptr, where(g), "null graph input");
      TS_CHECK(v->producer == nullptr, where(g), "input ", vname(v), " also has a producer");
      define(g, v, "input");
    }
    for (const Value* v : g.initializers) {
      TS_CHECK(v != nullptr, where(g), "null initializer");
      TS_CHECK(v->constant.has_value(), where(g), "initializer ", vname(v), " has no value");
      TS_CHECK(v->producer == nullptr, where(g), "constant ", vname(v), " also has a producer");
      const Tensor& t = *v->constant;
      TS_CHECK(v->type == Type::tensor(t.dtype(), shape_of(t.shape())), where(g), "constant ", vname(v),
               " has type ", print_type(v->type), " but its value is ", dtype_name(t.dtype()), dims_str(t.shape()));
      define(g, v, "constant");
    }
    for (const auto& np : g.nodes()) {
      const Node& n = *np;
      TS_CHECK(n.owner == &g, where(g), n.describe(), " belongs to another graph");
      for (const Value* v : n.inputs)
        if (v && !visible(v)) bad_use(g, n.describe(), v);
      std::vector<const Graph*> sgs;
      subgraphs_of(n, &sgs);
      for (const Graph* sg : sgs) check_graph(*sg, &g);
      for (size_t i = 0; i < n.outputs.size(); ++i) {
        const Value* v = n.outputs[i];
        if (!v) continue;
        TS_CHECK(v->producer == &n && v->producer_output == static_cast<int>(i), where(g), "output ", i, " of ",
                 n.describe(), " (", vname(v), ") does not point back to its producer");
        TS_CHECK(!v->is_constant(), where(g), "node output ", vname(v), " is also a constant");
        define(g, v, str_cat("output of ", n.describe()));
      }
    }
    TS_CHECK(!g.outputs.empty(), where(g), "graph has no outputs");
    for (size_t i = 0; i < g.outputs.size(); ++i) {
      const Value* v = g.outputs[i];
      TS_CHECK(v != nullptr, where(g), "graph output ", i, " is missing");
      if (!visible(v)) bad_use(g, str_cat("graph output ", i), v);
    }
    scopes_.pop_back();
    scope_names_.pop_back();
  }
};

bool dims_conflict(const Dim& declared, const Dim& inferred) {
  return declared.is_const() && inferred.is_const() && declared.value() != inferred.value();
}

bool fully_unknown(const Type& t) { return t.kind == Type::Kind::Tensor && t.dtype == DType::Undefined && !t.shape; }

// Throws when `declared` certainly disagrees with `inferred`.
void compare_types(const Type& declared, const Type& inferred, const std::string& what, bool require_types) {
  if (fully_unknown(inferred)) return;
  if (fully_unknown(declared)) {
    TS_CHECK(!require_types, what, " has no type but inference gives ", print_type(inferred));
    return;
  }
  TS_CHECK(declared.kind == inferred.kind, what, " has type ", print_type(declared), " but inference gives ",
           print_type(inferred));
  if (declared.kind != Type::Kind::Tensor) {
    if (declared.elem && inferred.elem) compare_types(*declared.elem, *inferred.elem, what, require_types);
    return;
  }
  if (declared.dtype == DType::Undefined) {
    TS_CHECK(!require_types || inferred.dtype == DType::Undefined, what, " has no element type but inference gives ",
             print_type(inferred));
  } else {
    TS_CHECK(declared.dtype == inferred.dtype || inferred.dtype == DType::Undefined, what, " has type ",
             print_type(declared), " but inference gives ", print_type(inferred));
  }
  if (!declared.shape || !inferred.shape) return;
  TS_CHECK(declared.shape->size() == inferred.shape->size(), what, " has type ", print_type(declared),
           " but inference gives ", print_type(inferred), " (rank differs)");
  for (size_t i = 0; i < declared.shape->size(); ++i)
    TS_CHECK(!dims_conflict((*declared.shape)[i], (*inferred.shape)[i]), what, " has type ", print_type(declared),
             " but inference gives ", print_type(inferred));
}

void check_node(const Node& n, const OpRegistry& reg, const VerifyOptions& o) {
  const OpSchema* s = reg.find(n.domain, n.op);
  const std::string g = n.owner ? where(*n.owner) : "";
  TS_CHECK(s, g, n.describe(), ": operator '", n.domain.empty() ? n.op : n.domain + "::" + n.op,
           "' is not registered");
  try {
    check_arity(*s, n);
  } catch (const Error& e) {
    fail(g, e.what());
  }
  if (!s->infer) return;
  InferContext ctx(n);
  for (const Value* v : n.inputs) {
    ctx.in_types.push_back(v ? &v->type : nullptr);
    ctx.in_consts.push_back(v && v->constant ? &*v->constant : nullptr);
    ctx.in_syms.push_back(nullptr);
  }
  // Subgraph outputs as declared; the verifier checks each graph on its own.
  ctx.infer_subgraph = [](Graph& sg, const std::vector<Type>&) {
    std::vector<Type> out;
    for (const Value* v : sg.outputs) out.push_back(v ? v->type : Type{});
    return out;
  };
  // Inference needs the types of its inputs; with unknown input types it may
  // reasonably refuse, which is not the verifier's business.
  bool inputs_known = true;
  for (const Value* v : n.inputs)
    if (v && v->type.is_tensor() && v->type.dtype == DType::Undefined) inputs_known = false;
  if (!inputs_known) return;
  // An inference error is not a verification error: the shape-inference pass
  // reports those where they matter, and a branch of an If with a constant
  // condition may be statically inconsistent (ONNX function bodies expanded
  // for several ranks hold such branches) without being wrong.
  try {
    s->infer(ctx);
  } catch (const Error&) {
    return;
  }
  for (size_t i = 0; i < n.outputs.size() && i < ctx.out_types.size(); ++i)
    if (n.outputs[i])
      compare_types(n.outputs[i]->type, ctx.out_types[i], g + "output " + vname(n.outputs[i]) + " of " + n.describe(),
                    o.require_types);
}

}  // namespace

void verify_structure(const Model& m) { StructureChecker().check_model(m); }

void verify_model(const Model& m, const OpRegistry& reg, const VerifyOptions& o) {
  verify_structure(m);
  for_each_graph(*m.graph, [&](Graph& g) {
    for (const auto& n : g.nodes()) check_node(*n, reg, o);
  });
}

void verify_model(const Model& m, const VerifyOptions& o) { verify_model(m, OpRegistry::global(), o); }

}  // namespace tessel
