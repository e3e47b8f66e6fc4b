#include "tessel/schedule/gemm.h"

#include <algorithm>
#include <numeric>
#include <vector>

#include "tessel/loop/affine.h"
#include "tessel/loop/simplify.h"
#include "tessel/loop/visit.h"
#include "tessel/support/error.h"

namespace tessel {

namespace {

using loop::BinaryOp;
using loop::BufferRef;

using loop::Expr;
using loop::ForKind;
using loop::Stmt;

Expr lt(Expr a, Expr b) { return loop::binary(BinaryOp::Lt, std::move(a), std::move(b)); }
Expr le(Expr a, Expr b) { return loop::binary(BinaryOp::Le, std::move(a), std::move(b)); }
Expr eq(Expr a, Expr b) { return loop::binary(BinaryOp::Eq, std::move(a), std::move(b)); }
Expr both(Expr a, Expr b) { return loop::binary(BinaryOp::And, std::move(a), std::move(b)); }
Expr ceil_div(Expr a, int64_t c) { return loop::floordiv(std::move(a) + Expr(c - 1), Expr(c)); }
Expr f32_zero() { return loop::float_imm(DType::F32, 0.0); }

int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }
int64_t round_down(int64_t v, int64_t m) { return std::max(m, v / m * m); }
int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

BufferRef local_f32(const std::string& name, std::vector<int64_t> dims) {
  auto b = std::make_shared<loop::Buffer>();
  b->name = name;
  b->dtype = DType::F32;
  for (int64_t d : dims) b->shape.push_back(Expr(d));
  b->scope = loop::BufferScope::Local;
  return b;
}

// Builds one gemm_nest. The block-relative expressions (m0, klen, ...) are
// written over the block loop variables, which are fixed names.
class GemmBuilder {
 public:
  GemmBuilder(const GemmOperands& ops, const GemmSchedule& s, const std::string& prefix)
      : ops_(ops), s_(s), prefix_(prefix) {
    // Only when K is known to fit one block can the partial C block go.
    int64_t k = 0;
    split_k_ = !(loop::as_const_int(loop::simplify(ops.K), &k) && k <= s.kc);
    if (s.pack_a) ap_ = local_f32(name("apack"), {s.mc / s.mr, s.kc, s.mr});
    if (s.pack_b) bp_ = local_f32(name("bpack"), {s.nc / s.nr, s.kc, s.nr});
    acc_ = local_f32(name("acc"), {s.mr, s.nr});
    if (split_k_) cp_ = local_f32(name("cpart"), {s.mc, s.nc});
    m0_ = var("mb") * Expr(s.mc);
    n0_ = var("jc") * Expr(s.nc);
    k0_ = var("pc") * Expr(s.kc);
    mlen_ = loop::min(Expr(s.mc), ops.M - m0_);
    nlen_ = loop::min(Expr(s.nc), ops.N - n0_);
    klen_ = loop::min(Expr(s.kc), ops.K - k0_);
    // At least one K block, so that K = 0 still runs the epilogue on zeros.
    k_blocks_ = loop::max(Expr(1), ceil_div(ops.K, s.kc));
  }

  Stmt build() {
    Stmt per_block = loop::seq({pack_b(), pack_a(), micro_kernels()});
    Stmt body = loop::for_loop(name("pc"), 0, k_blocks_, ForKind::Serial, per_block);
    const bool tiles = s_.parallel_over_m_blocks && s_.parallel_over_n_blocks;
    if (!tiles) body = loop::for_loop(name("jc"), 0, ceil_div(ops_.N, s_.nc), ForKind::Serial, body);
    for (const BufferRef& b : {acc_, cp_, bp_, ap_})
      if (b) body = loop::allocate(b, body);
    // A unit of work is an M block (with all its N blocks) or a tile: tile t
    // is (M block t / nb, N block t % nb), so a task's consecutive tiles
    // share their M block.
    const std::string unit = name(tiles ? "tile" : "mb");
    if (tiles) {
      Expr t = loop::var(unit), nb = ceil_div(ops_.N, s_.nc);
      body = loop::let(name("mb"), loop::floordiv(t, nb), loop::let(name("jc"), loop::floormod(t, nb), body));
    }
    const ForKind kind = s_.parallel_over_m_blocks ? ForKind::Parallel : ForKind::Serial;
    const Expr units = units_per_product(ops_, s_);
    if (!batched(ops_)) {
      if (!ops_.batch_var.empty()) body = loop::let(ops_.batch_var, Expr(0), body);
      return loop::simplify(loop::for_loop(unit, 0, units, kind, body));
    }
    // One loop over (product, unit) pairs, the product outermost.
    Expr bt = var("bt");
    body = loop::let(ops_.batch_var, loop::floordiv(bt, units), loop::let(unit, loop::floormod(bt, units), body));
    return loop::simplify(loop::for_loop(name("bt"), 0, gemm_parallel_extent(ops_, s_), kind, body));
  }

