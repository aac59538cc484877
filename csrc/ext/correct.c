/* correct.c: opskew._correct, the thin binding over osk_correct_path. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "module.h"
#include "progress.h"
#include "opskew_correct.h"
#include "read_error.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A sequence of str as a C array; *fast keeps the strings alive. Returns 0,
 * or -1 with an exception set. None leaves *out NULL. */
static int str_list(PyObject *obj, const char *what, PyObject **fast, const char ***out, size_t *n) {
  *fast = NULL;
  *out = NULL;
  *n = 0;
  if (obj == Py_None) return 0;
  if (PyUnicode_Check(obj)) {
    PyErr_Format(PyExc_TypeError, "%s must be a sequence of str, not str", what);
    return -1;
  }
  *fast = PySequence_Fast(obj, "categories must be a sequence of str");
  if (!*fast) return -1;
  Py_ssize_t len = PySequence_Fast_GET_SIZE(*fast);
  const char **arr = PyMem_Calloc((size_t)(len ? len : 1), sizeof *arr);
  if (!arr) {
    Py_CLEAR(*fast);
    PyErr_NoMemory();
    return -1;
  }
  for (Py_ssize_t i = 0; i < len; i++) {
    arr[i] = PyUnicode_AsUTF8(PySequence_Fast_GET_ITEM(*fast, i));
    if (!arr[i]) {
      PyMem_Free(arr);
      Py_CLEAR(*fast);
      return -1;
    }
  }
  *out = arr;
  *n = (size_t)len;
  return 0;
}

/* spans={name: ns, (ns, w_scale) or (ns, w_scale, delta)}: the options'
 * span arrays (ns < 0: no span; w_scale 1 and delta -1, the class's, when
 * not given); *keep holds the names' bytes alive. Returns 0, or -1 with an
 * exception set. None leaves them empty. */
static int span_dict(PyObject *obj, PyObject **keep, const char ***names, double **ns, double **scale,
                     double **delta, size_t *n) {
  *keep = NULL;
  *names = NULL;
  *ns = *scale = *delta = NULL;
  *n = 0;
  if (obj == Py_None) return 0;
  if (!PyDict_Check(obj)) {
    PyErr_SetString(PyExc_TypeError, "spans must be a dict of str to ns, (ns, w_scale) or (ns, w_scale, delta)");
    return -1;
  }
  *keep = PyDict_Items(obj);
  if (!*keep) return -1;
  Py_ssize_t len = PyList_GET_SIZE(*keep);
  size_t m = (size_t)(len ? len : 1);
  *names = PyMem_Calloc(m, sizeof **names);
  *ns = PyMem_Calloc(m, sizeof **ns);
  *scale = PyMem_Calloc(m, sizeof **scale);
  *delta = PyMem_Calloc(m, sizeof **delta);
  if (!*names || !*ns || !*scale || !*delta) {
    PyErr_NoMemory();
    goto fail;
  }
  for (Py_ssize_t i = 0; i < len; i++) {
    PyObject *item = PyList_GET_ITEM(*keep, i);
    PyObject *k = PyTuple_GET_ITEM(item, 0), *v = PyTuple_GET_ITEM(item, 1);
    if (!PyUnicode_Check(k)) {
      PyErr_SetString(PyExc_TypeError, "spans: each name must be a str");
      goto fail;
    }
    (*names)[i] = PyUnicode_AsUTF8(k);
    if (!(*names)[i]) goto fail;
    (*scale)[i] = 1.0;
    (*delta)[i] = -1.0;
    if (PyTuple_Check(v)) {
      if (!PyArg_ParseTuple(v, "dd|d:spans' (ns, w_scale[, delta])", &(*ns)[i], &(*scale)[i], &(*delta)[i]))
        goto fail;
    } else if (PyNumber_Check(v) && !PyUnicode_Check(v)) {
      (*ns)[i] = PyFloat_AsDouble(v);
      if ((*ns)[i] == -1.0 && PyErr_Occurred()) goto fail;
    } else {
      PyErr_Format(PyExc_TypeError, "spans: %R is neither ns nor (ns, w_scale[, delta])", v);
      goto fail;
    }
    if (!isfinite((*ns)[i]) || !((*scale)[i] > 0) || !isfinite((*scale)[i]) || !isfinite((*delta)[i])) {
      PyErr_Format(PyExc_ValueError,
                   "spans: %R needs a finite ns (< 0: no span), a finite w_scale > 0 and a finite delta "
                   "(< 0: the class's)", v);
      goto fail;
    }
  }
  *n = (size_t)len;
  return 0;
fail:
  PyMem_Free(*names);
  PyMem_Free(*ns);
  PyMem_Free(*scale);
  PyMem_Free(*delta);
  *names = NULL;
  *ns = *scale = *delta = NULL;
  Py_CLEAR(*keep);
  return -1;
}

