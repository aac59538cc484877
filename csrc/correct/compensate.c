/* compensate.c: overhead compensation of a trace (see opskew_correct.h).
 *
 * Names, threads, metadata, the nesting rule, the correction formula and the
 * Chrome output are csrc/tracecore's, shared with the streaming summary and
 * the tracer. What is the compensation's own: holding and sorting the
 * events, and the compressed time line of the corrected trace, which the
 * nesting rule drives through its close callback.
 */
#include "opskew_correct.h"
#include "analysis.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ the state */

typedef struct {
  int64_t ts, dur;
  uint32_t name, thread;
  uint32_t seq; /* file order, for a stable sort */
  uint32_t cat; /* index into the correction's categories; >= n_op_cats: Python class */
} osk__ev_t;

struct osk_correct {
  osk_correct_opts_t opts;
  osk__cost_t cost;
  char **cats;    /* the operator class's categories, then the Python class's */
  size_t n_cats;
  size_t n_op_cats;
  osk__names_t names;    /* op id = name id */
  osk_correct_op_t *ops; /* by name id */
  size_t n_ops, cap_ops;
  osk__threads_t th;
  osk__ev_t *ev;
  size_t n_ev, cap_ev;
  osk_correct_stats_t stats;
};

static int64_t intern_name(osk_correct_t *c, osk_str_t s) {
  int64_t id = osk__names_intern(&c->names, s.ptr, s.len);
  if (id < 0 || (size_t)id < c->n_ops) return id;
  if (osk__grow((void **)&c->ops, &c->cap_ops, (size_t)id + 1, sizeof *c->ops)) return OSK_ENOMEM;
  for (size_t i = c->n_ops; i <= (size_t)id; i++) {
    memset(&c->ops[i], 0, sizeof c->ops[i]);
    c->ops[i].name = c->names.str[i];
  }
  c->n_ops = (size_t)id + 1;
  return id;
}

/* The category's index, or -1 when its events are not corrected. */
static long category_index(const osk_correct_t *c, osk_str_t cat) {
  for (size_t i = 0; i < c->n_cats; i++)
    if (osk__str_is(cat, c->cats[i], strlen(c->cats[i]))) return (long)i;
  return -1;
}

static uint32_t class_of(const osk_correct_t *c, uint32_t cat) {
  return cat >= c->n_op_cats ? OSK__CLS_PY : OSK__CLS_OP;
}

static int on_event(void *ctx, const osk_reader_event_t *ev) {
  osk_correct_t *c = ctx;
  c->stats.events++;
  if (osk__str_is(ev->ph, "M", 1)) return osk__threads_metadata(&c->th, ev, NULL);
  if (!osk__str_is(ev->ph, "X", 1)) return 0;
  if (!osk__event_usable(ev, OSK__EV_COMPLETE)) return 0;
  long cat = category_index(c, ev->cat);
  if (cat < 0) {
    c->stats.other_events++;
    return 0;
  }
  if (c->n_ev >= UINT32_MAX) return OSK_ERANGE;
  if (osk__grow((void **)&c->ev, &c->cap_ev, c->n_ev + 1, sizeof *c->ev)) return OSK_ENOMEM;
  int64_t name = intern_name(c, ev->name);
  if (name < 0) return (int)name;
  int64_t thread = osk__threads_intern(&c->th, &ev->pid, &ev->tid);
  if (thread < 0) return (int)thread;
  osk__ev_t *e = &c->ev[c->n_ev];
  e->name = (uint32_t)name;
  e->thread = (uint32_t)thread;
  e->ts = ev->ts_ns;
  e->dur = ev->dur_ns;
  e->seq = (uint32_t)c->n_ev;
  e->cat = (uint32_t)cat;
  if (class_of(c, e->cat) == OSK__CLS_PY) {
    c->stats.py_events++;
    c->ops[e->name].py_class = 1;
  }
  c->n_ev++;
  return 0;
}

