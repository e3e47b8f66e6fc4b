// The operator registry. Each op family lives in one file under ops/ and
// registers, per operator:
//   - infer:   type and shape inference over symbolic dims (Dim), used by the
//              shape-inference pass; it may also compute the output's value
//              symbolically for small integer tensors (shape arithmetic);
//   - kernel:  the reference implementation used by the interpreter;
//   - upgrade: (optional) rewrites a node of an older opset into the form of
//              the latest opset, so that infer and kernel only know one
//              version. Called by the importer with the model's opset.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tessel/ir/graph.h"
#include "tessel/ops/lowering.h"

namespace tessel {

// A run-time value in the interpreter: a tensor, a sequence of tensors, or an
// empty optional.
struct RtValue {
  enum class Kind { Tensor, Sequence, None };
  Kind kind = Kind::Tensor;
  Tensor tensor;
  std::vector<Tensor> seq;
  Type elem_type;  // for Sequence and None: the element type (may be unknown)

  RtValue() = default;
  RtValue(Tensor t) : tensor(std::move(t)) {}  // NOLINT
  static RtValue sequence(std::vector<Tensor> s, Type elem = {});
  static RtValue none(Type elem = {});
  bool is_tensor() const { return kind == Kind::Tensor; }
};

// Values of small integer tensors known symbolically during inference, e.g.
// the output of Shape(x) is [batch, 3, h, w]. Rank 0 or 1 only.
using SymValue = std::vector<Dim>;

class InferContext {
 public:
  const Node& node;
  // Per input (nullptr when omitted or unknown).
  std::vector<const Type*> in_types;
  std::vector<const Tensor*> in_consts;          // known constant value
  std::vector<const SymValue*> in_syms;          // known symbolic value
  // Outputs to fill: one Type per node output; out_syms optional.
  std::vector<Type> out_types;
  std::vector<std::optional<SymValue>> out_syms;
  // Infers the output types of a subgraph given its input types (set by the
  // shape-inference pass; used by If, Loop, Scan, SequenceMap).
  std::function<std::vector<Type>(Graph&, const std::vector<Type>&)> infer_subgraph;

  explicit InferContext(const Node& n);

  size_t num_inputs() const { return in_types.size(); }
  bool has_input(size_t i) const { return i < in_types.size() && in_types[i] != nullptr; }
  const Type& input_type(size_t i) const;        // throws when absent
  DType input_dtype(size_t i) const;
  bool has_shape(size_t i) const { return has_input(i) && input_type(i).has_shape(); }
  const Shape& input_shape(size_t i) const;      // throws when rank unknown
  const Tensor* input_const(size_t i) const { return i < in_consts.size() ? in_consts[i] : nullptr; }
  const SymValue* input_sym(size_t i) const { return i < in_syms.size() ? in_syms[i] : nullptr; }
  // Integer contents of input i as Dims, from a constant or a symbolic value;
  // nullopt when unknown.
  std::optional<SymValue> input_dims_value(size_t i) const;

  void set_output(size_t i, DType dt, Shape s);
  void set_output_unknown_shape(size_t i, DType dt);
  void set_output_type(size_t i, Type t);
  void set_output_sym(size_t i, SymValue v);
};

class KernelContext {
 public:
  const Node& node;
  std::vector<const RtValue*> inputs;  // nullptr when omitted
  std::vector<RtValue> outputs;        // one per node output
  // Runs a subgraph with the given inputs (outer-scope values are visible).
  std::function<std::vector<RtValue>(const Graph&, const std::vector<RtValue>&)> run_subgraph;

  explicit KernelContext(const Node& n);

