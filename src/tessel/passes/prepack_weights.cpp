// prepack_weights (CPU target): stores each constant f32 GEMM weight in the
// packed GEMM's panel layout once, at compile time, instead of packing it on
// every call.
//
// The CPU's packed GEMM (schedule/gemm.h) copies B into NR-wide, k-major
// panels before its micro-kernels run. For a weight that copy is the same
// every call: BERT's 768 x 3072 FFN weight is read and written again for
// each M block, and GPT-2's tied LM head (B = Transpose(wte), 768 x 50257)
// is gathered column by column (180 MB moved for 10 GFLOP). This pass
// rewrites B of a MatMul (or Gemm, either transB) whose B is a 2-D f32
// constant, or a Transpose of one, as
//
//   B = tessel::UnpackPanels(P)   P [ceil(N / 64) * 4, K, 16], zero past N
//
// (padded to whole 64 columns, so that tiles 16, 32 and 64 wide read no
// further than P holds)
// The graph computes the same values (UnpackPanels is the exact inverse
// view); the GEMM lowering recognises the operand and, for register tiles
// whose width is a multiple of 16, its micro-kernels read P in place
// (knob gemm.pack b=0). 16 columns is one AVX-512 vector and two AVX2
// ones: every tile of the search space that takes 16-wide panels reads them
// with whole-vector loads, whatever its NR.
//
// A weight that other nodes read as well (GPT-2's token embedding, gathered
// by the embedding and transposed by the LM head) keeps its plain copy for
// them: the model then holds it twice.
//
// Does not fire when B is not constant (attention's products), not f32
// (--precision bf16 weights keep their packing; their loads convert), has
// fewer than 16 columns or rows (a GEMV-like weight packs in no time), or
// when the node is not a plain 2-D product (B with batch dims).
// Runs last, after gemm_weight_layout: folding would turn UnpackPanels of a
// constant back into the constant.
#include <cstring>
#include <map>
#include <optional>

#include "tessel/passes/pass_manager.h"

namespace tessel {

namespace {

constexpr int64_t kPanel = 16;
constexpr int64_t kPad = 64;  // columns

// The constant B of `n` and whether it is stored transposed ([N, K]).
struct Weight {
  const Tensor* t = nullptr;
  bool transposed = false;
  int64_t k = 0, n = 0;
};

bool f32_matrix(const Value* v) {
  return v && v->is_constant() && v->constant->rank() == 2 && v->constant->dtype() == DType::F32;
}

std::optional<Weight> constant_weight(const Node& n) {
  if (!n.domain.empty() || (n.op != "MatMul" && n.op != "Gemm") || n.inputs.size() < 2) return std::nullopt;
  const Value* b = n.input(1);
  if (!b || !b->type.has_shape() || b->type.shape->size() != 2) return std::nullopt;
  Weight w;
  w.transposed = n.op == "Gemm" && n.attr_int("transB", 0) != 0;
  if (!f32_matrix(b)) {
    // A Transpose of a constant (gemm_weight_layout's k-major weights, a
    // tied LM head): pack from the constant it reads.
    const Node* t = b->producer;
    if (!t || t->op != "Transpose" || !t->domain.empty() || !f32_matrix(t->input(0))) return std::nullopt;
    const std::vector<int64_t> perm = t->attr_ints("perm");
    if (!perm.empty() && perm != std::vector<int64_t>{1, 0}) return std::nullopt;
    b = t->input(0);
    w.transposed = !w.transposed;
  }
  w.t = &*b->constant;
  w.k = w.transposed ? w.t->dim(1) : w.t->dim(0);
  w.n = w.transposed ? w.t->dim(0) : w.t->dim(1);
  if (w.k < kPanel || w.n < kPanel) return std::nullopt;
  return w;
}

// P[p, k, x] = B[k, p * 16 + x], zero past N.
Tensor panels(const Weight& w) {
  const int64_t np = (w.n + kPad - 1) / kPad * (kPad / kPanel);
  Tensor p(DType::F32, {np, w.k, kPanel});
  float* dst = reinterpret_cast<float*>(p.mutable_raw());
  const float* src = reinterpret_cast<const float*>(w.t->raw());
  std::memset(dst, 0, p.nbytes());
  for (int64_t j = 0; j < w.n; ++j)
    for (int64_t k = 0; k < w.k; ++k)
      dst[((j / kPanel) * w.k + k) * kPanel + j % kPanel] = w.transposed ? src[j * w.k + k] : src[k * w.n + j];
  return p;
}

}  // namespace

bool prepack_gemm_weights(Model& m) {
  Graph& g = *m.graph;
  std::vector<Node*> nodes;
  for (const auto& n : g.nodes()) nodes.push_back(n.get());
  // One packed copy per weight, whichever products share it.
  std::map<std::pair<const Tensor*, bool>, Value*> packed;
  bool changed = false;
  for (Node* n : nodes) {
    const std::optional<Weight> w = constant_weight(*n);
    if (!w) continue;
    Value*& p = packed[{w->t, w->transposed}];
    if (!p) p = g.add_initializer(g.fresh_name(n->input(1)->name + "_panels"), panels(*w));
    Node* u = g.insert_node_before(n, "UnpackPanels", {p}, 1, {{"columns", Attribute::of_int(w->n)}});
    u->domain = "tessel";
    u->outputs[0]->type = Type::tensor(DType::F32, {Dim(w->k), Dim(w->n)});
    n->inputs[1] = u->outputs[0];
    if (n->op == "Gemm") n->attrs["transB"] = Attribute::of_int(0);
    changed = true;
  }
  // The plain weights (and a Transpose that only fed the products) go.
  if (changed) eliminate_dead_code(m);
  return changed;
}

}  // namespace tessel
