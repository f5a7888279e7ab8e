// Implemented by stream C this session (issue 24).
#include "apps/predict/link_calibration.hpp"
