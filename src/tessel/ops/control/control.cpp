// Control flow: If, Loop, Scan. Their bodies are subgraphs (Attribute::g)
// whose nodes may read values of the enclosing graphs directly; the kernels
// run them through KernelContext::run_subgraph, and inference asks the
// shape-inference pass for the body's output types (or, without it, trusts the
// body's declared output types).
#include <algorithm>

#include "tessel/ops/common.h"
#include "tessel/ops/control/control_util.h"
#include "tessel/ops/registry.h"

namespace tessel {

namespace {

using ctl::fresh_dim;
using ctl::merge_types;
using ctl::subgraph_output_types;

// ---- If ------------------------------------------------------------------------

void check_if_branches(const Node& n, const Graph& th, const Graph& el) {
  TS_CHECK(th.inputs.empty() && el.inputs.empty(), n.describe(), ": If branches take no inputs");
  TS_CHECK(th.outputs.size() == n.outputs.size() && el.outputs.size() == n.outputs.size(), n.describe(),
           ": then_branch has ", th.outputs.size(), " outputs and else_branch ", el.outputs.size(),
           " but the node has ", n.outputs.size());
}

void infer_if(InferContext& ctx) {
  const Node& n = ctx.node;
  if (ctx.has_input(0)) {
    const Type& c = ctx.input_type(0);
    TS_CHECK(c.is_tensor() && (c.dtype == DType::Bool || c.dtype == DType::Undefined), n.describe(),
             ": condition must be a bool tensor, got ", c.str());
  }
  Graph& th = n.attr_graph("then_branch");
  Graph& el = n.attr_graph("else_branch");
  check_if_branches(n, th, el);
  // A constant condition selects one branch, whose types are then exact.
  if (const Tensor* c = ctx.input_const(0)) {
    Graph& taken = ctl::read_bool_scalar(*c, n, "condition") ? th : el;
    std::vector<Type> t = subgraph_output_types(ctx, taken, {});
    for (size_t i = 0; i < t.size(); ++i) ctx.set_output_type(i, t[i]);
    return;
  }
  std::vector<Type> tt = subgraph_output_types(ctx, th, {});
  std::vector<Type> et = subgraph_output_types(ctx, el, {});
  for (size_t i = 0; i < n.outputs.size(); ++i) ctx.set_output_type(i, merge_types(tt[i], et[i], n, i));
}

void kernel_if(KernelContext& ctx) {
  const Node& n = ctx.node;
  const Graph& th = n.attr_graph("then_branch");
  const Graph& el = n.attr_graph("else_branch");
  check_if_branches(n, th, el);
  const bool c = ctl::read_bool_scalar(ctx.input(0), n, "condition");
  std::vector<RtValue> out = ctx.run_subgraph(c ? th : el, {});
  TS_CHECK(out.size() == n.outputs.size(), n.describe(), ": branch produced ", out.size(), " outputs");
  for (size_t i = 0; i < out.size(); ++i) ctx.set_output_value(i, std::move(out[i]));
}

// ---- Loop ------------------------------------------------------------------------
//
// Inputs: M (optional trip count), cond (optional), then N loop-carried values.
// Body: (iteration_num, cond_in, carried...) -> (cond_out, carried..., K scan
// outputs). Node outputs: N final carried values, then K scan outputs, each the
// per-iteration values stacked along a new axis 0.

struct LoopSig {
  size_t n_carried = 0, n_scan = 0;
};

LoopSig loop_signature(const Node& n, const Graph& body) {
  const size_t n_in = n.inputs.size();
  TS_CHECK(n_in >= 2, n.describe(), ": Loop needs the M and cond inputs (possibly empty)");
  LoopSig s;
  s.n_carried = n_in - 2;
  TS_CHECK(body.inputs.size() == s.n_carried + 2, n.describe(), ": body has ", body.inputs.size(),
           " inputs, expected ", s.n_carried + 2, " (iteration number, condition, ", s.n_carried, " carried)");
  TS_CHECK(body.outputs.size() >= s.n_carried + 1, n.describe(), ": body has ", body.outputs.size(),
           " outputs, expected at least ", s.n_carried + 1);
  s.n_scan = body.outputs.size() - 1 - s.n_carried;
  TS_CHECK(n.outputs.size() == s.n_carried + s.n_scan, n.describe(), ": node has ", n.outputs.size(),
           " outputs, body gives ", s.n_carried, " carried + ", s.n_scan, " scan outputs");
  return s;
}

void infer_loop(InferContext& ctx) {
  const Node& n = ctx.node;
  Graph& body = n.attr_graph("body");
  const LoopSig s = loop_signature(n, body);
  if (ctx.has_input(0)) {
    const Type& m = ctx.input_type(0);
    TS_CHECK(m.is_tensor() && (m.dtype == DType::I64 || m.dtype == DType::Undefined), n.describe(),
             ": trip count M must be int64, got ", m.str());
  }
  if (ctx.has_input(1)) {
    const Type& c = ctx.input_type(1);
    TS_CHECK(c.is_tensor() && (c.dtype == DType::Bool || c.dtype == DType::Undefined), n.describe(),
             ": cond must be bool, got ", c.str());
  }
  std::vector<Type> in{Type::tensor(DType::I64, {}), Type::tensor(DType::Bool, {})};
  for (size_t i = 0; i < s.n_carried; ++i)
    in.push_back(ctx.has_input(2 + i) ? ctx.input_type(2 + i) : body.inputs[2 + i]->type);
  std::vector<Type> out = subgraph_output_types(ctx, body, in);
  TS_CHECK(out.size() == body.outputs.size(), n.describe(), ": body inference gave ", out.size(), " outputs");
  // A carried value may change shape between iterations. Its type is the
  // body's (an optional initial value may become a plain one, as ONNX types it).
  for (size_t i = 0; i < s.n_carried; ++i)
    ctx.set_output_type(i, in[2 + i].kind == out[1 + i].kind ? merge_types(in[2 + i], out[1 + i], n, i) : out[1 + i]);
  // The trip count is only known at run time (cond may end the loop early).
  const Dim trips = fresh_dim(n, 0, "trips");
  for (size_t k = 0; k < s.n_scan; ++k) {
    const Type& t = out[1 + s.n_carried + k];
    TS_CHECK(t.is_tensor(), n.describe(), ": scan output ", k, " must be a tensor, got ", t.str());
    if (!t.shape) {
      ctx.set_output_unknown_shape(s.n_carried + k, t.dtype);
      continue;
    }
    Shape sh = *t.shape;
    sh.insert(sh.begin(), trips);
    ctx.set_output(s.n_carried + k, t.dtype, sh);
  }
}

void kernel_loop(KernelContext& ctx) {
  const Node& n = ctx.node;
  const Graph& body = n.attr_graph("body");
  const LoopSig s = loop_signature(n, body);
  const bool has_m = ctx.has_input(0);
  int64_t max_trips = 0;
  if (has_m) max_trips = ctl::read_int_scalar(ctx.input(0), n, "trip count M");
  bool cond = ctx.has_input(1) ? ctl::read_bool_scalar(ctx.input(1), n, "cond") : true;

  std::vector<RtValue> carried;
  for (size_t i = 0; i < s.n_carried; ++i) carried.push_back(ctx.input_value(2 + i));
  std::vector<std::vector<Tensor>> scans(s.n_scan);

  std::vector<RtValue> in(2 + s.n_carried);
  for (int64_t it = 0; cond && (!has_m || it < max_trips); ++it) {
    in[0] = Tensor::scalar_i64(it);
    in[1] = ctl::scalar_bool(cond);
    for (size_t i = 0; i < s.n_carried; ++i) in[2 + i] = std::move(carried[i]);
    std::vector<RtValue> out = ctx.run_subgraph(body, in);
    TS_CHECK(out.size() == body.outputs.size(), n.describe(), ": body produced ", out.size(), " outputs");
    TS_CHECK(out[0].is_tensor(), n.describe(), ": body condition output is not a tensor");
    cond = ctl::read_bool_scalar(out[0].tensor, n, "body condition output");
    for (size_t i = 0; i < s.n_carried; ++i) carried[i] = std::move(out[1 + i]);
    for (size_t k = 0; k < s.n_scan; ++k) {
      RtValue& v = out[1 + s.n_carried + k];
      TS_CHECK(v.is_tensor(), n.describe(), ": scan output ", k, " must be a tensor");
      scans[k].push_back(std::move(v.tensor));
    }
  }
  for (size_t i = 0; i < s.n_carried; ++i) ctx.set_output_value(i, std::move(carried[i]));
  for (size_t k = 0; k < s.n_scan; ++k) {
    const size_t o = s.n_carried + k;
    if (scans[k].empty()) {
      // Zero iterations: the element type comes from the body's declaration.
      ctx.set_output(o, ctl::empty_like_type(body.outputs[1 + s.n_carried + k]->type, 0, n));
      continue;
    }
    if (ctx.output_wanted(o)) ctx.set_output(o, ctl::stack(scans[k], 0, n));
    else ctx.set_output(o, scans[k][0]);  // omitted output: any defined tensor will do
  }
}

// ---- Scan ------------------------------------------------------------------------
//
// Inputs: N initial states, then S scan inputs (S = num_scan_inputs). Body:
// (states..., one slice of each scan input) -> (states..., K per-iteration
// outputs). Node outputs: N final states, then K scan outputs stacked along
// scan_output_axes, in reverse order where scan_output_directions is 1.

struct ScanSig {
  size_t n_state = 0, n_scan_in = 0, n_scan_out = 0;
  std::vector<int64_t> in_axes, in_dirs, out_axes, out_dirs;  // axes not yet normalised
};

ScanSig scan_signature(const Node& n, const Graph& body) {
  ScanSig s;
  const int64_t num_scan = n.attr_int("num_scan_inputs", -1);
  TS_CHECK(num_scan >= 1, n.describe(), ": attribute num_scan_inputs must be >= 1");
  TS_CHECK(static_cast<size_t>(num_scan) <= n.inputs.size(), n.describe(), ": num_scan_inputs ", num_scan,
           " exceeds the ", n.inputs.size(), " inputs");
  s.n_scan_in = static_cast<size_t>(num_scan);
  s.n_state = n.inputs.size() - s.n_scan_in;
  TS_CHECK(body.inputs.size() == n.inputs.size(), n.describe(), ": body has ", body.inputs.size(),
           " inputs, the node ", n.inputs.size());
  TS_CHECK(body.outputs.size() >= s.n_state, n.describe(), ": body has fewer outputs than states");
  s.n_scan_out = body.outputs.size() - s.n_state;
  TS_CHECK(n.outputs.size() == body.outputs.size(), n.describe(), ": node has ", n.outputs.size(),
           " outputs, body ", body.outputs.size());
  auto per = [&](const char* name, size_t count) {
    std::vector<int64_t> v = n.attr_ints(name, std::vector<int64_t>(count, 0));
    TS_CHECK(v.size() == count, n.describe(), ": attribute ", name, " has ", v.size(), " entries, expected ", count);
    return v;
  };
  s.in_axes = per("scan_input_axes", s.n_scan_in);
  s.in_dirs = per("scan_input_directions", s.n_scan_in);
  s.out_axes = per("scan_output_axes", s.n_scan_out);
  s.out_dirs = per("scan_output_directions", s.n_scan_out);
  for (int64_t d : s.in_dirs) TS_CHECK(d == 0 || d == 1, n.describe(), ": scan direction must be 0 or 1, got ", d);
  for (int64_t d : s.out_dirs) TS_CHECK(d == 0 || d == 1, n.describe(), ": scan direction must be 0 or 1, got ", d);
  return s;
}

void infer_scan(InferContext& ctx) {
  const Node& n = ctx.node;
  Graph& body = n.attr_graph("body");
  const ScanSig s = scan_signature(n, body);
  std::vector<Type> in;
  for (size_t i = 0; i < s.n_state; ++i) in.push_back(ctx.has_input(i) ? ctx.input_type(i) : body.inputs[i]->type);
  std::optional<Dim> trips;
  for (size_t j = 0; j < s.n_scan_in; ++j) {
    const size_t i = s.n_state + j;
    TS_CHECK(ctx.has_input(i), n.describe(), ": scan input ", j, " is missing");
    const Type& t = ctx.input_type(i);
    TS_CHECK(t.is_tensor(), n.describe(), ": scan input ", j, " must be a tensor");
    if (!t.shape) {
      in.push_back(body.inputs[i]->type);
      continue;
    }
    const int64_t axis = normalize_axis(s.in_axes[j], static_cast<int64_t>(t.shape->size()), n);
    Shape sh = *t.shape;
    if (!trips) trips = sh[static_cast<size_t>(axis)];
    TS_CHECK(!(trips->is_const() && sh[static_cast<size_t>(axis)].is_const()) ||
                 *trips == sh[static_cast<size_t>(axis)],
             n.describe(), ": scan inputs have different lengths ", trips->str(), " and ",
             sh[static_cast<size_t>(axis)].str());
    sh.erase(sh.begin() + axis);
    in.push_back(Type::tensor(t.dtype, sh));
  }
  std::vector<Type> out = subgraph_output_types(ctx, body, in);
  TS_CHECK(out.size() == body.outputs.size(), n.describe(), ": body inference gave ", out.size(), " outputs");
  for (size_t i = 0; i < s.n_state; ++i) ctx.set_output_type(i, merge_types(in[i], out[i], n, i));
  const Dim len = trips ? *trips : fresh_dim(n, 0, "trips");
  for (size_t k = 0; k < s.n_scan_out; ++k) {
    const Type& t = out[s.n_state + k];
    TS_CHECK(t.is_tensor(), n.describe(), ": scan output ", k, " must be a tensor, got ", t.str());
    if (!t.shape) {
      ctx.set_output_unknown_shape(s.n_state + k, t.dtype);
      continue;
    }
    Shape sh = *t.shape;
    const int64_t axis = normalize_axis(s.out_axes[k], static_cast<int64_t>(sh.size()) + 1, n);
    sh.insert(sh.begin() + axis, len);
    ctx.set_output(s.n_state + k, t.dtype, sh);
  }
}

void kernel_scan(KernelContext& ctx) {
  const Node& n = ctx.node;
  const Graph& body = n.attr_graph("body");
  const ScanSig s = scan_signature(n, body);
  std::vector<RtValue> in(body.inputs.size());
  for (size_t i = 0; i < s.n_state; ++i) in[i] = ctx.input_value(i);
  std::vector<int64_t> axes(s.n_scan_in);
  int64_t trips = -1;
  for (size_t j = 0; j < s.n_scan_in; ++j) {
    const Tensor& x = ctx.input(s.n_state + j);
    axes[j] = normalize_axis(s.in_axes[j], static_cast<int64_t>(x.rank()), n);
    const int64_t len = x.shape()[static_cast<size_t>(axes[j])];
    TS_CHECK(trips < 0 || trips == len, n.describe(), ": scan inputs have different lengths ", trips, " and ", len);
    trips = len;
  }
  std::vector<std::vector<Tensor>> scans(s.n_scan_out);
  for (int64_t t = 0; t < trips; ++t) {
    for (size_t j = 0; j < s.n_scan_in; ++j) {
      const int64_t idx = s.in_dirs[j] ? trips - 1 - t : t;
      in[s.n_state + j] = ctl::slice_at(ctx.input(s.n_state + j), axes[j], idx);
    }
    std::vector<RtValue> out = ctx.run_subgraph(body, in);
    TS_CHECK(out.size() == body.outputs.size(), n.describe(), ": body produced ", out.size(), " outputs");
    for (size_t i = 0; i < s.n_state; ++i) in[i] = std::move(out[i]);
    for (size_t k = 0; k < s.n_scan_out; ++k) {
      RtValue& v = out[s.n_state + k];
      TS_CHECK(v.is_tensor(), n.describe(), ": scan output ", k, " must be a tensor");
      scans[k].push_back(std::move(v.tensor));
    }
  }
  for (size_t i = 0; i < s.n_state; ++i) ctx.set_output_value(i, std::move(in[i]));
  for (size_t k = 0; k < s.n_scan_out; ++k) {
    const size_t o = s.n_state + k;
    if (scans[k].empty()) {
      const Type& t = body.outputs[o]->type;
      Tensor e = ctl::empty_like_type(t, 0, n);
      // Move the zero-length axis to where the stacked axis would be.
      std::vector<int64_t> shape(e.shape().begin() + 1, e.shape().end());
      const int64_t axis = normalize_axis(s.out_axes[k], static_cast<int64_t>(shape.size()) + 1, n);
      shape.insert(shape.begin() + axis, 0);
      ctx.set_output(o, Tensor(e.dtype(), shape));
      continue;
    }
    if (s.out_dirs[k]) std::reverse(scans[k].begin(), scans[k].end());
    const int64_t axis = normalize_axis(s.out_axes[k], static_cast<int64_t>(scans[k][0].rank()) + 1, n);
    ctx.set_output(o, ctl::stack(scans[k], axis, n));
  }
}

// Scan-8 has a leading optional sequence_lens input and a batch axis 0 on
// every state and scan input (the scan axis is 1); the body sees one batch
// item. That is a Scan over the batch whose body is a Scan over the sequence:
// the rewrite builds exactly that, so only the latest Scan exists afterwards.
void upgrade_scan(Node& node, int64_t opset) {
  if (opset >= 9) return;
  TS_CHECK(!node.inputs.empty(), node.describe(), ": Scan-8 needs the sequence_lens input slot");
  TS_CHECK(!node.has_input(0), node.describe(),
           ": Scan-8 with a sequence_lens input is not supported (variable-length batches)");
  Graph& outer = *node.owner;
  std::shared_ptr<Graph> inner_body = node.attrs.at("body").g;
  TS_CHECK(inner_body != nullptr, node.describe(), ": missing body");
  const int64_t num_scan = node.attr_int("num_scan_inputs", -1);
  std::vector<Value*> ins(node.inputs.begin() + 1, node.inputs.end());
  TS_CHECK(num_scan >= 1 && static_cast<size_t>(num_scan) <= ins.size(), node.describe(),
           ": bad num_scan_inputs ", num_scan);
  TS_CHECK(inner_body->inputs.size() == ins.size(), node.describe(), ": body has ", inner_body->inputs.size(),
           " inputs, the node ", ins.size());
  const size_t n_state = ins.size() - static_cast<size_t>(num_scan);

  auto batch_body = std::make_shared<Graph>();
  batch_body->name = outer.fresh_name("scan8_batch_body");
  batch_body->parent = &outer;
  std::vector<Value*> slice_ins;
  for (size_t i = 0; i < ins.size(); ++i) {
    const Type& declared = inner_body->inputs[i]->type;
    // States arrive as declared; scan inputs still carry their sequence axis.
    Type t = i < n_state ? declared : Type::tensor_unknown_shape(declared.dtype);
    slice_ins.push_back(batch_body->add_input(outer.fresh_name("scan8_slice"), t));
  }
  std::map<std::string, Attribute> attrs;
  attrs["body"] = Attribute::of_graph(inner_body);
  attrs["num_scan_inputs"] = Attribute::of_int(num_scan);
  if (node.has_attr("directions")) attrs["scan_input_directions"] = Attribute::of_ints(node.attr_ints("directions"));
  Node* seq_scan = batch_body->add_node("Scan", slice_ins, inner_body->outputs.size(), attrs);
  batch_body->outputs = seq_scan->outputs;
  inner_body->parent = batch_body.get();

  node.inputs = ins;
  node.attrs.erase("directions");
  node.attrs["body"] = Attribute::of_graph(batch_body);
  node.attrs["num_scan_inputs"] = Attribute::of_int(static_cast<int64_t>(ins.size()));
}

}  // namespace

void register_control_ops(OpRegistry& r) {
  r.add(OpSchema{"If", "", 1, 1, 1, -1, infer_if, kernel_if, nullptr, 1});
  r.add(OpSchema{"Loop", "", 0, -1, 1, -1, infer_loop, kernel_loop, nullptr, 1});
  r.add(OpSchema{"Scan", "", 1, -1, 1, -1, infer_scan, kernel_scan, upgrade_scan, 8});
}

}  // namespace tessel
