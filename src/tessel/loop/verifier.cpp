#include "tessel/loop/verifier.h"

#include <algorithm>
#include <map>
#include <set>

#include "tessel/loop/intrinsics.h"
#include "tessel/loop/printer.h"
#include "tessel/loop/visit.h"
#include "tessel/support/error.h"

namespace tessel::loop {

namespace {

bool computable(DType t) {
  return t == DType::Bool || t == DType::F16 || t == DType::BF16 || t == DType::F32 || t == DType::F64 ||
         (is_int(t) && int_bits(t) >= 8);
}

bool integer_only(BinaryOp op) {
  switch (op) {
    case BinaryOp::FloorDiv: case BinaryOp::FloorMod: case BinaryOp::And: case BinaryOp::Or:
    case BinaryOp::Xor: case BinaryOp::Shl: case BinaryOp::Shr:
      return true;
    case BinaryOp::Add: case BinaryOp::Sub: case BinaryOp::Mul: case BinaryOp::Div: case BinaryOp::Mod:
    case BinaryOp::Min: case BinaryOp::Max: case BinaryOp::Eq: case BinaryOp::Ne: case BinaryOp::Lt:
    case BinaryOp::Le: case BinaryOp::Gt: case BinaryOp::Ge:
      return false;
  }
  return false;
}

bool comparison(BinaryOp op) {
  return op == BinaryOp::Eq || op == BinaryOp::Ne || op == BinaryOp::Lt || op == BinaryOp::Le ||
         op == BinaryOp::Gt || op == BinaryOp::Ge;
}

bool is_gpu_axis(ForKind k) {
  switch (k) {
    case ForKind::GpuBlockX: case ForKind::GpuBlockY: case ForKind::GpuBlockZ:
    case ForKind::GpuThreadX: case ForKind::GpuThreadY: case ForKind::GpuThreadZ:
      return true;
    case ForKind::Serial: case ForKind::Parallel: case ForKind::Vectorized: case ForKind::Unrolled:
    case ForKind::GpuLanes:
      return false;
  }
  return false;
}

bool reduction_op(BinaryOp op) {
  return op == BinaryOp::Add || op == BinaryOp::Mul || op == BinaryOp::Min || op == BinaryOp::Max ||
         op == BinaryOp::And || op == BinaryOp::Or || op == BinaryOp::Xor;
}

bool loads_buffer(const Expr& e, const Buffer* b) {
  bool found = false;
  visit_expr(e, [&](const Expr& x) { found = found || (x->kind == ExprKind::Load && x->buffer.get() == b); });
  return found;
}

class Verifier {
 public:
  Verifier(const Kernel& k, Target t) : k_(k), target_(t) {}

  void run() {
    for (const std::string& s : k_.syms) {
      check(!s.empty(), "a sym without a name");
      check(scope_.emplace(s, DType::I64).second, str_cat("sym '", s, "' is declared twice"));
    }
    check(k_.num_inputs <= k_.params.size(), "num_inputs exceeds the number of params");
    std::set<std::string> names;
    for (const BufferRef& b : k_.params) {
      check(b != nullptr, "null param buffer");
      check(names.insert(b->name).second, str_cat("buffer %", b->name, " is declared twice"));
      check(b->scope == BufferScope::Param, str_cat("param %", b->name, " does not have param scope"));
      check_buffer_type(*b);
      for (const Expr& d : b->shape) index(d, str_cat("shape of %", b->name));
      buffers_.push_back(b);
    }
    check(k_.body.defined(), "kernel without a body");
    if (target_ == Target::Cuda) scan_lanes(k_.body);
    stmt(k_.body);
  }

 private:
  [[noreturn]] void error(const std::string& what) const {
    fail("loop IR verifier: kernel ", k_.name, ": ", what);
  }
  void check(bool ok, const std::string& what) const {
    if (!ok) error(what);
  }

