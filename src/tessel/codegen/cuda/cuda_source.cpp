// Loop IR statements and kernels as CUDA C++ (see cuda_source.h).
#include "tessel/codegen/cuda/cuda_source.h"

#include <algorithm>
#include <cctype>
#include <climits>
#include <cmath>
#include <functional>
#include <optional>
#include <set>

#include "tessel/codegen/cuda/emitter.h"
#include "tessel/loop/eval.h"
#include "tessel/loop/printer.h"
#include "tessel/loop/simplify.h"
#include "tessel/loop/verifier.h"
#include "tessel/loop/visit.h"
#include "tessel/support/error.h"

namespace tessel::cuda {

namespace detail {

using loop::Expr;
using loop::ForKind;
using loop::Stmt;
using loop::StmtKind;
using loop::StmtNode;

const char* register_type(DType t) {
  switch (t) {
    case DType::Bool: return "bool";
    case DType::I8: return "signed char";
    case DType::U8: return "unsigned char";
    case DType::I16: return "short";
    case DType::U16: return "unsigned short";
    case DType::I32: return "int";
    case DType::U32: return "unsigned";
    case DType::I64: return "long long";
    case DType::U64: return "unsigned long long";
    case DType::F16: case DType::BF16: case DType::F32: return "float";
    case DType::F64: return "double";
    default: fail("cuda codegen: ", dtype_name(t), " has no CUDA representation");
  }
}

const char* storage_type(DType t) {
  switch (t) {
    case DType::Bool: return "unsigned char";
    case DType::F16: case DType::BF16: return "unsigned short";
    default: return register_type(t);
  }
}

std::string mangle(const std::string& name) {
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (char c : name) {
    const auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u)) {
      out.push_back(c);
    } else if (c == '_') {
      out += "__";
    } else {
      out += "_x";
      out.push_back(kHex[u >> 4]);
      out.push_back(kHex[u & 15]);
    }
  }
  return out;
}

namespace {

struct Axis {
  const char* index;  // "blockIdx.x", ...
  bool grid;
  int dim;
};

Axis axis_of(ForKind k) {
  switch (k) {
    case ForKind::GpuBlockX: return {"blockIdx.x", true, 0};
    case ForKind::GpuBlockY: return {"blockIdx.y", true, 1};
    case ForKind::GpuBlockZ: return {"blockIdx.z", true, 2};
    case ForKind::GpuThreadX: return {"threadIdx.x", false, 0};
    case ForKind::GpuThreadY: return {"threadIdx.y", false, 1};
    case ForKind::GpuThreadZ: return {"threadIdx.z", false, 2};
    case ForKind::Serial: case ForKind::Parallel: case ForKind::Vectorized: case ForKind::Unrolled:
    case ForKind::GpuLanes:
      break;
  }
  fail("cuda codegen: not a GPU axis");
}

bool is_gpu_axis(ForKind k) {
  return k != ForKind::Serial && k != ForKind::Parallel && k != ForKind::Vectorized && k != ForKind::Unrolled &&
         k != ForKind::GpuLanes;
}

bool has_lanes_loop(const loop::Kernel& k) {
  bool found = false;
  loop::visit_stmt(k.body, [&](const Stmt& s) {
    found = found || (s->kind == StmtKind::For && s->for_kind == ForKind::GpuLanes);
  }, [](const Expr&) {});
  return found;
}

// After the prelude when a kernel has gpu.lanes loops: a register exchanged
// with lane (lane ^ o) of the warp, for every register type.
const char* kLanesPrelude = R"(
// gpu.lanes reductions: the value of lane (lane ^ o) of the warp.
template <class T> TS_D T ts_shfl_xor(T v, int o) { return (T)__shfl_xor_sync(0xffffffffu, (int)v, o); }
TS_D int ts_shfl_xor(int v, int o) { return __shfl_xor_sync(0xffffffffu, v, o); }
TS_D unsigned ts_shfl_xor(unsigned v, int o) { return __shfl_xor_sync(0xffffffffu, v, o); }
TS_D long long ts_shfl_xor(long long v, int o) { return __shfl_xor_sync(0xffffffffu, v, o); }
TS_D unsigned long long ts_shfl_xor(unsigned long long v, int o) { return __shfl_xor_sync(0xffffffffu, v, o); }
TS_D float ts_shfl_xor(float v, int o) { return __shfl_xor_sync(0xffffffffu, v, o); }
TS_D double ts_shfl_xor(double v, int o) { return __shfl_xor_sync(0xffffffffu, v, o); }
)";

