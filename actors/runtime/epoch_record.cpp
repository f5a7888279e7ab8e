#include "actors/runtime/epoch_record.hpp"

#include <filesystem>
#include <limits>
#include <utility>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "model/core/atomic_file.hpp"
#include "model/core/bounded_file.hpp"
#include "model/core/error.hpp"
#include "model/core/training_checkpoint.hpp"

namespace baton::actors {
inline namespace runtime {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

/// At most this much is read: a run of 10,000 epochs writes ~1 MiB.
constexpr size_t max_epoch_record_bytes = size_t{4} << 20;

constexpr const char* lost =
  "the best epoch and early stopping judge the epochs after the restart only";

fs::path epochs_path(const std::string& dir) {
  return fs::path(dir) / "epochs.json";
}

fs::path weights_dir(const std::string& dir) {
  return fs::path(dir) / "best-epoch";
}

/// A symbolic link is neither read nor written through (as run.lock and
/// run.yaml): what it points to is not the run's.
bool linked(const fs::path& path) {
  std::error_code ec;
  return fs::is_symlink(fs::symlink_status(path, ec));
}

} // namespace

std::vector<judged_epoch> epoch_record::read() const {
  std::vector<judged_epoch> epochs;
  std::error_code ec;
  const auto path = epochs_path(dir_).string();
  if (dir_.empty() || !fs::exists(path, ec))
    return epochs;
  std::string text;
  if (auto why = model::read_bounded_file(path, text, max_epoch_record_bytes, "an epoch record");
      !why.empty()) {
    spdlog::warn("{}: cannot read the epochs judged before the restart ({}): {}", path, why,
                 lost);
    return epochs;
  }
  try {
    const auto j = json::parse(text);
    if (j.at("run_id").get<std::string>() != run_id_)
      return epochs; // another run's: this one starts afresh
    for (const auto& e : j.at("epochs"))
      epochs.push_back({e.at("group").get<std::string>(), e.at("epoch").get<int32_t>(),
                        e.at("test_accuracy").get<double>(),
                        e.at("validation_accuracy").get<double>()});
  } catch (const json::exception& e) {
    spdlog::warn("{}: not a record of judged epochs ({}): {}", path, e.what(), lost);
    epochs.clear();
  }
  return epochs;
}

void epoch_record::resume(std::string dir, std::string run_id, best_epochs& best,
                          run_stop& stop) {
  dir_ = std::move(dir);
  run_id_ = std::move(run_id);
  epochs_ = read();
  if (epochs_.empty())
    return;
  for (const auto& e : epochs_) {
    best.epoch(e.group, e.epoch, e.validation_accuracy);
    // Its stop, if any, is the next report's: exhausted patience stays so.
    (void)stop.epoch(e.group, e.epoch, e.test_accuracy, 0, e.validation_accuracy);
  }
  load_kept_weights(best);
  spdlog::info("{}: {} epoch(s) judged before the restart, judged again", dir_, epochs_.size());
}

void epoch_record::load_kept_weights(best_epochs& best) {
  const auto folders = weights_dir(dir_);
  std::error_code ec;
  if (linked(folders) || !fs::is_directory(folders, ec))
    return;
  for (const auto& entry : fs::directory_iterator(folders, ec)) {
    const auto sender = entry.path().filename().string();
    if (linked(entry.path()))
      continue;
    try {
      auto kept = model::checkpoint_store{entry.path().string()}.load_newest(
        std::numeric_limits<int64_t>::max());
      if (!kept || kept->run_id != run_id_)
        continue;
      messages::tensor_set w{"epoch_weights", sender, 0, kept->version, 0, {}, {}};
      for (auto& [name, tensor] : kept->tensors)
        w.tensors.push_back(std::move(tensor));
      written_[sender] = static_cast<int32_t>(kept->version);
      best.weights(std::move(w));
    } catch (const model::error& e) {
      spdlog::warn("{}: cannot read the best epoch's weights kept ({})", entry.path().string(),
                   e.what());
    }
  }
}

void epoch_record::add(judged_epoch e, const best_epochs& best) {
  if (dir_.empty() || e.validation_accuracy < 0)
    return;
  for (const auto& x : epochs_)
    if (x.group == e.group && x.epoch >= e.epoch)
      return keep(best); // a replay: recorded already
  epochs_.push_back(std::move(e));
  json list = json::array();
  for (const auto& x : epochs_)
    list.push_back({{"group", x.group},
                    {"epoch", x.epoch},
                    {"test_accuracy", x.test_accuracy},
                    {"validation_accuracy", x.validation_accuracy}});
  const json j{{"run_id", run_id_}, {"epochs", list}};
  const auto path = epochs_path(dir_).string();
  if (auto why = model::try_replace_file(path, j.dump(1) + "\n"); !why.empty())
    spdlog::warn("{}: cannot keep the epochs judged so far ({}): if resumed, {}", path, why, lost);
  keep(best);
}

void epoch_record::weights(best_epochs& best, messages::tensor_set w) {
  best.weights(std::move(w));
  keep(best);
}

void epoch_record::keep(const best_epochs& best) {
  if (dir_.empty())
    return;
  for (const auto& [sender, weights] : best.kept()) {
    const auto& [epoch, tensors] = weights;
    if (auto it = written_.find(sender); it != written_.end() && it->second == epoch)
      continue;
    const auto folder = (weights_dir(dir_) / sender).string();
    if (linked(weights_dir(dir_)) || linked(folder)) {
      spdlog::warn("{}: a symbolic link: the best epoch's weights are not kept there", folder);
      written_[sender] = epoch;
      continue;
    }
    model::training_state state;
    state.version = epoch;
    state.run_id = run_id_;
    for (size_t i = 0; i < tensors.size(); ++i)
      state.tensors.emplace_back(std::to_string(i), tensors[i]);
    try {
      std::error_code ec;
      fs::create_directories(folder, ec);
      // One file: the store keeps the newest steps, and an earlier epoch
      // may be the new best (or the file another run's).
      model::checkpoint_store store{folder, 1};
      for (auto step : store.valid_steps())
        fs::remove(store.path_of(step), ec);
      store.save(state);
      written_[sender] = epoch;
    } catch (const model::error& e) {
      spdlog::warn("{}: cannot keep the best epoch's weights ({}): if resumed, the run may save "
                   "its final weights instead",
                   folder, e.what());
    }
  }
}

} // namespace runtime
} // namespace baton::actors
