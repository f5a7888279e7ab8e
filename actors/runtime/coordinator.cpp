#include "actors/runtime/coordinator.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <thread>

#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <spdlog/spdlog.h>

#include "actors/config/role_spec.hpp"
#include "actors/config/yaml_field.hpp"
#include "actors/flow/interfaces.hpp"
#include "actors/roles/recovery.hpp"
#include "actors/runtime/fault_injector.hpp"
#include "actors/runtime/placement.hpp"
#include "actors/runtime/progress_line.hpp"
#include "actors/runtime/spawner.hpp"
#include "messages/errc.hpp"
#include "messages/type_ids.hpp"
#include "messages/types.hpp"

namespace baton::actors {

namespace {

using clock_type = std::chrono::steady_clock;

/// An actor the coordinator started.
struct placed_actor {
  std::string name;
  std::string role;
  std::string node;
  caf::actor handle;
  bool done = false; ///< its final report arrived
};

/// One report for the replicas of a stage: samples add up, the training loss
/// is the samples-weighted mean, and accuracy is replica 0's (evaluation
/// microbatches all go to replica 0). Replicas end with the same weights; the
/// digest is replica 0's (each replica's own is in the actors list).
messages::actor_report merge_replica_reports(std::vector<messages::actor_report> reports) {
  std::sort(reports.begin(), reports.end(),
            [](const auto& a, const auto& b) { return a.actor < b.actor; });
  auto merged = reports.front();
  merged.actor = merged.actor.substr(0, merged.actor.find('.'));
  for (size_t i = 1; i < reports.size(); ++i) {
    merged.samples += reports[i].samples;
    for (size_t e = 0; e < merged.epochs.size() && e < reports[i].epochs.size(); ++e) {
      auto& into = merged.epochs[e];
      const auto& from = reports[i].epochs[e];
      auto samples = into.samples + from.samples;
      if (samples > 0)
        into.train_loss = (into.train_loss * into.samples + from.train_loss * from.samples) /
                          static_cast<double>(samples);
      into.samples = samples;
    }
  }
  if (!merged.epochs.empty())
    merged.train_loss = merged.epochs.back().train_loss;
  return merged;
}

class coordinator {
public:
  coordinator(caf::actor_system& sys, const topology& t, const job_plan& plan,
              const run_options& options)
    : self_(sys), topology_(t), plan_(plan), options_(options),
      progress_(options.progress_tty) {}

  ~coordinator() { shutdown(); }

  caf::expected<job_result> run() {
    auto started = clock_type::now();
    std::optional<clock_type::time_point> training_started;
    if (auto err = connect_nodes())
      return err;
    if (auto err = prepare_recovery())
      return err;
    // Each pass runs the job from restore_step_; a failure the topology
    // recovers from leads to another pass from the newest common checkpoint.
    for (;;) {
      if (auto err = spawn_all())
        return err;
      if (auto err = wire())
        return err;
      if (auto err = arm_edge_faults())
        return err;
      resumed();
      if (!training_started)
        training_started = clock_type::now();
      auto failure = train();
      if (!failure)
        break;
      if (!recoverable_)
        return failure;
      if (auto err = recover(failure))
        return err;
    }
    collect_nodes();
    if (checkpoint_dir_ == options_.temporary_checkpoint_dir)
      result_.checkpoint_dir.clear(); // removed by its owner: nothing to resume from
    auto ended = clock_type::now();
    result_.wall_seconds = std::chrono::duration<double>(ended - started).count();
    result_.train_seconds = std::chrono::duration<double>(ended - *training_started).count();
    result_.topology_file = topology_.file;
    result_.job = topology_.job;
    order_results();
    return std::move(result_);
  }

private:
  std::chrono::milliseconds timeout() const { return topology_.runtime.request_timeout; }

  // -- phase 1: spawners ---------------------------------------------------------

