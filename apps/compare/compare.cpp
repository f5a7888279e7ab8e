// Skeleton: implemented by its stream this session.
#include "apps/compare/compare.hpp"

#include <cstdio>

namespace baton::apps {

int cmd_compare(args&, const std::atomic<bool>*) {
  std::fprintf(stderr, "baton compare: not built yet\n");
  return 1;
}

} // namespace baton::apps
