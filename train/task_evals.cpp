// Task columns of log.csv (train/task_evals.h).
#include "train/task_evals.h"

#include <limits>
#include <sstream>

namespace folio {

std::vector<std::string> task_columns_of(const std::string& header, const std::vector<std::string>& base) {
  std::istringstream names(header);
  std::vector<std::string> out;
  size_t at = 0;
  for (std::string name; std::getline(names, name, ',');) {
    if (!name.empty() && name.back() == '\r') name.pop_back();
    if (at < base.size()) {
      if (name != base[at++]) return {};
    } else {
      out.push_back(name);
    }
  }
  return at == base.size() ? out : std::vector<std::string>{};
}

std::vector<double> task_cells(const std::vector<std::string>& columns, const std::vector<std::string>& names,
                               const std::vector<double>& scores) {
  std::vector<double> cells(columns.size(), std::numeric_limits<double>::quiet_NaN());
  for (size_t c = 0; c < columns.size(); ++c)
    for (size_t t = 0; t < names.size() && t < scores.size(); ++t)
      if (names[t] == columns[c]) cells[c] = scores[t];
  return cells;
}

}  // namespace folio
