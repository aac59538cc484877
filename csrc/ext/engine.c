/* engine.c: opskew._engine, the thin Python binding over the C engine.
 *
 * Everything of substance lives in the core library (include/opskew.h); this
 * file converts arguments and results, and hosts the one piece that must
 * speak CPython: the profile hook used as the busy-wait test instrument.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "module.h"
#include "opskew.h"
#include "tracecore.h" /* the one file writer, osk__out_* */

#include <errno.h>
#include <limits.h>
#include <string.h>

/* -------------------------------------------------------------- helpers */

static PyObject *raise_osk(int rc, const char *what) {
  PyErr_Format(rc == OSK_ENOMEM ? PyExc_MemoryError : PyExc_ValueError, "%s: %s (%s)", what,
               osk_strerror(rc), osk_err_name(rc));
  return NULL;
}

/* Copies a sequence of numbers into a new C array; NULL with an exception set. */
static double *as_doubles(PyObject *seq, Py_ssize_t *n_out, const char *what) {
  PyObject *fast = PySequence_Fast(seq, what);
  if (!fast) return NULL;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
  double *x = PyMem_Malloc((size_t)(n ? n : 1) * sizeof *x);
  if (!x) {
    Py_DECREF(fast);
    PyErr_NoMemory();
    return NULL;
  }
  PyObject **items = PySequence_Fast_ITEMS(fast);
  for (Py_ssize_t i = 0; i < n; i++) {
    x[i] = PyFloat_AsDouble(items[i]);
    if (x[i] == -1.0 && PyErr_Occurred()) {
      PyMem_Free(x);
      Py_DECREF(fast);
      return NULL;
    }
  }
  Py_DECREF(fast);
  *n_out = n;
  return x;
}

/* --------------------------------------------------------------- paired */

static PyObject *engine_paired(PyObject *self, PyObject *args, PyObject *kw) {
  (void)self;
  static char *kwlist[] = {"baseline", "treated", "scale", "level", NULL};
  PyObject *pb, *pt;
  double scale = 1.0, level = 0.95;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|dd:paired", kwlist, &pb, &pt, &scale, &level))
    return NULL;
  Py_ssize_t nb, nt;
  double *b = as_doubles(pb, &nb, "baseline must be a sequence of numbers");
  if (!b) return NULL;
  double *t = as_doubles(pt, &nt, "treated must be a sequence of numbers");
  if (!t) {
    PyMem_Free(b);
    return NULL;
  }
  if (nb != nt) {
    PyMem_Free(b);
    PyMem_Free(t);
    return PyErr_Format(PyExc_ValueError, "paired: %zd baseline vs %zd treated samples", nb, nt);
  }
  osk_paired_t r;
  int rc = osk_paired_analyze(b, t, (size_t)nb, scale, level, &r);
  PyMem_Free(b);
  PyMem_Free(t);
  if (rc && rc != OSK_ETOOFEW) return raise_osk(rc, "paired");
  return Py_BuildValue(
      "{s:n,s:d,s:d,s:d,s:(dd),s:d,s:n,s:n,s:d,s:d,s:O}", "n", (Py_ssize_t)r.n, "median",
      r.median, "mean", r.mean, "stdev", r.stdev, "ci", r.ci_low, r.ci_high, "ci_coverage",
      r.ci_coverage, "n_positive", (Py_ssize_t)r.n_positive, "n_negative",
      (Py_ssize_t)r.n_negative, "sign_p", r.sign_p, "wilcoxon_p", r.wilcoxon_p,
      "ci_reaches_level", rc == 0 ? Py_True : Py_False);
}

static PyObject *engine_quantile(PyObject *self, PyObject *args) {
  (void)self;
  PyObject *px;
  double q;
  if (!PyArg_ParseTuple(args, "Od:quantile", &px, &q)) return NULL;
  Py_ssize_t n;
  double *x = as_doubles(px, &n, "x must be a sequence of numbers");
  if (!x) return NULL;
  double out;
  int rc = osk_quantile(x, (size_t)n, q, &out);
  PyMem_Free(x);
  if (rc) return raise_osk(rc, "quantile");
  return PyFloat_FromDouble(out);
}

/* ---------------------------------------------------------------- clock */

