// Kernel benchmarks for the compiled CPU path (Google Benchmark; a
// measurement, not a test):
//   - FmaPeak: a loop-IR kernel of independent vector FMA chains, the
//     single-core ceiling the GEMM figures are compared with;
//   - Gemm/M/N/K/threads/tiles/tb/batch: the packed GEMM schedule
//     (schedule/gemm.h) on random f32 inputs (tb: B stored [N, K]; batch:
//     that many independent products), reporting GFLOP/s and the fraction
//     of threads x the measured single-core FMA peak.
// The peak is measured once before the benchmarks run (best of a few runs),
// so that every GEMM row carries its fraction. Times are wall-clock
// (manual timing), since threaded rows run on several cores; each row also
// reports figures per CPU second, which contention on a shared machine does
// not inflate.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <thread>
#include <tuple>

#include <time.h>

#include "tessel/codegen/cpu/cpu_codegen.h"
#include "tessel/loop/eval.h"
#include "tessel/loop/ir.h"
#include "tessel/schedule/cpu_info.h"
#include "tessel/schedule/gemm.h"

namespace tessel {
namespace {

using namespace tessel::loop;  // NOLINT

using Clock = std::chrono::steady_clock;

// CPU time of the whole process (all threads): on this shared machine the
// wall clock also counts the time other processes hold our cores, CPU time
// does not.
double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

// Wall-clock and process CPU seconds of fn().
struct Seconds {
  double wall = 0, cpu = 0;
  Seconds& operator+=(const Seconds& o) {
    wall += o.wall, cpu += o.cpu;
    return *this;
  }
};
template <class Fn>
Seconds timed(const Fn& fn) {
  const double c0 = process_cpu_seconds();
  const auto t0 = Clock::now();
  fn();
  return {std::chrono::duration<double>(Clock::now() - t0).count(), process_cpu_seconds() - c0};
}

BufferRef make_buffer(const std::string& name, std::vector<Expr> shape, BufferScope scope = BufferScope::Param) {
  auto b = std::make_shared<Buffer>();
  b->name = name;
  b->dtype = DType::F32;
  b->shape = std::move(shape);
  b->scope = scope;
  return b;
}

const CpuInfo& host() {
  static const CpuInfo info = host_cpu_info(cpu::host_cpu_features());
  return info;
}

// ---- a tiny fork-join pool: fn(begin, end) over contiguous shares of [0, n) --------------

class Pool {
 public:
  explicit Pool(int threads) {
    for (int t = 1; t < threads; ++t) workers_.emplace_back([this, t] { work(t); });
  }
  ~Pool() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    wake_.notify_all();
    for (std::thread& w : workers_) w.join();
  }
  int threads() const { return static_cast<int>(workers_.size()) + 1; }

  // Splits [0, n) the way the runtime's thread pool does; the caller runs share 0.
  void run(int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      fn_ = &fn, n_ = n, pending_ = threads() - 1, ++generation_;
    }
    wake_.notify_all();
    fn(0, share(0));
    std::unique_lock<std::mutex> lock(mu_);
    done_.wait(lock, [this] { return pending_ == 0; });
  }

 private:
  int64_t share(int t) const { return n_ * (t + 1) / threads(); }
  void work(int t) {
    uint64_t seen = 0;
    for (;;) {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      const int64_t begin = n_ * t / threads(), end = share(t);
      lock.unlock();
      (*fn_)(begin, end);
      lock.lock();
      if (--pending_ == 0) done_.notify_one();
    }
  }

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable wake_, done_;
  const std::function<void(int64_t, int64_t)>* fn_ = nullptr;
  int64_t n_ = 0;
  int pending_ = 0;
  uint64_t generation_ = 0;
  bool stop_ = false;
};

// ---- FMA peak -----------------------------------------------------------------------------

// chains x lanes accumulators, each updated `iters` times by acc = fma(acc, x, y):
// independent chains hide the FMA latency, so this runs at the FMA throughput.
struct PeakKernel {
  int chains = 0, lanes = 0;
  std::unique_ptr<cpu::KernelLibrary> lib;
  cpu::KernelFn fn = nullptr;
};

