#pragma once

// `baton compare WORKLOAD.yaml`: runs every strategy that applies to one
// workload over the same nodes and links, ranks them by time to target and
// writes the report (docs/comparing.md).

#include <atomic>

#include "apps/args.hpp"

namespace baton::apps {

/// `baton compare WORKLOAD.yaml [flags]` (the arguments after `compare`);
/// stops when `interrupted`. The exit code: 0, 2 for bad input, 130.
int cmd_compare(args& a, const std::atomic<bool>* interrupted);

} // namespace baton::apps
