/* audit.c: the clean-window audit of a CUDA trace (osk_audit_t in
 * opskew_reader.h has the model: what is read, the checks, the rules that
 * place an overhead record, the memory).
 *
 * The read only collects: each event of a category the audit uses becomes
 * one small fixed-size record in that category's array (names and threads
 * interned through the trace core, csrc/tracecore/intern.c). Kineto writes
 * the CPU events first and the GPU records after them, in CUPTI's buffer
 * order, so nothing can be decided while reading; osk_audit_finish sorts
 * each array once and resolves:
 *   1. launches and device events sorted by correlation, merged: missing,
 *      orphans, duplicates, bad times, External id mismatches, gaps;
 *   2. launches in time order, with the running maximum of their ends, so
 *      the launches that overlap an interval are found by a binary search
 *      and a backward scan that stops where no earlier launch reaches;
 *   3. operators per thread in the nesting order, each given its parent by
 *      THE nesting rule (osk__nest_push), so the innermost operator that
 *      holds a time is found by a binary search and a walk up its parents;
 *   4. overhead records in time order, each placed by 2 and 3.
 * The working arrays are freed at the end of osk_audit_finish: what stays
 * is the counters, the kept rows, the steps and the names and threads they
 * point into.
 */
#include "opskew_reader.h"
#include "reader_analysis.h"
#include "reader_internal.h"

#include <stdlib.h>
#include <string.h>

#define NONE UINT32_MAX
#define MAX_ITEMS ((size_t)UINT32_MAX - 1)

/* -------------------------------------------------------------- records */

enum { K_OTHER, K_DEVICE, K_LAUNCH_API, K_OP, K_ANNOTATION, K_OVERHEAD };

typedef struct {
  int64_t ts, dur, corr, ext;
  uint32_t name, thread, seq;
  uint8_t has_ext;
  uint8_t state; /* L_* */
} launch_t;

enum { L_MISSING = 0, L_MATCHED = 1, L_DUPLICATE = 2 };

typedef struct {
  int64_t ts, dur, corr, ext;
  int64_t launch_ts; /* after matching: its launch's start */
  uint32_t name, seq;
  uint8_t has_corr, has_ext;
  uint8_t flags; /* D_* */
} device_t;

enum { D_ORPHAN = 1, D_BAD = 2, D_BEFORE = 4, D_HAS_LAUNCH = 8 };

typedef struct {
  int64_t ts, dur;
  uint32_t name, thread;
  uint32_t parent; /* after finish's nesting: index of its parent, NONE at top level */
  uint32_t seq;
} op_t;

typedef struct {
  int64_t ts, dur;
  uint32_t name, seq;
} overhead_t;

struct osk_audit {
  size_t max_rec;
  osk__names_t names;
  osk__threads_t threads;

  launch_t *launch;
  size_t n_launch, launch_cap;
  device_t *dev;
  size_t n_dev, dev_cap;
  op_t *op;
  size_t n_op, op_cap;
  overhead_t *ovh;
  size_t n_ovh, ovh_cap;
  osk_audit_step_t *steps;
  size_t n_steps, steps_cap;

  /* Results. */
  osk_audit_stats_t stats;
  osk_audit_overhead_kind_t *kinds;
  size_t n_kinds;
  osk_audit_overhead_t *ov_rows;
  size_t n_ov_rows;
  osk_audit_event_t *rows[3];
  size_t n_rows[3];
  int finished;
};

/* ------------------------------------------------------------- helpers */

static int contains(osk_str_t s, const char *p, size_t n) {
  for (size_t i = 0; i + n <= s.len; i++)
    if (s.ptr[i] == p[0] && memcmp(s.ptr + i, p, n) == 0) return 1;
  return 0;
}

/* The audit's kind of an event, by its category. */
static int kind_of(osk_str_t cat) {
  switch (cat.len) {
  case 6:
    if (osk__str_is(cat, "kernel", 6)) return K_DEVICE;
    if (osk__str_is(cat, "cpu_op", 6)) return K_OP;
    return K_OTHER;
  case 8:
    return osk__str_is(cat, "overhead", 8) ? K_OVERHEAD : K_OTHER;
  case 10:
    return osk__str_is(cat, "gpu_memcpy", 10) || osk__str_is(cat, "gpu_memset", 10) ? K_DEVICE
                                                                                    : K_OTHER;
  case 11:
    return osk__str_is(cat, "cuda_driver", 11) ? K_LAUNCH_API : K_OTHER;
  case 12:
    return osk__str_is(cat, "cuda_runtime", 12) ? K_LAUNCH_API : K_OTHER;
  case 15:
    return osk__str_is(cat, "user_annotation", 15) ? K_ANNOTATION : K_OTHER;
  default:
    return K_OTHER;
  }
}

