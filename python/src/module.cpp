// tessel._core: the native half of the Python package (python/tessel/__init__.py
// is the rest, docs/python.md the user's guide).
//
// Arrays cross the boundary without copies where they can: a C-contiguous
// CPU array (numpy, or any DLPack tensor such as torch's) becomes a borrowed
// tessel::Tensor over the caller's bytes (Tensor::borrow), and each output
// tensor goes back as an array over the executable's own buffer, kept alive
// by the array. Arrays that are not contiguous are copied once (counted in
// Executable.stats, so that tests and users can see it).
//
// CUDA executables take device tensors as they are (run_device): the
// kernels read the caller's inputs and write outputs the caller allocated
// (torch.empty, from tessel/__init__.py), on the caller's stream, with no
// copy through the host and no wait for the device. Other DLPack CUDA arrays
// get outputs in device memory tessel allocates, freed with the array.
//
// The GIL is released while a model runs; tessel::Executable::run is const
// and thread-safe, and GpuExecutable::run takes turns on its stream.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tessel/driver/artifact.h"
#include "tessel/driver/compiler.h"
#include "tessel/driver/cuda_compiler.h"
#include "tessel/driver/model_loader.h"
#include "tessel/driver/session.h"
#include "tessel/ir/builder.h"
#include "tessel/ir/printer.h"
#include "tessel/runtime/artifact_format.h"
#include "tessel/runtime/cuda/gpu_executable.h"
#include "tessel/schedule/schedule.h"
#include "tessel/support/error.h"

namespace nb = nanobind;

