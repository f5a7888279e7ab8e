#include "actors/modes/costing.hpp"

#include <algorithm>

#include "messages/errc.hpp"
#include "model/core/dataset.hpp"

namespace baton::actors {
inline namespace modes {

namespace {

/// The samples of a split as a run reads them (after its limit; the
/// training split less its validation), from the data's headers, for every
/// kind (an npy workload's evaluation had been predicted at 0: no size known
/// but Fashion-MNIST's): as the parse read them, else (a topology of listed
/// nodes) from the files where this host has them; the limit, else 0, where
/// they cannot be read (the run says why).
int64_t split_size(const topology& t, model::split which) {
  if (t.data_header)
    return which == model::split::train ? t.data_header->train : t.data_header->test;
  try {
    return model::data_size(t.data, which);
  } catch (const std::exception&) { // model::file_error, model::error
    return which == model::split::train ? t.data.train_limit : t.data.test_limit;
  }
}

/// The layers' times scaled so that their forwards, backwards and updates
/// sum to `step` (a step timed whole); their split kept.
void scale_to_step(model::cost::workload& w, double step) {
  double sum = 0;
  for (const auto& l : w.layers)
    sum += l.forward_seconds + l.backward_seconds + l.update_seconds;
  if (sum <= 0 || step <= 0)
    return;
  const double scale = step / sum;
  for (auto& l : w.layers) {
    l.forward_seconds *= scale;
    l.backward_seconds *= scale;
    l.update_seconds *= scale;
    l.weight_gradient_seconds *= scale;
  }
}

} // namespace

trained_model trained_model_of(const topology& t) {
  trained_model m{t.trained_network.value_or(t.backbone),
                  t.trained_optimizer.value_or(t.pretrain.optimizer)};
  const model::task* task = t.find_task(t.task);
  m.spec.classes = task != nullptr ? task->classes : 10;
  return m;
}

caf::error refuse_cost(const std::string& name, const std::string& why) {
  return make_error(errc::bad_config, "baton predict: " + name + ": " + why);
}

model::cost::workload workload_of(const model::model_profile& p, const topology& t) {
  model::cost::workload w;
  for (const auto& l : p.layers)
    w.layers.push_back({l.name, l.forward_seconds, l.backward_seconds, l.update_seconds,
                        static_cast<double>(l.activation_bytes),
                        static_cast<double>(l.parameter_bytes), l.weight_gradient_seconds});
  w.profiled_batch = std::max<int64_t>(1, p.microbatch_size);
  w.batch_size = t.plan.batch_size;
  w.samples_per_epoch = split_size(t, model::split::train);
  w.test_samples = split_size(t, model::split::test);
  return w;
}

costed_strategy costed_of(const std::string& name, const topology& t,
                          const model::model_profile& profile) {
  costed_strategy c;
  c.name = name;
  c.model = profile.model;
  c.optimizer = trained_model_of(t).optimizer.name;
  c.load = workload_of(profile, t);
  return c;
}

caf::error scale_to_whole_step(costed_strategy& c, const topology& t, int64_t batch,
                               cost_profiles& profiles, int32_t copies) {
  if (profiles.from_file())
    return caf::none;
  // A worker computes its whole model in one graph a step, a stage its
  // layers: the layers timed one by one inside a pass summed 7-9% above
  // the step timed whole for the convnet at 32 samples (30.5-31.0 ms
  // against 28.4), 2.4% for the mlp. Their sum is taken from the step
  // timed whole; their split (what a frozen prefix saves, when a bucket
  // is ready, a stage's share) from the profile.
  auto step = profiles.whole_step_of(t, batch, copies);
  if (!step)
    return step.error();
  scale_to_step(c.load, *step);
  c.timed_step_seconds = *step;
  return caf::none;
}

costed_strategy with_strategy(costed_strategy c, model::cost::strategy s) {
  c.strategy = s;
  if (auto* ps = std::get_if<model::cost::ps_strategy>(&s); ps && ps->shards == c.hosts)
    ps->shards = 0;
  if (auto* ist = std::get_if<model::cost::ist_strategy>(&s); ist && ist->shards == c.hosts)
    ist->shards = 0;
  if (auto* p = std::get_if<model::cost::pipeline_strategy>(&s)) {
    p->stage_ends.clear();
    p->replicas.clear();
  }
  c.projected = s;
  return c;
}

} // namespace modes
} // namespace baton::actors
