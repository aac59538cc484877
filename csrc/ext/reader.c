/* reader.c: opskew._reader, the thin Python binding over the trace reader
 * and analyzer (include/opskew_reader.h), and the CUDA audit over it.
 *
 * One call, summarize(), reads a whole trace in C with the GIL released and
 * returns plain Python containers; the per-event work never touches Python.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "module.h"
#include "progress.h"
#include "opskew_job.h"
#include "opskew_reader.h"
#include "read_error.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* Py_NewRef is 3.10+; the package supports 3.9. */
static PyObject *new_ref(PyObject *o) {
  Py_INCREF(o);
  return o;
}

/* Strings from a trace are UTF-8 when the trace is; anything else is shown
 * with U+FFFD rather than failing the whole summary. */
static PyObject *str_obj(osk_str_t s) {
  return PyUnicode_DecodeUTF8(s.ptr ? s.ptr : "", (Py_ssize_t)s.len, "replace");
}

static PyObject *id_obj(const osk_reader_id_t *id) {
  if (id->kind == OSK_READER_ID_INT) return PyLong_FromLongLong(id->num);
  if (id->kind == OSK_READER_ID_STR) return str_obj(id->str);
  Py_RETURN_NONE;
}

/* Adds key -> value to dict, stealing the value reference. */
static int put(PyObject *d, const char *key, PyObject *v) {
  if (!v) return -1;
  int rc = PyDict_SetItemString(d, key, v);
  Py_DECREF(v);
  return rc;
}

/* Fills `d` with row i of `src`: returns 0, or nonzero with an exception
 * set. A row that puts nothing in `d` is left out. */
typedef int (*row_fn)(PyObject *d, const void *src, size_t i);

/* The list of the dicts that `row` fills for rows 0..n-1 of `src`. */
static PyObject *rows_list(const void *src, size_t n, row_fn row) {
  PyObject *list = PyList_New(0);
  for (size_t i = 0; list && i < n; i++) {
    PyObject *d = PyDict_New();
    if (!d || row(d, src, i) || (PyDict_GET_SIZE(d) && PyList_Append(list, d))) Py_CLEAR(list);
    Py_XDECREF(d);
  }
  return list;
}

static int op_row(PyObject *d, const void *src, size_t i) {
  const osk_summary_t *s = src;
  const osk_summary_op_t *o = osk_summary_op(s, i);
  if (o->calls == 0) return 0; /* a "B" that never ended: no row */
  double p50 = 0, p99 = 0;
  osk_summary_op_quantile(s, i, 0.5, &p50);
  osk_summary_op_quantile(s, i, 0.99, &p99);
  return put(d, "name", str_obj(o->name)) || put(d, "cat", str_obj(o->cat)) ||
         put(d, "calls", PyLong_FromUnsignedLongLong(o->calls)) ||
         put(d, "total_ns", PyLong_FromLongLong(o->total_ns)) ||
         put(d, "self_ns", PyLong_FromLongLong(o->self_ns)) ||
         put(d, "mean_ns", PyFloat_FromDouble((double)o->total_ns / (double)o->calls)) ||
         put(d, "min_ns", PyLong_FromLongLong(o->min_ns)) ||
         put(d, "max_ns", PyLong_FromLongLong(o->max_ns)) ||
         put(d, "p50_ns", PyFloat_FromDouble(p50)) || put(d, "p99_ns", PyFloat_FromDouble(p99)) ||
         put(d, "descendants", PyLong_FromUnsignedLongLong(o->descendants)) ||
         put(d, "only_child_same_name", PyLong_FromUnsignedLongLong(o->only_child_same_name));
}

static int thread_row(PyObject *d, const void *src, size_t i) {
  const osk_summary_thread_t *t = osk_summary_thread(src, i);
  return put(d, "pid", id_obj(&t->pid)) || put(d, "tid", id_obj(&t->tid)) ||
         put(d, "name", t->name.ptr ? str_obj(t->name) : new_ref(Py_None)) ||
         put(d, "complete_events", PyLong_FromUnsignedLongLong(t->complete_events)) ||
         put(d, "max_depth", PyLong_FromUnsignedLong(t->max_depth)) ||
         put(d, "overlaps", PyLong_FromUnsignedLongLong(t->overlaps)) ||
         put(d, "resorted", PyBool_FromLong(t->resorted));
}

static int process_row(PyObject *d, const void *src, size_t i) {
  const osk_summary_process_t *p = osk_summary_process(src, i);
  return put(d, "pid", id_obj(&p->pid)) || put(d, "name", str_obj(p->name));
}

/* A summary's rows (NULL: none). */
static PyObject *ops_list(const osk_summary_t *s) {
  return rows_list(s, osk_summary_op_count(s), op_row);
}

static PyObject *threads_list(const osk_summary_t *s) {
  return rows_list(s, osk_summary_thread_count(s), thread_row);
}

static PyObject *processes_list(const osk_summary_t *s) {
  return rows_list(s, osk_summary_process_count(s), process_row);
}

/* The top-level scalars of a summary or of a reader, one at a time. */
typedef int (*meta_get_fn)(const void *src, size_t i, osk_str_t *k, osk_str_t *v, int *is_str);

static int summary_meta_get(const void *src, size_t i, osk_str_t *k, osk_str_t *v, int *is_str) {
  return osk_summary_meta_get(src, i, k, v, is_str);
}

static int reader_meta_get(const void *src, size_t i, osk_str_t *k, osk_str_t *v, int *is_str) {
  return osk_reader_meta_get(src, i, k, v, is_str);
}

/* Top-level scalars: strings as str, numbers and literals parsed by json's
 * rules would need the json module; int and float cover what traces hold,
 * and anything else stays as its JSON text. */
