// merge_matmuls: MatMuls of one value by different constant matrices become
// one MatMul by the matrices side by side, whose result is sliced.
//
//   y_i = MatMul(x, W_i) (+ b_i)   for i = 1..n, W_i constant [K, N_i]
//   ->
//   y   = MatMul(x, [W_1 | ... | W_n]) (+ [b_1 | ... | b_n])
//   y_i = Slice(y, offset_i, offset_i + N_i, last axis)
//
// Why: attention's query, key and value projections (BERT, Llama) are three
// GEMMs of the same rows. At BERT batch 16 each is 2048 x 768 x 768, 96
// tiles of 128 x 128 for 132 multiprocessors, so each launch runs smaller,
// less efficient tiles; merged, 2048 x 2304 x 768 fills the machine (the
// shape GPT-2's exporter already writes as one c_attn GEMM), and one launch
// replaces three. The slices are views: fusion takes each into its consumers
// (the Reshape / Transpose into heads), so nothing is copied.
//
// A bias joins when every sibling's only use is an Add of a constant vector
// along the last axis ([N_i] or [1, ..., 1, N_i]). Siblings whose result is
// a graph output stay as they are (the output keeps its name).
#include <cstring>
#include <map>
#include <unordered_map>

#include "tessel/passes/pass_manager.h"

