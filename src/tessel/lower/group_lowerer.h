// Internals of the lowering engine shared by its files (lower_group.cpp:
// generic loop nests and reductions; contraction.cpp: the GEMM path). Not a
// public interface.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "tessel/loop/simplify.h"
#include "tessel/lower/dim_expr.h"
#include "tessel/lower/lower_group.h"
#include "tessel/ops/lowering.h"

namespace tessel {
struct GemmOperands;
}

namespace tessel::lowering {
using loop::Expr;
using loop::Stmt;
using Idx = std::vector<Expr>;

// Rank-1 outputs are cut into chunks of this many elements so that the
// parallel loop has work to share.
constexpr int64_t kChunk = 4096;

class GroupLowerer;

// The LowerContext one op's lowering sees.
class NodeContext final : public LowerContext {
 public:
  NodeContext(const Node& n, GroupLowerer& gl) : LowerContext(n), gl_(gl) {}
  std::vector<Expr> in_shape(size_t i) override;
  std::vector<Expr> out_shape(size_t i) override;
  Expr input(size_t i, const Idx& index) override;
  const Tensor* input_const(size_t i) override {
    const Value* v = node.input(i);
    return v && v->constant ? &*v->constant : nullptr;
  }
  Expr reduce(ReduceOp op, Expr init, const Idx& extents, const std::function<Expr(const Idx&)>& body) override;
  void check(Expr cond, const std::string& message) override;

 private:
  GroupLowerer& gl_;
};

class GroupLowerer {
 public:
  GroupLowerer(const FusionGroup& g, const OpRegistry& reg, const NestSchedule& s)
      : group_(g), reg_(reg), sched_(s), members_(g.nodes.begin(), g.nodes.end()) {}

  LoweredGroup run();
  // The GEMM path (contraction.cpp): nullopt unless the group is one 2-D
  // (or batched) contraction whose other members form its epilogue.
  std::optional<LoweredGroup> try_contraction();
  // The attention path (attention_stmt.cpp, NestSchedule::gpu_attention):
  // nullopt unless the group's root is an Attention node the loop IR
  // attention statement takes.
  std::optional<LoweredGroup> try_attention();
  const Node* computing_producer(const Node& attention) const;

  Idx shape_of(const Value* v) {
    if (!v->type.has_shape()) throw LoweringUnsupported(str_cat("%", v->name, " has an unknown rank"));
    return shape_to_exprs(*v->type.shape, &syms_);
  }
  Expr value_at(const Value* v, const Idx& index);
  Expr reduce(ReduceOp op, Expr init, const Idx& extents, const std::function<Expr(const Idx&)>& body);
  void check(Expr cond, const std::string& message) {
    levels_[level_of(cond, levels_.size())].stmts.push_back(loop::assert_that(std::move(cond), message));
  }

 private:
  // Statements and accumulators that live at one loop depth.
  struct Level {
    std::vector<Stmt> stmts;
    std::vector<loop::BufferRef> allocs;
  };

