#include "actors/runtime/coordinator.hpp"

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "actors/config/role_settings.hpp"
#include "actors/flow/activity.hpp"
#include "actors/flow/protocols.hpp"

#include "actors/runtime/checkpoints.hpp"
#include "actors/runtime/fault_injector.hpp"
#include "actors/runtime/job_nodes.hpp"
#include "actors/runtime/job_pass.hpp"
#include "actors/runtime/liveness.hpp"
#include "actors/runtime/placement.hpp"
#include "actors/runtime/progress_line.hpp"
#include "actors/runtime/result_collector.hpp"
#include "messages/errc.hpp"
#include "messages/type_ids.hpp"
#include "messages/types.hpp"

namespace baton::actors {
inline namespace runtime {

namespace {

using clock_type = std::chrono::steady_clock;

/// The code of an actor's failure message (failure_atom): a code of baton's
/// errc; anything else (none, a code this build does not know) is
/// actor_failed, so that a failure never reads as no error.
errc failure_code(uint8_t code) {
  bool known = code > static_cast<uint8_t>(errc::none) &&
               code <= static_cast<uint8_t>(errc::interrupted);
  return known ? static_cast<errc>(code) : errc::actor_failed;
}

class coordinator {
public:
  coordinator(caf::actor_system& sys, const cluster& c, const job_facts& facts,
              const job_plan& plan, const run_options& options)
    : self_(sys), cluster_(c), facts_(facts), plan_(plan), options_(options),
      progress_(options.progress_tty, plan), nodes_(self_.ptr(), c.runtime.request_timeout),
      pass_(self_.ptr(), c.runtime.request_timeout), collected_(plan) {}

  ~coordinator() { shutdown(); }

  caf::expected<job_result> run() {
    auto started = clock_type::now();
    std::optional<clock_type::time_point> training_started;
    std::vector<messages::node_report> at_training_start;
    if (auto err = nodes_.connect(cluster_, facts_.file, options_.roles))
      return err;
    if (auto err = prepare_recovery())
      return err;
    warn_short_stall_timeout();
    // Each pass runs the job from its restore step; a failure the topology
    // recovers from leads to another pass from the newest common checkpoint.
    for (;;) {
      if (auto err = spawn_all())
        return err;
      if (auto err = pass_.wire(plan_))
        return err;
      // Each pass: the actors are new (a drop that happened is not set again).
      if (auto err = pass_.arm(faults_.edge_faults()))
        return err;
      resumed();
      if (!training_started) {
        nodes_.collect_reports(cluster_, at_training_start);
        training_started = clock_type::now();
      }
      auto failure = train();
      if (!failure)
        break;
      if (!recoverable_)
        return failure;
      if (auto err = recover(failure))
        return err;
    }
    nodes_.collect_reports(cluster_, result_.nodes);
    cpu_since(at_training_start, result_.nodes);
    if (checkpoints_.dir == options_.temporary_checkpoint_dir)
      result_.checkpoint_dir.clear(); // removed by its owner: nothing to resume from
    auto ended = clock_type::now();
    result_.wall_seconds = std::chrono::duration<double>(ended - started).count();
    result_.train_seconds = std::chrono::duration<double>(ended - *training_started).count();
    result_.topology_file = facts_.file;
    result_.job = facts_.job;
    collected_.finish(result_);
    return std::move(result_);
  }

private:
  /// Each node's CPU seconds of `ended` less those of `started` (by name):
  /// the CPU of training, over the same interval as train_seconds, not the
  /// start-up's (loading LibTorch and the data), which made a node's CPU use
  /// over the training time exceed 100%.
  static void cpu_since(const std::vector<messages::node_report>& started,
                        std::vector<messages::node_report>& ended) {
    for (auto& node : ended)
      for (const auto& before : started)
        if (before.name == node.name)
          node.cpu_seconds = std::max(0.0, node.cpu_seconds - before.cpu_seconds);
  }

  // -- spawning a pass (connecting: job_nodes) ------------------------------------

  /// Starts `a` on the node it is placed on, or where a lost node's actors went.
  caf::error spawn_one(const planned_actor& a) {
    auto node = nodes_.node_for(a.node, pass_.actors_on());
    const auto* spawner = nodes_.spawner_of(node);
    if (spawner == nullptr)
      return make_error(errc::bad_config, facts_.file + ": " + a.role + " '" + a.name +
                                            "' is placed on no known node ('" + node + "')");
    auto run = run_settings_of(a, plan_, checkpoints_, faults_, options_.trace);
    return pass_.spawn(*spawner, node, a, with_run(a.settings, run));
  }

  /// Compute threads the plan asks of each node, against its cores. Only
  /// budgets the topology set are warned about: derived ones give every
  /// actor an equal share of the cores, at least one thread.
  void check_thread_budget() const {
    if (plan_.threads_asked_by.empty())
      return;
    for (const auto& over : oversubscribed_nodes(plan_, nodes_.cores()))
      spdlog::warn("node '{}' runs {} compute threads on {} cores (as the topology asks with "
                   "{}): they will share the cores",
                   over.node.empty() ? "embedded" : over.node, over.threads, over.cores,
                   plan_.threads_asked_by);
  }

  caf::error spawn_all() {
    check_thread_budget();
    for (const auto& a : plan_.actors)
      if (auto err = spawn_one(a))
        return err;
    return caf::none;
  }

  // -- training: each handler ignores a message of an earlier pass ---------------

  /// Whether the message being handled comes from an actor of this pass.
  /// Such a message (a report, not a heartbeat) shows the job advancing and
  /// its node alive.
  bool from_current() {
    auto* a = pass_.find(caf::actor_cast<caf::actor_addr>(self_->current_sender()));
    if (a != nullptr)
      live_.reported(a->node, clock_type::now());
    return a != nullptr;
  }

  // -- liveness (liveness.hpp): heartbeats and the stall detector -------------------

  /// A heartbeat of `actor` (at `step`, `work` pieces of work done, waiting
  /// for `waiting`); one of an earlier pass is dropped.
  void on_heartbeat(const std::string& actor, int64_t step, int64_t work,
                    const std::string& waiting) {
    auto* a = pass_.find(caf::actor_cast<caf::actor_addr>(self_->current_sender()));
    if (a != nullptr && a->name == actor)
      live_.heard(actor, a->node, step, work, waiting, clock_type::now());
  }

  /// The actors of this pass that have not sent their final report.
  std::vector<live_actor> unfinished_actors() {
    std::vector<live_actor> actors;
    for (const auto& planned : plan_.actors)
      if (const auto* a = pass_.find(planned.name); a != nullptr && !a->done)
        actors.push_back({a->name, a->node});
    return actors;
  }

  /// Asks every unfinished actor for a heartbeat and waits up to a second
  /// for the answers: an actor that waits for a message answers with what
  /// it waits for; one busy in a computation, or hung, does not.
  void ask_heartbeats(const std::vector<live_actor>& actors) {
    live_.asking(clock_type::now());
    for (const auto& a : actors)
      self_->send(pass_.find(a.name)->handle, heartbeat_atom::value);
    auto deadline = clock_type::now() + std::chrono::seconds(1);
    bool timed_out = false;
    while (!timed_out && !live_.all_answered(actors)) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline -
                                                                         clock_type::now());
      self_->receive(
        [&](heartbeat_atom, std::string& actor, int64_t step, int64_t work,
            std::string& waiting) { on_heartbeat(actor, step, work, waiting); },
        caf::after(std::max(left, std::chrono::milliseconds(1))) >> [&] { timed_out = true; });
    }
  }

  /// No actor advanced for `limit`: the stall, naming every unfinished
  /// actor, its step and what it waits for; none when an answer to the
  /// heartbeat request shows that the job advanced after all.
  caf::error stalled(clock_type::duration limit) {
    auto actors = unfinished_actors();
    ask_heartbeats(actors);
    auto now = clock_type::now();
    if (!live_.stalled(limit, now))
      return caf::none;
    return failed("stalled", "job",
                  make_error(errc::actor_failed, live_.stall_report(actors, limit, now)));
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
      spdlog::info("epoch {} {:<10} test accuracy {:6.2f}%  train loss {:.4f}  ({} samples)",
                   e.epoch + 1, report->actor, 100 * e.test_accuracy, e.train_loss, e.samples);
      if (!std::isfinite(e.train_loss))
        warn_diverged(report->actor, e.epoch);
      note_accuracy(report->actor, e, seconds);
    }
  }

