// Internals of the CUDA C++ emitter (cuda_source.h); not a public interface.
#pragma once

#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tessel/codegen/cuda/cuda_source.h"
#include "tessel/codegen/cuda/mma_gemm.h"
#include "tessel/loop/ir.h"

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
class ExprEmitter {
 public:
  // Row-major strides of a buffer, as C expressions (innermost "1").
  void add_buffer(const loop::Buffer* b, std::vector<std::string> strides) { strides_[b] = std::move(strides); }
  void remove_buffer(const loop::Buffer* b) { strides_.erase(b); }
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
  std::map<const loop::Buffer*, std::vector<std::string>> strides_;
};

// What the tensor-core GEMM emitter (mma_gemm.cpp) needs from the kernel
// writer: lines at the current indentation, the statement emitter (for the
// epilogue) and the expression emitter.
class CodeSink {
 public:
  virtual ~CodeSink() = default;
  virtual void line(const std::string& text) = 0;
  virtual void indent(int delta) = 0;
  virtual void stmt(const loop::Stmt& s) = 0;
  virtual ExprEmitter& expr() = 0;
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

}  // namespace tessel::cuda::detail
