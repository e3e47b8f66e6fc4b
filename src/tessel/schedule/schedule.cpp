#include "tessel/schedule/schedule.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <set>
#include <sstream>

#include "tessel/support/error.h"
#include "tessel/support/strings.h"

namespace tessel {

// ---- Primitive / Schedule accessors -------------------------------------------

std::optional<std::string> Primitive::attr(std::string_view key) const {
  for (const auto& [k, v] : attrs)
    if (k == key) return v;
  return std::nullopt;
}

namespace {

bool parse_int(std::string_view s, int64_t* out) {
  if (s.empty()) return false;
  const char* end = s.data() + s.size();
  auto [p, ec] = std::from_chars(s.data(), end, *out);
  return ec == std::errc() && p == end;
}

}  // namespace

int64_t Primitive::int_attr(std::string_view key, int64_t fallback) const {
  const std::optional<std::string> v = attr(key);
  if (!v) return fallback;
  int64_t out = 0;
  TS_CHECK(parse_int(*v, &out), "schedule: ", name, " ", key, "=", *v, " is not an integer");
  return out;
}

void Primitive::set(const std::string& key, const std::string& value) {
  for (auto& [k, v] : attrs)
    if (k == key) {
      v = value;
      return;
    }
  attrs.emplace_back(key, value);
}

void Primitive::set(const std::string& key, int64_t value) { set(key, std::to_string(value)); }

const Primitive* Schedule::find(std::string_view name) const {
  for (const Primitive& p : prims)
    if (p.name == name) return &p;
  return nullptr;
}

Primitive* Schedule::find(std::string_view name) {
  for (Primitive& p : prims)
    if (p.name == name) return &p;
  return nullptr;
}

Primitive& Schedule::get(const std::string& name) {
  if (Primitive* p = find(name)) return *p;
  prims.push_back(Primitive{name, {}, {}});
  return prims.back();
}

// ---- what each primitive takes ------------------------------------------------

namespace {

// A key's values: integers in [lo, hi] (optionally powers of two, or only
// those listed in `only`), one of a set of words, or a fresh loop name.
struct KeySpec {
  enum Type { Int, Word, Name } type = Int;
  int64_t lo = 0, hi = 0;
  bool pow2 = false;
  std::vector<int64_t> only;  // non-empty: the only integers allowed
  std::vector<std::string> words;
  bool required = false;
};

struct PrimSpec {
  size_t min_args = 0, max_args = 0;  // positional loop names
  std::map<std::string, KeySpec> keys;
  std::set<std::string> kinds;        // empty: any kind
};

KeySpec int_key(int64_t lo, int64_t hi, bool required = false, bool pow2 = false) {
  KeySpec k;
  k.type = KeySpec::Int;
  k.lo = lo;
  k.hi = hi;
  k.pow2 = pow2;
  k.required = required;
  return k;
}
KeySpec word_key(std::vector<std::string> words, bool required = false) {
  KeySpec k;
  k.type = KeySpec::Word;
  k.words = std::move(words);
  k.required = required;
  return k;
}
KeySpec name_key(bool required = true) {
  KeySpec k;
  k.type = KeySpec::Name;
  k.required = required;
  return k;
}
KeySpec flag() { return int_key(0, 1); }
std::string join_ints(const std::vector<int64_t>& values, std::string_view sep) {
  std::vector<std::string> parts;
  for (int64_t v : values) parts.push_back(std::to_string(v));
  return join(parts, sep);
}
// One of `values` (ascending).
KeySpec int_values(std::vector<int64_t> values) {
  KeySpec k = int_key(values.front(), values.back());
  k.only = std::move(values);
  return k;
}

const std::set<std::string>& cpu_gemm_kinds() {
  static const std::set<std::string> k{"gemm", "conv_gemm"};
  return k;
}

constexpr int64_t kMaxBlock = int64_t{1} << 20;
constexpr size_t kMany = 16;

const std::map<std::string, PrimSpec>& specs() {
  static const std::map<std::string, PrimSpec> s = [] {
    std::map<std::string, PrimSpec> m;
    // Loop primitives (schedule/loop_primitives.h applies them).
    m["split"] = {1, 1, {{"factor", int_key(2, kMaxBlock, true)}, {"outer", name_key()}, {"inner", name_key()},
                         {"tail", word_key({"guard", "peel", "none"})}}, {}};
    m["reorder"] = {2, kMany, {}, {}};
    m["fuse"] = {2, 2, {{"into", name_key()}}, {}};
    m["tile"] = {2, 2, {{"f1", int_key(2, kMaxBlock, true)}, {"f2", int_key(2, kMaxBlock, true)}}, {}};
    m["vectorize"] = {1, 1, {}, {}};
    m["unroll"] = {1, 1, {}, {}};
    m["parallel"] = {1, 1, {}, {}};
    m["bind"] = {1, 1, {{"axis", word_key({"gpu.block.x", "gpu.block.y", "gpu.block.z", "gpu.thread.x",
                                            "gpu.thread.y", "gpu.thread.z"}, true)}}, {}};
    // The generic CPU nest (lower/lower_group.h NestSchedule).
    m["nest.vector"] = {0, 0, {{"width", int_key(1, 64, true, true)}}, {"nest"}};
    m["nest.parallel"] = {0, 0, {{"on", flag()}}, {"nest", "depthwise", "gemm", "conv_gemm"}};
    // The direct depthwise convolution (lower/conv_depthwise.cpp): output
    // rows computed together (register blocking), the widest vector of a row.
    m["depthwise.tile"] = {0, 0, {{"rows", int_key(1, 8, true)}, {"lanes", int_key(1, 64, true, true)}}, {"depthwise"}};
    // The packed GEMM (schedule/gemm.h GemmSchedule): tensorise to an
    // mr x nr micro-kernel of `lanes`-wide vectors, cache blocks, parallel
    // decomposition, which operand is packed per call.
    m["gemm.tile"] = {0, 0, {{"mr", int_key(1, 32, true)}, {"nr", int_key(1, 256, true)},
                             {"lanes", int_key(1, 64, true, true)}}, cpu_gemm_kinds()};
    m["gemm.block"] = {0, 0, {{"mc", int_key(1, kMaxBlock, true)}, {"kc", int_key(1, kMaxBlock, true)},
                              {"nc", int_key(1, kMaxBlock, true)}}, cpu_gemm_kinds()};
    m["gemm.parallel"] = {0, 0, {{"mode", word_key({"serial", "m_blocks", "tiles"}, true)}}, cpu_gemm_kinds()};
    m["gemm.pack"] = {0, 0, {{"a", flag()}, {"b", flag()}}, cpu_gemm_kinds()};
    // The implicit-GEMM convolution's orientation (lower/conv_gemm.cpp):
    // output channels or output positions as the GEMM's rows.
    m["conv.gemm"] = {0, 0, {{"rows", word_key({"channels", "positions"}, true)}}, {"conv_gemm"}};
    // Stride-1 3x3 convolutions as Winograd F(4x4, 3x3) (a model-wide
    // --knob read by the graph pipeline, passes/winograd_conv.cpp): by
    // default over blocked values, where 16 divides the channel counts; on=1
    // also in the NCHW form (slower than the direct conv,
    // docs/performance.md), on=0 never.
    m["conv.winograd"] = {0, 0, {{"on", flag()}}, {"conv_gemm"}};
    // The activations between convolutions stored channel-blocked (a
    // model-wide --knob read by the graph pipeline,
    // passes/blocked_layout.cpp; docs/layouts.md): on by default, on=0 off.
    m["conv.blocked"] = {0, 0, {{"on", flag()}}, {"conv_gemm"}};
    // GPU templates (schedule/gpu_schedule.h, codegen/cuda/mma_gemm.h,
    // flash_attention.cpp): what the TESSEL_CUDA_* environment switches chose
    // before they became knobs (--knob, gemm_target_for).
    m["gpu.rows"] = {0, 0, {{"threads", int_key(32, 1024, false, true)}, {"lanes", flag()}, {"row_cache", flag()},
                            {"vector_bytes", int_key(1, 16, false, true)}}, {"gpu"}};
    m["gpu.gemm"] = {0, 0, {{"wgmma", flag()}, {"tma", flag()}, {"tma_min_k", int_key(0, kMaxBlock)},
                            {"tma_min_k_cheap", int_key(0, kMaxBlock)}, {"overlap", flag()},
                            {"fill_blocks", int_key(1, 1 << 16)},
                            // 0: the automatic choice (mma_gemm.cpp); otherwise
                            // taken where the shared memory allows it.
                            {"bk", int_values({0, 32, 64})}, {"stages", int_values({0, 2, 3, 4})},
                            {"tma_bn", int_values({0, 128, 256})}}, {"gpu_mma"}};
    // on=0: attention is not fused into flash kernels at all (a model-wide
    // --knob; the kernels then have other kinds).
    m["gpu.flash"] = {0, 0, {{"on", flag()}, {"wgmma", flag()}, {"min_keys", int_key(0, kMaxBlock)}}, {"gpu_attention"}};
    return m;
  }();
  return s;
}

bool is_name(std::string_view s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.';
  });
}

