// The CUDA backend on a GPU: emitted kernels run on device 0 and must agree
// bit for bit with the loop IR evaluator on the host (NaNs of one type count
// as equal), the schedule's kernels and the hand-written ones alike; kernels
// with a float sum or product in a gpu.lanes reduction (combined in a tree
// on the GPU) within 1e-5 of their row's magnitude (cuda_test_kernels.h's
// compare_outputs). Every test skips (GTEST_SKIP) where there is no usable
// GPU or no NVRTC.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <unistd.h>

#include "gpu_test_util.h"
#include "cuda_test_kernels.h"
#include "tessel/codegen/cuda/driver_api.h"
#include "tessel/codegen/cuda/gpu_runner.h"
#include "tessel/codegen/cuda/nvrtc.h"
#include "tessel/loop/printer.h"

namespace tessel::cuda {
namespace {

using namespace tessel::cuda_testing;  // NOLINT

// Runs `k` on the GPU and in the evaluator from the same random buffers.
void expect_gpu_matches_evaluator(const loop::Kernel& k, GpuKernels& gpu, const std::map<std::string, int64_t>& syms,
                                  uint64_t seed, bool special) {
  HostBuffers want = random_buffers(k, syms, seed, special);
  HostBuffers got = want;
  const std::vector<int64_t> sv = sym_values(k, syms);
  const int32_t rc_want = loop::run_kernel(k, want.ptrs(), sv);
  const int32_t rc_got = gpu.run(k.name, got.ptrs(), sv);
  ASSERT_EQ(rc_got, rc_want) << k.name;
  EXPECT_EQ(compare_outputs(k, got, want, lanes_tolerance(k)), "") << loop::print(k);
}

TEST(GpuDevice, ReportsTheDevice) {
  SKIP_WITHOUT_GPU();
  const DeviceInfo& d = device_info();
  std::printf("device: %s, sm_%d%d, %d SMs, %.1f GiB, driver %d, NVRTC %s, cubin arch %s\n", d.name.c_str(),
              d.cc_major, d.cc_minor, d.multiprocessors, static_cast<double>(d.total_memory) / (1 << 30),
              d.driver_version, nvrtc_version().c_str(), device_arch().c_str());
  EXPECT_GE(d.cc_major, 7);
  EXPECT_GT(d.multiprocessors, 0);
}

TEST(GpuKernels, HandWrittenKernelsMatchTheEvaluator) {
  SKIP_WITHOUT_GPU();
  std::vector<TextKernel> ts = hand_written_kernels();
  std::vector<loop::Kernel> ks;
  for (const TextKernel& t : ts) ks.push_back(gpu_kernel(t));
  GpuKernels gpu(ks);
  for (size_t i = 0; i < ts.size(); ++i)
    for (uint64_t seed : {1u, 2u, 3u}) expect_gpu_matches_evaluator(ks[i], gpu, ts[i].syms, seed, ts[i].special_values);
}

TEST(GpuKernels, FusedGroupsMatchTheEvaluator) {
  SKIP_WITHOUT_GPU();
  for (const GroupModel& gm : group_models()) {
    Model m;
    GraphBuilder b(m);
    gm.build(b);
    std::vector<loop::Kernel> ks;
    for (const LoweredGroup& lg : lowered_gpu_groups(m)) ks.push_back(lg.kernel);
    ASSERT_FALSE(ks.empty()) << gm.name;
    GpuKernels gpu(ks);
    for (const loop::Kernel& k : ks)
      for (uint64_t seed : {5u, 6u}) expect_gpu_matches_evaluator(k, gpu, {}, seed, true);
  }
}

// Rows of odd counts and lengths through the row-per-block (and per-warp)
// schedule: softmax, LayerNormalization and ReduceSum, from ordinary values
// (no NaNs or infinities), against the evaluator running the unscheduled
// nest (the scheduled kernel gives the same there, tests/unit/gpu_lanes_test
// checks that; the nest is T times cheaper to evaluate).
TEST(GpuKernels, RowReductionsOfOddSizes) {
  SKIP_WITHOUT_GPU();
  for (int64_t rows : {1, 3, 1000}) {
    for (int64_t len : {1, 31, 33, 768, 4097}) {
      for (const char* op : {"Softmax", "LayerNormalization", "ReduceSum"}) {
        Model m;
        GraphBuilder b(m);
        Value* x = b.input("x", DType::F32, {rows, len});
        if (std::string(op) == "LayerNormalization") {
          b.output(b.op(op, {x, b.input("scale", DType::F32, {len}), b.input("bias", DType::F32, {len})},
                        {{"axis", Attribute::of_int(-1)}}));
        } else if (std::string(op) == "ReduceSum") {
          b.output(b.op(op, {x, b.const_i64({1})}, {{"keepdims", Attribute::of_int(0)}}));
        } else {
          b.output(b.op(op, {x}, {{"axis", Attribute::of_int(-1)}}));
        }
        for (const LoweredGroup& nest : gpu_nest_groups(m)) {
          const loop::Kernel k = schedule_for_gpu(nest.kernel);
          GpuKernels gpu({k});
          HostBuffers want = random_buffers(k, {}, static_cast<uint64_t>(rows * 7 + len), false);
          HostBuffers got = want;
          ASSERT_EQ(loop::run_kernel(nest.kernel, want.ptrs(), {}), 0);
          ASSERT_EQ(gpu.run(k.name, got.ptrs(), {}), 0) << op << " " << rows << "x" << len;
          EXPECT_EQ(compare_outputs(k, got, want, lanes_tolerance(k)), "")
              << op << " " << rows << "x" << len << "\n" << loop::print(k);
        }
      }
    }
  }
}

TEST(GpuKernels, SymbolicSizesIncludingEmptyAndLarge) {
  SKIP_WITHOUT_GPU();
  const TextKernel ints = hand_written_kernels()[1];
  const loop::Kernel k = gpu_kernel(ints);
  GpuKernels gpu({k});
  // 0: nothing runs; 1, 63, 64, 65: chunk edges; 300001: many blocks.
  for (int64_t n : {0, 1, 63, 64, 65, 300001}) expect_gpu_matches_evaluator(k, gpu, {{"n", n}}, 9, true);
}

TEST(GpuKernels, FailedAssertReturnsItsNumber) {
  SKIP_WITHOUT_GPU();
  const TextKernel rows = hand_written_kernels()[3];
  const loop::Kernel k = gpu_kernel(rows);
  GpuKernels gpu({k});
  HostBuffers h = random_buffers(k, rows.syms, 4, false);
  reinterpret_cast<float*>(h.data[0].data())[123] = 5000.0f;  // x[2, 23] >= 1000
  EXPECT_EQ(gpu.run(k.name, h.ptrs(), sym_values(k, rows.syms)), 2);
  HostBuffers e = random_buffers(k, rows.syms, 4, false);
  reinterpret_cast<float*>(e.data[0].data())[123] = 5000.0f;
  EXPECT_EQ(loop::run_kernel(k, e.ptrs(), sym_values(k, rows.syms)), 2);
  // The process goes on: the next launch is fine.
  HostBuffers ok = random_buffers(k, rows.syms, 4, false);
  EXPECT_EQ(gpu.run(k.name, ok.ptrs(), sym_values(k, rows.syms)), 0);
}

// Where the evaluator refuses (it throws on x / 0 and on out-of-range shifts),
// generated code is defined as the CPU code generator defines it.
TEST(GpuKernels, DivisionByZeroAndWideShiftsAreDefined) {
  SKIP_WITHOUT_GPU();
  const loop::Kernel k = loop::parse_kernel(
      "kernel edge(in %a: i32[4], in %b: i32[4], out %q: i32[4], out %r: i32[4], out %l: i32[4], out %s: i32[4]) {\n"
      "  gpu.thread.x for i in [0, 4) {\n"
      "    q[i] = a[i] / b[i] + floordiv(a[i], b[i])\n    r[i] = a[i] % b[i] + floormod(a[i], b[i])\n"
      "    l[i] = a[i] << b[i]\n    s[i] = a[i] >> b[i]\n  }\n}\n");
  GpuKernels gpu({k});
  int32_t a[4] = {7, -7, INT32_MIN, -5}, b[4] = {0, 0, -1, 40}, q[4], r[4], l[4], s[4];
  ASSERT_EQ(gpu.run("edge", {a, b, q, r, l, s}, {}), 0);
  EXPECT_EQ(q[0], 0);
  EXPECT_EQ(r[0], 0);
  EXPECT_EQ(q[1], 0);
  EXPECT_EQ(q[2], static_cast<int32_t>(2 * static_cast<int64_t>(INT32_MIN)));  // MIN / -1 wraps, twice
  EXPECT_EQ(r[2], 0);
  EXPECT_EQ(l[3], 0);   // shift by 40: the sign fill
  EXPECT_EQ(s[3], -1);
}

TEST(GpuKernels, CubinCacheHitsOnTheSecondCompile) {
  SKIP_WITHOUT_GPU();
  const auto dir = std::filesystem::temp_directory_path() / ("tessel_gpu_cache_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  const loop::Kernel k = gpu_kernel(hand_written_kernels()[0]);
  const auto t0 = std::chrono::steady_clock::now();
  GpuKernels first({k}, dir.string());
  const auto t1 = std::chrono::steady_clock::now();
  GpuKernels second({k}, dir.string());
  const auto t2 = std::chrono::steady_clock::now();
  EXPECT_FALSE(first.from_cache());
  EXPECT_TRUE(second.from_cache());
  std::printf("compile %.1f ms, cache hit %.1f ms\n", std::chrono::duration<double, std::milli>(t1 - t0).count(),
              std::chrono::duration<double, std::milli>(t2 - t1).count());
  expect_gpu_matches_evaluator(k, second, {{"n", 100}}, 1, true);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tessel::cuda
