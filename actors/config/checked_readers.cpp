// The checked readers the modes' sections use too (job_schema.hpp): a node,
// the optimizer, a thread budget, a task, an error's "at most".

#include <string>
#include <vector>

#include "actors/config/section_fields.hpp"
#include "actors/config/section_optimizer.hpp"
#include "actors/config/topology_parts.hpp"
#include "actors/net/system.hpp"
#include "model/core/error.hpp"
#include "model/core/optimizer.hpp"

namespace baton::actors {
inline namespace config {

using namespace detail;

// -- checked readers ------------------------------------------------------------

std::string detail::at_most(size_t most, const std::string& what) {
  return "at most " + std::to_string(most) + " " + what;
}

std::string detail::read_node(const field& f, const std::vector<node_address>& nodes) {
  std::string name = read_name(f);
  if (nodes.empty())
    f.fail(f.name() + " names node '" + name
           + "' but the topology has no nodes (list them under 'nodes')");
  std::vector<std::string> names;
  for (const auto& node : nodes)
    names.push_back(node.name);
  if (!contains(names, name))
    f.fail(f.name() + " names node '" + name + "', which is not under 'nodes' (expected one of: "
           + join(names) + ")");
  return name;
}

namespace {

double non_negative_number(const field& f) {
  return read_number(f, "a non-negative number", [](double x) { return x >= 0; });
}

double fraction_number(const field& f) {
  return read_number(f, "a number in [0, 1)", [](double x) { return x >= 0 && x < 1; });
}

double positive_number(const field& f) {
  return read_number(f, "a positive number", [](double x) { return x > 0; });
}

// Settings that only make sense with another name or schedule are refused,
// not ignored; then model::check_optimizer's refusals.
void check_optimizer_section(const field& section, model::optimizer_spec& optimizer) {
  auto only = [&](const char* key, bool ok, const std::string& why) {
    if (auto f = section.get(key); f && !ok)
      f->fail(f->name() + " " + why + " (optimizer name is " + optimizer.name + ")");
  };
  const bool sgd = optimizer.name == "sgd";
  only("momentum", sgd, "is SGD's; adam and adamw take betas");
  only("nesterov", sgd && (!optimizer.nesterov || optimizer.momentum > 0),
       "needs sgd with momentum > 0");
  only("betas", !sgd, "are adam's and adamw's");
  only("eps", !sgd, "is adam's and adamw's");
  only("step_epochs", optimizer.schedule == "step", "needs schedule: step");
  only("gamma", optimizer.schedule == "step", "needs schedule: step");
  only("min_lr", optimizer.schedule == "cosine", "needs schedule: cosine");
  if (!section.get("momentum") && !sgd)
    optimizer.momentum = 0; // not adam's: shown as 0 in plans, never read
  try {
    model::check_optimizer(optimizer);
  } catch (const model::error& e) {
    section.fail(section.name() + ": " + e.what());
  }
}

// torch.optim's names (docs/configuration.md).
const section_fields<model::optimizer_spec>& optimizer_fields() {
  using spec = model::optimizer_spec;
  static const section_fields<spec> fields{
    {
      {"name", [](const field& f, const field&,
                  spec& o) { o.name = read_choice(f, model::optimizer_names()); }},
      {"lr", [](const field& f, const field&, spec& o) { o.lr = positive_number(f); }},
      {"momentum",
       [](const field& f, const field&, spec& o) { o.momentum = fraction_number(f); }},
      {"nesterov", [](const field& f, const field&, spec& o) { o.nesterov = read_bool(f); }},
      {"betas",
       [](const field& f, const field&, spec& o) {
         std::vector<double> betas;
         for (const field& v : f.items("a list of two numbers in [0, 1) (beta1, beta2)", 2))
           betas.push_back(fraction_number(v));
         if (betas.size() != 2)
           f.fail(f.name() + " must be two numbers [beta1, beta2], got " +
                  std::to_string(betas.size()));
         o.beta1 = betas[0];
         o.beta2 = betas[1];
       }},
      {"eps", [](const field& f, const field&, spec& o) { o.eps = positive_number(f); }},
      {"weight_decay",
       [](const field& f, const field&, spec& o) { o.weight_decay = non_negative_number(f); }},
      {"schedule", [](const field& f, const field&,
                      spec& o) { o.schedule = read_choice(f, model::schedule_names()); }},
      {"warmup_epochs",
       [](const field& f, const field&, spec& o) {
         o.warmup_epochs = read_number(f, "a number of epochs in [0, 1000]",
                                       [](double x) { return x >= 0 && x <= 1000; });
       }},
      {"step_epochs",
       [](const field& f, const field&, spec& o) { o.step_epochs = positive_number(f); }},
      {"gamma", [](const field& f, const field&, spec& o) { o.gamma = positive_number(f); }},
      {"min_lr", [](const field& f, const field&, spec& o) { o.min_lr = non_negative_number(f); }},
      {"clip_grad_norm",
       [](const field& f, const field&, spec& o) { o.clip_grad_norm = non_negative_number(f); }},
    },
    check_optimizer_section};
  return fields;
}

} // namespace

const std::vector<std::string>& detail::optimizer_keys() {
  static const std::vector<std::string> keys = optimizer_fields().keys();
  return keys;
}

model::optimizer_spec detail::read_optimizer(const field& section,
                                             model::optimizer_spec optimizer) {
  optimizer_fields().read(section, optimizer);
  return optimizer;
}

detail::section_optimizer detail::read_section_optimizer(const field& root, const field& section,
                                                         const topology& t,
                                                         const model::optimizer_spec& fallback) {
  auto own = section.get("optimizer");
  auto workload = root.get("optimizer");
  if (own && workload)
    own->fail(own->name() + " is the older name of the workload's optimizer section, which " +
              t.optimizer_where + " gives too (expected one of them)");
  section_optimizer out{t.optimizer ? *t.optimizer : fallback, own ? own : workload};
  if (own)
    out.optimizer = read_optimizer(*own, out.optimizer);
  return out;
}

int32_t detail::read_compute_threads(const field& f) {
  return read_integer<int32_t>(f, 1, max_compute_threads,
                               "a number of threads per actor from 1 to "
                                 + std::to_string(max_compute_threads));
}

const model::task& detail::read_task(const field& f, const workload& t) {
  std::string name = read_name(f);
  if (const model::task* found = t.find_task(name))
    return *found;
  std::vector<std::string> names;
  for (const auto& task : t.tasks)
    names.push_back(task.name);
  if (names.empty())
    f.fail(f.name() + " names task '" + name + "' but the topology has no tasks");
  f.fail(f.name() + " names unknown task '" + name + "' (expected one of the tasks: "
         + join(names) + ")");
}

} // namespace config
} // namespace baton::actors
