#include "tessel/driver/artifact.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <random>

#include "tessel/ir/parser.h"
#include "tessel/ir/printer.h"
#include "tessel/support/error.h"
#ifdef TESSEL_HAVE_LLVM
#include "tessel/codegen/cpu/cpu_codegen.h"
#endif

namespace tessel {

namespace {

std::vector<const Node*> node_list(const Graph& g) {
  std::vector<const Node*> nodes;
  for (const auto& n : g.nodes()) nodes.push_back(n.get());
  return nodes;
}

std::vector<std::string> enabled_features(const std::string& list) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start < list.size()) {
    const size_t comma = std::min(list.find(',', start), list.size());
    if (list[start] == '+') out.push_back(list.substr(start, comma - start));
    start = comma + 1;
  }
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

void check_cpu_features(const ArtifactContents& a, const std::string& host_features) {
  const std::vector<std::string> missing = missing_cpu_features(a.cpu_features, host_features);
  if (missing.empty()) return;
  std::string list;
  for (const std::string& f : missing) list += (list.empty() ? "" : ",") + f;
  fail("compiled for CPU features ", list, " which this CPU lacks (compiled for ", a.cpu_name,
       "); compile the model again on this machine");
}

}  // namespace

// A read-only private mapping of a whole file: the weights in an artifact are
// copied once, from the page cache into the tensors, instead of read() into
// a buffer first.
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

ArtifactContents make_artifact(const Model& m, const CompiledModel& c) {
  TS_CHECK(c.exe, "make_artifact: the model has not been compiled");
  return make_artifact(m, c, *c.exe);
}

ArtifactContents make_artifact(const Model& m, const CompiledModel& c, const Executable& exe) {
  ArtifactContents a;
  a.cpu_name = c.cpu_name;
  a.cpu_features = enabled_features(c.cpu_features);
  // Large constants go beside the text as raw bytes (views of the model's
  // tensors: `m` must outlive the contents).
  std::vector<const Tensor*> external;
  PrintOptions po;
  po.external_constants = &external;
  a.model_ir = print_model(m, po);
  for (const Tensor* t : external) a.constants.emplace_back(reinterpret_cast<const char*>(t->raw()), t->nbytes());
  const std::vector<const Node*> nodes = node_list(*m.graph);
  std::map<const Node*, uint64_t> index;
  for (size_t i = 0; i < nodes.size(); ++i) index.emplace(nodes[i], i);
  for (const Step& s : exe.steps()) {
    ArtifactStep as;
    as.is_kernel = s.kernel != nullptr;
    if (s.kernel) as.kernel = artifact_kernel(*s.kernel, index, c.entry);
    else as.node = index.at(s.interp);
    a.steps.push_back(std::move(as));
  }
  a.object = c.object;
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
    return parse_model(a.model_ir, &a.constants);
  } catch (const Error& e) {
    fail("corrupt artifact (its model does not parse: ", e.what(), ")");
  }
}

std::unique_ptr<Executable> load_artifact(const std::string& path, const DriverOptions& o) {
#ifndef TESSEL_HAVE_LLVM
  (void)path;
  (void)o;
  fail("this tessel was built without the LLVM CPU code generator and cannot run compiled artifacts");
#else
  const ArtifactContents a = read_artifact(path);
  check_cpu_features(a, cpu::host_cpu_features());  // before any kernel code is loaded
  std::shared_ptr<Model> model = artifact_model(a);
  model->source_path = path;
  const Graph& g = *model->graph;
  const std::vector<const Node*> nodes = node_list(g);
  std::vector<Step> steps;
  for (const ArtifactStep& as : a.steps) {
    Step s;
    if (as.is_kernel) s.kernel = kernel_step(as.kernel, g, nodes);
    else s.interp = node_at(nodes, as.node);
    steps.push_back(std::move(s));
  }
  std::shared_ptr<cpu::KernelLibrary> lib;
  if (!a.object.empty()) {
    lib = cpu::load_object(a.object);
    for (size_t i = 0; i < steps.size(); ++i)
      if (steps[i].kernel) steps[i].kernel->fn = reinterpret_cast<KernelEntry>(lib->lookup(a.steps[i].kernel.entry));
  }
  for (const Step& s : steps) TS_CHECK(!s.kernel || s.kernel->fn, "corrupt artifact (kernel '", s.kernel->name, "' has no code)");
  ExecutableOptions eo;
  eo.threads = o.threads;
  eo.memory_planning = o.memory_planning;
  auto exe = std::make_unique<Executable>(*model, std::move(steps), lib, eo);
  exe->retain(model);
  return exe;
#endif
}

}  // namespace tessel
