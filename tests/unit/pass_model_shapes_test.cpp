// Symbolic-shape check on real models: after the pass pipeline (no --dim),
// every value must have a known shape made of integers and expressions in
// the main graph's input symbols. Reads materialized models (see
// ../shared/models/README.md) from $TESSEL_MODELS_DIR, named <model>.onnx;
// skips when the variable is not set. Prints each offending value with its
// producer, which is how missing or weak op inference is found.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <set>

#include "pass_test_util.h"
#include "tessel/frontend/onnx/importer.h"
#include "tessel/passes/pass_manager.h"
#include "tessel/passes/symbols.h"

namespace tessel {
namespace {

struct ShapeReport {
  size_t values = 0;
  std::vector<std::string> problems;
};

ShapeReport check_symbolic_shapes(const Model& m) {
  std::set<std::string> input_syms;
  for (const Value* v : m.graph->inputs) collect_type_symbols(v->type, &input_syms);
  ShapeReport r;
  for_each_graph(*m.graph, [&](Graph& g) {
    for (const auto& v : g.values()) {
      ++r.values;
      const Type& t = v->type;
      std::string why;
      if (t.kind != Type::Kind::Tensor) continue;  // sequences/optionals: element shapes vary
      if (t.dtype == DType::Undefined) why = "unknown element type";
      if (!t.shape) {
        why += why.empty() ? "unknown rank" : ", unknown rank";
      } else {
        std::set<std::string> syms;
        collect_type_symbols(t, &syms);
        for (const std::string& s : syms)
          if (!input_syms.count(s)) why += (why.empty() ? "" : ", ") + std::string("non-input symbol ") + s;
      }
      if (why.empty()) continue;
      std::string producer = v->producer ? v->producer->describe() : "(no producer)";
      r.problems.push_back(str_cat("@", g.name, " %", v->name, " : ", print_type(t), "  <- ", producer, ": ", why));
    }
  });
  return r;
}

TEST(PassModelShapes, EightModelsHaveSymbolicShapesInInputSymbolsOnly) {
  const char* dir = std::getenv("TESSEL_MODELS_DIR");
  if (!dir) GTEST_SKIP() << "set TESSEL_MODELS_DIR to a folder of materialized models";
  const char* names[] = {"resnet18.ts17",     "resnet50.ts17", "resnet50.dynamo", "mobilenet_v2.ts17",
                         "vit_b_16.ts17",     "bert_base.ts17", "gpt2.ts17",      "llama_tiny.dynamo"};
  size_t total_bad = 0;
  for (const char* name : names) {
    const std::string path = std::string(dir) + "/" + name + ".onnx";
    if (!std::filesystem::exists(path)) {
      ADD_FAILURE() << "missing " << path;
      continue;
    }
    std::unique_ptr<Model> m;
    try {
      m = import_onnx_file(path);
      PassOptions o;
      run_pipeline(*m, o);
    } catch (const Error& e) {
      ADD_FAILURE() << name << ": " << e.what();
      continue;
    }
    ShapeReport r = check_symbolic_shapes(*m);
    std::cout << name << ": " << r.values << " values, " << r.problems.size() << " without a shape in input symbols\n";
    for (size_t i = 0; i < r.problems.size() && i < 40; ++i) std::cout << "  " << r.problems[i] << "\n";
    total_bad += r.problems.size();
  }
  EXPECT_EQ(total_bad, 0u);
}

}  // namespace
}  // namespace tessel

namespace tessel {
namespace {

// fuse_attention on the exported transformers: every Softmax is part of an
// attention that becomes one Attention node (BERT, GPT-2 and ViT: 12;
// Llama: 4), and Llama's outputs stay those of the unfused model.
TEST(PassModelShapes, AttentionFusesInTheTransformers) {
  const char* dir = std::getenv("TESSEL_MODELS_DIR");
  if (!dir) GTEST_SKIP() << "set TESSEL_MODELS_DIR to a folder of materialized models";
  const std::map<std::string, size_t> expected = {
      {"bert_base.ts17", 12}, {"gpt2.ts17", 12}, {"vit_b_16.ts17", 12}, {"llama_tiny.dynamo", 4}};
  for (const auto& [name, count] : expected) {
    const std::string path = std::string(dir) + "/" + name + ".onnx";
    if (!std::filesystem::exists(path)) {
      ADD_FAILURE() << "missing " << path;
      continue;
    }
    std::unique_ptr<Model> m = import_onnx_file(path);
    PassOptions o;
    o.dims = {{"batch", 1}, {"seq", 16}};
    run_pipeline(*m, o);
    std::unique_ptr<Model> before = testing::clone(*m);
    EXPECT_EQ(testing::count_ops(*m->graph, "Softmax"), count) << name;
    EXPECT_TRUE(fuse_attention(*m)) << name;
    EXPECT_EQ(testing::count_ops(*m->graph, "Attention"), count) << name;
    EXPECT_EQ(testing::count_ops(*m->graph, "Softmax"), 0u) << name;
    if (std::string(name) == "llama_tiny.dynamo") testing::expect_same_results(*before, *m, {}, 1e-4);
  }
}

}  // namespace
}  // namespace tessel