// Values are words: no spaces, '=', '#' or braces, so the text form splits
// them back exactly.
bool is_value(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-' || c == '+';
  });
}

void check_key(const Primitive& p, const std::string& key, const std::string& value, const KeySpec& k) {
  switch (k.type) {
    case KeySpec::Int: {
      int64_t v = 0;
      TS_CHECK(parse_int(value, &v), "schedule: ", p.name, " ", key, "=", value, " is not an integer");
      TS_CHECK(v >= k.lo && v <= k.hi, "schedule: ", p.name, " ", key, "=", value, " is outside [", k.lo, ", ",
               k.hi, "]");
      TS_CHECK(!k.pow2 || (v & (v - 1)) == 0, "schedule: ", p.name, " ", key, "=", value,
               " is not a power of two");
      TS_CHECK(k.only.empty() || std::find(k.only.begin(), k.only.end(), v) != k.only.end(), "schedule: ", p.name,
               " ", key, "=", value, " is not one of ", join_ints(k.only, "|"));
      return;
    }
    case KeySpec::Word:
      TS_CHECK(std::find(k.words.begin(), k.words.end(), value) != k.words.end(), "schedule: ", p.name, " ", key,
               "=", value, " is not one of the allowed values");
      return;
    case KeySpec::Name:
      TS_CHECK(is_name(value), "schedule: ", p.name, " ", key, "=", value, " is not a loop name");
      return;
  }
}

