#include "tessel/driver/random_inputs.h"

#include <algorithm>
#include <deque>
#include <set>

#include "tessel/support/error.h"

namespace tessel {

uint64_t SplitMix64::next() {
  uint64_t z = (s_ += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

double SplitMix64::uniform01() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

uint64_t SplitMix64::below(uint64_t n) { return n <= 1 ? 0 : next() % n; }

namespace {

// Ops whose output carries the values of (one of) their inputs unchanged, in
// another shape or type. Maps op -> input positions that pass through (-1 =
// every input).
int passthrough_input(const std::string& op) {
  if (op == "Cast" || op == "CastLike" || op == "Reshape" || op == "Unsqueeze" || op == "Squeeze" ||
      op == "Flatten" || op == "Identity" || op == "Expand" || op == "Transpose" || op == "Slice" || op == "Tile")
    return 0;
  if (op == "Concat") return -1;
  return -2;  // not a pass-through op
}

std::optional<int64_t> axis_size(const Value* data, int64_t axis, const std::map<std::string, int64_t>& dims) {
  if (!data || !data->type.has_shape()) return std::nullopt;
  const Shape& s = *data->type.shape;
  const auto rank = static_cast<int64_t>(s.size());
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) return std::nullopt;
  return s[static_cast<size_t>(axis)].eval(dims);
}

// The bound that node `n` imposes on its input `pos`, if it indexes.
std::optional<int64_t> bound_at(const Node& n, size_t pos, const std::map<std::string, int64_t>& dims) {
  if (!n.domain.empty() || pos != 1) return std::nullopt;
  const Value* data = n.input(0);
  try {
    if (n.op == "Gather" || n.op == "GatherElements" || n.op == "ScatterElements")
      return axis_size(data, n.attr_int("axis", 0), dims);
    if (n.op == "GatherND" || n.op == "ScatterND") {
      if (!data || !data->type.has_shape()) return std::nullopt;
      const int64_t b = n.op == "GatherND" ? n.attr_int("batch_dims", 0) : 0;
      std::optional<int64_t> best;
      for (int64_t k = b; k < static_cast<int64_t>(data->type.shape->size()); ++k) {
        auto sz = axis_size(data, k, dims);
        if (!sz) return std::nullopt;
        best = best ? std::min(*best, *sz) : *sz;
      }
      return best;
    }
  } catch (const Error&) {
  }
  return std::nullopt;
}

void collect_nodes(const Graph& g, std::vector<const Node*>* out) {
  for (const auto& n : g.nodes()) {
    out->push_back(n.get());
    for (const auto& [k, a] : n->attrs) {
      if (a.kind == Attribute::Kind::Graph && a.g) collect_nodes(*a.g, out);
      if (a.kind == Attribute::Kind::Graphs)
        for (const auto& sg : a.graphs)
          if (sg) collect_nodes(*sg, out);
    }
  }
}

}  // namespace

std::optional<int64_t> index_bound(const Graph& g, const Value* v, const std::map<std::string, int64_t>& dims) {
  std::vector<const Node*> nodes;
  collect_nodes(g, &nodes);
  std::map<const Value*, std::vector<std::pair<const Node*, size_t>>> uses;
  for (const Node* n : nodes)
    for (size_t i = 0; i < n->inputs.size(); ++i)
      if (n->inputs[i]) uses[n->inputs[i]].emplace_back(n, i);

  constexpr int kMaxDepth = 6;
  std::optional<int64_t> best;
  std::set<const Value*> seen{v};
  std::deque<std::pair<const Value*, int>> work{{v, 0}};
  while (!work.empty()) {
    auto [cur, depth] = work.front();
    work.pop_front();
    auto it = uses.find(cur);
    if (it == uses.end()) continue;
    for (auto [n, pos] : it->second) {
      if (auto b = bound_at(*n, pos, dims)) best = best ? std::min(*best, *b) : *b;
      const int pass = n->domain.empty() ? passthrough_input(n->op) : -2;
      if (depth >= kMaxDepth || pass == -2 || (pass >= 0 && static_cast<size_t>(pass) != pos)) continue;
      for (const Value* o : n->outputs)
        if (o && seen.insert(o).second) work.emplace_back(o, depth + 1);
    }
  }
  return best;
}

Tensor random_tensor(DType dt, const std::vector<int64_t>& shape, uint64_t seed, std::optional<int64_t> bound) {
  Tensor t(dt, shape);
  SplitMix64 rng(seed);
  const int64_t n = t.numel();
  if (dt == DType::String) {
    auto& strs = t.mutable_strings();
    for (int64_t i = 0; i < n; ++i) {
      std::string s(1 + rng.below(8), 'a');
      for (char& c : s) c = static_cast<char>('a' + rng.below(26));
      strs[static_cast<size_t>(i)] = std::move(s);
    }
    return t;
  }
  if (dt == DType::Bool) {
    for (int64_t i = 0; i < n; ++i) t.set_i64(i, static_cast<int64_t>(rng.below(2)));
    return t;
  }
  if (is_float(dt)) {
    for (int64_t i = 0; i < n; ++i) t.set_f64(i, 2.0 * rng.uniform01() - 1.0);
    return t;
  }
  TS_CHECK(is_int(dt), "cannot generate random values of dtype ", dtype_name(dt));
  int64_t hi = bound.value_or(8);
  // Keep within the type's non-negative range.
  const int bits = int_bits(dt) - (is_signed_int(dt) ? 1 : 0);
  if (bits < 62) hi = std::min<int64_t>(hi, int64_t{1} << bits);
  hi = std::max<int64_t>(hi, 1);
  for (int64_t i = 0; i < n; ++i) t.set_i64(i, static_cast<int64_t>(rng.below(static_cast<uint64_t>(hi))));
  return t;
}

Tensor random_input(const Graph& g, size_t index, const std::map<std::string, int64_t>& dims, uint64_t seed) {
  TS_CHECK(index < g.inputs.size(), "input index ", index, " out of range");
  const Value* v = g.inputs[index];
  const Type& t = v->type;
  TS_CHECK(t.is_tensor(), "input '", v->name, "' is a ", t.kind == Type::Kind::Sequence ? "sequence" : "optional",
           "; random values are only generated for tensors (pass it with --input)");
  TS_CHECK(t.dtype != DType::Undefined, "input '", v->name, "' has no declared dtype; pass it with --input");
  TS_CHECK(t.shape.has_value(), "input '", v->name, "' has no declared shape; pass it with --input");
  std::vector<int64_t> shape;
  for (const Dim& d : *t.shape) {
    auto val = d.eval(dims);
    TS_CHECK(val.has_value(), "input '", v->name, "': dimension '", d.str(),
             "' is not bound (use --dim SYMBOL=N or --input)");
    TS_CHECK(*val >= 0, "input '", v->name, "': dimension '", d.str(), "' evaluates to ", *val);
    shape.push_back(*val);
  }
  // Each input gets its own stream so that giving one input by file does not
  // change the values of the others.
  SplitMix64 mix(seed ^ (0xD1B54A32D192ED03ull * (index + 1)));
  const uint64_t s = mix.next();
  std::optional<int64_t> bound;
  if (is_int(t.dtype)) bound = index_bound(g, v, dims);
  return random_tensor(t.dtype, shape, s, bound);
}

}  // namespace tessel
