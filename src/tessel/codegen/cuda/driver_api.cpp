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
using CUgraph = void*;
using CUgraphExec = void*;
using CUevent = void*;
using CUgraphNode = void*;
using CUdeviceptr = uint64_t;  // unsigned long long in cuda.h: the same 64 bits
// CUDA_KERNEL_NODE_PARAMS_v2 (cuda.h, CUDA 12.0 on).
struct KernelNodeParams {
  CUfunction func;
  unsigned grid_x, grid_y, grid_z;
  unsigned block_x, block_y, block_z;
  unsigned shared_bytes;
  void** kernel_params;
  void** extra;
  void* kern;  // CUkernel: used only when func is null
  CUcontext ctx;
};
constexpr int kAbiVersion = 12000;
constexpr CUresult kNoDevice = 100;  // CUDA_ERROR_NO_DEVICE
constexpr CUresult kOutOfMemory = 2;  // CUDA_ERROR_OUT_OF_MEMORY
constexpr int kCaptureModeThreadLocal = 1;          // CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
constexpr int kStreamNonBlocking = 1;               // CU_STREAM_NON_BLOCKING
constexpr unsigned kEventDisableTiming = 2;         // CU_EVENT_DISABLE_TIMING
constexpr int kCaptureStatusActive = 1;             // CU_STREAM_CAPTURE_STATUS_ACTIVE
constexpr int kFuncMaxDynamicSharedBytes = 8;       // CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
constexpr int kMaxSharedPerBlockOptin = 97;         // CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN
// cuTensorMapEncodeTiled's enums (cuda.h): 2-byte unsigned elements, no
// interleave, 128-byte swizzle, L2 promotion of 256 bytes, zero fill.
constexpr int kTensorMapUint16 = 1, kTensorMapInterleaveNone = 0, kTensorMapSwizzle128 = 3,
              kTensorMapL2Promotion256 = 3, kTensorMapFillZero = 0;

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
  CUresult (*mem_get_info)(size_t*, size_t*) = nullptr;
  CUresult (*memcpy_dtod)(CUdeviceptr, CUdeviceptr, size_t, CUstream) = nullptr;
  CUresult (*func_set_attribute)(CUfunction, int, int) = nullptr;
  CUresult (*begin_capture)(CUstream, int) = nullptr;
  CUresult (*end_capture)(CUstream, CUgraph*) = nullptr;
  CUresult (*graph_instantiate)(CUgraphExec*, CUgraph, unsigned long long) = nullptr;
  CUresult (*graph_launch)(CUgraphExec, CUstream) = nullptr;
  CUresult (*graph_destroy)(CUgraph) = nullptr;
  CUresult (*graph_exec_destroy)(CUgraphExec) = nullptr;
  CUresult (*event_create)(CUevent*, unsigned) = nullptr;
  CUresult (*event_destroy)(CUevent) = nullptr;
  CUresult (*event_record)(CUevent, CUstream) = nullptr;
  CUresult (*event_synchronize)(CUevent) = nullptr;
  CUresult (*event_elapsed)(float*, CUevent, CUevent) = nullptr;
  CUresult (*stream_wait_event)(CUstream, CUevent, unsigned) = nullptr;
  CUresult (*capture_info)(CUstream, int*, uint64_t*, CUgraph*, const CUgraphNode**, const void**, size_t*) = nullptr;
  CUresult (*exec_kernel_node_set_params)(CUgraphExec, CUgraphNode, const KernelNodeParams*) = nullptr;
  CUresult (*tensor_map_encode_tiled)(void*, int, unsigned, void*, const uint64_t*, const uint64_t*, const unsigned*,
                                      const unsigned*, int, int, int, int) = nullptr;
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

