// The environment variables tessel reads, all of them, in one place.
//
// They are deployment settings only: where caches and the CUDA libraries
// live, how large the model cache may grow, whether to print phase timings.
// Nothing that changes generated code comes from the environment: schedule
// and code-generation choices are compile options (--knob, DriverOptions),
// which two models in one process can set differently and which every cache
// key includes. README.md ("Environment") lists the same variables; a unit
// test keeps the two lists equal.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tessel {

struct EnvSetting {
  const char* name;
  const char* what;  // one line, for README and `tessel inspect --emit options`
};

// Every variable env() may read, in the order README lists them.
const std::vector<EnvSetting>& env_settings();

// The variable's value; nullopt when it is unset or empty. `name` must be in
// env_settings() (a tessel::Error otherwise: a programming error, caught by
// the tests, so that no variable is read without being documented).
std::optional<std::string> env(std::string_view name);

}  // namespace tessel