  static bool batched(const GemmOperands& ops) {
    int64_t b = 0;
    return !(loop::as_const_int(loop::simplify(ops.batch), &b) && b == 1);
  }

  // Units of work of one product of the batch.
  static Expr units_per_product(const GemmOperands& ops, const GemmSchedule& s) {
    Expr m_blocks = ceil_div(ops.M, s.mc);
    if (!(s.parallel_over_m_blocks && s.parallel_over_n_blocks)) return m_blocks;
    return m_blocks * ceil_div(ops.N, s.nc);
  }

 private:
  std::string name(const std::string& what) const { return prefix_ + "_" + what; }
  Expr var(const std::string& what) const { return loop::var(name(what)); }
  // Loop variables must be unique in the kernel: copies of a loop get numbers.
  std::string fresh(const std::string& what) { return name(what) + std::to_string(counter_++); }

  // for i in [0, MR) unrolled, for the NR/L vectors v unrolled, for the L
  // lanes l vectorized: body(i, j = v * L + l). Every index of the tile is a
  // constant after unrolling, which is what lets LLVM keep acc in registers.
  Stmt tile_loop(const std::function<Stmt(Expr, Expr)>& body) {
    return tile_loop_vl([&](Expr i, Expr v, Expr l) { return body(i, v * Expr(s_.vector_lanes) + l); });
  }
  Stmt tile_loop_vl(const std::function<Stmt(Expr i, Expr v, Expr l)>& body) {
    const std::string i = fresh("ti"), v = fresh("tv"), l = fresh("tl");
    const int lanes = s_.vector_lanes;
    Stmt lane_loop = loop::for_loop(l, 0, lanes, ForKind::Vectorized, body(loop::var(i), loop::var(v), loop::var(l)));
    return loop::for_loop(i, 0, s_.mr, ForKind::Unrolled,
                          loop::for_loop(v, 0, s_.nr / lanes, ForKind::Unrolled, lane_loop));
  }

  // One packed operand: buf[p, k, x] = value(k0 + k, x0 + x) with
  // x0 = origin + p * width, for the panels p covering `len` rows (A) or
  // columns (B) and zero past `limit`. Full panels copy unguarded; only the
  // last one tests x.
  struct Packing {
    BufferRef buf;
    std::string tag;
    Expr origin, len, limit;
    int width;
    ForKind lane_kind;
    std::function<Expr(Expr k, Expr x)> value;
  };

