// Printer of the graph IR text form (grammar in docs/ir.md).
//
// Everything is printed so that parse_model reads it back to an identical
// model: names that are not plain identifiers are quoted, floats use the
// shortest decimal form that round-trips (std::to_chars), float elements
// whose bits would not survive a decimal round trip (NaN payloads, -0 in
// types without it) are printed as their bit pattern, and tensors with more
// than 16 elements are printed as hex of their storage bytes.
#include "tessel/ir/printer.h"

#include <charconv>
#include <cmath>
#include <cstring>
#include <sstream>

#include "tessel/ir/parser.h"
#include "tessel/support/error.h"

namespace tessel {

namespace {

constexpr int64_t kLiteralLimit = 16;

bool is_plain_ident(const std::string& s, bool allow_dot) {
  if (s.empty()) return false;
  if (!(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || (allow_dot && c == '.'))) return false;
  return true;
}

// Names after % and @ may also start with a digit (%1, %0.out).
bool is_plain_name(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.')) return false;
  return true;
}

std::string name_or_quoted(const std::string& s) { return is_plain_name(s) ? s : quote_string(s); }

// Identifiers used for op names, domains and attribute names; keywords of the
// text form are quoted so that they cannot be mistaken for syntax.
std::string ident_or_quoted(const std::string& s, bool allow_dot) {
  static const char* kKeywords[] = {"_", "const", "return", "graph", "type", "dense", "true", "false",
                                    "nan", "inf", "ints", "floats", "strings", "tensors", "graphs"};
  if (!is_plain_ident(s, allow_dot)) return quote_string(s);
  for (const char* k : kKeywords)
    if (s == k) return quote_string(s);
  return s;
}

std::string float_str(float v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

std::string double_str(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

// A float that the lexer reads as a float, never as an integer.
std::string float_attr_str(float v) {
  std::string s = float_str(v);
  if (s.find_first_of(".eni") == std::string::npos) s += ".0";
  return s;
}

std::string hex_bits(const uint8_t* p, int n) {
  // Little-endian storage printed as one number, most significant byte first.
  static const char* d = "0123456789abcdef";
  std::string s = "0x";
  for (int i = n - 1; i >= 0; --i) {
    s += d[p[i] >> 4];
    s += d[p[i] & 15];
  }
  return s;
}

std::string element_str(const Tensor& t, int64_t i) {
  const DType dt = t.dtype();
  if (dt == DType::String) return quote_string(t.strings()[static_cast<size_t>(i)]);
  if (dt == DType::Bool) return t.get_i64(i) ? "true" : "false";
  if (is_unsigned_int(dt)) return std::to_string(t.get_u64(i));
  if (is_signed_int(dt)) return std::to_string(t.get_i64(i));
  // Floating types: the decimal form when it reproduces the stored bits.
  const int sz = dtype_storage_size(dt);
  const uint8_t* bits = t.raw() + i * sz;
  const double v = t.get_f64(i);
  std::string s = dt == DType::F64 ? double_str(v) : float_str(static_cast<float>(v));
  Tensor probe(dt, {1});
  if (!detail::set_float_element(&probe, 0, s) || std::memcmp(probe.raw(), bits, static_cast<size_t>(sz)) != 0)
    return hex_bits(bits, sz);
  return s;
}

void print_graph_to(std::ostringstream& os, const Graph& g, const PrintOptions& o, int indent);

std::string pad(int n) { return std::string(static_cast<size_t>(n), ' '); }

void print_tensor_body(std::ostringstream& os, const Tensor& t, const PrintOptions& o) {
  os << "dense<";
  if (o.elide_large_constants && t.numel() > kLiteralLimit) {
    os << "...>";
    return;
  }
  if (o.external_constants && t.dtype() != DType::String && t.numel() > kLiteralLimit) {
    os << "ext:" << o.external_constants->size() << ">";
    o.external_constants->push_back(&t);
    return;
  }
  if (t.dtype() != DType::String && t.numel() > kLiteralLimit) {
    static const char* d = "0123456789abcdef";
    std::string h = "hex:";
    const uint8_t* p = t.raw();
    const size_t n = t.nbytes();
    h.reserve(n * 2 + 4);
    for (size_t i = 0; i < n; ++i) {
      h += d[p[i] >> 4];
      h += d[p[i] & 15];
    }
    os << h << ">";
    return;
  }
  os << "[";
  for (int64_t i = 0; i < t.numel(); ++i) os << (i ? ", " : "") << element_str(t, i);
  os << "]>";
}

void print_tensor(std::ostringstream& os, const Tensor& t, const PrintOptions& o) {
  os << dtype_name(t.dtype()) << dims_str(t.shape()) << " ";
  print_tensor_body(os, t, o);
}

void print_attr(std::ostringstream& os, const Attribute& a, const PrintOptions& o, int indent) {
  using K = Attribute::Kind;
  auto list = [&](const char* tag, size_t n, auto&& each) {
    if (n == 0) {
      os << tag << "[]";
      return;
    }
    os << "[";
    for (size_t i = 0; i < n; ++i) {
      if (i) os << ", ";
      each(i);
    }
    os << "]";
  };
  switch (a.kind) {
    case K::Int: os << a.i; return;
    case K::Float: os << float_attr_str(a.f); return;
    case K::String: os << quote_string(a.s); return;
    case K::Tensor: print_tensor(os, a.t, o); return;
    case K::Graph:
      if (!a.g) fail("print: graph attribute without a graph");
      print_graph_to(os, *a.g, o, indent);
      return;
    case K::Ints: list("ints", a.ints.size(), [&](size_t i) { os << a.ints[i]; }); return;
    case K::Floats: list("floats", a.floats.size(), [&](size_t i) { os << float_attr_str(a.floats[i]); }); return;
    case K::Strings: list("strings", a.strings.size(), [&](size_t i) { os << quote_string(a.strings[i]); }); return;
    case K::Tensors: list("tensors", a.tensors.size(), [&](size_t i) { print_tensor(os, a.tensors[i], o); }); return;
    case K::Graphs:
      list("graphs", a.graphs.size(), [&](size_t i) {
        if (!a.graphs[i]) fail("print: graphs attribute with a null graph");
        print_graph_to(os, *a.graphs[i], o, indent);
      });
      return;
    case K::TypeProto: os << "type<" << print_type(a.type) << ">"; return;
  }
}

std::string value_ref(const Value* v) { return v ? print_value_name(v->name) : "_"; }

void print_node(std::ostringstream& os, const Node& n, const PrintOptions& o, int indent) {
  os << pad(indent);
  if (!n.outputs.empty()) {
    for (size_t i = 0; i < n.outputs.size(); ++i) os << (i ? ", " : "") << value_ref(n.outputs[i]);
    os << " = ";
  }
  if (!n.domain.empty()) os << ident_or_quoted(n.domain, true) << "::";
  os << ident_or_quoted(n.op, false) << "(";
  for (size_t i = 0; i < n.inputs.size(); ++i) os << (i ? ", " : "") << value_ref(n.inputs[i]);
  os << ")";
  if (!n.attrs.empty()) {
    os << " {";
    bool first = true;
    for (const auto& [k, a] : n.attrs) {
      os << (first ? "" : ", ") << ident_or_quoted(k, false) << " = ";
      print_attr(os, a, o, indent + 2);
      first = false;
    }
    os << "}";
  }
  bool any = false;
  for (const Value* v : n.outputs)
    if (v) {
      os << (any ? ", " : " : ") << print_type(v->type);
      any = true;
    }
  if (!n.name.empty()) os << " name " << quote_string(n.name);
  os << "\n";
}

void print_graph_to(std::ostringstream& os, const Graph& g, const PrintOptions& o, int indent) {
  os << "graph @" << name_or_quoted(g.name) << "(";
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    const Value* v = g.inputs[i];
    os << (i ? ", " : "") << print_value_name(v->name) << ": " << print_type(v->type);
    if (v->constant) {
      os << " = ";
      print_tensor_body(os, *v->constant, o);
    }
  }
  os << ") -> (";
  for (size_t i = 0; i < g.outputs.size(); ++i) {
    const Value* v = g.outputs[i];
    os << (i ? ", " : "") << value_ref(v);
    if (v) os << ": " << print_type(v->type);
  }
  os << ") {\n";
  for (const Value* c : g.initializers) {
    os << pad(indent + 2) << print_value_name(c->name) << " = const ";
    if (c->constant) {
      print_tensor(os, *c->constant, o);
    } else {
      os << "<missing>";
    }
    os << "\n";
  }
  for (const auto& n : g.nodes()) print_node(os, *n, o, indent + 2);
  os << pad(indent + 2) << "return";
  for (size_t i = 0; i < g.outputs.size(); ++i) os << (i ? ", " : " ") << value_ref(g.outputs[i]);
  os << "\n" << pad(indent) << "}";
}

}  // namespace

std::string quote_string(const std::string& s) {
  static const char* d = "0123456789abcdef";
  std::string out = "\"";
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20 || c == 0x7f) {
          out += "\\x";
          out += d[c >> 4];
          out += d[c & 15];
        } else {
          out += ch;
        }
    }
  }
  return out + "\"";
}

