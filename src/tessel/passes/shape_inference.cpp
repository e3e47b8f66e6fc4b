// Shape inference with symbols.
//
// Rewrites: the type of every node output (and of subgraph inputs, as the
// control-flow ops' inference supplies them), by walking each graph in node
// order and calling the op's infer with the input types, constant values and
// symbolic values (Shape(x) = [batch,3,h,w], kept in a side table while the
// pass runs, filled from InferContext::out_syms).
//
// The inferred type is merged with the type the model declared (ONNX
// value_info and graph outputs):
//   - element types that differ are an error;
//   - where the model declared a symbol that is not one of the main graph's
//     input symbols (exporter names such as `MatMuloutput_dim_0`, `unk__3`)
//     and inference found an expression or a constant, the symbol is bound to
//     it and substituted in every type of the model, so that in the end only
//     input symbols remain; likewise a fresh symbol of an op's inference
//     (`unk__x_0`) is bound to the declared dim;
//   - where inference could not say (unknown type, rank or dtype), the
//     declared type stays; where the model declared a constant and inference
//     gives a symbolic expression, the constant stays.
// Rounds repeat (at most 4) while types change, because a binding found late
// can sharpen earlier nodes.
//
// Assumes: nodes are in topological order (the verifier checks it). Ops
// without a registered infer keep their declared output types. Runs first in
// the pipeline and again after the rewriting passes.
#include <unordered_map>

#include "tessel/ir/printer.h"
#include "tessel/passes/infer_util.h"
#include "tessel/passes/pass_manager.h"
#include "tessel/passes/symbols.h"
#include "tessel/support/error.h"

namespace tessel {

namespace {

bool fully_unknown(const Type& t) { return t.kind == Type::Kind::Tensor && t.dtype == DType::Undefined && !t.shape; }

class ShapeInference {
 public:
  ShapeInference(Model& m, const OpRegistry& reg, DimSubst* subst) : m_(m), reg_(reg), subst_(*subst) {
    for (const Value* v : m.graph->inputs) collect_type_symbols(v->type, &input_syms_);
  }

  void run() { infer_graph(*m_.graph); }

 private:
  Model& m_;
  const OpRegistry& reg_;
  DimSubst& subst_;
  std::set<std::string> input_syms_;
  SymTable syms_;

  Dim sub(const Dim& d) const { return substitute_dim(d, subst_); }

  static bool mentions(const Dim& d, const std::string& s) {
    std::set<std::string> syms;
    d.collect_symbols(&syms);
    return syms.count(s) != 0;
  }

  // Records s := e and keeps the substitution idempotent (no bound symbol
  // appears on a right-hand side).
  bool bind(const std::string& s, Dim e) {
    e = sub(e);
    if (mentions(e, s)) return false;
    DimSubst one{{s, e}};
    for (auto& [k, v] : subst_) v = substitute_dim(v, one);
    subst_[s] = e;
    return true;
  }

  bool is_free_symbol(const Dim& d, std::string* name) const {
    return is_bare_symbol(d, name) && !input_syms_.count(*name);
  }

  Dim unify(const Dim& declared, const Dim& inferred, const std::string& what) {
    const Dim d = sub(declared), i = sub(inferred);
    if (d == i) return d;
    std::string s;
    if (is_free_symbol(i, &s) && !mentions(d, s) && bind(s, d)) return d;
    if (is_free_symbol(d, &s) && !mentions(i, s) && bind(s, i)) return i;
    if (d.is_const() && i.is_const())
      fail(what, " is declared with dim ", d.str(), " but inference gives ", i.str());
    if (d.is_const()) return d;
    return i;
  }

