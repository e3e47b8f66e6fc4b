// The tuning database (tune/database.h) and hardware fingerprints.

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include <gtest/gtest.h>

#include "tessel/codegen/cuda/driver_api.h"
#include "tessel/support/error.h"
#include "tessel/support/fast_hash.h"
#include "tessel/tune/database.h"
#include "tessel/tune/fingerprint.h"

extern char** environ;

namespace tessel {
namespace {

namespace fs = std::filesystem;

// A fresh folder per test (and process), removed at the end.
struct TempDir {
  fs::path dir;
  explicit TempDir(const std::string& name)
      : dir(fs::temp_directory_path() / ("tessel_tuning_db_" + name + "_" + std::to_string(::getpid()))) {
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  ~TempDir() { fs::remove_all(dir); }
  std::string file(const std::string& name) const { return (dir / name).string(); }
};

TuningRecord rec(const std::string& hash, double time_us, const std::string& fp = "cpu|test|+avx2||t4") {
  return {hash, fp, "", "schedule nest {\n  nest.vector width=8\n}\n", time_us, "kernel_" + hash, 7};
}

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_all(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// Opens `path`, returning the database and how many warning lines it printed.
std::pair<TuningDatabase, int> open_counting_warnings(const std::string& path) {
  testing::internal::CaptureStderr();
  TuningDatabase db = TuningDatabase::open(path);
  const std::string err = testing::internal::GetCapturedStderr();
  int lines = 0;
  for (size_t at = 0; (at = err.find("warning: tuning db " + path + ": ", at)) != std::string::npos; ++at) ++lines;
  EXPECT_EQ(static_cast<size_t>(std::count(err.begin(), err.end(), '\n')), static_cast<size_t>(lines)) << err;
  return {std::move(db), lines};
}

// A record line as the database writes it, with a correct checksum over any body.
std::string line_with_checksum(const std::string& body) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016" PRIx64, fast_hash64(body));
  return body + "\t" + buf + "\n";
}

TEST(TuningDb, RoundTripsRecords) {
  TempDir t("roundtrip");
  const std::string path = t.file("tuning.db");
  TuningRecord a = rec("a1", 0.1 + 0.2);  // a time whose shortest text has 17 digits
  a.schedule = "schedule gemm {\n  gemm.tile mr=8 nr=32\t# \"quoted\" \\back\\slash \\n\r\n}\n";
  a.kernel_name = "name\twith\ttabs\\";
  TuningDatabase db = TuningDatabase::open(path);
  EXPECT_FALSE(db.lookup("a1", a.fingerprint));
  db.record(a);
  db.record(rec("b2", 12.5));
  a.version = db.version();  // record() stamps the database's version
  EXPECT_EQ(db.lookup("a1", a.fingerprint), a);

  const TuningDatabase again = TuningDatabase::open(path);
  EXPECT_EQ(again.size(), 2u);
  EXPECT_EQ(again.damaged_count(), 0u);
  EXPECT_EQ(again.lookup("a1", a.fingerprint), a);
  ASSERT_TRUE(again.lookup("b2", a.fingerprint));
  EXPECT_EQ(again.lookup("b2", a.fingerprint)->time_us, 12.5);
  EXPECT_FALSE(again.lookup("a1", "cuda|other||12.4|t132"));
  // One header line and one line per record: the escapes keep the multi-line schedule on its line.
  const std::string text = read_all(path);
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 3);
}

TEST(TuningDb, FasterRecordWinsSlowerDoesNot) {
  TempDir t("faster");
  const std::string path = t.file("tuning.db");
  TuningDatabase db = TuningDatabase::open(path);
  db.record(rec("k", 50));
  TuningRecord faster = rec("k", 20);
  faster.schedule = "schedule nest {\n  nest.vector width=16\n}\n";
  db.record(faster);
  db.record(rec("k", 30));  // slower than the stored one: ignored
  for (const TuningDatabase& d : {db, TuningDatabase::open(path)}) {
    ASSERT_TRUE(d.lookup("k", faster.fingerprint));
    EXPECT_EQ(d.lookup("k", faster.fingerprint)->time_us, 20);
    EXPECT_EQ(d.lookup("k", faster.fingerprint)->schedule, faster.schedule);
  }
}

TEST(TuningDb, OtherVersionsAndHardwareAreIgnoredButKept) {
  TempDir t("foreign");
  const std::string path = t.file("tuning.db");
  const std::string here = "cpu|here||t8", there = "cpu|there||t8";
  TuningDatabase::open(path, "0.0.1-old").record(rec("k", 5, here));
  TuningDatabase db = TuningDatabase::open(path);
  EXPECT_FALSE(db.lookup("k", here));
  EXPECT_EQ(db.other_version_count(), 1u);
  db.record(rec("k", 9, there));
  EXPECT_FALSE(db.lookup("k", here));     // only another machine's record for this version
  db.record(rec("k2", 1, here));          // rewrites the file once more
  EXPECT_EQ(db.size(), 3u);

  const TuningDatabase old = TuningDatabase::open(path, "0.0.1-old");
  ASSERT_TRUE(old.lookup("k", here));
  EXPECT_EQ(old.lookup("k", here)->time_us, 5);
  EXPECT_FALSE(old.lookup("k2", here));
  const TuningDatabase now = TuningDatabase::open(path);
  ASSERT_TRUE(now.lookup("k", there));
  EXPECT_EQ(now.lookup("k", there)->time_us, 9);
  EXPECT_TRUE(now.lookup("k2", here));
  EXPECT_FALSE(now.lookup("k", here));
}

TEST(TuningDb, TruncatedFileKeepsTheWholeLinesBeforeTheCut) {
  TempDir t("truncated");
  const std::string path = t.file("tuning.db");
  {
    TuningDatabase db = TuningDatabase::open(path);
    for (const char* h : {"x", "y", "z"}) db.record(rec(h, 3));
  }
  const std::string full = read_all(path);
  const size_t header_end = full.find('\n') + 1;
  for (size_t n = 0; n <= full.size(); ++n) {
    write_all(path, full.substr(0, n));
    auto [db, warnings] = open_counting_warnings(path);
    // The records are those whose newline lies inside the prefix; cutting anywhere else warns once.
    const std::string prefix = full.substr(0, n);
    const size_t whole = n < header_end ? 0 : std::count(prefix.begin(), prefix.end(), '\n') - 1;
    EXPECT_EQ(db.size(), whole) << "cut at " << n;
    const bool at_line_end = n >= header_end && full[n - 1] == '\n';
    EXPECT_EQ(warnings, at_line_end ? 0 : 1) << "cut at " << n;
  }
}

TEST(TuningDb, DamagedContentIsDroppedWithOneWarning) {
  TempDir t("damaged");
  const std::string path = t.file("tuning.db");
  TuningDatabase::open(path).record(rec("good", 4));
  const std::string good = read_all(path);
  const std::string header = good.substr(0, good.find('\n') + 1);
  const std::string version = TuningDatabase::open(path).version();
  const auto body = [&](const std::string& time, const std::string& trials) {
    return "h\tcpu|test|+avx2||t4\t" + version + "\t" + time + "\t" + trials + "\tname\tschedule nest {\\n}\\n";
  };

  // Garbage, a file of another format version, an empty file: dropped whole.
  std::string garbage(4096, '\0');
  for (size_t i = 0; i < garbage.size(); ++i) garbage[i] = static_cast<char>((i * 7919u) >> 3);
  for (const std::string& bad : {garbage, "tessel-tuning-db 2\n" + good.substr(header.size()), std::string()}) {
    write_all(path, bad);
    auto [db, warnings] = open_counting_warnings(path);
    EXPECT_EQ(db.size(), 0u);
    EXPECT_EQ(warnings, 1);
  }

  // Within a good file: an edited line, absurd numbers behind a right checksum,
  // a bad escape, a 2 MiB line. Only the good record survives, with one warning.
  std::string edited = good.substr(header.size());
  edited[edited.find("\t4\t") + 1] = '1';  // a faster time the checksum does not cover
  std::string text = header + edited;
  for (const auto& [time, trials] : std::vector<std::pair<std::string, std::string>>{
           {"nan", "1"}, {"inf", "1"}, {"-3", "1"}, {"0", "1"}, {"1e300", "1"}, {"5x", "1"}, {"5", "-1"},
           {"5", "99999999999999999999999"}, {"", ""}})
    text += line_with_checksum(body(time, trials));
  text += line_with_checksum(body("5", "1") + "\\q");
  text += std::string(2 << 20, 'a') + "\n";
  text += good.substr(header.size());
  write_all(path, text);
  auto [db, warnings] = open_counting_warnings(path);
  EXPECT_EQ(warnings, 1);
  EXPECT_EQ(db.damaged_count(), 12u);
  EXPECT_EQ(db.size(), 1u);
  ASSERT_TRUE(db.lookup("good", rec("", 0).fingerprint));
  EXPECT_EQ(db.lookup("good", rec("", 0).fingerprint)->time_us, 4);
  // The body itself is well formed: with a sane time it is accepted.
  write_all(path, header + line_with_checksum(body("5", "1")));
  EXPECT_EQ(open_counting_warnings(path).first.size(), 1u);
}

TEST(TuningDb, RejectsMalformedRecords) {
  TempDir t("malformed");
  TuningDatabase db = TuningDatabase::open(t.file("tuning.db"));
  EXPECT_THROW(db.record(rec("k", std::nan(""))), Error);
  EXPECT_THROW(db.record(rec("k", -1)), Error);
  EXPECT_THROW(db.record(rec("", 1)), Error);
  EXPECT_EQ(db.size(), 0u);
}

TEST(TuningDb, CreatesItsFolderAndReportsAnUnwritablePath) {
  TempDir t("paths");
  const std::string nested = t.file("a/b/c/tuning.db");
  TuningDatabase::open(nested).record(rec("k", 1));
  EXPECT_TRUE(TuningDatabase::open(nested).lookup("k", rec("", 0).fingerprint));

  write_all(t.file("plain"), "a file, not a folder");
  const std::string under_file = t.file("plain/tuning.db");
  TuningDatabase db = TuningDatabase::open(under_file);  // reading: an empty database
  EXPECT_EQ(db.size(), 0u);
  try {
    db.record(rec("k", 1));
    ADD_FAILURE() << "record() into " << under_file << " did not throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tuning db " + under_file + ": cannot create"), std::string::npos)
        << e.what();
  }
}