  void check_buffer_type(const Buffer& b) const {
    check(computable(b.dtype), str_cat("buffer %", b.name, " has type ", dtype_name(b.dtype),
                                       ", which the loop IR does not compute with"));
  }

  // ---- expressions ----
  void index(const Expr& e, const std::string& where) {
    check(e.defined(), str_cat("missing expression in ", where));
    check(e.dtype() == DType::I64, str_cat(where, " is ", dtype_name(e.dtype()), ", not i64: ", print(e)));
    expr(e);
  }

  void expr(const Expr& e) {
    check(e.defined(), "undefined expression");
    check(computable(e->dtype), str_cat("expression of type ", dtype_name(e->dtype), ": ", print(e)));
    for (const Expr& a : e->args) expr(a);
    switch (e->kind) {
      case ExprKind::IntImm: check(!is_float(e->dtype), "integer immediate of a float type"); return;
      case ExprKind::FloatImm: check(is_float(e->dtype), "float immediate of a non-float type"); return;
      case ExprKind::Var: var_use(e); return;
      case ExprKind::Unary: unary_node(e); return;
      case ExprKind::Binary: binary_node(e); return;
      case ExprKind::Select: select_node(e); return;
      case ExprKind::Cast: arity(e, 1); return;
      case ExprKind::Bitcast:
        arity(e, 1);
        check(dtype_storage_size(e->dtype) == dtype_storage_size(e->args[0].dtype()),
              str_cat("bitcast between sizes: ", print(e)));
        return;
      case ExprKind::Load:
        access(e->buffer, e->args, false);
        check(!lanes_stored_.count(e->buffer.get()), str_cat("%", e->buffer->name, " is stored by a gpu.lanes loop ",
                                                             "and also loaded (other threads' stores are not visible)"));
        check(e->dtype == e->buffer->dtype, str_cat("load type differs from its buffer's: ", print(e)));
        return;
      case ExprKind::Call: call_node(e); return;
    }
  }

  void arity(const Expr& e, size_t n) const {
    check(e->args.size() == n, str_cat("wrong number of operands: ", print(e)));
  }

  void var_use(const Expr& e) const {
    auto it = scope_.find(e->name);
    check(it != scope_.end(), str_cat("variable '", e->name, "' is not in scope"));
    check(it->second == e->dtype, str_cat("variable '", e->name, "' used as ", dtype_name(e->dtype), " but bound as ",
                                          dtype_name(it->second)));
  }

  void unary_node(const Expr& e) const {
    arity(e, 1);
    check(e->dtype == e->args[0].dtype(), str_cat("unary result type differs: ", print(e)));
    check(e->unary != UnaryOp::Not || !is_float(e->dtype), str_cat("'not' of a float: ", print(e)));
    check(e->unary != UnaryOp::Neg || e->dtype != DType::Bool, str_cat("negation of a bool: ", print(e)));
  }

  void binary_node(const Expr& e) const {
    arity(e, 2);
    DType t = e->args[0].dtype();
    check(t == e->args[1].dtype(), str_cat("binary operands differ in type: ", print(e)));
    check(e->dtype == (comparison(e->binary) ? DType::Bool : t), str_cat("wrong result type: ", print(e)));
    check(!integer_only(e->binary) || !is_float(t), str_cat("integer-only operator on floats: ", print(e)));
  }

  void select_node(const Expr& e) const {
    arity(e, 3);
    check(e->args[0].dtype() == DType::Bool, str_cat("select condition is not bool: ", print(e)));
    check(e->args[1].dtype() == e->dtype && e->args[2].dtype() == e->dtype, str_cat("select arms differ: ", print(e)));
  }

  void call_node(const Expr& e) const {
    const IntrinsicInfo* info = find_intrinsic(e->name);
    check(info != nullptr, str_cat("unknown intrinsic '", e->name, "'"));
    arity(e, static_cast<size_t>(info->arity));
    DType t = e->args[0].dtype();
    check(is_float(t), str_cat("intrinsic on non-float operands: ", print(e)));
    for (const Expr& a : e->args) check(a.dtype() == t, str_cat("intrinsic operands differ in type: ", print(e)));
    check(e->dtype == (info->returns_bool ? DType::Bool : t), str_cat("intrinsic result type is wrong: ", print(e)));
  }

