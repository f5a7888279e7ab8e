// The checked readers the modes' sections use too (job_schema.hpp): a node,
// the optimizer, a thread budget, a task, an error's "at most".

#include <string>

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

const std::vector<std::string>& detail::optimizer_keys() {
  static const std::vector<std::string> keys = {
    "name",     "lr",            "momentum",    "nesterov", "betas", "eps",    "weight_decay",
    "schedule", "warmup_epochs", "step_epochs", "gamma",    "min_lr", "clip_grad_norm"};
  return keys;
}

model::optimizer_spec detail::read_optimizer(const field& section,
                                             model::optimizer_spec optimizer) {
  check_section(section);
  auto non_negative = [](const field& f) {
    return read_number(f, "a non-negative number", [](double x) { return x >= 0; });
  };
  auto fraction = [](const field& f) {
    return read_number(f, "a number in [0, 1)", [](double x) { return x >= 0 && x < 1; });
  };
  auto positive = [](const field& f) {
    return read_number(f, "a positive number", [](double x) { return x > 0; });
  };
  read_if(section, "name", optimizer.name,
          [](const field& f) { return read_choice(f, model::optimizer_names()); });
  read_if(section, "lr", optimizer.lr, positive);
  read_if(section, "momentum", optimizer.momentum, fraction);
  read_if(section, "nesterov", optimizer.nesterov, read_bool);
  if (auto f = section.get("betas")) {
    std::vector<double> betas;
    for (const field& v : f->items("a list of two numbers in [0, 1) (beta1, beta2)", 2))
      betas.push_back(fraction(v));
    if (betas.size() != 2)
      f->fail(f->name() + " must be two numbers [beta1, beta2], got " +
              std::to_string(betas.size()));
    optimizer.beta1 = betas[0];
    optimizer.beta2 = betas[1];
  }
  read_if(section, "eps", optimizer.eps, positive);
  read_if(section, "weight_decay", optimizer.weight_decay, non_negative);
  read_if(section, "schedule", optimizer.schedule,
          [](const field& f) { return read_choice(f, model::schedule_names()); });
  read_if(section, "warmup_epochs", optimizer.warmup_epochs, [](const field& f) {
    return read_number(f, "a number of epochs in [0, 1000]",
                       [](double x) { return x >= 0 && x <= 1000; });
  });
  read_if(section, "step_epochs", optimizer.step_epochs, positive);
  read_if(section, "gamma", optimizer.gamma, positive);
  read_if(section, "min_lr", optimizer.min_lr, non_negative);
  read_if(section, "clip_grad_norm", optimizer.clip_grad_norm, non_negative);
  // Settings that only make sense with another name are refused, not ignored.
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
