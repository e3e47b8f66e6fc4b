#include "tessel/runtime/cuda/gpu_executable.h"

#include <algorithm>
#include <climits>
#include <set>

#include "tessel/codegen/cuda/tensor_map.h"
#include "tessel/interp/interpreter.h"
#include "tessel/loop/eval.h"
#include "tessel/runtime/memory_plan.h"
#include "tessel/support/error.h"

namespace tessel {

GpuLaunch prepare_launch(const cuda::KernelSource& k, const cuda::Module& module) {
  GpuLaunch l;
  l.function = cuda::prepare_function(module, k.symbol, k.launch.shared_bytes);
  l.geometry = k.launch;
  l.tensor_maps = k.tensor_maps;
  if (!k.narrow_symbol.empty()) {
    l.narrow_function = cuda::prepare_function(module, k.narrow_symbol, k.launch.shared_bytes);
    l.narrow_limit = k.narrow_limit;
  }
  return l;
}

namespace {

// Bindings kept per executable; a model run at many shapes starts over
// rather than holding device memory for each.
constexpr size_t kMaxInstances = 8;
// Offsets of constants in their buffer: 256 bytes, what cudaMalloc gives,
// so that a kernel may use vector loads on any of them.
constexpr int64_t kDeviceAlignment = 256;

int64_t align_up(int64_t n, int64_t a) { return (n + a - 1) / a * a; }

std::string qualified_op(const Node& n) { return n.domain.empty() ? n.op : n.domain + "." + n.op; }

void check_tensor_value(const Value* v) {
  TS_CHECK(v->type.is_tensor() && v->type.dtype != DType::String && v->type.dtype != DType::Undefined,
           "--target cuda: %", v->name, " is not a numeric tensor (", v->type.str(),
           "); this target runs tensor models only");
}

std::vector<int64_t> value_dims(const Value* v, const std::map<std::string, int64_t>& bindings) {
  TS_CHECK(v->type.has_shape(), "--target cuda: the rank of %", v->name, " is unknown");
  std::vector<int64_t> dims;
  for (const Dim& d : *v->type.shape) {
    const std::optional<int64_t> n = d.eval(bindings);
    TS_CHECK(n.has_value(), "--target cuda: the size ", d.str(), " of %", v->name,
             " is not known from the inputs' shapes (data-dependent sizes are not supported on this target yet)");
    dims.push_back(*n);
  }
  return dims;
}

// Bytes of `v`, which these bindings must decide (value_dims says so otherwise).
int64_t bound_value_bytes(const Value* v, const std::map<std::string, int64_t>& bindings) {
  int64_t n = dtype_storage_size(v->type.dtype);
  for (int64_t d : value_dims(v, bindings)) n = checked_mul(n, d);
  return n;
}

unsigned launch_extent(const loop::Expr& e, const std::map<std::string, int64_t>& bindings, const std::string& kernel) {
  const int64_t v = loop::eval_index(e, bindings);
  TS_CHECK(v <= UINT_MAX, kernel, ": launch extent ", v, " is too large");
  return v <= 0 ? 0u : static_cast<unsigned>(v);
}

}  // namespace

// Everything one binding of the symbols needs on the device.
struct GpuExecutable::Instance {
  std::map<std::string, int64_t> bindings;
  std::unique_ptr<cuda::DeviceMemory> arena;
  std::vector<std::unique_ptr<cuda::DeviceMemory>> owned;
  std::map<const Value*, uint64_t> ptrs;  // every non-constant value's device address
  std::unique_ptr<cuda::DeviceMemory> errors;  // one int32 per step
  // Per kernel step: the argument values and the pointers to them that
  // cuLaunchKernel takes (argv points into the other members: not copied).
  struct Launch {
    std::vector<uint64_t> buffers;
    std::vector<long long> syms;
    uint64_t error = 0;
    std::vector<cuda::TensorMap> maps;
    std::vector<void*> argv;
    cuda::Dim3 grid, block;
    bool empty = false;  // a zero extent: nothing to run
    void* function = nullptr;  // GpuLaunch's, or its narrow variant for these syms
  };
  std::vector<Launch> launches;
  cuda::GraphExec graph;
  std::map<const Value*, uint64_t> own;  // graph inputs' and outputs' own buffers (host-side runs)
  // Per graph input or output: the (step, argument) pairs holding its address.
  std::map<const Value*, std::vector<std::pair<size_t, size_t>>> uses;
  std::vector<void*> nodes;  // per step: its kernel node in `graph` (null: none)
  std::set<size_t> dirty;    // steps whose addresses changed since the graph took them
};

GpuExecutable::GpuExecutable(const Model& model, std::vector<Step> steps, std::vector<GpuLaunch> launches,
                             std::shared_ptr<const cuda::Module> module, const GpuExecutableOptions& o)
    : model_(model), steps_(std::move(steps)), launches_(std::move(launches)), module_(std::move(module)),
      graphs_(o.graphs), memory_planning_(o.memory_planning) {
  TS_CHECK(launches_.size() == steps_.size(), "GpuExecutable: ", launches_.size(), " launches for ", steps_.size(),
           " steps");
  const Graph& g = *model_.graph;
  std::vector<const Value*> constants;
  std::set<const Value*> seen;
  for (const Value* v : g.inputs) check_tensor_value(v);
  for (const Value* v : g.outputs) check_tensor_value(v);
  for (const Step& s : steps_) {
    if (s.interp) graphs_ = false;  // host work between launches
    for (const Value* v : step_reads(s)) {
      if (s.kernel) check_tensor_value(v);
      if (v->constant && s.kernel && seen.insert(v).second) constants.push_back(v);
    }
    for (const Value* v : step_writes(s)) check_tensor_value(v);
  }
  for (const Value* v : constants) constant_bytes_ = align_up(constant_bytes_, kDeviceAlignment) + v->constant->nbytes();
  for (const Step& s : steps_)
    if (s.kernel && !s.kernel->assert_messages.empty()) has_asserts_ = true;
  stream_ = std::make_unique<cuda::Stream>();
  constants_ = std::make_unique<cuda::DeviceMemory>(static_cast<size_t>(constant_bytes_));
  int64_t offset = 0;
  for (const Value* v : constants) {
    offset = align_up(offset, kDeviceAlignment);
    constant_ptrs_[v] = constants_->ptr() + static_cast<uint64_t>(offset);
    stream_->copy_to_device(constant_ptrs_[v], v->constant->raw(), v->constant->nbytes());
    offset += static_cast<int64_t>(v->constant->nbytes());
  }
  stream_->synchronize();
}

GpuExecutable::~GpuExecutable() {
  // Device buffers are freed only after the streams are done with them.
  try {
    if (device_done_) device_done_->synchronize();
    if (stream_) stream_->synchronize();
  } catch (const Error&) {
  }
}

std::vector<std::string> GpuExecutable::interpreter_ops() const {
  std::set<std::string> ops;
  for (const Step& s : steps_)
    if (s.interp) ops.insert(qualified_op(*s.interp));
  return {ops.begin(), ops.end()};
}

GpuExecutable::Instance& GpuExecutable::instance(const std::map<std::string, int64_t>& bindings) const {
  if (auto it = instances_.find(bindings); it != instances_.end()) return *it->second;
  if (instances_.size() >= kMaxInstances) {
    if (device_done_) device_done_->synchronize();  // a device run may still use them
    unchecked_ = nullptr;
    last_ = nullptr;
    instances_.clear();
  }
  auto in = std::make_unique<Instance>();
  in->bindings = bindings;
  const Graph& g = *model_.graph;
  // Kernel intermediates in the arena, everything else in its own buffer.
  MemoryPlan plan;
  if (memory_planning_) plan = plan_memory(g, steps_, bindings);
  if (!plan.offsets.empty()) in->arena = std::make_unique<cuda::DeviceMemory>(static_cast<size_t>(plan.peak_bytes));
  auto place = [&](const Value* v) {
    if (v->constant || in->ptrs.count(v)) return;
    if (auto p = plan.offsets.find(v); p != plan.offsets.end()) {
      in->ptrs[v] = in->arena->ptr() + static_cast<uint64_t>(p->second);
      return;
    }
    in->owned.push_back(std::make_unique<cuda::DeviceMemory>(static_cast<size_t>(bound_value_bytes(v, bindings))));
    in->ptrs[v] = in->owned.back()->ptr();
  };
  for (const Value* v : g.inputs) place(v);
  for (const Step& s : steps_) {
    for (const Value* v : step_reads(s)) place(v);
    for (const Value* v : step_writes(s)) place(v);
  }
  for (const Value* v : g.outputs) place(v);
  for (const Value* v : g.inputs) in->own[v] = in->ptrs.at(v);
  for (const Value* v : g.outputs)
    if (!v->constant) in->own[v] = in->ptrs.at(v);
  in->errors = std::make_unique<cuda::DeviceMemory>(sizeof(int32_t) * std::max<size_t>(steps_.size(), 1));

  in->launches.resize(steps_.size());
  for (size_t i = 0; i < steps_.size(); ++i) {
    if (!steps_[i].kernel) continue;
    const KernelStep& k = *steps_[i].kernel;
    Instance::Launch& l = in->launches[i];
    for (const Value* v : k.params) {
      if (in->own.count(v)) in->uses[v].emplace_back(i, l.buffers.size());
      l.buffers.push_back(v->constant ? constant_ptrs_.at(v) : in->ptrs.at(v));
    }
    for (const std::string& s : k.syms) {
      auto it = bindings.find(s);
      TS_CHECK(it != bindings.end(), k.name, ": symbol '", s, "' is not bound");
      l.syms.push_back(it->second);
    }
    l.error = in->errors->ptr() + sizeof(int32_t) * i;
    const GpuLaunch& gl = launches_[i];
    const bool narrow =
        gl.narrow_function && cuda::within_narrow_limit(gl.narrow_limit, std::vector<int64_t>(l.syms.begin(), l.syms.end()));
    l.function = narrow ? gl.narrow_function : gl.function;
    for (uint64_t& b : l.buffers) l.argv.push_back(&b);
    for (long long& s : l.syms) l.argv.push_back(&s);
    l.argv.push_back(&l.error);
    l.maps = cuda::encode_tensor_maps(gl.tensor_maps, l.buffers, bindings, k.name);
    for (cuda::TensorMap& m : l.maps) l.argv.push_back(&m);
    const cuda::LaunchGeometry& geo = launches_[i].geometry;
    l.grid = {launch_extent(geo.grid[0], bindings, k.name), launch_extent(geo.grid[1], bindings, k.name),
              launch_extent(geo.grid[2], bindings, k.name)};
    l.block = {launch_extent(geo.block[0], bindings, k.name), launch_extent(geo.block[1], bindings, k.name),
               launch_extent(geo.block[2], bindings, k.name)};
    l.empty = !(l.grid.x && l.grid.y && l.grid.z && l.block.x && l.block.y && l.block.z);
  }

  if (graphs_) capture(*in);
  return *instances_.emplace(bindings, std::move(in)).first->second;
}

// The launch list is recorded once, with each kernel's node (to give it
// other addresses later); a capture that fails half-way is ended (and
// dropped) so the stream is usable again.
void GpuExecutable::capture(Instance& in) const {
  in.nodes.assign(steps_.size(), nullptr);
  stream_->begin_capture();
  try {
    stream_->fill_bytes(in.errors->ptr(), 0, in.errors->bytes());
    for (size_t i = 0; i < steps_.size(); ++i) {
      if (in.launches[i].empty) continue;
      launch_step(in, i, *stream_);
      in.nodes[i] = stream_->captured_node();
    }
  } catch (...) {
    try {
      stream_->end_capture();
    } catch (const Error&) {
    }
    throw;
  }
  in.graph = stream_->end_capture();
}

// Gives graph input or output `v` the address `ptr` in every kernel argument
// that holds it; flush_bindings hands the changed ones to the graph.
void GpuExecutable::bind(Instance& in, const Value* v, uint64_t ptr) const {
  uint64_t& current = in.ptrs.at(v);
  if (current == ptr) return;
  current = ptr;
  auto it = in.uses.find(v);
  if (it == in.uses.end()) return;
  for (const auto& [step, arg] : it->second) {
    in.launches[step].buffers[arg] = ptr;
    in.dirty.insert(step);
  }
}

void GpuExecutable::flush_bindings(Instance& in) const {
  for (size_t i : in.dirty) {
    Instance::Launch& l = in.launches[i];
    const GpuLaunch& gl = launches_[i];
    if (!gl.tensor_maps.empty()) {
      // argv points at the maps: overwrite them where they are.
      const std::vector<cuda::TensorMap> maps =
          cuda::encode_tensor_maps(gl.tensor_maps, l.buffers, in.bindings, steps_[i].kernel->name);
      std::copy(maps.begin(), maps.end(), l.maps.begin());
    }
    if (in.graph && in.nodes[i])
      in.graph.set_kernel_args(in.nodes[i], l.function, l.grid, l.block, gl.geometry.shared_bytes, l.argv.data());
  }
  in.dirty.clear();
}

// Before a run on the executable's own stream: it follows the last device
// run, whose failed Assert, if any, is reported first.
void GpuExecutable::settle_device_runs() const {
  if (!device_done_) return;
  stream_->wait(*device_done_);
  report_device_errors();
}

// The failed Assert of the last device run, if its error words are unread
// (waits for that run).
void GpuExecutable::report_device_errors() const {
  if (!unchecked_) return;
  const Instance* in = unchecked_;
  unchecked_ = nullptr;
  device_done_->synchronize();
  try {
    check_errors(*in);
  } catch (const Error& e) {
    fail("an earlier run on the device failed: ", e.what());
  }
}

GpuExecutable::Instance& GpuExecutable::host_instance(const std::vector<RtValue>& inputs) const {
  settle_device_runs();
  Instance& in = instance(bind_inputs(inputs));
  for (const auto& [v, ptr] : in.own) bind(in, v, ptr);
  flush_bindings(in);
  last_ = &in;
  return in;
}

std::map<std::string, int64_t> GpuExecutable::bind_refs(const std::vector<DeviceTensorRef>& inputs) const {
  const Graph& g = *model_.graph;
  TS_CHECK(inputs.size() == g.inputs.size(), "the model takes ", g.inputs.size(), " inputs, got ", inputs.size());
  std::map<std::string, int64_t> bindings;
  for (size_t i = 0; i < inputs.size(); ++i)
    check_dims_match(inputs[i].dtype, inputs[i].dims, g.inputs[i]->type, str_cat("input '", g.inputs[i]->name, "'"),
                     &bindings);
  return bindings;
}

std::vector<std::vector<int64_t>> GpuExecutable::output_dims(const std::vector<DeviceTensorRef>& inputs) const {
  const std::map<std::string, int64_t> bindings = bind_refs(inputs);
  std::vector<std::vector<int64_t>> out;
  for (const Value* v : model_.graph->outputs) out.push_back(value_dims(v, bindings));
  return out;
}

void GpuExecutable::run_device(const std::vector<DeviceTensorRef>& inputs, const std::vector<uint64_t>& outputs,
                               void* stream) const {
  std::lock_guard<std::mutex> lock(mu_);
  const Graph& g = *model_.graph;
  TS_CHECK(outputs.size() == g.outputs.size(), "the model has ", g.outputs.size(), " outputs, got ",
           outputs.size(), " buffers for them");
  const cuda::Stream s(stream);
  report_device_errors();  // of the last device run; and its stream's work, when that is another stream:
  if (device_done_ && device_stream_ != stream) s.wait(*device_done_);
  Instance& in = instance(bind_refs(inputs));
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Value* v = g.inputs[i];
    if (!inputs[i].host) {
      bind(in, v, inputs[i].device);
      continue;
    }
    bind(in, v, in.own.at(v));
    s.copy_to_device(in.own.at(v), inputs[i].host, static_cast<size_t>(bound_value_bytes(v, in.bindings)));
  }
  // Outputs are written in place, except constants, graph inputs and a value
  // that is two outputs: those are copied after the run.
  std::vector<size_t> copied;
  std::set<const Value*> written;
  for (size_t o = 0; o < outputs.size(); ++o) {
    const Value* v = g.outputs[o];
    const bool is_input = std::find(g.inputs.begin(), g.inputs.end(), v) != g.inputs.end();
    if (v->constant || is_input || !written.insert(v).second) {
      copied.push_back(o);
      continue;
    }
    bind(in, v, outputs[o]);
  }
  flush_bindings(in);
  launch_all(in, s);
  for (size_t o : copied) {
    const Value* v = g.outputs[o];
    if (v->constant && !constant_ptrs_.count(v)) {
      s.copy_to_device(outputs[o], v->constant->raw(), v->constant->nbytes());
      continue;
    }
    const uint64_t from = v->constant ? constant_ptrs_.at(v) : in.ptrs.at(v);
    s.copy_on_device(outputs[o], from, static_cast<size_t>(bound_value_bytes(v, in.bindings)));
  }
  if (!device_done_) device_done_ = std::make_unique<cuda::Event>(false);
  device_done_->record(s);
  device_stream_ = stream;
  last_ = &in;
  if (has_asserts_) unchecked_ = &in;
}