  /// `actor`'s training loss in epoch `epoch` is not finite: says so, with
  /// what the mode that made the plan advises (its own keys: a data-parallel
  /// user is told of workers and batches, a 1f1b user of stale microbatch steps).
  void warn_diverged(const std::string& actor, int32_t epoch) const {
    const std::string& advice = plan_.divergence_advice;
    spdlog::warn("{}: the training loss of epoch {} is not finite, training diverged; {}",
                 actor, epoch + 1,
                 advice.empty() ? "lower the optimizer's lr or momentum" : advice);
  }

  // -- stopping at an accuracy (target_accuracy) --------------------------

  /// Head `head`'s epoch `e`, complete `seconds` into training: once every
  /// head has reached target_accuracy (in this or an earlier
  /// epoch), the run stops.
  void note_accuracy(const std::string& head, const messages::epoch_result& e, double seconds) {
    last_epoch_ = early_stop{head, e.epoch, e.test_accuracy, seconds, "stop_after_seconds"};
    const double target = facts_.target_accuracy;
    if (target <= 0 || result_.stopped || e.test_accuracy < target)
      return;
    reached_.insert(head);
    if (reached_.size() >= plan_.result_groups().size())
      begin_stop(early_stop{head, e.epoch, e.test_accuracy, seconds});
  }

