// A planted violation: the layer check must refuse it (tests/CMakeLists.txt).
#include "workloads/workload.h"