  // ---- buffers ----
  void access(const BufferRef& b, const std::vector<Expr>& indices, bool is_store) {
    check(b != nullptr, "access to a null buffer");
    bool in_scope = std::find(buffers_.begin(), buffers_.end(), b) != buffers_.end();
    check(in_scope, str_cat("buffer %", b->name, " is neither a param nor allocated in scope"));
    check(indices.size() == b->shape.size(), str_cat("access to %", b->name, " with ", indices.size(),
                                                     " indices, rank ", b->shape.size()));
    for (const Expr& i : indices) index(i, str_cat("index into %", b->name));
    if (!is_store) return;
    auto it = std::find(k_.params.begin(), k_.params.end(), b);
    check(it == k_.params.end() || static_cast<size_t>(it - k_.params.begin()) >= k_.num_inputs,
          str_cat("store into input param %", b->name));
  }

  // ---- statements ----
  void bind(const std::string& name, DType t) {
    check(!name.empty(), "binding without a name");
    check(!scope_.count(name), str_cat("'", name, "' is bound again inside its scope"));
    scope_.emplace(name, t);
  }

  void stmt(const Stmt& s) {
    check(s.defined(), "undefined statement");
    switch (s->kind) {
      case StmtKind::For: for_stmt(s); return;
      case StmtKind::Store:
        access(s->buffer, s->indices, true);
        expr(s->value);
        check(s->value.dtype() == s->buffer->dtype, str_cat("store of ", dtype_name(s->value.dtype()), " into %",
                                                            s->buffer->name, " of ", dtype_name(s->buffer->dtype)));
        return;
      case StmtKind::Let: {
        expr(s->value);
        bind(s->var, s->value.dtype());
        const bool vary = lanes_reduction_ && varying(s->value);
        if (vary) varying_.insert(s->var);
        body(s, 1);
        if (vary) varying_.erase(s->var);
        scope_.erase(s->var);
        return;
      }
      case StmtKind::If: {
        condition(s->value, "if");
        check(s->body.size() == 1 || s->body.size() == 2, "if needs one or two branches");
        const int vary = lanes_reduction_ && varying(s->value);
        varying_flow_ += vary;
        ++if_depth_;
        for (const Stmt& b : s->body) stmt(b);
        --if_depth_;
        varying_flow_ -= vary;
        return;
      }
      case StmtKind::Seq:
        for (const Stmt& b : s->body) stmt(b);
        return;
      case StmtKind::Allocate: allocate_stmt(s); return;
      case StmtKind::Assert:
        condition(s->value, "assert");
        check(!lanes_reduction_ || (lanes_depth_ == 0 && varying_flow_ == 0 && !varying(s->value)),
              str_cat("assert ", print(s->value), " may differ between the threads of a block, in a kernel with a ",
                      "gpu.lanes reduction (a thread that returns early would miss the block's combine)"));
        return;
      case StmtKind::Contract: contract_stmt(*s); return;
      case StmtKind::Attention: attention_stmt(*s); return;
    }
  }

  // Operands must not read what the epilogue stores to.
  void operands_not_stored(const Stmt& epilogue, const std::vector<const Expr*>& operands, const char* what) {
    std::set<const Buffer*> stored;
    visit_stmt(epilogue, [&](const Stmt& st) {
      if (st->kind == StmtKind::Store) stored.insert(st->buffer.get());
    }, [](const Expr&) {});
    for (const Expr* e : operands)
      visit_expr(*e, [&](const Expr& x) {
        if (x->kind == ExprKind::Load && stored.count(x->buffer.get()))
          error(str_cat(what, " operand reads %", x->buffer->name, ", which its epilogue stores to"));
      });
  }

