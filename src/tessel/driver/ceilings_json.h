// The machine's ceilings (runtime/ceilings.h) as JSON: the cache file's
// payload, `tessel ceilings --json` and the "ceilings" of `tessel bench
// --profile --json` (docs/roofline.md lists the fields).
#pragma once

#include "tessel/driver/json_util.h"
#include "tessel/runtime/ceilings.h"

namespace tessel {

// Bumped when the kernels or the plan change what a figure means, so that a
// cache of the old meaning is measured again.
constexpr int kCeilingsFormat = 1;

Json ceiling_set_to_json(const CeilingSet& s);
Json ceilings_to_json(const CpuCeilings& c);

// A tessel::Error naming what is missing, mistyped or not positive, or a
// format other than kCeilingsFormat.
CpuCeilings ceilings_from_json(const Json& j);

}  // namespace tessel