  Stmt pack(const Packing& pk) {
    Expr p = var(pk.tag + "p");
    Expr x0 = pk.origin + p * Expr(pk.width);
    // A vectorized row is copied in pieces of the largest power of two that
    // divides the width, at most 16 lanes: a row of NR = 24 as one 24-lane
    // vector made LLVM 19 split its gather into 16 + 8 lanes, and the
    // 8-lane vgatherqps it selected once had the same register for index
    // and data, which the CPU refuses (SIGILL in a tuner's candidate).
    const int piece = pk.lane_kind == ForKind::Vectorized ? std::min(16, pk.width & -pk.width) : pk.width;
    const bool split = piece < pk.width;
    auto copy = [&](bool edge) {
      const std::string k = fresh(pk.tag + "k"), x = fresh(pk.tag + "x");
      const std::string xv = split ? fresh(pk.tag + "xv") : "";
      Expr kk = loop::var(k);
      Expr xx = split ? loop::var(xv) * Expr(piece) + loop::var(x) : loop::var(x);
      // Folded over the lanes' range: a convolution's position p is split
      // into its row and column by floordiv/floormod(p, OW); where OW is a
      // multiple of the piece (MobileNet's stem: 112 = 7 x 16), a piece never
      // crosses a row, and floordiv(16 q + x, 112) => floordiv(q, 7) leaves
      // the lanes' reads affine (vector or span loads, not a gather).
      loop::Bounds lanes{{x, {0, piece - 1}}};
      if (split) lanes[xv] = {0, pk.width / piece - 1};
      Stmt put = loop::store(pk.buf, {p, kk, xx}, loop::fold_affine(pk.value(k0_ + kk, x0 + xx), lanes));
      if (edge) put = loop::if_then(lt(x0 + xx, pk.limit), put, loop::store(pk.buf, {p, kk, xx}, f32_zero()));
      Stmt row = split ? loop::for_loop(xv, 0, pk.width / piece, ForKind::Unrolled,
                                        loop::for_loop(x, 0, piece, pk.lane_kind, put))
                       : loop::for_loop(x, 0, pk.width, pk.lane_kind, put);
      return loop::for_loop(k, 0, klen_, ForKind::Serial, row);
    };
    Stmt panel = loop::if_then(le(x0 + Expr(pk.width), pk.limit), copy(false), copy(true));
    return loop::for_loop(name(pk.tag + "p"), 0, ceil_div(pk.len, pk.width), ForKind::Serial, panel);
  }

  // NR-wide B panels, a k row of NR floats at a time, vectorized: a vector
  // copy from B stored [K, N], a gather from B stored [N, K] (transposed
  // weights, attention's K). Measured on AVX2 (Zen 3), the gather packs
  // B stored [N, K] as fast as the vector copy packs [K, N] (128 x 768 x
  // 768: within noise) and 15-25% faster than a scalar copy along k
  // (contiguous reads, stores NR apart): 65 against 52 GFLOP/s per CPU
  // second on GPT-2's LM head, 128 x 50257 x 768.
  Stmt pack_b() {
    if (!s_.pack_b) return loop::no_op();
    return pack({bp_, "b", n0_, nlen_, ops_.N, s_.nr, ForKind::Vectorized, ops_.b});
  }

  // B[k0 + k, column v * L + l of the tile]: from the packed panel, or from
  // the prepacked panels in place. There the tile's first column is a
  // multiple of the panel width W (NR and NC are), and W of L, so vector v
  // lies in one panel: its lanes are W-contiguous floats.
  Expr b_element(const Expr& k, const Expr& v, const Expr& l) {
    const Expr j = v * Expr(s_.vector_lanes) + l;
    if (s_.pack_b) return loop::load(bp_, {var("jr"), k, j});
    const int64_t w = ops_.panel_width;
    const Expr lane0 = v * Expr(s_.vector_lanes);
    const Expr panel = ops_.b_panel_base + var("jc") * Expr(s_.nc / w) + var("jr") * Expr(s_.nr / w) +
                       loop::floordiv(lane0, Expr(w));
    return loop::load(ops_.b_panels, {panel, k0_ + k, loop::floormod(lane0, Expr(w)) + l});
  }

  // MR-tall A panels, MR scalars per k: contiguous from A stored [K, M]
  // (transA), MR rows read in step from A stored [M, K].
  Stmt pack_a() {
    if (!s_.pack_a) return loop::no_op();
    auto a = [&](Expr k, Expr i) { return ops_.a(i, k); };
    return pack({ap_, "a", m0_, mlen_, ops_.M, s_.mr, ForKind::Unrolled, a});
  }

  Stmt micro_kernels() {
    Stmt tile = loop::seq({init_acc(), k_loop(), finish_acc()});
    return loop::for_loop(name("jr"), 0, ceil_div(nlen_, s_.nr), ForKind::Serial,
                          loop::for_loop(name("ir"), 0, ceil_div(mlen_, s_.mr), ForKind::Serial, tile));
  }