void GpuExecutable::synchronize() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (device_done_) device_done_->synchronize();
  report_device_errors();
}

std::vector<uint64_t> GpuExecutable::bound_addresses() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<uint64_t> out;
  if (!last_) return out;
  for (const Value* v : model_.graph->inputs) out.push_back(last_->ptrs.at(v));
  for (const Value* v : model_.graph->outputs) out.push_back(v->constant ? 0 : last_->ptrs.at(v));
  return out;
}

std::map<std::string, int64_t> GpuExecutable::bind_inputs(const std::vector<RtValue>& inputs) const {
  const Graph& g = *model_.graph;
  TS_CHECK(inputs.size() == g.inputs.size(), "the model takes ", g.inputs.size(), " inputs, got ", inputs.size());
  std::map<std::string, int64_t> bindings;
  for (size_t i = 0; i < inputs.size(); ++i)
    check_value_matches(inputs[i], g.inputs[i]->type, str_cat("input '", g.inputs[i]->name, "'"), &bindings);
  return bindings;
}

void GpuExecutable::upload_inputs(const Instance& in, const std::vector<RtValue>& inputs) const {
  const Graph& g = *model_.graph;
  for (size_t i = 0; i < inputs.size(); ++i)
    stream_->copy_to_device(in.ptrs.at(g.inputs[i]), inputs[i].tensor.raw(), inputs[i].tensor.nbytes());
}

