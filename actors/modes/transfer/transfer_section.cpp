#include "actors/modes/transfer/transfer_section.hpp"

#include <optional>
#include <string>
#include <vector>

namespace baton::actors {
inline namespace modes {
inline namespace transfer {

namespace {

using namespace detail;

// The feature cache (and canonical blocks) live in the stage that takes the
// source's images and holds the whole backbone: its cache keys are the data
// set's sample ids, and its output rows are the heads' features, which
// --mode local computes the same way.
void check_feature_cache(const field& root, const topology& t) {
  if ((!t.features.cache && t.features.block_rows == 0) || t.stages.size() == 1)
    return;
  field section = root.section("backbone");
  std::optional<field> key = section.get(t.features.cache ? "cache" : "feature_block");
  const std::string what = t.features.cache ? "'backbone.cache' is memory, which caches"
                                            : "'backbone.feature_block' computes";
  key->fail(what + " the features of the whole backbone in the one stage that holds it, but "
            "'backbone.split' cuts it into " + std::to_string(t.stages.size()) +
            " stages (expected split: [], or backbone.stages: 1 with split: auto)");
}

// The heads take the 256 features of the convnets' last layer.
void parse(const field& root, const std::vector<std::string>&, topology& t) {
  if (t.backbone.name == "resnet18")
    root.section("backbone").require("model")
      .fail("'backbone.model' is resnet18, a pipeline backbone (512 features), but the heads of "
            "job: transfer take 256 features (expected job: pipeline)");
  check_feature_cache(root, t);
}

std::vector<std::string> head_names(const topology& t) {
  std::vector<std::string> names;
  for (const auto& h : t.heads)
    names.push_back(h.spec.name);
  return names;
}

size_t compute_actors(const topology& t) {
  return t.stages.size() + t.heads.size();
}

// The source sends to the first stage; each frozen stage broadcasts to the
// next one, and the last to every head.
fault_edges edges(const topology& t) {
  fault_edges out;
  out.from = {"source"};
  std::vector<std::string> heads = head_names(t);
  for (size_t i = 0; i < t.stages.size(); ++i) {
    out.from.push_back(t.stages[i].name);
    out.to.push_back(t.stages[i].name);
    out.receivers[t.stages[i].name] =
      i + 1 < t.stages.size() ? std::vector<std::string>{t.stages[i + 1].name} : heads;
  }
  out.to.insert(out.to.end(), heads.begin(), heads.end());
  return out;
}

// The stages in order, then the heads.
void place(topology& t, const std::function<void(std::string&)>& place) {
  for (auto& stage : t.stages)
    place(stage.node);
  for (auto& head : t.heads)
    place(head.node);
}

void forget(topology& t, const std::function<bool(const std::string&)>& keep) {
  for (auto& stage : t.stages)
    if (!keep(stage.node))
      stage.node.clear();
  for (auto& head : t.heads)
    if (!keep(head.node))
      head.node.clear();
}

} // namespace

job_schema transfer_schema() {
  job_schema schema;
  schema.name = "transfer";
  schema.frozen_backbone = true;
  schema.parse = parse;
  schema.trainable = head_names;
  schema.compute_actors = compute_actors;
  schema.edges = edges;
  schema.place = place;
  schema.forget = forget;
  return schema;
}

} // namespace transfer
} // namespace modes
} // namespace baton::actors
