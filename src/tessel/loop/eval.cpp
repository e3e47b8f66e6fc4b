#include "tessel/loop/eval.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "tessel/loop/printer.h"
#include "tessel/loop/scalar.h"
#include "tessel/loop/visit.h"
#include "tessel/support/error.h"

namespace tessel::loop {

namespace {

// Expressions and statements with variables and buffers resolved to slots,
// so the hot evaluation loop does no name lookups.
struct CExpr {
  const ExprNode* node = nullptr;
  int slot = -1;    // Var
  int buffer = -1;  // Load
  // Select: its condition varies across the lanes of a vectorized loop,
  // where only the arm taken is evaluated (ir.h select); otherwise both
  // are, so that an arm the CPU would load out of bounds fails here too.
  bool lazy = false;
  std::vector<CExpr> args;
};

struct CStmt {
  const StmtNode* node = nullptr;
  int slot = -1;          // For / Let variable
  int buffer = -1;        // Store / Allocate
  int assert_index = -1;  // Assert
  std::vector<CExpr> exprs;  // stmt_exprs() order
  std::vector<CStmt> body;
};

struct BufferSlot {
  BufferRef ref;
  void* data = nullptr;
  std::vector<int64_t> shape;
};

class Compiler {
 public:
  explicit Compiler(const Kernel& k) {
    for (const std::string& s : k.syms) bind(s);
    for (const BufferRef& b : k.params) buffers.push_back(b);
  }

  CStmt stmt(const Stmt& s) {
    if (s->kind == StmtKind::Contract) return contract(s);
    if (s->kind == StmtKind::Attention) return attention(s);
    CStmt c;
    c.node = s.node.get();
    for (const Expr& e : stmt_exprs(s)) c.exprs.push_back(expr(e));
    if (s->kind == StmtKind::Assert) c.assert_index = num_asserts++;
    if (s->kind == StmtKind::Store) c.buffer = buffer_index(s->buffer);
    const size_t var_mark = scope.size();
    const size_t buf_mark = visible.size();
    const bool lanes = (s->kind == StmtKind::For && s->for_kind == ForKind::Vectorized) ||
                       (s->kind == StmtKind::Let && lane_varying(c.exprs.at(0)));
    if (s->kind == StmtKind::For || s->kind == StmtKind::Let) c.slot = bind(s->var, lanes);
    if (s->kind == StmtKind::Allocate) {
      c.buffer = static_cast<int>(buffers.size());
      buffers.push_back(s->buffer);
      visible.push_back(s->buffer);
    }
    for (const Stmt& b : s->body) c.body.push_back(stmt(b));
    scope.resize(var_mark);
    visible.resize(buf_mark);
    return c;
  }

  // exprs: the four extents, a, b; slot: batch, then i, j, k, acc in the
  // next slots; body: the epilogue.
  CStmt contract(const Stmt& s) {
    const ContractView v = contract_parts(*s);
    CStmt c;
    c.node = s.node.get();
    for (const Expr* e : {&v.batch_extent, &v.m, &v.n, &v.k_extent}) c.exprs.push_back(expr(*e));
    const size_t var_mark = scope.size();
    c.slot = bind(v.batch);
    for (const std::string* n : {&v.i, &v.j, &v.k, &v.acc}) bind(*n);
    c.exprs.push_back(expr(v.a));
    c.exprs.push_back(expr(v.b));
    c.body.push_back(stmt(v.epilogue));
    scope.resize(var_mark);
    return c;
  }

  // exprs: the five extents, q, k, v, scale, bias; slot: batch, then i, j,
  // d, e, acc in the next slots; body: the epilogue.
  CStmt attention(const Stmt& s) {
    const AttentionView v = attention_parts(*s);
    CStmt c;
    c.node = s.node.get();
    for (const Expr* e : {&v.batch_extent, &v.m, &v.n, &v.d_extent, &v.e_extent}) c.exprs.push_back(expr(*e));
    const size_t var_mark = scope.size();
    c.slot = bind(v.batch);
    for (const std::string* n : {&v.i, &v.j, &v.d, &v.e, &v.acc}) bind(*n);
    for (const Expr* e : {&v.q, &v.k, &v.v, &v.scale, &v.bias}) c.exprs.push_back(expr(*e));
    c.body.push_back(stmt(v.epilogue));
    scope.resize(var_mark);
    return c;
  }

  std::vector<BufferRef> buffers;  // params, then one entry per Allocate
  int num_slots = 0;
  int num_asserts = 0;

 private:
  CExpr expr(const Expr& e) {
    CExpr c;
    c.node = e.node.get();
    if (e->kind == ExprKind::Var) c.slot = lookup(e->name);
    if (e->kind == ExprKind::Load) c.buffer = buffer_index(e->buffer);
    for (const Expr& a : e->args) c.args.push_back(expr(a));
    if (e->kind == ExprKind::Select) c.lazy = lane_varying(c.args[0]);
    return c;
  }

