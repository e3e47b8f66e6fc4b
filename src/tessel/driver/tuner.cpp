#include "tessel/driver/tuner.h"

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <random>
#include <set>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include "tessel/driver/compare.h"
#include "tessel/driver/compiler.h"
#include "tessel/driver/isolated_run.h"
#include "tessel/interp/interpreter.h"
#include "tessel/runtime/thread_pool.h"
#include "tessel/schedule/cpu_info.h"
#include "tessel/support/error.h"
#include "tessel/tune/cost_model.h"
#include "tessel/tune/space.h"

#ifdef TESSEL_HAVE_LLVM
#include "tessel/codegen/cpu/cpu_codegen.h"
#endif

namespace tessel {

double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double top_k_recall(const std::vector<KernelTuning>& kernels, size_t k,
                    const std::function<double(const TuneTrial&)>& predicted) {
  size_t counted = 0, hits = 0;
  for (const KernelTuning& kt : kernels) {
    std::vector<const TuneTrial*> ok;
    for (const TuneTrial& t : kt.trials)
      if (!t.wrong) ok.push_back(&t);
    if (ok.size() <= k) continue;
    const TuneTrial* best = *std::min_element(ok.begin(), ok.end(), [](auto* a, auto* b) {
      return a->measured_us < b->measured_us;
    });
    std::sort(ok.begin(), ok.end(), [&](auto* a, auto* b) { return predicted(*a) < predicted(*b); });
    ++counted;
    if (std::find(ok.begin(), ok.begin() + static_cast<std::ptrdiff_t>(k), best) != ok.begin() + static_cast<std::ptrdiff_t>(k))
      ++hits;
  }
  return counted ? static_cast<double>(hits) / static_cast<double>(counted) : 0.0;
}

KernelTuning start_kernel_tuning(const LoweredGroup& lg, int uses) {
  KernelTuning kt;
  kt.name = lg.kernel.name;
  kt.hash = lg.default_hash;
  kt.kind = lg.schedule;
  kt.uses = uses;
  kt.default_schedule = kt.best = lg.sched;
  return kt;
}

TuneReport make_tune_report(std::vector<KernelTuning> kernels, double seconds, bool interrupted) {
  TuneReport r;
  for (const KernelTuning& kt : kernels) {
    r.default_total_us += kt.default_us * kt.uses;
    r.tuned_total_us += kt.best_us * kt.uses;
  }
  r.kernels = std::move(kernels);
  r.seconds = seconds;
  r.interrupted = interrupted;
  return r;
}

void tune_progress(Progress& p, int64_t done, const std::vector<KernelTuning>& kernels, double seconds_left) {
  if (!p.enabled()) return;
  double def = 0, best = 0;
  size_t trials = 0;
  for (const KernelTuning& k : kernels) {
    def += k.default_us * k.uses;
    best += k.best_us * k.uses;
    trials += k.trials.size() > 0 ? k.trials.size() - 1 : 0;  // the default is not a trial
  }
  char text[160];
  std::snprintf(text, sizeof text, "trials %zu  kernel time %.0f -> %.0f us (%.2fx)", trials, def, best,
                best > 0 ? def / best : 1.0);
  p.set_detail(text);
  p.set_eta(std::max(0.0, seconds_left));
  p.set_done(done);
}

std::string tune_summary(const std::vector<KernelTuning>& kernels) {
  size_t improved = 0, trials = 0;
  for (const KernelTuning& k : kernels) {
    improved += k.improved;
    trials += k.trials.size() > 0 ? k.trials.size() - 1 : 0;
  }
  return str_cat(kernels.size(), " kernels, ", improved, " improved, ", trials, " trials");
}

#ifndef TESSEL_HAVE_LLVM

TuneReport tune_for_cpu(const Model&, const std::vector<RtValue>&, const TuneOptions&,
                        const std::function<void(const KernelTuning&)>&) {
  fail("this tessel was built without the LLVM CPU code generator: tune needs it");
}

#else

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Every value of one interpreter run of the graph: inputs, intermediates,
// outputs (constants are read from the graph itself).
std::map<const Value*, RtValue> reference_values(const Graph& g, const std::vector<RtValue>& inputs) {
  std::map<const Value*, RtValue> values;
  for (size_t i = 0; i < g.inputs.size() && i < inputs.size(); ++i) values[g.inputs[i]] = inputs[i];
  Interpreter interp;
  interp.on_node = [&](const Node& n, const std::vector<RtValue>& outs) {
    for (size_t i = 0; i < outs.size() && i < n.outputs.size(); ++i) values[n.outputs[i]] = outs[i];
  };
  interp.run(g, inputs);
  return values;
}

// One kernel's buffers at real data: its inputs from the reference run, a
// fresh output, and the interpreter's output to check against.
class KernelHarness {
 public:
  KernelHarness(const LoweredGroup& lg, const std::map<const Value*, RtValue>& ref,
                const std::map<std::string, int64_t>& bindings, ThreadPool& pool)
      : pool_(&pool) {
    const size_t inputs = lg.kernel.num_inputs;
    for (size_t i = 0; i < inputs; ++i) {
      const Value* v = lg.params.at(i);
      if (v->constant) {
        ptrs_.push_back(const_cast<uint8_t*>(v->constant->raw()));
        constants_.push_back({v->constant->raw(), v->constant->nbytes()});
        continue;
      }
      auto it = ref.find(v);
      TS_CHECK(it != ref.end() && it->second.tensor.defined(), "tune: no reference value for %", v->name);
      ptrs_.push_back(const_cast<uint8_t*>(it->second.tensor.raw()));
      bytes_ += static_cast<int64_t>(it->second.tensor.nbytes());
    }
    const Value* out = lg.params.back();
    auto it = ref.find(out);
    TS_CHECK(it != ref.end() && it->second.tensor.defined(), "tune: no reference value for %", out->name);
    expected_ = it->second.tensor;
    output_ = Tensor(expected_.dtype(), expected_.shape());
    ptrs_.push_back(output_.mutable_raw());
    bytes_ += static_cast<int64_t>(output_.nbytes());
    for (const std::string& s : lg.kernel.syms) {
      auto b = bindings.find(s);
      TS_CHECK(b != bindings.end(), "tune: symbol '", s, "' is not bound");
      syms_.push_back(b->second);
    }
    if (lg.parallel_extent) {
      std::optional<int64_t> n = lg.parallel_extent->eval(bindings);
      TS_CHECK(n.has_value(), "tune: parallel extent of ", lg.kernel.name, " is not bound");
      parallel_ = *n;
    }
  }

