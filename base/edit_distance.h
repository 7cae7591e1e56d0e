#pragma once
// How far apart two names are, for "did you mean": folio's commands and options
// (cli/), and the Python module's keyword arguments (python/).
#include <cstddef>
#include <string_view>

namespace folio {

// The edit distance (Levenshtein: insertions, deletions, substitutions) between a and b.
size_t edit_distance(std::string_view a, std::string_view b);

}  // namespace folio
