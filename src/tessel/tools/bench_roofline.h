// The roofline columns and model summary of `tessel bench --profile` on the
// CPU (runtime/roofline.h against driver/host_ceilings.h; docs/roofline.md).
#pragma once

#include <map>
#include <ostream>
#include <string>

#include "tessel/driver/json_util.h"
#include "tessel/runtime/roofline.h"
#include "tessel/runtime/step.h"

namespace tessel::cli {

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
