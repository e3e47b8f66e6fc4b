#include "tessel/runtime/artifact_format.h"

#include <algorithm>
#include <cstring>
#include <set>

#include "tessel/support/error.h"
#include "tessel/support/fast_hash.h"

namespace tessel {

namespace {

constexpr size_t kHeaderBytes = 8 + 4 + 8 + 8;

void put_u64(std::string* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

void put_str(std::string* out, std::string_view s) {
  put_u64(out, s.size());
  out->append(s);
}

void put_strs(std::string* out, const std::vector<std::string>& v) {
  put_u64(out, v.size());
  for (const std::string& s : v) put_str(out, s);
}

// Reads fields from [p, end); every read checks the bytes are there.
class Reader {
 public:
  Reader(const char* p, size_t n) : p_(p), left_(n) {}
  uint64_t u64() {
    need(8);
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(static_cast<unsigned char>(p_[i])) << (8 * i);
    skip(8);
    return v;
  }
  bool flag() {
    const uint64_t v = u64();
    TS_CHECK(v <= 1, "corrupt artifact (a flag holds ", v, ")");
    return v == 1;
  }
  std::string str() { return std::string(view()); }
  // The next string field in place (valid as long as the bytes are).
  std::string_view view() {
    const uint64_t n = u64();
    need(n);
    std::string_view s(p_, static_cast<size_t>(n));
    skip(static_cast<size_t>(n));
    return s;
  }
  // A list count: each element takes at least 8 bytes, so a count larger
  // than the rest of the payload allows is damage, not a huge allocation.
  size_t count() {
    const uint64_t n = u64();
    TS_CHECK(n <= left_ / 8, "corrupt artifact (a list of ", n, " entries in ", left_, " bytes)");
    return static_cast<size_t>(n);
  }
  std::vector<std::string> strs() {
    std::vector<std::string> v(count());
    for (std::string& s : v) s = str();
    return v;
  }
  size_t left() const { return left_; }

 private:
  void need(uint64_t n) const { TS_CHECK(n <= left_, "truncated artifact"); }
  void skip(size_t n) {
    p_ += n;
    left_ -= n;
  }
  const char* p_;
  size_t left_;
};

void put_kernel(std::string* out, const ArtifactKernel& k) {
  put_str(out, k.name);
  put_str(out, k.entry);
  put_strs(out, k.params);
  put_u64(out, k.num_inputs);
  put_strs(out, k.syms);
  put_u64(out, k.parallel ? 1 : 0);
  put_str(out, k.parallel_extent);
  put_strs(out, k.assert_messages);
  put_u64(out, k.nodes.size());
  for (uint64_t n : k.nodes) put_u64(out, n);
  put_u64(out, k.elementwise ? 1 : 0);
}

ArtifactKernel read_kernel(Reader& r) {
  ArtifactKernel k;
  k.name = r.str();
  k.entry = r.str();
  k.params = r.strs();
  k.num_inputs = r.u64();
  TS_CHECK(!k.params.empty() && k.num_inputs == k.params.size() - 1, "corrupt artifact (kernel '", k.name,
           "' has ", k.params.size(), " params and ", k.num_inputs, " inputs)");
  k.syms = r.strs();
  k.parallel = r.flag();
  k.parallel_extent = r.str();
  k.assert_messages = r.strs();
  k.nodes.resize(r.count());
  for (uint64_t& n : k.nodes) n = r.u64();
  k.elementwise = r.flag();
  return k;
}

}  // namespace

// The payload is written after a header whose length and checksum are
// filled in at the end, so that the weights are copied once.
std::string encode_artifact(const ArtifactContents& a) {
  size_t constant_bytes = 0;
  for (std::string_view c : a.constants) constant_bytes += 8 + c.size();
  std::string out;
  out.reserve(kHeaderBytes + a.model_ir.size() + a.object.size() + constant_bytes + 4096);
  out.append(kArtifactMagic, 8);
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((kArtifactVersion >> (8 * i)) & 0xff));
  out.append(16, '\0');
  put_str(&out, a.cpu_name);
  put_strs(&out, a.cpu_features);
  put_str(&out, a.model_ir);
  put_u64(&out, a.steps.size());
  for (const ArtifactStep& s : a.steps) {
    put_u64(&out, s.is_kernel ? 1 : 0);
    if (s.is_kernel) put_kernel(&out, s.kernel);
    else put_u64(&out, s.node);
  }
  put_str(&out, a.object);
  put_u64(&out, a.constants.size());
  for (std::string_view c : a.constants) put_str(&out, c);

  const size_t n = out.size() - kHeaderBytes;
  std::string sizes;
  put_u64(&sizes, n);
  put_u64(&sizes, artifact_checksum(out.data() + kHeaderBytes, n));
  out.replace(12, 16, sizes);
  return out;
}

uint64_t artifact_checksum(const char* payload, size_t n) { return fast_hash64(payload, n); }

ArtifactContents decode_artifact(std::string_view bytes) {
  TS_CHECK(bytes.size() >= 8 && std::memcmp(bytes.data(), kArtifactMagic, 7) == 0, "not a tessel artifact");
  TS_CHECK(bytes[7] == kArtifactMagic[7], "artifact format '", bytes.substr(0, 8),
           "' is not the one this tessel reads (", kArtifactMagic, ")");
  TS_CHECK(bytes.size() >= kHeaderBytes, "truncated artifact");
  uint32_t version = 0;
  for (int i = 0; i < 4; ++i) version |= static_cast<uint32_t>(static_cast<unsigned char>(bytes[8 + i])) << (8 * i);
  TS_CHECK(version == kArtifactVersion, "artifact format version ", version, " (this tessel reads ",
           kArtifactVersion, ")");
  Reader sizes(bytes.data() + 12, 16);
  const uint64_t length = sizes.u64(), sum = sizes.u64();
  TS_CHECK(length <= bytes.size() - kHeaderBytes, "truncated artifact (", bytes.size() - kHeaderBytes, " of ", length,
           " payload bytes)");
  TS_CHECK(length == bytes.size() - kHeaderBytes, "corrupt artifact (", bytes.size() - kHeaderBytes - length,
           " bytes after the payload)");
  const char* payload = bytes.data() + kHeaderBytes;
  TS_CHECK(artifact_checksum(payload, length) == sum, "corrupt artifact (checksum mismatch)");

  Reader r(payload, length);
  ArtifactContents a;
  a.cpu_name = r.str();
  a.cpu_features = r.strs();
  a.model_ir = r.str();
  a.steps.resize(r.count());
  for (ArtifactStep& s : a.steps) {
    s.is_kernel = r.flag();
    if (s.is_kernel) s.kernel = read_kernel(r);
    else s.node = r.u64();
  }
  a.object = r.str();
  a.constants.resize(r.count());
  for (std::string_view& c : a.constants) c = r.view();
  TS_CHECK(r.left() == 0, "corrupt artifact (", r.left(), " unread payload bytes)");
  return a;
}

std::vector<std::string> missing_cpu_features(const std::vector<std::string>& required, const std::string& host) {
  std::set<std::string> enabled;
  size_t start = 0;
  while (start <= host.size()) {
    const size_t comma = std::min(host.find(',', start), host.size());
    const std::string f = host.substr(start, comma - start);
    if (f.size() > 1 && f[0] == '+') enabled.insert(f);
    start = comma + 1;
  }
  std::set<std::string> missing;
  for (const std::string& f : required)
    if (f.size() > 1 && f[0] == '+' && !enabled.count(f)) missing.insert(f);
  return {missing.begin(), missing.end()};
}

}  // namespace tessel
