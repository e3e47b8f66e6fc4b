#include "tessel/tools/bench_roofline.h"

#include <algorithm>
#include <cstdio>
#include <optional>

#include "tessel/driver/ceilings_json.h"
#include "tessel/interp/interpreter.h"
#include "tessel/support/error.h"

namespace tessel::cli {

namespace {

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string padded(const std::string& s, int width) {
  return s.size() >= size_t(width) ? s : std::string(size_t(width) - s.size(), ' ') + s;
}

}  // namespace

double quantile(const std::vector<double>& sorted, double q) {
  const double pos = q * static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(pos);
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - static_cast<double>(lo));
}

std::string step_label(const Step& s) {
  if (!s.kernel) return str_cat("interpreter ", s.interp->describe());
  std::string ops;
  for (const Node* n : s.kernel->nodes) ops += (ops.empty() ? "" : ",") + n->op;
  return str_cat(s.kernel->name, " [", ops, "]");
}

std::map<std::string, int64_t> input_bindings(const Graph& g, const std::vector<RtValue>& inputs) {
  std::map<std::string, int64_t> bindings;
  for (size_t i = 0; i < inputs.size() && i < g.inputs.size(); ++i)
    check_value_matches(inputs[i], g.inputs[i]->type, g.inputs[i]->name, &bindings);
  return bindings;
}

std::vector<ProfileRow> profile_rows(const std::vector<Step>& steps, const std::vector<RunProfile>& runs,
                                     const std::map<std::string, int64_t>& bindings) {
  std::vector<ProfileRow> rows;
  double total = 0;
  for (size_t i = 0; i < steps.size(); ++i) {
    std::vector<double> t;
    for (const RunProfile& r : runs) t.push_back(r.step_seconds[i] * 1e3);
    std::sort(t.begin(), t.end());
    rows.push_back({i, step_label(steps[i]), quantile(t, 0.5), 0, step_cost(steps[i], bindings), std::nullopt});
    total += rows.back().median_ms;
  }
  std::sort(rows.begin(), rows.end(), [](const ProfileRow& x, const ProfileRow& y) { return x.median_ms > y.median_ms; });
  for (ProfileRow& r : rows) r.share = total > 0 ? r.median_ms / total : 0;
  return rows;
}

RooflineSummary add_rooflines(std::vector<ProfileRow>* rows, const std::vector<Step>& steps, const CpuCeilings& c,
                              int threads, const std::map<std::string, int64_t>& bindings) {
  std::vector<RooflinePoint> points;
  for (ProfileRow& r : *rows) {
    const CeilingSet& set = step_ceilings(steps[r.step], c, threads, bindings);
    points.push_back(*(r.roof = roofline_point(r.cost, r.median_ms / 1e3, set)));
  }
  return summarize_roofline(points);
}

Json profile_row_json(const ProfileRow& r) {
  Json row = Json::object();
  row["step"] = r.step;
  row["what"] = r.what;
  row["median_ms"] = r.median_ms;
  row["share"] = r.share;
  row["bytes"] = r.cost.bytes;
  row["flops"] = r.cost.flops;
  if (r.roof) add_roofline_json(*r.roof, &row);
  return row;
}

const CeilingSet& step_ceilings(const Step& s, const CpuCeilings& c, int threads,
                                const std::map<std::string, int64_t>& bindings) {
  if (!s.kernel || !s.kernel->parallel) return c.for_threads(1);
  const std::optional<int64_t> n = s.kernel->parallel_extent.eval(bindings);
  return n && *n <= 1 ? c.for_threads(1) : c.for_threads(threads);
}

std::string roofline_header() {
  return "       MB    GB/s    GFLOP  GFLOP/s  FLOP/B  level  bound ms  %bound  limiter";
}