  int64_t bytes() const { return bytes_; }
  int64_t out_elements() const { return output_.numel(); }

  // One call, its status (0: fine).
  int32_t run(KernelEntry fn, int64_t parallel) {
    std::atomic<int32_t> status{0};
    auto call = [&](int64_t b, int64_t e) {
      const int32_t rc = fn(ptrs_.data(), syms_.data(), b, e);
      int32_t zero = 0;
      if (rc != 0) status.compare_exchange_strong(zero, rc);
    };
    if (parallel > 0) {
      pool_->parallel_for(parallel, call);
    } else {
      call(0, 1);
    }
    return status.load();
  }

  // "" when the output matches the interpreter's: the elementwise tolerance
  // plus a share of the output's scale (the compiled kernels sum in f32,
  // the interpreter in double).
  std::string check(KernelEntry fn, int64_t parallel) {
    std::fill(output_.mutable_raw(), output_.mutable_raw() + output_.nbytes(), uint8_t{0xff});
    if (int32_t rc = run(fn, parallel); rc != 0) return str_cat("kernel failed with status ", rc);
    return compare_tensors(output_, expected_, scaled_tolerance(expected_, 1e-3, 1e-4, 1e-5));
  }

  // Median microseconds of repeated calls after one warm-up, for about 40 ms
  // (at least 3, at most 50 calls). Before each call the constant inputs
  // (weights) are flushed from the caches: in the model each weight is read
  // once per run and comes from memory, while a kernel called again and
  // again would find it in L2/L3. Timed warm, BERT's GEMMs chose schedules
  // that read B in place from cache, and the tuned model ran 2% slower
  // than the default.
  double time_us(KernelEntry fn, int64_t parallel) {
    run(fn, parallel);
    std::vector<double> t;
    const auto start = Clock::now();
    while (t.size() < 3 || (t.size() < 50 && seconds_since(start) < 0.04)) {
      flush_constants();
      const auto t0 = Clock::now();
      run(fn, parallel);
      t.push_back(seconds_since(t0) * 1e6);
    }
    return median_of(std::move(t));
  }

  int64_t parallel() const { return parallel_; }
  // The pool parallel loops run on (a forked child's own: the parent's has
  // no workers there).
  void set_pool(ThreadPool* pool) { pool_ = pool; }