  std::vector<Expr> cp_index(const Expr& i, const Expr& j) const {
    return {var("ir") * Expr(s_.mr) + i, var("jr") * Expr(s_.nr) + j};
  }

  // acc = 0 in the first K block, else the partial sums of the earlier ones.
  Stmt init_acc() {
    Stmt zero = tile_loop([&](Expr i, Expr j) { return loop::store(acc_, {i, j}, f32_zero()); });
    if (!split_k_) return zero;
    Stmt reload = tile_loop([&](Expr i, Expr j) { return loop::store(acc_, {i, j}, loop::load(cp_, cp_index(i, j))); });
    return loop::if_then(eq(var("pc"), Expr(0)), zero, reload);
  }

  // A[row0 + i, k0 + k], from the packed panel or from A itself.
  Expr a_element(const Expr& i, const Expr& k) {
    if (s_.pack_a) return loop::load(ap_, {var("ir"), k, i});
    Expr row = loop::min(m0_ + var("ir") * Expr(s_.mr) + i, ops_.M - Expr(1));
    // Folded over the block's k (or its digits): a convolution's taps
    // (lower/conv_gemm.cpp) split k into digits, which a K block within one
    // digit run, or the digit loops, resolve (loop/affine.h), leaving the k
    // loop free of divisions.
    return loop::fold_affine(ops_.a(row, split_k_ ? k0_ + k : k), k_bounds_);
  }

  // The micro-kernel's loop over the K block: k, or with ops.k_digits and
  // one K block a nest over the digits (k = their row-major position, so
  // the sums still run over k ascending).
  Stmt k_loop() {
    int64_t K = 0, digits = 1;
    for (int64_t e : ops_.k_digits) digits *= e;
    const bool nest = !split_k_ && !ops_.k_digits.empty() && loop::as_const_int(loop::simplify(ops_.K), &K) &&
                      K == digits;
    std::vector<std::string> digit_vars;
    Expr k = var("k");
    k_bounds_ = {{name("k"), {0, s_.kc - 1}}};
    if (nest) {
      k_bounds_.clear();
      for (size_t d = 0; d < ops_.k_digits.size(); ++d) {
        digit_vars.push_back(fresh("kd"));
        k_bounds_[digit_vars.back()] = {0, ops_.k_digits[d] - 1};
        const Expr dv = loop::var(digit_vars.back());
        k = d == 0 ? dv : k * Expr(ops_.k_digits[d]) + dv;
      }
    }
    Stmt step = tile_loop_vl([&](Expr i, Expr v, Expr l) {
      Expr a = a_element(i, k);
      Expr b = b_element(k, v, l);
      Expr j = v * Expr(s_.vector_lanes) + l;
      return loop::store(acc_, {i, j}, loop::call("fma", DType::F32, {a, b, loop::load(acc_, {i, j})}));
    });
    if (!nest) return loop::for_loop(name("k"), 0, klen_, ForKind::Serial, step);
    for (size_t d = ops_.k_digits.size(); d-- > 0;)
      step = loop::for_loop(digit_vars[d], 0, ops_.k_digits[d], ForKind::Serial, step);
    return step;
  }

  // The epilogue after the last K block, else the partial sums go to Cp.
  Stmt finish_acc() {
    if (!split_k_) return epilogue_tile();
    Stmt save = tile_loop([&](Expr i, Expr j) { return loop::store(cp_, cp_index(i, j), loop::load(acc_, {i, j})); });
    return loop::if_then(eq(var("pc"), k_blocks_ - Expr(1)), epilogue_tile(), save);
  }

  // Full tiles call the epilogue unguarded; edge tiles only for i < M, j < N.
  // acc is read into a let before the (lane-masked) guard.
  Stmt epilogue_tile() {
    Expr row0 = m0_ + var("ir") * Expr(s_.mr), col0 = n0_ + var("jr") * Expr(s_.nr);
    auto call = [&](bool edge) {
      return tile_loop([&](Expr i, Expr j) {
        const std::string v = fresh("acc_value");
        Expr gi = row0 + i, gj = col0 + j;
        Stmt body = ops_.epilogue(gi, gj, loop::var(v, DType::F32));
        if (edge) body = loop::if_then(both(lt(gi, ops_.M), lt(gj, ops_.N)), body);
        return loop::let(v, loop::load(acc_, {i, j}), body);
      });
    };
    Expr full = both(le(row0 + Expr(s_.mr), ops_.M), le(col0 + Expr(s_.nr), ops_.N));
    return loop::if_then(full, call(false), call(true));
  }

