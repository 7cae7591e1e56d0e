#pragma once
// Moved to infer/generator.h (generate) and infer/sampling.h (SampleOptions,
// sample_token); this forward goes after one release.
#include "infer/generator.h"
