// String operators: StringConcat, StringSplit, StringNormalizer,
// RegexFullMatch.
//
// Strings are UTF-8 byte strings. Limits, by design of a small reference:
// - case changes (StringNormalizer) and whitespace (StringSplit without a
//   delimiter) only know ASCII; other bytes pass through unchanged, and
//   accents are not stripped; the `locale` attribute is ignored.
// - RegexFullMatch runs std::regex (ECMAScript) on bytes after translating
//   the RE2 constructs it can express: a leading (?i), (?P<name>...) and
//   (?<name>...) groups, \A, \z, \Q...\E. Constructs RE2 rejects
//   (lookaround, backreferences) are refused. A '.' or class matches one
//   byte, not one code point; very long inputs may exhaust std::regex's
//   recursion and are reported as an Error.
#include <algorithm>
#include <regex>

#include "tessel/ops/common.h"
#include "tessel/ops/control/control_util.h"
#include "tessel/ops/registry.h"

namespace tessel {

void register_string_ops(OpRegistry& r);

namespace {

bool is_str(DType t) { return t == DType::String; }

// ---- StringConcat ----------------------------------------------------------------

void infer_string_concat(InferContext& ctx) {
  for (size_t i = 0; i < 2; ++i) check_dtype(ctx.node, i, ctx.input_dtype(i), is_str, "string");
  if (ctx.has_shape(0) && ctx.has_shape(1))
    ctx.set_output(0, DType::String, broadcast_shapes(ctx.input_shape(0), ctx.input_shape(1), ctx.node));
  else
    ctx.set_output_unknown_shape(0, DType::String);
}

void kernel_string_concat(KernelContext& ctx) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  check_dtype(ctx.node, 0, a.dtype(), is_str, "string");
  check_dtype(ctx.node, 1, b.dtype(), is_str, "string");
  const std::vector<int64_t> shape = broadcast_dims(a.shape(), b.shape(), ctx.node);
  Tensor out(DType::String, shape);
  const BroadcastIndexer ia(a.shape(), shape), ib(b.shape(), shape);
  auto& o = out.mutable_strings();
  for (int64_t i = 0; i < out.numel(); ++i)
    o[static_cast<size_t>(i)] = a.strings()[static_cast<size_t>(ia(i))] + b.strings()[static_cast<size_t>(ib(i))];
  ctx.set_output(0, out);
}

// ---- StringSplit -----------------------------------------------------------------

bool is_ascii_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r' || (c >= '\x1c' && c <= '\x1f');
}

// Python's str.split(sep, maxsplit): with an empty separator, runs of
// whitespace separate and leading/trailing whitespace is dropped (the
// unsplit remainder keeps its trailing whitespace); otherwise every
// separator delimits, empty parts included. maxsplit < 0 means no limit.
std::vector<std::string> split_string(const std::string& s, const std::string& sep, int64_t maxsplit) {
  std::vector<std::string> parts;
  if (sep.empty()) {
    size_t i = 0;
    while (true) {
      while (i < s.size() && is_ascii_space(s[i])) ++i;
      if (i >= s.size()) break;
      if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
        parts.push_back(s.substr(i));
        break;
      }
      size_t j = i;
      while (j < s.size() && !is_ascii_space(s[j])) ++j;
      parts.push_back(s.substr(i, j - i));
      i = j;
    }
    return parts;
  }
  size_t start = 0;
  while (true) {
    const size_t at = s.find(sep, start);
    if (at == std::string::npos || (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit)) {
      parts.push_back(s.substr(start));
      break;
    }
    parts.push_back(s.substr(start, at - start));
    start = at + sep.size();
  }
  return parts;
}

void infer_string_split(InferContext& ctx) {
  check_dtype(ctx.node, 0, ctx.input_dtype(0), is_str, "string");
  if (!ctx.has_shape(0)) {
    ctx.set_output_unknown_shape(0, DType::String);
    if (ctx.out_types.size() > 1) ctx.set_output_unknown_shape(1, DType::I64);
    return;
  }
  Shape y = ctx.input_shape(0);
  y.push_back(ctl::fresh_dim(ctx.node, 0, "parts"));
  ctx.set_output(0, DType::String, y);
  if (ctx.out_types.size() > 1) ctx.set_output(1, DType::I64, ctx.input_shape(0));
}

