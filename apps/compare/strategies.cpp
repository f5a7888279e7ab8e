// Skeleton: implemented by its stream this session.
#include "apps/compare/strategies.hpp"
