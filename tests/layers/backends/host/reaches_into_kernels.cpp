// A planted violation: the host room sits below the shared kernels, so the layer check must
// refuse this (tests/CMakeLists.txt).
#include "backends/cpu_kernels/training_ops.h"
