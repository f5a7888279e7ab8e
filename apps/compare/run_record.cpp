// Skeleton: implemented by its stream this session.
#include "apps/compare/run_record.hpp"
