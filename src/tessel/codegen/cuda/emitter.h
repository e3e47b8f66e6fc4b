// Internals of the CUDA C++ emitter (cuda_source.h); not a public interface.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "tessel/codegen/cuda/cuda_source.h"
#include "tessel/codegen/cuda/mma_gemm.h"
#include "tessel/loop/ir.h"
#include "tessel/loop/simplify.h"

namespace tessel::cuda::detail {

const char* prelude();

// C spellings of loop IR types: the type a value has in a register (f16 and
// bf16 are floats there) and the element type of a buffer in memory.
const char* register_type(DType t);
const char* storage_type(DType t);
// A C identifier for a loop IR name: alphanumerics kept, '_' doubled, other
// characters as _xHH, so distinct names stay distinct.
std::string mangle(const std::string& name);
inline std::string var_name(const std::string& n) { return "v_" + mangle(n); }
inline std::string buffer_name(const std::string& n) { return "b_" + mangle(n); }

// Expressions as C expressions (cuda_expr.cpp). Loads flatten through the
// strides the statement emitter registers per buffer.
//
// Index arithmetic is i64 in loop IR, but 64-bit division on the GPU is a
// software routine of dozens of instructions, and an im2col or pooling
// kernel does several per element: such kernels were issue-bound at a tenth
// of the memory bandwidth. So the emitter tracks the bounds of the i64
// variables in scope (loops, GPU axes, lets; loop::const_bounds) and writes
// an i64 expression whose every intermediate value provably fits in 32 bits
// in `int`, where the values are the same (no step can wrap) and division
// by a constant is a multiply-high; a non-negative dividend divides as
// unsigned, which needs no floor correction.
class ExprEmitter {
 public:
  // Binds `var` to `range` (unknown: nullopt) until destroyed; the previous
  // binding of the name comes back then.
  class Scope {
   public:
    Scope(ExprEmitter& ex, const std::string& var, std::optional<loop::Interval> range);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    ExprEmitter& ex_;
    std::string var_;
    std::optional<loop::Interval> saved_;
  };
  // Bounds of an i64 expression under the variables in scope, if known.
  std::optional<loop::Interval> bounds(const loop::Expr& e) const;
  // Forgets every bound (for code that declares its own variables, such as
  // the GEMM emitter's epilogue) and returns them, to be put back after.
  loop::Bounds take_bounds() { return std::exchange(bounds_, {}); }
  void restore_bounds(loop::Bounds b) { bounds_ = std::move(b); }

  // Row-major strides of a buffer, as C expressions (innermost "1").
  void add_buffer(const loop::Buffer* b, std::vector<std::string> strides) { strides_[b] = std::move(strides); }
  void remove_buffer(const loop::Buffer* b) {
    strides_.erase(b);
    lane_buffers_.erase(b);
  }
  // A lane-distributed buffer (cuda_source.cpp: a row cache in registers),
  // indexed only by the variable of unrolled gpu.lanes loops: each access is
  // element `lane_slot` (the loop's iteration counter) of the thread's array.
  void add_lane_buffer(const loop::Buffer* b) { lane_buffers_.insert(b); }
  std::string set_lane_slot(std::string slot) { return std::exchange(lane_slot_, std::move(slot)); }
  std::string emit(const loop::Expr& e);
  std::string flat_index(const loop::Buffer& b, const std::vector<loop::Expr>& indices);
  // The register value `v` of type t converted for storing into a buffer of t.
  static std::string to_storage(DType t, const std::string& v);

