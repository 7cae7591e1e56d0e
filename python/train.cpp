// folio._train, under folio.train (python/folio/__init__.py): a training run from
// Python through folio train's own options and code (front/train_command.h), so that the
// same options make the same run, byte for byte. Keyword arguments become the
// command's flags (n_layer=2 is --n-layer 2); on_step and on_eval hear the figures of
// the progress line and of log.csv's rows (train/progress.h's hooks).
#include <pybind11/functional.h>

#include <algorithm>
#include <csignal>

#include "autograd/parallel.h"
#include "front/train_command.h"
#include "python/bindings.h"
#include "train/progress.h"

namespace folio::python {
namespace {

// The flag's words for a keyword argument: {"--n-layer", "2"}, {"--no-bias"} for True,
// none for False or None, {"--eval-task", "a", "--eval-task", "b"} for a repeatable
// option's list. Unknown names and values of no flag's type are ValueErrors.
std::vector<std::string> flag_words(const std::string& key, const py::handle& value,
                                    const std::vector<front::TrainFlag>& flags) {
  std::string flag = key;
  std::replace(flag.begin(), flag.end(), '_', '-');
  const auto d = std::find_if(flags.begin(), flags.end(), [&](const front::TrainFlag& f) { return f.name == flag; });
  if (d == flags.end()) {
    std::string near = front::nearest_train_flag(flag);
    std::replace(near.begin(), near.end(), '-', '_');
    throw Error(cat("[train] unknown option '", key, "'", near.empty() ? "" : cat(" (did you mean ", near, "?)"),
                    " (the options are folio train's, in Python's spelling: see folio train --help)"));
  }
  const bool is_switch = !d->takes_value;
  if (value.is_none()) return {};
  if (is_bool(value)) {
    const bool on = PyObject_IsTrue(value.ptr()) == 1;
    if (is_switch) return on ? std::vector<std::string>{"--" + flag} : std::vector<std::string>{};
    return {"--" + flag, on ? "true" : "false"};
  }
  if (is_switch) throw Error(cat("[train] ", key, " is True or False, got ", std::string(py::repr(value))));
  // A repeatable option (eval_task) takes a list or tuple: the flag once for each item,
  // as the command reads --eval-task A --eval-task B. Any other option takes one value.
  if (py::isinstance<py::list>(value) || py::isinstance<py::tuple>(value)) {
    if (!d->repeatable)
      throw Error(cat("[train] ", key, " must be a number, a str or a bool, got ", std::string(py::repr(value)), " (",
                      type_name(value), "): only a repeatable option (eval_task) takes a list"));
    std::vector<std::string> words;
    for (const py::handle& item : value) {
      if (py::isinstance<py::list>(item) || py::isinstance<py::tuple>(item) || item.is_none() || is_bool(item))
        throw Error(cat("[train] ", key, "'s items must be a str or a path, got ", std::string(py::repr(item))));
      const std::vector<std::string> one = flag_words(key, item, flags);
      words.insert(words.end(), one.begin(), one.end());
    }
    return words;
  }
  // numpy's scalars too (np.int64(32) is 32): an integer as its digits, a real number
  // as repr() of its double, the shortest text that reads back as that very double.
  if (const std::optional<py::int_> i = integer_value(value)) return {"--" + flag, py::repr(*i)};
  if (const std::optional<double> x = real_value(value)) return {"--" + flag, py::repr(py::float_(*x))};
  if (py::isinstance<py::str>(value)) return {"--" + flag, value.cast<std::string>()};
  if (py::hasattr(value, "__fspath__")) return {"--" + flag, py::str(value.attr("__fspath__")())};
  throw Error(cat("[train] ", key, " must be a number, a str or a bool, got ", std::string(py::repr(value)), " (",
                  type_name(value), ")"));
}

// The figures as a dict, NaN where a run has none (bits per byte of token files).
py::dict figures(const ProgressHooks::Figures& f) {
  py::dict d;
  for (const auto& [name, v] : f) d[name] = name == std::string_view("step") ? py::object(py::int_(int64_t(v))) : py::float_(v);
  return d;
}

// Ctrl-C while the run prepares (reads its data, builds its model) meets Python's
// handler, not the trainer's, which only its loop installs: Python kept it pending while
// the run trained to its end, then raised KeyboardInterrupt over a finished run. The
// first step and every evaluation look for one, and hand it on to the trainer's handler
// (installed there), which stops the run after that step and saves it, as a Ctrl-C
// during the loop does. Another exception a Python handler raised ends the run as a
// callback's does.
void pass_on_pending_interrupt() {
  py::gil_scoped_acquire gil;
  if (PyErr_CheckSignals() == 0) return;
  if (!PyErr_ExceptionMatches(PyExc_KeyboardInterrupt)) throw py::error_already_set();
  PyErr_Clear();
  std::raise(SIGINT);
}

// Runs folio train with these options; returns its exit status (0, or 128 + the
// signal that stopped it after saving).
int train(const py::dict& options, const py::object& on_step, const py::object& on_eval) {
  const std::vector<front::TrainFlag> flags = front::train_flags();
  std::vector<std::string> words;
  for (const auto& [key, value] : options) {
    const std::vector<std::string> w = flag_words(py::str(key), value, flags);
    words.insert(words.end(), w.begin(), w.end());
  }
  // A refused run leaves this thread's thread count as it was: the command applies
  // --threads (its default 0 too) while it checks the other options.
  const int threads_before = num_threads();
  std::function<int()> job;
  try {
    job = front::prepare_train(words);
  } catch (...) {
    set_num_threads(threads_before);
    throw;
  }
  // The callbacks run on this thread with the GIL taken; what they raise ends the run
  // (its last save stays) and reaches the caller.
  // They hold handles, not references: the hooks are copied and dropped without the
  // GIL, and the callables outlive the run as this call's arguments.
  ProgressHooks hooks;
  auto hook = [](py::handle fn) -> std::function<void(const ProgressHooks::Figures&)> {
    if (fn.is_none()) return {};
    return [fn](const ProgressHooks::Figures& f) {
      py::gil_scoped_acquire gil;
      fn(figures(f));
    };
  };
  hooks.on_step = [user = hook(on_step), first = true](const ProgressHooks::Figures& f) mutable {
    if (first) first = false, pass_on_pending_interrupt();
    if (user) user(f);
  };
  hooks.on_eval = [user = hook(on_eval)](const ProgressHooks::Figures& f) {
    pass_on_pending_interrupt();
    if (user) user(f);
  };
  py::gil_scoped_release nogil;
  ScopedProgressHooks scoped(std::move(hooks));
  std::fflush(stdout);
  const int status = job();
  std::fflush(stdout);
  return status;
}

}  // namespace

void bind_train(py::module_& m) {
  m.def("_train", &train, py::arg("options"), py::arg("on_step") = py::none(), py::arg("on_eval") = py::none(),
        "folio train with these options (folio.train is the documented front). Returns the command's exit status.");
  m.attr("_SIGINT") = int(SIGINT);
}

}  // namespace folio::python