/* A list of the first n counts. */
static PyObject *counts(const uint64_t *v, size_t n) {
  PyObject *l = PyList_New((Py_ssize_t)n);
  for (size_t k = 0; l && k < n; k++) {
    PyObject *x = PyLong_FromUnsignedLongLong((unsigned long long)v[k]);
    if (!x) {
      Py_CLEAR(l);
      break;
    }
    PyList_SET_ITEM(l, (Py_ssize_t)k, x);
  }
  return l;
}

/* classes=[{"name", "categories", "w_ns", "delta_ns", "python"}, ...]: the
 * cost model (osk_cost_class_t). *keep holds what the strings live in (one
 * list per class, and the names). Returns 0, or -1 with an exception set.
 * None leaves *out NULL. */
typedef struct {
  osk_cost_class_t cls[OSK_MAX_COST_CLASSES];
  const char **cats[OSK_MAX_COST_CLASSES];
  PyObject *keep[OSK_MAX_COST_CLASSES];
  size_t n;
} classes_t;

static void classes_free(classes_t *m) {
  for (size_t k = 0; k < m->n; k++) {
    PyMem_Free(m->cats[k]);
    Py_XDECREF(m->keep[k]);
  }
  m->n = 0;
}

static int class_list(PyObject *obj, classes_t *m) {
  memset(m, 0, sizeof *m);
  if (obj == Py_None) return 0;
  PyObject *fast = PySequence_Fast(obj, "classes must be a sequence of dicts");
  if (!fast) return -1;
  Py_ssize_t len = PySequence_Fast_GET_SIZE(fast);
  if (len < 1 || len > OSK_MAX_COST_CLASSES) {
    PyErr_Format(PyExc_ValueError, "classes: 1 to %d cost classes, not %zd", OSK_MAX_COST_CLASSES, len);
    Py_DECREF(fast);
    return -1;
  }
  for (Py_ssize_t i = 0; i < len; i++) {
    PyObject *d = PySequence_Fast_GET_ITEM(fast, i);
    if (!PyDict_Check(d)) {
      PyErr_SetString(PyExc_TypeError, "classes: each class is a dict (name, categories, w_ns, delta_ns, python)");
      goto fail;
    }
    osk_cost_class_t *c = &m->cls[i];
    PyObject *name = PyDict_GetItemString(d, "name"), *cats = PyDict_GetItemString(d, "categories");
    PyObject *w = PyDict_GetItemString(d, "w_ns"), *delta = PyDict_GetItemString(d, "delta_ns");
    PyObject *py = PyDict_GetItemString(d, "python");
    if (!cats || !w) {
      PyErr_SetString(PyExc_ValueError, "classes: each class needs its categories and w_ns");
      goto fail;
    }
    m->n = (size_t)i + 1;
    if (str_list(cats, "a class's categories", &m->keep[i], &m->cats[i], &c->n_categories) < 0) goto fail;
    c->categories = m->cats[i];
    c->name = name && PyUnicode_Check(name) ? PyUnicode_AsUTF8(name) : "";
    if (!c->name) goto fail;
    c->w_ns = PyFloat_AsDouble(w);
    c->delta_ns = delta ? PyFloat_AsDouble(delta) : 0.0;
    c->python = py ? PyObject_IsTrue(py) : 0;
    if (PyErr_Occurred() || c->python < 0) goto fail;
  }
  Py_DECREF(fast);
  return 0;
fail:
  classes_free(m);
  Py_DECREF(fast);
  return -1;
}