  caf::error connect_nodes() {
    auto& sys = self_->system();
    if (topology_.embedded()) {
      spawner_policy policy;
      policy.roles = options_.roles;
      embedded_spawner_ = spawn_spawner(sys, "embedded", std::move(policy));
      spawners_[""] = embedded_spawner_;
      node_cores_[""] = static_cast<int32_t>(std::thread::hardware_concurrency());
      return caf::none;
    }
    for (const auto& n : topology_.nodes) {
      auto spawner = connect_node(sys, n.host, n.port, n.name, topology_.runtime.tls, timeout());
      if (!spawner)
        return make_error(errc::node_unreachable,
                          (n.where.empty() ? topology_.file : n.where) + ": node '" + n.name +
                            "' at " + n.host + ":" + std::to_string(n.port) +
                            " is unreachable (is `baton node` running there?): " +
                            sys.render(spawner.error()));
      self_->monitor(*spawner);
      spawners_[n.name] = *spawner;
      self_->request(*spawner, timeout(), caf::get_atom::value, node_atom::value)
        .receive([&](messages::node_report& r) { node_cores_[n.name] = r.cores; },
                 [&](caf::error& err) {
                   spdlog::warn("node {} did not report its resources: {}", n.name,
                                describe(err));
                 });
    }
    return caf::none;
  }

  // -- phase 2: spawning -------------------------------------------------------

  caf::error spawn_one(const std::string& role, const std::string& name,
                       const std::string& placed, std::string spec) {
    auto node = node_for(placed);
    if (spawners_.count(node) == 0)
      return make_error(errc::bad_config, topology_.file + ": " + role + " '" + name +
                                            "' is placed on no known node ('" + node + "')");
    caf::error failure;
    self_->request(spawners_.at(node), timeout(),
                   messages::spawn_request{role, name, std::move(spec), {}})
      .receive(
        [&](caf::actor& handle) {
          self_->monitor(handle);
          actors_.push_back({name, role, node.empty() ? "embedded" : node, handle});
        },
        [&](caf::error& err) {
          // A node refusing bad input (a dataset it cannot read, a path
          // outside its roots) is bad input of the run: exit code 2.
          bool bad_input = err.category() == error_category_atom &&
                           (err == errc::bad_file || err == errc::bad_config);
          failure = make_error(bad_input ? static_cast<errc>(err.code()) : errc::actor_failed,
                               "cannot start " + role + " '" + name + "' on node '" +
                                 (node.empty() ? "embedded" : node) + "': " + describe(err));
        });
    return failure;
  }

  /// Compute threads the plan asks of each node, against its cores. Only
  /// budgets the topology set are warned about: derived ones give every
  /// actor an equal share of the cores, at least one thread.
  void check_thread_budget() const {
    if (!topology_.runtime.threads_asked())
      return;
    std::map<std::string, int32_t> threads; // node -> torch threads
    for (const auto& a : plan_.actors)
      threads[a.node] += a.threads;
    for (const auto& [node, n] : threads) {
      auto cores = node_cores_.count(node) ? node_cores_.at(node) : 0;
      if (cores > 0 && n > cores)
        spdlog::warn("node '{}' runs {} compute threads on {} cores (as the topology's "
                     "runtime.*_threads ask): they will share the cores",
                     node.empty() ? "embedded" : node, n, cores);
    }
  }

  /// What this pass adds to `a`'s settings: where it restarts from and, if
  /// it is trainable, its checkpoints and faults.
  run_settings run_of(const planned_actor& a) {
    run_settings run;
    if (a.trainable)
      run.recovery = recovery_of(a.name);
    run.recovery.restore_step = restore_step_;
    run.trace = options_.trace;
    return run;
  }

  caf::error spawn_all() {
    check_thread_budget();
    for (const auto& a : plan_.actors)
      if (auto err = spawn_one(a.role, a.name, a.node, with_run(a.settings, run_of(a))))
        return err;
    return caf::none;
  }

  // -- phase 3: wiring -----------------------------------------------------------

  caf::error ask(const caf::actor& target, caf::message msg, const std::string& what) {
    caf::error failure;
    self_->request(target, timeout(), std::move(msg))
      .receive([](caf::ok_atom) {},
               [&](caf::error& err) {
                 failure = make_error(errc::actor_failed, what + ": " + describe(err));
               });
    return failure;
  }

