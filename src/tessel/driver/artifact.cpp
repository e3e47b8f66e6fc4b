#include "tessel/driver/artifact.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>

#include "tessel/ir/printer.h"
#include "tessel/runtime/cuda/gpu_artifact.h"
#include "tessel/support/error.h"
#include "tessel/support/strings.h"

namespace tessel {

namespace {

std::vector<std::string> enabled_features(const std::string& list) {
  std::vector<std::string> out;
  for (std::string& f : split(list, ','))
    if (!f.empty() && f[0] == '+') out.push_back(std::move(f));
  return out;
}

ArtifactKernel artifact_kernel(const KernelStep& k, const std::map<const Node*, uint64_t>& index,
                               const std::map<std::string, std::string>& entry) {
  ArtifactKernel a;
  a.name = k.name;
  auto e = entry.find(k.name);
  a.entry = e == entry.end() ? k.name : e->second;
  for (const Value* v : k.params) a.params.push_back(v->name);
  a.num_inputs = k.num_inputs;
  a.syms = k.syms;
  a.parallel = k.parallel;
  if (k.parallel) a.parallel_extent = k.parallel_extent.str();
  a.assert_messages = k.assert_messages;
  for (const Node* n : k.nodes) a.nodes.push_back(index.at(n));
  a.elementwise = k.elementwise;
  return a;
}

// The model's text and constants, and the steps (shared by both targets).
ArtifactContents artifact_model_and_steps(const Model& m, const CompiledModel& c, const std::vector<Step>& steps) {
  ArtifactContents a;
  // Large constants go beside the text as raw bytes (views of the model's
  // tensors: `m` must outlive the contents).
  std::vector<const Tensor*> external;
  PrintOptions po;
  po.external_constants = &external;
  a.model_ir = print_model(m, po);
  for (const Tensor* t : external) a.constants.emplace_back(reinterpret_cast<const char*>(t->raw()), t->nbytes());
  const std::vector<const Node*> nodes = artifact_nodes(*m.graph);
  std::map<const Node*, uint64_t> index;
  for (size_t i = 0; i < nodes.size(); ++i) index.emplace(nodes[i], i);
  for (const Step& s : steps) {
    ArtifactStep as;
    as.is_kernel = s.kernel != nullptr;
    if (s.kernel) as.kernel = artifact_kernel(*s.kernel, index, c.entry);
    else as.node = index.at(s.interp);
    a.steps.push_back(std::move(as));
  }
  return a;
}

// One architecture's cubin and the launch record of each distinct kernel.
ArtifactCubin artifact_cubin(const CudaCompiledModel& c) {
  ArtifactCubin out;
  out.arch = c.arch;
  out.image = c.cubin;
  std::map<std::string, const loop::Kernel*> kernels;
  for (const loop::Kernel& k : c.lowered.unique_kernels) kernels.emplace(k.name, &k);
  for (const cuda::KernelSource& k : c.source.kernels)
    out.launches.push_back(artifact_launch(k, kernels.at(k.kernel_name)->syms));
  return out;
}

}  // namespace

ArtifactContents make_artifact(const Model& m, const CompiledModel& c) {
  TS_CHECK(c.exe, "make_artifact: the model has not been compiled");
  return make_artifact(m, c, *c.exe);
}

ArtifactContents make_artifact(const Model& m, const CompiledModel& c, const Executable& exe) {
  ArtifactContents a = artifact_model_and_steps(m, c, exe.steps());
  a.cpu_name = c.cpu_name;
  a.cpu_features = enabled_features(c.cpu_features);
  a.object = c.object;
  return a;
}

ArtifactContents make_cuda_artifact(const Model& m, const std::vector<const CudaCompiledModel*>& compiles) {
  TS_CHECK(!compiles.empty(), "make_cuda_artifact: no compile");
  const CompiledModel& first = compiles.front()->lowered;
  ArtifactContents a = artifact_model_and_steps(m, first, build_steps(first, nullptr));
  for (const CudaCompiledModel* c : compiles) {
    TS_CHECK(c->lowered.entry == first.entry && c->lowered.kernels().size() == first.kernels().size(),
             "--cuda-arch ", c->arch, " plans the model's kernels differently from ", compiles.front()->arch,
             ": compile one artifact per architecture");
    a.cuda.push_back(artifact_cubin(*c));
  }
  return a;
}

void write_file_atomically(const std::string& path, std::string_view bytes) {
  namespace fs = std::filesystem;
  const fs::path target(path);
  TS_CHECK(!fs::is_directory(target), "-o ", path, ": is a directory");
  std::random_device rd;
  const fs::path tmp = target.string() + ".tmp." + std::to_string(getpid()) + "." + std::to_string(rd());
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    TS_CHECK(f, "-o ", path, ": cannot write: ", std::strerror(errno));
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    f.close();
    if (!f) {
      std::error_code ec;
      fs::remove(tmp, ec);
      fail("-o ", path, ": write error");
    }
  }
  std::error_code ec;
  fs::rename(tmp, target, ec);
  if (ec) {
    fs::remove(tmp, ec);
    fail("-o ", path, ": cannot rename into place: ", ec.message());
  }
}

std::unique_ptr<Executable> load_artifact(const std::string& path, const DriverOptions& o) {
  ExecutableOptions eo;
  eo.threads = o.threads;
  eo.memory_planning = o.memory_planning;
  return load_artifact(path, eo);
}

}  // namespace tessel