/* A runtime or driver call that launches device work. */
static int is_launch_name(osk_str_t n) {
  return (contains(n, "Launch", 6) || contains(n, "Memcpy", 6) || contains(n, "Memset", 6)) &&
         !contains(n, "HostFunc", 8);
}

/* "ProfilerStep#N" -> N (at most 18 digits); 0 when the name is not a step. */
static int step_number(osk_str_t n, int64_t *out) {
  static const char p[] = "ProfilerStep#";
  const size_t k = sizeof p - 1;
  if (n.len <= k || n.len > k + 18 || memcmp(n.ptr, p, k) != 0) return 0;
  int64_t v = 0;
  for (size_t i = k; i < n.len; i++) {
    if (n.ptr[i] < '0' || n.ptr[i] > '9') return 0;
    v = v * 10 + (n.ptr[i] - '0');
  }
  *out = v;
  return 1;
}

/* Room for one more item in an array of `elem` bytes; 0, OSK_ENOMEM, OSK_ERANGE. */
static int room(void **p, size_t *cap, size_t n, size_t elem) {
  if (n >= MAX_ITEMS) return OSK_ERANGE;
  return osk__grow(p, cap, n + 1, elem);
}

static int64_t intern_name(osk_audit_t *a, osk_str_t n) {
  return osk__names_intern(&a->names, n.ptr ? n.ptr : "", n.len);
}

static osk_str_t name_of(const osk_audit_t *a, uint32_t id) { return a->names.str[id]; }

/* The interval [a0, a1) overlaps [b0, b1): a positive overlap; a zero-length
 * one overlaps what holds it (x0 <= p < x1), or another at the same point. */
static int overlaps(int64_t a0, int64_t a1, int64_t b0, int64_t b1) {
  if (a0 == a1 && b0 == b1) return a0 == b0;
  if (a0 == a1) return b0 <= a0 && a0 < b1;
  if (b0 == b1) return a0 <= b0 && b0 < a1;
  return (a1 < b1 ? a1 : b1) > (a0 > b0 ? a0 : b0);
}

/* --------------------------------------------------------------- adding */

/* What adding a record of ev takes first: ev must have `need`
 * (osk__event_usable), else it is counted unusable and the result is 1
 * (nothing to add); room for one more record in the array *arr (n of
 * `elem` bytes, capacity *cap); its name interned into *name and, with
 * `thread`, its thread into *thread. 0, 1, or a (negative) error code. */
static int take(osk_audit_t *a, const osk_reader_event_t *ev, unsigned need, void **arr,
                size_t *cap, size_t n, size_t elem, uint32_t *name, uint32_t *thread) {
  if (!osk__event_usable(ev, need)) {
    a->stats.unusable++;
    return 1;
  }
  int rc = room(arr, cap, n, elem);
  if (rc) return rc;
  int64_t id = intern_name(a, ev->name);
  if (id < 0) return (int)id;
  *name = (uint32_t)id;
  if (!thread) return 0;
  int64_t th = osk__threads_intern_ev(&a->threads, ev);
  if (th < 0) return (int)th;
  *thread = (uint32_t)th;
  return 0;
}

int osk_audit_new(osk_audit_t **out, const osk_audit_opts_t *opts) {
  if (!out) return OSK_EINVAL;
  *out = NULL;
  osk_audit_t *a = calloc(1, sizeof *a);
  if (!a) return OSK_ENOMEM;
  size_t m = opts ? opts->max_records : 0;
  a->max_rec = m == 0 ? OSK_AUDIT_RECORDS_DEFAULT : m == OSK_AUDIT_RECORDS_NONE ? 0 : m;
  *out = a;
  return 0;
}