  Type merge(const Type& declared_in, const Type& inferred_in, const std::string& what) {
    const Type declared = substitute_type(declared_in, subst_);
    const Type inferred = substitute_type(inferred_in, subst_);
    if (fully_unknown(inferred)) return declared;
    if (fully_unknown(declared)) return inferred;
    TS_CHECK(declared.kind == inferred.kind, what, " is declared as ", print_type(declared), " but inference gives ",
             print_type(inferred));
    if (declared.kind != Type::Kind::Tensor) {
      if (!inferred.elem) return declared;
      if (!declared.elem) return inferred;
      Type out = declared;
      out.elem = std::make_shared<Type>(merge(*declared.elem, *inferred.elem, what));
      return out;
    }
    Type out = declared;
    if (declared.dtype == DType::Undefined) {
      out.dtype = inferred.dtype;
    } else {
      TS_CHECK(inferred.dtype == DType::Undefined || inferred.dtype == declared.dtype, what, " is declared as ",
               print_type(declared), " but inference gives element type ", dtype_name(inferred.dtype));
    }
    if (!inferred.shape) return out;
    if (!declared.shape) {
      out.shape = inferred.shape;
      return out;
    }
    TS_CHECK(declared.shape->size() == inferred.shape->size(), what, " is declared as ", print_type(declared),
             " but inference gives ", print_type(inferred));
    for (size_t k = 0; k < declared.shape->size(); ++k)
      (*out.shape)[k] = unify((*declared.shape)[k], (*inferred.shape)[k], what);
    // Bindings made by later dims may apply to earlier ones.
    return substitute_type(out, subst_);
  }

  std::vector<Type> infer_subgraph(Graph& sg, const std::vector<Type>& in) {
    for (size_t i = 0; i < in.size() && i < sg.inputs.size(); ++i)
      if (!fully_unknown(in[i])) sg.inputs[i]->type = substitute_type(in[i], subst_);
    infer_graph(sg);
    std::vector<Type> out;
    for (const Value* v : sg.outputs) out.push_back(v ? substitute_type(v->type, subst_) : Type{});
    return out;
  }

  void infer_graph(Graph& g) {
    for (auto& np : g.nodes()) {
      Node& n = *np;
      for (Value* v : n.inputs)
        if (v) v->type = substitute_type(v->type, subst_);
      const OpSchema* s = reg_.find(n.domain, n.op);
      if (!s || !s->infer) continue;
      InferContext ctx(n);
      fill_infer_inputs(ctx, syms_);
      std::vector<SymValue> subbed(n.inputs.size());
      for (size_t i = 0; i < ctx.in_syms.size(); ++i)
        if (ctx.in_syms[i]) {
          for (const Dim& d : *ctx.in_syms[i]) subbed[i].push_back(sub(d));
          ctx.in_syms[i] = &subbed[i];
        }
      ctx.infer_subgraph = [this](Graph& sg, const std::vector<Type>& in) { return infer_subgraph(sg, in); };
      try {
        s->infer(ctx);
      } catch (const Error& e) {
        fail("shape inference: ", e.what());
      }
      for (size_t i = 0; i < n.outputs.size(); ++i) {
        Value* v = n.outputs[i];
        if (!v) continue;
        if (i < ctx.out_types.size())
          v->type = merge(v->type, ctx.out_types[i],
                          str_cat("shape inference: ", n.describe(), ": output ", print_value_name(v->name)));
        if (i < ctx.out_syms.size() && ctx.out_syms[i]) {
          SymValue sv;
          for (const Dim& d : *ctx.out_syms[i]) sv.push_back(sub(d));
          syms_[v] = std::move(sv);
        }
      }
    }
    for (Value* v : g.outputs)
      if (v) v->type = substitute_type(v->type, subst_);
  }
};

std::unordered_map<const Value*, Type> snapshot(Model& m) {
  std::unordered_map<const Value*, Type> s;
  for_each_graph(*m.graph, [&](Graph& g) {
    for (const auto& v : g.values()) s[v.get()] = v->type;
  });
  return s;
}

}  // namespace

bool infer_shapes(Model& m, const PassOptions& o) {
  (void)o;
  const auto before = snapshot(m);
  DimSubst subst;
  for (int round = 0; round < 4; ++round) {
    const auto start = snapshot(m);
    ShapeInference(m, OpRegistry::global(), &subst).run();
    substitute_model_types(m, subst);
    if (snapshot(m) == start) break;
  }
  return snapshot(m) != before;
}

}  // namespace tessel
