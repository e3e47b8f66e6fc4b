#include "tessel/loop/ir.h"

#include <set>

#include "tessel/support/error.h"

namespace tessel::loop {

namespace {

std::shared_ptr<ExprNode> make(ExprKind k, DType t) {
  auto n = std::make_shared<ExprNode>();
  n->kind = k;
  n->dtype = t;
  return n;
}

}  // namespace

bool is_computable(DType t) {
  switch (t) {
    case DType::Bool: case DType::I8: case DType::I16: case DType::I32: case DType::I64:
    case DType::U8: case DType::U16: case DType::U32: case DType::U64:
    case DType::F16: case DType::BF16: case DType::F32: case DType::F64:
      return true;
    default:
      return false;
  }
}

namespace {

void check_type(DType t, const char* what) {
  TS_CHECK(is_computable(t), str_cat("loop IR: ", what, " of type ", dtype_name(t), " is not supported"));
}

void check_operand(const Expr& e, const char* what) {
  TS_CHECK(e.defined(), str_cat("loop IR: ", what, " has an undefined operand"));
}

bool is_comparison(BinaryOp op) {
  return op == BinaryOp::Eq || op == BinaryOp::Ne || op == BinaryOp::Lt || op == BinaryOp::Le ||
         op == BinaryOp::Gt || op == BinaryOp::Ge;
}

void collect_asserts(const Stmt& s, std::vector<std::string>& out) {
  if (!s.defined()) return;
  if (s->kind == StmtKind::Assert) out.push_back(s->message);
  for (const Stmt& b : s->body) collect_asserts(b, out);
}

}  // namespace

Expr::Expr(int64_t v) : Expr(int_imm(DType::I64, v)) {}

DType Expr::dtype() const { return node ? node->dtype : DType::Undefined; }

bool is_primitive_intrinsic(const std::string& name) {
  static const std::set<std::string> prim = {"sqrt", "fabs", "floor", "ceil", "trunc", "rint",
                                             "fma",  "copysign", "isnan", "isinf"};
  return prim.count(name) != 0;
}

Expr int_imm(DType t, int64_t v) {
  check_type(t, "integer immediate");
  TS_CHECK(!is_float(t), "loop IR: int_imm needs an integer or bool type");
  auto n = make(ExprKind::IntImm, t);
  n->int_value = t == DType::Bool ? (v != 0) : v;
  return Expr(n);
}

Expr float_imm(DType t, double v) {
  check_type(t, "float immediate");
  TS_CHECK(is_float(t), "loop IR: float_imm needs a float type");
  auto n = make(ExprKind::FloatImm, t);
  n->float_value = v;
  return Expr(n);
}

Expr bool_imm(bool v) { return int_imm(DType::Bool, v ? 1 : 0); }

Expr var(const std::string& name, DType t) {
  check_type(t, "variable");
  TS_CHECK(!name.empty(), "loop IR: variable without a name");
  auto n = make(ExprKind::Var, t);
  n->name = name;
  return Expr(n);
}

Expr unary(UnaryOp op, Expr a) {
  check_operand(a, "unary op");
  if (op == UnaryOp::Not) TS_CHECK(!is_float(a.dtype()), "loop IR: 'not' of a float");
  auto n = make(ExprKind::Unary, a.dtype());
  n->unary = op;
  n->args = {std::move(a)};
  return Expr(n);
}

Expr binary(BinaryOp op, Expr a, Expr b) {
  check_operand(a, "binary op");
  check_operand(b, "binary op");
  TS_CHECK(a.dtype() == b.dtype(), str_cat("loop IR: binary operands differ in type (", dtype_name(a.dtype()),
                                           " vs ", dtype_name(b.dtype()), ")"));
  DType t = a.dtype();
  switch (op) {
    case BinaryOp::FloorDiv: case BinaryOp::FloorMod:
    case BinaryOp::And: case BinaryOp::Or: case BinaryOp::Xor:
    case BinaryOp::Shl: case BinaryOp::Shr:
      TS_CHECK(!is_float(t), "loop IR: integer-only binary op applied to floats");
      break;
    default:
      break;
  }
  auto n = make(ExprKind::Binary, is_comparison(op) ? DType::Bool : t);
  n->binary = op;
  n->args = {std::move(a), std::move(b)};
  return Expr(n);
}

Expr select(Expr cond, Expr t, Expr f) {
  check_operand(cond, "select");
  check_operand(t, "select");
  check_operand(f, "select");
  TS_CHECK(cond.dtype() == DType::Bool, "loop IR: select condition must be bool");
  TS_CHECK(t.dtype() == f.dtype(), "loop IR: select arms differ in type");
  auto n = make(ExprKind::Select, t.dtype());
  n->args = {std::move(cond), std::move(t), std::move(f)};
  return Expr(n);
}

Expr cast(DType t, Expr a) {
  check_operand(a, "cast");
  check_type(t, "cast target");
  if (a.dtype() == t) return a;
  auto n = make(ExprKind::Cast, t);
  n->args = {std::move(a)};
  return Expr(n);
}

Expr bitcast(DType t, Expr a) {
  check_operand(a, "bitcast");
  check_type(t, "bitcast target");
  TS_CHECK(dtype_storage_size(t) == dtype_storage_size(a.dtype()), "loop IR: bitcast between sizes");
  if (a.dtype() == t) return a;
  auto n = make(ExprKind::Bitcast, t);
  n->args = {std::move(a)};
  return Expr(n);
}

Expr load(BufferRef b, std::vector<Expr> indices) {
  TS_CHECK(b != nullptr, "loop IR: load from a null buffer");
  TS_CHECK(indices.size() == b->shape.size(),
           str_cat("loop IR: load from ", b->name, " with ", indices.size(), " indices, rank ", b->shape.size()));
  for (const Expr& i : indices) {
    check_operand(i, "load index");
    TS_CHECK(i.dtype() == DType::I64, str_cat("loop IR: index into ", b->name, " is not i64"));
  }
  auto n = make(ExprKind::Load, b->dtype);
  n->buffer = std::move(b);
  n->args = std::move(indices);
  return Expr(n);
}

Expr call(const std::string& intrinsic, DType t, std::vector<Expr> args) {
  check_type(t, "call result");
  for (const Expr& a : args) check_operand(a, "call");
  auto n = make(ExprKind::Call, t);
  n->name = intrinsic;
  n->args = std::move(args);
  return Expr(n);
}

Expr operator+(Expr a, Expr b) { return binary(BinaryOp::Add, std::move(a), std::move(b)); }
Expr operator-(Expr a, Expr b) { return binary(BinaryOp::Sub, std::move(a), std::move(b)); }
Expr operator*(Expr a, Expr b) { return binary(BinaryOp::Mul, std::move(a), std::move(b)); }
Expr operator-(Expr a) { return unary(UnaryOp::Neg, std::move(a)); }
Expr min(Expr a, Expr b) { return binary(BinaryOp::Min, std::move(a), std::move(b)); }
Expr max(Expr a, Expr b) { return binary(BinaryOp::Max, std::move(a), std::move(b)); }
Expr floordiv(Expr a, Expr b) { return binary(BinaryOp::FloorDiv, std::move(a), std::move(b)); }
Expr floormod(Expr a, Expr b) { return binary(BinaryOp::FloorMod, std::move(a), std::move(b)); }

bool as_const_int(const Expr& e, int64_t* out) {
  if (!e.defined() || e->kind != ExprKind::IntImm) return false;
  *out = e->int_value;
  return true;
}

bool is_const(const Expr& e, int64_t v) {
  int64_t c;
  return as_const_int(e, &c) && c == v;
}

const char* for_kind_name(ForKind k) {
  switch (k) {
    case ForKind::Serial: return "serial";
    case ForKind::Parallel: return "parallel";
    case ForKind::Vectorized: return "vectorized";
    case ForKind::Unrolled: return "unrolled";
    case ForKind::GpuBlockX: return "gpu.block.x";
    case ForKind::GpuBlockY: return "gpu.block.y";
    case ForKind::GpuBlockZ: return "gpu.block.z";
    case ForKind::GpuThreadX: return "gpu.thread.x";
    case ForKind::GpuThreadY: return "gpu.thread.y";
    case ForKind::GpuThreadZ: return "gpu.thread.z";
    case ForKind::GpuLanes: return "gpu.lanes";
  }
  return "?";
}

namespace {
std::shared_ptr<StmtNode> make_stmt(StmtKind k) {
  auto n = std::make_shared<StmtNode>();
  n->kind = k;
  return n;
}
}  // namespace

Stmt for_loop(const std::string& v, Expr min, Expr extent, ForKind kind, Stmt body) {
  TS_CHECK(body.defined(), "loop IR: loop without a body");
  TS_CHECK(min.dtype() == DType::I64 && extent.dtype() == DType::I64, "loop IR: loop bounds must be i64");
  auto n = make_stmt(StmtKind::For);
  n->var = v;
  n->min = std::move(min);
  n->extent = std::move(extent);
  n->for_kind = kind;
  n->body = {std::move(body)};
  return Stmt(n);
}

Stmt store(BufferRef b, std::vector<Expr> indices, Expr value) {
  TS_CHECK(b != nullptr, "loop IR: store to a null buffer");
  check_operand(value, "store");
  TS_CHECK(indices.size() == b->shape.size(),
           str_cat("loop IR: store to ", b->name, " with ", indices.size(), " indices, rank ", b->shape.size()));
  TS_CHECK(value.dtype() == b->dtype, str_cat("loop IR: store of ", dtype_name(value.dtype()), " into ", b->name,
                                              " of ", dtype_name(b->dtype)));
  for (const Expr& i : indices) TS_CHECK(i.defined() && i.dtype() == DType::I64, "loop IR: store index not i64");
  auto n = make_stmt(StmtKind::Store);
  n->buffer = std::move(b);
  n->indices = std::move(indices);
  n->value = std::move(value);
  return Stmt(n);
}

Stmt let(const std::string& v, Expr value, Stmt body) {
  check_operand(value, "let");
  TS_CHECK(body.defined(), "loop IR: let without a body");
  auto n = make_stmt(StmtKind::Let);
  n->var = v;
  n->value = std::move(value);
  n->body = {std::move(body)};
  return Stmt(n);
}

Stmt if_then(Expr cond, Stmt then_s, Stmt else_s) {
  check_operand(cond, "if");
  TS_CHECK(cond.dtype() == DType::Bool, "loop IR: if condition must be bool");
  TS_CHECK(then_s.defined(), "loop IR: if without a then branch");
  auto n = make_stmt(StmtKind::If);
  n->value = std::move(cond);
  n->body = {std::move(then_s)};
  if (else_s.defined()) n->body.push_back(std::move(else_s));
  return Stmt(n);
}

Stmt seq(std::vector<Stmt> stmts) {
  auto n = make_stmt(StmtKind::Seq);
  for (Stmt& s : stmts) {
    if (!s.defined()) continue;
    if (s->kind == StmtKind::Seq)
      n->body.insert(n->body.end(), s->body.begin(), s->body.end());
    else
      n->body.push_back(std::move(s));
  }
  return Stmt(n);
}

Stmt allocate(BufferRef b, Stmt body) {
  TS_CHECK(b != nullptr && b->scope != BufferScope::Param, "loop IR: allocate needs a local or shared buffer");
  TS_CHECK(body.defined(), "loop IR: allocate without a body");
  auto n = make_stmt(StmtKind::Allocate);
  n->buffer = std::move(b);
  n->body = {std::move(body)};
  return Stmt(n);
}

Stmt assert_that(Expr cond, std::string message) {
  check_operand(cond, "assert");
  TS_CHECK(cond.dtype() == DType::Bool, "loop IR: assert condition must be bool");
  auto n = make_stmt(StmtKind::Assert);
  n->value = std::move(cond);
  n->message = std::move(message);
  return Stmt(n);
}

Stmt contract(const ContractVars& v, Expr batch_extent, Expr m, Expr n, Expr k_extent, Expr a, Expr b,
              Stmt epilogue) {
  for (const Expr* e : {&batch_extent, &m, &n, &k_extent})
    TS_CHECK(e->defined() && e->dtype() == DType::I64, "loop IR: contract extents must be i64");
  check_operand(a, "contract");
  check_operand(b, "contract");
  TS_CHECK(a.dtype() == DType::F32 && b.dtype() == DType::F32, "loop IR: contract operands must be f32");
  TS_CHECK(epilogue.defined(), "loop IR: contract without an epilogue");
  for (const std::string* name : {&v.batch, &v.i, &v.j, &v.k, &v.acc})
    TS_CHECK(!name->empty(), "loop IR: contract variable without a name");
  auto n_ = make_stmt(StmtKind::Contract);
  n_->vars = {v.batch, v.i, v.j, v.k, v.acc};
  n_->operands = {std::move(batch_extent), std::move(m), std::move(n), std::move(k_extent), std::move(a), std::move(b)};
  n_->body = {std::move(epilogue)};
  return Stmt(n_);
}

ContractView contract_parts(const StmtNode& s) {
  TS_CHECK(s.kind == StmtKind::Contract && s.vars.size() == 5 && s.operands.size() == 6 && s.body.size() == 1,
           "loop IR: not a contract statement");
  return {s.vars[0],     s.vars[1],     s.vars[2],     s.vars[3],     s.vars[4],     s.operands[0], s.operands[1],
          s.operands[2], s.operands[3], s.operands[4], s.operands[5], s.body[0]};
}

Stmt attention(const AttentionVars& v, Expr batch_extent, Expr m, Expr n, Expr d_extent, Expr e_extent, Expr q,
               Expr k, Expr v_operand, Expr scale, Expr bias, DType p_type, Stmt epilogue) {
  for (const Expr* e : {&batch_extent, &m, &n, &d_extent, &e_extent})
    TS_CHECK(e->defined() && e->dtype() == DType::I64, "loop IR: attention extents must be i64");
  for (const Expr* e : {&q, &k, &v_operand, &scale, &bias}) {
    check_operand(*e, "attention");
    TS_CHECK(e->dtype() == DType::F32, "loop IR: attention operands must be f32");
  }
  TS_CHECK(p_type == DType::F32 || p_type == DType::F16 || p_type == DType::BF16,
           "loop IR: attention probabilities rounded to ", dtype_name(p_type), " (f32, f16 or bf16)");
  TS_CHECK(epilogue.defined(), "loop IR: attention without an epilogue");
  for (const std::string* name : {&v.batch, &v.i, &v.j, &v.d, &v.e, &v.acc})
    TS_CHECK(!name->empty(), "loop IR: attention variable without a name");
  auto s = make_stmt(StmtKind::Attention);
  s->vars = {v.batch, v.i, v.j, v.d, v.e, v.acc};
  s->operands = {std::move(batch_extent), std::move(m), std::move(n), std::move(d_extent), std::move(e_extent),
                 std::move(q), std::move(k), std::move(v_operand), std::move(scale), std::move(bias)};
  s->p_type = p_type;
  s->body = {std::move(epilogue)};
  return Stmt(s);
}

AttentionView attention_parts(const StmtNode& s) {
  TS_CHECK(s.kind == StmtKind::Attention && s.vars.size() == 6 && s.operands.size() == 10 && s.body.size() == 1,
           "loop IR: not an attention statement");
  const std::vector<Expr>& o = s.operands;
  return {s.vars[0], s.vars[1], s.vars[2], s.vars[3], s.vars[4], s.vars[5], o[0], o[1], o[2], o[3],
          o[4],      o[5],      o[6],      o[7],      o[8],      o[9],      s.p_type, s.body[0]};
}

std::vector<std::string> Kernel::assert_messages() const {
  std::vector<std::string> out;
  collect_asserts(body, out);
  return out;
}

}  // namespace tessel::loop
