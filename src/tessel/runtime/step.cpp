#include "tessel/runtime/step.h"

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

}  // namespace

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

}  // namespace tessel
