#pragma once
// Moved to base/parse_name.h, which every folder may include; this forward keeps code
// written against the installed package's old path building for one more release.
#include "base/parse_name.h"
