// What the tests of tessel bisect share (tests/unit/bisect_test.cpp and, on
// a GPU, tests/gpu/bisect_gpu_test.cpp): the demo CNN with its input, and a
// wrong kernel planted through set_test_kernel_fault (driver/compiler.h).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tessel/driver/bisect.h"
#include "tessel/driver/compiler.h"
#include "tessel/driver/demo.h"
#include "tessel/driver/random_inputs.h"
#include "tessel/loop/visit.h"

namespace tessel::testing {

inline std::vector<RtValue> demo_inputs(const Model& m) { return {RtValue(random_input(*m.graph, 0, {}, 7))}; }

inline BisectReport bisect_demo(const BisectOptions& o = {}) {
  std::unique_ptr<Model> m = build_demo_model();
  return bisect_model(*m, demo_inputs(*m), {}, o);
}

// Every store to `out` stores one more: a kernel that is wrong everywhere.
inline loop::Stmt add_one_to_stores(const loop::Stmt& s, const loop::BufferRef& out) {
  if (s->kind == loop::StmtKind::Store && s->buffer == out)
    return loop::store(out, s->indices, s->value + loop::float_imm(out->dtype, 1.0));
  return loop::map_stmt(s, [](const loop::Expr& e) { return e; },
                        [&](const loop::Stmt& c) { return add_one_to_stores(c, out); });
}

// Makes the kernel of the group whose root computes the value `root_output`
// wrong (by name: the group keeps it when bisect compiles it alone).
inline void plant_wrong_kernel(const std::string& root_output) {
  set_test_kernel_fault([root_output](const FusionGroup& g, loop::Kernel& k) {
    if (g.root->outputs[g.root_output]->name != root_output) return;
    k.body = add_one_to_stores(k.body, k.params.back());
  });
}

}  // namespace tessel::testing
