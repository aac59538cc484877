/* read_error.h: how the bindings hand a failure of the C core to Python.
 *
 * The bindings raise nothing for the C's own failures: they return them as
 * data, "status" and "error", and opskew.errors.from_c_error (through
 * opskew.tracefile) makes the exception, so there is one route from a C
 * error to the exception and exit code the user sees. Shared by _reader and
 * _correct; include after Python.h. */
#ifndef OPSKEW_EXT_READ_ERROR_H
#define OPSKEW_EXT_READ_ERROR_H

#include "opskew_reader.h"

/* "ok", "truncated" (what was read is usable), "invalid" (the trace is not
 * valid), or "error" (it could not be read, or the C failed). */
static inline const char *osk_py_status(int rc) {
  if (rc == 0) return "ok";
  if (rc == OSK_ETRUNCATED) return "truncated";
  if (rc == OSK_EFORMAT || rc == OSK_ERANGE) return "invalid";
  return "error";
}

/* None for rc == 0, else {"code": the C's name ("OSK_EFORMAT"), "number":
 * the OSK_E* value, "message": the C's message, "offset": byte in the JSON
 * text, "sys_errno"}: from_c_error's arguments. New reference, NULL with an
 * exception set when out of memory. */
static inline PyObject *osk_py_error(int rc, const osk_error_t *err) {
  if (!rc) Py_RETURN_NONE;
  return Py_BuildValue("{s:s,s:i,s:s,s:K,s:i}", "code", osk_err_name(rc), "number", rc, "message",
                       err->message && *err->message ? err->message : osk_strerror(rc), "offset",
                       (unsigned long long)err->offset, "sys_errno", err->sys_errno);
}

#endif