 private:
  void flush_constants() const {
#if defined(__x86_64__) || defined(__i386__)
    for (const auto& [p, n] : constants_)
      for (size_t off = 0; off < n; off += 64) _mm_clflush(p + off);
    _mm_mfence();
#endif
  }
  ThreadPool* pool_;
  std::vector<void*> ptrs_;
  std::vector<int64_t> syms_;
  std::vector<std::pair<const uint8_t*, size_t>> constants_;  // flushed before each timed call
  Tensor expected_, output_;
  int64_t parallel_ = 0;
  int64_t bytes_ = 0;
};

// A distinct kernel of the model: the first group that runs it.
struct Target {
  const FusionGroup* group;
  LoweredGroup lowered;
  int uses = 1;
};

std::vector<Target> distinct_kernels(const CompiledModel& c) {
  std::vector<Target> out;
  std::map<std::string, size_t> by_entry;
  size_t next = 0;
  for (const FusionGroup& g : c.plan.groups) {
    if (!g.compiled) continue;
    const LoweredGroup& lg = c.lowered.at(next++);
    const std::string& entry = c.entry.at(lg.kernel.name);
    auto [it, fresh] = by_entry.emplace(entry, out.size());
    if (fresh) {
      out.push_back({&g, lg, 1});
    } else {
      ++out[it->second].uses;
    }
  }
  return out;
}

KernelFacts facts_of(const LoweredGroup& lg, const KernelHarness& h) {
  KernelFacts f;
  f.kind = lg.schedule;
  f.m = lg.gemm_shape.m;
  f.n = lg.gemm_shape.n;
  f.k = lg.gemm_shape.k;
  f.batch = lg.gemm_shape.batch;
  f.b_panel_width = lg.gemm_shape.b_panel_width;
  f.b_panel_columns = lg.gemm_shape.b_panel_columns;
  if (const Primitive* rows = lg.sched.find("conv.gemm")) f.conv_rows = rows->attr("rows").value_or("");
  f.out_elements = h.out_elements();
  f.bytes = h.bytes();
  f.parallel_units = h.parallel();
  return f;
}

// Lowers and compiles candidates together; nullptr entries failed.
struct Compiled {
  std::vector<LoweredGroup> lowered;
  std::vector<KernelEntry> entries;
  std::shared_ptr<cpu::KernelLibrary> lib;
};

Compiled compile_candidates(const FusionGroup& g, const std::vector<Schedule>& cands, int* failed) {
  const OpRegistry& reg = OpRegistry::global();
  Compiled c;
  std::vector<loop::Kernel> kernels;
  std::vector<size_t> index;  // candidate -> kernel index, or npos
  for (size_t i = 0; i < cands.size(); ++i) {
    try {
      c.lowered.push_back(lower_cpu_group(g, reg, cands[i]));
      c.lowered.back().kernel.name = str_cat("tune_", i);
      index.push_back(kernels.size());
      kernels.push_back(c.lowered.back().kernel);
    } catch (const std::exception&) {
      c.lowered.emplace_back();
      index.push_back(std::string::npos);
      ++*failed;
    }
  }
  c.entries.assign(cands.size(), nullptr);
  if (kernels.empty()) return c;
  try {
    c.lib = cpu::compile_kernels(kernels, cpu::CodegenOptions{});
  } catch (const std::exception&) {
    *failed += static_cast<int>(kernels.size());  // one module: any failure fails the batch
    return c;
  }
  for (size_t i = 0; i < cands.size(); ++i)
    if (index[i] != std::string::npos)
      c.entries[i] = reinterpret_cast<KernelEntry>(c.lib->lookup(c.lowered[i].kernel.name));
  return c;
}

class Search {
 public:
  explicit Search(const TuneOptions& o) : o_(o), pool_(o.threads), rng_(o.seed), progress_(o.progress, "tune") {
    cpu_ = host_cpu_info(cpu::host_cpu_features());
    ceil_.threads = o.threads;
  }