static int add_device(osk_audit_t *a, const osk_reader_event_t *ev) {
  const unsigned need = OSK_READER_EV_TS | OSK_READER_EV_DUR;
  if ((ev->has & need) != need || (ev->has & OSK_READER_EV_BAD)) {
    a->stats.unusable++;
    return 0;
  }
  int rc = room((void **)&a->dev, &a->dev_cap, a->n_dev, sizeof *a->dev);
  int64_t name = rc ? rc : intern_name(a, ev->name);
  if (name < 0) return (int)name;
  device_t *d = &a->dev[a->n_dev];
  memset(d, 0, sizeof *d);
  d->ts = ev->ts_ns;
  d->dur = ev->dur_ns;
  d->has_corr = (ev->has & OSK_READER_EV_CORRELATION) != 0;
  d->corr = d->has_corr ? ev->correlation : 0;
  d->has_ext = (ev->has & OSK_READER_EV_EXTERNAL_ID) != 0;
  d->ext = d->has_ext ? ev->external_id : 0;
  d->name = (uint32_t)name;
  d->seq = (uint32_t)a->n_dev++;
  a->stats.device_events++;
  if (!d->has_corr) a->stats.device_uncorrelated++;
  return 0;
}

static int add_launch(osk_audit_t *a, const osk_reader_event_t *ev) {
  if (!(ev->has & OSK_READER_EV_NAME) || !is_launch_name(ev->name) ||
      !(ev->has & OSK_READER_EV_CORRELATION))
    return 0; /* not a launch */
  uint32_t name = 0, th = 0;
  int rc = take(a, ev, OSK__EV_COMPLETE, (void **)&a->launch, &a->launch_cap, a->n_launch,
                sizeof *a->launch, &name, &th);
  if (rc) return rc < 0 ? rc : 0;
  launch_t *l = &a->launch[a->n_launch];
  memset(l, 0, sizeof *l);
  l->ts = ev->ts_ns;
  l->dur = ev->dur_ns;
  l->corr = ev->correlation;
  l->has_ext = (ev->has & OSK_READER_EV_EXTERNAL_ID) != 0;
  l->ext = l->has_ext ? ev->external_id : 0;
  l->name = name;
  l->thread = th;
  l->seq = (uint32_t)a->n_launch++;
  a->stats.launches++;
  return 0;
}

static int add_op(osk_audit_t *a, const osk_reader_event_t *ev, int annotation) {
  uint32_t name = 0, th = 0;
  int rc = take(a, ev, OSK__EV_COMPLETE, (void **)&a->op, &a->op_cap, a->n_op, sizeof *a->op,
                &name, &th);
  if (rc) return rc < 0 ? rc : 0;
  int64_t n;
  if (annotation && step_number(ev->name, &n)) {
    rc = osk__grow((void **)&a->steps, &a->steps_cap, a->n_steps + 1, sizeof *a->steps);
    if (rc) return rc;
    a->steps[a->n_steps++] = (osk_audit_step_t){n, ev->ts_ns, ev->dur_ns};
    a->stats.steps++;
  }
  a->op[a->n_op] = (op_t){ev->ts_ns, ev->dur_ns, name, th, NONE, (uint32_t)a->n_op};
  a->n_op++;
  a->stats.operators++;
  return 0;
}

static int add_overhead(osk_audit_t *a, const osk_reader_event_t *ev) {
  uint32_t name = 0;
  int rc = take(a, ev, OSK_READER_EV_TS | OSK_READER_EV_DUR, (void **)&a->ovh, &a->ovh_cap,
                a->n_ovh, sizeof *a->ovh, &name, NULL);
  if (rc) return rc < 0 ? rc : 0;
  a->ovh[a->n_ovh] = (overhead_t){ev->ts_ns, ev->dur_ns, name, (uint32_t)a->n_ovh};
  a->n_ovh++;
  a->stats.overhead_events++;
  a->stats.overhead_ns = osk__sat_add(a->stats.overhead_ns, ev->dur_ns);
  return 0;
}

