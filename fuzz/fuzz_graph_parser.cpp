// libFuzzer target for the graph IR text parser (ir/parser.h): any input
// must parse or be refused with tessel::Error, and what parses must print
// to text that parses back and prints the same (print(parse(print(m))) ==
// print(m), printer.h). The verifier does not run: the printer must cope
// with any model the parser builds.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_check.h"
#include "tessel/ir/parser.h"
#include "tessel/ir/printer.h"
#include "tessel/support/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::string first;
  try {
    first = tessel::print_model(*tessel::parse_model(text));
  } catch (const tessel::Error&) {
    return 0;
  }
  std::string second;
  try {
    second = tessel::print_model(*tessel::parse_model(first));
  } catch (const tessel::Error& e) {
    second = std::string("(parse error) ") + e.what();
  }
  tessel::fuzz::check_round_trip("graph IR", first, second);
  return 0;
}
