#include "tessel/driver/options.h"

#include <cstdlib>

#include "tessel/driver/cuda_compiler.h"
#include "tessel/support/env.h"
#include "tessel/support/error.h"
#include "tessel/support/strings.h"

namespace tessel {

const char* target_name(Target t) {
  switch (t) {
    case Target::Reference: return "reference";
    case Target::Cpu: return "cpu";
    case Target::Cuda: return "cuda";
  }
  return "?";
}

const char* precision_name(Precision p) {
  switch (p) {
    case Precision::FP32: return "fp32";
    case Precision::BF16: return "bf16";
    case Precision::FP16: return "fp16";
  }
  return "?";
}

Target parse_target(const std::string& s) {
  if (s == "reference") return Target::Reference;
  if (s == "cpu") return Target::Cpu;
  if (s == "cuda") return Target::Cuda;
  fail("unknown target '", s, "' (expected reference, cpu or cuda)");
}

Precision parse_precision(const std::string& s) {
  if (s == "fp32") return Precision::FP32;
  if (s == "bf16") return Precision::BF16;
  if (s == "fp16") return Precision::FP16;
  fail("unknown precision '", s, "' (expected fp32, bf16 or fp16)");
}

namespace {

int64_t parse_positive(const std::string& text, const std::string& what) {
  TS_CHECK(!text.empty(), what, ": missing value");
  int64_t v = 0;
  for (char c : text) {
    TS_CHECK(c >= '0' && c <= '9', what, ": '", text, "' is not a positive integer");
    v = checked_add(checked_mul(v, 10), c - '0');
  }
  return v;
}

}  // namespace

std::pair<std::string, int64_t> parse_dim_binding(const std::string& s) {
  const size_t eq = s.find('=');
  TS_CHECK(eq != std::string::npos && eq > 0, "--dim '", s, "': expected SYMBOL=N");
  const std::string sym = s.substr(0, eq);
  const int64_t v = parse_positive(s.substr(eq + 1), "--dim " + sym);
  TS_CHECK(v >= 1, "--dim ", sym, ": a dimension must be at least 1, got ", v);
  return {sym, v};
}

std::pair<std::string, std::string> parse_input_binding(const std::string& s) {
  const size_t eq = s.find('=');
  TS_CHECK(eq != std::string::npos && eq > 0 && eq + 1 < s.size(), "--input '", s, "': expected NAME=FILE.npy");
  return {s.substr(0, eq), s.substr(eq + 1)};
}

std::map<std::string, int64_t> parse_dim_bindings(const std::vector<std::string>& specs) {
  std::map<std::string, int64_t> out;
  for (const auto& spec : specs) {
    auto [sym, v] = parse_dim_binding(spec);
    auto [it, fresh] = out.emplace(sym, v);
    TS_CHECK(fresh || it->second == v, "--dim ", sym, " given twice with different values (", it->second, " and ", v,
             ")");
  }
  return out;
}

void check_options_supported(const DriverOptions& o, bool needs_device) {
  if (o.target == Target::Cuda && needs_device) check_cuda_usable();
  TS_CHECK(o.threads >= 0, "--threads must be >= 0 (0 = default), got ", o.threads);
}

std::string cache_dir() {
  if (auto d = env("TESSEL_CACHE_DIR")) return *d;
  if (auto h = env("HOME")) return *h + "/.cache/tessel";
  return ".cache/tessel";
}

std::string print_options(const DriverOptions& o) {
  std::string out = "# compile options (flags, or their defaults)\n";
  out += str_cat("target ", target_name(o.target), "\nprecision ", precision_name(o.precision), "\nthreads ",
                 o.threads, o.threads == 0 ? " (default: all cores)" : "", "\ncpu ", o.cpu, "\n");
  for (const auto& [sym, n] : o.dims) out += str_cat("dim ", sym, "=", n, "\n");
  for (const std::string& p : o.disabled_passes) out += "disable-pass " + p + "\n";
  out += "tuning-db " + (o.tuning_db.empty() ? std::string("none") : o.tuning_db) + "\n";
  out += "# knobs: --knob NAME.KEY=VALUE sets one for every kernel that takes it; unset ones keep\n"
         "# each kernel's default or tuned value (--emit schedule shows them per kernel)\n";
  for (const auto& [key, values] : knob_keys()) {
    std::string set;
    for (const Primitive& k : o.knobs)  // the last one given wins, as in knob_int
      for (const auto& [kk, v] : k.attrs)
        if (k.name + "." + kk == key) set = v;
    out += str_cat("knob ", key, " ", set.empty() ? "default" : set, "  # ", values, "\n");
  }
  out += "# environment (deployment settings only; README.md \"Environment\")\n";
  for (const EnvSetting& e : env_settings()) {
    const auto v = env(e.name);
    out += str_cat("env ", e.name, " ", v ? *v : "unset", "  # ", e.what, "\n");
  }
  return out;
}

}  // namespace tessel