std::string print_value_name(const std::string& name) { return "%" + name_or_quoted(name); }

std::string print_type(const Type& t) {
  switch (t.kind) {
    case Type::Kind::Tensor: {
      if (t.dtype == DType::Undefined && !t.shape) return "?";
      std::string s = t.dtype == DType::Undefined ? "?" : std::string(dtype_name(t.dtype));
      if (!t.shape) return s + "[*]";
      s += "[";
      for (size_t i = 0; i < t.shape->size(); ++i) s += (i ? "," : "") + (*t.shape)[i].str();
      return s + "]";
    }
    case Type::Kind::Sequence: return "seq<" + (t.elem ? print_type(*t.elem) : std::string("?")) + ">";
    case Type::Kind::Optional: return "opt<" + (t.elem ? print_type(*t.elem) : std::string("?")) + ">";
  }
  return "?";
}

std::string print_attribute(const Attribute& a, const PrintOptions& o) {
  std::ostringstream os;
  print_attr(os, a, o, 0);
  return os.str();
}

std::string print_tensor_literal(const Tensor& t, const PrintOptions& o) {
  std::ostringstream os;
  print_tensor(os, t, o);
  return os.str();
}

std::string print_graph(const Graph& g, const PrintOptions& o) {
  std::ostringstream os;
  print_graph_to(os, g, o, 0);
  os << "\n";
  return os.str();
}

std::string print_model(const Model& m, const PrintOptions& o) {
  std::ostringstream os;
  os << "tessel.model";
  os << " opset(";
  bool first = true;
  for (const auto& [dom, ver] : m.opsets) {
    os << (first ? "" : ", ") << (dom.empty() ? std::string("ai.onnx") : ident_or_quoted(dom, true)) << "=" << ver;
    first = false;
  }
  os << ")";
  if (m.ir_version != 8) os << " ir_version=" << m.ir_version;
  if (!m.producer_name.empty()) os << " producer=" << quote_string(m.producer_name);
  if (!m.metadata.empty()) {
    os << " metadata(";
    first = true;
    for (const auto& [k, v] : m.metadata) {
      os << (first ? "" : ", ") << quote_string(k) << "=" << quote_string(v);
      first = false;
    }
    os << ")";
  }
  os << " {\n";
  print_graph_to(os, *m.graph, o, 0);
  os << "\n}\n";
  return os.str();
}

}  // namespace tessel
