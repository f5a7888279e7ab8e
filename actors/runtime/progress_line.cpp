#include "actors/runtime/progress_line.hpp"

#include <algorithm>
#include <cstdio>

#include <spdlog/spdlog.h>

namespace baton::actors {
inline namespace runtime {

progress_line::progress_line(bool tty, const job_plan& plan, std::chrono::seconds log_every)
  : tty_(tty), plan_(plan), log_every_(log_every) {
}

void progress_line::update(const std::string& actor, int32_t epoch, int64_t samples,
                           double loss) {
  if (!steady_actor_)
    steady_actor_ = actor;
  if (actor == *steady_actor_)
    steady_report(epoch, samples);
  const auto* planned = plan_.find(actor);
  const auto& group = planned == nullptr || planned->result.empty() ? actor : planned->result;
  auto& g = groups_[group];
  g.samples[actor] = samples * shares();
  g.loss = loss;
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

void progress_line::steady_report(int32_t epoch, int64_t samples) {
  const model::training_mark now{clock::now(), samples};
  if (steady_spans_.open() && epoch == steady_epoch_) {
    steady_spans_.extend(now);
    return;
  }
  steady_spans_.start(now); // an epoch's first report (the one before joins the sum)
  steady_epoch_ = epoch;
}

std::optional<progress_line::steady_reports> progress_line::steady() const {
  auto sum = steady_spans_.total();
  if (!sum)
    return std::nullopt;
  return steady_reports{steady_actor_.value_or(""), sum->samples, sum->seconds};
}

void progress_line::clear() {
  if (tty_ && drawn_) {
    std::fprintf(stderr, "\r\033[K");
    std::fflush(stderr);
    drawn_ = false;
  }
}

int64_t progress_line::done() const {
  int64_t done = total_;
  for (const auto& [name, g] : groups_) {
    int64_t sum = 0;
    for (const auto& [member, samples] : g.samples)
      sum += samples;
    done = std::min(done, sum);
  }
  return done;
}

std::string progress_line::render() const {
  const int64_t done = this->done();
  double elapsed = std::chrono::duration<double>(clock::now() - started_).count();
  double rate = elapsed > 0 ? done / elapsed : 0;
  std::string line = "epoch " + std::to_string(epoch_ + 1) + "  " + std::to_string(done) + "/" +
                     std::to_string(total_) + " samples  ";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.0f samples/s  loss", rate);
  line += buf;
  for (const auto& [name, g] : groups_) {
    std::snprintf(buf, sizeof buf, " %s=%.3f", name.c_str(), g.loss);
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