  /// Every head reached the accuracy: the actors the plan starts (the
  /// source, or every worker and shard) are asked to stop (control
  /// shutdown). A source ends its stream at the next step boundary, and
  /// the actors downstream finish as at its end; a worker or shard sends
  /// its final report at once and quits. The pass ends when all have reported.
  void begin_stop(early_stop at) {
    if (at.reason == "stop_at_accuracy")
      spdlog::info("epoch {} of {} reached {:.2f}% (target_accuracy {:.2f}%): stopping "
                   "every actor",
                   at.epoch + 1, at.actor, 100 * at.test_accuracy,
                   100 * facts_.target_accuracy);
    else
      spdlog::info("trained {:.1f} s (runtime.stop_after_seconds): stopping every actor",
                   at.seconds);
    const auto epoch = at.epoch;
    result_.stopped = std::move(at);
    stop_began_ = clock_type::now();
    pass_.tell_started(plan_, caf::make_message(
      messages::control{messages::control_kind::shutdown, epoch, 0, "stop_at_accuracy", {}}));
  }

  /// The time budget (runtime.stop_after_seconds) is spent: the run stops
  /// as at an accuracy, keeping the last epoch reported.
  void check_budget() {
    const double budget = cluster_.runtime.stop_after_seconds;
    if (budget <= 0 || result_.stopped || salvaging_)
      return;
    auto trained = std::chrono::duration<double>(clock_type::now() - first_pass_started_).count();
    if (trained < budget)
      return;
    auto at = last_epoch_;
    at.seconds = trained;
    begin_stop(std::move(at));
  }

  /// While stopping, a failure or a lost actor ends nothing: the actors
  /// that report are the result. Whether the run is stopping.
  bool stopping_ignores(const std::string& what) const {
    if (!result_.stopped && !salvaging_)
      return false;
    spdlog::debug("while stopping: {}", what);
    return true;
  }

  /// The actors that have not reported within `limit` of the stop are left out.
  void end_stop_after(clock_type::duration limit) {
    if (clock_type::now() - stop_began_ < limit)
      return;
    for (const auto& name : pass_.give_up_unfinished())
      spdlog::warn("'{}' sent no final report after the stop: left out of the results", name);
  }

