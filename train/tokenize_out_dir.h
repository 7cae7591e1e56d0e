#pragma once
// Moved to data/tokenize_out_dir.h; this forward goes after one release.
#include "data/tokenize_out_dir.h"