namespace tessel {

namespace {

using Uses = std::unordered_map<const Value*, int>;

bool float_type(DType t) { return t == DType::F32 || t == DType::BF16 || t == DType::F16; }

struct Sibling {
  Node* mm = nullptr;
  Node* add = nullptr;          // the bias Add, when there is one
  const Value* bias = nullptr;  // its constant operand
};

// B of a MatMul that may merge: a constant float [K, N] of x's type, x of
// known rank, the result not a graph output.
bool mergeable(const Graph& g, const Node& n) {
  if (!n.domain.empty() || n.op != "MatMul" || n.outputs.size() != 1 || !n.outputs[0]) return false;
  const Value *x = n.input(0), *w = n.input(1);
  if (!x || !w || !w->is_constant() || !x->type.has_shape() || x->type.shape->empty()) return false;
  const Tensor& t = *w->constant;
  return t.rank() == 2 && float_type(t.dtype()) && t.dtype() == x->type.dtype && n.outputs[0]->type.has_shape() &&
         !g.is_output(n.outputs[0]);
}

// The bias Add that is the only use of mm's result, with its constant
// vector of N elements along the last axis; nullopt when there is none.
std::optional<Sibling> with_bias(const Graph& g, Node* mm, const Uses& uses,
                                 const std::map<const Value*, Node*>& consumer) {
  Sibling s{mm, nullptr, nullptr};
  const Value* y = mm->outputs[0];
  const auto it = consumer.find(y);
  const auto u = uses.find(y);
  if (u == uses.end() || u->second != 1 || it == consumer.end()) return std::nullopt;
  Node* add = it->second;
  if (!add->domain.empty() || add->op != "Add" || add->inputs.size() != 2 || !add->outputs[0] ||
      g.is_output(add->outputs[0]) || !add->outputs[0]->type.has_shape() ||
      *add->outputs[0]->type.shape != *y->type.shape)
    return std::nullopt;
  const Value* b = add->input(0) == y ? add->input(1) : add->input(0);
  if (!b || !b->is_constant() || b->constant->dtype() != y->type.dtype) return std::nullopt;
  const int64_t n = mm->input(1)->constant->dim(1);
  const std::vector<int64_t>& shape = b->constant->shape();
  if (shape.empty() || shape.back() != n || b->constant->numel() != n || shape.size() > y->type.shape->size())
    return std::nullopt;
  s.add = add;
  s.bias = b;
  return s;
}

// [K, N_1 + ... + N_n] from the [K, N_i] matrices, or the biases' elements
// one after another (`rows` = 1).
Tensor side_by_side(const std::vector<const Tensor*>& parts, int64_t rows) {
  int64_t cols = 0;
  for (const Tensor* t : parts) cols += t->numel() / rows;
  Tensor out(parts[0]->dtype(), rows == 1 ? std::vector<int64_t>{cols} : std::vector<int64_t>{rows, cols});
  const size_t es = dtype_storage_size(out.dtype());
  int64_t offset = 0;
  for (const Tensor* t : parts) {
    const int64_t n = t->numel() / rows;
    for (int64_t r = 0; r < rows; ++r)
      std::memcpy(out.mutable_raw() + static_cast<size_t>(r * cols + offset) * es,
                  t->raw() + static_cast<size_t>(r * n) * es, static_cast<size_t>(n) * es);
    offset += n;
  }
  return out;
}

void merge(Graph& g, const std::vector<Sibling>& sibs) {
  Node* first = sibs.front().mm;
  Value* x = first->input(0);
  const bool biased = sibs.front().add != nullptr;
  std::vector<const Tensor*> ws, bs;
  for (const Sibling& s : sibs) {
    ws.push_back(&*s.mm->input(1)->constant);
    if (biased) bs.push_back(&*s.bias->constant);
  }
  const int64_t k = ws[0]->dim(0);
  Tensor w = side_by_side(ws, k);
  const int64_t total = w.dim(1);
  Value* wv = g.add_initializer(g.fresh_name(first->input(1)->name + "_merged"), std::move(w));
  Shape shape = *first->outputs[0]->type.shape;
  shape.back() = Dim(total);
  const Type type = Type::tensor(x->type.dtype, shape);
  Node* mm = g.insert_node_before(first, "MatMul", {x, wv}, 1);
  mm->name = first->name + "_merged";
  mm->outputs[0]->type = type;
  Value* y = mm->outputs[0];
  if (biased) {
    Value* bv = g.add_initializer(g.fresh_name(sibs.front().bias->name + "_merged"), side_by_side(bs, 1));
    Node* add = g.insert_node_before(first, "Add", {y, bv}, 1);
    add->outputs[0]->type = type;
    y = add->outputs[0];
  }
  const int64_t axis = static_cast<int64_t>(shape.size()) - 1;
  Value* axes = g.add_initializer(g.fresh_name(mm->name + "_axis"), Tensor::from_i64({axis}));
  int64_t offset = 0;
  for (const Sibling& s : sibs) {
    const int64_t n = s.mm->input(1)->constant->dim(1);
    Value* starts = g.add_initializer(g.fresh_name(mm->name + "_start"), Tensor::from_i64({offset}));
    Value* ends = g.add_initializer(g.fresh_name(mm->name + "_end"), Tensor::from_i64({offset + n}));
    Node* slice = g.insert_node_before(first, "Slice", {y, starts, ends, axes}, 1);
    Node* last = s.add ? s.add : s.mm;
    slice->outputs[0]->type = last->outputs[0]->type;
    g.replace_all_uses(last->outputs[0], slice->outputs[0]);
    offset += n;
  }
  for (const Sibling& s : sibs) {  // after the inserts, which place nodes before `first`
    if (s.add) g.remove_node(s.add);
    g.remove_node(s.mm);
  }
}

}  // namespace

bool merge_matmuls(Model& m) {
  Graph& g = *m.graph;
  Uses uses;
  count_uses(g, &uses);
  std::map<const Value*, Node*> consumer;  // a consumer of each value (the only one where uses == 1)
  std::map<const Value*, std::vector<Node*>> by_x;
  std::vector<const Value*> order;
  for (const auto& n : g.nodes()) {
    for (const Value* v : n->inputs)
      if (v) consumer[v] = n.get();
    if (!mergeable(g, *n)) continue;
    auto& list = by_x[n->input(0)];
    if (list.empty()) order.push_back(n->input(0));
    list.push_back(n.get());
  }
  bool changed = false;
  for (const Value* x : order) {
    const std::vector<Node*>& mms = by_x[x];
    if (mms.size() < 2) continue;
    std::vector<Sibling> sibs;
    for (Node* mm : mms)
      if (auto s = with_bias(g, mm, uses, consumer)) sibs.push_back(*s);
    if (sibs.size() != mms.size()) {  // not every one has a bias: the MatMuls alone
      sibs.clear();
      for (Node* mm : mms) sibs.push_back(Sibling{mm, nullptr, nullptr});
    }
    merge(g, sibs);
    changed = true;
  }
  if (changed) g.remove_unused_values();
  return changed;
}

}  // namespace tessel
