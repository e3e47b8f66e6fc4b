#include "tessel/runtime/artifact_format.h"

#include <algorithm>
#include <cstring>
#include <set>

#include "tessel/support/error.h"
#include "tessel/support/fast_hash.h"
#include "tessel/support/strings.h"

namespace tessel {

namespace {

// magic | version u32 | section count u32 | (length u64, checksum u64) x 4
constexpr size_t kSections = 4;
constexpr size_t kHeaderBytes = 8 + 4 + 4 + 16 * kSections;
constexpr size_t kAlign = 64;  // sections and constants start at multiples of it
const char* const kSectionNames[kSections] = {"model", "code", "constants", "cuda"};

size_t align_up(size_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

// The low `bytes` bytes of v, little-endian.
void put_int(std::string* out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

void put_u64(std::string* out, uint64_t v) { put_int(out, v, 8); }

// Zeros up to the next multiple of kAlign.
void pad(std::string* out) { out->append(align_up(out->size()) - out->size(), '\0'); }

void put_str(std::string* out, std::string_view s) {
  put_u64(out, s.size());
  out->append(s);
}

void put_strs(std::string* out, const std::vector<std::string>& v) {
  put_u64(out, v.size());
  for (const std::string& s : v) put_str(out, s);
}

void put_ints(std::string* out, const std::vector<int64_t>& v) {
  put_u64(out, v.size());
  for (int64_t x : v) put_u64(out, static_cast<uint64_t>(x));
}

// Reads fields from [p, end); every read checks the bytes are there.
class Reader {
 public:
  // `at`: the file offset of p (for align()).
  Reader(const char* p, size_t n, size_t at = 0) : p_(p), left_(n), at_(at) {}
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
  // The next n bytes in place.
  std::string_view raw(uint64_t n) {
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
  int64_t i64() { return static_cast<int64_t>(u64()); }
  std::vector<int64_t> ints() {
    std::vector<int64_t> v(count());
    for (int64_t& x : v) x = i64();
    return v;
  }
  size_t left() const { return left_; }
  // Skips the zero padding up to the next multiple of kAlign in the file.
  void align() {
    const size_t pad = align_up(at_) - at_;
    need(pad);
    for (size_t i = 0; i < pad; ++i) TS_CHECK(p_[i] == 0, "corrupt artifact (non-zero padding)");
    skip(pad);
  }

 private:
  void need(uint64_t n) const { TS_CHECK(n <= left_, "truncated artifact"); }
  void skip(size_t n) {
    p_ += n;
    left_ -= n;
    at_ += n;
  }
  const char* p_;
  size_t left_;
  size_t at_;
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

void put_launch(std::string* out, const ArtifactLaunch& l) {
  put_str(out, l.entry);
  put_str(out, l.symbol);
  put_str(out, l.narrow_symbol);
  put_u64(out, static_cast<uint64_t>(l.narrow_limit));
  put_strs(out, l.syms);
  put_strs(out, l.grid);
  put_strs(out, l.block);
  put_u64(out, l.shared_bytes);
  put_u64(out, l.tensor_maps.size());
  for (const ArtifactTensorMap& t : l.tensor_maps) {
    put_u64(out, t.param);
    put_u64(out, static_cast<uint64_t>(t.offset));
    put_strs(out, t.dims);
    put_ints(out, t.strides);
    put_ints(out, t.box);
  }
}

ArtifactLaunch read_launch(Reader& r) {
  ArtifactLaunch l;
  l.entry = r.str();
  l.symbol = r.str();
  l.narrow_symbol = r.str();
  l.narrow_limit = r.i64();
  l.syms = r.strs();
  l.grid = r.strs();
  l.block = r.strs();
  TS_CHECK(l.grid.size() == 3 && l.block.size() == 3, "corrupt artifact (launch of '", l.entry, "' has ",
           l.grid.size(), " grid and ", l.block.size(), " block extents)");
  l.shared_bytes = r.u64();
  l.tensor_maps.resize(r.count());
  for (ArtifactTensorMap& t : l.tensor_maps) {
    t.param = r.u64();
    t.offset = r.i64();
    t.dims = r.strs();
    t.strides = r.ints();
    t.box = r.ints();
  }
  return l;
}

void put_cuda(std::string* out, const std::vector<ArtifactCubin>& cubins) {
  put_u64(out, cubins.size());
  for (const ArtifactCubin& c : cubins) {
    put_str(out, c.arch);
    put_str(out, c.image);
    put_u64(out, c.launches.size());
    for (const ArtifactLaunch& l : c.launches) put_launch(out, l);
  }
}

std::vector<ArtifactCubin> read_cuda(Reader& r) {
  std::vector<ArtifactCubin> cubins(r.count());
  for (ArtifactCubin& c : cubins) {
    c.arch = r.str();
    c.image = r.str();
    c.launches.resize(r.count());
    for (ArtifactLaunch& l : c.launches) l = read_launch(r);
  }
  TS_CHECK(r.left() == 0, "corrupt artifact (", r.left(), " unread bytes in its cuda section)");
  return cubins;
}

}  // namespace

// The sections are written after a header whose lengths and checksums are
// filled in at the end, so that the weights are copied once.
std::string encode_artifact(const ArtifactContents& a) {
  size_t constant_bytes = 0;
  for (std::string_view c : a.constants) constant_bytes += 8 + kAlign + c.size();
  std::string out;
  size_t cubin_bytes = 0;
  for (const ArtifactCubin& c : a.cuda) cubin_bytes += c.image.size();
  out.reserve(kHeaderBytes + a.model_ir.size() + a.object.size() + constant_bytes + cubin_bytes + 4096);
  out.append(kArtifactMagic, 8);
  put_int(&out, kArtifactVersion, 4);
  put_int(&out, kSections, 4);
  out.append(16 * kSections, '\0');
  size_t begin[kSections], end[kSections];  // a section's padding is not part of it
  pad(&out);
  begin[0] = out.size();
  put_str(&out, a.cpu_name);
  put_strs(&out, a.cpu_features);
  put_str(&out, a.model_ir);
  put_u64(&out, a.steps.size());
  for (const ArtifactStep& s : a.steps) {
    put_u64(&out, s.is_kernel ? 1 : 0);
    if (s.is_kernel) put_kernel(&out, s.kernel);
    else put_u64(&out, s.node);
  }
  end[0] = out.size();
  pad(&out);
  begin[1] = out.size();
  out.append(a.object);
  end[1] = out.size();
  pad(&out);
  begin[2] = out.size();
  put_u64(&out, a.constants.size());
  for (std::string_view c : a.constants) {
    put_u64(&out, c.size());
    pad(&out);  // the bytes start aligned: the loaded model borrows them in place
    out.append(c);
  }
  end[2] = out.size();
  pad(&out);
  begin[3] = out.size();
  put_cuda(&out, a.cuda);
  end[3] = out.size();
  std::string table;
  for (size_t i = 0; i < kSections; ++i) {
    put_u64(&table, end[i] - begin[i]);
    put_u64(&table, artifact_checksum(out.data() + begin[i], end[i] - begin[i]));
  }
  out.replace(16, table.size(), table);
  return out;
}

uint64_t artifact_checksum(const char* payload, size_t n) { return fast_hash64(payload, n); }

size_t artifact_header_bytes() { return kHeaderBytes; }

bool header_has_cuda_code(std::string_view head) {
  if (head.size() < kHeaderBytes || std::memcmp(head.data(), kArtifactMagic, 8) != 0) return false;
  Reader r(head.data() + 8, kHeaderBytes - 8);
  const uint64_t word = r.u64();  // the version (low half), then the section count
  if (static_cast<uint32_t>(word) != kArtifactVersion || (word >> 32) != kSections) return false;
  uint64_t length = 0;
  for (size_t i = 0; i < kSections; ++i) {
    length = r.u64();
    r.u64();  // checksum
  }
  return length > 8;  // the cuda section comes last; empty, it is its u64 count alone
}

ArtifactContents decode_artifact(std::string_view bytes) {
  TS_CHECK(bytes.size() >= 8 && std::memcmp(bytes.data(), kArtifactMagic, 7) == 0, "not a tessel artifact");
  TS_CHECK(bytes[7] == kArtifactMagic[7], "artifact format '", bytes.substr(0, 8),
           "' is not the one this tessel reads (", kArtifactMagic, ")");
  Reader head(bytes.data() + 8, bytes.size() - 8, 8);
  const uint64_t word = head.u64();  // the version (low half), then the section count
  const uint32_t version = static_cast<uint32_t>(word), sections = static_cast<uint32_t>(word >> 32);
  TS_CHECK(version == kArtifactVersion, "artifact format version ", version, " (this tessel reads ",
           kArtifactVersion, ")");
  TS_CHECK(bytes.size() >= kHeaderBytes, "truncated artifact");
  TS_CHECK(sections == kSections, "corrupt artifact (", sections, " sections, version ", version, " has ", kSections, ")");
  std::string_view section[kSections];
  size_t at = kHeaderBytes;
  for (size_t i = 0; i < kSections; ++i) {
    const uint64_t length = head.u64(), sum = head.u64();
    // The padding in front of a section is zeros: no byte of a file goes unchecked.
    for (size_t p = at; p < std::min(align_up(at), bytes.size()); ++p)
      TS_CHECK(bytes[p] == 0, "corrupt artifact (non-zero padding at byte ", p, ")");
    at = align_up(at);
    TS_CHECK(at <= bytes.size() && length <= bytes.size() - at, "truncated artifact (its ", kSectionNames[i],
             " section ends at byte ", at + length, " of ", bytes.size(), ")");
    section[i] = bytes.substr(at, length);
    TS_CHECK(artifact_checksum(section[i].data(), length) == sum, "corrupt artifact (checksum mismatch in its ",
             kSectionNames[i], " section)");
    at += length;
  }
  TS_CHECK(at == bytes.size(), "corrupt artifact (", bytes.size() - at, " bytes after the payload)");

  ArtifactContents a;
  Reader r(section[0].data(), section[0].size());
  a.cpu_name = r.str();
  a.cpu_features = r.strs();
  a.model_ir = r.str();
  a.steps.resize(r.count());
  for (ArtifactStep& s : a.steps) {
    s.is_kernel = r.flag();
    if (s.is_kernel) s.kernel = read_kernel(r);
    else s.node = r.u64();
  }
  TS_CHECK(r.left() == 0, "corrupt artifact (", r.left(), " unread bytes in its model section)");
  a.object = std::string(section[1]);
  Reader c(section[2].data(), section[2].size(), static_cast<size_t>(section[2].data() - bytes.data()));
  a.constants.resize(c.count());
  for (std::string_view& v : a.constants) {
    const uint64_t n = c.u64();
    c.align();
    v = c.raw(n);
  }
  TS_CHECK(c.left() == 0, "corrupt artifact (", c.left(), " unread bytes in its constants section)");
  Reader g(section[3].data(), section[3].size());
  a.cuda = read_cuda(g);
  return a;
}

std::string reseal_artifact(std::string b) {
  TS_CHECK(b.size() >= kHeaderBytes, "reseal_artifact: ", b.size(), " bytes");
  Reader head(b.data() + 16, 16 * kSections);
  size_t at = kHeaderBytes;
  std::string table;
  for (size_t i = 0; i < kSections; ++i) {
    uint64_t length = head.u64();
    head.u64();  // the old checksum
    at = std::min(align_up(at), b.size());
    length = i + 1 == kSections ? b.size() - at : std::min<uint64_t>(length, b.size() - at);
    put_u64(&table, length);
    put_u64(&table, artifact_checksum(b.data() + at, length));
    at += length;
  }
  b.replace(16, table.size(), table);
  return b;
}

std::vector<std::string> missing_cpu_features(const std::vector<std::string>& required, const std::string& host) {
  std::set<std::string> enabled;
  for (const std::string& f : split(host, ','))
    if (f.size() > 1 && f[0] == '+') enabled.insert(f);
  std::set<std::string> missing;
  for (const std::string& f : required)
    if (f.size() > 1 && f[0] == '+' && !enabled.count(f)) missing.insert(f);
  return {missing.begin(), missing.end()};
}

}  // namespace tessel
