#include "tessel/codegen/cpu/target.h"

#include <algorithm>
#include <mutex>
#include <vector>

#include <llvm/ADT/StringMap.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/TargetParser/Host.h>
#include <llvm/TargetParser/X86TargetParser.h>

#include "tessel/support/error.h"

namespace tessel::cpu {

namespace detail {

void init_llvm() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    llvm::InitializeNativeTargetAsmParser();
  });
}

ResolvedTarget resolve_target(const CodegenOptions& o) {
  TS_CHECK(o.opt_level >= 0 && o.opt_level <= 3, "cpu codegen: opt_level must be 0..3, got ", o.opt_level);
  ResolvedTarget t;
  t.triple = llvm::sys::getProcessTriple();
  t.cpu = o.cpu == "host" ? host_cpu_name() : o.cpu;
  t.features = o.features == "host" ? host_cpu_features() : o.features;
  t.opt_level = o.opt_level;
  return t;
}

std::unique_ptr<llvm::TargetMachine> make_target_machine(const ResolvedTarget& t) {
  init_llvm();
  std::string error;
  const llvm::Target* target = llvm::TargetRegistry::lookupTarget(t.triple, error);
  TS_CHECK(target != nullptr, "cpu codegen: no LLVM target for ", t.triple, ": ", error);
  llvm::TargetOptions options;
  const llvm::CodeGenOptLevel level = t.opt_level == 0   ? llvm::CodeGenOptLevel::None
                                      : t.opt_level == 1 ? llvm::CodeGenOptLevel::Less
                                      : t.opt_level == 2 ? llvm::CodeGenOptLevel::Default
                                                         : llvm::CodeGenOptLevel::Aggressive;
  // PIC small code model: the object loader (runtime/object_loader.h)
  // reaches the runtime functions through stubs and a GOT, wherever its
  // mapping lands, and resolves only PC-relative and absolute relocations.
  std::unique_ptr<llvm::TargetMachine> tm(target->createTargetMachine(
      t.triple, t.cpu, t.features, options, llvm::Reloc::PIC_, llvm::CodeModel::Small, level));
  TS_CHECK(tm != nullptr, "cpu codegen: LLVM could not make a target machine for ", t.triple, " ", t.cpu);
  return tm;
}

}  // namespace detail

std::string host_cpu_name() { return llvm::sys::getHostCPUName().str(); }

// SSE4a stays off: LLVM uses its INSERTQ to build vector masks, and on the
// Zen 3 this was measured on a 1x64x56x56 Pad kernel ran 0.465 ms with it
// and 0.040 ms without (llc -mattr=-sse4a on the same IR); nothing tessel
// generates needs it.
std::string host_cpu_features() {
  std::vector<std::string> items;
  for (const auto& f : llvm::sys::getHostCPUFeatures())
    items.push_back((f.second && f.first() != "sse4a" ? "+" : "-") + f.first().str());
  std::sort(items.begin(), items.end(), [](const std::string& a, const std::string& b) {
    return a.substr(1) < b.substr(1);
  });
  std::string out;
  for (const std::string& s : items) out += (out.empty() ? "" : ",") + s;
  return out;
}

std::string cpu_features_for(const std::string& cpu) {
  if (cpu == "host") return host_cpu_features();
  TS_CHECK(llvm::X86::parseArchX86(cpu, /*Only64Bit=*/true) != llvm::X86::CK_None, "--cpu ", cpu,
           ": not an x86-64 CPU name LLVM knows (e.g. x86-64-v2, x86-64-v3, x86-64-v4, skylake-avx512, znver4)");
  llvm::SmallVector<llvm::StringRef, 64> direct;
  llvm::X86::getFeaturesForCPU(cpu, direct);
  // With what they imply (avx512bw -> avx512f -> avx2 -> ...), as the host's
  // list has them: the schedules and the loader's check read single names.
  llvm::StringMap<bool> implied;
  for (llvm::StringRef f : direct) {
    implied[f] = true;
    llvm::X86::updateImpliedFeatures(f, true, implied);
  }
  std::vector<std::string> items;
  for (const auto& f : implied)
    if (f.second && f.first() != "sse4a") items.push_back("+" + f.first().str());  // sse4a off, as on the host
  std::sort(items.begin(), items.end(), [](const std::string& a, const std::string& b) {
    return a.substr(1) < b.substr(1);
  });
  std::string out;
  for (const std::string& s : items) out += (out.empty() ? "" : ",") + s;
  return out;
}

}  // namespace tessel::cpu