int osk_audit_add(void *audit, const osk_reader_event_t *ev) {
  osk_audit_t *a = audit;
  if (!a || !ev || a->finished) return OSK_EINVAL;
  a->stats.events++;
  if (!osk__str_is(ev->ph, "X", 1)) return 0;
  switch (kind_of(ev->cat)) {
  case K_DEVICE:
    return add_device(a, ev);
  case K_LAUNCH_API:
    return add_launch(a, ev);
  case K_OP:
    return add_op(a, ev, 0);
  case K_ANNOTATION:
    return add_op(a, ev, 1);
  case K_OVERHEAD:
    return add_overhead(a, ev);
  default:
    return 0;
  }
}

/* ------------------------------------------------------------- ordering */

#define CMP(x, y)                      \
  do {                                 \
    if ((x) != (y)) return (x) < (y) ? -1 : 1; \
  } while (0)

/* Time order, ties by arrival: how records of one kind sort by time, and
 * within a correlation. */
static int by_time(int64_t a_ts, uint32_t a_seq, int64_t b_ts, uint32_t b_seq) {
  CMP(a_ts, b_ts);
  CMP(a_seq, b_seq);
  return 0;
}

/* qsort's comparison `name` of records of type T (ts, seq) by time. */
#define BY_TIME(name, T)                            \
  static int name(const void *pa, const void *pb) { \
    const T *a = pa, *b = pb;                       \
    return by_time(a->ts, a->seq, b->ts, b->seq);   \
  }

BY_TIME(launch_by_time, launch_t)
BY_TIME(dev_by_time, device_t)
BY_TIME(ovh_by_time, overhead_t)

static int launch_by_corr(const void *pa, const void *pb) {
  const launch_t *a = pa, *b = pb;
  CMP(a->corr, b->corr);
  return by_time(a->ts, a->seq, b->ts, b->seq);
}

/* Uncorrelated device events first: they match nothing. */
static int dev_by_corr(const void *pa, const void *pb) {
  const device_t *a = pa, *b = pb;
  CMP(a->has_corr, b->has_corr);
  CMP(a->corr, b->corr);
  return by_time(a->ts, a->seq, b->ts, b->seq);
}

/* Per thread, the nesting order (osk__nest_order: start, longer first, arrival). */
static int op_by_thread(const void *pa, const void *pb) {
  const op_t *a = pa, *b = pb;
  CMP(a->thread, b->thread);
  return osk__nest_order(a->ts, a->dur, a->seq, b->ts, b->dur, b->seq);
}

static int step_by_time(const void *pa, const void *pb) {
  const osk_audit_step_t *a = pa, *b = pb;
  CMP(a->ts_ns, b->ts_ns);
  CMP(a->step, b->step);
  CMP(a->dur_ns, b->dur_ns);
  return 0;
}

static int kind_by_total(const void *pa, const void *pb) {
  const osk_audit_overhead_kind_t *a = pa, *b = pb;
  CMP(b->total_ns, a->total_ns);
  CMP(b->count, a->count);
  size_t n = a->name.len < b->name.len ? a->name.len : b->name.len;
  int c = n ? memcmp(a->name.ptr, b->name.ptr, n) : 0;
  if (c) return c;
  CMP(a->name.len, b->name.len);
  return 0;
}

/* -------------------------------------------------------------- matching */

/* 1: launches against device events, both sorted by correlation. Fills the
 * launches' state and the device events' flags, and the gaps (sorted). */