// The identity of a lanes reduction's operator: a thread's partial starts
// there (-0.0 for float sums, so that a sum of -0.0s stays -0.0).
Expr reduction_identity(loop::BinaryOp op, DType t) {
  const bool f = is_float(t);
  const int bits = t == DType::Bool ? 1 : f ? 0 : int_bits(t);
  const bool sgn = !f && t != DType::Bool && is_signed_int(t);
  const int64_t max = t == DType::Bool ? 1 : bits == 64 ? (sgn ? INT64_MAX : -1) : sgn ? (int64_t{1} << (bits - 1)) - 1
                                                                                 : (int64_t{1} << bits) - 1;
  const int64_t min = t == DType::Bool || !sgn ? 0 : bits == 64 ? INT64_MIN : -(int64_t{1} << (bits - 1));
  switch (op) {
    case loop::BinaryOp::Add: case loop::BinaryOp::Or: case loop::BinaryOp::Xor:
      return f ? loop::float_imm(t, -0.0) : loop::int_imm(t, 0);
    case loop::BinaryOp::Mul: return f ? loop::float_imm(t, 1.0) : loop::int_imm(t, 1);
    case loop::BinaryOp::And: return loop::int_imm(t, t == DType::Bool ? 1 : -1);
    case loop::BinaryOp::Max: return f ? loop::float_imm(t, -INFINITY) : loop::int_imm(t, min);
    case loop::BinaryOp::Min: return f ? loop::float_imm(t, INFINITY) : loop::int_imm(t, max);
    default: break;
  }
  fail("cuda codegen: ", loop::binary_op_spelling(op), " is not a lanes reduction operator");
}

// The kernel's statements of kind `kind` (Contract, Attention: at most one
// may be emitted).
std::vector<const StmtNode*> statements_in(const Stmt& body, StmtKind kind) {
  std::vector<const StmtNode*> found;
  loop::visit_stmt(body, [&](const Stmt& s) {
    if (s->kind == kind) found.push_back(s.node.get());
  }, [](const Expr&) {});
  return found;
}
std::vector<const StmtNode*> contracts_in(const Stmt& body) { return statements_in(body, StmtKind::Contract); }

constexpr const char* kNarrowSuffix = "_i32";  // kernel_symbol never makes a lone '_'
// gpu.lanes loops of at most this many iterations a thread are unrolled
// counts (lanes_loop); lane-distributed buffers hold one element per count.
constexpr int64_t kMaxLaneSlots = 32;

// The largest L such that every param of `k` has at most INT32_MAX elements
// when every sym is L (shapes grow with their syms), or 0 when no L does. The
// narrow variant assumes the syms in [0, L]: buffers a 32-bit index can span.
int64_t narrow_sym_limit(const loop::Kernel& k) {
  if (k.syms.empty()) return 0;
  const auto fits = [&](int64_t l) {
    std::map<std::string, int64_t> at;
    for (const std::string& s : k.syms) at[s] = l;
    try {
      for (const loop::BufferRef& b : k.params) {
        int64_t n = 1;
        for (const loop::Expr& d : b->shape) n = checked_mul(n, std::max<int64_t>(0, loop::eval_index(d, at)));
        if (n > INT32_MAX) return false;
      }
    } catch (const Error&) {
      return false;  // an overflow: too large
    }
    return true;
  };
  if (!fits(1)) return 0;
  int64_t lo = 1, hi = INT32_MAX;  // fits(lo); the answer is at most hi
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo + 1) / 2;
    if (fits(mid)) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

std::string replace_first(std::string s, const std::string& from, const std::string& to) {
  const size_t at = s.find(from);
  if (at != std::string::npos) s.replace(at, from.size(), to);
  return s;
}

// Writes one kernel. Statements are emitted in pre-order, so asserts are
// numbered as Kernel::assert_messages() numbers them. A kernel holding a
// Contract statement is a tensor-core GEMM (mma_gemm.h): the statement sets
// the launch geometry, so the kernel has no GPU-axis loops; outside it only
// lets, allocations, asserts and local stores, which every thread runs.
class KernelWriter final : public CodeSink {
 public:
  // sym_limit: write the narrow variant (KernelSource::narrow_symbol), which
  // may assume every sym in [0, *sym_limit].
  KernelWriter(const loop::Kernel& k, const GemmTarget& gemm, std::optional<int64_t> sym_limit = std::nullopt)
      : k_(k), syms_(k.syms.begin(), k.syms.end()), gemm_(gemm) {
    if (sym_limit)
      for (const std::string& s : k.syms) sym_bounds_[s] = {0, *sym_limit};
    ex_.restore_bounds(sym_bounds_);
  }