  TuneReport run(const Model& m, const std::vector<RtValue>& inputs,
                 const std::function<void(const KernelTuning&)>& on_kernel) {
    start_ = Clock::now();
    LowerOptions lo;
    lo.progress = &progress_;
    const CompiledModel c = lower_for_cpu(m, lo);
    progress_.start("reference run (interpreter)", "runs", 1);
    const auto ref = reference_values(*m.graph, inputs);
    std::map<std::string, int64_t>& bindings = bindings_;
    for (size_t i = 0; i < m.graph->inputs.size() && i < inputs.size(); ++i)
      check_value_matches(inputs[i], m.graph->inputs[i]->type, "input", &bindings);
    std::vector<Target> targets = distinct_kernels(c);
    std::vector<KernelTuning> tunings = time_defaults(targets, ref, bindings);
    double total = 0;
    for (const KernelTuning& kt : tunings) total += kt.default_us * kt.uses;
    std::vector<size_t> order(targets.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return tunings[a].default_us * tunings[a].uses > tunings[b].default_us * tunings[b].uses;
    });
    double weight_left = total;
    progress_.start("search", "kernels", static_cast<int64_t>(tunings.size()));
    for (size_t i : order) {
      KernelTuning& kt = tunings[i];
      const double w = kt.default_us * kt.uses;
      const double left = o_.budget_s - seconds_since(start_);
      if (!stopped() && kt.note.empty() && total > 0 && w / total >= o_.min_weight && left > 0) {
        KernelHarness h(targets[i].lowered, ref, bindings, pool_);
        search_kernel(*targets[i].group, targets[i].lowered, default_entries_[i], h, left * w / weight_left, kt,
                      tunings);
      } else if (kt.note.empty()) {
        kt.note = stopped() ? "interrupted" : left <= 0 ? "budget spent" : "under the weight threshold";
      }
      weight_left -= w;
      ++done_;
      tune_progress(progress_, done_, tunings, o_.budget_s - seconds_since(start_));
      if (on_kernel) on_kernel(kt);
    }
    progress_.finish(tune_summary(tunings));
    return make_tune_report(std::move(tunings), seconds_since(start_), stopped());
  }

 private:
  bool stopped() const { return o_.stop && o_.stop->load(); }

  std::vector<KernelTuning> time_defaults(const std::vector<Target>& targets,
                                          const std::map<const Value*, RtValue>& ref,
                                          const std::map<std::string, int64_t>& bindings) {
    std::vector<loop::Kernel> kernels;
    for (const Target& t : targets) kernels.push_back(t.lowered.kernel);
    cpu::CodegenOptions co;
    if (progress_.enabled()) {
      co.on_step = [&](const char* step, size_t n) { progress_.start(step, "kernels", static_cast<int64_t>(n)); };
      co.on_kernel = [&] { progress_.advance(); };
    }
    if (!kernels.empty()) defaults_lib_ = cpu::compile_kernels(kernels, co);
    std::vector<KernelTuning> out;
    std::vector<KernelHarness> harness;
    harness.reserve(targets.size());
    for (const Target& t : targets) {
      KernelTuning kt = start_kernel_tuning(t.lowered, t.uses);
      harness.emplace_back(t.lowered, ref, bindings, pool_);
      default_entries_.push_back(reinterpret_cast<KernelEntry>(defaults_lib_->lookup(kt.name)));
      const std::string bad = harness.back().check(default_entries_.back(), harness.back().parallel());
      if (!bad.empty()) kt.note = "the default does not match the interpreter: " + bad;
      out.push_back(std::move(kt));
    }
    // Two passes: the first wakes the cores and the thread pool and fills
    // the caches (the first kernel timed cold measured 1.7x its time in the
    // model), the second is kept.
    progress_.start("time the defaults", "timings", 2 * static_cast<int64_t>(targets.size()));
    for (int pass = 0; pass < 2; ++pass)
      for (size_t i = 0; i < targets.size(); ++i) {
        out[i].default_us = out[i].best_us = harness[i].time_us(default_entries_[i], harness[i].parallel());
        progress_.advance();
      }
    return out;
  }