namespace tessel::py {

namespace {

// The package's exceptions (created in the module init below): Error is the
// base of both, and a subclass of RuntimeError.
PyObject* g_error = nullptr;
PyObject* g_compile_error = nullptr;
PyObject* g_input_error = nullptr;

struct CompileFailure : std::runtime_error {
  using std::runtime_error::runtime_error;
};
struct InputFailure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// ---- dtypes ---------------------------------------------------------------------

struct DTypeCode {
  DType dtype;
  uint8_t code;  // nb::dlpack::dtype_code
  uint8_t bits;
};

constexpr DTypeCode kDTypes[] = {
    {DType::F32, uint8_t(nb::dlpack::dtype_code::Float), 32},
    {DType::F64, uint8_t(nb::dlpack::dtype_code::Float), 64},
    {DType::F16, uint8_t(nb::dlpack::dtype_code::Float), 16},
    {DType::BF16, uint8_t(nb::dlpack::dtype_code::Bfloat), 16},
    {DType::I8, uint8_t(nb::dlpack::dtype_code::Int), 8},
    {DType::I16, uint8_t(nb::dlpack::dtype_code::Int), 16},
    {DType::I32, uint8_t(nb::dlpack::dtype_code::Int), 32},
    {DType::I64, uint8_t(nb::dlpack::dtype_code::Int), 64},
    {DType::U8, uint8_t(nb::dlpack::dtype_code::UInt), 8},
    {DType::U16, uint8_t(nb::dlpack::dtype_code::UInt), 16},
    {DType::U32, uint8_t(nb::dlpack::dtype_code::UInt), 32},
    {DType::U64, uint8_t(nb::dlpack::dtype_code::UInt), 64},
    {DType::Bool, uint8_t(nb::dlpack::dtype_code::Bool), 8},
};

std::optional<DType> dtype_of(nb::dlpack::dtype d) {
  if (d.lanes != 1) return std::nullopt;
  for (const DTypeCode& c : kDTypes)
    if (c.code == d.code && c.bits == d.bits) return c.dtype;
  return std::nullopt;
}

nb::dlpack::dtype dlpack_of(DType t) {
  for (const DTypeCode& c : kDTypes)
    if (c.dtype == t) return nb::dlpack::dtype{c.code, c.bits, 1};
  throw InputFailure(str_cat("tessel outputs of dtype ", dtype_name(t), " have no array form in Python"));
}

// "f32", "bf16", ... (the IR's names), which tessel/__init__.py maps to numpy's.
std::vector<std::string> dtype_names() {
  std::vector<std::string> out;
  for (const DTypeCode& c : kDTypes) out.emplace_back(dtype_name(c.dtype));
  return out;
}

DType parse_dtype_name(const std::string& name) {
  DType t;
  if (!dtype_from_name(name, &t)) throw CompileFailure(str_cat("unknown dtype '", name, "'"));
  return t;
}

// ---- arrays in -----------------------------------------------------------------

using Array = nb::ndarray<nb::ro>;

// What the conversion of one run's inputs did (Executable.stats).
struct Counters {
  std::atomic<int64_t> borrowed{0};  // inputs handed over without a copy
  std::atomic<int64_t> copied{0};    // inputs copied (not contiguous)
  std::atomic<int64_t> runs{0};
};

bool c_contiguous(const Array& a) {
  int64_t expect = 1;
  for (size_t i = a.ndim(); i-- > 0;) {
    if (a.shape(i) != 1 && a.stride(i) != expect) return false;
    expect *= static_cast<int64_t>(a.shape(i));
  }
  return true;
}

// The caller's array as a tensor: borrowed when contiguous, else copied
// element by element through the strides. Needs the GIL (it takes a
// reference to the array); the reference is dropped with the GIL taken
// again, whichever thread lets the tensor go.
Tensor to_tensor(const Array& a, const std::string& name, Counters& n) {
  const std::optional<DType> dt = dtype_of(a.dtype());
  if (!dt)
    throw InputFailure(str_cat("input '", name, "': arrays of this dtype (DLPack code ", int(a.dtype().code), ", ",
                               int(a.dtype().bits), " bits) are not supported"));
  if (a.device_type() != nb::device::cpu::value)
    throw InputFailure(str_cat("input '", name, "': the array is on device type ", a.device_type(),
                               "; this executable takes host (CPU) arrays"));
  std::vector<int64_t> shape(a.ndim());
  for (size_t i = 0; i < a.ndim(); ++i) shape[i] = static_cast<int64_t>(a.shape(i));
  if (c_contiguous(a)) {
    auto* held = new Array(a);
    std::shared_ptr<const void> owner(held, [](const Array* p) {
      nb::gil_scoped_acquire gil;
      delete p;
    });
    ++n.borrowed;
    return Tensor::borrow(*dt, std::move(shape), a.data(), std::move(owner));
  }
  Tensor t(*dt, shape);
  const size_t item = static_cast<size_t>(dtype_storage_size(*dt));
  uint8_t* dst = t.mutable_raw();
  const auto* src = static_cast<const uint8_t*>(a.data());
  std::vector<int64_t> idx(a.ndim(), 0);
  for (int64_t e = 0; e < t.numel(); ++e) {
    int64_t off = 0;
    for (size_t i = 0; i < a.ndim(); ++i) off += idx[i] * a.stride(i);
    std::memcpy(dst + e * item, src + off * static_cast<int64_t>(item), item);
    for (size_t i = a.ndim(); i-- > 0;) {
      if (++idx[i] < shape[i]) break;
      idx[i] = 0;
    }
  }
  ++n.copied;
  return t;
}

// ---- arrays out ----------------------------------------------------------------

enum class Framework { Numpy = 0, Torch = 1, DLPack = 2 };

template <class F>
nb::object wrap_as(Tensor* t, nb::handle owner, const std::vector<size_t>& shape, nb::dlpack::dtype d) {
  return nb::ndarray<F>(const_cast<uint8_t*>(t->raw()), shape.size(), shape.data(), owner, nullptr, d,
                        nb::device::cpu::value)
      .cast();
}

// An output tensor as an array over its own bytes: the array owns a heap
// copy of the Tensor handle (the bytes are shared, not copied).
nb::object to_array(Tensor t, Framework f) {
  if (t.dtype() == DType::String) throw InputFailure("string outputs are not supported by the Python package yet");
  const nb::dlpack::dtype d = dlpack_of(t.dtype());
  std::vector<size_t> shape(t.shape().begin(), t.shape().end());
  auto* held = new Tensor(std::move(t));
  nb::capsule owner(held, [](void* p) noexcept { delete static_cast<Tensor*>(p); });
  switch (f) {
    case Framework::Torch: return wrap_as<nb::pytorch>(held, owner, shape, d);
    case Framework::DLPack: return wrap_as<nb::array_api>(held, owner, shape, d);
    default: return wrap_as<nb::numpy>(held, owner, shape, d);
  }
}

// ---- the executable -------------------------------------------------------------

struct ValueInfo {
  std::string name;
  std::string dtype;              // "f32", ...
  std::vector<nb::object> shape;  // ints, and strings for symbols
};

ValueInfo value_info(const Value& v) {
  ValueInfo info{v.name, std::string(dtype_name(v.type.dtype)), {}};
  if (v.type.has_shape())
    for (const Dim& d : *v.type.shape) {
      if (d.is_const()) info.shape.push_back(nb::int_(d.value()));
      else info.shape.push_back(nb::str(d.str().c_str()));
    }
  return info;
}

struct StepTime {
  std::string name;
  std::string kind;  // "kernel" or "interpreter"
  double seconds;
};

class PyExecutable {
 public:
  std::string target = "cpu";
  std::unique_ptr<Executable> cpu;
  std::unique_ptr<CudaCompiledModel> gpu;
  std::shared_ptr<const Model> model;          // the compiled model (both targets)
  std::unique_ptr<CompiledModel> compiled;     // CPU compiles: what save() writes
  std::string artifact_path;                   // loaded artifacts: save() copies the file
  mutable Counters counters;

