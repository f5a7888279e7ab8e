#pragma once

// `heads:` under a job that trains one model on one task (pipeline,
// data-parallel, ist), as topology files named that task before `task:`
// existed (every job required `heads`): its first head names the task. Kept
// so that those files still run; new ones say `task: NAME`.

#include "actors/config/job_schema.hpp"

namespace baton::actors {
inline namespace modes {

/// Adds `heads` (a list of {name, task, node, optimizer}) to the keys of
/// `schema`, so that the parser takes it with that job.
void add_one_task_heads(job_schema& schema);

/// Without `task:` and `backbone.pretrain.task`, the task of the first entry
/// of `heads` (if any) is the workload's task (and pre-training's). Throws
/// config_error naming the file and line for `heads` beside `task:`, an
/// empty list, a name given twice or an unknown task.
void read_one_task_heads(const detail::field& root, topology& t);

} // namespace modes
} // namespace baton::actors
