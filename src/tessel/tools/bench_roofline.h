// The per-step profile of `tessel bench --profile` and `tessel report`: each
// step's median time, its cost, and on the CPU its roofline columns and the
// model summary (runtime/roofline.h against driver/host_ceilings.h;
// docs/roofline.md).
#pragma once

#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "tessel/driver/json_util.h"
#include "tessel/runtime/roofline.h"
#include "tessel/runtime/executable.h"
#include "tessel/runtime/step.h"
#include "tessel/runtime/step_cost.h"

namespace tessel::cli {

// The q-quantile (0..1) of sorted samples, interpolating between neighbours.
double quantile(const std::vector<double>& sorted, double q);

// What a step computes: the kernel's name and its ops ("k3_softmax
// [Add,Softmax]"), or the node the interpreter runs.
std::string step_label(const Step& s);

// The symbol values of the graph's inputs as given.
std::map<std::string, int64_t> input_bindings(const Graph& g, const std::vector<RtValue>& inputs);

struct ProfileRow {
  size_t step;
  std::string what;
  double median_ms, share;
  StepCost cost;                      // bytes moved at least, contraction flops
  std::optional<RooflinePoint> roof;  // against the CPU's ceilings
};

// Every step, slowest first: median time over the runs, its share of the
// summed medians, and what the step moves and computes at these sizes.
std::vector<ProfileRow> profile_rows(const std::vector<Step>& steps, const std::vector<RunProfile>& runs,
                                     const std::map<std::string, int64_t>& bindings);

// Sets every row's roofline against the ceilings its step can reach
// (step_ceilings); the summary over all of them.
RooflineSummary add_rooflines(std::vector<ProfileRow>* rows, const std::vector<Step>& steps, const CpuCeilings& c,
                              int threads, const std::map<std::string, int64_t>& bindings);

// A row as the JSON of bench --profile --json: step, what, median_ms, share,
// bytes, flops, then the roofline fields when it has them.
Json profile_row_json(const ProfileRow& r);

// The ceilings a step can reach: one thread's for the interpreter, a kernel
// without a parallel loop or one whose loop has a single iteration; else
// the pool's (`threads`).
const CeilingSet& step_ceilings(const Step& s, const CpuCeilings& c, int threads,
                                const std::map<std::string, int64_t>& bindings);

// The column titles, then one step's cells, of the text table.
std::string roofline_header();
std::string roofline_cells(const RooflinePoint& p);

// The row's roofline fields, added to its JSON object.
void add_roofline_json(const RooflinePoint& p, Json* row);

// Lines after the table: the pool's ceilings, time by limiter, the model at the bounds.
void print_roofline_summary(std::ostream& out, const RooflineSummary& s, const CpuCeilings& c, int threads);
Json roofline_summary_json(const RooflineSummary& s, const CpuCeilings& c);

}  // namespace tessel::cli
