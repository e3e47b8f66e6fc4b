// tessel bisect (driver/bisect.h): a wrong pass and a wrong CPU kernel,
// planted through the test-only hooks (add_test_pass, set_test_kernel_fault),
// are found and named; correct models bisect clean; the reproducer of a
// wrong kernel shows the mismatch again, and only while the fault is there.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include <unistd.h>

#include "tessel/driver/bisect.h"
#include "tessel/driver/compiler.h"
#include "tessel/driver/model_loader.h"
#include "tessel/driver/npy.h"
#include "tessel/driver/session.h"
#include "tessel/interp/interpreter.h"
#include "tessel/passes/pass_manager.h"
#include "tessel/support/error.h"
#include "bisect_test_util.h"
#include "cli_test_util.h"

namespace tessel {
namespace {

namespace fs = std::filesystem;
using testing::bisect_demo;
using testing::demo_inputs;
using testing::plant_wrong_kernel;

// Removes the hooks whatever the test's outcome.
class Bisect : public ::testing::Test {
 protected:
  void TearDown() override {
    clear_test_passes();
    set_test_kernel_fault(nullptr);
  }
};

// The demo model's compiled groups as the CPU path plans them, found here
// without bisect: the pipeline, then lower_for_cpu.
FusionPlan demo_plan(std::unique_ptr<Model>* keep) {
  *keep = build_demo_model();
  DriverOptions o;
  compile_model(**keep, {}, o);
  return lower_for_cpu(**keep).plan;
}

TEST_F(Bisect, DemoModelBisectsClean) {
  const BisectReport r = bisect_demo();
  EXPECT_TRUE(r.clean());
  EXPECT_EQ(r.target, "cpu");
  ASSERT_FALSE(r.passes.empty());
  EXPECT_EQ(r.passes.back().pass, "prepack_weights");  // the CPU pipeline ran to its end
  EXPECT_GT(r.passes_checked(), 0);
  std::unique_ptr<Model> keep;
  size_t compiled = 0;
  for (const FusionGroup& g : demo_plan(&keep).groups) compiled += g.compiled;
  ASSERT_GE(compiled, 2u);
  EXPECT_EQ(r.groups.size(), compiled);
  for (const GroupCheck& g : r.groups) {
    EXPECT_EQ(g.mismatch, "") << g.group;
    EXPECT_EQ(g.note, "") << g.group << " compiled alone should be the model's kernel";
  }
  const std::string text = bisect_report_text(r);
  EXPECT_NE(text.find(str_cat("clean: ", r.passes.size(), " passes (", r.passes_checked(), " interpreted), ", compiled,
                              " groups checked")),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("first bad"), std::string::npos) << text;
}

TEST_F(Bisect, NamesAWrongPass) {
  // Relu -> Abs: same shapes and types, other values wherever the input is negative.
  add_test_pass("relu_to_abs", "simplify_algebra", [](Model& m) {
    for (auto& n : m.graph->nodes())
      if (n->op == "Relu") {
        n->op = "Abs";
        return true;
      }
    return false;
  });
  const BisectReport r = bisect_demo();
  ASSERT_TRUE(r.bad_pass.has_value());
  const PassCheck& bad = r.passes[*r.bad_pass];
  EXPECT_EQ(bad.pass, "relu_to_abs");
  EXPECT_NE(bad.mismatch.find("output probs"), std::string::npos) << bad.mismatch;
  ASSERT_GT(*r.bad_pass, 0u);
  EXPECT_EQ(r.passes[*r.bad_pass - 1].pass, "simplify_algebra");
  for (size_t i = 0; i < *r.bad_pass; ++i) EXPECT_EQ(r.passes[i].mismatch, "") << r.passes[i].pass;
  // The kernels compute the (wrong) optimised model faithfully.
  EXPECT_FALSE(r.bad_group.has_value());
  EXPECT_FALSE(r.clean());
  const std::string text = bisect_report_text(r);
  EXPECT_NE(text.find(str_cat("first bad pass: relu_to_abs (step ", *r.bad_pass + 1, "): output probs")),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("clean:"), std::string::npos) << text;
}

TEST_F(Bisect, AHarmlessTestPassIsNotNamed) {
  // Renaming a node changes nothing the interpreter computes.
  add_test_pass("rename", "dce", [](Model& m) {
    m.graph->nodes().front()->name = "renamed";
    return true;
  });
  const BisectReport r = bisect_demo();
  EXPECT_TRUE(r.clean());
  bool ran = false;
  for (const PassCheck& p : r.passes) ran = ran || (p.pass == "rename" && p.checked);
  EXPECT_TRUE(ran);
}

TEST_F(Bisect, NamesAWrongCpuKernelAndWritesAReproducer) {
  std::unique_ptr<Model> keep;
  const FusionPlan plan = demo_plan(&keep);
  std::vector<const FusionGroup*> compiled;
  for (const FusionGroup& g : plan.groups)
    if (g.compiled) compiled.push_back(&g);
  ASSERT_GE(compiled.size(), 2u);
  const FusionGroup& wrong = *compiled[1];  // not the first: the groups before it must pass
  const std::string root_output = wrong.root->outputs[wrong.root_output]->name;
  plant_wrong_kernel(root_output);

  const fs::path dir = fs::temp_directory_path() / ("tessel_bisect_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  BisectOptions o;
  o.emit_repro = (dir / "repro.tir").string();
  const BisectReport r = bisect_demo(o);
  EXPECT_FALSE(r.bad_pass.has_value());
  ASSERT_TRUE(r.bad_group.has_value());
  EXPECT_EQ(r.groups[*r.bad_group].group, wrong.name);
  EXPECT_EQ(*r.bad_group, 1u);
  EXPECT_EQ(r.groups[0].mismatch, "");
  EXPECT_NE(r.groups[*r.bad_group].mismatch.find("differ"), std::string::npos) << r.groups[*r.bad_group].mismatch;
  EXPECT_NE(r.loop_ir.find(wrong.name), std::string::npos) << r.loop_ir;
  EXPECT_NE(r.group_ir.find(wrong.root->op), std::string::npos) << r.group_ir;

  const std::string text = bisect_report_text(r);
  EXPECT_NE(text.find("first bad kernel: " + wrong.name + " (compiled group 2, target cpu): output"), std::string::npos)
      << text;
  EXPECT_NE(text.find("loop IR of " + wrong.name), std::string::npos) << text;
  EXPECT_NE(text.find("reproduce with: " + r.repro_command), std::string::npos) << text;

  // The reproducer: the group alone, its inputs and the interpreter's output.
  ASSERT_EQ(r.repro_files.front(), o.emit_repro);
  for (const std::string& f : r.repro_files) EXPECT_TRUE(fs::exists(f)) << f;
  EXPECT_NE(r.repro_command.find("tessel bisect " + o.emit_repro), std::string::npos) << r.repro_command;
  std::unique_ptr<Model> repro = load_model(o.emit_repro);
  ASSERT_EQ(repro->graph->inputs.size() + 2, r.repro_files.size());  // the model, its inputs, the expected output
  std::vector<std::string> specs;
  for (size_t i = 0; i < repro->graph->inputs.size(); ++i)
    specs.push_back(repro->graph->inputs[i]->name + "=" + r.repro_files[i + 1]);
  const BisectReport again = bisect_file(o.emit_repro, specs, {});
  ASSERT_TRUE(again.bad_group.has_value()) << "the reproducer does not show the mismatch";
  EXPECT_FALSE(again.bad_pass.has_value());
  // Its expected output is the interpreter's: the compiled repro matches it once the fault is gone.
  set_test_kernel_fault(nullptr);
  EXPECT_TRUE(bisect_file(o.emit_repro, specs, {}).clean());
  std::vector<RtValue> ins;
  for (size_t i = 0; i + 2 < r.repro_files.size(); ++i) ins.emplace_back(read_npy_file(r.repro_files[i + 1]));
  const Tensor expected = read_npy_file(r.repro_files.back());
  const std::vector<RtValue> got = Interpreter().run(*repro->graph, ins);
  EXPECT_EQ(compare_tensors(got.at(0).tensor, expected, Tolerance{0, 0}), "");
  // `tessel run` takes the reproducer as it is (a process without the fault:
  // its compiled output is the expected one).
  std::string run_args = o.emit_repro + " --save-outputs " + (dir / "out").string();
  for (const std::string& spec : specs) run_args += " --input " + spec;
  std::string log;
  ASSERT_EQ(testing::run_tessel("", "run " + run_args, &log), 0) << log;
  const Tensor ran = read_npy_file((dir / "out" / "output_0.npy").string());
  EXPECT_EQ(compare_tensors(ran, expected, bisect_tolerance(expected, Precision::FP32)), "");
  fs::remove_all(dir);
}

TEST_F(Bisect, BadInputIsAnError) {
  BisectOptions o;
  o.driver.target = Target::Reference;
  std::unique_ptr<Model> m = build_demo_model();
  EXPECT_THROW(bisect_model(*m, demo_inputs(*m), {}, o), Error);
  EXPECT_THROW(bisect_file("/nonexistent/model.onnx", {}, {}), Error);
  m = build_demo_model();
  EXPECT_THROW(bisect_model(*m, {}, {}, {}), Error);  // no inputs for a model that takes one
}

// The shared models ($TESSEL_MODELS_DIR, tests/CMakeLists.txt): a real model bisects clean.
TEST_F(Bisect, ModelResNet18BisectsClean) {
  const char* dir = std::getenv("TESSEL_MODELS_DIR");
  if (!dir) GTEST_SKIP() << "set TESSEL_MODELS_DIR to a folder of materialized models";
  const std::string path = std::string(dir) + "/resnet18.ts17.onnx";
  if (!fs::exists(path)) GTEST_SKIP() << path << " is missing";
  BisectOptions o;
  o.driver.dims = {{"batch", 1}};
  const BisectReport r = bisect_file(path, {}, o);
  EXPECT_TRUE(r.clean());
  EXPECT_GT(r.groups.size(), 10u);
}

}  // namespace
}  // namespace tessel
