#include "tessel/loop/printer.h"

#include <charconv>
#include <cmath>
#include <sstream>

#include "tessel/support/error.h"

namespace tessel::loop {

namespace {

constexpr int kUnaryPrecedence = 9;
constexpr int kPrimaryPrecedence = 10;

std::string float_text(DType t, double v) {
  const std::string sfx(dtype_name(t));
  const std::string sign = std::signbit(v) ? "-" : "";
  if (std::isnan(v)) return sign + "nan" + sfx;
  if (std::isinf(v)) return sign + "inf" + sfx;
  char buf[64];
  std::to_chars_result r;
  // A value that is exactly a float prints as the shortest float that reads
  // back to it; other narrow values, which the parser cannot tell from a
  // float, print as exact hex; f64 prints as the shortest double.
  if (t != DType::F64 && static_cast<double>(static_cast<float>(v)) == v) {
    r = std::to_chars(buf, buf + sizeof buf, static_cast<float>(v));
  } else if (t == DType::F64) {
    r = std::to_chars(buf, buf + sizeof buf, v);
  } else {
    r = std::to_chars(buf, buf + sizeof buf, std::fabs(v), std::chars_format::hex);
    return sign + "0x" + std::string(buf, r.ptr) + sfx;
  }
  std::string s(buf, r.ptr);
  if (s.find_first_not_of("-0123456789") == std::string::npos) s += ".0";
  return s + sfx;
}

bool is_imm(const Expr& e) { return e->kind == ExprKind::IntImm || e->kind == ExprKind::FloatImm; }

int precedence(const Expr& e) {
  if (e->kind == ExprKind::Binary) {
    int p = binary_op_precedence(e->binary);
    return p == 0 ? kPrimaryPrecedence : p;
  }
  if (e->kind == ExprKind::Unary) return kUnaryPrecedence;
  // A negative immediate reads as a unary minus applied to a literal.
  if (is_imm(e) && immediate_text(e)[0] == '-') return kUnaryPrecedence;
  return kPrimaryPrecedence;
}

class ExprPrinter {
 public:
  explicit ExprPrinter(std::ostream& os) : os_(os) {}

  void print(const Expr& e) {
    switch (e->kind) {
      case ExprKind::IntImm: case ExprKind::FloatImm: os_ << immediate_text(e); return;
      case ExprKind::Var: os_ << e->name; return;
      case ExprKind::Unary: print_unary(e); return;
      case ExprKind::Binary: print_binary(e); return;
      case ExprKind::Select: print_call("select", e->args); return;
      case ExprKind::Cast: print_call(str_cat("cast<", dtype_name(e->dtype), ">"), e->args); return;
      case ExprKind::Bitcast: print_call(str_cat("bitcast<", dtype_name(e->dtype), ">"), e->args); return;
      case ExprKind::Load: os_ << e->buffer->name; print_list("[", e->args, "]"); return;
      case ExprKind::Call: print_intrinsic(e); return;
    }
  }

  void print_list(const char* open, const std::vector<Expr>& args, const char* close) {
    os_ << open;
    for (size_t i = 0; i < args.size(); ++i) {
      if (i) os_ << ", ";
      print(args[i]);
    }
    os_ << close;
  }

 private:
  void print_operand(const Expr& e, bool parens) {
    if (parens) os_ << "(";
    print(e);
    if (parens) os_ << ")";
  }

  void print_unary(const Expr& e) {
    const Expr& a = e->args[0];
    switch (e->unary) {
      case UnaryOp::Neg: os_ << "-"; break;
      case UnaryOp::Not: os_ << (a.dtype() == DType::Bool ? "!" : "~"); break;
    }
    // `-(1)` keeps a negated literal apart from the literal -1.
    print_operand(a, precedence(a) < kPrimaryPrecedence || is_imm(a));
  }

  void print_binary(const Expr& e) {
    const int p = binary_op_precedence(e->binary);
    if (p == 0) {
      print_call(binary_op_spelling(e->binary), e->args);
      return;
    }
    print_operand(e->args[0], precedence(e->args[0]) < p);
    os_ << " " << binary_op_spelling(e->binary) << " ";
    print_operand(e->args[1], precedence(e->args[1]) <= p);
  }

  void print_call(const std::string& name, const std::vector<Expr>& args) {
    os_ << name;
    print_list("(", args, ")");
  }

  void print_intrinsic(const Expr& e) {
    const bool plain = !is_builtin_function(e->name) && !e->args.empty() && e->args[0].dtype() == e->dtype;
    print_call(plain ? e->name : str_cat(e->name, ":", dtype_name(e->dtype)), e->args);
  }

  std::ostream& os_;
};

std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20 || c == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\x%02x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

std::string buffer_decl(const Buffer& b) {
  std::ostringstream os;
  os << "%" << b.name << ": " << dtype_name(b.dtype);
  ExprPrinter(os).print_list("[", b.shape, "]");
  return os.str();
}

const char* scope_word(BufferScope s) {
  switch (s) {
    case BufferScope::Param: return "param";
    case BufferScope::Local: return "local";
    case BufferScope::Shared: return "shared";
  }
  return "?";
}

class StmtPrinter {
 public:
  explicit StmtPrinter(std::ostream& os) : os_(os) {}

