#include "tessel/tune/gpu_space.h"

#include <algorithm>
#include <optional>
#include <set>

#include "tessel/codegen/cuda/mma_gemm.h"
#include "tessel/loop/visit.h"

namespace tessel {

namespace {

// `base` with `name`.`key` = value for each given pair.
Schedule with(const Schedule& base, const std::string& name,
              std::initializer_list<std::pair<const char*, int64_t>> values) {
  Schedule s = base;
  Primitive& p = s.get(name);
  for (const auto& [k, v] : values) p.set(k, v);
  return s;
}

// The default's value first, then the others in the order given, once each.
std::vector<int64_t> default_first(int64_t def, std::initializer_list<int64_t> others) {
  std::vector<int64_t> out{def};
  for (int64_t v : others)
    if (std::find(out.begin(), out.end(), v) == out.end()) out.push_back(v);
  return out;
}

// The plan's choices the tile knobs steer.
bool same_plan(const cuda::MmaPlan& a, const cuda::MmaPlan& b) {
  return a.tiles.bm == b.tiles.bm && a.tiles.bn == b.tiles.bn && a.tiles.bk == b.tiles.bk && a.stages == b.stages &&
         a.wgmma == b.wgmma && a.wgmma_overlap == b.wgmma_overlap && a.tma == b.tma;
}

// The tile knobs (bk, stages, tma_bn) one at a time over the default: only
// the values that change the plan of this kernel's Contract (all of them
// when it is not known).
void tile_space(const Schedule& def, const KernelFacts& f, const GpuDevice& d, std::vector<Schedule>* out) {
  const Primitive* g = def.find("gpu.gemm");
  const std::vector<Primitive> base = g ? std::vector<Primitive>{*g} : std::vector<Primitive>{};
  const auto plan_of = [&](const std::vector<Primitive>& knobs) {
    return cuda::plan_mma_gemm(*f.gpu_contract, cuda::gemm_target_for(d.arch, knobs));
  };
  std::optional<cuda::MmaPlan> plan;
  if (f.gpu_contract.defined()) plan = plan_of(base);
  const std::pair<const char*, std::vector<int64_t>> knobs[] = {
      {"bk", {32, 64}}, {"stages", {4, 3, 2}}, {"tma_bn", {128, 256}}};
  for (const auto& [key, values] : knobs)
    for (int64_t v : values) {
      if (knob_int(def.prims, "gpu.gemm", key, 0) == v) continue;
      Schedule s = with(def, "gpu.gemm", {{key, v}});
      if (plan && same_plan(*plan, plan_of({*s.find("gpu.gemm")}))) continue;
      out->push_back(std::move(s));
    }
}

// The tile of a tensor-core GEMM follows from fill_blocks (the first tile,
// largest first, that gives that many blocks; codegen/cuda/mma_gemm.cpp
// tiles_for), the TMA kernel from its K thresholds: values spread around
// one wave of the machine. Then the tile knobs (tile_space).
void gemm_space(const Schedule& def, const KernelFacts& facts, const GpuDevice& d, std::vector<Schedule>* out) {
  const int64_t sm = std::max(1, d.sm_count);
  const int64_t fill = knob_int(def.prims, "gpu.gemm", "fill_blocks", 120);
  const std::vector<int64_t> fills = default_first(fill, {sm, sm / 2, 2 * sm, sm / 4, 4 * sm, 1});
  const bool can_wgmma = cuda::arch_has_wgmma(d.arch);
  const int64_t wgmma = can_wgmma ? knob_int(def.prims, "gpu.gemm", "wgmma", 1) : 0;
  const int64_t min_k = knob_int(def.prims, "gpu.gemm", "tma_min_k", 1024), min_k_cheap = knob_int(def.prims, "gpu.gemm", "tma_min_k_cheap", 256);
  const int64_t tma = knob_int(def.prims, "gpu.gemm", "tma", 1), overlap = knob_int(def.prims, "gpu.gemm", "overlap", 1);
  struct Tma {
    int64_t on, min_k, min_k_cheap;
  };
  const std::vector<Tma> tmas = {{tma, min_k, min_k_cheap}, {1 - tma, min_k, min_k_cheap}, {1, 0, 0}};
  for (int64_t w : can_wgmma ? default_first(wgmma, {1 - wgmma}) : std::vector<int64_t>{0}) {
    for (int64_t f : fills) {
      if (f < 1) continue;
      if (!w) {  // mma.sync: the TMA kernel and the overlap are wgmma's
        out->push_back(with(def, "gpu.gemm", {{"wgmma", 0}, {"fill_blocks", f}}));
        continue;
      }
      for (const Tma& t : tmas)
        for (int64_t o : default_first(overlap, {1 - overlap}))
          out->push_back(with(def, "gpu.gemm", {{"wgmma", 1}, {"fill_blocks", f}, {"tma", t.on}, {"tma_min_k", t.min_k},
                                                {"tma_min_k_cheap", t.min_k_cheap}, {"overlap", o}}));
    }
  }
  tile_space(def, facts, d, out);
}

// The row lowering (schedule/gpu_schedule.h) reads threads and vector_bytes
// for a flat kernel, row_cache for a row-reduction one; lanes decides which.
void rows_space(const Schedule& def, const KernelFacts& f, const GpuDevice& d, std::vector<Schedule>* out) {
  const int64_t threads = knob_int(def.prims, "gpu.rows", "threads", 256), vec = knob_int(def.prims, "gpu.rows", "vector_bytes", 16);
  const int64_t cache = knob_int(def.prims, "gpu.rows", "row_cache", 1);
  std::vector<int64_t> all_threads{threads};
  for (int64_t t = 64; t <= std::min<int64_t>(1024, d.max_threads_per_block); t *= 2)
    if (t != threads) all_threads.push_back(t);
  const std::vector<int64_t> vectors = default_first(vec, {16, 8, 4});
  if (f.gpu_row_blocks) {
    for (int64_t c : default_first(cache, {1 - cache})) out->push_back(with(def, "gpu.rows", {{"lanes", 1}, {"row_cache", c}}));
  }
  const int64_t lanes = f.gpu_row_blocks ? 0 : knob_int(def.prims, "gpu.rows", "lanes", 1);
  for (int64_t t : all_threads)
    for (int64_t v : vectors) out->push_back(with(def, "gpu.rows", {{"lanes", lanes}, {"threads", t}, {"vector_bytes", v}}));
}

void flash_space(const Schedule& def, const GpuDevice& d, std::vector<Schedule>* out) {
  if (!cuda::arch_has_wgmma(d.arch)) return;  // one form: mma.sync
  const int64_t wgmma = knob_int(def.prims, "gpu.flash", "wgmma", 1), min_keys = knob_int(def.prims, "gpu.flash", "min_keys", 512);
  for (int64_t w : default_first(wgmma, {1 - wgmma}))
    for (int64_t k : default_first(min_keys, {0})) out->push_back(with(def, "gpu.flash", {{"wgmma", w}, {"min_keys", k}}));
}

// Knob values in which two schedules differ.
size_t distance(const Schedule& a, const Schedule& b) {
  size_t d = 0;
  for (const Primitive& p : a.prims) {
    const Primitive* q = b.find(p.name);
    for (const auto& [k, v] : p.attrs)
      if (!q || q->attr(k) != v) ++d;
  }
  return d;
}

}  // namespace

KernelFacts gpu_kernel_facts(const loop::Kernel& k, const std::string& kind) {
  KernelFacts f;
  f.kind = kind;
  loop::visit_stmt(k.body, [&](const loop::Stmt& s) {
    if (s->kind == loop::StmtKind::For && s->for_kind == loop::ForKind::GpuLanes) f.gpu_row_blocks = true;
    if (s->kind == loop::StmtKind::Contract && kind == "gpu_mma" && !f.gpu_contract.defined()) f.gpu_contract = s;
  }, [](const loop::Expr&) {});
  if (!k.params.empty()) {
    int64_t n = 1;
    for (const loop::Expr& d : k.params.back()->shape) {
      int64_t v = 0;
      n = n > 0 && loop::as_const_int(d, &v) ? n * v : 0;
    }
    f.out_elements = n;
  }
  return f;
}

std::vector<Schedule> gpu_search_space(const Schedule& def, const KernelFacts& f, const GpuDevice& d, size_t cap) {
  std::vector<Schedule> all;
  if (def.kind == "gpu_mma") gemm_space(def, f, d, &all);
  if (def.kind == "gpu") rows_space(def, f, d, &all);
  if (def.kind == "gpu_attention") flash_space(def, d, &all);
  std::vector<Schedule> out{def};
  for (Schedule& s : all) {
    if (std::find(out.begin(), out.end(), s) != out.end()) continue;
    try {
      check_schedule(s);
    } catch (const std::exception&) {
      continue;
    }
    out.push_back(std::move(s));
  }
  // Nearest the default first (one knob changed, then two, ...), the
  // generation order among equals: a search that stops early has tried
  // each knob on its own.
  std::stable_sort(out.begin() + 1, out.end(),
                   [&](const Schedule& a, const Schedule& b) { return distance(a, def) < distance(b, def); });
  if (out.size() > cap) out.resize(std::max<size_t>(cap, 1));
  return out;
}

}  // namespace tessel