  size_t num_inputs() const { return inputs.size(); }
  bool has_input(size_t i) const { return i < inputs.size() && inputs[i] != nullptr; }
  // The tensor of input i; throws when absent or not a tensor.
  const Tensor& input(size_t i) const;
  const RtValue& input_value(size_t i) const;
  void set_output(size_t i, Tensor t);
  void set_output_value(size_t i, RtValue v);
  size_t num_outputs() const { return outputs.size(); }
  // True when output i is consumed (ONNX allows omitted optional outputs).
  bool output_wanted(size_t i) const { return i < node.outputs.size() && node.outputs[i] != nullptr; }
};

using InferFn = void (*)(InferContext&);
using KernelFn = void (*)(KernelContext&);
// Rewrites `node` (and may add nodes before it in its graph) to the latest
// opset's form. `opset` is the model's version of the node's domain.
using UpgradeFn = void (*)(Node& node, int64_t opset);

struct OpSchema {
  std::string name;
  std::string domain;  // "" = ai.onnx
  int min_inputs = 0, max_inputs = 0;    // max -1 = variadic
  int min_outputs = 1, max_outputs = 1;  // max -1 = variadic
  InferFn infer = nullptr;
  KernelFn kernel = nullptr;
  UpgradeFn upgrade = nullptr;
  // First opset of the domain that defines the op (older models are refused).
  int since_version = 1;
  // Last opset in which the op exists (e.g. Scatter, Upsample were removed);
  // 0 = still present.
  int removed_in = 0;
  // Compiled form (see lowering.h); nullptr = interpreter only.
  LowerFn lower = nullptr;
  FusionKind fusion = FusionKind::Opaque;
  // `lower` handles every output index, so each used output may be lowered
  // as a kernel of its own (Split); otherwise only output 0 is lowered.
  bool multi_output_lowering = false;
};

class OpRegistry {
 public:
  static const OpRegistry& global();
  void add(OpSchema s);  // throws on duplicates
  // Gives a registered op its compiled form (family *_lower.cpp files).
  void set_lowering(const std::string& domain, const std::string& name, FusionKind kind, LowerFn fn);
  void set_multi_output_lowering(const std::string& domain, const std::string& name);
  const OpSchema* find(const std::string& domain, const std::string& name) const;
  std::vector<const OpSchema*> all() const;

 private:
  std::map<std::pair<std::string, std::string>, OpSchema> ops_;
};

// Checks input/output arity of a node against its schema; throws with a clear
// message.
void check_arity(const OpSchema& s, const Node& n);

// Normalises a possibly negative axis into [0, rank); throws when out of range.
int64_t normalize_axis(int64_t axis, int64_t rank, const Node& n);

// Per-family registration functions (one per file under ops/).
void register_elementwise_ops(OpRegistry& r);
void register_reduction_ops(OpRegistry& r);
void register_matmul_ops(OpRegistry& r);
void register_conv_ops(OpRegistry& r);
void register_blocked_layout_ops(OpRegistry& r);  // blocked.cpp: tessel::ToBlocked, FromBlocked (the CPU's blocked_layout pass)
void register_tile_transform_op(OpRegistry& r);  // tile_transform.cpp: tessel::TileTransform (the CPU's winograd_conv pass)
void register_im2col_op(OpRegistry& r);  // im2col.cpp: tessel::Im2Col (the CUDA target's conv_im2col pass)
void register_unpack_panels_op(OpRegistry& r);  // unpack_panels.cpp: tessel::UnpackPanels (CPU prepack_weights pass)
void register_pool_ops(OpRegistry& r);
void register_norm_ops(OpRegistry& r);
void register_movement_ops(OpRegistry& r);
void register_control_ops(OpRegistry& r);
void register_sequence_ops(OpRegistry& r);
void register_misc_ops(OpRegistry& r);
// Compiled forms, one file per family (after every op is registered).
void register_elementwise_lowerings(OpRegistry& r);
void register_reduction_lowerings(OpRegistry& r);
void register_movement_lowerings(OpRegistry& r);
void register_matmul_lowerings(OpRegistry& r);
void register_norm_lowerings(OpRegistry& r);
void register_split_lowerings(OpRegistry& r);
void register_pool_lowerings(OpRegistry& r);
void register_conv_lowerings(OpRegistry& r);
void register_loss_lowerings(OpRegistry& r);
void register_attention_lowerings(OpRegistry& r);
void register_layout_lowerings(OpRegistry& r);
void register_quantize_lowerings(OpRegistry& r);
void register_resize_lowerings(OpRegistry& r);
void register_scatter_lowerings(OpRegistry& r);
void register_grid_lowerings(OpRegistry& r);
void register_signal_lowerings(OpRegistry& r);

}  // namespace tessel
