#pragma once

// What the modes whose workers train one model together share: the result
// group their workers report into (data-parallel's workers, IST's), merged
// into one result of the job, and their actors' names (the faults they
// refuse are said by their parse, job_reading::refuses_edge_faults).
// actors/config/names.cpp reserves the name.

#include <cstdint>
#include <string>
#include <vector>

#include "actors/config/job_schema.hpp"
#include "messages/types.hpp"

namespace baton::actors {
inline namespace modes {

/// The result group every worker reports into.
inline const std::string workers_group = "workers";

/// Worker w's actor name: "worker.W" (the result group merges "worker.*").
std::string worker_name(int32_t worker);

/// Shard s's actor name: "shard.S". Shards report into no result group: the
/// job's result is the workers'.
std::string shard_name(int32_t shard);

/// The edge records of actor `from` to each of `count` peers, named by
/// `name_of` (worker_name, shard_name), nothing sent yet.
std::vector<messages::edge_stats> edges_to(const std::string& from, int32_t count,
                                           std::string (*name_of)(int32_t));

} // namespace modes
} // namespace baton::actors