  // Sets info's kernel name and symbol (the narrow one when sym_limit is set).
  std::string write(KernelSource* info) {
    info->kernel_name = k_.name;
    info->symbol = kernel_symbol(k_.name) + (sym_bounds_.empty() ? "" : kNarrowSuffix);
    const std::vector<const StmtNode*> contracts = contracts_in(k_.body);
    TS_CHECK(contracts.size() <= 1, "cuda codegen: kernel ", k_.name, " holds more than one contract statement");
    if (!contracts.empty()) mma_ = plan_mma_gemm(*contracts[0], gemm_);
    const std::vector<const StmtNode*> attentions = statements_in(k_.body, StmtKind::Attention);
    TS_CHECK(attentions.size() + contracts.size() <= 1, "cuda codegen: kernel ", k_.name,
             " holds more than one contract or attention statement");
    attention_ = !attentions.empty();
    std::string sig = "extern \"C\" __global__ void ";
    if (mma_) {
      sig += str_cat("__launch_bounds__(", mma_->threads(),
                     mma_->min_blocks > 1 ? str_cat(", ", mma_->min_blocks) : "", ") ");
    }
    if (attention_)
      sig += str_cat("__launch_bounds__(", flash_attention_threads(*attentions[0], *this, gemm_), ") ");
    sig += info->symbol + "(";
    for (size_t i = 0; i < k_.params.size(); ++i) {
      const loop::Buffer& b = *k_.params[i];
      sig += str_cat(i < k_.num_inputs ? "const " : "", storage_type(b.dtype), "* ", buffer_name(b.name), ", ");
    }
    for (const std::string& s : k_.syms) sig += "const long long " + var_name(s) + ", ";
    sig += "int* ts_error";
    if (mma_ && mma_->tma) sig += ", const __grid_constant__ ts_tmap ts_tma_a, const __grid_constant__ ts_tmap ts_tma_b";
    sig += ") {";
    line(sig);
    ++indent_;
    for (const loop::BufferRef& b : k_.params) declare_strides(*b);
    stmt(k_.body);
    --indent_;
    line("}");
    info->launch = launch_;
    info->tensor_maps = tensor_maps_;
    return out_.str();
  }

  // CodeSink, for the GEMM emitter.
  int param_index(const loop::Buffer& b) const override {
    for (size_t i = 0; i < k_.params.size(); ++i)
      if (k_.params[i].get() == &b) return static_cast<int>(i);
    fail("cuda codegen: %", b.name, " is not a parameter of ", k_.name);
  }
  void line(const std::string& text) override {
    out_ << std::string(2 * static_cast<size_t>(indent_), ' ') << text << "\n";
  }
  void indent(int delta) override { indent_ += delta; }
  void stmt(const Stmt& s) override {
    if (!s.defined()) return;
    switch (s->kind) {
      case StmtKind::For: for_loop(*s); return;
      case StmtKind::Store:
        TS_CHECK(!mma_ || in_epilogue_ || s->buffer->scope != loop::BufferScope::Param, "cuda codegen: kernel ",
                 k_.name, " stores to %", s->buffer->name, " outside its contract statement");
        if (auto it = gathered_.find(s.node.get()); it != gathered_.end()) {
          line(str_cat(it->second.array, "[", it->second.index, "] = ",
                       ExprEmitter::to_storage(s->buffer->dtype, ex_.emit(s->value)), ";"));
          return;
        }
        line(str_cat(buffer_name(s->buffer->name), "[", ex_.flat_index(*s->buffer, s->indices),
                     "] = ", ExprEmitter::to_storage(s->buffer->dtype, ex_.emit(s->value)), ";"));
        return;
      case StmtKind::Let:
        // A brace per let: sibling statements may bind the same name.
        line(str_cat("{ const ", register_type(s->value.dtype()), " ", var_name(s->var), " = ", ex_.emit(s->value),
                     ";"));
        {
          ExprEmitter::Scope range(ex_, s->var, ex_.bounds(s->value));
          stmt(s->body[0]);
        }
        line("}");
        return;
      case StmtKind::If: if_then(*s); return;
      case StmtKind::Seq:
        for (const Stmt& c : s->body) stmt(c);
        return;
      case StmtKind::Allocate: allocate(*s); return;
      case StmtKind::Assert:
        line(str_cat("if (!", ex_.emit(s->value), ") { ts_fail(ts_error, ", ++asserts_, "); return; }"));
        return;
      case StmtKind::Contract: contract(*s); return;
      case StmtKind::Attention: attention(*s); return;
    }
    fail("cuda codegen: unknown statement kind");
  }