  const Graph& graph() const { return cpu ? *cpu->model().graph : *model->graph; }

  std::vector<ValueInfo> inputs() const {
    std::vector<ValueInfo> out;
    for (const Value* v : graph().inputs) out.push_back(value_info(*v));
    return out;
  }
  std::vector<ValueInfo> outputs() const {
    std::vector<ValueInfo> out;
    for (const Value* v : graph().outputs) out.push_back(value_info(*v));
    return out;
  }

  // Inputs in graph order, checked against the declared types before the run
  // (so that a wrong shape or dtype is an InputError, not a run failure).
  std::vector<RtValue> convert(const std::vector<Array>& arrays) const {
    const Graph& g = graph();
    if (arrays.size() != g.inputs.size())
      throw InputFailure(str_cat("the model takes ", g.inputs.size(), " inputs, got ", arrays.size()));
    std::vector<RtValue> in;
    std::map<std::string, RtValue> given;
    for (size_t i = 0; i < arrays.size(); ++i) {
      in.emplace_back(to_tensor(arrays[i], g.inputs[i]->name, counters));
      given[g.inputs[i]->name] = in.back();
    }
    try {
      bind_symbols(g, given, {}, nullptr);
    } catch (const Error& e) {
      throw InputFailure(e.what());
    }
    return in;
  }

  std::vector<nb::object> run(const std::vector<Array>& arrays, int framework) {
    return execute(convert(arrays), static_cast<Framework>(framework), nullptr);
  }

  // The data pointers a run hands the runtime and gets back, for tests of
  // zero-copy: (input pointers, output pointers, outputs).
  nb::tuple run_traced(const std::vector<Array>& arrays) {
    std::vector<RtValue> in = convert(arrays);
    std::vector<uintptr_t> in_ptrs, out_ptrs;
    for (const RtValue& v : in) in_ptrs.push_back(reinterpret_cast<uintptr_t>(v.tensor.raw()));
    std::vector<nb::object> out = execute(in, Framework::Numpy, &out_ptrs);
    return nb::make_tuple(in_ptrs, out_ptrs, out);
  }

  // Runs converted inputs with the GIL released; the outputs as arrays of
  // `f` (and, when asked, their data pointers).
  std::vector<nb::object> execute(const std::vector<RtValue>& in, Framework f, std::vector<uintptr_t>* out_ptrs) {
    std::vector<RtValue> out;
    {
      nb::gil_scoped_release release;
      out = cpu ? cpu->run(in) : gpu->exe->run(in);
    }
    ++counters.runs;
    std::vector<nb::object> result;
    for (RtValue& v : out) {
      if (!v.is_tensor()) throw Error("sequence and optional outputs are not supported by the Python package yet");
      if (out_ptrs) out_ptrs->push_back(reinterpret_cast<uintptr_t>(v.tensor.raw()));
      result.push_back(to_array(std::move(v.tensor), f));
    }
    return result;
  }

