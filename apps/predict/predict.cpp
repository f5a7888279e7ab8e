#include "apps/predict/predict.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <stdexcept>
#include <variant>

#include "actors/config/topology_file.hpp"
#include "actors/modes/job_schemas.hpp"
#include "actors/modes/planning.hpp"
#include "actors/modes/registry.hpp"
#include "actors/runtime/emulated_hosts.hpp"
#include "actors/runtime/plan_checks.hpp"
#include "apps/bench/bench.hpp"
#include "apps/compare/strategies.hpp"
#include "apps/predict/link_calibration.hpp"
#include "apps/predict/runtime_calibration.hpp"
#include "apps/predict/profile_cache.hpp"
#include "messages/errc.hpp"
#include "model/core/atomic_file.hpp"
#include "model/cost/projection.hpp"
#include "model/cost/simulated_plans.hpp"

namespace baton::apps {

namespace {

using actors::costed_strategy;
using json = nlohmann::json;
namespace cost = model::cost;

constexpr const char* efficiency_note =
  "each step is simulated from the strategy's plan on that many hosts (the formulas' figures, "
  "inside each measured row, are the cross-check); statistical efficiency at larger W is not "
  "predicted, only assumed";

/// The host count the strategies are parsed at when no run is predicted:
/// a projection takes their settings to every W.
constexpr int32_t base_hosts = 2;

// -- the strategies --------------------------------------------------------------------

/// One strategy parsed at one host count, or why it does not apply.
struct parsed_strategy {
  std::string name;
  int32_t hosts = 0;
  std::optional<costed_strategy> costed;
  std::string skipped; ///< why not ("" when costed)
};

std::string text_of(const caf::error& e) {
  std::string text = to_string(e);
  // caf's rendering wraps the message in the error's code and quotes; keep the message.
  const auto open = text.find('"'), close = text.rfind('"');
  return open < close && close != std::string::npos ? text.substr(open + 1, close - open - 1)
                                                    : text;
}

/// The topology a run of `choice` would parse, as baton compare makes it
/// (derive_topology, run_overrides), with what its measured run settled
/// when `as_run` (predict_request::settled), then its cost model inputs.
caf::expected<costed_strategy> costed_choice(const predict_request& r, strategy_choice& choice,
                                             int32_t hosts, profile_cache& profiles,
                                             int32_t side_by_side, bool as_run) {
  auto text = derive_topology(choice, *r.workload_text, r.workload, r.overrides);
  if (!text)
    return text.error();
  auto overrides = run_overrides(choice, *text, r.workload, r.overrides);
  if (!overrides)
    return overrides.error();
  if (auto ran = r.settled.find(choice.name); as_run && ran != r.settled.end())
    overrides->insert(overrides->end(), ran->second.begin(), ran->second.end());
  auto t = actors::parse_topology_as(*text, r.workload, *overrides);
  if (!t)
    return t.error();
  return actors::cost_of({choice.name, std::move(*t), hosts, actors::link_bytes_per_second(r.link),
                          side_by_side},
                         profiles);
}

/// Every strategy of the list at `hosts` hosts: the workload parsed with
/// the user's overrides and the strategy's (and, `as_run`, what its
/// measured run settled), then its cost model inputs, profiled with
/// `side_by_side` copies computing at once (actors::cost_of: its mode's cost).
caf::expected<std::vector<parsed_strategy>> parse_strategies(const predict_request& r,
                                                             int32_t hosts,
                                                             profile_cache& profiles,
                                                             int32_t side_by_side = 1,
                                                             bool as_run = false) {
  auto chosen = r.strategies.empty() ? all_strategies(hosts)
                                     : choose_strategies(r.strategies, hosts);
  if (!chosen)
    return chosen.error();
  std::vector<parsed_strategy> out;
  for (auto& choice : *chosen) {
    parsed_strategy p{choice.name, hosts, std::nullopt, ""};
    auto c = costed_choice(r, choice, hosts, profiles, side_by_side, as_run);
    if (c)
      p.costed = *c;
    else
      p.skipped = text_of(c.error());
    out.push_back(p);
  }
  return out;
}

// -- the link ------------------------------------------------------------------------------

/// Where the link's and the runtime's calibrations are kept.
std::string cache_dir_of(const predict_request& r) {
  return r.cache_dir.empty() ? default_link_cache_dir() : r.cache_dir;
}

caf::expected<link_calibration> link_of(const predict_request& r) {
  if (!r.latency)
    return calibrate_link(r.link, cache_dir_of(r));
  link_calibration c;
  c.link.latency = *r.latency;
  c.link.bandwidth = r.bandwidths.empty() ? model::cost::gbit_per_second(1) : r.bandwidths.front();
  if (!r.link.empty()) {
    std::string error;
    if (auto spec = actors::parse_link_spec(r.link, error)) {
      c.link.bandwidth = static_cast<double>(spec->rate_bits) / 8;
      c.link.burst = static_cast<double>(actors::burst_bytes(*spec));
    }
  }
  c.measured_on = r.link.empty() ? "given" : "given, --link " + r.link;
  c.method = "given: --latency (message_overhead 0, bandwidth from --link or the first "
             "--bandwidth, burst the emulated link's token bucket with --link, else 0)";
  return c;
}

/// The runtime's own costs beside the loopback's sockets (calibrate_runtime),
/// none when the link is given (--latency: nothing is measured).
caf::expected<runtime_calibration> runtime_of(const predict_request& r,
                                              const link_calibration& link) {
  if (r.latency) {
    runtime_calibration none;
    none.method = "none: the link is given (--latency), nothing is measured";
    return none;
  }
  const std::string dir = cache_dir_of(r);
  if (r.link.empty() || r.link == "loopback")
    return calibrate_runtime(link.link, dir);
  auto loopback = calibrate_link("loopback", dir);
  if (!loopback)
    return loopback.error();
  return calibrate_runtime(loopback->link, dir);
}

// -- the predictions object ---------------------------------------------------------------

json row_of(const std::string& name, const cost::prediction& p) {
  return {{"strategy", name},
          {"hosts", p.hosts},
          {"step_seconds", p.step_seconds},
          {"compute_seconds", p.compute_seconds},
          {"communication_seconds", p.communication_seconds},
          {"waiting_seconds", p.waiting_seconds},
          {"evaluation_seconds", p.evaluation_seconds},
          {"bytes_per_step", p.wire_bytes},
          {"samples_per_step", p.samples_per_step},
          {"samples_per_second", p.samples_per_second()}};
}

/// Thrown by a simulation asked for once a stop was requested: the
/// projection and the crossovers simulate for tens of seconds at 64 hosts.
struct stopped : std::runtime_error {
  stopped() : std::runtime_error("baton predict: interrupted") {}
};

/// The simulation, which throws `stopped` instead of simulating once
/// `interrupted` is set.
cost::predictor stoppable_simulation(const std::atomic<bool>* interrupted,
                                     const cost::runtime_costs& runtime) {
  cost::predictor by = cost::by_simulation(runtime);
  by.step = [step = by.step, interrupted](const cost::workload& w, const cost::cluster& c,
                                          const cost::strategy& s) {
    if (stop_requested(interrupted))
      throw stopped{};
    return step(w, c, s);
  };
  return by;
}

/// What `make` gives by `simulation`, or by the formulas where a plan cannot
/// be simulated (a requested stop goes on as `stopped`); `method` says
/// which, `why` (when given) why the simulation failed.
template <typename Make>
auto simulated_or_formula(const Make& make, const cost::predictor& simulation,
                          std::string& method, std::string* why = nullptr) {
  try {
    method = "simulation";
    return make(simulation);
  } catch (const stopped&) {
    throw;
  } catch (const std::exception& e) {
    method = "formula";
    if (why != nullptr)
      *why = e.what();
    return make(cost::by_formula());
  }
}

/// The step of `s` on `c` from a simulation of its plan (model/cost/simulator.hpp)
/// with the runtime's calibrated costs ("runtime_seconds": what they add to
/// the step beside `runtime.colocation`, which is the workload's), and the
/// formula's figures inside it ("formula") as the cross-check, from
/// `formula_from`'s profile when given. A plan the simulation cannot run is
/// predicted by the formula and says why ("method": "formula",
/// "simulation_error").
json predicted_row(const costed_strategy& s, const cost::cluster& c,
                   const cost::runtime_costs& runtime,
                   const costed_strategy* formula_from = nullptr) {
  std::string method, why;
  json row = row_of(s.name, simulated_or_formula(
                              [&](const cost::predictor& by) {
                                return by.step(s.load, c, s.strategy);
                              },
                              cost::by_simulation(runtime), method, &why));
  row["method"] = method;
  if (!why.empty())
    row["simulation_error"] = why;
  // What of the step the runtime's own costs make: the plan simulated without them.
  if (method == "simulation") {
    cost::runtime_costs colocated;
    colocated.colocation = runtime.colocation;
    row["runtime_seconds"] =
      row["step_seconds"].get<double>() -
      cost::by_simulation(colocated).step(s.load, c, s.strategy).step_seconds;
  }
  const costed_strategy& f = formula_from != nullptr ? *formula_from : s;
  json cross_check = row_of(s.name, cost::predict(f.load, c, f.strategy));
  cross_check.erase("strategy");
  cross_check.erase("hosts");
  row["formula"] = cross_check;
  if (s.timed_step_seconds > 0)
    row["layers_scaled_to_step_seconds"] = s.timed_step_seconds;
  return row;
}

/// A calibration (the link's, the runtime's) as the predictions show it:
/// without its samples, with the file it is kept in.
template <class Calibration>
json shown(const Calibration& c) {
  json j = to_json(c);
  j.erase("samples");
  j.erase("cpu_samples");
  if (!c.cache_file.empty())
    j["cache_file"] = c.cache_file;
  return j;
}

json profile_json(const std::vector<parsed_strategy>& strategies) {
  json models = json::array();
  for (const auto& s : strategies)
    if (s.costed) {
      json m = {{"model", s.costed->model},
                {"optimizer", s.costed->optimizer},
                {"batch", s.costed->load.batch_size},
                {"profiled_batch", s.costed->load.profiled_batch},
                {"layers", s.costed->load.layers.size()}};
      if (std::find(models.begin(), models.end(), m) == models.end())
        models.push_back(m);
    }
  json first = models.empty() ? json::object() : models.front();
  first["models"] = models;
  return first;
}

/// A pipeline profiled alone and the co-location its simulation takes.
struct profiled_alone {
  costed_strategy costed;
  double colocation = 0;
};

/// A pipeline's stages compute at once only part of a step (one waits for
/// another; one may hold nearly all the layers): its profile is taken alone
/// and the co-location of `copies` side by side (`shared`) becomes the
/// simulation's, which slows only the stages computing at once:
/// colocation = (shared / alone - 1) / (copies - 1) of a step's compute, at
/// least 0. nullopt for another strategy, or one copy: profiled side by side,
/// as its workers all compute at once.
std::optional<profiled_alone> alone_with_colocation(const predict_request& r, int32_t hosts,
                                                    profile_cache& profiles, int32_t copies,
                                                    const costed_strategy& shared) {
  if (copies < 2 || !std::holds_alternative<cost::pipeline_strategy>(shared.strategy))
    return std::nullopt;
  predict_request one = r;
  one.strategies = shared.name;
  auto parsed = parse_strategies(one, hosts, profiles, 1, true);
  if (!parsed || parsed->size() != 1 || !parsed->front().costed)
    return std::nullopt;
  const auto step_compute = [](const cost::workload& w) {
    return cost::compute_of(w, static_cast<double>(w.batch_size), cost::freezing{}).total();
  };
  const costed_strategy& alone = *parsed->front().costed;
  const double alone_seconds = step_compute(alone.load);
  if (!(alone_seconds > 0))
    return std::nullopt;
  return profiled_alone{
    alone, std::max(0.0, (step_compute(shared.load) / alone_seconds - 1) / (copies - 1))};
}

/// Each strategy at each measured host count on the calibrated link. The
/// runs compared with these are emulated hosts sharing this machine's cores:
/// min(W, cores) of their workers or stages compute at once, so the profile
/// is taken with as many copies side by side (the caches and memory they
/// share slow each), and compute beyond the cores stretches
/// (cluster::shared_cores); a pipeline's profile alone, with the co-location
/// measured (alone_with_colocation).
json measured_rows(const predict_request& r, const link_calibration& link,
                   const cost::runtime_costs& runtime, profile_cache& profiles, json& skipped) {
  json rows = json::array();
  const int32_t cores = actors::cores();
  for (int32_t h : r.measured_hosts) {
    const int32_t copies = std::min(h, cores);
    auto parsed = parse_strategies(r, h, profiles, copies, true);
    if (!parsed)
      continue; // the list was checked at the base
    for (const auto& s : *parsed) {
      if (!s.costed) {
        json why = {{"strategy", s.name}, {"hosts", h}, {"reason", s.skipped}};
        if (std::find(skipped.begin(), skipped.end(), why) == skipped.end())
          skipped.push_back(why);
        continue;
      }
      const cost::cluster c{h, link.link, cores};
      if (auto alone = alone_with_colocation(r, h, profiles, copies, *s.costed)) {
        cost::runtime_costs with = runtime;
        with.colocation = alone->colocation;
        rows.push_back(predicted_row(alone->costed, c, with, &*s.costed));
        rows.back()["colocation"] = alone->colocation;
      } else {
        rows.push_back(predicted_row(*s.costed, c, runtime));
      }
      if (auto ran = r.settled.find(s.name); ran != r.settled.end())
        rows.back()["settled"] = ran->second;
    }
  }
  return rows;
}

/// Each strategy simulated on every (hosts, bandwidth) of the projection, its
/// plan built for that many hosts; by the formula where its plan cannot be
/// simulated ("method" says which).
json projection_rows(const predict_request& r, const std::vector<parsed_strategy>& strategies,
                     const link_calibration& link, const cost::runtime_costs& runtime,
                     const std::atomic<bool>* interrupted) {
  json rows = json::array();
  const auto simulation = stoppable_simulation(interrupted, runtime);
  for (const auto& s : strategies) {
    if (!s.costed)
      continue;
    const auto project = [&](const cost::predictor& by) {
      return cost::project(s.costed->load, s.costed->projected, link.link, r.hosts,
                           r.bandwidths, by);
    };
    std::string method;
    for (const auto& point : simulated_or_formula(project, simulation, method))
      rows.push_back({{"strategy", s.name},
                      {"hosts", point.hosts},
                      {"bandwidth_bits", point.bandwidth * 8},
                      {"step_seconds", point.predicted.step_seconds},
                      {"samples_per_second", point.predicted.samples_per_second()},
                      {"hosts_used", point.predicted.hosts},
                      {"method", method}});
  }
  return rows;
}

/// Where the simulated strategies overtake each other on the projection's
/// grid (the formulas' where a plan cannot be simulated), and by which.
json crossover_texts(const predict_request& r, const std::vector<parsed_strategy>& strategies,
                     const link_calibration& link, const cost::runtime_costs& runtime,
                     const std::atomic<bool>* interrupted, std::string& method) {
  std::vector<cost::costed> subjects;
  for (const auto& s : strategies)
    if (s.costed)
      subjects.push_back({s.costed->load, s.costed->projected, s.name});
  const auto find = [&](const cost::predictor& by) {
    return cost::crossovers(subjects, link.link, r.hosts, r.bandwidths, by);
  };
  json out = json::array();
  for (const auto& x :
       simulated_or_formula(find, stoppable_simulation(interrupted, runtime), method))
    out.push_back({{"sentence", x.sentence()},
                   {"faster_above", x.faster_above},
                   {"faster_below", x.faster_below}});
  return out;
}

caf::error check(const predict_request& r) {
  if (r.hosts.empty() || r.bandwidths.empty())
    return make_error(errc::bad_config, "baton predict: no hosts or no bandwidths to project to");
  for (double b : r.bandwidths)
    if (!(b > 0))
      return make_error(errc::bad_config, "baton predict: a bandwidth must be > 0 bytes/s");
  for (const auto* list : {&r.hosts, &r.measured_hosts})
    for (int32_t h : *list)
      if (h < 1 || h > 64)
        return make_error(errc::bad_config, "baton predict: hosts must be 1 to 64, got " +
                                              std::to_string(h));
  return {};
}

void tell(const predict_request& r, const std::string& what) {
  if (r.progress)
    r.progress(what);
}

/// `r` with its workload's text: the caller's, else the file read once here
/// (as `baton run` reads it: its size limit, a directory or a device refused
/// by name), for every strategy and host count after.
caf::expected<predict_request> with_workload_text(const predict_request& r) {
  if (r.workload_text)
    return r;
  auto text = actors::read_topology_file(r.workload);
  if (!text)
    return text.error();
  predict_request read = r;
  read.workload_text = std::move(*text);
  return read;
}

} // namespace

caf::error profile_models(const predict_request& request, profile_cache& profiles) {
  if (auto err = check(request))
    return err;
  auto read = with_workload_text(request);
  if (!read)
    return read.error();
  const predict_request& r = *read;
  auto strategies = parse_strategies(r, base_hosts, profiles);
  if (!strategies)
    return strategies.error();
  for (int32_t h : r.measured_hosts)
    (void)parse_strategies(r, h, profiles, std::min(h, actors::cores()), true);
  return {};
}

caf::expected<nlohmann::json> predict(const predict_request& request,
                                      const std::atomic<bool>* interrupted,
                                      profile_cache* shared) {
  if (auto err = check(request))
    return err;
  auto read = with_workload_text(request);
  if (!read)
    return read.error();
  const predict_request& r = *read;
  // The profile file is read once, before any model is profiled: a mistake in it is
  // refused first, not found after minutes as "no strategy applies".
  std::optional<model::model_profile> given;
  if (!r.profile.empty()) {
    auto file = actors::load_profile(r.profile);
    if (!file)
      return file.error();
    given = std::move(file->profile);
  }
  profile_cache own(std::move(given));
  profile_cache& profiles = shared != nullptr ? *shared : own;
  tell(r, "profiling the models the strategies train");
  auto strategies = parse_strategies(r, base_hosts, profiles);
  if (!strategies)
    return strategies.error();
  if (std::none_of(strategies->begin(), strategies->end(),
                   [](const parsed_strategy& s) { return s.costed.has_value(); }))
    return make_error(errc::bad_config, "baton predict: no strategy applies to " + r.workload +
                                          (strategies->empty() ? std::string()
                                                               : ": " + strategies->front().skipped));
  if (stop_requested(interrupted))
    return make_error(errc::interrupted, "baton predict: interrupted");
  tell(r, r.latency ? "the link as given" : "the link: measured, or read from its kept file");
  auto link = link_of(r);
  if (!link)
    return link.error();
  tell(r, r.latency ? "the runtime's own cost: none (the link is given)"
                    : "the runtime's own cost: measured, or read from its kept file");
  auto runtime = runtime_of(r, *link);
  if (!runtime)
    return runtime.error();
  json skipped = json::array();
  for (const auto& s : *strategies)
    if (!s.costed)
      skipped.push_back({{"strategy", s.name}, {"hosts", s.hosts}, {"reason", s.skipped}});
  json out = {{"link", shown(*link)},
              {"runtime", shown(*runtime)},
              {"profile", profile_json(*strategies)}};
  out["measured"] = measured_rows(r, *link, runtime->costs, profiles, skipped);
  out["profile_rounds"] = profiles.rounds();
  const auto costed = std::count_if(strategies->begin(), strategies->end(),
                                    [](const parsed_strategy& s) { return s.costed.has_value(); });
  const auto counted = [](size_t n, const std::string& one, const std::string& many) {
    return std::to_string(n) + " " + (n == 1 ? one : many);
  };
  tell(r, "simulating " + counted(static_cast<size_t>(costed), "strategy", "strategies") + " at " +
            counted(r.hosts.size(), "host count", "host counts") + " x " +
            counted(r.bandwidths.size(), "rate", "rates"));
  try {
    out["projection"] =
      projection_rows(r, *strategies, *link, runtime->costs, interrupted);
    tell(r, "looking for crossovers");
    std::string crossovers_method;
    out["crossovers"] =
      crossover_texts(r, *strategies, *link, runtime->costs, interrupted, crossovers_method);
    out["crossovers_method"] = crossovers_method;
  } catch (const stopped& e) {
    return make_error(errc::interrupted, e.what());
  }
  out["skipped"] = skipped;
  out["note"] = efficiency_note;
  return out;
}

} // namespace baton::apps
