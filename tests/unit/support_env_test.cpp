// support/env.h: the one place tessel reads the environment, and README's
// list of the variables it reads.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "tessel/support/env.h"
#include "tessel/support/error.h"

namespace tessel {
namespace {

TEST(SupportEnv, ReadsAListedVariableAndTreatsEmptyAsUnset) {
  ::setenv("TESSEL_TIMINGS", "2", 1);
  EXPECT_EQ(env("TESSEL_TIMINGS"), std::optional<std::string>("2"));
  ::setenv("TESSEL_TIMINGS", "", 1);
  EXPECT_EQ(env("TESSEL_TIMINGS"), std::nullopt);
  ::unsetenv("TESSEL_TIMINGS");
  EXPECT_EQ(env("TESSEL_TIMINGS"), std::nullopt);
}

// A variable that is not in the list cannot be read: every setting that
// reaches the code is documented, and code-generation switches cannot come
// back through the environment unnoticed.
TEST(SupportEnv, RefusesAVariableNotInTheList) {
  ::setenv("TESSEL_CUDA_TMA", "0", 1);
  try {
    env("TESSEL_CUDA_TMA");
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("TESSEL_CUDA_TMA is not in support/env.cpp's list"), std::string::npos)
        << e.what();
  }
  ::unsetenv("TESSEL_CUDA_TMA");
}

// README's "Environment" table names exactly the variables of env_settings().
TEST(SupportEnv, ReadmeListsExactlyTheVariablesRead) {
  std::ifstream f(std::string(TESSEL_SOURCE_DIR) + "/README.md");
  ASSERT_TRUE(f) << "README.md not found";
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string text = ss.str();
  const size_t at = text.find("\n## Environment\n");
  ASSERT_NE(at, std::string::npos) << "README.md has no Environment section";
  const size_t end = text.find("\n## ", at + 1);
  const std::string section = text.substr(at, end == std::string::npos ? std::string::npos : end - at);
  std::set<std::string> in_readme;
  const std::regex row(R"(\n\| `([A-Z_]+)` \|)");
  for (auto it = std::sregex_iterator(section.begin(), section.end(), row); it != std::sregex_iterator(); ++it)
    in_readme.insert((*it)[1]);
  std::set<std::string> read;
  for (const EnvSetting& s : env_settings()) read.insert(s.name);
  EXPECT_EQ(in_readme, read);
}

}  // namespace
}  // namespace tessel