void GpuExecutable::launch_all(const Instance& in, const cuda::Stream& s) const {
  if (in.graph) {
    in.graph.launch(s);
    return;
  }
  s.fill_bytes(in.errors->ptr(), 0, in.errors->bytes());
  for (size_t i = 0; i < steps_.size(); ++i) launch_step(in, i, s);
}

void GpuExecutable::launch_step(const Instance& in, size_t i, const cuda::Stream& s) const {
  if (steps_[i].interp) {
    run_interp(in, *steps_[i].interp, s);
    return;
  }
  const Instance::Launch& l = in.launches[i];
  if (l.empty) return;
  cuda::launch(l.function, l.grid, l.block, const_cast<void**>(l.argv.data()), s, launches_[i].geometry.shared_bytes);
}

void GpuExecutable::run_interp(const Instance& in, const Node& n, const cuda::Stream& s) const {
  // The node's operands come to the host; the launches before it finish first.
  std::map<const Value*, RtValue> host;
  for (const Value* v : step_reads(Step{nullptr, &n})) {
    if (v->constant) continue;
    Tensor t(v->type.dtype, value_dims(v, in.bindings));
    s.copy_to_host(t.mutable_raw(), in.ptrs.at(v), t.nbytes());
    host.emplace(v, RtValue(std::move(t)));
  }
  s.synchronize();
  Interpreter interp;
  std::vector<RtValue> outs = interp.run_node(n, [&](const Value* v) -> const RtValue* {
    auto it = host.find(v);
    return it == host.end() ? nullptr : &it->second;
  });
  for (size_t o = 0; o < n.outputs.size(); ++o) {
    const Value* v = n.outputs[o];
    if (!v) continue;
    std::map<std::string, int64_t> b = in.bindings;
    check_value_matches(outs[o], v->type, str_cat(n.describe(), ": output %", v->name), &b);
    TS_CHECK(b.size() == in.bindings.size(), n.describe(), ": output %", v->name,
             " has a data-dependent size, which --target cuda does not support yet");
    const Tensor& t = outs[o].tensor;
    TS_CHECK(static_cast<int64_t>(t.nbytes()) == bound_value_bytes(v, in.bindings), n.describe(), ": output %", v->name,
             " has ", t.nbytes(), " bytes, the plan expects ", bound_value_bytes(v, in.bindings));
    s.copy_to_device(in.ptrs.at(v), t.raw(), t.nbytes());
  }
  // The host tensors die here: wait for the copies that read them.
  s.synchronize();
}

