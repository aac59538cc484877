/* summary.c: per-thread nesting and per-name aggregates of trace events
 * (see osk_summary_t in opskew_reader.h for the model).
 *
 * Memory. Per distinct name: the aggregate, an exact buffer of up to 64
 * durations (for exact quantiles of rare names), then a histogram that
 * covers only the range of buckets that name used. Per thread: the open
 * stack (the nesting depth), a small map from name to that thread's self
 * time, and, only for threads whose events are out of order, the held events
 * of the second pass. Nothing grows with the number of in-order events.
 *
 * Names, threads, metadata and the nesting rule are csrc/tracecore's, the
 * same the compensation uses; what is summary's own is what happens when
 * an event closes (self times per name) and the statistics.
 */
#include "opskew_reader.h"
#include "reader_analysis.h"
#include "reader_internal.h"

#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ histogram */

/* Log-linear buckets: values below 128 have their own bucket; above, every
 * power of two [2^e, 2^(e+1)) is split into 64 equal buckets, so a bucket's
 * width is at most 1/64 of its lower bound and its midpoint is within 1/128
 * (0.8%) of any value in it. */
#define HIST_SUB 64
#define HIST_EXACT 64
#define HIST_MAX_INDEX (57 * HIST_SUB + 2 * HIST_SUB) /* covers every uint64 */

static int hist_index(uint64_t v) {
  if (v < 2 * HIST_SUB) return (int)v;
  int e = 63 - __builtin_clzll(v);
  int shift = e - 6;
  return shift * HIST_SUB + (int)(v >> shift);
}

static void hist_bucket(int idx, double *lower, double *width) {
  if (idx < 2 * HIST_SUB) {
    *lower = idx;
    *width = 1;
    return;
  }
  int shift = idx / HIST_SUB - 1;
  uint64_t m = (uint64_t)(idx - shift * HIST_SUB);
  *lower = (double)(m << shift);
  *width = (double)(1ull << shift);
}

typedef struct {
  int64_t *exact;   /* the first HIST_EXACT values, while counts == NULL */
  uint32_t n_exact;
  uint64_t *counts; /* counts[i - lo] for buckets lo <= i < hi */
  int lo, hi;
} hist_t;

static int hist_bump(hist_t *h, int idx) {
  if (!h->counts || idx < h->lo || idx >= h->hi) {
    int nlo = h->counts ? (idx < h->lo ? idx : h->lo) : idx;
    int nhi = h->counts ? (idx >= h->hi ? idx + 1 : h->hi) : idx + 1;
    /* Grow by a margin so a drifting name does not realloc on every call. */
    nlo = nlo - 16 < 0 ? 0 : nlo - 16;
    nhi = nhi + 16 > HIST_MAX_INDEX ? HIST_MAX_INDEX : nhi + 16;
    uint64_t *nc = calloc((size_t)(nhi - nlo), sizeof *nc);
    if (!nc) return OSK_ENOMEM;
    if (h->counts) {
      memcpy(nc + (h->lo - nlo), h->counts, (size_t)(h->hi - h->lo) * sizeof *nc);
      free(h->counts);
    }
    h->counts = nc;
    h->lo = nlo;
    h->hi = nhi;
  }
  h->counts[idx - h->lo]++;
  return 0;
}

static int hist_add(hist_t *h, int64_t v) {
  if (!h->counts) {
    if (!h->exact) {
      h->exact = malloc(HIST_EXACT * sizeof *h->exact);
      if (!h->exact) return OSK_ENOMEM;
    }
    if (h->n_exact < HIST_EXACT) {
      h->exact[h->n_exact++] = v;
      return 0;
    }
    for (uint32_t i = 0; i < h->n_exact; i++) {
      int rc = hist_bump(h, hist_index((uint64_t)h->exact[i]));
      if (rc) return rc;
    }
    free(h->exact);
    h->exact = NULL;
  }
  return hist_bump(h, hist_index((uint64_t)v));
}

/* Adds every value of `src` to `h` (a merge of two names' figures). */
static int hist_merge(hist_t *h, const hist_t *src) {
  if (!src->counts) {
    for (uint32_t i = 0; i < src->n_exact; i++) {
      int rc = hist_add(h, src->exact[i]);
      if (rc) return rc;
    }
    return 0;
  }
  for (int i = src->lo; i < src->hi; i++) {
    uint64_t c = src->counts[i - src->lo];
    if (!c) continue;
    /* The first add turns `h` into buckets when it is still exact; the rest
     * of this bucket's count goes in at once. */
    while (!h->counts && c) {
      double lower, width;
      hist_bucket(i, &lower, &width);
      int rc = hist_add(h, (int64_t)lower);
      if (rc) return rc;
      c--;
    }
    if (!c) continue;
    int rc = hist_bump(h, i);
    if (rc) return rc;
    h->counts[i - h->lo] += c - 1;
  }
  return 0;
}

