// The subcommands of the `tessel` executable. Each returns the process exit
// status and throws tessel::Error (or any std::exception) for errors, which
// the main function reports as one line "error: <file>: <what>".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tessel/driver/options.h"

namespace tessel::cli {

// Options every subcommand takes.
struct CommonArgs {
  std::string target = "cpu";
  std::vector<std::string> dims;
  int threads = 0;
  std::string precision = "fp32";
  bool json = false;
  std::vector<std::string> disable_pass;  // --disable-pass NAME (repeatable)
  std::string tuning_db;                  // --tuning-db PATH
  std::vector<std::string> knobs;         // --knob PRIMITIVE.KEY=VALUE (repeatable)
  bool quiet = false;                     // --quiet: no progress (compile, run, bench, tune)
};

DriverOptions driver_options(const CommonArgs& c);
// Progress on standard error (a bar on a terminal, else plain lines), none
// with --quiet.
ProgressOptions progress_options(const CommonArgs& c);
// Unique names in order of first appearance, comma-separated.
std::string join(const std::vector<std::string>& v);
// Fails with the pipeline's pass names unless `name` is one (or "all" where allowed).
void check_pass_name(const std::string& flag, const std::string& name, bool allow_all);

struct RunArgs {
  std::string model;
  std::vector<std::string> inputs;  // NAME=FILE.npy
  std::string save_outputs;
  uint64_t seed = 0;
};
int cmd_run(const RunArgs& a, const CommonArgs& c);

struct InspectArgs {
  std::string model;
  std::string print_after;
  std::string emit = "graph";
  std::string cuda_arch;  // --emit ptx: sm_XY[a]; "" = the device's, else sm_90a
  bool elide_constants = false;
};
int cmd_inspect(const InspectArgs& a, const CommonArgs& c);

struct BenchArgs {
  std::string model;
  std::vector<std::string> inputs;  // NAME=FILE.npy
  int warmup = 3;
  int iters = 20;
  uint64_t seed = 0;
  int profile = 0;  // > 0: print the this many slowest steps (median per step over the timed runs)
};
int cmd_bench(const BenchArgs& a, const CommonArgs& c);

struct CeilingsArgs {
  bool refresh = false;  // --refresh: measure again over the cached ones
};
int cmd_ceilings(const CeilingsArgs& a, const CommonArgs& c);

struct CompileArgs {
  std::string model;
  std::string output;     // -o FILE
  std::string cuda_arch;  // --target cuda: sm_XY[a]; "" = the device's, else sm_90a
  std::string cpu = "host";  // --cpu: the CPU the kernels are compiled for
};
int cmd_compile(const CompileArgs& a, const CommonArgs& c);

struct TuneArgs {
  std::string model;
  std::vector<std::string> inputs;  // NAME=FILE.npy
  std::string db;                   // --db (default: <cache dir>/tuning.db)
  std::string budget = "10m";       // --budget: 90s, 10m, 1h
  int trials = 64;                  // --trials per kernel
  uint64_t seed = 0;
  std::string trials_out;           // --trials-out FILE: every measured candidate (JSON lines)
};
int cmd_tune(const TuneArgs& a, const CommonArgs& c);

struct BisectArgs {
  std::string model;
  std::vector<std::string> inputs;  // NAME=FILE.npy
  std::string emit_repro;           // --emit-repro PATH
  uint64_t seed = 0;
};
// Exit status 0 when clean, kBisectFound when a pass or group is named.
constexpr int kBisectFound = 3;
int cmd_bisect(const BisectArgs& a, const CommonArgs& c);

struct ReportArgs {
  std::string model;
  std::string output;               // -o FILE.html
  std::vector<std::string> inputs;  // NAME=FILE.npy
  int warmup = 3;
  int iters = 20;
  uint64_t seed = 0;
  bool no_llvm_ir = false;          // --no-llvm-ir: the page without each kernel's LLVM IR
};
int cmd_report(const ReportArgs& a, const CommonArgs& c);

struct TestOnnxArgs {
  std::vector<std::string> dirs;
};
int cmd_test_onnx(const TestOnnxArgs& a, const CommonArgs& c);

struct DemoArgs {
  uint64_t seed = 0;
};
int cmd_demo(const DemoArgs& a, const CommonArgs& c);

}  // namespace tessel::cli
