// tessel bisect MODEL [--input NAME=FILE.npy]... [--emit-repro PATH] [--seed N]
// The work is driver/bisect.h's; this prints its report.
#include <iostream>

#include "tessel/driver/bisect.h"
#include "tessel/driver/json_util.h"
#include "tessel/tools/commands.h"

namespace tessel::cli {

namespace {

Json report_json(const std::string& model, const BisectReport& r) {
  Json j = Json::object();
  j["model"] = model;
  j["target"] = r.target;
  j["clean"] = r.clean();
  Json passes = Json::array();
  for (const PassCheck& p : r.passes)
    passes.push_back({{"pass", p.pass}, {"changed", p.changed}, {"checked", p.checked}, {"mismatch", p.mismatch}});
  j["passes"] = std::move(passes);
  j["bad_pass"] = r.bad_pass ? Json(r.passes[*r.bad_pass].pass) : Json();
  Json groups = Json::array();
  for (const GroupCheck& g : r.groups)
    groups.push_back({{"group", g.group}, {"mismatch", g.mismatch}, {"note", g.note}});
  j["groups"] = std::move(groups);
  j["bad_group"] = r.bad_group ? Json(r.groups[*r.bad_group].group) : Json();
  if (r.bad_group) {
    j["group_ir"] = r.group_ir;
    j["loop_ir"] = r.loop_ir;
  }
  if (!r.repro_files.empty()) {
    j["repro_files"] = r.repro_files;
    j["repro_command"] = r.repro_command;
  }
  return j;
}

void print_passes(const BisectReport& r) {
  std::cout << "passes (each that changed the model, interpreted against the unoptimised model):\n";
  for (size_t i = 0; i < r.passes.size(); ++i) {
    const PassCheck& p = r.passes[i];
    const char* status = !p.changed ? "unchanged" : !p.checked ? "not checked" : p.mismatch.empty() ? "ok" : "MISMATCH";
    std::cout << "  " << i + 1 << ". " << p.pass << ": " << status << "\n";
  }
}

void print_report(const BisectReport& r) {
  print_passes(r);
  for (const GroupCheck& g : r.groups)
    if (!g.note.empty()) std::cout << "note: " << g.group << ": " << g.note << "\n";
  if (r.bad_pass) {
    const PassCheck& p = r.passes[*r.bad_pass];
    std::cout << "first bad pass: " << p.pass << " (step " << *r.bad_pass + 1 << "): " << p.mismatch << "\n";
  }
  if (r.bad_group) {
    const GroupCheck& g = r.groups[*r.bad_group];
    std::cout << "first bad kernel: " << g.group << " (group " << *r.bad_group + 1 << " of the compiled ones, target "
              << r.target << "): " << g.mismatch << "\n"
              << "graph IR of " << g.group << ":\n" << r.group_ir << "loop IR of " << g.group << ":\n" << r.loop_ir;
    if (!r.repro_files.empty()) {
      std::cout << "reproducer:";
      for (const std::string& f : r.repro_files) std::cout << " " << f;
      std::cout << "\nreproduce with: " << r.repro_command << "\n";
    }
  } else {
    std::cout << "kernels: " << r.groups.size() << " compiled groups, each within the tolerance of the interpreter\n";
  }
  if (r.clean())
    std::cout << "clean: " << r.passes.size() << " passes (" << r.passes_checked() << " interpreted), "
              << r.groups.size() << " groups checked\n";
}

}  // namespace

int cmd_bisect(const BisectArgs& a, const CommonArgs& c) {
  BisectOptions o;
  o.driver = driver_options(c);
  o.driver.seed = a.seed;
  o.emit_repro = a.emit_repro;
  const BisectReport r = bisect_file(a.model, a.inputs, o);
  if (c.json) std::cout << json_line(report_json(a.model, r)) << "\n";
  else print_report(r);
  return r.clean() ? 0 : kBisectFound;
}

}  // namespace tessel::cli