  // Each step's wall time (CPU) or device time (CUDA) for one run, after
  // `warmup` untimed runs; the median of `iters` runs per step.
  std::vector<StepTime> profile(const std::vector<Array>& arrays, int warmup, int iters) {
    if (iters < 1) throw InputFailure("profile: iters must be at least 1");
    std::vector<RtValue> in = convert(arrays);
    std::vector<RunProfile> runs;
    const std::vector<Step>* steps = nullptr;
    {
      nb::gil_scoped_release release;
      if (cpu) {
        for (int i = 0; i < warmup; ++i) cpu->run(in);
        for (int i = 0; i < iters; ++i) cpu->run(in, &runs.emplace_back());
        steps = &cpu->steps();
      } else {
        runs = gpu->exe->profile_steps(in, warmup, iters);
        steps = &gpu->exe->steps();
      }
    }
    std::vector<StepTime> out;
    for (size_t s = 0; s < steps->size(); ++s) {
      std::vector<double> t;
      for (const RunProfile& r : runs) t.push_back(r.step_seconds.at(s));
      std::nth_element(t.begin(), t.begin() + t.size() / 2, t.end());
      const Step& st = (*steps)[s];
      out.push_back({st.kernel ? st.kernel->name : st.interp->describe(), st.kernel ? "kernel" : "interpreter",
                     t[t.size() / 2]});
    }
    return out;
  }

  void save(const std::string& path) const {
    if (!artifact_path.empty()) {
      std::ifstream f(artifact_path, std::ios::binary);
      TS_CHECK(f, artifact_path, ": cannot read the artifact to save it");
      const std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
      write_file_atomically(path, bytes);
      return;
    }
    TS_CHECK(compiled, "save: only CPU executables have an artifact form yet (CUDA artifacts: issue 23)");
    write_file_atomically(path, encode_artifact(make_artifact(*model, *compiled, *cpu)));
  }

  std::vector<std::string> interpreter_ops() const {
    return cpu ? cpu->interpreter_ops() : gpu->exe->interpreter_ops();
  }

  // ---- device tensors (target cuda) ----

  const GpuExecutable& device_exe() const {
    if (!gpu) throw InputFailure("this executable runs on the CPU; CUDA tensors need target 'cuda'");
    return *gpu->exe;
  }

  // Inputs as the Python side describes them: addresses (device, or host
  // for `on_host`), dims and dtype names, checked against the graph.
  static std::vector<DeviceTensorRef> refs(const std::vector<uintptr_t>& ptrs,
                                           const std::vector<std::vector<int64_t>>& dims,
                                           const std::vector<std::string>& dtypes, const std::vector<bool>& on_host) {
    if (dims.size() != ptrs.size() || dtypes.size() != ptrs.size() || on_host.size() != ptrs.size())
      throw InputFailure("run_device: addresses, dims, dtypes and on_host differ in length");
    std::vector<DeviceTensorRef> r(ptrs.size());
    for (size_t i = 0; i < ptrs.size(); ++i) {
      r[i].dtype = parse_dtype_name(dtypes[i]);
      r[i].dims = dims[i];
      if (on_host[i]) r[i].host = reinterpret_cast<const void*>(ptrs[i]);
      else r[i].device = ptrs[i];
    }
    return r;
  }

  std::vector<std::vector<int64_t>> output_dims(const std::vector<std::vector<int64_t>>& dims,
                                                const std::vector<std::string>& dtypes) const {
    const std::vector<uintptr_t> none(dims.size(), 0);
    try {
      return device_exe().output_dims(refs(none, dims, dtypes, std::vector<bool>(dims.size(), false)));
    } catch (const Error& e) {
      throw InputFailure(e.what());
    }
  }

