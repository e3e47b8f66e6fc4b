// Parser of the graph IR text form (grammar in docs/ir.md). A hand-written
// recursive-descent parser over characters: the grammar is small, and dims
// are handed to Dim::parse as raw text. Every error is "<line>:<col>: <what>".
//
// Values must be defined before they are used (the text is in node order);
// name lookup walks the enclosing graphs, so a subgraph sees the values of
// its ancestors but never those of a sibling graph.
//
// The parser is split over three files around one class (parser_internal.h):
// this one holds the grammar of models, graphs, nodes and attributes;
// parser_lexer.cpp the characters, names, strings and numbers;
// parser_types.cpp the types and constant tensors.
#include "tessel/ir/parser.h"

#include <cctype>
#include <utility>

#include "tessel/ir/parser_internal.h"
#include "tessel/support/error.h"

namespace tessel {

namespace ir_parser {

std::unique_ptr<Model> Parser::model() {
  auto m = std::make_unique<Model>();
  skip_ws();
  expect_word("tessel.model");
  for (;;) {
    skip_ws();
    if (peek() == '{') break;
    size_t at = pos_;
    std::string key = ident(true);
    if (key == "opset") {
      expect('(');
      if (!eat(')')) {
        do {
          std::string dom = ident_or_string(true);
          expect('=');
          int64_t v = integer();
          if (dom == "ai.onnx") dom = "";
          if (m->opsets.count(dom)) error(at, "opset for domain '" + dom + "' given twice");
          m->opsets[dom] = v;
        } while (eat(','));
        expect(')');
      }
    } else if (key == "ir_version") {
      expect('=');
      m->ir_version = integer();
    } else if (key == "producer") {
      expect('=');
      m->producer_name = string_lit();
    } else if (key == "metadata") {
      expect('(');
      if (!eat(')')) {
        do {
          std::string k = string_lit();
          expect('=');
          m->metadata[k] = string_lit();
        } while (eat(','));
        expect(')');
      }
    } else {
      error(at, "unknown model property '" + key + "'");
    }
  }
  expect('{');
  graph(*m->graph);
  expect('}');
  skip_ws();
  if (pos_ != s_.size()) error(pos_, "unexpected text after the model");
  return m;
}

// ---- attributes -------------------------------------------------------------------

Attribute Parser::attribute(Graph& g) {
  skip_ws();
  size_t at = pos_;
  Attribute a;
  using K = Attribute::Kind;
  std::string w = peek_ident(false);
  if (peek() == '[' || ((w == "ints" || w == "floats" || w == "strings" || w == "tensors" || w == "graphs") &&
                        [&] {
                          size_t p = pos_ + w.size();
                          while (p < s_.size() && std::isspace(static_cast<unsigned char>(s_[p]))) ++p;
                          return p < s_.size() && s_[p] == '[';
                        }())) {
    std::string tag;
    if (peek() != '[') {
      tag = w;
      pos_ += w.size();
    }
    expect('[');
    skip_ws();
    if (peek() == ']') {
      ++pos_;
      if (tag.empty()) error(at, "an empty list needs its kind: ints[], floats[], strings[], tensors[] or graphs[]");
      a.kind = tag == "ints" ? K::Ints : tag == "floats" ? K::Floats : tag == "strings" ? K::Strings
               : tag == "tensors" ? K::Tensors : K::Graphs;
      return a;
    }
    // The first element decides the kind.
    std::string first = peek_ident(false);
    if (peek() == '"') {
      a.kind = K::Strings;
    } else if (first == "graph") {
      a.kind = K::Graphs;
    } else if (number_ahead()) {
      a.kind = K::Ints;
    } else if (type_ahead()) {
      a.kind = K::Tensors;
    } else {
      error(pos_, "unexpected list element " + describe_here());
    }
    std::vector<Number> nums;
    do {
      switch (a.kind) {
        case K::Strings: a.strings.push_back(string_lit()); break;
        case K::Graphs: a.graphs.push_back(subgraph(g)); break;
        case K::Tensors: a.tensors.push_back(tensor()); break;
        default: nums.push_back(number());
      }
    } while (eat(','));
    expect(']');
    if (a.kind == K::Ints) {
      bool any_float = tag == "floats";
      for (const Number& n : nums) any_float = any_float || n.is_float;
      if (any_float) {
        a.kind = K::Floats;
        for (const Number& n : nums) a.floats.push_back(to_float(n));
      } else {
        for (const Number& n : nums) a.ints.push_back(to_int(n));
      }
    }
    const char* got = a.kind == K::Ints ? "ints" : a.kind == K::Floats ? "floats" : a.kind == K::Strings ? "strings"
                      : a.kind == K::Tensors ? "tensors" : "graphs";
    if (!tag.empty() && tag != got) error(at, str_cat("list tagged ", tag, " holds ", got));
    return a;
  }
  if (peek() == '"') {
    a.kind = K::String;
    a.s = string_lit();
    return a;
  }
  if (number_ahead()) {
    Number n = number();
    if (n.is_float) {
      a.kind = K::Float;
      a.f = to_float(n);
    } else {
      a.kind = K::Int;
      a.i = to_int(n);
    }
    return a;
  }
  if (w == "graph") {
    a.kind = K::Graph;
    a.g = subgraph(g);
    return a;
  }
  if (w == "type" && peek_at(4) == '<') {
    pos_ += 4;
    expect('<');
    a.kind = K::TypeProto;
    a.type = type();
    expect('>');
    return a;
  }
  if (type_ahead()) {
    a.kind = K::Tensor;
    a.t = tensor();
    return a;
  }
  error(at, "expected an attribute value, got " + describe_here());
}

// ---- graphs -------------------------------------------------------------------------

std::shared_ptr<Graph> Parser::subgraph(Graph& parent) {
  auto sg = std::make_shared<Graph>();
  sg->parent = &parent;
  graph(*sg);
  return sg;
}

Value* Parser::define(Graph& g, const std::string& name, size_t at, Type t) {
  if (lookup(g, name)) error(at, "value " + name_for_msg(name) + " is already defined");
  return g.add_value(name, std::move(t));
}

Value* Parser::use(Graph& g) {
  skip_ws();
  size_t at = pos_;
  if (peek() == '_' && !ident_char(peek_at(1), true)) {
    ++pos_;
    return nullptr;
  }
  if (peek() != '%') error(at, "expected a value (%name or _), got " + describe_here());
  ++pos_;
  std::string n = sigil_name();
  Value* v = lookup(g, n);
  if (!v) error(at, "use of undefined value " + name_for_msg(n));
  return v;
}

void Parser::graph(Graph& g) {
  skip_ws();
  expect_word("graph");
  skip_ws();
  if (peek() != '@') error(pos_, "expected '@name' after 'graph'");
  ++pos_;
  g.name = sigil_name();
  expect('(');
  if (!eat(')')) {
    do {
      skip_ws();
      size_t at = pos_;
      if (peek() != '%') error(at, "expected an input '%name: type'");
      ++pos_;
      std::string n = sigil_name();
      expect(':');
      Type t = type();
      if (lookup(g, n)) error(at, "value " + name_for_msg(n) + " is already defined");
      Value* v = g.add_input(n, t);
      if (eat('=')) {
        if (!t.is_tensor() || t.dtype == DType::Undefined || !t.shape || !is_static(*t.shape))
          error(at, "an input with a default value needs a static tensor type");
        Tensor c(t.dtype, static_dims(*t.shape));
        if (c.dtype() == DType::String) c.mutable_strings().assign(static_cast<size_t>(c.numel()), "");
        tensor_body(&c);
        v->constant = std::move(c);
      }
    } while (eat(','));
    expect(')');
  }
  if (!eat_str("->")) error(pos_, "expected '->' after the graph inputs");
  // The signature repeats the outputs for readers; `return` defines them.
  struct SigOut {
    std::string name;  // "" for _
    size_t at;
  };
  std::vector<SigOut> sig;
  expect('(');
  if (!eat(')')) {
    do {
      skip_ws();
      size_t at = pos_;
      if (peek() == '_') {
        ++pos_;
        sig.push_back({"", at});
        continue;
      }
      if (peek() != '%') error(at, "expected an output '%name: type'");
      ++pos_;
      sig.push_back({sigil_name(), at});
      expect(':');
      type();
    } while (eat(','));
    expect(')');
  }
  expect('{');
  for (;;) {
    skip_ws();
    if (at_end()) error(pos_, "unterminated graph @" + g.name);
    size_t at = pos_;
    if (peek_ident(false) == "return") {
      pos_ += 6;
      skip_ws();
      if (peek() != '}') {
        do g.outputs.push_back(use(g));
        while (eat(','));
      }
      expect('}');
      break;
    }
    statement(g);
    (void)at;
  }
  if (sig.size() != g.outputs.size())
    error(pos_, str_cat("graph @", g.name, " declares ", sig.size(), " outputs but returns ", g.outputs.size()));
  for (size_t i = 0; i < sig.size(); ++i) {
    const std::string got = g.outputs[i] ? g.outputs[i]->name : "";
    if (sig[i].name != got)
      error(sig[i].at, str_cat("output ", i, " of graph @", g.name, " is declared as ",
                               sig[i].name.empty() ? "_" : name_for_msg(sig[i].name), " but returned as ",
                               got.empty() ? "_" : name_for_msg(got)));
  }
}

void Parser::statement(Graph& g) {
  skip_ws();
  // Output list (absent for a node without outputs).
  struct Out {
    std::string name;  // "" = omitted
    size_t at;
  };
  std::vector<Out> outs;
  bool has_outs = peek() == '%' || (peek() == '_' && !ident_char(peek_at(1), true));
  if (has_outs) {
    do {
      skip_ws();
      size_t at = pos_;
      if (peek() == '_' && !ident_char(peek_at(1), true)) {
        ++pos_;
        outs.push_back({"", at});
        continue;
      }
      if (peek() != '%') error(at, "expected an output value, got " + describe_here());
      ++pos_;
      outs.push_back({sigil_name(), at});
    } while (eat(','));
    expect('=');
  }
  skip_ws();
  size_t op_at = pos_;
  if (peek() != '"' && peek_ident(true) == "const") {
    pos_ += 5;
    if (outs.size() != 1 || outs[0].name.empty()) error(op_at, "'const' defines exactly one named value");
    Tensor t = tensor();
    if (lookup(g, outs[0].name)) error(outs[0].at, "value " + name_for_msg(outs[0].name) + " is already defined");
    g.add_initializer(outs[0].name, std::move(t));
    return;
  }
  std::string domain, op = ident_or_string(true);
  if (eat_str("::")) {
    domain = op;
    op = ident_or_string(false);
  } else if (op.find('.') != std::string::npos && s_[op_at] != '"') {
    error(op_at, "operator names cannot contain '.' (use domain::Op)");
  }
  if (op.empty()) error(op_at, "empty operator name");
  std::vector<Value*> inputs;
  expect('(');
  if (!eat(')')) {
    do inputs.push_back(use(g));
    while (eat(','));
    expect(')');
  }
  std::map<std::string, Attribute> attrs;
  if (eat('{')) {
    if (!eat('}')) {
      do {
        skip_ws();
        size_t at = pos_;
        std::string k = ident_or_string(false);
        expect('=');
        if (attrs.count(k)) error(at, "attribute '" + k + "' given twice");
        attrs[k] = attribute(g);
      } while (eat(','));
      expect('}');
    }
  }
  size_t n_present = 0;
  for (const Out& o : outs) n_present += !o.name.empty();
  std::vector<Type> types(n_present);
  if (eat(':')) {
    for (size_t i = 0; i < n_present; ++i) {
      if (i) expect(',');
      types[i] = type();
    }
  }
  std::string node_name;
  if (peek_ident(false) == "name") {
    pos_ += 4;
    node_name = string_lit();
  }
  std::vector<Value*> out_values;
  size_t k = 0;
  for (const Out& o : outs) {
    if (o.name.empty()) {
      out_values.push_back(nullptr);
      continue;
    }
    for (Value* prev : out_values)
      if (prev && prev->name == o.name) error(o.at, "value " + name_for_msg(o.name) + " is already defined");
    out_values.push_back(define(g, o.name, o.at, types[k++]));
  }
  Node* n = g.add_node_with_outputs(op, std::move(inputs), std::move(out_values), std::move(attrs), domain);
  n->name = node_name;
}

}  // namespace ir_parser

std::unique_ptr<Model> parse_model(const std::string& text, const std::vector<std::string_view>* external_constants,
                                   std::shared_ptr<const void> owner) {
  return ir_parser::Parser(text, external_constants, std::move(owner)).model();
}

Type parse_type(const std::string& text) { return ir_parser::Parser(text).type_only(); }

}  // namespace tessel