  loop::BufferRef param_for(const Value* v);
  Expr inline_member(const Value* v, const Idx& index);
  // Deepest level (< below) of a variable or accumulator that `e` mentions.
  size_t level_of(const Expr& e, size_t below) const;
  Stmt close_level(size_t depth, std::vector<Stmt> tail);
  Stmt lane_reduction(ReduceOp op, const loop::BufferRef& part, const std::string& k, const Expr& extent,
                      const Expr& value);
  Stmt combine_lanes(ReduceOp op, const loop::BufferRef& acc, const loop::BufferRef& part);
  Stmt inner_loop(const std::string& var, const Expr& min, const Expr& extent, const Stmt& body, bool vectorize);
  LoweredGroup finish(Stmt body, const loop::BufferRef& out_buf, std::optional<Dim> parallel_extent);
  // reduce() while the GEMM path replaces contraction `gemm_.node`.
  Expr contraction_reduce(ReduceOp op, const Expr& init, const Idx& extents,
                          const std::function<Expr(const Idx&)>& body);
  std::optional<LoweredGroup> lower_contraction(const Node& c);
  // One attempt: the root's last `column_dims` dims are the GEMM's columns.
  std::optional<LoweredGroup> lower_contraction_with(const Node& c, size_t column_dims);
  // Records the product a * b the probe found inside the contraction's sum
  // (both reduce functions above); throws NotGemm when the root reads the
  // contraction again at another place.
  void capture_product(const Expr& a, const Expr& b);
  // Convolutions (conv_gemm.cpp): group 1 as an implicit GEMM per image.
  // conv_reduce is contraction_reduce for them: it captures the sum over
  // (channels, kernel offsets) and the padding condition of its body.
  std::optional<LoweredGroup> lower_conv(const Node& c);
  // Lowers the root at `index` capturing conv c's tap; false when it has none.
  bool probe_conv(const Node& c, const Value* out, const Idx& index);
  // Depthwise (conv_depthwise.cpp): a direct kernel vectorized over ow.
  std::optional<LoweredGroup> lower_depthwise(const Node& c);
  Expr conv_reduce(ReduceOp op, const Expr& init, const Idx& extents, const std::function<Expr(const Idx&)>& body);
  std::string fresh(const char* prefix) { return str_cat(prefix, counter_++); }

  const FusionGroup& group_;
  const OpRegistry& reg_;
  NestSchedule sched_;
  std::set<const Node*> members_;
  std::vector<Level> levels_;
  std::map<std::string, size_t> var_level_;
  std::map<const loop::Buffer*, size_t> acc_level_;
  std::map<std::string, Expr> memo_;  // reductions, by node, output and index text
  std::map<const Value*, loop::BufferRef> param_of_;
  std::vector<const Value*> param_values_;
  std::vector<loop::BufferRef> params_;
  std::set<std::string> syms_;
  int counter_ = 0;
  size_t output_levels_ = 0;        // levels of the output loop nest
  const Node* current_ = nullptr;   // the node being lowered
  // The GEMM path: the contraction's reduction is captured (probing: its
  // body must be a(i,k) * b(k,j)) or replaced by the finished dot product.
  struct GemmCapture {
    const Node* node = nullptr;
    bool probing = false;
    Expr a, b, k, acc;
  } gemm_;
  // The convolution's reduction variables (0 for extents of 1), their
  // extents and the condition under which a tap reads the input.
  struct ConvCapture {
    bool active = false;
    Idx ks, extents;
    Expr inside;
  } conv_;
};

// Thrown inside the GEMM path when the group does not fit it.
struct NotGemm {};

// Output types of the GEMM path: f32 for the packed CPU GEMM; f32, f16 and
// bf16 for a Contract statement (`contract`), which sums in f32 either way.
bool gemm_output_type(DType t);
// A float Conv, which lower_conv may take.
bool conv_candidate(const Node& n);
// When B (at reduction index k and `column`) reads a prepacked weight's
// panels (tessel::UnpackPanels: a Param [P, K, W] at [column / W, k,
// column % W]), sets ops' b_panels, panel_width and panel_columns, so that
// the GEMM can read the panels in place. A batch of `batch` products (index
// batch_var) reads the panels of product b from b * P / batch on
// (UnpackPanels' batch attribute).
void find_b_panels(const Expr& b, const Expr& k, const Expr& column, const loop::Bounds& bounds, GemmOperands* ops,
                   int64_t batch = 1, const std::string& batch_var = "");
// The GEMM as one Contract statement (NestSchedule::gpu_gemm); its
// variables are named prefix + "_i", "_j", "_k", "_acc" (and "_b" without a
// batch variable of the operands).
Stmt contract_statement(const GemmOperands& ops, const std::string& prefix);

Expr combine(ReduceOp op, const Expr& acc, const Expr& v);
Stmt wrap_allocs(const std::vector<loop::BufferRef>& allocs, Stmt body);
loop::BufferRef make_buffer(const std::string& name, DType t, Idx shape, loop::BufferScope scope);

}  // namespace tessel::lowering