  void on_weights(messages::tensor_set& w) {
    if (!from_current())
      return;
    if (w.kind != "weights" || w.invalid) {
      spdlog::warn("ignored a tensor_set '{}' from '{}' (only stage weights are expected)",
                   w.kind, w.from);
      return;
    }
    collected_.weights(std::move(w));
  }

  void on_progress(const messages::progress& p) {
    if (from_current())
      progress_.update(p.actor, p.epoch, p.samples, p.loss);
  }

  void on_control(const messages::control& c) {
    if (c.kind == messages::control_kind::start && from_current()) {
      progress_.set_total(c.value);
      warn_unreachable_faults(c.value);
    }
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
    return failed("actor_failed", actor, make_error(failure_code(code), actor + ": " + what));
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
      what += "; " + no_recovery_hint();
    return failed("actor_down", a->name, make_error(errc::actor_failed, what));
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
      return salvage(what + "; " + no_recovery_hint());
    return failed("node_lost", node, make_error(errc::node_unreachable, what));
  }

  /// Why a run that does not recover could not, and how to make it survive
  /// a lost node: the run refuses to start again from the initial weights,
  /// which would throw away the work done without saying so
  /// (docs/faults-and-recovery.md).
  std::string no_recovery_hint() const {
    if (cluster_.runtime.max_restarts == 0)
      return "no recovery: runtime.max_restarts is 0 (set it above 0 to restart from the "
             "newest checkpoint)";
    return "no recovery: the run writes no checkpoints to restart from "
           "(runtime.checkpoint_every is 0); to survive a lost node, checkpoint every N steps "
           "with runtime.checkpoint_every: N (e.g. --set runtime.checkpoint_every=50): the job "
           "then restarts from its newest checkpoint on the surviving nodes";
  }

  /// A node is lost and the run cannot recover (`what` says so): the actors
  /// on the other nodes are stopped as at runtime.stop_at_accuracy, each
  /// sending its trained count, weights and final report as they are now,
  /// so that the metrics and the model keep the work done. The pass ends
  /// when they have reported; the run then fails (job_result::failed).
  caf::error salvage(const std::string& what) {
    spdlog::error("{}", what);
    spdlog::warn("stopping the actors on the other nodes to keep their work (metrics, weights)");
    salvaging_ = true;
    result_.failed = what;
    for (const auto& planned : plan_.actors)
      if (auto* a = pass_.find(planned.name); a != nullptr && nodes_.spawner_of(a->node) == nullptr)
        a->done = true; // on a lost node: it will not report
    stop_began_ = clock_type::now();
    pass_.tell_started(plan_, caf::make_message(messages::control{
                                messages::control_kind::shutdown, 0, 0, "node_lost", {}}));
    return caf::none;
  }

  /// How long a salvage waits for the final reports.
  clock_type::duration salvage_wait() const {
    return cluster_.runtime.connection_timeout + std::chrono::seconds(10);
  }

  caf::error on_tick() {
    if (options_.interrupted != nullptr && options_.interrupted->load())
      return make_error(errc::interrupted, "stopping every actor");
    auto limit = std::min<clock_type::duration>(options_.stall_timeout,
                                                cluster_.runtime.stall_timeout);
    if (result_.stopped || salvaging_) {
      // Salvaging: an actor that waits for the lost node's work never ends.
      end_stop_after(salvaging_ ? std::min<clock_type::duration>(limit, salvage_wait())
                                : limit);
      return caf::none;
    }
    fire_timed_faults();
    check_budget();
    if (live_.stalled(limit, clock_type::now()))
      return stalled(limit);
    return caf::none;
  }

  /// A stall timeout close to the heartbeat interval (activity.hpp) can take
  /// a healthy actor, between two heartbeats, for a stalled one: said once.
  void warn_short_stall_timeout() const {
    auto limit = std::min<clock_type::duration>(options_.stall_timeout,
                                                cluster_.runtime.stall_timeout);
    if (limit >= 3 * activity::heartbeat_interval)
      return;
    spdlog::warn("runtime.stall_timeout_ms is {} ms: actors send a heartbeat once a second while "
                 "they work, so a timeout under 3000 ms may take a healthy run for a stalled one",
                 std::chrono::duration_cast<std::chrono::milliseconds>(limit).count());
  }