// Constraints between a template's knobs (gemm.h check_gemm_schedule says
// the same for a GemmSchedule).
void check_gemm_knobs(const Schedule& s) {
  const Primitive* tile = s.find("gemm.tile");
  const Primitive* block = s.find("gemm.block");
  if (tile) {
    const int64_t nr = tile->int_attr("nr", 0), lanes = tile->int_attr("lanes", 1);
    TS_CHECK(nr % lanes == 0, "schedule: gemm.tile nr=", nr, " is not a multiple of lanes=", lanes);
  }
  if (tile && block) {
    const int64_t mr = tile->int_attr("mr", 1), nr = tile->int_attr("nr", 1);
    const int64_t mc = block->int_attr("mc", 0), nc = block->int_attr("nc", 0);
    TS_CHECK(mc % mr == 0, "schedule: gemm.block mc=", mc, " is not a multiple of gemm.tile mr=", mr);
    TS_CHECK(nc % nr == 0, "schedule: gemm.block nc=", nc, " is not a multiple of gemm.tile nr=", nr);
  }
}

}  // namespace

void check_schedule(const Schedule& s) {
  TS_CHECK(is_name(s.kind), "schedule: kind '", s.kind, "' is not a name");
  std::set<std::string> knobs_seen;
  for (const Primitive& p : s.prims) {
    auto it = specs().find(p.name);
    TS_CHECK(it != specs().end(), "schedule: unknown primitive '", p.name, "'");
    const PrimSpec& spec = it->second;
    const bool kind_ok = spec.kinds.empty() || spec.kinds.count(s.kind);
    TS_CHECK(kind_ok, "schedule: ", p.name, " does not apply to a ", s.kind, " kernel");
    TS_CHECK(p.args.size() >= spec.min_args && p.args.size() <= spec.max_args, "schedule: ", p.name, " takes ",
             spec.min_args == spec.max_args ? std::to_string(spec.min_args)
                                            : str_cat(spec.min_args, " to ", spec.max_args),
             " loop names, got ", p.args.size());
    for (const std::string& a : p.args) TS_CHECK(is_name(a), "schedule: ", p.name, ": '", a, "' is not a loop name");
    std::set<std::string> seen;
    for (const auto& [k, v] : p.attrs) {
      auto ks = spec.keys.find(k);
      TS_CHECK(ks != spec.keys.end(), "schedule: ", p.name, " has no key '", k, "'");
      TS_CHECK(seen.insert(k).second, "schedule: ", p.name, " sets ", k, " twice");
      check_key(p, k, v, ks->second);
    }
    for (const auto& [k, ks] : spec.keys)
      TS_CHECK(!ks.required || seen.count(k), "schedule: ", p.name, " needs ", k, "=");
    // A template knob is set once; loop primitives may repeat.
    if (p.name.find('.') != std::string::npos)
      TS_CHECK(knobs_seen.insert(p.name).second, "schedule: ", p.name, " is given twice");
  }
  check_gemm_knobs(s);
}

