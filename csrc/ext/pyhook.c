/* pyhook.c: opskew._pyhook, the Python-level fallback instrument.
 *
 * Where PyTorch has no ITT (a build without it, a non-x86 machine), opskew
 * records torch's builtin functions instead of its operators: a C profile
 * hook (PyEval_SetProfile) sees every call of a builtin (PyTrace_C_CALL)
 * and its return or exception (PyTrace_C_RETURN / C_EXCEPTION). Those whose
 * module starts with "torch" become begin/end pairs in the same C tracer
 * runtime the ITT collector feeds, named after the builtin ("torch.add",
 * "torch._C.TensorBase.add", "torch._C._nn.linear").
 *
 * What it cannot see, by construction: operators reached through syntax
 * (`a + b` calls Tensor.__add__ through a slot, not a builtin call),
 * operators one builtin runs inside C++ (torch.nn.functional.linear's
 * aten::addmm), and autograd's backward operators. It also replaces any
 * other profile function of the thread (cProfile, torch.profiler's
 * with_stack), and they replace it.
 *
 * Threads: PyEval_SetProfile hooks the calling thread. Python 3.12 has
 * PyEval_SetProfileAllThreads for the threads that exist; on older Pythons
 * only the calling thread is hooked here. Threads started later are hooked
 * by opskew.tracing, which calls install() at the start of every new
 * threading.Thread (as threading.setprofile does).
 *
 * Everything here runs with the GIL held, which is what protects the
 * decision cache; the recording itself is the runtime's lock-free path.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "opskew_trace.h"

#include <string.h>

#if defined(__GNUC__)
#define OSK_PYHOOK_LIKELY(x) __builtin_expect(!!(x), 1)
#else
#define OSK_PYHOOK_LIKELY(x) (x)
#endif

/* -------------------------------------------------------- decision cache */

/* PyMethodDef* -> the interned name, or "not a torch builtin". Method
 * definitions are static in practice, so their addresses make stable keys;
 * a bound method of a Tensor and the same method of a Parameter share one.
 * Open addressing, grown at half full, never shrunk; under the GIL. */
typedef struct {
  const PyMethodDef *key;
  osk_trace_name_t *name;
  int is_torch;
} hook_entry_t;

static hook_entry_t *g_tab;
static size_t g_tab_cap, g_tab_n;
static int g_failed; /* a lookup failed for lack of memory (reported by stop) */

static inline size_t tab_slot(const void *key, size_t cap) {
  uintptr_t p = (uintptr_t)key;
  return (size_t)((p >> 4) ^ (p >> 12)) & (cap - 1);
}

static int tab_grow(void) {
  size_t cap = g_tab_cap ? g_tab_cap * 2 : 1024;
  hook_entry_t *t = calloc(cap, sizeof *t);
  if (!t) return -1;
  for (size_t i = 0; i < g_tab_cap; i++) {
    if (!g_tab[i].key) continue;
    size_t j = tab_slot(g_tab[i].key, cap);
    while (t[j].key) j = (j + 1) & (cap - 1);
    t[j] = g_tab[i];
  }
  free(g_tab);
  g_tab = t;
  g_tab_cap = cap;
  return 0;
}

/* "module" or "module.Class" that owns the builtin, as a new str, or NULL
 * (no exception) if it has none. */
static PyObject *owner_name(PyCFunctionObject *cf) {
  PyObject *mod = cf->m_module;
  if (mod && PyUnicode_Check(mod)) {
    Py_INCREF(mod);
    return mod;
  }
  if (mod && PyModule_Check(mod)) return PyModule_GetNameObject(mod);
  PyObject *self = cf->m_self;
  if (!self) return NULL;
  if (PyModule_Check(self)) return PyModule_GetNameObject(self);
  /* A bound method: name it after the class that defines it (found in the
   * MRO by its method descriptor), so that every subclass gives one name. */
  PyTypeObject *tp = PyType_Check(self) ? (PyTypeObject *)self : Py_TYPE(self);
  PyObject *mro = tp->tp_mro;
  PyTypeObject *owner = tp;
  if (mro && PyTuple_Check(mro)) {
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(mro); i++) {
      PyTypeObject *t = (PyTypeObject *)PyTuple_GET_ITEM(mro, i);
      PyObject *d = t->tp_dict ? PyDict_GetItemString(t->tp_dict, cf->m_ml->ml_name) : NULL;
      if (d && Py_IS_TYPE(d, &PyMethodDescr_Type) && ((PyMethodDescrObject *)d)->d_method == cf->m_ml) {
        owner = t;
        break;
      }
    }
  }
  if (!(owner->tp_flags & Py_TPFLAGS_HEAPTYPE)) return PyUnicode_FromString(owner->tp_name);
  PyObject *m = PyObject_GetAttrString((PyObject *)owner, "__module__");
  PyObject *q = m ? PyObject_GetAttrString((PyObject *)owner, "__qualname__") : NULL;
  PyObject *r = (m && q && PyUnicode_Check(m) && PyUnicode_Check(q)) ? PyUnicode_FromFormat("%U.%U", m, q) : NULL;
  Py_XDECREF(m);
  Py_XDECREF(q);
  return r;
}

