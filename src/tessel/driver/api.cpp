// The in-process C++ API (driver/api.h) in terms of the driver: the model
// loader, the pass pipeline, the compiled CPU path and artifacts.
#include "tessel/driver/artifact.h"
#include "tessel/driver/compiler.h"
#include "tessel/driver/model_loader.h"
#include "tessel/driver/session.h"
#include "tessel/driver/api.h"

namespace tessel {

namespace {

DriverOptions driver_options(const Options& o) {
  DriverOptions d;
  d.target = Target::Cpu;
  d.threads = o.threads;
  d.dims = o.dims;
  d.memory_planning = o.memory_planning;
  d.tuning_db = o.tuning_db;
  for (const std::string& k : o.knobs) d.knobs.push_back(parse_knob(k));
  return d;
}

}  // namespace

std::unique_ptr<Executable> compile(const std::string& path, const Options& o) {
  try {
    if (is_artifact_file(path)) return load_artifact(path, driver_options(o));
    return compile(load_model(path), o);
  } catch (const Error& e) {
    throw Error(path + ": " + e.what());  // API users get the file in the message; the CLI adds it itself
  }
}

std::unique_ptr<Executable> compile(std::unique_ptr<Model> model, const Options& o) {
  return compile_owned_for_cpu(std::move(model), driver_options(o)).exe;
}

}  // namespace tessel
