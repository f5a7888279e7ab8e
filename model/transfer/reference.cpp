#include "model/transfer/reference.hpp"

#include <memory>
#include <string>

#include "model/core/batches.hpp"
#include "model/core/error.hpp"

namespace baton::model {

std::vector<head_result> run_transfer_local(const layered_model& backbone,
                                            const std::vector<head_spec>& heads,
                                            const dataset& train, const dataset& test,
                                            const batch_plan& plan,
                                            const progress_fn& progress) {
  frozen_backbone frozen{backbone, {}};
  return run_transfer_local(frozen, heads, train, test, plan, progress);
}

std::vector<head_result> run_transfer_local(frozen_backbone& backbone,
                                            const std::vector<head_spec>& heads,
                                            const dataset& train, const dataset& test,
                                            const batch_plan& plan,
                                            const progress_fn& progress) {
  check_plan(plan);
  std::vector<std::unique_ptr<head_run>> runs;
  for (const auto& spec : heads) {
    if (spec.model.classes < spec.task_def.classes)
      throw error("head '" + spec.name + "': model has " + std::to_string(spec.model.classes) +
                  " outputs, expected at least the " + std::to_string(spec.task_def.classes) +
                  " classes of task '" + spec.task_def.name + "'");
    runs.push_back(std::make_unique<head_run>(spec, make_model(spec.model)));
    runs.back()->result.name = spec.name;
    runs.back()->result.task = spec.task_def.name;
  }
  for (int32_t epoch = 0; epoch < plan.epochs; ++epoch) {
    train_heads(backbone, runs, train, plan, epoch, progress);
    evaluate_heads(backbone, runs, test, plan.batch_size);
    backbone.end_epoch();
  }
  std::vector<head_result> results;
  for (auto& run : runs) {
    run->result.weights_digest = weights_digest(run->trainer.model());
    for (const auto& t : run->trainer.model().state())
      run->result.weights.push_back(t.detach());
    results.push_back(std::move(run->result));
  }
  return results;
}

} // namespace baton::model
