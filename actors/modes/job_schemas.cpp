#include "actors/modes/job_schemas.hpp"

#include "actors/modes/data_parallel/data_parallel_section.hpp"
#include "actors/modes/ist/ist_section.hpp"
#include "actors/modes/pipeline/pipeline_section.hpp"
#include "actors/modes/transfer/transfer_section.hpp"

namespace baton::actors {
inline namespace modes {

// The modes' schemas without the rest of the modes, so that a parser (the
// topology fuzzer) links their sections only; registry.cpp lists the same
// schemas, in this order, with each mode's plan and local reference.
const std::vector<job_schema>& all_job_schemas() {
  static const std::vector<job_schema> jobs{transfer_schema(), pipeline_schema(),
                                            data_parallel_schema(), ist::schema()};
  return jobs;
}

} // namespace modes
} // namespace baton::actors
