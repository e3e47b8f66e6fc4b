#include "tessel/lower/lower_gpu.h"

#include "tessel/loop/intrinsics.h"
#include "tessel/loop/math_expand.h"
#include "tessel/loop/simplify.h"
#include "tessel/loop/visit.h"
#include "tessel/ops/lowering.h"
#include "tessel/support/error.h"

namespace tessel {

NestSchedule gpu_nest_schedule() { return gpu_nest_schedule(false); }

NestSchedule gpu_nest_schedule(bool attention) {
  NestSchedule s;
  s.vector_width = 1;
  s.parallel = true;
  s.gemm = false;
  s.gpu_gemm = true;
  s.gpu_attention = attention;
  return s;
}

LoweredGroup lower_group_gpu_nest(const FusionGroup& g, const OpRegistry& reg, bool attention) {
  LoweredGroup lg = lower_group(g, reg, gpu_nest_schedule(attention));
  static const std::set<std::string> native = loop::cuda_native_intrinsics();
  loop::Kernel k = loop::simplify(loop::expand_math(lg.kernel, native));
  loop::visit_stmt(k.body, [](const loop::Stmt&) {}, [&](const loop::Expr& root) {
    loop::visit_expr(root, [&](const loop::Expr& e) {
      if (e->kind == loop::ExprKind::Call && !loop::is_primitive_intrinsic(e->name) && !native.count(e->name))
        throw LoweringUnsupported(str_cat(g.root->describe(), ": intrinsic '", e->name, "' has no expansion yet"));
    });
  });
  lg.kernel = std::move(k);
  return lg;
}

LoweredGroup lower_group_for_gpu(const FusionGroup& g, const OpRegistry& reg, const GpuScheduleOptions& o) {
  LoweredGroup lg = lower_group_gpu_nest(g, reg, o.attention);
  lg.kernel = schedule_for_gpu(lg.kernel, o);
  lg.parallel_extent.reset();  // the grid covers the iterations now
  const bool mma = lg.schedule == "contract" || lg.schedule == "conv_contract";
  lg.schedule = mma ? "gpu_mma" : lg.schedule == "attention" ? "gpu_attention" : "gpu";
  // The CPU nest's knobs do not apply; the GPU row schedule's do (the GEMM
  // and flash templates' knobs are the code generator's: the driver adds them).
  lg.sched = Schedule{lg.schedule, {}};
  if (lg.schedule == "gpu") {
    Primitive& rows = lg.sched.get("gpu.rows");
    rows.set("threads", o.threads_per_block);
    rows.set("lanes", o.lanes ? 1 : 0);
    rows.set("row_cache", o.row_cache ? 1 : 0);
    rows.set("vector_bytes", o.vector_bytes);
  }
  return lg;
}

}  // namespace tessel
