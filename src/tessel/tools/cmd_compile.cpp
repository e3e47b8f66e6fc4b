// tessel compile MODEL -o FILE [--dim SYMBOL=N]... [--target cuda [--cuda-arch sm_XY[,sm_XY...]]]
#include <algorithm>
#include <chrono>
#include <iostream>

#include "tessel/driver/artifact.h"
#include "tessel/driver/compiler.h"
#include "tessel/driver/cuda_compiler.h"
#include "tessel/driver/json_util.h"
#include "tessel/driver/model_cache.h"
#include "tessel/driver/model_loader.h"
#include "tessel/driver/session.h"
#include "tessel/support/error.h"
#include "tessel/support/strings.h"
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
    j["model"] = a.model;
    j["output"] = a.output;
    j["bytes"] = s.bytes;
    j["compile_s"] = s.compile_s;
    j["cache_hit"] = s.object_cache_hit || s.model_cache_hit;
    j["model_cache_hit"] = s.model_cache_hit;
    j["kernels"] = s.kernels;
    j["interpreter_nodes"] = s.interpreter_nodes;
    j["cpu"] = s.cpu;
    std::cout << json_line(j) << "\n";
  } else {
    std::cout << "wrote " << a.output << " (" << s.bytes << " bytes): " << s.kernels << " kernels, "
              << s.interpreter_nodes << " interpreter nodes, for " << s.cpu << ", in " << s.compile_s << " s"
              << (s.model_cache_hit ? " (from the model cache)" : s.object_cache_hit ? " (object from the cache)" : "")
              << "\n";
  }
  return 0;
}

// "sm_90a,sm_80" -> each arch; "" -> the default one (the GPU's, else sm_90a).
std::vector<std::string> cuda_archs(const std::string& list) {
  if (list.empty()) return {default_cuda_arch()};
  std::vector<std::string> out;
  for (const std::string& a : split(list, ',')) {
    TS_CHECK(!a.empty(), "--cuda-arch '", list, "': an empty architecture in the list");
    TS_CHECK(std::find(out.begin(), out.end(), a) == out.end(), "--cuda-arch '", list, "': ", a, " twice");
    out.push_back(a);
  }
  return out;
}

// --target cuda: every kernel through NVRTC, one cubin per architecture,
// into a CUDA artifact; needs no GPU.
int compile_cuda(const CompileArgs& a, const CommonArgs& c, const DriverOptions& o) {
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  const std::vector<std::string> archs = cuda_archs(a.cuda_arch);
  std::unique_ptr<Model> m = load_model(a.model);
  compile_model(*m, o.dims, o);
  std::vector<std::unique_ptr<CudaCompiledModel>> compiles;
  std::vector<const CudaCompiledModel*> views;
  bool all_cached = true;
  Progress progress(o.progress, "compile");
  LowerOptions lo = lower_options(o);
  if (progress.enabled()) lo.progress = &progress;
  for (const std::string& arch : archs) {
    compiles.push_back(compile_cuda_kernels(*m, arch, lo));
    views.push_back(compiles.back().get());
    all_cached = all_cached && compiles.back()->from_cache;
  }
  progress.finish(cuda_compile_summary(*compiles.front()) +
                  (archs.size() > 1 ? str_cat(", ", archs.size(), " architectures") : ""));
  const ArtifactContents contents = make_cuda_artifact(*m, views);
  const std::string bytes = encode_artifact(contents);
  write_file_atomically(a.output, bytes);
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  const CompiledModel& lowered = compiles.front()->lowered;
  size_t kernels = 0, interpreter_nodes = 0;
  for (const FusionGroup& g : lowered.plan.groups) (g.compiled ? kernels : interpreter_nodes) += 1;
  std::string arch_list;
  for (const std::string& arch : archs) arch_list += (arch_list.empty() ? "" : ",") + arch;
  if (c.json) {
    Json j = Json::object();
    j["model"] = a.model;
    j["output"] = a.output;
    j["target"] = "cuda";
    j["arch"] = arch_list;
    j["bytes"] = bytes.size();
    j["compile_s"] = seconds;
    j["cache_hit"] = all_cached;
    j["kernels"] = kernels;
    j["distinct_kernels"] = lowered.unique_kernels.size();
    j["interpreter_nodes"] = interpreter_nodes;
    std::cout << json_line(j) << "\n";
  } else {
    std::cout << "wrote " << a.output << " (" << bytes.size() << " bytes): " << kernels << " kernels ("
              << lowered.unique_kernels.size() << " distinct), " << interpreter_nodes << " interpreter nodes, for "
              << arch_list << ", in " << seconds << " s" << (all_cached ? " (cubins from the cache)" : "") << "\n";
  }
  return 0;
}

}  // namespace

int cmd_compile(const CompileArgs& a, const CommonArgs& c) {
  DriverOptions o = driver_options(c);
  o.cpu = a.cpu;
  o.progress = progress_options(c);
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
