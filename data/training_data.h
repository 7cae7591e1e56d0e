#pragma once
// TrainingData now lives in data/dataset.h, beside the text reader it opens; this
// header forwards to it for one release.
#include "data/dataset.h"
