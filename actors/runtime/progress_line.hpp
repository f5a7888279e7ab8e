#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>

namespace baton::actors {
inline namespace runtime {

/// The live progress of a run: one line redrawn in place on a terminal
/// (samples/s, loss per head, ETA), a plain log line every few seconds
/// otherwise.
class progress_line {
public:
  /// `tty`: redraw in place; otherwise log every `log_every`.
  explicit progress_line(bool tty, std::chrono::seconds log_every = std::chrono::seconds{10});

  /// The number of training samples the run will process per head.
  void set_total(int64_t samples) { total_ = samples; }
  /// A head reported `samples` done so far with recent mean `loss`.
  void update(const std::string& head, int32_t epoch, int64_t samples, double loss);
  /// Clears the line before other output (on a terminal).
  void clear();

  /// The text of the line (without the carriage return).
  std::string render() const;

private:
  using clock = std::chrono::steady_clock;
  bool tty_;
  std::chrono::seconds log_every_;
  clock::time_point started_ = clock::now();
  clock::time_point last_log_ = clock::now();
  int64_t total_ = 0;
  int32_t epoch_ = 0;
  std::map<std::string, std::pair<int64_t, double>> heads_; ///< samples, loss
  bool drawn_ = false;
};

} // namespace runtime
} // namespace baton::actors
