#include "actors/runtime/progress_line.hpp"

#include <algorithm>
#include <cstdio>

#include <spdlog/spdlog.h>

namespace baton::actors {
inline namespace runtime {

progress_line::progress_line(bool tty, std::chrono::seconds log_every)
  : tty_(tty), log_every_(log_every) {
}

void progress_line::update(const std::string& head, int32_t epoch, int64_t samples,
                           double loss) {
  heads_[head] = {samples, loss};
  epoch_ = std::max(epoch_, epoch);
  auto now = clock::now();
  if (tty_) {
    std::fprintf(stderr, "\r\033[K%s", render().c_str());
    std::fflush(stderr);
    drawn_ = true;
  } else if (now - last_log_ >= log_every_) {
    last_log_ = now;
    spdlog::info("{}", render());
  }
}

void progress_line::clear() {
  if (tty_ && drawn_) {
    std::fprintf(stderr, "\r\033[K");
    std::fflush(stderr);
    drawn_ = false;
  }
}

std::string progress_line::render() const {
  // The slowest head sets the pace of the run.
  int64_t done = total_;
  for (const auto& [name, h] : heads_)
    done = std::min(done, h.first);
  double elapsed = std::chrono::duration<double>(clock::now() - started_).count();
  double rate = elapsed > 0 ? done / elapsed : 0;
  std::string line = "epoch " + std::to_string(epoch_ + 1) + "  " + std::to_string(done) + "/" +
                     std::to_string(total_) + " samples  ";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.0f samples/s  loss", rate);
  line += buf;
  for (const auto& [name, h] : heads_) {
    std::snprintf(buf, sizeof buf, " %s=%.3f", name.c_str(), h.second);
    line += buf;
  }
  if (rate > 0 && total_ > done) {
    auto eta = static_cast<int64_t>((total_ - done) / rate);
    std::snprintf(buf, sizeof buf, "  ETA %lld:%02lld", static_cast<long long>(eta / 60),
                  static_cast<long long>(eta % 60));
    line += buf;
  }
  return line;
}

} // namespace runtime
} // namespace baton::actors