  /// Tells every actor who its coordinator is, then introduces the plan's
  /// edges in order: data edges (a sender adds its receivers in that order)
  /// and peer edges (a replica learns its peers).
  caf::error wire() {
    auto me = caf::actor_cast<caf::actor>(self_);
    for (auto& a : actors_)
      if (auto err = ask(a.handle, caf::make_message(observe_atom::value, me),
                         "cannot reach " + a.name))
        return err;
    for (const auto& e : plan_.edges) {
      const auto* from = find(e.from);
      const auto* to = find(e.to);
      if (from == nullptr || to == nullptr)
        return make_error(errc::bad_config, "the plan has an edge " + e.from + " -> " + e.to +
                                              " between actors it does not have");
      auto msg = e.kind == planned_edge::kind_t::data
                   ? caf::make_message(connect_atom::value, to->handle, to->name)
                   : caf::make_message(group_atom::value, to->handle, e.index);
      if (auto err = ask(from->handle, std::move(msg),
                         "cannot connect " + from->name + " to " + to->name))
        return err;
    }
    return caf::none;
  }

  // -- phase 4: training -----------------------------------------------------------

  placed_actor* find(const caf::actor_addr& addr) {
    for (auto& a : actors_)
      if (a.handle.address() == addr)
        return &a;
    return nullptr;
  }

  placed_actor* find(const std::string& name) {
    for (auto& a : actors_)
      if (a.name == name)
        return &a;
    return nullptr;
  }

  /// The result group `actor` reports into ("" none).
  std::string result_of(const std::string& actor) const {
    const auto* a = plan_.find(actor);
    return a == nullptr ? std::string{} : a->result;
  }

  // -- phase 4 handlers: each ignores a message of an earlier pass ---------------

  /// Whether the message being handled comes from an actor of this pass.
  bool from_current() {
    return find(caf::actor_cast<caf::actor_addr>(self_->current_sender())) != nullptr;
  }

  void on_final(messages::actor_report& r) {
    if (!from_current())
      return;
    for (auto& a : actors_)
      if (a.name == r.actor)
        a.done = true;
    auto group = result_of(r.actor);
    if (!group.empty()) {
      auto& reports = group_finals_[group];
      reports.push_back(r);
      if (reports.size() == plan_.group_size(group))
        results_[group] = merged(group, reports);
    }
    result_.actors.push_back(std::move(r));
  }

  /// One report for the members of result group `group` (see
  /// merge_replica_reports); a group of one is its member's report.
  static messages::actor_report merged(const std::string& group,
                                       const std::vector<messages::actor_report>& reports) {
    if (reports.size() == 1)
      return reports.front();
    auto report = merge_replica_reports(reports);
    report.actor = group;
    return report;
  }

  void on_epoch(const messages::actor_report& r) {
    if (!from_current())
      return;
    auto report = r;
    auto group = result_of(r.actor);
    if (plan_.group_size(group) > 1) {
      auto& reports = group_epochs_[{group, r.epochs.front().epoch}];
      reports.push_back(r);
      if (reports.size() < plan_.group_size(group))
        return;
      report = merged(group, reports);
      group_epochs_.erase({group, r.epochs.front().epoch});
    }
    progress_.clear();
    for (const auto& e : report.epochs) {
      spdlog::info("epoch {} {:<10} test accuracy {:6.2f}%  train loss {:.4f}  ({} samples)",
                   e.epoch + 1, report.actor, 100 * e.test_accuracy, e.train_loss, e.samples);
      if (!std::isfinite(e.train_loss))
        spdlog::warn("{}: the training loss is not finite, training diverged; lower the "
                     "optimizer's lr or momentum (under 1f1b every microbatch is a step)",
                     report.actor);
    }
  }

