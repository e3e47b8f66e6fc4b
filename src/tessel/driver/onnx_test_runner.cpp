#include "tessel/driver/onnx_test_runner.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <new>
#include <sstream>

#include "tessel/driver/compare.h"
#include "tessel/driver/session.h"
#include "tessel/frontend/onnx/importer.h"
#include "tessel/support/error.h"

namespace tessel {

namespace fs = std::filesystem;

Json CaseResult::to_json() const {
  Json j = Json::object();
  j["name"] = name;
  j["status"] = status;
  j["message"] = message;
  Json ops = Json::array();
  for (const auto& op : interpreter_nodes) ops.push_back(op);
  j["interpreter_nodes"] = std::move(ops);
  j["time_ms"] = time_ms;
  return j;
}

namespace {

bool is_case(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p / "model.onnx", ec);
}

// Folders named <prefix><K>, or files <prefix><K>.pb, sorted by K.
std::vector<fs::path> numbered(const fs::path& dir, const std::string& prefix, const std::string& suffix) {
  std::vector<std::pair<long, fs::path>> found;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.size() <= prefix.size() + suffix.size() || name.compare(0, prefix.size(), prefix) != 0 ||
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
      continue;
    const std::string num = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
    if (num.empty() || num.size() > 9 || !std::all_of(num.begin(), num.end(), [](char c) { return c >= '0' && c <= '9'; }))
      continue;
    found.emplace_back(std::stol(num), e.path());
  }
  std::sort(found.begin(), found.end());
  std::vector<fs::path> out;
  for (size_t i = 0; i < found.size(); ++i) {
    TS_CHECK(found[i].first == static_cast<long>(i), dir.filename().string(), ": ", prefix, i, suffix, " is missing");
    out.push_back(found[i].second);
  }
  return out;
}

RtValue read_pb(const fs::path& p, const Type& t) {
  RtValue v;
  TS_CHECK(read_value_pb_file(p.string(), t, &v), p.parent_path().filename().string(), "/", p.filename().string(),
           ": cannot be read as ", t.str());
  return v;
}

// Runs one data set; returns "" on success or the mismatch.
std::string run_data_set(const fs::path& case_dir, const fs::path& ds, const DriverOptions& o,
                         std::vector<std::string>* ops) {
  std::unique_ptr<Model> m = import_onnx_file((case_dir / "model.onnx").string());
  m->source_path = (case_dir / "model.onnx").string();
  const Graph& g0 = *m->graph;
  const auto in_files = numbered(ds, "input_", ".pb");
  const auto out_files = numbered(ds, "output_", ".pb");
  TS_CHECK(in_files.size() == g0.inputs.size(), "the model has ", g0.inputs.size(), " inputs but ",
           ds.filename().string(), " has ", in_files.size(), " input files");
  TS_CHECK(out_files.size() == g0.outputs.size(), "the model has ", g0.outputs.size(), " outputs but ",
           ds.filename().string(), " has ", out_files.size(), " output files");
  std::map<std::string, RtValue> given;
  for (size_t i = 0; i < in_files.size(); ++i) given[g0.inputs[i]->name] = read_pb(in_files[i], g0.inputs[i]->type);
  std::vector<RtValue> expected;
  std::vector<std::string> out_names;
  for (size_t i = 0; i < out_files.size(); ++i) {
    expected.push_back(read_pb(out_files[i], g0.outputs[i]->type));
    out_names.push_back(g0.outputs[i]->name);
  }

  std::ostringstream notes;
  const auto dims = bind_symbols(g0, given, {}, &notes);
  fold_shape_inputs(*m, given, o.target);
  compile_model(*m, dims, o);
  const auto inputs = assemble_inputs(*m->graph, given, dims, 0, &notes);
  ExecResult r = execute(*m, inputs, o.target, o.threads);
  *ops = r.interpreter_ops;
  TS_CHECK(r.outputs.size() == expected.size(), "produced ", r.outputs.size(), " outputs, expected ", expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    std::string msg = compare_values(r.outputs[i], expected[i]);
    if (!msg.empty()) return str_cat("output ", i, " '", out_names[i], "': ", msg);
  }
  return "";
}

}  // namespace

std::vector<std::string> find_test_cases(const std::vector<std::string>& dirs) {
  std::vector<std::string> out;
  for (const auto& d : dirs) {
    std::error_code ec;
    TS_CHECK(fs::is_directory(d, ec), d, ": not a folder");
    if (is_case(d)) {
      out.push_back(d);
      continue;
    }
    std::vector<std::string> sub;
    for (const auto& e : fs::directory_iterator(d, ec))
      if (e.is_directory(ec) && is_case(e.path())) sub.push_back(e.path().string());
    TS_CHECK(!sub.empty(), d, ": no model.onnx in it or in its subfolders (not an ONNX test case folder)");
    std::sort(sub.begin(), sub.end());
    out.insert(out.end(), sub.begin(), sub.end());
  }
  return out;
}

CaseResult run_onnx_test_case(const std::string& dir, const DriverOptions& o) {
  CaseResult r;
  fs::path p(dir);
  while (p.has_parent_path() && p.filename().empty()) p = p.parent_path();  // trailing '/'
  r.name = p.filename().string();
  const auto t0 = std::chrono::steady_clock::now();
  try {
    const auto sets = numbered(p, "test_data_set_", "");
    TS_CHECK(!sets.empty(), "no test_data_set_* folder");
    for (const auto& ds : sets) {
      std::string msg = run_data_set(p, ds, o, &r.interpreter_nodes);
      if (!msg.empty()) {
        r.status = "fail";
        r.message = sets.size() > 1 ? ds.filename().string() + ": " + msg : msg;
        break;
      }
    }
    if (r.status.empty()) r.status = "pass";
  } catch (const std::bad_alloc&) {
    r.status = "error";
    r.message = "out of memory";
  } catch (const std::exception& e) {
    r.status = "error";
    r.message = e.what();
  } catch (...) {
    r.status = "error";
    r.message = "unknown exception";
  }
  r.time_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace tessel