/* Thread, then the nesting rule's order. */
static int cmp_ev(const void *pa, const void *pb) {
  const osk__ev_t *a = pa, *b = pb;
  if (a->thread != b->thread) return a->thread < b->thread ? -1 : 1;
  return osk__nest_order(a->ts, a->dur, a->seq, b->ts, b->dur, b->seq);
}

/* ------------------------------------------------------------ the output */

static void put_id(osk__out_t *o, const osk_reader_id_t *id) {
  if (id->kind == OSK_READER_ID_INT) osk__out_i64(o, id->num);
  else if (id->kind == OSK_READER_ID_STR) osk__out_str(o, id->str.ptr, id->str.len);
  else osk__out_puts(o, "0");
}

static void put_cstr(osk__out_t *o, const char *s) { osk__out_str(o, s, strlen(s)); }

/* ------------------------------------------------------- the compensation */

/* One thread's pass: the nesting rule closes events through on_close, which
 * corrects them and places them on the compressed time line. */
typedef struct {
  osk_correct_t *c;
  osk__out_t *o; /* NULL: no corrected trace */
  int first;     /* no event written yet */
  const osk__thread_id_t *thread;
  double removed; /* instrument time taken out before the current point */
  int64_t last2;  /* the latest boundary placed, to keep time monotonic */
} run_t;

/* The instrument's cost of one event of the class: outside its interval on
 * each side (`half`) and inside it (`delta`). */
static void event_cost(const osk_correct_t *c, uint32_t cls, double *half, double *delta) {
  double w = cls == OSK__CLS_PY ? c->cost.w_py_ns : c->cost.w_ns;
  *delta = cls == OSK__CLS_PY ? c->cost.delta_py_ns : c->cost.delta_ns;
  *half = (w - *delta) / 2.0;
}

/* t moved back by `removed` ns on the compressed time line. Saturates
 * within +-2^62, so that a huge W (any finite one is accepted) neither
 * overflows here nor in the difference of two such times. */
static int64_t moved_back(int64_t t, double removed) {
  const int64_t lim = INT64_C(1) << 62;
  double v = (double)t - removed;
  if (!(v < (double)lim)) return lim;
  if (!(v > -(double)lim)) return -lim;
  /* An absurd removal: the double result, rounded. */
  if (!(removed < (double)lim && removed > -(double)lim)) return (int64_t)v;
  /* Otherwise exact in integers (ns timestamps exceed double's 53 bits);
   * t - k is within a rounding of v, so it cannot overflow. */
  int64_t m = t - llround(removed);
  return m < -lim ? -lim : m > lim ? lim : m;
}

static void write_event(run_t *r, const osk__nest_frame_t *x, int64_t ts2, int64_t dur2) {
  osk__out_t *o = r->o;
  osk__out_puts(o, r->first ? "{\"ph\":\"X\",\"cat\":" : ",\n{\"ph\":\"X\",\"cat\":");
  r->first = 0;
  put_cstr(o, r->c->cats[x->user[1]]);
  osk__out_puts(o, ",\"name\":");
  osk__out_str(o, r->c->names.str[x->name].ptr, r->c->names.str[x->name].len);
  osk__out_puts(o, ",\"pid\":");
  put_id(o, &r->thread->pid);
  osk__out_puts(o, ",\"tid\":");
  put_id(o, &r->thread->tid);
  osk__out_puts(o, ",\"ts\":");
  osk__out_us(o, ts2);
  osk__out_puts(o, ",\"dur\":");
  osk__out_us(o, dur2);
  osk__out_puts(o, ",\"args\":{\"reported_ts\":");
  osk__out_us(o, x->start);
  osk__out_puts(o, ",\"reported_dur\":");
  osk__out_us(o, x->dur);
  osk__out_puts(o, ",\"descendants\":");
  osk__out_u64(o, x->desc[OSK__CLS_OP]);
  osk__out_puts(o, ",\"py_descendants\":");
  osk__out_u64(o, x->desc[OSK__CLS_PY]);
  osk__out_puts(o, "}}");
}

