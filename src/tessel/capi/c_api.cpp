// The C API (include/tessel/tessel.h) over the runtime's artifact loaders,
// Executable (CPU artifacts) and GpuExecutable (CUDA artifacts). Compiled
// only into libtessel_runtime (the shared library a deployed program links),
// whose version script exports the tessel_* functions alone. Every entry point catches everything: no exception
// crosses into C.
#include "tessel/tessel.h"

#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <vector>

#include "tessel/interp/interpreter.h"
#include "tessel/runtime/artifact_loader.h"
#include "tessel/runtime/cuda/gpu_artifact.h"
#include "tessel/runtime/executable.h"
#include "tessel/support/error.h"

struct tessel_model {
  struct Info {
    std::string name;
    tessel_dtype dtype = TESSEL_DTYPE_UNDEFINED;
    int64_t rank = -1;
    std::vector<int64_t> dims;
    std::vector<std::string> names;         // a symbolic dim's text, "" for fixed ones
    std::vector<const char*> name_ptrs;     // into `names`, NULL for fixed dims
    const tessel::Type* type = nullptr;     // declared (in the executable's model)
  };
  // Exactly one is set: a CPU artifact's executable or a CUDA artifact's.
  std::unique_ptr<tessel::Executable> exe;
  std::unique_ptr<tessel::GpuExecutable> gpu;
  std::vector<Info> inputs, outputs;
  const tessel::Model& model() const { return exe ? exe->model() : gpu->model(); }
  std::vector<tessel::RtValue> run(const std::vector<tessel::RtValue>& in) const {
    return exe ? exe->run(in) : gpu->run(in);
  }
};

namespace {

using tessel::DType;

thread_local std::string last_error;

tessel_status failure(tessel_status s, const std::string& what) {
  last_error = what;
  return s;
}

// The dtypes of the C enum (all but the ONNX ones tessel's C API does not carry).
bool c_dtype(DType d) {
  switch (d) {
    case DType::F32: case DType::U8: case DType::I8: case DType::U16: case DType::I16: case DType::I32:
    case DType::I64: case DType::Bool: case DType::F16: case DType::F64: case DType::U32: case DType::U64:
    case DType::BF16:
      return true;
    default:
      return false;
  }
}

// The int a C caller stored in an enum field or argument: a C enum holds any
// int, but loading a value outside the enumerators through the C++ enum type
// is undefined (UBSan's enum check), so the bytes are read as an int.
template <class E>
int c_enum_value(const E& field) {
  static_assert(sizeof(E) == sizeof(int));
  int v;
  std::memcpy(&v, &field, sizeof v);
  return v;
}

// The caller's dtype as a DType, when it is one of the C enum's.
std::optional<DType> c_dtype_of(const tessel_dtype& field) {
  const int v = c_enum_value(field);
  if (v < 0 || v > std::numeric_limits<uint8_t>::max() || !c_dtype(static_cast<DType>(v))) return std::nullopt;
  return static_cast<DType>(v);
}

tessel_model::Info info_of(const tessel::Value& v) {
  tessel_model::Info info;
  info.name = v.name;
  info.type = &v.type;
  info.dtype = c_dtype(v.type.dtype) ? static_cast<tessel_dtype>(v.type.dtype) : TESSEL_DTYPE_UNDEFINED;
  if (v.type.has_shape()) {
    info.rank = static_cast<int64_t>(v.type.shape->size());
    for (const tessel::Dim& d : *v.type.shape) {
      info.dims.push_back(d.is_const() ? d.value() : -1);
      info.names.push_back(d.is_const() ? "" : d.str());
    }
    for (size_t i = 0; i < info.names.size(); ++i)
      info.name_ptrs.push_back(info.dims[i] >= 0 ? nullptr : info.names[i].c_str());
  }
  return info;
}

void fill(const tessel_model::Info& i, tessel_value_info* out) {
  out->name = i.name.c_str();
  out->dtype = i.dtype;
  out->rank = i.rank;
  out->dims = i.dims.empty() ? nullptr : i.dims.data();
  out->dim_names = i.name_ptrs.empty() ? nullptr : i.name_ptrs.data();
}

// Runs `body`, turning every exception into a status and a message.
template <class F>
tessel_status guarded(tessel_status on_error, F&& body) {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return failure(TESSEL_ERROR_OUT_OF_MEMORY, "out of memory");
  } catch (const std::exception& e) {
    return failure(on_error, e.what());
  } catch (...) {
    return failure(on_error, "unknown error");
  }
}