const PeakKernel& peak_kernel() {
  static const PeakKernel pk = [] {
    PeakKernel p;
    p.lanes = host().vector_lanes_f32;
    p.chains = std::clamp(host().vector_registers - 4, 10, 24);  // leave room for x, y
    Expr C(p.chains), L(p.lanes), n = var("n");
    auto in = make_buffer("in", {C * L}), out = make_buffer("out", {C * L});
    auto acc = make_buffer("acc", {C, L}, BufferScope::Local);
    // acc[c, l]: c unrolled and l vectorized, so every access is at a
    // constant offset and the accumulators live in registers.
    auto tile = [&](const std::string& tag, const std::function<Stmt(Expr, Expr)>& body) {
      Expr c = var("c" + tag), l = var("l" + tag);
      return for_loop("c" + tag, 0, C, ForKind::Unrolled, for_loop("l" + tag, 0, L, ForKind::Vectorized, body(c, l)));
    };
    Expr x = load(in, {Expr(0)}), y = load(in, {Expr(1)});
    Stmt init = tile("0", [&](Expr c, Expr l) { return store(acc, {c, l}, load(in, {c * L + l})); });
    Stmt step = tile("1", [&](Expr c, Expr l) {
      return store(acc, {c, l}, call("fma", DType::F32, {load(acc, {c, l}), x, y}));
    });
    Stmt fin = tile("2", [&](Expr c, Expr l) { return store(out, {c * L + l}, load(acc, {c, l})); });
    Kernel k;
    k.name = "fma_peak";
    k.params = {in, out};
    k.num_inputs = 1;
    k.syms = {"n"};
    k.body = allocate(acc, seq({init, for_loop("it", 0, n, ForKind::Serial, step), fin}));
    p.lib = cpu::compile_kernels({k}, {});
    p.fn = p.lib->lookup("fma_peak");
    return p;
  }();
  return pk;
}

double peak_flops_per_iter() {
  const PeakKernel& p = peak_kernel();
  return 2.0 * p.chains * p.lanes;
}

// One run of `iters` iterations of the FMA chains.
Seconds run_peak(int64_t iters) {
  const PeakKernel& p = peak_kernel();
  std::vector<float> in(p.chains * p.lanes, 0.999f), out(in.size());
  in[1] = 1e-4f;
  void* bufs[] = {in.data(), out.data()};
  Seconds t = timed([&] { p.fn(bufs, &iters, 0, std::numeric_limits<int64_t>::max()); });
  benchmark::DoNotOptimize(out.data());
  return t;
}

// Single-core FMA peak in FLOP/s, per wall-clock and per CPU second: the best
// of several runs of about 0.1 s, since contention only ever lowers it.
struct Peak {
  double wall = 0, cpu = 0;
};
const Peak& measured_peak() {
  static const Peak peak = [] {
    Peak best;
    const int64_t iters = 20'000'000;
    for (int r = 0; r < 9; ++r) {
      const Seconds t = run_peak(iters);
      best.wall = std::max(best.wall, peak_flops_per_iter() * double(iters) / t.wall);
      best.cpu = std::max(best.cpu, peak_flops_per_iter() * double(iters) / t.cpu);
    }
    return best;
  }();
  return peak;
}

// GFLOP/s by wall clock and by CPU time, and the fractions of `threads` x
// the single-core peak (the CPU-time fraction is the efficiency of the
// cores while they ran our threads; it does not see load imbalance).
void report(benchmark::State& state, double flops_per_iter, const Seconds& total, int threads) {
  const double flops = flops_per_iter * double(state.iterations());
  state.counters["GFLOPS"] = flops / total.wall * 1e-9;
  state.counters["peak_frac"] = flops / total.wall / (measured_peak().wall * threads);
  state.counters["GFLOPS_cpu"] = flops / total.cpu * 1e-9;
  state.counters["peak_frac_cpu"] = flops / total.cpu / measured_peak().cpu;
}