static PyObject *correct_correct(PyObject *self, PyObject *args, PyObject *kw) {
  (void)self;
  static char *kwlist[] = {"path", "w_ns", "delta_ns", "out", "categories", "w_py_ns", "delta_py_ns",
                           "py_categories", "run_json", "clock", "waits", "spans", "progress", "classes", NULL};
  const char *path, *out = NULL, *run_json = NULL;
  double w = 0.0, delta = 0.0, w_py = 0.0, delta_py = 0.0;
  PyObject *cats_obj = Py_None, *py_cats_obj = Py_None, *clock_obj = Py_None, *spans_obj = Py_None;
  PyObject *progress_obj = Py_None, *classes_obj = Py_None;
  int waits = -1; /* opts.waits: -1 where the trace holds GPU activity */
  if (!PyArg_ParseTupleAndKeywords(args, kw, "s|ddzOddOzOiOOO:correct", kwlist, &path, &w, &delta, &out,
                                   &cats_obj, &w_py, &delta_py, &py_cats_obj, &run_json, &clock_obj, &waits,
                                   &spans_obj, &progress_obj, &classes_obj))
    return NULL;
  osk_correct_opts_t opts = {.w_ns = w, .delta_ns = delta, .w_py_ns = w_py, .delta_py_ns = delta_py,
                             .run_json = run_json, .waits = waits};
  classes_t model;
  if (class_list(classes_obj, &model) < 0) return NULL;
  opts.classes = model.cls;
  opts.n_classes = model.n;
  size_t n_cls = model.n ? model.n : 2;
  Py_buffer progress_view;
  if (osk_py_progress(progress_obj, &progress_view, &opts.progress) < 0) {
    classes_free(&model);
    return NULL;
  }
  /* clock=(origin_ns, offset_ns, drift): a rank's map to the reference clock. */
  if (clock_obj != Py_None &&
      !PyArg_ParseTuple(clock_obj, "Ldd:correct clock", &opts.clock_origin_ns, &opts.clock_offset_ns,
                        &opts.clock_drift)) {
    if (progress_view.obj) PyBuffer_Release(&progress_view);
    classes_free(&model);
    return NULL;
  }
  const char **cats = NULL, **py_cats = NULL, **span_names = NULL;
  double *span_ns = NULL, *span_scale = NULL, *span_delta = NULL;
  PyObject *fast = NULL, *py_fast = NULL, *span_keep = NULL;
  if (span_dict(spans_obj, &span_keep, &span_names, &span_ns, &span_scale, &span_delta, &opts.n_spans) < 0) {
    if (progress_view.obj) PyBuffer_Release(&progress_view);
    classes_free(&model);
    return NULL;
  }
  if (str_list(cats_obj, "categories", &fast, &cats, &opts.n_categories) < 0 ||
      str_list(py_cats_obj, "py_categories", &py_fast, &py_cats, &opts.n_py_categories) < 0) {
    PyMem_Free(cats);
    Py_XDECREF(fast);
    PyMem_Free(span_names);
    PyMem_Free(span_ns);
    PyMem_Free(span_scale);
    PyMem_Free(span_delta);
    Py_XDECREF(span_keep);
    if (progress_view.obj) PyBuffer_Release(&progress_view);
    classes_free(&model);
    return NULL;
  }
  opts.categories = cats;
  opts.py_categories = py_cats;
  opts.span_names = span_names;
  opts.span_ns = span_ns;
  opts.span_w_scale = span_scale;
  opts.span_delta_ns = span_delta;
  osk_correct_t *c = NULL;
  osk_error_t err = {0, "", 0, 0};
  int rc;
  Py_BEGIN_ALLOW_THREADS rc = osk_correct_path(path, out, &opts, &c, &err);
  Py_END_ALLOW_THREADS if (progress_view.obj) PyBuffer_Release(&progress_view);
  PyMem_Free(cats);
  PyMem_Free(py_cats);
  PyMem_Free(span_names);
  PyMem_Free(span_ns);
  PyMem_Free(span_scale);
  PyMem_Free(span_delta);
  Py_XDECREF(fast);
  Py_XDECREF(py_fast);
  Py_XDECREF(span_keep);
  classes_free(&model);
  if (rc && rc != OSK_ETRUNCATED) {
    osk_correct_free(c);
    /* As data, not raised: read_error.h. */
    return Py_BuildValue("{s:s,s:N}", "status", osk_py_status(rc), "error", osk_py_error(rc, &err));
  }
  PyObject *ops = PyList_New(0);
  if (!ops) goto fail;
  for (size_t i = 0; i < osk_correct_op_count(c); i++) {
    const osk_correct_op_t *op = osk_correct_op(c, i);
    if (!op->calls) continue;
    /* A name that is not UTF-8 (the trace's bytes) reads with U+FFFD, as
     * the corrected trace writes it and the reader's summary reads it. */
    PyObject *name = PyUnicode_DecodeUTF8(op->name.ptr ? op->name.ptr : "", (Py_ssize_t)op->name.len, "replace");
    if (!name) {
      Py_DECREF(ops);
      goto fail;
    }
    PyObject *per = counts(op->class_descendants, n_cls);
    if (!per) {
      Py_DECREF(name);
      Py_DECREF(ops);
      goto fail;
    }
    PyObject *d = Py_BuildValue(
        "{s:N,s:s#,s:K,s:L,s:L,s:d,s:d,s:K,s:K,s:O,s:K,s:d,s:d,s:K,s:K,s:d,s:d,s:d,s:d,s:I,s:N}", "name", name,
        "category", op->category.ptr ? op->category.ptr : "", (Py_ssize_t)op->category.len,
        "calls", (unsigned long long)op->calls, "reported_total_ns", (long long)op->reported_total_ns,
        "reported_self_ns", (long long)op->reported_self_ns, "corrected_total_ns", op->corrected_total_ns,
        "corrected_self_ns", op->corrected_self_ns, "descendants", (unsigned long long)op->descendants,
        "py_descendants", (unsigned long long)op->py_descendants, "python", op->py_class ? Py_True : Py_False,
        "clamped", (unsigned long long)op->clamped, "residual_ns", op->residual_ns, "stretched_ns",
        op->stretched_ns, "waited_descendants", (unsigned long long)op->waited_descendants,
        "waited_py_descendants", (unsigned long long)op->waited_py_descendants, "waited_ns", op->waited_ns,
        "trimmed_ns", op->trimmed_ns, "scaled_ns", op->scaled_ns, "float_ns", op->float_ns, "cost_class",
        (unsigned int)op->cost_class, "class_descendants", per);
    if (!d || PyList_Append(ops, d) < 0) {
      Py_XDECREF(d);
      Py_DECREF(ops);
      goto fail;
    }
    Py_DECREF(d);
  }
  const osk_correct_stats_t *s = osk_correct_stats(c);
  PyObject *class_events = counts(s->class_events, n_cls);
  if (!class_events) {
    Py_DECREF(ops);
    goto fail;
  }
  PyObject *res = Py_BuildValue(
      "{s:s,s:N,s:N,s:{s:N,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:d,s:L,s:d,s:K,s:K,s:d,s:K,s:K,s:i,s:d,s:K,s:K,s:d,s:K,s:d,s:d,s:K,s:d,s:K,s:d,s:K,s:K},s:O,s:s,s:K}", "status",
      osk_py_status(rc), "error", osk_py_error(rc, &err), "ops", ops, "stats", "class_events", class_events,
      "events",
      (unsigned long long)s->events, "corrected_events", (unsigned long long)s->corrected_events,
      "py_events", (unsigned long long)s->py_events,
      "other_events", (unsigned long long)s->other_events, "begin_end_events",
      (unsigned long long)s->begin_end_events, "unusable_events", (unsigned long long)s->unusable_events, "threads", (unsigned long long)s->threads,
      "clamped", (unsigned long long)s->clamped, "residual_ns", s->residual_ns, "reported_top_ns",
      (long long)s->reported_top_ns, "corrected_top_ns", s->corrected_top_ns, "overlaps",
      (unsigned long long)s->overlaps, "stretched", (unsigned long long)s->stretched, "stretched_ns",
      s->stretched_ns, "held_peak", (unsigned long long)s->held_peak, "held_threads",
      (unsigned long long)s->held_threads, "passes", s->passes, "waited_ns", s->waited_ns,
      "overlapping_threads", (unsigned long long)s->overlapping_threads, "shortened",
      (unsigned long long)s->shortened, "shortened_ns", s->shortened_ns, "trimmed",
      (unsigned long long)s->trimmed, "trimmed_ns", s->trimmed_ns, "scaled_ns", s->scaled_ns, "relaid",
      (unsigned long long)s->relaid, "relaid_ns", s->relaid_ns, "float_moved",
      (unsigned long long)s->float_moved, "float_moved_ns", s->float_moved_ns, "passed_events",
      (unsigned long long)s->passed_events, "retimed_events", (unsigned long long)s->retimed_events, "truncated", s->truncated ? Py_True : Py_False, "warning",
      s->truncated ? "the trace ended early (a profiler killed mid-write?); what was read is corrected" : "",
      "truncated_at", (unsigned long long)(s->truncated ? err.offset : 0));
  osk_correct_free(c);
  return res;
fail:
  osk_correct_free(c);
  return NULL;
}