  void on_weights(messages::tensor_set& w) {
    if (!from_current())
      return;
    if (w.kind != "weights" || w.invalid) {
      spdlog::warn("ignored a tensor_set '{}' from '{}' (only stage weights are expected)",
                   w.kind, w.from);
      return;
    }
    weights_[w.from] = std::move(w);
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
      result_.trained[actor] = {trained, duplicates};
  }

  /// A sender reports a fault it acted on ("dropped": a drop fault).
  void on_fault_report(const std::string& what, const std::string& from, int64_t step) {
    if (from_current() && what == "dropped")
      on_dropped(from, step);
  }

  caf::error on_failure(const std::string& actor, const std::string& what) {
    if (!from_current())
      return caf::none;
    return failed("actor_failed", actor, make_error(errc::actor_failed, actor + ": " + what));
  }

  /// Results and weights in plan order.
  void order_results() {
    for (const auto& a : plan_.actors) {
      if (auto it = results_.find(a.result); !a.result.empty() && it != results_.end()) {
        result_.heads.push_back(std::move(it->second));
        results_.erase(it);
      }
      if (auto it = weights_.find(a.name); a.sends_weights && it != weights_.end())
        result_.stage_weights.push_back(std::move(it->second));
    }
  }

  caf::error on_down(const caf::down_msg& msg) {
    for (const auto& [node, spawner] : spawners_)
      if (spawner.address() == msg.source) {
        auto lost = node;
        lose_node(lost);
        auto why = self_->system().render(msg.reason);
        return failed("node_lost", lost,
                      make_error(errc::node_unreachable, "lost node '" + lost + "': " + why));
      }
    auto* a = find(msg.source);
    if (a == nullptr || a->done)
      return caf::none;
    return failed("actor_down", a->name,
                  make_error(errc::actor_failed, a->role + " '" + a->name + "' on node '" +
                                                   a->node + "' terminated: " +
                                                   self_->system().render(msg.reason)));
  }

  caf::error on_tick(clock_type::time_point last_message) {
    if (options_.interrupted != nullptr && options_.interrupted->load())
      return make_error(errc::interrupted, "stopping every actor");
    fire_timed_faults();
    auto limit = std::min<clock_type::duration>(options_.stall_timeout,
                                                topology_.runtime.stall_timeout);
    if (clock_type::now() - last_message > limit) {
      auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(limit).count();
      return failed("stalled", "job",
                    make_error(errc::actor_failed,
                               "no actor reported anything for " + std::to_string(ms) +
                                 " ms (runtime.stall_timeout_ms): a message was lost or an "
                                 "actor hangs"));
    }
    return caf::none;
  }

  size_t unfinished() const {
    size_t n = 0;
    for (const auto& a : actors_)
      n += a.done ? 0 : 1;
    return n;
  }

  /// Sends start to the actors the plan starts; the pass's clock begins.
  void start_pass() {
    for (const auto& a : plan_.actors)
      if (a.starts)
        self_->send(find(a.name)->handle, start_atom::value);
    training_started_ = clock_type::now();
    recoverable_ = false;
  }

  /// Runs the pass until every actor sent its final report (none) or
  /// something failed (the failure).
  caf::error train() {
    start_pass();
    auto last_message = clock_type::now();
    caf::error failure;
    while (unfinished() > 0 && !failure) {
      if (options_.interrupted != nullptr && options_.interrupted->load()) {
        failure = make_error(errc::interrupted, "stopping every actor");
        break;
      }
      bool ticked = false;
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
        [&](fault_atom, std::string& what, std::string& from, int64_t step) {
          on_fault_report(what, from, step);
        },
        [&](failure_atom, std::string& actor, std::string& what) {
          failure = on_failure(actor, what);
        },
        [&](caf::down_msg& msg) { failure = on_down(msg); },
        caf::after(std::chrono::milliseconds(250)) >> [&] {
          ticked = true;
          failure = on_tick(last_message);
        });
      if (!ticked)
        last_message = clock_type::now();
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
    const int64_t epochs = topology_.plan.epochs, batch = topology_.plan.batch_size;
    const int64_t per_epoch = samples / epochs;
    const int64_t steps = epochs * (per_epoch / batch + (per_epoch % batch != 0 ? 1 : 0));
    for (const auto& f : topology_.faults)
      if (f.at_step >= steps)
        spdlog::warn("{}: fault '{}' at step {} will never fire: the job has {} steps ({} "
                     "training samples per epoch in minibatches of {})",
                     f.where, f.kind, f.at_step, steps, per_epoch, batch);
  }