  /// Sends start to the actors the plan starts; the pass's clock begins.
  void start_pass() {
    pass_.start(plan_);
    training_started_ = clock_type::now();
    live_.start(training_started_);
    if (first_pass_started_ == clock_type::time_point{})
      first_pass_started_ = training_started_;
    recoverable_ = false;
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
            std::string& waiting) { on_heartbeat(actor, step, work, waiting); },
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

  /// A fault at a step past the job's end never fires. The parser refuses
  /// one when it knows the job's length; when the data is read on a listed
  /// node it is known only now, from the source's sample count (all epochs):
  /// said once, as the run starts.
  void warn_unreachable_faults(int64_t samples) {
    if (length_checked_)
      return;
    length_checked_ = true;
    for (const auto& warning : unreachable_fault_warnings(
           cluster_.faults, samples, facts_.epochs, facts_.batch_size))
      spdlog::warn("{}", warning);
  }

  // -- recovery (actors/roles/checkpointing.hpp) ------------------------------------------

  /// Checks the faults against the nodes, chooses the checkpoint directory
  /// and, with --resume, the step to continue from.
  caf::error prepare_recovery() {
    if (auto why = unknown_fault_node(cluster_.faults, nodes_.live(), cluster_.embedded()))
      return make_error(errc::bad_config, *why);
    faults_ = fault_injector{cluster_.faults};
    auto choice = choose_checkpoints(cluster_.runtime, plan_, options_);
    if (!choice)
      return std::move(choice.error());
    checkpoints_ = std::move(*choice);
    if (checkpoints_.kept)
      result_.checkpoint_dir = checkpoints_.dir;
    return caf::none;
  }

  /// Records what failed; recoverable when the topology recovers and the
  /// run was not interrupted.
  caf::error failed(const std::string& kind, const std::string& target, caf::error err) {
    recoverable_ = cluster_.recovers();
    failure_kind_ = kind;
    failure_target_ = target;
    return err;
  }

  /// Injects a fault the injector fired: a node's spawner kills or stops
  /// its process; chaos's throw goes to the actor.
  void inject(const fault_spec& f) {
    if (f.kind == "throw") {
      spdlog::warn("chaos: '{}' throws (step {})", f.actor, f.at_step);
      if (const auto* a = pass_.find(f.actor))
        self_->send(a->handle, fault_atom::value, std::string{"throw (chaos)"});
      return;
    }
    const auto* spawner = nodes_.spawner_of(f.node);
    if (spawner == nullptr)
      return;
    spdlog::warn("injecting fault: {} node '{}' (at step {})", f.kind, f.node,
                 faults_.last_step());
    self_->send(*spawner, fault_atom::value,
                std::string{f.kind == "kill_node" ? "kill" : "stop"},
                static_cast<int32_t>(f.stopped.count()));
  }

  void fire_timed_faults() {
    auto now = clock_type::now();
    for (const auto& f : faults_.due(now - training_started_, now))
      inject(f);
  }

  /// The job made step `step`: node faults set for it fire, and chaos draws.
  void on_step(int64_t step) {
    if (!from_current() || result_.stopped)
      return;
    std::vector<std::string> trainable;
    for (const auto& name : plan_.trainable_names())
      if (pass_.find(name) != nullptr)
        trainable.push_back(name);
    for (const auto& f : faults_.on_step(step, clock_type::now(), nodes_.live(), trainable))
      inject(f);
  }

  /// A sender dropped a microbatch (a drop fault): the time detection counts from.
  void on_dropped(const std::string& from, int64_t step) {
    for (const auto& f : faults_.dropped(from, clock_type::now()))
      spdlog::warn("injected fault: {} dropped its microbatch of step {} to {}", from, step,
                   f.to);
  }

