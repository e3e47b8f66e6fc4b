#include "tessel/driver/bisect.h"

#include <filesystem>
#include <iostream>
#include <sstream>

#include "tessel/driver/compiler.h"
#include "tessel/driver/cuda_compiler.h"
#include "tessel/driver/model_loader.h"
#include "tessel/driver/npy.h"
#include "tessel/driver/session.h"
#include "tessel/interp/interpreter.h"
#include "tessel/ir/printer.h"
#include "tessel/loop/printer.h"
#include "tessel/support/cache_file.h"
#include "tessel/support/error.h"

namespace tessel {

int BisectReport::passes_checked() const {
  int n = 0;
  for (const PassCheck& p : passes) n += p.checked;
  return n;
}

Tolerance bisect_tolerance(const Tensor& expected, Precision precision) {
  if (precision == Precision::FP32) return scaled_tolerance(expected, 1e-3, 1e-4, 1e-5);
  return scaled_tolerance(expected, 5e-2, 2e-2);
}

namespace {

std::ostream& log_to(const DriverOptions& o) { return o.log ? *o.log : std::cerr; }

// "" when every output is within the tolerance, else a line per output that is not.
std::string compare_outputs(const Graph& g, const std::vector<RtValue>& got, const std::vector<RtValue>& want,
                            Precision precision) {
  if (got.size() != want.size()) return str_cat(got.size(), " outputs, expected ", want.size());
  std::string out;
  for (size_t i = 0; i < got.size(); ++i) {
    const Tolerance tol = want[i].is_tensor() ? bisect_tolerance(want[i].tensor, precision) : Tolerance{};
    const std::string why = compare_values(got[i], want[i], tol);
    if (why.empty()) continue;
    const std::string name = i < g.outputs.size() ? g.outputs[i]->name : str_cat("output_", i);
    out += str_cat(out.empty() ? "" : "; ", "output ", name, ": ", why);
  }
  return out;
}

// The graph's inputs in its order, by name: a pass may drop an input nothing reads.
std::vector<RtValue> inputs_for(const Graph& g, const std::map<std::string, RtValue>& by_name) {
  std::vector<RtValue> out;
  for (const Value* v : g.inputs) {
    auto it = by_name.find(v->name);
    TS_CHECK(it != by_name.end(), "input '", v->name, "' appeared during the pass pipeline");
    out.push_back(it->second);
  }
  return out;
}

// Stage 1: the model after each pass that changed it, interpreted and
// compared with the unoptimised model's outputs.
class PassStage {
 public:
  PassStage(Model& m, const std::vector<RtValue>& inputs, Precision precision, BisectReport* r)
      : m_(m), precision_(precision), r_(r) {
    TS_CHECK(inputs.size() == m.graph->inputs.size(), "the model takes ", m.graph->inputs.size(), " inputs, got ",
             inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) inputs_[m.graph->inputs[i]->name] = inputs[i];
    reference_ = Interpreter().run(*m.graph, inputs);
  }

  // The inputs of the model as it is now.
  std::vector<RtValue> inputs() const { return inputs_for(*m_.graph, inputs_); }

  void after(const std::string& pass, bool changed) {
    PassCheck c{pass, changed, false, ""};
    // Once a pass is named, later ones compare against a model already wrong.
    if (changed && !r_->bad_pass) {
      c.checked = true;
      c.mismatch = check();
      if (!c.mismatch.empty()) r_->bad_pass = r_->passes.size();
    }
    r_->passes.push_back(std::move(c));
  }

 private:
  std::string check() const {
    std::vector<RtValue> got;
    try {
      got = Interpreter().run(*m_.graph, inputs());
    } catch (const Error& e) {
      return str_cat("the interpreter cannot run the model: ", e.what());
    }
    return compare_outputs(*m_.graph, got, reference_, precision_);
  }

