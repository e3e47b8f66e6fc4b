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
// A group-1 Conv whose GEMM takes the output positions as rows and the
// output channels as columns (schedule/gemm.h conv_rows_are_positions; the
// transposed orientation of lower/conv_gemm.cpp) reads its weight W [OC, C,
// KH, KW] as B[k, oc] = W[oc, k]: it is packed the same way, as
//
//   W = tessel::UnpackPanels(P) with row_dims = [C, KH, KW]
//
// A batched MatMul by a constant [batch, K, N] (batch up to 64: a Winograd
// convolution's 36 transformed weights) is packed per matrix, the panels of
// each after the previous one's (UnpackPanels' batch attribute), and read in
// place the same way.
//
// Does not fire when B is not constant (attention's products), not f32
// (--precision bf16 weights keep their packing; their loads convert), has
// fewer than 16 columns or rows (a GEMV-like weight packs in no time), or
// when B has batch dims other than one batch axis over an A of rank 3.
// Runs last, after gemm_weight_layout: folding would turn UnpackPanels of a
// constant back into the constant.
#include <cstring>
#include <map>
#include <optional>

#include "tessel/passes/pass_manager.h"
#include "tessel/schedule/gemm.h"

namespace tessel {

namespace {

constexpr int64_t kPanel = 16;
constexpr int64_t kPad = 64;  // columns

// The constant B of `n` and whether it is stored transposed ([N, K]).
struct Weight {
  const Tensor* t = nullptr;
  bool transposed = false;
  int64_t k = 0, n = 0;
  int64_t batch = 1;  // a batch of matrices [batch, K, N] (never transposed)
};

bool f32_matrix(const Value* v) {
  return v && v->is_constant() && v->constant->rank() == 2 && v->constant->dtype() == DType::F32;
}

// The plain matrix B of a MatMul or Gemm, from its constant `b`.
std::optional<Weight> matrix(Weight w, const Value* b) {
  w.t = &*b->constant;
  w.k = w.transposed ? w.t->dim(1) : w.t->dim(0);
  w.n = w.transposed ? w.t->dim(0) : w.t->dim(1);
  if (w.k < kPanel || w.n < kPanel) return std::nullopt;
  return w;
}

// A MatMul by a constant batch of matrices [batch, K, N] (a Winograd
// convolution's transformed weight, passes/winograd_conv.cpp), whose
// product is batched as well (A of rank 3).
std::optional<Weight> batched_weight(const Node& n) {
  const Value *a = n.input(0), *b = n.input(1);
  if (n.op != "MatMul" || !b->is_constant() || b->constant->rank() != 3 || b->constant->dtype() != DType::F32 ||
      !a || !a->type.has_shape() || a->type.shape->size() != 3)
    return std::nullopt;
  Weight w;
  w.t = &*b->constant;
  w.batch = w.t->dim(0);
  w.k = w.t->dim(1);
  w.n = w.t->dim(2);
  if (w.batch > 64 || w.k < kPanel || w.n < kPanel) return std::nullopt;
  return w;
}

std::optional<Weight> constant_weight(const Node& n) {
  if (!n.domain.empty() || (n.op != "MatMul" && n.op != "Gemm") || n.inputs.size() < 2) return std::nullopt;
  if (std::optional<Weight> w = batched_weight(n)) return w;
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
  return matrix(w, b);
}

std::optional<Weight> conv_weight(const Node& n) {
  if (!n.domain.empty() || n.op != "Conv" || n.attr_int("group", 1) != 1 || n.inputs.size() < 2) return std::nullopt;
  const Value* w = n.input(1);
  if (!w || !w->is_constant() || w->constant->dtype() != DType::F32 || w->constant->rank() < 3) return std::nullopt;
  if (!conv_rows_are_positions(n)) return std::nullopt;
  Weight r;
  r.t = &*w->constant;
  r.transposed = true;
  r.n = r.t->dim(0);
  r.k = r.t->numel() / std::max<int64_t>(r.n, 1);
  if (r.k < kPanel || r.n < kPanel) return std::nullopt;
  return r;
}

// P[p, k, x] = B[k, p * 16 + x], zero past N; a batch's matrices one after
// the other (P[b * np + p, k, x] = B[b, k, p * 16 + x]).
Tensor panels(const Weight& w) {
  const int64_t np = (w.n + kPad - 1) / kPad * (kPad / kPanel);
  Tensor p(DType::F32, {w.batch * np, w.k, kPanel});
  float* dst = reinterpret_cast<float*>(p.mutable_raw());
  const float* src = reinterpret_cast<const float*>(w.t->raw());
  std::memset(dst, 0, p.nbytes());
  for (int64_t b = 0; b < w.batch; ++b)
    for (int64_t j = 0; j < w.n; ++j)
      for (int64_t k = 0; k < w.k; ++k)
        dst[((b * np + j / kPanel) * w.k + k) * kPanel + j % kPanel] =
            w.transposed ? src[j * w.k + k] : src[(b * w.k + k) * w.n + j];
  return p;
}

// The digit order of a conv weight's k in its panels: the kernel offsets,
// then the channel (lower/conv_gemm.cpp reduction_order).
std::vector<int64_t> offsets_first(size_t rank) {
  std::vector<int64_t> order;
  for (size_t d = 1; d < rank; ++d) order.push_back(static_cast<int64_t>(d));
  order.push_back(0);
  return order;
}

// A conv weight W [OC, C, k...] as panels whose k runs over (k..., C):
// the panels of W permuted to [OC, k..., C].
Tensor conv_panels(const Weight& w) {
  const std::vector<int64_t>& shape = w.t->shape();
  const int64_t oc = shape[0], c = shape[1], taps = w.k / c;
  Tensor permuted(DType::F32, {oc, w.k});
  const float* src = reinterpret_cast<const float*>(w.t->raw());
  float* dst = reinterpret_cast<float*>(permuted.mutable_raw());
  for (int64_t o = 0; o < oc; ++o)
    for (int64_t ci = 0; ci < c; ++ci)
      for (int64_t t = 0; t < taps; ++t) dst[(o * taps + t) * c + ci] = src[(o * c + ci) * taps + t];
  Weight p = w;
  p.t = &permuted;
  return panels(p);
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
    const bool conv = n->op == "Conv";
    const std::optional<Weight> w = conv ? conv_weight(*n) : constant_weight(*n);
    if (!w) continue;
    Value*& p = packed[{w->t, w->transposed}];
    if (!p) p = g.add_initializer(g.fresh_name(n->input(1)->name + "_panels"), conv ? conv_panels(*w) : panels(*w));
    std::map<std::string, Attribute> attrs{{"columns", Attribute::of_int(w->n)}};
    Shape out{Dim(w->k), Dim(w->n)};
    if (w->batch > 1) {
      attrs["batch"] = Attribute::of_int(w->batch);
      out.insert(out.begin(), Dim(w->batch));
    }
    if (conv) {
      std::vector<int64_t> rows(w->t->shape().begin() + 1, w->t->shape().end());
      attrs["row_dims"] = Attribute::of_ints(rows);
      attrs["row_order"] = Attribute::of_ints(offsets_first(rows.size()));
      out = {Dim(w->n)};
      for (int64_t d : rows) out.push_back(Dim(d));
    }
    Node* u = g.insert_node_before(n, "UnpackPanels", {p}, 1, attrs);
    u->domain = "tessel";
    u->outputs[0]->type = Type::tensor(DType::F32, out);
    n->inputs[1] = u->outputs[0];
    if (n->op == "Gemm") n->attrs["transB"] = Attribute::of_int(0);
    changed = true;
  }
  // The plain weights (and a Transpose that only fed the products) go.
  if (changed) eliminate_dead_code(m);
  return changed;
}

}  // namespace tessel