  // -- recovery (actors/roles/recovery.hpp) ------------------------------------------------

  /// Checks the faults against the nodes, chooses the checkpoint directory
  /// and, with --resume, the step to continue from.
  caf::error prepare_recovery() {
    for (const auto& f : topology_.faults) {
      if (is_node_fault(f) && spawners_.count(f.node) == 0)
        return make_error(errc::bad_config,
                          f.where + ": fault '" + f.kind + "' names node '" + f.node + "', " +
                            (topology_.embedded()
                               ? std::string{"but the job runs embedded in one process (use "
                                             "--local-nodes N or nodes:)"}
                               : "which is not one of the topology's nodes"));
    }
    faults_ = fault_injector{topology_.faults};
    checkpoint_dir_ = options_.resume_dir.empty() ? topology_.runtime.checkpoint_dir
                                                  : options_.resume_dir;
    if (topology_.runtime.checkpoint_every == 0 && options_.resume_dir.empty())
      return caf::none;
    if (checkpoint_dir_.empty())
      checkpoint_dir_ = options_.temporary_checkpoint_dir;
    if (checkpoint_dir_.empty())
      return make_error(errc::bad_config, "runtime.checkpoint_every is " +
                                            std::to_string(topology_.runtime.checkpoint_every) +
                                            " but no checkpoint directory is set");
    result_.checkpoint_dir = checkpoint_dir_;
    std::error_code ec;
    std::filesystem::create_directories(checkpoint_dir_, ec);
    if (auto err = write_run_record(checkpoint_dir_, options_.record))
      return err;
    if (!options_.resume_dir.empty()) {
      restore_step_ = common_checkpoint_steps(checkpoint_dir_, plan_.trainable_names())
                        .front();
      if (restore_step_ == 0)
        return make_error(errc::bad_file, "--resume " + checkpoint_dir_ +
                                            ": no step of which every trainable actor (" +
                                            detail::join(plan_.trainable_names()) +
                                            ") has a valid checkpoint");
      spdlog::info("resuming from step {} (checkpoints in {})", restore_step_, checkpoint_dir_);
    } else {
      spdlog::info("checkpoints every {} steps in {}{}", topology_.runtime.checkpoint_every,
                   checkpoint_dir_,
                   checkpoint_dir_ == options_.temporary_checkpoint_dir ? " (removed at the end: set runtime.checkpoint_dir "
                                          "to keep them for --resume)"
                                        : "");
    }
    return caf::none;
  }

  /// The checkpoint and fault settings of trainable actor `name` in this pass.
  recovery_spec recovery_of(const std::string& name) {
    recovery_spec r;
    if (!checkpoint_dir_.empty()) {
      r.checkpoint_dir = checkpoint_dir_of(checkpoint_dir_, name);
      r.checkpoint_every = topology_.runtime.checkpoint_every;
      r.restore_step = restore_step_;
    }
    r.throw_at_step = faults_.throw_step_for(name);
    // The last trainable actor reports the job's steps (for node faults and chaos).
    auto trainable = plan_.trainable_names();
    if (!trainable.empty() && name == trainable.back())
      r.notify_from_step = faults_.notify_from_step();
    return r;
  }

  /// The node an actor placed on `placed` runs on (see placement.hpp).
  std::string node_for(const std::string& placed) {
    placement nodes{{}, lost_nodes_, {}, moved_};
    for (const auto& [node, spawner] : spawners_)
      nodes.live.push_back(node);
    for (const auto& a : actors_)
      nodes.actors_on[a.node] += 1;
    auto choice = actors::node_for(placed, nodes);
    if (choice.moves) {
      spdlog::warn("node '{}' is lost: its actors move to node '{}'", placed, choice.node);
      moved_[placed] = choice.node;
    }
    return choice.node;
  }