void BM_FmaPeak(benchmark::State& state) {
  const int64_t iters = 5'000'000;
  Seconds total;
  for (auto _ : state) {
    const Seconds t = run_peak(iters);
    state.SetIterationTime(t.wall);
    total += t;
  }
  report(state, peak_flops_per_iter() * double(iters), total, 1);
  state.counters["chains"] = peak_kernel().chains;
  state.counters["lanes"] = peak_kernel().lanes;
}
BENCHMARK(BM_FmaPeak)->UseManualTime()->Unit(benchmark::kMillisecond)->Repetitions(5)->ReportAggregatesOnly(true);

// ---- GEMM -------------------------------------------------------------------------------------

// The default schedule, or TESSEL_GEMM_SCHEDULE="mr,nr,mc,kc,nc" for tuning
// experiments (kc and nc are capped at K and N rounded up to nr);
// TESSEL_GEMM_PACK_A=0/1 overrides the A packing.
GemmSchedule schedule_for(int64_t M, int64_t N, int64_t K, bool tiles, int64_t batch) {
  GemmSchedule s = default_gemm_schedule(host(), M, N, K, tiles, batch);
  if (const char* env = std::getenv("TESSEL_GEMM_SCHEDULE")) {
    if (std::sscanf(env, "%d,%d,%d,%d,%d", &s.mr, &s.nr, &s.mc, &s.kc, &s.nc) != 5)
      std::fprintf(stderr, "TESSEL_GEMM_SCHEDULE: want mr,nr,mc,kc,nc\n"), std::exit(2);
    s.kc = static_cast<int>(std::min<int64_t>(s.kc, std::max<int64_t>(K, 1)));
    s.nc = static_cast<int>(std::min<int64_t>(s.nc, (N + s.nr - 1) / s.nr * s.nr));
  }
  if (const char* env = std::getenv("TESSEL_GEMM_PACK_A")) s.pack_a = std::string(env) != "0";
  return s;
}

// One benchmarked product: `batch` GEMMs of M x N x K, B stored [K, N] or,
// with trans_b, [N, K] (transposed weights, attention's K).
struct GemmShape {
  int64_t M, N, K;
  bool tiles, trans_b;
  int64_t batch;
  auto key() const { return std::tuple(M, N, K, tiles, trans_b, batch); }
};

struct GemmKernel {
  GemmSchedule schedule;
  std::unique_ptr<cpu::KernelLibrary> lib;
  cpu::KernelFn fn = nullptr;
  int64_t blocks = 0;  // extent of the parallel loop
  double compile_s = 0;
};

const GemmKernel& gemm_kernel(const GemmShape& sh) {
  static std::map<decltype(sh.key()), GemmKernel> cache;
  auto [it, fresh] = cache.try_emplace(sh.key());
  GemmKernel& g = it->second;
  if (!fresh) return g;
  const int64_t M = sh.M, N = sh.N, K = sh.K;
  auto a = make_buffer("a", {Expr(sh.batch), Expr(M), Expr(K)});
  auto b = make_buffer("b", sh.trans_b ? std::vector<Expr>{Expr(sh.batch), Expr(N), Expr(K)}
                                       : std::vector<Expr>{Expr(sh.batch), Expr(K), Expr(N)});
  auto out = make_buffer("out", {Expr(sh.batch), Expr(M), Expr(N)});
  GemmOperands ops;
  ops.M = M, ops.N = N, ops.K = K, ops.batch = sh.batch, ops.batch_var = "bb";
  const Expr p = sh.batch == 1 ? Expr(0) : var("bb");
  ops.a = [&](Expr i, Expr k) { return load(a, {p, i, k}); };
  ops.b = [&](Expr k, Expr j) { return sh.trans_b ? load(b, {p, j, k}) : load(b, {p, k, j}); };
  ops.epilogue = [&](Expr i, Expr j, Expr acc) { return store(out, {p, i, j}, acc); };
  g.schedule = schedule_for(M, N, K, sh.tiles, sh.batch);
  Kernel k;
  k.name = "gemm";
  k.params = {a, b, out};
  k.num_inputs = 2;
  k.body = gemm_nest(ops, g.schedule, "g");
  const auto t0 = Clock::now();
  g.lib = cpu::compile_kernels({k}, {});
  g.compile_s = std::chrono::duration<double>(Clock::now() - t0).count();
  g.fn = g.lib->lookup("gemm");
  g.blocks = eval_index(gemm_parallel_extent(ops, g.schedule), {});
  return g;
}

