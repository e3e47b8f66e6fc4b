// Running ONNX-format test cases (the onnx_test_runner layout: a folder with
// model.onnx and test_data_set_K/{input,output}_N.pb) in one process: every
// case is imported, compiled through the pass pipeline with its input shapes
// bound, run, and compared with the expected outputs (see compare.h). A case
// that throws is reported as an error and the runner goes on.
#pragma once

#include <string>
#include <vector>

#include "tessel/driver/json_util.h"
#include "tessel/driver/options.h"

namespace tessel {

struct CaseResult {
  std::string name;
  std::string status;  // "pass", "fail" (wrong result) or "error" (threw)
  std::string message;
  std::vector<std::string> interpreter_nodes;
  double time_ms = 0;

  Json to_json() const;
};

// Expands the command line's folders: a folder with model.onnx is a case; any
// other folder stands for its subfolders that are cases (sorted). Throws when
// a folder is missing or holds no case.
std::vector<std::string> find_test_cases(const std::vector<std::string>& dirs);

// Runs one case; never throws.
CaseResult run_onnx_test_case(const std::string& dir, const DriverOptions& o);

}  // namespace tessel
