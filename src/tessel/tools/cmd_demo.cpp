// tessel demo: builds a small CNN, runs it on --target cpu and on the
// reference interpreter, and checks that they agree.
#include <algorithm>
#include <iostream>

#include "tessel/driver/compare.h"
#include "tessel/driver/demo.h"
#include "tessel/driver/json_util.h"
#include "tessel/driver/random_inputs.h"
#include "tessel/driver/session.h"
#include "tessel/support/error.h"
#include "tessel/tools/commands.h"

namespace tessel::cli {

int cmd_demo(const DemoArgs& a, const CommonArgs& c) {
  DriverOptions o = driver_options(c);
  check_options_supported(o);
  std::ostream& log = c.json ? std::cerr : std::cout;

  auto run_on = [&](Target t, ExecResult* r, Tensor* input) {
    std::unique_ptr<Model> m = build_demo_model();
    compile_model(*m, {}, o);
    *input = random_input(*m->graph, 0, {}, a.seed);
    *r = execute(*m, {RtValue(*input)}, t, o.threads);
    TS_CHECK(r->outputs.size() == 1 && r->outputs[0].is_tensor(), "demo model produced no tensor");
  };
  ExecResult cpu, ref;
  Tensor input;
  log << "demo: Conv+Relu+MaxPool+Flatten+Gemm+Softmax on a random f32[1,3,16,16] image (seed " << a.seed << ")\n";
  run_on(o.target == Target::Reference ? Target::Reference : Target::Cpu, &cpu, &input);
  run_on(Target::Reference, &ref, &input);
  const Tensor& p = cpu.outputs[0].tensor;
  const Tensor& q = ref.outputs[0].tensor;
  const std::string mismatch = compare_tensors(p, q, Tolerance{1e-5, 1e-6});

  double max_diff = 0;
  int64_t best = 0;
  if (p.shape() == q.shape() && p.dtype() == q.dtype())
    for (int64_t i = 0; i < p.numel(); ++i) {
      max_diff = std::max(max_diff, std::abs(p.get_f64(i) - q.get_f64(i)));
      if (p.get_f64(i) > p.get_f64(best)) best = i;
    }
  const char* cpu_name = o.target == Target::Reference ? "reference" : "cpu";
  log << cpu_name << ": probs "
      << describe_value(cpu.outputs[0]) << " " << preview_values(p, 10) << " in " << cpu.time_ms << " ms\n";
  log << "reference: probs " << describe_value(ref.outputs[0]) << " " << preview_values(q, 10) << " in "
      << ref.time_ms << " ms\n";
  log << "max abs difference: " << max_diff << "; predicted class " << best << " (p=" << p.get_f64(best) << ")\n";
  if (c.json) {
    Json j = Json::object();
    j["ok"] = mismatch.empty();
    j["target"] = cpu_name;
    j["max_abs_diff"] = max_diff;
    j["class"] = best;
    j["time_ms"] = cpu.time_ms;
    j["reference_time_ms"] = ref.time_ms;
    if (!mismatch.empty()) j["message"] = mismatch;
    std::cout << json_line(j) << "\n";
  }
  if (!mismatch.empty()) {
    std::cerr << "demo: MISMATCH between " << cpu_name << " and reference: " << mismatch << "\n";
    return 1;
  }
  log << "demo: OK\n";
  return 0;
}

}  // namespace tessel::cli
