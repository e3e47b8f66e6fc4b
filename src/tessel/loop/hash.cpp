#include "tessel/loop/hash.h"

#include <array>
#include <bit>
#include <cinttypes>
#include <cstdio>
#include <string_view>
#include <utility>
#include <vector>

#include "tessel/loop/printer.h"
#include "tessel/support/sha256.h"

namespace tessel::loop {

namespace {

// Hashed first. Bump it whenever the encoding changes, so that keys an older
// build stored (tuning records, cached objects) miss instead of naming
// another kernel.
constexpr std::string_view kEncodingVersion = "tessel-loop-hash-1";

// The canonical encoding of a kernel: a byte string that two kernels share
// exactly when they are equal up to the names hash.h says do not matter.
// Every node starts with a tag of its own, counts and numbers are LEB128
// varints, strings carry their length: the encoding is prefix-free, so
// different trees never meet. Tags and enum spellings are written here (the
// printer's names for operators, dtypes and loop kinds), never the enums'
// values, so that reordering an enum in ir.h cannot make a stored key mean
// another kernel.
class Encoder {
 public:
  std::string encode(const Kernel& k) {
    out_.reserve(4096);
    text(kEncodingVersion);
    num(k.syms.size());
    for (const std::string& s : k.syms) text(s);  // bound by name at run time: semantic
    syms_ = &k.syms;
    num(k.num_inputs);
    num(k.params.size());
    for (const BufferRef& p : k.params) {
      if (p) {
        buffer_decl(*p);
      } else {
        put('-');
      }
      buffers_.push_back(p.get());  // params by position
    }
    stmt(k.body);
    return std::move(out_);
  }

 private:
  void put(char c) { out_ += c; }

  void num(uint64_t v) {
    do {
      const auto low = static_cast<uint8_t>(v & 0x7f);
      v >>= 7;
      out_ += static_cast<char>(v ? low | 0x80 : low);
    } while (v);
  }

  void text(std::string_view s) {
    num(s.size());
    out_ += s;
  }

  void dtype(DType t) { text(dtype_name(t)); }

  void exprs(const std::vector<Expr>& es) {
    num(es.size());
    for (const Expr& e : es) expr(e);
  }

  void stmts(const std::vector<Stmt>& ss) {
    num(ss.size());
    for (const Stmt& s : ss) stmt(s);
  }

  // A variable: the number of its binding (bound variables are numbered in
  // order of definition; the innermost binding of a name wins), a sym by
  // position, or, in a kernel that does not verify, a free name.
  void var_ref(const std::string& name) {
    for (size_t i = scope_.size(); i-- > 0;) {
      if (*scope_[i].first == name) {
        put('b');
        num(scope_[i].second);
        return;
      }
    }
    for (size_t i = 0; i < syms_->size(); ++i) {
      if ((*syms_)[i] == name) {
        put('s');
        num(i);
        return;
      }
    }
    put('f');
    text(name);
  }

  // `names` bound (numbered in order) over what `inside` encodes. Scopes
  // hold a few names, so a vector searched from the innermost end is
  // cheaper than a map.
  template <class F>
  void scoped(const std::vector<std::string>& names, F&& inside) {
    for (const std::string& n : names) scope_.emplace_back(&n, next_var_++);
    inside();
    scope_.resize(scope_.size() - names.size());
  }

  template <class F>
  void scoped(const std::string& name, F&& inside) {
    scope_.emplace_back(&name, next_var_++);
    inside();
    scope_.pop_back();
  }

  void buffer_decl(const Buffer& b) {
    dtype(b.dtype);
    switch (b.scope) {
      case BufferScope::Param: put('P'); break;
      case BufferScope::Local: put('L'); break;
      case BufferScope::Shared: put('H'); break;
    }
    exprs(b.shape);
  }

  // A param or allocated buffer by its number; one neither (a kernel that
  // does not verify) by its name and declaration.
  void buffer_ref(const BufferRef& b) {
    if (!b) {
      put('-');
      return;
    }
    for (size_t i = buffers_.size(); i-- > 0;) {
      if (buffers_[i] == b.get()) {
        put('#');
        num(i);
        return;
      }
    }
    put('?');
    text(b->name);
    buffer_decl(*b);
  }