PyDoc_STRVAR(correct_correct_doc,
             "correct(path, w_ns=0, delta_ns=0, out=None, categories=None, w_py_ns=0, delta_py_ns=0,\n"
             "        py_categories=None, run_json=None, clock=None, waits=-1,\n"
             "        spans=None, progress=None, classes=None) -> dict\n\n"
             "Compensates a Chrome trace: corrected = reported - delta - sum over cost\n"
             "classes of W(class) x descendants(class). classes=[{'name', 'categories',\n"
             "'w_ns', 'delta_ns', 'python'}] (1 to 4) is the cost model; without it, the\n"
             "default two: W, delta (categories) and W_py, delta_py (py_categories),\n"
             "per operator, clamped at zero with the residual; writes the corrected trace\n"
             "to `out` when given. spans={name: ns, (ns, w_scale) or (ns, w_scale,\n"
             "delta)}: events of that name span ns of the code they annotate\n"
             "(opskew.profile's ProfilerStep#N: the step's body; ns < 0: none), their\n"
             "reported time beyond it and delta is taken out too; the events of the\n"
             "top-level trees they root cost w_scale x W (x W_py) each; delta >= 0 is\n"
             "the name's own delta (at most its W), < 0 its class's.\n"
             "'status' is 'ok', 'truncated', 'invalid' or 'error';\n"
             "on the last two only 'status' and 'error' ({'code', 'number', 'message',\n"
             "'offset', 'sys_errno'}) are there: use opskew.tracefile.correct, which\n"
             "raises opskew.errors.from_c_error's exception for them.");

static PyMethodDef correct_methods[] = {
    {"correct", OSK_PY_KWARGS(correct_correct), correct_correct_doc},
    {NULL, NULL, 0, NULL}};

static PyModuleDef_Slot correct_slots[] = {{0, NULL}};

OSK_PY_MODULE(correct, "opskew's trace compensation (private).", correct_slots)
