// Constant folding.
//
// Rewrites: a node whose present inputs are all constants into constants
// computed by the op's reference kernel (Constant nodes become initializers
// this way); and a node whose outputs' symbolic values are fully known
// integers (Shape(x) of a static x, Gather of such a shape, ...) into
// constants of those values, even when its inputs are not constant. The
// output values keep their identity and name; the node is removed.
//
// Does not fire for: non-deterministic ops (Random*, Bernoulli,
// Multinomial), nodes with subgraphs, ops without a kernel, non-tensor
// outputs, outputs whose type is not static or has more than
// PassOptions::fold_limit_elements elements (checked before running the
// kernel, so a huge ConstantOfShape is never materialised), and kernels that
// fail (the error is left for run time, where the node may never execute).
//
// Assumes: shape inference has run (output types are what makes the size
// check possible). Runs after shape inference; dce afterwards removes what
// the folded nodes no longer need.
#include <vector>

#include "tessel/passes/infer_util.h"
#include "tessel/passes/pass_manager.h"
#include "tessel/support/error.h"

namespace tessel {

namespace {

class Folder {
 public:
  Folder(const OpRegistry& reg, int64_t limit) : reg_(reg), limit_(limit) {}

  bool fold_graph(Graph& g) {
    bool changed = false;
    std::vector<Node*> order;
    for (auto& n : g.nodes()) order.push_back(n.get());
    for (Node* n : order) {
      const OpSchema* s = reg_.find(n->domain, n->op);
      if (!s) continue;
      // A node with subgraphs is never folded itself, but inside its
      // subgraphs nodes may be.
      if (has_subgraphs(*n)) {
        for (auto& [k, a] : n->attrs) {
          if (a.kind == Attribute::Kind::Graph && a.g) changed |= fold_graph(*a.g);
          for (auto& sg : a.graphs)
            if (sg) changed |= fold_graph(*sg);
        }
        record_syms(*n, *s);
        continue;
      }
      if (try_fold(g, n, *s)) {
        changed = true;
        continue;
      }
      record_syms(*n, *s);
    }
    return changed;
  }

 private:
  const OpRegistry& reg_;
  int64_t limit_;
  SymTable syms_;

  // Output i's type is a static tensor no larger than the limit.
  bool small_static(const Value* v) const {
    if (!v->type.is_tensor() || v->type.dtype == DType::Undefined || !v->type.shape || !is_static(*v->type.shape))
      return false;
    int64_t n = 1;
    for (const Dim& d : *v->type.shape) {
      if (d.value() < 0) return false;
      if (d.value() > 0 && n > limit_ / d.value()) return false;
      n *= d.value();
    }
    return n <= limit_;
  }

  void record_syms(const Node& n, const OpSchema& s) {
    if (!s.infer) return;
    InferContext ctx(n);
    fill_infer_inputs(ctx, syms_);
    ctx.infer_subgraph = [](Graph& sg, const std::vector<Type>&) {
      std::vector<Type> out;
      for (const Value* v : sg.outputs) out.push_back(v ? v->type : Type{});
      return out;
    };
    try {
      s.infer(ctx);
    } catch (const Error&) {
      return;  // shape inference reports these; folding just learns nothing
    }
    for (size_t i = 0; i < n.outputs.size() && i < ctx.out_syms.size(); ++i)
      if (n.outputs[i] && ctx.out_syms[i]) syms_[n.outputs[i]] = *ctx.out_syms[i];
  }

  // The tensor a fully constant symbolic value stands for, if any.
  static bool sym_to_tensor(const Value* v, const SymValue& sv, Tensor* out) {
    const Type& t = v->type;
    if (!t.is_tensor() || !is_int(t.dtype) || !t.shape || t.shape->size() > 1) return false;
    for (const Dim& d : sv)
      if (!d.is_const()) return false;
    std::vector<int64_t> shape;
    if (t.shape->size() == 1) {
      if (!(*t.shape)[0].is_const() || (*t.shape)[0].value() != static_cast<int64_t>(sv.size())) return false;
      shape = {static_cast<int64_t>(sv.size())};
    } else if (sv.size() != 1) {
      return false;
    }
    Tensor r(t.dtype, shape);
    for (size_t i = 0; i < sv.size(); ++i) r.set_i64(static_cast<int64_t>(i), sv[i].value());
    *out = std::move(r);
    return true;
  }

  static void make_constants(Graph& g, Node* n, std::vector<Tensor>& values) {
    std::vector<Value*> outs = n->outputs;
    g.remove_node(n);
    for (size_t i = 0; i < outs.size(); ++i) {
      Value* v = outs[i];
      if (!v) continue;
      v->type = Type::tensor(values[i].dtype(), shape_of(values[i].shape()));
      v->constant = std::move(values[i]);
      g.initializers.push_back(v);
    }
  }

  bool try_fold(Graph& g, Node* n, const OpSchema& s) {
    if (is_nondeterministic_op(*n) || n->outputs.empty()) return false;
    bool any_output = false;
    for (const Value* v : n->outputs) {
      if (!v) continue;
      any_output = true;
      if (!small_static(v)) return false;
    }
    if (!any_output) return false;

    // Outputs known symbolically as integers.
    {
      InferContext ctx(*n);
      fill_infer_inputs(ctx, syms_);
      bool ok = s.infer != nullptr;
      if (ok) {
        try {
          s.infer(ctx);
        } catch (const Error&) {
          ok = false;
        }
      }
      std::vector<Tensor> values(n->outputs.size());
      for (size_t i = 0; ok && i < n->outputs.size(); ++i) {
        const Value* v = n->outputs[i];
        if (!v) continue;
        ok = i < ctx.out_syms.size() && ctx.out_syms[i] && sym_to_tensor(v, *ctx.out_syms[i], &values[i]);
      }
      if (ok) {
        make_constants(g, n, values);
        return true;
      }
    }

    // All inputs constant: run the reference kernel.
    if (!s.kernel) return false;
    for (const Value* v : n->inputs)
      if (v && !v->is_constant()) return false;
    std::vector<RtValue> in(n->inputs.size());
    for (size_t i = 0; i < n->inputs.size(); ++i)
      if (n->inputs[i]) in[i].tensor = *n->inputs[i]->constant;
    KernelContext ctx(*n);
    for (size_t i = 0; i < n->inputs.size(); ++i) ctx.inputs.push_back(n->inputs[i] ? &in[i] : nullptr);
    ctx.run_subgraph = [](const Graph&, const std::vector<RtValue>&) -> std::vector<RtValue> {
      fail("constant folding does not run subgraphs");
    };
    try {
      s.kernel(ctx);
    } catch (const Error&) {
      return false;
    }
    std::vector<Tensor> values(n->outputs.size());
    for (size_t i = 0; i < n->outputs.size(); ++i) {
      const Value* v = n->outputs[i];
      if (!v) continue;
      const RtValue& r = ctx.outputs[i];
      if (!r.is_tensor() || !r.tensor.defined()) return false;
      // The kernel's result must agree with the declared type; if not, leave
      // the node for the verifier and run time to complain about.
      if (r.tensor.dtype() != v->type.dtype || shape_of(r.tensor.shape()) != *v->type.shape) return false;
      values[i] = r.tensor;
    }
    make_constants(g, n, values);
    return true;
  }
};

}  // namespace

bool fold_constants(Model& m, const PassOptions& o) {
  return Folder(OpRegistry::global(), o.fold_limit_elements).fold_graph(*m.graph);
}

}  // namespace tessel
