// Hostile and malformed ONNX models: each must be refused with a tessel::Error
// whose message names the problem (never a crash, an abort or a huge
// allocation). Models are built in memory with the generated protobuf classes.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "onnx.pb.h"
#include "tessel/frontend/onnx/importer.h"
#include "tessel/support/error.h"

namespace tessel {
namespace {

namespace fs = std::filesystem;

onnx::ModelProto base_model(int64_t opset = 17) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  auto* os = m.add_opset_import();
  os->set_domain("");
  os->set_version(opset);
  m.mutable_graph()->set_name("g");
  return m;
}

void tensor_vi(onnx::ValueInfoProto* vi, const std::string& name) {
  vi->set_name(name);
  auto* tt = vi->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(onnx::TensorProto::FLOAT);
  tt->mutable_shape()->add_dim()->set_dim_value(2);
}

onnx::NodeProto* node(onnx::GraphProto* g, const std::string& op, std::vector<std::string> ins,
                      std::vector<std::string> outs) {
  auto* n = g->add_node();
  n->set_op_type(op);
  for (auto& i : ins) n->add_input(i);
  for (auto& o : outs) n->add_output(o);
  return n;
}

// x -> Identity -> y
onnx::ModelProto identity_model() {
  onnx::ModelProto m = base_model();
  auto* g = m.mutable_graph();
  tensor_vi(g->add_input(), "x");
  tensor_vi(g->add_output(), "y");
  node(g, "Identity", {"x"}, {"y"});
  return m;
}

std::string import_error_bytes(const std::string& bytes, const std::string& dir = "") {
  try {
    import_onnx_bytes(bytes.data(), bytes.size(), dir);
  } catch (const Error& e) {
    return e.what();
  }
  return "<no error>";
}
std::string import_error(const onnx::ModelProto& m, const std::string& dir = "") {
  return import_error_bytes(m.SerializeAsString(), dir);
}

#define EXPECT_MSG(msg, needle) EXPECT_NE(std::string(msg).find(needle), std::string::npos) << "message: " << (msg)

// A model whose output is an initializer built by `fill`.
template <class F>
std::string initializer_error(F fill) {
  onnx::ModelProto m = base_model();
  auto* g = m.mutable_graph();
  auto* t = g->add_initializer();
  t->set_name("c");
  fill(t);
  g->add_output()->set_name("c");
  return import_error(m);
}

TEST(BadInput, Sanity) { EXPECT_EQ(import_error(identity_model()), "<no error>"); }

TEST(BadInput, EmptyFile) {
  EXPECT_MSG(import_error_bytes(""), "empty");
  fs::path p = fs::temp_directory_path() / ("tessel_empty_" + std::to_string(::getpid()) + ".onnx");
  { std::ofstream f(p); }
  try {
    import_onnx_file(p.string());
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_MSG(e.what(), "empty");
  }
  fs::remove(p);
}

TEST(BadInput, MissingFile) {
  try {
    import_onnx_file("/nonexistent/tessel/model.onnx");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_MSG(e.what(), "cannot open");
  }
}

TEST(BadInput, Truncated) {
  std::string bytes = identity_model().SerializeAsString();
  // Every proper prefix must give an error, never a crash.
  int parse_errors = 0;
  for (size_t n = 1; n < bytes.size(); ++n) {
    std::string msg = import_error_bytes(bytes.substr(0, n));
    EXPECT_NE(msg, "<no error>") << "prefix of " << n << " bytes";
    if (msg.find("does not parse") != std::string::npos) ++parse_errors;
  }
  EXPECT_GT(parse_errors, 0);
  EXPECT_MSG(import_error_bytes(bytes.substr(0, bytes.size() - 3)), "not an ONNX model");
}

TEST(BadInput, NotProtobuf) {
  EXPECT_MSG(import_error_bytes("\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff"), "not an ONNX model");
  // Text that happens to parse as protobuf fields still has no graph.
  EXPECT_MSG(import_error_bytes("hello world, this is not a model\n"), "not an ONNX model");
}

TEST(BadInput, NoGraph) {
  onnx::ModelProto m = base_model();
  m.clear_graph();
  EXPECT_MSG(import_error(m), "no graph");
}

TEST(BadInput, UnknownOperator) {
  onnx::ModelProto m = identity_model();
  m.mutable_graph()->mutable_node(0)->set_op_type("NoSuchOp");
  EXPECT_MSG(import_error(m), "unknown operator 'NoSuchOp' (domain 'ai.onnx')");
  onnx::ModelProto m2 = identity_model();
  m2.mutable_graph()->mutable_node(0)->set_domain("com.example");
  EXPECT_MSG(import_error(m2), "unknown operator 'Identity' (domain 'com.example')");
}

TEST(BadInput, UndefinedName) {
  onnx::ModelProto m = identity_model();
  m.mutable_graph()->mutable_node(0)->set_input(0, "nowhere");
  EXPECT_MSG(import_error(m), "undefined value 'nowhere'");
}

TEST(BadInput, UndefinedNameInSubgraph) {
  onnx::ModelProto m = base_model();
  auto* g = m.mutable_graph();
  tensor_vi(g->add_input(), "c");
  tensor_vi(g->add_output(), "y");
  auto* n = node(g, "If", {"c"}, {"y"});
  for (const char* br : {"then_branch", "else_branch"}) {
    auto* a = n->add_attribute();
    a->set_name(br);
    a->set_type(onnx::AttributeProto::GRAPH);
    node(a->mutable_g(), "Identity", {"ghost"}, {"o"});
    tensor_vi(a->mutable_g()->add_output(), "o");
  }
  EXPECT_MSG(import_error(m), "undefined value 'ghost'");
}

TEST(BadInput, DuplicateName) {
  onnx::ModelProto m = identity_model();
  node(m.mutable_graph(), "Identity", {"x"}, {"y"});
  EXPECT_MSG(import_error(m), "duplicate name");
  EXPECT_MSG(import_error(m), "'y'");
  // A node output that redefines a graph input.
  onnx::ModelProto m2 = identity_model();
  node(m2.mutable_graph(), "Identity", {"y"}, {"x"});
  EXPECT_MSG(import_error(m2), "duplicate name");
  // Two initializers of the same name.
  onnx::ModelProto m3 = identity_model();
  for (int i = 0; i < 2; ++i) {
    auto* t = m3.mutable_graph()->add_initializer();
    t->set_name("w");
    t->set_data_type(onnx::TensorProto::FLOAT);
    t->add_dims(0);
  }
  EXPECT_MSG(import_error(m3), "duplicate name");
}

TEST(BadInput, Cycle) {
  onnx::ModelProto m = base_model();
  auto* g = m.mutable_graph();
  tensor_vi(g->add_output(), "b");
  node(g, "Identity", {"b"}, {"a"});
  node(g, "Identity", {"a"}, {"b"});
  EXPECT_MSG(import_error(m), "cycle");
  onnx::ModelProto m2 = base_model();
  tensor_vi(m2.mutable_graph()->add_output(), "a");
  node(m2.mutable_graph(), "Identity", {"a"}, {"a"});
  EXPECT_MSG(import_error(m2), "cycle");
}

TEST(BadInput, NoOutputs) {
  onnx::ModelProto m = identity_model();
  m.mutable_graph()->clear_output();
  EXPECT_MSG(import_error(m), "has no outputs");
}

TEST(BadInput, OutputNeverProduced) {
  onnx::ModelProto m = identity_model();
  tensor_vi(m.mutable_graph()->add_output(), "z");
  EXPECT_MSG(import_error(m), "output 'z' of graph 'g' is never produced");
}

TEST(BadInput, RawDataTooShortOrLong) {
  std::string msg = initializer_error([](onnx::TensorProto* t) {
    t->set_data_type(onnx::TensorProto::FLOAT);
    t->add_dims(4);
    t->set_raw_data(std::string(15, '\0'));
  });
  EXPECT_MSG(msg, "raw_data has 15 bytes");
  EXPECT_MSG(msg, "needs 16");
  EXPECT_MSG(initializer_error([](onnx::TensorProto* t) {
               t->set_data_type(22 /* INT4 */);
               t->add_dims(3);
               t->set_raw_data(std::string(3, '\0'));
             }),
             "raw_data has 3 bytes");
  EXPECT_MSG(initializer_error([](onnx::TensorProto* t) {
               t->set_data_type(onnx::TensorProto::FLOAT);
               t->add_dims(3);
               t->add_float_data(1);
             }),
             "has 1 values in float_data");
  EXPECT_MSG(initializer_error([](onnx::TensorProto* t) {
               t->set_data_type(onnx::TensorProto::FLOAT);
               t->add_dims(1);
               t->add_int64_data(1);
             }),
             "data in int64_data");
}

TEST(BadInput, NegativeDim) {
  EXPECT_MSG(initializer_error([](onnx::TensorProto* t) {
               t->set_data_type(onnx::TensorProto::FLOAT);
               t->add_dims(-1);
             }),
             "negative dimension -1");
  onnx::ModelProto m = identity_model();
  m.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(0)->set_dim_value(-5);
  EXPECT_MSG(import_error(m), "negative dimension -5");
}

TEST(BadInput, OverflowingDims) {
  EXPECT_MSG(initializer_error([](onnx::TensorProto* t) {
               t->set_data_type(onnx::TensorProto::FLOAT);
               t->add_dims(int64_t{1} << 40);
               t->add_dims(int64_t{1} << 40);
             }),
             "overflow");
}

TEST(BadInput, ConstantTooLarge) {
  // 2^36 elements with no data: refused without allocating.
  auto start = std::chrono::steady_clock::now();
  EXPECT_MSG(initializer_error([](onnx::TensorProto* t) {
               t->set_data_type(onnx::TensorProto::FLOAT);
               t->add_dims(int64_t{1} << 36);
             }),
             "too large");
  // Within the element cap but without the data: the size check comes first.
  EXPECT_MSG(initializer_error([](onnx::TensorProto* t) {
               t->set_data_type(onnx::TensorProto::DOUBLE);
               t->add_dims(int64_t{1} << 33);
               t->set_raw_data("x");
             }),
             "raw_data has 1 bytes");
  // A sparse tensor that would densify to gigabytes.
  onnx::ModelProto m = base_model();
  auto* sp = m.mutable_graph()->add_sparse_initializer();
  sp->add_dims(int64_t{1} << 32);
  auto* v = sp->mutable_values();
  v->set_name("s");
  v->set_data_type(onnx::TensorProto::FLOAT);
  v->add_dims(0);
  m.mutable_graph()->add_output()->set_name("s");
  EXPECT_MSG(import_error(m), "too large to densify");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
}

TEST(BadInput, ComplexAndUnknownDtype) {
  EXPECT_MSG(initializer_error([](onnx::TensorProto* t) { t->set_data_type(14); }), "complex");
  EXPECT_MSG(initializer_error([](onnx::TensorProto* t) { t->set_data_type(99); }), "unsupported tensor data type 99");
  EXPECT_MSG(initializer_error([](onnx::TensorProto* t) { t->set_data_type(0); }), "no data type");
}

TEST(BadInput, AttributeOfWrongType) {
  onnx::ModelProto m = identity_model();
  auto* a = m.mutable_graph()->mutable_node(0)->add_attribute();
  a->set_name("axis");
  a->set_type(onnx::AttributeProto::INT);
  a->set_f(1.5f);
  EXPECT_MSG(import_error(m), "attribute 'axis'");
  EXPECT_MSG(import_error(m), "declared INT but holds a FLOAT value");
  onnx::ModelProto m2 = identity_model();
  auto* b = m2.mutable_graph()->mutable_node(0)->add_attribute();
  b->set_name("body");
  b->set_type(onnx::AttributeProto::GRAPH);
  EXPECT_MSG(import_error(m2), "of type GRAPH has no graph");
  onnx::ModelProto m3 = identity_model();
  auto* c = m3.mutable_graph()->mutable_node(0)->add_attribute();
  c->set_name("r");
  c->set_type(onnx::AttributeProto::FLOAT);
  c->set_ref_attr_name("alpha");
  EXPECT_MSG(import_error(m3), "outside of a function body");
}

TEST(BadInput, UnsupportedOpset) {
  EXPECT_MSG(import_error([] {
               auto m = identity_model();
               m.mutable_opset_import(0)->set_version(999);
               return m;
             }()),
             "unsupported ai.onnx opset 999");
  EXPECT_MSG(import_error([] {
               auto m = identity_model();
               m.mutable_opset_import(0)->set_version(0);
               return m;
             }()),
             "unsupported ai.onnx opset 0");
  EXPECT_MSG(import_error([] {
               auto m = identity_model();
               m.clear_opset_import();
               return m;
             }()),
             "does not import an opset for domain 'ai.onnx'");
}

TEST(BadInput, RecursiveFunction) {
  onnx::ModelProto m = identity_model();
  auto* f = m.add_functions();
  f->set_name("Rec");
  f->set_domain("local");
  f->add_input("a");
  f->add_output("b");
  auto* n = f->add_node();
  n->set_op_type("Rec");
  n->set_domain("local");
  n->add_input("a");
  n->add_output("b");
  auto* os = m.add_opset_import();
  os->set_domain("local");
  os->set_version(1);
  m.mutable_graph()->mutable_node(0)->set_op_type("Rec");
  m.mutable_graph()->mutable_node(0)->set_domain("local");
  EXPECT_MSG(import_error(m), "nest too deeply");
}

// ---- external data ---------------------------------------------------------------

class ExternalData : public ::testing::Test {
 protected:
  fs::path dir;
  void SetUp() override {
    dir = fs::temp_directory_path() / ("tessel_ext_bad_" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir / "model");
    std::ofstream(dir / "secret.bin", std::ios::binary) << std::string(16, 'S');
    std::ofstream(dir / "model" / "w.bin", std::ios::binary) << std::string(16, 'W');
  }
  void TearDown() override { fs::remove_all(dir); }