// ---- several processes on one file ---------------------------------------------------------

constexpr int kRecordsPerProcess = 200;

// The writer that ConcurrentProcessesLoseNoRecord starts twice (this binary,
// filtered to this test): records kRecordsPerProcess records into the file
// named by TESSEL_TUNING_DB_CHILD=PATH:PREFIX. Skips when run normally.
TEST(TuningDb, ConcurrentWriterChild) {
  const char* spec = std::getenv("TESSEL_TUNING_DB_CHILD");
  if (!spec) GTEST_SKIP() << "run by ConcurrentProcessesLoseNoRecord";
  const std::string s = spec;
  const size_t colon = s.rfind(':');
  TuningDatabase db = TuningDatabase::open(s.substr(0, colon));
  for (int i = 0; i < kRecordsPerProcess; ++i) db.record(rec(s.substr(colon + 1) + std::to_string(i), 1 + i));
}

TEST(TuningDb, ConcurrentProcessesLoseNoRecord) {
  TempDir t("concurrent");
  const std::string path = t.file("tuning.db");
  std::vector<pid_t> pids;
  // The writers' gtest output is noise here; a failure shows in their exit status and on stderr.
  posix_spawn_file_actions_t quiet;
  posix_spawn_file_actions_init(&quiet);
  posix_spawn_file_actions_addopen(&quiet, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  for (const char* prefix : {"p", "q"}) {
    const std::string env = std::string("TESSEL_TUNING_DB_CHILD=") + path + ":" + prefix;
    std::vector<char*> envp;
    for (char** e = environ; *e; ++e) envp.push_back(*e);
    envp.push_back(const_cast<char*>(env.c_str()));
    envp.push_back(nullptr);
    std::string exe = "/proc/self/exe", filter = "--gtest_filter=TuningDb.ConcurrentWriterChild";
    char* argv[] = {exe.data(), filter.data(), nullptr};
    pid_t pid = 0;
    ASSERT_EQ(posix_spawn(&pid, exe.c_str(), &quiet, nullptr, argv, envp.data()), 0);
    pids.push_back(pid);
  }
  posix_spawn_file_actions_destroy(&quiet);
  for (pid_t pid : pids) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "writer " << pid << " status " << status;
  }
  const TuningDatabase db = TuningDatabase::open(path);
  EXPECT_EQ(db.size(), 2u * kRecordsPerProcess);
  for (const char* prefix : {"p", "q"})
    for (int i = 0; i < kRecordsPerProcess; ++i)
      EXPECT_TRUE(db.lookup(prefix + std::to_string(i), rec("", 0).fingerprint)) << prefix << i;
}

