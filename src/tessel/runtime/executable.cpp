#include "tessel/runtime/executable.h"

#include <atomic>
#include <set>

#include "tessel/interp/interpreter.h"
#include "tessel/support/error.h"

namespace tessel {

namespace {

void add_reads(const Node& n, std::vector<const Value*>* out) {
  for (const Value* v : n.inputs)
    if (v) out->push_back(v);
  for (const auto& [name, a] : n.attrs) {
    std::vector<const Graph*> gs;
    if (a.kind == Attribute::Kind::Graph && a.g) gs.push_back(a.g.get());
    for (const auto& sg : a.graphs) gs.push_back(sg.get());
    for (const Graph* sg : gs) {
      for (const Value* v : sg->outputs) out->push_back(v);
      for (const auto& inner : sg->nodes()) add_reads(*inner, out);
    }
  }
}

std::vector<const Value*> step_reads(const Step& s) {
  std::vector<const Value*> r;
  if (s.kernel)
    r.assign(s.kernel->params.begin(), s.kernel->params.begin() + static_cast<long>(s.kernel->num_inputs));
  else
    add_reads(*s.interp, &r);
  return r;
}

std::vector<const Value*> step_writes(const Step& s) {
  if (s.kernel) return {s.kernel->params.back()};
  std::vector<const Value*> w;
  for (const Value* v : s.interp->outputs)
    if (v) w.push_back(v);
  return w;
}

std::string qualified_op(const Node& n) { return n.domain.empty() ? n.op : n.domain + "." + n.op; }

}  // namespace

Executable::Executable(const Model& model, std::vector<Step> steps, std::shared_ptr<const void> code, int threads)
    : model_(model), steps_(std::move(steps)), code_(std::move(code)),
      pool_(std::make_unique<ThreadPool>(threads > 0 ? threads : ThreadPool::default_threads())) {
  const Graph& g = *model_.graph;
  auto ensure = [&](const Value* v) { slots_.emplace(v, slots_.size()); };
  for (const Value* v : g.inputs) ensure(v);
  std::map<const Value*, size_t> last_read;
  for (size_t i = 0; i < steps_.size(); ++i) {
    for (const Value* v : step_reads(steps_[i])) {
      ensure(v);
      last_read[v] = i;
    }
    for (const Value* v : step_writes(steps_[i])) ensure(v);
  }
  for (const Value* v : g.outputs) ensure(v);
  std::set<const Value*> keep(g.outputs.begin(), g.outputs.end());
  free_after_.assign(steps_.size(), {});
  for (const auto& [v, i] : last_read)
    if (!keep.count(v)) free_after_[i].push_back(slots_.at(v));
}

size_t Executable::slot(const Value* v) const {
  auto it = slots_.find(v);
  TS_CHECK(it != slots_.end(), "value '", v->name, "' is not part of the executable");
  return it->second;
}

std::vector<std::string> Executable::interpreter_ops() const {
  std::set<std::string> ops;
  for (const Step& s : steps_)
    if (s.interp) ops.insert(qualified_op(*s.interp));
  return {ops.begin(), ops.end()};
}

void Executable::run_kernel(const KernelStep& k, std::vector<RtValue>& values,
                            std::map<std::string, int64_t>& bindings) const {
  std::vector<void*> ptrs;
  ptrs.reserve(k.params.size());
  for (size_t i = 0; i < k.num_inputs; ++i) {
    const Value* v = k.params[i];
    const RtValue* rv = v->constant ? nullptr : &values[slot(v)];
    if (rv) check_value_matches(*rv, v->type, str_cat(k.name, ": input %", v->name), &bindings);
    const Tensor& t = rv ? rv->tensor : *v->constant;
    ptrs.push_back(const_cast<uint8_t*>(t.raw()));
  }
  const Value* out = k.params.back();
  std::vector<int64_t> dims;
  for (const Dim& d : *out->type.shape) {
    std::optional<int64_t> n = d.eval(bindings);
    TS_CHECK(n.has_value(), k.name, ": the size ", d.str(), " of %", out->name, " is not bound");
    dims.push_back(*n);
  }
  Tensor result(out->type.dtype, dims);
  ptrs.push_back(result.mutable_raw());
  std::vector<int64_t> syms;
  for (const std::string& s : k.syms) {
    auto it = bindings.find(s);
    TS_CHECK(it != bindings.end(), k.name, ": symbol '", s, "' is not bound");
    syms.push_back(it->second);
  }
  std::atomic<int32_t> status{0};
  auto call = [&](int64_t begin, int64_t end) {
    const int32_t rc = k.fn(ptrs.data(), syms.data(), begin, end);
    int32_t expected = 0;
    if (rc != 0) status.compare_exchange_strong(expected, rc);
  };
  if (k.parallel) {
    const std::optional<int64_t> n = k.parallel_extent.eval(bindings);
    TS_CHECK(n.has_value(), k.name, ": parallel extent ", k.parallel_extent.str(), " is not bound");
    pool_->parallel_for(*n, call);
  } else {
    call(0, 1);
  }
  const int32_t rc = status.load();
  if (rc != 0) {
    const size_t i = static_cast<size_t>(rc - 1);
    fail(i < k.assert_messages.size() ? k.assert_messages[i] : str_cat(k.name, ": kernel failed with status ", rc));
  }
  values[slot(out)] = RtValue(std::move(result));
}

std::vector<RtValue> Executable::run(const std::vector<RtValue>& inputs) const {
  const Graph& g = *model_.graph;
  TS_CHECK(inputs.size() == g.inputs.size(), "the model takes ", g.inputs.size(), " inputs, got ", inputs.size());
  std::vector<RtValue> values(slots_.size());
  std::map<std::string, int64_t> bindings;
  for (size_t i = 0; i < inputs.size(); ++i) {
    check_value_matches(inputs[i], g.inputs[i]->type, str_cat("input '", g.inputs[i]->name, "'"), &bindings);
    values[slot(g.inputs[i])] = inputs[i];
  }
  Interpreter interp;
  for (size_t i = 0; i < steps_.size(); ++i) {
    const Step& s = steps_[i];
    if (s.kernel) {
      run_kernel(*s.kernel, values, bindings);
    } else {
      std::vector<RtValue> outs = interp.run_node(*s.interp, [&](const Value* v) -> const RtValue* {
        auto it = slots_.find(v);
        if (it == slots_.end()) return nullptr;
        const RtValue& rv = values[it->second];
        return rv.is_tensor() && !rv.tensor.defined() ? nullptr : &rv;  // constants, not-yet-computed
      });
      for (size_t o = 0; o < s.interp->outputs.size(); ++o) {
        const Value* v = s.interp->outputs[o];
        if (!v) continue;
        // Data-dependent sizes (NonZero, ...) bind their symbols here.
        check_value_matches(outs[o], v->type, str_cat(s.interp->describe(), ": output %", v->name), &bindings);
        values[slot(v)] = std::move(outs[o]);
      }
    }
    for (size_t sl : free_after_[i]) values[sl] = RtValue();
  }
  std::vector<RtValue> out;
  for (const Value* v : g.outputs) {
    if (v->constant) {
      out.emplace_back(*v->constant);
      continue;
    }
    out.push_back(values[slot(v)]);
  }
  return out;
}

}  // namespace tessel
