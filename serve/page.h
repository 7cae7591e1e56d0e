#pragma once
// The web page at / (serve/page/index.html), compiled into the binary: no file is
// read at run time and nothing is fetched from elsewhere.
#include <string_view>

namespace folio::serve {

std::string_view page_html();

}  // namespace folio::serve