static void hist_free(hist_t *h) {
  free(h->exact);
  free(h->counts);
}

/* ----------------------------------------------------------- structures */

typedef struct {
  osk_summary_op_t pub; /* name points into the name table */
  hist_t hist;
} op_t;

typedef struct {
  int64_t start, child;
  uint32_t name;
} be_frame_t;

typedef struct {
  int64_t start, dur;
  uint64_t seq;
  uint32_t name, cls;
} held_t;

typedef struct {
  int64_t self_ns;
  uint64_t desc, dup;
} self_t;

typedef struct {
  osk_summary_thread_t pub; /* pid, tid and name point into the thread table */
  osk__nest_t nest;
  be_frame_t *be;
  uint32_t be_depth, be_cap;
  int64_t last_start;
  int have_last, unsorted;
  /* name id + 1 -> self figures of this thread (open addressing). */
  uint32_t *sm_keys;
  self_t *sm_vals;
  size_t sm_cap, sm_n;
  held_t *held;
  size_t n_held, held_cap;
} thread_t;

typedef struct {
  char *name;
  size_t len;
  int selected;
} cat_t;

struct osk_summary {
  osk__names_t names; /* op id = name id */
  op_t *ops;
  size_t n_ops, ops_cap;

  osk__threads_t th; /* thread ids, names, and the processes */
  struct { /* th's processes, as osk_summary_process hands them out */
    osk_summary_process_t *row;
    size_t n, cap;
  } procs;
  thread_t *threads;  /* by thread id */
  size_t n_threads, threads_cap;

  int filter;
  int unlisted_selected; /* what a category absent from `cats` gets */
  cat_t *cats;
  size_t n_cats, cats_cap;
  size_t last_cat; /* index + 1 */

  /* Top-level scalars of the document, copied from the reader. */
  char **meta_kv; /* key, value, key, value, ... */
  size_t *meta_len;
  int *meta_str;
  size_t n_meta;
  /* Top-level objects the reader kept (opskew's "opskew" header among them):
   * key and JSON text of each, copied. */
  char *obj_kv[2 * OSK_READER_OBJECTS_MAX];
  size_t obj_len[2 * OSK_READER_OBJECTS_MAX];
  size_t n_obj;

  uint64_t seq;
  int finished;
  osk_summary_stats_t stats;
};

/* ------------------------------------------------------------------- ops */

/* Finds or adds the op named `name`; returns its index or a negative code. */
static int64_t op_intern(osk_summary_t *s, osk_str_t name, osk_str_t cat) {
  int64_t id = osk__names_intern(&s->names, name.ptr, name.len);
  if (id < 0 || (size_t)id < s->n_ops) return id;
  /* New: ids are dense, so it is the next one, unless running out of
   * memory left names without ops before it. */
  if (osk__grow((void **)&s->ops, &s->ops_cap, (size_t)id + 1, sizeof *s->ops)) return OSK_ENOMEM;
  while (s->n_ops <= (size_t)id) {
    op_t *o = &s->ops[s->n_ops];
    memset(o, 0, sizeof *o);
    char *ct = osk__dup_bytes(cat.ptr, cat.len);
    if (!ct) return OSK_ENOMEM;
    o->pub.name = s->names.str[s->n_ops];
    o->pub.cat = (osk_str_t){ct, cat.len};
    s->n_ops++;
  }
  return id;
}

static int op_add_call(osk_summary_t *s, uint32_t id, int64_t dur) {
  op_t *o = &s->ops[id];
  if (o->pub.calls == 0 || dur < o->pub.min_ns) o->pub.min_ns = dur;
  if (o->pub.calls == 0 || dur > o->pub.max_ns) o->pub.max_ns = dur;
  o->pub.calls++;
  o->pub.total_ns = osk__sat_add(o->pub.total_ns, dur);
  return hist_add(&o->hist, dur);
}

/* --------------------------------------------------------------- threads */

/* The summary's record of thread `id` of the table, added if new. */
static thread_t *thread_at(osk_summary_t *s, int64_t id) {
  if (id < 0) return NULL;
  if ((size_t)id < s->n_threads) return &s->threads[id];
  if (osk__grow((void **)&s->threads, &s->threads_cap, (size_t)id + 1, sizeof *s->threads))
    return NULL;
  for (size_t i = s->n_threads; i <= (size_t)id; i++) {
    thread_t *t = &s->threads[i];
    memset(t, 0, sizeof *t);
    t->pub.pid = osk__reader_id(&s->th.th[i].pid);
    t->pub.tid = osk__reader_id(&s->th.th[i].tid);
  }
  s->n_threads = (size_t)id + 1;
  return &s->threads[id];
}