  void attention_stmt(const StmtNode& s) {
    check(s.vars.size() == 6 && s.operands.size() == 10 && s.body.size() == 1, "malformed attention statement");
    const AttentionView a = attention_parts(s);
    const char* what[] = {"batch extent", "M", "N", "D", "E"};
    const Expr* extents[] = {&a.batch_extent, &a.m, &a.n, &a.d_extent, &a.e_extent};
    for (size_t d = 0; d < 5; ++d) index(*extents[d], str_cat("attention ", what[d]));
    expr(a.scale);  // before the statement's variables: it may use none of them
    check(a.scale.dtype() == DType::F32, str_cat("attention scale is not f32: ", print(a.scale)));
    for (const std::string* v : {&a.batch, &a.i, &a.j, &a.d, &a.e}) {
      check(loop_vars_.insert(*v).second, str_cat("attention variable '", *v, "' is used by two loops"));
      bind(*v, DType::I64);
    }
    // Each operand's variables: q (batch, i, d), k (batch, j, d), v (batch, j, e), bias (batch, i, j).
    const std::pair<const Expr*, std::vector<const std::string*>> not_in[] = {
        {&a.q, {&a.j, &a.e}}, {&a.k, {&a.i, &a.e}}, {&a.v, {&a.i, &a.d}}, {&a.bias, {&a.d, &a.e}}};
    for (const auto& [e, banned] : not_in) {
      expr(*e);
      check(e->dtype() == DType::F32, str_cat("attention operand is not f32: ", print(*e)));
      for (const std::string* v : banned)
        check(!mentions_var(*e, *v), str_cat("attention operand ", print(*e), " mentions ", *v));
    }
    scope_.erase(a.j);
    scope_.erase(a.d);
    bind(a.acc, DType::F32);
    operands_not_stored(a.epilogue, {&a.q, &a.k, &a.v, &a.scale, &a.bias}, "attention");
    ++loop_depth_;
    stmt(a.epilogue);
    --loop_depth_;
    for (const std::string* v : {&a.batch, &a.i, &a.e, &a.acc}) scope_.erase(*v);
  }

  void contract_stmt(const StmtNode& s) {
    check(s.vars.size() == 5 && s.operands.size() == 6 && s.body.size() == 1, "malformed contract statement");
    const ContractView c = contract_parts(s);
    const char* what[] = {"batch extent", "M", "N", "K"};
    const Expr* extents[] = {&c.batch_extent, &c.m, &c.n, &c.k_extent};
    for (size_t d = 0; d < 4; ++d) index(*extents[d], str_cat("contract ", what[d]));
    for (const std::string* v : {&c.batch, &c.i, &c.j, &c.k}) {
      check(loop_vars_.insert(*v).second, str_cat("contract variable '", *v, "' is used by two loops"));
      bind(*v, DType::I64);
    }
    for (const Expr* e : {&c.a, &c.b}) {
      expr(*e);
      check(e->dtype() == DType::F32, str_cat("contract operand is not f32: ", print(*e)));
    }
    check(!mentions_var(c.a, c.j), str_cat("contract operand a mentions the column variable ", c.j));
    check(!mentions_var(c.b, c.i), str_cat("contract operand b mentions the row variable ", c.i));
    scope_.erase(c.k);
    bind(c.acc, DType::F32);
    operands_not_stored(c.epilogue, {&c.a, &c.b}, "contract");
    ++loop_depth_;
    stmt(c.epilogue);
    --loop_depth_;
    for (const std::string* v : {&c.batch, &c.i, &c.j, &c.acc}) scope_.erase(*v);
  }

  void body(const Stmt& s, size_t n) {
    check(s->body.size() == n, "statement with the wrong number of bodies");
    for (const Stmt& b : s->body) stmt(b);
  }

  void condition(const Expr& c, const char* what) {
    expr(c);
    check(c.dtype() == DType::Bool, str_cat(what, " condition is not bool"));
  }