  void expr(const Expr& e) {
    if (!e.defined()) {
      put('-');
      return;
    }
    switch (e->kind) {
      case ExprKind::IntImm:
        put('i');
        num(static_cast<uint64_t>(e->int_value));
        break;
      case ExprKind::FloatImm:
        put('d');
        num(std::bit_cast<uint64_t>(e->float_value));  // bitwise: -0.0 and NaN payloads count
        break;
      case ExprKind::Var:
        put('v');
        var_ref(e->name);
        break;
      case ExprKind::Unary:
        put('u');
        put(e->unary == UnaryOp::Neg ? 'n' : '!');
        break;
      case ExprKind::Binary:
        put('o');
        text(binary_op_spelling(e->binary));
        break;
      case ExprKind::Select: put('s'); break;
      case ExprKind::Cast: put('c'); break;
      case ExprKind::Bitcast: put('r'); break;
      case ExprKind::Load:
        put('l');
        buffer_ref(e->buffer);
        break;
      case ExprKind::Call:
        put('k');
        text(e->name);  // which intrinsic: semantic
        break;
    }
    dtype(e->dtype);
    exprs(e->args);
  }

  // Contract and Attention: the extents (the first `extents` operands) lie
  // outside the statement's bindings, the other operands and the epilogue
  // inside them.
  void contraction(const StmtNode& s, size_t extents) {
    num(s.operands.size());
    num(s.vars.size());
    for (size_t i = 0; i < s.operands.size() && i < extents; ++i) expr(s.operands[i]);
    scoped(s.vars, [&] {
      for (size_t i = extents; i < s.operands.size(); ++i) expr(s.operands[i]);
      if (s.kind == StmtKind::Attention) dtype(s.p_type);
      stmts(s.body);
    });
  }

  void stmt(const Stmt& s) {
    if (!s.defined()) {
      put('-');
      return;
    }
    switch (s->kind) {
      case StmtKind::For:
        put('F');
        text(for_kind_name(s->for_kind));
        expr(s->min);
        expr(s->extent);
        scoped(s->var, [&] { stmts(s->body); });
        return;
      case StmtKind::Store:
        put('S');
        buffer_ref(s->buffer);
        exprs(s->indices);
        expr(s->value);
        return;
      case StmtKind::Let:
        put('L');
        expr(s->value);
        scoped(s->var, [&] { stmts(s->body); });
        return;
      case StmtKind::If:
        put('I');
        expr(s->value);
        stmts(s->body);
        return;
      case StmtKind::Seq:
        put('Q');
        stmts(s->body);
        return;
      case StmtKind::Allocate: {
        put('A');
        if (!s->buffer) {
          put('-');
          stmts(s->body);
          return;
        }
        buffer_decl(*s->buffer);
        buffers_.push_back(s->buffer.get());
        stmts(s->body);
        buffers_.pop_back();
        return;
      }
      case StmtKind::Assert:
        put('T');
        expr(s->value);
        text(s->message);  // the error the kernel reports: semantic
        return;
      case StmtKind::Contract:
        put('C');
        contraction(*s, 4);
        return;
      case StmtKind::Attention:
        put('N');
        contraction(*s, 5);
        return;
    }
  }

  std::string out_;
  const std::vector<std::string>* syms_ = nullptr;
  std::vector<std::pair<const std::string*, uint64_t>> scope_;  // bound names in scope and their numbers
  uint64_t next_var_ = 0;
  // The params, then the allocated buffers in scope: a buffer's number is
  // its position here (its de Bruijn level).
  std::vector<const Buffer*> buffers_;
};

}  // namespace

std::string canonical_encoding(const Kernel& k) { return Encoder().encode(k); }

std::string StructuralHash::hex() const {
  char buf[33];
  std::snprintf(buf, sizeof buf, "%016" PRIx64 "%016" PRIx64, hi, lo);
  return buf;
}

StructuralHash structural_hash(const Kernel& k) {
  const std::array<uint8_t, 32> d = sha256(canonical_encoding(k));
  StructuralHash h;
  for (int i = 0; i < 8; ++i) {
    h.hi = h.hi << 8 | d[static_cast<size_t>(i)];
    h.lo = h.lo << 8 | d[static_cast<size_t>(i) + 8];
  }
  return h;
}

bool structurally_equal(const Kernel& a, const Kernel& b) { return canonical_encoding(a) == canonical_encoding(b); }

}  // namespace tessel::loop
