// Internals of the ONNX importer shared between its files: decoding of
// TensorProto/SparseTensorProto/TypeProto, safe external-data access, access
// to fields newer than the compiled onnx.proto (kept by protobuf as unknown
// fields), and inlining of model-local functions.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "onnx.pb.h"
#include "tessel/ir/graph.h"

namespace tessel::onnx_import {

// Where external tensor data may be read from. `base_dir` empty = refused.
struct ExternalDataContext {
  std::string base_dir;
};

// Decodes a TensorProto into a Tensor. `what` names the tensor in messages
// ("initializer 'w'", "attribute 'value' of Constant 'c'").
Tensor decode_tensor(const onnx::TensorProto& tp, const ExternalDataContext& ext, const std::string& what);
// Densifies a SparseTensorProto (values + indices + dims).
Tensor decode_sparse_tensor(const onnx::SparseTensorProto& sp, const ExternalDataContext& ext,
                            const std::string& what);

// Reads `length` bytes at `offset` of the file `location` under ctx.base_dir
// into `dst` after checking that the path stays inside the folder (no
// absolute path, no `..`, no symlink on the way). length < 0 = rest of file;
// `expected` (>= 0) is the byte count the tensor needs, checked before reading.
struct ExternalRef {
  std::string location;
  int64_t offset = 0;
  int64_t length = -1;
};
ExternalRef parse_external_ref(const onnx::TensorProto& tp, const std::string& what);
std::vector<uint8_t> read_external(const ExternalDataContext& ctx, const ExternalRef& ref, int64_t expected,
                                   const std::string& what);

// Makes up names for dims that the model leaves unnamed (`unk__N`), avoiding
// every dim_param the model uses.
class SymbolNamer {
 public:
  std::set<std::string> taken;
  Dim fresh();

 private:
  int64_t next_ = 0;
};
Type decode_type(const onnx::TypeProto& tp, SymbolNamer& namer, const std::string& what);

// ---- fields that the compiled (onnx 1.12) schema does not know ---------------
// Length-delimited payloads of field `field` kept in the unknown fields of a
// message (e.g. FunctionProto.attribute_proto = 11, overload = 13).
std::vector<std::string> unknown_bytes_fields(const std::string& unknown, int field);

// ---- model-local functions ---------------------------------------------------
using OpsetMap = std::map<std::string, int64_t>;  // domain ("" = ai.onnx) -> version

// A node after inlining, with the opsets that apply to it (a function's
// body may import other opset versions than the model).
struct ExpandedNode {
  onnx::NodeProto node;
  const OpsetMap* opsets = nullptr;
};

struct FunctionDef {
  const onnx::FunctionProto* proto = nullptr;
  OpsetMap opsets;
  std::vector<onnx::AttributeProto> defaults;  // attribute_proto (onnx >= 1.13)
};

class FunctionInliner {
 public:
  // `names_taken` is every value name used anywhere in the model, so that the
  // names given to inlined values never collide.
  FunctionInliner(const onnx::ModelProto& mp, const OpsetMap& model_opsets, std::set<std::string>* names_taken);
  // Expands calls of model-local functions in `nodes` (recursively).
  std::vector<ExpandedNode> expand(const google::protobuf::RepeatedPtrField<onnx::NodeProto>& nodes,
                                   const OpsetMap* opsets);
  bool empty() const { return funcs_.empty(); }

 private:
  std::map<std::string, FunctionDef> funcs_;  // key: domain + '\0' + name + '\0' + overload
  std::set<std::string>* names_;
  int64_t counter_ = 0;
  int64_t emitted_ = 0;
  const FunctionDef* lookup(const onnx::NodeProto& n) const;
  void expand_into(const onnx::NodeProto& n, const OpsetMap* opsets, int depth, std::vector<ExpandedNode>* out);
  std::string fresh(const std::string& fname, const std::string& orig);
};

// Canonical domain: "ai.onnx" is the default domain "".
inline std::string canonical_domain(const std::string& d) { return d == "ai.onnx" ? std::string() : d; }

}  // namespace tessel::onnx_import
