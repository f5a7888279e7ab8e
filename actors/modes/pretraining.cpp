#include "actors/modes/pretraining.hpp"

#include <filesystem>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <ATen/Parallel.h>
#include <spdlog/fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "actors/modes/costing.hpp"
#include "actors/modes/planning.hpp"
#include "actors/runtime/local_run.hpp"
#include "messages/errc.hpp"
#include "model/core/atomic_file.hpp"
#include "model/core/checkpoint.hpp"
#include "model/core/error.hpp"
#include "model/core/pretrain.hpp"

namespace baton::actors {
inline namespace modes {

namespace {

/// Why a run is refused when its checkpoint is missing, and what to do.
std::string missing_checkpoint(const topology& t) {
  const auto& where = t.checkpoint_where.empty() ? t.file : t.checkpoint_where;
  return where + ": backbone.checkpoint '" + t.checkpoint +
         "' does not exist. Make it with `baton pretrain " + t.file +
         "` (it trains the backbone on backbone.pretrain's task), or start from the initial "
         "weights with backbone.checkpoint: none, or set backbone.pretrain.if_missing: pretrain "
         "to pre-train a missing checkpoint before the run";
}

/// `[a, b, c]`.
template <class T>
std::string list_text(const std::vector<T>& values) {
  return fmt::format("[{}]", fmt::join(values, ", "));
}

/// The settings' lines ("key: value") whose value differs between `made`
/// (the file's) and `now`, each as "key: made -> now", at most `most`.
std::vector<std::string> changed_settings(const std::string& made, const std::string& now,
                                          size_t most) {
  auto by_key = [](const std::string& text) {
    std::map<std::string, std::string> lines;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);)
      if (auto colon = line.find(": "); colon != std::string::npos)
        lines[line.substr(0, colon)] = line.substr(colon + 2);
    return lines;
  };
  const auto before = by_key(made), after = by_key(now);
  std::vector<std::string> changed;
  for (const auto& [key, value] : after) {
    auto it = before.find(key);
    const std::string old = it == before.end() ? "(not recorded)" : it->second;
    if (old != value && changed.size() < most)
      changed.push_back(key + ": " + old + " -> " + value);
  }
  return changed;
}

/// Warns when the existing checkpoint was pre-trained with settings other
/// than the topology's `backbone.pretrain` (a config edited since, or
/// another config's file): the run would start from weights that `baton
/// pretrain` of this topology would not make. Only where the topology says
/// how (a `backbone.pretrain` section) and the file says how it was made.
void warn_of_other_settings(const topology& t) {
  if (t.pretrain.where.empty())
    return;
  std::optional<std::string> made;
  try {
    made = model::checkpoint_settings(t.checkpoint);
  } catch (const model::file_error&) {
    return; // the load that follows reports an unreadable file
  }
  if (!made)
    return;
  const auto changed = changed_settings(*made, pretraining_settings_text(t), 4);
  if (changed.empty())
    return;
  spdlog::warn("backbone.checkpoint {} was pre-trained with other settings than {}'s "
               "backbone.pretrain ({}): this run starts from those weights; `baton pretrain "
               "{}` (with this run's --set options) makes them again with its settings",
               t.checkpoint, t.pretrain.where, fmt::join(changed, "; "), t.file);
}

/// Why the existing checkpoint cannot start the model this run trains
/// (loaded into it as its stages and workers load it: every tensor's name
/// and shape), with how its file says it was made; "" when it can. A
/// checkpoint pre-trained for other data (Fashion-MNIST's 1 channel, now 3)
/// failed every stage as it started, after a warning that the run "starts
/// from those weights".
std::string unfit_checkpoint(const topology& t) {
  try {
    auto whole = build_trained_model(trained_model_of(t));
    model::load_pretrained_backbone(whole, t.checkpoint);
    return {};
  } catch (const model::file_error& e) {
    std::string made_with;
    try {
      if (auto made = model::checkpoint_settings(t.checkpoint))
        if (auto changed = changed_settings(*made, pretraining_settings_text(t), 4);
            !changed.empty())
          made_with =
            fmt::format(" (pre-trained with other settings: {})", fmt::join(changed, "; "));
    } catch (const model::file_error&) {
    }
    const auto& where = t.checkpoint_where.empty() ? t.file : t.checkpoint_where;
    return where + ": backbone.checkpoint cannot start this run's " + t.backbone.name + ": " +
           e.what() + made_with + ". `baton pretrain " + t.file +
           "` (with this run's --set options) makes it again for this run, replacing it; or "
           "name another file in backbone.checkpoint (with backbone.pretrain.if_missing: "
           "pretrain, a missing one is pre-trained before the run)";
  }
}

} // namespace