  Model& m_;
  Precision precision_;
  BisectReport* r_;
  std::map<std::string, RtValue> inputs_;
  std::vector<RtValue> reference_;
};

// Every value of the optimised model as the interpreter computes it.
std::map<const Value*, RtValue> interpret_all(const Graph& g, const std::vector<RtValue>& inputs) {
  std::map<const Value*, RtValue> values;
  for (size_t i = 0; i < inputs.size(); ++i) values[g.inputs[i]] = inputs[i];
  Interpreter interp;
  interp.on_node = [&](const Node& n, const std::vector<RtValue>& outs) {
    for (size_t i = 0; i < outs.size() && i < n.outputs.size(); ++i)
      if (n.outputs[i]) values[n.outputs[i]] = outs[i];
  };
  interp.run(g, inputs);
  return values;
}

// The model's groups and kernels as the target plans and lowers them.
CompiledModel plan_for_target(const Model& m, const DriverOptions& o) {
  if (o.target == Target::Cuda) return lower_for_cuda(m, lower_options(o));
  return lower_for_cpu(m, lower_options(o));
}

struct StandaloneRun {
  std::vector<RtValue> outputs;
  std::vector<std::string> kernel_hashes;  // of the kernels the standalone model compiled to
  std::string error;                       // the run failed (a kernel's assert, ...)
};

// Compiles the standalone group for the target and runs it. Compile errors
// propagate: the whole model would not compile either.
StandaloneRun compile_and_run(const Model& sub, const std::vector<RtValue>& inputs, const DriverOptions& o) {
  StandaloneRun r;
  auto run = [&](const auto& exe) {
    try {
      r.outputs = exe.run(inputs);
    } catch (const Error& e) {
      r.error = e.what();
    }
  };
  if (o.target == Target::Cuda) {
    std::unique_ptr<CudaCompiledModel> c = compile_for_cuda(sub, o);
    for (const LoweredGroup& lg : c->lowered.lowered) r.kernel_hashes.push_back(kernel_hash(lg.kernel));
    run(*c->exe);
  } else {
    std::unique_ptr<CompiledModel> c = compile_for_cpu(sub, o);
    for (const LoweredGroup& lg : c->lowered) r.kernel_hashes.push_back(kernel_hash(lg.kernel));
    run(*c->exe);
  }
  return r;
}

const LoweredGroup& lowered_of(const CompiledModel& c, const std::string& name) {
  for (const LoweredGroup& lg : c.lowered)
    if (lg.kernel.name == name) return lg;
  fail("internal error: group ", name, " has no kernel");
}

const RtValue& value_of(const Value* v, const std::map<const Value*, RtValue>& values) {
  auto it = values.find(v);
  TS_CHECK(it != values.end(), "the interpreter gave no value for %", v->name);
  return it->second;
}

std::vector<RtValue> values_of(const std::vector<const Value*>& vs, const std::map<const Value*, RtValue>& values) {
  std::vector<RtValue> out;
  for (const Value* v : vs) out.push_back(value_of(v, values));
  return out;
}

// Stage 2 for one group: its standalone model compiled, against the interpreter.
GroupCheck check_group(const Model& m, const FusionGroup& g, const LoweredGroup& lowered,
                       const std::map<const Value*, RtValue>& values, const DriverOptions& o) {
  GroupCheck c{g.name, "", ""};
  const GroupModel sub = group_model(m, g);
  const StandaloneRun run = compile_and_run(*sub.model, values_of(sub.inputs, values), o);
  const std::string hash = kernel_hash(lowered.kernel);
  if (run.kernel_hashes.size() != 1 || run.kernel_hashes[0] != hash)
    c.note = str_cat("standalone, the group compiles to ", run.kernel_hashes.size(),
                     " kernel(s) unlike the model's; checked those");
  if (!run.error.empty()) {
    c.mismatch = str_cat("the compiled group fails: ", run.error);
    return c;
  }
  c.mismatch = compare_outputs(*sub.model->graph, run.outputs, {value_of(sub.output, values)}, o.precision);
  return c;
}

// A command-line word for a POSIX shell.
std::string shell_word(const std::string& s) {
  const bool plain = !s.empty() && s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                                       "0123456789_-./=:,+@") == std::string::npos;
  if (plain) return s;
  std::string q = "'";
  for (char ch : s) q += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return q + "'";
}

const Tensor& tensor_of(const RtValue& v, const std::string& what) {
  TS_CHECK(v.is_tensor(), "--emit-repro: ", what, " is not a tensor, which an .npy file cannot hold");
  return v.tensor;
}

// The standalone group at `path` (.tir, constants in full), its inputs and
// the interpreter's output beside it as .npy files, and the command that
// shows the mismatch again.
void write_repro(const std::string& path, const GroupModel& sub, const std::map<const Value*, RtValue>& values,
                 const DriverOptions& o, BisectReport* r) {
  namespace fs = std::filesystem;
  const fs::path p(path);
  const std::string stem = (p.parent_path() / p.stem()).string();
  write_file_atomic(path, print_model(*sub.model));
  r->repro_files.push_back(path);
  std::string cmd = str_cat("tessel bisect ", shell_word(path));
  if (o.target == Target::Cuda) cmd += " --target cuda";
  for (size_t i = 0; i < sub.inputs.size(); ++i) {
    const std::string file = str_cat(stem, ".input_", i, ".npy");
    write_npy_file(file, tensor_of(value_of(sub.inputs[i], values), "input %" + sub.inputs[i]->name));
    r->repro_files.push_back(file);
    cmd += " --input " + shell_word(sub.inputs[i]->name + "=" + file);
  }
  const std::string expected = stem + ".expected.npy";
  write_npy_file(expected, tensor_of(value_of(sub.output, values), "the output"));
  r->repro_files.push_back(expected);
  r->repro_command = cmd;
}

void check_target(const DriverOptions& o) {
  TS_CHECK(o.target == Target::Cpu || o.target == Target::Cuda,
           "bisect compares compiled kernels with the interpreter: --target cpu or cuda");
  if (o.target == Target::Cuda) check_cuda_usable();
}

// Stage 2: the compiled groups in execution order, up to the first bad one.
void check_groups(const Model& m, const std::vector<RtValue>& inputs, const BisectOptions& o, BisectReport* r) {
  const CompiledModel plan = plan_for_target(m, o.driver);
  const std::map<const Value*, RtValue> values = interpret_all(*m.graph, inputs);
  for (const FusionGroup& g : plan.plan.groups) {
    if (!g.compiled) continue;
    const LoweredGroup& lowered = lowered_of(plan, g.name);
    r->groups.push_back(check_group(m, g, lowered, values, o.driver));
    if (r->groups.back().mismatch.empty()) continue;
    r->bad_group = r->groups.size() - 1;
    const GroupModel sub = group_model(m, g);
    PrintOptions po;
    po.elide_large_constants = true;
    r->group_ir = print_model(*sub.model, po);
    r->loop_ir = loop::print(lowered.kernel);
    if (!o.emit_repro.empty()) write_repro(o.emit_repro, sub, values, o.driver, r);
    return;
  }
}

}  // namespace

