// Contract statements as tensor-core GEMMs (codegen/cuda/mma_gemm.h)
// without a GPU: the plan (precision, tiles, load order), the launch
// geometry, what the emitter refuses, NVRTC compilation for sm_90a of every
// variant (bf16, f16, 3xTF32; lowered MatMul, Gemm, attention and Conv
// groups), and the generated code run on the host through an emulation of
// the CUDA threads and of mma.sync's fragment layouts (cuda_host_emulation.h),
// compared with the loop IR evaluator.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <unistd.h>

#include "../gpu/mma_test_kernels.h"
#include "cuda_test_util.h"
#include "tessel/codegen/cuda/cuda_source.h"
#include "tessel/codegen/cuda/emitter.h"
#include "tessel/codegen/cuda/mma_gemm.h"
#include "tessel/codegen/cuda/nvrtc.h"
#include "tessel/codegen/cuda/tensor_map.h"
#include "tessel/ir/builder.h"
#include "tessel/loop/printer.h"
#include "tessel/loop/visit.h"
#include "tessel/lower/lower_gpu.h"
#include "tessel/ops/registry.h"
#include "tessel/passes/fusion.h"
#include "tessel/passes/pass_manager.h"

namespace tessel::cuda {
namespace {

using namespace tessel::mma_testing;  // NOLINT
using tessel::cuda::testing::expect_rejected;

const loop::StmtNode& contract_of(const loop::Kernel& k) {
  const loop::StmtNode* found = nullptr;
  loop::visit_stmt(k.body, [&](const loop::Stmt& s) {
    if (s->kind == loop::StmtKind::Contract) found = s.node.get();
  }, [](const loop::Expr&) {});
  TS_CHECK(found, "no contract in ", k.name);
  return *found;
}

// wgmma with the cp.async pipeline (tma_target: the warp-specialised TMA kernel).
GemmTarget hopper_target(int64_t fill_blocks = 120) {
  GemmTarget t;
  t.wgmma = true;
  t.tma = false;
  t.fill_blocks = fill_blocks;
  return t;
}

GemmTarget tma_target(int64_t fill_blocks = 120) {
  GemmTarget t = hopper_target(fill_blocks);
  t.tma = true;
  return t;
}

MmaPlan plan_of(const GemmCase& c, const GemmTarget& target = {}) {
  return plan_mma_gemm(contract_of(gemm_case_kernel(c)), target);
}

// ---- the plan ------------------------------------------------------------------------------

TEST(MmaPlan, PrecisionFromTheOperands) {
  EXPECT_EQ(plan_of({"p", DType::BF16, 1, 200, 64, 64}).precision, MmaPrecision::Bf16);
  EXPECT_EQ(plan_of({"p", DType::F16, 1, 200, 64, 64}).precision, MmaPrecision::F16);
  EXPECT_EQ(plan_of({"p", DType::F32, 1, 200, 64, 64}).precision, MmaPrecision::Tf32x3);
  // A bf16 activation against f32 weights, or an operand that is not just a
  // converted load: f32.
  const loop::Kernel mixed = loop::parse_kernel(
      "kernel m(in %a: bf16[8, 8], in %b: f32[8, 8], out %o: f32[8, 8]) {\n"
      "  contract bb in [0, 1), i in [0, 8), j in [0, 8), k in [0, 8): acc = dot(cast<f32>(a[i, k]), b[k, j]) {\n"
      "    o[i, j] = acc\n  }\n}\n");
  EXPECT_EQ(plan_mma_gemm(contract_of(mixed)).precision, MmaPrecision::Tf32x3);
  // The implicit GEMM's padding select keeps bf16 values bf16.
  EXPECT_TRUE(exact_in(loop::select(loop::bool_imm(true), loop::cast(DType::F32, loop::var("x", DType::BF16)),
                                    loop::float_imm(DType::F32, 0)),
                       DType::BF16));
  EXPECT_FALSE(exact_in(loop::float_imm(DType::F32, 0.1), DType::BF16));
  EXPECT_FALSE(exact_in(loop::cast(DType::F32, loop::var("x", DType::F16)), DType::BF16));
}

std::string tile_of(const GemmCase& c) {
  const MmaPlan p = plan_of(c);
  const MmaTiles& t = p.tiles;
  return str_cat(t.bm, "x", t.bn, "x", t.bk, "/", t.threads(), p.async_copy ? str_cat(" cp.async x", p.stages) : "");
}

// The largest tile that still fills about one block per multiprocessor;
// rows no more than M needs; 64-wide K steps for long K when the stages fit
// (two in 48 KiB static, or three of the cp.async pipeline in 112 KiB). Both
// operands plain aligned halves (the GemmCase layouts with sizes divisible
// by 8): the cp.async pipeline, 4 stages for 32-wide K steps.
TEST(MmaPlan, TilesFillTheMachine) {
  EXPECT_EQ(tile_of({"p", DType::BF16, 1, 4096, 4096, 64}), "128x128x32/256 cp.async x4");  // 1024 blocks
  EXPECT_EQ(tile_of({"p", DType::BF16, 1, 4096, 4096, 4096}), "128x128x64/256 cp.async x3");
  EXPECT_EQ(tile_of({"p", DType::BF16, 120, 100, 80, 64}), "128x128x32/256 cp.async x4");  // 120 blocks
  // N <= 64 (attention's P V): no 128-wide tiles.
  EXPECT_EQ(tile_of({"p", DType::BF16, 192, 128, 64, 128}), "128x64x32/128 cp.async x4");
  // BERT at batch 1: 128 x 768 x 768 is 6 blocks in 128 x 128 tiles.
  EXPECT_EQ(tile_of({"p", DType::BF16, 1, 128, 768, 768}), "32x32x64/128 cp.async x4");  // 96 blocks, the smallest
  EXPECT_EQ(tile_of({"p", DType::BF16, 16, 128, 768, 768}), "64x128x64/256 cp.async x4");  // 192 blocks
  EXPECT_EQ(tile_of({"p", DType::BF16, 60, 33, 65, 256, false, true}), "64x64x64/128 cp.async x4");
  // Without the pipeline (N = 130: B is read per element), two static stages.
  EXPECT_EQ(tile_of({"p", DType::BF16, 60, 50, 130, 40}), "64x128x32/256");
  EXPECT_EQ(tile_of({"p", DType::BF16, 60, 33, 65, 256}), "64x64x64/128");
  // GEMV-like M: 16 rows, four warps.
  EXPECT_EQ(tile_of({"p", DType::BF16, 1, 1, 64, 64}), "16x32x32/128 cp.async x4");
  EXPECT_EQ(tile_of({"p", DType::BF16, 1, 1, 32000, 512}), "16x128x64/128 cp.async x4");  // 250 blocks
  EXPECT_EQ(tile_of({"p", DType::BF16, 1, 20, 64, 64}), "32x32x32/128 cp.async x4");
  EXPECT_EQ(tile_of({"p", DType::F32, 1, 64, 64, 1024}), "32x32x16/128");  // 3xTF32 keeps 16-wide K steps
  // An unknown M takes the largest tile: 128 x 128 only with the pipeline.
  GemmCase sym{"p", DType::F32, 1, 5, 64, 64};
  sym.m_symbolic = true;
  EXPECT_EQ(tile_of(sym), "64x64x16/128");  // N = 64
  sym.N = 256;
  EXPECT_EQ(tile_of(sym), "64x128x16/256");
  for (DType t : {DType::F32, DType::BF16})
    for (int64_t m : {1, 20, 64, 1000, 100000})
      for (int64_t n : {256, 250})
        for (int64_t k : {16, 300, 5000}) {
          const MmaPlan p = plan_of({"p", t, 1, m, n, k});
          EXPECT_LE(p.shared_bytes(), p.async_copy ? 112 * 1024 : 48 * 1024);
        }
}

// 16-byte loads where the operand is a plain bf16/f16 load whose vector
// dimension is contiguous and a multiple of 8 (the emulation cases below run
// each choice).
TEST(MmaPlan, VectorLoadsWhereAligned) {
  const auto loads = [](const GemmCase& c) {
    const MmaPlan p = plan_of(c);
    return std::make_pair(p.a_load, p.b_load);
  };
  using L = OperandLoad;
  EXPECT_EQ(loads({"p", DType::BF16, 120, 100, 40, 40}), std::make_pair(L::VectorK, L::VectorRows));
  EXPECT_EQ(loads({"p", DType::F16, 1, 128, 768, 768}), std::make_pair(L::VectorK, L::VectorRows));
  EXPECT_EQ(loads({"p", DType::BF16, 60, 50, 130, 40}), std::make_pair(L::VectorK, L::Elements));  // N % 8
  EXPECT_EQ(loads({"p", DType::BF16, 60, 33, 65, 256, false, true}), std::make_pair(L::VectorK, L::VectorK));
  EXPECT_EQ(loads({"p", DType::BF16, 2, 150, 130, 70}), std::make_pair(L::Elements, L::Elements));  // K % 8
  EXPECT_EQ(loads({"p", DType::BF16, 1, 40, 24, 32, true, false}), std::make_pair(L::Elements, L::VectorRows));
  EXPECT_EQ(loads({"p", DType::F32, 1, 128, 128, 128}), std::make_pair(L::Elements, L::Elements));  // 3xTF32
  // Both operands vectors: cp.async into dynamic shared memory, launched with it.
  const CudaSource both = emit_cuda_source({gemm_case_kernel({"v", DType::BF16, 1, 64, 64, 64})});
  EXPECT_NE(both.code.find("ts_cp16_at(ts_dsmem, ts_so + 0u, ts_in ? ts_rap[0] + ts_ko : b_a, ts_in);"),
            std::string::npos)
      << both.code;
  EXPECT_NE(both.code.find("ts_cp_wait<2>();"), std::string::npos);
  EXPECT_NE(both.code.find("ts_ldsm_x2_trans(ts_fb[ts_nt], &ts_Bh[ts_s]"), std::string::npos);
  EXPECT_EQ(both.kernels[0].launch.shared_bytes, plan_of({"v", DType::BF16, 1, 64, 64, 64}).shared_bytes());
  // Two pipelined blocks per multiprocessor: ptxas keeps to 128 registers.
  const std::string bounds = str_cat("__launch_bounds__(", plan_of({"v", DType::BF16, 1, 64, 64, 64}).tiles.threads(), ", 2)");
  EXPECT_NE(both.code.find(bounds), std::string::npos);
  // The epilogue walks the accumulators staged in shared memory, once in a
  // loop, 8 columns a thread: their values, then two 16-byte stores (an f32
  // row of 64 starts every chunk at a multiple of 8).
  EXPECT_NE(both.code.find("ts_epi_value(v_bb, ts_i, ts_j + ts_q, ts_Cs[ts_r][ts_c + ts_q])"), std::string::npos)
      << both.code;
  EXPECT_NE(both.code.find("ts_epi_store8(v_bb, ts_i, ts_j, ts_v);"), std::string::npos);
  EXPECT_NE(both.code.find("*((ts_u4*)&b_o[((int)v_bb * 4096 + (int)v_i * 64 + (int)v_j)] + 1) = "
                           "ts_u4{__float_as_uint(ts_value[4])"),
            std::string::npos);
  // One vector operand: registers, static shared memory.
  const CudaSource one = emit_cuda_source({gemm_case_kernel({"w", DType::BF16, 1, 64, 130, 64})});
  EXPECT_NE(one.code.find("*(const ts_u4*)&b_a["), std::string::npos) << one.code;
  EXPECT_EQ(one.code.find("ts_cp16_at(ts_dsmem"), std::string::npos);
  EXPECT_EQ(one.kernels[0].launch.shared_bytes, 0u);
  EXPECT_EQ(one.code.find(", 2) tessel_"), std::string::npos);  // one block's worth of registers
}

// On sm_90a the pipeline of halves with A k-contiguous runs on wgmma:
// 64-row warpgroups, BN 64 or 128, 64-wide K steps; everything else keeps
// mma.sync (3xTF32, register-filled tiles, 16- and 32-row tiles, A stored
// [K, M]).
TEST(MmaPlan, WgmmaOnHopperPipelines) {
  const auto wg = [](const GemmCase& c) {
    const MmaPlan p = plan_of(c, hopper_target());
    const MmaTiles& t = p.tiles;
    return p.wgmma ? str_cat(t.bm, "x", t.bn, "x", t.bk, "/", t.threads(), " x", p.stages) : std::string("mma.sync");
  };
  EXPECT_EQ(wg({"p", DType::BF16, 1, 4096, 4096, 4096}), "128x128x64/256 x3");
  EXPECT_EQ(wg({"p", DType::BF16, 16, 128, 768, 768}), "64x128x64/128 x4");
  EXPECT_EQ(wg({"p", DType::F16, 192, 128, 64, 128, false, true}), "128x64x64/256 x4");  // B stored [N, K]
  EXPECT_EQ(wg({"p", DType::F32, 1, 4096, 4096, 4096}), "mma.sync");
  EXPECT_EQ(wg({"p", DType::BF16, 60, 50, 130, 40}), "mma.sync");        // B read per element
  EXPECT_EQ(wg({"p", DType::BF16, 1, 128, 768, 768}), "mma.sync");       // 32-row tiles
  EXPECT_EQ(wg({"p", DType::BF16, 1, 4096, 4096, 64, true}), "mma.sync");  // A stored [K, M]
  EXPECT_FALSE(plan_of({"p", DType::BF16, 1, 4096, 4096, 4096}).wgmma);  // not without the flag
  EXPECT_TRUE(arch_has_wgmma("sm_90a"));
  EXPECT_FALSE(arch_has_wgmma("sm_90"));
  EXPECT_FALSE(arch_has_wgmma("sm_100a"));
  for (int64_t m : {64, 1000, 100000})
    for (int64_t n : {64, 256})
      for (int64_t k : {16, 300, 5000}) {
        const MmaPlan p = plan_of({"p", DType::BF16, 1, m, n, k}, hopper_target());
        EXPECT_LE(p.shared_bytes(), 113 * 1024);
      }
}

// The TMA kernel takes the GEMMs that fill 120 blocks of 128 x 256 (or
// 128 x 128) tiles and whose operands are TMA copies: plain 2-byte loads at
// 16-byte aligned starts and strides, k (or j for B stored [K, N]) contiguous.
TEST(MmaPlan, TmaForLargeGemms) {
  const auto plan = [](const GemmCase& c) {
    const MmaPlan p = plan_of(c, tma_target());
    return p.tma ? str_cat(p.tiles.bm, "x", p.tiles.bn, "x", p.tiles.bk, "/", p.threads(), " x", p.stages)
                 : std::string(p.wgmma ? "wgmma" : "mma.sync");
  };
  EXPECT_EQ(plan({"p", DType::BF16, 1, 4096, 4096, 4096}), "128x256x64/384 x4");
  EXPECT_EQ(plan({"p", DType::F16, 1, 8192, 8192, 8192, false, true}), "128x256x64/384 x4");  // B stored [N, K]
  EXPECT_EQ(plan({"p", DType::BF16, 32, 512, 128, 256}), "128x128x64/384 x6");  // N <= 128
  EXPECT_EQ(plan({"p", DType::BF16, 1, 4096, 768, 768}), "128x128x64/384 x6");  // 32 x 3 tiles of 256: too few
  // 150 tiles of 256 columns are two waves over 132 multiprocessors, 300 of 128 three half as long.
  EXPECT_EQ(plan({"p", DType::BF16, 1, 6304, 768, 3072}), "128x128x64/384 x6");
  EXPECT_EQ(plan({"p", DType::BF16, 1, 2048, 768, 768}), "wgmma");  // 96 tiles of 128: the cp.async pipeline's smaller ones
  EXPECT_EQ(plan({"p", DType::BF16, 1, 128, 768, 768}), "mma.sync");           // 32-row tiles
  EXPECT_EQ(plan({"p", DType::BF16, 1, 100352, 64, 576}), "wgmma");            // N = 64
  EXPECT_EQ(plan({"p", DType::BF16, 32, 512, 128, 64}), "wgmma");              // K = 64
  {
    // A costly epilogue with K < 1024 stays on the cp.async pipeline (two blocks
    // a multiprocessor overlap one's epilogue with the other's multiplies).
    const GemmCase c{"p", DType::BF16, 1, 4096, 4096, 768};
    std::string text = gemm_case_text(c, false);
    const std::string from = "o[bb, i, j] = acc";
    text.replace(text.find(from), from.size(),
                 "o[bb, i, j] = acc * (acc + 1.0f32) * (acc + 2.0f32) * (acc + 3.0f32) * (acc + 4.0f32)");
    const loop::Kernel k = loop::parse_kernel(text);
    const MmaPlan p = plan_mma_gemm(contract_of(k), tma_target());
    EXPECT_TRUE(p.wgmma && !p.tma);
    EXPECT_TRUE(plan_of(c, tma_target()).tma);
  }
  EXPECT_EQ(plan({"p", DType::BF16, 1, 4096, 4096, 4092}), "mma.sync");        // rows of 4092: not 16-byte aligned
  EXPECT_EQ(plan({"p", DType::F32, 1, 4096, 4096, 4096}), "mma.sync");
  EXPECT_FALSE(plan_of({"p", DType::BF16, 1, 4096, 4096, 4096}, hopper_target()).tma);
  for (int64_t n : {128, 256, 4096}) {
    const MmaPlan p = plan_of({"p", DType::BF16, 1, 16384, n, 4096}, tma_target());
    ASSERT_TRUE(p.tma);
    EXPECT_LE(p.shared_bytes(), 227 * 1024);
    EXPECT_GE(p.stages, 4);
  }
}

// Each kernel with its own target (a tuned kernel's knobs): the kernel given
// the TMA target is written as the TMA kernel, the other as the cp.async
// pipeline, exactly as each is alone; targets may disagree on wgmma (a tuned
// GEMM on the mma.sync pipeline beside wgmma ones): the source has both
// preludes and compiles for sm_90a.
TEST(MmaEmit, EachKernelTakesItsOwnTarget) {
  const loop::Kernel a = gemm_case_kernel({"a", DType::BF16, 1, 4096, 4096, 4096});
  const loop::Kernel b = gemm_case_kernel({"b", DType::BF16, 1, 4096, 4096, 4096});
  const CudaSource mixed = emit_cuda_source({a, b}, [](const loop::Kernel& k) {
    return k.name == "a" ? tma_target() : hopper_target();
  });
  ASSERT_EQ(mixed.kernels.size(), 2u);
  EXPECT_FALSE(mixed.kernels[0].tensor_maps.empty());  // TMA
  EXPECT_TRUE(mixed.kernels[1].tensor_maps.empty());   // cp.async
  const CudaSource alone_a = emit_cuda_source({a}, tma_target());
  const CudaSource alone_b = emit_cuda_source({b}, hopper_target());
  EXPECT_EQ(mixed.kernels[0].launch.shared_bytes, alone_a.kernels[0].launch.shared_bytes);
  EXPECT_EQ(mixed.kernels[1].launch.shared_bytes, alone_b.kernels[0].launch.shared_bytes);
  // The same target for both is the single-target form, byte for byte.
  EXPECT_EQ(emit_cuda_source({a, b}, [](const loop::Kernel&) { return tma_target(); }).code,
            emit_cuda_source({a, b}, tma_target()).code);
  const CudaSource both = emit_cuda_source({a, b}, [](const loop::Kernel& k) {
    return k.name == "a" ? tma_target() : GemmTarget{};
  });
  ASSERT_EQ(both.kernels.size(), 2u);
  EXPECT_FALSE(both.kernels[0].tensor_maps.empty());
  EXPECT_EQ(both.kernels[1].launch.shared_bytes, emit_cuda_source({b}, GemmTarget{}).kernels[0].launch.shared_bytes);
  std::string why;
  if (nvrtc_available(&why)) {
    EXPECT_NO_THROW(compile_to_ptx(both.code, NvrtcOptions{}));
  } else {
    std::cout << "NVRTC not available (" << why << "): the mixed source was not compiled\n";
  }
}

// The tensor maps of the TMA kernel: A as (K, M[, batch]) with a box of 64 x
// 128, B stored [K, N] as (N, K[, batch]) in 64 x 64 boxes, or stored [N, K]
// as (K, N[, batch]) in 64 x 256 boxes; byte strides; one map per operand.
TEST(MmaEmit, TmaTensorMaps) {
  const auto maps = [](const GemmCase& c) {
    const CudaSource src = emit_cuda_source({gemm_case_kernel(c)}, tma_target(1));
    std::string out;
    for (const TensorMapSpec& m : src.kernels.at(0).tensor_maps) {
      out += str_cat("p", m.param, " +", m.offset, " dims");
      for (const loop::Expr& d : m.dims) out += " " + loop::print(d);
      out += " strides";
      for (int64_t st : m.strides) out += str_cat(" ", st);
      out += " box";
      for (int b : m.box) out += str_cat(" ", b);
      out += "; ";
    }
    return out;
  };
  EXPECT_EQ(maps({"m", DType::BF16, 2, 300, 520, 600}),
            "p0 +0 dims 600 300 2 strides 1200 360000 box 64 128 1; "
            "p1 +0 dims 520 600 2 strides 1040 624000 box 64 64 1; ");
  EXPECT_EQ(maps({"m", DType::F16, 1, 4224, 1024, 256, false, true}),  // 132 tiles of 256 columns
            "p0 +0 dims 256 4224 strides 512 box 64 128; p1 +0 dims 256 1024 strides 512 box 64 256; ");
}

TEST(MmaPlan, LoadOrderFollowsTheInnermostIndex) {
  GemmCase c{"p", DType::F32, 1, 200, 64, 64};
  EXPECT_TRUE(plan_of(c).a_k_contiguous);   // a[bb, i, k]
  EXPECT_FALSE(plan_of(c).b_k_contiguous);  // b[bb, k, j]
  c.a_trans = c.b_trans = true;
  EXPECT_FALSE(plan_of(c).a_k_contiguous);  // a[bb, k, i]
  EXPECT_TRUE(plan_of(c).b_k_contiguous);   // b[bb, j, k]
}

// ---- emission ------------------------------------------------------------------------------

TEST(MmaEmit, LaunchGeometryAndKernelShape) {
  GemmCase c{"g", DType::BF16, 3, 300, 129, 64};
  c.m_symbolic = true;
  const CudaSource src = emit_cuda_source({gemm_case_kernel(c)});
  const LaunchGeometry& g = src.kernels[0].launch;
  const std::map<std::string, int64_t> m300 = {{"m", 300}};
  EXPECT_EQ(loop::eval_index(g.grid[0], m300), 2);      // ceil(129 / 128)
  EXPECT_EQ(loop::eval_index(g.grid[1], m300), 5 * 3);  // ceil(300 / 64) M tiles x 3 batch entries
  EXPECT_EQ(loop::eval_index(g.grid[2], m300), 1);
  EXPECT_EQ(loop::eval_index(g.block[0], m300), 256);
  // gridDim.y is at most 65535; the kernel loops over the rest.
  EXPECT_EQ(loop::eval_index(g.grid[1], {{"m", 128 * 70000}}), 65535);
  EXPECT_NE(src.code.find("__launch_bounds__(256) tessel_g(const unsigned short* b_a, const unsigned short* b_b, "
                          "const float* b_bias, float* b_o, const long long v_m, int* ts_error)"),
            std::string::npos)
      << src.code;
  EXPECT_NE(src.code.find("ts_mma_bf16(ts_acc[ts_mt][ts_nt], ts_fa[ts_mt], ts_fb[ts_nt]);"), std::string::npos);
  EXPECT_NE(src.code.find("__syncthreads();"), std::string::npos);
  EXPECT_EQ(src.code.find("#include"), std::string::npos);
  // The 3xTF32 kernel issues three mmas per tile, small terms first.
  const std::string f32 = emit_cuda_source({gemm_case_kernel({"f", DType::F32, 1, 64, 64, 64})}).code;
  const size_t small = f32.find("ts_mma_tf32(ts_acc[ts_mt][ts_nt], ts_fa2[ts_mt], ts_fb[ts_nt]);");
  const size_t big = f32.find("ts_mma_tf32(ts_acc[ts_mt][ts_nt], ts_fa[ts_mt], ts_fb[ts_nt]);");
  EXPECT_NE(small, std::string::npos) << f32;
  EXPECT_NE(big, std::string::npos);
  EXPECT_LT(small, big);
  // Kernels without a contract get no GEMM helpers.
  const std::string plain =
      emit_cuda_source({loop::parse_kernel("kernel k(out %o: f32[4]) {\n  gpu.thread.x for i in [0, 4) {\n"
                                           "    o[i] = 1.0f32\n  }\n}\n")})
          .code;
  EXPECT_EQ(plain.find("ts_mma_"), std::string::npos);
}

TEST(MmaEmit, RejectsWhatItCannotRun) {
  const std::string head = "kernel k(in %a: f32[n, 8], in %b: f32[8, 8], out %o: f32[n, 8]) syms(n) {\n";
  const std::string contract =
      "contract bb in [0, 1), i in [0, n), j in [0, 8), k in [0, 8): acc = dot(a[i, k], b[k, j]) {\n"
      "    o[i, j] = acc\n  }\n";
  expect_rejected(head + "  for r in [0, 2) {\n  " + contract + "  }\n}\n", "inside a loop or an if");
  expect_rejected(head + "  " + contract + "  gpu.thread.x for t in [0, 4) {\n    o[0, t] = 1.0f32\n  }\n}\n",
                  "has a contract statement and GPU-axis loop");
  expect_rejected(head + "  o[0, 0] = 1.0f32\n  " + contract + "}\n", "outside its contract statement");
  expect_rejected(head + "  let q = n * 2\n  contract bb in [0, 1), i in [0, q), j in [0, 8), k in [0, 8): "
                         "acc = dot(a[i, k], b[k, j]) {\n    o[i, j] = acc\n  }\n}\n",
                  "launch extents may use only the kernel's syms");
  const std::string second =
      "contract bb2 in [0, 1), i2 in [0, n), j2 in [0, 8), k2 in [0, 8): acc2 = dot(a[i2, k2], b[k2, j2]) {\n"
      "    o[i2, j2] = acc2\n  }\n";
  expect_rejected(head + "  " + contract + "  " + second + "}\n", "more than one contract");
}

// ---- NVRTC --------------------------------------------------------------------------------

NvrtcOptions hopper() {
  NvrtcOptions o;
  o.arch = "sm_90a";
  return o;
}

// Per precision: 128-row tiles with both operands in their usual layout and
// the bias+relu epilogue, and 16-row tiles (M = 1) with both transposed.
// (The GPU tests compile and run all of gemm_cases.)
std::vector<loop::Kernel> gemm_variants() {
  std::vector<loop::Kernel> ks;
  for (DType t : {DType::F32, DType::BF16, DType::F16}) {
    const std::string p(dtype_name(t));
    ks.push_back(gemm_case_kernel({p + "_big", t, 3, 300, 129, 64, false, false, true, t, true}));
    ks.push_back(gemm_case_kernel({p + "_gemv", t, 1, 1, 300, 129, true, true, false, DType::F32, false}));
  }
  return ks;
}

TEST(MmaNvrtc, CompilesEveryVariantForHopper) {
  SKIP_WITHOUT_NVRTC();
  const CudaSource src = emit_cuda_source(gemm_variants());
  const Cubin c = compile_to_cubin(src.code, hopper());
  EXPECT_EQ(c.image.substr(0, 4), "\x7f" "ELF");
  EXPECT_EQ(c.log.find("warning"), std::string::npos) << c.log;
  const std::string ptx = compile_to_ptx(src.code, hopper());
  for (const char* insn : {"mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32",
                           "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32",
                           "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32", "cvt.rna.tf32.f32", "bar.sync"})
    EXPECT_NE(ptx.find(insn), std::string::npos) << insn;
  // The accumulators stay in registers: no local memory.
  EXPECT_EQ(ptx.find(".local"), std::string::npos);
}

// Lowered groups: MatMul, Gemm with bias and relu, attention's batched
// products, an implicit-GEMM convolution with bias and relu, bf16 MatMul.
std::vector<std::pair<std::string, std::function<void(GraphBuilder&)>>> gemm_models() {
  return {
      {"matmul", [](GraphBuilder& b) {
         b.output(b.op("MatMul", {b.input("x", DType::F32, {37, 29}), b.input("w", DType::F32, {29, 53})}));
       }},
      {"gemm_bias_relu", [](GraphBuilder& b) {
         Value* g = b.op("Gemm", {b.input("x", DType::F32, {21, 29}), b.input("w", DType::F32, {53, 29}),
                                  b.input("bias", DType::F32, {53})},
                         {{"transB", Attribute::of_int(1)}});
         b.output(b.op("Relu", {g}));
       }},
      {"attention", [](GraphBuilder& b) {
         Value* k = b.op("Transpose", {b.input("k", DType::F32, {2, 3, 19, 8})},
                         {{"perm", Attribute::of_ints({0, 1, 3, 2})}});
         b.output(b.op("MatMul", {b.input("q", DType::F32, {2, 3, 17, 8}), k}));
       }},
      {"conv_bias_relu", [](GraphBuilder& b) {
         Value* c = b.op("Conv", {b.input("x", DType::F32, {2, 3, 9, 7}), b.input("w", DType::F32, {5, 3, 3, 3}),
                                  b.input("b", DType::F32, {5})},
                         {{"pads", Attribute::of_ints({1, 1, 1, 1})}});
         b.output(b.op("Relu", {c}));
       }},
      {"matmul_bf16", [](GraphBuilder& b) {
         b.output(b.op("MatMul", {b.input("x", DType::BF16, {9, 40}), b.input("w", DType::BF16, {40, 11})}));
       }},
  };
}

std::vector<LoweredGroup> lowered_gemm_groups(Model& m) {
  PassOptions po;
  run_pipeline(m, po);
  const FusionPlan plan = plan_fusion(*m.graph, OpRegistry::global());
  std::vector<LoweredGroup> out;
  for (const FusionGroup& g : plan.groups)
    if (g.compiled) out.push_back(lower_group_for_gpu(g, OpRegistry::global()));
  return out;
}

TEST(MmaNvrtc, CompilesLoweredGroups) {
  SKIP_WITHOUT_NVRTC();
  std::vector<loop::Kernel> ks;
  std::vector<std::unique_ptr<Model>> models;
  for (const auto& [name, build] : gemm_models()) {
    models.push_back(std::make_unique<Model>());
    GraphBuilder b(*models.back());
    build(b);
    size_t mma = 0;
    for (LoweredGroup& lg : lowered_gemm_groups(*models.back())) {
      lg.kernel.name = name + "." + lg.kernel.name;
      mma += lg.schedule == "gpu_mma";
      ks.push_back(lg.kernel);
    }
    EXPECT_EQ(mma, 1u) << name;
  }
  const CudaSource src = emit_cuda_source(ks);
  EXPECT_EQ(compile_to_cubin(src.code, hopper()).image.substr(0, 4), "\x7f" "ELF");
}

// The wgmma variants (bf16 and f16; B k-major and n-major; 64 and 128 rows
// and columns) compile for sm_90a without local memory, and their PTX holds
// the warpgroup instructions.
TEST(MmaNvrtc, WgmmaCompilesForHopper) {
  SKIP_WITHOUT_NVRTC();
  std::vector<loop::Kernel> ks;
  ks.push_back(gemm_case_kernel({"wg_bf16", DType::BF16, 1, 4096, 4096, 4096, false, false, true, DType::BF16}));
  ks.push_back(gemm_case_kernel({"wg_f16_t", DType::F16, 192, 128, 64, 128, false, true}));
  ks.push_back(gemm_case_kernel({"wg_bf16_64", DType::BF16, 16, 128, 768, 768}));
  for (const loop::Kernel& k : ks) EXPECT_TRUE(plan_mma_gemm(contract_of(k), hopper_target()).wgmma) << k.name;
  const CudaSource src = emit_cuda_source(ks, hopper_target());
  const Cubin c = compile_to_cubin(src.code, hopper());
  EXPECT_EQ(c.image.substr(0, 4), "\x7f" "ELF");
  EXPECT_EQ(c.log.find("warning"), std::string::npos) << c.log;
  const std::string ptx = compile_to_ptx(src.code, hopper());
  for (const char* insn : {"wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16",
                           "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16", "wgmma.fence.sync.aligned",
                           "wgmma.commit_group.sync.aligned", "wgmma.wait_group.sync.aligned 0",
                           "fence.proxy.async.shared::cta", "cp.async.cg.shared.global"})
    EXPECT_NE(ptx.find(insn), std::string::npos) << insn;
  EXPECT_EQ(ptx.find(".local"), std::string::npos);
}

// Tensor maps built for a launch refuse what TMA cannot address with one
// clear error before the driver sees it: a dim past 2^32 elements, a spec
// naming a missing parameter.
TEST(MmaEmit, TensorMapsRefuseHostileSizes) {
  TensorMapSpec t;
  t.param = 0;
  t.dims = {loop::var("n"), loop::Expr(64)};
  t.strides = {128};
  t.box = {64, 128};
  const auto message = [&](const std::vector<uint64_t>& params, int64_t n) {
    try {
      encode_tensor_maps({t}, params, {{"n", n}}, "k");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message({4096}, int64_t{1} << 33).find("over TMA's 2^32"), std::string::npos);
  EXPECT_NE(message({}, 64).find("names parameter 0"), std::string::npos);
}

// The TMA kernel compiles for sm_90a without spills or local memory, with
// the copies, barriers and register reallocation in its PTX.
TEST(MmaNvrtc, TmaCompilesForHopper) {
  SKIP_WITHOUT_NVRTC();
  std::vector<loop::Kernel> ks;
  ks.push_back(gemm_case_kernel({"tma_bf16", DType::BF16, 1, 4096, 4096, 4096, false, false, true, DType::BF16}));
  ks.push_back(gemm_case_kernel({"tma_f16_t", DType::F16, 3, 1000, 100, 520, false, true}));
  for (const loop::Kernel& k : ks) EXPECT_TRUE(plan_mma_gemm(contract_of(k), tma_target(1)).tma) << k.name;
  const CudaSource src = emit_cuda_source(ks, tma_target(1));
  const Cubin c = compile_to_cubin(src.code, hopper());
  EXPECT_EQ(c.image.substr(0, 4), "\x7f" "ELF");
  EXPECT_EQ(c.log.find("warning"), std::string::npos) << c.log;
  const std::string ptx = compile_to_ptx(src.code, hopper());
  for (const char* insn : {"cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes",
                           "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes",
                           "mbarrier.try_wait.parity.shared::cta.b64", "mbarrier.arrive.expect_tx.shared::cta.b64",
                           "setmaxnreg.dec.sync.aligned.u32 40", "setmaxnreg.inc.sync.aligned.u32 232",
                           "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16",
                           "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16", "wgmma.wait_group.sync.aligned 1",
                           ".param .align 64 .b8 tessel_tma__bf16_param_5[128]"})
    EXPECT_NE(ptx.find(insn), std::string::npos) << insn;
  EXPECT_EQ(ptx.find(".local"), std::string::npos);
}

// ---- the generated code on the host ----------------------------------------------------------

std::string host_compiler() {
  const char* cxx = std::getenv("CXX");
  const std::string c = cxx && *cxx ? cxx : "c++";
  return std::system((c + " --version > /dev/null 2>&1").c_str()) == 0 ? c : "";
}

std::string replace_once(std::string s, const std::string& from, const std::string& to) {
  const size_t at = s.find(from);
  TS_CHECK(at != std::string::npos, "emulation: '", from.substr(0, 40), "' not found in the generated code");
  return s.replace(at, from.size(), to);
}

// The generated source made host C++: the prelude's two inline-PTX f16
// conversions and the GEMM helpers replaced by cuda_host_emulation.h's.
std::string host_source(const CudaSource& src) {
  std::string code = src.code;
  code = replace_once(code, "asm(\"cvt.rn.f16.f32 %0, %1;\" : \"=h\"(h) : \"f\"(f));", "h = ts_emu::f2h(f);");
  code = replace_once(code, "asm(\"cvt.f32.f16 %0, %1;\" : \"=f\"(f) : \"h\"(h));", "f = ts_emu::h2f(h);");
  if (code.find(detail::mma_prelude()) != std::string::npos)
    code = replace_once(code, detail::mma_prelude(), "\nTS_EMU_MMA_PRELUDE\n");
  if (code.find(detail::wgmma_prelude()) != std::string::npos)
    code = replace_once(code, detail::wgmma_prelude(), "\nTS_EMU_WGMMA_PRELUDE\n");
  // wgmma's stages: the emulated shared window (ts_emu::smem_addr) is this array.
  for (size_t at; (at = code.find("extern __shared__ __align__(1024)")) != std::string::npos;)
    code = replace_once(code, "extern __shared__ __align__(1024) unsigned char ts_dsmem[];",
                        "static __align__(1024) unsigned char ts_dsmem[228 * 1024]; ts_emu::window = ts_dsmem;");
  // Dynamic shared memory (the cp.async pipeline): a static buffer as large
  // as the planner allows (112 KiB), shared by the fibers like __shared__.
  for (size_t at; (at = code.find("extern __shared__")) != std::string::npos;)
    code = replace_once(code, "extern __shared__ __align__(16) unsigned char ts_dsmem[];",
                        "static __align__(16) unsigned char ts_dsmem[112 * 1024];");
  return "#include \"cuda_host_emulation.h\"\n" + code;
}

std::filesystem::path temp_dir(const std::string& name) {
  auto d = std::filesystem::temp_directory_path() / ("tessel_mma_emu_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

// Compiles `k` for the host and runs it on `bufs` (one per param; the
// outputs are overwritten with the kernel's), returning its error word; -1
// when it could not be compiled or run.
int run_on_host(const loop::Kernel& k, const std::map<std::string, int64_t>& syms,
                std::vector<std::vector<uint8_t>>& bufs, const std::string& cxx, const GemmTarget& target = {}) {
  const CudaSource src = emit_cuda_source({k}, target);
  const LaunchGeometry& g = src.kernels[0].launch;
  const auto dim = [&](const loop::Expr& e) { return loop::eval_index(e, syms); };
  const auto dir = temp_dir(k.name);
  std::string main = host_source(src);
  main += "\n#include <cstdio>\n#include <vector>\nint main(int, char** argv) {\n  FILE* in = std::fopen(argv[1], \"rb\");\n";
  for (size_t i = 0; i < bufs.size(); ++i)
    main += str_cat("  std::vector<unsigned char> p", i, "(", bufs[i].size(), ");\n  if (std::fread(p", i,
                    ".data(), 1, p", i, ".size(), in) != p", i, ".size()) return 2;\n");
  main += "  std::fclose(in);\n  int err = 0;\n";
  // The function the runtime would launch for these syms (the narrow
  // variant where they satisfy its assumption).
  std::vector<int64_t> sym_values;
  for (const std::string& s : k.syms) sym_values.push_back(syms.at(s));
  std::string call = str_cat("  ts_emu::launch(", dim(g.grid[0]), ", ", dim(g.grid[1]), ", ", dim(g.grid[2]), ", ",
                             dim(g.block[0]), ", [&] { ", launch_symbol(src.kernels[0], sym_values), "(");
  for (size_t i = 0; i < k.params.size(); ++i)
    call += str_cat("(", detail::storage_type(k.params[i]->dtype), "*)p", i, ".data(), ");
  for (const std::string& s : k.syms) call += str_cat(syms.at(s), "ll, ");
  // The TMA GEMM's tensor maps, as the runtime would encode them (tensor_map.h).
  std::string maps;
  for (size_t m = 0; m < src.kernels[0].tensor_maps.size(); ++m) {
    const TensorMapSpec& t = src.kernels[0].tensor_maps[m];
    std::string dims, strides = "0", box;
    for (size_t d = 0; d < t.dims.size(); ++d) {
      dims += str_cat(d ? ", " : "", std::max<int64_t>(1, dim(t.dims[d])));
      box += str_cat(d ? ", " : "", t.box[d]);
      if (d > 0) strides += str_cat(", ", t.strides[d - 1]);
    }
    main += str_cat("  const ts_emu::TensorMap m", m, "{p", t.param, ".data() + ", t.offset * 2, ", ", t.dims.size(),
                    ", {", dims, "}, {", strides, "}, {", box, "}};\n");
    maps += str_cat(", m", m);
  }
  main += call + "&err" + maps + "); });\n  FILE* out = std::fopen(argv[2], \"wb\");\n";
  for (size_t i = k.num_inputs; i < bufs.size(); ++i) main += str_cat("  std::fwrite(p", i, ".data(), 1, p", i, ".size(), out);\n");
  main += "  std::fwrite(&err, sizeof err, 1, out);\n  std::fclose(out);\n  return 0;\n}\n";
  std::ofstream(dir / "main.cpp") << main;
  {
    std::ofstream bin(dir / "in.bin", std::ios::binary);
    for (const auto& b : bufs) bin.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
  }
  const std::string compile = str_cat(cxx, " -std=c++20 -O1 -w -I", TESSEL_SOURCE_DIR, "/tests/unit -o ",
                                      (dir / "emu").string(), " ", (dir / "main.cpp").string(), " > ",
                                      (dir / "log.txt").string(), " 2>&1");
  if (std::system(compile.c_str()) != 0) {
    std::ifstream log(dir / "log.txt");
    ADD_FAILURE() << "host compile failed: " << std::string(std::istreambuf_iterator<char>(log), {}).substr(0, 3000);
    return -1;
  }
  const std::string run = str_cat((dir / "emu").string(), " ", (dir / "in.bin").string(), " ", (dir / "out.bin").string());
  if (std::system(run.c_str()) != 0) {
    ADD_FAILURE() << "the emulation of " << k.name << " failed";
    return -1;
  }
  std::ifstream out(dir / "out.bin", std::ios::binary);
  for (size_t i = k.num_inputs; i < bufs.size(); ++i)
    out.read(reinterpret_cast<char*>(bufs[i].data()), static_cast<std::streamsize>(bufs[i].size()));
  int error = -1;
  out.read(reinterpret_cast<char*>(&error), sizeof error);
  std::filesystem::remove_all(dir);
  return error;
}

void expect_emulation_matches(const GemmCase& c, const GemmTarget& target = {}) {
  const std::string cxx = host_compiler();
  if (cxx.empty()) GTEST_SKIP() << "no host C++ compiler (c++ or $CXX)";
  std::vector<std::vector<uint8_t>> bufs = gemm_case_inputs(c, 17);
  const GemmReference want = gemm_reference(c, bufs);
  ASSERT_EQ(run_on_host(gemm_case_kernel(c), gemm_case_syms(c), bufs, cxx, target), 0);
  EXPECT_EQ(compare_gemm(c, bufs[3], want), "") << plan_of(c, target).tiles.bm;
}

// Two M tiles, two N tiles, three K tiles (the last partial), two batch
// entries: every edge of the tiling, the double buffer and the bf16 fragments.
TEST(MmaEmulation, Bf16TilesEdgesAndBatches) {
  GemmCase c{"emu_bf16", DType::BF16, 2, 150, 130, 70, false, false, true, DType::BF16, true};
  expect_emulation_matches(c);
}

// Every block tile the planner picks, at sizes that pick it (TilesFillTheMachine):
// 128 x 128 and 64 x 128 with 32-wide K steps, 64 x 64 with 64-wide ones.
TEST(MmaEmulation, Bf16LargeTiles) {
  expect_emulation_matches({"emu_t128", DType::BF16, 120, 100, 40, 40, false, false, true, DType::BF16, false});
  expect_emulation_matches({"emu_t64x128", DType::BF16, 60, 50, 130, 40, false, false, false, DType::F32, false});
  expect_emulation_matches({"emu_t64k64", DType::BF16, 60, 33, 65, 256, false, true, false, DType::F32, false});
}

// The cp.async pipeline past its stages: 7 K tiles (the last partial) through
// 4 stages, so each stage is refilled; bf16 and f16, both B layouts.
TEST(MmaEmulation, PipelineRefillsItsStages) {
  const GemmCase bf{"emu_pipe_bf16", DType::BF16, 2, 40, 48, 200, false, false, true, DType::BF16, false};
  const GemmCase hf{"emu_pipe_f16", DType::F16, 1, 70, 24, 200, false, true, false, DType::F32, false};
  for (const GemmCase& c : {bf, hf}) {
    EXPECT_TRUE(plan_of(c).async_copy) << c.name;
    EXPECT_EQ(plan_of(c).stages, 4) << c.name;
    expect_emulation_matches(c);
  }
}

// A with the heads joined into K (a[bb, k / 32, i, k % 32]: vector loads
// whose index is not affine in k, so the pipeline evaluates it per K step),
// and N <= 64 (128 x 64 tiles).
TEST(MmaEmulation, HeadsJoinedIntoKAndNarrowN) {
  const GemmCase c{"emu_heads", DType::BF16, 60, 130, 64, 96, false, false, true, DType::BF16, false, 32};
  const MmaPlan p = plan_of(c);
  EXPECT_EQ(p.a_load, OperandLoad::VectorK);
  EXPECT_TRUE(p.async_copy);
  EXPECT_EQ(p.tiles.bn, 64);
  expect_emulation_matches(c);
}

// wgmma (sm_90a) through the emulated warpgroup instruction, which reads
// its operands from shared memory through the descriptors and the 128-byte
// swizzle as the PTX ISA defines them: two warpgroups with B n-major (128 x
// 128, bias + relu, bf16 out) and k-major (128 x 64, f16), one warpgroup
// (64 x 128, 64 x 64); edges in M, N and K (the last K tile partial),
// stages refilled (K = 600: 10 tiles through 3 stages; K = 456: 8 tiles
// through 4 with one k-step's wgmmas in flight), batches. A machine of 4
// multiprocessors (fill_blocks) keeps the grids small. The emulation runs a
// wgmma when its thread waits for its group and lands a cp.async likewise
// (NaNs until then), so a stage overwritten or read too early shows.
TEST(MmaEmulation, Wgmma) {
  const std::vector<GemmCase> cases = {
      {"emu_wg_128x128", DType::BF16, 2, 130, 136, 600, false, false, true, DType::BF16, false},
      {"emu_wg_128x64_t", DType::F16, 4, 70, 64, 96, false, true, false, DType::F32, false},
      {"emu_wg_64x128", DType::BF16, 2, 60, 136, 456, false, false, false, DType::F32, false},
      {"emu_wg_64x64_t", DType::BF16, 4, 40, 56, 24, false, true, true, DType::F32, false},
  };
  const std::vector<std::string> tiles = {"128x128", "128x64", "64x128", "64x64"};
  for (size_t i = 0; i < cases.size(); ++i) {
    const MmaPlan p = plan_of(cases[i], hopper_target(4));
    ASSERT_TRUE(p.wgmma) << cases[i].name;
    EXPECT_EQ(str_cat(p.tiles.bm, "x", p.tiles.bn), tiles[i]) << cases[i].name;
    EXPECT_EQ(p.wgmma_overlap, p.stages >= 4) << cases[i].name;
    expect_emulation_matches(cases[i], hopper_target(4));
  }
}

// The warp-specialised TMA kernel on a machine of 2 multiprocessors (each
// block walks several tiles, the stage ring wraps across them): both B
// layouts, 128- and 256-column tiles, 2-d and 3-d tensor maps, edges in M,
// N and K, K < 64, the epilogue's staging tile, 16-byte and element stores. The emulation runs the
// producer and the consumers as fibers meeting on emulated mbarriers (a
// phase bug deadlocks it), TMA copies write the 128-byte swizzle by address.
TEST(MmaEmulation, TmaWarpSpecialised) {
  GemmTarget t = tma_target(1);
  t.tma_min_k = t.tma_min_k_cheap = 0;
  t.sm_count = 2;
  const std::vector<GemmCase> cases = {
      {"emu_tma_n256", DType::BF16, 2, 150, 264, 200, false, false, true, DType::BF16, false},
      {"emu_tma_n128_t", DType::F16, 1, 130, 72, 24, false, true, false, DType::F32, false},
      {"emu_tma_long_k", DType::BF16, 1, 70, 136, 520, false, true, true, DType::F32, false},
      // An odd N (GPT-2's LM head: B stored [N, K]): rows not 16-byte
      // aligned, the epilogue writes 8 rows a thread along a warp's columns.
      {"emu_tma_odd_n", DType::BF16, 1, 140, 261, 72, false, true, true, DType::F32, false},
  };
  for (const GemmCase& c : cases) {
    const MmaPlan p = plan_of(c, t);
    ASSERT_TRUE(p.tma) << c.name;
    expect_emulation_matches(c, t);
  }
}

// ---- flash attention (codegen/cuda/flash_attention.cpp) ----

// bf16 attention over 3 batch entries: 70 queries (a partial second block),
// 100 keys (a partial second tile), head sizes 32 and 16, a mask (query 5
// masked entirely: 0; keys past i + 40 masked) and a scale.
const char* kFlash =
    "kernel flash(in %q: bf16[3, 70, 32], in %k: bf16[3, 100, 32], in %v: bf16[3, 100, 16], out %o: f32[3, 70, 16]) {\n"
    "  attention bh in [0, 3), i in [0, 70), j in [0, 100), d in [0, 32), e in [0, 16): acc = softmax_dot("
    "cast<f32>(q[bh, i, d]), cast<f32>(k[bh, j, d]), cast<f32>(v[bh, j, e]), 0.25f32, "
    "select(i == 5 | j > i + 40, -inff32, 0.0f32), bf16) {\n"
    "    o[bh, i, e] = acc\n"
    "  }\n"
    "}\n";

TEST(FlashAttention, CompilesForHopperAndAmpere) {
  SKIP_WITHOUT_NVRTC();
  const CudaSource src = emit_cuda_source({loop::parse_kernel(kFlash)});
  EXPECT_TRUE(is_const(src.kernels[0].launch.grid[0], 2));
  EXPECT_TRUE(is_const(src.kernels[0].launch.block[0], 128));
  for (const char* arch : {"sm_90a", "sm_80"}) {
    NvrtcOptions o;
    o.arch = arch;
    const Cubin c = compile_to_cubin(src.code, o);
    EXPECT_EQ(c.log.find("warning"), std::string::npos) << c.log;
    const std::string ptx = compile_to_ptx(src.code, o);
    EXPECT_NE(ptx.find("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"), std::string::npos);
    EXPECT_NE(ptx.find("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16"), std::string::npos);  // V, two tiles a load
    EXPECT_EQ(ptx.find(".local"), std::string::npos) << arch;
  }
}

// Runs `text` (an attention kernel with q, k, v of half type t and an f32
// output of `out_elems`) on the host emulation and through the evaluator;
// returns the largest error relative to 1 + |want| and the outputs.
double flash_emulation_error(const std::string& text, DType t, std::vector<float>* got_out,
                             const GemmTarget& target = {}) {
  const std::string cxx = host_compiler();
  const loop::Kernel k = loop::parse_kernel(text);
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  std::vector<std::vector<uint8_t>> bufs;
  for (size_t p = 0; p < 3; ++p) {
    int64_t n = 1;
    for (const loop::Expr& d : k.params[p]->shape) n *= loop::eval_index(d, {});
    std::vector<uint8_t> b(static_cast<size_t>(2 * n));
    for (int64_t i = 0; i < n; ++i) {
      const float x = dist(rng);
      const uint16_t h = t == DType::BF16 ? f32_to_bf16_bits(x) : f32_to_f16_bits(x);
      std::memcpy(&b[static_cast<size_t>(2 * i)], &h, 2);
    }
    bufs.push_back(std::move(b));
  }
  int64_t outs = 1;
  for (const loop::Expr& d : k.params[3]->shape) outs *= loop::eval_index(d, {});
  bufs.emplace_back(static_cast<size_t>(4 * outs), 0xff);
  std::vector<float> want(static_cast<size_t>(outs));
  EXPECT_EQ(loop::run_kernel(k, {bufs[0].data(), bufs[1].data(), bufs[2].data(), want.data()}, {}), 0);
  EXPECT_EQ(run_on_host(k, {}, bufs, cxx, target), 0);
  got_out->assign(want.size(), 0.0f);
  std::memcpy(got_out->data(), bufs[3].data(), bufs[3].size());
  double worst = 0;
  for (size_t x = 0; x < want.size(); ++x)
    worst = std::max(worst, std::fabs(static_cast<double>((*got_out)[x]) - want[x]) / (1.0 + std::fabs(want[x])));
  return worst;
}

// The kernel on the host emulation against the evaluator: within the half
// type's rounding of each probability (the kernel rounds exp(s - m) before
// the product with V, the evaluator the normalised p).
TEST(FlashAttention, EmulationMatchesTheEvaluator) {
  if (host_compiler().empty()) GTEST_SKIP() << "no host C++ compiler (c++ or $CXX)";
  std::vector<float> got;
  const double worst = flash_emulation_error(kFlash, DType::BF16, &got);
  for (size_t x = 0; x < got.size(); ++x)
    if (x / 16 % 70 == 5) {
      EXPECT_EQ(got[x], 0.0f) << x;  // a row masked entirely
    }
  EXPECT_LT(worst, 1e-2);
  EXPECT_GT(worst, 0.0);  // the two round differently: not a copy of one result
  // f16, head size 128 into 64 values, three key tiles, two query blocks, causal.
  const double f16 = flash_emulation_error(
      "kernel flash16(in %q: f16[1, 100, 128], in %k: f16[1, 150, 128], in %v: f16[1, 150, 64], "
      "out %o: f32[1, 100, 64]) {\n"
      "  attention bh in [0, 1), i in [0, 100), j in [0, 150), d in [0, 128), e in [0, 64): acc = softmax_dot("
      "cast<f32>(q[bh, i, d]), cast<f32>(k[bh, j, d]), cast<f32>(v[bh, j, e]), 0.0883883f32, "
      "select(j > i + 50, -inff32, 0.0f32), f16) {\n    o[bh, i, e] = acc\n  }\n}\n",
      DType::F16, &got);
  EXPECT_LT(f16, 1e-2);
}

// The warp-specialised wgmma form (GemmTarget::flash_wgmma): head sizes 64
// and 128 in both places (one and two swizzled regions of Q and K, V's
// N-major halves), 300 keys (three tiles of 128: both stages, the second
// phase of stage 0, a partial last tile), a partial second query block, a
// causal-style mask, two batch entries; without a bias, the scale folded
// into the exponent (positive) or applied first (negative). Head size 32
// keeps mma.sync.
TEST(FlashAttention, WarpSpecialisedWgmmaMatchesTheEvaluator) {
  if (host_compiler().empty()) GTEST_SKIP() << "no host C++ compiler (c++ or $CXX)";
  GemmTarget hopper;
  hopper.wgmma = hopper.flash_wgmma = true;
  hopper.flash_wgmma_min_keys = 256;  // 300 keys take it
  struct Case {
    int d, e;
    const char *scale, *bias;
  };
  const char* mask = "select(j > i + 170, -inff32, 0.0f32)";
  for (const auto& [d, e, scale, bias] :
       std::vector<Case>{{64, 64, "0.125f32", mask}, {128, 128, "0.125f32", mask}, {64, 128, "0.125f32", mask},
                         {128, 64, "0.125f32", mask}, {64, 32, "0.125f32", mask}, {64, 64, "0.125f32", "0.0f32"},
                         {128, 64, "-0.0625f32", "0.0f32"}}) {
    const std::string text = str_cat(
        "kernel flash_w", d, "_", e, "(in %q: bf16[2, 140, ", d, "], in %k: bf16[2, 300, ", d, "], in %v: bf16[2, 300, ",
        e, "], out %o: f32[2, 140, ", e, "]) {\n  attention bh in [0, 2), i in [0, 140), j in [0, 300), d in [0, ", d,
        "), e in [0, ", e, "): acc = softmax_dot(cast<f32>(q[bh, i, d]), cast<f32>(k[bh, j, d]), "
        "cast<f32>(v[bh, j, e]), ", scale, ", ", bias, ", bf16) {\n    o[bh, i, e] = acc\n  }\n}\n");
    const CudaSource src = emit_cuda_source({loop::parse_kernel(text)}, hopper);
    const std::string& code = src.code;
    const bool ws = e != 32;
    EXPECT_EQ(code.find("ts_wgmma_bf16_n128_t0(&ts_s[0][0]") != std::string::npos, ws) << d << " " << e;
    EXPECT_EQ(code.find(str_cat("ts_wgmma_rs_bf16_n", e, "_t1(&ts_o[0][0]")) != std::string::npos, ws) << e;
    // Two consumer warpgroups of 64 query rows and a producer: 384 threads,
    // 2 blocks for 140 rows (mma.sync: 128 threads, 64 rows a block).
    EXPECT_NE(code.find(ws ? "__launch_bounds__(384) " : "__launch_bounds__(128) "), std::string::npos);
    EXPECT_EQ(loop::eval_index(src.kernels[0].launch.block[0], {}), ws ? 384 : 128);
    EXPECT_EQ(loop::eval_index(src.kernels[0].launch.grid[0], {}), ws ? 2 : 3);
    if (ws && d == 128 && e == 128 && nvrtc_available()) {
      NvrtcOptions o;
      o.arch = "sm_90a";
      const Cubin c = compile_to_cubin(code, o);
      EXPECT_EQ(c.log.find("warning"), std::string::npos) << c.log;
      const std::string ptx = compile_to_ptx(code, o);
      EXPECT_NE(ptx.find("cp.async.mbarrier.arrive.noinc.shared::cta.b64"), std::string::npos);
      EXPECT_NE(ptx.find("setmaxnreg.inc.sync.aligned.u32 224"), std::string::npos);
      EXPECT_EQ(ptx.find(".local"), std::string::npos);
    }
    std::vector<float> got;
    EXPECT_LT(flash_emulation_error(text, DType::BF16, &got, hopper), 1e-2) << d << " " << e;
    // Fewer keys than flash_wgmma_min_keys: mma.sync.
    GemmTarget short_keys = hopper;
    short_keys.flash_wgmma_min_keys = 301;
    EXPECT_NE(emit_cuda_source({loop::parse_kernel(text)}, short_keys).code.find("__launch_bounds__(128) "),
              std::string::npos);
  }
}

// Both operands transposed (the other load orders), f16, the 64-row tiles.
TEST(MmaEmulation, F16TransposedOperandsSmallTiles) {
  expect_emulation_matches({"emu_f16", DType::F16, 1, 40, 20, 33, true, true, false, DType::F32, false});
}

// 3xTF32 on f32: a GEMV-like M = 1 (16-row tiles, 4 warps) and a batch of
// products with the bias+relu epilogue.
TEST(MmaEmulation, Tf32x3) {
  expect_emulation_matches({"emu_f32_gemv", DType::F32, 1, 1, 150, 45, false, false, false, DType::F32, false});
  expect_emulation_matches({"emu_f32", DType::F32, 2, 70, 9, 40, false, true, true, DType::F32, true});
}

// Lowered groups: a Gemm with bias and relu, attention's batched product, an
// implicit-GEMM convolution (the padding select in B, the flat views), with
// |got - want| <= 1e-5 (max |want| + |want|).
// Runs every kernel of `lg` on the host and through the loop IR evaluator on
// the same f32 inputs, and compares each output within `rel` of its largest
// magnitude. Returns false (after reporting) when a run fails.
void expect_host_run_matches(const LoweredGroup& lg, const std::string& cxx, const std::string& name, double rel) {
  std::vector<std::vector<uint8_t>> want;
  for (const loop::BufferRef& p : lg.kernel.params) {
    int64_t n = 1;
    for (const loop::Expr& d : p->shape) n *= loop::eval_index(d, {});
    std::vector<uint8_t> v(static_cast<size_t>(n) * 4);
    for (int64_t i = 0; i < n; ++i) {
      const float f = static_cast<float>((i * 7919 + 13 * static_cast<int64_t>(v.size())) % 2001) / 1000.0f - 1.0f;
      std::memcpy(v.data() + 4 * i, &f, 4);
    }
    want.push_back(std::move(v));
  }
  std::vector<std::vector<uint8_t>> got = want;
  ASSERT_EQ(loop::run_kernel(lg.kernel, pointers(want), {}), 0) << name;
  ASSERT_EQ(run_on_host(lg.kernel, {}, got, cxx), 0) << name;
  for (size_t o = lg.kernel.num_inputs; o < want.size(); ++o) {
    const DType t = lg.kernel.params[o]->dtype;
    ASSERT_EQ(t, DType::F32) << name;
    const std::vector<uint8_t>& g = got[o];
    const std::vector<uint8_t>& w = want[o];
    double max_abs = 0;
    for (size_t i = 0; i < w.size() / 4; ++i) max_abs = std::max(max_abs, std::fabs(element(w, t, i)));
    for (size_t i = 0; i < w.size() / 4; ++i) {
      const double x = element(g, t, i), y = element(w, t, i);
      ASSERT_LE(std::fabs(x - y), rel * (max_abs + std::fabs(y))) << name << " output " << o << " element " << i;
    }
  }
}

// Two M tiles, two N tiles, three K tiles (the last partial), two batch
// entries: every edge of the tiling, the double buffer and the bf16 fragments.
TEST(MmaEmulation, LoweredGroups) {
  const std::string cxx = host_compiler();
  if (cxx.empty()) GTEST_SKIP() << "no host C++ compiler (c++ or $CXX)";
  for (const auto& [name, build] : gemm_models()) {
    if (name == "matmul" || name == "matmul_bf16") continue;  // as in the cases above
    Model m;
    GraphBuilder b(m);
    build(b);
    for (const LoweredGroup& lg : lowered_gemm_groups(m)) expect_host_run_matches(lg, cxx, name, 1e-5);
  }
}

// Kernels without a contraction whose index arithmetic the emitter writes in
// 32 bits (floordiv/floormod of reshapes, pooling windows with padding, an
// im2col column, a row softmax), elementwise rows stored 16 bytes at a
// time: the generated code, run on the host, gives the evaluator's values
// exactly.
TEST(IndexEmulation, ThirtyTwoBitIndexArithmetic) {
  const std::string cxx = host_compiler();
  if (cxx.empty()) GTEST_SKIP() << "no host C++ compiler (c++ or $CXX)";
  const std::vector<std::pair<std::string, std::function<void(GraphBuilder&)>>> models = {
      {"maxpool", [](GraphBuilder& b) {
         Value* r = b.op("Relu", {b.op("Add", {b.input("x", DType::F32, {2, 3, 9, 7}), b.input("y", DType::F32, {3, 1, 1})})});
         b.output(b.op("MaxPool", {r}, {{"kernel_shape", Attribute::of_ints({3, 3})},
                                        {"strides", Attribute::of_ints({2, 2})},
                                        {"pads", Attribute::of_ints({1, 1, 1, 1})}}));
       }},
      {"transpose_reshape", [](GraphBuilder& b) {
         Value* t = b.op("Transpose", {b.input("x", DType::F32, {2, 3, 5, 4})}, {{"perm", Attribute::of_ints({0, 2, 3, 1})}});
         Value* r = b.op("Reshape", {t, b.constant(Tensor::from_i64({2, 5, 12}))});
         b.output(b.op("Mul", {r, b.input("s", DType::F32, {12})}));
       }},
      {"strided_conv", [](GraphBuilder& b) {
         b.output(b.op("Conv", {b.input("x", DType::F32, {1, 3, 11, 10}), b.input("w", DType::F32, {4, 3, 7, 7})},
                       {{"strides", Attribute::of_ints({2, 2})}, {"pads", Attribute::of_ints({3, 3, 3, 3})}}));
       }},
      {"softmax", [](GraphBuilder& b) { b.output(b.op("Softmax", {b.input("x", DType::F32, {6, 37})})); }},
      // A GEMM epilogue storing through a reshape and a transpose: its row
      // index splits by floordiv/floormod inside the epilogue lambda.
      {"gemm_epilogue_transpose", [](GraphBuilder& b) {
         Value* g = b.op("MatMul", {b.input("x", DType::F32, {15, 16}), b.input("w", DType::F32, {16, 24})});
         Value* r = b.op("Reshape", {b.op("Add", {g, b.input("bias", DType::F32, {24})}),
                                     b.constant(Tensor::from_i64({3, 5, 24}))});
         b.output(b.op("Transpose", {r}, {{"perm", Attribute::of_ints({1, 0, 2})}}));
       }},
  };
  size_t narrowed = 0, wide_stores = 0;
  for (const auto& [name, build] : models) {
    Model m;
    GraphBuilder b(m);
    build(b);
    for (const LoweredGroup& lg : lowered_gemm_groups(m)) {
      const std::string code = emit_cuda_source({lg.kernel}).code;
      if (code.find("(unsigned)") != std::string::npos) ++narrowed;
      if (code.find("*reinterpret_cast<ts_v16*>") != std::string::npos) ++wide_stores;
      const bool exact = name == "maxpool" || name == "transpose_reshape";
      expect_host_run_matches(lg, cxx, name, exact ? 0.0 : name == "softmax" ? 1e-6 : 1e-5);
    }
  }
  EXPECT_GE(narrowed, 4u);  // the reshape, the pooling window, the conv's indices, the epilogue at least
  EXPECT_GE(wide_stores, 2u);  // four floats a thread: the pooled rows of 4, the reshaped rows of 12
}

}  // namespace
}  // namespace tessel::cuda
