#include "tessel/runtime/memory_plan.h"

#include <algorithm>
#include <numeric>
#include <optional>
#include <set>

#include "tessel/ir/printer.h"
#include "tessel/support/error.h"

namespace tessel {

namespace {

int64_t align_up(int64_t n) { return checked_add(n, kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment; }

bool live_together(const BufferRequest& a, const BufferRequest& b) { return a.first <= b.last && b.first <= a.last; }

// Live range and size of each value the arena may hold, in write order.
struct Candidate {
  const Value* value;
  int64_t bytes;
  size_t first, last;
};

std::vector<Candidate> arena_candidates(const Graph& g, const std::vector<Step>& steps,
                                        const std::map<std::string, int64_t>& bindings) {
  std::set<const Value*> excluded(g.outputs.begin(), g.outputs.end());
  std::map<const Value*, size_t> last_read;
  for (size_t i = 0; i < steps.size(); ++i)
    for (const Value* v : step_reads(steps[i])) {
      last_read[v] = i;
      if (!steps[i].kernel) excluded.insert(v);  // the interpreter reads Tensors it owns
    }
  std::vector<Candidate> out;
  for (size_t i = 0; i < steps.size(); ++i) {
    if (!steps[i].kernel) continue;
    const Value* v = steps[i].kernel->params.back();
    if (excluded.count(v)) continue;
    const std::optional<int64_t> bytes = value_bytes(v, bindings);
    if (!bytes) continue;
    auto it = last_read.find(v);
    out.push_back({v, *bytes, i, it == last_read.end() ? i : std::max(i, it->second)});
  }
  return out;
}

// Union-find over candidates: a class shares one buffer.
struct Classes {
  std::vector<size_t> parent;
  size_t find(size_t i) {
    while (parent[i] != i) i = parent[i] = parent[parent[i]];
    return i;
  }
};

// The input of kernel step `k` whose storage candidate `out` may take over,
// or nullopt (see the header comment for why this is legal).
std::optional<size_t> in_place_source(const KernelStep& k, const Candidate& out, const std::vector<Candidate>& cands,
                                      const std::map<const Value*, size_t>& index, Classes& classes,
                                      const std::vector<size_t>& class_last) {
  if (!k.elementwise) return std::nullopt;
  for (size_t p = 0; p < k.num_inputs; ++p) {
    auto it = index.find(k.params[p]);
    if (it == index.end()) continue;
    const Candidate& in = cands[it->second];
    // Read twice as two params would be two loads of one element: still safe,
    // but params are distinct values, so this does not arise.
    if (in.last != out.first || in.bytes != out.bytes || in.value->type.dtype != out.value->type.dtype) continue;
    if (class_last[classes.find(it->second)] != out.first) continue;  // the shared buffer lives on
    return it->second;
  }
  return std::nullopt;
}

}  // namespace

std::optional<int64_t> value_bytes(const Value* v, const std::map<std::string, int64_t>& bindings) {
  if (!v->type.is_tensor() || !v->type.has_shape() || v->type.dtype == DType::String) return std::nullopt;
  int64_t n = dtype_storage_size(v->type.dtype);
  if (n <= 0) return std::nullopt;
  for (const Dim& d : *v->type.shape) {
    const std::optional<int64_t> e = d.eval(bindings);
    if (!e || *e < 0) return std::nullopt;
    n = checked_mul(n, *e);
  }
  return n;
}

ArenaLayout pack_buffers(const std::vector<BufferRequest>& requests) {
  ArenaLayout layout;
  layout.offsets.assign(requests.size(), 0);
  std::vector<size_t> order(requests.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return requests[a].size > requests[b].size; });
  std::vector<size_t> placed;
  for (size_t r : order) {
    const int64_t size = align_up(requests[r].size);
    // Placed buffers live at the same time as r, by offset.
    std::vector<size_t> busy;
    for (size_t p : placed)
      if (live_together(requests[p], requests[r])) busy.push_back(p);
    std::sort(busy.begin(), busy.end(), [&](size_t a, size_t b) { return layout.offsets[a] < layout.offsets[b]; });
    int64_t end = 0, best = -1, best_gap = 0;
    for (size_t p : busy) {
      const int64_t gap = layout.offsets[p] - end;
      if (gap >= size && (best < 0 || gap < best_gap)) {
        best = end;
        best_gap = gap;
      }
      end = std::max(end, layout.offsets[p] + align_up(requests[p].size));
    }
    layout.offsets[r] = best >= 0 ? best : end;
    layout.peak = std::max(layout.peak, layout.offsets[r] + size);
    placed.push_back(r);
  }
  return layout;
}

MemoryPlan plan_memory(const Graph& g, const std::vector<Step>& steps, const std::map<std::string, int64_t>& bindings) {
  const std::vector<Candidate> cands = arena_candidates(g, steps, bindings);
  std::map<const Value*, size_t> index;
  for (size_t i = 0; i < cands.size(); ++i) index.emplace(cands[i].value, i);

  MemoryPlan plan;
  Classes classes{std::vector<size_t>(cands.size())};
  std::iota(classes.parent.begin(), classes.parent.end(), 0);
  std::vector<size_t> class_last(cands.size());
  std::vector<const Value*> reuses(cands.size(), nullptr);
  for (size_t i = 0; i < cands.size(); ++i) {
    class_last[i] = cands[i].last;
    const std::optional<size_t> src =
        in_place_source(*steps[cands[i].first].kernel, cands[i], cands, index, classes, class_last);
    if (!src) continue;
    const size_t root = classes.find(*src);
    classes.parent[i] = root;
    class_last[root] = cands[i].last;
    reuses[i] = cands[*src].value;
  }

  // One request per class, spanning its members' live ranges.
  std::map<size_t, size_t> request_of;  // class root -> request
  std::vector<BufferRequest> requests;
  for (size_t i = 0; i < cands.size(); ++i) {
    const size_t root = classes.find(i);
    auto [it, fresh] = request_of.emplace(root, requests.size());
    if (fresh) requests.push_back({cands[i].bytes, cands[i].first, cands[i].last});
    BufferRequest& r = requests[it->second];
    r.size = std::max(r.size, cands[i].bytes);
    r.first = std::min(r.first, cands[i].first);
    r.last = std::max(r.last, cands[i].last);
  }
  const ArenaLayout layout = pack_buffers(requests);
  plan.peak_bytes = layout.peak;
  for (size_t i = 0; i < cands.size(); ++i) {
    const int64_t offset = layout.offsets[request_of.at(classes.find(i))];
    plan.values.push_back({cands[i].value, offset, cands[i].bytes, cands[i].first, cands[i].last, reuses[i]});
    plan.offsets.emplace(cands[i].value, offset);
    plan.total_bytes = checked_add(plan.total_bytes, align_up(cands[i].bytes));
  }
  return plan;
}

std::string print_memory_plan(const MemoryPlan& p, const std::map<std::string, int64_t>& bindings) {
  std::string binds;
  for (const auto& [sym, v] : bindings) binds += str_cat(binds.empty() ? "" : ", ", sym, "=", v);
  std::string out = str_cat("# memory plan", binds.empty() ? "" : " for " + binds, "\n", "peak_bytes ", p.peak_bytes,
                            "\n", "unplanned_bytes ", p.total_bytes, "  # one allocation per value\n",
                            "values ", p.values.size(), "\n");
  for (const PlannedValue& v : p.values) {
    out += str_cat(print_value_name(v.value->name), " offset ", v.offset, " bytes ", v.bytes, " steps ", v.first, "..", v.last);
    if (v.reuses) out += " in_place_of " + print_value_name(v.reuses->name);
    out += "\n";
  }
  return out;
}

}  // namespace tessel
