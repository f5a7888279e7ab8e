// Skeleton: implemented by its stream this session.
#include "apps/predict/predict.hpp"

#include <cstdio>

namespace baton::apps {

int cmd_predict(args&, const std::atomic<bool>*) {
  std::fprintf(stderr, "baton predict: not built yet\n");
  return 1;
}

} // namespace baton::apps
