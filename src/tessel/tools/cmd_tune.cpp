// tessel tune MODEL [--target cpu|cuda] [--budget 10m] [--trials N] [--db PATH] [--input NAME=FILE.npy]...
//                   [--seed N] [--trials-out FILE]
// The CPU tuner is driver/tuner.h's, the GPU's driver/gpu_tuner.h's; the
// database, the inputs and the report are the same.
#include <atomic>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>

#include "tessel/driver/gpu_tuner.h"
#include "tessel/driver/json_util.h"
#include "tessel/driver/model_loader.h"
#include "tessel/driver/session.h"
#include "tessel/driver/tuner.h"
#include "tessel/driver/tuning.h"
#include "tessel/support/error.h"
#include "tessel/tools/commands.h"

namespace tessel::cli {

namespace {

std::atomic<bool> g_stop{false};
extern "C" void on_interrupt(int) { g_stop.store(true); }

// "90s", "10m", "1h" or plain seconds.
double parse_budget(const std::string& s) {
  TS_CHECK(!s.empty(), "--budget: empty");
  double scale = 1;
  std::string num = s;
  switch (s.back()) {
    case 's': num.pop_back(); break;
    case 'm': scale = 60; num.pop_back(); break;
    case 'h': scale = 3600; num.pop_back(); break;
    default: break;
  }
  char* end = nullptr;
  const double v = std::strtod(num.c_str(), &end);
  TS_CHECK(!num.empty() && end && *end == 0 && v > 0 && v <= 7 * 24 * 3600 / scale, "--budget: '", s,
           "' is not a duration (e.g. 90s, 10m, 1h)");
  return v * scale;
}

Json trial_json(const KernelTuning& k, const TuneTrial& t) {
  Json j = Json::object();
  j["kernel"] = k.name;
  j["hash"] = k.hash;
  j["kind"] = k.kind;
  j["schedule"] = t.schedule;
  j["analytical_us"] = t.analytical_us;
  j["predicted_us"] = t.predicted_us;
  j["measured_us"] = t.measured_us;
  j["wrong"] = t.wrong;
  Json f = Json::array();
  for (double x : t.features) f.push_back(x);
  j["features"] = f;
  return j;
}

}  // namespace

int cmd_tune(const TuneArgs& a, const CommonArgs& c) {
  DriverOptions o = driver_options(c);
  const bool cuda = o.target == Target::Cuda;
  TS_CHECK(o.target == Target::Cpu || cuda, "tune: --target cpu or cuda (the reference target has no schedules)");
  check_options_supported(o, /*needs_device=*/cuda);
  TuneOptions t;
  t.budget_s = parse_budget(a.budget);
  TS_CHECK(a.trials >= 0 && a.trials <= 100000, "--trials: must be between 0 and 100000");
  t.max_trials = a.trials;
  t.threads = o.threads > 0 ? o.threads : 2;
  t.seed = a.seed + 1;
  t.log = &std::cerr;
  t.progress = progress_options(c);
  t.stop = &g_stop;
  const std::string db_path = a.db.empty() ? default_tuning_db_path() : a.db;

  std::vector<std::pair<std::string, std::string>> files;
  for (const auto& spec : a.inputs) files.push_back(parse_input_binding(spec));
  std::unique_ptr<Model> m = load_model(a.model);
  const auto given = read_input_files(*m->graph, files);
  const auto dims = bind_symbols(*m->graph, given, o.dims, &std::cerr);
  fold_shape_inputs(*m, given, o.target);
  compile_model(*m, dims, o);
  const std::vector<RtValue> inputs = assemble_inputs(*m->graph, given, dims, a.seed, &std::cerr);

  std::ofstream trials;
  if (!a.trials_out.empty()) {
    trials.open(a.trials_out);
    TS_CHECK(trials.good(), "--trials-out: cannot write ", a.trials_out);
  }
  TuningRecorder recorder(db_path, host_fingerprint(o.target, t.threads));
  // CPU: the records wait for the whole-model check (below); the GPU tuner
  // confirms its winners itself, and its records go in as they come.
  const auto on_kernel = [&](const KernelTuning& k) {
    if (cuda) recorder.record(k);
    if (trials.is_open())
      for (const TuneTrial& tr : k.trials) trials << json_line(trial_json(k, tr)) << "\n";
  };
  auto previous = std::signal(SIGINT, on_interrupt);
  const TuneReport r = cuda ? tune_for_cuda(*m, inputs, t, on_kernel) : tune_for_cpu(*m, inputs, t, on_kernel);
  std::signal(SIGINT, previous);
  // The model with this run's winners against the model as it compiled
  // before (the database's records): kept only when it is no slower.
  RecordChoice choice;
  if (!cuda) {
    DriverOptions before = o;
    before.tuning_db = db_path;
    before.log = &std::cerr;
    const ScheduleLookup base = std::filesystem::exists(db_path) ? lower_options(before).schedules : ScheduleLookup();
    choice = choose_records_on_whole_model(*m, inputs, o, base, r.kernels);
    const std::set<std::string> kept(choice.kept.begin(), choice.kept.end());
    // A kernel whose default won keeps its record (it changes nothing).
    for (const KernelTuning& k : r.kernels)
      if (!k.improved || kept.count(k.hash)) recorder.record(k);
    if (choice.kept.size() < choice.improved)
      std::cerr << "warning: tune: the whole model was slower with all " << choice.improved
                << " improved kernels' schedules; " << choice.kept.size() << " kept (" << choice.checks
                << " whole-model checks)\n";
  }
  const WholeModelCheck& check = choice.check;
  size_t improved = 0, measured = 0, wrong = 0, crashed = 0;
  for (const KernelTuning& k : r.kernels) {
    improved += k.improved;
    measured += k.trials.size();
    wrong += static_cast<size_t>(k.wrong);
    crashed += static_cast<size_t>(k.crashed);
  }
  const double ratio = r.tuned_total_us > 0 ? r.default_total_us / r.tuned_total_us : 1;
  if (c.json) {
    Json j = Json::object();
    j["model"] = a.model;
    j["target"] = target_name(o.target);
    j["db"] = db_path;
    j["seconds"] = r.seconds;
    j["interrupted"] = r.interrupted;
    j["kernels"] = r.kernels.size();
    j["improved"] = improved;
    j["measured"] = measured;
    j["wrong"] = wrong;
    j["crashed"] = crashed;
    j["default_kernel_us"] = r.default_total_us;
    j["tuned_kernel_us"] = r.tuned_total_us;
    if (check.ran) {
      Json w = Json::object();
      w["before_ms"] = check.before_ms;
      w["tuned_ms"] = check.tuned_ms;
      w["runs"] = check.runs;
      w["kept"] = check.keep;
      w["improved"] = choice.improved;
      w["kept_kernels"] = choice.kept.size();
      w["checks"] = choice.checks;
      j["whole_model"] = w;
    }
    std::cout << json_line(j) << "\n";
  } else {
    std::printf("tuned %s in %.0f s%s: %zu kernels, %zu improved, %zu candidates measured, %zu wrong discarded, "
                "%zu crashed\n",
                a.model.c_str(), r.seconds, r.interrupted ? " (interrupted)" : "", r.kernels.size(), improved,
                measured, wrong, crashed);
    std::printf("kernel time (sum of medians x uses): %.0f us -> %.0f us (%.2fx); records in %s\n",
                r.default_total_us, r.tuned_total_us, ratio, db_path.c_str());
    if (check.ran)
      std::printf("whole model: %.3f ms -> %.3f ms (medians of %d alternating runs each): %zu of %zu improved "
                  "kernels' records kept\n",
                  check.before_ms, check.tuned_ms, check.runs, check.keep ? choice.kept.size() : size_t{0},
                  choice.improved);
  }
  return r.interrupted ? 130 : 0;
}

}  // namespace tessel::cli
