#include "tessel/codegen/cuda/driver_api.h"

#include <dlfcn.h>

#include <mutex>

#include "tessel/codegen/cuda/dynlib.h"
#include "tessel/codegen/cuda/nvrtc.h"
#include "tessel/support/error.h"

namespace tessel::cuda {

namespace {

// The driver's C ABI (cuda.h), declared here so that building tessel needs
// no toolkit. Entry points are requested at the CUDA 12.0 ABI, which gives
// the _v2 variants of the memory functions and the legacy default stream.
using CUresult = int;
using CUdevice = int;
using CUcontext = void*;
using CUmodule = void*;
using CUfunction = void*;
using CUstream = void*;
using CUdeviceptr = uint64_t;  // unsigned long long in cuda.h: the same 64 bits
constexpr int kAbiVersion = 12000;
constexpr CUresult kNoDevice = 100;  // CUDA_ERROR_NO_DEVICE

enum Attribute {
  kMaxThreadsPerBlock = 1,
  kMaxBlockDimX = 2,
  kMaxGridDimX = 5,
  kMultiprocessorCount = 16,
  kComputeCapabilityMajor = 75,
  kComputeCapabilityMinor = 76,
};

struct DriverApi {
  std::string error;  // why the driver cannot be used; empty when it can
  CUdevice device = 0;
  CUcontext context = nullptr;
  DeviceInfo info;
  CUresult (*get_proc)(const char*, void**, int, unsigned long long, int*) = nullptr;
  CUresult (*init)(unsigned) = nullptr;
  CUresult (*driver_version)(int*) = nullptr;
  CUresult (*error_name)(CUresult, const char**) = nullptr;
  CUresult (*error_string)(CUresult, const char**) = nullptr;
  CUresult (*device_count)(int*) = nullptr;
  CUresult (*device_get)(CUdevice*, int) = nullptr;
  CUresult (*device_name)(char*, int, CUdevice) = nullptr;
  CUresult (*device_attribute)(int*, int, CUdevice) = nullptr;
  CUresult (*device_total_mem)(size_t*, CUdevice) = nullptr;
  CUresult (*primary_ctx_retain)(CUcontext*, CUdevice) = nullptr;
  CUresult (*ctx_set_current)(CUcontext) = nullptr;
  CUresult (*module_load_data)(CUmodule*, const void*) = nullptr;
  CUresult (*module_unload)(CUmodule) = nullptr;
  CUresult (*module_get_function)(CUfunction*, CUmodule, const char*) = nullptr;
  CUresult (*launch_kernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,
                            void**, void**) = nullptr;
  CUresult (*mem_alloc)(CUdeviceptr*, size_t) = nullptr;
  CUresult (*mem_free)(CUdeviceptr) = nullptr;
  CUresult (*memcpy_htod)(CUdeviceptr, const void*, size_t, CUstream) = nullptr;
  CUresult (*memcpy_dtoh)(void*, CUdeviceptr, size_t, CUstream) = nullptr;
  CUresult (*memset_d8)(CUdeviceptr, unsigned char, size_t, CUstream) = nullptr;
  CUresult (*stream_create)(CUstream*, unsigned) = nullptr;
  CUresult (*stream_destroy)(CUstream) = nullptr;
  CUresult (*stream_synchronize)(CUstream) = nullptr;
};

std::string describe(const DriverApi& d, CUresult r) {
  const char* name = nullptr;
  const char* text = nullptr;
  if (d.error_name) d.error_name(r, &name);
  if (d.error_string) d.error_string(r, &text);
  return str_cat(name ? name : "CUDA error", " (", r, text ? ": " : "", text ? text : "", ")");
}

void check(const DriverApi& d, CUresult r, const char* what) {
  TS_CHECK(r == 0, "CUDA driver: ", what, " failed: ", describe(d, r));
}

template <class F>
void resolve(DriverApi& d, F*& fn, const char* name) {
  void* p = nullptr;
  int status = 0;
  const CUresult r = d.get_proc(name, &p, kAbiVersion, 0, &status);
  TS_CHECK(r == 0 && p != nullptr, "CUDA driver: cuGetProcAddress(", name, ") failed: ", describe(d, r));
  fn = reinterpret_cast<F*>(p);
}

void resolve_all(DriverApi& d) {
  resolve(d, d.error_name, "cuGetErrorName");
  resolve(d, d.error_string, "cuGetErrorString");
  resolve(d, d.init, "cuInit");
  resolve(d, d.driver_version, "cuDriverGetVersion");
  resolve(d, d.device_count, "cuDeviceGetCount");
  resolve(d, d.device_get, "cuDeviceGet");
  resolve(d, d.device_name, "cuDeviceGetName");
  resolve(d, d.device_attribute, "cuDeviceGetAttribute");
  resolve(d, d.device_total_mem, "cuDeviceTotalMem");
  resolve(d, d.primary_ctx_retain, "cuDevicePrimaryCtxRetain");
  resolve(d, d.ctx_set_current, "cuCtxSetCurrent");
  resolve(d, d.module_load_data, "cuModuleLoadData");
  resolve(d, d.module_unload, "cuModuleUnload");
  resolve(d, d.module_get_function, "cuModuleGetFunction");
  resolve(d, d.launch_kernel, "cuLaunchKernel");
  resolve(d, d.mem_alloc, "cuMemAlloc");
  resolve(d, d.mem_free, "cuMemFree");
  resolve(d, d.memcpy_htod, "cuMemcpyHtoDAsync");
  resolve(d, d.memcpy_dtoh, "cuMemcpyDtoHAsync");
  resolve(d, d.memset_d8, "cuMemsetD8Async");
  resolve(d, d.stream_create, "cuStreamCreate");
  resolve(d, d.stream_destroy, "cuStreamDestroy");
  resolve(d, d.stream_synchronize, "cuStreamSynchronize");
}

int attribute(const DriverApi& d, int a) {
  int v = 0;
  check(d, d.device_attribute(&v, a, d.device), "cuDeviceGetAttribute");
  return v;
}

void read_device(DriverApi& d) {
  DeviceInfo& i = d.info;
  char name[256] = {};
  check(d, d.device_name(name, sizeof name - 1, d.device), "cuDeviceGetName");
  i.name = name;
  i.cc_major = attribute(d, kComputeCapabilityMajor);
  i.cc_minor = attribute(d, kComputeCapabilityMinor);
  i.multiprocessors = attribute(d, kMultiprocessorCount);
  i.max_threads_per_block = attribute(d, kMaxThreadsPerBlock);
  for (int k = 0; k < 3; ++k) {
    i.max_block[k] = attribute(d, kMaxBlockDimX + k);
    i.max_grid[k] = attribute(d, kMaxGridDimX + k);
  }
  check(d, d.device_total_mem(&i.total_memory, d.device), "cuDeviceTotalMem");
  check(d, d.driver_version(&i.driver_version), "cuDriverGetVersion");
}

// Opens the driver, initialises it and retains device 0's primary context.
void open_driver(DriverApi& d) {
  std::string errors;
  const detail::DynamicLibrary lib =
      detail::open_first(detail::cuda_library_candidates("TESSEL_LIBCUDA", {"libcuda.so.1"}, false), &errors);
  TS_CHECK(lib.handle, "no NVIDIA driver found (", errors, ")");
  // cuGetProcAddress_v2 (CUDA 12+) reports a symbol's status; older drivers have only v1.
  d.get_proc = reinterpret_cast<decltype(d.get_proc)>(::dlsym(lib.handle, "cuGetProcAddress_v2"));
  TS_CHECK(d.get_proc, "the NVIDIA driver in ", lib.path, " is older than CUDA 12 (no cuGetProcAddress_v2)");
  resolve_all(d);
  const CUresult r = d.init(0);
  TS_CHECK(r != kNoDevice, "the NVIDIA driver reports no CUDA device");
  check(d, r, "cuInit");
  int n = 0;
  check(d, d.device_count(&n), "cuDeviceGetCount");
  TS_CHECK(n > 0, "the NVIDIA driver reports no CUDA device");
  check(d, d.device_get(&d.device, 0), "cuDeviceGet");
  read_device(d);
  check(d, d.primary_ctx_retain(&d.context, d.device), "cuDevicePrimaryCtxRetain");
}

DriverApi& driver_state() {
  static DriverApi d;
  static std::once_flag once;
  std::call_once(once, [] {
    try {
      open_driver(d);
    } catch (const Error& e) {
      d.error = e.what();
    }
  });
  return d;
}

// The driver with the primary context current in this thread.
const DriverApi& driver() {
  DriverApi& d = driver_state();
  TS_CHECK(d.error.empty(), "CUDA is not available: ", d.error);
  check(d, d.ctx_set_current(d.context), "cuCtxSetCurrent");
  return d;
}

}  // namespace

bool cuda_available(std::string* why) {
  const DriverApi& d = driver_state();
  if (!d.error.empty() && why) *why = d.error;
  return d.error.empty();
}

const DeviceInfo& device_info() { return driver().info; }

std::string device_arch() {
  const DeviceInfo& i = device_info();
  return arch_for_compute_capability(i.cc_major, i.cc_minor);
}

DeviceMemory::DeviceMemory(size_t bytes) : bytes_(bytes) {
  const DriverApi& d = driver();
  // A zero-byte buffer still gets an address, so kernels never see null.
  check(d, d.mem_alloc(&ptr_, bytes == 0 ? 1 : bytes), "cuMemAlloc");
}

DeviceMemory::~DeviceMemory() {
  if (ptr_) driver_state().mem_free(ptr_);
}

Stream::Stream() {
  const DriverApi& d = driver();
  check(d, d.stream_create(&s_, 0), "cuStreamCreate");
}

Stream::~Stream() {
  if (s_) driver_state().stream_destroy(s_);
}

void Stream::upload(const DeviceMemory& dst, const void* src, size_t bytes) const {
  TS_CHECK(bytes <= dst.bytes(), "CUDA: upload of ", bytes, " bytes into a ", dst.bytes(), "-byte buffer");
  if (bytes == 0) return;
  const DriverApi& d = driver();
  check(d, d.memcpy_htod(dst.ptr(), src, bytes, s_), "cuMemcpyHtoDAsync");
}

void Stream::download(void* dst, const DeviceMemory& src, size_t bytes) const {
  TS_CHECK(bytes <= src.bytes(), "CUDA: download of ", bytes, " bytes from a ", src.bytes(), "-byte buffer");
  if (bytes == 0) return;
  const DriverApi& d = driver();
  check(d, d.memcpy_dtoh(dst, src.ptr(), bytes, s_), "cuMemcpyDtoHAsync");
}

void Stream::fill(const DeviceMemory& dst, uint8_t byte, size_t bytes) const {
  TS_CHECK(bytes <= dst.bytes(), "CUDA: fill of ", bytes, " bytes in a ", dst.bytes(), "-byte buffer");
  if (bytes == 0) return;
  const DriverApi& d = driver();
  check(d, d.memset_d8(dst.ptr(), byte, bytes, s_), "cuMemsetD8Async");
}

void Stream::synchronize() const {
  const DriverApi& d = driver();
  check(d, d.stream_synchronize(s_), "cuStreamSynchronize");
}

Module::Module(const std::string& cubin) {
  const DriverApi& d = driver();
  check(d, d.module_load_data(&m_, cubin.data()), "cuModuleLoadData");
}

Module::~Module() {
  if (m_) driver_state().module_unload(m_);
}

void* Module::function(const std::string& symbol) const {
  const DriverApi& d = driver();
  CUfunction f = nullptr;
  const CUresult r = d.module_get_function(&f, m_, symbol.c_str());
  TS_CHECK(r == 0, "CUDA: the module has no kernel ", symbol, ": ", describe(d, r));
  return f;
}

void launch(void* fn, Dim3 grid, Dim3 block, void** args, const Stream& s, unsigned shared_bytes) {
  const DriverApi& d = driver();
  const DeviceInfo& i = d.info;
  const unsigned g[3] = {grid.x, grid.y, grid.z}, b[3] = {block.x, block.y, block.z};
  for (int k = 0; k < 3; ++k) {
    TS_CHECK(g[k] >= 1 && g[k] <= static_cast<unsigned>(i.max_grid[k]), "CUDA: grid dimension ", k, " is ", g[k],
             " (the device allows 1 to ", i.max_grid[k], ")");
    TS_CHECK(b[k] >= 1 && b[k] <= static_cast<unsigned>(i.max_block[k]), "CUDA: block dimension ", k, " is ", b[k],
             " (the device allows 1 to ", i.max_block[k], ")");
  }
  const uint64_t threads = uint64_t{b[0]} * b[1] * b[2];
  TS_CHECK(threads <= static_cast<uint64_t>(i.max_threads_per_block), "CUDA: ", threads,
           " threads per block (the device allows ", i.max_threads_per_block, ")");
  check(d, d.launch_kernel(fn, g[0], g[1], g[2], b[0], b[1], b[2], shared_bytes, s.handle(), args, nullptr),
        "cuLaunchKernel");
}

}  // namespace tessel::cuda