static PyObject *engine_clock_info(PyObject *self, PyObject *unused) {
  (void)self;
  (void)unused;
  const osk_clock_t *c = osk_clock_get();
  return Py_BuildValue("{s:s,s:d,s:d}", "kind", c->kind == OSK_CLOCK_TSC ? "tsc" : "monotonic_raw",
                       "ns_per_tick", c->ns_per_tick, "rel_uncertainty", c->rel_uncertainty);
}

static PyObject *engine_spin_ns(PyObject *self, PyObject *arg) {
  (void)self;
  unsigned long long ns = PyLong_AsUnsignedLongLong(arg);
  if (ns == (unsigned long long)-1 && PyErr_Occurred()) return NULL;
  uint64_t spent;
  Py_BEGIN_ALLOW_THREADS spent = osk_spin_ns(ns);
  Py_END_ALLOW_THREADS return PyLong_FromUnsignedLongLong(spent);
}

/* ------------------------------------------------- busy-wait instrument */

/* A known-cost instrument: a profile hook that, around every call of a
 * builtin whose module name starts with "torch", spins half the configured
 * time on entry and half on exit, and counts the calls as events. It is the
 * test instrument of the known-answer tests: the method must recover the
 * configured cost. The hook is per thread (PyEval_SetProfile); one at a time. */
typedef struct {
  uint64_t enter_ns, exit_ns;
  unsigned long long events;
  unsigned long long spun_ns; /* busy-wait actually spent, by the engine's clock */
  int depth; /* matched torch calls currently open */
  int active;
  /* Pointer-keyed decision cache: PyMethodDef* -> is a torch builtin. */
  const void *keys[256];
  signed char is_torch[256];
} inject_state_t;

static inject_state_t g_inject;

static int inject_is_torch(PyObject *fn) {
  if (!PyCFunction_Check(fn)) return 0;
  PyCFunctionObject *cf = (PyCFunctionObject *)fn;
  const void *key = cf->m_ml;
  size_t h = ((uintptr_t)key >> 4) & 255u;
  for (size_t probe = 0; probe < 256; probe++, h = (h + 1) & 255u) {
    if (g_inject.keys[h] == key) return g_inject.is_torch[h];
    if (g_inject.keys[h] == NULL) {
      int yes = 0;
      PyObject *mod = cf->m_module;
      if (mod && PyUnicode_Check(mod)) {
        const char *s = PyUnicode_AsUTF8(mod);
        if (!s) PyErr_Clear();
        else yes = strncmp(s, "torch", 5) == 0;
      } else if (cf->m_self && PyModule_Check(cf->m_self)) {
        const char *s = PyModule_GetName(cf->m_self);
        if (!s) PyErr_Clear();
        else yes = strncmp(s, "torch", 5) == 0;
      }
      g_inject.keys[h] = key;
      g_inject.is_torch[h] = (signed char)yes;
      return yes;
    }
  }
  return 0; /* table full: do not instrument unknown functions */
}

static int inject_hook(PyObject *obj, PyFrameObject *frame, int what, PyObject *arg) {
  (void)obj;
  (void)frame;
  switch (what) {
  case PyTrace_C_CALL:
    if (inject_is_torch(arg)) {
      g_inject.events++;
      g_inject.depth++;
      g_inject.spun_ns += osk_spin_ns(g_inject.enter_ns);
    }
    break;
  case PyTrace_C_RETURN:
  case PyTrace_C_EXCEPTION:
    if (g_inject.depth > 0 && inject_is_torch(arg)) {
      g_inject.depth--;
      g_inject.spun_ns += osk_spin_ns(g_inject.exit_ns);
    }
    break;
  default:
    break;
  }
  return 0;
}

static PyObject *engine_inject_start(PyObject *self, PyObject *arg) {
  (void)self;
  unsigned long long ns = PyLong_AsUnsignedLongLong(arg);
  if (ns == (unsigned long long)-1 && PyErr_Occurred()) return NULL;
  if (g_inject.active) {
    PyErr_SetString(PyExc_RuntimeError, "the busy-wait instrument is already active");
    return NULL;
  }
  (void)osk_clock_get(); /* calibrate before the first event, not during it */
  memset(&g_inject, 0, sizeof g_inject);
  g_inject.enter_ns = ns / 2;
  g_inject.exit_ns = ns - ns / 2;
  g_inject.active = 1;
  PyEval_SetProfile(inject_hook, NULL);
  Py_RETURN_NONE;
}

