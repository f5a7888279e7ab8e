#pragma once

// `baton run --curves FILE.csv`: a run's learning curves as CSV, for any tool
// that plots a table (a spreadsheet, gnuplot, pandas). Made from the job's
// result alone, the numbers its metrics JSON has (job_result.hpp).

#include <string>

#include <caf/expected.hpp>

#include "actors/runtime/job_result.hpp"

namespace baton::actors {
inline namespace runtime {

/// The header row of the curves, in column order.
inline constexpr const char* curves_header =
  "strategy,kind,actor,epoch,seconds,samples,train_loss,test_accuracy,samples_per_second,"
  "bytes_sent,validation_accuracy";

/// The curves of `r`: curves_header, then one row per epoch of each result
/// group (kind: r.result_label, head | stage | workers), then, for a run of
/// the actors, one row per epoch of each actor that closed epochs without
/// being a group itself (a data-parallel or IST worker: kind its role, its
/// own samples, loss and test accuracy, 0 where it does not evaluate; no
/// seconds, rate or bytes), then one row per actor with its totals over the
/// run (kind: its role, epoch empty). --mode local and --baseline separate
/// run the reference loop, which has no actors to count.
///
///   strategy            strategy_of(r): transfer, pipeline, data-parallel, ist, resist
///   epoch               from 1, as the log and the metrics number them
///   seconds             into training when the epoch's report was complete (a
///                       total row: the run's train_seconds); empty when unknown
///                       (--mode local)
///   samples             training samples of the epoch, all members of the group
///                       (a total row: the actor's over the run)
///   train_loss          the epoch's mean training loss (empty in a total row)
///   test_accuracy       after the epoch, 0..1 (empty in a total row)
///   samples_per_second  samples over the epoch's seconds (a total row: over
///                       train_seconds); empty when the seconds are unknown
///   bytes_sent          bytes the group's members sent on all their edges in
///                       the epoch (a total row: the actor's over the run);
///                       empty when unknown (--mode local)
///   validation_accuracy after the epoch, on the samples data.validation holds
///                       out, 0..1; empty without them (and in a total row)
std::string curves_csv(const job_result& r);

/// Writes curves_csv(r) to `path` all or nothing (model::try_replace_file);
/// errc::bad_file "--curves: ..." when it cannot.
caf::expected<void> write_curves(const job_result& r, const std::string& path);

} // namespace runtime
} // namespace baton::actors