  // The next round's candidates: the model's best untried, a neighbour of
  // the best so far, a random untried one.
  std::vector<Schedule> next_round(const std::vector<Schedule>& space, const std::set<size_t>& tried,
                                   const KernelFacts& f, const Schedule& best) {
    std::vector<std::pair<double, size_t>> ranked;
    for (size_t i = 0; i < space.size(); ++i) {
      if (tried.count(i)) continue;
      const double a = analytical_cost_us(space[i], f, cpu_, ceil_);
      ranked.push_back({learned_.predict_us(schedule_features(space[i], f, cpu_, ceil_), a), i});
    }
    std::sort(ranked.begin(), ranked.end());
    std::set<size_t> pick;
    const size_t greedy = static_cast<size_t>(std::max(1, o_.batch - 2));
    for (size_t j = 0; j < ranked.size() && pick.size() < greedy; ++j) pick.insert(ranked[j].second);
    std::vector<Schedule> near = neighbours(best, space);
    std::shuffle(near.begin(), near.end(), rng_);
    for (const Schedule& s : near) {
      auto it = std::find(space.begin(), space.end(), s);
      const size_t idx = static_cast<size_t>(it - space.begin());
      if (!tried.count(idx) && !pick.count(idx)) {
        pick.insert(idx);
        break;
      }
    }
    if (!ranked.empty()) pick.insert(ranked[std::uniform_int_distribution<size_t>(0, ranked.size() - 1)(rng_)].second);
    std::vector<Schedule> out;
    for (size_t i : pick) out.push_back(space[i]);
    return out;
  }

  // A measured candidate kept compiled, for the confirmation at the end.
  struct Finalist {
    double us;
    Schedule sched;
    std::shared_ptr<cpu::KernelLibrary> lib;
    KernelEntry fn;
    int64_t parallel;
  };

  // `all`: every kernel's tuning (kt among them), for the progress line.
  void search_kernel(const FusionGroup& g, const LoweredGroup& def, KernelEntry def_fn, KernelHarness& h,
                     double budget_s, KernelTuning& kt, const std::vector<KernelTuning>& all) {
    const auto t0 = Clock::now();
    const KernelFacts f = facts_of(def, h);
    const std::vector<Schedule> space = search_space(def.sched, f, cpu_);
    kt.space_size = space.size();
    std::set<size_t> tried{0};
    record(kt, def.sched, f, kt.default_us, false);
    std::vector<Finalist> finalists;
    while (!stopped() && seconds_since(t0) < budget_s && static_cast<int>(kt.trials.size()) <= o_.max_trials &&
           tried.size() < space.size()) {
      std::vector<Schedule> round = next_round(space, tried, f, kt.best);
      for (const Schedule& s : round) tried.insert(static_cast<size_t>(std::find(space.begin(), space.end(), s) - space.begin()));
      Compiled c = compile_candidates(g, round, &kt.failed);
      std::vector<int64_t> par(round.size(), 0);
      std::vector<size_t> ready;
      for (size_t i = 0; i < round.size(); ++i) {
        if (!c.entries[i]) continue;
        // A candidate's parallel loop may have another extent than the default's.
        par[i] = c.lowered[i].parallel_extent ? c.lowered[i].parallel_extent->eval(bindings_).value_or(0) : 0;
        ready.push_back(i);
      }
      const std::vector<IsolatedResult> res = measure(h, c, round, par, ready);
      for (size_t i : ready) {
        if (i >= res.size() || (!res[i].reported && !res[i].crashed)) continue;  // stopped before it ran
        if (res[i].crashed) {
          ++kt.crashed;
          ++kt.failed;
          continue;
        }
        if (res[i].code != kTimed) {
          ++kt.wrong;
          record(kt, round[i], f, 0, true);
          continue;
        }
        const double us = res[i].value;
        record(kt, round[i], f, us, false);
        keep_finalist(finalists, {us, round[i], c.lib, c.entries[i], par[i]});
        if (us < kt.best_us) {
          kt.best_us = us;
          kt.best = round[i];
        }
      }
      // Refit once the samples grew by a tenth (a fit of a few thousand
      // samples takes tens of milliseconds; every round would add up).
      if (learned_.samples() >= fitted_samples_ + std::max<size_t>(8, fitted_samples_ / 10)) {
        learned_.fit();
        fitted_samples_ = learned_.samples();
      }
      tune_progress(progress_, done_, all, o_.budget_s - seconds_since(start_));
    }
    confirm(kt, h, def_fn, finalists);
  }

