#include "tessel/driver/json.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "tessel/support/error.h"

namespace tessel {

Json& Json::push(Json v) {
  TS_CHECK(kind_ == Kind::Array, "Json::push on a non-array");
  arr_.push_back(std::move(v));
  return arr_.back();
}

Json& Json::set(const std::string& key, Json v) {
  TS_CHECK(kind_ == Kind::Object, "Json::set on a non-object");
  for (auto& [k, old] : obj_)
    if (k == key) {
      old = std::move(v);
      return old;
    }
  obj_.emplace_back(key, std::move(v));
  return obj_.back().second;
}

std::string Json::dump() const {
  std::string out;
  dump_to(&out);
  return out;
}

void json_quote(const std::string& s, std::string* out) {
  out->push_back('"');
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      switch (c) {
        case '"': *out += "\\\""; break;
        case '\\': *out += "\\\\"; break;
        case '\n': *out += "\\n"; break;
        case '\r': *out += "\\r"; break;
        case '\t': *out += "\\t"; break;
        default:
          if (c < 0x20 || c == 0x7F) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\u%04x", c);
            *out += buf;
          } else {
            out->push_back(static_cast<char>(c));
          }
      }
      ++i;
      continue;
    }
    // Copy a well-formed UTF-8 sequence; replace anything else.
    size_t len = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
    bool ok = len > 0 && i + len <= s.size();
    for (size_t k = 1; ok && k < len; ++k) ok = (static_cast<unsigned char>(s[i + k]) & 0xC0) == 0x80;
    if (ok && len == 2 && c < 0xC2) ok = false;  // overlong
    if (ok) {
      out->append(s, i, len);
      i += len;
    } else {
      *out += "\\ufffd";
      ++i;
    }
  }
  out->push_back('"');
}

void Json::dump_to(std::string* out) const {
  switch (kind_) {
    case Kind::Null:
      *out += "null";
      return;
    case Kind::Bool:
      *out += b_ ? "true" : "false";
      return;
    case Kind::Int:
      *out += std::to_string(i_);
      return;
    case Kind::Double: {
      if (!std::isfinite(d_)) {
        *out += "null";
        return;
      }
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.17g", d_);
      // Shortest form that round-trips, for readability.
      for (int prec = 6; prec < 17; ++prec) {
        char b2[32];
        std::snprintf(b2, sizeof b2, "%.*g", prec, d_);
        if (std::strtod(b2, nullptr) == d_) {
          std::snprintf(buf, sizeof buf, "%s", b2);
          break;
        }
      }
      *out += buf;
      return;
    }
    case Kind::String:
      json_quote(s_, out);
      return;
    case Kind::Array: {
      out->push_back('[');
      for (size_t i = 0; i < arr_.size(); ++i) {
        if (i) out->push_back(',');
        arr_[i].dump_to(out);
      }
      out->push_back(']');
      return;
    }
    case Kind::Object: {
      out->push_back('{');
      for (size_t i = 0; i < obj_.size(); ++i) {
        if (i) out->push_back(',');
        json_quote(obj_[i].first, out);
        out->push_back(':');
        obj_[i].second.dump_to(out);
      }
      out->push_back('}');
      return;
    }
  }
}

}  // namespace tessel