static int match(osk_audit_t *a) {
  osk_audit_stats_t *st = &a->stats;
  if (a->n_launch) qsort(a->launch, a->n_launch, sizeof *a->launch, launch_by_corr);
  if (a->n_dev) qsort(a->dev, a->n_dev, sizeof *a->dev, dev_by_corr);
  int64_t *gaps = malloc((a->n_launch ? a->n_launch : 1) * sizeof *gaps);
  if (!gaps) return OSK_ENOMEM;
  size_t n_gaps = 0;
  size_t i = 0, j = 0;
  while (j < a->n_dev && !a->dev[j].has_corr) j++; /* matched to nothing */
  while (i < a->n_launch || j < a->n_dev) {
    /* The next correlation: the smaller of the two heads. */
    int64_t c = i < a->n_launch && (j >= a->n_dev || a->launch[i].corr <= a->dev[j].corr)
                    ? a->launch[i].corr
                    : a->dev[j].corr;
    launch_t *l = i < a->n_launch && a->launch[i].corr == c ? &a->launch[i] : NULL;
    if (l) /* the earliest launch of c is matched; later ones are duplicates */
      for (i++; i < a->n_launch && a->launch[i].corr == c; i++) {
        a->launch[i].state = L_DUPLICATE;
        st->duplicate_launches++;
      }
    size_t first = j;
    for (; j < a->n_dev && a->dev[j].corr == c; j++) {
      device_t *d = &a->dev[j];
      if (!l) {
        d->flags |= D_ORPHAN;
        st->orphans++;
        continue;
      }
      d->flags |= D_HAS_LAUNCH;
      d->launch_ts = l->ts;
      if (d->ts < l->ts) {
        d->flags |= D_BEFORE;
        st->before_launch++;
      }
      if (d->has_ext != l->has_ext || d->ext != l->ext) st->external_id_mismatch++;
    }
    if (l && j > first) {
      l->state = L_MATCHED;
      st->matched_launches++;
      gaps[n_gaps++] = a->dev[first].ts - l->ts; /* the group is in time order */
    } else if (l) {
      st->missing++;
    }
  }
  for (size_t k = 0; k < a->n_dev; k++) {
    device_t *d = &a->dev[k];
    if (d->dur <= 0 || (d->flags & D_BEFORE)) {
      d->flags |= D_BAD;
      st->bad_time++;
    }
  }
  if (n_gaps) {
    qsort(gaps, n_gaps, sizeof *gaps, osk__cmp_i64);
    st->gap_min_ns = gaps[0];
    st->gap_p50_ns = gaps[(n_gaps - 1) / 2];
    st->gap_max_ns = gaps[n_gaps - 1];
  }
  free(gaps);
  return 0;
}

/* Keeps row k of a list if it is among the first max_rec. */
static osk_audit_event_t *list_slot(osk_audit_t *a, int list) {
  if (a->n_rows[list] >= a->max_rec) return NULL;
  return &a->rows[list][a->n_rows[list]++];
}

/* The lists, in time order; missing_head. */
static void fill_lists(osk_audit_t *a) {
  int before_first = 1;
  for (size_t i = 0; i < a->n_launch; i++) {
    const launch_t *l = &a->launch[i];
    if (l->state == L_MATCHED) before_first = 0;
    if (l->state != L_MISSING) continue;
    if (before_first) a->stats.missing_head++;
    osk_audit_event_t *r = list_slot(a, OSK_AUDIT_MISSING);
    if (r) *r = (osk_audit_event_t){name_of(a, l->name), l->corr, 1, l->ts, l->dur, 0, 0};
  }
  for (size_t i = 0; i < a->n_dev; i++) {
    const device_t *d = &a->dev[i];
    osk_audit_event_t e = {name_of(a, d->name), d->corr, d->has_corr,           d->ts,
                           d->dur,              (d->flags & D_HAS_LAUNCH) != 0, d->launch_ts};
    osk_audit_event_t *r;
    if ((d->flags & D_ORPHAN) && (r = list_slot(a, OSK_AUDIT_ORPHANS))) *r = e;
    if ((d->flags & D_BAD) && (r = list_slot(a, OSK_AUDIT_BAD_TIME))) *r = e;
  }
}

/* -------------------------------------------------------------- placing */

typedef struct {
  int64_t *launch_reach; /* running maximum of the launches' ends, in time order */
  size_t *th_lo, *th_hi; /* each thread's operators: op[th_lo[t] .. th_hi[t]) */
} place_t;

/* 3: each operator's parent, per thread, by the nesting rule. */
static int nest_ops(osk_audit_t *a, place_t *p) {
  if (a->n_op) qsort(a->op, a->n_op, sizeof *a->op, op_by_thread);
  size_t nt = a->threads.n ? a->threads.n : 1;
  p->th_lo = calloc(nt, sizeof *p->th_lo);
  p->th_hi = calloc(nt, sizeof *p->th_hi);
  if (!p->th_lo || !p->th_hi) return OSK_ENOMEM;
  osk__nest_t nest = {0};
  int rc = 0;
  for (size_t i = 0; i < a->n_op && !rc; i++) {
    op_t *o = &a->op[i];
    if (i == 0 || o->thread != a->op[i - 1].thread) {
      nest.depth = 0; /* a new thread: nothing open (no close callback to run) */
      p->th_lo[o->thread] = i;
    }
    p->th_hi[o->thread] = i + 1;
    osk__nest_frame_t *f;
    rc = osk__nest_push(&nest, o->ts, o->dur, o->name, 0, 0, NULL, NULL, &f);
    if (rc) break;
    f->user[0] = (int64_t)i;
    o->parent = f > nest.stack ? (uint32_t)f[-1].user[0] : NONE;
  }
  osk__nest_free(&nest);
  return rc;
}

