// winograd_conv (CPU target): a stride-1 3x3 convolution as Winograd's
// F(4x4, 3x3) (Lavin & Gray, "Fast Algorithms for Convolutional Neural
// Networks", 2016): each 4x4 tile of output is A^T [(G g G^T) . (B^T d B)] A
// for the 6x6 input tile d around it and the 3x3 filter g, so the products
// are 36 per tile and channel pair instead of 144, a 4x cut in the GEMM's
// multiply-adds. With the input X [N, C, H, W] and the weight W [K, C, 3, 3]:
//
//   Z = TileTransform(X, B^T, tile H, step 4, pad top)     [6, N, C, TH, W]
//   V = TileTransform(Z, B^T, tile W, step 4, pad left)    [6, 6, N, C, TH, TW]
//   M = MatMul(U [36, K, C], Reshape(V, [36, C, TH TW]))    [36, K, TH TW]   (N = 1;
//       else U [36, 1, K, C] and V [36, N, C, TH TW])
//   P = TileTransform(Reshape(M, [6, 6, N, K, TH, TW]), A^T, apply at 4)   [6, N, K, TH, 4, TW]
//   Y = TileTransform(P, A^T, apply at 3)                  [N, K, TH, 4, 4, TW]
//   y = Reshape(Transpose(Reshape(Y, [N, K, 4 TH, 4, TW]), [0, 1, 2, 4, 3]), [N, K, 4 TH, 4 TW])
//       sliced to [N, K, OH, OW], plus the bias
//
// with TH = ceil(OH / 4), TW = ceil(OW / 4), and U = G g G^T computed here,
// once, its batch index (column e2, row e1) -> e2 * 6 + e1 as V's leading
// axes come out of the two tile transforms. Every transform reads and
// writes along the image's width (the rows of NCHW): no layout change. The
// last step interleaves the tiles' columns into the output rows; it is
// movement that fuses into the consumer's kernel (the bias, a ReLU). The
// GEMM is the compiler's own (its schedule in the tuner's space like any
// MatMul's; the weight U its constant A).
//
// Error: the transforms' constants (up to 8 in A^T, 1/24 in G) cost
// precision; against the reference interpreter's convolution the relative
// error is a few 1e-6 of the output's largest magnitude per layer (the
// unit test measures it; docs/performance.md states it for the models).
//
// This NCHW form runs only when asked (--knob conv.winograd.on=1): the
// tiles' axes are the innermost and short (14 for a 56-wide image), so the
// transforms and the final interleave run at a few percent of the memory
// bound and the conversion costs more than the products it saves
// (docs/performance.md, "Winograd convolutions on NCHW"). By default the
// CPU takes the blocked form (rewrite_blocked below), vectorised along the
// channels, where 16 divides both channel counts.
// Fires for 2-D group-1 f32 convolutions with a constant 3x3 weight,
// strides and dilations 1, explicit pads of at most 2, constant shapes,
// and enough channels and tiles (winograd_pays).
#include <array>
#include <optional>

#include "tessel/passes/infer_util.h"
#include "tessel/passes/pass_manager.h"