  void block(const Stmt& body) {
    ++indent_;
    stmt(body);
    --indent_;
  }

  void if_then(const StmtNode& s) {
    line("if (" + ex_.emit(s.value) + ") {");
    ++if_depth_;
    block(s.body[0]);
    if (s.body.size() > 1 && s.body[1].defined()) {
      line("} else {");
      block(s.body[1]);
    }
    --if_depth_;
    line("}");
  }

  void for_loop(const StmtNode& s) {
    if (s.for_kind == ForKind::GpuLanes) return lanes_loop(s);
    if (is_gpu_axis(s.for_kind)) return gpu_loop(s);
    TS_CHECK(s.for_kind != ForKind::Parallel, "cuda codegen: parallel loop ", s.var,
             " must be mapped to GPU axes first (schedule/gpu_schedule.h)");
    // Vectorized and unrolled loops are plain loops, but a vectorized one's
    // stores may be gathered into one wide store (vector_store.cpp).
    const std::vector<VectorStore> wide = vector_stores(s);
    if (!wide.empty()) open_gathered(wide, var_name(s.var));
    const std::string v = var_name(s.var), end = "e_" + mangle(s.var);
    line(str_cat("for (long long ", v, " = ", ex_.emit(s.min), ", ", end, " = ", v, " + ", ex_.emit(s.extent), "; ",
                 v, " < ", end, "; ++", v, ") {"));
    ++serial_loops_;
    {
      ExprEmitter::Scope range(ex_, s.var, loop::iteration_range(ex_.bounds(s.min), ex_.bounds(s.extent)));
      block(s.body[0]);
    }
    --serial_loops_;
    line("}");
    if (!wide.empty()) close_gathered(wide);
  }

  // Before a vectorized loop: a register array per gathered store (the
  // Store case writes element `index` of it), and a brace around both.
  void open_gathered(const std::vector<VectorStore>& wide, const std::string& index) {
    line("{");
    ++indent_;
    for (const VectorStore& w : wide) {
      const loop::Buffer& b = *w.store->buffer;
      const std::string array = str_cat("ts_vs", vector_regs_++);
      line(str_cat("__align__(", w.bytes, ") ", storage_type(b.dtype), " ", array, "[",
                   w.bytes / dtype_storage_size(b.dtype), "];"));
      gathered_[w.store] = {array, index};
    }
    line("#pragma unroll");
  }

  // After it: each array in one store of w.bytes at the loop's first offset.
  void close_gathered(const std::vector<VectorStore>& wide) {
    for (const VectorStore& w : wide) {
      const std::string type = w.bytes == 16 ? "ts_v16" : w.bytes == 8 ? "ts_v8" : "unsigned";
      const std::string& array = gathered_.at(w.store).array;
      line(str_cat("*reinterpret_cast<", type, "*>(&", buffer_name(w.store->buffer->name), "[", ex_.emit(w.first),
                   "]) = *reinterpret_cast<const ", type, "*>(", array, ");"));
      gathered_.erase(w.store);
    }
    --indent_;
    line("}");
  }

