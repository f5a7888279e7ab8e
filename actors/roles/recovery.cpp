#include "actors/roles/recovery.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <set>

#include <nlohmann/json.hpp>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "messages/errc.hpp"
#include "model/core/error.hpp"

namespace baton::actors {
inline namespace roles {

bool training_counters::trained_before(int64_t id, int64_t step, int64_t steps_done) const {
  return step < steps_done || (step == current_step_ && current_ids_.count(id) != 0);
}

void training_counters::admit(int64_t id, int64_t step) {
  if (step != current_step_) {
    current_step_ = step;
    current_ids_.clear();
  }
  current_ids_.insert(id);
  trained += 1;
}

void report_counters(const training_counters& counters, messages::actor_report& r) {
  r.samples = counters.samples_total;
  if (!counters.epochs.empty()) {
    r.train_loss = counters.epochs.back().train_loss;
    r.test_accuracy = counters.epochs.back().test_accuracy;
  }
  r.epochs = counters.epochs;
}

std::string training_counters::to_json() const {
  nlohmann::json epochs_json = nlohmann::json::array();
  for (const auto& e : epochs)
    epochs_json.push_back({e.epoch, e.train_loss, e.test_accuracy, e.samples});
  nlohmann::json j = {{"loss_sum", epoch.loss_sum},   {"samples", epoch.samples},
                      {"correct", epoch.correct},     {"evaluated", epoch.evaluated},
                      {"epochs", epochs_json},        {"samples_total", samples_total},
                      {"trained", trained},           {"duplicates", duplicates}};
  return j.dump();
}

training_counters training_counters::from_json(const std::string& text) {
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    throw model::file_error("checkpoint counters are not a JSON object");
  try {
    training_counters c;
    c.epoch.loss_sum = j.at("loss_sum").get<double>();
    c.epoch.samples = j.at("samples").get<int64_t>();
    c.epoch.correct = j.at("correct").get<int64_t>();
    c.epoch.evaluated = j.at("evaluated").get<int64_t>();
    for (const auto& e : j.at("epochs"))
      c.epochs.push_back({e.at(0).get<int32_t>(), e.at(1).get<double>(), e.at(2).get<double>(),
                          e.at(3).get<int64_t>()});
    c.samples_total = j.at("samples_total").get<int64_t>();
    c.trained = j.at("trained").get<int64_t>();
    c.duplicates = j.at("duplicates").get<int64_t>();
    return c;
  } catch (const nlohmann::json::exception& e) {
    throw model::file_error(std::string{"checkpoint counters: "} + e.what());
  }
}

checkpointing::checkpointing(const recovery_spec& spec) : spec_(spec) {}

bool checkpointing::due(int64_t version) const {
  return spec_.checkpoint_every > 0 && version > 0 && version % spec_.checkpoint_every == 0;
}

void checkpointing::save(model::training_state state, const training_counters& counters) const {
  state.counters = counters.to_json();
  state.run_id = spec_.run_id;
  model::checkpoint_store{spec_.checkpoint_dir}.save(state);
}

std::optional<model::training_state> checkpointing::restore() const {
  if (spec_.restore_step == 0)
    return std::nullopt;
  model::checkpoint_store store{spec_.checkpoint_dir};
  auto state = store.load(spec_.restore_step);
  // Wherever it runs (embedded or on a node), an actor never continues
  // another run's state: two runs on one directory must not mix.
  if (auto why = foreign_checkpoint(store.path_of(spec_.restore_step), state.run_id,
                                    spec_.run_id);
      !why.empty())
    throw model::file_error(why);
  return state;
}

std::string foreign_checkpoint(const std::string& path, const std::string& found,
                               const std::string& expected) {
  if (found.empty() || expected.empty() || found == expected)
    return {};
  return path + " is a checkpoint of run " + found + ", not of this run (" + expected +
         "): a checkpoint directory holds the checkpoints of one run, and another run's "
         "state is never restored";
}

void maybe_throw_fault(const recovery_spec& spec, const messages::microbatch& m) {
  if (!m.eval && m.step == spec.throw_at_step && m.index_in_step == 0)
    throw std::runtime_error("injected fault: throw at step " + std::to_string(m.step));
}

caf::error inject_process_fault(const std::string& kind, int32_t ms) {
  if (kind == "kill") {
    ::kill(::getpid(), SIGKILL);
    return caf::none;
  }
  if (kind != "stop" || ms <= 0)
    return make_error(errc::bad_config, "unknown process fault '" + kind + "' (kill, stop)");
  auto parent = ::getpid();
  auto child = ::fork();
  if (child < 0)
    return make_error(errc::actor_failed, std::string{"fork for the stop fault failed: "} +
                                            std::strerror(errno));
  if (child == 0) {
    // Only async-signal-safe calls in the child of a threaded process.
    timespec t{ms / 1000, (ms % 1000) * 1000000L};
    while (::nanosleep(&t, &t) != 0 && errno == EINTR) {
    }
    ::kill(parent, SIGCONT);
    ::_exit(0);
  }
  ::kill(parent, SIGSTOP);
  // Running again: reap the child.
  ::waitpid(child, nullptr, 0);
  return caf::none;
}

std::string checkpoint_dir_of(const std::string& run_dir, const std::string& name) {
  return (std::filesystem::path(run_dir) / name).string();
}

std::vector<int64_t> common_checkpoint_steps(const std::string& run_dir,
                                             const std::vector<std::string>& actors) {
  std::optional<std::set<int64_t>> common;
  for (const auto& a : actors) {
    auto steps = model::checkpoint_store{checkpoint_dir_of(run_dir, a)}.valid_steps();
    std::set<int64_t> mine(steps.begin(), steps.end());
    if (!common) {
      common = std::move(mine);
      continue;
    }
    std::set<int64_t> both;
    std::set_intersection(common->begin(), common->end(), mine.begin(), mine.end(),
                          std::inserter(both, both.begin()));
    common = std::move(both);
  }
  std::vector<int64_t> out;
  if (common)
    out.assign(common->rbegin(), common->rend());
  out.push_back(0);
  return out;
}

} // namespace roles
} // namespace baton::actors