namespace tessel {

namespace {

constexpr int64_t kM = 4;  // output tile
constexpr int64_t kA = 6;  // input tile (kM + 3 - 1)

// F(4, 3) on the points 0, 1, -1, 2, -2 and infinity.
constexpr std::array<std::array<double, 6>, 6> kBt{{{4, 0, -5, 0, 1, 0},
                                                     {0, -4, -4, 1, 1, 0},
                                                     {0, 4, -4, -1, 1, 0},
                                                     {0, -2, -1, 2, 1, 0},
                                                     {0, 2, -1, -2, 1, 0},
                                                     {0, 4, 0, -5, 0, 1}}};
constexpr std::array<std::array<double, 3>, 6> kG{{{1.0 / 4, 0, 0},
                                                    {-1.0 / 6, -1.0 / 6, -1.0 / 6},
                                                    {-1.0 / 6, 1.0 / 6, -1.0 / 6},
                                                    {1.0 / 24, 1.0 / 12, 1.0 / 6},
                                                    {1.0 / 24, -1.0 / 12, 1.0 / 6},
                                                    {0, 0, 1}}};
constexpr std::array<std::array<double, 6>, 4> kAt{{{1, 1, 1, 1, 1, 0},
                                                     {0, 1, -1, 2, -2, 0},
                                                     {0, 1, 1, 4, 4, 0},
                                                     {0, 1, -1, 8, -8, 1}}};

// Below these the transforms and the GEMM's short rows cannot pay.
constexpr int64_t kMinChannels = 16;
constexpr int64_t kMinTiles = 16;

struct Candidate {
  Node* conv = nullptr;
  std::vector<int64_t> x, w, pads;  // X [N, C, H, W], W [K, C, 3, 3], [top, left, bottom, right]
  int64_t oh = 0, ow = 0;
};

bool all_ones(const std::vector<int64_t>& v) {
  for (int64_t d : v)
    if (d != 1) return false;
  return true;
}

// Whether the transforms cost less than the products they save: enough
// channels on both sides to amortise them, and enough tiles for the GEMM's
// rows.
bool winograd_pays(const Candidate& c) {
  const int64_t tiles = c.x[0] * ((c.oh + kM - 1) / kM) * ((c.ow + kM - 1) / kM);
  return c.x[1] >= kMinChannels && c.w[0] >= kMinChannels && tiles >= kMinTiles;
}

std::optional<Candidate> candidate(Node& n) {
  if (!n.domain.empty() || n.op != "Conv" || n.outputs.size() != 1 || !n.outputs[0]) return std::nullopt;
  Candidate c;
  c.conv = &n;
  const Value *x = n.input(0), *w = n.input(1);
  if (!static_dims_of(x, &c.x) || !static_dims_of(w, &c.w) || c.x.size() != 4 || c.w.size() != 4) return std::nullopt;
  if (x->type.dtype != DType::F32 || !w->is_constant() || w->constant->dtype() != DType::F32) return std::nullopt;
  if (c.w[2] != 3 || c.w[3] != 3 || c.w[1] != c.x[1] || n.attr_int("group", 1) != 1) return std::nullopt;
  if (n.attr_string("auto_pad", "NOTSET") != "NOTSET") return std::nullopt;
  if (!all_ones(n.attr_ints("strides", {1, 1})) || !all_ones(n.attr_ints("dilations", {1, 1}))) return std::nullopt;
  if (n.inputs.size() > 2 && n.input(2) && !(n.input(2)->type.has_shape() && n.input(2)->type.shape->size() == 1))
    return std::nullopt;
  c.pads = n.attr_ints("pads", {0, 0, 0, 0});
  if (c.pads.size() != 4) return std::nullopt;
  for (int64_t p : c.pads)
    if (p < 0 || p > 2) return std::nullopt;
  c.oh = c.x[2] + c.pads[0] + c.pads[2] - 2;
  c.ow = c.x[3] + c.pads[1] + c.pads[3] - 2;
  if (c.oh < 1 || c.ow < 1 || !winograd_pays(c)) return std::nullopt;
  return c;
}

// U [36, K, C]: U[e2 * 6 + e1, k, c] = (G g G^T)[e1, e2] for g = W[k, c].
Tensor transformed_weight(const Tensor& w) {
  const int64_t k_count = w.dim(0), c_count = w.dim(1);
  Tensor u(DType::F32, {kA * kA, k_count, c_count});
  for (int64_t k = 0; k < k_count; ++k)
    for (int64_t c = 0; c < c_count; ++c) {
      double g[3][3], gg[6][3];
      for (int64_t i = 0; i < 9; ++i) g[i / 3][i % 3] = w.get_f64((k * c_count + c) * 9 + i);
      for (int64_t r = 0; r < kA; ++r)
        for (int64_t j = 0; j < 3; ++j)
          gg[r][j] = kG[r][0] * g[0][j] + kG[r][1] * g[1][j] + kG[r][2] * g[2][j];
      for (int64_t e1 = 0; e1 < kA; ++e1)
        for (int64_t e2 = 0; e2 < kA; ++e2) {
          const double v = gg[e1][0] * kG[e2][0] + gg[e1][1] * kG[e2][1] + gg[e1][2] * kG[e2][2];
          u.set_f64(((e2 * kA + e1) * k_count + k) * c_count + c, v);
        }
    }
  return u;
}

template <size_t R, size_t S>
Tensor matrix(const std::array<std::array<double, S>, R>& m) {
  std::vector<float> v;
  for (const auto& row : m)
    for (double x : row) v.push_back(static_cast<float>(x));
  return Tensor::from_f32({static_cast<int64_t>(R), static_cast<int64_t>(S)}, v);
}

// Inserts `op` before `at` with the given inputs and output dims.
Value* emit(Graph& g, Node* at, const std::string& op, std::vector<Value*> in, const std::vector<int64_t>& out,
            std::map<std::string, Attribute> attrs = {}, const std::string& domain = "") {
  Node* n = g.insert_node_before(at, op, std::move(in), 1, std::move(attrs));
  n->domain = domain;
  n->outputs[0]->type = Type::tensor(DType::F32, shape_of(out));
  return n->outputs[0];
}

// The nodes of one convolution's rewrite, inserted before it.
struct Rewriter {
  Graph& g;
  const Candidate& c;
  Node* n = c.conv;
  const std::string base = n->outputs[0]->name;