  void lose_node(const std::string& node) {
    spawners_.erase(node);
    lost_nodes_.insert(node);
  }

  /// Records what failed; recoverable when the topology recovers and the
  /// run was not interrupted.
  caf::error failed(const std::string& kind, const std::string& target, caf::error err) {
    recoverable_ = topology_.recovers();
    failure_kind_ = kind;
    failure_target_ = target;
    return err;
  }

  /// Injects a fault the injector fired: a node's spawner kills or stops
  /// its process; chaos's throw goes to the actor.
  void inject(const fault_spec& f) {
    if (f.kind == "throw") {
      spdlog::warn("chaos: '{}' throws (step {})", f.actor, f.at_step);
      if (const auto* a = find(f.actor))
        self_->send(a->handle, fault_atom::value, std::string{"throw (chaos)"});
      return;
    }
    auto spawner = spawners_.find(f.node);
    if (spawner == spawners_.end())
      return;
    spdlog::warn("injecting fault: {} node '{}' (at step {})", f.kind, f.node,
                 faults_.last_step());
    self_->send(spawner->second, fault_atom::value,
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
    if (!from_current())
      return;
    std::vector<std::string> live, trainable;
    for (const auto& [node, spawner] : spawners_)
      live.push_back(node);
    for (const auto& name : plan_.trainable_names())
      if (find(name) != nullptr)
        trainable.push_back(name);
    for (const auto& f : faults_.on_step(step, clock_type::now(), live, trainable))
      inject(f);
  }

  /// Sets the delay and drop faults on their sender's edge (each pass: the
  /// actors are new; a drop that happened is not set again).
  caf::error arm_edge_faults() {
    for (const auto& f : faults_.edge_faults()) {
      const auto* from = find(f.from);
      if (from == nullptr)
        return make_error(errc::bad_config, f.where + ": no actor '" + f.from + "'");
      int64_t value = f.kind == "delay" ? f.delay.count() : f.at_step;
      if (auto err = ask(from->handle, caf::make_message(fault_atom::value, f.kind, f.to, value),
                         f.where + ": cannot set fault " + f.kind))
        return err;
    }
    return caf::none;
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
    if (result_.restarts >= topology_.runtime.max_restarts)
      return make_error(errc::actor_failed,
                        describe(failure) + " (gave up after " +
                          std::to_string(result_.restarts) + " restarts: runtime.max_restarts)");
    spdlog::warn("{}: restarting the job from its checkpoints", describe(failure));
    stop_pass();
    if (spawners_.empty())
      return make_error(errc::node_unreachable, "every node is lost: " + describe(failure));
    restore_step_ =
      checkpoint_dir_.empty()
        ? 0
        : common_checkpoint_steps(checkpoint_dir_, plan_.trainable_names()).front();
    fault_record record{failure_kind_, failure_target_, faults_.last_step(), -1, -1,
                        restore_step_};
    if (auto f = faults_.explain(failure_target_, detected)) {
      record.kind = f->kind;
      record.target = f->target;
      if (f->at_step >= 0)
        record.at_step = f->at_step;
      record.detected_after_ms = f->detected_after_ms;
    }
    open_fault_ = record;
    detected_at_ = detected;
    result_.restarts += 1;
    spdlog::warn("restart {} of at most {}: every actor restarts from step {}{}",
                 result_.restarts, topology_.runtime.max_restarts, restore_step_,
                 restore_step_ == 0 ? " (the initial weights)" : "");
    return caf::none;
  }

  /// The actors of the new pass are wired and about to start.
  void resumed() {
    if (!open_fault_)
      return;
    open_fault_->recovered_after_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                        clock_type::now() - detected_at_)
                                        .count();
    spdlog::info("recovered from {} of '{}' in {} ms (detected after {} ms)", open_fault_->kind,
                 open_fault_->target, open_fault_->recovered_after_ms,
                 open_fault_->detected_after_ms);
    result_.faults.push_back(*open_fault_);
    open_fault_.reset();
  }