// ---- fingerprints ------------------------------------------------------------------------------

TEST(TuningDb, Fingerprints) {
  const std::string features = "+avx,+avx2,+fma,-avx512f,+sse4.2,+bmi,+bmi2,+popcnt,+lzcnt,+movbe,+xsave,+f16c";
  const HardwareFingerprint cpu = cpu_fingerprint("znver3", features, 16);
  EXPECT_EQ(cpu.target, "cpu");
  EXPECT_TRUE(cpu.str().starts_with("cpu|znver3|f:")) << cpu.str();
  EXPECT_EQ(cpu.str().find('\n'), std::string::npos);
  EXPECT_NE(cpu.str(), cpu_fingerprint("znver3", features + ",+avx512bw", 16).str());
  EXPECT_NE(cpu.str(), cpu_fingerprint("znver3", features, 8).str());
  EXPECT_EQ(cpu_fingerprint("skylake", "+avx2", 4).str(), "cpu|skylake|+avx2||t4");

  cuda::DeviceInfo d;
  d.name = "NVIDIA H100 80GB HBM3";
  d.driver_version = 12040;
  d.multiprocessors = 132;
  const HardwareFingerprint gpu = cuda_fingerprint(d, "sm_90a");
  EXPECT_EQ(gpu.str(), "cuda|NVIDIA H100 80GB HBM3|sm_90a|12.4|t132");
}

}  // namespace
}  // namespace tessel
