#pragma once
// A float for a message: every NaN as "nan" (its sign bit means nothing, and which
// sign an operation gives differs between builds: an ASan build's diverging loss was
// "-nan"), anything else as a stream writes it.
#include <cmath>
#include <string>

#include "base/error.h"

namespace folio {

inline std::string number_text(float v) { return std::isnan(v) ? std::string("nan") : cat(v); }

}  // namespace folio