static PyObject *meta_dict(const void *src, size_t n, meta_get_fn get) {
  PyObject *d = PyDict_New();
  if (!d) return NULL;
  for (size_t i = 0; i < n; i++) {
    osk_str_t k, v;
    int is_str;
    get(src, i, &k, &v, &is_str);
    PyObject *key = str_obj(k), *val;
    if (!key) goto fail;
    if (is_str) {
      val = str_obj(v);
    } else if (v.len == 4 && memcmp(v.ptr, "true", 4) == 0) {
      val = new_ref(Py_True);
    } else if (v.len == 5 && memcmp(v.ptr, "false", 5) == 0) {
      val = new_ref(Py_False);
    } else if (v.len == 4 && memcmp(v.ptr, "null", 4) == 0) {
      val = new_ref(Py_None);
    } else {
      if (strpbrk(v.ptr, ".eE")) {
        PyObject *text = str_obj(v);
        val = text ? PyFloat_FromString(text) : NULL;
        Py_XDECREF(text);
      } else {
        val = PyLong_FromString(v.ptr, NULL, 10);
      }
      if (!val) {
        PyErr_Clear();
        val = str_obj(v);
      }
    }
    int rc = val ? PyDict_SetItem(d, key, val) : -1;
    Py_DECREF(key);
    Py_XDECREF(val);
    if (rc) goto fail;
  }
  return d;
fail:
  Py_DECREF(d);
  return NULL;
}

/* The kept top-level objects as {key: value}, each value decoded by the json
 * module from the text the reader validated (a later key wins, as in JSON
 * readers). */
typedef int (*object_get_fn)(const void *src, size_t i, osk_str_t *k, osk_str_t *v);

static int summary_object_get(const void *src, size_t i, osk_str_t *k, osk_str_t *v) {
  return osk_summary_object_get(src, i, k, v);
}

static int reader_object_get(const void *src, size_t i, osk_str_t *k, osk_str_t *v) {
  return osk_reader_object_get(src, i, k, v);
}

static PyObject *objects_dict(const void *r, size_t n, object_get_fn get) {
  PyObject *d = PyDict_New();
  if (!d || n == 0) return d;
  PyObject *json = PyImport_ImportModule("json");
  PyObject *loads = json ? PyObject_GetAttrString(json, "loads") : NULL;
  Py_XDECREF(json);
  if (!loads) goto fail;
  for (size_t i = 0; i < n; i++) {
    osk_str_t k, v;
    get(r, i, &k, &v);
    PyObject *key = str_obj(k), *text = str_obj(v), *val = NULL;
    if (key && text) val = PyObject_CallFunctionObjArgs(loads, text, NULL);
    /* The reader keeps no object deeper than OSK_READER_OBJECT_MAX_DEPTH;
     * should json.loads still refuse one for its depth, that object is left
     * out, as the reader leaves out the ones it does not keep. */
    if (!val && key && text && PyErr_ExceptionMatches(PyExc_RecursionError)) {
      PyErr_Clear();
      Py_DECREF(key);
      Py_DECREF(text);
      continue;
    }
    int rc = val ? PyDict_SetItem(d, key, val) : -1;
    Py_XDECREF(key);
    Py_XDECREF(text);
    Py_XDECREF(val);
    if (rc) {
      Py_DECREF(loads);
      goto fail;
    }
  }
  Py_DECREF(loads);
  return d;
fail:
  Py_DECREF(d);
  return NULL;
}

/* Counts of the torch.profiler option marks (osk_reader_marks_t), by option. */
static PyObject *marks_dict(const osk_reader_marks_t *m) {
  return Py_BuildValue("{s:K,s:K,s:K,s:K,s:K,s:K}", "record_shapes", (unsigned long long)m->input_dims,
                       "with_stack", (unsigned long long)m->python_function, "profile_memory",
                       (unsigned long long)m->memory, "with_modules",
                       (unsigned long long)m->module_hierarchy, "with_flops",
                       (unsigned long long)m->flops, "backward", (unsigned long long)m->backward);
}

/* The reader's counters into d (which the caller owns): counts, and flags
 * as bools. */
static int reader_stats_into(PyObject *d, const osk_reader_stats_t *rs) {
  PyObject *v = Py_BuildValue(
      "{s:K,s:K,s:O,s:O,s:O,s:O,s:K,s:K,s:K,s:K,s:K,s:O,s:K}", "bytes", (unsigned long long)rs->bytes,
      "compressed_bytes", (unsigned long long)rs->compressed_bytes, "gzip", rs->gzip ? Py_True : Py_False,
      "gzip_unterminated", rs->gzip_unterminated ? Py_True : Py_False, "gzip_corrupt",
      rs->gzip_corrupt ? Py_True : Py_False, "array_format", rs->array_format ? Py_True : Py_False,
      "bad_fields", (unsigned long long)rs->bad_fields, "lone_surrogates",
      (unsigned long long)rs->lone_surrogates, "out_of_range", (unsigned long long)rs->out_of_range,
      "bytes_scanned", (unsigned long long)rs->bytes_scanned, "objects_not_kept",
      (unsigned long long)rs->objects_not_kept, "header_only_stopped",
      rs->header_only_stopped ? Py_True : Py_False, "peak_buffer_bytes",
      (unsigned long long)rs->peak_buffer);
  int rc = v ? PyDict_Update(d, v) : -1;
  Py_XDECREF(v);
  return rc;
}

/* A read's outcome as "status" and "error" in `result` (read_error.h). */
static int put_outcome(PyObject *result, int rc, const osk_error_t *err) {
  return put(result, "status", PyUnicode_FromString(osk_py_status(rc))) ||
         put(result, "error", osk_py_error(rc, err));
}

