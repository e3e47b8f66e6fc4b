// The code generator's entry points: the pipeline
//   loop IR -> LLVM module (emitter) -> optimisation -> object -> loaded (runtime/object_loader.h),
// with the on-disk cache in front of everything after key computation.
#include "tessel/codegen/cpu/cpu_codegen.h"

#include <cstdio>

#include <llvm/AsmParser/Parser.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/Support/SourceMgr.h>

#include "tessel/codegen/cpu/cache.h"
#include "tessel/codegen/cpu/library.h"
#include "tessel/codegen/cpu/pipeline.h"
#include "tessel/codegen/cpu/target.h"
#include "tessel/support/error.h"
#include "tessel/support/phase_timer.h"

namespace tessel::cpu {

namespace {

using detail::ResolvedTarget;

// Loop IR -> optimised module -> object or assembly, with o's progress
// callbacks (one kernel is one function).
std::string compile_to(const std::vector<loop::Kernel>& kernels, const ResolvedTarget& t, llvm::CodeGenFileType type,
                       const CodegenOptions& o) {
  auto tm = detail::make_target_machine(t);
  llvm::LLVMContext ctx;
  PhaseTimer build("llvm build module");
  auto m = detail::build_module(ctx, kernels, *tm);
  build.stop();
  // A step starts when its first kernel gets there (each pipeline takes the
  // functions one after another), or before, where its first kernel would
  // take long to arrive.
  std::string step;
  auto start = [&](const char* s) {
    step = s;
    if (o.on_step) o.on_step(s, kernels.size());
  };
  auto reached = [&](const char* s) {
    if (step != s) start(s);
    if (o.on_kernel) o.on_kernel();
  };
  const bool progress = o.on_step || o.on_kernel;
  start("llvm simplify");
  PhaseTimer opt("llvm optimize");
  detail::optimize_module(*m, *tm, t.opt_level, progress ? std::function<void(const char*)>(reached) : nullptr);
  opt.stop();
  start("llvm emit");
  PhaseTimer emit("llvm emit");
  return detail::emit_machine_code(*m, *tm, type,
                                   progress ? std::function<void()>([&] { reached("llvm emit"); }) : nullptr);
}

}  // namespace

std::unique_ptr<KernelLibrary> compile_kernels(const std::vector<loop::Kernel>& kernels, const CodegenOptions& o) {
  const ResolvedTarget t = detail::resolve_target(o);
  const bool use_cache = !o.cache_dir.empty();
  std::string key;
  if (use_cache) {
    PhaseTimer hash("hash kernels for the cache key");
    key = detail::cache_key(o, t, kernels);
    hash.stop();
    if (std::optional<std::string> cached = detail::cache_read(o.cache_dir, key)) {
      try {
        return detail::load_object_file(std::move(*cached), true);
      } catch (const Error& e) {
        std::fprintf(stderr, "warning: kernel cache: %s unusable, recompiling: %s\n",
                     detail::cache_path(o.cache_dir, key).c_str(), e.what());
      }
    }
  }
  std::string object = compile_to(kernels, t, llvm::CodeGenFileType::ObjectFile, o);
  if (use_cache) detail::cache_write(o.cache_dir, key, object);
  return detail::load_object_file(std::move(object), false);
}

std::unique_ptr<KernelLibrary> load_object(const std::string& object_bytes) {
  return detail::load_object_file(object_bytes, false);
}

std::string emit_llvm_ir(const std::vector<loop::Kernel>& kernels, const CodegenOptions& o) {
  const ResolvedTarget t = detail::resolve_target(o);
  auto tm = detail::make_target_machine(t);
  llvm::LLVMContext ctx;
  auto m = detail::build_module(ctx, kernels, *tm);
  if (t.opt_level > 0) detail::optimize_module(*m, *tm, t.opt_level);
  return detail::module_text(*m);
}

std::string emit_asm(const std::vector<loop::Kernel>& kernels, const CodegenOptions& o) {
  return compile_to(kernels, detail::resolve_target(o), llvm::CodeGenFileType::AssemblyFile, o);
}

std::unique_ptr<KernelLibrary> compile_llvm_ir_text(const std::string& ir_text, const CodegenOptions& o) {
  const ResolvedTarget t = detail::resolve_target(o);
  auto tm = detail::make_target_machine(t);
  llvm::LLVMContext ctx;
  llvm::SMDiagnostic diag;
  std::unique_ptr<llvm::Module> m = llvm::parseAssemblyString(ir_text, diag, ctx);
  TS_CHECK(m != nullptr, "cpu codegen: LLVM IR text, line ", diag.getLineNo(), ": ", diag.getMessage().str());
  detail::set_target(*m, *tm);
  detail::optimize_module(*m, *tm, t.opt_level);
  return detail::load_object_file(detail::emit_machine_code(*m, *tm, llvm::CodeGenFileType::ObjectFile), false);
}

}  // namespace tessel::cpu