/* The innermost operator of thread th that holds t (ts <= t < ts + dur), or
 * NONE: the last one to start at or before t, then up its parents. */
static uint32_t op_at(const osk_audit_t *a, const place_t *p, uint32_t th, int64_t t) {
  if (th >= a->threads.n) return NONE;
  size_t lo = p->th_lo[th], hi = p->th_hi[th];
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (a->op[mid].ts <= t) lo = mid + 1;
    else hi = mid;
  }
  if (lo == p->th_lo[th]) return NONE;
  uint32_t j = (uint32_t)(lo - 1);
  while (j != NONE && a->op[j].ts + a->op[j].dur <= t) j = a->op[j].parent;
  return j;
}

/* The launch that overlaps [s, e) most (ties: the earlier start, then file
 * order), or NONE. Launches are in time order; launch_reach[i] is the
 * latest end among launches 0..i, so the scan back stops where none reaches s. */
static uint32_t launch_over(const osk_audit_t *a, const place_t *p, int64_t s, int64_t e) {
  size_t lo = 0, hi = a->n_launch;
  while (lo < hi) { /* launches that start at or before e */
    size_t mid = lo + (hi - lo) / 2;
    if (a->launch[mid].ts <= e) lo = mid + 1;
    else hi = mid;
  }
  uint32_t best = NONE;
  int64_t best_ov = -1;
  for (size_t i = lo; i-- > 0 && p->launch_reach[i] >= s;) {
    const launch_t *l = &a->launch[i];
    int64_t le = l->ts + l->dur;
    if (!overlaps(s, e, l->ts, le)) continue;
    int64_t ov = (le < e ? le : e) - (l->ts > s ? l->ts : s);
    if (ov >= best_ov) { /* going back: an equal overlap earlier wins */
      best = (uint32_t)i;
      best_ov = ov;
    }
  }
  return best;
}

/* 4: every overhead record placed; the first max_rec kept as rows. */
static int place_overhead(osk_audit_t *a, place_t *p) {
  osk_audit_stats_t *st = &a->stats;
  if (a->n_launch) {
    p->launch_reach = malloc(a->n_launch * sizeof *p->launch_reach);
    if (!p->launch_reach) return OSK_ENOMEM;
    int64_t reach = INT64_MIN;
    for (size_t i = 0; i < a->n_launch; i++) {
      int64_t le = a->launch[i].ts + a->launch[i].dur;
      if (le > reach) reach = le;
      p->launch_reach[i] = reach;
    }
  }
  if (a->n_ovh) qsort(a->ovh, a->n_ovh, sizeof *a->ovh, ovh_by_time);
  size_t keep = a->n_ovh < a->max_rec ? a->n_ovh : a->max_rec;
  if (keep) {
    a->ov_rows = calloc(keep, sizeof *a->ov_rows);
    if (!a->ov_rows) return OSK_ENOMEM;
  }
  for (size_t i = 0; i < a->n_ovh; i++) {
    const overhead_t *o = &a->ovh[i];
    uint32_t li = a->n_launch ? launch_over(a, p, o->ts, o->ts + o->dur) : NONE;
    uint32_t oi = li != NONE ? op_at(a, p, a->launch[li].thread, o->ts) : NONE;
    if (oi == NONE) {
      /* No launch, or none of its thread's operators holds it: the one that
       * started last on any thread (ties: the shorter, then the thread first
       * seen), what was running innermost at that time. */
      for (uint32_t t = 0; t < a->threads.n; t++) {
        uint32_t c = op_at(a, p, t, o->ts);
        if (c == NONE) continue;
        if (oi == NONE || a->op[c].ts > a->op[oi].ts ||
            (a->op[c].ts == a->op[oi].ts && a->op[c].dur < a->op[oi].dur))
          oi = c;
      }
    }
    if (li != NONE) {
      st->overhead_in_launch++;
      st->overhead_in_launch_ns = osk__sat_add(st->overhead_in_launch_ns, o->dur);
    }
    if (oi != NONE) {
      st->overhead_in_op++;
      st->overhead_in_op_ns = osk__sat_add(st->overhead_in_op_ns, o->dur);
    }
    if (i >= keep) continue;
    osk_audit_overhead_t *r = &a->ov_rows[a->n_ov_rows++];
    r->name = name_of(a, o->name);
    r->ts_ns = o->ts;
    r->dur_ns = o->dur;
    if (oi != NONE) {
      const op_t *op = &a->op[oi];
      const osk__thread_id_t *t = &a->threads.th[op->thread];
      r->op = name_of(a, op->name);
      r->op_pid = osk__reader_id(&t->pid);
      r->op_tid = osk__reader_id(&t->tid);
      r->op_ts_ns = op->ts;
      r->op_dur_ns = op->dur;
    }
    if (li != NONE) {
      const launch_t *l = &a->launch[li];
      r->launch = name_of(a, l->name);
      r->launch_correlation = l->corr;
      r->launch_ts_ns = l->ts;
      r->launch_dur_ns = l->dur;
    }
  }
  return 0;
}