  int bind(const std::string& name, bool lanes = false) {
    scope.emplace_back(name, num_slots);
    lane_slots.resize(static_cast<size_t>(num_slots) + 1);
    lane_slots[static_cast<size_t>(num_slots)] = lanes;
    return num_slots++;
  }

  bool lane_varying(const CExpr& c) const {
    if (c.slot >= 0 && lane_slots[static_cast<size_t>(c.slot)]) return true;
    return std::any_of(c.args.begin(), c.args.end(), [&](const CExpr& a) { return lane_varying(a); });
  }

  std::vector<bool> lane_slots;  // per slot: bound to a vectorized loop's lanes

  int lookup(const std::string& name) const {
    for (auto it = scope.rbegin(); it != scope.rend(); ++it)
      if (it->first == name) return it->second;
    fail("loop IR eval: variable '", name, "' is not in scope");
  }

  // The latest entry: a body copied beside the original (a peeled tail, a
  // split border) allocates the same buffer again, and the earlier entry's
  // scope has ended.
  int buffer_index(const BufferRef& b) const {
    for (size_t i = buffers.size(); i-- > 0;) {
      const bool is_param = buffers[i]->scope == BufferScope::Param;
      const bool visible_alloc = std::find(visible.begin(), visible.end(), buffers[i]) != visible.end();
      if (buffers[i] == b && (is_param || visible_alloc)) return static_cast<int>(i);
    }
    fail("loop IR eval: buffer %", b->name, " is not in scope");
  }

  std::vector<std::pair<std::string, int>> scope;
  std::vector<BufferRef> visible;
};

class Machine {
 public:
  Machine(const Kernel& k, const std::vector<void*>& data, const std::vector<int64_t>& syms, int64_t begin,
          int64_t end)
      : compiler_(k), begin_(begin), end_(end) {
    TS_CHECK(data.size() == k.params.size(), "loop IR eval: kernel ", k.name, " takes ", k.params.size(),
             " buffers, got ", data.size());
    TS_CHECK(syms.size() == k.syms.size(), "loop IR eval: kernel ", k.name, " takes ", k.syms.size(),
             " syms, got ", syms.size());
    body_ = compiler_.stmt(k.body);
    slots_.resize(static_cast<size_t>(compiler_.num_slots));
    std::map<std::string, int64_t> sym_values;
    for (size_t i = 0; i < syms.size(); ++i) {
      slots_[i] = Scalar::of_int(DType::I64, syms[i]);
      sym_values[k.syms[i]] = syms[i];
    }
    for (const BufferRef& b : compiler_.buffers) {
      BufferSlot s;
      s.ref = b;
      for (const Expr& d : b->shape) s.shape.push_back(eval_index(d, sym_values));
      buffers_.push_back(std::move(s));
    }
    for (size_t i = 0; i < data.size(); ++i) buffers_[i].data = data[i];
  }

  int32_t run() { return exec(body_); }

 private:
  // ---- expressions ----
  Scalar eval(const CExpr& c) {
    const ExprNode& n = *c.node;
    switch (n.kind) {
      case ExprKind::IntImm: return Scalar::of_int(n.dtype, n.int_value);
      case ExprKind::FloatImm: return Scalar::of_float(n.dtype, n.float_value);
      case ExprKind::Var: return slots_[static_cast<size_t>(c.slot)];
      case ExprKind::Unary: return apply_unary(n.unary, eval(c.args[0]));
      case ExprKind::Binary: return apply_binary(n.binary, eval(c.args[0]), eval(c.args[1]));
      case ExprKind::Select: {
        if (c.lazy) return eval(c.args[0]).i ? eval(c.args[1]) : eval(c.args[2]);
        Scalar cond = eval(c.args[0]), t = eval(c.args[1]), f = eval(c.args[2]);
        return cond.i ? t : f;
      }
      case ExprKind::Cast: return apply_cast(n.dtype, eval(c.args[0]));
      case ExprKind::Bitcast: return apply_bitcast(n.dtype, eval(c.args[0]));
      case ExprKind::Load: {
        BufferSlot& b = buffers_[static_cast<size_t>(c.buffer)];
        return load_scalar(b.data, b.ref->dtype, offset(b, c.args.data(), c.args.size()));
      }
      case ExprKind::Call: {
        std::vector<Scalar> args;
        args.reserve(c.args.size());
        for (const CExpr& a : c.args) args.push_back(eval(a));
        return apply_intrinsic(n.name, n.dtype, args);
      }
    }
    fail("loop IR eval: unknown expression kind");
  }