static thread_t *thread_get(osk_summary_t *s, const osk_reader_event_t *ev) {
  return thread_at(s, osk__threads_intern_ev(&s->th, ev));
}

static self_t *self_slot(thread_t *t, uint32_t name) {
  if (t->sm_n * 2 >= t->sm_cap) {
    size_t ncap = t->sm_cap ? t->sm_cap * 2 : 16;
    uint32_t *nk = calloc(ncap, sizeof *nk);
    self_t *nv = calloc(ncap, sizeof *nv);
    if (!nk || !nv) {
      free(nk);
      free(nv);
      return NULL;
    }
    for (size_t i = 0; i < t->sm_cap; i++) {
      if (!t->sm_keys[i]) continue;
      size_t j = (t->sm_keys[i] * 0x9E3779B1u) & (ncap - 1);
      while (nk[j]) j = (j + 1) & (ncap - 1);
      nk[j] = t->sm_keys[i];
      nv[j] = t->sm_vals[i];
    }
    free(t->sm_keys);
    free(t->sm_vals);
    t->sm_keys = nk;
    t->sm_vals = nv;
    t->sm_cap = ncap;
  }
  uint32_t key = name + 1;
  size_t j = (key * 0x9E3779B1u) & (t->sm_cap - 1);
  while (t->sm_keys[j] && t->sm_keys[j] != key) j = (j + 1) & (t->sm_cap - 1);
  if (!t->sm_keys[j]) {
    t->sm_keys[j] = key;
    t->sm_n++;
  }
  return &t->sm_vals[j];
}

static void self_clear(thread_t *t) {
  if (t->sm_cap) {
    memset(t->sm_keys, 0, t->sm_cap * sizeof *t->sm_keys);
    memset(t->sm_vals, 0, t->sm_cap * sizeof *t->sm_vals);
  }
  t->sm_n = 0;
}

/* --------------------------------------------------------------- nesting */

/* The nesting rule closed an event: its self time is its span less its
 * children's time inside it (osk__nest_push says how an outlived child
 * counts). The span ends where the event was closed: at `cut` when a later
 * event outlives it (what follows is that event's, and was counted twice,
 * so a thread's self times summed past its span), at its parent's end when
 * it was clipped there. Its total stays the reported duration. */
static int on_close(void *ctx, osk__nest_frame_t *f, const osk__nest_frame_t *parent, int64_t cut) {
  thread_t *t = ctx;
  (void)parent;
  self_t *sf = self_slot(t, f->name);
  if (!sf) return OSK_ENOMEM;
  int64_t self = osk__nest_self(f, cut);
  sf->self_ns = osk__sat_add(sf->self_ns, self > 0 ? self : 0);
  sf->desc += f->desc[OSK__CLS_OP] + f->desc[OSK__CLS_PY];
  if (f->n_children == 1 && f->last_child == f->name) sf->dup++;
  return 0;
}

static int nest(thread_t *t, int64_t start, int64_t dur, uint32_t name, uint32_t cls) {
  return osk__nest_push(&t->nest, start, dur, name, cls, cls == OSK__CLS_PY, on_close, t, NULL);
}

/* The event's class for the nesting rule: python_function events are
 * Python's, as the correction's default py categories have them
 * (compensate.c's default_py_cats), so that the summary of a corrected
 * trace nests as the correction did; every other event an operator's. */
static uint32_t class_of(osk_str_t cat) {
  static const char py[] = "python_function";
  return osk__str_is(cat, py, sizeof py - 1) ? OSK__CLS_PY : OSK__CLS_OP;
}

static int close_all(thread_t *t) { return osk__nest_close_all(&t->nest, on_close, t); }

/* ------------------------------------------------------------ categories */

static int cat_selected(osk_summary_t *s, osk_str_t cat) {
  if (s->last_cat) {
    cat_t *c = &s->cats[s->last_cat - 1];
    if (osk__str_is(cat, c->name, c->len)) return c->selected;
  }
  for (size_t i = 0; i < s->n_cats; i++) {
    if (osk__str_is(cat, s->cats[i].name, s->cats[i].len)) {
      s->last_cat = i + 1;
      return s->cats[i].selected;
    }
  }
  return s->unlisted_selected;
}

static int add_cat(osk_summary_t *s, const char *c, int selected) {
  size_t n = strlen(c);
  for (size_t i = 0; i < s->n_cats; i++) {
    if (s->cats[i].len == n && memcmp(s->cats[i].name, c, n) == 0) {
      s->cats[i].selected = s->cats[i].selected && selected;
      return 0;
    }
  }
  if (osk__grow((void **)&s->cats, &s->cats_cap, s->n_cats + 1, sizeof *s->cats)) return OSK_ENOMEM;
  if (!(s->cats[s->n_cats].name = osk__dup_bytes(c, n))) return OSK_ENOMEM;
  s->cats[s->n_cats].len = n;
  s->cats[s->n_cats].selected = selected;
  s->n_cats++;
  return 0;
}

