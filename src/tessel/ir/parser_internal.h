// The graph IR text parser (private to ir/): one recursive-descent class over
// characters, whose members live in three files:
//   parser.cpp        the grammar of models, graphs, nodes and attributes
//   parser_lexer.cpp  errors, characters, names, strings and numbers
//   parser_types.cpp  types and constant tensors
// The one-line character tests stay here, inline: every token goes through them.
#pragma once

#include <cctype>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tessel/ir/graph.h"

namespace tessel::ir_parser {

class Parser {
 public:
  explicit Parser(const std::string& s, const std::vector<std::string_view>* external = nullptr,
                  std::shared_ptr<const void> owner = nullptr)
      : s_(s), external_(external), owner_(std::move(owner)) {}

  std::unique_ptr<Model> model();

  Type type_only();

 private:
  const std::string& s_;
  const std::vector<std::string_view>* external_;
  std::shared_ptr<const void> owner_;  // keeps external bytes alive: they may be borrowed
  size_t pos_ = 0;

  // ---- errors and characters (parser_lexer.cpp) --------------------------------

  [[noreturn]] void error(size_t at, const std::string& what) const;

  char peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
  char peek_at(size_t k) const { return pos_ + k < s_.size() ? s_[pos_ + k] : '\0'; }
  bool at_end() const { return pos_ >= s_.size(); }

  void skip_ws();
  bool eat(char c);
  bool eat_str(const char* w);
  std::string describe_here() const;
  void expect(char c);

  static bool ident_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
  static bool ident_char(char c, bool dot) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || (dot && c == '.');
  }

  std::string peek_ident(bool dot);
  std::string ident(bool dot);
  void expect_word(const char* w);
  std::string string_lit();
  std::string ident_or_string(bool dot);
  std::string sigil_name();

  static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }

  // ---- numbers (parser_lexer.cpp) -------------------------------------------------

  struct Number {
    std::string text;
    bool is_float = false;  // has '.', an exponent, or is nan/inf
    bool is_hex = false;    // 0x... bit pattern
    size_t at = 0;
  };

  bool number_ahead();
  Number number();
  int64_t to_int(const Number& n);
  int64_t integer() { return to_int(number()); }
  float to_float(const Number& n);

  // ---- types and tensors (parser_types.cpp) -----------------------------------------

  Dim dim();
  bool type_ahead();
  Type type();
  void tensor_element(Tensor* t, int64_t i);
  Tensor tensor();
  void tensor_body(Tensor* t);
  std::pair<size_t, std::string_view> external_bytes(size_t at);
  std::optional<Tensor> borrowed_external(const Type& ty, size_t at);
  void external_constant(Tensor* t, size_t at);
  static bool int_bits_below_8(DType dt) { return is_int(dt) && int_bits(dt) < 8; }
  void check_storage(const Tensor& t, size_t at);

  // ---- attributes and graphs (parser.cpp) ------------------------------------------

  Attribute attribute(Graph& g);
  std::shared_ptr<Graph> subgraph(Graph& parent);

  // A value name visible from `g` (its own values and those of its ancestors).
  Value* lookup(Graph& g, const std::string& name) { return g.find_value(name); }

  Value* define(Graph& g, const std::string& name, size_t at, Type t);

  static std::string name_for_msg(const std::string& n) { return "%" + n; }

  Value* use(Graph& g);
  void graph(Graph& g);
  void statement(Graph& g);
};

}  // namespace tessel::ir_parser
