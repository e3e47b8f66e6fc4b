#include "tessel/tools/prepared_model.h"

#include <chrono>
#include <iostream>

#include "tessel/driver/artifact.h"
#include "tessel/driver/compiler.h"
#include "tessel/driver/model_cache.h"
#include "tessel/driver/model_loader.h"
#include "tessel/driver/session.h"
#include "tessel/interp/interpreter.h"
#include "tessel/runtime/cuda/gpu_artifact.h"

namespace tessel::cli {

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

using InputFiles = std::vector<std::pair<std::string, std::string>>;

// Given inputs that steer shapes were folded into a cached model (the cache
// key holds their bytes), so they are no longer inputs of its graph.
InputFiles inputs_of(const Graph& g, const InputFiles& files) {
  InputFiles kept;
  for (const auto& f : files)
    for (const Value* v : g.inputs)
      if (v->name == f.first) kept.push_back(f);
  return kept;
}

// An artifact is compiled already: its model is the one after the pipeline,
// and its kernels take the symbols' values at run time. `from_cache`: a
// whole-model cache entry (driver/model_cache.h).
// A CUDA artifact runs on the GPU (target cuda), a CPU one on the CPU.
PreparedModel prepare_artifact(const std::string& path, const InputFiles& files, const DriverOptions& o,
                               bool from_cache = false) {
  PreparedModel p;
  const auto t0 = Clock::now();
  if (o.target == Target::Cuda) {
    check_cuda_usable();
    GpuExecutableOptions go;
    go.memory_planning = o.memory_planning;
    p.gpu_artifact = load_cuda_artifact(path, go);
  } else {
    p.exe = load_artifact(path, o);
  }
  p.load_ms = ms_since(t0);
  const Graph& g = p.graph();
  const auto given = read_input_files(g, from_cache ? inputs_of(g, files) : files);
  const auto dims = bind_symbols(g, given, o.dims, &std::cerr);
  p.inputs = assemble_inputs(g, given, dims, o.seed, &std::cerr);
  return p;
}

// What the public API's compile() does, and the artifact stored under `key`.
std::unique_ptr<Executable> compile_and_cache(std::unique_ptr<Model> m, const std::map<std::string, int64_t>& dims,
                                              const DriverOptions& o, const std::string& key) {
  // Every option the user gave (passes, knobs, tuning database) reaches the
  // compile; only the symbol bindings are the ones worked out from the inputs.
  DriverOptions d = o;
  d.dims = dims;
  OwnedCpuCompile c = compile_owned_for_cpu(std::move(m), d);
  if (!key.empty()) model_cache_store(key, encode_artifact(make_artifact(*c.model, *c.compiled, *c.exe)));
  return std::move(c.exe);
}

}  // namespace

PreparedModel prepare_model(const std::string& path, const std::vector<std::string>& input_specs,
                            const DriverOptions& o) {
  std::vector<std::pair<std::string, std::string>> files;
  for (const auto& spec : input_specs) files.push_back(parse_input_binding(spec));
  PreparedModel p;
  auto t0 = Clock::now();
  // A CPU artifact with --target cuda compiles its model for the GPU, and
  // --target reference interprets either kind's model (below).
  if (is_artifact_file(path) &&
      (o.target == Target::Cpu || (o.target == Target::Cuda && is_cuda_artifact_file(path))))
    return prepare_artifact(path, files, o);
  // A warm compile is one artifact load from the whole-model cache: load_s
  // is then hashing the model file, compile_s loading the compiled model.
  const std::string key =
      o.target == Target::Cpu ? model_cache_key(path, model_cache_mode("prepare", o), o.dims, files) : "";
  const double key_ms = ms_since(t0);
  if (std::optional<std::string> hit = model_cache_lookup(key)) {
    try {
      PreparedModel c = prepare_artifact(*hit, files, o, /*from_cache=*/true);
      c.compile_ms = c.load_ms;
      c.load_ms = key_ms;
      return c;
    } catch (const Error& e) {
      model_cache_reject(key, e.what());
    }
  }
  t0 = Clock::now();
  std::unique_ptr<Model> m = load_model(path);
  p.load_ms = key_ms + ms_since(t0);
  const auto given = read_input_files(*m->graph, files);
  const auto dims = bind_symbols(*m->graph, given, o.dims, &std::cerr);
  fold_shape_inputs(*m, given, o.target);
  t0 = Clock::now();
  if (o.target == Target::Cpu) {
    p.exe = compile_and_cache(std::move(m), dims, o, key);
  } else {
    compile_model(*m, dims, o);
    p.model = std::move(m);
    if (o.target == Target::Cuda) p.gpu = compile_for_cuda(*p.model, o);
  }
  p.compile_ms = ms_since(t0);
  p.inputs = assemble_inputs(p.graph(), given, dims, o.seed, &std::cerr);
  return p;
}

const Graph& PreparedModel::graph() const {
  if (exe) return *exe->model().graph;
  if (gpu_artifact) return *gpu_artifact->model().graph;
  return *model->graph;
}

std::vector<std::string> PreparedModel::interpreter_ops() const {
  if (exe) return exe->interpreter_ops();
  if (gpu_exe()) return gpu_exe()->interpreter_ops();
  return {};
}

std::vector<RtValue> PreparedModel::run(RunProfile* profile) const {
  if (exe) return exe->run(inputs, profile);
  if (gpu_exe()) return gpu_exe()->run(inputs);
  return Interpreter().run(*model->graph, inputs);
}

}  // namespace tessel::cli