std::vector<RtValue> GpuExecutable::download_outputs(const Instance& in, const std::vector<RtValue>& inputs) const {
  const Graph& g = *model_.graph;
  std::vector<RtValue> out;
  for (const Value* v : g.outputs) {
    if (v->constant) {
      out.emplace_back(*v->constant);
      continue;
    }
    bool is_input = false;
    for (size_t i = 0; i < g.inputs.size(); ++i)
      if (g.inputs[i] == v) {
        out.push_back(inputs[i]);
        is_input = true;
      }
    if (is_input) continue;
    Tensor t(v->type.dtype, value_dims(v, in.bindings));
    stream_->copy_to_host(t.mutable_raw(), in.ptrs.at(v), t.nbytes());
    out.emplace_back(std::move(t));
  }
  return out;
}

void GpuExecutable::check_errors(const Instance& in) const {
  std::vector<int32_t> codes(steps_.size() + 1, 0);
  stream_->copy_to_host(codes.data(), in.errors->ptr(), sizeof(int32_t) * steps_.size());
  stream_->synchronize();
  for (size_t i = 0; i < steps_.size(); ++i) {
    if (codes[i] == 0 || !steps_[i].kernel) continue;
    const KernelStep& k = *steps_[i].kernel;
    const size_t a = static_cast<size_t>(codes[i] - 1);
    fail(a < k.assert_messages.size() ? k.assert_messages[a] : str_cat(k.name, ": kernel failed with status ", codes[i]));
  }
}