  // Prints `s` as the statements of a block. A Let or Allocate that ends its
  // block prints without braces: its body is the rest of the block.
  void block(const Stmt& s, int indent) {
    if (s->kind == StmtKind::Seq) {
      for (size_t i = 0; i < s->body.size(); ++i) stmt(s->body[i], indent, i + 1 == s->body.size());
    } else {
      stmt(s, indent, true);
    }
  }

 private:
  void line(int indent) { os_ << std::string(static_cast<size_t>(indent) * 2, ' '); }
  void expr(const Expr& e) { ExprPrinter(os_).print(e); }

  void braced(const Stmt& body, int indent) {
    os_ << " {\n";
    block(body, indent + 1);
    line(indent);
    os_ << "}";
  }

  // The body of a Let/Allocate: the rest of the block, or a braced block.
  void scoped_body(const Stmt& body, int indent, bool last) {
    if (last) {
      os_ << "\n";
      block(body, indent);
      return;
    }
    braced(body, indent);
    os_ << "\n";
  }

  void stmt(const Stmt& s, int indent, bool last) {
    switch (s->kind) {
      case StmtKind::Seq:  // a Seq nested by hand (seq() flattens): a braced block
        line(indent);
        os_ << "{\n";
        block(s, indent + 1);
        line(indent);
        os_ << "}\n";
        return;
      case StmtKind::For:
        line(indent);
        if (s->for_kind != ForKind::Serial) os_ << for_kind_name(s->for_kind) << " ";
        os_ << "for " << s->var << " in [";
        expr(s->min);
        os_ << ", ";
        expr(is_const(s->min, 0) ? s->extent : binary(BinaryOp::Add, s->min, s->extent));
        os_ << ")";
        braced(s->body[0], indent);
        os_ << "\n";
        return;
      case StmtKind::Store:
        line(indent);
        os_ << s->buffer->name;
        ExprPrinter(os_).print_list("[", s->indices, "]");
        os_ << " = ";
        expr(s->value);
        os_ << "\n";
        return;
      case StmtKind::Let:
        line(indent);
        os_ << "let " << s->var << " = ";
        expr(s->value);
        scoped_body(s->body[0], indent, last);
        return;
      case StmtKind::Allocate:
        line(indent);
        os_ << "allocate " << buffer_decl(*s->buffer) << " " << scope_word(s->buffer->scope);
        scoped_body(s->body[0], indent, last);
        return;
      case StmtKind::If:
        line(indent);
        os_ << "if ";
        expr(s->value);
        braced(s->body[0], indent);
        if (s->body.size() > 1) {
          os_ << " else";
          braced(s->body[1], indent);
        }
        os_ << "\n";
        return;
      case StmtKind::Assert:
        line(indent);
        os_ << "assert ";
        expr(s->value);
        os_ << ", " << quoted(s->message) << "\n";
        return;
      case StmtKind::Contract: contract(*s, indent); return;
      case StmtKind::Attention: attention(*s, indent); return;
    }
  }

  // `name in [0, extent)`, comma-separated.
  void ranges(const std::vector<std::pair<const std::string*, const Expr*>>& axes) {
    for (size_t d = 0; d < axes.size(); ++d) {
      os_ << (d ? ", " : "") << *axes[d].first << " in [0, ";
      expr(*axes[d].second);
      os_ << ")";
    }
  }

  // attention b in [0, B), i in [0, M), j in [0, N), d in [0, D), e in [0, E):
  //     acc = softmax_dot(q, k, v, scale, bias, p_type) { epilogue }
  void attention(const StmtNode& s, int indent) {
    const AttentionView a = attention_parts(s);
    line(indent);
    os_ << "attention ";
    ranges({{&a.batch, &a.batch_extent}, {&a.i, &a.m}, {&a.j, &a.n}, {&a.d, &a.d_extent}, {&a.e, &a.e_extent}});
    os_ << ": " << a.acc << " = softmax_dot(";
    for (const Expr* e : {&a.q, &a.k, &a.v, &a.scale, &a.bias}) {
      expr(*e);
      os_ << ", ";
    }
    os_ << dtype_name(a.p_type) << ")";
    braced(a.epilogue, indent);
    os_ << "\n";
  }

  // contract b in [0, B), i in [0, M), j in [0, N), k in [0, K): acc = dot(a, b) { epilogue }
  void contract(const StmtNode& s, int indent) {
    const ContractView c = contract_parts(s);
    line(indent);
    os_ << "contract ";
    ranges({{&c.batch, &c.batch_extent}, {&c.i, &c.m}, {&c.j, &c.n}, {&c.k, &c.k_extent}});
    os_ << ": " << c.acc << " = dot(";
    expr(c.a);
    os_ << ", ";
    expr(c.b);
    os_ << ")";
    braced(c.epilogue, indent);
    os_ << "\n";
  }

