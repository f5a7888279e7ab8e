#include "actors/runtime/fault_injector.hpp"

#include <algorithm>

namespace baton::actors {
inline namespace runtime {

bool is_node_fault(const fault_spec& f) {
  return f.kind == "kill_node" || f.kind == "stop_node";
}

std::optional<std::string> unknown_fault_node(const std::vector<fault_spec>& faults,
                                              const std::vector<std::string>& nodes,
                                              bool embedded) {
  for (const auto& f : faults)
    if (is_node_fault(f) && std::find(nodes.begin(), nodes.end(), f.node) == nodes.end())
      return f.where + ": fault '" + f.kind + "' names node '" + f.node + "', " +
             (embedded ? std::string{"but the job runs embedded in one process (use "
                                     "--local-nodes N or nodes:)"}
                       : "which is not one of the topology's nodes");
  return std::nullopt;
}

std::vector<std::string> unreachable_fault_warnings(const std::vector<fault_spec>& faults,
                                                    int64_t samples, int64_t epochs,
                                                    int64_t batch_size) {
  const int64_t per_epoch = samples / epochs;
  const int64_t steps =
    epochs * (per_epoch / batch_size + (per_epoch % batch_size != 0 ? 1 : 0));
  std::vector<std::string> warnings;
  for (const auto& f : faults)
    if (f.at_step >= steps)
      warnings.push_back(f.where + ": fault '" + f.kind + "' at step " +
                         std::to_string(f.at_step) + " will never fire: the job has " +
                         std::to_string(steps) + " steps (" + std::to_string(per_epoch) +
                         " training samples per epoch in minibatches of " +
                         std::to_string(batch_size) + ")");
  return warnings;
}

fault_injector::fault_injector(const std::vector<fault_spec>& faults) {
  for (const auto& f : faults) {
    if (f.kind == "chaos") {
      chaos_ = f;
      chaos_rng_.seed(f.seed);
      continue;
    }
    faults_.push_back({f, false, {}, false});
  }
}

int64_t fault_injector::throw_step_for(const std::string& actor) {
  int64_t step = -1;
  for (auto& f : faults_)
    if (!f.fired && f.spec.kind == "throw" && f.spec.actor == actor) {
      step = f.spec.at_step;
      f.fired = true;
      f.at = {};
    }
  return step;
}

int64_t fault_injector::notify_from_step() const {
  int64_t from = -1;
  for (const auto& f : faults_)
    if (!f.fired && is_node_fault(f.spec) && f.spec.at_step >= 0)
      from = from < 0 ? f.spec.at_step : std::min(from, f.spec.at_step);
  return chaos_ ? 1 : from;
}

std::vector<fault_spec> fault_injector::edge_faults() const {
  std::vector<fault_spec> edges;
  for (const auto& f : faults_)
    if ((f.spec.kind == "delay" || f.spec.kind == "drop") && !f.fired)
      edges.push_back(f.spec);
  return edges;
}

void fault_injector::fire(armed_fault& f, clock_type::time_point now,
                          std::vector<fault_spec>& fired) {
  f.fired = true;
  f.at = now;
  fired.push_back(f.spec);
}

std::vector<fault_spec> fault_injector::on_step(int64_t step, clock_type::time_point now,
                                                const std::vector<std::string>& live_nodes,
                                                const std::vector<std::string>& trainable) {
  std::vector<fault_spec> fired;
  if (step <= last_step_)
    return fired; // a step replayed after a restart
  last_step_ = step;
  for (auto& f : faults_)
    if (!f.fired && is_node_fault(f.spec) && f.spec.at_step >= 0 && step >= f.spec.at_step)
      fire(f, now, fired);
  if (chaos_)
    if (auto f = chaos_at(step, now, live_nodes, trainable))
      fired.push_back(*f);
  return fired;
}

/// Chaos: with probability `rate` per step, one fault chosen at random
/// (seeded): a trainable actor throws, or a node is killed or stopped for
/// 3 s (never the last node alive). The draws and their order are the
/// seed's sequence: changing them changes every chaos run.
std::optional<fault_spec> fault_injector::chaos_at(int64_t step, clock_type::time_point now,
                                                   const std::vector<std::string>& live_nodes,
                                                   const std::vector<std::string>& trainable) {
  std::bernoulli_distribution hit(chaos_->rate);
  if (!hit(chaos_rng_))
    return std::nullopt;
  fault_spec f;
  f.at_step = step;
  f.where = "chaos";
  std::vector<std::string> nodes;
  for (const auto& node : live_nodes)
    if (!node.empty())
      nodes.push_back(node);
  std::uniform_int_distribution<size_t> kind(0, nodes.size() > 1 ? 2 : 0);
  auto k = kind(chaos_rng_);
  if (k == 0) {
    if (trainable.empty())
      return std::nullopt;
    f.kind = "throw";
    f.actor = trainable[std::uniform_int_distribution<size_t>(0, trainable.size() - 1)(chaos_rng_)];
  } else {
    f.kind = k == 1 ? "kill_node" : "stop_node";
    f.node = nodes[std::uniform_int_distribution<size_t>(0, nodes.size() - 1)(chaos_rng_)];
    f.stopped = std::chrono::milliseconds(3000);
  }
  faults_.push_back({f, true, now, false});
  return f;
}

std::vector<fault_spec> fault_injector::due(clock_type::duration since_start,
                                            clock_type::time_point now) {
  std::vector<fault_spec> fired;
  for (auto& f : faults_)
    if (!f.fired && is_node_fault(f.spec) && f.spec.after.count() >= 0 &&
        since_start >= f.spec.after)
      fire(f, now, fired);
  return fired;
}

std::vector<fault_spec> fault_injector::dropped(const std::string& from,
                                                clock_type::time_point now) {
  std::vector<fault_spec> fired;
  for (auto& f : faults_)
    if (f.spec.kind == "drop" && f.spec.from == from && !f.fired)
      fire(f, now, fired);
  return fired;
}

std::optional<size_t> fault_injector::explaining(const std::string& target) const {
  for (size_t i = 0; i < faults_.size(); ++i) {
    const auto& f = faults_[i];
    if (f.fired && !f.counted && (is_node_fault(f.spec) || f.spec.kind == "drop"))
      return i;
  }
  for (size_t i = 0; i < faults_.size(); ++i) {
    const auto& f = faults_[i];
    if (f.fired && !f.counted && f.spec.kind == "throw" && f.spec.actor == target)
      return i;
  }
  return std::nullopt;
}

bool fault_injector::explains(const std::string& target) const {
  return explaining(target).has_value();
}

bool fault_injector::recurs(const std::string& target, uint8_t code, int64_t step) {
  return !unexplained_.emplace(target, code, step).second;
}

std::optional<explained_fault> fault_injector::explain(const std::string& target,
                                                       clock_type::time_point detected) {
  auto index = explaining(target);
  if (!index)
    return std::nullopt;
  auto* found = &faults_[*index];
  found->counted = true;
  const auto& s = found->spec;
  explained_fault e;
  e.kind = s.kind;
  e.target = s.kind == "throw" ? s.actor : s.kind == "drop" ? s.from + "->" + s.to : s.node;
  e.at_step = s.at_step;
  if (found->at != clock_type::time_point{})
    e.detected_after_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(detected - found->at).count();
  return e;
}

fault_record fault_injector::record_failure(const std::string& kind, const std::string& target,
                                            int64_t restored_step,
                                            clock_type::time_point detected) {
  fault_record record{kind, target, last_step_, -1, -1, restored_step};
  if (auto f = explain(target, detected)) {
    record.kind = f->kind;
    record.target = f->target;
    if (f->at_step >= 0)
      record.at_step = f->at_step;
    record.detected_after_ms = f->detected_after_ms;
  }
  return record;
}

std::string recovered_text(const fault_record& f) {
  std::string text = "recovered from " + f.kind + " of '" + f.target + "' in " +
                     std::to_string(f.recovered_after_ms) + " ms";
  if (f.detected_after_ms < 0)
    return text;
  auto ms = std::to_string(f.detected_after_ms);
  if (f.kind == "node_lost")
    return text + " (detected " + ms + " ms after its last heartbeat)";
  if (f.kind == "stalled")
    return text + " (detected " + ms + " ms after the job last advanced)";
  return text + " (detected after " + ms + " ms)";
}

} // namespace runtime
} // namespace baton::actors
