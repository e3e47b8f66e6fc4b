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

}  // namespace

int cmd_bisect(const BisectArgs& a, const CommonArgs& c) {
  BisectOptions o;
  o.driver = driver_options(c);
  o.driver.seed = a.seed;
  o.emit_repro = a.emit_repro;
  const BisectReport r = bisect_file(a.model, a.inputs, o);
  if (c.json) std::cout << json_line(report_json(a.model, r)) << "\n";
  else std::cout << bisect_report_text(r);
  return r.clean() ? 0 : kBisectFound;
}

}  // namespace tessel::cli