std::string pretraining_settings_text(const topology& t) {
  const auto* task = t.find_task(t.pretrain.task);
  const auto& b = t.backbone;
  const auto& o = t.pretrain.optimizer;
  const auto& d = t.data;
  std::string text;
  auto line = [&text](const std::string& key, const auto& value) {
    text += fmt::format("{}: {}\n", key, value);
  };
  line("backbone.model", b.name);
  if (b.name == "torchscript") {
    line("backbone.path", b.path);
    line("backbone.classifier", b.classifier);
  }
  if (b.name == "convnet_wide")
    line("backbone.wide_features", b.wide_features);
  line("backbone.input", list_text(std::vector<int64_t>{b.in_channels, b.in_height, b.in_width}));
  line("seed", t.seed);
  line("backbone.pretrain.task", t.pretrain.task);
  if (task != nullptr)
    line("backbone.pretrain.task.labels", list_text(task->label_map));
  line("backbone.pretrain.epochs", t.pretrain.epochs);
  line("backbone.pretrain.train_limit", t.pretrain.train_limit);
  line("backbone.pretrain.optimizer.name", o.name);
  line("backbone.pretrain.optimizer.lr", o.lr);
  line("backbone.pretrain.optimizer.momentum", o.momentum);
  line("backbone.pretrain.optimizer.weight_decay", o.weight_decay);
  line("backbone.pretrain.optimizer.nesterov", o.nesterov);
  line("backbone.pretrain.optimizer.betas", list_text(std::vector<double>{o.beta1, o.beta2}));
  line("backbone.pretrain.optimizer.eps", o.eps);
  line("backbone.pretrain.optimizer.schedule", o.schedule);
  line("backbone.pretrain.optimizer.warmup_epochs", o.warmup_epochs);
  line("backbone.pretrain.optimizer.step_epochs", o.step_epochs);
  line("backbone.pretrain.optimizer.gamma", o.gamma);
  line("backbone.pretrain.optimizer.min_lr", o.min_lr);
  line("backbone.pretrain.optimizer.clip_grad_norm", o.clip_grad_norm);
  line("data.batch_size", t.plan.batch_size);
  line("data.microbatches", t.plan.microbatches);
  line("data.kind", d.kind);
  line("data.path", d.path);
  line("data.files", list_text(std::vector<std::string>{d.train.x, d.train.y}));
  line("data.label", d.label);
  line("data.shape", list_text(d.shape));
  line("data.classes", d.classes);
  line("data.normalize", list_text(d.mean) + " " + list_text(d.std));
  line("data.synthetic_train", d.synthetic_train);
  line("data.seed", d.seed);
  line("data.validation", d.validation);
  line("data.augment", fmt::format("crop {} flip {}", d.augment.crop, d.augment.flip));
  return text;
}

caf::expected<void> ensure_pretrained(const topology& t) {
  if (t.checkpoint.empty())
    return caf::unit;
  if (std::filesystem::exists(t.checkpoint)) {
    if (auto why = unfit_checkpoint(t); !why.empty())
      return make_error(errc::bad_config, why);
    warn_of_other_settings(t);
    return caf::unit;
  }
  if (!t.pretrain.if_missing_pretrain)
    return make_error(errc::bad_config, missing_checkpoint(t));
  return pretrain_backbone(t);
}

caf::expected<void> pretrain_backbone(const topology& t) {
  if (t.checkpoint.empty())
    return caf::unit;
  const auto* task = t.find_task(t.pretrain.task);
  if (task == nullptr)
    return make_error(errc::bad_config, "backbone.pretrain.task '" + t.pretrain.task +
                                          "' is not one of the topology's tasks");
  // Refused before the pre-training, not after it.
  if (auto why = model::try_check_writable(t.checkpoint); !why.empty())
    return make_error(errc::bad_file, "backbone.checkpoint: " + why);
  at::set_num_threads(cores());
  try {
    auto data = load_data(t, t.pretrain.train_limit);
    if (!data)
      return data.error();
    const auto& train = data->train;
    const auto& test = data->test;
    // The samples read: at most pretrain.train_limit, fewer in a smaller dataset.
    spdlog::info("pre-training the backbone ({}) on task {} ({} samples, {} epoch(s)) into {}",
                 t.backbone.name, task->name, train.size(), t.pretrain.epochs, t.checkpoint);
    model::pretraining_settings spec{t.backbone, *task, t.pretrain.optimizer, t.plan, t.checkpoint,
                                     pretraining_settings_text(t)};
    spec.plan.epochs = t.pretrain.epochs;
    auto accuracy = model::pretrain(spec, train, test, log_progress("pretrain"));
    spdlog::info("pretrained backbone written to {} (test accuracy {:.2f}% on {})",
                 t.checkpoint, 100 * accuracy, task->name);
    // A network whose early steps were too large can end with dead units:
    // finite, written, and answering one class whatever it sees (4,096
    // samples of groups4 at lr 0.05 with momentum 0.9: 50.00%, the largest
    // group's share; a run fine-tuned from it stayed at chance).
    if (const double share = model::most_frequent_share(*task, test);
        test.size() > 0 && accuracy <= share + 1e-9)
      spdlog::warn("the pretrained backbone {} is no better than always answering {}'s most "
                   "frequent class ({:.2f}% of the test samples): it has learned nothing a run "
                   "can start from (a collapse: units that no input turns on). Lower "
                   "backbone.pretrain.optimizer.lr or pre-train on more samples "
                   "(backbone.pretrain.train_limit), then `baton pretrain {}` again",
                   t.checkpoint, task->name, 100 * share, t.file);
    return caf::unit;
  } catch (const std::exception& e) {
    return make_error(errc::bad_file, std::string{"pre-training failed: "} + e.what());
  }
}

} // namespace modes
} // namespace baton::actors