  int64_t eval_i64(const CExpr& c) { return eval(c).i; }

  int64_t offset(const BufferSlot& b, const CExpr* indices, size_t rank) {
    int64_t flat = 0;
    for (size_t d = 0; d < rank; ++d) {
      const int64_t i = eval_i64(indices[d]);
      TS_CHECK(i >= 0 && i < b.shape[d], "loop IR eval: index ", i, " out of bounds [0, ", b.shape[d],
               ") in dimension ", d, " of %", b.ref->name);
      flat = flat * b.shape[d] + i;
    }
    return flat;
  }

  // ---- statements ----
  int32_t exec(const CStmt& c) {
    const StmtNode& n = *c.node;
    switch (n.kind) {
      case StmtKind::For: return exec_for(c);
      case StmtKind::Store: {
        BufferSlot& b = buffers_[static_cast<size_t>(c.buffer)];
        Scalar v = eval(c.exprs.back());
        int64_t at = offset(b, c.exprs.data(), c.exprs.size() - 1);
        store_scalar(b.data, v, at);
        return 0;
      }
      case StmtKind::Let:
        slots_[static_cast<size_t>(c.slot)] = eval(c.exprs[0]);
        return exec(c.body[0]);
      case StmtKind::If:
        if (eval(c.exprs[0]).i) return exec(c.body[0]);
        return c.body.size() > 1 ? exec(c.body[1]) : 0;
      case StmtKind::Seq:
        for (const CStmt& b : c.body)
          if (int32_t r = exec(b)) return r;
        return 0;
      case StmtKind::Allocate: return exec_allocate(c);
      case StmtKind::Assert: return eval(c.exprs[0]).i ? 0 : c.assert_index + 1;
      case StmtKind::Contract: return exec_contract(c);
      case StmtKind::Attention: return exec_attention(c);
    }
    fail("loop IR eval: unknown statement kind");
  }

  // Sums over k in ascending order (the statement leaves the order open).
  int32_t exec_contract(const CStmt& c) {
    int64_t extent[4];
    for (size_t d = 0; d < 4; ++d) extent[d] = eval_i64(c.exprs[d]);
    Scalar* slot = &slots_[static_cast<size_t>(c.slot)];  // batch, i, j, k, acc
    for (int64_t b = 0; b < extent[0]; ++b) {
      for (int64_t i = 0; i < extent[1]; ++i) {
        for (int64_t j = 0; j < extent[2]; ++j) {
          slot[0] = Scalar::of_int(DType::I64, b);
          slot[1] = Scalar::of_int(DType::I64, i);
          slot[2] = Scalar::of_int(DType::I64, j);
          Scalar acc = Scalar::of_float(DType::F32, 0.0);
          for (int64_t k = 0; k < extent[3]; ++k) {
            slot[3] = Scalar::of_int(DType::I64, k);
            acc = apply_binary(BinaryOp::Add, acc, apply_binary(BinaryOp::Mul, eval(c.exprs[4]), eval(c.exprs[5])));
          }
          slot[4] = acc;
          if (int32_t r = exec(c.body[0])) return r;
        }
      }
    }
    return 0;
  }

  // Per (batch, i): the scores over j, their max, exp(s - max) and its sum
  // in ascending j (f32, exp correctly rounded), p rounded to p_type (0 when
  // every score is -inf), then per e the sum of p v in ascending j.
  int32_t exec_attention(const CStmt& c) {
    int64_t extent[5];
    for (size_t d = 0; d < 5; ++d) extent[d] = eval_i64(c.exprs[d]);
    Scalar* slot = &slots_[static_cast<size_t>(c.slot)];  // batch, i, j, d, e, acc
    const auto f32 = [](double v) { return Scalar::of_float(DType::F32, v); };
    const auto index = [](int64_t v) { return Scalar::of_int(DType::I64, v); };
    std::vector<Scalar> p(static_cast<size_t>(std::max<int64_t>(extent[2], 0)));
    for (int64_t b = 0; b < extent[0]; ++b) {
      for (int64_t i = 0; i < extent[1]; ++i) {
        slot[0] = index(b);
        slot[1] = index(i);
        const Scalar scale = eval(c.exprs[8]);
        Scalar max = f32(-std::numeric_limits<double>::infinity());
        for (int64_t j = 0; j < extent[2]; ++j) {
          slot[2] = index(j);
          Scalar dot = f32(0);
          for (int64_t d = 0; d < extent[3]; ++d) {
            slot[3] = index(d);
            dot = apply_binary(BinaryOp::Add, dot, apply_binary(BinaryOp::Mul, eval(c.exprs[5]), eval(c.exprs[6])));
          }
          Scalar& s = p[static_cast<size_t>(j)];
          s = apply_binary(BinaryOp::Add, apply_binary(BinaryOp::Mul, scale, dot), eval(c.exprs[9]));
          max = apply_binary(BinaryOp::Max, max, s);
        }
        Scalar sum = f32(0);
        for (Scalar& s : p) {
          s = apply_intrinsic("exp", DType::F32, {apply_binary(BinaryOp::Sub, s, max)});
          sum = apply_binary(BinaryOp::Add, sum, s);
        }
        // Every score -inf (max is -inf): no softmax, p = 0 (acc = 0).
        const bool masked = std::isinf(max.f) && max.f < 0;
        for (Scalar& s : p)
          s = masked ? f32(0)
                     : apply_cast(DType::F32, apply_cast(c.node->p_type, apply_binary(BinaryOp::Div, s, sum)));
        for (int64_t e = 0; e < extent[4]; ++e) {
          slot[4] = index(e);
          Scalar acc = f32(0);
          for (int64_t j = 0; j < extent[2]; ++j) {
            slot[2] = index(j);
            acc = apply_binary(BinaryOp::Add, acc, apply_binary(BinaryOp::Mul, p[static_cast<size_t>(j)], eval(c.exprs[7])));
          }
          slot[5] = acc;
          if (int32_t r = exec(c.body[0])) return r;
        }
      }
    }
    return 0;
  }

