// Access to fields that newer ONNX versions added after the schema we compile
// (onnx 1.12). protobuf keeps them, serialized, in the unknown-field string of
// the message; this walks that string with protobuf's own CodedInputStream.
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>

#include "tessel/frontend/onnx/onnx_internal.h"

namespace tessel::onnx_import {

std::vector<std::string> unknown_bytes_fields(const std::string& unknown, int field) {
  using google::protobuf::internal::WireFormatLite;
  std::vector<std::string> out;
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(unknown.data()),
                                            static_cast<int>(unknown.size()));
  for (;;) {
    uint32_t tag = in.ReadTag();
    if (tag == 0) break;
    if (static_cast<int>(WireFormatLite::GetTagFieldNumber(tag)) == field &&
        WireFormatLite::GetTagWireType(tag) == WireFormatLite::WIRETYPE_LENGTH_DELIMITED) {
      std::string s;
      if (!WireFormatLite::ReadBytes(&in, &s)) break;
      out.push_back(std::move(s));
    } else if (!WireFormatLite::SkipField(&in, tag)) {
      break;
    }
  }
  return out;
}

}  // namespace tessel::onnx_import