/* ------------------------------------------------------------------ API */

int osk_summary_new(osk_summary_t **out, const osk_summary_opts_t *opts) {
  if (!out) return OSK_EINVAL;
  *out = NULL;
  osk_summary_t *s = calloc(1, sizeof *s);
  if (!s) return OSK_ENOMEM;
  s->stats.passes = 1;
  s->unlisted_selected = 1;
  if (opts && opts->categories) {
    s->filter = 1;
    s->unlisted_selected = 0;
    for (size_t i = 0; i < opts->n_categories; i++) {
      if (opts->categories[i] && add_cat(s, opts->categories[i], 1)) {
        osk_summary_free(s);
        return OSK_ENOMEM;
      }
    }
  }
  if (opts && opts->exclude_categories) {
    for (size_t i = 0; i < opts->n_exclude_categories; i++) {
      if (!opts->exclude_categories[i]) continue;
      s->filter = 1;
      if (add_cat(s, opts->exclude_categories[i], 0)) {
        osk_summary_free(s);
        return OSK_ENOMEM;
      }
    }
  }
  *out = s;
  return 0;
}

/* Checks what every analyzed event needs; counts the ones that fail. */
static int usable(osk_summary_t *s, const osk_reader_event_t *ev, unsigned need, int check_cat) {
  if (check_cat && s->filter && !cat_selected(s, ev->cat)) {
    s->stats.filtered_events++;
    return 0;
  }
  if (!osk__event_usable(ev, need)) {
    s->stats.unusable_events++;
    return 0;
  }
  return 1;
}

/* The metadata rule is the trace core's; a thread it names is one of ours,
 * and a process it names is listed as the public type. */
static int on_metadata(osk_summary_t *s, const osk_reader_event_t *ev) {
  int64_t named, named_proc;
  int rc = osk__threads_metadata_ev(&s->th, ev, &named, &named_proc);
  const osk__threads_t *th = &s->th;
  if (th->n_procs > s->procs.n || named_proc >= 0) {
    if (osk__grow((void **)&s->procs.row, &s->procs.cap, th->n_procs, sizeof *s->procs.row))
      return OSK_ENOMEM;
    for (; s->procs.n < th->n_procs; s->procs.n++)
      s->procs.row[s->procs.n] = (osk_summary_process_t){osk__reader_id(&th->procs[s->procs.n].pid),
                                                         th->procs[s->procs.n].name};
    if (named_proc >= 0) s->procs.row[named_proc].name = th->procs[named_proc].name;
  }
  if (rc || named < 0) return rc;
  thread_t *t = thread_at(s, named);
  if (!t) return OSK_ENOMEM;
  t->pub.name = s->th.th[named].name;
  return 0;
}

static void span(osk_summary_t *s, int64_t start, int64_t end) {
  if (s->stats.complete_events == 0 || start < s->stats.first_ts_ns) s->stats.first_ts_ns = start;
  if (s->stats.complete_events == 0 || end > s->stats.last_end_ns) s->stats.last_end_ns = end;
  s->stats.complete_events++;
}

#define BE_IGNORED UINT32_MAX

static int on_begin_end(osk_summary_t *s, thread_t *t, const osk_reader_event_t *ev, int begin,
                        int keep) {
  if (begin) {
    int64_t id = BE_IGNORED;
    if (keep) {
      id = op_intern(s, ev->name, ev->cat);
      if (id < 0) return (int)id;
    }
    if (t->be_depth == t->be_cap) {
      uint32_t ncap = t->be_cap ? t->be_cap * 2 : 16;
      be_frame_t *nb = realloc(t->be, ncap * sizeof *nb);
      if (!nb) return OSK_ENOMEM;
      t->be = nb;
      t->be_cap = ncap;
    }
    t->be[t->be_depth++] = (be_frame_t){ev->ts_ns, 0, (uint32_t)id};
    return 0;
  }
  if (!t->be_depth) {
    s->stats.unmatched_end++;
    return 0;
  }
  be_frame_t f = t->be[--t->be_depth];
  if (f.name == BE_IGNORED) return 0;
  /* The end must not precede the start, and the duration must fit int64. */
  if (ev->ts_ns < f.start || (f.start < 0 && ev->ts_ns > INT64_MAX + f.start)) {
    s->stats.unusable_events++;
    return 0;
  }
  int64_t dur = ev->ts_ns - f.start;
  int rc = op_add_call(s, f.name, dur);
  if (rc) return rc;
  span(s, f.start, ev->ts_ns);
  t->pub.complete_events++;
  int64_t self = dur - f.child;
  s->ops[f.name].pub.self_ns = osk__sat_add(s->ops[f.name].pub.self_ns, self > 0 ? self : 0);
  if (t->be_depth) t->be[t->be_depth - 1].child = osk__sat_add(t->be[t->be_depth - 1].child, dur);
  return 0;
}