static PyObject *stats_dict(const osk_summary_stats_t *st, const osk_reader_stats_t *rs) {
  PyObject *d = PyDict_New();
  if (!d || put(d, "events", PyLong_FromUnsignedLongLong(st->events)) ||
      put(d, "complete_events", PyLong_FromUnsignedLongLong(st->complete_events)) ||
      put(d, "filtered_events", PyLong_FromUnsignedLongLong(st->filtered_events)) ||
      put(d, "unusable_events", PyLong_FromUnsignedLongLong(st->unusable_events)) ||
      put(d, "overlaps", PyLong_FromUnsignedLongLong(st->overlaps)) ||
      put(d, "unmatched_end", PyLong_FromUnsignedLongLong(st->unmatched_end)) ||
      put(d, "unclosed_begin", PyLong_FromUnsignedLongLong(st->unclosed_begin)) ||
      put(d, "resorted_events", PyLong_FromUnsignedLongLong(st->resorted_events)) ||
      put(d, "passes", PyLong_FromLong(st->passes)) ||
      put(d, "first_ts_ns", PyLong_FromLongLong(st->first_ts_ns)) ||
      put(d, "last_end_ns", PyLong_FromLongLong(st->last_end_ns)) || reader_stats_into(d, rs)) {
    Py_XDECREF(d);
    return NULL;
  }
  return d;
}

/* A sequence of str as C strings; the UTF-8 buffers belong to the str
 * objects, which `fast` keeps alive. None gives items == NULL. */
typedef struct {
  PyObject *fast;
  const char **items;
  size_t n;
} str_list_t;

static void str_list_free(str_list_t *l) {
  PyMem_Free(l->items);
  Py_XDECREF(l->fast);
}

static int str_list(str_list_t *l, PyObject *seq, const char *what) {
  if (seq == Py_None) return 0;
  l->fast = PySequence_Fast(seq, what);
  if (!l->fast) return -1;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(l->fast);
  l->items = PyMem_Calloc((size_t)(n ? n : 1), sizeof *l->items);
  if (!l->items) {
    PyErr_NoMemory();
    return -1;
  }
  for (Py_ssize_t i = 0; i < n; i++) {
    PyObject *item = PySequence_Fast_GET_ITEM(l->fast, i);
    if (!PyUnicode_Check(item)) {
      PyErr_SetString(PyExc_TypeError, what);
      return -1;
    }
    l->items[i] = PyUnicode_AsUTF8(item);
    if (!l->items[i]) return -1;
  }
  l->n = (size_t)n;
  return 0;
}

static PyObject *reader_summarize(PyObject *self, PyObject *args, PyObject *kw) {
  (void)self;
  static char *kwlist[] = {"path", "categories", "exclude_categories", "chunk_bytes", "progress", NULL};
  PyObject *path_obj, *cats_obj = Py_None, *ex_obj = Py_None, *progress_obj = Py_None;
  Py_ssize_t chunk = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O&|OOnO:summarize", kwlist, PyUnicode_FSConverter,
                                   &path_obj, &cats_obj, &ex_obj, &chunk, &progress_obj))
    return NULL;
  const char *path = PyBytes_AS_STRING(path_obj);
  str_list_t cats = {0}, ex = {0};
  PyObject *result = NULL;
  osk_summary_t *s = NULL;
  Py_buffer progress_view = {0};
  osk_reader_opts_t ropts = {.chunk_bytes = chunk > 0 ? (size_t)chunk : 0};
  if (osk_py_progress(progress_obj, &progress_view, &ropts.progress) < 0 ||
      str_list(&cats, cats_obj, "categories must be a sequence of str") ||
      str_list(&ex, ex_obj, "exclude_categories must be a sequence of str"))
    goto done;
  osk_summary_opts_t opts = {cats.items, cats.n, ex.items, ex.n};
  osk_reader_stats_t rstats = {0};
  osk_error_t err = {0, "", 0, 0};
  int rc;
  Py_BEGIN_ALLOW_THREADS rc = osk_summary_from_path(path, &opts, &ropts, &s, &rstats, &err);
  Py_END_ALLOW_THREADS

  /* Without a summary (OSK_EIO, OSK_ERANGE and the like: nothing was
   * summarized) the same keys, empty. */
  osk_reader_marks_t none = {0};
  result = PyDict_New();
  if (result &&
      (put_outcome(result, rc, &err) || put(result, "ops", ops_list(s)) ||
       put(result, "threads", threads_list(s)) || put(result, "processes", processes_list(s)) ||
       put(result, "metadata", meta_dict(s, osk_summary_meta_count(s), summary_meta_get)) ||
       put(result, "objects", objects_dict(s, osk_summary_object_count(s), summary_object_get)) ||
       put(result, "stats", s ? stats_dict(osk_summary_stats(s), &rstats) : PyDict_New()) ||
       put(result, "marks", marks_dict(s ? &rstats.marks : &none))))
    Py_CLEAR(result);
done:
  if (progress_view.obj) PyBuffer_Release(&progress_view);
  osk_summary_free(s);
  str_list_free(&cats);
  str_list_free(&ex);
  Py_DECREF(path_obj);
  return result;
}

/* One pass of the reader alone (no analysis): what the document says about
 * itself, for commands that must know it before they act on the trace. */