  // Checks each ready candidate against the interpreter and times the
  // correct ones (code kTimed, value: microseconds), each in a forked child
  // unless o_.isolate is off: a candidate that crashes costs itself, not the
  // search (driver/isolated_run.h).
  static constexpr int32_t kTimed = 0, kWrong = 1;
  std::vector<IsolatedResult> measure(KernelHarness& h, const Compiled& c, const std::vector<Schedule>& round,
                                      const std::vector<int64_t>& par, const std::vector<size_t>& ready) {
    const auto one = [&](size_t i, const ReportFn& report) {
      if (o_.crash_for_test && o_.crash_for_test(round[i])) std::raise(SIGSEGV);
      if (!h.check(c.entries[i], par[i]).empty()) return report(i, kWrong, 0);
      report(i, kTimed, h.time_us(c.entries[i], par[i]));
    };
    if (!o_.isolate) {
      std::vector<IsolatedResult> out(round.size());
      for (size_t i : ready) {
        if (stopped()) break;
        one(i, [&](size_t j, int32_t code, double v) { out[j] = {true, false, 0, code, v}; });
      }
      return out;
    }
    return run_isolated(ready, [&](const std::vector<size_t>& todo, const ReportFn& report) {
      ThreadPool own(o_.threads);
      h.set_pool(&own);
      for (size_t i : todo) {
        if (stopped()) break;
        one(i, report);
      }
      h.set_pool(&pool_);
    });
  }

  // The few fastest candidates, kept compiled.
  static void keep_finalist(std::vector<Finalist>& fs, Finalist f) {
    constexpr size_t kFinalists = 3;
    fs.push_back(std::move(f));
    std::sort(fs.begin(), fs.end(), [](const Finalist& a, const Finalist& b) { return a.us < b.us; });
    if (fs.size() > kFinalists) fs.resize(kFinalists);
  }

  // The fastest of many noisy timings is biased low (the winner's curse):
  // a candidate that won by a few percent may only have been lucky. The
  // finalists that beat the default are timed again, interleaved with the
  // default so that drift of the machine hits both alike, and one replaces
  // the default only when the median of its fresh timings beats the
  // default's fresh median by min_gain.
  void confirm(KernelTuning& kt, KernelHarness& h, KernelEntry def_fn, const std::vector<Finalist>& finalists) {
    std::vector<const Finalist*> contenders;
    for (const Finalist& f : finalists)
      if (f.us < kt.default_us * (1 - o_.min_gain)) contenders.push_back(&f);
    kt.improved = false;
    kt.best = kt.default_schedule;
    kt.best_us = kt.default_us;
    if (contenders.empty() || stopped()) return;
    constexpr int kRounds = 5;
    std::vector<double> def_t;
    std::vector<std::vector<double>> cand_t(contenders.size());
    for (int r = 0; r < kRounds; ++r) {
      def_t.push_back(h.time_us(def_fn, h.parallel()));
      for (size_t i = 0; i < contenders.size(); ++i)
        cand_t[i].push_back(h.time_us(contenders[i]->fn, contenders[i]->parallel));
    }
    const double def_us = median_of(def_t);
    kt.default_us = def_us;
    kt.best_us = def_us;
    for (size_t i = 0; i < contenders.size(); ++i) {
      const double us = median_of(cand_t[i]);
      if (us < def_us * (1 - o_.min_gain) && us < kt.best_us) {
        kt.best_us = us;
        kt.best = contenders[i]->sched;
        kt.improved = true;
      }
    }
  }

  void record(KernelTuning& kt, const Schedule& s, const KernelFacts& f, double us, bool wrong) {
    TuneTrial t;
    t.schedule = print_schedule(s);
    t.features = schedule_features(s, f, cpu_, ceil_);
    t.analytical_us = analytical_cost_us(s, f, cpu_, ceil_);
    t.predicted_us = learned_.predict_us(t.features, t.analytical_us);
    t.measured_us = us;
    t.wrong = wrong;
    if (!wrong) learned_.add(t.features, t.analytical_us, us);
    kt.trials.push_back(std::move(t));
  }

  const TuneOptions& o_;
  ThreadPool pool_;
  std::mt19937_64 rng_;
  CpuInfo cpu_;
  CpuCeilings ceil_;
  LearnedCostModel learned_;
  size_t fitted_samples_ = 0;  // samples at the last fit
  std::shared_ptr<cpu::KernelLibrary> defaults_lib_;  // every kernel with its default schedule
  std::vector<KernelEntry> default_entries_;          // by target
  Clock::time_point start_;
  std::map<std::string, int64_t> bindings_;  // the model's symbols, from the inputs
  Progress progress_;
  int64_t done_ = 0;  // kernels whose search has ended
};

}  // namespace

TuneReport tune_for_cpu(const Model& m, const std::vector<RtValue>& inputs, const TuneOptions& o,
                        const std::function<void(const KernelTuning&)>& on_kernel) {
  return Search(o).run(m, inputs, on_kernel);
}

#endif

}  // namespace tessel
