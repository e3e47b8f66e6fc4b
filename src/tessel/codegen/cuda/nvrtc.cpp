#include "tessel/codegen/cuda/nvrtc.h"

#include <filesystem>
#include <mutex>

#include "tessel/codegen/cuda/dynlib.h"
#include "tessel/support/cache_file.h"
#include "tessel/support/error.h"
#include "tessel/support/sha256.h"
#include "tessel/support/env.h"

namespace tessel::cuda {

namespace {

// The NVRTC C ABI (nvrtc.h), declared here so that building tessel needs no toolkit.
using nvrtcResult = int;
using nvrtcProgram = struct NvrtcProgramOpaque*;

struct NvrtcApi {
  detail::DynamicLibrary lib;
  std::string load_error;
  nvrtcResult (*version)(int*, int*) = nullptr;
  const char* (*error_string)(nvrtcResult) = nullptr;
  nvrtcResult (*create)(nvrtcProgram*, const char*, const char*, int, const char* const*, const char* const*) = nullptr;
  nvrtcResult (*destroy)(nvrtcProgram*) = nullptr;
  nvrtcResult (*compile)(nvrtcProgram, int, const char* const*) = nullptr;
  nvrtcResult (*log_size)(nvrtcProgram, size_t*) = nullptr;
  nvrtcResult (*log)(nvrtcProgram, char*) = nullptr;
  nvrtcResult (*cubin_size)(nvrtcProgram, size_t*) = nullptr;
  nvrtcResult (*cubin)(nvrtcProgram, char*) = nullptr;
  nvrtcResult (*ptx_size)(nvrtcProgram, size_t*) = nullptr;
  nvrtcResult (*ptx)(nvrtcProgram, char*) = nullptr;
};

template <class F>
void resolve(const detail::DynamicLibrary& lib, F*& fn, const char* name) {
  fn = reinterpret_cast<F*>(lib.symbol(name));
}

// Loaded once per process; a failed load is remembered, not retried.
const NvrtcApi& api() {
  static NvrtcApi a;
  static std::once_flag once;
  std::call_once(once, [] {
    a.lib = detail::open_first(detail::cuda_library_candidates("TESSEL_NVRTC", {"libnvrtc.so.13", "libnvrtc.so"}, true),
                               &a.load_error);
    if (!a.lib.handle) return;
    try {
      resolve(a.lib, a.version, "nvrtcVersion");
      resolve(a.lib, a.error_string, "nvrtcGetErrorString");
      resolve(a.lib, a.create, "nvrtcCreateProgram");
      resolve(a.lib, a.destroy, "nvrtcDestroyProgram");
      resolve(a.lib, a.compile, "nvrtcCompileProgram");
      resolve(a.lib, a.log_size, "nvrtcGetProgramLogSize");
      resolve(a.lib, a.log, "nvrtcGetProgramLog");
      resolve(a.lib, a.cubin_size, "nvrtcGetCUBINSize");
      resolve(a.lib, a.cubin, "nvrtcGetCUBIN");
      resolve(a.lib, a.ptx_size, "nvrtcGetPTXSize");
      resolve(a.lib, a.ptx, "nvrtcGetPTX");
    } catch (const Error& e) {
      a.load_error = e.what();
      a.lib.handle = nullptr;
    }
  });
  return a;
}

const NvrtcApi& loaded_api() {
  const NvrtcApi& a = api();
  TS_CHECK(a.lib.handle, "NVRTC (libnvrtc.so.13) could not be loaded: ", a.load_error,
           " (install the CUDA 13 toolkit, or set TESSEL_NVRTC to the library's path)");
  return a;
}

void check(const NvrtcApi& a, nvrtcResult r, const char* what) {
  TS_CHECK(r == 0, "NVRTC: ", what, " failed: ", a.error_string(r));
}

// Bumped whenever the generated cubin changes for the same source and options.
constexpr const char* kCompilerRevision = "cuda-nvrtc-1";
constexpr const char* kCubinMagic = "TSLCUBN1";

// --split-compile=0: NVRTC optimises the translation unit's functions on all
// cores (a model is one unit of tens of kernels); the cubin is the same
// (checked on ResNet-50's 31 kernels).
std::vector<std::string> compile_options(const NvrtcOptions& o, const std::string& arch) {
  std::vector<std::string> opts = {"--gpu-architecture=" + arch, "--fmad=false", "-std=c++17", "--split-compile=0"};
  for (const std::string& d : o.include_dirs) opts.push_back("-I" + d);
  if (const std::string inc = cuda_include_dir(); !inc.empty()) opts.push_back("-I" + inc);
  return opts;
}

// One NVRTC program, destroyed on every path.
class Program {
 public:
  Program(const NvrtcApi& a, const std::string& source, const std::string& name) : a_(a) {
    check(a_, a_.create(&prog_, source.c_str(), name.c_str(), 0, nullptr, nullptr), "nvrtcCreateProgram");
  }
  ~Program() { a_.destroy(&prog_); }
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;