static PyObject *reader_scan(PyObject *self, PyObject *args, PyObject *kw) {
  (void)self;
  static char *kwlist[] = {"path", "chunk_bytes", "header_only", NULL};
  PyObject *path_obj;
  Py_ssize_t chunk = 0;
  int header_only = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O&|n$p:scan", kwlist, PyUnicode_FSConverter,
                                   &path_obj, &chunk, &header_only))
    return NULL;
  const char *path = PyBytes_AS_STRING(path_obj);
  osk_reader_opts_t ropts = {.chunk_bytes = chunk > 0 ? (size_t)chunk : 0, .header_only = header_only};
  osk_error_t err = {0, "", 0, 0};
  osk_reader_t *r = NULL;
  int rc;
  Py_BEGIN_ALLOW_THREADS rc = osk_reader_open(&r, path, &ropts, &err);
  if (rc == 0) rc = osk_reader_run(r, NULL, NULL, &err);
  Py_END_ALLOW_THREADS

  PyObject *result = PyDict_New(), *stats = NULL;
  osk_reader_stats_t none = {0};
  const osk_reader_stats_t *rs = r ? osk_reader_stats(r) : &none;
  if (!result || put_outcome(result, rc, &err) ||
      put(result, "metadata",
          r ? meta_dict(r, osk_reader_meta_count(r), reader_meta_get) : PyDict_New()) ||
      put(result, "objects",
          r ? objects_dict(r, osk_reader_object_count(r), reader_object_get) : PyDict_New()) ||
      put(result, "marks", marks_dict(&rs->marks)) || !(stats = PyDict_New()) ||
      put(stats, "events", PyLong_FromUnsignedLongLong(rs->events)) ||
      reader_stats_into(stats, rs) || PyDict_SetItemString(result, "stats", stats))
    Py_CLEAR(result);
  Py_XDECREF(stats);
  osk_reader_free(r);
  Py_DECREF(path_obj);
  return result;
}

static PyObject *reader_spool(PyObject *self, PyObject *args) {
  (void)self;
  PyObject *path_obj;
  if (!PyArg_ParseTuple(args, "O&:spool", PyUnicode_FSConverter, &path_obj)) return NULL;
  int fd = -1, rc;
  osk_error_t err = {0, "", 0, 0};
  Py_BEGIN_ALLOW_THREADS rc = osk_reader_spool(PyBytes_AS_STRING(path_obj), &fd, &err);
  Py_END_ALLOW_THREADS Py_DECREF(path_obj);
  if (rc) return Py_BuildValue("(iisi)", -1, rc, err.message, err.sys_errno);
  return Py_BuildValue("(iisi)", fd, 0, "", 0);
}

/* ---------------------------------------------------------------- audit */

static PyObject *str_or_none(osk_str_t s) { return s.ptr ? str_obj(s) : new_ref(Py_None); }

static int kind_row(PyObject *d, const void *src, size_t i) {
  const osk_audit_overhead_kind_t *k = osk_audit_overhead_kind(src, i);
  return put(d, "name", str_obj(k->name)) || put(d, "count", PyLong_FromUnsignedLongLong(k->count)) ||
         put(d, "total_ns", PyLong_FromLongLong(k->total_ns));
}

static int overhead_row(PyObject *d, const void *src, size_t i) {
  const osk_audit_overhead_t *o = osk_audit_overhead(src, i);
  return put(d, "name", str_obj(o->name)) || put(d, "ts_ns", PyLong_FromLongLong(o->ts_ns)) ||
         put(d, "dur_ns", PyLong_FromLongLong(o->dur_ns)) || put(d, "op", str_or_none(o->op)) ||
         put(d, "launch", str_or_none(o->launch)) ||
         put(d, "correlation",
             o->launch.ptr ? PyLong_FromLongLong(o->launch_correlation) : new_ref(Py_None));
}

/* A row of one of the audit's lists (missing launches, orphans, bad times). */
static int audit_event_row(PyObject *d, const osk_audit_event_t *e) {
  return put(d, "name", str_obj(e->name)) ||
         put(d, "correlation", e->has_correlation ? PyLong_FromLongLong(e->correlation) : new_ref(Py_None)) ||
         put(d, "ts_ns", PyLong_FromLongLong(e->ts_ns)) || put(d, "dur_ns", PyLong_FromLongLong(e->dur_ns)) ||
         put(d, "launch_ts_ns", e->has_launch ? PyLong_FromLongLong(e->launch_ts_ns) : new_ref(Py_None));
}

static int missing_row(PyObject *d, const void *src, size_t i) {
  return audit_event_row(d, osk_audit_event(src, OSK_AUDIT_MISSING, i));
}

static int orphan_row(PyObject *d, const void *src, size_t i) {
  return audit_event_row(d, osk_audit_event(src, OSK_AUDIT_ORPHANS, i));
}

static int bad_time_row(PyObject *d, const void *src, size_t i) {
  return audit_event_row(d, osk_audit_event(src, OSK_AUDIT_BAD_TIME, i));
}

static int audit_step_row(PyObject *d, const void *src, size_t i) {
  const osk_audit_step_t *s = osk_audit_step(src, i);
  return put(d, "step", PyLong_FromLongLong(s->step)) || put(d, "ts_ns", PyLong_FromLongLong(s->ts_ns)) ||
         put(d, "dur_ns", PyLong_FromLongLong(s->dur_ns));
}

