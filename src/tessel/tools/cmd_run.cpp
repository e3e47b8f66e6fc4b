// tessel run MODEL [--input NAME=FILE.npy]... [--save-outputs DIR] [--seed N]
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>

#include "tessel/driver/json_util.h"
#include "tessel/driver/npy.h"
#include "tessel/driver/session.h"
#include "tessel/passes/pass_manager.h"
#include "tessel/support/error.h"
#include "tessel/tools/commands.h"
#include "tessel/tools/prepared_model.h"

namespace tessel::cli {

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i)
    if (std::find(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(i), v[i]) == v.begin() + static_cast<std::ptrdiff_t>(i))
      out += (out.empty() ? "" : ", ") + v[i];
  return out;
}

void check_pass_name(const std::string& flag, const std::string& name, bool allow_all) {
  const auto names = pipeline_pass_names();
  if (allow_all && name == "all") return;
  if (std::find(names.begin(), names.end(), name) != names.end()) return;
  if (names.empty()) fail(flag, ": unknown pass '", name, "' (the pipeline has no passes yet)");
  fail(flag, ": unknown pass '", name, "' (passes: ", join(names), allow_all ? ", or all" : "", ")");
}

DriverOptions driver_options(const CommonArgs& c) {
  DriverOptions o;
  o.target = parse_target(c.target);
  o.precision = parse_precision(c.precision);
  o.dims = parse_dim_bindings(c.dims);
  o.threads = c.threads;
  o.tuning_db = c.tuning_db;
  for (const std::string& k : c.knobs) o.knobs.push_back(parse_knob(k));
  for (const std::string& p : c.disable_pass) {
    check_pass_name("--disable-pass", p, false);
    o.disabled_passes.insert(p);
  }
  return o;
}

ProgressOptions progress_options(const CommonArgs& c) {
  ProgressOptions p;
  if (c.quiet) return p;
  p.out = &std::cerr;
  p.terminal = isatty(STDERR_FILENO) != 0;
  winsize w{};
  if (p.terminal && ioctl(STDERR_FILENO, TIOCGWINSZ, &w) == 0 && w.ws_col > 0) p.columns = w.ws_col;
  return p;
}

namespace {

Json shape_json(const std::vector<int64_t>& s) {
  Json j = Json::array();
  for (int64_t d : s) j.push_back(d);
  return j;
}

// Writes output_K.npy into `dir`, creating it. Every output is checked first
// so that nothing is written when one of them cannot be.
void save_outputs(const std::string& dir, const std::vector<RtValue>& outs) {
  for (size_t i = 0; i < outs.size(); ++i)
    TS_CHECK(outs[i].is_tensor(), "--save-outputs: output ", i, " is ", describe_value(outs[i]),
             ", which an .npy file cannot hold");
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir, ec);
  TS_CHECK(fs::is_directory(dir), "--save-outputs: cannot create folder '", dir, "'",
           ec ? ": " + ec.message() : std::string());
  for (size_t i = 0; i < outs.size(); ++i)
    write_npy_file((fs::path(dir) / str_cat("output_", i, ".npy")).string(), outs[i].tensor);
}

}  // namespace

int cmd_run(const RunArgs& a, const CommonArgs& c) {
  DriverOptions o = driver_options(c);
  o.seed = a.seed;
  o.progress = progress_options(c);
  check_options_supported(o);
  const PreparedModel p = prepare_model(a.model, a.inputs, o);
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  ExecResult r;
  r.outputs = p.run();
  r.time_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  const double load_ms = p.load_ms, compile_ms = p.compile_ms;
  if (!a.save_outputs.empty()) save_outputs(a.save_outputs, r.outputs);

  const Graph& g = p.graph();
  auto out_name = [&](size_t i) { return i < g.outputs.size() ? g.outputs[i]->name : str_cat("output_", i); };
  if (c.json) {
    Json j = Json::object();
    j["model"] = a.model;
    Json outs = Json::array();
    for (size_t i = 0; i < r.outputs.size(); ++i) {
      Json oj = Json::object();
      oj["name"] = out_name(i);
      const RtValue& v = r.outputs[i];
      if (v.is_tensor()) {
        oj["dtype"] = std::string(dtype_name(v.tensor.dtype()));
        oj["shape"] = shape_json(v.tensor.shape());
      } else {
        oj["dtype"] = describe_value(v);
        oj["shape"] = Json();
      }
      outs.push_back(std::move(oj));
    }
    j["outputs"] = std::move(outs);
    j["target"] = target_name(o.target);
    j["time_ms"] = r.time_ms;
    j["load_ms"] = load_ms;
    j["compile_ms"] = compile_ms;
    if (p.exe || p.gpu_exe()) {
      // Operators that ran on the reference interpreter (none: fully compiled).
      Json ops = Json::array();
      for (const std::string& op : p.interpreter_ops()) ops.push_back(op);
      j["interpreter_ops"] = std::move(ops);
    }
    if (!a.save_outputs.empty()) j["saved_to"] = a.save_outputs;
    std::cout << json_line(j) << "\n";
  } else {
    for (size_t i = 0; i < r.outputs.size(); ++i) {
      const RtValue& v = r.outputs[i];
      std::cout << out_name(i) << ": " << describe_value(v);
      if (v.is_tensor()) std::cout << " " << preview_values(v.tensor);
      std::cout << "\n";
    }
    std::cout << "target " << target_name(o.target) << ", "
              << str_cat(static_cast<int64_t>(r.time_ms * 1000) / 1000.0) << " ms (load "
              << str_cat(static_cast<int64_t>(load_ms * 1000) / 1000.0) << " ms, compile "
              << str_cat(static_cast<int64_t>(compile_ms * 1000) / 1000.0) << " ms)";
    if (!a.save_outputs.empty()) std::cout << ", outputs saved to " << a.save_outputs;
    std::cout << "\n";
  }
  return 0;
}

}  // namespace tessel::cli
