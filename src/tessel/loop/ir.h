// The loop IR: what a fused kernel group lowers to, what schedules transform
// and what both code generators (LLVM for CPUs, CUDA C++ for GPUs) consume.
//
// It is deliberately small (Halide's lowered Stmt/Expr, TVM's TIR):
//   - Buffers are n-dimensional, dense, row-major; their shapes are index
//     expressions over the kernel's symbol parameters. Code generators
//     flatten the multi-dimensional indices.
//   - Expressions are scalar and immutable (shared trees, rebuilt on change).
//     Vectors do not appear in the IR: a loop marked Vectorized with a
//     constant extent is widened by the code generator (a load whose index is
//     the loop variable plus an invariant becomes a vector load, anything else
//     a gather). Reductions are ordinary stores into an accumulator buffer.
//   - Loops carry a kind: serial, parallel (CPU tasks), vectorized,
//     unrolled, and the GPU block/thread axes the CUDA backend binds.
//   - A contraction (a GEMM, a batch of them, an implicit-GEMM convolution)
//     can stay one Contract statement: the dot products and an epilogue per
//     output element, which a GPU schedule maps onto tensor cores.
//
// Kernel calling convention (CPU):
//   int32_t kernel(void* const* buffers, const int64_t* syms,
//                  int64_t begin, int64_t end);
// buffers: one pointer per Kernel::params entry, in order; syms: the values of
// Kernel::syms in order; [begin, end): the iterations of the kernel's one
// top-level Parallel loop that this call runs (ignored when there is none).
// Returns 0, or 1 + the index of the first failed Assert (its message is
// Kernel::assert_messages()[i]).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tessel/ir/dtype.h"

namespace tessel::loop {

// Element types loop IR computes with: bool, 8..64-bit integers, f16, bf16,
// f32, f64 (float8/float4/int4/int2 and strings are not).
bool is_computable(DType t);

// ---- buffers ---------------------------------------------------------------

enum class BufferScope {
  Param,   // passed in by the caller (kernel input or output, or arena slice)
  Local,   // allocated by an Allocate statement (stack / registers on CPU)
  Shared,  // GPU shared memory (Allocate only)
};

struct Expr;

struct Buffer {
  std::string name;
  DType dtype = DType::F32;
  std::vector<Expr> shape;  // index expressions (i64)
  BufferScope scope = BufferScope::Param;
};
using BufferRef = std::shared_ptr<Buffer>;

// ---- expressions -----------------------------------------------------------

enum class ExprKind { IntImm, FloatImm, Var, Unary, Binary, Select, Cast, Bitcast, Load, Call };

enum class UnaryOp {
  Neg,  // arithmetic negation
  Not,  // logical not (bool) or bitwise not (integers)
};

enum class BinaryOp {
  Add, Sub, Mul,
  Div,       // floats: IEEE division; integers: truncating (C) division
  Mod,       // floats: fmod; integers: C remainder (sign of the dividend)
  FloorDiv,  // integers only: rounds toward -inf (index arithmetic)
  FloorMod,  // integers only: result has the sign of the divisor
  Min, Max,  // floats: NaN-propagating (ONNX Min/Max semantics)
  And, Or, Xor,  // bool: logical; integers: bitwise
  Shl, Shr,      // integers; Shr is arithmetic for signed, logical for unsigned
  Eq, Ne, Lt, Le, Gt, Ge,  // result bool; floats compare ordered (NaN: false, Ne: true)
};

struct ExprNode;

// A handle to an immutable expression node. Cheap to copy.
struct Expr {
  std::shared_ptr<const ExprNode> node;

  Expr() = default;
  explicit Expr(std::shared_ptr<const ExprNode> n) : node(std::move(n)) {}
  Expr(int64_t v);  // NOLINT: i64 immediate, so index code reads naturally
  Expr(int v) : Expr(int64_t{v}) {}  // NOLINT