  std::ostream& os_;
};

}  // namespace

const std::vector<BinaryOp>& all_binary_ops() {
  static const std::vector<BinaryOp> ops = {
      BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Div, BinaryOp::Mod, BinaryOp::FloorDiv,
      BinaryOp::FloorMod, BinaryOp::Min, BinaryOp::Max, BinaryOp::And, BinaryOp::Or, BinaryOp::Xor,
      BinaryOp::Shl, BinaryOp::Shr, BinaryOp::Eq, BinaryOp::Ne, BinaryOp::Lt, BinaryOp::Le,
      BinaryOp::Gt, BinaryOp::Ge};
  return ops;
}

const std::vector<ForKind>& all_for_kinds() {
  static const std::vector<ForKind> kinds = {
      ForKind::Serial, ForKind::Parallel, ForKind::Vectorized, ForKind::Unrolled, ForKind::GpuBlockX,
      ForKind::GpuBlockY, ForKind::GpuBlockZ, ForKind::GpuThreadX, ForKind::GpuThreadY, ForKind::GpuThreadZ,
      ForKind::GpuLanes};
  return kinds;
}

const char* binary_op_spelling(BinaryOp op) {
  switch (op) {
    case BinaryOp::Add: return "+";
    case BinaryOp::Sub: return "-";
    case BinaryOp::Mul: return "*";
    case BinaryOp::Div: return "/";
    case BinaryOp::Mod: return "%";
    case BinaryOp::FloorDiv: return "floordiv";
    case BinaryOp::FloorMod: return "floormod";
    case BinaryOp::Min: return "min";
    case BinaryOp::Max: return "max";
    case BinaryOp::And: return "&";
    case BinaryOp::Or: return "|";
    case BinaryOp::Xor: return "^";
    case BinaryOp::Shl: return "<<";
    case BinaryOp::Shr: return ">>";
    case BinaryOp::Eq: return "==";
    case BinaryOp::Ne: return "!=";
    case BinaryOp::Lt: return "<";
    case BinaryOp::Le: return "<=";
    case BinaryOp::Gt: return ">";
    case BinaryOp::Ge: return ">=";
  }
  return "?";
}

// C's binding strengths, so the text reads as C does.
int binary_op_precedence(BinaryOp op) {
  switch (op) {
    case BinaryOp::Or: return 1;
    case BinaryOp::Xor: return 2;
    case BinaryOp::And: return 3;
    case BinaryOp::Eq: case BinaryOp::Ne: return 4;
    case BinaryOp::Lt: case BinaryOp::Le: case BinaryOp::Gt: case BinaryOp::Ge: return 5;
    case BinaryOp::Shl: case BinaryOp::Shr: return 6;
    case BinaryOp::Add: case BinaryOp::Sub: return 7;
    case BinaryOp::Mul: case BinaryOp::Div: case BinaryOp::Mod: return 8;
    case BinaryOp::FloorDiv: case BinaryOp::FloorMod: case BinaryOp::Min: case BinaryOp::Max: return 0;
  }
  return 0;
}

bool is_builtin_function(const std::string& name) {
  return name == "select" || name == "min" || name == "max" || name == "floordiv" || name == "floormod" ||
         name == "cast" || name == "bitcast";
}

std::string immediate_text(const Expr& e) {
  if (e->kind == ExprKind::FloatImm) return float_text(e->dtype, e->float_value);
  TS_CHECK(e->kind == ExprKind::IntImm, "immediate_text of a non-immediate");
  if (e->dtype == DType::Bool) return e->int_value ? "true" : "false";
  const std::string digits = is_unsigned_int(e->dtype) ? std::to_string(static_cast<uint64_t>(e->int_value))
                                                       : std::to_string(e->int_value);
  return e->dtype == DType::I64 ? digits : digits + std::string(dtype_name(e->dtype));
}

std::string print(const Expr& e) {
  std::ostringstream os;
  ExprPrinter(os).print(e);
  return os.str();
}

std::string print(const Stmt& s, int indent) {
  std::ostringstream os;
  StmtPrinter(os).block(s, indent);
  return os.str();
}

std::string print(const Kernel& k) {
  std::ostringstream os;
  os << "kernel " << k.name << "(";
  for (size_t i = 0; i < k.params.size(); ++i) {
    if (i) os << ", ";
    os << (i < k.num_inputs ? "in " : "out ") << buffer_decl(*k.params[i]);
  }
  os << ")";
  if (!k.syms.empty()) {
    os << " syms(";
    for (size_t i = 0; i < k.syms.size(); ++i) os << (i ? ", " : "") << k.syms[i];
    os << ")";
  }
  os << " {\n";
  if (k.body.defined()) StmtPrinter(os).block(k.body, 1);
  os << "}\n";
  return os.str();
}

}  // namespace tessel::loop