/* Decides once per PyMethodDef. May run Python code (attribute lookups), so
 * the caller's pending exception (C_EXCEPTION) is saved around it. */
static hook_entry_t *classify(PyCFunctionObject *cf) {
  if ((g_tab_n + 1) * 2 > g_tab_cap && tab_grow() != 0) {
    g_failed = 1;
    return NULL;
  }
#if PY_VERSION_HEX >= 0x030C0000
  PyObject *saved = PyErr_GetRaisedException();
#else
  PyObject *st, *sv, *stb;
  PyErr_Fetch(&st, &sv, &stb);
#endif
  int is_torch = 0;
  osk_trace_name_t *name = NULL;
  PyObject *owner = owner_name(cf);
  const char *o = owner ? PyUnicode_AsUTF8(owner) : NULL;
  if (o && strncmp(o, "torch", 5) == 0) {
    is_torch = 1;
    PyObject *full = PyUnicode_FromFormat("%s.%s", o, cf->m_ml->ml_name);
    const char *f = full ? PyUnicode_AsUTF8(full) : NULL;
    name = f ? osk_trace_name(f) : NULL;
    if (!name) g_failed = 1; /* still recorded, as "<unnamed>" (loss "name") */
    Py_XDECREF(full);
  }
  Py_XDECREF(owner);
  PyErr_Clear();
#if PY_VERSION_HEX >= 0x030C0000
  PyErr_SetRaisedException(saved);
#else
  PyErr_Restore(st, sv, stb);
#endif
  size_t j = tab_slot(cf->m_ml, g_tab_cap);
  while (g_tab[j].key) j = (j + 1) & (g_tab_cap - 1);
  g_tab[j] = (hook_entry_t){cf->m_ml, name, is_torch};
  g_tab_n++;
  return &g_tab[j];
}

static inline const hook_entry_t *lookup(PyObject *fn) {
  if (!PyCFunction_Check(fn)) return NULL;
  PyCFunctionObject *cf = (PyCFunctionObject *)fn;
  if (OSK_PYHOOK_LIKELY(g_tab_cap != 0)) {
    for (size_t j = tab_slot(cf->m_ml, g_tab_cap);; j = (j + 1) & (g_tab_cap - 1)) {
      if (g_tab[j].key == cf->m_ml) return &g_tab[j];
      if (!g_tab[j].key) break;
    }
  }
  return classify(cf);
}

/* ------------------------------------------------------------------ hook */

static int hook(PyObject *obj, PyFrameObject *frame, int what, PyObject *arg) {
  (void)obj;
  (void)frame;
  if (what == PyTrace_C_CALL) {
    const hook_entry_t *e = lookup(arg);
    if (e && e->is_torch) osk_trace_begin(e->name, 0);
  } else if (what == PyTrace_C_RETURN || what == PyTrace_C_EXCEPTION) {
    const hook_entry_t *e = lookup(arg);
    if (e && e->is_torch) osk_trace_end();
  }
  return 0;
}

/* --------------------------------------------------------- calibration */

static osk_trace_calib_t g_calib;
static int g_calib_done;

static void calib_pair(void *ctx) {
  hook(NULL, NULL, PyTrace_C_CALL, (PyObject *)ctx);
  hook(NULL, NULL, PyTrace_C_RETURN, (PyObject *)ctx);
}

/* ----------------------------------------------------------- functions */

static PyObject *pyhook_calibrate(PyObject *self, PyObject *fn) {
  (void)self;
  if (g_calib_done) Py_RETURN_NONE;
  const hook_entry_t *e = lookup(fn);
  if (!e || !e->is_torch) {
    PyErr_SetString(PyExc_ValueError, "calibrate() needs a torch builtin, such as torch.empty");
    return NULL;
  }
  if (osk_trace_calibrate(calib_pair, fn, &g_calib) != 0) return PyErr_NoMemory();
  g_calib_done = 1;
  Py_RETURN_NONE;
}

static PyObject *pyhook_start(PyObject *self, PyObject *unused) {
  (void)self;
  (void)unused;
  int rc = osk_trace_start(g_calib_done ? &g_calib : NULL);
  if (rc != 0) {
    PyErr_SetString(PyExc_RuntimeError, "an opskew tracing session is already active in this process");
    return NULL;
  }
  g_failed = 0;
  Py_RETURN_NONE;
}

static PyObject *pyhook_install(PyObject *self, PyObject *unused) {
  (void)self;
  (void)unused;
  PyEval_SetProfile(hook, NULL);
  Py_RETURN_NONE;
}

