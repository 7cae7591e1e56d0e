#pragma once
// Moved to data/token_manifest.h; this forward goes after one release.
#include "data/token_manifest.h"