  void allocate_stmt(const Stmt& s) {
    const BufferRef& b = s->buffer;
    check(b != nullptr, "allocate of a null buffer");
    check(b->scope != BufferScope::Param, str_cat("allocated buffer %", b->name, " has param scope"));
    check(b->scope != BufferScope::Shared || target_ == Target::Cuda,
          str_cat("shared buffer %", b->name, " on the CPU"));
    check_buffer_type(*b);
    for (const Expr& d : b->shape)
      check(d.defined() && d->kind == ExprKind::IntImm && d->int_value >= 0,
            str_cat("allocated buffer %", b->name, " needs a constant shape"));
    for (const BufferRef& o : buffers_)
      check(o->name != b->name, str_cat("buffer %", b->name, " is declared twice"));
    buffers_.push_back(b);
    body(s, 1);
    buffers_.pop_back();
  }

  void for_stmt(const Stmt& s) {
    index(s->min, str_cat("lower bound of loop ", s->var));
    index(s->extent, str_cat("extent of loop ", s->var));
    check(loop_vars_.insert(s->var).second, str_cat("loop variable '", s->var, "' is used by two loops"));
    check_kind(s);
    const LanesScope lanes = enter_lanes_scope(*s);
    bind(s->var, DType::I64);
    ++loop_depth_;
    body(s, 1);
    --loop_depth_;
    leave_lanes_scope(*s, lanes);
    scope_.erase(s->var);
  }

  // ---- gpu.lanes (CUDA) ----
  // What the whole kernel holds, before the checks: whether it has a lanes
  // reduction, gpu.thread.y/z loops, and which params independent lanes
  // loops store to.
  void scan_lanes(const Stmt& s) {
    if (!s.defined()) return;
    if (s->kind == StmtKind::For) {
      if ((s->for_kind == ForKind::GpuThreadY || s->for_kind == ForKind::GpuThreadZ) && !is_const(s->extent, 1))
        thread_yz_ = true;
      if (s->for_kind == ForKind::GpuLanes && s->body.size() == 1 && s->body[0].defined()) {
        if (lanes_reduction_update(*s)) {
          lanes_reduction_ = true;
        } else {
          visit_stmt(s->body[0], [&](const Stmt& st) {
            if (st->kind == StmtKind::Store && st->buffer && st->buffer->scope == BufferScope::Param)
              lanes_stored_.insert(st->buffer.get());
          }, [](const Expr&) {});
        }
      }
    }
    for (const Stmt& b : s->body) scan_lanes(b);
  }

  // May `e` differ between the threads of a block? It may when it mentions
  // the gpu.thread.x or a lanes variable (or a let of one), or loads a local
  // or shared buffer or an output (conservatively).
  bool varying(const Expr& e) const {
    bool v = false;
    visit_expr(e, [&](const Expr& x) {
      if (x->kind == ExprKind::Var && varying_.count(x->name)) v = true;
      if (x->kind != ExprKind::Load || !x->buffer) return;
      const auto it = std::find(k_.params.begin(), k_.params.end(), x->buffer);
      if (it == k_.params.end() || static_cast<size_t>(it - k_.params.begin()) >= k_.num_inputs) v = true;
    });
    return v;
  }

  struct LanesScope {
    int64_t thread_x = 0;
    int flow = 0;
    bool var = false;
  };

  LanesScope enter_lanes_scope(const StmtNode& s) {
    LanesScope saved{thread_x_, 0, false};
    if (target_ != Target::Cuda) return saved;
    if (s.for_kind == ForKind::GpuThreadX) {
      int64_t t = -1;
      thread_x_ = as_const_int(s.extent, &t) && t > 0 ? t : -1;
      saved.var = true;
    } else if (s.for_kind == ForKind::GpuLanes) {
      lanes_loop(s);
      ++lanes_depth_;
      saved.var = true;
    } else if (lanes_reduction_ && (varying(s.min) || varying(s.extent))) {
      saved.flow = 1;
    }
    if (saved.var) varying_.insert(s.var);
    varying_flow_ += saved.flow;
    return saved;
  }

