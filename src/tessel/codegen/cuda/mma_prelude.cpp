// The device helpers the tensor-core GEMM kernels call (emitter.h:
// mma_prelude, wgmma_prelude): mma.sync, tf32 splitting, ldmatrix, cp.async;
// on sm_90a wgmma, matrix descriptors, mbarriers and the TMA.
#include <string>

#include "tessel/codegen/cuda/emitter.h"
#include "tessel/support/error.h"

namespace tessel::cuda::detail {

const char* mma_prelude() {
  return R"(
// ---- tensor-core GEMM helpers (codegen/cuda/mma_gemm.h) ----
// d += a * b on one 16x8 tile; fragments as the PTX ISA lays them out.
TS_D void ts_mma_bf16(float* d, const unsigned* a, const unsigned* b) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
TS_D void ts_mma_f16(float* d, const unsigned* a, const unsigned* b) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
TS_D void ts_mma_tf32(float* d, const unsigned* a, const unsigned* b) {
  asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
// x rounded to tf32 (nearest, ties away), as a 32-bit pattern.
TS_D unsigned ts_tf32(float x) {
  unsigned r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return r;
}
// The tf32 rounding of x - big (exact in f32), the second part of 3xTF32;
// 0 when big is infinite or NaN (x - big would be NaN: inf * finite stays inf).
TS_D unsigned ts_tf32_small(float x, unsigned big) {
  const float hi = __uint_as_float(big);
  return fabsf(hi) < __uint_as_float(0x7f800000u) ? ts_tf32(x - hi) : 0u;
}
// Two values exactly representable in bf16 / f16, packed low k first.
TS_D unsigned ts_pack_bf16(float lo, float hi) {
  return (__float_as_uint(lo) >> 16) | (__float_as_uint(hi) & 0xffff0000u);
}
TS_D unsigned ts_pack_f16(float lo, float hi) {
  return (unsigned)ts_f2h(lo) | ((unsigned)ts_f2h(hi) << 16);
}
// ldmatrix: lane l gives row l % 8 of matrix l / 8 (x2: lanes 0-15).
TS_D unsigned ts_smem_addr(const void* p) {
  unsigned a;
  asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(a) : "l"(p));
  return a;
}
TS_D void ts_ldsm_x4(unsigned* d, const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3]) : "r"(ts_smem_addr(row)));
}
TS_D void ts_ldsm_x2(unsigned* d, const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];" : "=r"(d[0]), "=r"(d[1]) : "r"(ts_smem_addr(row)));
}
TS_D void ts_ldsm_x2_trans(unsigned* d, const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];"
               : "=r"(d[0]), "=r"(d[1]) : "r"(ts_smem_addr(row)));
}
TS_D void ts_ldsm_x4_trans(unsigned* d, const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3]) : "r"(ts_smem_addr(row)));
}
// Eight halves, for 16-byte loads and stores.
struct __align__(16) ts_u4 { unsigned x, y, z, w; };
// Two accumulators, for 8-byte shared stores.
struct __align__(8) ts_f2 { float x, y; };
// 16 bytes global -> byte `off` of the shared array `base`, without
// registers (zeros when !full; the source must still be a valid address);
// completes by commit group.
TS_D void ts_cp16_at(unsigned char* base, unsigned off, const void* gmem, bool full) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(ts_smem_addr(base) + off), "l"(gmem),
               "r"(full ? 16 : 0) : "memory");
}
TS_D void ts_cp_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N> TS_D void ts_cp_wait() { asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory"); }
)";
}

// One wgmma.mma_async.m64nNk16 with f32 accumulators d[0 .. N / 2), added
// to d (scale-d = 1; the shared-A form's optional last argument 0 makes the
// product overwrite d, which then needs no zeroing); B from shared memory,
// K-major (trans_b = 0) or N-major (1). A from shared memory, K-major
// (imm-trans-a = 0): ts_wgmma_<type>_n<N>_t<trans_b>(d, a descriptor, b
// descriptor[, scale_d]); or,
// `a_regs`, from registers (a[0..3]: the warp's 16 rows of the 64 x 16 tile
// in mma.sync's A fragment layout; no imm-trans-a then):
// ts_wgmma_rs_<type>_n<N>_t<trans_b>(d, a, b descriptor).
static std::string wgmma_helper(int n, const char* type, int trans_b, bool a_regs) {
  const int regs = n / 2;  // the accumulators are operands %0 .. %(regs - 1)
  std::string accs, outs;
  for (int i = 0; i < regs; ++i) {
    accs += str_cat(i ? ", " : "", "%", i);
    outs += str_cat(i ? ", " : "", "\"+f\"(d[", i, "])");
  }
  const int b_at = a_regs ? regs + 4 : regs + 1;  // then the scale-d flag
  const std::string a_operand =
      a_regs ? str_cat("{%", regs, ", %", regs + 1, ", %", regs + 2, ", %", regs + 3, "}") : str_cat("%", regs);
  return str_cat("TS_D void ts_wgmma_", a_regs ? "rs_" : "", type, "_n", n, "_t", trans_b, "(float* d, ",
                 a_regs ? "const unsigned* a" : "unsigned long long a", ", unsigned long long b",
                 a_regs ? "" : ", int scale_d = 1", ") {\n",
                 "  asm volatile(\"{ .reg .pred p; setp.ne.b32 p, %", b_at + 1,
                 ", 0; wgmma.mma_async.sync.aligned.m64n", n, "k16.f32.", type, ".", type, " {", accs, "}, ",
                 a_operand, ", %", b_at, ", p, 1, 1, ", a_regs ? "" : "0, ", trans_b, "; }\"\n      : ", outs,
                 "\n      : ", a_regs ? "\"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3])" : "\"l\"(a)",
                 ", \"l\"(b), \"r\"(", a_regs ? "1" : "scale_d", ") : \"memory\");\n}\n");
}