// `version`: the ABI to ask for; the driver picks the variant of `name`
// that version defines (cuMemAlloc at 12000 is cuMemAlloc_v2).
template <class F>
void resolve(DriverApi& d, F*& fn, const char* name, int version = kAbiVersion) {
  void* p = nullptr;
  int status = 0;
  const CUresult r = d.get_proc(name, &p, version, 0, &status);
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
  resolve(d, d.mem_get_info, "cuMemGetInfo");
  resolve(d, d.memcpy_dtod, "cuMemcpyDtoDAsync");
  resolve(d, d.func_set_attribute, "cuFuncSetAttribute");
  resolve(d, d.begin_capture, "cuStreamBeginCapture");
  resolve(d, d.end_capture, "cuStreamEndCapture");
  resolve(d, d.graph_instantiate, "cuGraphInstantiateWithFlags");
  resolve(d, d.graph_launch, "cuGraphLaunch");
  resolve(d, d.graph_destroy, "cuGraphDestroy");
  resolve(d, d.graph_exec_destroy, "cuGraphExecDestroy");
  resolve(d, d.event_create, "cuEventCreate");
  resolve(d, d.event_destroy, "cuEventDestroy");
  resolve(d, d.event_record, "cuEventRecord");
  resolve(d, d.event_synchronize, "cuEventSynchronize");
  resolve(d, d.tensor_map_encode_tiled, "cuTensorMapEncodeTiled");
  resolve(d, d.stream_wait_event, "cuStreamWaitEvent");
  // The v3 form (with edge data) is CUDA 12.3's, the only one CUDA 13 keeps;
  // without it (an older driver) graphs cannot take new argument values.
  try {
    resolve(d, d.capture_info, "cuStreamGetCaptureInfo", 12030);
  } catch (const Error&) {
    d.capture_info = nullptr;
  }
  resolve(d, d.exec_kernel_node_set_params, "cuGraphExecKernelNodeSetParams");
  // CUDA 12.8 added cuEventElapsedTime_v2 (same signature); CUDA 13 drivers
  // may serve only that one, older ones only the first.
  try {
    resolve(d, d.event_elapsed, "cuEventElapsedTime", 12080);
  } catch (const Error&) {
    resolve(d, d.event_elapsed, "cuEventElapsedTime");
  }
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
  i.max_shared_per_block_optin = attribute(d, kMaxSharedPerBlockOptin);
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
  const CUresult r = d.mem_alloc(&ptr_, bytes == 0 ? 1 : bytes);
  if (r == kOutOfMemory) {
    ptr_ = 0;
    size_t free_bytes = 0, total = 0;
    d.mem_get_info(&free_bytes, &total);
    fail("CUDA: out of device memory: ", bytes, " bytes requested, ", free_bytes, " of ", total, " bytes free");
  }
  check(d, r, "cuMemAlloc");
}

DeviceMemory::~DeviceMemory() {
  if (ptr_) driver_state().mem_free(ptr_);
}

Stream::Stream() {
  const DriverApi& d = driver();
  // Non-blocking: no implicit synchronisation with the legacy default
  // stream, which graph capture would also reject.
  check(d, d.stream_create(&s_, kStreamNonBlocking), "cuStreamCreate");
}