  // One run on device tensors into the caller's outputs, issued on `stream`.
  void run_device(const std::vector<uintptr_t>& ptrs, const std::vector<std::vector<int64_t>>& dims,
                  const std::vector<std::string>& dtypes, const std::vector<bool>& on_host,
                  const std::vector<uintptr_t>& outputs, uintptr_t stream) {
    const GpuExecutable& exe = device_exe();
    // Shapes and dtypes were checked by output_dims (tessel/__init__.py calls
    // it once per input signature): here a mismatch is a tessel.Error.
    std::vector<DeviceTensorRef> in = refs(ptrs, dims, dtypes, on_host);
    const std::vector<uint64_t> out(outputs.begin(), outputs.end());
    {
      nb::gil_scoped_release release;
      exe.run_device(in, out, reinterpret_cast<void*>(stream));
    }
    ++counters.runs;
  }
};

// Device memory handed to Python as a DLPack CUDA array (outputs for callers
// without an allocator of their own): freed when the array dies.
nb::object device_array(DType dtype, const std::vector<int64_t>& dims) {
  const nb::dlpack::dtype d = dlpack_of(dtype);
  int64_t bytes = dtype_storage_size(dtype);
  for (int64_t n : dims) bytes = checked_mul(bytes, n);
  auto* mem = new cuda::DeviceMemory(static_cast<size_t>(bytes));
  nb::capsule owner(mem, [](void* p) noexcept { delete static_cast<cuda::DeviceMemory*>(p); });
  std::vector<size_t> shape(dims.begin(), dims.end());
  return nb::ndarray<nb::array_api>(reinterpret_cast<void*>(mem->ptr()), shape.size(), shape.data(), owner, nullptr, d,
                                    nb::device::cuda::value, 0)
      .cast();
}

struct CompileArgs {
  std::string target = "cpu";
  std::string precision = "fp32";
  std::map<std::string, int64_t> dims;
  int threads = 0;
  std::string tuning_db;
  std::vector<std::string> knobs;
};

DriverOptions driver_options(const CompileArgs& a) {
  DriverOptions o;
  o.target = parse_target(a.target);
  o.precision = parse_precision(a.precision);
  o.dims = a.dims;
  o.threads = a.threads;
  o.tuning_db = a.tuning_db;
  for (const std::string& k : a.knobs) o.knobs.push_back(parse_knob(k));
  TS_CHECK(o.target != Target::Reference, "target 'reference' is the CLI's interpreter; the package compiles for "
                                          "'cpu' or 'cuda'");
  TS_CHECK(o.target == Target::Cuda || o.precision == Precision::FP32,
           "precision ", a.precision, " is for target 'cuda'; the CPU computes in fp32");
  check_options_supported(o);
  return o;
}

std::unique_ptr<PyExecutable> compile_model_for(std::unique_ptr<Model> m, const DriverOptions& o) {
  auto exe = std::make_unique<PyExecutable>();
  exe->target = target_name(o.target);
  if (o.target == Target::Cpu) {
    OwnedCpuCompile c = compile_owned_for_cpu(std::move(m), o);
    exe->model = c.model;
    exe->compiled = std::move(c.compiled);
    exe->cpu = std::move(c.exe);
    return exe;
  }
  compile_model(*m, o.dims, o);
  exe->model = std::move(m);
  exe->gpu = compile_for_cuda(*exe->model, o);
  return exe;
}

// Runs `body`, turning tessel's errors into CompileError with `where` first.
template <class F>
auto compiling(const std::string& where, F&& body) {
  try {
    return body();
  } catch (const Error& e) {
    throw CompileFailure(where.empty() ? std::string(e.what()) : where + ": " + e.what());
  }
}

std::unique_ptr<PyExecutable> compile_path(const std::string& path, const CompileArgs& a) {
  return compiling(path, [&] {
    const DriverOptions o = driver_options(a);
    if (is_artifact_file(path)) {
      TS_CHECK(o.target == Target::Cpu, "artifacts are CPU executables; load them with target 'cpu'");
      auto exe = std::make_unique<PyExecutable>();
      exe->cpu = load_artifact(path, o);
      exe->artifact_path = path;
      return exe;
    }
    return compile_model_for(load_model(path), o);
  });
}

std::unique_ptr<PyExecutable> compile_bytes(nb::bytes data, const CompileArgs& a) {
  std::string bytes(data.c_str(), data.size());
  return compiling("", [&] { return compile_model_for(load_model_bytes(bytes), driver_options(a)); });
}

// ---- graphs built from Python -------------------------------------------------------
// What frontends written in Python (the torch.compile backend) build tessel's
// graph IR with, node by node: values are handles (indices), attributes
// Python values. The model is checked and compiled like a loaded one.

Attribute to_attribute(const std::string& key, nb::handle v) {
  if (nb::isinstance<nb::bool_>(v) || nb::isinstance<nb::int_>(v)) return Attribute::of_int(nb::cast<int64_t>(v));
  if (nb::isinstance<nb::float_>(v)) return Attribute::of_float(nb::cast<float>(v));
  if (nb::isinstance<nb::str>(v)) return Attribute::of_string(nb::cast<std::string>(v));
  if (nb::isinstance<nb::list>(v) || nb::isinstance<nb::tuple>(v)) {
    nb::sequence seq = nb::borrow<nb::sequence>(v);
    bool floats = false, strings = false;
    for (nb::handle e : seq) {
      floats |= nb::isinstance<nb::float_>(e);
      strings |= nb::isinstance<nb::str>(e);
    }
    if (strings) return Attribute::of_strings(nb::cast<std::vector<std::string>>(v));
    if (floats) return Attribute::of_floats(nb::cast<std::vector<float>>(v));
    return Attribute::of_ints(nb::cast<std::vector<int64_t>>(v));  // an empty list too
  }
  Array a;
  if (nb::try_cast(v, a)) {
    Counters ignored;
    Tensor t = to_tensor(a, key, ignored);
    t.mutable_raw();  // own the bytes: the attribute outlives the call
    return Attribute::of_tensor(std::move(t));
  }
  throw CompileFailure(str_cat("attribute '", key, "': cannot use a ", nb::inst_name(v).c_str(), " as an attribute"));
}

class PyBuilder {
 public:
  explicit PyBuilder(int opset) : model_(std::make_unique<Model>()) {
    model_->opsets[""] = opset;
    b_ = std::make_unique<GraphBuilder>(*model_);
  }