void kernel_string_split(KernelContext& ctx) {
  const Node& n = ctx.node;
  const Tensor& x = ctx.input(0);
  check_dtype(n, 0, x.dtype(), is_str, "string");
  const std::string sep = n.attr_string("delimiter", "");
  const int64_t maxsplit = n.has_attr("maxsplit") ? n.attr_int("maxsplit", -1) : -1;
  std::vector<std::vector<std::string>> parts;
  size_t width = 0;
  for (const std::string& s : x.strings()) {
    parts.push_back(split_string(s, sep, maxsplit));
    width = std::max(width, parts.back().size());
  }
  std::vector<int64_t> yshape = x.shape();
  yshape.push_back(static_cast<int64_t>(width));
  Tensor y(DType::String, yshape);
  Tensor z(DType::I64, x.shape());
  auto& ys = y.mutable_strings();
  for (size_t i = 0; i < parts.size(); ++i) {
    for (size_t k = 0; k < parts[i].size(); ++k) ys[i * width + k] = parts[i][k];
    z.set_i64(static_cast<int64_t>(i), static_cast<int64_t>(parts[i].size()));
  }
  ctx.set_output(0, y);
  if (ctx.num_outputs() > 1) ctx.set_output(1, z);
}

// ---- StringNormalizer ------------------------------------------------------------