  void leave_lanes_scope(const StmtNode& s, const LanesScope& saved) {
    if (target_ != Target::Cuda) return;
    if (s.for_kind == ForKind::GpuLanes) --lanes_depth_;
    if (saved.var) varying_.erase(s.var);
    varying_flow_ -= saved.flow;
    thread_x_ = saved.thread_x;
  }

  void lanes_loop(const StmtNode& s) {
    const std::string what = str_cat("gpu.lanes loop ", s.var);
    check(thread_x_ != 0, what + " is not inside a gpu.thread.x loop");
    check(thread_x_ > 0, what + " is inside a gpu.thread.x loop whose extent is not a positive constant");
    check(lanes_depth_ == 0, what + " is nested in another gpu.lanes loop");
    if (lanes_reduction_update(s)) {
      check(thread_x_ % 32 == 0 && thread_x_ <= 1024,
            str_cat(what, ": a lanes reduction needs whole warps, a gpu.thread.x extent that is a multiple of 32 ",
                    "up to 1024, not ", thread_x_));
      check(thread_x_ == 32 || !thread_yz_,
            what + ": a lanes reduction over more than one warp in a kernel with gpu.thread.y/z loops");
      check(varying_flow_ == 0, what + " (a reduction) is under an if or a loop that may differ between the "
                                       "threads of a block: all of them must reach the combine");
      check(!varying(s.min) && !varying(s.extent), what + " (a reduction) has bounds that may differ between "
                                                         "the threads of a block");
      return;
    }
    // Independent iterations: each thread runs some of them.
    std::set<const Buffer*> inside;
    visit_stmt(s.body[0], [&](const Stmt& st) {
      if (st->kind == StmtKind::Allocate) inside.insert(st->buffer.get());
      if (st->kind != StmtKind::Store || !st->buffer) return;
      if (st->buffer->scope != BufferScope::Param) {
        check(inside.count(st->buffer.get()) || lane_element(s, *st->buffer, st->indices),
              str_cat(what, " stores to %", st->buffer->name, ", allocated outside it, and is not a reduction update ",
                      "or an element of a row-long local buffer at the loop's index"));
        return;
      }
      bool indexed = false;
      for (const Expr& i : st->indices) indexed = indexed || mentions_var(i, s.var);
      check(indexed, str_cat(what, " stores to %", st->buffer->name, " at an index without ", s.var,
                             " (its iterations must be independent)"));
    }, [](const Expr&) {});
  }

  void check_kind(const Stmt& s) {
    const ForKind k = s->for_kind;
    if (k == ForKind::Vectorized || k == ForKind::Unrolled)
      check(s->extent->kind == ExprKind::IntImm,
            str_cat(for_kind_name(k), " loop ", s->var, " needs a constant extent"));
    if (target_ == Target::Cpu) {
      check(!is_gpu_axis(k), str_cat("loop ", s->var, " is bound to ", for_kind_name(k), ", a GPU axis, on the CPU"));
      check(k != ForKind::GpuLanes, str_cat("gpu.lanes loop ", s->var, " on the CPU"));
    } else {
      check(k != ForKind::Parallel, str_cat("parallel loop ", s->var, " in a CUDA kernel (bind GPU axes instead)"));
    }
    if (k != ForKind::Parallel) return;
    check(!seen_parallel_, str_cat("second parallel loop ", s->var, " (at most one per kernel)"));
    seen_parallel_ = true;
    check(loop_depth_ == 0 && if_depth_ == 0, str_cat("parallel loop ", s->var, " is not at the top level"));
    for (const Expr& b : {s->min, s->extent}) sym_only(b, s->var);
  }

