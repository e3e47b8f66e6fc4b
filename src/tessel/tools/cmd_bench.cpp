// tessel bench MODEL [--warmup N] [--iters N] [--input NAME=FILE.npy]... [--seed N]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <optional>

#include "tessel/driver/host_ceilings.h"
#include "tessel/driver/json_util.h"
#include "tessel/support/error.h"
#include "tessel/tools/bench_roofline.h"
#include "tessel/tools/commands.h"
#include "tessel/tools/prepared_model.h"

namespace tessel::cli {

namespace {

std::string fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

// Medians of the host-side parts of a GPU run, over `runs` runs.
struct HostCopies {
  double upload_ms = 0, download_ms = 0, end_to_end_ms = 0;
};

HostCopies host_copies(const GpuExecutable& exe, const std::vector<RtValue>& inputs, int runs) {
  std::vector<double> up, down, total;
  for (int i = 0; i < runs; ++i) {
    GpuRunTimes t;
    const auto t0 = std::chrono::steady_clock::now();
    exe.run(inputs, &t);
    total.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    up.push_back(t.upload_ms);
    down.push_back(t.download_ms);
  }
  for (auto* v : {&up, &down, &total}) std::sort(v->begin(), v->end());
  return {quantile(up, 0.5), quantile(down, 0.5), quantile(total, 0.5)};
}

// The GPU's lines (no ceilings measured there yet).
void print_rows(const std::vector<ProfileRow>& prof) {
  if (!prof.empty())
    std::cout << "  slowest steps (median; GB/s over the bytes each step must move; TFLOP/s of its contractions):\n";
  for (const ProfileRow& r : prof) {
    const double s = r.median_ms / 1e3;
    std::cout << "  " << fixed(r.median_ms, 3) << " ms  " << fixed(100 * r.share, 1) << "%  step " << r.step << "  "
              << r.what << "  " << fixed(r.cost.bytes / 1e6, 2) << " MB";
    if (s > 0) std::cout << " " << fixed(r.cost.bytes / s / 1e9, 1) << " GB/s";
    if (r.cost.flops > 0) {
      std::cout << "  " << fixed(r.cost.flops / 1e9, 3) << " GFLOP";
      if (s > 0) std::cout << " " << fixed(r.cost.flops / s / 1e12, 2) << " TFLOP/s";
    }
    std::cout << "\n";
  }
}

// The CPU's table: one line per step, its roofline in columns, what it
// computes and why its limiter is what it is last.
void print_roofline_rows(const std::vector<ProfileRow>& prof) {
  std::cout << "  slowest steps against this machine's ceilings (median ms, share of the steps' sum; the bytes each "
               "must move at least, the FLOPs of its contractions; docs/roofline.md explains the columns):\n"
            << "          ms   share   step" << roofline_header() << "  what  (why)\n";
  for (const ProfileRow& r : prof) {
    char head[64];
    std::snprintf(head, sizeof head, "  %10.3f %6.1f%% %6zu", r.median_ms, 100 * r.share, r.step);
    std::cout << head << roofline_cells(*r.roof) << "  " << r.what << "  (" << r.roof->why << ")\n";
  }
}

}  // namespace

int cmd_bench(const BenchArgs& a, const CommonArgs& c) {
  DriverOptions o = driver_options(c);
  o.seed = a.seed;
  o.progress = progress_options(c);
  check_options_supported(o);
  TS_CHECK(a.iters >= 1, "--iters must be at least 1, got ", a.iters);
  TS_CHECK(a.warmup >= 0, "--warmup must be >= 0, got ", a.warmup);
  // Checked before the model loads: bad options fail at once, with nothing else printed.
  TS_CHECK(a.profile >= 0, "--profile must be >= 0, got ", a.profile);
  TS_CHECK(a.profile == 0 || o.target != Target::Reference, "--profile needs a compiled target (--target cpu or cuda)");
  const PreparedModel p = prepare_model(a.model, a.inputs, o);
  using Clock = std::chrono::steady_clock;
  std::vector<double> ms;
  std::vector<RunProfile> profiles(a.profile > 0 ? a.iters : 0);
  std::optional<HostCopies> copies;
  if (p.gpu_exe()) {
    // Device time of the kernels alone (CUDA events around each graph
    // replay, inputs resident); the host copies are measured apart.
    ms = p.gpu_exe()->time_on_device(p.inputs, a.warmup, a.iters);
    copies = host_copies(*p.gpu_exe(), p.inputs, a.iters);
    // Per step: each launch on its own between events (slower than the
    // graph replay above, which stays the headline figure).
    if (a.profile > 0) profiles = p.gpu_exe()->profile_steps(p.inputs, a.warmup, a.iters);
  } else {
    for (int i = 0; i < a.warmup; ++i) p.run();
    for (int i = 0; i < a.iters; ++i) {
      const auto t0 = Clock::now();
      p.run(a.profile > 0 ? &profiles[i] : nullptr);
      ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    }
  }
  const int threads = p.exe ? p.exe->threads() : 1;  // the interpreter is single-threaded (cuda: the host thread)
  std::vector<ProfileRow> prof;
  std::optional<LoadedCeilings> ceilings;  // the CPU's, for the roofline (none measured for GPUs yet)
  RooflineSummary roof_summary;
  if (a.profile > 0) {
    const std::map<std::string, int64_t> bindings = input_bindings(p.graph(), p.inputs);
    const std::vector<Step>& steps = p.gpu_exe() ? p.gpu_exe()->steps() : p.exe->steps();
    prof = profile_rows(steps, profiles, bindings);
    if (!p.gpu_exe()) {
      ceilings = host_ceilings(threads, false, std::cerr);  // after the timed runs: it may measure
      // Every step, not only the listed ones, goes into the summary.
      roof_summary = add_rooflines(&prof, steps, ceilings->ceilings, threads, bindings);
    }
    if (prof.size() > static_cast<size_t>(a.profile)) prof.resize(static_cast<size_t>(a.profile));
  }
  std::sort(ms.begin(), ms.end());
  const double median = quantile(ms, 0.5), p10 = quantile(ms, 0.1), p90 = quantile(ms, 0.9);
  const double compile_s = p.compile_ms / 1000, load_s = p.load_ms / 1000;
  if (c.json) {
    Json j = Json::object();
    j["model"] = a.model;
    j["target"] = target_name(o.target);
    j["threads"] = threads;
    j["warmup"] = a.warmup;
    j["iters"] = a.iters;
    j["median_ms"] = median;
    j["p10_ms"] = p10;
    j["p90_ms"] = p90;
    j["min_ms"] = ms.front();
    j["compile_s"] = compile_s;
    j["load_s"] = load_s;
    if (copies) {
      j["timing"] = "device";  // median_ms: CUDA events around the kernels, inputs on the device
      j["cuda_graph"] = p.gpu_exe()->uses_graph();
      j["upload_ms"] = copies->upload_ms;
      j["download_ms"] = copies->download_ms;
      j["end_to_end_ms"] = copies->end_to_end_ms;
    }
    if (a.profile > 0) {
      Json rows = Json::array();
      for (const ProfileRow& r : prof) rows.push_back(profile_row_json(r));
      j["profile"] = rows;
      if (ceilings) j["roofline"] = roofline_summary_json(roof_summary, ceilings->ceilings);
    }
    std::cout << json_line(j) << "\n";
  } else {
    std::cout << a.model << ": median " << fixed(median, 3) << " ms (p10 " << fixed(p10, 3) << ", p90 "
              << fixed(p90, 3) << ", min " << fixed(ms.front(), 3) << ") over " << a.iters << " runs after "
              << a.warmup << " warm-up; target " << target_name(o.target) << ", " << threads << " threads; compile "
              << fixed(compile_s, 3) << " s, load " << fixed(load_s, 3) << " s\n";
    if (copies)
      std::cout << "  device time (CUDA events" << (p.gpu_exe()->uses_graph() ? ", graph replay" : "")
                << "); host copies: upload " << fixed(copies->upload_ms, 3) << " ms, download "
                << fixed(copies->download_ms, 3) << " ms; end to end " << fixed(copies->end_to_end_ms, 3) << " ms\n";
    if (ceilings) {
      print_roofline_rows(prof);
      print_roofline_summary(std::cout, roof_summary, ceilings->ceilings, threads);
    } else {
      print_rows(prof);
    }
  }
  return 0;
}

}  // namespace tessel::cli