  int32_t exec_for(const CStmt& c) {
    const int64_t min = eval_i64(c.exprs[0]);
    const int64_t extent = eval_i64(c.exprs[1]);
    int64_t first = 0, last = extent;
    if (c.node->for_kind == ForKind::Parallel) {
      first = std::max<int64_t>(first, begin_);
      last = std::min<int64_t>(last, end_);
    }
    for (int64_t it = first; it < last; ++it) {
      slots_[static_cast<size_t>(c.slot)] = Scalar::of_int(DType::I64, min + it);
      if (int32_t r = exec(c.body[0])) return r;
    }
    return 0;
  }

  int32_t exec_allocate(const CStmt& c) {
    BufferSlot& b = buffers_[static_cast<size_t>(c.buffer)];
    int64_t n = 1;
    for (int64_t d : b.shape) n = checked_mul(n, d);
    std::vector<uint8_t> storage(static_cast<size_t>(checked_mul(n, dtype_storage_size(b.ref->dtype))), 0);
    void* saved = b.data;  // a recursive scope never re-enters, but stay correct
    b.data = storage.data();
    int32_t r = exec(c.body[0]);
    b.data = saved;
    return r;
  }

  Compiler compiler_;
  CStmt body_;
  std::vector<Scalar> slots_;
  std::vector<BufferSlot> buffers_;
  int64_t begin_, end_;
};

}  // namespace

int32_t run_kernel(const Kernel& k, std::vector<void*> buffers, std::vector<int64_t> syms) {
  return run_kernel_range(k, buffers, syms, 0, std::numeric_limits<int64_t>::max());
}

int32_t run_kernel_range(const Kernel& k, const std::vector<void*>& buffers, const std::vector<int64_t>& syms,
                         int64_t begin, int64_t end) {
  return Machine(k, buffers, syms, begin, end).run();
}

int64_t eval_index(const Expr& e, const std::map<std::string, int64_t>& values) {
  TS_CHECK(e.defined(), "eval_index: undefined expression");
  TS_CHECK(!is_float(e.dtype()), "eval_index: ", print(e), " is not an integer expression");
  std::vector<Scalar> args;
  for (const Expr& a : e->args) {
    if (e->kind == ExprKind::Select || e->kind == ExprKind::Binary || e->kind == ExprKind::Unary ||
        e->kind == ExprKind::Cast)
      args.push_back(Scalar::of_int(a.dtype(), eval_index(a, values)));
  }
  switch (e->kind) {
    case ExprKind::IntImm: return e->int_value;
    case ExprKind::Var: {
      auto it = values.find(e->name);
      TS_CHECK(it != values.end(), "eval_index: unknown variable '", e->name, "'");
      return Scalar::of_int(e->dtype, it->second).i;
    }
    case ExprKind::Unary: return apply_unary(e->unary, args[0]).i;
    case ExprKind::Binary: return apply_binary(e->binary, args[0], args[1]).i;
    case ExprKind::Select: return args[0].i ? args[1].i : args[2].i;
    case ExprKind::Cast: return apply_cast(e->dtype, args[0]).i;
    case ExprKind::FloatImm: case ExprKind::Bitcast: case ExprKind::Load: case ExprKind::Call: break;
  }
  fail("eval_index: cannot evaluate ", print(e), " from integer values alone");
}

}  // namespace tessel::loop
