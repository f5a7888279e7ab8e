#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "actors/runtime/job_plan.hpp"
#include "model/core/warm_up.hpp"

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
  /// The steady training as one actor's reports show it: the samples that
  /// actor trained after its first report (where the warm-up ended), every
  /// epoch's from its first report to its last, and their seconds; the
  /// evaluations between epochs are never inside (job_result::steady).
  struct steady_reports {
    std::string actor;
    int64_t samples = 0;
    double seconds = 0;
  };
  /// Unset while the first report's actor has sent no second in an epoch.
  std::optional<steady_reports> steady() const;
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
  void steady_report(int32_t epoch, int64_t samples);

  std::optional<std::string> steady_actor_; ///< the first report's
  int32_t steady_epoch_ = 0;                ///< the epoch of its open span
  model::epoch_spans steady_spans_;
};

} // namespace runtime
} // namespace baton::actors