static PyObject *audit_stats_dict(const osk_audit_stats_t *st, const osk_reader_stats_t *rs) {
  PyObject *d = Py_BuildValue(
      "{s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:L,s:L,s:L,s:K,s:L,s:K,s:L,s:K,s:L,s:K,s:K,s:K,s:O}",
      "events", (unsigned long long)st->events, "device_events", (unsigned long long)st->device_events,
      "device_uncorrelated", (unsigned long long)st->device_uncorrelated, "launches",
      (unsigned long long)st->launches, "matched_launches", (unsigned long long)st->matched_launches,
      "missing", (unsigned long long)st->missing, "missing_head", (unsigned long long)st->missing_head,
      "orphans", (unsigned long long)st->orphans, "bad_time", (unsigned long long)st->bad_time,
      "before_launch", (unsigned long long)st->before_launch, "external_id_mismatch",
      (unsigned long long)st->external_id_mismatch, "duplicate_launches",
      (unsigned long long)st->duplicate_launches, "gap_min_ns", (long long)st->gap_min_ns, "gap_p50_ns",
      (long long)st->gap_p50_ns, "gap_max_ns", (long long)st->gap_max_ns, "overhead_events",
      (unsigned long long)st->overhead_events, "overhead_ns", (long long)st->overhead_ns,
      "overhead_in_launch", (unsigned long long)st->overhead_in_launch, "overhead_in_launch_ns",
      (long long)st->overhead_in_launch_ns, "overhead_in_op", (unsigned long long)st->overhead_in_op,
      "overhead_in_op_ns", (long long)st->overhead_in_op_ns, "operators", (unsigned long long)st->operators,
      "steps", (unsigned long long)st->steps, "unusable", (unsigned long long)st->unusable, "truncated",
      st->truncated ? Py_True : Py_False);
  if (d && reader_stats_into(d, rs)) Py_CLEAR(d);
  return d;
}

/* The CUDA clean-window audit (osk_audit_*): one read of the trace in C. */
static PyObject *reader_audit(PyObject *self, PyObject *args, PyObject *kw) {
  (void)self;
  static char *kwlist[] = {"path", "max_records", "chunk_bytes", NULL};
  PyObject *path_obj;
  Py_ssize_t max_records = OSK_AUDIT_RECORDS_DEFAULT, chunk = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O&|nn:audit", kwlist, PyUnicode_FSConverter, &path_obj,
                                   &max_records, &chunk))
    return NULL;
  if (max_records < 0) {
    Py_DECREF(path_obj);
    PyErr_SetString(PyExc_ValueError, "max_records must be >= 0");
    return NULL;
  }
  osk_audit_opts_t opts = {max_records ? (size_t)max_records : OSK_AUDIT_RECORDS_NONE};
  osk_reader_opts_t ropts = {.chunk_bytes = chunk > 0 ? (size_t)chunk : 0};
  osk_reader_stats_t rstats = {0};
  osk_error_t err = {0, "", 0, 0};
  osk_audit_t *a = NULL;
  int rc;
  Py_BEGIN_ALLOW_THREADS rc = osk_audit_from_path(PyBytes_AS_STRING(path_obj), &opts, &ropts, &a, &rstats, &err);
  Py_END_ALLOW_THREADS

  /* Without an audit (nothing could be read) the same keys, empty. */
  PyObject *result = PyDict_New();
  if (result &&
      (put_outcome(result, rc, &err) ||
       put(result, "stats", a ? audit_stats_dict(osk_audit_stats(a), &rstats) : PyDict_New()) ||
       put(result, "overhead_by_name", rows_list(a, osk_audit_overhead_kind_count(a), kind_row)) ||
       put(result, "overhead", rows_list(a, osk_audit_overhead_count(a), overhead_row)) ||
       put(result, "missing", rows_list(a, osk_audit_event_count(a, OSK_AUDIT_MISSING), missing_row)) ||
       put(result, "orphans", rows_list(a, osk_audit_event_count(a, OSK_AUDIT_ORPHANS), orphan_row)) ||
       put(result, "bad_time", rows_list(a, osk_audit_event_count(a, OSK_AUDIT_BAD_TIME), bad_time_row)) ||
       put(result, "steps", rows_list(a, osk_audit_step_count(a), audit_step_row))))
    Py_CLEAR(result);
  osk_audit_free(a);
  Py_DECREF(path_obj);
  return result;
}

/* ------------------------------------------------------------------ job */

static PyObject *dlist(const double *x, size_t n) {
  PyObject *l = PyList_New((Py_ssize_t)n);
  for (size_t i = 0; l && i < n; i++) {
    PyObject *v = PyFloat_FromDouble(x[i]);
    if (!v) {
      Py_CLEAR(l);
      break;
    }
    PyList_SET_ITEM(l, (Py_ssize_t)i, v);
  }
  return l;
}

static PyObject *ilist(const int64_t *x, size_t n) {
  PyObject *l = PyList_New((Py_ssize_t)n);
  for (size_t i = 0; l && i < n; i++) {
    PyObject *v = x[i] < 0 ? new_ref(Py_None) : PyLong_FromLongLong(x[i]);
    if (!v) {
      Py_CLEAR(l);
      break;
    }
    PyList_SET_ITEM(l, (Py_ssize_t)i, v);
  }
  return l;
}

/* Adds one read's counters to `acc` (a rank's sources, the job's ranks). */
static void rstats_add(osk_reader_stats_t *acc, const osk_reader_stats_t *s) {
  acc->bytes += s->bytes;
  acc->compressed_bytes += s->compressed_bytes;
  acc->events += s->events;
  acc->bad_fields += s->bad_fields;
  acc->lone_surrogates += s->lone_surrogates;
  acc->out_of_range += s->out_of_range;
  acc->bytes_scanned += s->bytes_scanned;
  if (s->peak_buffer > acc->peak_buffer) acc->peak_buffer = s->peak_buffer;
  acc->gzip |= s->gzip;
  acc->gzip_unterminated |= s->gzip_unterminated;
  acc->gzip_corrupt |= s->gzip_corrupt;
  acc->objects_not_kept += s->objects_not_kept;
  acc->marks.input_dims += s->marks.input_dims;
  acc->marks.python_function += s->marks.python_function;
  acc->marks.memory += s->marks.memory;
  acc->marks.module_hierarchy += s->marks.module_hierarchy;
  acc->marks.flops += s->marks.flops;
  acc->marks.backward += s->marks.backward;
}