  const GemmOperands& ops_;
  const GemmSchedule& s_;
  std::string prefix_;
  int counter_ = 0;
  bool split_k_ = true;
  BufferRef ap_, bp_, acc_, cp_;
  loop::Bounds k_bounds_;  // of the k loop's variables, while k_loop builds
  Expr m0_, n0_, k0_, mlen_, nlen_, klen_, k_blocks_;
};

// Largest multiple of `m` (at least m) whose block of `row_bytes` per unit
// fits `budget` bytes.
int64_t fit_blocks(int64_t budget, int64_t row_bytes, int64_t m) { return round_down(budget / row_bytes, m); }

// Block size for an extent of `n` (-1: unknown) with at most `cap` per block:
// equal blocks, a multiple of `m`, and a block count that is a multiple of
// `spread` when there are enough (so that threads get equal shares).
int64_t balanced_block(int64_t n, int64_t cap, int64_t m, int64_t spread) {
  if (n < 0) return cap;
  int64_t blocks = ceil_div(std::max<int64_t>(n, 1), cap);
  if (n >= spread * m) blocks = round_up(blocks, spread);
  return std::min(cap, round_up(ceil_div(std::max<int64_t>(n, 1), blocks), m));
}

}  // namespace

void check_gemm_schedule(const GemmSchedule& s) {
  TS_CHECK(s.mr >= 1 && s.nr >= 1 && s.mc >= 1 && s.kc >= 1 && s.nc >= 1 && s.vector_lanes >= 1,
           "gemm schedule: sizes must be positive");
  TS_CHECK(s.mc % s.mr == 0, "gemm schedule: mc ", s.mc, " is not a multiple of mr ", s.mr);
  TS_CHECK(s.nc % s.nr == 0, "gemm schedule: nc ", s.nc, " is not a multiple of nr ", s.nr);
  TS_CHECK(s.nr % s.vector_lanes == 0, "gemm schedule: nr ", s.nr, " is not a multiple of the vector width ",
           s.vector_lanes);
  // The packed panels and the partial C block are stack buffers of the
  // kernel, which the CPU code generator caps at 1 MiB each.
  constexpr int64_t kMaxScratch = int64_t{1} << 20;
  // (A and B only when packed per call.)
  const int64_t a = s.pack_a ? int64_t{s.mc} * s.kc * 4 : 0, b = s.pack_b ? int64_t{s.nc} * s.kc * 4 : 0,
                c = int64_t{s.mc} * s.nc * 4;
  TS_CHECK(a <= kMaxScratch && b <= kMaxScratch && c <= kMaxScratch, "gemm schedule: blocks mc ", s.mc, " kc ",
           s.kc, " nc ", s.nc, " need more than ", kMaxScratch, " bytes of stack for a packed block");
}

// The multiple of blocks that spreads `units` independent units (-1:
// unknown) times the blocks evenly over the cores: 1 when there are many
// units anyway (the imbalance is then at most one unit in eight per core).
int64_t spread_for(int64_t cores, int64_t units) {
  if (units < 0 || units >= 8 * cores) return 1;
  return cores / std::gcd(cores, std::max<int64_t>(units, 1));
}

bool conv_rows_are_positions(int64_t positions, int64_t channels, int64_t K) {
  return positions > 0 && channels >= 64 && K >= 256;
}

int64_t conv_reduction(const Node& conv) {
  const Value* w = conv.inputs.size() > 1 ? conv.input(1) : nullptr;
  if (!w || !w->type.has_shape() || w->type.shape->size() < 2) return -1;
  int64_t k = 1;
  for (size_t d = 1; d < w->type.shape->size(); ++d) {
    const Dim& dim = (*w->type.shape)[d];
    if (!dim.is_const()) return -1;
    k *= dim.value();
  }
  return k;
}

