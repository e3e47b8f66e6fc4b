#include "tessel/runtime/cpu_features.h"

#include <cpuid.h>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace tessel {

namespace {

enum Reg { EAX, EBX, ECX, EDX };
// Which register state a feature's instructions need the OS to save.
enum class State { None, Avx, Avx512 };

struct Bit {
  const char* name;
  uint32_t leaf, subleaf;
  Reg reg;
  int bit;
  State state;
};

// From the Intel SDM's CPUID tables (leaf 1, leaf 7 subleaves 0 and 1, leaf
// 0x80000001), named as LLVM names them.
constexpr Bit kBits[] = {
    {"cmov", 1, 0, EDX, 15, State::None},
    {"cx8", 1, 0, EDX, 8, State::None},
    {"fxsr", 1, 0, EDX, 24, State::None},
    {"mmx", 1, 0, EDX, 23, State::None},
    {"sse", 1, 0, EDX, 25, State::None},
    {"sse2", 1, 0, EDX, 26, State::None},
    {"sse3", 1, 0, ECX, 0, State::None},
    {"pclmul", 1, 0, ECX, 1, State::None},
    {"ssse3", 1, 0, ECX, 9, State::None},
    {"fma", 1, 0, ECX, 12, State::Avx},
    {"cx16", 1, 0, ECX, 13, State::None},
    {"sse4.1", 1, 0, ECX, 19, State::None},
    {"sse4.2", 1, 0, ECX, 20, State::None},
    {"movbe", 1, 0, ECX, 22, State::None},
    {"popcnt", 1, 0, ECX, 23, State::None},
    {"aes", 1, 0, ECX, 25, State::None},
    {"xsave", 1, 0, ECX, 26, State::None},
    {"avx", 1, 0, ECX, 28, State::Avx},
    {"f16c", 1, 0, ECX, 29, State::Avx},
    {"rdrnd", 1, 0, ECX, 30, State::None},
    {"bmi", 7, 0, EBX, 3, State::None},
    {"avx2", 7, 0, EBX, 5, State::Avx},
    {"bmi2", 7, 0, EBX, 8, State::None},
    {"avx512f", 7, 0, EBX, 16, State::Avx512},
    {"avx512dq", 7, 0, EBX, 17, State::Avx512},
    {"rdseed", 7, 0, EBX, 18, State::None},
    {"adx", 7, 0, EBX, 19, State::None},
    {"avx512ifma", 7, 0, EBX, 21, State::Avx512},
    {"avx512cd", 7, 0, EBX, 28, State::Avx512},
    {"sha", 7, 0, EBX, 29, State::None},
    {"avx512bw", 7, 0, EBX, 30, State::Avx512},
    {"avx512vl", 7, 0, EBX, 31, State::Avx512},
    {"avx512vbmi", 7, 0, ECX, 1, State::Avx512},
    {"avx512vbmi2", 7, 0, ECX, 6, State::Avx512},
    {"gfni", 7, 0, ECX, 8, State::None},
    {"vaes", 7, 0, ECX, 9, State::Avx},
    {"vpclmulqdq", 7, 0, ECX, 10, State::Avx},
    {"avx512vnni", 7, 0, ECX, 11, State::Avx512},
    {"avx512bitalg", 7, 0, ECX, 12, State::Avx512},
    {"avx512vpopcntdq", 7, 0, ECX, 14, State::Avx512},
    {"avx512fp16", 7, 0, EDX, 23, State::Avx512},
    {"avxvnni", 7, 1, EAX, 4, State::Avx},
    {"avx512bf16", 7, 1, EAX, 5, State::Avx512},
    {"lzcnt", 0x80000001, 0, ECX, 5, State::None},
    {"prfchw", 0x80000001, 0, ECX, 8, State::None},
};

bool query(uint32_t leaf, uint32_t subleaf, uint32_t out[4]) {
  const uint32_t max = __get_cpuid_max(leaf & 0x80000000u, nullptr);
  if (max < leaf) return false;
  __cpuid_count(leaf, subleaf, out[0], out[1], out[2], out[3]);
  return true;
}

// XCR0: which register states the OS saves on a context switch (XMM/YMM
// for AVX; also opmask, upper ZMM and ZMM16-31 for AVX-512).
uint64_t os_saved_state() {
  uint32_t r[4] = {};
  if (!query(1, 0, r) || !(r[ECX] & (1u << 27))) return 0;  // no OSXSAVE
  uint32_t lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (uint64_t(hi) << 32) | lo;
}

bool has(const Bit& b, uint64_t xcr0) {
  uint32_t r[4] = {};
  if (!query(b.leaf, b.subleaf, r) || !(r[b.reg] & (1u << b.bit))) return false;
  if (b.state == State::Avx) return (xcr0 & 0x6) == 0x6;
  if (b.state == State::Avx512) return (xcr0 & 0xe6) == 0xe6;
  return true;
}

}  // namespace

bool cpu_feature_detectable(std::string_view name) {
  return std::any_of(std::begin(kBits), std::end(kBits), [&](const Bit& b) { return name == b.name; });
}

std::string detected_cpu_features() {
  const uint64_t xcr0 = os_saved_state();
  std::vector<std::string> items;
  for (const Bit& b : kBits) items.push_back((has(b, xcr0) ? "+" : "-") + std::string(b.name));
  std::sort(items.begin(), items.end(),
            [](const std::string& a, const std::string& b) { return a.substr(1) < b.substr(1); });
  std::string out;
  for (const std::string& s : items) out += (out.empty() ? "" : ",") + s;
  return out;
}

}  // namespace tessel
