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
 * by opskew's bootstrap (_boot.py), which calls set_profile(True, False) at
 * the start of every new threading.Thread (as threading.setprofile does).
 *
 * Everything here runs with the GIL held, which is what protects the
 * decision cache; the recording itself is the runtime's lock-free path.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "module.h"
#include "opskew_collector.h"

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
  if ((g_tab_n + 1) * 2 > g_tab_cap && tab_grow() != 0) return NULL;
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
    /* Without a name it is still recorded, as "<unnamed>" (loss "name"). */
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

static void calib_pair(void *ctx) {
  hook(NULL, NULL, PyTrace_C_CALL, (PyObject *)ctx);
  hook(NULL, NULL, PyTrace_C_RETURN, (PyObject *)ctx);
}

/* The life cycle is collector.c's (osk_collector_*, through ctypes on this
 * same file): sessions, `opskew record`, fork check. Only the calibration
 * needs this module, since its pair runs the hook on a torch builtin. */
const osk__collector_desc_t osk__collector = {.instrument = "pyhook", .pair = calib_pair, .pair_needs_ctx = 1};

/* ----------------------------------------------------------- functions */

static PyObject *pyhook_calibrate(PyObject *self, PyObject *fn) {
  (void)self;
  const hook_entry_t *e = lookup(fn);
  if (!e || !e->is_torch) {
    PyErr_SetString(PyExc_ValueError, "calibrate() needs a torch builtin, such as torch.empty");
    return NULL;
  }
  /* The pair runs with the GIL held: the decision cache needs it, and the
   * entry is cached by now, so no Python code runs inside the measurement. */
  if (osk__collector_calibrate(fn) != 0) return PyErr_NoMemory();
  Py_RETURN_NONE;
}

/* Installs (on) or removes the hook, on every thread (all_threads, Python
 * 3.12+) or on the calling one. Returns whether every thread was reached. */
static PyObject *pyhook_set_profile(PyObject *self, PyObject *args) {
  (void)self;
  int on, all_threads;
  if (!PyArg_ParseTuple(args, "pp", &on, &all_threads)) return NULL;
  Py_tracefunc fn = on ? hook : NULL;
#if PY_VERSION_HEX >= 0x030C0000
  if (all_threads) {
    PyEval_SetProfileAllThreads(fn, NULL);
    Py_RETURN_TRUE;
  }
#endif
  PyEval_SetProfile(fn, NULL);
  return PyBool_FromLong(!all_threads);
}

PyDoc_STRVAR(pyhook_calibrate_doc, "calibrate(torch_builtin): measure the hook's own cost once per process");
PyDoc_STRVAR(pyhook_set_profile_doc,
             "set_profile(on, all_threads) -> bool: install (on) or remove the hook on\n"
             "every thread (Python 3.12+) or the calling one; whether every thread was reached");

static PyMethodDef pyhook_methods[] = {
    {"calibrate", pyhook_calibrate, METH_O, pyhook_calibrate_doc},
    {"set_profile", pyhook_set_profile, METH_VARARGS, pyhook_set_profile_doc},
    {NULL, NULL, 0, NULL}};

static int pyhook_exec(PyObject *m) {
  (void)osk_clock_get(); /* calibrate the clock at import, not inside a call */
  osk__collector_bound(1); /* the module is its own host */
  return PyModule_AddIntConstant(m, "all_threads", PY_VERSION_HEX >= 0x030C0000);
}

static PyModuleDef_Slot pyhook_slots[] = {{Py_mod_exec, (void *)pyhook_exec}, {0, NULL}};

OSK_PY_MODULE(pyhook,
              "opskew's fallback instrument: a C profile hook that records torch builtins\n"
              "into the C tracer (private; use opskew.trace(instrument=\"pyhook\")).\n"
              "Sessions are started and stopped through ctypes (osk_collector_*).",
              pyhook_slots)
