/* progress.h: the `progress=` argument of the bindings that read a trace
 * without the GIL: a writable buffer (a bytearray(24)) that the C read
 * stores into as osk_progress_t (opskew_reader.h), which another Python
 * thread reads (opskew.analyze.tracefile.Watch). */
#ifndef OPSKEW_EXT_PROGRESS_H
#define OPSKEW_EXT_PROGRESS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#include "opskew_reader.h"

/* *p: the buffer of `obj` as osk_progress_t, held in *view (release it with
 * PyBuffer_Release where view->obj is set), or NULL for None. -1 with an
 * exception set: not a writable buffer of that size and alignment. */
static inline int osk_py_progress(PyObject *obj, Py_buffer *view, osk_progress_t **p) {
  *p = NULL;
  view->obj = NULL;
  if (obj == Py_None) return 0;
  if (PyObject_GetBuffer(obj, view, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) return -1;
  if ((size_t)view->len < sizeof(osk_progress_t) || (uintptr_t)view->buf % _Alignof(osk_progress_t)) {
    PyBuffer_Release(view);
    view->obj = NULL;
    PyErr_Format(PyExc_ValueError, "progress must be a writable, aligned buffer of %zu bytes (a bytearray)",
                 sizeof(osk_progress_t));
    return -1;
  }
  *p = view->buf;
  return 0;
}

#endif