enum class Data { None, Host, Device };

// Checks one input against its declared type and binds its symbols; the
// tensor over the caller's memory (no copy). Data::None looks at the shape
// only; Data::Device checks the size and returns an empty tensor (the data
// is not host memory).
tessel::Tensor input_tensor(const tessel_model::Info& info, const tessel_tensor& t, size_t index,
                            std::map<std::string, int64_t>& bound, Data data = Data::Host) {
  const std::string which = "input " + std::to_string(index) + " ('" + info.name + "')";
  const std::optional<DType> dtype = c_dtype_of(t.dtype);
  TS_CHECK(dtype.has_value(), which, ": unknown dtype ", c_enum_value(t.dtype));
  TS_CHECK(t.rank <= TESSEL_MAX_RANK, which, ": rank ", t.rank, " over ", TESSEL_MAX_RANK);
  TS_CHECK(t.rank == 0 || t.shape, which, ": no shape array");
  std::vector<int64_t> shape(t.shape, t.shape + t.rank);
  int64_t bytes = tessel::dtype_storage_size(*dtype);
  for (int64_t d : shape) {
    TS_CHECK(d >= 0, which, ": negative dim ", d);
    bytes = tessel::checked_mul(bytes, d);
  }
  // The interpreter's check: dtype, rank, fixed dims, symbols bound consistently.
  tessel::check_dims_match(*dtype, shape, *info.type, which, &bound);
  if (data == Data::None) return {};
  TS_CHECK(uint64_t(bytes) == t.nbytes, which, ": nbytes ", t.nbytes, ", its shape and dtype make ", bytes);
  TS_CHECK(bytes == 0 || t.data, which, ": no data");
  if (data == Data::Device) return {};
  return tessel::Tensor::borrow(*dtype, std::move(shape), t.data, nullptr);
}

// Writes a result's shape into the caller's output and checks that its
// buffer takes `nbytes` of `dtype`; false (with the message) when not.
bool fit_output(DType dtype, const std::vector<int64_t>& shape, uint64_t nbytes, tessel_tensor& out, size_t index,
                std::string& why) {
  const std::string which = "output " + std::to_string(index);
  if (shape.size() > TESSEL_MAX_RANK) {
    why = which + ": rank " + std::to_string(shape.size()) + " over TESSEL_MAX_RANK";
    return false;
  }
  out.rank = shape.size();
  for (size_t d = 0; d < shape.size(); ++d) out.shape[d] = shape[d];
  if (const std::optional<DType> have = c_dtype_of(out.dtype); have != dtype) {
    why = which + ": buffer dtype " +
          (have ? std::string(tessel::dtype_name(*have)) : "unknown (" + std::to_string(c_enum_value(out.dtype)) + ")") +
          ", the result is " + std::string(tessel::dtype_name(dtype));
    return false;
  }
  if (out.nbytes < nbytes) {
    why = which + ": buffer of " + std::to_string(out.nbytes) + " bytes, the result needs " + std::to_string(nbytes);
    return false;
  }
  return true;
}

// Writes one result into the caller's output; false (with the message) when
// its buffer or dtype does not fit, after writing the shape.
bool write_output(const tessel::Tensor& r, tessel_tensor& out, size_t index, std::string& why) {
  if (!fit_output(r.dtype(), r.shape(), r.nbytes(), out, index, why)) return false;
  if (r.nbytes() > 0) std::memcpy(out.data, r.raw(), r.nbytes());
  return true;
}