  Value* i64s(const std::vector<int64_t>& v) {
    return g.add_initializer(g.fresh_name(base + "_wino"), Tensor::from_i64(v));
  }
  Value* constant(const char* what, Tensor t) { return g.add_initializer(g.fresh_name(base + what), std::move(t)); }
  Value* reshape(Value* v, const std::vector<int64_t>& to) { return emit(g, n, "Reshape", {v, i64s(to)}, to); }
  Value* transpose(Value* v, const std::vector<int64_t>& perm, const std::vector<int64_t>& out) {
    return emit(g, n, "Transpose", {v}, out, {{"perm", Attribute::of_ints(perm)}});
  }
  Value* tile(Value* v, Value* coef, int64_t axis, int64_t pad, int64_t count, const std::vector<int64_t>& out) {
    return emit(g, n, "TileTransform", {v, coef}, out,
                {{"mode", Attribute::of_string("tile")},
                 {"axis", Attribute::of_int(axis)},
                 {"step", Attribute::of_int(kM)},
                 {"pad", Attribute::of_int(pad)},
                 {"tiles", Attribute::of_int(count)}},
                "tessel");
  }
  Value* apply(Value* v, Value* coef, int64_t axis, const std::vector<int64_t>& out) {
    return emit(g, n, "TileTransform", {v, coef}, out,
                {{"mode", Attribute::of_string("apply")}, {"axis", Attribute::of_int(axis)}}, "tessel");
  }