static PyObject *pyhook_install_all(PyObject *self, PyObject *unused) {
  (void)self;
  (void)unused;
#if PY_VERSION_HEX >= 0x030C0000
  PyEval_SetProfileAllThreads(hook, NULL);
  Py_RETURN_TRUE;
#else
  PyEval_SetProfile(hook, NULL);
  Py_RETURN_FALSE;
#endif
}

static PyObject *pyhook_uninstall(PyObject *self, PyObject *unused) {
  (void)self;
  (void)unused;
  PyEval_SetProfile(NULL, NULL);
  Py_RETURN_NONE;
}

static PyObject *pyhook_uninstall_all(PyObject *self, PyObject *unused) {
  (void)self;
  (void)unused;
#if PY_VERSION_HEX >= 0x030C0000
  PyEval_SetProfileAllThreads(NULL, NULL);
#else
  PyEval_SetProfile(NULL, NULL);
#endif
  Py_RETURN_NONE;
}

static PyObject *pyhook_active(PyObject *self, PyObject *unused) {
  (void)self;
  (void)unused;
  return PyBool_FromLong(osk_trace_active());
}

/* Ends the session; returns the snapshot's address for ctypes (the caller
 * owns it and frees it with osk_trace_snapshot_free from this module). */
static PyObject *pyhook_stop(PyObject *self, PyObject *unused) {
  (void)self;
  (void)unused;
  int err = 0;
  osk_trace_snapshot_t *s = osk_trace_stop("pyhook", &err);
  if (!s) {
    if (err == OSK_ENOMEM) return PyErr_NoMemory();
    PyErr_SetString(PyExc_RuntimeError, "no opskew tracing session is active");
    return NULL;
  }
  return PyLong_FromVoidPtr(s);
}

/* `opskew record`: stop and write the trace and summaries named by the
 * environment (OPSKEW_TRACE_OUT, OPSKEW_SUMMARY_*). Returns 0 or an error
 * code; 0 too if no session was active. */
static PyObject *pyhook_finish(PyObject *self, PyObject *unused) {
  (void)self;
  (void)unused;
  int err = 0;
  if (!osk_trace_active()) return PyLong_FromLong(0);
  osk_trace_snapshot_t *s = osk_trace_stop("pyhook", &err);
  if (!s) return PyLong_FromLong(err ? err : OSK_EINVAL);
  int rc;
  Py_BEGIN_ALLOW_THREADS rc = osk_trace_write_outputs_env(s);
  Py_END_ALLOW_THREADS osk_trace_snapshot_free(s);
  return PyLong_FromLong(rc);
}

static PyObject *pyhook_calibration(PyObject *self, PyObject *unused) {
  (void)self;
  (void)unused;
  if (!g_calib_done) Py_RETURN_NONE;
  return Py_BuildValue("{s:d,s:d,s:d}", "w_ns", g_calib.w_ns, "delta_ns", g_calib.delta_ns,
                       "w_spread_ns", g_calib.w_spread_ns);
}

static PyMethodDef pyhook_methods[] = {
    {"calibrate", pyhook_calibrate, METH_O,
     "calibrate(torch_builtin): measure the hook's own cost once per process"},
    {"start", pyhook_start, METH_NOARGS, "start(): start a tracing session"},
    {"install", pyhook_install, METH_NOARGS, "install(): hook the calling thread"},
    {"install_all", pyhook_install_all, METH_NOARGS,
     "install_all() -> bool: hook every thread (Python 3.12+; True) or only\n"
     "the calling one (older Pythons; False)"},
    {"uninstall", pyhook_uninstall, METH_NOARGS, "uninstall(): unhook the calling thread"},
    {"uninstall_all", pyhook_uninstall_all, METH_NOARGS, "uninstall_all(): unhook what install_all hooked"},
    {"active", pyhook_active, METH_NOARGS, "active() -> bool: a session is recording"},
    {"stop", pyhook_stop, METH_NOARGS, "stop() -> int: end the session; the snapshot's address"},
    {"finish", pyhook_finish, METH_NOARGS,
     "finish() -> int: end the session and write the outputs named by the environment"},
    {"calibration", pyhook_calibration, METH_NOARGS, "calibration() -> dict or None"},
    {NULL, NULL, 0, NULL}};

static int pyhook_exec(PyObject *m) {
  (void)osk_clock_get(); /* calibrate the clock at import, not inside a call */
  return PyModule_AddIntConstant(m, "all_threads", PY_VERSION_HEX >= 0x030C0000);
}

static PyModuleDef_Slot pyhook_slots[] = {{Py_mod_exec, (void *)pyhook_exec}, {0, NULL}};

static struct PyModuleDef pyhook_module = {
    PyModuleDef_HEAD_INIT, "opskew._pyhook",
    "opskew's fallback instrument: a C profile hook that records torch builtins\n"
    "into the C tracer (private; use opskew.trace(instrument=\"pyhook\")).",
    0, pyhook_methods, pyhook_slots, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__pyhook(void) { return PyModuleDef_Init(&pyhook_module); }
