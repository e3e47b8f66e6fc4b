// Options shared by the CLI's subcommands, and the parsing of their values.
#pragma once

#include <cstdint>
#include <map>
#include <ostream>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "tessel/schedule/schedule.h"
#include "tessel/support/progress.h"

namespace tessel {

constexpr const char* kTesselVersion = "0.1.0";

enum class Target { Reference, Cpu, Cuda };
enum class Precision { FP32, BF16, FP16 };

const char* target_name(Target t);
const char* precision_name(Precision p);
// Throw tessel::Error naming the accepted values.
Target parse_target(const std::string& s);
Precision parse_precision(const std::string& s);

// "SYMBOL=N" (N >= 1).
std::pair<std::string, int64_t> parse_dim_binding(const std::string& s);
// "NAME=FILE": the first '=' separates (file names may contain '=').
std::pair<std::string, std::string> parse_input_binding(const std::string& s);
// Parses repeated --dim values into a map; the same symbol twice with
// different values is an error.
std::map<std::string, int64_t> parse_dim_bindings(const std::vector<std::string>& specs);

struct DriverOptions {
  Target target = Target::Cpu;
  Precision precision = Precision::FP32;
  std::map<std::string, int64_t> dims;  // --dim
  int threads = 0;                      // 0 = default
  bool memory_planning = true;          // kernels' intermediates in one arena (runtime/memory_plan.h)
  std::set<std::string> disabled_passes;
  std::string print_after;
  std::ostream* print_stream = nullptr;
  uint64_t seed = 0;
  std::ostream* log = nullptr;  // notes and warnings (stderr when null)
  // --tuning-db: tuned schedules for this machine's kernels (tessel tune);
  // empty: the default schedules.
  std::string tuning_db;
  // --knob: template knobs set for every kernel that takes them, over the
  // defaults and the tuned schedules (schedule.h parse_knob).
  std::vector<Primitive> knobs;
  // compile --cpu: the CPU the kernels are compiled for ("host", or an LLVM
  // CPU name such as x86-64-v3); schedules follow its features.
  std::string cpu = "host";
  // Where compiles show their progress (support/progress.h); none by default.
  ProgressOptions progress;
};

// Throws when the target is not implemented yet, or (with
// needs_device) when --target cuda has no usable GPU here. Compiling and
// inspecting CUDA kernels needs no device.
void check_options_supported(const DriverOptions& o, bool needs_device = true);

// The options in effect, a line each, for `tessel inspect MODEL --emit
// options`: the flags (or their defaults), every knob key with the value set
// (or "default") and its accepted values, and the environment's deployment
// settings (support/env.h).
std::string print_options(const DriverOptions& o);

// The folder for caches: $TESSEL_CACHE_DIR, else ~/.cache/tessel. Nothing
// creates it yet (tessel keeps no caches so far).
std::string cache_dir();

}  // namespace tessel
