#include "tessel/codegen/cpu/pipeline.h"

#include <llvm/ADT/SmallString.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/raw_ostream.h>

#include "tessel/codegen/cpu/emitter.h"
#include "tessel/support/error.h"

namespace tessel::cpu::detail {

namespace {

// Calls back as each function passes the point of the optimisation pipeline
// it is added at (progress).
struct CountFunctions : llvm::PassInfoMixin<CountFunctions> {
  const std::function<void(const char*)>* on_function;
  const char* step;
  llvm::PreservedAnalyses run(llvm::Function&, llvm::FunctionAnalysisManager&) {
    (*on_function)(step);
    return llvm::PreservedAnalyses::all();
  }
  static bool isRequired() { return true; }
};

// The same for the legacy pass manager of code generation: added last, it
// runs as each function's machine code is done (the function passes run
// one function at a time).
struct CountEmittedFunctions : llvm::FunctionPass {
  static char ID;
  const std::function<void()>* on_function;
  explicit CountEmittedFunctions(const std::function<void()>* f) : llvm::FunctionPass(ID), on_function(f) {}
  bool runOnFunction(llvm::Function&) override {
    (*on_function)();
    return false;
  }
  void getAnalysisUsage(llvm::AnalysisUsage& au) const override { au.setPreservesAll(); }
  llvm::StringRef getPassName() const override { return "tessel: count emitted functions"; }
};
char CountEmittedFunctions::ID = 0;

}  // namespace

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

void optimize_module(llvm::Module& m, llvm::TargetMachine& tm, int opt_level,
                     const std::function<void(const char* step)>& on_function) {
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PassBuilder pb(&tm);
  if (on_function) {
    pb.registerScalarOptimizerLateEPCallback([&](llvm::FunctionPassManager& fpm, llvm::OptimizationLevel) {
      fpm.addPass(CountFunctions{{}, &on_function, "llvm simplify"});
    });
    pb.registerVectorizerStartEPCallback([&](llvm::FunctionPassManager& fpm, llvm::OptimizationLevel) {
      fpm.addPass(CountFunctions{{}, &on_function, "llvm vectorize"});
    });
  }
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

std::string emit_machine_code(llvm::Module& m, llvm::TargetMachine& tm, llvm::CodeGenFileType type,
                              const std::function<void()>& on_function) {
  llvm::SmallString<0> out;
  llvm::raw_svector_ostream os(out);
  llvm::legacy::PassManager pm;
  TS_CHECK(!tm.addPassesToEmitFile(pm, os, nullptr, type), "cpu codegen: the target cannot emit this file type");
  if (on_function) pm.add(new CountEmittedFunctions(&on_function));
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
