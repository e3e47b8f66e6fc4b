// Progress of long work (compiling, tuning) on standard error: on a
// terminal one bar redrawn in place,
//
//   compile: llvm emit [##########..............] 12/28 kernels  1.4s  ETA 1.9s
//
// otherwise plain lines few enough for a log (a line when another tenth of
// the step is done, at most one every ProgressOptions::line_s), and a final
// line either way:
//
//   compile: 43 groups, 28 kernels in 3.1s
//
// The options say where it goes; the code that does the work owns a
// Progress and counts units on it. Without a stream (the default, for the
// library and the tests) every call returns at once. Thread-safe: any
// thread may advance it.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <ostream>
#include <string>

namespace tessel {

struct ProgressOptions {
  std::ostream* out = nullptr;  // null: no progress
  bool terminal = false;        // `out` is a terminal: a bar redrawn with '\r'
  int columns = 80;             // the terminal's width: a longer bar would wrap and break the redraw
  double redraw_s = 0.1;        // terminal: at most ten redraws a second
  double line_s = 2;            // otherwise: at most a line every line_s
  // Seconds on any fixed origin (tests pass a fake clock); steady_clock when unset.
  std::function<double()> clock;
};

class Progress {
 public:
  // `label` starts every line ("compile", "tune").
  Progress(ProgressOptions o, std::string label);
  // A bar still on the terminal (the work threw) is erased, so that the
  // error message that follows starts on a clean line.
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  bool enabled() const { return o_.out != nullptr; }
  // A new step of `total` units ("lower", "groups", 43): the count starts at
  // zero. On a terminal the bar shows it at once.
  void start(const std::string& step, const std::string& unit, int64_t total);
  void set_total(int64_t total);
  // `n` more units done; a count past the total shows as the total.
  void advance(int64_t n = 1);
  void set_done(int64_t done);
  // Shown after the counts from the next update on ("trials 40").
  void set_detail(std::string detail);
  // Seconds left as the caller knows them (a time budget), shown as the ETA
  // instead of the estimate from the step's rate.
  void set_eta(double seconds);
  // The final line, "<label>: <summary> in <elapsed>", ending the bar.
  void finish(const std::string& summary);

  // "0.4s", "12.5s", "3m07s", "2h05m".
  static std::string format_seconds(double s);

 private:
  double now() const;
  void update(bool force);  // with mu_ held
  std::string line(bool bar, double t) const;
  void write(const std::string& text);

  ProgressOptions o_;
  std::string label_;
  std::mutex mu_;
  double t0_ = 0, step_t0_ = 0;
  std::string step_, unit_, detail_;
  int64_t done_ = 0, total_ = 0;
  std::optional<double> eta_;
  bool started_ = false, finished_ = false;
  double last_draw_ = 0;
  bool drawn_ = false;     // terminal: a bar is on the line now
  size_t drawn_len_ = 0;   // its length, to blank what a shorter redraw leaves
  double last_line_ = 0;   // plain lines: when the last one was written
  int64_t line_tenth_ = -1;  // and the tenth of its step it showed
};

}  // namespace tessel
