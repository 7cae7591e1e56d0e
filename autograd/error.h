#pragma once
// Moved to base/error.h, which every folder may include; this forward keeps code
// written against the installed package's old path building for one more release.
#include "base/error.h"