  // The tiles' output y [N, K, 4 TH, 4 TW] sliced to the convolution's
  // output, plus the bias; the last node takes over the convolution's
  // output value, so that every use and a graph output's name stay as they
  // are.
  void finish(Value* y) {
    const int64_t nb = c.x[0], k = c.w[0];
    if (y->type.shape->at(2).value() != c.oh || y->type.shape->at(3).value() != c.ow)
      y = emit(g, n, "Slice", {y, i64s({0, 0}), i64s({c.oh, c.ow}), i64s({2, 3})}, {nb, k, c.oh, c.ow});
    if (n->inputs.size() > 2 && n->input(2))
      y = emit(g, n, "Add", {y, reshape(n->input(2), {k, 1, 1})}, {nb, k, c.oh, c.ow});
    Node* last = y->producer;
    std::swap(last->outputs[0], n->outputs[0]);
    last->outputs[0]->producer = last;
    n->outputs[0]->producer = n;
    g.remove_node(n);
  }
};

void rewrite(Graph& g, const Candidate& c) {
  Rewriter r{g, c};
  const int64_t nb = c.x[0], ch = c.x[1], w = c.x[3], k = c.w[0];
  const int64_t th = (c.oh + kM - 1) / kM, tw = (c.ow + kM - 1) / kM;
  Value* bt = r.constant("_wino_bt", matrix(kBt));
  Value* at = r.constant("_wino_at", matrix(kAt));
  Tensor ut = transformed_weight(*c.conv->input(1)->constant);
  if (nb > 1) ut = ut.reshaped({kA * kA, 1, k, ch});
  Value* u = r.constant("_wino_u", std::move(ut));

  Value* z = r.tile(c.conv->input(0), bt, 2, c.pads[0], th, {kA, nb, ch, th, w});
  Value* v = r.tile(z, bt, 4, c.pads[1], tw, {kA, kA, nb, ch, th, tw});
  const std::vector<int64_t> b_dims = nb > 1 ? std::vector<int64_t>{kA * kA, nb, ch, th * tw}
                                             : std::vector<int64_t>{kA * kA, ch, th * tw};
  std::vector<int64_t> m_dims = b_dims;
  m_dims[m_dims.size() - 2] = k;
  Value* mm = emit(g, c.conv, "MatMul", {u, r.reshape(v, b_dims)}, m_dims);
  Value* p = r.apply(r.reshape(mm, {kA, kA, nb, k, th, tw}), at, 4, {kA, nb, k, th, kM, tw});
  Value* y = r.apply(p, at, 3, {nb, k, th, kM, kM, tw});
  // [N, K, TH, 4 (a), 4 (b), TW] -> output rows 4 th + a, columns 4 tw + b.
  Value* yt = r.transpose(r.reshape(y, {nb, k, th * kM, kM, tw}), {0, 1, 2, 4, 3}, {nb, k, th * kM, tw, kM});
  r.finish(r.reshape(yt, {nb, k, th * kM, tw * kM}));
}

// U2 [36, C, K]: U transposed per batch, the B of a product whose rows are
// the tiles (prepack_weights packs it into panels).
Tensor transposed_batches(const Tensor& u) {
  const int64_t batch = u.dim(0), rows = u.dim(1), cols = u.dim(2);
  Tensor t(DType::F32, {batch, cols, rows});
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) t.set_f64((b * cols + c) * rows + r, u.get_f64((b * rows + r) * cols + c));
  return t;
}

// With the blocked layout (C and K multiples of 16): every transform runs
// along the 16 channels of a block, the innermost axis, and the GEMM takes
// the tiles as its rows, so that a row of 16 output channels is one store.
//
//   xb = ToBlocked(X)                                      [N, C/16, H, W, 16]
//   Z  = TileTransform(xb, B^T, tile H)                    [6, N, C/16, TH, W, 16]
//   V  = TileTransform(Transpose(Z, [0,1,3,4,2,5]), B^T, tile W)   [6, 6, N, TH, TW, C/16, 16]
//   M  = MatMul(Reshape(V, [36, N TH TW, C]), U2 [36, C, K])
//   P  = TileTransform(Reshape(M, [6, 6, N, TH, TW, K]), A^T, apply at 4)   [6, N, TH, TW, 4, K]
//   Y  = TileTransform(P, A^T, apply at 2)                 [N, TH, 4, TW, 4, K]
//   y  = Transpose(Reshape(Y, [N, 4 TH, 4 TW, K]), [0, 3, 1, 2]), sliced, plus the bias
//
// The Transpose of Z is an index expression of the second transform's
// kernel (Isolated takes movement producers), which so writes V with each
// tile's channels contiguous: the GEMM's A rows are read in place. The
// last Transpose is one of the consumers' kernels (a ToBlocked root reads
// 16 consecutive channels of Y). blocked_layout stores X blocked once for
// every reader (the ToBlocked here is its block).
void rewrite_blocked(Graph& g, const Candidate& c) {
  Rewriter r{g, c};
  const int64_t nb = c.x[0], ch = c.x[1], h = c.x[2], w = c.x[3], k = c.w[0];
  const int64_t cb = ch / 16, th = (c.oh + kM - 1) / kM, tw = (c.ow + kM - 1) / kM;
  Value* bt = r.constant("_wino_bt", matrix(kBt));
  Value* at = r.constant("_wino_at", matrix(kAt));
  Value* u = r.constant("_wino_u", transposed_batches(transformed_weight(*c.conv->input(1)->constant)));

  Value* xb = emit(g, c.conv, "ToBlocked", {c.conv->input(0)}, {nb, cb, h, w, 16},
                   {{"block", Attribute::of_int(16)}}, "tessel");
  Value* z = r.tile(xb, bt, 2, c.pads[0], th, {kA, nb, cb, th, w, 16});
  Value* zt = r.transpose(z, {0, 1, 3, 4, 2, 5}, {kA, nb, th, w, cb, 16});
  Value* v = r.tile(zt, bt, 3, c.pads[1], tw, {kA, kA, nb, th, tw, cb, 16});
  Value* mm = emit(g, c.conv, "MatMul", {r.reshape(v, {kA * kA, nb * th * tw, ch}), u}, {kA * kA, nb * th * tw, k});
  Value* p = r.apply(r.reshape(mm, {kA, kA, nb, th, tw, k}), at, 4, {kA, nb, th, tw, kM, k});
  Value* y = r.apply(p, at, 2, {nb, th, kM, tw, kM, k});
  r.finish(r.transpose(r.reshape(y, {nb, th * kM, tw * kM, k}), {0, 3, 1, 2}, {nb, k, th * kM, tw * kM}));
}

}  // namespace

bool winograd_convs(Model& m, bool blocked, bool nchw) {
  Graph& g = *m.graph;
  std::vector<Candidate> found;  // collected first: rewriting inserts nodes
  const auto blocks = [&](const Candidate& c) { return blocked && c.x[1] % 16 == 0 && c.w[0] % 16 == 0; };
  for (auto& n : g.nodes())
    if (std::optional<Candidate> c = candidate(*n); c && (nchw || blocks(*c))) found.push_back(*c);
  for (const Candidate& c : found) {
    if (blocks(c))
      rewrite_blocked(g, c);
    else
      rewrite(g, c);
  }
  if (!found.empty()) eliminate_dead_code(m);
  return !found.empty();
}

}  // namespace tessel
