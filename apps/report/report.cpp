// Skeleton: implemented by its stream this session.
#include "apps/report/report.hpp"

#include <cstdio>

namespace baton::apps {

int cmd_report(args&) {
  std::fprintf(stderr, "baton report: not built yet\n");
  return 1;
}

} // namespace baton::apps
