// folio.train: a training run from Python (to come).
#include "python/bindings.h"

namespace folio::python {

void bind_train(py::module_& m) {}

}  // namespace folio::python