  // Compiles; on failure throws with the log.
  std::string compile(const std::vector<std::string>& opts, const std::string& what) {
    std::vector<const char*> argv;
    for (const std::string& s : opts) argv.push_back(s.c_str());
    const nvrtcResult r = a_.compile(prog_, static_cast<int>(argv.size()), argv.data());
    std::string log = read(a_.log_size, a_.log);
    while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
    TS_CHECK(r == 0, "NVRTC could not compile ", what, ": ", a_.error_string(r), "\n", log);
    return log;
  }

  std::string read(nvrtcResult (*size_fn)(nvrtcProgram, size_t*), nvrtcResult (*get_fn)(nvrtcProgram, char*)) {
    size_t n = 0;
    check(a_, size_fn(prog_, &n), "reading a compilation result's size");
    std::string s(n, '\0');
    if (n > 0) check(a_, get_fn(prog_, s.data()), "reading a compilation result");
    return s;
  }

 private:
  const NvrtcApi& a_;
  nvrtcProgram prog_ = nullptr;
};

std::string cache_key(const std::string& source, const std::vector<std::string>& opts) {
  Sha256 h;
  h.update_field(kCompilerRevision);
  h.update_field(TESSEL_VERSION);
  h.update_field(nvrtc_version());
  for (const std::string& o : opts) h.update_field(o);
  h.update_field(source);
  return to_hex(h.digest());
}

}  // namespace

bool nvrtc_available(std::string* why) {
  const NvrtcApi& a = api();
  if (!a.lib.handle && why) *why = a.load_error;
  return a.lib.handle != nullptr;
}

std::string nvrtc_version() {
  const NvrtcApi& a = loaded_api();
  int major = 0, minor = 0;
  check(a, a.version(&major, &minor), "nvrtcVersion");
  return str_cat(major, ".", minor);
}

std::string cuda_include_dir() {
  namespace fs = std::filesystem;
  std::vector<std::string> roots;
  for (const char* v : {"CUDA_HOME", "CUDA_PATH"})
    if (auto r = env(v)) roots.push_back(*r);
  roots.push_back("/usr/local/cuda");
  // The toolkit that holds the NVRTC we loaded: <root>/lib64/libnvrtc.so.13.
  const NvrtcApi& a = api();
  if (a.lib.handle && a.lib.path.find('/') != std::string::npos)
    roots.push_back(fs::path(a.lib.path).parent_path().parent_path().string());
  std::error_code ec;
  for (const std::string& r : roots)
    for (const char* sub : {"/include", "/targets/x86_64-linux/include"})
      if (fs::exists(r + sub + "/cuda_fp16.h", ec)) return r + sub;
  return "";
}

std::string arch_for_compute_capability(int major, int minor) {
  return str_cat("sm_", major, minor, major == 9 && minor == 0 ? "a" : "");
}

Cubin compile_to_cubin(const std::string& source, const NvrtcOptions& o) {
  const NvrtcApi& a = loaded_api();
  TS_CHECK(o.arch.rfind("sm_", 0) == 0, "NVRTC: a cubin needs a real architecture (sm_XY), got '", o.arch, "'");
  const std::vector<std::string> opts = compile_options(o, o.arch);
  std::string path;
  if (!o.cache_dir.empty()) {
    path = (std::filesystem::path(o.cache_dir) / "cuda" / (cache_key(source, opts) + ".cubin")).string();
    if (std::optional<std::string> hit = read_cache_file(path, kCubinMagic)) return Cubin{std::move(*hit), "", true};
  }
  Program p(a, source, o.program_name);
  Cubin c;
  c.log = p.compile(opts, o.program_name + " for " + o.arch);
  c.image = p.read(a.cubin_size, a.cubin);
  TS_CHECK(!c.image.empty(), "NVRTC produced no cubin for ", o.arch);
  if (!path.empty()) write_cache_file(path, kCubinMagic, c.image);
  return c;
}

std::string compile_to_ptx(const std::string& source, const NvrtcOptions& o) {
  const NvrtcApi& a = loaded_api();
  std::string arch = o.arch;
  if (arch.rfind("sm_", 0) == 0) arch = "compute_" + arch.substr(3);
  Program p(a, source, o.program_name);
  p.compile(compile_options(o, arch), o.program_name + " for " + arch);
  std::string ptx = p.read(a.ptx_size, a.ptx);
  while (!ptx.empty() && ptx.back() == '\0') ptx.pop_back();
  return ptx;
}

}  // namespace tessel::cuda
