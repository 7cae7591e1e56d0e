#pragma once
// Moved to data/dataset.h; this forward goes after one release.
#include "data/dataset.h"
