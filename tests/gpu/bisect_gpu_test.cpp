// tessel bisect --target cuda (driver/bisect.h) on the GPU: the demo CNN
// bisects clean, and a wrong CUDA kernel planted through
// set_test_kernel_fault is named. Skips without a GPU.
#include <gtest/gtest.h>

#include "gpu_test_util.h"
#include "../unit/bisect_test_util.h"
#include "tessel/driver/cuda_compiler.h"
#include "tessel/driver/session.h"

namespace tessel {
namespace {

BisectOptions cuda_options() {
  BisectOptions o;
  o.driver.target = Target::Cuda;
  return o;
}

TEST(GpuBisect, DemoModelBisectsClean) {
  SKIP_WITHOUT_GPU();
  const BisectReport r = testing::bisect_demo(cuda_options());
  EXPECT_TRUE(r.clean()) << bisect_report_text(r);
  EXPECT_EQ(r.target, "cuda");
  EXPECT_GE(r.groups.size(), 2u);
}

TEST(GpuBisect, NamesAWrongCudaKernel) {
  SKIP_WITHOUT_GPU();
  // The demo's compiled GPU groups, found here without bisect.
  std::unique_ptr<Model> m = build_demo_model();
  compile_model(*m, {}, cuda_options().driver);
  const CompiledModel plan = lower_for_cuda(*m);
  std::vector<const FusionGroup*> compiled;
  for (const FusionGroup& g : plan.plan.groups)
    if (g.compiled) compiled.push_back(&g);
  ASSERT_GE(compiled.size(), 2u);
  const FusionGroup& wrong = *compiled.back();
  testing::plant_wrong_kernel(wrong.root->outputs[wrong.root_output]->name);
  const BisectReport r = testing::bisect_demo(cuda_options());
  set_test_kernel_fault(nullptr);
  ASSERT_TRUE(r.bad_group.has_value()) << bisect_report_text(r);
  EXPECT_EQ(r.groups[*r.bad_group].group, wrong.name);
  EXPECT_EQ(*r.bad_group + 1, compiled.size());
  EXPECT_FALSE(r.bad_pass.has_value());
}

}  // namespace
}  // namespace tessel