 private:
  std::string immediate(const loop::ExprNode& n);
  std::string unary(const loop::ExprNode& n);
  std::string binary(const loop::ExprNode& n);
  std::string cast(DType to, const loop::Expr& a);
  std::string bitcast(DType to, const loop::Expr& a);
  std::string load(const loop::ExprNode& n);
  std::string call(const loop::ExprNode& n);
  bool fits_i32(const loop::Expr& e) const;
  std::string emit_i32(const loop::Expr& e);
  std::string flat_index_i32(const std::vector<std::string>& strides, const std::vector<loop::Expr>& indices);
  std::map<const loop::Buffer*, std::vector<std::string>> strides_;
  std::set<const loop::Buffer*> lane_buffers_;
  std::string lane_slot_;
  loop::Bounds bounds_;
};

// A store in a vectorized loop `for v in [0, V)` that the emitter writes as
// one store of `bytes` (4, 8 or 16) after the loop (vector_store.cpp): every
// iteration runs it once, nothing in the loop reads its buffer, and its flat
// offset maps v = 0..V-1 to V consecutive elements from a multiple of V
// (loop::contiguous_runs), so the wide store is aligned and writes the same
// elements. `first` is that offset at v = 0, over variables outside the loop.
struct VectorStore {
  const loop::StmtNode* store = nullptr;
  loop::Expr first;
  int bytes = 0;
};
std::vector<VectorStore> vector_stores(const loop::StmtNode& loop);

// What the tensor-core GEMM emitter (mma_kernel.cpp) needs from the kernel
// writer: lines at the current indentation, the statement emitter (for the
// epilogue) and the expression emitter.
class CodeSink {
 public:
  virtual ~CodeSink() = default;
  virtual void line(const std::string& text) = 0;
  virtual void indent(int delta) = 0;
  virtual void stmt(const loop::Stmt& s) = 0;
  virtual ExprEmitter& expr() = 0;
  // The index of `b` among the kernel's parameters (a tensor map's buffer).
  virtual int param_index(const loop::Buffer& b) const = 0;
};

// The helpers of GEMM kernels (mma.sync wrappers, tf32 splitting), emitted
// once after the prelude when a kernel holds a Contract statement.
const char* mma_prelude();
// The wgmma helpers (MmaPlan::wgmma), emitted after mma_prelude() when a
// kernel uses them: only an sm_90a cubin can hold them.
const std::string& wgmma_prelude();

// Writes a Contract statement as the tensor-core GEMM of `plan` (see
// mma_gemm.h) and returns the kernel's launch geometry. Its extents may use
// only `syms` (the launch is computed from them on the host).
LaunchGeometry emit_mma_gemm(const loop::StmtNode& contract, const MmaPlan& plan,
                             const std::set<std::string>& syms, CodeSink& out);

// An epilogue statement as the lambda ts_epilogue(batch, row, col, acc),
// emitted once and called per output element (the GEMM kernels, flash
// attention): the names it binds and the extents that bound them.
struct EpilogueVars {
  const std::string &batch, &row, &col, &acc;
  const loop::Expr &batch_extent, &rows, &cols;
};
void epilogue_lambda(const EpilogueVars& v, const loop::Stmt& epilogue, CodeSink& out);
// An epilogue of lets around one store to a parameter, whose index uses
// none of the lets, also as two lambdas: ts_epi_value(batch, row, col, acc)
// returns the stored value, ts_epi_store(batch, row, col, value) stores it.
// A caller computes several values before it stores any, so that their
// loads overlap; with one lambda each element's loads wait for the store
// before them (the buffers may alias). Where 8 consecutive columns from a
// multiple of 8 are 8 consecutive elements of an f16/bf16/f32 buffer, also
// ts_epi_store8(batch, row, col, values): 16-byte stores. nullopt, and
// nothing written, for other epilogues.
struct SplitEpilogue {
  const char* value_type;  // the register type ts_epi_value returns
  bool store8;             // ts_epi_store8 exists
};
std::optional<SplitEpilogue> split_epilogue(const EpilogueVars& v, const loop::Stmt& epilogue, CodeSink& out);
// With ts_i, ts_j (a multiple of 8), ts_M and ts_N in scope: the values of
// columns ts_j .. ts_j + 7 of row ts_i (`acc`, an expression of ts_q, gives
// the accumulator of column ts_j + ts_q), then their stores.
void split_epilogue_chunk(CodeSink& out, const SplitEpilogue& split, const std::string& batch, const std::string& acc);
// Without ts_epi_store8 (rows not 16-byte aligned, e.g. an odd N): with
// ts_i, ts_j, ts_M and ts_N in scope, the values of rows ts_i + q *
// `row_step` (q < 8) of column ts_j (`acc`, an expression of ts_q), then
// their stores, so that a warp on consecutive columns writes whole
// sectors (8 columns a thread made each store fill an eighth of one).
void split_epilogue_column(CodeSink& out, const SplitEpilogue& split, const std::string& batch, const std::string& acc,
                           int row_step);
// The contract's (batch, i, j, acc).
EpilogueVars contract_epilogue_vars(const loop::ContractView& c);

// Nested `#pragma unroll` loops `for (int v = 0; v < n; ++v)` around body().
void unrolled_loops(CodeSink& out, const std::vector<std::pair<const char*, int>>& loops,
                    const std::function<void()>& body);

// The load of `operand` when it is just cast<f32>(load) of a `t` buffer.
const loop::ExprNode* plain_load(const loop::Expr& operand, DType t);
// Whether 16-byte loads of 8 elements consecutive in `vec` read `load`
// exactly (mma_gemm.cpp has the rules), using no variable beyond vec and
// `others`.
bool vectorizable(const loop::ExprNode& load, const std::string& vec, const loop::Expr& vec_extent,
                  const std::vector<std::string>& others);

// Writes an attention statement (loop/ir.h) as the flash-attention kernel
// of flash_attention.cpp and returns its launch geometry. Throws for head
// sizes it does not take (constant multiples of 16 up to 256) and operands
// that are not bf16 or f16 values.
// With `wgmma` (sm_90a) and head sizes d that are multiples of 64, the
// scores come from wgmma on 128-byte swizzled Q and K tiles.
LaunchGeometry emit_flash_attention(const loop::StmtNode& attention, CodeSink& out, const GemmTarget& target);
// Its threads a block (for __launch_bounds__, written before the body).
int flash_attention_threads(const loop::StmtNode& attention, CodeSink& out, const GemmTarget& target);

// ---- the warp-specialised TMA GEMM (tma_gemm.cpp, MmaPlan::tma) ----

// An operand the TMA can copy: cast<f32> of a 2-byte load whose flat index
// is offset + inner + outer_stride * outer + batch_stride * batch (element
// units; `inner` the contiguous variable: k, or j for B stored [K, N]), with
// the start and the strides 16-byte aligned.
struct TmaOperand {
  const loop::Buffer* buffer = nullptr;
  int64_t offset = 0, outer_stride = 0, batch_stride = 0;
};
std::optional<TmaOperand> tma_operand(const loop::Expr& operand, DType t, const std::string& inner,
                                      const std::string& outer, const std::string& batch);
// Stages of a 128 x bn tile that fit the shared memory, and its bytes.
int tma_stages(int bn);
int64_t tma_shared_bytes(int bn, int stages);
// Writes the kernel body and returns its launch geometry; *maps gets the
// tensor maps of A and B (the kernel's ts_tma_a and ts_tma_b).
LaunchGeometry emit_tma_gemm(const loop::StmtNode& contract, const MmaPlan& plan, CodeSink& out,
                             std::vector<TensorMapSpec>* maps);

}  // namespace tessel::cuda::detail
