// The GPU runtime: an Executable's steps run on device 0 (docs/runtime_cuda.md).
//
// Per executable: one non-blocking stream and the model's constants on the
// device, uploaded once. Per binding of the symbols (computed on the first
// run at those sizes, then reused): one arena holding every kernel
// intermediate (runtime/memory_plan.h, the CPU planner: a value's bytes are
// reused once its last reader has run, which on one stream is also when the
// device is done with it), one buffer per graph input and output and per
// value an interpreter node reads or writes, one error word per kernel, the
// kernels' argument lists, and — when every step is a kernel — the whole
// launch list captured once in a CUDA graph, so that a run is: copy the
// inputs in, replay the graph, copy the outputs out.
//
// Nodes without a GPU kernel run on the host interpreter between launches:
// their inputs are copied out and their outputs back in (no graph then).
// Their outputs' sizes must follow from the inputs' (no data-dependent
// shapes on this target yet).
//
// A kernel's failed Assert is reported after the run (the device runs on):
// the message of the first kernel, in step order, whose error word is set.
// Running out of device memory throws one tessel::Error; the executable and
// the process stay usable.
//
// Device runs (run_device: the Python package's CUDA tensors) read the
// caller's inputs and write its outputs in place, on the caller's stream,
// without waiting for the device: the graph's kernel nodes that read a graph
// input or write a graph output get the caller's addresses
// (GraphExec::set_kernel_args, only when an address changed: a caching
// allocator hands back the same ones). Runs of one executable stay in order
// whichever streams they use (each waits for the last one's event), since
// they share the arena. A failed Assert of a device run is reported by the
// next call on the executable, or by synchronize().
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "tessel/codegen/cuda/cuda_source.h"
#include "tessel/codegen/cuda/driver_api.h"
#include "tessel/ir/graph.h"
#include "tessel/ops/registry.h"
#include "tessel/runtime/executable.h"
#include "tessel/runtime/step.h"

namespace tessel {

// How each kernel step launches: its function in the loaded module and its
// geometry (indexed like the steps; unused for interpreter steps).
struct GpuLaunch {
  void* function = nullptr;  // CUfunction
  cuda::LaunchGeometry geometry;
  // The kernel's 32-bit-index variant (cuda::KernelSource::narrow_symbol),
  // used by the instances whose sym values are all within [0, narrow_limit].
  void* narrow_function = nullptr;
  int64_t narrow_limit = 0;
  std::vector<cuda::TensorMapSpec> tensor_maps;  // built per instance (cuda/tensor_map.h)
};

// A kernel's launch from its source record, its functions looked up in
// `module` (shared memory limits raised where the kernel needs more).
GpuLaunch prepare_launch(const cuda::KernelSource& k, const cuda::Module& module);

// Where one run's time went (milliseconds, CUDA events on the stream).
struct GpuRunTimes {
  double upload_ms = 0;    // graph inputs host -> device
  double device_ms = 0;    // the kernels (the graph replay)
  double download_ms = 0;  // graph outputs device -> host
};

// A tensor the caller owns, for run_device: on the device (`device`, a
// device address) or, for small host inputs such as sizes, on the host
// (`host`: copied in on the run's stream).
struct DeviceTensorRef {
  DType dtype = DType::Undefined;
  std::vector<int64_t> dims;
  uint64_t device = 0;
  const void* host = nullptr;
};

struct GpuExecutableOptions {
  bool graphs = true;            // capture the launch list in a CUDA graph
  bool memory_planning = true;   // false: every intermediate its own buffer
};

class GpuExecutable {
 public:
  // `model` must outlive the executable (or be handed to retain()); `module`
  // holds the functions `launches` name.
  GpuExecutable(const Model& model, std::vector<Step> steps, std::vector<GpuLaunch> launches,
                std::shared_ptr<const cuda::Module> module, const GpuExecutableOptions& o = {});
  ~GpuExecutable();

  // Inputs and outputs on the host, in graph order (as Executable::run).
  std::vector<RtValue> run(const std::vector<RtValue>& inputs, GpuRunTimes* times = nullptr) const;