/* Count and total per overhead name, largest total first. */
static int overhead_kinds(osk_audit_t *a) {
  if (!a->n_ovh) return 0;
  uint32_t *slot = malloc(a->names.n * sizeof *slot);
  a->kinds = malloc(a->names.n * sizeof *a->kinds);
  if (!slot || !a->kinds) {
    free(slot);
    return OSK_ENOMEM;
  }
  for (size_t i = 0; i < a->names.n; i++) slot[i] = NONE;
  for (size_t i = 0; i < a->n_ovh; i++) {
    const overhead_t *o = &a->ovh[i];
    if (slot[o->name] == NONE) {
      slot[o->name] = (uint32_t)a->n_kinds;
      a->kinds[a->n_kinds++] = (osk_audit_overhead_kind_t){name_of(a, o->name), 0, 0};
    }
    osk_audit_overhead_kind_t *k = &a->kinds[slot[o->name]];
    k->count++;
    k->total_ns = osk__sat_add(k->total_ns, o->dur);
  }
  free(slot);
  qsort(a->kinds, a->n_kinds, sizeof *a->kinds, kind_by_total);
  return 0;
}

static void free_work(osk_audit_t *a) {
  void **work[] = {(void **)&a->launch, (void **)&a->dev, (void **)&a->op, (void **)&a->ovh};
  osk__free_arrays(work, sizeof work / sizeof *work);
  a->n_launch = a->n_dev = a->n_op = a->n_ovh = 0;
  a->launch_cap = a->dev_cap = a->op_cap = a->ovh_cap = 0;
}

int osk_audit_finish(osk_audit_t *a) {
  if (!a || a->finished) return OSK_EINVAL;
  a->finished = 1;
  for (int k = 0; k < 3; k++) {
    size_t most = k == OSK_AUDIT_MISSING ? a->n_launch : a->n_dev;
    size_t keep = most < a->max_rec ? most : a->max_rec;
    if (keep && !(a->rows[k] = calloc(keep, sizeof *a->rows[k]))) return OSK_ENOMEM;
  }
  int rc = match(a);
  if (rc) return rc;
  if (a->n_launch) qsort(a->launch, a->n_launch, sizeof *a->launch, launch_by_time);
  if (a->n_dev) qsort(a->dev, a->n_dev, sizeof *a->dev, dev_by_time);
  fill_lists(a);
  place_t p = {0};
  rc = nest_ops(a, &p);
  if (!rc) rc = place_overhead(a, &p);
  if (!rc) rc = overhead_kinds(a);
  free(p.launch_reach);
  free(p.th_lo);
  free(p.th_hi);
  if (rc) return rc;
  if (a->n_steps) qsort(a->steps, a->n_steps, sizeof *a->steps, step_by_time);
  free_work(a);
  return 0;
}

/* -------------------------------------------------------------- results */

static const osk_audit_stats_t zero_stats;

const osk_audit_stats_t *osk_audit_stats(const osk_audit_t *a) {
  return a ? &a->stats : &zero_stats;
}