const std::string& wgmma_prelude() {
  static const std::string text = [] {
    std::string t = R"(
// ---- Hopper warpgroup GEMM helpers (codegen/cuda/mma_gemm.h, sm_90a) ----
// Shared memory written by the generic proxy (cp.async included) must be
// fenced before the async proxy (wgmma) reads it.
TS_D void ts_fence_async_smem() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }
TS_D void ts_wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
TS_D void ts_wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
TS_D void ts_wgmma_wait0() { asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory"); }
TS_D void ts_wgmma_wait1() { asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory"); }
// Matrix descriptors (PTX ISA, "Matrix Descriptor Format") of 128-byte
// swizzled tiles at shared address a: start address >> 4 (bits 0-13),
// leading byte offset >> 4 (bits 16-29), stride byte offset >> 4 (bits
// 32-45), swizzle mode 1 = 128 bytes (bits 62-63). K-major: the stride is
// 1024 bytes between 8-row groups; the leading offset is unused (1 by
// convention). N-major (B stored [K, N]): 64-column blocks of 64 k rows,
// the leading offset between blocks (64 * 128 bytes), the stride between
// groups of 8 k.
TS_D unsigned long long ts_wdesc(unsigned a) {
  return (unsigned long long)((a & 0x3FFFFu) >> 4) | (1ull << 16) | (64ull << 32) | (1ull << 62);
}
TS_D unsigned long long ts_wdesc_n(unsigned a) {
  return (unsigned long long)((a & 0x3FFFFu) >> 4) | (512ull << 16) | (64ull << 32) | (1ull << 62);
}

// ---- TMA, mbarriers, warp specialisation (tma_gemm.cpp) ----
struct __align__(64) ts_tmap { unsigned long long v[16]; };  // a CUtensorMap
TS_D void ts_mbar_init(unsigned bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
// The barriers' initialisation visible to the async proxy (the TMA).
TS_D void ts_mbar_fence_init() { asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory"); }
TS_D void ts_mbar_expect_tx(unsigned bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}
TS_D void ts_mbar_arrive(unsigned bar) { asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory"); }
// An arrival on `bar` once every cp.async this thread issued so far has
// landed (counted among the barrier's expected arrivals: .noinc).
TS_D void ts_cp_mbar_arrive(unsigned bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(bar) : "memory");
}
// Spins until the phase of parity `parity` has completed (a fresh barrier
// counts its phase before the first as completed with parity 1).
TS_D void ts_mbar_wait(unsigned bar, unsigned parity) {
  asm volatile(
      "{ .reg .pred p;\n"
      "ts_mbar_wait_loop:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
      "@!p bra ts_mbar_wait_loop;\n"
      "}" ::"r"(bar), "r"(parity) : "memory");
}
TS_D void ts_tma_2d(unsigned dst, const ts_tmap* map, unsigned bar, int c0, int c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];"
      ::"r"(dst), "l"(map), "r"(bar), "r"(c0), "r"(c1) : "memory");
}
TS_D void ts_tma_3d(unsigned dst, const ts_tmap* map, unsigned bar, int c0, int c1, int c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5}], [%2];"
      ::"r"(dst), "l"(map), "r"(bar), "r"(c0), "r"(c1), "r"(c2) : "memory");
}
// A barrier of `n` threads (a multiple of 32) with id 1-15 (0 is __syncthreads).
TS_D void ts_bar_sync(int id, int n) { asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(n) : "memory"); }
template <int N> TS_D void ts_setmaxnreg_inc() { asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(N)); }
template <int N> TS_D void ts_setmaxnreg_dec() { asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(N)); }
)";
    for (const char* type : {"bf16", "f16"})
      for (int n : {64, 128, 256})
        for (int trans_b : {0, 1}) t += wgmma_helper(n, type, trans_b, false);
    // Flash attention's P V: P from registers, V N-major.
    for (const char* type : {"bf16", "f16"})
      for (int n : {64, 128, 256}) t += wgmma_helper(n, type, 1, true);
    return t;
  }();
  return text;
}

}  // namespace tessel::cuda::detail