  // The loop's one iteration per block/thread, guarded by its extent.
  void gpu_loop(const StmtNode& s) {
    const Axis a = axis_of(s.for_kind);
    TS_CHECK(!mma_, "cuda codegen: kernel ", k_.name, " has a contract statement and GPU-axis loop ", s.var);
    TS_CHECK(serial_loops_ == 0, "cuda codegen: ", loop::for_kind_name(s.for_kind), " loop ", s.var,
             " is nested in a serial loop");
    TS_CHECK(axes_.insert(s.for_kind).second, "cuda codegen: more than one ", loop::for_kind_name(s.for_kind),
             " loop in kernel ", k_.name);
    loop::visit_expr(s.extent, [&](const Expr& e) {
      TS_CHECK(e->kind != loop::ExprKind::Var || syms_.count(e->name), "cuda codegen: the extent of ",
               loop::for_kind_name(s.for_kind), " loop ", s.var, " uses ", e->name,
               ", but launch extents may use only the kernel's syms");
      TS_CHECK(e->kind != loop::ExprKind::Load, "cuda codegen: launch extent of ", s.var, " reads memory");
    });
    (a.grid ? launch_.grid : launch_.block)[static_cast<size_t>(a.dim)] = s.extent;
    const std::string idx = str_cat("(long long)", a.index);
    line(str_cat("if (", idx, " < ", ex_.emit(s.extent), ") {"));
    ++indent_;
    const std::string min = loop::is_const(s.min, 0) ? "" : ex_.emit(s.min) + " + ";
    line(str_cat("[[maybe_unused]] const long long ", var_name(s.var), " = ", min, idx, ";"));
    // The index is below the extent (the guard) and below the hardware's
    // limit for the axis (a grid of at most 2^31 - 1 blocks in x, 65535 in
    // y and z; at most 1024 threads).
    const int64_t limit = !a.grid ? 1024 : a.dim == 0 ? INT32_MAX : 65535;
    std::optional<loop::Interval> extent = ex_.bounds(s.extent);
    if (!extent || extent->hi > limit) extent = loop::Interval{0, limit};
    ExprEmitter::Scope range(ex_, s.var, loop::iteration_range(ex_.bounds(s.min), extent));
    stmt(s.body[0]);
    --indent_;
    line("}");
  }
  ExprEmitter& expr() override { return ex_; }

 private:
  // Row-major strides; constant ones inline, others as named constants.
  void declare_strides(const loop::Buffer& b) {
    std::vector<std::string> strides(b.shape.size());
    Expr s = Expr(1);
    for (size_t d = b.shape.size(); d-- > 0;) {
      const Expr folded = loop::simplify(s);
      int64_t c = 0;
      if (loop::as_const_int(folded, &c)) {
        strides[d] = c == 1 ? "1" : str_cat(c, "ll");
      } else {
        strides[d] = str_cat("s_", mangle(b.name), "_", d);
        line(str_cat("const long long ", strides[d], " = ", ex_.emit(folded), ";"));
      }
      s = s * b.shape[d];
    }
    ex_.add_buffer(&b, std::move(strides));
  }

  // A statement that is the kernel (a contract: a tensor-core GEMM; an
  // attention: flash attention) written by `emit`, which sets the launch.
  // Its emitter declares variables of its own; the syms stay bounded.
  void own_kernel(const char* what, const std::function<LaunchGeometry()>& emit) {
    TS_CHECK(serial_loops_ == 0 && if_depth_ == 0 && !in_epilogue_, "cuda codegen: the ", what, " statement of ",
             k_.name, " is inside a loop or an if (schedule_for_gpu leaves it at the top level)");
    in_epilogue_ = true;
    loop::Bounds outer = ex_.take_bounds();
    ex_.restore_bounds(sym_bounds_);
    launch_ = emit();
    ex_.restore_bounds(std::move(outer));
    in_epilogue_ = false;
  }

  void attention(const StmtNode& s) {
    own_kernel("attention", [&] { return emit_flash_attention(s, *this, gemm_); });
  }

  void contract(const StmtNode& s) {
    own_kernel("contract", [&] {
      return mma_->tma ? emit_tma_gemm(s, *mma_, *this, &tensor_maps_) : emit_mma_gemm(s, *mma_, syms_, *this);
    });
  }

