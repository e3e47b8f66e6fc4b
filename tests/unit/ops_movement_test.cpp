// Data-movement operators: hand-checked kernels for the tricky semantics, bad
// input that must raise tessel::Error, and symbolic shape inference through
// the Shape -> Gather -> Unsqueeze -> Concat -> Reshape chains of exported
// models.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "tessel/interp/interpreter.h"
#include "tessel/ops/registry.h"
#include "tessel/support/error.h"

namespace tessel {
namespace {

Tensor i64(std::vector<int64_t> shape, std::vector<int64_t> v) { return Tensor::from_i64(v).reshaped(shape); }
Tensor f32(std::vector<int64_t> shape, std::vector<float> v) { return Tensor::from_f32(shape, v); }

std::vector<int64_t> ints_of(const Tensor& t) {
  std::vector<int64_t> v;
  for (int64_t i = 0; i < t.numel(); ++i) v.push_back(t.get_i64(i));
  return v;
}
std::vector<double> floats_of(const Tensor& t) {
  std::vector<double> v;
  for (int64_t i = 0; i < t.numel(); ++i) v.push_back(t.get_f64(i));
  return v;
}

// Runs one node on concrete inputs with the reference interpreter.
std::vector<Tensor> run_op(const std::string& op, const std::vector<Tensor>& inputs, size_t num_outputs = 1,
                           std::map<std::string, Attribute> attrs = {}) {
  Graph g;
  std::vector<Value*> ins;
  std::vector<RtValue> vals;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined()) {
      ins.push_back(nullptr);
      continue;
    }
    ins.push_back(g.add_input("in" + std::to_string(i), Type::tensor_unknown_shape(inputs[i].dtype())));
    vals.emplace_back(inputs[i]);
  }
  Node* n = g.add_node(op, ins, num_outputs, std::move(attrs));
  for (Value* v : n->outputs) g.outputs.push_back(v);
  std::vector<Tensor> out;
  for (const RtValue& v : Interpreter().run(g, vals)) out.push_back(v.tensor);
  return out;
}
Tensor run1(const std::string& op, const std::vector<Tensor>& inputs, std::map<std::string, Attribute> attrs = {}) {
  return run_op(op, inputs, 1, std::move(attrs)).at(0);
}

// ---- kernels ---------------------------------------------------------------------

TEST(MovementKernels, ReshapeZeroCopiesAndMinusOneInfers) {
  Tensor x(DType::F32, {2, 3, 4});
  EXPECT_EQ(run1("Reshape", {x, Tensor::from_i64({0, -1})}).shape(), (std::vector<int64_t>{2, 12}));
  EXPECT_EQ(run1("Reshape", {x, Tensor::from_i64({-1, 0, 2})}).shape(), (std::vector<int64_t>{4, 3, 2}));
  // allowzero: 0 is a real zero-sized dim, so [0, 24] != 24 elements.
  EXPECT_THROW(run1("Reshape", {x, Tensor::from_i64({0, 24})}, {{"allowzero", Attribute::of_int(1)}}), Error);
  EXPECT_THROW(run1("Reshape", {x, Tensor::from_i64({5, -1})}), Error);
  EXPECT_THROW(run1("Reshape", {x, Tensor::from_i64({-1, -1})}), Error);
}