  // One run on the caller's memory, issued on `stream` (a CUstream; 0 is
  // the legacy default stream) and not waited for. `outputs`: a device
  // address per graph output, of output_dims(inputs)'s sizes.
  void run_device(const std::vector<DeviceTensorRef>& inputs, const std::vector<uint64_t>& outputs,
                  void* stream) const;
  // The graph outputs' dims for these inputs (their dtypes and dims are checked).
  std::vector<std::vector<int64_t>> output_dims(const std::vector<DeviceTensorRef>& inputs) const;
  // Waits for the last device run; throws its failed Assert, if any.
  void synchronize() const;
  // The device addresses the kernels of the last run were given for the
  // graph inputs and outputs (tests of zero-copy).
  std::vector<uint64_t> bound_addresses() const;

  // For benchmarks: copies `inputs` to the device once, then runs the
  // kernels `warmup` times untimed and `iterations` times timed with CUDA
  // events, inputs and outputs staying on the device. Returns the timed
  // runs' milliseconds. Checks the error words at the end.
  std::vector<double> time_on_device(const std::vector<RtValue>& inputs, int warmup, int iterations) const;

  // For profiles: like time_on_device, but each step is launched on its own
  // (no graph) between two CUDA events, so each run's step_seconds holds
  // every step's device time (interpreter steps: their host round trip).
  std::vector<RunProfile> profile_steps(const std::vector<RtValue>& inputs, int warmup, int iterations) const;

  const Model& model() const { return model_; }
  const std::vector<Step>& steps() const { return steps_; }
  std::vector<std::string> interpreter_ops() const;
  // Whether runs replay a CUDA graph (every step is a kernel, graphs on).
  bool uses_graph() const { return graphs_; }
  // Device bytes of the constants, and of the arena for these bindings.
  int64_t constant_bytes() const { return constant_bytes_; }
  void retain(std::shared_ptr<const void> owner) { retained_.push_back(std::move(owner)); }

 private:
  struct Instance;
  Instance& instance(const std::map<std::string, int64_t>& bindings) const;
  void capture(Instance& in) const;
  std::map<std::string, int64_t> bind_inputs(const std::vector<RtValue>& inputs) const;
  std::map<std::string, int64_t> bind_refs(const std::vector<DeviceTensorRef>& inputs) const;
  // A host-side run's instance: after the last device run, with its own buffers bound.
  Instance& host_instance(const std::vector<RtValue>& inputs) const;
  void bind(Instance& in, const Value* v, uint64_t ptr) const;
  void flush_bindings(Instance& in) const;
  void settle_device_runs() const;
  void report_device_errors() const;
  void upload_inputs(const Instance& in, const std::vector<RtValue>& inputs) const;
  void launch_all(const Instance& in, const cuda::Stream& s) const;
  void launch_step(const Instance& in, size_t i, const cuda::Stream& s) const;
  void run_interp(const Instance& in, const Node& n, const cuda::Stream& s) const;
  std::vector<RtValue> download_outputs(const Instance& in, const std::vector<RtValue>& inputs) const;
  void check_errors(const Instance& in) const;

  const Model& model_;
  std::vector<Step> steps_;
  std::vector<GpuLaunch> launches_;
  std::shared_ptr<const cuda::Module> module_;
  bool graphs_ = true;
  bool memory_planning_ = true;
  std::unique_ptr<cuda::Stream> stream_;
  std::unique_ptr<cuda::DeviceMemory> constants_;
  std::map<const Value*, uint64_t> constant_ptrs_;
  int64_t constant_bytes_ = 0;
  std::vector<std::shared_ptr<const void>> retained_;
  bool has_asserts_ = false;  // any kernel that may set its error word
  mutable std::mutex mu_;  // one stream: runs take turns
  mutable std::map<std::map<std::string, int64_t>, std::unique_ptr<Instance>> instances_;
  // The last device run: its stream, the event recorded after it, and its
  // instance while its error words are unread.
  mutable std::unique_ptr<cuda::Event> device_done_;
  mutable void* device_stream_ = nullptr;
  mutable Instance* unchecked_ = nullptr;
  mutable const Instance* last_ = nullptr;
};

}  // namespace tessel
