// blocked_layout (CPU target; on by default, --knob conv.blocked.on=0 turns
// it off): the activations
// that convolution networks store between kernels are stored channel-blocked
// (tessel::ToBlocked, ops/conv/blocked.cpp: [N, C/16, H, W, 16]), so that a
// convolution's output tile of 16 channels is one contiguous store and its
// taps read 16 consecutive channels (docs/layouts.md says why and what was
// measured).
//
// A value v is stored blocked when
//   - it is 4-D f32 of constant shape, with a channel count that 16
//     divides, and neither a graph output nor read by a subgraph;
//   - its producer is a convolution (group 1), an elementwise op, a pooling
//     window, a constant Pad or a Slice of the spatial axes: an op whose
//     kernel writes the blocked index as cheaply as the plain one;
//   - every consumer reads it through an index expression that stays
//     contiguous over the block: a group-1 Conv (as its input), an
//     elementwise op, MaxPool/AveragePool/GlobalAveragePool, Pad, Slice;
//   - it is stored in any case: read twice, or by a kernel that does not
//     fuse its producer (a Conv, a pool, a Pad or Slice in front of a Conv),
//     or a Conv's output added to a later Conv's.
//     A value with one elementwise consumer is fused into it and never
//     stored, so its layout does not matter;
//   - the kernel that makes it fuses no producer that cannot write the
//     blocked index (a depthwise conv under a Clip), and every Conv that
//     reads it either stores its own output blocked or takes the positions
//     as its GEMM's rows by its shapes alone (over a blocked input it must,
//     and into a plain output that scatters: MobileNet's expansions).
// The block is 16 floats, one AVX-512 vector; on AVX2 it is two vectors.
//
// The rewrite is
//
//   v = P(...)                 v = P(...); vb = tessel::ToBlocked(v)
//   w = C(v, ...)        =>    w = C(tessel::FromBlocked(vb), ...)
//
// with one FromBlocked per consuming node (a reader's own ToBlocked of v,
// winograd_conv's, becomes v's block), so that fusion takes each into
// its consumer's kernel and the ToBlocked into the producer's: no kernel
// converts on its own, and no pair of conversions meets in one kernel.
// The graph computes the same values (FromBlocked(ToBlocked(v)) is v).
#include <algorithm>
#include <map>

#include "tessel/passes/infer_util.h"
#include "tessel/passes/pass_manager.h"
#include "tessel/schedule/gemm.h"