size_t osk_audit_overhead_kind_count(const osk_audit_t *a) {
  return a && a->finished ? a->n_kinds : 0;
}

const osk_audit_overhead_kind_t *osk_audit_overhead_kind(const osk_audit_t *a, size_t i) {
  return i < osk_audit_overhead_kind_count(a) ? &a->kinds[i] : NULL;
}

size_t osk_audit_overhead_count(const osk_audit_t *a) {
  return a && a->finished ? a->n_ov_rows : 0;
}

const osk_audit_overhead_t *osk_audit_overhead(const osk_audit_t *a, size_t i) {
  return i < osk_audit_overhead_count(a) ? &a->ov_rows[i] : NULL;
}

size_t osk_audit_event_count(const osk_audit_t *a, osk_audit_list_t list) {
  if (!a || !a->finished || (unsigned)list > OSK_AUDIT_BAD_TIME) return 0;
  return a->n_rows[list];
}

const osk_audit_event_t *osk_audit_event(const osk_audit_t *a, osk_audit_list_t list, size_t i) {
  return i < osk_audit_event_count(a, list) ? &a->rows[list][i] : NULL;
}

size_t osk_audit_step_count(const osk_audit_t *a) { return a && a->finished ? a->n_steps : 0; }

const osk_audit_step_t *osk_audit_step(const osk_audit_t *a, size_t i) {
  return i < osk_audit_step_count(a) ? &a->steps[i] : NULL;
}

void osk_audit_free(osk_audit_t *a) {
  if (!a) return;
  free_work(a);
  free(a->steps);
  free(a->kinds);
  free(a->ov_rows);
  for (int k = 0; k < 3; k++) free(a->rows[k]);
  osk__names_free(&a->names);
  osk__threads_free(&a->threads);
  free(a);
}

/* ------------------------------------------------------- one-call audits */

static int audit_source(const char *path, const void *data, size_t len, size_t piece,
                        const osk_audit_opts_t *opts, const osk_reader_opts_t *ropts,
                        osk_audit_t **out, osk_reader_stats_t *rstats, osk_error_t *err) {
  osk_error_t local;
  if (!err) err = &local;
  *err = (osk_error_t){0, "", 0, 0};
  if (!out) {
    *err = (osk_error_t){OSK_EINVAL, "no output given", 0, 0};
    return OSK_EINVAL;
  }
  *out = NULL;
  osk_audit_t *a;
  int rc = osk_audit_new(&a, opts);
  if (rc) return osk__fail(err, rc);
  osk_reader_t *r;
  rc = path ? osk_reader_open(&r, path, ropts, err)
            : osk_reader_open_mem(&r, data, len, piece, ropts, err);
  if (rc) goto fail;
  rc = osk_reader_run(r, osk_audit_add, a, err);
  if (rstats) *rstats = *osk_reader_stats(r);
  osk_reader_free(r);
  if (!osk__read_kept(rc)) goto fail;
  a->stats.truncated = rc == OSK_ETRUNCATED;
  int frc = osk_audit_finish(a);
  if (frc) {
    rc = osk__fail(err, frc);
    goto fail;
  }
  *out = a;
  return rc;
fail: /* every failure after the audit exists: it goes */
  osk_audit_free(a);
  return rc;
}

int osk_audit_from_path(const char *path, const osk_audit_opts_t *opts,
                        const osk_reader_opts_t *ropts, osk_audit_t **out,
                        osk_reader_stats_t *rstats, osk_error_t *err) {
  if (!path) {
    if (err) *err = (osk_error_t){OSK_EINVAL, "no path given", 0, 0};
    return OSK_EINVAL;
  }
  return audit_source(path, NULL, 0, 0, opts, ropts, out, rstats, err);
}

int osk_audit_from_mem(const void *data, size_t len, size_t piece, const osk_audit_opts_t *opts,
                       const osk_reader_opts_t *ropts, osk_audit_t **out,
                       osk_reader_stats_t *rstats, osk_error_t *err) {
  if (!data && len) {
    if (err) *err = (osk_error_t){OSK_EINVAL, "no data given", 0, 0};
    return OSK_EINVAL;
  }
  return audit_source(NULL, data, len, piece, opts, ropts, out, rstats, err);
}