/* The nesting rule closed x: correct it (osk__correct_event), account it, and
 * place its end on the compressed time line. */
static int on_close(void *ctx, osk__nest_frame_t *x, const osk__nest_frame_t *parent, int64_t cut) {
  run_t *r = ctx;
  osk_correct_t *c = r->c;
  (void)cut; /* the core counts x for its parent only up to the cut */
  double half, delta;
  event_cost(c, x->cls, &half, &delta);
  int64_t begin2 = x->user[0];
  /* The compressed end: every instrument nanosecond before it is removed. */
  int64_t end2 = moved_back(x->start + x->dur, r->removed);
  if (end2 < r->last2) end2 = r->last2; /* over-compensation: keep time monotonic */
  if (end2 < begin2) end2 = begin2;
  r->last2 = end2;
  r->removed += half;
  osk__corrected_t k = osk__correct_event(&c->cost, x->cls, x->dur, x->desc[OSK__CLS_OP],
                                          x->desc[OSK__CLS_PY], x->child_corr_ns);
  x->corr_ns = k.raw_ns;
  osk_correct_op_t *op = &c->ops[x->name];
  op->calls++;
  op->reported_total_ns += x->dur;
  op->reported_self_ns += x->dur - x->child_ns;
  op->corrected_total_ns += k.total_ns;
  op->corrected_self_ns += k.self_ns;
  op->descendants += x->desc[OSK__CLS_OP];
  op->py_descendants += x->desc[OSK__CLS_PY];
  if (k.residual_ns > 0) {
    op->clamped++;
    op->residual_ns += k.residual_ns;
    c->stats.clamped++;
    c->stats.residual_ns += k.residual_ns;
  }
  if (!parent) {
    c->stats.reported_top_ns += x->dur;
    c->stats.corrected_top_ns += k.total_ns;
  }
  if (r->o) write_event(r, x, begin2, end2 - begin2);
  return 0;
}

static int compensate(osk_correct_t *c, osk__out_t *o, int first) {
  qsort(c->ev, c->n_ev, sizeof *c->ev, cmp_ev);
  osk__nest_t nest = {0};
  run_t r = {c, o, first, NULL, 0, INT64_MIN};
  uint32_t thread = UINT32_MAX;
  int rc = 0;
  for (size_t i = 0; i < c->n_ev && !rc; i++) {
    const osk__ev_t *e = &c->ev[i];
    uint32_t cls = class_of(c, e->cat);
    double half, delta;
    if (e->thread != thread) {
      rc = osk__nest_close_all(&nest, on_close, &r);
      if (rc) break;
      thread = e->thread;
      r.thread = &c->th.th[thread];
      /* Start the compressed time line at the thread's first event: its
       * pre-begin share is not taken from before the trace's start. */
      event_cost(c, cls, &half, &delta);
      r.removed = -half;
      r.last2 = INT64_MIN;
    }
    osk__nest_frame_t *f;
    rc = osk__nest_push(&nest, e->ts, e->dur, e->name, cls, on_close, &r, &f);
    if (rc) break;
    /* The new begin: (W - delta)/2 before it and delta after it. */
    event_cost(c, cls, &half, &delta);
    r.removed += half;
    int64_t begin2 = moved_back(e->ts, r.removed);
    if (begin2 < r.last2) begin2 = r.last2;
    r.last2 = begin2;
    r.removed += delta;
    f->user[0] = begin2;
    f->user[1] = e->cat;
  }
  if (!rc) rc = osk__nest_close_all(&nest, on_close, &r);
  c->stats.overlaps = nest.overlaps;
  osk__nest_free(&nest);
  return rc;
}

/* ------------------------------------------------------------ public API */

static const char *const default_cats[] = {"cpu_op", "user_annotation"};
static const char *const default_py_cats[] = {"python_function"};

