// A small JSON value for the CLI's --json output. Objects keep insertion
// order so that the output reads in the order the code builds it.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace tessel {

class Json {
 public:
  enum class Kind { Null, Bool, Int, Double, String, Array, Object };

  Json() = default;  // null
  Json(bool v) : kind_(Kind::Bool), b_(v) {}                                   // NOLINT
  Json(int v) : kind_(Kind::Int), i_(v) {}                                     // NOLINT
  Json(int64_t v) : kind_(Kind::Int), i_(v) {}                                 // NOLINT
  Json(uint64_t v) : kind_(Kind::Int), i_(static_cast<int64_t>(v)) {}          // NOLINT
  Json(double v) : kind_(Kind::Double), d_(v) {}                               // NOLINT
  Json(const char* v) : kind_(Kind::String), s_(v) {}                          // NOLINT
  Json(std::string v) : kind_(Kind::String), s_(std::move(v)) {}               // NOLINT
  static Json array() { Json j; j.kind_ = Kind::Array; return j; }
  static Json object() { Json j; j.kind_ = Kind::Object; return j; }

  Kind kind() const { return kind_; }
  // Array: appends. Object: sets (replacing an existing key).
  Json& push(Json v);
  Json& set(const std::string& key, Json v);
  size_t size() const { return kind_ == Kind::Array ? arr_.size() : obj_.size(); }

  // Compact single-line text. Non-finite doubles are written as null (JSON has
  // no NaN/inf).
  std::string dump() const;

 private:
  void dump_to(std::string* out) const;
  Kind kind_ = Kind::Null;
  bool b_ = false;
  int64_t i_ = 0;
  double d_ = 0;
  std::string s_;
  std::vector<Json> arr_;
  std::vector<std::pair<std::string, Json>> obj_;
};

// Appends `s` as a quoted JSON string (escaping control characters; invalid
// UTF-8 bytes are replaced by U+FFFD so the output is always valid JSON).
void json_quote(const std::string& s, std::string* out);

}  // namespace tessel
