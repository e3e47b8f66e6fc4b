#include "tessel/driver/session.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <set>

#include "tessel/driver/compiler.h"
#include "tessel/driver/cuda_compiler.h"
#include "tessel/driver/npy.h"
#include "tessel/driver/random_inputs.h"
#include "tessel/interp/interpreter.h"
#include "tessel/passes/pass_manager.h"
#include "tessel/support/error.h"

namespace tessel {

namespace {

std::ostream& log_stream(std::ostream* s) { return s ? *s : std::cerr; }

std::string input_names(const Graph& g) {
  std::string out;
  for (const Value* v : g.inputs) out += (out.empty() ? "" : ", ") + v->name;
  return out.empty() ? "(none)" : out;
}

const Value* find_input(const Graph& g, const std::string& name) {
  for (const Value* v : g.inputs)
    if (v->name == name) return v;
  return nullptr;
}

void collect_ops(const Graph& g, std::set<std::string>* out) {
  for (const auto& n : g.nodes()) {
    out->insert(n->domain.empty() ? n->op : n->domain + "." + n->op);
    for (const auto& [k, a] : n->attrs) {
      if (a.kind == Attribute::Kind::Graph && a.g) collect_ops(*a.g, out);
      if (a.kind == Attribute::Kind::Graphs)
        for (const auto& sg : a.graphs)
          if (sg) collect_ops(*sg, out);
    }
  }
}

}  // namespace

std::map<std::string, RtValue> read_input_files(const Graph& g,
                                                const std::vector<std::pair<std::string, std::string>>& files) {
  std::map<std::string, RtValue> out;
  for (const auto& [name, file] : files) {
    const Value* v = find_input(g, name);
    TS_CHECK(v, "--input ", name, ": the model has no input '", name, "' (its inputs: ", input_names(g), ")");
    TS_CHECK(!out.count(name), "--input ", name, " given twice");
    TS_CHECK(v->type.is_tensor(), "--input ", name, ": the input is not a tensor; .npy files hold tensors only");
    try {
      out.emplace(name, RtValue(read_npy_file(file, v->type.dtype)));
    } catch (const Error& e) {
      fail("--input ", name, "=", file, ": ", e.what());
    }
  }
  return out;
}

std::map<std::string, int64_t> bind_symbols(const Graph& g, const std::map<std::string, RtValue>& given,
                                            const std::map<std::string, int64_t>& cli_dims, std::ostream* notes) {
  std::map<std::string, int64_t> bound;
  std::map<std::string, std::string> origin;  // symbol -> input that bound it
  for (const Value* v : g.inputs) {
    auto it = given.find(v->name);
    if (it == given.end()) continue;
    auto before = bound;
    check_value_matches(it->second, v->type, "input '" + v->name + "'", &bound);
    for (const auto& [sym, val] : bound)
      if (!before.count(sym)) origin[sym] = v->name;
  }
  std::set<std::string> input_syms;
  for (const Value* v : g.inputs)
    if (v->type.has_shape())
      for (const Dim& d : *v->type.shape) d.collect_symbols(&input_syms);
  for (const auto& [sym, val] : cli_dims) {
    if (!input_syms.count(sym))
      log_stream(notes) << "note: --dim " << sym << " does not appear in the shapes of the model's inputs\n";
    auto it = bound.find(sym);
    if (it != bound.end()) {
      TS_CHECK(it->second == val, "--dim ", sym, "=", val, " conflicts with input '", origin[sym], "', whose shape has ",
               sym, "=", it->second);
      continue;
    }
    bound[sym] = val;
  }
  // Remaining symbols of inputs that get random values default to 1.
  for (const Value* v : g.inputs) {
    if (given.count(v->name) || !v->type.has_shape()) continue;
    std::set<std::string> syms;
    for (const Dim& d : *v->type.shape) d.collect_symbols(&syms);
    for (const std::string& s : syms) {
      if (bound.count(s)) continue;
      bound[s] = 1;
      log_stream(notes) << "note: symbol '" << s << "' of input '" << v->name
                        << "' is not bound by --input or --dim; using " << s << "=1\n";
    }
  }
  return bound;
}

PassOptions pipeline_options(const std::map<std::string, int64_t>& dims, const DriverOptions& o) {
  PassOptions po;
  po.disabled = o.disabled_passes;
  po.print_after = o.print_after;
  po.print_stream = o.print_stream;
  po.dims = dims;
  po.gpu = o.target == Target::Cuda;
  po.cpu = o.target == Target::Cpu;
  // The flash kernel takes half operands: fp32 attention keeps its ops.
  po.fuse_attention = po.gpu && cuda_flash_attention(o.knobs) && o.precision != Precision::FP32;
  // The blocked layout and Winograd over it are the CPU's defaults
  // (docs/layouts.md has the measurements); conv.winograd.on=1 asks for the
  // NCHW form as well, where 16 does not divide the channels.
  po.blocked_layout = po.cpu && knob_int(o.knobs, "conv.blocked", "on", 1) != 0;
  const int64_t winograd = knob_int(o.knobs, "conv.winograd", "on", -1);
  po.winograd = po.cpu && winograd != 0 && (po.blocked_layout || winograd == 1);
  po.winograd_nchw = winograd == 1;
  switch (o.precision) {
    case Precision::FP32: po.precision = DType::F32; break;
    case Precision::BF16: po.precision = DType::BF16; break;
    case Precision::FP16: po.precision = DType::F16; break;
  }
  return po;
}

void compile_model(Model& m, const std::map<std::string, int64_t>& dims, const DriverOptions& o) {
  run_pipeline(m, pipeline_options(dims, o));
}

std::vector<RtValue> assemble_inputs(const Graph& g, const std::map<std::string, RtValue>& given,
                                     const std::map<std::string, int64_t>& dims, uint64_t seed, std::ostream* notes) {
  std::vector<RtValue> out;
  std::vector<std::string> generated;
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    const Value* v = g.inputs[i];
    auto it = given.find(v->name);
    if (it != given.end()) {
      out.push_back(it->second);
      continue;
    }
    out.emplace_back(random_input(g, i, dims, seed));
    generated.push_back(v->name);
  }
  if (!generated.empty()) {
    std::string names;
    for (const auto& n : generated) names += (names.empty() ? "" : ", ") + n;
    log_stream(notes) << "note: random values (seed " << seed << ") for input" << (generated.size() > 1 ? "s " : " ")
                      << names << "\n";
  }
  return out;
}

