// The folio extension module (folio._folio; python/folio/__init__.py re-exports it):
// how folio's errors reach Python, the thread count, and the parts of the API that the
// other files of python/ add.
#include <exception>

#include "autograd/parallel.h"
#include "base/error.h"
#include "folio/version.h"
#include "python/bindings.h"

namespace folio::python {

void check_signals() {
  py::gil_scoped_acquire gil;
  if (PyErr_CheckSignals() != 0) throw py::error_already_set();
}

}  // namespace folio::python

PYBIND11_MODULE(_folio, m) {
  namespace py = pybind11;
  using namespace folio;
  m.doc() = "folio: train and run small transformer language models on CPUs (the engine of the folio CLI).";
  m.attr("__version__") = FOLIO_VERSION;
  // folio's own errors are about what it was given (a file, an option, an argument):
  // ValueError, with folio's message. A file that is not there: FileNotFoundError; an
  // argument of the wrong kind (floats for token ids, bytes for text): TypeError.
  // Anything else a C++ exception carries stays pybind11's (RuntimeError, MemoryError).
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const python::FileMissing& e) {
      PyErr_SetString(PyExc_FileNotFoundError, e.what());
    } catch (const python::WrongType& e) {
      PyErr_SetString(PyExc_TypeError, e.what());
    } catch (const Error& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    }
  });
  // The range is the one every command takes (kMaxThreads), written from it. Static:
  // the docstring must outlive this call.
  static const std::string set_threads_doc =
      cat("Sets how many threads folio's computations use when called from this Python thread.\n\n"
          "Args:\n"
          "    n: threads, 0 to ", kMaxThreads, " (0: every core, or OMP_NUM_THREADS when set). Each Python thread has\n"
          "       its own count, as OpenMP keeps one per thread: a thread that generates beside others\n"
          "       may take 1.");
  m.def(
      "set_threads", [](int64_t n) { set_num_threads(n); },  // outside [0, kMaxThreads]: a ValueError
      py::arg("n"), set_threads_doc.c_str());
  m.def("threads", &num_threads, "The number of threads folio's computations use from this Python thread.");
  python::bind_model(m);
  python::bind_train(m);
  python::bind_tensor(m);
  py::module_ nn = m.def_submodule("nn", "folio's modules (Linear, Head, MultiHead, GPT) on folio.Tensor.");
  python::bind_nn(nn);
}
