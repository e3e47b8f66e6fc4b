// Hand-checked cases for the elementwise op family: integer wrap and sign
// rules, broadcasting, float rounding of small types, Cast corner cases,
// symbolic shape arithmetic, legacy upgrades and bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "tessel/interp/interpreter.h"
#include "tessel/ops/registry.h"
#include "tessel/support/error.h"

namespace tessel {
namespace {

Tensor make(DType dt, std::vector<int64_t> shape, const std::vector<double>& v) {
  Tensor t(dt, std::move(shape));
  EXPECT_EQ(t.numel(), static_cast<int64_t>(v.size()));
  for (size_t i = 0; i < v.size(); ++i) {
    if (is_int(dt) || dt == DType::Bool) {
      t.set_i64(static_cast<int64_t>(i), static_cast<int64_t>(v[i]));
    } else {
      t.set_f64(static_cast<int64_t>(i), v[i]);
    }
  }
  return t;
}

Tensor strings(std::vector<int64_t> shape, const std::vector<std::string>& v) {
  Tensor t(DType::String, std::move(shape));
  t.mutable_strings() = v;
  return t;
}

// Runs one node over concrete inputs (nullptr-free) and returns its output.
Tensor run_op(const std::string& op, const std::vector<Tensor>& ins, std::map<std::string, Attribute> attrs = {}) {
  Graph g;
  std::vector<Value*> vals;
  std::vector<RtValue> rt;
  for (size_t i = 0; i < ins.size(); ++i) {
    vals.push_back(g.add_input("in" + std::to_string(i), Type::tensor(ins[i].dtype(), shape_of(ins[i].shape()))));
    rt.emplace_back(ins[i]);
  }
  Node* n = g.add_node(op, vals, 1, std::move(attrs));
  g.outputs = {n->outputs[0]};
  return Interpreter().run(g, rt).at(0).tensor;
}

std::vector<double> values(const Tensor& t) {
  std::vector<double> v;
  for (int64_t i = 0; i < t.numel(); ++i) v.push_back(t.get_f64(i));
  return v;
}

// ---- integer arithmetic -------------------------------------------------------------

TEST(ElementwiseOps, IntegerAddWraps) {
  Tensor y = run_op("Add", {make(DType::I8, {2}, {127, -128}), make(DType::I8, {2}, {1, -1})});
  EXPECT_EQ(y.dtype(), DType::I8);
  EXPECT_EQ(values(y), (std::vector<double>{-128, 127}));
  Tensor m = run_op("Mul", {make(DType::U16, {1}, {65535}), make(DType::U16, {1}, {65535})});
  EXPECT_EQ(m.get_i64(0), 1);  // 65535^2 = 2^32 - 2^17 + 1 = 1 mod 2^16
}

TEST(ElementwiseOps, IntegerDivTruncatesTowardZero) {
  Tensor y = run_op("Div", {make(DType::I32, {4}, {-7, 7, -7, -2147483648.0}), make(DType::I32, {4}, {2, -2, -2, -1})});
  EXPECT_EQ(values(y), (std::vector<double>{-3, -3, 3, -2147483648.0}));
  EXPECT_THROW(run_op("Div", {make(DType::I64, {1}, {5}), make(DType::I64, {1}, {0})}), Error);
}

TEST(ElementwiseOps, ModSignRules) {
  const Tensor a = make(DType::I32, {4}, {-7, 7, -7, 7});
  const Tensor b = make(DType::I32, {4}, {3, -3, -3, 3});
  // Python: result has the divisor's sign.
  EXPECT_EQ(values(run_op("Mod", {a, b})), (std::vector<double>{2, -2, -1, 1}));
  // C fmod: result has the dividend's sign.
  EXPECT_EQ(values(run_op("Mod", {a, b}, {{"fmod", Attribute::of_int(1)}})), (std::vector<double>{-1, 1, -1, 1}));
  // Floats with fmod=0: -0.5 mod 2 = 1.5; 0 takes the divisor's sign; inf -> NaN.
  Tensor f = run_op("Mod", {make(DType::F64, {3}, {-0.5, 0.0, INFINITY}), make(DType::F64, {3}, {2, -3, 2})});
  EXPECT_EQ(f.get_f64(0), 1.5);
  EXPECT_EQ(f.get_f64(1), 0.0);
  EXPECT_TRUE(std::signbit(f.get_f64(1)));
  EXPECT_TRUE(std::isnan(f.get_f64(2)));
  EXPECT_THROW(run_op("Mod", {a, b}, {{"fmod", Attribute::of_int(2)}}), Error);
}

TEST(ElementwiseOps, BitShiftEdgeCases) {
  const auto dir = [](const char* d) { return std::map<std::string, Attribute>{{"direction", Attribute::of_string(d)}}; };
  Tensor r = run_op("BitShift", {make(DType::I8, {4}, {-8, -8, 8, 64}), make(DType::I8, {4}, {1, 9, 8, -1})}, dir("RIGHT"));
  EXPECT_EQ(values(r), (std::vector<double>{-4, -1, 0, 0}));
  Tensor l = run_op("BitShift", {make(DType::I8, {3}, {64, 1, 3}), make(DType::I8, {3}, {1, 7, 8})}, dir("LEFT"));
  EXPECT_EQ(values(l), (std::vector<double>{-128, -128, 0}));
  EXPECT_THROW(run_op("BitShift", {make(DType::U8, {1}, {1}), make(DType::U8, {1}, {1})}, dir("UP")), Error);
}

TEST(ElementwiseOps, PowIntegerAndMixedTypes) {
  EXPECT_EQ(run_op("Pow", {make(DType::I32, {1}, {2}), make(DType::I64, {1}, {10})}).get_i64(0), 1024);
  Tensor m = run_op("Pow", {make(DType::I64, {2}, {3, 2}), make(DType::F32, {2}, {0.5, 3})});
  EXPECT_EQ(m.dtype(), DType::I64);
  EXPECT_EQ(values(m), (std::vector<double>{1, 8}));  // sqrt(3) truncates to 1
  Tensor f = run_op("Pow", {make(DType::F32, {2}, {4, -2}), make(DType::I32, {1}, {2})});
  EXPECT_EQ(values(f), (std::vector<double>{16, 4}));
}

// ---- broadcasting and float rounding --------------------------------------------------

TEST(ElementwiseOps, BroadcastsNumpyStyle) {
  Tensor y = run_op("Sub", {make(DType::F32, {2, 3}, {1, 2, 3, 4, 5, 6}), make(DType::F32, {3}, {1, 1, 2})});
  EXPECT_EQ(y.shape(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(values(y), (std::vector<double>{0, 1, 1, 3, 4, 4}));
  Tensor z = run_op("Add", {make(DType::F32, {2, 1}, {10, 20}), make(DType::F32, {1, 3}, {1, 2, 3})});
  EXPECT_EQ(values(z), (std::vector<double>{11, 12, 13, 21, 22, 23}));
  Tensor e = run_op("Mul", {make(DType::F32, {0, 3}, {}), make(DType::F32, {3}, {1, 2, 3})});
  EXPECT_EQ(e.shape(), (std::vector<int64_t>{0, 3}));
  EXPECT_THROW(run_op("Add", {make(DType::F32, {2}, {1, 2}), make(DType::F32, {3}, {1, 2, 3})}), Error);
}

TEST(ElementwiseOps, Float16RoundsOnceToNearestEven) {
  // f16 spacing at 1 is 2^-10: 1 + 2^-11 is a tie and rounds to even (1),
  // 1 + 3*2^-11 is a tie between 1+2^-10 and 1+2^-9 and rounds to 1+2^-9.
  Tensor y = run_op("Add", {make(DType::F16, {2}, {1, 1}), make(DType::F16, {2}, {std::ldexp(1.0, -11), 3 * std::ldexp(1.0, -11)})});
  EXPECT_EQ(y.get_f64(0), 1.0);
  EXPECT_EQ(y.get_f64(1), 1.0 + std::ldexp(1.0, -9));
}

// ---- activations and unary math -----------------------------------------------------------

TEST(ElementwiseOps, ActivationValues) {
  Tensor g = run_op("Gelu", {make(DType::F64, {2}, {1, -1})});
  EXPECT_NEAR(g.get_f64(0), 0.8413447460685429, 1e-15);  // Phi(1)
  EXPECT_NEAR(g.get_f64(1), -0.15865525393145707, 1e-15);
  Tensor s = run_op("Sigmoid", {make(DType::F32, {3}, {-1000, 0, 1000})});
  EXPECT_EQ(values(s), (std::vector<double>{0, 0.5, 1}));
  Tensor sp = run_op("Softplus", {make(DType::F64, {2}, {1000, 0})});
  EXPECT_EQ(sp.get_f64(0), 1000);
  EXPECT_NEAR(sp.get_f64(1), std::log(2.0), 1e-15);
  Tensor r = run_op("Relu", {make(DType::I32, {3}, {-5, 0, 7})});
  EXPECT_EQ(values(r), (std::vector<double>{0, 0, 7}));
  Tensor rd = run_op("Round", {make(DType::F32, {5}, {0.5, 1.5, 2.5, -2.5, 2.3})});
  EXPECT_EQ(values(rd), (std::vector<double>{0, 2, 2, -2, 2}));
}

TEST(ElementwiseOps, PReluBroadcastsSlopeToX) {
  Tensor y = run_op("PRelu", {make(DType::F32, {2, 2}, {-1, 2, -3, 4}), make(DType::F32, {2}, {0.5, 0.25})});
  EXPECT_EQ(values(y), (std::vector<double>{-0.5, 2, -1.5, 4}));
  // The slope may not make the output larger than X.
  EXPECT_THROW(run_op("PRelu", {make(DType::F32, {2}, {-1, 2}), make(DType::F32, {2, 2}, {1, 1, 1, 1})}), Error);
}

TEST(ElementwiseOps, AbsNegOfMinimumIntegerWrap) {
  EXPECT_EQ(run_op("Abs", {make(DType::I8, {1}, {-128})}).get_i64(0), -128);
  EXPECT_EQ(run_op("Neg", {make(DType::I8, {1}, {-128})}).get_i64(0), -128);
}

// ---- variadic, Where, Clip --------------------------------------------------------------------

TEST(ElementwiseOps, VariadicBroadcastAndNaN) {
  Tensor s = run_op("Mean", {make(DType::F32, {2}, {1, 2}), make(DType::F32, {1}, {3}), make(DType::F32, {2}, {5, 7})});
  EXPECT_EQ(values(s), (std::vector<double>{3, 4}));
  Tensor m = run_op("Max", {make(DType::F32, {2}, {1, NAN}), make(DType::F32, {2}, {NAN, 2})});
  EXPECT_TRUE(std::isnan(m.get_f64(0)));
  EXPECT_TRUE(std::isnan(m.get_f64(1)));
  Tensor mi = run_op("Min", {make(DType::U64, {2}, {5, 9}), make(DType::U64, {1}, {7})});
  EXPECT_EQ(values(mi), (std::vector<double>{5, 7}));
}

TEST(ElementwiseOps, WhereSelectsStringsWithBroadcast) {
  Tensor y = run_op("Where", {make(DType::Bool, {2, 1}, {1, 0}), strings({2}, {"a", "b"}), strings({1}, {"z"})});
  EXPECT_EQ(y.shape(), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(y.strings(), (std::vector<std::string>{"a", "b", "z", "z"}));
  EXPECT_THROW(run_op("Where", {make(DType::I32, {1}, {1}), make(DType::F32, {1}, {1}), make(DType::F32, {1}, {2})}),
               Error);
}

TEST(ElementwiseOps, ClipBounds) {
  Tensor y = run_op("Clip", {make(DType::F32, {4}, {-2, 0, 3, NAN}), make(DType::F32, {}, {-1}), make(DType::F32, {}, {1})});
  EXPECT_EQ(y.get_f64(0), -1);
  EXPECT_EQ(y.get_f64(1), 0);
  EXPECT_EQ(y.get_f64(2), 1);
  EXPECT_TRUE(std::isnan(y.get_f64(3)));
  // min > max: every element becomes max.
  Tensor z = run_op("Clip", {make(DType::I32, {2}, {-5, 5}), make(DType::I32, {}, {3}), make(DType::I32, {}, {1})});
  EXPECT_EQ(values(z), (std::vector<double>{1, 1}));
  EXPECT_THROW(run_op("Clip", {make(DType::F32, {1}, {0}), make(DType::F32, {2}, {0, 1})}), Error);
}

// ---- Cast ---------------------------------------------------------------------------------------

std::map<std::string, Attribute> to(DType t) { return {{"to", Attribute::of_int(static_cast<int64_t>(t))}}; }

TEST(ElementwiseOps, CastFloatToIntegers) {
  EXPECT_EQ(values(run_op("Cast", {make(DType::F32, {2}, {2.7, -2.7})}, to(DType::I32))),
            (std::vector<double>{2, -2}));
  EXPECT_EQ(run_op("Cast", {make(DType::I32, {1}, {300})}, to(DType::I8)).get_i64(0), 44);  // 300 - 256
  // Sub-byte targets: out-of-range values give 0 (the ONNX reference).
  EXPECT_EQ(values(run_op("Cast", {make(DType::F32, {4}, {-9, -8, 7, 8})}, to(DType::I4))),
            (std::vector<double>{0, -8, 7, 0}));
  EXPECT_EQ(values(run_op("Cast", {make(DType::F32, {3}, {NAN, 0, -0.0})}, to(DType::Bool))),
            (std::vector<double>{1, 0, 0}));
}

TEST(ElementwiseOps, CastStrings) {
  Tensor s = run_op("Cast", {make(DType::F32, {5}, {0.1, 100, 1e20, -1.5e-5, NAN})}, to(DType::String));
  EXPECT_EQ(s.strings(), (std::vector<std::string>{"0.1", "100.0", "1e+20", "-1.5e-05", "nan"}));
  Tensor f = run_op("Cast", {strings({4}, {"1e-5", "-INF", "NaN", "3.25"})}, to(DType::F32));
  EXPECT_FLOAT_EQ(f.get_f64(0), 1e-5f);
  EXPECT_EQ(f.get_f64(1), -INFINITY);
  EXPECT_TRUE(std::isnan(f.get_f64(2)));
  EXPECT_EQ(f.get_f64(3), 3.25);
  Tensor i = run_op("Cast", {strings({1}, {"9007199254740993"})}, to(DType::I64));
  EXPECT_EQ(i.get_i64(0), 9007199254740993LL);  // exact beyond double precision
  EXPECT_THROW(run_op("Cast", {strings({1}, {"hello"})}, to(DType::F32)), Error);
}

TEST(ElementwiseOps, CastE8M0RoundModes) {
  auto attrs = [](const char* mode) {
    auto a = to(DType::F8E8M0);
    a["round_mode"] = Attribute::of_string(mode);
    return a;
  };
  const Tensor x = make(DType::F32, {3}, {1.1, 1.5, 3});
  // 1.1: up -> 2, down -> 1, nearest -> 1; 1.5: nearest rounds up to 2; 3 -> 4 up, 2 down.
  EXPECT_EQ(values(run_op("Cast", {x}, attrs("up"))), (std::vector<double>{2, 2, 4}));
  EXPECT_EQ(values(run_op("Cast", {x}, attrs("down"))), (std::vector<double>{1, 1, 2}));
  EXPECT_EQ(values(run_op("Cast", {x}, attrs("nearest"))), (std::vector<double>{1, 2, 4}));
}

TEST(ElementwiseOps, BitCastKeepsBits) {
  Tensor y = run_op("BitCast", {make(DType::F32, {1}, {1.0})}, to(DType::I32));
  EXPECT_EQ(y.get_i64(0), 0x3F800000);
  EXPECT_THROW(run_op("BitCast", {make(DType::F32, {1}, {1.0})}, to(DType::I64)), Error);
}

// ---- inference: symbolic shape arithmetic -----------------------------------------------------

TEST(ElementwiseOps, InferKeepsShapeArithmeticSymbolic) {
  Graph g;
  Value* a = g.add_input("a", Type::tensor(DType::I64, {Dim(1)}));
  Value* b = g.add_initializer("b", Tensor::from_i64({64}));
  Node* n = g.add_node("Mul", {a, b}, 1);
  const OpSchema* s = OpRegistry::global().find("", "Mul");
  ASSERT_NE(s, nullptr);
  InferContext ctx(*n);
  const Type ta = a->type, tb = Type::tensor(DType::I64, {Dim(1)});
  const SymValue sa = {Dim::sym("batch")};
  ctx.in_types = {&ta, &tb};
  ctx.in_consts = {nullptr, &*b->constant};
  ctx.in_syms = {&sa, nullptr};
  s->infer(ctx);
  EXPECT_EQ(ctx.out_types[0].dtype, DType::I64);
  ASSERT_TRUE(ctx.out_syms[0].has_value());
  EXPECT_EQ(ctx.out_syms[0]->at(0), Dim::sym("batch") * Dim(64));

  // Equal(x, x + 1) is known to be false even though x is symbolic.
  Node* e = g.add_node("Equal", {a, a}, 1);
  InferContext ec(*e);
  const SymValue sb = {Dim::sym("batch") + Dim(1)};
  ec.in_types = {&ta, &ta};
  ec.in_consts = {nullptr, nullptr};
  ec.in_syms = {&sa, &sb};
  OpRegistry::global().find("", "Equal")->infer(ec);
  EXPECT_EQ(ec.out_types[0].dtype, DType::Bool);
  ASSERT_TRUE(ec.out_syms[0].has_value());
  EXPECT_EQ(ec.out_syms[0]->at(0), Dim(0));

  // Symbols are sizes (>= 1): batch == -1 is false, batch + 1 > 1 is true.
  Value* m1 = g.add_initializer("m1", Tensor::from_i64({-1}));
  Node* e2 = g.add_node("Equal", {a, m1}, 1);
  InferContext ec2(*e2);
  ec2.in_types = {&ta, &tb};
  ec2.in_consts = {nullptr, &*m1->constant};
  ec2.in_syms = {&sa, nullptr};
  OpRegistry::global().find("", "Equal")->infer(ec2);
  ASSERT_TRUE(ec2.out_syms[0].has_value());
  EXPECT_EQ(ec2.out_syms[0]->at(0), Dim(0));
  Value* one = g.add_initializer("one", Tensor::from_i64({1}));
  Node* gt = g.add_node("Greater", {a, one}, 1);
  InferContext gc(*gt);
  gc.in_types = {&ta, &tb};
  gc.in_consts = {nullptr, &*one->constant};
  gc.in_syms = {&sb, nullptr};
  OpRegistry::global().find("", "Greater")->infer(gc);
  ASSERT_TRUE(gc.out_syms[0].has_value());
  EXPECT_EQ(gc.out_syms[0]->at(0), Dim(1));
}

TEST(ElementwiseOps, InferRejectsBadDtypes) {
  Graph g;
  Value* i = g.add_input("i", Type::tensor(DType::I32, {Dim(2)}));
  Value* f = g.add_input("f", Type::tensor(DType::F32, {Dim(2)}));
  Node* sq = g.add_node("Sqrt", {i}, 1);
  InferContext c1(*sq);
  c1.in_types = {&i->type};
  c1.in_consts = {nullptr};
  c1.in_syms = {nullptr};
  EXPECT_THROW(OpRegistry::global().find("", "Sqrt")->infer(c1), Error);
  Node* add = g.add_node("Add", {i, f}, 1);
  InferContext c2(*add);
  c2.in_types = {&i->type, &f->type};
  c2.in_consts = {nullptr, nullptr};
  c2.in_syms = {nullptr, nullptr};
  EXPECT_THROW(OpRegistry::global().find("", "Add")->infer(c2), Error);
  EXPECT_THROW(run_op("Sqrt", {make(DType::I32, {1}, {4})}), Error);
  EXPECT_THROW(run_op("And", {make(DType::I32, {1}, {1}), make(DType::Bool, {1}, {1})}), Error);
}

// ---- legacy upgrades ----------------------------------------------------------------------------

TEST(ElementwiseOps, ClipUpgradeMovesBoundsToInputs) {
  Graph g;
  Value* x = g.add_input("x", Type::tensor(DType::F32, {Dim(3)}));
  Node* n = g.add_node("Clip", {x}, 1, {{"min", Attribute::of_float(-1)}, {"max", Attribute::of_float(1)}});
  g.outputs = {n->outputs[0]};
  OpRegistry::global().find("", "Clip")->upgrade(*n, 6);
  EXPECT_FALSE(n->has_attr("min"));
  ASSERT_EQ(n->inputs.size(), 3u);
  Tensor y = Interpreter().run(g, {make(DType::F32, {3}, {-5, 0.5, 5})}).at(0).tensor;
  EXPECT_EQ(values(y), (std::vector<double>{-1, 0.5, 1}));
}

TEST(ElementwiseOps, LegacyBroadcastAxisUpgrade) {
  // Opset 6: B of shape [3] aligned with axis 1 of A [2,3,2].
  Graph g;
  Value* a = g.add_input("a", Type::tensor(DType::F32, {Dim(2), Dim(3), Dim(2)}));
  Value* b = g.add_initializer("b", make(DType::F32, {3}, {10, 20, 30}));
  Node* n = g.add_node("Add", {a, b}, 1, {{"broadcast", Attribute::of_int(1)}, {"axis", Attribute::of_int(1)}});
  g.outputs = {n->outputs[0]};
  OpRegistry::global().find("", "Add")->upgrade(*n, 6);
  EXPECT_FALSE(n->has_attr("axis"));
  Tensor y = Interpreter().run(g, {make(DType::F32, {2, 3, 2}, std::vector<double>(12, 1))}).at(0).tensor;
  EXPECT_EQ(values(y), (std::vector<double>{11, 11, 21, 21, 31, 31, 11, 11, 21, 21, 31, 31}));
}

TEST(ElementwiseOps, CastUpgradeReadsTypeNames) {
  Graph g;
  Value* x = g.add_input("x", Type::tensor(DType::F32, {Dim(1)}));
  Node* n = g.add_node("Cast", {x}, 1, {{"to", Attribute::of_string("INT32")}});
  g.outputs = {n->outputs[0]};
  OpRegistry::global().find("", "Cast")->upgrade(*n, 1);
  Tensor y = Interpreter().run(g, {make(DType::F32, {1}, {3.9})}).at(0).tensor;
  EXPECT_EQ(y.dtype(), DType::I32);
  EXPECT_EQ(y.get_i64(0), 3);
}

}  // namespace
}  // namespace tessel