std::string roofline_cells(const RooflinePoint& p) {
  const double s = p.seconds;
  std::string out = fmt("%9.2f", p.bytes / 1e6) + fmt("%8.1f", s > 0 ? p.bytes / s / 1e9 : 0);
  out += p.flops > 0 ? fmt("%9.3f", p.flops / 1e9) + fmt("%9.1f", s > 0 ? p.flops / s / 1e9 : 0) +
                           fmt("%8.1f", p.intensity)
                     : padded("-", 9) + padded("-", 9) + padded("-", 8);
  out += padded(p.level, 7) + fmt("%10.3f", p.bound_s * 1e3) + fmt("%7.1f%%", 100 * p.of_bound);
  return out + padded(limiter_name(p.limiter), 9);
}

void add_roofline_json(const RooflinePoint& p, Json* row) {
  Json& r = *row;
  r["intensity"] = p.intensity;
  r["achieved_flops_per_s"] = p.seconds > 0 ? p.flops / p.seconds : 0;
  r["achieved_bytes_per_s"] = p.seconds > 0 ? p.bytes / p.seconds : 0;
  r["level"] = p.level;
  r["compute_ms"] = p.compute_s * 1e3;
  r["memory_ms"] = p.memory_s * 1e3;
  r["launch_ms"] = p.launch_s * 1e3;
  r["bound_ms"] = p.bound_s * 1e3;
  r["attainable_flops_per_s"] = p.attainable_flops_per_s;
  r["of_bound"] = p.of_bound;
  r["limiter"] = limiter_name(p.limiter);
  r["why"] = p.why;
}

void print_roofline_summary(std::ostream& out, const RooflineSummary& s, const CpuCeilings& c, int threads) {
  const CeilingSet& pool = c.for_threads(threads);
  out << "  ceilings, " << threads << " threads (tessel ceilings, measured " << c.measured_at << "): FMA "
      << fmt("%.1f", pool.fma_flops_per_s / 1e9) << " GFLOP/s; read";
  for (const MemoryLevel& lv : pool.levels)
    out << (&lv == &pool.levels.front() ? " " : ", ") << lv.name << " " << fmt("%.1f", lv.read_bytes_per_s / 1e9);
  out << " GB/s; launch " << fmt("%.2f", pool.launch_s * 1e6) << " us\n";
  out << "  time by limiter:";
  for (int l = 0; l < kLimiters; ++l) {
    const RooflineSummary::Part& part = s.by_limiter[size_t(l)];
    out << (l ? ";" : "") << " " << limiter_name(Limiter(l)) << " " << fmt("%.3f", part.seconds * 1e3) << " ms ("
        << fmt("%.1f", s.seconds > 0 ? 100 * part.seconds / s.seconds : 0) << "%, " << part.steps << " steps, "
        << fmt("%.0f", part.seconds > 0 ? 100 * part.bound_s / part.seconds : 0) << "% of bound)";
  }
  const size_t steps = size_t(s.by_limiter[0].steps + s.by_limiter[1].steps + s.by_limiter[2].steps);
  out << "\n  at the bounds the " << steps << " steps would take " << fmt("%.3f", s.bound_s * 1e3)
      << " ms; they took " << fmt("%.3f", s.seconds * 1e3) << " ms ("
      << fmt("%.0f", s.seconds > 0 ? 100 * s.bound_s / s.seconds : 0) << "% of bound)\n";
}

Json roofline_summary_json(const RooflineSummary& s, const CpuCeilings& c) {
  Json j = Json::object();
  j["ceilings"] = ceilings_to_json(c);
  Json by = Json::object();
  for (int l = 0; l < kLimiters; ++l) {
    const RooflineSummary::Part& part = s.by_limiter[size_t(l)];
    Json p = Json::object();
    p["ms"] = part.seconds * 1e3;
    p["bound_ms"] = part.bound_s * 1e3;
    p["steps"] = part.steps;
    by[limiter_name(Limiter(l))] = p;
  }
  j["by_limiter"] = by;
  j["steps_ms"] = s.seconds * 1e3;
  j["bound_ms"] = s.bound_s * 1e3;
  j["of_bound"] = s.seconds > 0 ? s.bound_s / s.seconds : 0;
  return j;
}

}  // namespace tessel::cli