  /// Stops every actor of the failed pass, waits until they are gone (so
  /// that none writes a checkpoint while the step is chosen), and picks the
  /// newest step every trainable actor has a valid checkpoint of.
  caf::error recover(const caf::error& failure) {
    auto detected = clock_type::now();
    progress_.clear();
    if (auto err = recurring(failure))
      return err;
    if (result_.restarts >= cluster_.runtime.max_restarts)
      return make_error(errc::actor_failed,
                        describe(failure) + " (gave up after " +
                          std::to_string(result_.restarts) + " restarts: runtime.max_restarts)");
    spdlog::warn("{}: restarting the job from its checkpoints", describe(failure));
    stop_pass();
    if (nodes_.empty())
      return make_error(errc::node_unreachable, "every node is lost: " + describe(failure));
    // Only this run's checkpoints: one of another run is an error, never used.
    auto own = newest_own_step(checkpoints_, plan_.trainable_names());
    if (!own)
      return own.error();
    auto& step = checkpoints_.restore_step;
    step = *own;
    open_fault_ = faults_.record_failure(failure_kind_, failure_target_, step, detected);
    measure_detection(*open_fault_, detected);
    detected_at_ = detected;
    result_.restarts += 1;
    spdlog::warn("restart {} of at most {}: every actor restarts from step {}{}",
                 result_.restarts, cluster_.runtime.max_restarts, step,
                 step == 0 ? " (the initial weights)" : "");
    return caf::none;
  }

  /// An error an actor reported that no injected fault explains, at the
  /// same step of the same actor as one before a restart: a restart would
  /// meet it again, so the run ends with it (and its code) at once. The
  /// step is the actor's last heartbeat's (guarded sends one before the
  /// failure), or the pass's restore step when it made none since.
  caf::error recurring(const caf::error& failure) {
    if (failure_kind_ != "actor_failed" || faults_.explains(failure_target_))
      return caf::none;
    auto step = live_.step_of(failure_target_);
    if (step < 0)
      step = checkpoints_.restore_step;
    if (!faults_.recurs(failure_target_, failure.code(), step))
      return caf::none;
    bool ours = failure.category() == error_category_atom;
    return make_error(ours ? static_cast<errc>(failure.code()) : errc::actor_failed,
                      (ours ? context_of(failure) : describe(failure)) +
                        " (it recurred at step " + std::to_string(step) +
                        " after a restart, with no fault injected: not retried, a restart "
                        "would meet it again)");
  }

  /// A failure baton did not inject is detected after no time it can
  /// measure, except a lost node (since its last heartbeat or report) and a
  /// stall (since the job last advanced); else the latency stays unknown.
  void measure_detection(fault_record& f, clock_type::time_point detected) const {
    if (f.detected_after_ms >= 0)
      return;
    std::optional<clock_type::time_point> since;
    if (f.kind == "node_lost")
      since = live_.last_heard_from(f.target);
    else if (f.kind == "stalled")
      since = live_.last_advanced();
    if (since)
      f.detected_after_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(detected - *since).count();
  }

  /// The actors of the new pass are wired and about to start.
  void resumed() {
    if (!open_fault_)
      return;
    open_fault_->recovered_after_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                        clock_type::now() - detected_at_)
                                        .count();
    spdlog::info("{}", recovered_text(*open_fault_));
    result_.faults.push_back(*open_fault_);
    open_fault_.reset();
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
  job_result result_;

  liveness live_; ///< this pass's heartbeats, and when each node was last heard

  // Recovery.
  fault_injector faults_;
  checkpoint_choice checkpoints_; ///< restore_step: the step this pass starts from
  bool length_checked_ = false;   ///< warn_unreachable_faults ran
  bool recoverable_ = false;
  std::string failure_kind_, failure_target_;
  std::optional<fault_record> open_fault_;
  clock_type::time_point detected_at_;
  clock_type::time_point training_started_;   ///< this pass's start (timed faults)
  clock_type::time_point first_pass_started_; ///< the job's first pass's (epoch times)
  clock_type::time_point stop_began_;         ///< target_accuracy was reached
  std::set<std::string> reached_;             ///< heads that reached it
  /// The last epoch reported (what a stop at the time budget keeps).
  early_stop last_epoch_{"", -1, 0, 0, "stop_after_seconds"};
  bool salvaging_ = false;                    ///< a node is lost: keeping the work done
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