void BM_Gemm(benchmark::State& state) {
  const GemmShape sh{state.range(0), state.range(1), state.range(2), state.range(4) != 0, state.range(5) != 0,
                     state.range(6)};
  const int64_t M = sh.M * sh.batch, N = sh.N, K = sh.K;  // the operands' sizes, batch folded into M
  const int threads = static_cast<int>(state.range(3));
  const GemmKernel& g = gemm_kernel(sh);
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> a(M * K), b(sh.batch * K * N), out(M * N);
  for (float& x : a) x = u(rng);
  for (float& x : b) x = u(rng);
  void* bufs[] = {a.data(), b.data(), out.data()};
  Pool pool(threads);
  const std::function<void(int64_t, int64_t)> task = [&](int64_t begin, int64_t end) {
    if (begin < end) g.fn(bufs, nullptr, begin, end);
  };
  Seconds total;
  for (auto _ : state) {
    const Seconds t = timed([&] { pool.run(g.blocks, task); });
    benchmark::ClobberMemory();
    state.SetIterationTime(t.wall);
    total += t;
  }
  report(state, 2.0 * double(M) * double(N) * double(K), total, threads);
  state.counters["compile_ms"] = g.compile_s * 1e3;
  state.SetLabel("mr=" + std::to_string(g.schedule.mr) + " nr=" + std::to_string(g.schedule.nr) +
                 " mc=" + std::to_string(g.schedule.mc) + " kc=" + std::to_string(g.schedule.kc) +
                 " nc=" + std::to_string(g.schedule.nc) + (g.schedule.pack_a ? "" : " A unpacked"));
}

void gemm_shapes(benchmark::internal::Benchmark* b) {
  // {M, N, K, trans_b, batch}
  const std::vector<std::array<int64_t, 5>> shapes = {
      {256, 256, 256, 0, 1},    {512, 512, 512, 0, 1},   {1024, 1024, 1024, 0, 1}, {2048, 2048, 2048, 0, 1},
      {128, 768, 768, 0, 1},    {128, 3072, 768, 0, 1},  {128, 768, 3072, 0, 1},   {1, 1000, 512, 0, 1},
      {3136, 64, 576, 0, 1},  // a 3x3 convolution, 64 -> 64 channels on 56x56, as an implicit GEMM
      // transformer shapes, batch 1, sequence 128: BERT/GPT-2 projections (GPT-2's fused QKV: N = 2304),
      // Gemm with transB (weights stored [N, K]), attention per head (QK^T reads K stored [N, K]; PV),
      // the LM heads of llama_tiny (B [512, 32000]) and GPT-2 (tied embeddings: B stored [50257, 768])
      {128, 2304, 768, 0, 1},   {128, 768, 768, 1, 1},   {128, 3072, 768, 1, 1},   {128, 128, 64, 1, 12},
      {128, 64, 128, 0, 12},    {128, 32000, 512, 0, 1}, {128, 50257, 768, 1, 1},
  };
  // tiles=1: the parallel loop also runs over N blocks, shown where M alone
  // gives few blocks.
  for (const auto& s : shapes)
    for (int64_t tiles : {0, 1})
      for (int64_t threads : {1, 2})
        if (tiles == 0 || s[0] <= 1024) b->Args({s[0], s[1], s[2], threads, tiles, s[3], s[4]});
  b->ArgNames({"M", "N", "K", "threads", "tiles", "tb", "batch"});
}
BENCHMARK(BM_Gemm)
    ->Apply(gemm_shapes)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->MinWarmUpTime(0.2)
    ->Repetitions(5)
    ->ReportAggregatesOnly(true);

}  // namespace
}  // namespace tessel

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  std::printf("measured single-core FMA peak (best of 9): %.1f GFLOP/s wall clock, %.1f GFLOP/s per CPU second"
              " (%d chains x %d lanes)\n",
              tessel::measured_peak().wall * 1e-9, tessel::measured_peak().cpu * 1e-9, tessel::peak_kernel().chains,
              tessel::peak_kernel().lanes);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
