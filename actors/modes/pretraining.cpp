#include "actors/modes/pretraining.hpp"

#include <filesystem>
#include <string>

#include <ATen/Parallel.h>
#include <spdlog/spdlog.h>

#include "actors/runtime/local_run.hpp"
#include "messages/errc.hpp"
#include "model/core/atomic_file.hpp"
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

} // namespace

caf::expected<void> ensure_pretrained(const topology& t) {
  if (t.checkpoint.empty() || std::filesystem::exists(t.checkpoint))
    return caf::unit;
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
    model::pretraining_settings spec{t.backbone, *task, t.pretrain.optimizer, t.plan, t.checkpoint};
    spec.plan.epochs = t.pretrain.epochs;
    auto accuracy = model::pretrain(spec, train, test, log_progress("pretrain"));
    spdlog::info("pretrained backbone written to {} (test accuracy {:.2f}% on {})",
                 t.checkpoint, 100 * accuracy, task->name);
    return caf::unit;
  } catch (const std::exception& e) {
    return make_error(errc::bad_file, std::string{"pre-training failed: "} + e.what());
  }
}

} // namespace modes
} // namespace baton::actors
