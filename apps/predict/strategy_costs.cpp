// Implemented by stream C this session (issue 24).
#include "apps/predict/strategy_costs.hpp"
