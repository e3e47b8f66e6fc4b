// tessel compile MODEL -o FILE [--dim SYMBOL=N]...
#include <chrono>
#include <iostream>

#include "tessel/driver/artifact.h"
#include "tessel/driver/compiler.h"
#include "tessel/driver/json.h"
#include "tessel/driver/model_loader.h"
#include "tessel/driver/session.h"
#include "tessel/support/error.h"
#include "tessel/tools/commands.h"

namespace tessel::cli {

int cmd_compile(const CompileArgs& a, const CommonArgs& c) {
  DriverOptions o = driver_options(c);
  check_options_supported(o);
  TS_CHECK(o.target == Target::Cpu, "compile: only --target cpu produces artifacts");
  TS_CHECK(!is_artifact_file(a.model), "is a compiled artifact already");
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  std::unique_ptr<Model> m = load_model(a.model);
  // Only --dim specialises: without it the artifact runs at every binding.
  compile_model(*m, o.dims, o);
  std::unique_ptr<CompiledModel> cm = compile_for_cpu(*m, o);
  const std::string bytes = encode_artifact(make_artifact(*m, *cm));
  write_file_atomically(a.output, bytes);
  const double compile_s = std::chrono::duration<double>(Clock::now() - t0).count();

  size_t kernels = 0;
  for (const Step& s : cm->exe->steps()) kernels += s.kernel ? 1 : 0;
  const size_t interp = cm->exe->steps().size() - kernels;
  if (c.json) {
    Json j = Json::object();
    j.set("model", a.model);
    j.set("output", a.output);
    j.set("bytes", static_cast<int64_t>(bytes.size()));
    j.set("compile_s", compile_s);
    j.set("cache_hit", cm->from_cache);
    j.set("kernels", static_cast<int64_t>(kernels));
    j.set("interpreter_nodes", static_cast<int64_t>(interp));
    j.set("cpu", cm->cpu_name);
    std::cout << j.dump() << "\n";
  } else {
    std::cout << "wrote " << a.output << " (" << bytes.size() << " bytes): " << kernels << " kernels, " << interp
              << " interpreter nodes, for " << cm->cpu_name << ", in " << compile_s << " s"
              << (cm->from_cache ? " (object from the cache)" : "") << "\n";
  }
  return 0;
}

}  // namespace tessel::cli