Stream::~Stream() {
  if (s_ && owned_) driver_state().stream_destroy(s_);
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

void Stream::copy_to_device(uint64_t dst, const void* src, size_t bytes) const {
  if (bytes == 0) return;
  const DriverApi& d = driver();
  check(d, d.memcpy_htod(dst, src, bytes, s_), "cuMemcpyHtoDAsync");
}

void Stream::copy_to_host(void* dst, uint64_t src, size_t bytes) const {
  if (bytes == 0) return;
  const DriverApi& d = driver();
  check(d, d.memcpy_dtoh(dst, src, bytes, s_), "cuMemcpyDtoHAsync");
}

void Stream::copy_on_device(uint64_t dst, uint64_t src, size_t bytes) const {
  if (bytes == 0) return;
  const DriverApi& d = driver();
  check(d, d.memcpy_dtod(dst, src, bytes, s_), "cuMemcpyDtoDAsync");
}

void Stream::fill_bytes(uint64_t dst, uint8_t byte, size_t bytes) const {
  if (bytes == 0) return;
  const DriverApi& d = driver();
  check(d, d.memset_d8(dst, byte, bytes, s_), "cuMemsetD8Async");
}

void Stream::begin_capture() const {
  const DriverApi& d = driver();
  check(d, d.begin_capture(s_, kCaptureModeThreadLocal), "cuStreamBeginCapture");
}

GraphExec Stream::end_capture() const {
  const DriverApi& d = driver();
  CUgraph g = nullptr;
  check(d, d.end_capture(s_, &g), "cuStreamEndCapture");
  CUgraphExec e = nullptr;
  const CUresult r = d.graph_instantiate(&e, g, 0);
  if (r != 0) d.graph_destroy(g);
  check(d, r, "cuGraphInstantiate");
  return GraphExec(e, g);
}

void* Stream::captured_node() const {
  const DriverApi& d = driver();
  TS_CHECK(d.capture_info, "CUDA: this driver (older than CUDA 12.3) has no cuStreamGetCaptureInfo_v3");
  int status = 0;
  const CUgraphNode* deps = nullptr;
  size_t n = 0;
  check(d, d.capture_info(s_, &status, nullptr, nullptr, &deps, nullptr, &n), "cuStreamGetCaptureInfo");
  TS_CHECK(status == kCaptureStatusActive && n == 1, "CUDA: the stream is not capturing one chain of work");
  return deps[0];
}

void Stream::wait(const Event& e) const {
  const DriverApi& d = driver();
  check(d, d.stream_wait_event(s_, e.handle(), 0), "cuStreamWaitEvent");
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

void GraphExec::reset() noexcept {
  if (g_) driver_state().graph_exec_destroy(g_);
  if (template_) driver_state().graph_destroy(template_);
  g_ = template_ = nullptr;
}

GraphExec::~GraphExec() { reset(); }

GraphExec& GraphExec::operator=(GraphExec&& o) noexcept {
  if (this != &o) {
    reset();
    g_ = o.g_;
    template_ = o.template_;
    o.g_ = o.template_ = nullptr;
  }
  return *this;
}

void GraphExec::set_kernel_args(void* node, void* fn, Dim3 grid, Dim3 block, unsigned shared_bytes,
                                void** args) const {
  const DriverApi& d = driver();
  const KernelNodeParams p{fn, grid.x, grid.y, grid.z, block.x, block.y, block.z, shared_bytes, args, nullptr,
                           nullptr, nullptr};
  check(d, d.exec_kernel_node_set_params(g_, node, &p), "cuGraphExecKernelNodeSetParams");
}

void GraphExec::launch(const Stream& s) const {
  const DriverApi& d = driver();
  check(d, d.graph_launch(g_, s.handle()), "cuGraphLaunch");
}

Event::Event(bool timing) {
  const DriverApi& d = driver();
  check(d, d.event_create(&e_, timing ? 0 : kEventDisableTiming), "cuEventCreate");
}

Event::~Event() {
  if (e_) driver_state().event_destroy(e_);
}

void Event::record(const Stream& s) const {
  const DriverApi& d = driver();
  check(d, d.event_record(e_, s.handle()), "cuEventRecord");
}

void Event::synchronize() const {
  const DriverApi& d = driver();
  check(d, d.event_synchronize(e_), "cuEventSynchronize");
}

float Event::elapsed_ms(const Event& start, const Event& end) {
  const DriverApi& d = driver();
  check(d, d.event_synchronize(end.e_), "cuEventSynchronize");
  float ms = 0;
  check(d, d.event_elapsed(&ms, start.e_, end.e_), "cuEventElapsedTime");
  return ms;
}

void set_max_dynamic_shared(void* fn, unsigned bytes) {
  const DriverApi& d = driver();
  TS_CHECK(bytes <= static_cast<unsigned>(d.info.max_shared_per_block_optin), "CUDA: a kernel needs ", bytes,
           " bytes of shared memory (the device allows ", d.info.max_shared_per_block_optin, ")");
  check(d, d.func_set_attribute(fn, kFuncMaxDynamicSharedBytes, static_cast<int>(bytes)), "cuFuncSetAttribute");
}

void* prepare_function(const Module& m, const std::string& symbol, unsigned dynamic_shared) {
  void* fn = m.function(symbol);
  if (dynamic_shared > 48 * 1024) set_max_dynamic_shared(fn, dynamic_shared);
  return fn;
}

TensorMap encode_tensor_map(uint64_t address, int rank, const uint64_t* dims, const uint64_t* strides,
                            const uint32_t* box) {
  const DriverApi& d = driver();
  TensorMap m;
  const unsigned ones[5] = {1, 1, 1, 1, 1};
  TS_CHECK(rank >= 1 && rank <= 5, "CUDA: a tensor map of rank ", rank);
  const CUresult r = d.tensor_map_encode_tiled(&m, kTensorMapUint16, static_cast<unsigned>(rank),
                                               reinterpret_cast<void*>(address), dims, strides, box, ones,
                                               kTensorMapInterleaveNone, kTensorMapSwizzle128,
                                               kTensorMapL2Promotion256, kTensorMapFillZero);
  if (r != 0) {
    std::string what = str_cat("address ", address, ", dims");
    for (int i = 0; i < rank; ++i) what += str_cat(" ", dims[i]);
    what += ", strides";
    for (int i = 0; i + 1 < rank; ++i) what += str_cat(" ", strides[i]);
    what += ", box";
    for (int i = 0; i < rank; ++i) what += str_cat(" ", box[i]);
    fail("CUDA driver: cuTensorMapEncodeTiled (", what, ") failed: ", describe(d, r));
  }
  return m;
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
