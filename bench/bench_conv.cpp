// Convolution benchmarks for the compiled CPU path (a measurement, not a
// test): one Conv (+ bias + Relu) of a model's shape, batch 1, compiled by
// the whole pipeline (fusion, lowering to the implicit GEMM or the
// depthwise kernel, LLVM) and run by the runtime with 1 or 2 threads; the
// CPU passes run too, so a padded stride-1 conv is timed with its Pad kernel.
// Reports GFLOP/s (2 flops per multiply-add of the conv) by wall clock and
// per CPU second; compare with the FmaPeak row of the same run for the
// fraction of the FMA peak.
#include <benchmark/benchmark.h>

#include <array>
#include <chrono>
#include <ctime>
#include <random>

#include "tessel/driver/compiler.h"
#include "tessel/ir/builder.h"
#include "tessel/passes/pass_manager.h"
#include "tessel/runtime/executable.h"

namespace tessel {
namespace {

struct ConvShape {
  int64_t c, oc, hw, k, stride, group;
};

double cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

// The executable refers to the model, which must outlive it.
struct CompiledConv {
  std::unique_ptr<Model> model = std::make_unique<Model>();
  std::unique_ptr<CompiledModel> compiled;
};

CompiledConv compile_conv(const ConvShape& s, int threads) {
  CompiledConv r;
  Model& m = *r.model;
  GraphBuilder b(m);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-0.5f, 0.5f);
  Tensor w(DType::F32, {s.oc, s.c / s.group, s.k, s.k}), bias(DType::F32, {s.oc});
  for (int64_t i = 0; i < w.numel(); ++i) w.set_f64(i, u(rng));
  for (int64_t i = 0; i < bias.numel(); ++i) bias.set_f64(i, u(rng));
  Value* x = b.input("x", DType::F32, {1, s.c, s.hw, s.hw});
  const int64_t pad = s.k / 2;
  Value* y = b.op("Conv", {x, b.constant(w, "w"), b.constant(bias, "b")},
                  {{"pads", Attribute::of_ints({pad, pad, pad, pad})},
                   {"strides", Attribute::of_ints({s.stride, s.stride})},
                   {"group", Attribute::of_int(s.group)}});
  b.output(b.op("Relu", {y}));
  PassOptions po;
  po.cpu = true;  // as the CLI compiles for the CPU: a padded stride-1 conv reads a Pad's output
  run_pipeline(m, po);
  DriverOptions o;
  o.threads = threads;
  r.compiled = compile_for_cpu(m, o);
  return r;
}

void BM_Conv(benchmark::State& state) {
  const ConvShape s{state.range(0), state.range(1), state.range(2), state.range(3), state.range(4), state.range(5)};
  const int threads = static_cast<int>(state.range(6));
  const CompiledConv cc = compile_conv(s, threads);
  const CompiledModel* c = cc.compiled.get();
  Tensor x(DType::F32, {1, s.c, s.hw, s.hw});
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (int64_t i = 0; i < x.numel(); ++i) x.set_f64(i, u(rng));
  const std::vector<RtValue> in{RtValue(x)};
  double wall = 0, cpu = 0;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    const double c0 = cpu_seconds();
    benchmark::DoNotOptimize(c->exe->run(in));
    cpu += cpu_seconds() - c0;
    const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    wall += t;
    state.SetIterationTime(t);
  }
  const int64_t out_hw = (s.hw + 2 * (s.k / 2) - s.k) / s.stride + 1;
  const double flops = 2.0 * double(s.oc) * double(s.c / s.group) * double(s.k * s.k) * double(out_hw * out_hw);
  state.counters["GFLOPS"] = flops * double(state.iterations()) / wall * 1e-9;
  state.counters["GFLOPS_cpu"] = flops * double(state.iterations()) / cpu * 1e-9;
  std::string kernels;  // "nest+conv_gemm": the Pad's kernel, then the conv's
  for (const LoweredGroup& lg : c->lowered) kernels += (kernels.empty() ? "" : "+") + lg.schedule;
  state.SetLabel(kernels);
}

void conv_shapes(benchmark::internal::Benchmark* b) {
  // {C, OC, H = W, kernel, stride, group}: ResNet-18's 3x3 at 56x56 and at
  // 7x7, its stem, ResNet-50's 1x1 reduce and expand, MobileNet-v2's
  // depthwise 3x3 at 112x112 and its 1x1 expansion.
  const std::vector<std::array<int64_t, 6>> shapes = {
      {64, 64, 56, 3, 1, 1},  {512, 512, 7, 3, 1, 1}, {3, 64, 224, 7, 2, 1},     {256, 64, 56, 1, 1, 1},
      {64, 256, 56, 1, 1, 1}, {32, 32, 112, 3, 1, 32}, {24, 144, 56, 1, 1, 1},
  };
  for (const auto& s : shapes)
    for (int64_t threads : {1, 2}) b->Args({s[0], s[1], s[2], s[3], s[4], s[5], threads});
  b->ArgNames({"C", "OC", "HW", "k", "stride", "group", "threads"});
}
BENCHMARK(BM_Conv)
    ->Apply(conv_shapes)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->MinWarmUpTime(0.2)
    ->Repetitions(3)
    ->ReportAggregatesOnly(true);

}  // namespace
}  // namespace tessel
