// tessel bisect: the first stage of the compiler that changes a model's
// numbers, found against the reference interpreter (docs/cli.md, "bisect").
//
//   1. Passes: the pipeline runs step by step (PassOptions::after_pass);
//      after every step that changed the model, the model as it is then is
//      interpreted on the same inputs and its outputs compared with the
//      unoptimised model's. The first step outside the tolerance is named.
//   2. Groups: every compiled fused group of the optimised model, in
//      execution order, is cut out as a model of its own (its nodes, its
//      constants, its other inputs as graph inputs), compiled for the target
//      (CPU through LLVM, CUDA through NVRTC) and run on the values the
//      interpreter gave its inputs in the whole model; its output is
//      compared with the interpreter's. The first group outside the
//      tolerance is named, with its graph IR and loop IR, and its standalone
//      model can be written out as a reproducer.
//
// Tolerances are scaled_tolerance (driver/compare.h): fp32 rtol 1e-3 and an
// atol of 1e-4 of the output's largest magnitude plus 1e-5 (what the CPU
// tuner accepts of another summation order); bf16/fp16 rtol 5e-2 and 2e-2
// (what the GPU tuner accepts at half precision).
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "tessel/driver/compare.h"
#include "tessel/driver/options.h"
#include "tessel/ir/graph.h"
#include "tessel/passes/fusion.h"

namespace tessel {

struct BisectOptions {
  DriverOptions driver;        // target (cpu or cuda), precision, dims, disabled passes, knobs, threads, seed
  std::string emit_repro;      // a culprit group's standalone model goes here (.tir); "" = not written
};

struct PassCheck {
  std::string pass;      // the step's name (infer_shapes and the folding steps repeat)
  bool changed = false;  // an unchanged step computes what the one before did: not interpreted again
  bool checked = false;  // interpreted and compared (steps after the first bad one are not)
  std::string mismatch;  // "" when within the tolerance, else compare_values's line per output
};

struct GroupCheck {
  std::string group;     // kernel name, e.g. "k3_relu"
  std::string mismatch;  // "" when within the tolerance (or the standalone kernel's run error)
  // "" when the standalone group compiled to the model's kernel (same
  // structural hash), else why the check ran on a different one.
  std::string note;
};

struct BisectReport {
  std::string target;
  std::vector<PassCheck> passes;   // every step that ran, in order
  std::optional<size_t> bad_pass;  // index into passes
  std::vector<GroupCheck> groups;  // compiled groups in execution order, up to the first bad one
  std::optional<size_t> bad_group;  // index into groups
  std::string group_ir;            // the bad group as a standalone model (graph IR, large constants elided)
  std::string loop_ir;             // the bad group's kernel in the model (loop IR)
  std::vector<std::string> repro_files;  // what emit_repro wrote: the model, its inputs, its expected output
  std::string repro_command;       // a tessel command line that shows the mismatch
  bool clean() const { return !bad_pass && !bad_group; }
  int passes_checked() const;
};

// The report as `tessel bisect` prints it: a line per pass, then the first
// bad pass and the first bad kernel (with its graph IR, loop IR and the
// reproducer), or "clean: N passes (K interpreted), M groups checked".
std::string bisect_report_text(const BisectReport& r);

// What bisect accepts of `actual` against `expected` at `precision` (see
// the header comment).
Tolerance bisect_tolerance(const Tensor& expected, Precision precision);

// `m` is the model as loaded (shape inputs folded), `inputs` its inputs in
// graph order; `dims` the symbol values. `m` is rewritten by the pipeline.
// Notes go to o.driver.log (stderr when null). Throws tessel::Error for bad
// input and for a model the target cannot compile.
BisectReport bisect_model(Model& m, const std::vector<RtValue>& inputs, const std::map<std::string, int64_t>& dims,
                          const BisectOptions& o);

// Loads `path`, reads the NAME=FILE.npy inputs, binds the symbols and draws
// the missing inputs as `tessel run` does, then bisect_model.
BisectReport bisect_file(const std::string& path, const std::vector<std::string>& input_specs,
                         const BisectOptions& o);

// One fused group of `g` as a model of its own: its nodes (copies), the
// constants they read as initializers, and every other value they read from
// outside the group as a graph input (`inputs`: the original values, in
// graph input order); its output is the group's root output.
struct GroupModel {
  std::unique_ptr<Model> model;
  std::vector<const Value*> inputs;
  const Value* output = nullptr;
};
GroupModel group_model(const Model& m, const FusionGroup& g);

}  // namespace tessel
