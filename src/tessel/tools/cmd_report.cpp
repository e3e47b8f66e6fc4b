// tessel report MODEL -o FILE.html [--warmup N] [--iters N] [--input NAME=FILE.npy]... [--seed N] [--no-llvm-ir]
//
// One self-contained HTML page that explains a model's compile on this CPU:
// the fused groups, every step's time against the roofline (what bench
// --profile computes), each kernel's schedule, loop IR and LLVM IR, and the
// compile's pass timings and log. The data goes into the page as one JSON
// blob that the page's own script renders (tools/report_html.h).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <streambuf>

#include "tessel/driver/artifact.h"
#include "tessel/driver/compiler.h"
#include "tessel/driver/host_ceilings.h"
#include "tessel/driver/json_util.h"
#include "tessel/driver/model_loader.h"
#include "tessel/driver/session.h"
#include "tessel/ir/printer.h"
#include "tessel/loop/printer.h"
#include "tessel/runtime/artifact_loader.h"
#include "tessel/support/error.h"
#include "tessel/tools/bench_roofline.h"
#include "tessel/tools/commands.h"
#include "tessel/tools/report_html.h"

namespace tessel::cli {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Writes to standard error and keeps a copy: the compile log shown in the page.
class TeeBuf : public std::streambuf {
 public:
  explicit TeeBuf(std::ostream& out) : out_(out) {}
  const std::string& text() const { return text_; }

 protected:
  int overflow(int ch) override {
    if (ch == traits_type::eof()) return traits_type::not_eof(ch);
    text_.push_back(static_cast<char>(ch));
    out_.put(static_cast<char>(ch));
    return ch;
  }
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    text_.append(s, static_cast<size_t>(n));
    out_.write(s, n);
    return n;
  }

 private:
  std::ostream& out_;
  std::string text_;
};

// Fails at once (before the minutes a compile may take) when `path` cannot
// become the page: a folder, or a file in a folder that is missing or that
// we may not write.
void check_output_path(const std::string& path) {
  namespace fs = std::filesystem;
  TS_CHECK(!path.empty(), "-o: no file name");
  std::error_code ec;
  TS_CHECK(!fs::is_directory(path, ec), "-o ", path, ": is a directory");
  fs::path dir = fs::path(path).parent_path();
  if (dir.empty()) dir = ".";
  TS_CHECK(fs::is_directory(dir, ec), "-o ", path, ": cannot write: ", dir.string(),
           fs::exists(dir, ec) ? " is not a directory" : " does not exist");
  TS_CHECK(access(dir.c_str(), W_OK) == 0, "-o ", path, ": cannot write to ", dir.string());
}

// The functions of an LLVM module's text by name: from each "define" line to
// the "}" that closes it.
std::map<std::string, std::string> llvm_functions(const std::string& module) {
  std::map<std::string, std::string> out;
  std::istringstream in(module);
  std::string line, name, body;
  while (std::getline(in, line)) {
    if (name.empty() && line.rfind("define ", 0) == 0) {
      const size_t at = line.find('@');
      const size_t paren = line.find('(', at);
      if (at == std::string::npos || paren == std::string::npos) continue;
      name = line.substr(at + 1, paren - at - 1);
      if (name.size() >= 2 && name.front() == '"') name = name.substr(1, name.size() - 2);
      body.clear();
    }
    if (name.empty()) continue;
    body += line + "\n";
    if (line == "}") {
      out[name] = body;
      name.clear();
    }
  }
  return out;
}

Json value_json(const Value* v) {
  Json j = Json::array();
  j.push_back(v ? v->name : "");
  j.push_back(v ? print_type(v->type) : "none");
  return j;
}

Json node_json(const Node* n) {
  Json j = Json::object();
  j["name"] = n->name;
  j["op"] = n->domain.empty() ? n->op : n->domain + "." + n->op;
  Json ins = Json::array(), outs = Json::array();
  for (const Value* v : n->inputs) ins.push_back(value_json(v));
  for (const Value* v : n->outputs) outs.push_back(value_json(v));
  j["inputs"] = ins;
  j["outputs"] = outs;
  return j;
}

}  // namespace

