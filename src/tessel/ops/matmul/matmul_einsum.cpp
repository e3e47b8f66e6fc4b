// Einsum: any equation, with implicit or explicit output, ellipsis
// broadcasting and repeated labels (diagonals).
//
// The reference kernel is one loop nest over every distinct label: output
// labels outside, summed labels inside. Each operand gets a stride per label
// (the sum of its strides where a label repeats, which walks the diagonal; 0
// on a broadcast ellipsis dim), so no operand is ever transposed or copied.
#include <algorithm>
#include <cctype>

#include "tessel/ops/matmul/einsum_plan.h"
#include "tessel/ops/math_util.h"
#include "tessel/ops/registry.h"

namespace tessel {

namespace {

using namespace mathops;

int letter_label(char ch) { return std::isupper(static_cast<unsigned char>(ch)) ? ch - 'A' : 26 + (ch - 'a'); }

// One parsed term: letters, and where its ellipsis sits (-1 = none).
struct RawTerm {
  std::vector<int> letters;
  int ellipsis_at = -1;  // index into letters before which "..." appears
};

RawTerm parse_term(const Node& n, const std::string& t) {
  RawTerm r;
  for (size_t i = 0; i < t.size();) {
    const char ch = t[i];
    if (ch == '.') {
      TS_CHECK(t.compare(i, 3, "...") == 0, n.describe(), ": malformed ellipsis in einsum term '", t, "'");
      TS_CHECK(r.ellipsis_at < 0, n.describe(), ": einsum term '", t, "' has two ellipses");
      r.ellipsis_at = static_cast<int>(r.letters.size());
      i += 3;
      continue;
    }
    TS_CHECK(std::isalpha(static_cast<unsigned char>(ch)) && static_cast<unsigned char>(ch) < 128, n.describe(),
             ": invalid character '", ch, "' in einsum equation");
    r.letters.push_back(letter_label(ch));
    ++i;
  }
  return r;
}

}  // namespace

EinsumPlan plan_einsum(const Node& n, const std::vector<size_t>& ranks) {
  std::string eq;
  for (char ch : n.attr_string("equation", "")) if (ch != ' ') eq += ch;
  const size_t arrow = eq.find("->");
  const std::string lhs = eq.substr(0, arrow);
  std::vector<std::string> terms;
  for (size_t start = 0;;) {
    const size_t comma = lhs.find(',', start);
    terms.push_back(lhs.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  TS_CHECK(terms.size() == ranks.size(), n.describe(), ": einsum equation '", eq, "' has ", terms.size(),
           " operand terms but the node has ", ranks.size(), " inputs");
  EinsumPlan p;
  std::vector<RawTerm> raw;
  for (size_t i = 0; i < terms.size(); ++i) {
    raw.push_back(parse_term(n, terms[i]));
    const int64_t nl = static_cast<int64_t>(raw[i].letters.size());
    const int64_t r = static_cast<int64_t>(ranks[i]);
    if (raw[i].ellipsis_at < 0) {
      TS_CHECK(nl == r, n.describe(), ": einsum term '", terms[i], "' has ", nl, " labels but input ", i,
               " has rank ", r);
    } else {
      TS_CHECK(nl <= r, n.describe(), ": einsum term '", terms[i], "' has more labels than input ", i,
               "'s rank ", r);
      p.ellipsis_dims = std::max(p.ellipsis_dims, static_cast<int>(r - nl));
    }
  }
  // Ellipsis dims align from the right, as in numpy broadcasting.
  std::vector<int> count(kEllipsisBase, 0);
  for (size_t i = 0; i < raw.size(); ++i) {
    std::vector<int> labels;
    const int e = static_cast<int>(ranks[i]) - static_cast<int>(raw[i].letters.size());
    for (size_t k = 0; k <= raw[i].letters.size(); ++k) {
      if (static_cast<int>(k) == raw[i].ellipsis_at)
        for (int j = 0; j < e; ++j) labels.push_back(kEllipsisBase + p.ellipsis_dims - e + j);
      if (k < raw[i].letters.size()) {
        labels.push_back(raw[i].letters[k]);
        ++count[raw[i].letters[k]];
      }
    }
    p.in_labels.push_back(labels);
  }
  if (arrow == std::string::npos) {
    // Implicit output: ellipsis dims, then letters seen exactly once, in ASCII order.
    for (int j = 0; j < p.ellipsis_dims; ++j) p.out_labels.push_back(kEllipsisBase + j);
    for (int l = 0; l < kEllipsisBase; ++l)
      if (count[l] == 1) p.out_labels.push_back(l);
    return p;
  }
  const RawTerm out = parse_term(n, eq.substr(arrow + 2));
  std::vector<bool> used(kEllipsisBase, false);
  for (size_t k = 0; k <= out.letters.size(); ++k) {
    if (static_cast<int>(k) == out.ellipsis_at)
      for (int j = 0; j < p.ellipsis_dims; ++j) p.out_labels.push_back(kEllipsisBase + j);
    if (k == out.letters.size()) break;
    const int l = out.letters[k];
    TS_CHECK(count[l] > 0, n.describe(), ": einsum output label '", eq.substr(arrow + 2),
             "' uses a label that no input has");
    TS_CHECK(!used[l], n.describe(), ": einsum output repeats a label");
    used[l] = true;
    p.out_labels.push_back(l);
  }
  return p;
}

namespace {

// Size of each label (indexed by label id; -1 = unused) from concrete shapes.
std::vector<int64_t> label_sizes(const Node& n, const EinsumPlan& p, const std::vector<const Tensor*>& ins) {
  std::vector<int64_t> size(static_cast<size_t>(kEllipsisBase + p.ellipsis_dims), -1);
  for (size_t i = 0; i < ins.size(); ++i)
    for (size_t d = 0; d < p.in_labels[i].size(); ++d) {
      const int l = p.in_labels[i][d];
      const int64_t s = ins[i]->shape()[d];
      int64_t& cur = size[l];
      if (l >= kEllipsisBase) {  // broadcasting dims: 1 stretches
        if (cur == -1 || cur == 1) cur = s;
        else TS_CHECK(s == cur || s == 1, n.describe(), ": einsum ellipsis dims do not broadcast");
      } else {
        TS_CHECK(cur == -1 || cur == s, n.describe(), ": einsum label has sizes ", cur, " and ", s);
        cur = s;
      }
    }
  return size;
}

template <class T>
std::vector<T> einsum_loop(const EinsumPlan& p, const std::vector<int64_t>& size, const std::vector<const Tensor*>& ins,
                           const std::vector<std::vector<T>>& data, int64_t out_numel) {
  // Loop order: output labels, then the summed ones.
  std::vector<int> loop = p.out_labels;
  for (int l = 0; l < static_cast<int>(size.size()); ++l)
    if (size[l] >= 0 && std::find(loop.begin(), loop.end(), l) == loop.end()) loop.push_back(l);
  const size_t nl = loop.size(), nin = ins.size();
  // stride[i][k]: how far operand i moves when loop label k advances.
  std::vector<std::vector<int64_t>> stride(nin, std::vector<int64_t>(nl, 0));
  for (size_t i = 0; i < nin; ++i) {
    const std::vector<int64_t> st = strides_of(ins[i]->shape());
    for (size_t d = 0; d < p.in_labels[i].size(); ++d) {
      const size_t k = static_cast<size_t>(std::find(loop.begin(), loop.end(), p.in_labels[i][d]) - loop.begin());
      if (ins[i]->shape()[d] != 1 || size[loop[k]] == 1) stride[i][k] += st[d];
    }
  }
  std::vector<int64_t> extent(nl);
  int64_t total = 1;
  for (size_t k = 0; k < nl; ++k) total = checked_mul(total, extent[k] = size[loop[k]]);
  int64_t inner_total = 1;  // summed iterations per output element
  for (size_t k = p.out_labels.size(); k < nl; ++k) inner_total *= extent[k];

  std::vector<T> out(static_cast<size_t>(out_numel), T(0));
  if (total == 0) return out;
  std::vector<int64_t> idx(nl, 0), off(nin, 0);
  for (int64_t it = 0; it < total; ++it) {
    T prod = T(1);
    for (size_t i = 0; i < nin; ++i) prod = prod * data[i][off[i]];
    // Output labels come first, so the output index is it / inner_total.
    out[it / inner_total] += prod;
    for (size_t k = nl; k-- > 0;) {
      for (size_t i = 0; i < nin; ++i) off[i] += stride[i][k];
      if (++idx[k] < extent[k]) break;
      for (size_t i = 0; i < nin; ++i) off[i] -= stride[i][k] * extent[k];
      idx[k] = 0;
    }
  }
  return out;
}

void einsum_kernel(KernelContext& c) {
  const Node& n = c.node;
  TS_CHECK(c.num_inputs() >= 1, n.describe(), ": Einsum needs at least one input");
  std::vector<const Tensor*> ins;
  std::vector<size_t> ranks;
  for (size_t i = 0; i < c.num_inputs(); ++i) {
    ins.push_back(&c.input(i));
    ranks.push_back(ins.back()->rank());
    require_dtype(n, i, ins.back()->dtype(), kAllNumericTypes);
    TS_CHECK(ins.back()->dtype() == ins[0]->dtype(), n.describe(), ": Einsum inputs have different dtypes");
  }
  const EinsumPlan p = plan_einsum(n, ranks);
  const std::vector<int64_t> size = label_sizes(n, p, ins);
  std::vector<int64_t> out_shape;
  for (int l : p.out_labels) out_shape.push_back(size[l]);
  const int64_t out_numel = checked_numel(out_shape);
  const DType dt = ins[0]->dtype();
  if (is_float(dt)) {
    std::vector<std::vector<double>> data;
    for (const Tensor* t : ins) data.push_back(to_doubles(*t));
    c.set_output(0, tensor_from_doubles(dt, out_shape, einsum_loop(p, size, ins, data, out_numel)));
  } else {
    std::vector<std::vector<uint64_t>> data;
    for (const Tensor* t : ins) {
      std::vector<uint64_t> v(static_cast<size_t>(t->numel()));
      for (int64_t i = 0; i < t->numel(); ++i) v[i] = t->get_u64(i);
      data.push_back(std::move(v));
    }
    const std::vector<uint64_t> r = einsum_loop(p, size, ins, data, out_numel);
    Tensor out(dt, out_shape);
    for (int64_t i = 0; i < out_numel; ++i) out.set_u64(i, r[i]);
    c.set_output(0, out);
  }
}

void einsum_infer(InferContext& c) {
  const Node& n = c.node;
  const DType dt = c.num_inputs() ? c.input_dtype(0) : DType::Undefined;
  std::vector<size_t> ranks;
  bool known = true;
  for (size_t i = 0; i < c.num_inputs(); ++i) {
    if (c.input_dtype(i) != DType::Undefined) require_dtype(n, i, c.input_dtype(i), kAllNumericTypes);
    if (!c.has_shape(i)) known = false;
    else ranks.push_back(c.input_shape(i).size());
  }
  if (!known) {
    c.set_output_unknown_shape(0, dt);
    return;
  }
  const EinsumPlan p = plan_einsum(n, ranks);
  std::vector<std::optional<Dim>> size(static_cast<size_t>(kEllipsisBase + p.ellipsis_dims));
  for (size_t i = 0; i < ranks.size(); ++i) {
    const Shape& s = c.input_shape(i);
    for (size_t d = 0; d < s.size(); ++d) {
      std::optional<Dim>& cur = size[p.in_labels[i][d]];
      if (!cur) cur = s[d];
      else if (p.in_labels[i][d] >= kEllipsisBase) cur = broadcast_shapes({*cur}, {s[d]}, n)[0];
      else if (*cur != s[d])
        TS_CHECK(!cur->is_const() || !s[d].is_const(), n.describe(), ": einsum label has sizes ", cur->str(),
                 " and ", s[d].str());
    }
  }
  Shape out;
  for (int l : p.out_labels) out.push_back(*size[l]);
  c.set_output(0, dt, out);
}

}  // namespace

void register_einsum_ops(OpRegistry& r) {
  OpSchema s;
  s.name = "Einsum";
  s.min_inputs = 1;
  s.max_inputs = -1;
  s.infer = einsum_infer;
  s.kernel = einsum_kernel;
  s.since_version = 12;
  r.add(s);
}

}  // namespace tessel
