#pragma once
// Moved to base/atomic_file.h; this forward goes after one release.
#include "base/atomic_file.h"
