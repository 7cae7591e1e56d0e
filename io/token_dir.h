#pragma once
// Moved to data/token_dir.h; this forward goes after one release.
#include "data/token_dir.h"