  // gpu.lanes: thread t of the block's T threads (the gpu.thread.x extent)
  // runs iterations min + t, min + t + T, ... A reduction (loop/verifier.h's
  // lanes_reduction_update) folds its iterations into a register partial
  // that starts at the operator's identity; the partials are combined across
  // the warp (xor shuffles) and, for T > 32, across its warps (shared memory,
  // read back in warp order by every thread), so every thread ends with the
  // same value and applies it to the accumulator. The verifier keeps these
  // loops and the kernel's asserts where all of a block's threads reach
  // them, so no thread misses the shuffles or the barriers.
  // With a constant extent of at most kMaxLaneSlots iterations a thread,
  // the loop counts the thread's iterations (`#pragma unroll`, a guard only
  // when the extent is not a multiple of T): the loads of all of them can be
  // in flight at once, and a lane-distributed buffer (allocate below) is
  // indexed by that count, so that it stays in registers.
  void lanes_loop(const StmtNode& s) {
    int64_t threads = 0;
    TS_CHECK(loop::as_const_int(launch_.block[0], &threads) && threads > 0, "cuda codegen: gpu.lanes loop ", s.var,
             " is not inside a gpu.thread.x loop of constant extent");
    Expr operand;
    const StmtNode* update = loop::lanes_reduction_update(s, &operand);
    const int n = lanes_++;
    const std::string v = var_name(s.var), m = "m_" + mangle(s.var), end = "e_" + mangle(s.var);
    const std::string partial = str_cat("%lanes", n), other = str_cat("%lanes_other", n);
    const DType t = update ? update->buffer->dtype : DType::F32;
    const loop::BinaryOp op = update ? update->value->binary : loop::BinaryOp::Add;
    int64_t extent = 0;
    loop::as_const_int(s.extent, &extent);
    const int64_t slots = lane_slots(s.extent);
    const bool counted = slots > 0;
    line("{");
    ++indent_;
    if (update)
      line(str_cat(register_type(t), " ", var_name(partial), " = ", ex_.emit(reduction_identity(op, t)), ";"));
    line(str_cat("const long long ", m, " = ", ex_.emit(s.min), ";"));
    const std::string it = str_cat("ts_it", n);
    int open = 1;
    if (counted) {
      line("#pragma unroll");
      line(str_cat("for (int ", it, " = 0; ", it, " < ", slots, "; ++", it, ") {"));
      // (Unused where the body reads only lane-distributed buffers.)
      line(str_cat("  [[maybe_unused]] const long long ", v, " = ", m, " + (long long)threadIdx.x + (long long)", it,
                   " * ", threads, "ll;"));
      if (extent % threads != 0) {
        line(str_cat("  if ((long long)threadIdx.x + (long long)", it, " * ", threads, "ll < ", extent, "ll) {"));
        ++indent_;
        ++open;
      }
    } else {
      line(str_cat("for (long long ", v, " = ", m, " + (long long)threadIdx.x, ", end, " = ", m, " + ",
                   ex_.emit(s.extent), "; ", v, " < ", end, "; ", v, " += ", threads, "ll) {"));
    }
    const std::string saved_slot = ex_.set_lane_slot(counted ? it : "");
    const bool in_loop = serial_loops_ > 0;
    ++serial_loops_;
    ExprEmitter::Scope range(ex_, s.var, loop::iteration_range(ex_.bounds(s.min), ex_.bounds(s.extent)));
    ++indent_;
    if (update) {
      lanes_update(s.body[0], update, loop::binary(op, loop::var(partial, t), operand), var_name(partial));
    } else {
      stmt(s.body[0]);
    }
    --indent_;
    --serial_loops_;
    ex_.set_lane_slot(saved_slot);
    for (int i = 1; i < open; ++i) {
      --indent_;
      line("  }");
    }
    line("}");
    if (update) {
      const std::string p = var_name(partial), q = var_name(other), reg = register_type(t);
      const std::string combined = ex_.emit(loop::binary(op, loop::var(partial, t), loop::var(other, t)));
      line("for (int ts_o = 16; ts_o > 0; ts_o >>= 1) {");
      line(str_cat("  const ", reg, " ", q, " = ts_shfl_xor(", p, ", ts_o);"));
      line(str_cat("  ", p, " = ", combined, ";"));
      line("}");
      if (threads > 32) {
        const std::string sh = str_cat("ts_lanes", n);
        line(str_cat("__shared__ ", reg, " ", sh, "[", threads / 32, "];"));
        line(str_cat("if ((threadIdx.x & 31u) == 0u) ", sh, "[threadIdx.x >> 5] = ", p, ";"));
        line("__syncthreads();");
        line(str_cat(p, " = ", sh, "[0];"));
        line(str_cat("for (int ts_w = 1; ts_w < ", threads / 32, "; ++ts_w) {"));
        line(str_cat("  const ", reg, " ", q, " = ", sh, "[ts_w];"));
        line(str_cat("  ", p, " = ", combined, ";"));
        line("}");
        // Inside a loop the next round writes the array again.
        if (in_loop) line("__syncthreads();");
      }
      stmt(loop::store(update->buffer, update->indices,
                       loop::binary(op, loop::load(update->buffer, update->indices), loop::var(partial, t))));
    }
    --indent_;
    line("}");
  }

