// libFuzzer target for the schedule text parser (schedule/schedule.h): any
// input must parse (and pass check_schedule) or be refused with
// tessel::Error; a parsed schedule must print to text that parses back to an
// equal Schedule. Inputs of one line are also read as a --knob
// (parse_knob/print_knob), which must round-trip the same way.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_check.h"
#include "tessel/schedule/schedule.h"
#include "tessel/support/error.h"

namespace {

template <class T, class Parse, class Print>
void round_trip(const char* what, std::string_view text, Parse parse, Print print) {
  T first;
  try {
    first = parse(text);
  } catch (const tessel::Error&) {
    return;
  }
  const std::string printed = print(first);
  std::string again;
  try {
    T second = parse(printed);
    again = second == first ? printed : print(second) + "(re-parsed to a different value)";
  } catch (const tessel::Error& e) {
    again = std::string("(parse error) ") + e.what();
  }
  tessel::fuzz::check_round_trip(what, printed, again);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  round_trip<tessel::Schedule>("schedule", text, tessel::parse_schedule, tessel::print_schedule);
  if (text.find('\n') == std::string_view::npos)
    round_trip<tessel::Primitive>("knob", text, tessel::parse_knob, tessel::print_knob);
  return 0;
}