  bool defined() const { return node != nullptr; }
  const ExprNode* operator->() const { return node.get(); }
  const ExprNode& operator*() const { return *node; }
  DType dtype() const;
};

struct ExprNode {
  ExprKind kind = ExprKind::IntImm;
  DType dtype = DType::I64;  // result type
  int64_t int_value = 0;     // IntImm (bool: 0/1; unsigned types: bit pattern)
  double float_value = 0;    // FloatImm
  std::string name;          // Var: variable name; Call: intrinsic name
  UnaryOp unary = UnaryOp::Neg;
  BinaryOp binary = BinaryOp::Add;
  std::vector<Expr> args;    // Unary: [a]; Binary: [a, b]; Select: [cond, t, f];
                             // Cast/Bitcast: [a]; Load: indices; Call: arguments
  BufferRef buffer;          // Load
};

// Intrinsics a Call may name. Code generators implement the primitive ones
// directly; the transcendental ones are expanded into polynomials by the
// math-expansion pass before code generation (LLVM would scalarise them into
// libm calls), so code generators never see them.
//   primitive (float): sqrt fabs floor ceil trunc rint fma copysign isnan isinf
//   transcendental (float): exp log tanh erf sigmoid sin cos tan atan pow ...
bool is_primitive_intrinsic(const std::string& name);

// ---- expression constructors -------------------------------------------------
// They check operand types (tessel::Error on mismatch); no implicit promotion.

Expr int_imm(DType t, int64_t v);
Expr float_imm(DType t, double v);
Expr bool_imm(bool v);
Expr var(const std::string& name, DType t = DType::I64);
Expr unary(UnaryOp op, Expr a);
Expr binary(BinaryOp op, Expr a, Expr b);
// Both arms are evaluated, so both arms' loads must be in bounds (lowerings
// clamp a padded tap's index), except under a condition that varies across
// the lanes of a vectorized loop: there only the lanes an arm takes load
// (the CPU code generator masks an unclamped load of a lane-varying index),
// so that a tap in the padding may be read unclamped under its test.
Expr select(Expr cond, Expr t, Expr f);
// Value conversion with the reference interpreter's semantics (Tensor::cast):
// float->int truncates toward zero, NaN gives 0, out-of-range values saturate
// to the i64 range and then wrap to the target width; int->int wraps; ->bool
// is `a != 0`; f32->f16/bf16 rounds to nearest even (NaN stays NaN).
Expr cast(DType t, Expr a);
Expr bitcast(DType t, Expr a);  // same-size reinterpretation
Expr load(BufferRef b, std::vector<Expr> indices);
Expr call(const std::string& intrinsic, DType t, std::vector<Expr> args);

Expr operator+(Expr a, Expr b);
Expr operator-(Expr a, Expr b);
Expr operator*(Expr a, Expr b);
Expr operator-(Expr a);
Expr min(Expr a, Expr b);
Expr max(Expr a, Expr b);
Expr floordiv(Expr a, Expr b);
Expr floormod(Expr a, Expr b);

// True for an IntImm equal to v.
bool is_const(const Expr& e, int64_t v);
// The value of an IntImm, or nullopt-like false.
bool as_const_int(const Expr& e, int64_t* out);

// ---- statements --------------------------------------------------------------

enum class StmtKind { For, Store, Let, If, Seq, Allocate, Assert, Contract, Attention };

enum class ForKind {
  Serial,
  Parallel,    // CPU: iterations split across the thread pool (top level only)
  Vectorized,  // constant extent; widened by the code generator
  Unrolled,    // constant extent; fully unrolled
  GpuBlockX, GpuBlockY, GpuBlockZ,
  GpuThreadX, GpuThreadY, GpuThreadZ,
  // CUDA only, inside a gpu.thread.x loop of constant extent T (the block's
  // x size): thread t runs iterations min + t, min + t + T, ... A body that
  // is one update `acc[c] = op(acc[c], e)` of a Local buffer allocated
  // outside the loop (op: + * min max & | ^; e not reading acc; the update
  // possibly under lets and serial loops) is a block-wide reduction: each
  // thread folds its iterations into a partial, the partials are combined
  // across the block (across the warp when T is 32) and every thread does
  // `acc[c] = op(acc[c], combined)`. Any other body must have independent
  // iterations (it runs as a strided loop). The evaluator runs it serially,
  // like a serial loop (verifier.h has the rules).
  GpuLanes,
};
const char* for_kind_name(ForKind k);  // "serial", "parallel", "vectorized", ..., "gpu.block.x", "gpu.lanes"

struct StmtNode;
struct Stmt {
  std::shared_ptr<const StmtNode> node;
  Stmt() = default;
  explicit Stmt(std::shared_ptr<const StmtNode> n) : node(std::move(n)) {}
  bool defined() const { return node != nullptr; }
  const StmtNode* operator->() const { return node.get(); }
  const StmtNode& operator*() const { return *node; }
};

struct StmtNode {
  StmtKind kind = StmtKind::Seq;
  // For: loop variable (i64), [min, min + extent), kind, body[0].
  // Let: variable (of value's type) bound to value in body[0].
  std::string var;
  Expr min, extent;
  ForKind for_kind = ForKind::Serial;
  // Store: buffer[indices] = value. Let: value. If: cond. Assert: cond.
  BufferRef buffer;
  std::vector<Expr> indices;
  Expr value;
  // Seq: the statements; For/Let/Allocate: [body]; If: [then] or [then, else].
  std::vector<Stmt> body;
  // Assert: the error message when cond is false (the kernel returns).
  std::string message;
  // Allocate: `buffer` (scope Local or Shared, constant shape) lives in body[0].
  // Contract (see contract() below): vars = {batch, i, j, k, acc};
  // operands = {batch extent, M, N, K, a, b}; body[0] = the epilogue.
  // Attention (see attention() below): vars = {batch, i, j, d, e, acc};
  // operands = {batch extent, M, N, D, E, q, k, v, scale, bias};
  // p_type: the type the probabilities are rounded to; body[0] = the epilogue.
  std::vector<std::string> vars;
  std::vector<Expr> operands;
  DType p_type = DType::F32;
};

Stmt for_loop(const std::string& var, Expr min, Expr extent, ForKind kind, Stmt body);
Stmt store(BufferRef b, std::vector<Expr> indices, Expr value);
Stmt let(const std::string& var, Expr value, Stmt body);
Stmt if_then(Expr cond, Stmt then_s, Stmt else_s = Stmt());
Stmt seq(std::vector<Stmt> stmts);  // flattens nested Seqs
Stmt allocate(BufferRef b, Stmt body);
Stmt assert_that(Expr cond, std::string message);

// A contraction with an epilogue per output element:
//
//   for each (batch, i, j) in [0, batch_extent) x [0, m) x [0, n):
//     acc = Σ_{k in [0, k_extent)} a · b      (f32 products and sums, order unspecified)
//     epilogue                                 (sees batch, i, j and acc)
//
// `a` (f32) may mention batch, i and k, not j; `b` (f32) batch, k and j, not
// i; neither reads a buffer the epilogue stores to. The epilogues of
// different elements run in an unspecified order (concurrently on a GPU): one
// must not read or write what another writes. The variables are bound by the
// statement (i64; acc f32) and, like loop variables, unique in the kernel.
struct ContractVars {
  std::string batch, i, j, k, acc;
};
Stmt contract(const ContractVars& v, Expr batch_extent, Expr m, Expr n, Expr k_extent, Expr a, Expr b,
              Stmt epilogue);

// The parts of a Contract statement, by name.
struct ContractView {
  const std::string &batch, &i, &j, &k, &acc;
  const Expr &batch_extent, &m, &n, &k_extent, &a, &b;
  const Stmt& epilogue;
};
ContractView contract_parts(const StmtNode& s);

// Scaled dot-product attention with an epilogue per output element:
//
//   for each (batch, i) in [0, batch_extent) x [0, m):
//     s(j) = scale · Σ_{d in [0, d_extent)} q · k + bias    for j in [0, n)
//     p(j) = exp(s(j) - max_j s) / Σ_j exp(s(j) - max_j s), rounded to p_type
//     for each e in [0, e_extent):
//       acc = Σ_j p(j) · v                                   (f32)
//       epilogue                         (sees batch, i, e and acc)
//
// All arithmetic is f32 (sums in an unspecified order); p_type is f32, f16
// or bf16 (the unfused graph's Cast of the probabilities). `q` (f32) may
// mention batch, i and d; `k` batch, j and d; `v` batch, j and e; `bias`
// (f32: an additive mask, -inf to mask out) batch, i and j; `scale` (f32)
// none of them. No operand reads a buffer the epilogue stores to; the
// epilogues run in an unspecified order, like Contract's. A row whose every
// s(j) is -inf (or with n = 0) has no softmax: its acc is 0, as the ONNX
// Attention operator defines it (a flash kernel's empty row sum). The
// variables are bound by the statement (i64; acc f32), unique in the kernel.
struct AttentionVars {
  std::string batch, i, j, d, e, acc;
};
Stmt attention(const AttentionVars& v, Expr batch_extent, Expr m, Expr n, Expr d_extent, Expr e_extent, Expr q,
               Expr k, Expr v_operand, Expr scale, Expr bias, DType p_type, Stmt epilogue);

struct AttentionView {
  const std::string &batch, &i, &j, &d, &e, &acc;
  const Expr &batch_extent, &m, &n, &d_extent, &e_extent, &q, &k, &v, &scale, &bias;
  DType p_type;
  const Stmt& epilogue;
};
AttentionView attention_parts(const StmtNode& s);

// ---- kernels -------------------------------------------------------------------

struct Kernel {
  std::string name;
  std::vector<BufferRef> params;  // inputs then outputs, see `num_inputs`
  size_t num_inputs = 0;
  std::vector<std::string> syms;  // i64 symbol parameters (e.g. "batch")
  Stmt body;

  // Assert messages in pre-order, as the calling convention numbers them.
  std::vector<std::string> assert_messages() const;
};

}  // namespace tessel::loop
