#include "tessel/runtime/cuda/gpu_artifact.h"

#include <cctype>
#include <map>

#include "tessel/codegen/cuda/driver_api.h"
#include "tessel/loop/parser.h"
#include "tessel/loop/printer.h"
#include "tessel/runtime/artifact_loader.h"
#include "tessel/support/error.h"
#include "tessel/support/phase_timer.h"

namespace tessel {

namespace {

std::vector<std::string> texts(const std::vector<loop::Expr>& v) {
  std::vector<std::string> out;
  for (const loop::Expr& e : v) out.push_back(loop::print(e));
  return out;
}

loop::Expr expr_of(const std::string& text, const ArtifactLaunch& l) {
  try {
    return loop::parse_expr(text, l.syms);
  } catch (const Error& e) {
    fail("corrupt artifact (launch of '", l.entry, "': ", e.what(), ")");
  }
}

std::vector<loop::Expr> exprs_of(const std::vector<std::string>& v, const ArtifactLaunch& l) {
  std::vector<loop::Expr> out;
  for (const std::string& t : v) out.push_back(expr_of(t, l));
  return out;
}

// "sm_90a" -> {90, "a"}; a version of -1 for text that is not an arch.
std::pair<int, std::string> arch_parts(const std::string& arch) {
  if (arch.rfind("sm_", 0) != 0) return {-1, ""};
  size_t i = 3;
  int v = 0;
  while (i < arch.size() && std::isdigit(static_cast<unsigned char>(arch[i])) && v < 10000) v = v * 10 + (arch[i++] - '0');
  if (i == 3) return {-1, ""};
  return {v, arch.substr(i)};
}

// The major version of a two-or-more-digit compute capability (the last digit is the minor).
int major_of(int version) { return version / 10; }

}  // namespace

ArtifactLaunch artifact_launch(const cuda::KernelSource& k, const std::vector<std::string>& syms) {
  ArtifactLaunch l;
  l.entry = k.kernel_name;
  l.symbol = k.symbol;
  l.narrow_symbol = k.narrow_symbol;
  l.narrow_limit = k.narrow_limit;
  l.syms = syms;
  l.grid = texts({k.launch.grid.begin(), k.launch.grid.end()});
  l.block = texts({k.launch.block.begin(), k.launch.block.end()});
  l.shared_bytes = k.launch.shared_bytes;
  for (const cuda::TensorMapSpec& t : k.tensor_maps) {
    ArtifactTensorMap a;
    a.param = static_cast<uint64_t>(t.param);
    a.offset = t.offset;
    a.dims = texts(t.dims);
    a.strides = t.strides;
    a.box.assign(t.box.begin(), t.box.end());
    l.tensor_maps.push_back(std::move(a));
  }
  return l;
}

cuda::KernelSource kernel_launch(const ArtifactLaunch& l) {
  cuda::KernelSource k;
  k.kernel_name = l.entry;
  k.symbol = l.symbol;
  k.narrow_symbol = l.narrow_symbol;
  k.narrow_limit = l.narrow_limit;
  TS_CHECK(l.grid.size() == 3 && l.block.size() == 3, "corrupt artifact (launch of '", l.entry, "')");
  for (size_t i = 0; i < 3; ++i) {
    k.launch.grid[i] = expr_of(l.grid[i], l);
    k.launch.block[i] = expr_of(l.block[i], l);
  }
  TS_CHECK(l.shared_bytes <= (1u << 30), "corrupt artifact (launch of '", l.entry, "' asks for ", l.shared_bytes,
           " bytes of shared memory)");
  k.launch.shared_bytes = static_cast<unsigned>(l.shared_bytes);
  for (const ArtifactTensorMap& a : l.tensor_maps) {
    // TMA maps have at most 5 dims, boxes of at most 256 elements a side.
    TS_CHECK(a.param < 1024 && a.dims.size() <= 5 && a.strides.size() <= 5 && a.box.size() <= 5,
             "corrupt artifact (a tensor map of '", l.entry, "')");
    cuda::TensorMapSpec t;
    t.param = static_cast<int>(a.param);
    t.offset = a.offset;
    t.dims = exprs_of(a.dims, l);
    t.strides = a.strides;
    for (int64_t b : a.box) {
      TS_CHECK(b >= 0 && b <= 256, "corrupt artifact (a tensor map box of ", b, " in '", l.entry, "')");
      t.box.push_back(static_cast<int>(b));
    }
    k.tensor_maps.push_back(std::move(t));
  }
  return k;
}

const ArtifactCubin& pick_cubin(const std::vector<ArtifactCubin>& cubins, const std::string& device_arch) {
  TS_CHECK(!cubins.empty(), "is not a CUDA artifact (it holds no cubin)");
  const int device = arch_parts(device_arch).first;
  const ArtifactCubin* best = nullptr;
  int best_version = -1;
  for (const ArtifactCubin& c : cubins) {
    if (c.arch == device_arch) return c;
    const auto [v, suffix] = arch_parts(c.arch);
    if (v < 0 || device < 0) continue;
    // Code for the device's own version runs whatever the suffixes say
    // (device_arch() writes "a" for 9.0 only: an sm_100a cubin is a B200's).
    if (v == device) return c;
    // Arch-specific cubins (sm_90a) run on that version only; plain and
    // family ("f") ones on later minors of the same major.
    if (suffix == "a" || major_of(v) != major_of(device) || v > device) continue;
    if (v > best_version) best = &c, best_version = v;
  }
  if (best) return *best;
  std::string archs;
  for (const ArtifactCubin& c : cubins) archs += (archs.empty() ? "" : ", ") + c.arch;
  fail("compiled for ", archs, ", which this GPU (", device_arch, ") cannot run: compile with --cuda-arch ",
       device_arch);
}

std::unique_ptr<GpuExecutable> load_cuda_artifact(const ArtifactContents& a, const GpuExecutableOptions& o,
                                                  const std::string& source_path) {
  TS_CHECK(!a.cuda.empty(), "is an artifact for ", artifact_target(a), ", not for a GPU: run it without --target cuda");
  const ArtifactCubin& cubin = pick_cubin(a.cuda, cuda::device_arch());  // before anything is parsed
  PhaseTimer parse("artifact model");
  std::shared_ptr<Model> model = artifact_model(a);
  model->source_path = source_path;
  parse.stop();
  PhaseTimer link("artifact module+plan");
  std::vector<Step> steps = artifact_steps(a, *model->graph);
  std::shared_ptr<const cuda::Module> module;
  std::map<std::string, GpuLaunch> by_entry;
  if (!cubin.launches.empty()) {
    module = std::make_shared<const cuda::Module>(cubin.image);
    for (const ArtifactLaunch& l : cubin.launches) by_entry[l.entry] = prepare_launch(kernel_launch(l), *module);
  }
  std::vector<GpuLaunch> launches;
  for (size_t i = 0; i < steps.size(); ++i) {
    if (!steps[i].kernel) {
      launches.emplace_back();
      continue;
    }
    const std::string& entry = a.steps[i].kernel.entry;
    auto l = by_entry.find(entry);
    TS_CHECK(l != by_entry.end(), "corrupt artifact (kernel '", entry, "' has no launch record for ", cubin.arch, ")");
    launches.push_back(l->second);
  }
  auto exe = std::make_unique<GpuExecutable>(*model, std::move(steps), std::move(launches), std::move(module), o);
  exe->retain(model);
  return exe;
}

std::unique_ptr<GpuExecutable> load_cuda_artifact(const std::string& path, const GpuExecutableOptions& o) {
  PhaseTimer read("artifact read+verify");
  ArtifactContents a = read_artifact(path);
  read.stop();
  return load_cuda_artifact(a, o, path);
}

}  // namespace tessel
