// Planted: the executor's private header from another folder. cmake/check_layers.cmake must
// refuse it (ctest Layers.APrivateHeaderIsRefused).
#include "models/training_step_impl.h"
