// tessel compile MODEL -o FILE [--dim SYMBOL=N]... [--target cuda [--cuda-arch sm_XY]]
#include <chrono>
#include <iostream>

#include "tessel/driver/artifact.h"
#include "tessel/driver/compiler.h"
#include "tessel/driver/cuda_compiler.h"
#include "tessel/driver/json.h"
#include "tessel/driver/model_cache.h"
#include "tessel/driver/model_loader.h"
#include "tessel/driver/session.h"
#include "tessel/support/error.h"
#include "tessel/tools/commands.h"

namespace tessel::cli {

namespace {

struct Summary {
  size_t bytes = 0;
  double compile_s = 0;
  bool object_cache_hit = false;  // the kernels' object came from the kernel cache
  bool model_cache_hit = false;   // the whole artifact came from the model cache
  size_t kernels = 0, interpreter_nodes = 0;
  std::string cpu;
};

Summary summarize(const ArtifactContents& a) {
  Summary s;
  for (const ArtifactStep& st : a.steps) (st.is_kernel ? s.kernels : s.interpreter_nodes) += 1;
  s.cpu = a.cpu_name;
  return s;
}

int report(const CompileArgs& a, const CommonArgs& c, const Summary& s) {
  if (c.json) {
    Json j = Json::object();
    j.set("model", a.model);
    j.set("output", a.output);
    j.set("bytes", static_cast<int64_t>(s.bytes));
    j.set("compile_s", s.compile_s);
    j.set("cache_hit", s.object_cache_hit || s.model_cache_hit);
    j.set("model_cache_hit", s.model_cache_hit);
    j.set("kernels", static_cast<int64_t>(s.kernels));
    j.set("interpreter_nodes", static_cast<int64_t>(s.interpreter_nodes));
    j.set("cpu", s.cpu);
    std::cout << j.dump() << "\n";
  } else {
    std::cout << "wrote " << a.output << " (" << s.bytes << " bytes): " << s.kernels << " kernels, "
              << s.interpreter_nodes << " interpreter nodes, for " << s.cpu << ", in " << s.compile_s << " s"
              << (s.model_cache_hit ? " (from the model cache)" : s.object_cache_hit ? " (object from the cache)" : "")
              << "\n";
  }
  return 0;
}

// --target cuda: every kernel through NVRTC into one cubin; needs no GPU.
int compile_cuda(const CompileArgs& a, const CommonArgs& c, const DriverOptions& o) {
  std::unique_ptr<Model> m = load_model(a.model);
  compile_model(*m, o.dims, o);
  const std::unique_ptr<CudaCompiledModel> cm = compile_cuda_kernels(*m, a.cuda_arch, lower_options(o));
  write_file_atomically(a.output, cm->cubin);
  size_t kernels = 0, interpreter_nodes = 0;
  for (const FusionGroup& g : cm->lowered.plan.groups) (g.compiled ? kernels : interpreter_nodes) += 1;
  if (c.json) {
    Json j = Json::object();
    j.set("model", a.model);
    j.set("output", a.output);
    j.set("target", "cuda");
    j.set("arch", cm->arch);
    j.set("bytes", static_cast<int64_t>(cm->cubin.size()));
    j.set("compile_s", cm->compile_s);
    j.set("cache_hit", cm->from_cache);
    j.set("kernels", static_cast<int64_t>(kernels));
    j.set("distinct_kernels", static_cast<int64_t>(cm->lowered.unique_kernels.size()));
    j.set("interpreter_nodes", static_cast<int64_t>(interpreter_nodes));
    std::cout << j.dump() << "\n";
  } else {
    std::cout << "wrote " << a.output << " (" << cm->cubin.size() << " bytes): " << kernels << " kernels ("
              << cm->lowered.unique_kernels.size() << " distinct), " << interpreter_nodes << " interpreter nodes, for "
              << cm->arch << ", in " << cm->compile_s << " s" << (cm->from_cache ? " (cubin from the cache)" : "")
              << "\n";
  }
  return 0;
}

}  // namespace

int cmd_compile(const CompileArgs& a, const CommonArgs& c) {
  DriverOptions o = driver_options(c);
  o.cpu = a.cpu;
  check_options_supported(o, /*needs_device=*/false);
  TS_CHECK(!is_artifact_file(a.model), "is a compiled artifact already");
  if (o.target == Target::Cuda) return compile_cuda(a, c, o);
  TS_CHECK(o.target == Target::Cpu, "compile: only --target cpu and cuda compile (reference has nothing to compile)");
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  auto seconds = [&] { return std::chrono::duration<double>(Clock::now() - t0).count(); };
  // Only --dim specialises: without it the artifact runs at every binding.
  const std::string key = model_cache_key(a.model, model_cache_mode("compile", o), o.dims, {});
  if (std::optional<std::string> hit = model_cache_lookup(key)) {
    try {
      const ArtifactContents cached = read_artifact(*hit);  // checks it whole
      write_file_atomically(a.output, cached.encoded);
      Summary s = summarize(cached);
      s.bytes = cached.encoded.size();
      s.model_cache_hit = true;
      s.compile_s = seconds();
      return report(a, c, s);
    } catch (const Error& e) {
      model_cache_reject(key, e.what());
    }
  }
  std::unique_ptr<Model> m = load_model(a.model);
  compile_model(*m, o.dims, o);
  std::unique_ptr<CompiledModel> cm = compile_for_cpu(*m, o);
  const ArtifactContents contents = make_artifact(*m, *cm);
  const std::string bytes = encode_artifact(contents);
  write_file_atomically(a.output, bytes);
  model_cache_store(key, bytes);
  Summary s = summarize(contents);
  s.bytes = bytes.size();
  s.object_cache_hit = cm->from_cache;
  s.compile_s = seconds();
  return report(a, c, s);
}

}  // namespace tessel::cli