std::string ascii_case(std::string s, bool upper) {
  for (char& c : s) {
    if (upper && c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
    if (!upper && c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return s;
}

enum class CaseAction { None, Lower, Upper };

CaseAction case_action(const Node& n) {
  const std::string a = n.attr_string("case_change_action", "NONE");
  if (a == "NONE") return CaseAction::None;
  if (a == "LOWER") return CaseAction::Lower;
  if (a == "UPPER") return CaseAction::Upper;
  fail(n.describe(), ": case_change_action must be NONE, LOWER or UPPER, got '", a, "'");
}

void check_normalizer_rank(const Node& n, size_t rank, int64_t first_dim) {
  TS_CHECK(rank == 1 || (rank == 2 && first_dim == 1), n.describe(), ": input must have shape [C] or [1, C]");
}

void infer_string_normalizer(InferContext& ctx) {
  check_dtype(ctx.node, 0, ctx.input_dtype(0), is_str, "string");
  case_action(ctx.node);
  if (!ctx.has_shape(0)) {
    ctx.set_output_unknown_shape(0, DType::String);
    return;
  }
  const Shape& s = ctx.input_shape(0);
  const bool two_d = s.size() == 2;
  check_normalizer_rank(ctx.node, s.size(), two_d && s[0].is_const() ? s[0].value() : 1);
  // How many elements survive the stop words is only known at run time.
  const Dim kept = ctx.node.attr_strings("stopwords", {}).empty() ? s.back() : ctl::fresh_dim(ctx.node, 0, "kept");
  ctx.set_output(0, DType::String, two_d ? Shape{1, kept} : Shape{kept});
}

void kernel_string_normalizer(KernelContext& ctx) {
  const Node& n = ctx.node;
  const Tensor& x = ctx.input(0);
  check_dtype(n, 0, x.dtype(), is_str, "string");
  check_normalizer_rank(n, x.rank(), x.rank() == 2 ? x.dim(0) : 1);
  const CaseAction action = case_action(n);
  const bool sensitive = n.attr_int("is_case_sensitive", 0) != 0;
  std::vector<std::string> stops = n.attr_strings("stopwords", {});
  if (!sensitive)
    for (auto& s : stops) s = ascii_case(s, false);
  std::vector<std::string> kept;
  for (const std::string& s : x.strings()) {
    const std::string key = sensitive ? s : ascii_case(s, false);
    if (std::find(stops.begin(), stops.end(), key) != stops.end()) continue;
    switch (action) {
      case CaseAction::None: kept.push_back(s); break;
      case CaseAction::Lower: kept.push_back(ascii_case(s, false)); break;
      case CaseAction::Upper: kept.push_back(ascii_case(s, true)); break;
    }
  }
  // Everything removed: one empty string, keeping the input's rank.
  if (kept.empty()) kept.push_back("");
  const int64_t c = static_cast<int64_t>(kept.size());
  Tensor y(DType::String, x.rank() == 2 ? std::vector<int64_t>{1, c} : std::vector<int64_t>{c});
  y.mutable_strings() = std::move(kept);
  ctx.set_output(0, y);
}

// ---- RegexFullMatch --------------------------------------------------------------

// Translates an RE2 pattern into ECMAScript; sets *icase for a leading (?i).
std::string re2_to_ecmascript(const std::string& p, bool* icase, const Node& n) {
  std::string out;
  size_t i = 0;
  if (p.compare(0, 4, "(?i)") == 0) {
    *icase = true;
    i = 4;
  }
  bool in_class = false;
  while (i < p.size()) {
    const char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      const char e = p[i + 1];
      if (!in_class && e == 'A') { out += '^'; i += 2; continue; }
      if (!in_class && e == 'z') { out += '$'; i += 2; continue; }
      if (e == 'Q') {
        // Literal text up to \E.
        size_t end = p.find("\\E", i + 2);
        const std::string lit = p.substr(i + 2, end == std::string::npos ? std::string::npos : end - i - 2);
        for (char l : lit) {
          if (std::string("\\^$.|?*+()[]{}/-").find(l) != std::string::npos) out += '\\';
          out += l;
        }
        i = end == std::string::npos ? p.size() : end + 2;
        continue;
      }
      TS_CHECK(in_class || !(e >= '1' && e <= '9'), n.describe(), ": backreferences are not RE2 syntax");
      out += c;
      out += e;
      i += 2;
      continue;
    }
    if (in_class) {
      if (c == ']') in_class = false;
      out += c;
      ++i;
      continue;
    }
    if (c == '[') {
      in_class = true;
      out += c;
      ++i;
      // A ']' right after '[' or '[^' is a literal.
      if (i < p.size() && p[i] == '^') out += p[i++];
      if (i < p.size() && p[i] == ']') { out += "\\]"; ++i; }
      continue;
    }
    if (c == '(' && p.compare(i, 3, "(?P") == 0 && i + 3 < p.size() && p[i + 3] == '<') {
      const size_t close = p.find('>', i);
      TS_CHECK(close != std::string::npos, n.describe(), ": unterminated group name in pattern");
      out += '(';
      i = close + 1;
      continue;
    }
    if (c == '(' && p.compare(i, 2, "(?") == 0 && i + 2 < p.size()) {
      const char k = p[i + 2];
      TS_CHECK(k != '=' && k != '!', n.describe(), ": lookahead is not RE2 syntax");
      if (k == '<') {
        TS_CHECK(i + 3 < p.size() && p[i + 3] != '=' && p[i + 3] != '!', n.describe(),
                 ": lookbehind is not RE2 syntax");
        const size_t close = p.find('>', i);
        TS_CHECK(close != std::string::npos, n.describe(), ": unterminated group name in pattern");
        out += '(';
        i = close + 1;
        continue;
      }
      TS_CHECK(k == ':', n.describe(), ": inline flags other than a leading (?i) are not supported");
    }
    out += c;
    ++i;
  }
  return out;
}

std::regex compile_pattern(const Node& n) {
  TS_CHECK(n.has_attr("pattern"), n.describe(), ": attribute 'pattern' is required");
  bool icase = false;
  const std::string ecma = re2_to_ecmascript(n.attr_string("pattern", ""), &icase, n);
  try {
    auto flags = std::regex::ECMAScript;
    if (icase) flags |= std::regex::icase;
    return std::regex(ecma, flags);
  } catch (const std::regex_error& e) {
    fail(n.describe(), ": invalid pattern '", n.attr_string("pattern", ""), "': ", e.what());
  }
}

void infer_regex_full_match(InferContext& ctx) {
  check_dtype(ctx.node, 0, ctx.input_dtype(0), is_str, "string");
  compile_pattern(ctx.node);
  if (ctx.has_shape(0)) ctx.set_output(0, DType::Bool, ctx.input_shape(0));
  else ctx.set_output_unknown_shape(0, DType::Bool);
}

void kernel_regex_full_match(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  check_dtype(ctx.node, 0, x.dtype(), is_str, "string");
  const std::regex re = compile_pattern(ctx.node);
  Tensor y(DType::Bool, x.shape());
  for (int64_t i = 0; i < x.numel(); ++i) {
    bool m = false;
    try {
      m = std::regex_match(x.strings()[static_cast<size_t>(i)], re);
    } catch (const std::regex_error& e) {
      fail(ctx.node.describe(), ": matching element ", i, " failed: ", e.what());
    }
    y.set_i64(i, m ? 1 : 0);
  }
  ctx.set_output(0, y);
}

}  // namespace

void register_string_ops(OpRegistry& r) {
  r.add(OpSchema{"StringConcat", "", 2, 2, 1, 1, infer_string_concat, kernel_string_concat, nullptr, 20});
  r.add(OpSchema{"StringSplit", "", 1, 1, 1, 2, infer_string_split, kernel_string_split, nullptr, 20});
  r.add(OpSchema{"StringNormalizer", "", 1, 1, 1, 1, infer_string_normalizer, kernel_string_normalizer, nullptr,
                 10});
  r.add(OpSchema{"RegexFullMatch", "", 1, 1, 1, 1, infer_regex_full_match, kernel_regex_full_match, nullptr, 20});
}

}  // namespace tessel