bool conv_rows_are_positions(const Node& conv) {
  if (conv.op != "Conv" || !conv.domain.empty() || conv.attr_int("group", 1) != 1 || conv.outputs.empty()) return false;
  // Over a channel-blocked input (passes/blocked_layout.cpp) the taps of
  // one position are 16 consecutive channels, and the positions that a
  // vector would hold are a block apart: the positions are the rows.
  const Node* x = conv.inputs.empty() || !conv.inputs[0] ? nullptr : conv.inputs[0]->producer;
  if (x && x->domain == "tessel" && x->op == "FromBlocked") return true;
  return conv_rows_are_positions_by_shape(conv);
}

bool conv_rows_are_positions_by_shape(const Node& conv) {
  if (conv.op != "Conv" || !conv.domain.empty() || conv.attr_int("group", 1) != 1 || conv.outputs.empty()) return false;
  const Value* y = conv.outputs[0];
  if (!y || !y->type.has_shape() || y->type.shape->size() < 3 || !(*y->type.shape)[1].is_const()) return false;
  int64_t positions = 1;
  for (size_t d = 2; d < y->type.shape->size(); ++d) {
    const Dim& dim = (*y->type.shape)[d];
    if (!dim.is_const()) return false;
    positions *= dim.value();
  }
  const int64_t K = conv_reduction(conv);
  return K > 0 && conv_rows_are_positions(positions, (*y->type.shape)[1].value(), K);
}