std::vector<std::string> known_primitives() {
  std::vector<std::string> names;
  for (const auto& [n, _] : specs()) names.push_back(n);
  return names;
}

// ---- knobs for a whole model ---------------------------------------------------

Primitive parse_knob(std::string_view text) {
  const size_t eq = text.find('=');
  TS_CHECK(eq != std::string_view::npos, "--knob '", text, "': expected PRIMITIVE.KEY=VALUE (e.g. gpu.gemm.tma=0)");
  const std::string_view lhs = text.substr(0, eq);
  const size_t dot = lhs.rfind('.');
  TS_CHECK(dot != std::string_view::npos && dot > 0, "--knob '", text,
           "': expected PRIMITIVE.KEY=VALUE (e.g. gpu.gemm.tma=0)");
  Primitive p;
  p.name = std::string(lhs.substr(0, dot));
  const std::string key(lhs.substr(dot + 1)), value(text.substr(eq + 1));
  auto it = specs().find(p.name);
  TS_CHECK(it != specs().end() && p.name.find('.') != std::string::npos, "--knob '", text, "': '", p.name,
           "' is not a template knob");
  auto ks = it->second.keys.find(key);
  TS_CHECK(ks != it->second.keys.end(), "--knob '", text, "': ", p.name, " has no key '", key, "'");
  TS_CHECK(is_value(value), "--knob '", text, "': malformed value");
  check_key(p, key, value, ks->second);
  p.attrs.emplace_back(key, value);
  return p;
}

void check_knob(const Primitive& knob) {
  auto it = specs().find(knob.name);
  TS_CHECK(it != specs().end() && knob.name.find('.') != std::string::npos, "'", knob.name,
           "' is not a template knob");
  for (const auto& [key, value] : knob.attrs) {
    auto ks = it->second.keys.find(key);
    TS_CHECK(ks != it->second.keys.end(), knob.name, " has no key '", key, "'");
    check_key(knob, key, value, ks->second);
  }
}

std::string print_knob(const Primitive& knob) {
  std::string out;
  for (const auto& [k, v] : knob.attrs) out += (out.empty() ? "" : " ") + knob.name + "." + k + "=" + v;
  return out;
}

