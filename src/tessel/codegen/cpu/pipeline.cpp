#include "tessel/codegen/cpu/pipeline.h"

#include <llvm/ADT/SmallString.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/raw_ostream.h>

#include "tessel/codegen/cpu/emitter.h"
#include "tessel/support/error.h"

namespace tessel::cpu::detail {

std::unique_ptr<llvm::Module> build_module(llvm::LLVMContext& ctx, const std::vector<loop::Kernel>& kernels,
                                           llvm::TargetMachine& tm) {
  auto m = std::make_unique<llvm::Module>("tessel_kernels", ctx);
  m->setTargetTriple(tm.getTargetTriple().str());
  m->setDataLayout(tm.createDataLayout());
  for (const loop::Kernel& k : kernels) {
    TS_CHECK(!k.name.empty(), "cpu codegen: a kernel has no name");
    KernelEmitter(*m, k).emit();
  }
  set_target(*m, tm);
  std::string problems;
  llvm::raw_string_ostream os(problems);
  // A broken module is a code generator bug; say where rather than crash later.
  TS_CHECK(!llvm::verifyModule(*m, &os), "cpu codegen: internal error, invalid LLVM IR: ", os.str());
  return m;
}

void set_target(llvm::Module& m, llvm::TargetMachine& tm) {
  m.setTargetTriple(tm.getTargetTriple().str());
  m.setDataLayout(tm.createDataLayout());
  for (llvm::Function& f : m) {
    if (f.isDeclaration()) continue;
    f.addFnAttr("target-cpu", tm.getTargetCPU());
    f.addFnAttr("target-features", tm.getTargetFeatureString());
    // Kernels spell their vector width out; without this, CPUs tuned to
    // prefer 256-bit vectors would split 512-bit operations in two.
    f.addFnAttr("min-legal-vector-width", "512");
  }
}

void optimize_module(llvm::Module& m, llvm::TargetMachine& tm, int opt_level) {
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PassBuilder pb(&tm);
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  const llvm::OptimizationLevel level = opt_level == 1   ? llvm::OptimizationLevel::O1
                                        : opt_level == 2 ? llvm::OptimizationLevel::O2
                                                         : llvm::OptimizationLevel::O3;
  llvm::ModulePassManager mpm =
      opt_level == 0 ? pb.buildO0DefaultPipeline(llvm::OptimizationLevel::O0) : pb.buildPerModuleDefaultPipeline(level);
  mpm.run(m, mam);
}

std::string emit_machine_code(llvm::Module& m, llvm::TargetMachine& tm, llvm::CodeGenFileType type) {
  llvm::SmallString<0> out;
  llvm::raw_svector_ostream os(out);
  llvm::legacy::PassManager pm;
  TS_CHECK(!tm.addPassesToEmitFile(pm, os, nullptr, type), "cpu codegen: the target cannot emit this file type");
  pm.run(m);
  return std::string(out.str());
}

std::string module_text(const llvm::Module& m) {
  std::string text;
  llvm::raw_string_ostream os(text);
  m.print(os, nullptr);
  return os.str();
}

}  // namespace tessel::cpu::detail