int osk_summary_add(void *summary, const osk_reader_event_t *ev) {
  osk_summary_t *s = summary;
  if (!s || !ev) return OSK_EINVAL;
  s->stats.events++;
  if (ev->ph.len != 1) return 0;
  switch (ev->ph.ptr[0]) {
  case 'X': {
    if (!usable(s, ev, OSK__EV_COMPLETE, 1)) return 0;
    thread_t *t = thread_get(s, ev);
    if (!t) return OSK_ENOMEM;
    int64_t id = op_intern(s, ev->name, ev->cat);
    if (id < 0) return (int)id;
    int rc = op_add_call(s, (uint32_t)id, ev->dur_ns);
    if (rc) return rc;
    span(s, ev->ts_ns, ev->ts_ns + ev->dur_ns);
    t->pub.complete_events++;
    if (t->unsorted) return 0;
    if (t->have_last && ev->ts_ns < t->last_start) {
      /* Out of order: drop this thread's nesting; the second pass redoes it
       * from its events sorted. */
      t->unsorted = 1;
      t->nest.depth = 0;
      t->nest.max_depth = 0;
      t->nest.overlaps = 0;
      self_clear(t);
      return 0;
    }
    t->have_last = 1;
    t->last_start = ev->ts_ns;
    return nest(t, ev->ts_ns, ev->dur_ns, (uint32_t)id, class_of(ev->cat));
  }
  case 'B':
  case 'E': {
    /* "E" events usually carry no name or category: the "B" decides, and a
     * "B" the filter drops still opens a frame, so that its "E" closes it. */
    int begin = ev->ph.ptr[0] == 'B';
    int keep = !begin || !s->filter || cat_selected(s, ev->cat);
    if (!keep) s->stats.filtered_events++;
    if (!usable(s, ev, begin ? OSK_READER_EV_NAME | OSK_READER_EV_TS : OSK_READER_EV_TS, 0)) return 0;
    thread_t *t = thread_get(s, ev);
    if (!t) return OSK_ENOMEM;
    return on_begin_end(s, t, ev, begin, keep);
  }
  case 'M':
    return on_metadata(s, ev);
  default:
    return 0;
  }
}

size_t osk_summary_unsorted_threads(const osk_summary_t *s) {
  size_t n = 0;
  for (size_t i = 0; s && i < s->n_threads; i++) n += s->threads[i].unsorted != 0;
  return n;
}

int osk_summary_add_resort(void *summary, const osk_reader_event_t *ev) {
  osk_summary_t *s = summary;
  if (!s || !ev) return OSK_EINVAL;
  if (ev->ph.len != 1 || ev->ph.ptr[0] != 'X') return 0;
  if (s->filter && !cat_selected(s, ev->cat)) return 0;
  if (!osk__event_usable(ev, OSK__EV_COMPLETE)) return 0;
  thread_t *t = thread_get(s, ev);
  if (!t) return OSK_ENOMEM;
  if (!t->unsorted) return 0;
  int64_t id = op_intern(s, ev->name, ev->cat);
  if (id < 0) return (int)id;
  if (osk__grow((void **)&t->held, &t->held_cap, t->n_held + 1, sizeof *t->held)) return OSK_ENOMEM;
  t->held[t->n_held++] = (held_t){ev->ts_ns, ev->dur_ns, s->seq++, (uint32_t)id, class_of(ev->cat)};
  s->stats.resorted_events++;
  s->stats.passes = 2;
  return 0;
}

static int held_cmp(const void *a, const void *b) {
  const held_t *x = a, *y = b;
  return osk__nest_order(x->start, x->dur, x->seq, y->start, y->dur, y->seq);
}

int osk_summary_finish(osk_summary_t *s) {
  if (!s) return OSK_EINVAL;
  if (s->finished) return 0;
  for (size_t i = 0; i < s->n_threads; i++) {
    thread_t *t = &s->threads[i];
    int rc = close_all(t);
    if (rc) return rc;
    if (t->unsorted && t->n_held) {
      qsort(t->held, t->n_held, sizeof *t->held, held_cmp);
      for (size_t k = 0; k < t->n_held; k++) {
        rc = nest(t, t->held[k].start, t->held[k].dur, t->held[k].name, t->held[k].cls);
        if (rc) return rc;
      }
      rc = close_all(t);
      if (rc) return rc;
      t->pub.resorted = 1;
      free(t->held);
      t->held = NULL;
      t->n_held = t->held_cap = 0;
    }
    t->pub.max_depth = t->nest.max_depth;
    t->pub.overlaps = t->nest.overlaps;
    s->stats.overlaps += t->pub.overlaps;
    s->stats.unclosed_begin += t->be_depth;
    for (size_t j = 0; j < t->sm_cap; j++) {
      if (!t->sm_keys[j]) continue;
      osk_summary_op_t *o = &s->ops[t->sm_keys[j] - 1].pub;
      o->self_ns = osk__sat_add(o->self_ns, t->sm_vals[j].self_ns);
      o->descendants += t->sm_vals[j].desc;
      o->only_child_same_name += t->sm_vals[j].dup;
    }
  }
  s->finished = 1;
  return 0;
}

