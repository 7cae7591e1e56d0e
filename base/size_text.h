#pragma once
// A byte count in the unit that shows it, for progress lines: "500 bytes", "50.0 KB"
// (a small split, not "0.0 MB"), "64.0 MB", "1.07 GB".
#include <cstdio>
#include <string>

namespace folio {

inline std::string size_text(double bytes) {
  char buf[32];
  if (bytes < 1e3) std::snprintf(buf, sizeof buf, "%.0f bytes", bytes);
  else if (bytes < 1e6) std::snprintf(buf, sizeof buf, "%.1f KB", bytes / 1e3);
  else if (bytes < 1e9) std::snprintf(buf, sizeof buf, "%.1f MB", bytes / 1e6);
  else std::snprintf(buf, sizeof buf, "%.2f GB", bytes / 1e9);
  return buf;
}

}  // namespace folio