static PyObject *engine_inject_stop(PyObject *self, PyObject *unused) {
  (void)self;
  (void)unused;
  if (!g_inject.active) {
    PyErr_SetString(PyExc_RuntimeError, "the busy-wait instrument is not active");
    return NULL;
  }
  PyEval_SetProfile(NULL, NULL);
  g_inject.active = 0;
  return Py_BuildValue("(KK)", g_inject.events, g_inject.spun_ns);
}

/* --------------------------------------------------------------- errors */

/* The engine's own names and messages for its codes, so Python never keeps
 * a copy of them (opskew.errors.from_c_error turns them into exceptions). */
static PyObject *engine_strerror(PyObject *self, PyObject *arg) {
  (void)self;
  int overflow;
  long code = PyLong_AsLongAndOverflow(arg, &overflow);
  if (code == -1 && PyErr_Occurred()) return NULL;
  if (overflow || code < INT_MIN || code > INT_MAX) code = INT_MIN; /* "unknown error" */
  return PyUnicode_FromString(osk_strerror((int)code));
}

static PyObject *engine_err_name(PyObject *self, PyObject *arg) {
  (void)self;
  int overflow;
  long code = PyLong_AsLongAndOverflow(arg, &overflow);
  if (code == -1 && PyErr_Occurred()) return NULL;
  if (overflow || code < INT_MIN || code > INT_MAX) code = INT_MIN;
  return PyUnicode_FromString(osk_err_name((int)code));
}

/* --------------------------------------------------------------- output */

/* OSError(errno, reason, path): reason is what a refused target is, else
 * strerror(errno). */
static PyObject *raise_out(int sys_errno, const char *refused, PyObject *path) {
  int e = sys_errno ? sys_errno : EIO;
  PyObject *exc = PyObject_CallFunction(PyExc_OSError, "isO", e, refused ? refused : strerror(e), path);
  if (exc) {
    PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
    Py_DECREF(exc);
  }
  return NULL;
}

static PyObject *engine_write_file(PyObject *self, PyObject *args) {
  (void)self;
  PyObject *path;
  Py_buffer data;
  if (!PyArg_ParseTuple(args, "O&y*:write_file", PyUnicode_FSConverter, &path, &data)) return NULL;
  osk__out_t o;
  int rc;
  Py_BEGIN_ALLOW_THREADS
  rc = osk__out_open(&o, PyBytes_AS_STRING(path), 0);
  if (rc == 0) rc = osk__out_gzip_by_name(&o, PyBytes_AS_STRING(path));
  if (rc == 0) {
    osk__out_put(&o, data.buf, (size_t)data.len);
    rc = osk__out_commit(&o);
  }
  Py_END_ALLOW_THREADS
  PyBuffer_Release(&data);
  if (rc == OSK_ENOMEM) {
    Py_DECREF(path);
    return PyErr_NoMemory();
  }
  if (rc) {
    PyObject *name = PyUnicode_DecodeFSDefault(PyBytes_AS_STRING(path));
    Py_DECREF(path);
    if (!name) return NULL;
    raise_out(o.sys_errno, o.refused, name);
    Py_DECREF(name);
    return NULL;
  }
  Py_DECREF(path);
  Py_RETURN_NONE;
}

static PyObject *engine_out_target(PyObject *self, PyObject *arg) {
  (void)self;
  PyObject *path;
  if (!PyUnicode_FSConverter(arg, &path)) return NULL;
  osk__out_target_t t;
  int rc = osk__out_target(PyBytes_AS_STRING(path), &t);
  Py_DECREF(path);
  if (rc == OSK_ENOMEM) return PyErr_NoMemory();
  static const char *kinds[] = {"?", "new", "file", "device", "stdout", "refused"};
  const char *kind = t.kind >= OSK__OUT_NEW && t.kind <= OSK__OUT_REFUSED ? kinds[t.kind] : "?";
  const char *why = t.what ? t.what : t.sys_errno ? strerror(t.sys_errno) : NULL;
  return Py_BuildValue("{s:s,s:i,s:z,s:O,s:K,s:K}", "kind", kind, "errno", t.sys_errno, "reason", why,
                       "link", t.link ? Py_True : Py_False, "dev", (unsigned long long)t.dev, "ino",
                       (unsigned long long)t.ino);
}

