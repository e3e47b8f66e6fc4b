// The progress reporter's output, on a fake clock: nothing here sleeps or
// reads the real time, so the tests cannot depend on the machine's speed.
#include <gtest/gtest.h>

#include <atomic>
#include <sstream>
#include <thread>
#include <vector>

#include "tessel/support/progress.h"

namespace tessel {
namespace {

struct Fake {
  std::ostringstream out;
  double t = 100;  // any origin: times shown are since the reporter began

  ProgressOptions options(bool terminal) {
    ProgressOptions o;
    o.out = &out;
    o.terminal = terminal;
    o.clock = [this] { return t; };
    return o;
  }
  // What was written since the last call.
  std::string take() {
    std::string s = out.str();
    out.str("");
    return s;
  }
};

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + what.size())) ++n;
  return n;
}

TEST(SupportProgress, TerminalBarRedrawsInPlaceWithCountsAndEta) {
  Fake f;
  Progress p(f.options(true), "compile");
  p.start("lower", "groups", 4);
  EXPECT_EQ(f.take(), "\rcompile: lower [....................] 0/4 groups  0.0s");
  f.t += 1;
  p.advance();
  // A quarter done in 1 s: 3 s to go.
  EXPECT_EQ(f.take(), "\rcompile: lower [#####...............] 1/4 groups  1.0s  ETA 3.0s");
  f.t += 1;
  p.advance(3);
  // Done: no ETA; a shorter line blanks what the longer one left.
  EXPECT_EQ(f.take(), "\rcompile: lower [####################] 4/4 groups  2.0s" + std::string(10, ' '));
  f.t += 0.5;
  p.finish("4 groups");
  const std::string last = f.take();
  EXPECT_EQ(last.substr(0, 29), "\rcompile: 4 groups in 2.5s   ");
  EXPECT_EQ(last.back(), '\n');
  EXPECT_EQ(count(last, "\n"), 1u);
}

TEST(SupportProgress, TerminalRedrawsAtMostTenTimesASecond) {
  Fake f;
  Progress p(f.options(true), "compile");
  p.start("llvm emit", "kernels", 1000);
  f.take();
  for (int i = 0; i < 500; ++i) {  // 500 units in 50 ms: no redraw yet
    f.t += 0.0001;
    p.advance();
  }
  EXPECT_EQ(f.take(), "");
  for (int i = 0; i < 500; ++i) {  // another 500 over 1 s: one redraw each 0.1 s
    f.t += 0.002;
    p.advance();
  }
  const std::string drawn = f.take();
  EXPECT_GE(count(drawn, "\r"), 9u);
  EXPECT_LE(count(drawn, "\r"), 11u);
  // A new step shows at once, however recent the last redraw.
  p.start("llvm emit", "kernels", 2);
  EXPECT_NE(f.take().find("0/2 kernels"), std::string::npos);
}

TEST(SupportProgress, PlainLinesForLogsEveryTenthAtMostEveryFewSeconds) {
  Fake f;
  Progress p(f.options(false), "compile");  // a line every 2 s at most (ProgressOptions::line_s)
  p.start("llvm emit", "kernels", 100);
  EXPECT_EQ(f.take(), "");  // the work has just begun
  f.t += 1;
  p.advance(30);
  EXPECT_EQ(f.take(), "");  // 30% done, but a line came less than 2 s ago (the start)
  f.t += 1.5;
  p.advance(5);
  EXPECT_EQ(f.take(), "compile: llvm emit 35/100 kernels  2.5s  ETA 4.6s\n");
  f.t += 3.5;
  p.advance(4);
  EXPECT_EQ(f.take(), "");  // 39%: still the tenth that was shown
  p.advance(1);
  EXPECT_EQ(f.take(), "compile: llvm emit 40/100 kernels  6.0s  ETA 9.0s\n");
  f.t += 10;
  p.advance(60);
  p.finish("100 kernels");
  EXPECT_EQ(f.take(), "compile: llvm emit 100/100 kernels  16.0s\ncompile: 100 kernels in 16.0s\n");
  p.start("next", "kernels", 1);
  EXPECT_EQ(f.take(), "");  // after the final line, nothing
}

TEST(SupportProgress, PlainModeSaysWhichStepRunsAfterAQuietSpell) {
  Fake f;
  Progress p(f.options(false), "compile");
  p.start("lower", "groups", 3);
  p.advance(3);
  f.t += 5;
  p.start("NVRTC for sm_90a", "kernels", 3);  // one long call follows: its start is the news
  EXPECT_EQ(f.take(), "compile: NVRTC for sm_90a 0/3 kernels  5.0s\n");
  p.finish("3 groups");
  EXPECT_EQ(f.take(), "compile: 3 groups in 5.0s\n");
}