int osk_summary_merge(osk_summary_t *dst, const osk_summary_t *src) {
  if (!dst || !src || !src->finished || dst->n_threads || (!dst->finished && dst->stats.events))
    return OSK_EINVAL;
  for (size_t i = 0; i < src->n_ops; i++) {
    const op_t *so = &src->ops[i];
    int64_t id = op_intern(dst, so->pub.name, so->pub.cat);
    if (id < 0) return (int)id;
    osk_summary_op_t *d = &dst->ops[id].pub;
    const osk_summary_op_t *o = &so->pub;
    if (!o->calls) continue;
    if (d->calls == 0 || o->min_ns < d->min_ns) d->min_ns = o->min_ns;
    if (d->calls == 0 || o->max_ns > d->max_ns) d->max_ns = o->max_ns;
    d->calls += o->calls;
    d->total_ns = osk__sat_add(d->total_ns, o->total_ns);
    d->self_ns = osk__sat_add(d->self_ns, o->self_ns);
    d->descendants += o->descendants;
    d->only_child_same_name += o->only_child_same_name;
    int rc = hist_merge(&dst->ops[id].hist, &so->hist);
    if (rc) return rc;
  }
  osk_summary_stats_t *d = &dst->stats;
  const osk_summary_stats_t *o = &src->stats;
  if (o->complete_events) {
    if (!d->complete_events || o->first_ts_ns < d->first_ts_ns) d->first_ts_ns = o->first_ts_ns;
    if (!d->complete_events || o->last_end_ns > d->last_end_ns) d->last_end_ns = o->last_end_ns;
  }
  d->events += o->events;
  d->complete_events += o->complete_events;
  d->filtered_events += o->filtered_events;
  d->unusable_events += o->unusable_events;
  d->overlaps += o->overlaps;
  d->unmatched_end += o->unmatched_end;
  d->unclosed_begin += o->unclosed_begin;
  d->resorted_events += o->resorted_events;
  if (o->passes > d->passes) d->passes = o->passes;
  dst->finished = 1;
  return 0;
}

size_t osk_summary_op_count(const osk_summary_t *s) { return s ? s->n_ops : 0; }

const osk_summary_op_t *osk_summary_op(const osk_summary_t *s, size_t i) {
  return s && i < s->n_ops ? &s->ops[i].pub : NULL;
}

/* The value of rank k (0-based) from the histogram: its bucket's midpoint. */
static double hist_rank(const hist_t *h, uint64_t k) {
  uint64_t cum = 0;
  for (int i = h->lo; i < h->hi; i++) {
    cum += h->counts[i - h->lo];
    if (cum > k) {
      double lower, width;
      hist_bucket(i, &lower, &width);
      return lower + (width - 1) / 2;
    }
  }
  return 0;
}

int osk_summary_op_quantile(const osk_summary_t *s, size_t i, double q, double *out_ns) {
  if (!s || i >= s->n_ops || !out_ns || !(q >= 0 && q <= 1)) return OSK_ERANGE;
  const op_t *o = &s->ops[i];
  uint64_t n = o->pub.calls;
  if (n == 0) return OSK_ETOOFEW;
  /* Type 7 (linear interpolation between order statistics), as numpy and
   * osk_quantile define it. */
  double h = (double)(n - 1) * q;
  uint64_t k = (uint64_t)h;
  double frac = h - (double)k;
  double v0, v1;
  if (!o->hist.counts) {
    int64_t tmp[HIST_EXACT];
    memcpy(tmp, o->hist.exact, o->hist.n_exact * sizeof *tmp);
    qsort(tmp, o->hist.n_exact, sizeof *tmp, osk__cmp_i64);
    v0 = (double)tmp[k];
    v1 = (double)tmp[k + 1 < n ? k + 1 : k];
  } else {
    /* The extreme order statistics are known exactly. */
    double lo = (double)o->pub.min_ns, hi = (double)o->pub.max_ns;
    v0 = k == 0 ? lo : k + 1 == n ? hi : hist_rank(&o->hist, k);
    v1 = k + 1 >= n ? v0 : k + 2 == n ? hi : hist_rank(&o->hist, k + 1);
  }
  double v = v0 + frac * (v1 - v0);
  if (v < (double)o->pub.min_ns) v = (double)o->pub.min_ns;
  if (v > (double)o->pub.max_ns) v = (double)o->pub.max_ns;
  *out_ns = v;
  return 0;
}

