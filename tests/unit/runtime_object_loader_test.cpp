// The runtime's object loader (runtime/object_loader.h) and CPUID feature
// detection (runtime/cpu_features.h): objects LLVM emits load and run, with
// their constant pools (PC32), runtime calls through stubs (PLT32) and code
// mapped read+execute only; damaged, foreign and hostile objects are one
// tessel::Error; CPUID agrees with LLVM's host detection.
#include <gtest/gtest.h>

#include <elf.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <vector>

#include "tessel/runtime/cpu_features.h"
#include "tessel/runtime/object_loader.h"
#include "tessel/support/error.h"
#ifdef TESSEL_HAVE_CODEGEN_CPU
#include "tessel/codegen/cpu/cpu_codegen.h"
#endif

namespace tessel {
namespace {

// The message of the Error loading `bytes` throws ("" when it loads).
std::string load_error(const std::string& bytes) {
  try {
    LoadedObject o(bytes);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(ObjectLoader, RejectsWhatIsNotAnX86Object) {
  EXPECT_NE(load_error("").find("corrupt kernel object (ELF header"), std::string::npos) << load_error("");
  EXPECT_NE(load_error(std::string(64, 'x')).find("not an ELF file"), std::string::npos);
  Elf64_Ehdr h{};
  std::memcpy(h.e_ident, ELFMAG, SELFMAG);
  h.e_ident[EI_CLASS] = ELFCLASS64;
  h.e_ident[EI_DATA] = ELFDATA2LSB;
  h.e_type = ET_REL;
  h.e_machine = EM_AARCH64;
  const std::string arm(reinterpret_cast<const char*>(&h), sizeof h);
  EXPECT_NE(load_error(arm).find("compiled for another machine"), std::string::npos) << load_error(arm);
  h.e_machine = EM_X86_64;
  h.e_type = ET_DYN;
  const std::string so(reinterpret_cast<const char*>(&h), sizeof h);
  EXPECT_NE(load_error(so).find("not a relocatable object"), std::string::npos) << load_error(so);
  h.e_type = ET_REL;
  h.e_shnum = 3;
  h.e_shentsize = sizeof(Elf64_Shdr);
  h.e_shoff = 1u << 30;  // a section table past the end
  const std::string far(reinterpret_cast<const char*>(&h), sizeof h);
  EXPECT_NE(load_error(far).find("section table at bytes"), std::string::npos) << load_error(far);
}

#ifdef TESSEL_HAVE_CODEGEN_CPU
// out[0] = fmodf(in[0], 3.5) + 1.25 after zeroing syms[0] bytes of out: a
// constant-pool load, a call to fmodf and one to memset (its length is only
// known at run time, so LLVM cannot inline it).
constexpr const char* kKernelIr = R"(
declare float @fmodf(float, float)
declare void @llvm.memset.p0.i64(ptr, i8, i64, i1)
define i32 @k(ptr %bufs, ptr %syms, i64 %b, i64 %e) {
entry:
  %in = load ptr, ptr %bufs
  %outp = getelementptr ptr, ptr %bufs, i64 1
  %out = load ptr, ptr %outp
  %n = load i64, ptr %syms
  call void @llvm.memset.p0.i64(ptr %out, i8 0, i64 %n, i1 false)
  %x = load float, ptr %in
  %m = call float @fmodf(float %x, float 3.5)
  %r = fadd float %m, 1.25
  %last = getelementptr float, ptr %out, i64 3
  store float %r, ptr %last
  ret i32 7
}
)";

std::string kernel_object(const std::string& ir) {
  return cpu::compile_llvm_ir_text(ir, {})->object_file_bytes();
}

using Kernel = int32_t (*)(void* const*, const int64_t*, int64_t, int64_t);

int32_t call(const LoadedObject& o, std::vector<float>& in, std::vector<float>& out, int64_t zero_bytes) {
  auto k = reinterpret_cast<Kernel>(o.lookup("k"));
  EXPECT_NE(k, nullptr);
  void* bufs[] = {in.data(), out.data()};
  const int64_t syms[] = {zero_bytes};
  return k ? k(bufs, syms, 0, 1) : -1;
}

TEST(ObjectLoader, RunsLlvmObjectsWithConstantsAndRuntimeCalls) {
  const LoadedObject o(kernel_object(kKernelIr));
  EXPECT_EQ(o.functions().size(), 1u);
  EXPECT_EQ(o.lookup("fmodf"), nullptr);  // runtime functions are not the object's
  std::vector<float> in = {10.0f}, out(1024, 7.0f);
  EXPECT_EQ(call(o, in, out, 2 * sizeof(float)), 7);
  EXPECT_EQ(out[0], 0.0f);
  EXPECT_EQ(out[1], 0.0f);
  EXPECT_EQ(out[2], 7.0f);  // past the zeroed bytes
  EXPECT_EQ(out[3], std::fmod(10.0f, 3.5f) + 1.25f);
}

// The permissions of the mapping that holds `p`, from /proc/self/maps ("r-xp").
std::string permissions_at(const void* p) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  const auto a = reinterpret_cast<uintptr_t>(p);
  while (std::getline(maps, line)) {
    std::istringstream is(line);
    uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::string perms;
    is >> std::hex >> lo >> dash >> hi >> perms;
    if (a >= lo && a < hi) return perms;
  }
  return "";
}

TEST(ObjectLoader, CodeIsExecutableAndNeverWritable) {
  const LoadedObject o(kernel_object(kKernelIr));
  EXPECT_EQ(permissions_at(o.lookup("k")), "r-xp");
}

TEST(ObjectLoader, UnknownRuntimeSymbolsAreRefused) {
  const std::string ir = R"(
declare i32 @puts(ptr)
define i32 @k(ptr %bufs, ptr %syms, i64 %b, i64 %e) {
  %p = load ptr, ptr %bufs
  %r = call i32 @puts(ptr %p)
  ret i32 %r
}
)";
  // compile_llvm_ir_text loads the object too: the same loader refuses it.
  try {
    kernel_object(ir);
    ADD_FAILURE() << "an object calling puts loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("calls 'puts', which the tessel runtime does not provide"), std::string::npos)
        << e.what();
  }
}

TEST(ObjectLoader, TruncatedObjectsGiveOneClearError) {
  const std::string good = kernel_object(kKernelIr);
  for (size_t n = 0; n < good.size(); n += std::max<size_t>(1, good.size() / 97)) {
    const std::string why = load_error(good.substr(0, n));
    // The section table is at the end: every cut loses it.
    EXPECT_NE(why.find("corrupt kernel object"), std::string::npos) << n << ": " << why;
  }
}

// A relocation pointing outside its section, and one of a type the loader
// does not link, each found in the object's first relocation.
TEST(ObjectLoader, HostileRelocationsAreRefused) {
  const std::string good = kernel_object(kKernelIr);
  Elf64_Ehdr h;
  std::memcpy(&h, good.data(), sizeof h);
  size_t rela = 0;
  for (size_t i = 0; i < h.e_shnum; ++i) {
    Elf64_Shdr s;
    std::memcpy(&s, good.data() + h.e_shoff + i * sizeof s, sizeof s);
    if (s.sh_type == SHT_RELA && s.sh_size > 0) rela = s.sh_offset;
  }
  ASSERT_NE(rela, 0u) << "the kernel object has no relocations";
  std::string far = good;
  const uint64_t offset = uint64_t(1) << 40;
  std::memcpy(far.data() + rela + offsetof(Elf64_Rela, r_offset), &offset, 8);
  EXPECT_NE(load_error(far).find("outside section"), std::string::npos) << load_error(far);
  std::string tls = good;
  uint64_t info;
  std::memcpy(&info, tls.data() + rela + offsetof(Elf64_Rela, r_info), 8);
  info = ELF64_R_INFO(ELF64_R_SYM(info), R_X86_64_TPOFF32);
  std::memcpy(tls.data() + rela + offsetof(Elf64_Rela, r_info), &info, 8);
  EXPECT_NE(load_error(tls).find("relocation type 23 is not supported"), std::string::npos) << load_error(tls);
  uint64_t sym_far = ELF64_R_INFO(1u << 30, R_X86_64_PC32);
  std::string bad_sym = good;
  std::memcpy(bad_sym.data() + rela + offsetof(Elf64_Rela, r_info), &sym_far, 8);
  EXPECT_NE(load_error(bad_sym).find("relocation of symbol"), std::string::npos) << load_error(bad_sym);
}

// Random damage anywhere: every load either links or throws tessel::Error
// (under ASan in the fuzz build; the loader's fuzz target goes further).
TEST(ObjectLoader, RandomDamageNeverCrashes) {
  const std::string good = kernel_object(kKernelIr);
  std::mt19937 rng(7);
  int refused = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string bad = good;
    for (int flips = 1 + int(rng() % 4); flips > 0; --flips) bad[rng() % bad.size()] = char(rng());
    refused += load_error(bad).empty() ? 0 : 1;
  }
  EXPECT_GT(refused, 0);
}