std::vector<std::pair<std::string, std::string>> knob_keys() {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [name, spec] : specs()) {
    if (name.find('.') == std::string::npos) continue;  // a loop primitive, not a knob
    for (const auto& [key, k] : spec.keys) {
      std::string values = k.type == KeySpec::Word ? join(k.words, "|")
                           : k.only.empty()              ? str_cat(k.lo, "..", k.hi)
                                                         : join_ints(k.only, "|");
      if (k.pow2) values += ", a power of two";
      out.emplace_back(name + "." + key, values);
    }
  }
  return out;
}

bool apply_knobs(const std::vector<Primitive>& knobs, Schedule* s) {
  bool changed = false;
  for (const Primitive& k : knobs) {
    auto it = specs().find(k.name);
    if (it == specs().end() || !(it->second.kinds.empty() || it->second.kinds.count(s->kind))) continue;
    Primitive& p = s->get(k.name);
    for (const auto& [key, value] : k.attrs) {
      if (p.attr(key) == value) continue;
      p.set(key, value);
      changed = true;
    }
  }
  if (changed) check_schedule(*s);
  return changed;
}

int64_t knob_int(const std::vector<Primitive>& knobs, std::string_view name, std::string_view key,
                 int64_t fallback) {
  for (auto it = knobs.rbegin(); it != knobs.rend(); ++it)
    if (it->name == name && it->attr(key)) return it->int_attr(key, fallback);
  return fallback;
}

// ---- text form ------------------------------------------------------------------

std::string print_schedule(const Schedule& s) {
  std::ostringstream os;
  os << "schedule " << s.kind << " {\n";
  for (const Primitive& p : s.prims) {
    os << "  " << p.name;
    for (const std::string& a : p.args) os << ' ' << a;
    for (const auto& [k, v] : p.attrs) os << ' ' << k << '=' << v;
    os << '\n';
  }
  os << "}\n";
  return os.str();
}

namespace {

std::vector<std::string> words_of(std::string_view line) {
  if (size_t hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);
  std::vector<std::string> words;
  std::istringstream is{std::string(line)};
  for (std::string w; is >> w;) words.push_back(w);
  return words;
}

Primitive parse_primitive(const std::vector<std::string>& words, size_t line) {
  Primitive p;
  p.name = words[0];
  TS_CHECK(is_name(p.name), "schedule line ", line, ": '", p.name, "' is not a primitive name");
  for (size_t i = 1; i < words.size(); ++i) {
    const std::string& w = words[i];
    const size_t eq = w.find('=');
    if (eq == std::string::npos) {
      TS_CHECK(p.attrs.empty(), "schedule line ", line, ": loop name '", w, "' after key=value arguments");
      p.args.push_back(w);
      continue;
    }
    std::string key = w.substr(0, eq), value = w.substr(eq + 1);
    TS_CHECK(is_name(key) && is_value(value), "schedule line ", line, ": malformed argument '", w, "'");
    p.attrs.emplace_back(std::move(key), std::move(value));
  }
  return p;
}

}  // namespace

Schedule parse_schedule(std::string_view text) {
  Schedule s;
  bool open = false, closed = false;
  size_t line_no = 0;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    const std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    ++line_no;
    const std::vector<std::string> w = words_of(line);
    if (w.empty()) continue;
    TS_CHECK(!closed, "schedule line ", line_no, ": text after the closing '}'");
    if (!open) {
      TS_CHECK(w.size() == 3 && w[0] == "schedule" && w[2] == "{", "schedule line ", line_no,
               ": expected 'schedule KIND {'");
      s.kind = w[1];
      open = true;
    } else if (w.size() == 1 && w[0] == "}") {
      closed = true;
    } else {
      s.prims.push_back(parse_primitive(w, line_no));
    }
  }
  TS_CHECK(open, "schedule: empty text");
  TS_CHECK(closed, "schedule: missing the closing '}'");
  check_schedule(s);
  return s;
}

}  // namespace tessel
