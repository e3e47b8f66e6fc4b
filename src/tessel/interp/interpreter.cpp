#include "tessel/interp/interpreter.h"

#include <unordered_map>
#include <unordered_set>

#include "tessel/support/error.h"

namespace tessel {

struct Interpreter::Env {
  const Env* parent = nullptr;
  std::unordered_map<const Value*, RtValue> vals;

  const RtValue* find(const Value* v) const {
    for (const Env* e = this; e; e = e->parent) {
      auto it = e->vals.find(v);
      if (it != e->vals.end()) return &it->second;
    }
    return nullptr;
  }
};

void check_value_matches(const RtValue& v, const Type& t, const std::string& what,
                         std::map<std::string, int64_t>* bindings) {
  if (t.kind != Type::Kind::Tensor) return;
  TS_CHECK(v.is_tensor(), what, ": expected a tensor");
  check_dims_match(v.tensor.dtype(), v.tensor.shape(), t, what, bindings);
}

void check_dims_match(DType dtype, const std::vector<int64_t>& dims, const Type& t, const std::string& what,
                      std::map<std::string, int64_t>* bindings) {
  if (t.kind != Type::Kind::Tensor) return;
  if (t.dtype != DType::Undefined)
    TS_CHECK(dtype == t.dtype, what, ": expected dtype ", dtype_name(t.dtype), ", got ", dtype_name(dtype));
  if (!t.shape) return;
  const Shape& s = *t.shape;
  TS_CHECK(dims.size() == s.size(), what, ": expected shape ", shape_str(s), ", got ", dims_str(dims));
  for (size_t i = 0; i < s.size(); ++i) {
    const int64_t actual = dims[i];
    if (s[i].is_const()) {
      TS_CHECK(s[i].value() == actual, what, ": expected shape ", shape_str(s), ", got ", dims_str(dims));
      continue;
    }
    if (!bindings) continue;
    // A bare symbol binds; an expression must evaluate to the actual size.
    const auto& terms = s[i].terms();
    if (terms.size() == 1 && terms[0].coef == 1 && terms[0].atoms.size() == 1 &&
        terms[0].atoms[0]->kind == DimAtom::Kind::Symbol) {
      const std::string& name = terms[0].atoms[0]->name;
      auto it = bindings->find(name);
      if (it == bindings->end()) {
        (*bindings)[name] = actual;
      } else {
        TS_CHECK(it->second == actual, what, ": dimension ", i, " is ", actual, " but '", name, "' is already ",
                 it->second);
      }
    } else if (auto e = s[i].eval(*bindings)) {
      TS_CHECK(*e == actual, what, ": dimension ", i, " is ", actual, " but ", s[i].str(), " = ", *e);
    }
  }
}

namespace {

// Values of `g`'s enclosing scopes or of `g` itself that `n` reads, including
// reads from inside its subgraphs.
void reads_of(const Node& n, std::vector<const Value*>* out) {
  for (const Value* v : n.inputs)
    if (v) out->push_back(v);
  for (const auto& [k, a] : n.attrs) {
    std::vector<const Graph*> gs;
    if (a.kind == Attribute::Kind::Graph && a.g) gs.push_back(a.g.get());
    for (const auto& sg : a.graphs) gs.push_back(sg.get());
    for (const Graph* sg : gs) {
      for (const Value* v : sg->outputs) out->push_back(v);
      for (const auto& inner : sg->nodes()) reads_of(*inner, out);
    }
  }
}

}  // namespace

std::vector<RtValue> Interpreter::exec_node(const Node& n, Env& env) const {
  const OpSchema* s = reg_.find(n.domain, n.op);
  TS_CHECK(s && s->kernel, n.describe(), ": no reference kernel for operator '",
           n.domain.empty() ? n.op : n.domain + "." + n.op, "'");
  KernelContext ctx(n);
  for (const Value* v : n.inputs) {
    if (!v) {
      ctx.inputs.push_back(nullptr);
      continue;
    }
    const RtValue* rv = env.find(v);
    if (!rv && v->is_constant()) rv = &env.vals.emplace(v, RtValue(*v->constant)).first->second;
    TS_CHECK(rv, n.describe(), ": input '", v->name, "' has no value");
    ctx.inputs.push_back(rv);
  }
  ctx.run_subgraph = [this, &env](const Graph& sg, const std::vector<RtValue>& in) { return run_in(sg, in, &env); };
  s->kernel(ctx);
  for (size_t i = 0; i < n.outputs.size(); ++i)
    if (n.outputs[i]) {
      const RtValue& o = ctx.outputs[i];
      TS_CHECK(!o.is_tensor() || o.tensor.defined(), n.describe(), ": kernel did not produce output ", i);
    }
  return std::move(ctx.outputs);
}

std::vector<RtValue> Interpreter::run_node(const Node& n,
                                           const std::function<const RtValue*(const Value*)>& lookup) const {
  Env env;
  std::vector<const Value*> reads;
  reads_of(n, &reads);
  for (const Value* v : reads)
    if (const RtValue* rv = lookup(v)) env.vals.emplace(v, *rv);
  return exec_node(n, env);
}

std::vector<RtValue> Interpreter::run(const Graph& g, const std::vector<RtValue>& inputs) const {
  return run_in(g, inputs, nullptr);
}

std::vector<RtValue> Interpreter::run_in(const Graph& g, const std::vector<RtValue>& inputs, const Env* outer) const {
  TS_CHECK(inputs.size() == g.inputs.size(), "graph '", g.name, "' expects ", g.inputs.size(), " inputs, got ",
           inputs.size());
  Env env;
  env.parent = outer;
  for (size_t i = 0; i < inputs.size(); ++i) env.vals[g.inputs[i]] = inputs[i];
  for (const Value* c : g.initializers) env.vals.emplace(c, RtValue(*c->constant));

  // Last reader of each value, so that intermediates are freed early.
  std::unordered_map<const Value*, size_t> last_use;
  size_t idx = 0;
  for (const auto& n : g.nodes()) {
    std::vector<const Value*> r;
    reads_of(*n, &r);
    for (const Value* v : r) last_use[v] = idx;
    ++idx;
  }
  std::unordered_set<const Value*> keep(g.outputs.begin(), g.outputs.end());

  idx = 0;
  for (const auto& np : g.nodes()) {
    const Node& n = *np;
    std::vector<RtValue> outs = exec_node(n, env);
    for (size_t i = 0; i < n.outputs.size(); ++i)
      if (n.outputs[i]) env.vals[n.outputs[i]] = outs[i];
    if (on_node) on_node(n, outs);
    // Free values of this scope whose last reader has run.
    for (const Value* v : n.inputs)
      if (v && v->owner == &g && !keep.count(v) && last_use[v] == idx && !v->is_constant()) env.vals.erase(v);
    ++idx;
  }

  std::vector<RtValue> out;
  for (const Value* v : g.outputs) {
    const RtValue* rv = env.find(v);
    if (!rv && v->is_constant()) {
      out.emplace_back(*v->constant);
      continue;
    }
    TS_CHECK(rv, "graph output '", v->name, "' was never computed");
    out.push_back(*rv);
  }
  return out;
}

}  // namespace tessel
