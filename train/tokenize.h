#pragma once
// Moved to data/tokenize.h; this forward goes after one release.
#include "data/tokenize.h"