size_t osk_summary_thread_count(const osk_summary_t *s) { return s ? s->n_threads : 0; }

const osk_summary_thread_t *osk_summary_thread(const osk_summary_t *s, size_t i) {
  return s && i < s->n_threads ? &s->threads[i].pub : NULL;
}

size_t osk_summary_process_count(const osk_summary_t *s) { return s ? s->procs.n : 0; }

const osk_summary_process_t *osk_summary_process(const osk_summary_t *s, size_t i) {
  return s && i < s->procs.n ? &s->procs.row[i] : NULL;
}

const osk_summary_stats_t *osk_summary_stats(const osk_summary_t *s) {
  return s ? &s->stats : NULL;
}

void osk_summary_free(osk_summary_t *s) {
  if (!s) return;
  for (size_t i = 0; i < s->n_ops; i++) {
    free((void *)s->ops[i].pub.cat.ptr);
    hist_free(&s->ops[i].hist);
  }
  for (size_t i = 0; i < s->n_threads; i++) {
    thread_t *t = &s->threads[i];
    osk__nest_free(&t->nest);
    free(t->be);
    free(t->sm_keys);
    free(t->sm_vals);
    free(t->held);
  }
  osk__names_free(&s->names);
  osk__threads_free(&s->th);
  free(s->procs.row);
  for (size_t i = 0; i < 2 * s->n_meta; i++) free(s->meta_kv[i]);
  free(s->meta_kv);
  free(s->meta_len);
  free(s->meta_str);
  for (size_t i = 0; i < 2 * s->n_obj; i++) free(s->obj_kv[i]);
  for (size_t i = 0; i < s->n_cats; i++) free(s->cats[i].name);
  free(s->cats);
  free(s->ops);
  free(s->threads);
  free(s);
}

/* The document's top-level members, copied from the reader as key, value
 * pairs: pair i at kv[2i], kv[2i + 1], with their lengths in len. */

/* Copies pair i; *n counts it even when out of memory, so that free
 * releases what was copied. 0 or OSK_ENOMEM. */
static int pair_copy(char **kv, size_t *len, size_t *n, size_t i, osk_str_t key, osk_str_t value) {
  kv[2 * i] = osk__dup_bytes(key.ptr, key.len);
  kv[2 * i + 1] = osk__dup_bytes(value.ptr, value.len);
  *n = i + 1;
  if (!kv[2 * i] || !kv[2 * i + 1]) return OSK_ENOMEM;
  len[2 * i] = key.len;
  len[2 * i + 1] = value.len;
  return 0;
}

/* Pair i into *key and *value (either may be NULL). */
static void pair_get(char *const *kv, const size_t *len, size_t i, osk_str_t *key,
                     osk_str_t *value) {
  if (key) *key = (osk_str_t){kv[2 * i], len[2 * i]};
  if (value) *value = (osk_str_t){kv[2 * i + 1], len[2 * i + 1]};
}

size_t osk_summary_meta_count(const osk_summary_t *s) { return s ? s->n_meta : 0; }

int osk_summary_meta_get(const osk_summary_t *s, size_t i, osk_str_t *key, osk_str_t *value,
                         int *is_string) {
  if (!s || i >= s->n_meta) return OSK_ERANGE;
  pair_get(s->meta_kv, s->meta_len, i, key, value);
  if (is_string) *is_string = s->meta_str[i];
  return 0;
}

static int copy_meta(osk_summary_t *s, const osk_reader_t *r) {
  size_t n = osk_reader_meta_count(r);
  if (!n) return 0;
  s->meta_kv = calloc(2 * n, sizeof *s->meta_kv);
  s->meta_len = calloc(2 * n, sizeof *s->meta_len);
  s->meta_str = calloc(n, sizeof *s->meta_str);
  if (!s->meta_kv || !s->meta_len || !s->meta_str) return OSK_ENOMEM;
  for (size_t i = 0; i < n; i++) {
    osk_str_t k, v;
    osk_reader_meta_get(r, i, &k, &v, &s->meta_str[i]);
    if (pair_copy(s->meta_kv, s->meta_len, &s->n_meta, i, k, v)) return OSK_ENOMEM;
  }
  return 0;
}

size_t osk_summary_object_count(const osk_summary_t *s) { return s ? s->n_obj : 0; }

int osk_summary_object_get(const osk_summary_t *s, size_t i, osk_str_t *key, osk_str_t *json) {
  if (!s || i >= s->n_obj) return OSK_ERANGE;
  pair_get(s->obj_kv, s->obj_len, i, key, json);
  return 0;
}

