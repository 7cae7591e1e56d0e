#pragma once
// Moved to data/token_shard.h; this forward goes after one release.
#include "data/token_shard.h"
