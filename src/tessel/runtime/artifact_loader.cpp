#include "tessel/runtime/artifact_loader.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "tessel/ir/parser.h"
#include "tessel/runtime/cpu_features.h"
#include "tessel/runtime/object_loader.h"
#include "tessel/support/error.h"
#include "tessel/support/phase_timer.h"

namespace tessel {

namespace {

// Damage that passed the checksum (or a hand-edited file) still gives a
// clear error: every name and index is checked against the model.
const Value* value_named(const Graph& g, const std::string& name) {
  const Value* v = g.find_value(name);
  TS_CHECK(v, "corrupt artifact (no value '", name, "' in its model)");
  return v;
}

const Node* node_at(const std::vector<const Node*>& nodes, uint64_t i) {
  TS_CHECK(i < nodes.size(), "corrupt artifact (node ", i, " of ", nodes.size(), ")");
  return nodes[static_cast<size_t>(i)];
}

std::shared_ptr<KernelStep> kernel_step(const ArtifactKernel& a, const Graph& g,
                                        const std::vector<const Node*>& nodes) {
  auto k = std::make_shared<KernelStep>();
  k->name = a.name;
  for (const std::string& p : a.params) k->params.push_back(value_named(g, p));
  k->num_inputs = static_cast<size_t>(a.num_inputs);
  k->syms = a.syms;
  k->parallel = a.parallel;
  if (a.parallel) k->parallel_extent = Dim::parse(a.parallel_extent);
  k->assert_messages = a.assert_messages;
  for (uint64_t n : a.nodes) k->nodes.push_back(node_at(nodes, n));
  k->elementwise = a.elementwise;
  return k;
}

}  // namespace

// A read-only private mapping of a whole file: the loaded model's weights
// borrow its pages (parse_model with an owner), nothing is read() or copied.
class MappedFile {
 public:
  explicit MappedFile(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    TS_CHECK(fd >= 0, "cannot open: ", std::strerror(errno));
    struct stat st {};
    const bool ok = ::fstat(fd, &st) == 0;
    size_ = ok ? static_cast<size_t>(st.st_size) : 0;
    if (size_ > 0) data_ = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    const int err = errno;
    ::close(fd);
    TS_CHECK(ok && data_ != MAP_FAILED, "cannot read: ", std::strerror(err));
  }
  ~MappedFile() {
    if (data_ && data_ != MAP_FAILED) ::munmap(data_, size_);
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  std::string_view bytes() const { return {static_cast<const char*>(data_), size_}; }

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
};

bool is_artifact_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  char head[7] = {};
  return f && f.read(head, sizeof head) && std::memcmp(head, kArtifactMagic, sizeof head) == 0;
}

bool is_cuda_artifact_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::string head(artifact_header_bytes(), '\0');
  return f && f.read(head.data(), static_cast<std::streamsize>(head.size())) && header_has_cuda_code(head);
}

std::vector<const Node*> artifact_nodes(const Graph& g) {
  std::vector<const Node*> nodes;
  for (const auto& n : g.nodes()) nodes.push_back(n.get());
  return nodes;
}

void check_artifact_cpu(const ArtifactContents& a, const std::string& host) {
  std::vector<std::string> required;
  for (const std::string& f : a.cpu_features)
    if (f.size() > 1 && cpu_feature_detectable(std::string_view(f).substr(1))) required.push_back(f);
  const std::vector<std::string> missing = missing_cpu_features(required, host);
  if (missing.empty()) return;
  std::string list;
  for (const std::string& f : missing) list += (list.empty() ? "" : ",") + f;
  fail("compiled for CPU features ", list, " which this CPU lacks (compiled for ", a.cpu_name,
       "); compile the model again on this machine");
}

ArtifactContents read_artifact(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  TS_CHECK(fs::exists(path, ec), "no such file");
  TS_CHECK(!fs::is_directory(path, ec), "is a directory, not a model file");
  auto file = std::make_shared<MappedFile>(path);
  ArtifactContents a = decode_artifact(file->bytes());
  a.encoded = file->bytes();
  a.storage = std::move(file);  // a.encoded and a.constants point into it
  return a;
}

std::unique_ptr<Model> artifact_model(const ArtifactContents& a) {
  try {
    return parse_model(a.model_ir, &a.constants, a.storage);  // weights borrowed from the mapping
  } catch (const Error& e) {
    fail("corrupt artifact (its model does not parse: ", e.what(), ")");
  }
}

std::vector<Step> artifact_steps(const ArtifactContents& a, const Graph& g) {
  const std::vector<const Node*> nodes = artifact_nodes(g);
  std::vector<Step> steps;
  for (const ArtifactStep& as : a.steps) {
    Step s;
    if (as.is_kernel) s.kernel = kernel_step(as.kernel, g, nodes);
    else s.interp = node_at(nodes, as.node);
    steps.push_back(std::move(s));
  }
  return steps;
}

std::string artifact_target(const ArtifactContents& a) {
  if (a.cuda.empty()) return "cpu (" + a.cpu_name + ")";
  std::string archs;
  for (const ArtifactCubin& c : a.cuda) archs += (archs.empty() ? "" : ", ") + c.arch;
  return "cuda (" + archs + ")";
}

std::unique_ptr<Executable> load_artifact(const std::string& path, const ExecutableOptions& o) {
  PhaseTimer read("artifact read+verify");
  const ArtifactContents a = read_artifact(path);
  read.stop();
  return load_artifact(a, o, path);
}

std::unique_ptr<Executable> load_artifact(const ArtifactContents& a, const ExecutableOptions& o,
                                          const std::string& source_path) {
  TS_CHECK(a.cuda.empty(), "is an artifact for ", artifact_target(a), ", not for the CPU: run it with --target cuda");
  check_artifact_cpu(a, detected_cpu_features());  // before any kernel code is loaded
  PhaseTimer parse("artifact model");
  std::shared_ptr<Model> model = artifact_model(a);
  parse.stop();
  PhaseTimer link("artifact link+plan");
  model->source_path = source_path;
  std::vector<Step> steps = artifact_steps(a, *model->graph);
  std::shared_ptr<LoadedObject> code;
  if (!a.object.empty()) {
    code = std::make_shared<LoadedObject>(a.object);
    for (size_t i = 0; i < steps.size(); ++i)
      if (steps[i].kernel) steps[i].kernel->fn = reinterpret_cast<KernelEntry>(code->lookup(a.steps[i].kernel.entry));
  }
  for (const Step& s : steps) TS_CHECK(!s.kernel || s.kernel->fn, "corrupt artifact (kernel '", s.kernel->name, "' has no code)");
  auto exe = std::make_unique<Executable>(*model, std::move(steps), code, o);
  exe->retain(model);
  return exe;
}

}  // namespace tessel