static int copy_objects(osk_summary_t *s, const osk_reader_t *r) {
  size_t n = osk_reader_object_count(r);
  for (size_t i = 0; i < n && i < OSK_READER_OBJECTS_MAX; i++) {
    osk_str_t k, v;
    osk_reader_object_get(r, i, &k, &v);
    if (pair_copy(s->obj_kv, s->obj_len, &s->n_obj, i, k, v)) return OSK_ENOMEM;
  }
  return 0;
}

/* ------------------------------------------------------ one-call summaries */

typedef struct {
  const char *path;
  const void *data;
  size_t len, piece;
} source_t;

static int open_source(const source_t *src, const osk_reader_opts_t *ropts, osk_reader_t **r,
                       osk_error_t *err) {
  /* The second pass, when a thread is out of order, rereads the same
   * reader: a pipe or standard input is then read from the reader's copy of
   * it, so they give the same summary as the file (one read of the pipe). */
  osk_reader_opts_t o = {0};
  if (ropts) o = *ropts;
  o.rewindable = 1;
  if (src->path) return osk_reader_open(r, src->path, &o, err);
  return osk_reader_open_mem(r, src->data, src->len, src->piece, &o, err);
}

/* The first pass's callback: the summary, then the caller's tap. */
typedef struct {
  osk_summary_t *s;
  osk_reader_event_fn tap;
  void *tap_ctx;
} tapped_t;

static int add_tapped(void *ctx, const osk_reader_event_t *ev) {
  tapped_t *t = ctx;
  int rc = osk_summary_add(t->s, ev);
  return rc ? rc : t->tap(t->tap_ctx, ev);
}

static int summarize(const source_t *src, const osk_summary_opts_t *opts,
                     const osk_reader_opts_t *ropts, osk_reader_event_fn tap, void *tap_ctx,
                     osk_summary_t **out, osk_reader_stats_t *rstats, osk_error_t *err) {
  osk_error_t local;
  if (!err) err = &local;
  if (!out) return OSK_EINVAL;
  *out = NULL;
  osk_summary_t *s;
  int rc = osk_summary_new(&s, opts);
  if (rc) return osk__fail(err, rc);
  osk_reader_t *r;
  rc = open_source(src, ropts, &r, err);
  if (rc) {
    osk_summary_free(s);
    return rc;
  }
  tapped_t tapped = {s, tap, tap_ctx};
  rc = tap ? osk_reader_run(r, add_tapped, &tapped, err) : osk_reader_run(r, osk_summary_add, s, err);
  if (rstats) *rstats = *osk_reader_stats(r);
  int mrc = copy_meta(s, r);
  if (!mrc) mrc = copy_objects(s, r);
  if (mrc) {
    osk_reader_free(r);
    osk_summary_free(s);
    return osk__fail(err, mrc);
  }
  if (!osk__read_kept(rc)) {
    osk_reader_free(r);
    osk_summary_free(s);
    return rc;
  }
  if (osk_summary_unsorted_threads(s)) {
    osk_error_t err2;
    int rc2 = osk_reader_rewind(r, &err2);
    if (!rc2) rc2 = osk_reader_run(r, osk_summary_add_resort, s, &err2);
    /* The second pass stops where the first did; anything else is new. */
    if (rc2 && rc2 != rc) {
      *err = err2;
      osk_reader_free(r);
      osk_summary_free(s);
      return rc2;
    }
  }
  osk_reader_free(r);
  int frc = osk_summary_finish(s);
  if (frc) {
    osk_summary_free(s);
    return osk__fail(err, frc);
  }
  *out = s;
  return rc;
}

int osk_summary_from_path(const char *path, const osk_summary_opts_t *opts,
                       const osk_reader_opts_t *ropts, osk_summary_t **out,
                       osk_reader_stats_t *rstats, osk_error_t *err) {
  source_t src = {path, NULL, 0, 0};
  if (!path) return OSK_EINVAL;
  return summarize(&src, opts, ropts, NULL, NULL, out, rstats, err);
}

int osk_summary_from_mem(const void *data, size_t len, size_t piece, const osk_summary_opts_t *opts,
                      const osk_reader_opts_t *ropts, osk_summary_t **out,
                      osk_reader_stats_t *rstats, osk_error_t *err) {
  source_t src = {NULL, data, len, piece};
  return summarize(&src, opts, ropts, NULL, NULL, out, rstats, err);
}

int osk__summary_tapped(const char *path, const void *data, size_t len,
                        const osk_summary_opts_t *opts, osk_reader_event_fn tap, void *tap_ctx,
                        osk_summary_t **out, osk_reader_stats_t *rstats, osk_error_t *err) {
  source_t src = {path, data, len, 0};
  if (!tap) return OSK_EINVAL;
  return summarize(&src, opts, NULL, tap, tap_ctx, out, rstats, err);
}
