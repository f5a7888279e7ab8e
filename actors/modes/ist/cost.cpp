#include "actors/modes/ist/cost.hpp"

#include <exception>
#include <string>
#include <vector>

#include "actors/modes/ist/round_timing.hpp"
#include "actors/modes/ist/section.hpp"
#include "messages/errc.hpp"

namespace baton::actors {
inline namespace modes {
namespace ist {

namespace {

/// A round of the network `shape` with `workers` workers and `shards`
/// shards at `batch` samples a step as its roles run it (time_round: the
/// subnet assembled from its pieces, its local steps, the subnet cut, the
/// shards' pieces taken and written back), `copies` side by side. Always
/// timed (a --profile file holds the whole network's layers).
caf::expected<round_timing> round_of(const topology& t, const model::ist::shape& shape,
                                     int64_t batch, int32_t workers, int32_t shards,
                                     int32_t copies, cost_profiles& profiles) {
  const auto& s = section_of(t);
  std::string key = "ist/" + std::to_string(batch) + "/w" + std::to_string(workers) + "/s" +
                    std::to_string(shards) + "/c" + std::to_string(copies) + "/l" +
                    std::to_string(s.local_steps) + "/i" + std::to_string(shape.inputs) + "/k" +
                    std::to_string(shape.classes);
  for (int64_t h : shape.hidden)
    key += "h" + std::to_string(h);
  using figures_or_error = caf::expected<std::vector<double>>;
  auto figures = profiles.timed(key, [=, file = t.file, optimizer = s.optimizer,
                                      steps = s.local_steps]() -> figures_or_error {
    try {
      const round_timing r = time_round(shape, workers, shards, steps, batch, optimizer, copies);
      return std::vector<double>{r.step, r.round.assemble, r.round.split, r.round.partition,
                                 r.round.take, r.round.put};
    } catch (const std::exception& e) { // model::error, c10::Error
      return make_error(errc::bad_config, file + ": cannot time a round of IST: " + e.what());
    }
  });
  if (!figures)
    return figures.error();
  const auto& f = *figures;
  round_timing r;
  r.step = f.at(0);
  r.round.assemble = f.at(1);
  r.round.split = f.at(2);
  r.round.partition = f.at(3);
  r.round.take = f.at(4);
  r.round.put = f.at(5);
  return r;
}

} // namespace

caf::expected<costed_strategy> cost(const cost_request& q, cost_profiles& profiles) {
  const topology& t = q.t;
  const section_spec& s = section_of(t);
  if (s.kind != "ist")
    return refuse_cost(q.name, "ist.kind '" + s.kind + "' is not modelled (only kind: ist, an "
                               "mlp)");
  const int64_t batch = t.plan.batch_size;
  auto profile = profiles.of(t, batch, 1, q.side_by_side);
  if (!profile)
    return profile.error();
  costed_strategy c = costed_of(q.name, t, *profile);
  c.hosts = s.workers;
  model::ist::shape shape;
  shape.inputs = t.backbone.in_channels * t.backbone.in_height * t.backbone.in_width;
  shape.hidden = s.hidden;
  shape.classes = trained_model_of(t).spec.classes;
  model::cost::ist_strategy x;
  x.shards = s.shards;
  x.local_steps = s.local_steps;
  x.mlp_inputs = shape.inputs;
  x.mlp_hidden = shape.hidden;
  x.mlp_classes = shape.classes;
  // A subnet's step and a round's own work, timed as the roles run them:
  // a subnet's smaller matrices do not shrink as f does, and a round
  // assembles, cuts and writes back pieces no layer's profile has.
  const int32_t shards = x.shards == 0 ? c.hosts : x.shards;
  auto round = round_of(t, shape, batch, c.hosts, shards, q.side_by_side, profiles);
  if (!round)
    return round.error();
  x.subnet_step_seconds = round->step;
  x.subnet_workers = c.hosts;
  x.round = round->round;
  x.timed_shards = shards;
  return with_strategy(std::move(c), x);
}

} // namespace ist
} // namespace modes
} // namespace baton::actors
