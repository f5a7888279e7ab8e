#pragma once

// The link model of the cost model (model/cost: bandwidth, latency,
// per-message overhead), measured with real processes over the links runs
// use: the loopback, or two emulated hosts of `--link RATE[,DELAY]`
// (actors/runtime/emulated_hosts.hpp: network namespaces, veth, tc), and
// kept in a small JSON per link so that it is measured once.
// docs/cost-model.md ("The link") says how.

#include <string>
#include <vector>

#include <caf/expected.hpp>
#include <nlohmann/json.hpp>

#include "model/cost/cost_model.hpp"

namespace baton::apps {

/// One measured size: the median one-way time of a message of `bytes`.
struct link_sample {
  double bytes = 0;
  double seconds = 0;
};

/// A link as measured.
struct link_calibration {
  model::cost::link_model link;
  std::string measured_on; ///< "loopback" or "emulated link 1gbit (2 hosts, ...)"
  std::string method;      ///< how, in words
  std::vector<link_sample> samples;
  /// The all-to-all's timed rounds, slowest host each (emulated links).
  std::vector<double> exchange_seconds;
  std::string cache_file;  ///< where it is kept ("" when not)
  bool cached = false;     ///< read from cache_file, not measured now
};

/// The median of `v`, the upper middle of an even count; 0 when empty. The
/// timed trips of a calibration (the link's, the runtime's).
double median_of(std::vector<double> v);

/// [{bytes, seconds}] of `samples`, and back (a missing field reads 0).
nlohmann::json samples_json(const std::vector<link_sample>& samples);
std::vector<link_sample> samples_of(const nlohmann::json& samples);

/// Writes `j` to `cache_dir`/`name` (the directory made first): that path,
/// or "" when it could not be written (a calibration is then not kept).
std::string keep_calibration(const std::string& cache_dir, const std::string& name,
                             const nlohmann::json& j);

/// {bandwidth, latency, message_overhead, burst, shared_efficiency,
/// measured_on, method, samples: [{bytes, seconds}], exchange_seconds}: the
/// cache file and the "link" of the predictions.
nlohmann::json to_json(const link_calibration& c);

/// The default directory of the cache: $XDG_CACHE_HOME/baton, else
/// $HOME/.cache/baton, else the system's temp directory.
std::string default_link_cache_dir();

/// What fit_link reads from the samples.
struct link_fit {
  double fixed = 0;     ///< a: the smallest message's time
  double bandwidth = 0; ///< bytes per second (infinite when the largest take no longer)
  double burst = 0;     ///< bytes that passed at once (a token bucket's), >= 0
};

/// link_model::shared_efficiency from an all-to-all among 3 hosts, each
/// sending `bytes` to each other host a round (`rounds`: the slowest host's
/// seconds of each): the time the rate gives the 2 `bytes` a host sends
/// (less the burst, which passes at once after a pause) over the rounds'
/// mean, within [0.05, 1]; 1 without rounds.
double exchange_efficiency(const model::cost::link_model& link, double bytes,
                           const std::vector<double>& rounds);

/// One-way time = a + max(0, bytes - burst) / bandwidth from the samples:
/// the bandwidth from the two largest (tc's tbf lets a burst of 10 ms of
/// the rate pass at the veth's speed: small messages say nothing of the
/// rate), a the time of the smallest (within the burst), the burst what the
/// largest took less than a + bytes / bandwidth (a ping-pong of messages of
/// at least twice the burst refills the bucket between them).
link_fit fit_link(const std::vector<link_sample>& samples);

/// The link of `link` ("" or "loopback": the loopback; else a --link
/// RATE[,DELAY]), read from `cache_dir`/link-NAME.json when it is there,
/// else measured and written there (`cache_dir` "": not kept). Measuring
/// an emulated link needs root (network namespaces): without it an error
/// that says so.
///
/// How: a server and a client process (forked, each in its emulated host's
/// namespace; on the loopback both on 127.0.0.1) over TCP with
/// TCP_NODELAY, as baton's nodes talk. Ping-pong of messages of 1 kB to 4 MB
/// (at most 0.1 s of the link each), the median of 7 round trips each,
/// halved: a + bytes / bandwidth fitted (fit_link). Then 2000 messages of
/// 64 bytes streamed back to back: their time each is the per-message
/// overhead (the sender's and receiver's work, the part of a that does not
/// overlap when messages follow each other); latency = a - overhead. An
/// emulated link is also measured by an all-to-all among 3 emulated hosts
/// (every host sends 0.1 s of the rate to each other host at once, 5 timed
/// rounds): link_model::shared_efficiency (exchange_efficiency). A kept
/// file of an emulated link without it is measured again.
caf::expected<link_calibration> calibrate_link(const std::string& link,
                                               const std::string& cache_dir);

} // namespace baton::apps
