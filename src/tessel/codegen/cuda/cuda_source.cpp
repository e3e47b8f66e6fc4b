// Loop IR statements and kernels as CUDA C++ (see cuda_source.h).
#include "tessel/codegen/cuda/cuda_source.h"

#include <cctype>
#include <optional>
#include <set>

#include "tessel/codegen/cuda/emitter.h"
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
    case ForKind::Serial: case ForKind::Parallel: case ForKind::Vectorized: case ForKind::Unrolled: break;
  }
  fail("cuda codegen: not a GPU axis");
}

bool is_gpu_axis(ForKind k) {
  return k != ForKind::Serial && k != ForKind::Parallel && k != ForKind::Vectorized && k != ForKind::Unrolled;
}

// The kernel's Contract statements (at most one may be emitted).
std::vector<const StmtNode*> contracts_in(const Stmt& body) {
  std::vector<const StmtNode*> found;
  loop::visit_stmt(body, [&](const Stmt& s) {
    if (s->kind == StmtKind::Contract) found.push_back(s.node.get());
  }, [](const Expr&) {});
  return found;
}

// Writes one kernel. Statements are emitted in pre-order, so asserts are
// numbered as Kernel::assert_messages() numbers them. A kernel holding a
// Contract statement is a tensor-core GEMM (mma_gemm.h): the statement sets
// the launch geometry, so the kernel has no GPU-axis loops; outside it only
// lets, allocations, asserts and local stores, which every thread runs.
class KernelWriter final : public CodeSink {
 public:
  explicit KernelWriter(const loop::Kernel& k) : k_(k), syms_(k.syms.begin(), k.syms.end()) {}

  std::string write(KernelSource* info) {
    info->kernel_name = k_.name;
    info->symbol = kernel_symbol(k_.name);
    const std::vector<const StmtNode*> contracts = contracts_in(k_.body);
    TS_CHECK(contracts.size() <= 1, "cuda codegen: kernel ", k_.name, " holds more than one contract statement");
    if (!contracts.empty()) mma_ = plan_mma_gemm(*contracts[0]);
    std::string sig = "extern \"C\" __global__ void ";
    if (mma_) sig += str_cat("__launch_bounds__(", mma_->tiles.threads(), ") ");
    sig += info->symbol + "(";
    for (size_t i = 0; i < k_.params.size(); ++i) {
      const loop::Buffer& b = *k_.params[i];
      sig += str_cat(i < k_.num_inputs ? "const " : "", storage_type(b.dtype), "* ", buffer_name(b.name), ", ");
    }
    for (const std::string& s : k_.syms) sig += "const long long " + var_name(s) + ", ";
    sig += "int* ts_error) {";
    line(sig);
    ++indent_;
    for (const loop::BufferRef& b : k_.params) declare_strides(*b);
    stmt(k_.body);
    --indent_;
    line("}");
    info->launch = launch_;
    return out_.str();
  }

  // CodeSink, for the GEMM emitter.
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
        line(str_cat(buffer_name(s->buffer->name), "[", ex_.flat_index(*s->buffer, s->indices),
                     "] = ", ExprEmitter::to_storage(s->buffer->dtype, ex_.emit(s->value)), ";"));
        return;
      case StmtKind::Let:
        // A brace per let: sibling statements may bind the same name.
        line(str_cat("{ const ", register_type(s->value.dtype()), " ", var_name(s->var), " = ", ex_.emit(s->value),
                     ";"));
        stmt(s->body[0]);
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
    if (is_gpu_axis(s.for_kind)) return gpu_loop(s);
    TS_CHECK(s.for_kind != ForKind::Parallel, "cuda codegen: parallel loop ", s.var,
             " must be mapped to GPU axes first (schedule/gpu_schedule.h)");
    // Vectorized and unrolled loops are plain loops for now.
    const std::string v = var_name(s.var), end = "e_" + mangle(s.var);
    line(str_cat("for (long long ", v, " = ", ex_.emit(s.min), ", ", end, " = ", v, " + ", ex_.emit(s.extent), "; ",
                 v, " < ", end, "; ++", v, ") {"));
    ++serial_loops_;
    block(s.body[0]);
    --serial_loops_;
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
    line(str_cat("const long long ", var_name(s.var), " = ", min, idx, ";"));
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

  void contract(const StmtNode& s) {
    TS_CHECK(serial_loops_ == 0 && if_depth_ == 0 && !in_epilogue_, "cuda codegen: the contract statement of ",
             k_.name, " is inside a loop or an if (schedule_for_gpu leaves it at the top level)");
    in_epilogue_ = true;
    launch_ = emit_mma_gemm(s, *mma_, syms_, *this);
    in_epilogue_ = false;
  }

  void allocate(const StmtNode& s) {
    const loop::Buffer& b = *s.buffer;
    int64_t count = 1;
    for (const Expr& d : b.shape) {
      int64_t n = 0;
      TS_CHECK(loop::as_const_int(d, &n) && n >= 0, "cuda codegen: buffer ", b.name, " needs a constant shape");
      count = checked_mul(count, n);
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
  ExprEmitter ex_;
  std::ostringstream out_;
  int indent_ = 0;
  int asserts_ = 0;
  int serial_loops_ = 0;
  int if_depth_ = 0;
  std::optional<MmaPlan> mma_;  // the kernel is a tensor-core GEMM
  bool in_epilogue_ = false;
  std::set<ForKind> axes_;
  LaunchGeometry launch_;
};

}  // namespace
}  // namespace detail

std::string kernel_symbol(const std::string& kernel_name) { return "tessel_" + detail::mangle(kernel_name); }

CudaSource emit_cuda_source(const std::vector<loop::Kernel>& kernels) {
  CudaSource src;
  std::string code = detail::prelude();
  for (const loop::Kernel& k : kernels) {
    if (detail::contracts_in(k.body).empty()) continue;
    code += detail::mma_prelude();
    break;
  }
  std::set<std::string> symbols;
  for (const loop::Kernel& k : kernels) {
    loop::verify(k, loop::Target::Cuda);
    KernelSource info;
    code += "\n" + detail::KernelWriter(k).write(&info);
    TS_CHECK(symbols.insert(info.symbol).second, "cuda codegen: two kernels named ", k.name);
    src.kernels.push_back(std::move(info));
  }
  src.code = std::move(code);
  return src;
}

}  // namespace tessel::cuda
