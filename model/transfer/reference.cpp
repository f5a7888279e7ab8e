#include "model/transfer/reference.hpp"

#include <memory>
#include <string>

#include "model/core/batches.hpp"
#include "model/core/best_weights.hpp"
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
  return run_transfer_local(backbone, heads, data_splits{train, {}, test}, plan, {}, progress);
}

std::vector<head_result> run_transfer_local(frozen_backbone& backbone,
                                            const std::vector<head_spec>& heads,
                                            const data_splits& data, const batch_plan& plan,
                                            const selection_spec& selection,
                                            const progress_fn& progress) {
  check_plan(plan);
  std::vector<std::unique_ptr<head_run>> runs;
  for (const auto& spec : heads) {
    if (spec.model.classes < spec.task_def.classes)
      throw error("head '" + spec.name + "': model has " + std::to_string(spec.model.classes) +
                  " outputs, expected at least the " + std::to_string(spec.task_def.classes) +
                  " classes of task '" + spec.task_def.name + "'");
    runs.push_back(std::make_unique<head_run>(spec, make_model(spec.model)));
    // A step per minibatch, as the plan counts a head actor's.
    if (spec.optimizer.scheduled())
      runs.back()->trainer.set_schedule(count_epoch(data.train.size(), plan).minibatches,
                                        plan.epochs);
    runs.back()->result.name = spec.name;
    runs.back()->result.task = spec.task_def.name;
  }
  std::vector<best_weights> best(runs.size(), best_weights{selection});
  for (int32_t epoch = 0; epoch < plan.epochs; ++epoch) {
    train_heads(backbone, runs, data.train, plan, epoch, progress);
    evaluate_heads(backbone, runs, data.test, plan.batch_size);
    bool stop = data.validation.size() > 0;
    if (data.validation.size() > 0) {
      const auto accuracies =
        head_accuracies(backbone, runs, data.validation, plan.batch_size, data.test.size());
      for (size_t h = 0; h < runs.size(); ++h) {
        runs[h]->result.validation_accuracy.push_back(accuracies[h]);
        best[h].epoch_end(epoch, accuracies[h], runs[h]->trainer.model().state());
        stop = stop && best[h].stop();
      }
    }
    backbone.end_epoch();
    if (stop)
      break;
  }
  std::vector<head_result> results;
  for (size_t h = 0; h < runs.size(); ++h) {
    auto& run = runs[h];
    run->result.weights_digest = weights_digest(run->trainer.model());
    run->result.best_epoch = best[h].best_epoch();
    if (!best[h].weights().empty())
      run->result.weights = best[h].weights();
    else
      for (const auto& t : run->trainer.model().state())
        run->result.weights.push_back(t.detach());
    results.push_back(std::move(run->result));
  }
  return results;
}

} // namespace baton::model
