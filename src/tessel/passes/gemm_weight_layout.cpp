// gemm_weight_layout: stores a constant GEMM weight k-contiguous when its
// rows cannot be read in 16-byte pieces.
//
// A MatMul (or Gemm without transB) whose B is a constant [K, N] matrix reads
// B[k, j] at k * N + j. When N is not a multiple of 8 (GPT-2's tied LM head:
// 768 x 50257), no row of B starts 16-byte aligned, and the CUDA GEMM falls
// back to one 2-byte load per element through registers (the LM head ran at
// 42 TFLOP/s, a third of GPT-2's time at batch 16). Stored transposed, [N, K]
// with K a multiple of 8, the same B is read k-contiguous in 16-byte vectors
// (mma_gemm.h, OperandLoad::VectorK). So: Gemm takes the transposed constant
// with transB = 1; MatMul reads it through a Transpose, which fusion makes a
// view of the GEMM's operand. Runs last in the pipeline (folding would turn
// Transpose(constant) back into the original constant). The CPU GEMM packs
// B either way.
#include <cstring>

#include "tessel/passes/pass_manager.h"

namespace tessel {

namespace {

// The 2-D constant t transposed.
Tensor transposed(const Tensor& t) {
  const int64_t rows = t.dim(0), cols = t.dim(1);
  Tensor out(t.dtype(), {cols, rows});
  const size_t es = dtype_storage_size(t.dtype());
  const uint8_t* src = t.raw();
  uint8_t* dst = out.mutable_raw();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      std::memcpy(dst + (static_cast<size_t>(c * rows + r)) * es, src + (static_cast<size_t>(r * cols + c)) * es, es);
  return out;
}

// B of `n` as a constant [K, N] worth transposing, else nullptr.
const Value* misaligned_weight(const Node& n) {
  if (!n.domain.empty() || (n.op != "MatMul" && n.op != "Gemm")) return nullptr;
  if (n.op == "Gemm" && (n.attr_int("transB", 0) != 0 || !n.has_input(1))) return nullptr;
  const Value* b = n.input(1);
  if (!b || !b->is_constant()) return nullptr;
  const Tensor& t = *b->constant;
  const DType dt = t.dtype();
  if (t.rank() != 2 || (dt != DType::F32 && dt != DType::BF16 && dt != DType::F16)) return nullptr;
  return t.dim(1) % 8 != 0 && t.dim(0) % 8 == 0 ? b : nullptr;
}

}  // namespace

bool relayout_gemm_weights(Model& m) {
  Graph& g = *m.graph;
  bool changed = false;
  std::vector<Node*> nodes;
  for (const auto& n : g.nodes()) nodes.push_back(n.get());
  for (Node* n : nodes) {
    const Value* b = misaligned_weight(*n);
    if (!b) continue;
    Value* bt = g.add_initializer(g.fresh_name(b->name + "_kmajor"), transposed(*b->constant));
    if (n->op == "Gemm") {
      n->inputs[1] = bt;
      n->attrs["transB"] = Attribute::of_int(1);
    } else {
      Node* t = g.insert_node_before(n, "Transpose", {bt}, 1, {{"perm", Attribute::of_ints({1, 0})}});
      t->outputs[0]->type = b->type;
      n->inputs[1] = t->outputs[0];
    }
    changed = true;
  }
  if (changed) g.remove_unused_values();
  return changed;
}

}  // namespace tessel
