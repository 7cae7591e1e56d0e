#pragma once
// Moved to train/size_warmups.h; this forward goes after one release.
#include "train/size_warmups.h"
