#include "tessel/driver/model_loader.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "tessel/driver/artifact.h"
#include "tessel/frontend/onnx/importer.h"
#include "tessel/ir/parser.h"
#include "tessel/support/error.h"
#include "tessel/support/phase_timer.h"

namespace tessel {

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// True when `head` looks like the start of the text IR: printable text whose
// first word is not binary protobuf.
bool looks_like_text_ir(const std::string& head) {
  size_t i = 0;
  while (i < head.size() && (head[i] == ' ' || head[i] == '\n' || head[i] == '\t' || head[i] == '\r')) ++i;
  if (i == head.size()) return false;
  for (size_t k = i; k < head.size(); ++k) {
    const auto c = static_cast<unsigned char>(head[k]);
    if (c < 0x20 && c != '\n' && c != '\t' && c != '\r') return false;
  }
  return head.compare(i, 5, "model") == 0 || head.compare(i, 2, "//") == 0 || head.compare(i, 1, "#") == 0;
}

}  // namespace

ModelFormat detect_model_format(const std::string& path, const std::string& head) {
  // "TESSELX" and a format letter (runtime/artifact_format.h): any format
  // letter is an artifact, so that another format version gets a clear error.
  if (head.compare(0, 7, kArtifactMagic, 7) == 0) return ModelFormat::Artifact;
  if (ends_with(path, ".tir")) return ModelFormat::TextIR;
  if (!ends_with(path, ".onnx") && looks_like_text_ir(head)) return ModelFormat::TextIR;
  return ModelFormat::Onnx;
}

std::unique_ptr<Model> load_model(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  TS_CHECK(fs::exists(st), "no such file");
  TS_CHECK(!fs::is_directory(st), "is a directory, not a model file");
  std::ifstream f(path, std::ios::binary);
  TS_CHECK(f, "cannot open: ", std::strerror(errno));
  char buf[64];
  f.read(buf, sizeof buf);
  const std::string head(buf, static_cast<size_t>(f.gcount()));
  TS_CHECK(!head.empty(), "empty file (not a model)");

  std::unique_ptr<Model> m;
  switch (detect_model_format(path, head)) {
    case ModelFormat::Artifact:
      f.close();
      m = artifact_model(read_artifact(path));
      break;
    case ModelFormat::TextIR: {
      f.clear();
      f.seekg(0);
      std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
      TS_CHECK(!f.bad(), "read error");
      m = parse_model(text);
      break;
    }
    case ModelFormat::Onnx: {
      f.close();
      PhaseTimer t("import onnx");
      m = import_onnx_file(path);
      break;
    }
  }
  TS_CHECK(m && m->graph, "the model has no graph");
  m->source_path = path;
  return m;
}

std::unique_ptr<Model> load_model_bytes(const std::string& bytes) {
  TS_CHECK(!bytes.empty(), "empty model (no bytes)");
  const std::string head = bytes.substr(0, 64);
  std::unique_ptr<Model> m;
  switch (detect_model_format("", head)) {
    case ModelFormat::Artifact: fail("a compiled artifact loads from its file (tessel.load), not from bytes");
    case ModelFormat::TextIR: m = parse_model(bytes); break;
    case ModelFormat::Onnx: {
      PhaseTimer t("import onnx");
      m = import_onnx_bytes(bytes.data(), bytes.size(), "");
      break;
    }
  }
  TS_CHECK(m && m->graph, "the model has no graph");
  return m;
}

}  // namespace tessel
