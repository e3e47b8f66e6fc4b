// Helpers for graph-pass tests: copying a model through its text form and
// comparing two models numerically on random inputs through the interpreter.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <string>

#include "tessel/interp/interpreter.h"
#include "tessel/ir/parser.h"
#include "tessel/ir/printer.h"
#include "tessel/ops/registry.h"
#include "tessel/support/error.h"

namespace tessel::testing {

inline std::unique_ptr<Model> clone(const Model& m) { return parse_model(print_model(m)); }

// Skips the test when an operator it needs is not registered (yet).
#define TS_REQUIRE_OPS(...)                                                     \
  do {                                                                          \
    for (const char* op_ : {__VA_ARGS__})                                       \
      if (!::tessel::OpRegistry::global().find("", op_))                       \
        GTEST_SKIP() << "operator " << op_ << " is not registered yet";        \
  } while (0)

inline Tensor random_tensor(DType dt, const std::vector<int64_t>& shape, std::mt19937* rng) {
  Tensor t(dt, shape);
  std::uniform_real_distribution<double> u(-2.0, 2.0);
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (is_float(dt)) t.set_f64(i, u(*rng));
    else if (dt == DType::Bool) t.set_i64(i, (*rng)() % 2);
    else t.set_i64(i, static_cast<int64_t>((*rng)() % 5));
  }
  return t;
}

// Random inputs for g's inputs, with symbols bound by `dims`.
inline std::vector<RtValue> random_inputs(const Graph& g, const std::map<std::string, int64_t>& dims,
                                          unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<RtValue> in;
  for (const Value* v : g.inputs) {
    std::vector<int64_t> shape;
    for (const Dim& d : *v->type.shape) {
      auto e = d.eval(dims);
      if (!e) throw Error("random_inputs: unbound dim " + d.str());
      shape.push_back(*e);
    }
    in.emplace_back(random_tensor(v->type.dtype, shape, &rng));
  }
  return in;
}

// Runs both models on the same random inputs (three seeds) and expects
// outputs of equal dtype and shape that agree to rtol/atol.
inline void expect_same_results(const Model& a, const Model& b, const std::map<std::string, int64_t>& dims = {},
                                double tol = 1e-6) {
  Interpreter interp;
  for (unsigned seed : {1u, 2u, 3u}) {
    auto in = random_inputs(*a.graph, dims, seed);
    auto ra = interp.run(*a.graph, in);
    auto rb = interp.run(*b.graph, in);
    ASSERT_EQ(ra.size(), rb.size());
    for (size_t i = 0; i < ra.size(); ++i) {
      const Tensor& x = ra[i].tensor;
      const Tensor& y = rb[i].tensor;
      ASSERT_EQ(x.dtype(), y.dtype()) << "output " << i;
      ASSERT_EQ(x.shape(), y.shape()) << "output " << i;
      for (int64_t k = 0; k < x.numel(); ++k) {
        const double p = x.get_f64(k), q = y.get_f64(k);
        ASSERT_NEAR(p, q, tol + tol * std::fabs(p)) << "output " << i << " element " << k;
      }
    }
  }
}

inline size_t count_ops(const Graph& g, const std::string& op) {
  size_t n = 0;
  for (const auto& node : g.nodes()) n += node->op == op;
  return n;
}

// The first node of `op` in g, or nullptr.
inline const Node* find_op(const Graph& g, const std::string& op) {
  for (const auto& n : g.nodes())
    if (n->op == op) return n.get();
  return nullptr;
}

}  // namespace tessel::testing