GroupModel group_model(const Model& m, const FusionGroup& g) {
  GroupModel out;
  out.model = std::make_unique<Model>();
  out.model->ir_version = m.ir_version;
  out.model->opsets = m.opsets;
  out.model->producer_name = "tessel bisect";
  Graph& sub = *out.model->graph;
  sub.name = g.name;
  std::map<const Value*, Value*> copy;
  auto outside = [&](const Value* v) -> Value* {
    if (v->is_constant()) return sub.add_initializer(v->name, *v->constant);
    out.inputs.push_back(v);
    return sub.add_input(v->name, v->type);
  };
  for (const Node* n : g.nodes) {
    std::vector<Value*> ins, outs;
    for (const Value* v : n->inputs) {
      if (v && !copy.count(v)) copy[v] = outside(v);
      ins.push_back(v ? copy[v] : nullptr);
    }
    for (const Value* v : n->outputs) {
      if (v) copy[v] = sub.add_value(v->name, v->type);
      outs.push_back(v ? copy[v] : nullptr);
    }
    Node* c = sub.add_node_with_outputs(n->op, ins, outs, n->attrs, n->domain);
    c->name = n->name;
  }
  out.output = g.root->outputs[g.root_output];
  sub.outputs.push_back(copy.at(out.output));
  return out;
}