static osk_reader_stats_t rank_rstats(const osk_job_t *j, size_t i) {
  osk_reader_stats_t acc = {0};
  for (size_t k = 0; k < osk_job_rank(j, i)->sources; k++) rstats_add(&acc, osk_job_source_reader_stats(j, i, k));
  return acc;
}

/* A rank's sources: each file's outcome, threads, metadata and objects. */
typedef struct {
  const osk_job_t *j;
  size_t rank;
} job_rank_t;

static int source_row(PyObject *d, const void *src, size_t k) {
  const job_rank_t *jr = src;
  const osk_summary_t *s = osk_job_source_summary(jr->j, jr->rank, k);
  osk_error_t serr = {0, "", 0, 0};
  int src_rc = osk_job_source_status(jr->j, jr->rank, k, &serr);
  return put_outcome(d, src_rc, &serr) || put(d, "threads", threads_list(s)) ||
         put(d, "processes", processes_list(s)) ||
         put(d, "metadata", meta_dict(s, osk_summary_meta_count(s), summary_meta_get)) ||
         put(d, "objects", objects_dict(s, osk_summary_object_count(s), summary_object_get)) ||
         put(d, "stats",
             stats_dict(osk_summary_stats(s), osk_job_source_reader_stats(jr->j, jr->rank, k)));
}

static int rank_row(PyObject *d, const void *src, size_t i) {
  const osk_job_t *j = src;
  const osk_job_rank_t *r = osk_job_rank(j, i);
  osk_reader_stats_t rs = rank_rstats(j, i);
  job_rank_t jr = {j, i};
  return put(d, "rank", PyLong_FromLong(r->rank)) ||
         put(d, "sources", rows_list(&jr, r->sources, source_row)) ||
         put(d, "status", PyUnicode_FromString(osk_py_status(r->status))) ||
         put(d, "ops", ops_list(r->summary)) ||
         put(d, "stats", stats_dict(osk_summary_stats(r->summary), &rs)) ||
         put(d, "collectives", PyLong_FromUnsignedLongLong(r->collectives)) ||
         put(d, "steps", PyLong_FromUnsignedLongLong(r->steps)) ||
         put(d, "clock_origin_ns", PyLong_FromLongLong(r->clock_origin_ns)) ||
         put(d, "offset_ns", PyFloat_FromDouble(r->offset_ns)) ||
         put(d, "drift_ppm", PyFloat_FromDouble(r->drift_ppm)) ||
         put(d, "residual_ns", PyFloat_FromDouble(r->residual_ns)) ||
         put(d, "residual_max_ns", PyFloat_FromDouble(r->residual_max_ns)) ||
         put(d, "clock_points", PyLong_FromUnsignedLongLong(r->clock_points)) ||
         put(d, "wait_ns", PyFloat_FromDouble(r->wait_ns)) ||
         put(d, "last_arrivals", PyLong_FromUnsignedLongLong(r->last_arrivals)) ||
         put(d, "lateness_ns", PyFloat_FromDouble(r->lateness_ns)) ||
         put(d, "costed", PyBool_FromLong(r->costed)) ||
         put(d, "w_ns", r->costed ? PyFloat_FromDouble(r->w_ns) : new_ref(Py_None)) ||
         put(d, "w_py_ns", r->costed ? PyFloat_FromDouble(r->w_py_ns) : new_ref(Py_None)) ||
         put(d, "events", PyLong_FromUnsignedLongLong(r->events)) ||
         put(d, "py_events", PyLong_FromUnsignedLongLong(r->py_events)) ||
         put(d, "own_ns", PyFloat_FromDouble(r->own_ns)) ||
         put(d, "own_before_sync_ns", PyFloat_FromDouble(r->own_before_sync_ns)) ||
         put(d, "absorbed_ns", PyFloat_FromDouble(r->absorbed_ns)) ||
         put(d, "corrected_wait_ns", PyFloat_FromDouble(r->corrected_wait_ns));
}

static int collective_row(PyObject *d, const void *src, size_t k) {
  const osk_job_t *j = src;
  size_t nr = osk_job_rank_count(j);
  const osk_job_collective_t *c = osk_job_collective(j, k);
  return put(d, "segment", PyLong_FromSize_t(c->segment)) ||
         put(d, "step", PyLong_FromLongLong(c->step)) ||
         put(d, "ordinal", PyLong_FromUnsignedLong(c->ordinal)) || put(d, "name", str_obj(c->name)) ||
         put(d, "p2p", PyBool_FromLong(c->p2p)) ||
         put(d, "sender", c->p2p ? PyLong_FromSize_t(c->sender) : new_ref(Py_None)) ||
         put(d, "last", PyLong_FromSize_t(c->last)) ||
         put(d, "lateness_ns", PyFloat_FromDouble(c->lateness_ns)) ||
         put(d, "enter_ns", ilist(c->enter_ns, nr)) || put(d, "exit_ns", ilist(c->exit_ns, nr)) ||
         put(d, "wait_ns", dlist(c->wait_ns, nr)) || put(d, "own_ns", dlist(c->own_ns, nr)) ||
         put(d, "shift_ns", dlist(c->shift_ns, nr)) ||
         put(d, "corrected_wait_ns", dlist(c->corrected_wait_ns, nr));
}

static int step_row(PyObject *d, const void *src, size_t k) {
  const osk_job_t *j = src;
  size_t nr = osk_job_rank_count(j);
  const osk_job_step_t *s = osk_job_step(j, k);
  return put(d, "segment", PyLong_FromSize_t(s->segment)) ||
         put(d, "step", PyLong_FromLongLong(s->step)) || put(d, "dur_ns", ilist(s->dur_ns, nr)) ||
         put(d, "corrected_ns", osk_job_stats(j)->corrected ? dlist(s->corrected_ns, nr) : new_ref(Py_None));
}