void fold_shape_inputs(Model& m, const std::map<std::string, RtValue>& given, Target t) {
  if (t != Target::Cpu) return;
  std::map<std::string, Tensor> values;
  for (const auto& [name, v] : given)
    if (v.is_tensor()) values.emplace(name, v.tensor);
  bind_shape_inputs(m, values);
}

namespace {

// Runs a compiled executable (CPU or GPU) once, timing the run alone.
template <class Exe>
void run_compiled(const Exe& exe, double compile_s, const std::vector<RtValue>& inputs, ExecResult* r) {
  r->compile_s = compile_s;
  const auto t0 = std::chrono::steady_clock::now();
  r->outputs = exe.run(inputs);
  r->time_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  r->interpreter_ops = exe.interpreter_ops();
}

}  // namespace

ExecResult execute(const Model& m, const std::vector<RtValue>& inputs, Target t, int threads) {
  ExecResult r;
  DriverOptions o;
  o.threads = threads;
  switch (t) {
    case Target::Cuda: {
      std::unique_ptr<CudaCompiledModel> c = compile_for_cuda(m, o);
      run_compiled(*c->exe, c->compile_s, inputs, &r);
      break;
    }
    case Target::Reference: {
      Interpreter interp;
      const auto t0 = std::chrono::steady_clock::now();
      r.outputs = interp.run(*m.graph, inputs);
      r.time_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      std::set<std::string> ops;
      collect_ops(*m.graph, &ops);
      r.interpreter_ops.assign(ops.begin(), ops.end());
      break;
    }
    case Target::Cpu: {
      std::unique_ptr<CompiledModel> c = compile_for_cpu(m, o);
      run_compiled(*c->exe, c->compile_s, inputs, &r);
      break;
    }
  }
  return r;
}

std::string describe_value(const RtValue& v) {
  switch (v.kind) {
    case RtValue::Kind::Tensor:
      return str_cat(dtype_name(v.tensor.dtype()), dims_str(v.tensor.shape()));
    case RtValue::Kind::Sequence:
      return str_cat("seq<", v.seq.size(), " tensors>");
    case RtValue::Kind::None:
      return "none";
  }
  return "?";
}

std::string preview_values(const Tensor& t, int max_values) {
  auto item = [&](int64_t i) -> std::string {
    const DType dt = t.dtype();
    if (dt == DType::String) {
      const std::string& s = t.strings()[static_cast<size_t>(i)];
      return "\"" + (s.size() > 16 ? s.substr(0, 16) + "..." : s) + "\"";
    }
    if (dt == DType::Bool) return t.get_i64(i) ? "true" : "false";
    if (is_float(dt)) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.6g", t.get_f64(i));
      return buf;
    }
    if (is_unsigned_int(dt)) return std::to_string(t.get_u64(i));
    return std::to_string(t.get_i64(i));
  };
  const int64_t n = t.numel();
  std::string out = "[";
  if (n <= max_values) {
    for (int64_t i = 0; i < n; ++i) out += (i ? ", " : "") + item(i);
  } else {
    const int64_t head = max_values - max_values / 3;
    for (int64_t i = 0; i < head; ++i) out += (i ? ", " : "") + item(i);
    out += ", ...";
    for (int64_t i = n - max_values / 3; i < n; ++i) out += ", " + item(i);
  }
  return out + "]";
}

}  // namespace tessel
