#include "actors/runtime/coordinator.hpp"

#include <algorithm>
#include <optional>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "actors/config/role_settings.hpp"
#include "actors/flow/activity.hpp"
#include "actors/flow/protocols.hpp"
#include "actors/flow/tensor_parts.hpp"
#include "actors/runtime/best_epochs.hpp"
#include "actors/runtime/checkpoints.hpp"
#include "actors/runtime/epoch_record.hpp"
#include "actors/runtime/fault_sending.hpp"
#include "actors/runtime/job_nodes.hpp"
#include "actors/runtime/job_pass.hpp"
#include "actors/runtime/job_recovery.hpp"
#include "actors/runtime/liveness.hpp"
#include "actors/runtime/placement.hpp"
#include "actors/runtime/progress_line.hpp"
#include "actors/runtime/recovery_rules.hpp"
#include "actors/runtime/result_collector.hpp"
#include "actors/runtime/run_stop.hpp"
#include "messages/errc.hpp"
#include "messages/type_ids.hpp"
#include "messages/types.hpp"

namespace baton::actors {
inline namespace runtime {

namespace {

using clock_type = std::chrono::steady_clock;

class coordinator {
public:
  coordinator(caf::actor_system& sys, const cluster& c, const job_facts& facts,
              const job_plan& plan, const run_options& options)
    : self_(sys), cluster_(c), facts_(facts), plan_(plan), options_(options),
      progress_(options.progress_tty, plan), nodes_(self_.ptr(), c.runtime.request_timeout),
      pass_(self_.ptr(), c.runtime.request_timeout, c.runtime.start_timeout), collected_(plan),
      recovery_(c), best_(plan),
      stop_(facts.target_accuracy, c.runtime.stop_after_seconds, plan.result_groups().size(),
            facts.selection.patience) {}

  ~coordinator() { shutdown(); }

  caf::expected<job_result> run() {
    auto started = clock_type::now();
    std::optional<clock_type::time_point> training_started;
    std::vector<messages::node_report> at_training_start;
    if (auto err = nodes_.connect(cluster_, facts_.file, options_.roles))
      return err;
    // The faults against the nodes, the checkpoint directory and, with
    // --resume, the step to continue from.
    if (auto err = recovery_.prepare(nodes_.live(), cluster_.embedded(), plan_, options_))
      return err;
    if (recovery_.checkpoints().kept)
      result_.checkpoint_dir = recovery_.checkpoints().dir;
    record_.resume(recovery_.checkpoints().dir, recovery_.checkpoints().run_id, best_, stop_);
    if (auto warning = short_stall_timeout_warning(stall_limit(), activity::heartbeat_interval))
      spdlog::warn("{}", *warning);
    // Each pass runs the job from its restore step; a failure the topology
    // recovers from leads to another pass from the newest common checkpoint.
    for (;;) {
      if (auto err = spawn_all())
        return err;
      if (auto err = pass_.wire(plan_))
        return err;
      // Each pass: the actors are new (a drop that happened is not set again).
      if (auto err = pass_.arm(recovery_.faults().edge_faults()))
        return err;
      resumed();
      if (!training_started) {
        nodes_.collect_reports(cluster_, at_training_start);
        training_started = clock_type::now();
      }
      auto failure = train();
      if (!failure)
        break;
      if (!recovery_.recoverable())
        return failure;
      if (auto err = recover(failure))
        return err;
    }
    nodes_.collect_reports(cluster_, result_.nodes);
    cpu_since(at_training_start, result_.nodes);
    if (recovery_.checkpoints().dir == options_.temporary_checkpoint_dir)
      result_.checkpoint_dir.clear(); // removed by its owner: nothing to resume from
    auto ended = clock_type::now();
    result_.wall_seconds = std::chrono::duration<double>(ended - started).count();
    result_.train_seconds = std::chrono::duration<double>(ended - *training_started).count();
    result_.topology_file = facts_.file;
    result_.job = facts_.job;
    result_.stopped = stop_.stopped();
    collected_.finish(result_);
    if (auto steady = progress_.steady())
      result_.steady = steady_of(result_, steady->actor, steady->samples, steady->seconds);
    if (auto why = best_.finish(result_); !why.empty() && options_.epoch_weights)
      spdlog::warn("--save-model writes the final weights, not the best epoch's: {}", why);
    return std::move(result_);
  }

private:
  // -- spawning a pass (connecting: job_nodes) ------------------------------------

  /// Starts `a` on the node it is placed on, or where a lost node's actors went.
  caf::error spawn_one(const planned_actor& a) {
    auto node = nodes_.node_for(a.node, pass_.actors_on());
    const auto* spawner = nodes_.spawner_of(node);
    if (spawner == nullptr)
      return make_error(errc::bad_config, facts_.file + ": " + a.role + " '" + a.name +
                                            "' is placed on no known node ('" + node + "')");
    auto run =
      run_settings_of(a, plan_, recovery_.checkpoints(), recovery_.faults(), options_.trace);
    run.recovery.epoch_weights = options_.epoch_weights && a.sends_weights;
    return pass_.spawn(*spawner, node, a, with_run(a.settings, run));
  }

  caf::error spawn_all() {
    for (const auto& warning : thread_budget_warnings(plan_, nodes_.cores()))
      spdlog::warn("{}", warning);
    for (const auto& a : plan_.actors)
      if (auto err = spawn_one(a))
        return err;
    return caf::none;
  }

  // -- training: each handler ignores a message of an earlier pass ---------------

  /// Whether the message being handled comes from an actor of this pass
  /// (then, a report and not a heartbeat, it shows its node alive).
  bool from_current() {
    auto* a = pass_.find(caf::actor_cast<caf::actor_addr>(self_->current_sender()));
    if (a != nullptr)
      live_.reported(a->node, clock_type::now());
    return a != nullptr;
  }

  // -- liveness (liveness.hpp): heartbeats and the stall detector -------------------

  /// No actor advanced for `limit`: the stall, naming every unfinished
  /// actor, its step and what it waits for; none when an answer to the
  /// heartbeat request shows that the job advanced after all.
  caf::error stalled(clock_type::duration limit) {
    auto actors = pass_.unfinished_actors(plan_);
    pass_.ask_heartbeats(actors, live_);
    auto now = clock_type::now();
    if (!live_.stalled(limit, now))
      return caf::none;
    auto report = live_.stall_report(actors, limit, now);
    return recovery_.failed("stalled", "job", make_error(errc::actor_failed, report));
  }

  void on_final(messages::actor_report& r) {
    if (!from_current())
      return;
    if (auto* a = pass_.find(r.actor))
      a->done = true;
    collected_.final_report(std::move(r));
  }

  void on_epoch(const messages::actor_report& r) {
    if (!from_current())
      return;
    // Seconds since the first pass began: a replayed epoch's time counts its restarts.
    auto seconds = std::chrono::duration<double>(clock_type::now() - first_pass_started_).count();
    auto report = collected_.epoch_report(r, seconds);
    if (!report)
      return; // other members of its result group have not sent this epoch
    progress_.clear();
    for (const auto& e : report->epochs) {
      log_epoch(report->actor, e, plan_.divergence_advice);
      best_.epoch(report->actor, e.epoch, e.validation_accuracy);
      record_.add({report->actor, e.epoch, e.test_accuracy, e.validation_accuracy}, best_);
      begin_stop(stop_.epoch(report->actor, e.epoch, e.test_accuracy, seconds,
                             e.validation_accuracy));
    }
  }

  // -- stopping early (run_stop.hpp): target_accuracy, the time budget -----------

  /// Every head reached the accuracy, or the budget is spent: the actors
  /// the plan starts (the source, or every worker and shard) are asked to
  /// stop (control shutdown). A source ends its stream at the next step
  /// boundary, and the actors downstream finish as at its end; a worker or
  /// shard sends its final report at once and quits. The pass ends when all
  /// have reported.
  void begin_stop(const std::optional<early_stop>& at) {
    if (!at)
      return;
    spdlog::info("{}: stopping every actor", stop_reason(*at, facts_.target_accuracy));
    stop_.begin(*at, clock_type::now());
    pass_.tell_started(plan_, caf::make_message(messages::control{
                                messages::control_kind::shutdown, at->epoch, 0,
                                "stop_at_accuracy", {}}));
  }

  /// While stopping, a failure or a lost actor ends nothing: the actors
  /// that report are the result. Whether the run is stopping.
  bool stopping_ignores(const std::string& what) const {
    if (!stop_.stopping())
      return false;
    spdlog::debug("while stopping: {}", what);
    return true;
  }

  void on_weights(messages::tensor_set& part) {
    auto whole = from_current() ? parts_.take(std::move(part)) : std::nullopt;
    if (!whole)
      return;
    auto& w = *whole;
    if (w.kind == "epoch_weights" && !w.invalid && options_.epoch_weights)
      return record_.weights(best_, std::move(w));
    if (w.kind != "weights" || w.invalid)
      return spdlog::warn("ignored a tensor_set '{}' from '{}' (only stage weights are expected){}",
                          w.kind, w.from, w.invalid ? ": " + describe(w.invalid) : "");
    collected_.weights(std::move(w));
  }

  void on_progress(const messages::progress& p) {
    if (from_current())
      progress_.update(p.actor, p.epoch, p.samples, p.loss);
  }

  void on_control(const messages::control& c) {
    if (c.kind != messages::control_kind::start || !from_current())
      return;
    progress_.set_total(c.value);
    // A fault past the job's end never fires: refused by the parser where it
    // knows the length, said here where only the source's count tells it.
    for (const auto& warning :
         recovery_.unreachable_faults(c.value, facts_.epochs, facts_.batch_size))
      spdlog::warn("{}", warning);
  }

  void on_trained(const std::string& actor, int64_t trained, int64_t duplicates) {
    if (from_current())
      collected_.trained(actor, trained, duplicates);
  }

  /// A sender reports a fault it acted on ("dropped": a drop fault).
  void on_fault_report(const std::string& what, const std::string& from, int64_t step) {
    if (from_current() && what == "dropped")
      on_dropped(from, step);
  }

  /// An actor failed: the run fails with the code it reported (a LibTorch
  /// error is compute_failed, a file bad_file).
  caf::error on_failure(const std::string& actor, uint8_t code, const std::string& what) {
    if (!from_current() || stopping_ignores(actor + " failed: " + what))
      return caf::none;
    return recovery_.failed("actor_failed", actor,
                            make_error(failure_code(code), actor + ": " + what));
  }

  caf::error on_down(const caf::down_msg& msg) {
    auto why = self_->system().render(msg.reason);
    if (auto lost = nodes_.lose(msg.source))
      return node_lost(*lost, "lost node '" + *lost + "': its connection closed: the node "
                                "process ended (killed, crashed, out of memory) or its host "
                                "went down (" + why + ")");
    auto* a = pass_.find(msg.source);
    if (a == nullptr || a->done)
      return caf::none;
    if (stopping_ignores(a->name + " ended: " + why)) {
      a->done = true; // it will not report
      return caf::none;
    }
    auto what = a->role + " '" + a->name + "' on node '" + a->node + "' terminated: " + why;
    if (!cluster_.recovers()) // its node may be going: say how a run survives that
      what += "; " + no_recovery_hint(cluster_.runtime);
    return recovery_.failed("actor_down", a->name, make_error(errc::actor_failed, what));
  }

  // -- lost nodes: a closed connection (on_down) or silence (node_watch.hpp) ---------

  /// The watch says `node` has not answered for `silent_ms`: lost past its
  /// limit, else warned about (job_nodes::late).
  caf::error on_late(const std::string& node, int64_t silent_ms) {
    if (auto lost = nodes_.late(node, silent_ms))
      return node_lost(node, *lost);
    return caf::none;
  }

  /// Node `node` is lost (`what` says how): the failure, saying why the run
  /// cannot recover when it cannot.
  caf::error node_lost(const std::string& node, std::string what) {
    if (stopping_ignores(what))
      return caf::none; // its actors are left out when the stop gives up on them
    if (!cluster_.recovers())
      return salvage(what + "; " + no_recovery_hint(cluster_.runtime));
    return recovery_.failed("node_lost", node, make_error(errc::node_unreachable, what));
  }

  /// A node is lost and the run cannot recover (`what` says so): the actors
  /// on the other nodes are stopped as at runtime.stop_at_accuracy, each
  /// sending its trained count, weights and final report as they are now,
  /// so that the metrics and the model keep the work done. The pass ends
  /// when they have reported; the run then fails (job_result::failed).
  caf::error salvage(const std::string& what) {
    spdlog::error("{}", what);
    spdlog::warn("stopping the actors on the other nodes to keep their work (metrics, weights)");
    result_.failed = what;
    for (const auto& planned : plan_.actors)
      if (auto* a = pass_.find(planned.name); a != nullptr && nodes_.spawner_of(a->node) == nullptr)
        a->done = true; // on a lost node: it will not report
    stop_.salvage(clock_type::now());
    pass_.tell_started(plan_, caf::make_message(messages::control{
                                messages::control_kind::shutdown, 0, 0, "node_lost", {}}));
    return caf::none;
  }

  /// The stall timeout: the topology's (runtime.stall_timeout_ms) or the
  /// run's, the shorter.
  clock_type::duration stall_limit() const {
    return std::min<clock_type::duration>(options_.stall_timeout, cluster_.runtime.stall_timeout);
  }

  caf::error on_tick() {
    auto limit = stall_limit();
    auto now = clock_type::now();
    if (stop_.stopping()) {
      // Salvaging: an actor that waits for the lost node's work never ends;
      // the others get the connection timeout and 10 s to report.
      auto salvage = cluster_.runtime.connection_timeout + std::chrono::seconds(10);
      auto wait = stop_.salvaging() ? std::min<clock_type::duration>(limit, salvage) : limit;
      if (stop_.past(wait, now))
        for (const auto& name : pass_.give_up_unfinished())
          spdlog::warn("'{}' sent no final report after the stop: left out of the results", name);
      return caf::none;
    }
    inject(recovery_.faults().due(now - training_started_, now));
    begin_stop(stop_.time(std::chrono::duration<double>(now - first_pass_started_).count()));
    return live_.stalled(limit, clock_type::now()) ? stalled(limit) : caf::none;
  }

  /// Sends start to the actors the plan starts; the pass's clock begins.
  void start_pass() {
    pass_.start(plan_);
    training_started_ = clock_type::now();
    live_.start(training_started_);
    if (first_pass_started_ == clock_type::time_point{})
      first_pass_started_ = training_started_;
    recovery_.pass_started();
  }

  /// Runs the pass until every actor sent its final report (none) or
  /// something failed (the failure).
  caf::error train() {
    start_pass();
    caf::error failure;
    const auto tick = std::chrono::milliseconds(250);
    auto ticked = clock_type::now();
    while (pass_.unfinished() > 0 && !failure) {
      if (options_.interrupted != nullptr && options_.interrupted->load()) {
        failure = make_error(errc::interrupted, "stopping every actor");
        break;
      }
      // Each handler drops the messages of an earlier pass (before a restart).
      self_->receive(
        [&](final_atom, messages::actor_report& r) { on_final(r); },
        [&](epoch_atom, messages::actor_report& r) { on_epoch(r); },
        [&](messages::tensor_set& w) { on_weights(w); },
        [&](messages::progress& p) { on_progress(p); },
        [&](messages::control& c) { on_control(c); },
        [&](trained_atom, std::string& actor, int64_t trained, int64_t duplicates) {
          on_trained(actor, trained, duplicates);
        },
        [&](step_atom, std::string&, int64_t step) { on_step(step); },
        [&](heartbeat_atom, std::string& actor, int64_t step, int64_t work,
            std::string& waiting) { pass_.heard(live_, actor, step, work, waiting); },
        [&](fault_atom, std::string& what, std::string& from, int64_t step) {
          on_fault_report(what, from, step);
        },
        [&](failure_atom, std::string& actor, uint8_t code, std::string& what) {
          failure = on_failure(actor, code, what);
        },
        [&](caf::down_msg& msg) { failure = on_down(msg); },
        [&](late_atom, std::string& node, int64_t ms) { failure = on_late(node, ms); },
        [&](back_atom, std::string& node, int64_t ms) { nodes_.back(node, ms); },
        caf::after(tick) >> [] {});
      // Every tick, even while messages keep coming: heartbeats that do
      // not advance must not hide a stall.
      if (!failure && clock_type::now() - ticked >= tick) {
        ticked = clock_type::now();
        failure = on_tick();
      }
    }
    progress_.clear();
    return failure;
  }

  // -- faults (fault_sending.hpp) and recovery (job_recovery.hpp) --------------------

  /// Sends the faults the injector fired (fault_sending.hpp).
  void inject(const std::vector<fault_spec>& fired) {
    for (const auto& f : fired)
      send_fault(self_.ptr(), f, pass_, nodes_, recovery_.faults().last_step());
  }

  /// The job made step `step`: node faults set for it fire, and chaos draws.
  void on_step(int64_t step) {
    if (!from_current() || stop_.stopped())
      return;
    std::vector<std::string> trainable;
    for (const auto& name : plan_.trainable_names())
      if (pass_.find(name) != nullptr)
        trainable.push_back(name);
    inject(recovery_.faults().on_step(step, clock_type::now(), nodes_.live(), trainable));
  }

  /// A sender dropped a microbatch (a drop fault): the time detection counts from.
  void on_dropped(const std::string& from, int64_t step) {
    for (const auto& f : recovery_.faults().dropped(from, clock_type::now()))
      spdlog::warn("injected fault: {} dropped its microbatch of step {} to {}", from, step,
                   f.to);
  }

  /// Stops every actor of the failed pass, waits until they are gone (so
  /// that none writes a checkpoint while the step is chosen), and picks the
  /// newest step every trainable actor has a valid checkpoint of.
  caf::error recover(const caf::error& failure) {
    auto detected = clock_type::now();
    progress_.clear();
    if (auto err = recovery_.restart_refused(failure, live_, result_.restarts))
      return err;
    spdlog::warn("{}: restarting the job from its checkpoints", describe(failure));
    stop_pass();
    if (nodes_.empty())
      return make_error(errc::node_unreachable, "every node is lost: " + describe(failure));
    // Only this run's checkpoints: one of another run is an error, never used.
    auto step = newest_own_step(recovery_.checkpoints(), plan_.trainable_names());
    if (!step)
      return step.error();
    recovery_.restart_from(*step, live_, detected);
    result_.restarts += 1;
    spdlog::warn("restart {} of at most {}: every actor restarts from step {}{}",
                 result_.restarts, cluster_.runtime.max_restarts, *step,
                 *step == 0 ? " (the initial weights)" : "");
    return caf::none;
  }

  /// The actors of the new pass are wired and about to start.
  void resumed() {
    if (auto record = recovery_.resumed(clock_type::now())) {
      spdlog::info("{}", recovered_text(*record));
      result_.faults.push_back(std::move(*record));
    }
  }

  /// Kills every actor of this pass (a node whose spawner goes down
  /// meanwhile is lost) and forgets what they reported.
  void stop_pass() {
    pass_.stop(cluster_.runtime.connection_timeout + std::chrono::seconds(3),
               [&](const caf::down_msg& msg) { nodes_.lose(msg.source); });
    collected_.clear();
  }

  void shutdown() {
    pass_.shutdown();
    nodes_.shutdown();
  }

  caf::scoped_actor self_;
  const cluster& cluster_;
  const job_facts& facts_;
  const job_plan& plan_;
  run_options options_;
  progress_line progress_;
  job_nodes nodes_;
  job_pass pass_;              ///< this pass's actors
  result_collector collected_; ///< what they reported
  tensor_set_assembler parts_;  ///< weights sent in parts (flow/tensor_parts.hpp)
  job_result result_;

  liveness live_; ///< this pass's heartbeats, and when each node was last heard

  job_recovery recovery_; ///< faults, checkpoints, what failed
  clock_type::time_point training_started_;   ///< this pass's start (timed faults)
  clock_type::time_point first_pass_started_; ///< the job's first pass's (epoch times)
  best_epochs best_; ///< each result's best epoch by validation accuracy, its weights
  epoch_record record_; ///< the epochs judged and the best weights, kept for --resume
  run_stop stop_; ///< target_accuracy, early stopping, the time budget, a salvage
};

} // namespace

caf::expected<job_result> run_actor_job(caf::actor_system& sys, const cluster& c,
                                        const job_facts& facts, const job_plan& plan,
                                        const run_options& options) {
  coordinator run{sys, c, facts, plan, options};
  return run.run();
}

} // namespace runtime
} // namespace baton::actors