  // The parallel loop's iteration space is computed by the runtime from the
  // syms alone, before the kernel runs.
  void sym_only(const Expr& e, const std::string& loop) const {
    if (e->kind == ExprKind::Var)
      check(std::find(k_.syms.begin(), k_.syms.end(), e->name) != k_.syms.end(),
            str_cat("bounds of parallel loop ", loop, " use '", e->name, "', which is not a sym"));
    check(e->kind != ExprKind::Load, str_cat("bounds of parallel loop ", loop, " load from memory"));
    for (const Expr& a : e->args) sym_only(a, loop);
  }

  const Kernel& k_;
  Target target_;
  std::map<std::string, DType> scope_;
  std::set<std::string> loop_vars_;
  std::vector<BufferRef> buffers_;
  int loop_depth_ = 0;
  int if_depth_ = 0;
  bool seen_parallel_ = false;
  // gpu.lanes: see scan_lanes and enter_lanes_scope.
  bool lanes_reduction_ = false;
  bool thread_yz_ = false;
  std::set<const Buffer*> lanes_stored_;
  int64_t thread_x_ = 0;  // extent of the enclosing gpu.thread.x loop; 0: none, -1: not constant
  int lanes_depth_ = 0;
  int varying_flow_ = 0;  // enclosing ifs and loops whose condition or bounds may differ between threads
  std::set<std::string> varying_;
};

}  // namespace

const StmtNode* lanes_reduction_update(const StmtNode& lanes, Expr* operand) {
  if (lanes.kind != StmtKind::For || lanes.body.size() != 1) return nullptr;
  std::vector<Expr> around;  // let values and loop bounds on the way to the update
  const Stmt* s = &lanes.body[0];
  while (s->defined()) {
    const StmtNode& n = **s;
    if (n.body.size() != 1) break;
    if (n.kind == StmtKind::Let) {
      around.push_back(n.value);
    } else if (n.kind == StmtKind::For &&
               (n.for_kind == ForKind::Serial || n.for_kind == ForKind::Unrolled || n.for_kind == ForKind::Vectorized)) {
      around.push_back(n.min);
      around.push_back(n.extent);
    } else if (n.kind != StmtKind::Seq) {
      break;
    }
    s = &n.body[0];
  }
  if (!s->defined()) return nullptr;
  const StmtNode& st = **s;
  if (st.kind != StmtKind::Store || !st.buffer || st.buffer->scope != BufferScope::Local) return nullptr;
  for (const Expr& i : st.indices)
    if (!i.defined() || i->kind != ExprKind::IntImm) return nullptr;
  const Expr& v = st.value;
  if (!v.defined() || v->kind != ExprKind::Binary || !reduction_op(v->binary) || v->args.size() != 2) return nullptr;
  const auto is_acc = [&](const Expr& e) {
    if (e->kind != ExprKind::Load || e->buffer != st.buffer || e->args.size() != st.indices.size()) return false;
    for (size_t d = 0; d < st.indices.size(); ++d)
      if (e->args[d]->kind != ExprKind::IntImm || e->args[d]->int_value != st.indices[d]->int_value) return false;
    return true;
  };
  const size_t other = is_acc(v->args[0]) ? 1 : is_acc(v->args[1]) ? 0 : 2;
  if (other == 2 || loads_buffer(v->args[other], st.buffer.get())) return nullptr;
  for (const Expr& e : around)
    if (e.defined() && loads_buffer(e, st.buffer.get())) return nullptr;
  if (operand) *operand = v->args[other];
  return &st;
}

bool lane_element(const StmtNode& lanes, const Buffer& b, const std::vector<Expr>& index) {
  return b.scope == BufferScope::Local && b.shape.size() == 1 && index.size() == 1 && index[0]->kind == ExprKind::Var &&
         index[0]->name == lanes.var && is_const(lanes.min, 0) && equal(b.shape[0], lanes.extent);
}

void verify(const Kernel& k, Target target) { Verifier(k, target).run(); }

}  // namespace tessel::loop