GemmSchedule default_gemm_schedule(const CpuInfo& cpu, int64_t M_hint, int64_t N_hint, int64_t K_hint,
                                   bool parallel_over_n_blocks, int64_t batch_hint, bool b_prepacked) {
  GemmSchedule s;
  const int lanes = cpu.vector_lanes_f32;
  const int64_t cores = std::max<int64_t>(cpu.cores, 1);
  // Two vectors per tile row unless N is one vector wide; the rows use what
  // is left of the registers after the B vectors and one broadcast.
  const int vectors = (N_hint >= 0 && N_hint <= lanes) ? 1 : 2;
  s.vector_lanes = lanes;
  s.nr = vectors * lanes;
  s.mr = std::clamp((cpu.vector_registers - vectors - 1) / vectors, 1, 8);
  // Over a prepacked B with 32 registers (AVX-512): rows of four vectors
  // (4 x 64), 8 loads per 16 FMAs against 10 for 8 x 32, and A read in
  // place (below). What `tessel tune` picked for the transformers' weight
  // GEMMs (M = 128: 4-13% per kernel, docs/tuning.md); as the default,
  // alternating with the 8 x 32 default on a Zen 4 (2 threads, median of
  // three pairs' medians): BERT 121.2 -> 118.9 ms, GPT-2 177.5 -> 173.2,
  // Llama 43.7 -> 41.1, ViT level.
  const bool wide_rows = b_prepacked && cpu.vector_registers >= 32 && (N_hint < 0 || N_hint >= 4 * lanes);
  const int l1_panel_width = s.nr;  // the K block keeps a two-vector B micro-panel in L1
  if (wide_rows) {
    s.nr = 4 * lanes;
    s.mr = 4;
  }
  const bool few_rows = M_hint >= 1 && M_hint < s.mr;
  if (few_rows) {
    // Fewer rows than the tile (a GEMV, M = 1, or a few rows): a taller tile
    // would multiply zero rows. The registers they free go to more B vectors
    // per row, up to 4 (64 columns, the prepacked panels' padding): a product
    // this flat streams B once, so its speed is that stream's.
    // 1, 2 or 4 vectors (nc, a power of two, stays a multiple of nr), no
    // wider than N needs.
    s.mr = static_cast<int>(M_hint);
    const int fit = (cpu.vector_registers - 1) / (s.mr + 1);  // mr * v accumulators + v B vectors + a broadcast
    int v = fit >= 4 ? 4 : 2;  // fit >= 2: mr is below the tallest tile of two vectors
    while (v > 1 && N_hint >= 0 && int64_t{v / 2} * lanes >= N_hint) v /= 2;
    s.nr = v * lanes;
  }
  // Half of L1 for one B micro-panel (the rest for the A panel and C tile).
  // Few rows use a B panel once: keeping it in L1 buys nothing, while each K
  // block costs a pass over the partial C; the longest block (the 512 of
  // the scratch limit) measured 25-30% faster on a 1 x 4096 x 4096 GEMV.
  const int64_t kc_cap =
      few_rows ? 512 : std::clamp<int64_t>(fit_blocks(cpu.l1d_bytes / 2, int64_t{l1_panel_width} * 4, 8), 16, 512);
  s.kc = static_cast<int>(balanced_block(K_hint, kc_cap, 1, 1));
  // Half of L2 for the packed A block, and at most as many rows as a
  // partial C block one tile wide holds in a Local buffer (a short K, a
  // convolution over 16 channels with 12544 positions as rows, would
  // otherwise take them all).
  const int64_t mc_cap = std::min(fit_blocks(cpu.l2_bytes / 2, int64_t{s.kc} * 4, s.mr),
                                  fit_blocks(int64_t{1} << 20, int64_t{s.nr} * 4, s.mr));
  s.parallel_over_n_blocks = parallel_over_n_blocks;
  // The cores' tasks come from the N blocks (M blocks as one core would
  // take them) or, split_m, from M blocks made a multiple of the cores.
  const auto blocks_for = [&](bool split_m) {
    const int64_t m_spread = parallel_over_n_blocks && !split_m ? 1 : spread_for(cores, batch_hint);
    const int64_t mc = balanced_block(M_hint, mc_cap, s.mr, m_spread);
    // The packed B block and the partial C block each stay under the 1 MiB a
    // Local buffer may take.
    const int64_t local_budget = int64_t{1} << 20;
    const int64_t nc_cap = std::min(fit_blocks(local_budget, int64_t{s.kc} * 4, s.nr),
                                    fit_blocks(local_budget, mc * 4, s.nr));
    const int64_t m_blocks = M_hint < 0 ? cores : ceil_div(std::max<int64_t>(M_hint, 1), mc);
    const int64_t units = batch_hint < 0 ? -1 : batch_hint * m_blocks;
    const int64_t n_spread = parallel_over_n_blocks && !split_m ? spread_for(cores, units) : 1;
    return std::pair<int64_t, int64_t>(mc, balanced_block(N_hint, std::min<int64_t>(nc_cap, 512), s.nr, n_spread));
  };
  std::pair<int64_t, int64_t> blocks = blocks_for(false);
  // Each N block reads all of A and each M block all of B: where A is the
  // larger operand (a convolution's weights over a 7 x 7 image: M = 512
  // channels, K = 4608, N = 49 positions), splitting N for the cores reads
  // the weights once per N block, and M blocks for the cores move fewer bytes.
  // Only for an A past L2: a smaller one is read again from the cache.
  if (parallel_over_n_blocks && M_hint > 0 && N_hint > 0 && K_hint > 0 && M_hint * K_hint * 4 > cpu.l2_bytes) {
    const auto traffic = [&](std::pair<int64_t, int64_t> b) {
      return ceil_div(N_hint, b.second) * M_hint * K_hint + ceil_div(M_hint, b.first) * K_hint * N_hint;
    };
    const std::pair<int64_t, int64_t> by_m = blocks_for(true);
    if (ceil_div(M_hint, by_m.first) * std::max<int64_t>(batch_hint, 1) >= cores && traffic(by_m) < traffic(blocks))
      blocks = by_m;
  }
  // Tiles that the cores cannot share evenly (an N too narrow to split:
  // a convolution's 64 channels as its columns, 3 M blocks over 2 cores ran
  // at two thirds of the speed) take M blocks made a multiple of the cores.
  const auto uneven = [&](std::pair<int64_t, int64_t> b) {
    const int64_t units = std::max<int64_t>(batch_hint, 1) * ceil_div(M_hint, b.first) * ceil_div(N_hint, b.second);
    return units < 8 * cores && units % cores != 0;
  };
  if (parallel_over_n_blocks && M_hint > 0 && N_hint > 0 && batch_hint >= 0 && uneven(blocks)) {
    const std::pair<int64_t, int64_t> by_m = blocks_for(true);
    if (!uneven(by_m)) blocks = by_m;
  }
  s.mc = static_cast<int>(blocks.first);
  s.nc = static_cast<int>(blocks.second);
  // A packed panel pays for itself over the N panels that reuse it; with
  // four or fewer (measured: N = 64) reading A directly is faster.
  s.pack_a = !wide_rows && !(N_hint >= 0 && N_hint <= 4 * int64_t{s.nr});
  check_gemm_schedule(s);
  return s;
}