  // Shape entries: ints, symbols ("batch") and expressions of symbols
  // ("2*s0", in the IR's dim syntax).
  int input(const std::string& name, const std::string& dtype, const std::vector<nb::object>& shape) {
    Shape dims;
    for (const nb::object& d : shape) {
      if (nb::isinstance<nb::str>(d)) {
        try {
          dims.push_back(Dim::parse(nb::cast<std::string>(d)));
        } catch (const Error& e) {
          throw CompileFailure(str_cat("input '", name, "': ", e.what()));
        }
      } else {
        dims.push_back(Dim(nb::cast<int64_t>(d)));
      }
    }
    return add(b_->input(name, parse_dtype_name(dtype), std::move(dims)));
  }

  // copy=false keeps the caller's array (alive as long as the model) instead
  // of copying it: frozen weights are then held once. The array must not
  // change afterwards; a pass that rewrites a constant copies it first.
  int constant(const Array& a, const std::string& name, bool copy) {
    Counters ignored;
    Tensor t = to_tensor(a, name.empty() ? "constant" : name, ignored);
    if (copy) t.mutable_raw();  // own the bytes: the caller may change or free its array
    return add(b_->constant(std::move(t), name));
  }

  std::vector<int> node(const std::string& op, const std::vector<int>& inputs, int num_outputs, const nb::dict& attrs,
                        const std::string& domain) {
    std::vector<Value*> in;
    for (int h : inputs) in.push_back(h < 0 ? nullptr : value(h));
    Attrs at;
    for (auto [k, v] : attrs) {
      const std::string key = nb::cast<std::string>(k);
      at[key] = to_attribute(key, v);
    }
    std::vector<int> out;
    for (Value* v : b_->ops(op, std::move(in), static_cast<size_t>(num_outputs), std::move(at), domain))
      out.push_back(add(v));
    return out;
  }

