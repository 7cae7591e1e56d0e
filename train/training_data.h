#pragma once
// Moved to data/training_data.h; this forward goes after one release.
#include "data/training_data.h"
