#include "tessel/tools/prepared_model.h"

#include <chrono>
#include <iostream>

#include "tessel/driver/artifact.h"
#include "tessel/driver/model_loader.h"
#include "tessel/driver/session.h"
#include "tessel/interp/interpreter.h"

namespace tessel::cli {

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

// An artifact is compiled already: its model is the one after the pipeline,
// and its kernels take the symbols' values at run time.
PreparedModel prepare_artifact(const std::string& path, const std::vector<std::pair<std::string, std::string>>& files,
                               const DriverOptions& o) {
  PreparedModel p;
  const auto t0 = Clock::now();
  p.exe = load_artifact(path, o);
  p.load_ms = ms_since(t0);
  const Graph& g = p.graph();
  const auto given = read_input_files(g, files);
  const auto dims = bind_symbols(g, given, o.dims, &std::cerr);
  p.inputs = assemble_inputs(g, given, dims, o.seed, &std::cerr);
  return p;
}

}  // namespace

PreparedModel prepare_model(const std::string& path, const std::vector<std::string>& input_specs,
                            const DriverOptions& o) {
  std::vector<std::pair<std::string, std::string>> files;
  for (const auto& spec : input_specs) files.push_back(parse_input_binding(spec));
  PreparedModel p;
  auto t0 = Clock::now();
  if (o.target == Target::Cpu && is_artifact_file(path)) return prepare_artifact(path, files, o);
  std::unique_ptr<Model> m = load_model(path);
  p.load_ms = ms_since(t0);
  const auto given = read_input_files(*m->graph, files);
  const auto dims = bind_symbols(*m->graph, given, o.dims, &std::cerr);
  fold_shape_inputs(*m, given, o.target);
  t0 = Clock::now();
  if (o.target == Target::Cpu) {
    Options api;
    api.threads = o.threads;
    api.dims = dims;
    api.memory_planning = o.memory_planning;
    p.exe = compile(std::move(m), api);
  } else {
    compile_model(*m, dims, o);
    p.model = std::move(m);
  }
  p.compile_ms = ms_since(t0);
  p.inputs = assemble_inputs(p.graph(), given, dims, o.seed, &std::cerr);
  return p;
}

std::vector<RtValue> PreparedModel::run(RunProfile* profile) const {
  if (exe) return exe->run(inputs, profile);
  return Interpreter().run(*model->graph, inputs);
}

}  // namespace tessel::cli
