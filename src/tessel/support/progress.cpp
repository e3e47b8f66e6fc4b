#include "tessel/support/progress.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

namespace tessel {

namespace {

constexpr int kBarWidth = 20;

}  // namespace

Progress::Progress(ProgressOptions o, std::string label) : o_(std::move(o)), label_(std::move(label)) {
  if (!enabled()) return;
  t0_ = step_t0_ = last_line_ = now();
}

Progress::~Progress() {
  if (enabled() && o_.terminal && drawn_ && !finished_)
    write("\r" + std::string(drawn_len_, ' ') + "\r");
}

double Progress::now() const {
  if (o_.clock) return o_.clock();
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string Progress::format_seconds(double s) {
  s = std::max(0.0, s);
  char buf[64];
  if (s < 60) {
    std::snprintf(buf, sizeof buf, "%.1fs", s);
  } else if (s < 3600) {
    const long m = static_cast<long>(s) / 60;
    std::snprintf(buf, sizeof buf, "%ldm%02lds", m, static_cast<long>(s) - m * 60);
  } else {
    const long h = static_cast<long>(s) / 3600;
    std::snprintf(buf, sizeof buf, "%ldh%02ldm", h, (static_cast<long>(s) - h * 3600) / 60);
  }
  return buf;
}

void Progress::start(const std::string& step, const std::string& unit, int64_t total) {
  if (!enabled()) return;
  std::lock_guard<std::mutex> lock(mu_);
  step_ = step;
  unit_ = unit;
  total_ = std::max<int64_t>(0, total);
  done_ = 0;
  detail_.clear();
  eta_.reset();
  step_t0_ = now();
  started_ = true;
  line_tenth_ = -1;  // a plain line may say which step runs now
  update(/*force=*/true);
}

void Progress::set_total(int64_t total) {
  if (!enabled()) return;
  std::lock_guard<std::mutex> lock(mu_);
  total = std::max<int64_t>(0, total);
  if (total != total_) line_tenth_ = -1;  // the tenths were of the old total
  total_ = total;
}

void Progress::advance(int64_t n) {
  if (!enabled()) return;
  std::lock_guard<std::mutex> lock(mu_);
  done_ += n;
  update(false);
}

void Progress::set_done(int64_t done) {
  if (!enabled()) return;
  std::lock_guard<std::mutex> lock(mu_);
  done_ = done;
  update(false);
}

void Progress::set_detail(std::string detail) {
  if (!enabled()) return;
  std::lock_guard<std::mutex> lock(mu_);
  detail_ = std::move(detail);
}

void Progress::set_eta(double seconds) {
  if (!enabled()) return;
  std::lock_guard<std::mutex> lock(mu_);
  eta_ = seconds;
}

void Progress::finish(const std::string& summary) {
  if (!enabled()) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (finished_) return;
  finished_ = true;
  std::string text = label_ + ": " + summary + " in " + format_seconds(now() - t0_);
  if (o_.terminal) {
    const size_t len = text.size();
    if (drawn_len_ > len) text += std::string(drawn_len_ - len, ' ');
    text = "\r" + text;
  }
  write(text + "\n");
}

// Redraws are what cost: a terminal gets one per redraw_s at most (a new
// step always, so that a long single call such as NVRTC shows what runs), a
// log a line per tenth of a step at most every line_s.
void Progress::update(bool force) {
  if (!started_ || finished_) return;
  const double t = now();
  if (o_.terminal) {
    if (!force && drawn_ && t - last_draw_ < o_.redraw_s) return;
    std::string text = line(true, t);
    if (o_.columns > 1 && text.size() >= static_cast<size_t>(o_.columns))
      text.resize(static_cast<size_t>(o_.columns) - 1);
    const size_t len = text.size();
    if (drawn_len_ > len) text += std::string(drawn_len_ - len, ' ');
    write("\r" + text);
    drawn_ = true;
    drawn_len_ = len;
    last_draw_ = t;
    return;
  }
  const int64_t tenth = total_ > 0 ? std::min(done_, total_) * 10 / total_ : 10;
  if (tenth <= line_tenth_ || t - last_line_ < o_.line_s) return;
  write(line(false, t) + "\n");
  last_line_ = t;
  line_tenth_ = tenth;
}

std::string Progress::line(bool bar, double t) const {
  const int64_t shown = std::clamp<int64_t>(done_, 0, total_);
  std::string s = label_ + ": " + step_;
  if (bar) {
    const int full = total_ > 0 ? static_cast<int>(shown * kBarWidth / total_) : kBarWidth;
    s += " [" + std::string(full, '#') + std::string(kBarWidth - full, '.') + "]";
  }
  s += " " + std::to_string(shown) + "/" + std::to_string(total_) + " " + unit_ + "  " + format_seconds(t - t0_);
  if (eta_) {
    s += "  ETA " + format_seconds(*eta_);
  } else if (shown > 0 && shown < total_ && t > step_t0_) {
    s += "  ETA " + format_seconds((t - step_t0_) / static_cast<double>(shown) * static_cast<double>(total_ - shown));
  }
  if (!detail_.empty()) s += "  " + detail_;
  return s;
}

void Progress::write(const std::string& text) { *o_.out << text << std::flush; }

}  // namespace tessel