std::vector<RtValue> GpuExecutable::run(const std::vector<RtValue>& inputs, GpuRunTimes* times) const {
  std::lock_guard<std::mutex> lock(mu_);
  const Instance& in = host_instance(inputs);
  cuda::Event start, uploaded, computed, downloaded;
  if (times) start.record(*stream_);
  upload_inputs(in, inputs);
  if (times) uploaded.record(*stream_);
  launch_all(in, *stream_);
  if (times) computed.record(*stream_);
  std::vector<RtValue> out = download_outputs(in, inputs);
  if (times) downloaded.record(*stream_);
  stream_->synchronize();
  check_errors(in);
  if (times) {
    times->upload_ms = cuda::Event::elapsed_ms(start, uploaded);
    times->device_ms = cuda::Event::elapsed_ms(uploaded, computed);
    times->download_ms = cuda::Event::elapsed_ms(computed, downloaded);
  }
  return out;
}

std::vector<double> GpuExecutable::time_on_device(const std::vector<RtValue>& inputs, int warmup, int iterations) const {
  std::lock_guard<std::mutex> lock(mu_);
  const Instance& in = host_instance(inputs);
  upload_inputs(in, inputs);
  for (int i = 0; i < warmup; ++i) launch_all(in, *stream_);
  std::vector<double> ms;
  cuda::Event a, b;
  for (int i = 0; i < iterations; ++i) {
    a.record(*stream_);
    launch_all(in, *stream_);
    b.record(*stream_);
    ms.push_back(cuda::Event::elapsed_ms(a, b));
  }
  stream_->synchronize();
  check_errors(in);
  return ms;
}

std::vector<RunProfile> GpuExecutable::profile_steps(const std::vector<RtValue>& inputs, int warmup,
                                                     int iterations) const {
  std::lock_guard<std::mutex> lock(mu_);
  const Instance& in = host_instance(inputs);
  upload_inputs(in, inputs);
  for (int i = 0; i < warmup; ++i) launch_all(in, *stream_);
  std::vector<cuda::Event> marks(steps_.size() + 1);
  std::vector<RunProfile> runs(static_cast<size_t>(std::max(iterations, 0)));
  for (RunProfile& r : runs) {
    stream_->fill_bytes(in.errors->ptr(), 0, in.errors->bytes());
    marks[0].record(*stream_);
    for (size_t i = 0; i < steps_.size(); ++i) {
      launch_step(in, i, *stream_);
      marks[i + 1].record(*stream_);
    }
    stream_->synchronize();
    for (size_t i = 0; i < steps_.size(); ++i) r.step_seconds.push_back(cuda::Event::elapsed_ms(marks[i], marks[i + 1]) / 1e3);
  }
  check_errors(in);
  return runs;
}

}  // namespace tessel