// CPUID detection agrees with LLVM's host detection on every feature both know.
TEST(CpuFeatures, AgreeWithLlvmHostDetection) {
  const std::string ours = detected_cpu_features(), llvm = cpu::host_cpu_features();
  int compared = 0;
  std::istringstream items(ours);
  std::string item;
  while (std::getline(items, item, ',')) {
    const std::string name = item.substr(1);
    ASSERT_TRUE(cpu_feature_detectable(name));
    const bool in_on = ("," + llvm + ",").find(",+" + name + ",") != std::string::npos;
    const bool in_off = ("," + llvm + ",").find(",-" + name + ",") != std::string::npos;
    if (!in_on && !in_off) continue;  // a name LLVM 19 does not list on this host
    EXPECT_EQ(item[0] == '+', in_on) << name << ": CPUID says " << item[0] << ", LLVM " << (in_on ? '+' : '-');
    ++compared;
  }
  EXPECT_GE(compared, 30) << ours << "\n" << llvm;
  EXPECT_FALSE(cpu_feature_detectable("sse4a"));  // the code generator keeps it off (codegen/cpu/target.cpp)
}

// compile --cpu: an LLVM CPU name's features, with the ones they imply.
TEST(CpuFeatures, NamedCpusListWhatTheyImply) {
  const std::string v3 = "," + cpu::cpu_features_for("x86-64-v3") + ",";
  for (const char* f : {",+avx2,", ",+avx,", ",+fma,", ",+sse4.1,", ",+bmi2,"}) EXPECT_NE(v3.find(f), std::string::npos) << f << v3;
  EXPECT_EQ(v3.find("avx512"), std::string::npos) << v3;
  const std::string v4 = "," + cpu::cpu_features_for("x86-64-v4") + ",";
  for (const char* f : {",+avx512f,", ",+avx512bw,", ",+avx2,"}) EXPECT_NE(v4.find(f), std::string::npos) << f << v4;
  EXPECT_EQ(cpu::cpu_features_for("host"), cpu::host_cpu_features());
  EXPECT_THROW(cpu::cpu_features_for("pentium9"), Error);
}
#endif

}  // namespace
}  // namespace tessel