tessel_status value_info(const tessel_model* m, size_t index, tessel_value_info* info, bool input) {
  if (!m || !info) return failure(TESSEL_ERROR_INVALID_ARGUMENT, "tessel_*_info: null model or info");
  const auto& list = input ? m->inputs : m->outputs;
  if (index >= list.size())
    return failure(TESSEL_ERROR_INVALID_ARGUMENT, std::string(input ? "input" : "output") + " index " +
                                                      std::to_string(index) + " of " + std::to_string(list.size()));
  fill(list[index], info);
  return TESSEL_OK;
}

// As many inputs and outputs as the model has, each output with its shape
// and data arrays (TESSEL_OK), else a status naming `fn`.
tessel_status check_arguments(const tessel_model& m, const char* fn, const tessel_tensor* inputs, size_t num_inputs,
                              const tessel_tensor* outputs, size_t num_outputs) {
  if (num_inputs != m.inputs.size() || (num_inputs > 0 && !inputs))
    return failure(TESSEL_ERROR_INPUT, std::string(fn) + ": the model takes " + std::to_string(m.inputs.size()) +
                                           " inputs, got " + std::to_string(num_inputs));
  if (num_outputs != m.outputs.size() || (num_outputs > 0 && !outputs))
    return failure(TESSEL_ERROR_OUTPUT, std::string(fn) + ": the model has " + std::to_string(m.outputs.size()) +
                                            " outputs, got room for " + std::to_string(num_outputs));
  for (size_t i = 0; i < num_outputs; ++i)
    if (!outputs[i].shape || (outputs[i].nbytes > 0 && !outputs[i].data))
      return failure(TESSEL_ERROR_OUTPUT,
                     std::string(fn) + ": output " + std::to_string(i) + " has no shape or data array");
  return TESSEL_OK;
}

}  // namespace