int cmd_report(const ReportArgs& a, const CommonArgs& c) {
  DriverOptions o = driver_options(c);
  o.seed = a.seed;
  o.progress = progress_options(c);
  TS_CHECK(o.target != Target::Reference, "report: --target reference has no kernels to explain; use --target cpu");
  check_options_supported(o);  // --target cuda without a GPU: one line saying what is missing
  TS_CHECK(o.target == Target::Cpu,
           "report: only --target cpu is explained so far (GPU ceilings are not measured yet: docs/roofline.md)");
  TS_CHECK(a.iters >= 1, "--iters must be at least 1, got ", a.iters);
  TS_CHECK(a.warmup >= 0, "--warmup must be >= 0, got ", a.warmup);
  check_output_path(a.output);
  TS_CHECK(!is_artifact_file(a.model),
           "report: a compiled artifact keeps no loop IR; give the model it was compiled from (.onnx or .tir)");

  TeeBuf tee_buf(std::cerr);
  std::ostream log(&tee_buf);
  o.log = &log;
  Json phases = Json::array();
  auto phase = [&](const std::string& name, double s, const std::string& note = "") {
    Json p = Json::object();
    p["name"] = name;
    p["s"] = s;
    if (!note.empty()) p["note"] = note;
    phases.push_back(p);
  };

  // As `tessel run` prepares a model for the CPU (tools/prepared_model.cpp),
  // without the whole-model cache: the report needs the pass timings and the
  // lowered groups, which a cached artifact does not keep.
  auto t0 = Clock::now();
  std::unique_ptr<Model> m = load_model(a.model);
  phase("load", seconds_since(t0));
  std::vector<std::pair<std::string, std::string>> files;
  for (const std::string& spec : a.inputs) files.push_back(parse_input_binding(spec));
  const auto given = read_input_files(*m->graph, files);
  const auto dims = bind_symbols(*m->graph, given, o.dims, &log);
  fold_shape_inputs(*m, given, o.target);

  Json passes = Json::array();
  PassOptions po = pipeline_options(dims, o);
  t0 = Clock::now();
  auto last = t0;
  po.after_pass = [&](const std::string& pass, bool changed) {
    const auto now = Clock::now();
    Json p = Json::object();
    p["name"] = pass;
    p["ms"] = std::chrono::duration<double, std::milli>(now - last).count();
    p["changed"] = changed;
    passes.push_back(p);
    last = now;
  };
  run_pipeline(*m, po);
  phase("graph passes", seconds_since(t0), str_cat(passes.size(), " steps"));

  DriverOptions d = o;
  d.dims = dims;
  t0 = Clock::now();
  const std::unique_ptr<CompiledModel> compiled = compile_for_cpu(*m, d);
  phase("lower and generate code", seconds_since(t0),
        str_cat(compiled->lowered.size(), " groups, ", compiled->unique_kernels.size(), " distinct kernels",
                compiled->from_cache ? "; code from the kernel cache" : ""));
  const Executable& exe = *compiled->exe;

  std::map<std::string, std::string> llvm;
  if (!a.no_llvm_ir && !compiled->unique_kernels.empty()) {
    t0 = Clock::now();
    llvm = llvm_functions(emit_cpu_llvm_ir(compiled->unique_kernels));
    phase("LLVM IR for this page", seconds_since(t0));
  }

  const std::vector<RtValue> inputs = assemble_inputs(*m->graph, given, dims, o.seed, &log);
  t0 = Clock::now();
  for (int i = 0; i < a.warmup; ++i) exe.run(inputs);
  std::vector<RunProfile> runs(static_cast<size_t>(a.iters));
  std::vector<double> ms;
  for (RunProfile& r : runs) {
    const auto r0 = Clock::now();
    exe.run(inputs, &r);
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - r0).count());
  }
  phase("runs", seconds_since(t0), str_cat(a.warmup, " warm-up, ", a.iters, " timed, each step timed"));
  std::sort(ms.begin(), ms.end());

  const int threads = exe.threads();
  const std::vector<Step>& steps = exe.steps();
  const std::map<std::string, int64_t> bindings = input_bindings(*m->graph, inputs);
  std::vector<ProfileRow> rows = profile_rows(steps, runs, bindings);
  t0 = Clock::now();
  const LoadedCeilings ceilings = host_ceilings(threads, false, log);
  phase("ceilings", seconds_since(t0), ceilings.cached ? "cached" : "measured");
  const RooflineSummary summary = add_rooflines(&rows, steps, ceilings.ceilings, threads, bindings);
  std::sort(rows.begin(), rows.end(), [](const ProfileRow& x, const ProfileRow& y) { return x.step < y.step; });

  // The fused groups, each with its step.
  std::map<std::string, size_t> step_of_kernel;
  std::map<const Node*, size_t> step_of_node;
  for (size_t i = 0; i < steps.size(); ++i) {
    if (steps[i].kernel) step_of_kernel[steps[i].kernel->name] = i;
    else step_of_node[steps[i].interp] = i;
  }
  std::map<std::string, const LoweredGroup*> lowered;
  for (const LoweredGroup& lg : compiled->lowered) lowered[lg.kernel.name] = &lg;
  std::map<size_t, size_t> group_of_step;
  std::map<const Node*, size_t> group_of_root;  // the group that stores a node's output
  Json groups = Json::array();
  for (const FusionGroup& g : compiled->plan.groups) {
    Json j = Json::object();
    j["name"] = g.name;
    j["compiled"] = g.compiled;
    // The groups whose stored values this one reads: the edges of the drawn graph.
    std::set<size_t> preds;
    for (const Value* v : g.inputs)
      if (v->producer && group_of_root.count(v->producer)) preds.insert(group_of_root[v->producer]);
    Json pj = Json::array();
    for (size_t p : preds) pj.push_back(p);
    j["preds"] = pj;
    group_of_root[g.root] = groups.size();
    Json nodes = Json::array();
    for (const Node* n : g.nodes) nodes.push_back(node_json(n));
    j["nodes"] = nodes;
    std::optional<size_t> step;
    if (g.compiled && step_of_kernel.count(g.name)) step = step_of_kernel[g.name];
    if (!g.compiled && step_of_node.count(g.root)) step = step_of_node[g.root];
    j["step"] = step ? Json(*step) : Json(nullptr);
    if (step) group_of_step[*step] = groups.size();
    groups.push_back(j);
  }

  Json step_rows = Json::array();
  for (const ProfileRow& r : rows) {
    const Step& s = steps[r.step];
    Json j = profile_row_json(r);
    j["kind"] = s.kernel ? "kernel" : "interpreter";
    j["name"] = s.kernel ? s.kernel->name : s.interp->op;
    Json ops = Json::array();
    if (s.kernel) {
      for (const Node* n : s.kernel->nodes) ops.push_back(n->op);
    } else {
      ops.push_back(s.interp->op);
    }
    j["ops"] = ops;
    j["ceiling_threads"] = step_ceilings(s, ceilings.ceilings, threads, bindings).threads;
    j["group"] = group_of_step.count(r.step) ? Json(group_of_step[r.step]) : Json(nullptr);
    if (!s.kernel) {
      j["schedule"] = "interpreter";
      j["node"] = node_json(s.interp);
    } else if (auto it = lowered.find(s.kernel->name); it != lowered.end()) {
      const LoweredGroup& lg = *it->second;
      j["schedule"] = lg.schedule;
      j["schedule_text"] = print_schedule(lg.sched);
      j["default_hash"] = lg.default_hash;
      j["parallel"] = s.kernel->parallel;
      j["loop_ir"] = loop::print(lg.kernel);
      const auto entry = compiled->entry.find(s.kernel->name);
      const std::string fn = entry != compiled->entry.end() ? entry->second : s.kernel->name;
      j["llvm_function"] = fn;
      if (auto f = llvm.find(fn); f != llvm.end()) j["llvm_ir"] = f->second;
    }
    step_rows.push_back(j);
  }

  Json data = Json::object();
  data["format"] = 1;
  data["tessel"] = kTesselVersion;
  data["model"] = a.model;
  data["target"] = target_name(o.target);
  data["precision"] = c.precision;
  data["threads"] = threads;
  Json dims_json = Json::object();
  for (const auto& [k, v] : dims) dims_json[k] = v;  // as bound before the pipeline (the kernels' sizes)
  data["dims"] = dims_json;
  data["warmup"] = a.warmup;
  data["iters"] = a.iters;
  data["median_ms"] = quantile(ms, 0.5);
  data["p10_ms"] = quantile(ms, 0.1);
  data["p90_ms"] = quantile(ms, 0.9);
  data["min_ms"] = ms.front();
  data["compile_s"] = compiled->compile_s;
  data["steps"] = step_rows;
  data["groups"] = groups;
  Json reasons = Json::array();
  for (const std::string& r : compiled->fallback_reasons) reasons.push_back(r);
  data["interpreter_reasons"] = reasons;
  PrintOptions print_opts;
  print_opts.elide_large_constants = true;
  data["graph_ir"] = print_model(*m, print_opts);
  data["roofline"] = roofline_summary_json(summary, ceilings.ceilings);
  data["passes"] = passes;
  data["phases"] = phases;
  data["log"] = tee_buf.text();

  const std::string page = report_html(data);
  write_file_atomically(a.output, page);
  size_t kernels = 0;
  for (const Step& s : steps) kernels += s.kernel ? 1 : 0;
  if (c.json) {
    Json j = Json::object();
    j["model"] = a.model;
    j["output"] = a.output;
    j["bytes"] = page.size();
    j["steps"] = steps.size();
    j["kernels"] = kernels;
    j["median_ms"] = quantile(ms, 0.5);
    std::cout << json_line(j) << "\n";
  } else {
    char median[32];
    std::snprintf(median, sizeof median, "%.3f", quantile(ms, 0.5));
    std::cout << "wrote " << a.output << " (" << page.size() << " bytes): " << steps.size()
              << (steps.size() == 1 ? " step (" : " steps (") << kernels << (kernels == 1 ? " kernel" : " kernels")
              << "), median " << median << " ms over " << a.iters << (a.iters == 1 ? " run\n" : " runs\n");
  }
  return 0;
}

}  // namespace tessel::cli