static PyObject *engine_out_tmp_name(PyObject *self, PyObject *args) {
  (void)self;
  PyObject *path;
  unsigned n;
  if (!PyArg_ParseTuple(args, "O&I:out_tmp_name", PyUnicode_FSConverter, &path, &n)) return NULL;
  size_t cap = (size_t)PyBytes_GET_SIZE(path) + 64;
  char *buf = PyMem_Malloc(cap);
  if (!buf) {
    Py_DECREF(path);
    return PyErr_NoMemory();
  }
  int rc = osk__out_tmp_name(buf, cap, PyBytes_AS_STRING(path), n);
  Py_DECREF(path);
  PyObject *r = rc ? raise_osk(rc, "out_tmp_name") : PyUnicode_DecodeFSDefault(buf);
  PyMem_Free(buf);
  return r;
}

/* --------------------------------------------------------------- module */

PyDoc_STRVAR(engine_paired_doc,
             "paired(baseline, treated, scale=1.0, level=0.95) -> dict\n\n"
             "Median of (treated - baseline) * scale with the sign-test confidence\n"
             "interval for the median, and exact sign and Wilcoxon signed-rank p-values.");
PyDoc_STRVAR(engine_quantile_doc, "quantile(x, q) -> float (type 7)");
PyDoc_STRVAR(engine_clock_info_doc, "clock_info() -> dict: the engine's clock");
PyDoc_STRVAR(engine_spin_ns_doc, "spin_ns(ns) -> ns spent busy-waiting (GIL released)");
PyDoc_STRVAR(engine_inject_start_doc, "inject_start(ns): start the busy-wait instrument on this thread");
PyDoc_STRVAR(engine_strerror_doc, "strerror(code) -> str: the engine's message for an OSK_E* code");
PyDoc_STRVAR(engine_err_name_doc, "err_name(code) -> str: the code's symbolic name (\"OSK_EFORMAT\")");
PyDoc_STRVAR(engine_inject_stop_doc,
             "inject_stop() -> (events, spun_ns): stop it; the torch calls it saw and\n"
             "the busy-wait it actually spent, in ns");
PyDoc_STRVAR(engine_write_file_doc,
             "write_file(path, data: bytes) -> None: the one file writer (docs/outputs.md):\n"
             "a temporary file next to path, fsynced and renamed into place; '-' is standard\n"
             "output; a character device is written through; anything else that is not a\n"
             "regular file is refused. OSError(errno, reason, path) on failure.");
PyDoc_STRVAR(engine_out_target_doc,
             "out_target(path) -> dict(kind, errno, reason, link, dev, ino): what the writer\n"
             "would do with path: kind 'new', 'file', 'device', 'stdout' or 'refused'");
PyDoc_STRVAR(engine_out_tmp_name_doc,
             "out_tmp_name(path, n) -> str: the n-th temporary name the writer tries for\n"
             "path in this process (for tests that plant files there)");

static PyMethodDef engine_methods[] = {
    {"paired", OSK_PY_KWARGS(engine_paired), engine_paired_doc},
    {"quantile", engine_quantile, METH_VARARGS, engine_quantile_doc},
    {"clock_info", engine_clock_info, METH_NOARGS, engine_clock_info_doc},
    {"spin_ns", engine_spin_ns, METH_O, engine_spin_ns_doc},
    {"inject_start", engine_inject_start, METH_O, engine_inject_start_doc},
    {"strerror", engine_strerror, METH_O, engine_strerror_doc},
    {"err_name", engine_err_name, METH_O, engine_err_name_doc},
    {"inject_stop", engine_inject_stop, METH_NOARGS, engine_inject_stop_doc},
    {"write_file", engine_write_file, METH_VARARGS, engine_write_file_doc},
    {"out_target", engine_out_target, METH_O, engine_out_target_doc},
    {"out_tmp_name", engine_out_tmp_name, METH_VARARGS, engine_out_tmp_name_doc},
    {NULL, NULL, 0, NULL}};

static int engine_exec(PyObject *m) {
  if (PyModule_AddStringConstant(m, "version", osk_version()) < 0) return -1;
  /* The codes themselves, from the same table (EINVAL = OSK_EINVAL, ...). */
#define OSK__ERR_CONST(name, code, msg) \
  if (PyModule_AddIntConstant(m, "E" #name, (code)) < 0) return -1;
  OSK_ERRNO_MAP(OSK__ERR_CONST)
#undef OSK__ERR_CONST
  return 0;
}

static PyModuleDef_Slot engine_slots[] = {{Py_mod_exec, (void *)engine_exec}, {0, NULL}};

OSK_PY_MODULE(engine, "opskew's C engine (private; use the opskew package).", engine_slots)