  /// Kills every actor of this pass and forgets what they reported.
  void stop_pass() {
    std::set<caf::actor_addr> alive;
    for (auto& a : actors_) {
      alive.insert(a.handle.address());
      // Not exit_reason::kill: that one also ends the spawner linked to it.
      self_->send_exit(a.handle, caf::exit_reason::user_shutdown);
    }
    auto deadline = clock_type::now() + topology_.runtime.connection_timeout +
                    std::chrono::seconds(3);
    while (!alive.empty() && clock_type::now() < deadline) {
      self_->receive(
        [&](caf::down_msg& msg) {
          alive.erase(msg.source);
          for (const auto& [node, spawner] : spawners_)
            if (spawner.address() == msg.source) {
              auto lost = node;
              lose_node(lost);
              break;
            }
        },
        [&](caf::message&) {}, // reports of the stopped pass
        caf::after(std::chrono::milliseconds(100)) >> [] {});
    }
    if (!alive.empty())
      spdlog::warn("{} actors of the failed pass did not confirm their end", alive.size());
    actors_.clear();
    group_epochs_.clear();
    group_finals_.clear();
    results_.clear();
    weights_.clear();
    result_.heads.clear();
    result_.actors.clear();
    result_.trained.clear();
  }

  // -- phase 5: collecting and shutting down -------------------------------------

  void collect_nodes() {
    if (topology_.embedded()) {
      result_.nodes.push_back(current_node_report("embedded"));
      return;
    }
    for (const auto& n : topology_.nodes) {
      if (spawners_.count(n.name) == 0) // lost during the run
        continue;
      self_->request(spawners_.at(n.name), timeout(), caf::get_atom::value, node_atom::value)
        .receive([&](messages::node_report& r) { result_.nodes.push_back(std::move(r)); },
                 [&](caf::error& err) {
                   spdlog::warn("node {} did not report its usage: {}", n.name, describe(err));
                 });
    }
    result_.nodes.push_back(current_node_report("coordinator"));
  }

  void shutdown() {
    for (auto& a : actors_)
      self_->send_exit(a.handle, caf::exit_reason::user_shutdown);
    if (embedded_spawner_)
      self_->send_exit(embedded_spawner_, caf::exit_reason::kill);
    actors_.clear();
    embedded_spawner_ = nullptr;
  }

  caf::scoped_actor self_;
  const topology& topology_;
  const job_plan& plan_;
  run_options options_;
  progress_line progress_;
  std::map<std::string, caf::actor> spawners_; ///< node name ("" embedded) -> spawner
  std::map<std::string, int32_t> node_cores_;  ///< node name -> hardware threads
  caf::actor embedded_spawner_;
  std::vector<placed_actor> actors_; ///< this pass's, in plan order
  /// Epoch reports of a result group's members, until all came.
  std::map<std::pair<std::string, int32_t>, std::vector<messages::actor_report>> group_epochs_;
  std::map<std::string, std::vector<messages::actor_report>> group_finals_;
  std::map<std::string, messages::actor_report> results_;  ///< by result group, when complete
  std::map<std::string, messages::tensor_set> weights_;    ///< by actor name
  job_result result_;

  // Recovery.
  fault_injector faults_;
  std::string checkpoint_dir_;          ///< "" = no checkpoints
  int64_t restore_step_ = 0;            ///< the step this pass starts from
  bool length_checked_ = false;         ///< warn_unreachable_faults ran
  std::set<std::string> lost_nodes_;
  std::map<std::string, std::string> moved_; ///< lost node -> where its actors went
  bool recoverable_ = false;
  std::string failure_kind_, failure_target_;
  std::optional<fault_record> open_fault_;
  clock_type::time_point detected_at_;
  clock_type::time_point training_started_;
};

} // namespace

caf::expected<job_result> run_actor_job(caf::actor_system& sys, const topology& t,
                                       const job_plan& plan, const run_options& options) {
  coordinator c{sys, t, plan, options};
  return c.run();
}

} // namespace baton::actors