namespace tessel {

namespace {

constexpr int64_t kBlock = 16;

bool plain(const Node& n, const char* op) { return n.domain.empty() && n.op == op; }

bool is_elementwise(const Node& n) {
  const OpSchema* s = OpRegistry::global().find(n.domain, n.op);
  return s && s->fusion == FusionKind::Elementwise;
}

// A group-1 2-D f32 Conv of constant shapes: what the conv GEMM lowers
// (lower/conv_gemm.cpp) and reads a blocked input for.
bool blockable_conv(const Node& n) {
  if (!plain(n, "Conv") || n.attr_int("group", 1) != 1 || n.outputs.size() != 1 || !n.outputs[0]) return false;
  std::vector<int64_t> xd, wd;
  return static_dims_of(n.input(0), &xd) && static_dims_of(n.input(1), &wd) && xd.size() == 4 && wd.size() == 4;
}

// A Pad in constant mode that pads the spatial axes only (N and C not).
bool spatial_pad(const Node& n) {
  if (!plain(n, "Pad") || n.attr_string("mode", "constant") != "constant") return false;
  if (n.inputs.size() > 3 && n.input(3)) return false;  // axes
  const Value* pads = n.inputs.size() > 1 ? n.input(1) : nullptr;
  if (!pads || !pads->is_constant() || pads->constant->numel() != 8) return false;
  for (int64_t i : {0, 1, 4, 5})
    if (pads->constant->get_i64(i) != 0) return false;
  return true;
}

// A Slice with constant axes, all of them spatial (2 or 3, or -2, -1).
bool spatial_slice(const Node& n) {
  if (!plain(n, "Slice") || n.inputs.size() < 4 || !n.input(3) || !n.input(3)->is_constant()) return false;
  const Tensor& axes = *n.input(3)->constant;
  for (int64_t i = 0; i < axes.numel(); ++i) {
    const int64_t a = axes.get_i64(i);
    if (a != 2 && a != 3 && a != -1 && a != -2) return false;
  }
  return true;
}

bool pool(const Node& n) { return plain(n, "MaxPool") || plain(n, "AveragePool"); }

bool writes_blocked_cheaply(const Node& n) {
  return blockable_conv(n) || is_elementwise(n) || pool(n) || spatial_pad(n) || spatial_slice(n);
}

// A ToBlocked to 16-channel blocks (winograd_conv's, over the blocked
// layout): the value's block, once it is stored blocked.
bool blocks_of_16(const Node& n) {
  return n.domain == "tessel" && n.op == "ToBlocked" && n.attr_int("block", 16) == kBlock;
}

// Whether `n` reads its input `slot` in place through a blocked index, and
// whether it then stores `v` in any case (does not fuse its producer).
bool reads_blocked(const Node& n, size_t slot, bool* stores_input) {
  *stores_input = true;
  if (blocks_of_16(n)) return true;
  if (blockable_conv(n)) return slot == 0;
  if (pool(n) || plain(n, "GlobalAveragePool") || spatial_pad(n) || spatial_slice(n)) return slot == 0;
  *stores_input = false;
  return is_elementwise(n);
}

struct Use {
  Node* node;
  size_t slot;
};
using UseMap = std::map<Value*, std::vector<Use>>;

// Every use of each value by this graph's nodes; values read by a subgraph
// are in `escapes`.
void collect_uses(Graph& g, UseMap* uses, std::set<const Value*>* escapes) {
  for (auto& n : g.nodes()) {
    for (size_t i = 0; i < n->inputs.size(); ++i)
      if (n->inputs[i]) (*uses)[n->inputs[i]].push_back({n.get(), i});
    if (has_subgraphs(*n)) {
      // Conservative: a node with subgraphs may read any outer value.
      for (const auto& v : g.values()) escapes->insert(v.get());
      return;
    }
  }
  for (const Value* v : g.outputs) escapes->insert(v);
}

// Whether the elementwise `n` reads, after `v`, another input that a Conv
// makes: one kernel holds one contraction, and fusion gives `n` to the later
// Conv (it visits nodes from the outputs back), so that `v` is stored (a
// residual Add of a block's last Conv and the downsampling one).
bool second_conv_operand(const Node& n, const Value* v, const std::map<const Node*, size_t>& position) {
  if (!plain(*v->producer, "Conv")) return false;
  for (const Value* other : n.inputs)
    if (other && other != v && other->producer && plain(*other->producer, "Conv") &&
        position.at(other->producer) > position.at(v->producer))
      return true;
  return false;
}

const std::vector<Use>* uses_of(const UseMap& uses, const Value* v) {
  const auto it = uses.find(const_cast<Value*>(v));
  return it == uses.end() ? nullptr : &it->second;
}

// Whether the kernel that ends in `p` writes a blocked index cheaply: p
// does, and so does every producer fused into it through a chain of
// elementwise ops (an input with one use). A depthwise conv under a Clip
// does not: its kernel would be split from the Clip's.
bool fused_chain_writes_cheaply(const Node& p, const UseMap& uses) {
  if (!writes_blocked_cheaply(p)) return false;
  if (!is_elementwise(p)) return true;
  for (const Value* in : p.inputs) {
    const std::vector<Use>* u = in && in->producer ? uses_of(uses, in) : nullptr;
    if (!u || u->size() != 1 || in->producer->domain == "tessel") continue;  // stored, or an index expression
    if (!fused_chain_writes_cheaply(*in->producer, uses)) return false;
  }
  return true;
}

// The value the kernel that computes `v` stores: v, or the end of the
// chain of single elementwise consumers it fuses into.
const Value* stored_value(const Value* v, const UseMap& uses) {
  for (;;) {
    const std::vector<Use>* u = uses_of(uses, v);
    if (!u || u->size() != 1 || !is_elementwise(*u->front().node) || !u->front().node->outputs[0]) return v;
    v = u->front().node->outputs[0];
  }
}

bool blockable_value(const Value* v, const UseMap& uses, const std::set<const Value*>& escapes,
                     const std::map<const Node*, size_t>& position) {
  std::vector<int64_t> d;
  const std::vector<Use>* all = uses_of(uses, v);
  if (!all || !v->producer || escapes.count(v) || v->type.dtype != DType::F32) return false;
  const std::vector<Use>& uses_v = *all;
  if (!static_dims_of(v, &d) || d.size() != 4 || d[1] % kBlock != 0) return false;
  if (!fused_chain_writes_cheaply(*v->producer, uses)) return false;
  // Already blocked for all its readers.
  if (std::all_of(uses_v.begin(), uses_v.end(), [](const Use& u) { return blocks_of_16(*u.node); })) return false;
  bool stored = uses_v.size() > 1;
  for (const Use& u : uses_v) {
    bool stores_input = false;
    if (!reads_blocked(*u.node, u.slot, &stores_input)) return false;
    stored = stored || stores_input || second_conv_operand(*u.node, v, position);
  }
  return stored;
}

// A conv over a blocked input takes the positions as its rows (so that a
// row's taps are one block); with a plain output it would then store each
// row of its output tile with a scatter. Where its shapes alone would not
// make the positions the rows (MobileNet's expansions: 16 to 96 channels
// into a depthwise conv), its input stays plain; to a fixed point, since a
// conv whose input stays plain may have been the reason its own input was
// blocked.
void drop_blocked_inputs_of_plain_outputs(const UseMap& uses, std::vector<Value*>* blocked) {
  for (bool changed = true; changed;) {
    changed = false;
    const std::set<const Value*> set(blocked->begin(), blocked->end());
    const auto keeps = [&](const Value* v) {
      for (const Use& u : *uses_of(uses, v))
        if (blockable_conv(*u.node) && !conv_rows_are_positions_by_shape(*u.node) &&
            !set.count(stored_value(u.node->outputs[0], uses)))
          return false;
      return true;
    };
    const auto end = std::remove_if(blocked->begin(), blocked->end(), [&](const Value* v) { return !keeps(v); });
    changed = end != blocked->end();
    blocked->erase(end, blocked->end());
  }
}

}  // namespace

bool block_conv_layouts(Model& m) {
  Graph& g = *m.graph;
  UseMap uses;
  std::set<const Value*> escapes;
  collect_uses(g, &uses, &escapes);
  std::map<const Node*, size_t> position;
  for (auto& n : g.nodes()) position.emplace(n.get(), position.size());
  // Values in node order (collected first: the rewrite inserts nodes).
  std::vector<Value*> blocked;
  for (auto& n : g.nodes())
    for (Value* v : n->outputs)
      if (v && blockable_value(v, uses, escapes, position)) blocked.push_back(v);
  drop_blocked_inputs_of_plain_outputs(uses, &blocked);
  for (Value* v : blocked) {
    const std::vector<Use>& us = uses[v];
    const Shape& s = *v->type.shape;
    // The block a reader made already, else a new one before the first
    // consumer in node order (the uses are in that order).
    const auto made = std::find_if(us.begin(), us.end(), [](const Use& u) { return blocks_of_16(*u.node); });
    Node* to = made != us.end() ? made->node
                                : g.insert_node_before(us.front().node, "ToBlocked", {v}, 1,
                                                       {{"block", Attribute::of_int(kBlock)}});
    to->domain = "tessel";
    to->outputs[0]->type = Type::tensor(DType::F32, {s[0], Dim(s[1].value() / kBlock), s[2], s[3], Dim(kBlock)});
    for (const Use& u : us) {
      if (blocks_of_16(*u.node)) {
        if (u.node != to) g.replace_all_uses(u.node->outputs[0], to->outputs[0]);
        continue;
      }
      Node* from = g.insert_node_before(u.node, "FromBlocked", {to->outputs[0]}, 1,
                                        {{"channels", Attribute::of_int(s[1].value())}});
      from->domain = "tessel";
      from->outputs[0]->type = v->type;
      u.node->inputs[u.slot] = from->outputs[0];
    }
  }
  // A reused block may come after readers that now read it.
  if (!blocked.empty()) {
    g.topo_sort();
    eliminate_dead_code(m);
  }
  return !blocked.empty();
}

}  // namespace tessel