  // The graph outputs; `names` (optional) renames them, so that the
  // executable's outputs read like the caller's.
  void outputs(const std::vector<int>& handles, const std::vector<std::string>& names) {
    if (!names.empty() && names.size() != handles.size())
      throw CompileFailure(str_cat(handles.size(), " outputs but ", names.size(), " names"));
    for (size_t i = 0; i < handles.size(); ++i) {
      Value* v = value(handles[i]);
      if (!names.empty()) v->name = names[i];
      b_->output(v);
    }
  }

  std::string text() const { return print_model(*model_); }

  std::unique_ptr<PyExecutable> compile(const CompileArgs& a) {
    TS_CHECK(model_, "this builder's model was compiled already");
    return compiling("", [&] { return compile_model_for(std::move(model_), driver_options(a)); });
  }

 private:
  int add(Value* v) {
    values_.push_back(v);
    return static_cast<int>(values_.size() - 1);
  }
  Value* value(int h) const {
    if (h < 0 || static_cast<size_t>(h) >= values_.size()) throw CompileFailure(str_cat("no value with handle ", h));
    return values_[static_cast<size_t>(h)];
  }

  std::unique_ptr<Model> model_;
  std::unique_ptr<GraphBuilder> b_;
  std::vector<Value*> values_;
};

}  // namespace

}  // namespace tessel::py

