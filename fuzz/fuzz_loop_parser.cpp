// libFuzzer target for the loop IR text parser (loop/parser.h): any input
// must parse or be refused with tessel::Error, and a parsed kernel must
// print to text that parses back and prints the same (loop/printer.h:
// print(parse(print(k))) == print(k)). The verifier does not run: the
// printer must cope with any kernel the parser builds.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_check.h"
#include "tessel/loop/parser.h"
#include "tessel/loop/printer.h"
#include "tessel/support/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::string first;
  try {
    first = tessel::loop::print(tessel::loop::parse_kernel(text));
  } catch (const tessel::Error&) {
    return 0;
  }
  std::string second;
  try {
    second = tessel::loop::print(tessel::loop::parse_kernel(first));
  } catch (const tessel::Error& e) {
    second = std::string("(parse error) ") + e.what();
  }
  tessel::fuzz::check_round_trip("loop IR", first, second);
  return 0;
}
