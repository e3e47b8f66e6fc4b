// tessel test-onnx DIR... : runs ONNX-format test cases in one process.
#include <iostream>

#include "tessel/driver/onnx_test_runner.h"
#include "tessel/support/error.h"
#include "tessel/tools/commands.h"

namespace tessel::cli {

int cmd_test_onnx(const TestOnnxArgs& a, const CommonArgs& c) {
  DriverOptions o = driver_options(c);
  TS_CHECK(o.dims.empty(), "--dim is not used by test-onnx (each case's inputs bind its dims)");
  check_options_supported(o);
  const auto cases = find_test_cases(a.dirs);

  Json list = Json::array();
  int64_t passed = 0, failed = 0, errors = 0;
  // Per-case lines go to stdout, or to stderr with --json (so that a caller
  // whose process dies can tell which case was running).
  std::ostream& lines = c.json ? std::cerr : std::cout;
  for (size_t i = 0; i < cases.size(); ++i) {
    const CaseResult r = run_onnx_test_case(cases[i], o);
    if (r.status == "pass") {
      ++passed;
      lines << "PASS " << r.name << "\n";
    } else {
      ++failed;
      if (r.status == "error") ++errors;
      lines << (r.status == "error" ? "ERROR " : "FAIL ") << r.name << ": " << r.message << "\n";
    }
    lines.flush();
    if (c.json) list.push_back(r.to_json());
  }
  const auto total = static_cast<int64_t>(cases.size());
  if (c.json) {
    Json j = Json::object();
    j["cases"] = std::move(list);
    j["passed"] = passed;
    j["failed"] = failed;
    j["errors"] = errors;
    j["total"] = total;
    j["target"] = target_name(o.target);
    std::cout << json_line(j) << "\n";
  } else {
    std::cout << "test-onnx: " << passed << "/" << total << " passed, " << failed << " failed (" << errors
              << " errors)\n";
  }
  return failed == 0 ? 0 : 1;
}

}  // namespace tessel::cli