void add_gemm_knobs(const GemmSchedule& s, Schedule* out) {
  Primitive& tile = out->get("gemm.tile");
  tile.set("mr", s.mr);
  tile.set("nr", s.nr);
  tile.set("lanes", s.vector_lanes);
  Primitive& block = out->get("gemm.block");
  block.set("mc", s.mc);
  block.set("kc", s.kc);
  block.set("nc", s.nc);
  const char* mode = !s.parallel_over_m_blocks ? "serial" : s.parallel_over_n_blocks ? "tiles" : "m_blocks";
  out->get("gemm.parallel").set("mode", mode);
  Primitive& pack = out->get("gemm.pack");
  pack.set("a", s.pack_a ? 1 : 0);
  pack.set("b", s.pack_b ? 1 : 0);
}

void apply_gemm_knobs(const Schedule& sched, GemmSchedule* s) {
  auto narrow = [](int64_t v) { return static_cast<int>(v); };  // check_schedule bounds them
  if (const Primitive* t = sched.find("gemm.tile")) {
    s->mr = narrow(t->int_attr("mr", s->mr));
    s->nr = narrow(t->int_attr("nr", s->nr));
    s->vector_lanes = narrow(t->int_attr("lanes", s->vector_lanes));
  }
  if (const Primitive* b = sched.find("gemm.block")) {
    s->mc = narrow(b->int_attr("mc", s->mc));
    s->kc = narrow(b->int_attr("kc", s->kc));
    s->nc = narrow(b->int_attr("nc", s->nc));
  }
  if (const Primitive* p = sched.find("gemm.parallel")) {
    const std::string mode = p->attr("mode").value_or("m_blocks");
    s->parallel_over_m_blocks = mode != "serial";
    s->parallel_over_n_blocks = mode == "tiles";
  }
  if (const Primitive* p = sched.find("gemm.pack")) {
    s->pack_a = p->int_attr("a", s->pack_a) != 0;
    s->pack_b = p->int_attr("b", s->pack_b) != 0;
  }
  check_gemm_schedule(*s);
}

bool b_panels_fit(const GemmOperands& ops, const GemmSchedule& s) {
  const int64_t w = ops.panel_width;
  int64_t n = 0;
  if (!ops.b_panels || w < 1 || !loop::as_const_int(loop::simplify(ops.N), &n)) return false;
  return s.nr % w == 0 && w % s.vector_lanes == 0 && round_up(n, s.nr) <= ops.panel_columns;
}

Expr gemm_parallel_extent(const GemmOperands& ops, const GemmSchedule& s) {
  return loop::simplify(ops.batch * GemmBuilder::units_per_product(ops, s));
}

Stmt gemm_nest(const GemmOperands& ops, const GemmSchedule& s, const std::string& name_prefix) {
  check_gemm_schedule(s);
  TS_CHECK(!GemmBuilder::batched(ops) || !ops.batch_var.empty(), "gemm_nest: a batch needs its batch_var");
  TS_CHECK(s.pack_b || b_panels_fit(ops, s), "gemm schedule: gemm.pack b=0 needs B prepacked in panels that tile nr=",
           s.nr, " lanes=", s.vector_lanes, " reads whole",
           ops.b_panels ? str_cat(" (panels of ", ops.panel_width, " columns, ", ops.panel_columns, " stored)")
                        : std::string(" (B is not a prepacked weight)"));
  return GemmBuilder(ops, s, name_prefix).build();
}

}  // namespace tessel
