/* module.h: how an extension module of csrc/ext declares itself to Python,
 * written once for the four: a method that takes keywords, and the module
 * (multi-phase initialization, PEP 489) with its PyInit function. The
 * bindings are thin; the C core never includes this, nor Python.h. Include
 * after Python.h. */
#ifndef OPSKEW_EXT_MODULE_H
#define OPSKEW_EXT_MODULE_H

/* A PyMethodDef's function and flags for fn(self, args, kwargs). */
#define OSK_PY_KWARGS(fn) (PyCFunction)(void (*)(void))(fn), METH_VARARGS | METH_KEYWORDS

/* Defines the module opskew._<name>: docstring `doc`, the methods
 * <name>_methods, the slots `slots` (a Py_mod_exec there adds the module's
 * constants), and its PyInit__<name>. */
#define OSK_PY_MODULE(name, doc, slots)                                                           \
  static struct PyModuleDef name##_module = {PyModuleDef_HEAD_INIT, "opskew._" #name, doc, 0,     \
                                             name##_methods, slots, NULL, NULL, NULL};            \
  PyMODINIT_FUNC PyInit__##name(void) { return PyModuleDef_Init(&name##_module); }

#endif
