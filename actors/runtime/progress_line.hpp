#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "actors/runtime/job_plan.hpp"

namespace baton::actors {
inline namespace runtime {

/// The live progress of a run: one line redrawn in place on a terminal
/// (samples/s, loss per result group, ETA), a plain log line every few
/// seconds otherwise. Samples count the job's: the members of a result group
/// (pipeline replicas) add up, and a job whose progress comes from one of
/// its job_plan::progress_shares equal shares (data-parallel, IST: worker 0)
/// is scaled to all of them, so that an epoch counts the epoch's samples.
class progress_line {
public:
  /// `tty`: redraw in place; otherwise log every `log_every`. `plan` (which
  /// must outlive the line) says which result group an actor reports into.
  progress_line(bool tty, const job_plan& plan,
                std::chrono::seconds log_every = std::chrono::seconds{10});

  /// The number of training samples the run will process, as the actor that
  /// starts counting announces it (one share of them, see above).
  void set_total(int64_t samples) { total_ = samples * shares(); }
  /// `actor` reported `samples` done so far with recent mean `loss`.
  void update(const std::string& actor, int32_t epoch, int64_t samples, double loss);
  /// A report: its actor, epoch, the samples it had trained and when it came.
  struct report {
    std::string actor;
    int32_t epoch = 0;
    int64_t samples = 0;
    std::chrono::steady_clock::time_point at;
  };
  /// The run's first report (where the warm-up ended) and the last its actor
  /// sent in that epoch (or, when the epoch had no other, in the next): the
  /// steady training lies between them, no evaluation inside
  /// (job_result::steady).
  const std::optional<report>& first_report() const { return first_; }
  const std::optional<report>& last_report() const { return last_; }
  /// Clears the line before other output (on a terminal).
  void clear();

  /// The text of the line (without the carriage return): "epoch 2  4096/8192
  /// samples  910 samples/s  loss workers=0.512  ETA 0:04", epochs from 1.
  std::string render() const;

private:
  using clock = std::chrono::steady_clock;
  struct group_progress {
    std::map<std::string, int64_t> samples; ///< by member
    double loss = 0;                        ///< the latest member's
  };
  int64_t shares() const { return plan_.progress_shares > 1 ? plan_.progress_shares : 1; }
  /// The samples of the slowest group, which sets the pace of the run.
  int64_t done() const;

  bool tty_;
  const job_plan& plan_;
  std::chrono::seconds log_every_;
  clock::time_point started_ = clock::now();
  clock::time_point last_log_ = clock::now();
  int64_t total_ = 0;
  int32_t epoch_ = 0;
  std::map<std::string, group_progress> groups_; ///< by result group (or actor)
  bool drawn_ = false;
  std::optional<report> first_;
  std::optional<report> last_;
};

} // namespace runtime
} // namespace baton::actors