/* The merged table's stats: every rank's reads, and the job's span. */
static PyObject *merged_stats(const osk_job_t *j) {
  const osk_job_stats_t *st = osk_job_stats(j);
  osk_reader_stats_t all = {0};
  for (size_t i = 0; i < osk_job_rank_count(j); i++) {
    osk_reader_stats_t rs = rank_rstats(j, i);
    rstats_add(&all, &rs);
  }
  PyObject *d = stats_dict(osk_summary_stats(osk_job_merged(j)), &all);
  if (d && (put(d, "first_ts_ns", PyLong_FromLongLong(st->first_ts_ns)) ||
            put(d, "last_end_ns", PyLong_FromLongLong(st->last_end_ns))))
    Py_CLEAR(d);
  return d;
}

static PyObject *job_result(const osk_job_t *j) {
  const osk_job_stats_t *st = osk_job_stats(j);
  PyObject *res = PyDict_New(), *merged = PyDict_New();
  if (!res || !merged || put(res, "ranks", rows_list(j, osk_job_rank_count(j), rank_row)) ||
      put(res, "collectives", rows_list(j, osk_job_collective_count(j), collective_row)) ||
      put(res, "steps", rows_list(j, osk_job_step_count(j), step_row)) ||
      put(merged, "ops", ops_list(osk_job_merged(j))) || put(merged, "stats", merged_stats(j)) ||
      PyDict_SetItemString(res, "merged", merged) ||
      put(res, "family", PyUnicode_FromString(st->family_name)) ||
      put(res, "matched", PyLong_FromUnsignedLongLong(st->matched)) ||
      put(res, "unmatched", PyLong_FromUnsignedLongLong(st->unmatched)) ||
      put(res, "aligned", PyBool_FromLong(st->aligned)) ||
      put(res, "corrected", PyBool_FromLong(st->corrected)))
    Py_CLEAR(res);
  Py_XDECREF(merged);
  return res;
}

static PyObject *reader_job(PyObject *self, PyObject *args, PyObject *kw) {
  (void)self;
  static char *kwlist[] = {"sources", "costs", "align", "categories", "exclude_categories", NULL};
  PyObject *src_obj, *costs_obj = Py_None, *cats_obj = Py_None, *ex_obj = Py_None, *fast = NULL;
  int align = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O|OpOO:job", kwlist, &src_obj, &costs_obj, &align,
                                   &cats_obj, &ex_obj))
    return NULL;
  str_list_t cats = {0}, ex = {0};
  osk_job_t *j = NULL;
  PyObject *result = NULL, *paths = PyList_New(0);
  if (!paths || str_list(&cats, cats_obj, "categories must be a sequence of str") ||
      str_list(&ex, ex_obj, "exclude_categories must be a sequence of str"))
    goto done;
  osk_summary_opts_t sopts = {cats.items, cats.n, ex.items, ex.n};
  osk_job_opts_t opts = {0};
  opts.summary = &sopts;
  opts.align = align;
  int rc = osk_job_new(&j, &opts);
  if (rc) {
    PyErr_NoMemory();
    goto done;
  }
  if (!(fast = PySequence_Fast(src_obj, "sources must be a sequence of (rank, path)"))) goto done;
  for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(fast); i++) {
    int rank;
    PyObject *path_obj;
    if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(fast, i), "iO&:job source", &rank,
                          PyUnicode_FSConverter, &path_obj))
      goto done;
    int arc = PyList_Append(paths, path_obj);
    Py_DECREF(path_obj);
    if (arc) goto done;
    rc = osk_job_add_path(j, rank, PyBytes_AS_STRING(path_obj));
    if (rc) {
      PyErr_SetString(PyExc_ValueError, "job: a rank must be >= 0");
      goto done;
    }
  }
  if (costs_obj != Py_None) {
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    if (!PyDict_Check(costs_obj)) {
      PyErr_SetString(PyExc_TypeError, "costs must be a dict rank -> (w_ns, w_py_ns)");
      goto done;
    }
    while (PyDict_Next(costs_obj, &pos, &key, &value)) {
      double w, wpy;
      long rank = PyLong_AsLong(key);
      if ((rank == -1 && PyErr_Occurred()) || !PyArg_ParseTuple(value, "dd:job cost", &w, &wpy))
        goto done;
      if (rank < 0 || rank > INT_MAX) {
        PyErr_Format(PyExc_ValueError, "job: rank %ld out of range", rank);
        goto done;
      }
      if (osk_job_set_cost(j, (int)rank, w, wpy)) {
        PyErr_Format(PyExc_ValueError, "job: bad cost for rank %ld (no such rank, or W < 0)", rank);
        goto done;
      }
    }
  }
  osk_error_t err = {0, "", 0, 0};
  Py_BEGIN_ALLOW_THREADS rc = osk_job_run(j, &err);
  Py_END_ALLOW_THREADS
  size_t fr = 0, fs = 0;
  if (osk_job_failed(j, &fr, &fs) == 0) {
    result = PyDict_New();
    if (result && (put_outcome(result, rc, &err) || put(result, "failed_rank", PyLong_FromLong(osk_job_rank(j, fr)->rank)) ||
                   put(result, "failed_source", PyLong_FromSize_t(fs))))
      Py_CLEAR(result);
    goto done;
  }
  if (rc && rc != OSK_ETRUNCATED && rc != OSK_EFORMAT) {
    result = PyDict_New();
    if (result && put_outcome(result, rc, &err)) Py_CLEAR(result);
    goto done;
  }
  result = job_result(j);
  if (result && put_outcome(result, rc, &err)) Py_CLEAR(result);
done:
  osk_job_free(j);
  str_list_free(&cats);
  str_list_free(&ex);
  Py_XDECREF(fast);
  Py_XDECREF(paths);
  return result;
}