TEST(MovementKernels, SliceNegativeStepsAndHugeBounds) {
  Tensor x = i64({5}, {0, 1, 2, 3, 4});
  const int64_t kMax = std::numeric_limits<int64_t>::max(), kMin = std::numeric_limits<int64_t>::min();
  // x[::-2] = 4, 2, 0
  EXPECT_EQ(ints_of(run1("Slice", {x, Tensor::from_i64({kMax}), Tensor::from_i64({kMin}), Tensor::from_i64({0}),
                                   Tensor::from_i64({-2})})),
            (std::vector<int64_t>{4, 2, 0}));
  // x[1:INT64_MAX] = 1..4 ; x[-2:] = 3, 4 ; x[3:1] is empty
  EXPECT_EQ(ints_of(run1("Slice", {x, Tensor::from_i64({1}), Tensor::from_i64({kMax})})),
            (std::vector<int64_t>{1, 2, 3, 4}));
  EXPECT_EQ(ints_of(run1("Slice", {x, Tensor::from_i64({-2}), Tensor::from_i64({100})})),
            (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(run1("Slice", {x, Tensor::from_i64({3}), Tensor::from_i64({1})}).numel(), 0);
  // x[3:0:-1] = 3, 2, 1
  EXPECT_EQ(ints_of(run1("Slice", {x, Tensor::from_i64({3}), Tensor::from_i64({0}), Tensor::from_i64({0}),
                                   Tensor::from_i64({-1})})),
            (std::vector<int64_t>{3, 2, 1}));
  EXPECT_THROW(run1("Slice", {x, Tensor::from_i64({0}), Tensor::from_i64({5}), Tensor::from_i64({0}),
                              Tensor::from_i64({0})}),
               Error);
}

TEST(MovementKernels, TransposeAndStrings) {
  Tensor s(DType::String, {2, 3});
  s.mutable_strings() = {"a", "b", "c", "d", "e", "f"};
  Tensor t = run1("Transpose", {s});
  EXPECT_EQ(t.shape(), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(t.strings(), (std::vector<std::string>{"a", "d", "b", "e", "c", "f"}));
  Tensor x = i64({2, 1, 3}, {0, 1, 2, 3, 4, 5});
  Tensor y = run1("Transpose", {x}, {{"perm", Attribute::of_ints({2, 0, 1})}});
  EXPECT_EQ(y.shape(), (std::vector<int64_t>{3, 2, 1}));
  EXPECT_EQ(ints_of(y), (std::vector<int64_t>{0, 3, 1, 4, 2, 5}));
  EXPECT_THROW(run1("Transpose", {x}, {{"perm", Attribute::of_ints({0, 0, 1})}}), Error);
}

TEST(MovementKernels, GatherNegativeAndOutOfRangeIndices) {
  Tensor x = f32({3, 2}, {1, 2, 3, 4, 5, 6});
  Tensor y = run1("Gather", {x, i64({2}, {-1, 0})});
  EXPECT_EQ(floats_of(y), (std::vector<double>{5, 6, 1, 2}));
  EXPECT_THROW(run1("Gather", {x, i64({1}, {3})}), Error);
  EXPECT_THROW(run1("Gather", {x, i64({1}, {-4})}), Error);
  EXPECT_THROW(run1("Gather", {x, f32({1}, {0})}), Error);  // float indices
  EXPECT_THROW(run1("Gather", {x, i64({1}, {0})}, {{"axis", Attribute::of_int(2)}}), Error);
}

TEST(MovementKernels, GatherElementsAndGatherNDBatchDims) {
  Tensor x = f32({2, 2}, {1, 2, 3, 4});
  EXPECT_EQ(floats_of(run1("GatherElements", {x, i64({2, 2}, {0, 0, 1, 0})}, {{"axis", Attribute::of_int(1)}})),
            (std::vector<double>{1, 1, 4, 3}));
  EXPECT_THROW(run1("GatherElements", {x, i64({2, 2}, {0, 2, 1, 0})}, {{"axis", Attribute::of_int(1)}}), Error);
  // batch_dims=1: data [2,2,2], indices [2,1] -> out[b] = data[b, idx[b]]
  Tensor d = i64({2, 2, 2}, {0, 1, 2, 3, 4, 5, 6, 7});
  Tensor y = run1("GatherND", {d, i64({2, 1}, {1, 0})}, {{"batch_dims", Attribute::of_int(1)}});
  EXPECT_EQ(y.shape(), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(ints_of(y), (std::vector<int64_t>{2, 3, 4, 5}));
  EXPECT_THROW(run1("GatherND", {d, i64({2, 1}, {2, 0})}, {{"batch_dims", Attribute::of_int(1)}}), Error);
}

TEST(MovementKernels, ScatterReductions) {
  Tensor x = f32({1, 3}, {1, 2, 3});
  Tensor idx = i64({1, 3}, {1, 1, 0});
  Tensor upd = f32({1, 3}, {10, 20, 30});
  auto attrs = [](const char* r) {
    return std::map<std::string, Attribute>{{"axis", Attribute::of_int(1)}, {"reduction", Attribute::of_string(r)}};
  };
  EXPECT_EQ(floats_of(run1("ScatterElements", {x, idx, upd}, attrs("add"))), (std::vector<double>{31, 32, 3}));
  EXPECT_EQ(floats_of(run1("ScatterElements", {x, idx, upd}, attrs("mul"))), (std::vector<double>{30, 400, 3}));
  EXPECT_EQ(floats_of(run1("ScatterElements", {x, idx, upd}, attrs("max"))), (std::vector<double>{30, 20, 3}));
  EXPECT_THROW(run1("ScatterElements", {x, i64({1, 3}, {1, 3, 0}), upd}, attrs("add")), Error);
  // int8 add wraps around.
  Tensor b(DType::I8, {2});
  b.set_i64(0, 120);
  Tensor bu(DType::I8, {1});
  bu.set_i64(0, 10);
  Tensor r = run1("ScatterND", {b, i64({1, 1}, {0}), bu}, {{"reduction", Attribute::of_string("add")}});
  EXPECT_EQ(r.get_i64(0), -126);
  EXPECT_THROW(run1("ScatterND", {b, i64({1, 1}, {2}), bu}), Error);
}

TEST(MovementKernels, PadModes) {
  Tensor x = i64({3}, {1, 2, 3});
  auto pad = [&](const char* mode) {
    return ints_of(run1("Pad", {x, Tensor::from_i64({2, 2})}, {{"mode", Attribute::of_string(mode)}}));
  };
  EXPECT_EQ(pad("constant"), (std::vector<int64_t>{0, 0, 1, 2, 3, 0, 0}));
  EXPECT_EQ(pad("reflect"), (std::vector<int64_t>{3, 2, 1, 2, 3, 2, 1}));
  EXPECT_EQ(pad("edge"), (std::vector<int64_t>{1, 1, 1, 2, 3, 3, 3}));
  EXPECT_EQ(pad("wrap"), (std::vector<int64_t>{2, 3, 1, 2, 3, 1, 2}));
  // Negative pads crop; constant_value fills.
  EXPECT_EQ(ints_of(run1("Pad", {x, Tensor::from_i64({-1, 1}), Tensor::scalar_i64(9)})),
            (std::vector<int64_t>{2, 3, 9}));
  EXPECT_THROW(run1("Pad", {x, Tensor::from_i64({1})}), Error);
}

TEST(MovementKernels, SplitUnevenAndExplicit) {
  Tensor x = i64({7}, {0, 1, 2, 3, 4, 5, 6});
  auto parts = run_op("Split", {x}, 3, {{"num_outputs", Attribute::of_int(3)}});
  EXPECT_EQ(ints_of(parts[0]), (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(ints_of(parts[2]), (std::vector<int64_t>{6}));
  auto p2 = run_op("Split", {x, Tensor::from_i64({2, 5})}, 2);
  EXPECT_EQ(ints_of(p2[1]), (std::vector<int64_t>{2, 3, 4, 5, 6}));
  EXPECT_THROW(run_op("Split", {x, Tensor::from_i64({2, 4})}, 2), Error);
}

TEST(MovementKernels, UniqueUnsortedAllOutputs) {
  auto out = run_op("Unique", {f32({6}, {2, 1, 1, 3, 4, 3})}, 4, {{"sorted", Attribute::of_int(0)}});
  EXPECT_EQ(floats_of(out[0]), (std::vector<double>{2, 1, 3, 4}));
  EXPECT_EQ(ints_of(out[1]), (std::vector<int64_t>{0, 1, 3, 4}));
  EXPECT_EQ(ints_of(out[2]), (std::vector<int64_t>{0, 1, 1, 2, 3, 2}));
  EXPECT_EQ(ints_of(out[3]), (std::vector<int64_t>{1, 2, 2, 1}));
  auto s = run_op("Unique", {i64({2, 2}, {1, 3, 2, 3})}, 4);
  EXPECT_EQ(ints_of(s[0]), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(ints_of(s[2]), (std::vector<int64_t>{0, 2, 1, 2}));
}

TEST(MovementKernels, OneHotTrilRangeNonZero) {
  Tensor oh = run1("OneHot", {i64({3}, {0, -1, 5}), Tensor::scalar_i64(3), f32({2}, {0, 1})});
  EXPECT_EQ(floats_of(oh), (std::vector<double>{1, 0, 0, 0, 0, 1, 0, 0, 0}));  // 5 is out of range: all off
  Tensor m = i64({2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_EQ(ints_of(run1("Trilu", {m}, {{"upper", Attribute::of_int(0)}})), (std::vector<int64_t>{1, 0, 0, 4, 5, 0}));
  EXPECT_EQ(ints_of(run1("Trilu", {m, Tensor::scalar_i64(1)})), (std::vector<int64_t>{0, 2, 3, 0, 0, 6}));
  EXPECT_EQ(ints_of(run1("Range", {Tensor::scalar_i64(10), Tensor::scalar_i64(4), Tensor::scalar_i64(-3)})),
            (std::vector<int64_t>{10, 7}));
  EXPECT_THROW(run1("Range", {Tensor::scalar_i64(0), Tensor::scalar_i64(4), Tensor::scalar_i64(0)}), Error);
  Tensor nz = run1("NonZero", {i64({2, 2}, {0, 7, 8, 0})});
  EXPECT_EQ(nz.shape(), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(ints_of(nz), (std::vector<int64_t>{0, 1, 1, 0}));
}

TEST(MovementKernels, ExpandTileDepthToSpaceEmpty) {
  Tensor x = i64({2, 1}, {1, 2});
  Tensor e = run1("Expand", {x, Tensor::from_i64({2, 3})});
  EXPECT_EQ(ints_of(e), (std::vector<int64_t>{1, 1, 1, 2, 2, 2}));
  EXPECT_THROW(run1("Expand", {i64({2}, {1, 2}), Tensor::from_i64({3})}), Error);
  EXPECT_EQ(ints_of(run1("Tile", {i64({2}, {1, 2}), Tensor::from_i64({2})})), (std::vector<int64_t>{1, 2, 1, 2}));
  // DCR: channel c*... with blocksize 2: [1,4,1,1] -> [1,1,2,2] in channel order.
  EXPECT_EQ(ints_of(run1("DepthToSpace", {i64({1, 4, 1, 1}, {0, 1, 2, 3})}, {{"blocksize", Attribute::of_int(2)}})),
            (std::vector<int64_t>{0, 1, 2, 3}));
  // Empty inputs pass through.
  Tensor empty(DType::F32, {0, 3});
  EXPECT_EQ(run1("Transpose", {empty}).shape(), (std::vector<int64_t>{3, 0}));
  EXPECT_EQ(run1("Concat", {empty, Tensor(DType::F32, {2, 3})}, {{"axis", Attribute::of_int(0)}}).shape(),
            (std::vector<int64_t>{2, 3}));
  EXPECT_THROW(run1("Concat", {empty, Tensor(DType::F32, {2, 3})}, {{"axis", Attribute::of_int(2)}}), Error);
  EXPECT_THROW(run1("Concat", {empty, Tensor(DType::I64, {2, 3})}, {{"axis", Attribute::of_int(0)}}), Error);
}

// ---- symbolic inference ----------------------------------------------------------

// Runs an op's infer on inputs given as types (+ optional constants / symbolic
// values) and returns the context for inspection.
struct InferInput {
  Type type;
  std::optional<Tensor> constant;
  std::optional<SymValue> sym;
};

struct InferResult {
  std::vector<Type> types;
  std::vector<std::optional<SymValue>> syms;
};

InferResult infer(const std::string& op, const std::vector<InferInput>& inputs, size_t num_outputs = 1,
                  std::map<std::string, Attribute> attrs = {}) {
  Graph g;
  std::vector<Value*> ins;
  for (size_t i = 0; i < inputs.size(); ++i) ins.push_back(g.add_input("in" + std::to_string(i), inputs[i].type));
  Node* n = g.add_node(op, ins, num_outputs, std::move(attrs));
  InferContext ctx(*n);
  for (const InferInput& in : inputs) {
    ctx.in_types.push_back(&in.type);
    ctx.in_consts.push_back(in.constant ? &*in.constant : nullptr);
    ctx.in_syms.push_back(in.sym ? &*in.sym : nullptr);
  }
  const OpSchema* s = OpRegistry::global().find("", op);
  EXPECT_NE(s, nullptr);
  s->infer(ctx);
  return {ctx.out_types, ctx.out_syms};
}

InferInput tensor_in(DType dt, Shape s) { return {Type::tensor(dt, std::move(s)), std::nullopt, std::nullopt}; }
InferInput const_in(Tensor t) {
  Type ty = Type::tensor(t.dtype(), shape_of(t.shape()));
  return {ty, t, std::nullopt};
}
InferInput sym_in(SymValue v, bool scalar = false) {
  Shape s = scalar ? Shape{} : Shape{static_cast<int64_t>(v.size())};
  return {Type::tensor(DType::I64, s), std::nullopt, std::move(v)};
}

TEST(MovementInfer, ShapeGatherUnsqueezeConcatReshapeChain) {
  const Dim b = Dim::sym("batch"), s = Dim::sym("seq");
  // x: [batch, seq, 768]
  auto shp = infer("Shape", {tensor_in(DType::F32, {b, s, 768})});
  ASSERT_TRUE(shp.syms[0]);
  EXPECT_EQ(*shp.syms[0], (SymValue{b, s, 768}));
  EXPECT_EQ(*shp.types[0].shape, (Shape{3}));
  // Gather(shape, 1) -> scalar seq
  auto g = infer("Gather", {sym_in(*shp.syms[0]), const_in(Tensor::scalar_i64(1))});
  EXPECT_EQ(*g.types[0].shape, Shape{});
  EXPECT_EQ(*g.syms[0], (SymValue{s}));
  // Unsqueeze(seq, [0]) -> [seq]
  auto u = infer("Unsqueeze", {sym_in(*g.syms[0], true), const_in(Tensor::from_i64({0}))});
  EXPECT_EQ(*u.types[0].shape, (Shape{1}));
  EXPECT_EQ(*u.syms[0], (SymValue{s}));
  // Concat([batch], [seq], [12], [64]) -> [batch, seq, 12, 64]
  auto c = infer("Concat", {sym_in({b}), sym_in({s}), const_in(Tensor::from_i64({12})), const_in(Tensor::from_i64({-1}))},
                 1, {{"axis", Attribute::of_int(0)}});
  ASSERT_TRUE(c.syms[0]);
  EXPECT_EQ(*c.syms[0], (SymValue{b, s, 12, -1}));
  // Reshape(x, [batch, seq, 12, -1]) -> [batch, seq, 12, 64]
  auto r = infer("Reshape", {tensor_in(DType::F32, {b, s, 768}), sym_in(*c.syms[0])});
  EXPECT_EQ(*r.types[0].shape, (Shape{b, s, 12, 64}));
  // Reshape with 0 copies: [0, 0, -1] -> [batch, seq, 768]
  auto r0 = infer("Reshape", {tensor_in(DType::F32, {b, s, 12, 64}), const_in(Tensor::from_i64({0, 0, -1}))});
  EXPECT_EQ(*r0.types[0].shape, (Shape{b, s, 768}));
  // -1 alone flattens symbolically: batch*seq*768
  auto rf = infer("Reshape", {tensor_in(DType::F32, {b, s, 768}), const_in(Tensor::from_i64({-1}))});
  EXPECT_EQ(*rf.types[0].shape, (Shape{b * s * 768}));
}

TEST(MovementInfer, SliceOfShapeAndSymbolicSlices) {
  const Dim b = Dim::sym("batch"), s = Dim::sym("seq");
  const int64_t kMax = std::numeric_limits<int64_t>::max();
  // Shape(x)[-2:] on a value [batch, seq, 64]
  auto sl = infer("Slice", {sym_in({b, s, 64}), const_in(Tensor::from_i64({-2})), const_in(Tensor::from_i64({kMax}))});
  EXPECT_EQ(*sl.types[0].shape, (Shape{2}));
  EXPECT_EQ(*sl.syms[0], (SymValue{s, 64}));
  // x[:, 1:] on [batch, seq, 8] -> [batch, seq-1, 8]
  auto x1 = infer("Slice", {tensor_in(DType::F32, {b, s, 8}), const_in(Tensor::from_i64({1})),
                            const_in(Tensor::from_i64({kMax})), const_in(Tensor::from_i64({1}))});
  EXPECT_EQ(*x1.types[0].shape, (Shape{b, Dim::max(s - 1, 0), 8}));
  // x[:, :seq] with the end given symbolically -> [batch, seq, 8]
  auto x2 = infer("Slice", {tensor_in(DType::F32, {b, s, 8}), const_in(Tensor::from_i64({0})), sym_in({s}),
                            const_in(Tensor::from_i64({1}))});
  EXPECT_EQ(*x2.types[0].shape, (Shape{b, s, 8}));
}

TEST(MovementInfer, RangeExpandConstantOfShapeSymbolic) {
  const Dim b = Dim::sym("batch"), s = Dim::sym("seq");
  auto r = infer("Range", {const_in(Tensor::scalar_i64(0)), sym_in({s}, true), const_in(Tensor::scalar_i64(1))});
  EXPECT_EQ(*r.types[0].shape, (Shape{s}));
  auto r2 = infer("Range", {const_in(Tensor::scalar_i64(0)), sym_in({s}, true), const_in(Tensor::scalar_i64(2))});
  EXPECT_EQ(*r2.types[0].shape, (Shape{Dim::max(Dim::ceildiv(s, 2), 0)}));
  auto e = infer("Expand", {tensor_in(DType::F32, {1, s}), sym_in({b, 1})});
  EXPECT_EQ(*e.types[0].shape, (Shape{b, s}));
  auto c = infer("ConstantOfShape", {sym_in({b, s})});
  EXPECT_EQ(c.types[0].dtype, DType::F32);
  EXPECT_EQ(*c.types[0].shape, (Shape{b, s}));
  auto sz = infer("Size", {tensor_in(DType::F32, {b, s, 4})});
  EXPECT_EQ(*sz.syms[0], (SymValue{b * s * 4}));
  auto sq = infer("Squeeze", {sym_in({s}), const_in(Tensor::from_i64({0}))});
  EXPECT_EQ(*sq.types[0].shape, Shape{});
  EXPECT_EQ(*sq.syms[0], (SymValue{s}));
}

TEST(MovementInfer, PartialKnowledgeKeepsWhatIsCertain) {
  const Dim s = Dim::sym("seq");
  // Expand to an unknown [?, ?, ?]: 768 cannot broadcast to anything else.
  auto e = infer("Expand", {tensor_in(DType::F32, {1, 1, 768}), tensor_in(DType::I64, {3})});
  ASSERT_EQ(e.types[0].shape->size(), 3u);
  EXPECT_FALSE((*e.types[0].shape)[0].is_const());
  EXPECT_EQ((*e.types[0].shape)[2], Dim(768));
  // Slicing a [1, 512] table up to seq: min(seq, 512) columns, no max(., 0).
  auto sl = infer("Slice", {tensor_in(DType::I64, {1, 512}), const_in(Tensor::from_i64({0})), sym_in({s}),
                            const_in(Tensor::from_i64({1}))});
  EXPECT_EQ(*sl.types[0].shape, (Shape{1, Dim::min(s, 512)}));
  // Unknown split sizes give fresh symbols but keep the other dims.
  auto sp = infer("Split", {tensor_in(DType::F32, {4, s}), tensor_in(DType::I64, {2})}, 2,
                  {{"axis", Attribute::of_int(1)}});
  EXPECT_EQ((*sp.types[1].shape)[0], Dim(4));
  EXPECT_FALSE((*sp.types[1].shape)[1].is_const());
}

TEST(MovementInfer, SplitTransposeConcatSymbolic) {
  const Dim b = Dim::sym("batch"), s = Dim::sym("seq"), h = Dim::sym("hidden");
  auto sp = infer("Split", {tensor_in(DType::F32, {b, s, h * 3})}, 3,
                  {{"axis", Attribute::of_int(2)}, {"num_outputs", Attribute::of_int(3)}});
  for (int i = 0; i < 3; ++i) EXPECT_EQ(*sp.types[i].shape, (Shape{b, s, h}));
  auto t = infer("Transpose", {tensor_in(DType::F32, {b, s, 12, 64})}, 1, {{"perm", Attribute::of_ints({0, 2, 1, 3})}});
  EXPECT_EQ(*t.types[0].shape, (Shape{b, 12, s, 64}));
  auto c = infer("Concat", {tensor_in(DType::F32, {b, s, 64}), tensor_in(DType::F32, {b, 1, 64})}, 1,
                 {{"axis", Attribute::of_int(1)}});
  EXPECT_EQ(*c.types[0].shape, (Shape{b, s + 1, 64}));
}

TEST(MovementInfer, BadInputIsAnError) {
  const Dim b = Dim::sym("batch");
  EXPECT_THROW(infer("Gather", {tensor_in(DType::F32, {b, 4}), tensor_in(DType::F32, {2})}), Error);
  EXPECT_THROW(infer("Concat", {tensor_in(DType::F32, {b, 4}), tensor_in(DType::F32, {b, 4})}, 1,
                     {{"axis", Attribute::of_int(2)}}),
               Error);
  EXPECT_THROW(infer("Concat", {tensor_in(DType::F32, {b, 4}), tensor_in(DType::F32, {b, 5})}, 1,
                     {{"axis", Attribute::of_int(0)}}),
               Error);
  EXPECT_THROW(infer("Reshape", {tensor_in(DType::F32, {2, 3}), const_in(Tensor::from_i64({4, 2}))}), Error);
  EXPECT_THROW(infer("Squeeze", {tensor_in(DType::F32, {2, 3}), const_in(Tensor::from_i64({2}))}), Error);
  EXPECT_THROW(infer("Unsqueeze", {tensor_in(DType::F32, {2, 3}), const_in(Tensor::from_i64({3, 3}))}), Error);
  EXPECT_THROW(infer("Transpose", {tensor_in(DType::F32, {2, 3})}, 1, {{"perm", Attribute::of_ints({0})}}), Error);
}

TEST(MovementUpgrade, AttributeFormsBecomeInputs) {
  Graph g;
  Value* x = g.add_input("x", Type::tensor(DType::F32, {2, 1, 3}));
  Node* sq = g.add_node("Squeeze", {x}, 1, {{"axes", Attribute::of_ints({1})}});
  OpRegistry::global().find("", "Squeeze")->upgrade(*sq, 11);
  ASSERT_TRUE(sq->has_input(1));
  EXPECT_FALSE(sq->has_attr("axes"));
  EXPECT_EQ(ints_of(*sq->inputs[1]->constant), (std::vector<int64_t>{1}));
  Node* sl = g.add_node("Slice", {x}, 1,
                        {{"starts", Attribute::of_ints({1})}, {"ends", Attribute::of_ints({3})},
                         {"axes", Attribute::of_ints({2})}});
  OpRegistry::global().find("", "Slice")->upgrade(*sl, 9);
  ASSERT_EQ(sl->inputs.size(), 4u);
  EXPECT_EQ(ints_of(*sl->inputs[3]->constant), (std::vector<int64_t>{2}));
  Node* sp = g.add_node("Split", {x}, 3, {{"axis", Attribute::of_int(2)}});
  OpRegistry::global().find("", "Split")->upgrade(*sp, 13);
  EXPECT_EQ(sp->attr_int("num_outputs", 0), 3);
  // Pad-2's float value becomes a constant_value of the data's dtype.
  Value* xi = g.add_input("xi", Type::tensor(DType::I32, {3}));
  Node* pd = g.add_node("Pad", {xi}, 1, {{"pads", Attribute::of_ints({1, 1})}, {"value", Attribute::of_float(7)}});
  OpRegistry::global().find("", "Pad")->upgrade(*pd, 2);
  ASSERT_TRUE(pd->has_input(2));
  EXPECT_EQ(pd->inputs[2]->constant->dtype(), DType::I32);
  EXPECT_EQ(pd->inputs[2]->constant->get_i64(0), 7);
}

}  // namespace
}  // namespace tessel