BisectReport bisect_model(Model& m, const std::vector<RtValue>& inputs, const std::map<std::string, int64_t>& dims,
                          const BisectOptions& o) {
  check_target(o.driver);
  BisectReport r;
  r.target = target_name(o.driver.target);
  PassStage stage(m, inputs, o.driver.precision, &r);
  PassOptions po = pipeline_options(dims, o.driver);
  po.after_pass = [&](const std::string& pass, bool changed) { stage.after(pass, changed); };
  run_pipeline(m, po);
  log_to(o.driver) << "bisect: " << r.passes.size() << " passes run, " << r.passes_checked()
                   << " interpreted; checking the compiled groups\n";
  check_groups(m, stage.inputs(), o, &r);
  return r;
}

BisectReport bisect_file(const std::string& path, const std::vector<std::string>& input_specs,
                         const BisectOptions& o) {
  check_target(o.driver);  // before the notes about the inputs
  std::vector<std::pair<std::string, std::string>> files;
  for (const std::string& spec : input_specs) files.push_back(parse_input_binding(spec));
  std::unique_ptr<Model> m = load_model(path);
  const auto given = read_input_files(*m->graph, files);
  const auto dims = bind_symbols(*m->graph, given, o.driver.dims, o.driver.log ? o.driver.log : &std::cerr);
  fold_shape_inputs(*m, given, o.driver.target);
  const auto inputs = assemble_inputs(*m->graph, given, dims, o.driver.seed, o.driver.log ? o.driver.log : &std::cerr);
  return bisect_model(*m, inputs, dims, o);
}

namespace {

void print_passes(const BisectReport& r, std::ostream& os) {
  os << "passes (each that changed the model, interpreted against the unoptimised model):\n";
  for (size_t i = 0; i < r.passes.size(); ++i) {
    const PassCheck& p = r.passes[i];
    const char* status = !p.changed ? "unchanged" : !p.checked ? "not checked" : p.mismatch.empty() ? "ok" : "MISMATCH";
    os << "  " << i + 1 << ". " << p.pass << ": " << status << "\n";
  }
}

void print_bad_group(const BisectReport& r, std::ostream& os) {
  const GroupCheck& g = r.groups[*r.bad_group];
  os << "first bad kernel: " << g.group << " (compiled group " << *r.bad_group + 1 << ", target " << r.target
     << "): " << g.mismatch << "\n"
     << "graph IR of " << g.group << ":\n" << r.group_ir << "loop IR of " << g.group << ":\n" << r.loop_ir;
  if (r.repro_files.empty()) return;
  os << "reproducer:";
  for (const std::string& f : r.repro_files) os << " " << f;
  os << "\nreproduce with: " << r.repro_command << "\n";
}

}  // namespace

std::string bisect_report_text(const BisectReport& r) {
  std::ostringstream os;
  print_passes(r, os);
  for (const GroupCheck& g : r.groups)
    if (!g.note.empty()) os << "note: " << g.group << ": " << g.note << "\n";
  if (r.bad_pass) {
    const PassCheck& p = r.passes[*r.bad_pass];
    os << "first bad pass: " << p.pass << " (step " << *r.bad_pass + 1 << "): " << p.mismatch << "\n";
  }
  if (r.bad_group) print_bad_group(r, os);
  else os << "kernels: " << r.groups.size() << " compiled groups, each within the tolerance of the interpreter\n";
  if (r.clean())
    os << "clean: " << r.passes.size() << " passes (" << r.passes_checked() << " interpreted), " << r.groups.size()
       << " groups checked\n";
  return os.str();
}

}  // namespace tessel
