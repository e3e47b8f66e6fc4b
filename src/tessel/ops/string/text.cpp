// TfIdfVectorizer: counts (skip-)n-grams of integer or string tokens that
// appear in a pool, and weights them (TF, IDF or TFIDF).
//
// Counting rule (as in the ONNX reference): for every skip distance
// d = 1 .. max_skip_count+1 and every start position, the n-gram made of the
// tokens at start, start+d, ..., start+(n-1)d is counted for every n in
// [min_gram_length, max_gram_length] that is in the pool; unigrams are only
// counted for d = 1 since skipping does not change them.
#include <map>

#include "tessel/ops/common.h"
#include "tessel/ops/control/control_util.h"
#include "tessel/ops/registry.h"

namespace tessel {

void register_text_ops(OpRegistry& r);

namespace {

enum class TfIdfMode { Tf, Idf, TfIdf };

struct TfIdfConfig {
  TfIdfMode mode = TfIdfMode::Tf;
  int64_t min_n = 1, max_n = 1, max_skip = 0, out_size = 0;
  bool strings = false;
  // n-gram (as token keys) -> output index.
  std::map<std::vector<std::string>, int64_t> str_grams;
  std::map<std::vector<int64_t>, int64_t> int_grams;
  std::vector<float> weights;
};

TfIdfConfig parse_tfidf(const Node& n) {
  TfIdfConfig c;
  const std::string mode = n.attr_string("mode", "");
  if (mode == "TF") c.mode = TfIdfMode::Tf;
  else if (mode == "IDF") c.mode = TfIdfMode::Idf;
  else if (mode == "TFIDF") c.mode = TfIdfMode::TfIdf;
  else fail(n.describe(), ": mode must be TF, IDF or TFIDF, got '", mode, "'");
  c.min_n = n.attr_int("min_gram_length", 0);
  c.max_n = n.attr_int("max_gram_length", 0);
  c.max_skip = n.attr_int("max_skip_count", 0);
  TS_CHECK(c.min_n >= 1 && c.min_n <= c.max_n, n.describe(), ": need 1 <= min_gram_length <= max_gram_length, got ",
           c.min_n, " and ", c.max_n);
  TS_CHECK(c.max_skip >= 0, n.describe(), ": max_skip_count must not be negative");
  const std::vector<int64_t> counts = n.attr_ints("ngram_counts", {});
  const std::vector<int64_t> indexes = n.attr_ints("ngram_indexes", {});
  const std::vector<int64_t> pool_i = n.attr_ints("pool_int64s", {});
  const std::vector<std::string> pool_s = n.attr_strings("pool_strings", {});
  TS_CHECK(pool_i.empty() || pool_s.empty(), n.describe(), ": only one of pool_int64s and pool_strings may be set");
  c.strings = !pool_s.empty();
  const int64_t total = static_cast<int64_t>(c.strings ? pool_s.size() : pool_i.size());
  c.weights = n.attr_floats("weights", {});
  for (int64_t i : indexes) {
    TS_CHECK(i >= 0, n.describe(), ": ngram_indexes must not be negative");
    c.out_size = std::max(c.out_size, i + 1);
  }
  TS_CHECK(c.weights.empty() || static_cast<int64_t>(c.weights.size()) >= c.out_size, n.describe(), ": ",
           c.weights.size(), " weights for ", c.out_size, " outputs");
  // Pool segment k holds the n-grams of length k+1, from counts[k] to the next start.
  int64_t gram_id = 0;
  for (size_t k = 0; k < counts.size(); ++k) {
    const int64_t len = static_cast<int64_t>(k) + 1;
    const int64_t begin = counts[k];
    const int64_t end = k + 1 < counts.size() ? counts[k + 1] : total;
    TS_CHECK(begin >= 0 && begin <= end && end <= total, n.describe(), ": bad ngram_counts");
    for (int64_t at = begin; at + len <= end; at += len, ++gram_id) {
      if (len < c.min_n || len > c.max_n) continue;
      TS_CHECK(gram_id < static_cast<int64_t>(indexes.size()), n.describe(), ": ngram_indexes has ",
               indexes.size(), " entries, the pool more n-grams");
      const int64_t out = indexes[static_cast<size_t>(gram_id)];
      if (c.strings) {
        c.str_grams[std::vector<std::string>(pool_s.begin() + at, pool_s.begin() + at + len)] = out;
      } else {
        c.int_grams[std::vector<int64_t>(pool_i.begin() + at, pool_i.begin() + at + len)] = out;
      }
    }
  }
  return c;
}

bool is_token_type(DType t) { return t == DType::String || t == DType::I32 || t == DType::I64; }

void check_tfidf_input(const Node& n, const TfIdfConfig& c, DType dt) {
  check_dtype(n, 0, dt, is_token_type, "string, int32 or int64");
  TS_CHECK(c.strings == (dt == DType::String), n.describe(), ": a ", dtype_name(dt), " input needs ",
           c.strings ? "pool_int64s" : "pool_strings");
}

void infer_tfidf(InferContext& ctx) {
  const TfIdfConfig c = parse_tfidf(ctx.node);
  check_tfidf_input(ctx.node, c, ctx.input_dtype(0));
  if (!ctx.has_shape(0)) {
    ctx.set_output_unknown_shape(0, DType::F32);
    return;
  }
  const Shape& s = ctx.input_shape(0);
  TS_CHECK(s.size() == 1 || s.size() == 2, ctx.node.describe(), ": input must be 1-D or 2-D, got ", shape_str(s));
  ctx.set_output(0, DType::F32, s.size() == 1 ? Shape{c.out_size} : Shape{s[0], c.out_size});
}

template <class Key, class Get>
void count_row(const std::map<std::vector<Key>, int64_t>& grams, const TfIdfConfig& c, int64_t len, Get get,
               std::vector<int64_t>& counts) {
  std::vector<Key> key;
  for (int64_t d = 1; d <= c.max_skip + 1; ++d) {
    for (int64_t start = 0; start < len; ++start) {
      for (int64_t n = std::max<int64_t>(c.min_n, d > 1 ? 2 : 1); n <= c.max_n; ++n) {
        if (start + (n - 1) * d >= len) break;
        key.clear();
        for (int64_t k = 0; k < n; ++k) key.push_back(get(start + k * d));
        auto it = grams.find(key);
        if (it != grams.end()) ++counts[static_cast<size_t>(it->second)];
      }
    }
  }
}

void kernel_tfidf(KernelContext& ctx) {
  const Node& n = ctx.node;
  const TfIdfConfig c = parse_tfidf(n);
  const Tensor& x = ctx.input(0);
  check_tfidf_input(n, c, x.dtype());
  TS_CHECK(x.rank() == 1 || x.rank() == 2, n.describe(), ": input must be 1-D or 2-D, got ", dims_str(x.shape()));
  const int64_t rows = x.rank() == 1 ? 1 : x.dim(0);
  const int64_t len = x.rank() == 1 ? x.dim(0) : x.dim(1);
  Tensor y(DType::F32, x.rank() == 1 ? std::vector<int64_t>{c.out_size} : std::vector<int64_t>{rows, c.out_size});
  float* yd = y.mutable_data<float>();
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<int64_t> counts(static_cast<size_t>(c.out_size), 0);
    const int64_t base = r * len;
    if (c.strings) {
      count_row(c.str_grams, c, len, [&](int64_t i) { return x.strings()[static_cast<size_t>(base + i)]; }, counts);
    } else {
      count_row(c.int_grams, c, len, [&](int64_t i) { return x.get_i64(base + i); }, counts);
    }
    for (int64_t o = 0; o < c.out_size; ++o) {
      const double f = static_cast<double>(counts[static_cast<size_t>(o)]);
      const double w = c.weights.empty() ? 1.0 : c.weights[static_cast<size_t>(o)];
      double v = f;
      switch (c.mode) {
        case TfIdfMode::Tf: v = f; break;
        case TfIdfMode::Idf: v = f > 0 ? w : 0; break;
        case TfIdfMode::TfIdf: v = f * w; break;
      }
      yd[r * c.out_size + o] = static_cast<float>(v);
    }
  }
  ctx.set_output(0, y);
}

}  // namespace

void register_text_ops(OpRegistry& r) {
  r.add(OpSchema{"TfIdfVectorizer", "", 1, 1, 1, 1, infer_tfidf, kernel_tfidf, nullptr, 9});
}

}  // namespace tessel