  std::string load_error(const std::string& location, const std::string& offset = "", const std::string& length = "") {
    onnx::ModelProto m = base_model();
    auto* g = m.mutable_graph();
    auto* t = g->add_initializer();
    t->set_name("w");
    t->set_data_type(onnx::TensorProto::FLOAT);
    t->add_dims(4);
    t->set_data_location(onnx::TensorProto::EXTERNAL);
    auto kv = [&](const char* k, const std::string& v) {
      auto* e = t->add_external_data();
      e->set_key(k);
      e->set_value(v);
    };
    kv("location", location);
    if (!offset.empty()) kv("offset", offset);
    if (!length.empty()) kv("length", length);
    g->add_output()->set_name("w");
    fs::path p = dir / "model" / "model.onnx";
    {
      std::ofstream f(p, std::ios::binary);
      f << m.SerializeAsString();
    }
    try {
      import_onnx_file(p.string());
    } catch (const Error& e) {
      return e.what();
    }
    return "<no error>";
  }
};

TEST_F(ExternalData, InsideFolderWorks) { EXPECT_EQ(load_error("w.bin"), "<no error>"); }

TEST_F(ExternalData, AbsolutePath) {
  EXPECT_MSG(load_error((dir / "secret.bin").string()), "absolute path");
}

TEST_F(ExternalData, DotDot) {
  EXPECT_MSG(load_error("../secret.bin"), "contains '..'");
  EXPECT_MSG(load_error("sub/../../secret.bin"), "contains '..'");
}

TEST_F(ExternalData, Symlink) {
  fs::create_symlink(dir / "secret.bin", dir / "model" / "link.bin");
  EXPECT_MSG(load_error("link.bin"), "symlink");
  fs::create_directory_symlink(dir, dir / "model" / "up");
  EXPECT_MSG(load_error("up/secret.bin"), "symlink");
}

TEST_F(ExternalData, PastEndOfFile) {
  EXPECT_MSG(load_error("w.bin", "8", "16"), "past the end");
  EXPECT_MSG(load_error("w.bin", "100"), "past the end");
  // Length disagreeing with the tensor's size.
  EXPECT_MSG(load_error("w.bin", "0", "8"), "needs 16 bytes");
  EXPECT_MSG(load_error("w.bin", "-1"), "not a valid number");
}

TEST_F(ExternalData, MissingFileAndDirectory) {
  EXPECT_MSG(load_error("nope.bin"), "not found");
  fs::create_directories(dir / "model" / "d");
  EXPECT_MSG(load_error("d"), "not a regular file");
}

TEST(BadInput, ExternalDataFromMemoryRefused) {
  onnx::ModelProto m = base_model();
  auto* t = m.mutable_graph()->add_initializer();
  t->set_name("w");
  t->set_data_type(onnx::TensorProto::FLOAT);
  t->add_dims(1);
  t->set_data_location(onnx::TensorProto::EXTERNAL);
  auto* e = t->add_external_data();
  e->set_key("location");
  e->set_value("w.bin");
  m.mutable_graph()->add_output()->set_name("w");
  EXPECT_MSG(import_error(m, ""), "not allowed");
}

}  // namespace
}  // namespace tessel
