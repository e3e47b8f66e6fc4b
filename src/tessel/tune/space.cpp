#include "tessel/tune/space.h"

#include <algorithm>
#include <set>
#include <tuple>

#include "tessel/schedule/gemm.h"

namespace tessel {

namespace {

struct Tile {
  int mr, nr, lanes;
};

int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

// Register tiles for each vector width the target has: acc (mr * nr/lanes)
// + nr/lanes B vectors + one broadcast within the registers, at least 8
// accumulators (two FMA pipes of four cycles' latency), the tallest mr for
// each nr and the one two below it (a shorter tile wastes less on a small M).
std::vector<Tile> register_tiles(const CpuInfo& cpu, int64_t m) {
  std::vector<Tile> tiles;
  for (int lanes = 8; lanes <= cpu.vector_lanes_f32; lanes *= 2) {
    for (int vecs = 1; vecs <= 4; ++vecs) {
      const int nr = vecs * lanes;
      const int max_mr = std::min(32, (cpu.vector_registers - vecs - 1) / vecs);
      for (int mr : {max_mr, max_mr - 2, max_mr / 2}) {
        if (mr < 1 || mr * vecs < 8) continue;
        if (m > 0 && mr > round_up(m, 2) && mr != 1) continue;  // taller than the product
        tiles.push_back({mr, nr, lanes});
      }
      // A product of fewer rows than any tile above (a GEMV): one tile of
      // exactly its rows per B width; it streams B, so the accumulator count
      // that hides the FMA latency does not bound it.
      if (m > 0 && m < 8 && m * vecs + vecs + 1 <= cpu.vector_registers) tiles.push_back({static_cast<int>(m), nr, lanes});
    }
  }
  std::sort(tiles.begin(), tiles.end(), [](const Tile& a, const Tile& b) {
    return std::tie(a.lanes, a.nr, a.mr) < std::tie(b.lanes, b.nr, b.mr);
  });
  tiles.erase(std::unique(tiles.begin(), tiles.end(),
                          [](const Tile& a, const Tile& b) { return a.mr == b.mr && a.nr == b.nr && a.lanes == b.lanes; }),
              tiles.end());
  return tiles;
}

// Multiples of `step` near each target, at most `cap` and no larger than the
// extent rounded up (a block past the extent only costs stack).
std::vector<int64_t> block_sizes(std::initializer_list<int64_t> targets, int64_t step, int64_t extent, int64_t cap) {
  std::set<int64_t> out;
  const int64_t limit = extent > 0 ? std::min(cap, round_up(extent, step)) : cap;
  for (int64_t t : targets) {
    const int64_t v = std::min(std::max(step, t / step * step), limit / step * step);
    if (v >= step) out.insert(v);
  }
  return {out.begin(), out.end()};
}

// schedule/gemm.h b_panels_fit, from the kernel's facts.
bool reads_panels(const KernelFacts& f, const Tile& t) {
  const int64_t w = f.b_panel_width;
  return w > 0 && f.n > 0 && t.nr % w == 0 && w % t.lanes == 0 && round_up(f.n, t.nr) <= f.b_panel_columns;
}

constexpr int64_t kScratchFloats = (int64_t{1} << 20) / 4;  // gemm.h's 1 MiB cap per packed block

void gemm_space(const Schedule& base, const KernelFacts& f, const CpuInfo& cpu, std::vector<Schedule>* out) {
  const std::string mode = base.find("gemm.parallel") ? base.find("gemm.parallel")->attr("mode").value_or("tiles")
                                                      : "tiles";
  const std::vector<std::string> modes =
      mode == "serial" ? std::vector<std::string>{"serial"} : std::vector<std::string>{"tiles", "m_blocks"};
  for (const Tile& t : register_tiles(cpu, f.m)) {
    for (int64_t kc : block_sizes({128, 256, 512}, 16, f.k, 1024)) {
      for (int64_t mc : block_sizes({t.mr * 8, t.mr * 16, t.mr * 32}, t.mr, f.m, kScratchFloats / kc)) {
        for (int64_t nc : block_sizes({128, 256, 512, 1024}, t.nr, f.n, kScratchFloats / std::max(kc, mc))) {
          for (const std::string& md : modes) {
            for (int pack : {1, 0}) {
              GemmSchedule g;
              g.mr = t.mr;
              g.nr = t.nr;
              g.vector_lanes = t.lanes;
              g.mc = static_cast<int>(mc);
              g.kc = static_cast<int>(kc);
              g.nc = static_cast<int>(nc);
              g.parallel_over_m_blocks = md != "serial";
              g.parallel_over_n_blocks = md == "tiles";
              g.pack_a = pack != 0;
              g.pack_b = !reads_panels(f, t);
              Schedule s = base;
              add_gemm_knobs(g, &s);
              out->push_back(std::move(s));
            }
          }
        }
      }
    }
  }
}

// Both orientations of a convolution's GEMM (conv.gemm rows=...): the
// other one has M and N swapped, and only the positions-as-rows one may
// read prepacked weight panels (passes/prepack_weights.cpp packs them for
// the default orientation; the other reads them as A, or packs B).
void conv_space(const Schedule& base, const KernelFacts& f, const CpuInfo& cpu, std::vector<Schedule>* out) {
  const Primitive* p = base.find("conv.gemm");
  const std::string rows = p ? p->attr("rows").value_or("channels") : "channels";
  gemm_space(base, f, cpu, out);
  KernelFacts other = f;
  std::swap(other.m, other.n);
  other.b_panel_width = other.b_panel_columns = 0;
  other.conv_rows = rows == "positions" ? "channels" : "positions";
  Schedule flipped = base;
  flipped.get("conv.gemm").set("rows", rows == "positions" ? "channels" : "positions");
  gemm_space(flipped, other, cpu, out);
}

void nest_space(const Schedule& base, const CpuInfo& cpu, bool vector, std::vector<Schedule>* out) {
  const bool parallel = base.find("nest.parallel") && base.find("nest.parallel")->int_attr("on", 0) != 0;
  for (int on : parallel ? std::vector<int>{1, 0} : std::vector<int>{0}) {
    std::vector<int> widths{0};  // 0: the width is not a knob of this kind
    if (vector) {
      widths.clear();
      for (int w = 4; w <= 2 * cpu.vector_lanes_f32; w *= 2) widths.push_back(w);
    }
    for (int w : widths) {
      Schedule s = base;
      if (w) s.get("nest.vector").set("width", w);
      s.get("nest.parallel").set("on", on);
      out->push_back(std::move(s));
    }
  }
}

// The depthwise kernel's rows per block and widest vector, each with the
// parallel loop on and off.
void depthwise_space(const Schedule& base, const CpuInfo& cpu, std::vector<Schedule>* out) {
  std::vector<Schedule> tiles;
  for (int rows : {1, 2, 3, 4})
    for (int lanes = 8; lanes <= std::max(8, cpu.vector_lanes_f32); lanes *= 2) {
      Schedule s = base;
      Primitive& t = s.get("depthwise.tile");
      t.set("rows", rows);
      t.set("lanes", lanes);
      tiles.push_back(std::move(s));
    }
  for (const Schedule& t : tiles) nest_space(t, cpu, false, out);
}

}  // namespace

std::vector<Schedule> search_space(const Schedule& def, const KernelFacts& f, const CpuInfo& cpu) {
  std::vector<Schedule> all;
  if (def.kind == "gemm") gemm_space(def, f, cpu, &all);
  if (def.kind == "conv_gemm") conv_space(def, f, cpu, &all);
  if (def.kind == "nest") nest_space(def, cpu, true, &all);
  if (def.kind == "depthwise") depthwise_space(def, cpu, &all);
  std::vector<Schedule> out{def};
  for (Schedule& s : all) {
    if (s == def) continue;
    try {
      check_schedule(s);
    } catch (const std::exception&) {
      continue;  // e.g. mc not a multiple of mr after the caps
    }
    out.push_back(std::move(s));
  }
  return out;
}

namespace {

size_t knob_distance(const Schedule& a, const Schedule& b) {
  size_t d = 0;
  for (const Primitive& p : a.prims) {
    const Primitive* q = b.find(p.name);
    if (!q) {
      d += p.attrs.size();
      continue;
    }
    for (const auto& [k, v] : p.attrs)
      if (q->attr(k) != v) ++d;
  }
  return d;
}

}  // namespace

std::vector<Schedule> neighbours(const Schedule& s, const std::vector<Schedule>& space) {
  std::vector<Schedule> out;
  for (const Schedule& c : space)
    if (const size_t d = knob_distance(s, c); d >= 1 && d <= 2) out.push_back(c);
  return out;
}

}  // namespace tessel