  // The body of a lanes reduction down to its update, which becomes
  // `partial = next`.
  void lanes_update(const Stmt& s, const StmtNode* update, const Expr& next, const std::string& partial) {
    if (s.node.get() == update) {
      line(str_cat(partial, " = ", ex_.emit(next), ";"));
      return;
    }
    switch (s->kind) {
      case StmtKind::Seq: lanes_update(s->body[0], update, next, partial); return;
      case StmtKind::Let:
        line(str_cat("{ const ", register_type(s->value.dtype()), " ", var_name(s->var), " = ", ex_.emit(s->value),
                     ";"));
        lanes_update(s->body[0], update, next, partial);
        line("}");
        return;
      case StmtKind::For: {
        const std::string v = var_name(s->var), end = "e_" + mangle(s->var);
        line(str_cat("for (long long ", v, " = ", ex_.emit(s->min), ", ", end, " = ", v, " + ", ex_.emit(s->extent),
                     "; ", v, " < ", end, "; ++", v, ") {"));
        ++indent_;
        lanes_update(s->body[0], update, next, partial);
        --indent_;
        line("}");
        return;
      }
      default: break;
    }
    fail("cuda codegen: unexpected statement in the gpu.lanes reduction of kernel ", k_.name);
  }

  // The iterations a thread takes of a gpu.lanes loop of `extent` when it
  // is written as a counted, unrolled loop (lanes_loop): a constant extent
  // of at most kMaxLaneSlots per thread; 0 otherwise.
  int64_t lane_slots(const Expr& extent) const {
    int64_t e = 0, threads = 0;
    if (!loop::as_const_int(extent, &e) || e <= 0 || !loop::as_const_int(launch_.block[0], &threads) || threads <= 0)
      return 0;
    const int64_t slots = (e + threads - 1) / threads;
    return slots <= kMaxLaneSlots ? slots : 0;
  }

  // A local buffer whose every access is its element v in a counted gpu.lanes
  // loop `for v in [0, E)` (loop::lane_element: the row cache,
  // schedule/gpu_row_cache.cpp) is lane-distributed: thread t holds elements
  // t, t + T, ... in an array of one element per iteration, indexed by the
  // unrolled loop's counter: registers, not a local-memory array of E
  // elements a thread. Its element count a thread, or 0.
  int64_t lane_distributed(const StmtNode& s) const {
    const int64_t slots = s.buffer->shape.size() == 1 ? lane_slots(s.buffer->shape[0]) : 0;
    if (slots == 0) return 0;
    const loop::Buffer& b = *s.buffer;
    bool ok = true;
    const auto at_lane = [&](const StmtNode* lanes, const std::vector<Expr>& index) {
      return lanes && loop::lane_element(*lanes, b, index);
    };
    std::function<void(const Stmt&, const StmtNode*)> walk = [&](const Stmt& st, const StmtNode* lanes) {
      if (!ok || !st.defined()) return;
      if (st->kind == StmtKind::For && st->for_kind == ForKind::GpuLanes) lanes = st.node.get();
      if (st->kind == StmtKind::Store && st->buffer.get() == &b) ok = ok && at_lane(lanes, st->indices);
      for (const Expr& root : loop::stmt_exprs(st))
        loop::visit_expr(root, [&](const Expr& x) {
          if (x->kind == loop::ExprKind::Load && x->buffer.get() == &b) ok = ok && at_lane(lanes, x->args);
        });
      for (const Stmt& c : st->body) walk(c, lanes);
    };
    walk(s.body[0], nullptr);
    return ok ? slots : 0;
  }

  void allocate(const StmtNode& s) {
    const loop::Buffer& b = *s.buffer;
    int64_t count = 1;
    for (const Expr& d : b.shape) {
      int64_t n = 0;
      TS_CHECK(loop::as_const_int(d, &n) && n >= 0, "cuda codegen: buffer ", b.name, " needs a constant shape");
      count = checked_mul(count, n);
    }
    if (const int64_t slots = lane_distributed(s)) {
      int64_t threads = 0;
      loop::as_const_int(launch_.block[0], &threads);
      line("{");
      line(str_cat(storage_type(b.dtype), " ", buffer_name(b.name), "[", slots, "];  // lane-distributed: element t + ",
                   threads, " i of ", count, " is [i] of thread t"));
      ex_.add_lane_buffer(&b);
      stmt(s.body[0]);
      ex_.remove_buffer(&b);
      line("}");
      return;
    }
    line("{");
    // Local buffers start zeroed, as the evaluator's do; shared ones are not initialised.
    if (b.scope == loop::BufferScope::Shared) {
      line(str_cat("__shared__ ", storage_type(b.dtype), " ", buffer_name(b.name), "[", std::max<int64_t>(count, 1),
                   "];"));
    } else {
      line(str_cat(storage_type(b.dtype), " ", buffer_name(b.name), "[", std::max<int64_t>(count, 1), "] = {};"));
    }
    declare_strides(b);
    stmt(s.body[0]);
    ex_.remove_buffer(&b);
    line("}");
  }

