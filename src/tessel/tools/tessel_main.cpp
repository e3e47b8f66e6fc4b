// The `tessel` command line. See docs/cli.md for the contract.
//
// Errors: one line "error: <file>: <what>" on stderr and exit status 1 (with
// --json, standard output still gets exactly one JSON object: {"error": ...}).
// Usage errors: a message and exit status 2.
#include <CLI/CLI.hpp>

#include <iostream>
#include <new>

#include "tessel/driver/json_util.h"
#include "tessel/driver/options.h"
#include "tessel/support/error.h"
#include "tessel/tools/commands.h"

namespace {

using namespace tessel;
using namespace tessel::cli;

void add_common(CLI::App* sub, CommonArgs* c) {
  sub->add_option("--target", c->target,
                  "reference | cpu | cuda (default cpu). cpu compiles kernels with LLVM; nodes without a compiled "
                  "form run on the reference interpreter (see inspect --emit fused); cuda compiles them with NVRTC "
                  "and runs them on the GPU (an error where there is none; docs/codegen_cuda.md)")
      ->check(CLI::IsMember({"reference", "cpu", "cuda"}));
  sub->add_option("--dim", c->dims, "Bind a symbolic dimension, SYMBOL=N (repeatable)")
      ->allow_extra_args(false)
      ->type_name("SYMBOL=N");
  sub->add_option("--threads", c->threads, "Worker threads for compiled kernels (0 = all cores; the interpreter uses one)");
  sub->add_option("--precision", c->precision,
                  "fp32 | bf16 | fp16 (default fp32). bf16/fp16 compute in that type, with fp32 accumulation in "
                  "MatMul/Gemm/Conv and fp32 statistics (Softmax, normalisation, Reduce*); inputs and outputs "
                  "stay fp32 (docs/precision.md)")
      ->check(CLI::IsMember({"fp32", "bf16", "fp16"}));
  sub->add_option("--disable-pass", c->disable_pass, "Skip a pass of the pipeline (repeatable; to compare)")
      ->allow_extra_args(false)
      ->type_name("NAME");
  sub->add_option("--tuning-db", c->tuning_db,
                  "Tuned schedules from this database (tessel tune --db); kernels without a record keep the default")
      ->type_name("PATH");
  sub->add_option("--knob", c->knobs,
                  "Set a schedule template knob for every kernel that takes it, over the defaults and tuned "
                  "schedules, e.g. gpu.gemm.tma=0, gpu.flash.on=0, gemm.pack.a=0 (repeatable; docs/tuning.md)")
      ->allow_extra_args(false)
      ->type_name("PRIMITIVE.KEY=VALUE");
  sub->add_flag("--json", c->json, "Print exactly one JSON object on stdout; logs go to stderr");
}

// --input NAME=FILE.npy (run, bench, tune, bisect, report).
void add_inputs(CLI::App* sub, std::vector<std::string>* inputs) {
  sub->add_option("--input", *inputs, "Input value from an .npy file, NAME=FILE.npy (repeatable)")
      ->allow_extra_args(false)
      ->type_name("NAME=FILE");
}

// For the subcommands that compile or tune (docs/cli.md, "Progress").
void add_quiet(CLI::App* sub, CommonArgs* c) {
  sub->add_flag("--quiet", c->quiet,
                "No progress on standard error (by default a bar on a terminal, else a line every few seconds "
                "and a final one)");
}

std::string one_line(std::string s) {
  for (char& ch : s)
    if (ch == '\n' || ch == '\r') ch = ' ';
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

int report_error(const std::string& file, const std::string& what, bool json) {
  const std::string msg = one_line(what);
  std::cerr << "error: " << file << ": " << msg << "\n";
  if (json) {
    Json j = Json::object();
    j["error"] = msg;
    j["file"] = file;
    std::cout << json_line(j) << "\n";
  }
  std::cout.flush();
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tessel: a machine-learning compiler (ONNX in; CPU and CUDA kernels out)", "tessel"};
  app.set_version_flag("--version", std::string("tessel ") + kTesselVersion);
  app.require_subcommand(1);
  app.fallthrough(false);

  CommonArgs common;
  RunArgs run_args;
  InspectArgs inspect_args;
  TestOnnxArgs test_args;
  CompileArgs compile_args;
  BenchArgs bench_args;
  DemoArgs demo_args;

  CLI::App* run = app.add_subcommand("run", "Run a model on inputs from .npy files (missing inputs: seeded random)");
  run->add_option("MODEL", run_args.model, "Model file (.onnx, .tir or a compiled artifact)")->required();
  add_inputs(run, &run_args.inputs);
  run->add_option("--save-outputs", run_args.save_outputs,
                  "Write output_0.npy, output_1.npy, ... into DIR (created if missing)")
      ->type_name("DIR");
  run->add_option("--seed", run_args.seed, "Seed of the random inputs (default 0)");
  add_common(run, &common);
  add_quiet(run, &common);

  CLI::App* inspect = app.add_subcommand("inspect", "Print the IR after the pass pipeline");
  inspect->add_option("MODEL", inspect_args.model, "Model file (.onnx, .tir or a compiled artifact)")->required();
  inspect->add_option("--print-after", inspect_args.print_after, "Print the IR after this pass, or after every pass (all)")
      ->type_name("PASS|all");
  inspect->add_option("--emit", inspect_args.emit,
                      "What to print: graph (default), fused (kernel groups), loop (loop IR), schedule (each kernel's "
                      "schedule, docs/tuning.md), llvm, asm, plan (memory plan), cuda (CUDA C++ of the GPU kernels), "
                      "ptx (their PTX, through NVRTC), options (the compile options, knobs and environment in effect)");
  inspect->add_option("--cuda-arch", inspect_args.cuda_arch,
                      "Architecture for --emit ptx (default: the GPU's, else sm_90a)")
      ->type_name("sm_XY");
  inspect->add_flag("--elide-constants", inspect_args.elide_constants,
                    "Show large constants as dense<...> (the output can no longer be parsed)");
  add_common(inspect, &common);

  CLI::App* compile = app.add_subcommand(
      "compile",
      "Compile a model into an artifact that run, bench, inspect and the runtime library load: for this CPU, or "
      "with --target cuda every GPU kernel through NVRTC into a cubin per architecture (no GPU needed)");
  compile->add_option("MODEL", compile_args.model, "Model file (.onnx or .tir)")->required();
  compile->add_option("-o,--output", compile_args.output,
                      "Artifact to write (atomically; nothing on error)")
      ->required()
      ->type_name("FILE");
  compile->add_option("--cpu", compile_args.cpu,
                      "CPU the kernels are compiled for: host (default), or an LLVM CPU name such as x86-64-v3 "
                      "(AVX2, FMA: runs on every x86-64 CPU since 2015), x86-64-v4 (AVX-512) or znver4; the artifact "
                      "runs on CPUs with its features and is refused elsewhere (docs/deploy.md)")
      ->type_name("NAME");
  compile->add_option("--cuda-arch", compile_args.cuda_arch,
                      "Architectures for --target cuda, comma-separated: one cubin each, the runtime picks the "
                      "GPU's (default: the GPU's, else sm_90a)")
      ->type_name("sm_XY[,...]");
  add_common(compile, &common);
  add_quiet(compile, &common);

  CLI::App* bench = app.add_subcommand("bench", "Time whole-model inference (compile once, warm up, then timed runs)");
  bench->add_option("MODEL", bench_args.model, "Model file (.onnx, .tir or a compiled artifact)")->required();
  bench->add_option("--warmup", bench_args.warmup, "Untimed runs first (default 3)");
  bench->add_option("--iters", bench_args.iters, "Timed runs (default 20)");
  add_inputs(bench, &bench_args.inputs);
  bench->add_option("--seed", bench_args.seed, "Seed of the random inputs (default 0)");
  bench->add_option("--profile", bench_args.profile,
                    "Also time each step and list the N slowest, with the bytes each moves and its contraction "
                    "FLOPs (median over the timed runs; target cpu, or cuda: each launch between CUDA events)")
      ->type_name("N");
  add_common(bench, &common);
  add_quiet(bench, &common);

  CeilingsArgs ceilings_args;
  CLI::App* ceilings = app.add_subcommand(
      "ceilings", "Measure this machine's ceilings (FMA peak, L1/L2/LLC/DRAM read bandwidth, launch cost) for 1 "
                  "and --threads threads, cached per hardware fingerprint; bench --profile reads them "
                  "(docs/roofline.md)");
  ceilings->add_option("--target", common.target, "cpu (default; cuda is not measured yet)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  ceilings->add_option("--threads", common.threads, "Thread count to measure besides 1 (0 = all cores)");
  ceilings->add_flag("--refresh", ceilings_args.refresh, "Measure again, replacing the cached ceilings");
  ceilings->add_flag("--json", common.json, "Print exactly one JSON object on stdout; logs go to stderr");

  CLI::App* test = app.add_subcommand("test-onnx", "Run ONNX test cases (model.onnx + test_data_set_*) in one process");
  test->add_option("DIR", test_args.dirs, "Case folders, or folders of case folders")->required();
  add_common(test, &common);

  TuneArgs tune_args;
  CLI::App* tune = app.add_subcommand(
      "tune", "Search each kernel's schedules (measurements on this machine's CPU, or with --target cuda on its GPU) "
              "and record the fastest in a tuning database that compile, run and bench read with --tuning-db "
              "(docs/tuning.md)");
  tune->add_option("MODEL", tune_args.model, "Model file (.onnx or .tir)")->required();
  add_inputs(tune, &tune_args.inputs);
  tune->add_option("--db", tune_args.db, "Tuning database to write (default <cache dir>/tuning.db)")->type_name("PATH");
  tune->add_option("--budget", tune_args.budget, "Time for the whole search, e.g. 90s, 10m, 1h (default 10m)");
  tune->add_option("--trials", tune_args.trials, "Candidates measured per kernel at most (default 64)");
  tune->add_option("--seed", tune_args.seed, "Seed of the random inputs and of the search (default 0)");
  tune->add_option("--trials-out", tune_args.trials_out, "Write every measured candidate as JSON lines (for the "
                                                          "cost model's evaluation)")
      ->type_name("FILE");
  add_common(tune, &common);
  add_quiet(tune, &common);

  BisectArgs bisect_args;
  CLI::App* bisect = app.add_subcommand(
      "bisect", "Find the first graph pass, then the first compiled kernel, whose outputs leave the tolerance "
                "against the reference interpreter (exit status 3 when one is found; docs/cli.md)");
  bisect->add_option("MODEL", bisect_args.model, "Model file (.onnx or .tir)")->required();
  add_inputs(bisect, &bisect_args.inputs);
  bisect->add_option("--seed", bisect_args.seed, "Seed of the random inputs (default 0)");
  bisect->add_option("--emit-repro", bisect_args.emit_repro,
                     "Write the bad kernel's group as a standalone model (.tir) to PATH, with its inputs and "
                     "expected output as .npy files beside it")
      ->type_name("PATH");
  add_common(bisect, &common);

  ReportArgs report_args;
  CLI::App* report = app.add_subcommand(
      "report", "Write one self-contained HTML page that explains the model on this CPU: fused groups, each "
                "step's time against the roofline, each kernel's schedule, loop IR and LLVM IR, the pass timings "
                "and the compile log (docs/report.md)");
  report->add_option("MODEL", report_args.model, "Model file (.onnx or .tir)")->required();
  report->add_option("-o,--output", report_args.output, "The HTML page to write (atomically; nothing on error)")
      ->required()
      ->type_name("FILE");
  report->add_option("--warmup", report_args.warmup, "Untimed runs first (default 3)");
  report->add_option("--iters", report_args.iters, "Timed runs, each step timed (default 20)");
  add_inputs(report, &report_args.inputs);
  report->add_option("--seed", report_args.seed, "Seed of the random inputs (default 0)");
  report->add_flag("--no-llvm-ir", report_args.no_llvm_ir,
                   "Leave out each kernel's LLVM IR (its generation takes about as long as the compile's "
                   "optimisation; the page is then smaller)");
  add_common(report, &common);
  add_quiet(report, &common);

  CLI::App* demo = app.add_subcommand("demo", "Build, run and check a small built-in CNN");
  demo->add_option("--seed", demo_args.seed, "Seed of the random input (default 0)");
  add_common(demo, &common);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "error: usage: " << one_line(e.what()) << "\n"
              << "Run 'tessel --help' or 'tessel <subcommand> --help' for usage.\n";
    return 2;
  }

  std::string file = "tessel";
  if (run->parsed()) file = run_args.model;
  if (inspect->parsed()) file = inspect_args.model;
  if (compile->parsed()) file = compile_args.model;
  if (bench->parsed()) file = bench_args.model;
  if (tune->parsed()) file = tune_args.model;
  if (bisect->parsed()) file = bisect_args.model;
  if (report->parsed()) file = report_args.model;
  if (test->parsed()) file = test_args.dirs.empty() ? "test-onnx" : test_args.dirs.front();
  if (demo->parsed()) file = "demo";
  if (ceilings->parsed()) file = "ceilings";
  try {
    if (run->parsed()) return cmd_run(run_args, common);
    if (inspect->parsed()) return cmd_inspect(inspect_args, common);
    if (bench->parsed()) return cmd_bench(bench_args, common);
    if (compile->parsed()) return cmd_compile(compile_args, common);
    if (test->parsed()) return cmd_test_onnx(test_args, common);
    if (demo->parsed()) return cmd_demo(demo_args, common);
    if (tune->parsed()) return cmd_tune(tune_args, common);
    if (bisect->parsed()) return cmd_bisect(bisect_args, common);
    if (report->parsed()) return cmd_report(report_args, common);
    if (ceilings->parsed()) return cmd_ceilings(ceilings_args, common);
  } catch (const std::bad_alloc&) {
    return report_error(file, "out of memory", common.json);
  } catch (const std::exception& e) {
    return report_error(file, e.what(), common.json);
  } catch (...) {
    return report_error(file, "unknown internal error", common.json);
  }
  std::cerr << "error: usage: no subcommand\n";
  return 2;
}