static int add_categories(osk_correct_t *c, const char *const *cats, size_t n) {
  for (size_t i = 0; i < n; i++) {
    for (size_t j = 0; j < c->n_cats; j++)
      if (strcmp(c->cats[j], cats[i]) == 0) return OSK_EINVAL; /* in both classes, or twice */
    if (!(c->cats[c->n_cats] = osk__dup_bytes(cats[i], strlen(cats[i])))) return OSK_ENOMEM;
    c->n_cats++;
  }
  return 0;
}

/* The document's own top-level members, the correction's, and the metadata
 * events. Returns whether it wrote an event (so the next needs a comma). */
static int write_header(osk__out_t *o, const osk_correct_t *c, const osk_reader_t *r,
                        const char *in_path) {
  osk__out_puts(o, "{\n");
  size_t nm = osk_reader_meta_count(r);
  for (size_t i = 0; i < nm; i++) {
    osk_str_t k, v;
    int is_str;
    if (osk_reader_meta_get(r, i, &k, &v, &is_str)) continue;
    if (osk__str_is(k, "opskew", 6) || osk__str_is(k, "traceEvents", 11)) continue;
    osk__out_str(o, k.ptr, k.len);
    osk__out_put(o, ":", 1);
    if (is_str) osk__out_str(o, v.ptr, v.len);
    else osk__out_put(o, v.ptr, v.len);
    osk__out_puts(o, ",\n");
  }
  /* The one number formatter: any finite value fits, none truncates. */
  osk__out_key_num(o, "\"opskew\":{\"corrected\":{\"w_ns\":", c->opts.w_ns);
  osk__out_key_num(o, ",\"delta_ns\":", c->opts.delta_ns);
  osk__out_key_num(o, ",\"w_py_ns\":", c->opts.w_py_ns);
  osk__out_key_num(o, ",\"delta_py_ns\":", c->opts.delta_py_ns);
  osk__out_puts(o, ",\"source\":");
  put_cstr(o, in_path);
  osk__out_puts(o, ",\"model\":\"corrected = reported - delta - W * descendants - W_py * "
                   "py_descendants; time line compressed per thread\"}},\n\"traceEvents\":[\n");
  int wrote = 0;
  for (size_t i = 0; i < c->th.n_procs; i++) {
    const osk_summary_process_t *p = &c->th.procs[i];
    osk__out_puts(o, wrote ? ",\n" : "");
    wrote = 1;
    osk__out_puts(o, "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":");
    put_id(o, &p->pid);
    osk__out_puts(o, ",\"args\":{\"name\":");
    osk__out_str(o, p->name.ptr, p->name.len);
    osk__out_puts(o, "}}");
  }
  for (size_t i = 0; i < c->th.n; i++) {
    const osk__thread_id_t *t = &c->th.th[i];
    if (!t->name.ptr) continue;
    osk__out_puts(o, wrote ? ",\n" : "");
    wrote = 1;
    osk__out_puts(o, "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":");
    put_id(o, &t->pid);
    osk__out_puts(o, ",\"tid\":");
    put_id(o, &t->tid);
    osk__out_puts(o, ",\"args\":{\"name\":");
    osk__out_str(o, t->name.ptr, t->name.len);
    osk__out_puts(o, "}}");
  }
  return wrote;
}

int osk_correct_path(const char *in_path, const char *out_path, const osk_correct_opts_t *opts,
                     osk_correct_t **out, osk_error_t *err) {
  osk_error_t local;
  if (!err) err = &local;
  memset(err, 0, sizeof *err);
  err->message = "";
  if (!in_path || !opts || !out || !(opts->w_ns >= 0) || !(opts->delta_ns >= 0) ||
      !(opts->delta_ns <= opts->w_ns) || !isfinite(opts->w_ns) || !(opts->w_py_ns >= 0) ||
      !(opts->delta_py_ns >= 0) || !(opts->delta_py_ns <= opts->w_py_ns) || !isfinite(opts->w_py_ns)) {
    err->code = OSK_EINVAL;
    err->message = "invalid arguments (W >= delta >= 0 and W_py >= delta_py >= 0 required)";
    return OSK_EINVAL;
  }
  *out = NULL;
  osk_correct_t *c = calloc(1, sizeof *c);
  if (!c) return OSK_ENOMEM;
  c->opts = *opts;
  c->cost = (osk__cost_t){opts->w_ns, opts->delta_ns, opts->w_py_ns, opts->delta_py_ns};
  const char *const *cats = opts->categories ? opts->categories : default_cats;
  size_t n_cats = opts->categories ? opts->n_categories : 2;
  const char *const *py_cats = opts->py_categories ? opts->py_categories : default_py_cats;
  size_t n_py_cats = opts->py_categories ? opts->n_py_categories : 1;
  c->cats = calloc(n_cats + n_py_cats ? n_cats + n_py_cats : 1, sizeof *c->cats);
  int crc0 = c->cats ? add_categories(c, cats, n_cats) : OSK_ENOMEM;
  c->n_op_cats = c->n_cats;
  if (!crc0) crc0 = add_categories(c, py_cats, n_py_cats);
  if (crc0) {
    if (crc0 == OSK_EINVAL) {
      err->code = OSK_EINVAL;
      err->message = "a category is listed twice (or in both classes)";
    }
    osk_correct_free(c);
    return crc0;
  }
  c->opts.categories = NULL;
  c->opts.py_categories = NULL;
  osk_reader_t *r = NULL;
  int rc = osk_reader_open(&r, in_path, NULL, err);
  if (rc) {
    osk_correct_free(c);
    return rc;
  }
  rc = osk_reader_run(r, on_event, c, err);
  if (rc && rc != OSK_ETRUNCATED) {
    osk_reader_free(r);
    osk_correct_free(c);
    return rc;
  }
  int truncated = rc == OSK_ETRUNCATED;
  c->stats.truncated = truncated;
  c->stats.corrected_events = c->n_ev;
  c->stats.threads = c->th.n;
  osk__out_t o;
  int first = 1;
  if (out_path) {
    int orc = osk__out_open(&o, out_path, 0);
    if (orc) {
      if (orc == OSK_EIO) {
        err->code = OSK_EIO;
        err->sys_errno = o.sys_errno;
        err->message = "cannot open the output file";
      }
      osk_reader_free(r);
      osk_correct_free(c);
      return orc;
    }
    first = !write_header(&o, c, r, in_path);
  }
  osk_reader_free(r);
  int crc = compensate(c, out_path ? &o : NULL, first);
  if (out_path) {
    if (crc) {
      osk__out_discard(&o);
    } else {
      osk__out_puts(&o, "\n]}\n");
      if (osk__out_commit(&o)) {
        err->code = OSK_EIO;
        err->sys_errno = o.sys_errno;
        err->message = "writing the corrected trace failed";
        crc = OSK_EIO;
      }
    }
  }
  if (crc) {
    osk_correct_free(c);
    return crc;
  }
  *out = c;
  return truncated ? OSK_ETRUNCATED : 0;
}

size_t osk_correct_op_count(const osk_correct_t *c) { return c ? c->n_ops : 0; }

const osk_correct_op_t *osk_correct_op(const osk_correct_t *c, size_t i) {
  return c && i < c->n_ops ? &c->ops[i] : NULL;
}

const osk_correct_stats_t *osk_correct_stats(const osk_correct_t *c) {
  return c ? &c->stats : NULL;
}

void osk_correct_free(osk_correct_t *c) {
  if (!c) return;
  for (size_t i = 0; i < c->n_cats; i++) free(c->cats[i]);
  free(c->cats);
  free(c->ops);
  osk__names_free(&c->names);
  osk__threads_free(&c->th);
  free(c->ev);
  free(c);
}