  const loop::Kernel& k_;
  std::set<std::string> syms_;
  loop::Bounds sym_bounds_;  // the narrow variant's assumption
  // Stores of the vectorized loop being written that go to a register array
  // (open_gathered): the array and the loop variable indexing it.
  struct Gathered {
    std::string array, index;
  };
  std::map<const StmtNode*, Gathered> gathered_;
  int vector_regs_ = 0;
  ExprEmitter ex_;
  std::ostringstream out_;
  int indent_ = 0;
  int asserts_ = 0;
  int serial_loops_ = 0;
  int if_depth_ = 0;
  std::optional<MmaPlan> mma_;  // the kernel is a tensor-core GEMM
  bool attention_ = false;      // the kernel is a flash attention
  GemmTarget gemm_;
  bool in_epilogue_ = false;
  std::set<ForKind> axes_;
  LaunchGeometry launch_;
  std::vector<TensorMapSpec> tensor_maps_;  // the TMA GEMM's (KernelSource::tensor_maps)
  int lanes_ = 0;  // gpu.lanes loops so far (names their registers and shared arrays)
};

}  // namespace
}  // namespace detail

bool within_narrow_limit(int64_t limit, const std::vector<int64_t>& syms) {
  return std::all_of(syms.begin(), syms.end(), [&](int64_t v) { return v >= 0 && v <= limit; });
}

const std::string& launch_symbol(const KernelSource& k, const std::vector<int64_t>& syms) {
  return !k.narrow_symbol.empty() && within_narrow_limit(k.narrow_limit, syms) ? k.narrow_symbol : k.symbol;
}

std::string kernel_symbol(const std::string& kernel_name) { return "tessel_" + detail::mangle(kernel_name); }

CudaSource emit_cuda_source(const std::vector<loop::Kernel>& kernels, const GemmTarget& gemm) {
  return emit_cuda_source(kernels, [&](const loop::Kernel&) { return gemm; });
}

CudaSource emit_cuda_source(const std::vector<loop::Kernel>& kernels,
                            const std::function<GemmTarget(const loop::Kernel&)>& gemm_for) {
  // Kernels may differ in wgmma (a tuned GEMM may run the mma.sync pipeline
  // beside wgmma ones): the wgmma helpers are there when any tensor-core
  // kernel takes them, and the source then compiles for sm_90a only.
  bool tensor_cores = false, wgmma = false;
  for (const loop::Kernel& k : kernels) {
    if (detail::contracts_in(k.body).empty() && detail::statements_in(k.body, loop::StmtKind::Attention).empty()) continue;
    tensor_cores = true;
    wgmma = wgmma || gemm_for(k).wgmma;
  }
  CudaSource src;
  std::string code = detail::prelude();
  if (tensor_cores) code += detail::mma_prelude();
  if (wgmma) code += detail::wgmma_prelude();
  // The wide stores' types (vector_store.cpp).
  code += "\nstruct __align__(16) ts_v16 { unsigned x, y, z, w; };\nstruct __align__(8) ts_v8 { unsigned x, y; };\n";
  for (const loop::Kernel& k : kernels) {
    // The lanes' shuffles, which flash attention's row statistics use too.
    if (!detail::has_lanes_loop(k) && detail::statements_in(k.body, loop::StmtKind::Attention).empty()) continue;
    code += detail::kLanesPrelude;
    break;
  }
  std::set<std::string> symbols;
  for (const loop::Kernel& k : kernels) {
    loop::verify(k, loop::Target::Cuda);
    KernelSource info;
    const GemmTarget target = gemm_for(k);
    const std::string wide = detail::KernelWriter(k, target).write(&info);
    code += "\n" + wide;
    TS_CHECK(symbols.insert(info.symbol).second, "cuda codegen: two kernels named ", k.name);
    if (const int64_t limit = detail::narrow_sym_limit(k); limit > 0) {
      KernelSource narrow;
      std::string text = detail::KernelWriter(k, target, limit).write(&narrow);
      // Kept only where the assumption changed the code.
      if (detail::replace_first(text, narrow.symbol, info.symbol) != wide) {
        code += "\n" + text;
        info.narrow_symbol = narrow.symbol;
        info.narrow_limit = limit;
      }
    }
    src.kernels.push_back(std::move(info));
  }
  src.code = std::move(code);
  return src;
}

}  // namespace tessel::cuda
