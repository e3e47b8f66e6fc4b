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
};

// Whether device 0 can be used; *why says what is missing.
bool cuda_available(std::string* why = nullptr);
// Device 0, initialised on first use. Throws when cuda_available() is false.
const DeviceInfo& device_info();
// The cubin architecture for device 0 (sm_90a on an H100/H200).
std::string device_arch();

// Device memory owned by this object.
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

class Stream {
 public:
  Stream();
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  void* handle() const { return s_; }
  void upload(const DeviceMemory& dst, const void* src, size_t bytes) const;
  void download(void* dst, const DeviceMemory& src, size_t bytes) const;
  void fill(const DeviceMemory& dst, uint8_t byte, size_t bytes) const;
  // Waits for the stream; a failed kernel's error (illegal address, ...) surfaces here.
  void synchronize() const;

 private:
  void* s_ = nullptr;
};

struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
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

// Launches `fn`; `args` points at each kernel argument's value, in order.
// Checks the geometry against the device's limits first.
void launch(void* fn, Dim3 grid, Dim3 block, void** args, const Stream& s, unsigned shared_bytes = 0);

}  // namespace tessel::cuda
