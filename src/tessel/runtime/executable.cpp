#include "tessel/runtime/executable.h"

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <set>

#include "tessel/interp/interpreter.h"
#include "tessel/support/error.h"

namespace tessel {

namespace {

std::string qualified_op(const Node& n) { return n.domain.empty() ? n.op : n.domain + "." + n.op; }

// Plans kept per executable; a model run at many shapes starts over rather
// than growing without bound.
constexpr size_t kMaxCachedPlans = 64;

struct FreeDeleter {
  void operator()(uint8_t* p) const { std::free(p); }
};
using ArenaBuffer = std::unique_ptr<uint8_t, FreeDeleter>;

ArenaBuffer allocate_arena(int64_t bytes) {
  const int64_t n = (std::max<int64_t>(bytes, 1) + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment;
  auto* p = static_cast<uint8_t*>(std::aligned_alloc(kArenaAlignment, static_cast<size_t>(n)));
  if (!p) throw std::bad_alloc();
  return ArenaBuffer(p);
}

}  // namespace

// Everything one run owns, so that runs on several threads share nothing.
struct Executable::RunState {
  std::vector<RtValue> values;       // per slot
  std::vector<uint8_t*> arena_ptrs;  // per slot: where an arena value lives (null: in values)
  std::map<std::string, int64_t> bindings;
  std::shared_ptr<const MemoryPlan> plan;
  ArenaBuffer arena;
};

Executable::Executable(const Model& model, std::vector<Step> steps, std::shared_ptr<const void> code,
                       const ExecutableOptions& o)
    : model_(model), steps_(std::move(steps)), code_(std::move(code)),
      pool_(std::make_unique<ThreadPool>(o.threads > 0 ? o.threads : ThreadPool::default_threads())),
      memory_planning_(o.memory_planning) {
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

std::shared_ptr<const MemoryPlan> Executable::memory_plan(const std::map<std::string, int64_t>& bindings) const {
  {
    std::lock_guard<std::mutex> lock(plans_mu_);
    auto it = plans_.find(bindings);
    if (it != plans_.end()) return it->second;
  }
  // Planned outside the lock; two threads planning one binding agree.
  auto plan = std::make_shared<const MemoryPlan>(plan_memory(*model_.graph, steps_, bindings));
  std::lock_guard<std::mutex> lock(plans_mu_);
  if (plans_.size() >= kMaxCachedPlans) plans_.clear();
  return plans_.emplace(bindings, std::move(plan)).first->second;
}

void Executable::run_kernel(const KernelStep& k, RunState& st) const {
  std::vector<void*> ptrs;
  ptrs.reserve(k.params.size());
  for (size_t i = 0; i < k.num_inputs; ++i) {
    const Value* v = k.params[i];
    if (v->constant) {
      ptrs.push_back(const_cast<uint8_t*>(v->constant->raw()));
      continue;
    }
    const size_t sl = slot(v);
    if (st.arena_ptrs[sl]) {  // written by an earlier kernel at the planned size
      ptrs.push_back(st.arena_ptrs[sl]);
      continue;
    }
    const RtValue& rv = st.values[sl];
    check_value_matches(rv, v->type, str_cat(k.name, ": input %", v->name), &st.bindings);
    ptrs.push_back(const_cast<uint8_t*>(rv.tensor.raw()));
  }
  const Value* out = k.params.back();
  const size_t out_slot = slot(out);
  Tensor result;
  auto planned = st.plan ? st.plan->offsets.find(out) : std::map<const Value*, int64_t>::const_iterator();
  if (st.plan && planned != st.plan->offsets.end()) {
    st.arena_ptrs[out_slot] = st.arena.get() + planned->second;
    ptrs.push_back(st.arena_ptrs[out_slot]);
  } else {
    std::vector<int64_t> dims;
    for (const Dim& d : *out->type.shape) {
      std::optional<int64_t> n = d.eval(st.bindings);
      TS_CHECK(n.has_value(), k.name, ": the size ", d.str(), " of %", out->name, " is not bound");
      dims.push_back(*n);
    }
    result = Tensor(out->type.dtype, dims);
    ptrs.push_back(result.mutable_raw());
  }
  std::vector<int64_t> syms;
  for (const std::string& s : k.syms) {
    auto it = st.bindings.find(s);
    TS_CHECK(it != st.bindings.end(), k.name, ": symbol '", s, "' is not bound");
    syms.push_back(it->second);
  }
  std::atomic<int32_t> status{0};
  auto call = [&](int64_t begin, int64_t end) {
    const int32_t rc = k.fn(ptrs.data(), syms.data(), begin, end);
    int32_t expected = 0;
    if (rc != 0) status.compare_exchange_strong(expected, rc);
  };
  if (k.parallel) {
    const std::optional<int64_t> n = k.parallel_extent.eval(st.bindings);
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
  if (result.defined()) st.values[out_slot] = RtValue(std::move(result));
}

void Executable::run_interp(const Node& n, RunState& st) const {
  Interpreter interp;
  // The planner keeps every value an interpreter node reads out of the arena.
  std::vector<RtValue> outs = interp.run_node(n, [&](const Value* v) -> const RtValue* {
    auto it = slots_.find(v);
    if (it == slots_.end()) return nullptr;
    const RtValue& rv = st.values[it->second];
    return rv.is_tensor() && !rv.tensor.defined() ? nullptr : &rv;  // constants, not-yet-computed
  });
  for (size_t o = 0; o < n.outputs.size(); ++o) {
    const Value* v = n.outputs[o];
    if (!v) continue;
    // Data-dependent sizes (NonZero, ...) bind their symbols here.
    check_value_matches(outs[o], v->type, str_cat(n.describe(), ": output %", v->name), &st.bindings);
    st.values[slot(v)] = std::move(outs[o]);
  }
}

std::vector<RtValue> Executable::run(const std::vector<RtValue>& inputs, RunProfile* profile) const {
  const Graph& g = *model_.graph;
  TS_CHECK(inputs.size() == g.inputs.size(), "the model takes ", g.inputs.size(), " inputs, got ", inputs.size());
  RunState st;
  st.values.resize(slots_.size());
  st.arena_ptrs.assign(slots_.size(), nullptr);
  for (size_t i = 0; i < inputs.size(); ++i) {
    check_value_matches(inputs[i], g.inputs[i]->type, str_cat("input '", g.inputs[i]->name, "'"), &st.bindings);
    st.values[slot(g.inputs[i])] = inputs[i];
  }
  if (memory_planning_) {
    st.plan = memory_plan(st.bindings);
    if (!st.plan->offsets.empty()) st.arena = allocate_arena(st.plan->peak_bytes);
  }
  if (profile) profile->step_seconds.assign(steps_.size(), 0.0);
  for (size_t i = 0; i < steps_.size(); ++i) {
    const Step& s = steps_[i];
    // The clock is read only when profiling: unprofiled runs pay nothing.
    std::chrono::steady_clock::time_point t0;
    if (profile) t0 = std::chrono::steady_clock::now();
    if (s.kernel) run_kernel(*s.kernel, st);
    else run_interp(*s.interp, st);
    if (profile) profile->step_seconds[i] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (size_t sl : free_after_[i]) {
      st.values[sl] = RtValue();
      st.arena_ptrs[sl] = nullptr;
    }
  }
  std::vector<RtValue> out;
  for (const Value* v : g.outputs) {
    if (v->constant) {
      out.emplace_back(*v->constant);
      continue;
    }
    out.push_back(st.values[slot(v)]);
  }
  return out;
}

std::vector<Tensor> Executable::run_tensors(const std::vector<Tensor>& inputs) const {
  std::vector<RtValue> in(inputs.begin(), inputs.end());
  std::vector<Tensor> out;
  for (RtValue& v : run(in)) {
    TS_CHECK(v.is_tensor(), "an output is not a tensor; use run() for sequences and optional values");
    out.push_back(std::move(v.tensor));
  }
  return out;
}

}  // namespace tessel