PyDoc_STRVAR(reader_spool_doc,
             "spool(path) -> (fd, code, message, sys_errno)\n\n"
             "A descriptor of path ('-': standard input) readable from the start more\n"
             "than once (osk_reader_spool): the file itself, or a pipe's whole copy in\n"
             "an unlinked temporary file. fd is -1 on failure, with the C code, message\n"
             "and errno for opskew.errors.from_c_error. The caller closes fd.");
PyDoc_STRVAR(reader_summarize_doc,
             "summarize(path, categories=None, exclude_categories=None, chunk_bytes=0,\n"
             "          progress=None) -> dict\n\n"
             "Reads a Chrome trace (.json or gzip) in C and returns per-name aggregates\n"
             "of its complete events ('ops'), 'threads', 'processes', the document's\n"
             "top-level 'metadata' and 'objects' (as in scan(): opskew's 'opskew'\n"
             "header with its 'lost' counts), 'stats', 'status'\n"
             "'marks' (the torch.profiler option marks, as in scan()), 'status' ('ok',\n"
             "'truncated', 'invalid' or 'error': nothing could be read) and 'error'\n"
             "(None, or {'code', 'number', 'message', 'offset', 'sys_errno'}: offset\n"
             "is a byte offset in the JSON text; opskew.errors.from_c_error makes it\n"
             "an exception). Times are integer ns (float for mean and quantiles). With\n"
             "categories, only events whose 'cat' is listed are analyzed; events whose\n"
             "'cat' is in exclude_categories are not. progress: a bytearray(24) the read\n"
             "stores into as it goes (done, total, pass: osk_progress_t).");
PyDoc_STRVAR(reader_job_doc,
             "job(sources, costs=None, align=False, categories=None, exclude_categories=None) -> dict\n\n"
             "A multi-rank job's traces together (include/opskew_job.h): sources is a\n"
             "sequence of (rank, path), each rank's in order (its segments); costs a\n"
             "dict rank -> (W ns, W_py ns) for the cross-rank correction; align applies\n"
             "the estimated clock offsets. Returns 'ranks' (per rank: its table 'ops',\n"
             "clock fit, waits, costs; 'sources' with each file's threads, metadata\n"
             "and objects), 'merged' (the table over ranks), 'collectives', 'steps',\n"
             "'family', 'matched', 'unmatched', 'aligned', 'corrected', 'status' and\n"
             "'error' as summarize() has them; when a file could not be read, only\n"
             "'status', 'error' and 'failed_rank'/'failed_source'. Times in ns.");
PyDoc_STRVAR(reader_audit_doc,
             "audit(path, max_records=100, chunk_bytes=0) -> dict\n\n"
             "The clean-window audit of a CUDA trace (osk_audit_*, docs/reader.md\n"
             "'The CUDA audit'), one read in C: 'stats' (launches, device events and\n"
             "what failed to match: missing, orphans, bad_time, external_id_mismatch;\n"
             "CUPTI's overhead records: overhead_events, overhead_ns and where they\n"
             "landed; 'truncated'; the reader's counters), 'overhead_by_name' (name,\n"
             "count, total_ns), 'overhead' (the first max_records records in time\n"
             "order: name, ts_ns, dur_ns, op and launch, None when none, and the\n"
             "launch's correlation), 'missing', 'orphans' and 'bad_time' (the first\n"
             "max_records each: name, correlation, ts_ns, dur_ns, launch_ts_ns),\n"
             "'steps' (every ProfilerStep#N: step, ts_ns, dur_ns), 'status' and\n"
             "'error' as summarize() has them. max_records=0 keeps no records (the\n"
             "counts are whole). Times in ns.");
PyDoc_STRVAR(reader_scan_doc,
             "scan(path, chunk_bytes=0, *, header_only=False) -> dict\n\n"
             "Reads a Chrome trace in C without analyzing it and returns what it says\n"
             "about itself: 'metadata' (top-level scalars), 'objects' (top-level objects and arrays\n"
             "such as opskew's 'opskew' header, decoded; see osk_reader_object_get for\n"
             "the bound), 'marks' (events per torch.profiler option sign:\n"
             "record_shapes, with_stack, profile_memory, with_modules, with_flops;\n"
             "and backward: autograd::engine::evaluate_function nodes),\n"
             "the reader's 'stats', 'status' and 'error' as summarize() has them.\n"
             "With header_only=True the read stops where 'traceEvents' begins: only\n"
             "the members before it (opskew's writers put 'opskew' there) are seen,\n"
             "no events (marks and stats['events'] are 0), and\n"
             "stats['header_only_stopped'] says whether it stopped there.\n"
             "Objects nesting deeper than 64 levels are not kept (counted in\n"
             "stats['objects_not_kept'], with the too large ones).");

static PyMethodDef reader_methods[] = {
    {"spool", reader_spool, METH_VARARGS, reader_spool_doc},
    {"summarize", OSK_PY_KWARGS(reader_summarize), reader_summarize_doc},
    {"job", OSK_PY_KWARGS(reader_job), reader_job_doc},
    {"scan", OSK_PY_KWARGS(reader_scan), reader_scan_doc},
    {"audit", OSK_PY_KWARGS(reader_audit), reader_audit_doc},
    {NULL, NULL, 0, NULL}};

static int reader_exec(PyObject *m) {
  if (PyModule_AddStringConstant(m, "version", osk_version()) < 0) return -1;
  return 0;
}

static PyModuleDef_Slot reader_slots[] = {{Py_mod_exec, (void *)reader_exec}, {0, NULL}};

OSK_PY_MODULE(reader, "opskew's trace reader (private; use `opskew summary` or opskew.tracefile).",
              reader_slots)
