// The CUDA driver API, opened at run time: libcuda.so.1 through dlopen
// (TESSEL_LIBCUDA=PATH names another file, e.g. a missing one in tests), and
// every entry point through cuGetProcAddress, the one symbol taken with
// dlsym. tessel uses device 0's primary context (shared with any CUDA runtime
// in the process), made current in each thread before driver calls.
//
// Without a driver or a device every function here throws one tessel::Error
// saying what is missing; nothing crashes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace tessel::cuda {

struct DeviceInfo {
  std::string name;
  int cc_major = 0, cc_minor = 0;
  int multiprocessors = 0;
  size_t total_memory = 0;
  int driver_version = 0;  // CUDA version the driver supports: 13000 for 13.0
  int max_threads_per_block = 0;
  int max_grid[3] = {0, 0, 0};
  int max_block[3] = {0, 0, 0};
  int max_shared_per_block_optin = 0;  // bytes of dynamic shared memory a kernel may opt into
};

// Whether device 0 can be used; *why says what is missing.
bool cuda_available(std::string* why = nullptr);
// Device 0, initialised on first use. Throws when cuda_available() is false.
const DeviceInfo& device_info();
// The cubin architecture for device 0 (sm_90a on an H100/H200).
std::string device_arch();

// Device memory owned by this object. Running out of device memory throws
// one tessel::Error (bytes requested, free and total) and leaks nothing.
class DeviceMemory {
 public:
  explicit DeviceMemory(size_t bytes);
  ~DeviceMemory();
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
  uint64_t ptr() const { return ptr_; }
  size_t bytes() const { return bytes_; }

 private:
  uint64_t ptr_ = 0;
  size_t bytes_ = 0;
};

class Stream;

struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
};

// An instantiated CUDA graph (cuGraphExec), replayed with launch(). It keeps
// the graph it was made from: the nodes of that graph name what
// set_kernel_args changes.
class GraphExec {
 public:
  GraphExec() = default;
  GraphExec(void* exec, void* graph) : g_(exec), template_(graph) {}
  ~GraphExec();
  GraphExec(const GraphExec&) = delete;
  GraphExec& operator=(const GraphExec&) = delete;
  GraphExec(GraphExec&& o) noexcept : g_(o.g_), template_(o.template_) { o.g_ = o.template_ = nullptr; }
  GraphExec& operator=(GraphExec&& o) noexcept;
  explicit operator bool() const { return g_ != nullptr; }
  void launch(const Stream& s) const;
  // Gives the kernel node `node` (Stream::captured_node) new argument values
  // for the launches after this call (cuGraphExecKernelNodeSetParams: the
  // values `args` points at are copied now; launches already issued keep
  // the old ones).
  void set_kernel_args(void* node, void* fn, Dim3 grid, Dim3 block, unsigned shared_bytes, void** args) const;

 private:
  void reset() noexcept;
  void* g_ = nullptr;
  void* template_ = nullptr;
};

class Event;

// A non-blocking stream: work on it does not wait for the legacy default
// stream. Or, made from a handle, a stream someone else owns (a caller's:
// PyTorch's current stream), used and never destroyed; 0 is the legacy
// default stream.
class Stream {
 public:
  Stream();
  explicit Stream(void* borrowed) : s_(borrowed), owned_(false) {}
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  void* handle() const { return s_; }
  void upload(const DeviceMemory& dst, const void* src, size_t bytes) const;
  void download(void* dst, const DeviceMemory& src, size_t bytes) const;
  void fill(const DeviceMemory& dst, uint8_t byte, size_t bytes) const;
  // The same on raw device addresses (inside an arena); no bounds check.
  void copy_to_device(uint64_t dst, const void* src, size_t bytes) const;
  void copy_to_host(void* dst, uint64_t src, size_t bytes) const;
  void copy_on_device(uint64_t dst, uint64_t src, size_t bytes) const;
  void fill_bytes(uint64_t dst, uint8_t byte, size_t bytes) const;
  // Work issued between these is recorded into a graph instead of running
  // (thread-local capture mode: other threads' CUDA calls are unaffected).
  void begin_capture() const;
  GraphExec end_capture() const;
  // While capturing: the node the last call issued (the one the next would
  // follow), for GraphExec::set_kernel_args.
  void* captured_node() const;
  // Work issued after this waits for `e`'s last record (on any stream).
  void wait(const Event& e) const;
  // Waits for the stream; a failed kernel's error (illegal address, ...) surfaces here.
  void synchronize() const;

 private:
  void* s_ = nullptr;
  bool owned_ = true;
};

// A CUDA event: timing work on a stream, or (timing = false, cheaper)
// ordering one stream after another.
class Event {
 public:
  explicit Event(bool timing = true);
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  void record(const Stream& s) const;
  // Waits until the work before the last record is done (at once if never recorded).
  void synchronize() const;
  void* handle() const { return e_; }
  // Milliseconds between two recorded events; waits for `end`.
  static float elapsed_ms(const Event& start, const Event& end);

 private:
  void* e_ = nullptr;
};

// A cubin loaded into device 0's primary context.
class Module {
 public:
  explicit Module(const std::string& cubin);
  ~Module();
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;
  // The kernel's handle (CUfunction); tessel::Error when the cubin has no such symbol.
  void* function(const std::string& symbol) const;

 private:
  void* m_ = nullptr;
};

// Lets `fn` use `bytes` of dynamic shared memory (needed above 48 KiB).
void set_max_dynamic_shared(void* fn, unsigned bytes);
// The function `symbol` of `m`, ready to launch with `dynamic_shared` bytes
// (the limit raised when that is over the default 48 KiB).
void* prepare_function(const Module& m, const std::string& symbol, unsigned dynamic_shared);

// A TMA tensor map (CUtensorMap): opaque, 64-byte aligned as the driver wants it.
struct alignas(64) TensorMap {
  uint64_t words[16] = {};
};

// cuTensorMapEncodeTiled for 2-byte elements at `address`: `rank` dims
// (innermost first), rank - 1 byte strides, a box per copy, the 128-byte
// swizzle, zero fill outside the dims. Throws one tessel::Error naming the
// values the driver rejected.
TensorMap encode_tensor_map(uint64_t address, int rank, const uint64_t* dims, const uint64_t* strides,
                            const uint32_t* box);

// Launches `fn`; `args` points at each kernel argument's value, in order.
// Checks the geometry against the device's limits first.
void launch(void* fn, Dim3 grid, Dim3 block, void** args, const Stream& s, unsigned shared_bytes = 0);

}  // namespace tessel::cuda