NB_MODULE(_core, m) {
  using namespace tessel::py;
  namespace ts = tessel;
  m.doc() = "tessel's native module; use the `tessel` package (docs/python.md)";
  // Caches such as torch.compile's keep executables alive until the
  // interpreter is torn down, after the module's types: not a leak to report.
  nb::set_leak_warnings(false);

  g_error = PyErr_NewException("tessel.Error", PyExc_RuntimeError, nullptr);
  g_compile_error = PyErr_NewException("tessel.CompileError", g_error, nullptr);
  g_input_error = PyErr_NewException("tessel.InputError", g_error, nullptr);
  m.attr("Error") = nb::handle(g_error);
  m.attr("CompileError") = nb::handle(g_compile_error);
  m.attr("InputError") = nb::handle(g_input_error);
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const CompileFailure& e) {
      PyErr_SetString(g_compile_error, e.what());
    } catch (const InputFailure& e) {
      PyErr_SetString(g_input_error, e.what());
    } catch (const ts::Error& e) {
      PyErr_SetString(g_error, e.what());
    }
  });

  nb::class_<ValueInfo>(m, "ValueInfo")
      .def_ro("name", &ValueInfo::name)
      .def_ro("dtype", &ValueInfo::dtype)
      .def_ro("shape", &ValueInfo::shape)
      .def("__repr__", [](const ValueInfo& v) {
        std::string s = v.name + ": " + v.dtype + "[";
        for (size_t i = 0; i < v.shape.size(); ++i)
          s += (i ? "," : "") + nb::cast<std::string>(nb::str(v.shape[i]));
        return s + "]";
      });

  nb::class_<StepTime>(m, "StepTime")
      .def_ro("name", &StepTime::name)
      .def_ro("kind", &StepTime::kind)
      .def_ro("seconds", &StepTime::seconds)
      .def("__repr__", [](const StepTime& s) {
        return s.kind + " " + s.name + ": " + std::to_string(s.seconds * 1e6) + " us";
      });

  nb::class_<CompileArgs>(m, "CompileArgs")
      .def(nb::init<>())
      .def_rw("target", &CompileArgs::target)
      .def_rw("precision", &CompileArgs::precision)
      .def_rw("dims", &CompileArgs::dims)
      .def_rw("threads", &CompileArgs::threads)
      .def_rw("tuning_db", &CompileArgs::tuning_db)
      .def_rw("knobs", &CompileArgs::knobs);

  nb::class_<PyExecutable>(m, "Executable")
      .def_ro("target", &PyExecutable::target)
      .def_prop_ro("inputs", &PyExecutable::inputs)
      .def_prop_ro("outputs", &PyExecutable::outputs)
      .def_prop_ro("interpreter_ops", &PyExecutable::interpreter_ops)
      .def("run", &PyExecutable::run, nb::arg("arrays"), nb::arg("framework") = 0,
           "Runs the model on arrays in graph input order; outputs as numpy (0), torch (1) or DLPack (2) arrays.")
      .def("run_traced", &PyExecutable::run_traced, nb::arg("arrays"))
      .def("profile", &PyExecutable::profile, nb::arg("arrays"), nb::arg("warmup") = 3, nb::arg("iters") = 10)
      .def("save", &PyExecutable::save, nb::arg("path"))
      .def("output_dims", &PyExecutable::output_dims, nb::arg("dims"), nb::arg("dtypes"),
           "The outputs' dims for inputs of these dims and dtype names (CUDA executables).")
      .def("run_device", &PyExecutable::run_device, nb::arg("ptrs"), nb::arg("dims"), nb::arg("dtypes"),
           nb::arg("on_host"), nb::arg("outputs"), nb::arg("stream"),
           "Runs on device tensors (addresses) into the given output addresses, on CUstream `stream`; returns "
           "without waiting for the device.")
      .def("synchronize", [](const PyExecutable& e) {
            nb::gil_scoped_release release;
            e.device_exe().synchronize();
          },
          "Waits for the last device run; raises its failed check, if any.")
      .def("bound_addresses", [](const PyExecutable& e) {
            const std::vector<uint64_t> a = e.device_exe().bound_addresses();
            return std::vector<uintptr_t>(a.begin(), a.end());
          },
          "The device addresses the last run's kernels were given for each input and output (tests).")
      .def("stats", [](const PyExecutable& e) {
        nb::dict d;
        d["runs"] = e.counters.runs.load();
        d["inputs_borrowed"] = e.counters.borrowed.load();
        d["inputs_copied"] = e.counters.copied.load();
        return d;
      });

  nb::class_<PyBuilder>(m, "Builder", "Builds a model in tessel's graph IR (values are integer handles).")
      .def(nb::init<int>(), nb::arg("opset") = 17)
      .def("input", &PyBuilder::input, nb::arg("name"), nb::arg("dtype"), nb::arg("shape"))
      .def("constant", &PyBuilder::constant, nb::arg("array"), nb::arg("name") = "", nb::arg("copy") = true)
      .def("node", &PyBuilder::node, nb::arg("op"), nb::arg("inputs"), nb::arg("num_outputs") = 1,
           nb::arg("attrs") = nb::dict(), nb::arg("domain") = "")
      .def("outputs", &PyBuilder::outputs, nb::arg("handles"), nb::arg("names") = std::vector<std::string>())
      .def("text", &PyBuilder::text)
      .def("compile", &PyBuilder::compile, nb::arg("args"));

  m.def("compile_path", &compile_path, nb::arg("path"), nb::arg("args"));
  m.def("compile_bytes", &compile_bytes, nb::arg("data"), nb::arg("args"));
  m.def("dtype_names", &dtype_names);
  m.def("array_info", [](const Array& a) {
        const std::optional<ts::DType> dt = dtype_of(a.dtype());
        if (!dt) throw InputFailure("arrays of this dtype are not supported");
        if (!c_contiguous(a)) throw InputFailure("device arrays must be contiguous");
        std::vector<int64_t> shape(a.ndim());
        for (size_t i = 0; i < a.ndim(); ++i) shape[i] = static_cast<int64_t>(a.shape(i));
        return nb::make_tuple(reinterpret_cast<uintptr_t>(a.data()), shape, std::string(ts::dtype_name(*dt)),
                              a.device_type(), a.device_id());
      },
      nb::arg("array"), "A DLPack array's (address, shape, dtype name, DLPack device type, device id).");
  m.def("device_array", [](const std::string& dtype, const std::vector<int64_t>& dims) {
        return device_array(parse_dtype_name(dtype), dims);
      },
      nb::arg("dtype"), nb::arg("dims"), "An uninitialised CUDA array (DLPack) of device memory tessel owns.");
  m.def("is_artifact", &ts::is_artifact_file, nb::arg("path"));
  m.attr("__version__") = ts::kTesselVersion;
}