extern "C" {

uint32_t tessel_api_version(void) { return TESSEL_C_API_VERSION; }
const char* tessel_version(void) { return TESSEL_VERSION; }
const char* tessel_last_error(void) { return last_error.c_str(); }

const char* tessel_status_name(tessel_status s) {
  switch (s) {
    case TESSEL_OK: return "ok";
    case TESSEL_ERROR_INVALID_ARGUMENT: return "invalid argument";
    case TESSEL_ERROR_LOAD: return "load error";
    case TESSEL_ERROR_INPUT: return "input error";
    case TESSEL_ERROR_OUTPUT: return "output error";
    case TESSEL_ERROR_RUN: return "run error";
    case TESSEL_ERROR_UNSUPPORTED: return "unsupported";
    case TESSEL_ERROR_OUT_OF_MEMORY: return "out of memory";
  }
  return "unknown status";
}

size_t tessel_dtype_size(tessel_dtype d) {
  const std::optional<DType> dtype = c_dtype_of(d);
  return dtype ? static_cast<size_t>(tessel::dtype_storage_size(*dtype)) : 0;
}

tessel_status tessel_load(const char* path, const tessel_load_options* options, tessel_model** model) {
  if (!path || !model) return failure(TESSEL_ERROR_INVALID_ARGUMENT, "tessel_load: null path or model pointer");
  *model = nullptr;
  tessel::ExecutableOptions eo;
  bool want_cuda = false;
  if (options) {
    if (options->struct_size < sizeof(tessel_load_options))
      return failure(TESSEL_ERROR_INVALID_ARGUMENT, "tessel_load: options.struct_size is not sizeof(tessel_load_options)");
    const int device = c_enum_value(options->device);
    if ((device != TESSEL_DEVICE_CPU && device != TESSEL_DEVICE_CUDA) || options->threads < 0)
      return failure(TESSEL_ERROR_INVALID_ARGUMENT, "tessel_load: bad device or threads");
    eo.threads = options->threads;
    want_cuda = device == TESSEL_DEVICE_CUDA;
  }
  return guarded(TESSEL_ERROR_LOAD, [&] {
    const std::string p(path);
    auto m = std::make_unique<tessel_model>();
    try {
      tessel::ArtifactContents a = tessel::read_artifact(p);
      TS_CHECK(!want_cuda || !a.cuda.empty(), "is an artifact for ", tessel::artifact_target(a),
               ", not for TESSEL_DEVICE_CUDA (compile it with --target cuda)");
      if (a.cuda.empty()) {
        m->exe = tessel::load_artifact(a, eo, p);  // read and verified once
      } else {
        m->gpu = tessel::load_cuda_artifact(a, {}, p);
      }
    } catch (const tessel::Error& e) {
      const bool artifact = tessel::is_artifact_file(p);
      return failure(TESSEL_ERROR_LOAD, p + ": " + e.what() +
                                            (artifact ? "" : " (the runtime loads artifacts: `tessel compile MODEL -o FILE` makes one)"));
    }
    const tessel::Graph& g = *m->model().graph;
    for (const tessel::Value* v : g.inputs) m->inputs.push_back(info_of(*v));
    for (const tessel::Value* v : g.outputs) m->outputs.push_back(info_of(*v));
    *model = m.release();
    return TESSEL_OK;
  });
}

void tessel_free(tessel_model* model) { delete model; }

size_t tessel_num_inputs(const tessel_model* model) { return model ? model->inputs.size() : 0; }
size_t tessel_num_outputs(const tessel_model* model) { return model ? model->outputs.size() : 0; }

tessel_status tessel_input_info(const tessel_model* model, size_t index, tessel_value_info* info) {
  return value_info(model, index, info, true);
}

tessel_status tessel_output_info(const tessel_model* model, size_t index, tessel_value_info* info) {
  return value_info(model, index, info, false);
}

tessel_status tessel_run(const tessel_model* model, const tessel_tensor* inputs, size_t num_inputs,
                         tessel_tensor* outputs, size_t num_outputs) {
  if (!model) return failure(TESSEL_ERROR_INVALID_ARGUMENT, "tessel_run: null model");
  if (const tessel_status s = check_arguments(*model, "tessel_run", inputs, num_inputs, outputs, num_outputs);
      s != TESSEL_OK)
    return s;
  std::vector<tessel::RtValue> in;
  tessel_status s = guarded(TESSEL_ERROR_INPUT, [&] {
    std::map<std::string, int64_t> bound;
    for (size_t i = 0; i < num_inputs; ++i) in.emplace_back(input_tensor(model->inputs[i], inputs[i], i, bound));
    return TESSEL_OK;
  });
  if (s != TESSEL_OK) return s;
  std::vector<tessel::RtValue> results;
  s = guarded(TESSEL_ERROR_RUN, [&] {
    results = model->run(in);
    return TESSEL_OK;
  });
  if (s != TESSEL_OK) return s;
  std::string why;
  for (size_t i = 0; i < num_outputs; ++i) {
    if (results[i].kind != tessel::RtValue::Kind::Tensor)
      return failure(TESSEL_ERROR_UNSUPPORTED, "output " + std::to_string(i) + " is a sequence or none, which the C API does not carry");
    std::string w;
    if (!write_output(results[i].tensor, outputs[i], i, w) && why.empty()) why = w;
  }
  return why.empty() ? TESSEL_OK : failure(TESSEL_ERROR_OUTPUT, why);
}

tessel_device tessel_model_device(const tessel_model* model) {
  return model && model->gpu ? TESSEL_DEVICE_CUDA : TESSEL_DEVICE_CPU;
}

tessel_status tessel_run_device(const tessel_model* model, const tessel_tensor* inputs, size_t num_inputs,
                                tessel_tensor* outputs, size_t num_outputs, void* stream) {
  if (!model) return failure(TESSEL_ERROR_INVALID_ARGUMENT, "tessel_run_device: null model");
  if (!model->gpu) return failure(TESSEL_ERROR_UNSUPPORTED, "tessel_run_device: a CPU model (use tessel_run)");
  if (const tessel_status s = check_arguments(*model, "tessel_run_device", inputs, num_inputs, outputs, num_outputs);
      s != TESSEL_OK)
    return s;
  std::vector<tessel::DeviceTensorRef> refs;
  tessel_status s = guarded(TESSEL_ERROR_INPUT, [&] {
    std::map<std::string, int64_t> bound;
    for (size_t i = 0; i < num_inputs; ++i) {
      input_tensor(model->inputs[i], inputs[i], i, bound, Data::Device);
      tessel::DeviceTensorRef r;
      r.dtype = *c_dtype_of(inputs[i].dtype);  // input_tensor checked it
      r.dims.assign(inputs[i].shape, inputs[i].shape + inputs[i].rank);
      r.device = reinterpret_cast<uint64_t>(inputs[i].data);
      refs.push_back(std::move(r));
    }
    return TESSEL_OK;
  });
  if (s != TESSEL_OK) return s;
  std::vector<std::vector<int64_t>> dims;
  s = guarded(TESSEL_ERROR_RUN, [&] {
    dims = model->gpu->output_dims(refs);
    return TESSEL_OK;
  });
  if (s != TESSEL_OK) return s;
  std::vector<uint64_t> out_ptrs;
  std::string why;
  s = guarded(TESSEL_ERROR_OUTPUT, [&] {
    for (size_t i = 0; i < num_outputs; ++i) {
      const DType dtype = model->outputs[i].type->dtype;
      int64_t bytes = tessel::dtype_storage_size(dtype);
      for (int64_t d : dims[i]) bytes = tessel::checked_mul(bytes, d);
      std::string w;
      if (!fit_output(dtype, dims[i], uint64_t(bytes), outputs[i], i, w) && why.empty()) why = w;
      out_ptrs.push_back(reinterpret_cast<uint64_t>(outputs[i].data));
    }
    return TESSEL_OK;
  });
  if (s != TESSEL_OK) return s;
  if (!why.empty()) return failure(TESSEL_ERROR_OUTPUT, why);
  return guarded(TESSEL_ERROR_RUN, [&] {
    model->gpu->run_device(refs, out_ptrs, stream);
    return TESSEL_OK;
  });
}

tessel_status tessel_synchronize(const tessel_model* model) {
  if (!model) return failure(TESSEL_ERROR_INVALID_ARGUMENT, "tessel_synchronize: null model");
  if (!model->gpu) return TESSEL_OK;
  return guarded(TESSEL_ERROR_RUN, [&] {
    model->gpu->synchronize();
    return TESSEL_OK;
  });
}

tessel_status tessel_output_shape(const tessel_model* model, const tessel_tensor* inputs, size_t num_inputs,
                                  size_t index, int64_t* shape, size_t* rank) {
  if (!model || !shape || !rank || index >= model->outputs.size())
    return failure(TESSEL_ERROR_INVALID_ARGUMENT, "tessel_output_shape: null argument or output index out of range");
  if (num_inputs != model->inputs.size() || (num_inputs > 0 && !inputs))
    return failure(TESSEL_ERROR_INPUT, "tessel_output_shape: the model takes " + std::to_string(model->inputs.size()) +
                                           " inputs, got " + std::to_string(num_inputs));
  return guarded(TESSEL_ERROR_INPUT, [&] {
    std::map<std::string, int64_t> bound;
    for (size_t i = 0; i < num_inputs; ++i) input_tensor(model->inputs[i], inputs[i], i, bound, Data::None);
    const tessel_model::Info& out = model->outputs[index];
    if (out.rank < 0 || out.rank > TESSEL_MAX_RANK)
      return failure(TESSEL_ERROR_UNSUPPORTED, "output " + std::to_string(index) + " has no declared rank");
    const tessel::Shape& declared = *out.type->shape;
    for (size_t d = 0; d < declared.size(); ++d) {
      const std::optional<int64_t> v = declared[d].eval(bound);
      if (!v) return failure(TESSEL_ERROR_UNSUPPORTED, "output " + std::to_string(index) + " dim " + std::to_string(d) +
                                                           " ('" + out.names[d] + "') is not a function of the inputs' dims");
      shape[d] = *v;
    }
    *rank = declared.size();
    return TESSEL_OK;
  });
}

}  // extern "C"
