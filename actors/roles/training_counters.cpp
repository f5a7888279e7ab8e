#include "actors/roles/training_counters.hpp"

#include <nlohmann/json.hpp>

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
    epochs_json.push_back(
      {e.epoch, e.train_loss, e.test_accuracy, e.samples, e.validation_accuracy, e.evaluated,
       e.validated});
  nlohmann::json j = {{"loss_sum", epoch.loss_sum},   {"samples", epoch.samples},
                      {"correct", epoch.correct},     {"evaluated", epoch.evaluated},
                      {"validation_correct", epoch.validation_correct},
                      {"validated", epoch.validated},
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
    // Absent in the checkpoints of a baton before data.validation.
    c.epoch.validation_correct = j.value("validation_correct", int64_t{0});
    c.epoch.validated = j.value("validated", int64_t{0});
    for (const auto& e : j.at("epochs"))
      // Entries 5 and 6 (the samples evaluated) are absent before workers
      // split their evaluation.
      c.epochs.push_back({e.at(0).get<int32_t>(), e.at(1).get<double>(), e.at(2).get<double>(),
                          e.at(3).get<int64_t>(), e.size() > 4 ? e.at(4).get<double>() : -1.0,
                          e.size() > 5 ? e.at(5).get<int64_t>() : 0,
                          e.size() > 6 ? e.at(6).get<int64_t>() : 0});
    c.samples_total = j.at("samples_total").get<int64_t>();
    c.trained = j.at("trained").get<int64_t>();
    c.duplicates = j.at("duplicates").get<int64_t>();
    return c;
  } catch (const nlohmann::json::exception& e) {
    throw model::file_error(std::string{"checkpoint counters: "} + e.what());
  }
}

} // namespace roles
} // namespace baton::actors