TEST(SupportProgress, FastWorkInALogIsOneFinalLine) {
  Fake f;
  Progress p(f.options(false), "compile");
  p.start("lower", "groups", 10);
  for (int i = 0; i < 10; ++i) {
    f.t += 0.01;
    p.advance();
  }
  p.start("llvm emit", "kernels", 5);
  p.advance(5);
  p.finish("10 groups, 5 distinct kernels");
  EXPECT_EQ(f.take(), "compile: 10 groups, 5 distinct kernels in 0.1s\n");
}

TEST(SupportProgress, WithoutAStreamNothingIsComputed) {
  int clock_reads = 0;
  ProgressOptions o;  // --quiet: no stream
  o.clock = [&] { return static_cast<double>(++clock_reads); };
  {
    Progress p(o, "compile");
    EXPECT_FALSE(p.enabled());
    p.start("lower", "groups", 10);
    p.advance(3);
    p.set_done(5);
    p.set_detail("trials 4");
    p.set_eta(3);
    p.finish("10 groups");
  }
  EXPECT_EQ(clock_reads, 0);
}

TEST(SupportProgress, ATotalOfZeroIsDone) {
  Fake f;
  Progress p(f.options(true), "compile");
  p.start("llvm emit", "kernels", 0);
  EXPECT_EQ(f.take(), "\rcompile: llvm emit [####################] 0/0 kernels  0.0s");
  Fake g;
  Progress q(g.options(false), "compile");
  g.t += 3;
  q.start("llvm emit", "kernels", 0);
  EXPECT_EQ(g.take(), "compile: llvm emit 0/0 kernels  3.0s\n");
}

TEST(SupportProgress, MoreDoneThanTheTotalShowsTheTotal) {
  Fake f;
  Progress p(f.options(true), "compile");
  p.start("lower", "groups", 3);
  f.t += 1;
  p.advance(5);  // a re-plan lowered groups the final plan does not hold
  const std::string drawn = f.take();
  EXPECT_NE(drawn.find("[####################] 3/3 groups  1.0s"), std::string::npos) << drawn;
  EXPECT_EQ(drawn.find("ETA"), std::string::npos) << drawn;
  p.set_total(8);  // a later plan has more: the count is kept
  f.t += 1;
  p.advance();
  EXPECT_NE(f.take().find("6/8 groups"), std::string::npos);
}

TEST(SupportProgress, CallerEtaAndDetail) {
  Fake f;
  Progress p(f.options(false), "tune");
  p.start("search", "kernels", 10);
  f.t += 30;
  p.set_detail("trials 40");
  p.set_eta(570);  // the budget left, not the rate's guess
  p.set_done(2);
  EXPECT_EQ(f.take(), "tune: search 2/10 kernels  30.0s  ETA 9m30s  trials 40\n");
}

TEST(SupportProgress, TerminalLinesFitTheWidth) {
  Fake f;
  ProgressOptions o = f.options(true);
  o.columns = 40;
  Progress p(o, "compile");
  p.start("a step with a long name", "kernels", 3);
  const std::string s = f.take();
  EXPECT_EQ(s.size(), 40u);  // '\r' and 39 columns: the line does not wrap
  EXPECT_EQ(s.substr(0, 35), "\rcompile: a step with a long name [");
}

TEST(SupportProgress, ABarLeftByAnErrorIsErased) {
  Fake f;
  {
    Progress p(f.options(true), "compile");
    p.start("lower", "groups", 3);
    f.take();
  }  // destroyed unfinished, as when the compile throws
  const std::string s = f.take();
  EXPECT_EQ(s.front(), '\r');
  EXPECT_EQ(s.back(), '\r');
  EXPECT_EQ(s.find_first_not_of(" \r"), std::string::npos);
  Fake g;
  { Progress q(g.options(false), "compile"); q.start("lower", "groups", 3); }
  EXPECT_EQ(g.take(), "");  // a log keeps its lines as they are
}

TEST(SupportProgress, ThreadsCountEveryUnit) {
  Fake f;
  std::atomic<double> t{0};
  ProgressOptions o = f.options(true);
  o.clock = [&] { return t.load(); };
  Progress p(o, "compile");
  p.start("llvm emit", "kernels", 4000);
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i)
    threads.emplace_back([&] {
      for (int j = 0; j < 1000; ++j) p.advance();
    });
  for (std::thread& th : threads) th.join();
  f.take();
  t = 1;
  p.advance(0);
  EXPECT_NE(f.take().find(" 4000/4000 kernels"), std::string::npos);
}

TEST(SupportProgress, FormatsDurations) {
  EXPECT_EQ(Progress::format_seconds(0), "0.0s");
  EXPECT_EQ(Progress::format_seconds(-1), "0.0s");
  EXPECT_EQ(Progress::format_seconds(12.46), "12.5s");
  EXPECT_EQ(Progress::format_seconds(187), "3m07s");
  EXPECT_EQ(Progress::format_seconds(7500), "2h05m");
}

}  // namespace
}  // namespace tessel
