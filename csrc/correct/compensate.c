/* compensate.c: overhead compensation of a trace (see opskew_correct.h).
 *
 * Names, threads, metadata, the nesting rule, the correction formula and the
 * Chrome output are csrc/tracecore's, shared with the streaming summary and
 * the tracer. What is the compensation's own: the per-thread buffering that
 * hands the nesting rule each thread's events in its order a top-level tree
 * at a time, and the compressed time line of the corrected trace, which the
 * nesting rule drives through its close callback.
 *
 * Streaming (docs/correct.md, "Memory"). A parent's corrected duration
 * depends on its descendants and the corrected trace is written parents
 * first, so a top-level tree is written when its root closes. Each thread's
 * events are buffered as they arrive until one starts at or after the end of
 * every event buffered before it (a gap): nothing that comes later can then
 * nest in, outlive or precede (osk__nest_order) the events that start before
 * that end, if the thread keeps to the rule that no event starts before the
 * last gap. Those events are sorted, nested, corrected and written, and
 * dropped. A thread that comes parents first (Kineto's operators) keeps to
 * the rule, and holds one top-level cluster of events at a time (trees
 * joined by events that outlive them, counted as overlaps). A thread that
 * breaks it (an event starts before its last gap: with torch.profiler's
 * with_stack, every Python event after all the operators; children first, a
 * parent after a gap between its children) cannot be written that way: the first such event stops the writing, the
 * rest of the read only finds the other threads that break it, and a second
 * read holds those threads' events whole (32 bytes each) until the end,
 * streaming the others as before. An input that is not a regular file (a
 * pipe) cannot be read twice: every thread is held from the start. An
 * output written as it goes (standard output, a device) cannot take back a
 * voided read: a first read then only finds the threads that break the rule.
 *
 * The cross-thread rule (opts.waits; docs/correct.md, "Threads that wait")
 * needs the starts of every thread's events before the first boundary is
 * placed: a read of its own notes them (16 bytes per event, merged per
 * process), first when the rule is asked for, else once a read has found
 * threads of one process that overlap in time and GPU activity (that read
 * is void: three reads then). A pipe, held whole, notes them as it goes.
 *
 * The twin (docs/correct.md, "The twin"): every record of the input is
 * written once, from its own text. Records of other kinds on a thread with
 * corrected events (riders: flows, instants, runtime calls) are held with
 * the thread's events and re-timed by the tree that holds them (float_safe's
 * map) or between trees (place_gap); one that comes after its tree was
 * written breaks the gap rule as an event would. The rest (metadata, the
 * GPU's rows, "B"/"E") is written as it is read.
 */
#include "opskew_correct.h"
#include "reader_analysis.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ------------------------------------------------------------ the state */

/* One buffered event, 32 bytes. */
typedef struct {
  int64_t ts, dur;
  uint32_t name;
  uint32_t cat; /* index into the correction's categories (cat_cls: its class) */
  uint32_t seq; /* arrival order in the thread's buffer, for a stable sort */
  uint32_t raw; /* its text: the thread's raw[raw] */
} held_t;

/* Where a held record's text is in its thread's text, and where in it the
 * values of ts, dur and args lie (osk_reader_event_t's), 40 bytes. */
typedef struct {
  uint64_t at;
  uint32_t len, ts_at, ts_len, dur_at, dur_len, args_at, args_len;
} raw_t;

/* A record of another kind on a thread with corrected events (an X event of
 * another category, an instant, a flow's start or end), held with the
 * thread's events and written with them, its times mapped as theirs moved
 * (docs/correct.md, "The twin"). 48 bytes. */
typedef struct {
  int64_t ts, dur; /* dur < 0: a point (not a complete event with a usable dur) */
  int64_t ws, we;  /* as written */
  uint32_t raw, seq;
  uint32_t parent; /* while its tree is written: the innermost event holding it */
  int done;        /* written */
} rider_t;

/* What the pass computes for a buffered event of the tree being written,
 * 96 bytes: its place on the compressed time line and its descendants
 * (and, as the tree is fitted, 134 bytes more of the thread's scratch: fit). */
typedef struct {
  int64_t ts2;
  union {
    int64_t debt;   /* while open: instrument time due in its self time that did not fit yet */
    int64_t end2;   /* once closed */
  };
  uint32_t desc[OSK__NCLS]; /* per class; a tree has fewer than 2^32 events */
  /* While open, an event with a span (osk_correct_opts_t.span_ns): what of
   * its own instrument time beyond delta is still to come out of its self
   * time; `head` while its first child has not begun (that interval first,
   * the rest at its end, never passed down to its children). */
  int64_t trim;
  int head;
  double scale; /* on W and W_py: its own name's span_w_scale, else its parent's */
  double dcost; /* its descendants' W (W_py), each at its own scale, as they closed */
  double want;  /* once closed: its corrected duration (the formula's total) */
  uint32_t parent; /* once closed: its parent's line, UINT32_MAX for the tree's root */
  int clipped;     /* once closed: it outlived its parent, clipped at the parent's end */
  int early;       /* once closed: closed early, at the start of a later event that outlived it */
  int64_t ws, we;  /* once fitted: its begin and end as written (the clock map, float64-safe) */
} line_t;

/* Whether an event holds others, of any class. */
static int has_desc(const line_t *l) {
  for (int k = 0; k < OSK__NCLS; k++)
    if (l->desc[k]) return 1;
  return 0;
}

/* A name's entry of osk_correct_opts_t.span_*. */
typedef struct {
  double span;  /* < 0: none */
  double scale; /* on W and W_py for its events and every event inside them */
  double delta; /* < 0: the class's; else its events' own delta (may exceed W) */
} named_t;

/* One boundary of a tree being fitted: an event's begin or end, its place
 * on the forward time line, its rank in the tree's structure (fit). */
typedef struct {
  int64_t v;
  uint32_t rank, ev;
  int end;
} point_t;

/* fit's scratch, kept by a thread across its trees: per boundary (2 per
 * event) its point, the interval after it (its forward and fitted lengths,
 * its owner) and its fitted place; per event where its boundaries sort, its
 * range's end, its clipped tail and the structural stack. */
typedef struct {
  point_t *pt;
  int64_t *fwd, *len, *x, *re, *tail;
  uint32_t *owner, *pos_b, *pos_e, *stack;
  unsigned char *leafy; /* per interval: a leaf holds it (give_back leaves it) */
  size_t pt_cap, fwd_cap, len_cap, x_cap, re_cap, tail_cap, owner_cap, pos_b_cap, pos_e_cap, stack_cap, leafy_cap;
} relay_scratch_t;

/* One thread's state in a pass. */
typedef struct {
  osk_correct_t *c;
  uint32_t id;        /* the thread's id in c->th */
  osk__nest_t nest;
  held_t *buf;        /* arrived, not yet written: arrival order, or sorted in a flush */
  size_t n, cap;
  int in_order;       /* buf[0..n) is in osk__nest_order (no sort needed) */
  line_t *line;       /* line[k - tree_begin] for buf[k] of the tree being nested */
  size_t line_cap;
  size_t tree_begin;  /* buf index of the open top-level tree's first event */
  size_t pushing;     /* buf index of the event being pushed (the end of closed trees) */
  int seen;           /* an event arrived */
  int held;           /* held whole until the end of the read */
  int64_t max_end;    /* the latest end of the events arrived */
  int64_t floor;      /* the last gap: no event may start before it */
  int started;        /* the compressed time line has begun */
  double removed;     /* instrument time taken out before the current point */
  int64_t last2;      /* the latest boundary placed, to keep time monotonic */
  int64_t debt;       /* instrument time due between top-level trees that did not fit yet */
  int64_t last_r;     /* the reported time of the latest boundary placed */
  int have_r;         /* a boundary was placed */
  int64_t span_lo, span_hi; /* this read: the first start and the latest end of its events */
  int spanned;
  relay_scratch_t relay;    /* fit's scratch */
  osk__f64_line_t fline;    /* what its previous tree left for float64 readers (float_safe) */
  int64_t fnudge;           /* ns its later trees are written later by, for float64 readers */
  int64_t rider_after;      /* a tree closed early (the next one outlives its root): the latest written
                             * begin of its riders, which the next tree begins after; 0: none */
  int have_rider_after;
  /* The twin: the held records' text, the records of other kinds held with
   * the events (riders, sorted by ts in a flush, rid_pos the first not
   * placed), where the previous tree's root ended (reported, written). */
  raw_t *raw;
  size_t n_raw, cap_raw;
  char *text;
  size_t n_text, cap_text;
  rider_t *rid;
  size_t n_rid, cap_rid, rid_pos;
  int have_prev;
  int64_t prev_r, prev_w;
  uint32_t *order;          /* a tree's records in the order written */
  size_t cap_order;
  /* The corrected time line as written, read back by the nesting rule as
   * the summary of the corrected trace reads it (readback): the table's
   * corrected self and total times come from it. */
  osk__nest_t rb;
} thr_t;

/* The cross-thread rule's profile of one process: the starts and the ends
 * of its threads' corrected events, merged, per class, sorted (16 bytes per
 * event). Threads of other processes never wait for each other's events. */
typedef struct {
  int64_t *ts[OSK__NCLS], *te[OSK__NCLS];
  size_t n[OSK__NCLS], cap[OSK__NCLS], cap_e[OSK__NCLS];
} xprof_t;

struct osk_correct {
  osk_correct_opts_t opts;
  osk__cost_t cost;
  char **cats;    /* every class's categories */
  size_t n_cats;
  uint32_t *cat_cls; /* by category index: its class */
  size_t n_cls;      /* the cost model's classes (osk_correct_opts_t.classes) */
  unsigned char cls_py[OSK__NCLS]; /* by class: a `python` class */
  char *cls_name[OSK__NCLS];
  int two;           /* the model is the default's shape: operators, then Python (the header says no more) */
  osk__names_t names;    /* op id = name id; kept across passes */
  osk_correct_op_t *ops; /* by name id */
  size_t n_ops, cap_ops;
  named_t *named;        /* by name id < n_named: opts.span_* */
  size_t n_named, cap_named;
  osk__threads_t th;     /* kept across passes: a thread keeps its id */
  thr_t *thr;            /* by thread id */
  size_t n_thr, cap_thr;
  unsigned char *hold;   /* by thread id: hold the thread whole (it broke the gap rule) */
  size_t n_hold;
  int hold_all;          /* the input cannot be read twice: hold every thread */
  int voidable;          /* the output can be discarded (a temporary file renamed at the end) */
  int want_out;          /* a corrected trace is asked for */
  int detecting;         /* a thread broke the rule in this pass: only look for others */
  osk__out_t *o;         /* the corrected trace, or NULL */
  int first;             /* no event written yet */
  uint64_t held_now;     /* events buffered, all threads */
  /* The cross-thread rule (docs/correct.md, "Threads that wait"): by process,
   * the starts and ends of its threads' events, noted by a read of their own
   * (collecting), or along the read that holds every thread. */
  xprof_t *xp;          /* by process index */
  size_t n_xp;
  uint32_t *proc;        /* by thread id: its process index + 1 (0: not known yet) */
  size_t n_proc, cap_proc;
  int xp_ready;          /* the profile is complete: the rule applies */
  int collecting;        /* this read notes the starts and nothing else */
  int collect_next;      /* the next read is a collecting one */
  int gpu;               /* this read saw GPU activity (waits < 0 applies the rule then) */
  osk__f64_tree_t f64;   /* float_safe's scratch */
  /* The twin: by thread id, whether the thread has corrected events (kept
   * across reads), and whether a record of it was written unchanged in this
   * read before that was known (the read is then void: redo). A pipe held
   * whole keeps the records it passes until the output opens (pend). */
  unsigned char *corr, *passed;
  size_t n_corr, n_passed;
  int redo;
  char *pend;
  size_t n_pend, cap_pend;
  struct pend_s *pend_rec;
  size_t n_pend_rec, cap_pend_rec;
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

static uint32_t class_of(const osk_correct_t *c, uint32_t cat) { return c->cat_cls[cat]; }

/* The span the caller gave events of name `name` (osk_correct_opts_t), or -1. */
static double span_of(const osk_correct_t *c, uint32_t name) {
  return name < c->n_named ? c->named[name].span : -1.0;
}

/* The W scale of an event of `name` whose parent's is `up` (1 at top level):
 * its name's span_w_scale where given, else its parent's. */
static double scale_of(const osk_correct_t *c, uint32_t name, double up) {
  return name < c->n_named && c->named[name].scale != 1.0 ? c->named[name].scale : up;
}

/* The correction's cost with every class's W scaled by s (delta at most W). */
static osk__cost_t scaled_cost(const osk_correct_t *c, double s) {
  osk__cost_t k = c->cost;
  if (s != 1.0) {
    for (size_t i = 0; i < c->n_cls; i++) {
      k.w[i] *= s;
      if (k.delta[i] > k.w[i]) k.delta[i] = k.w[i];
    }
  }
  return k;
}

/* The cost of one event of `name` and class `cls` whose W scale is
 * `scale`: scaled_cost with the name's own delta, where given, in place of
 * its class's. An own delta above W raises that name's W to it
 * (osk_correct_opts_t.span_delta_ns): the time it pays inside itself is
 * inside every event around it too, so each of them loses it, and none is
 * given time back. */
static osk__cost_t cost_for(const osk_correct_t *c, uint32_t name, uint32_t cls, double scale) {
  osk__cost_t k = scaled_cost(c, scale);
  if (name < c->n_named && c->named[name].delta >= 0) {
    double d = c->named[name].delta;
    k.delta[cls] = d;
    if (k.w[cls] < d) k.w[cls] = d;
  }
  return k;
}

/* What an event of `name` reported as `dur` holds of its own instrument
 * time beyond delta: its reported duration less its span and delta, where
 * it has a span; 0 otherwise. */
static int64_t span_trim(const osk_correct_t *c, uint32_t name, int64_t dur, double delta) {
  double sp = span_of(c, name);
  if (sp < 0) return 0;
  double v = (double)dur - sp - delta;
  return v > 0 ? (int64_t)llround(v) : 0;
}

static int is_held(const osk_correct_t *c, size_t id) {
  return c->hold_all || (id < c->n_hold && c->hold[id]);
}

/* The pass's state of thread `id`, added if new. */
static thr_t *thr_at(osk_correct_t *c, int64_t id) {
  if (id < 0) return NULL;
  if ((size_t)id < c->n_thr) return &c->thr[id];
  if (osk__grow((void **)&c->thr, &c->cap_thr, (size_t)id + 1, sizeof *c->thr)) return NULL;
  for (size_t i = c->n_thr; i <= (size_t)id; i++) {
    thr_t *t = &c->thr[i];
    memset(t, 0, sizeof *t);
    t->c = c;
    t->id = (uint32_t)i;
    t->in_order = 1;
    t->floor = INT64_MIN;
    t->held = is_held(c, i);
  }
  c->n_thr = (size_t)id + 1;
  return &c->thr[id];
}

/* Room for a tree of n events (2 n boundaries): 0, or OSK_ENOMEM. */
static int relay_scratch_reserve(relay_scratch_t *r, size_t n) {
  size_t m = 2 * n;
  if (osk__grow((void **)&r->pt, &r->pt_cap, m, sizeof *r->pt) ||
      osk__grow((void **)&r->fwd, &r->fwd_cap, m, sizeof *r->fwd) ||
      osk__grow((void **)&r->len, &r->len_cap, m, sizeof *r->len) ||
      osk__grow((void **)&r->x, &r->x_cap, m, sizeof *r->x) ||
      osk__grow((void **)&r->owner, &r->owner_cap, m, sizeof *r->owner) ||
      osk__grow((void **)&r->leafy, &r->leafy_cap, m, sizeof *r->leafy) ||
      osk__grow((void **)&r->re, &r->re_cap, n, sizeof *r->re) ||
      osk__grow((void **)&r->tail, &r->tail_cap, n, sizeof *r->tail) ||
      osk__grow((void **)&r->pos_b, &r->pos_b_cap, n, sizeof *r->pos_b) ||
      osk__grow((void **)&r->pos_e, &r->pos_e_cap, n, sizeof *r->pos_e) ||
      osk__grow((void **)&r->stack, &r->stack_cap, n, sizeof *r->stack))
    return OSK_ENOMEM;
  return 0;
}

/* Frees it, leaving it empty (as new). */
static void relay_scratch_free(relay_scratch_t *r) {
  void **arrays[] = {(void **)&r->pt,  (void **)&r->fwd,   (void **)&r->len,   (void **)&r->x,
                     (void **)&r->re,  (void **)&r->tail,  (void **)&r->owner, (void **)&r->pos_b,
                     (void **)&r->pos_e, (void **)&r->stack, (void **)&r->leafy};
  osk__free_arrays(arrays, sizeof arrays / sizeof *arrays);
  memset(r, 0, sizeof *r);
}

static void thr_release(thr_t *t) {
  osk__nest_free(&t->nest);
  free(t->buf);
  free(t->line);
  free(t->raw);
  free(t->text);
  free(t->rid);
  free(t->order);
  t->raw = NULL;
  t->text = NULL;
  t->rid = NULL;
  t->order = NULL;
  t->n_raw = t->cap_raw = t->n_text = t->cap_text = t->n_rid = t->cap_rid = t->rid_pos = t->cap_order = 0;
  relay_scratch_free(&t->relay);
  osk__f64_line_free(&t->fline);
  osk__nest_free(&t->rb);
  t->buf = NULL;
  t->line = NULL;
  t->n = t->cap = t->line_cap = 0;
}

/* ------------------------------------------------------------ the output */

static void put_cstr(osk__out_t *o, const char *s) { osk__out_str(o, s, strlen(s)); }

/* The caller's clock map (osk_correct_opts_t.clock_*): identity unless set. */
static int64_t to_clock(const osk_correct_t *c, int64_t t) {
  const osk_correct_opts_t *m = &c->opts;
  if (m->clock_offset_ns == 0 && m->clock_drift == 0) return t;
  return osk__clock_to_ref(t, m->clock_origin_ns, m->clock_offset_ns, m->clock_drift);
}

/* Sets flag `id` of the array (grown with zeros as needed): 0 or OSK_ENOMEM. */
static int flag_set(unsigned char **a, size_t *n, size_t id) {
  if (id >= *n) {
    size_t m = id + 1 > 2 * *n ? id + 1 : 2 * *n;
    unsigned char *p = realloc(*a, m);
    if (!p) return OSK_ENOMEM;
    memset(p + *n, 0, m - *n);
    *a = p;
    *n = m;
  }
  (*a)[id] = 1;
  return 0;
}

static int flag_of(const unsigned char *a, size_t n, size_t id) { return id < n && a[id]; }

/* JSON text, its whitespace outside strings left out (Kineto indents every
 * member of every event on a line of its own). */
static void put_compact(osk__out_t *o, const char *s, size_t n) {
  if (!o->buf || o->failed) return;
  if (o->cap - o->len < n) osk__out_flush(o);
  if (!o->failed && o->cap - o->len >= n) {
    /* Straight into the output buffer (a put per token was a tenth of a
     * with_stack correction's time). */
    char *d = o->buf + o->len;
    for (size_t i = 0; i < n; i++) {
      char ch = s[i];
      if (ch == '"') {
        size_t j = osk__json_str_close(s, n, i), k = (j < n ? j + 1 : n) - i;
        memcpy(d, s + i, k);
        d += k;
        i += k - 1;
      } else if (ch != ' ' && ch != '\n' && ch != '\r' && ch != '\t') {
        *d++ = ch;
      }
    }
    o->len = (size_t)(d - o->buf);
    return;
  }
  /* Larger than the buffer: a put per token. */
  size_t from = 0;
  for (size_t i = 0; i < n; i++) {
    char ch = s[i];
    if (ch == '"') {
      i = osk__json_str_close(s, n, i);
    } else if (ch == ' ' || ch == '\n' || ch == '\r' || ch == '\t') {
      if (i > from) osk__out_put(o, s + from, i - from);
      from = i + 1;
    }
  }
  if (n > from) osk__out_put(o, s + from, n - from);
}

/* The separator before a record of the events array. */
static void put_sep(osk_correct_t *c) {
  if (!c->first) osk__out_put(c->o, ",\n", 2);
  c->first = 0;
}

/* Writes the record `text` (its place map r) again: its ts replaced by `ts`,
 * its dur by `dur` where dur >= 0, and `extra` (JSON members) added to its
 * args (an args object made for them where it has none). The rest is the
 * record as read. */
static void put_record(osk_correct_t *c, const char *text, const raw_t *r, int64_t ts, int64_t dur, const char *extra,
                       size_t extra_n) {
  osk__out_t *o = c->o;
  struct cut {
    uint32_t at, len;
    int what; /* 0 ts, 1 dur, 2 args */
  } cuts[3];
  int n = 0;
  if (r->ts_len) cuts[n++] = (struct cut){r->ts_at, r->ts_len, 0};
  if (dur >= 0 && r->dur_len) cuts[n++] = (struct cut){r->dur_at, r->dur_len, 1};
  int empty_args = 1;
  if (r->args_len) {
    for (uint32_t i = r->args_at + 1; i + 1 < r->args_at + r->args_len && empty_args; i++)
      empty_args = text[i] == ' ' || text[i] == '\n' || text[i] == '\r' || text[i] == '\t';
    cuts[n++] = (struct cut){r->args_at + r->args_len - 1, 0, 2};
  } else {
    cuts[n++] = (struct cut){r->len - 1, 0, 2};
  }
  for (int i = 1; i < n; i++) /* by place */
    for (int j = i; j > 0 && cuts[j].at < cuts[j - 1].at; j--) {
      struct cut x = cuts[j];
      cuts[j] = cuts[j - 1];
      cuts[j - 1] = x;
    }
  put_sep(c);
  uint32_t from = 0;
  for (int i = 0; i < n; i++) {
    put_compact(o, text + from, cuts[i].at - from);
    if (cuts[i].what == 0) {
      osk__out_us(o, ts);
    } else if (cuts[i].what == 1) {
      osk__out_us(o, dur);
    } else if (r->args_len) {
      if (!empty_args) osk__out_put(o, ",", 1);
      osk__out_put(o, extra, extra_n);
    } else {
      osk__out_puts(o, ",\"args\":{");
      osk__out_put(o, extra, extra_n);
      osk__out_put(o, "}", 1);
    }
    from = cuts[i].at + cuts[i].len;
  }
  put_compact(o, text + from, r->len - from);
}

/* A record passed as read: as it was, or with its ts through the caller's
 * clock map where one is set (osk_correct_opts_t.clock_*: every record of
 * the rank moves to the reference clock), its reported ts beside it. */
static void put_passed(osk_correct_t *c, const char *text, const raw_t *r, int64_t ts, int timed) {
  if (timed && (c->opts.clock_offset_ns != 0 || c->opts.clock_drift != 0)) {
    char extra[48], *p = extra;
    memcpy(p, "\"reported_ts\":", 14);
    p = osk__put_us(p + 14, ts);
    put_record(c, text, r, to_clock(c, ts), -1, extra, (size_t)(p - extra));
    return;
  }
  put_sep(c);
  put_compact(c->o, text, r->len);
}

/* A held pipe's passed record, until the output opens (pend). */
typedef struct pend_s {
  raw_t r; /* r.at: in pend */
  int64_t ts;
  int timed;
} pend_t;

/* A record passed as it was read: written now, or, while a pipe is held
 * whole and the output not open yet, kept until it opens. */
static int pass_record(osk_correct_t *c, const osk_reader_event_t *ev) {
  c->stats.passed_events++;
  raw_t r = {0, (uint32_t)ev->text.len, ev->ts_at, ev->ts_len, ev->dur_at, ev->dur_len, ev->args_at, ev->args_len};
  int timed = (ev->has & OSK_READER_EV_TS) && ev->ts_len;
  if (c->o) {
    put_passed(c, ev->text.ptr, &r, ev->ts_ns, timed);
  } else if (c->hold_all && c->want_out) {
    if (osk__grow((void **)&c->pend, &c->cap_pend, c->n_pend + ev->text.len, 1) ||
        osk__grow((void **)&c->pend_rec, &c->cap_pend_rec, c->n_pend_rec + 1, sizeof *c->pend_rec))
      return OSK_ENOMEM;
    memcpy(c->pend + c->n_pend, ev->text.ptr, ev->text.len);
    r.at = c->n_pend;
    c->pend_rec[c->n_pend_rec++] = (pend_t){r, ev->ts_ns, timed};
    c->n_pend += ev->text.len;
  }
  return 0;
}

/* Keeps the record's text (with an output to write it to) and its place map
 * in thread t's; *idx gets its index. */
static int keep_raw(thr_t *t, const osk_reader_event_t *ev, uint32_t *idx) {
  size_t len = t->c->want_out ? ev->text.len : 0;
  if (t->n_raw >= UINT32_MAX - 1 || osk__grow((void **)&t->raw, &t->cap_raw, t->n_raw + 1, sizeof *t->raw) ||
      osk__grow((void **)&t->text, &t->cap_text, t->n_text + len + 1, 1))
    return OSK_ENOMEM;
  memcpy(t->text + t->n_text, ev->text.ptr, len);
  t->raw[t->n_raw] = (raw_t){t->n_text, (uint32_t)len, ev->ts_at, ev->ts_len, ev->dur_at, ev->dur_len,
                             ev->args_at, ev->args_len};
  t->n_text += len;
  *idx = (uint32_t)t->n_raw++;
  return 0;
}

/* A corrected event as written: its text with the written times and
 * opskew's own args beside the others. */
static void write_event(osk_correct_t *c, const thr_t *t, const held_t *e, const line_t *l) {
  char extra[320], *p = extra;
  const raw_t *r = &t->raw[e->raw];
  memcpy(p, "\"reported_ts\":", 14);
  p = osk__put_us(p + 14, e->ts);
  memcpy(p, ",\"reported_dur\":", 16);
  p = osk__put_us(p + 16, e->dur);
  uint64_t ops = 0, py = 0;
  for (size_t k = 0; k < c->n_cls; k++) *(c->cls_py[k] ? &py : &ops) += l->desc[k];
  memcpy(p, ",\"descendants\":", 15);
  p = osk__put_dec(p + 15, ops);
  memcpy(p, ",\"py_descendants\":", 18);
  p = osk__put_dec(p + 18, py);
  if (!c->two) {
    memcpy(p, ",\"class_descendants\":[", 22);
    p += 22;
    for (size_t k = 0; k < c->n_cls; k++) {
      if (k) *p++ = ',';
      p = osk__put_dec(p, l->desc[k]);
    }
    *p++ = ']';
  }
  put_record(c, t->text + r->at, r, l->ws, l->we - l->ws, extra, (size_t)(p - extra));
}

/* A rider as written: its text with its mapped times and reported ones. */
static void write_rider(osk_correct_t *c, const thr_t *t, const rider_t *d) {
  char extra[96], *p = extra;
  const raw_t *r = &t->raw[d->raw];
  memcpy(p, "\"reported_ts\":", 14);
  p = osk__put_us(p + 14, d->ts);
  if (d->dur >= 0) {
    memcpy(p, ",\"reported_dur\":", 16);
    p = osk__put_us(p + 16, d->dur);
  }
  put_record(c, t->text + r->at, r, d->ws, d->dur >= 0 ? d->we - d->ws : -1, extra, (size_t)(p - extra));
  c->stats.retimed_events++;
}

/* ------------------------------------------------------- the compensation */

/* The instrument's cost of one event of the class: outside its interval on
 * each side (`half`) and inside it (`delta`). */
static void cost_of(const osk__cost_t *k, uint32_t cls, double *half, double *delta) {
  *delta = k->delta[cls];
  *half = (k->w[cls] - *delta) / 2.0;
}

/* sum over classes of W(k) x n[k], in class order. */
static double class_cost(const osk__cost_t *k, const uint64_t *n, size_t n_cls) {
  double s = 0.0;
  for (size_t i = 0; i < n_cls; i++) s += k->w[i] * (double)n[i];
  return s;
}

static void event_cost(const osk_correct_t *c, uint32_t cls, double *half, double *delta) {
  cost_of(&c->cost, cls, half, delta);
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

/* How many of the sorted a[0..n) lie in (lo, hi); hi > INT64_MIN, and lo
 * INT64_MIN counts from the start. */
static size_t count_in(const int64_t *a, size_t n, int64_t lo, int64_t hi) {
  size_t below = lo == INT64_MIN ? 0 : osk__count_below(a, n, lo + 1), upto = osk__count_below(a, n, hi);
  return upto > below ? upto - below : 0;
}

/* The instrument time that the other threads of thread `self`'s process
 * placed in (lo, hi): (W + delta)/2 at each event's start (the share before
 * its begin and the one inside it), (W - delta)/2 at its end, as their own
 * time lines take it; and *cnt, the number of their events that start
 * there, per class. lo and hi are two consecutive boundaries of `self`,
 * which begins and ends no event strictly between them (an event closed
 * early by one that outlives it aside): the process's merged starts and ends
 * there are other threads'. (What lies at lo exactly is not counted.) */
static double others(const osk_correct_t *c, size_t self, int64_t lo, int64_t hi, uint64_t cnt[OSK__NCLS]) {
  for (int k = 0; k < OSK__NCLS; k++) cnt[k] = 0;
  if (self >= c->n_proc || !c->proc[self] || c->proc[self] > c->n_xp) return 0.0;
  const xprof_t *x = &c->xp[c->proc[self] - 1];
  double sum = 0.0;
  for (size_t k = 0; k < c->n_cls; k++) {
    if (!x->n[k]) continue;
    double half, delta;
    event_cost(c, (uint32_t)k, &half, &delta);
    cnt[k] = count_in(x->ts[k], x->n[k], lo, hi);
    sum += (half + delta) * (double)cnt[k] + half * (double)count_in(x->te[k], x->n[k], lo, hi);
  }
  return sum;
}

/* The cross-thread rule. The interval before the boundary reported at r,
 * since the thread's last one, is the self time of the open event `in`, or
 * time between the thread's top-level trees (`in` NULL), or, before its
 * first boundary, all the trace before it. Events of other threads of its
 * process that start in it ran while this thread waited for them (the
 * autograd engine runs a CUDA backward on a thread of its own while the
 * caller waits inside its step; the engine's thread waits between backwards
 * while the caller runs), so the interval shrinks by their instrument time
 * too, as far as it has room: never before the last boundary placed, so that
 * no debt comes of it (an interval with less room than that was not all
 * waiting). Inside an event that is the event's waited time; elsewhere it
 * only moves the thread's later events with the others', so that the
 * threads stay aligned in the corrected trace. */
static void waited(thr_t *t, int64_t r, const int64_t *debt, osk__nest_frame_t *in) {
  osk_correct_t *c = t->c;
  if (!c->xp_ready || (t->have_r && r <= t->last_r)) return;
  uint64_t cnt[OSK__NCLS];
  double o = others(c, t->id, t->have_r ? t->last_r : INT64_MIN, r, cnt);
  if (in) {
    /* Counted whatever W is (opskew.profile counts a step's events at W = 0). */
    for (int k = 0; k < OSK__NCLS; k++) in->wdesc[k] += cnt[k];
  }
  if (!(o > 0)) return;
  double want = t->removed + (debt ? (double)*debt : 0.0);
  double room = t->have_r ? floor((double)moved_back(r, want) - (double)t->last2) : o;
  if (!(room > 0)) return;
  double e = o < room ? o : room;
  t->removed += e;
  if (in) {
    in->wait_ns += e;
    c->stats.waited_ns += e;
  }
}

/* Places the boundary reported at r on the compressed time line: back by
 * the instrument time removed so far plus *debt, what the event whose self
 * time the interval before r belongs to still owes. Where the interval is
 * too short for that (an over-compensating W: a gap between siblings under
 * W - delta, nested ends closer than (W - delta)/2), the boundary stays at
 * the latest one placed and the shortfall stays in *debt, to be taken from
 * that event's later self time, not from the event that begins or ends
 * here. debt NULL: the shortfall is dropped (the time line's old rule).
 * `in`: the open event whose self time the interval before r is (waited()). */
static int64_t place(thr_t *t, int64_t r, int64_t *debt, osk__nest_frame_t *in) {
  waited(t, r, debt, in);
  double want = t->removed + (debt ? (double)*debt : 0.0);
  int64_t p = moved_back(r, want);
  int64_t shortfall = 0;
  if (p < t->last2) {
    shortfall = osk__sat_add(t->last2, -p);
    p = t->last2;
  }
  if (debt) {
    t->removed = want - (double)shortfall;
    *debt = shortfall;
  }
  t->last2 = p;
  t->last_r = r;
  t->have_r = 1;
  return p;
}

/* The duration an event is written at: its corrected one to the whole ns,
 * at least 1 ns where it reported any (so that the written trace nests as
 * the reported one did: of equal start, the longer event is the parent). */
static int64_t written_dur(const line_t *l, const held_t *e) {
  int64_t d = llround(l->want), least = e->dur > 0 ? 1 : 0;
  return d > least ? d : least;
}

/* The structural order of boundaries of equal place: rank, from the tree's
 * nesting (a parent's begin before its children's, their ends before its). */
static int cmp_point(const void *pa, const void *pb) {
  const point_t *a = pa, *b = pb;
  if (a->v != b->v) return a->v < b->v ? -1 : 1;
  return (a->rank > b->rank) - (a->rank < b->rank);
}

/* Event i's children, as fitted, outlast its corrected duration by `need`
 * ns: the instrument time the formula takes out of i (W per event inside
 * it) lies in its descendants' own time, not in its self time (under
 * with_stack W per operator event holds the interpreter's slowdown, which ran
 * in the Python frames around the operators). It is taken from the self
 * time of i's descendants that have children of their own, in proportion to
 * it (no leaf's time, even one that an event outlived: a leaf's instrument
 * time is its delta), so that i
 * keeps its corrected duration; those are written shorter. Returns what was
 * taken (at most need). */
static int64_t give_back(relay_scratch_t *rs, const line_t *l, size_t i, int64_t need) {
  const uint32_t *owner = rs->owner, *last = rs->stack;
  int64_t *len = rs->len;
  double room = 0.0;
  for (size_t j = rs->pos_b[i]; j < rs->pos_e[i]; j++) {
    uint32_t o = owner[j];
    if (o > i && o <= last[i] && !rs->leafy[j] && has_desc(&l[o]))
      room += (double)len[j];
  }
  if (!(room > 0)) return 0;
  double f = (double)need < room ? (double)need / room : 1.0, acc = 0.0;
  int64_t taken = 0;
  for (size_t j = rs->pos_b[i]; j < rs->pos_e[i]; j++) {
    uint32_t o = owner[j];
    if (!(o > i && o <= last[i] && !rs->leafy[j] && has_desc(&l[o])))
      continue;
    acc += f * (double)len[j];
    int64_t upto = llround(acc), cut = upto - taken;
    if (cut > len[j]) cut = len[j];
    if (cut > need - taken) cut = need - taken;
    if (cut < 0) cut = 0;
    len[j] -= cut;
    taken += cut;
  }
  return taken;
}

/* A closed top-level tree of n events (lines 0..n, the root first, parents
 * before children), placed by the forward pass (place()), is fitted: every
 * event is written at its corrected duration (the formula's total, `want`,
 * to the nanosecond: written_dur), so that the corrected trace, its summary and the
 * table say the same (docs/correct.md, "One time line"). The forward pass
 * can only carry a shortfall forward, into later self time: under with_stack
 * W per operator event holds the interpreter's slowdown, which ran in the
 * Python frames' self time before the operators whose gaps cannot hold it,
 * and (W - delta)/2 after an end lands in the gap to the parent's end, which
 * may be shorter; so its events come out longer or shorter than their
 * corrected durations.
 *
 * The fit keeps the forward pass's order of boundaries (ties in the tree's
 * structural order) and chooses the length of each interval between two
 * consecutive boundaries. Each interval belongs to the innermost event that
 * holds it (the latest in pre-order): that event's self time, or a leaf's
 * time. In reverse pre-order, each event's own intervals get what its
 * corrected duration leaves after the intervals of the events inside it
 * (fitted already), shared in proportion to their forward lengths (evenly
 * where those are all 0); none below 0: where its children's durations
 * outlast its own, what they take beyond it comes out of the self time of
 * its descendants that have children (give_back), and what that cannot
 * hold (its leaves alone outlast it: an over-compensating W, a clamped
 * child) is written longer. A Python event clipped at its parent's end (osk__nest_push) ends
 * its range there, and is written past it by its forward tail, as reported.
 * The thread's line goes on from the root's fitted end. Returns 0, or
 * OSK_ENOMEM. */
static int fit(thr_t *t, const held_t *ev, size_t n) {
  osk_correct_t *c = t->c;
  line_t *l = t->line;
  if (!n) return 0;
  int64_t root_end = l[0].end2 > l[0].ts2 ? l[0].end2 : l[0].ts2;
  if (n == 1) {
    l[0].end2 = l[0].ts2 + written_dur(&l[0], &ev[0]);
  } else {
    relay_scratch_t *rs = &t->relay;
    if (relay_scratch_reserve(rs, n)) return OSK_ENOMEM;
    point_t *pt = rs->pt;
    int64_t *fwd = rs->fwd, *len = rs->len, *x = rs->x, *re = rs->re, *tail = rs->tail;
    uint32_t *owner = rs->owner, *pos_b = rs->pos_b, *pos_e = rs->pos_e, *stk = rs->stack;
    size_t m = 2 * n, k = 0, top = 0;
    /* The boundaries, in the tree's structural order (rank): a stack by
     * parent links. A range stays inside its parent's on the forward line;
     * a clipped event's range ends with its parent's. */
    for (size_t i = 0; i < n; i++) {
      uint32_t p = l[i].parent;
      while (top && stk[top - 1] != p) {
        uint32_t e = stk[--top];
        pt[k] = (point_t){re[e], (uint32_t)k, e, 1};
        k++;
      }
      int64_t b = l[i].ts2, e = l[i].end2 > b ? l[i].end2 : b;
      tail[i] = 0;
      if (p != UINT32_MAX) {
        /* Past its parent's range (clipped there, or closed early by an
         * event that outlived it after its parent's end): the rest is its
         * tail, written as placed. */
        if (b < l[p].ts2) b = l[p].ts2;
        if (l[i].clipped || e > re[p]) {
          tail[i] = e > re[p] ? e - re[p] : 0;
          e = re[p];
        }
        if (e < b) e = b;
      }
      l[i].ts2 = b;
      re[i] = e;
      pt[k] = (point_t){b, (uint32_t)k, (uint32_t)i, 0};
      k++;
      stk[top++] = (uint32_t)i;
    }
    while (top) {
      uint32_t e = stk[--top];
      pt[k] = (point_t){re[e], (uint32_t)k, e, 1};
      k++;
    }
    /* Time order, ties by rank: nearly sorted already (improper overlaps
     * aside), so an insertion sort, or qsort where that would take long. */
    size_t shifts = 0;
    for (size_t i = 1; i < m && shifts <= 4 * m; i++) {
      point_t v = pt[i];
      size_t j = i;
      for (; j && cmp_point(&pt[j - 1], &v) > 0 && shifts <= 4 * m; j--, shifts++) pt[j] = pt[j - 1];
      pt[j] = v;
    }
    if (shifts > 4 * m) qsort(pt, m, sizeof *pt, cmp_point);
    for (size_t i = 0; i < m; i++) {
      if (pt[i].end) pos_e[pt[i].ev] = (uint32_t)i;
      else pos_b[pt[i].ev] = (uint32_t)i;
      if (i + 1 < m) fwd[i] = pt[i + 1].v - pt[i].v;
    }
    /* Each interval's owner: the lines are in pre-order, so an event inside
     * another comes after it and takes its intervals. */
    memset(rs->leafy, 0, m);
    for (size_t i = 0; i < n; i++) {
      int leaf = !has_desc(&l[i]);
      for (size_t j = pos_b[i]; j < pos_e[i]; j++) {
        owner[j] = (uint32_t)i;
        if (leaf) rs->leafy[j] = 1;
      }
    }
    /* Each event's last descendant (pre-order: its descendants follow it),
     * in the structural stack's room. */
    uint32_t *last = stk;
    for (size_t i = 0; i < n; i++) last[i] = (uint32_t)i;
    for (size_t i = n; i-- > 1;)
      if (l[i].parent != UINT32_MAX && last[l[i].parent] < last[i]) last[l[i].parent] = last[i];
    for (size_t i = n; i-- > 0;) {
      int64_t fixed = 0;
      double own_fwd = 0.0;
      size_t own = 0;
      int leaf = !has_desc(&l[i]);
      for (size_t j = pos_b[i]; j < pos_e[i]; j++) {
        if (owner[j] == i && !leaf && rs->leafy[j]) {
          /* Its own, and an outlived leaf's too (the leaf's time after
           * i's begin): the leaf's length as placed, for the leaf's sake. */
          len[j] = fwd[j];
          owner[j] = UINT32_MAX;
        }
        if (owner[j] == i) {
          own_fwd += (double)fwd[j];
          own++;
        } else {
          fixed = osk__sat_add(fixed, len[j]);
        }
      }
      int64_t target = written_dur(&l[i], &ev[i]) - tail[i] - fixed;
      if (target < 0) target = osk__sat_add(target, give_back(rs, l, i, osk__sat_add(0, -target)));
      if (target < 0) target = 0;
      /* Shared in proportion, rounded as it accumulates: the last one takes
       * what is left, so they sum to the target exactly. */
      double acc = 0.0;
      int64_t given = 0;
      size_t seen = 0;
      for (size_t j = pos_b[i]; j < pos_e[i] && seen < own; j++) {
        if (owner[j] != i) continue;
        if (++seen == own) {
          len[j] = target - given;
          break;
        }
        acc += own_fwd > 0 ? (double)target * (double)fwd[j] / own_fwd : (double)target / (double)own;
        int64_t upto = llround(acc);
        if (upto > target) upto = target;
        if (upto < given) upto = given;
        len[j] = upto - given;
        given = upto;
      }
    }
    x[0] = pt[0].v;
    for (size_t i = 0; i + 1 < m; i++) x[i + 1] = osk__sat_add(x[i], len[i]);
    for (size_t i = 0; i < n; i++) {
      l[i].ts2 = x[pos_b[i]];
      /* A clipped event begins after its parent (else, of equal start and
       * longer, it would nest outside it): without room for that, it ends
       * with its parent. */
      int64_t tl = tail[i];
      if (tl && l[i].ts2 <= l[l[i].parent].ts2) tl = 0;
      l[i].end2 = osk__sat_add(x[pos_e[i]], tl);
    }
  }
  /* The thread's line goes on from the root's fitted end: the time after
   * it moves as the end did, and what the root owed the time after it is
   * settled. */
  if (l[0].early) { /* its end lies past a later begin, placed after it */
    t->debt = 0;
    return 0;
  }
  int64_t shift = root_end - l[0].end2;
  if (shift > 1 || shift < -1) {
    c->stats.relaid++;
    c->stats.relaid_ns += (double)(shift > 0 ? shift : -shift);
  }
  t->removed += (double)shift;
  t->last2 = t->last2 >= root_end ? osk__sat_add(t->last2, -shift) : l[0].end2;
  t->debt = 0;
  return 0;
}

/* The readback's close: an event's corrected self time as the summary of
 * the corrected trace reads it (summary.c's on_close: its written span up to
 * where it was closed, less its children's written time inside it). */
static int rb_close(void *ctx, osk__nest_frame_t *f, const osk__nest_frame_t *parent, int64_t cut) {
  thr_t *t = ctx;
  (void)parent;
  if (f->name == UINT32_MAX) return 0; /* a rider: no operator's */
  int64_t self = osk__nest_self(f, cut);
  t->c->ops[f->name].corrected_self_ns += self > 0 ? (double)self : 0.0;
  return 0;
}

/* The boundaries of a tree in reported time (v), in the order a time point
 * meets them: at equal times ends first, innermost first, then begins,
 * outermost first (rank). */
static int cmp_bound(const void *pa, const void *pb) {
  const point_t *a = pa, *b = pb;
  if (a->v != b->v) return a->v < b->v ? -1 : 1;
  if (a->end != b->end) return a->end ? -1 : 1;
  return (a->rank > b->rank) - (a->rank < b->rank);
}

/* The tree's map from reported time to written time: its boundaries sorted
 * (rs->pt, m of them), each one's written place (rs->x), made monotone. */
typedef struct {
  const point_t *pt;
  int64_t *x;
  size_t m;
} tmap_t;

static void tmap_places(tmap_t *mp, const line_t *l) {
  for (size_t k = 0; k < mp->m; k++) {
    const point_t *q = &mp->pt[k];
    mp->x[k] = q->end ? l[q->ev].we : l[q->ev].ws;
    if (k && mp->x[k] < mp->x[k - 1]) mp->x[k] = mp->x[k - 1];
  }
}

/* r between boundaries a and b (a < 0: before the first; b == m: after the
 * last), in proportion. */
static int64_t tmap_between(const tmap_t *mp, size_t a, size_t b, int64_t r) {
  if (a == SIZE_MAX) return osk__sat_add(r, mp->x[0] - mp->pt[0].v);
  if (b >= mp->m) return osk__sat_add(r, mp->x[a] - mp->pt[a].v);
  double f = (double)(r - mp->pt[a].v) / (double)(mp->pt[b].v - mp->pt[a].v);
  int64_t w = mp->x[a] + llround(f * (double)(mp->x[b] - mp->x[a]));
  return w < mp->x[a] ? mp->x[a] : w > mp->x[b] ? mp->x[b] : w;
}

/* The written place of a point, or of a begin, reported at r: inside the
 * innermost event holding it; at an event's begin, at its written begin. */
static int64_t tmap_begin(const tmap_t *mp, int64_t r) {
  size_t lo = 0, hi = mp->m; /* the first boundary after r */
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (mp->pt[mid].v <= r) lo = mid + 1;
    else hi = mid;
  }
  if (lo && mp->pt[lo - 1].v == r) return mp->x[lo - 1]; /* the innermost begin there, or the outermost end */
  return tmap_between(mp, lo ? lo - 1 : SIZE_MAX, lo, r);
}

/* The written place of an end reported at r: at an event's end, at its
 * written end (the innermost's). */
static int64_t tmap_end(const tmap_t *mp, int64_t r) {
  size_t lo = 0, hi = mp->m; /* the first boundary at or after r */
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (mp->pt[mid].v < r) lo = mid + 1;
    else hi = mid;
  }
  if (lo < mp->m && mp->pt[lo].v == r) return mp->x[lo];
  return tmap_between(mp, lo ? lo - 1 : SIZE_MAX, lo, r);
}

/* The first of the tree's n events (in pre-order, so by reported begin)
 * that begins after r, or n. */
static size_t first_after(const held_t *ev, size_t n, int64_t r) {
  size_t lo = 0, hi = n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (ev[mid].ts <= r) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/* A tree of n events (fitted) and its riders [r0, r1) as they are written:
 * through the caller's clock map, and so that a float64 reader of the text
 * nests them as the exact reading does (osk__f64_fix: an end that does not
 * read exactly and lies within float64's reach of another boundary, read
 * crossed with it, is moved earlier; the tree moved later, whole, off the
 * previous tree's inexact end; docs/outputs.md, "Read as float64"). The
 * riders' times are mapped by the tree's fitted boundaries (docs/correct.md,
 * "The twin"): a point into the innermost event holding it, a complete
 * event's end likewise, and kept inside the event that held it. Sets each
 * line's ws, we and each rider's. */
static int float_safe(thr_t *t, size_t n, size_t r0, size_t r1) {
  osk_correct_t *c = t->c;
  line_t *l = t->line;
  const held_t *ev = t->buf + t->tree_begin;
  osk__f64_tree_t *f = &c->f64;
  size_t q = 0; /* complete riders */
  for (size_t k = r0; k < r1; k++) q += t->rid[k].dur >= 0;
  if (osk__f64_reserve(f, n + q)) return OSK_ENOMEM;
  for (size_t i = 0; i < n; i++) {
    f->s[i] = osk__sat_add(to_clock(c, l[i].ts2), t->fnudge);
    f->e[i] = osk__sat_add(to_clock(c, l[i].end2), t->fnudge);
    if (f->e[i] < f->s[i]) f->e[i] = f->s[i];
    f->parent[i] = l[i].parent;
    f->mark[i] = 0;
  }
  relay_scratch_t *rs = &t->relay; /* fit's, free again */
  if (relay_scratch_reserve(rs, n)) return OSK_ENOMEM;
  int64_t *base = rs->tail; /* each event's written duration before the rule */
  c->stats.float_moved_ns += (double)osk__f64_place(&t->fline, f, n, &t->fnudge);
  if (t->have_rider_after && n && f->s[0] <= t->rider_after) {
    /* The previous tree was closed early by this one's root, and a rider of
     * it (a runtime call, a flow that began before this root) is written at
     * or after this root's place: the tree is written later, whole, so that
     * the rider still begins before it, as it did (docs/correct.md, "The
     * twin"). */
    int64_t k = t->rider_after + 1 - f->s[0];
    for (size_t i = 0; i < n; i++) {
      f->s[i] += k;
      f->e[i] += k;
    }
    t->fnudge += k;
    c->stats.float_moved_ns += (double)k;
  }
  t->have_rider_after = 0;
  for (size_t i = 0; i < n; i++) base[i] = f->e[i] - f->s[i];
  if (l[0].early) memset(f->mark, 1, n); /* the next tree begins inside it */
  uint64_t before = f->moved;
  int64_t lost;
  if (osk__f64_fix(f, n, t->fline.kept, t->fline.n_kept, &lost)) return OSK_ENOMEM;
  c->stats.float_moved_ns += (double)lost;
  for (size_t i = 0; i < n; i++) {
    l[i].ws = f->s[i];
    l[i].we = f->e[i];
  }
  if (r1 > r0) {
    /* The map. Each rider begins where it began among the events: an event
     * that began after it in the trace, written at or before its place (the
     * interval between them written 0 ns long), begins 1 ns after it. */
    point_t *pt = rs->pt;
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
      pt[m++] = (point_t){ev[i].ts, (uint32_t)i, (uint32_t)i, 0};
      /* Not the end of an event outlived (closed early) or clipped at its
       * parent's end: that one stays as reported, after later begins. */
      if (!l[i].early && !l[i].clipped)
        pt[m++] = (point_t){osk__sat_add(ev[i].ts, ev[i].dur), (uint32_t)(n - i), (uint32_t)i, 1};
    }
    qsort(pt, m, sizeof *pt, cmp_bound);
    tmap_t mp = {pt, rs->x, m};
    tmap_places(&mp, l);
    int nudged = 0;
    for (size_t d = r0; d < r1; d++) {
      rider_t *rd = &t->rid[d];
      int64_t w = tmap_begin(&mp, rd->ts);
      rd->ws = w;
      for (size_t j = first_after(ev, n, rd->ts); j < n && l[j].ws <= w; j++) {
        if (l[j].ws < w) continue; /* written before it: not the map's doing */
        l[j].ws = w + 1;
        if (l[j].we < l[j].ws) l[j].we = l[j].ws;
        nudged = 1;
      }
    }
    if (nudged) tmap_places(&mp, l);
    /* The complete riders: each inside the innermost event that held it
     * (the stack of the reported boundaries), its end mapped as an end. */
    uint32_t *stk = rs->stack;
    size_t top = 0, k = 0, j = n;
    for (size_t d = r0; d < r1; d++) {
      rider_t *rd = &t->rid[d];
      if (rd->dur < 0) continue;
      for (; k < m && pt[k].v <= rd->ts; k++) {
        if (!pt[k].end) {
          stk[top++] = pt[k].ev;
        } else {
          for (size_t z = top; z-- > 0;)
            if (stk[z] == pt[k].ev) {
              memmove(stk + z, stk + z + 1, (top - z - 1) * sizeof *stk);
              top--;
              break;
            }
        }
      }
      int64_t rend = osk__sat_add(rd->ts, rd->dur);
      uint32_t holder = UINT32_MAX;
      for (size_t z = top; z-- > 0 && holder == UINT32_MAX;)
        if (osk__sat_add(ev[stk[z]].ts, ev[stk[z]].dur) >= rend) holder = stk[z];
      f->s[j] = rd->ws;
      f->e[j] = tmap_end(&mp, rend);
      if (f->e[j] < f->s[j]) f->e[j] = f->s[j];
      f->parent[j] = holder;
      f->mark[j] = 0;
      j++;
    }
    if (q || nudged) {
      /* Again, the events as moved, with the complete riders among them. */
      for (size_t i = 0; i < n; i++) {
        f->s[i] = l[i].ws;
        f->e[i] = l[i].we;
      }
      if (osk__f64_fix(f, n + q, t->fline.kept, t->fline.n_kept, &lost)) return OSK_ENOMEM;
      c->stats.float_moved_ns += (double)lost;
      for (size_t i = 0; i < n; i++) {
        l[i].ws = f->s[i];
        l[i].we = f->e[i];
      }
      tmap_places(&mp, l);
    }
    j = n;
    for (size_t d = r0; d < r1; d++) {
      rider_t *rd = &t->rid[d];
      if (rd->dur >= 0) {
        rd->ws = f->s[j];
        rd->we = f->e[j];
        j++;
      } else {
        /* A point, among the events as written: before the first event that
         * began after it. */
        int64_t w = tmap_begin(&mp, rd->ts);
        size_t a = first_after(ev, n, rd->ts);
        if (a < n && w >= l[a].ws) w = l[a].ws - 1;
        rd->ws = rd->we = w;
      }
    }
  }
  c->stats.float_moved += f->moved - before;
  osk__f64_done(&t->fline, l[0].ws, l[0].we);
  for (size_t i = 0; i < n; i++) {
    c->ops[ev[i].name].float_ns += (double)(base[i] - (l[i].we - l[i].ws));
    /* Ends that may lie in the next tree: past the root's (a clipped
     * Python tail), or of an event outlived with the root. */
    if ((l[0].early && l[i].early) || l[i].we > l[0].we)
      if (osk__f64_keep(&t->fline, l[i].we)) return OSK_ENOMEM;
  }
  return 0;
}

/* Riders outside the thread's trees, [r0, r1), before the tree that begins
 * at reported `next_r`, written at `next_w` (next_r INT64_MAX: after the
 * thread's last tree): mapped in proportion between the previous tree's end
 * and that begin (moved as the nearer one moved where there is no such
 * pair); a complete one's end read exactly, its begin out of reach of an
 * inexact end of the previous tree (`prev`, as it was before the next tree). */
static void place_gap(thr_t *t, size_t r0, size_t r1, int64_t next_r, int64_t next_w, const osk__f64_line_t *prev) {
  for (size_t d = r0; d < r1; d++) {
    rider_t *rd = &t->rid[d];
    int64_t w;
    int64_t rend = rd->dur >= 0 ? osk__sat_add(rd->ts, rd->dur) : rd->ts;
    int64_t we;
    if (t->have_prev && next_r != INT64_MAX && next_r > t->prev_r) {
      double span = (double)(next_r - t->prev_r), room = (double)(next_w - t->prev_w);
      w = t->prev_w + llround(room * (double)(rd->ts - t->prev_r) / span);
      we = t->prev_w + llround(room * (double)(rend - t->prev_r) / span);
      if (w > next_w && rd->ts <= next_r) w = next_w;
      if (we > next_w && rend <= next_r) we = next_w;
    } else if (t->have_prev) {
      w = osk__sat_add(rd->ts, t->prev_w - t->prev_r);
      we = osk__sat_add(rend, t->prev_w - t->prev_r);
    } else if (next_r != INT64_MAX) {
      w = osk__sat_add(rd->ts, next_w - next_r);
      we = osk__sat_add(rend, next_w - next_r);
    } else {
      w = to_clock(t->c, rd->ts);
      we = to_clock(t->c, rend);
    }
    if (we < w) we = w;
    if (rd->dur >= 0) {
      if (prev->valid && !prev->end_exact && w >= prev->end)
        while (w < we && osk__f64_near(prev->end, w)) w++;
      we = osk__f64_exact_end(w, we);
    }
    rd->ws = w;
    rd->we = we;
  }
}

/* Writes placed riders [r0, r1) whose kind `complete` says (complete ones
 * read back as the summary of the written trace nests them, a name of no
 * operator's), and marks them written. */
static int put_riders(thr_t *t, size_t r0, size_t r1, int complete) {
  osk_correct_t *c = t->c;
  for (size_t d = r0; d < r1; d++) {
    rider_t *rd = &t->rid[d];
    if ((rd->dur >= 0) != complete) continue;
    if (complete) {
      int rc = osk__nest_push(&t->rb, rd->ws, rd->we - rd->ws, UINT32_MAX, OSK__CLS_OP, 0, rb_close, t, NULL);
      if (rc) return rc;
    }
    if (c->o) write_rider(c, t, rd);
    rd->done = 1;
  }
  return 0;
}

/* One event of the corrected time line as written (float_safe's times, as
 * write_event writes them), read back in the order written:
 * its corrected total time is its written duration, its self time what
 * rb_close finds. So the table and the summary of the corrected trace agree
 * to the nanosecond, whatever the fit could not give an event. */
static int readback(thr_t *t, const held_t *e, const line_t *l, int root) {
  osk_correct_t *c = t->c;
  int64_t ts = l->ws, dur = l->we - l->ws;
  c->ops[e->name].corrected_total_ns += (double)dur;
  if (root) c->stats.corrected_top_ns += (double)dur;
  uint32_t cls = class_of(c, e->cat);
  return osk__nest_push(&t->rb, ts, dur, e->name, cls, c->cls_py[cls], rb_close, t, NULL);
}

/* The nesting rule closed x: correct it (osk__correct_event), account it,
 * and place its end on the compressed time line. When x is a top-level
 * event, its tree (every event pushed since the tree began) is complete: it
 * is written, parents first, and its lines are reused for the next tree. */
static int on_close(void *ctx, osk__nest_frame_t *x, const osk__nest_frame_t *parent, int64_t cut) {
  thr_t *t = ctx;
  osk_correct_t *c = t->c;
  double half, delta;
  line_t *l = &t->line[(size_t)x->user[0] - t->tree_begin];
  osk__cost_t cost = cost_for(c, x->name, x->cls, l->scale);
  cost_of(&cost, x->cls, &half, &delta);
  int64_t begin2 = l->ts2;
  /* A span's trim still due comes out of x's self time here, after its
   * last child; what does not fit stretches x, as a debt does. */
  int64_t end = x->start + x->dur, debt = osk__sat_add(l->debt, l->trim), end2;
  if (cut < end || x->end < end) {
    /* Closed early: an event beginning at `cut` outlives x (an improper
     * overlap; with_stack's __enter__ and __exit__ events around a
     * record_function), so x's end lies after a begin the time line has not
     * placed yet. Placing it first moved that begin, and everything after
     * it, to x's end (events shifted and shortened even at W = 0). x's end
     * is moved back by what was removed so far, and the line is left where
     * it is: the overlap stays as reported. So for a Python event clipped at
     * the end of the operator it outlives (osk__nest_push: the frame around
     * optimizer.step() that ends in the next ProfilerStep): its end lies
     * past its parent's, which is not placed yet. */
    end2 = moved_back(end, t->removed + (double)debt);
    debt = 0;
    if (end2 < t->last2) {
      /* Its children's ends are placed already: it ends at the last, and
       * owes its parent the rest, as place() has it. */
      debt = osk__sat_add(t->last2, -end2);
      end2 = t->last2;
    }
  } else {
    /* The compressed end: every instrument nanosecond before it is
     * removed, as far as x's own self time holds what x owes. */
    end2 = place(t, end, &debt, x);
  }
  if (end2 < begin2) end2 = begin2;
  t->removed += half;
  l->end2 = end2;
  l->parent = parent ? (uint32_t)((size_t)parent->user[0] - t->tree_begin) : UINT32_MAX;
  l->clipped = cut == INT64_MAX && x->end < x->start + x->dur;
  l->early = cut < end;
  /* What x's self time could not hold (its children's corrected durations
   * outlast its own): x is written longer by that, its parent owes it. */
  int64_t *owed = parent ? &t->line[(size_t)parent->user[0] - t->tree_begin].debt : &t->debt;
  *owed = osk__sat_add(*owed, debt);
  for (int k = 0; k < OSK__NCLS; k++) l->desc[k] = (uint32_t)x->desc[k];
  /* A span's trim comes off x's corrected duration as its waited time does,
   * and so does what its descendants cost beyond x's own scale (a scaled
   * subtree inside it: span_w_scale). */
  int64_t trim = 0;
  double beyond_scale = 0;
  if (c->n_named) { /* spans given: none of this otherwise */
    trim = span_trim(c, x->name, x->dur, delta);
    beyond_scale = l->dcost - class_cost(&cost, x->desc, c->n_cls);
    if (fabs(beyond_scale) < 1e-6 * (l->dcost + 1.0)) beyond_scale = 0; /* the rounding of equal scales */
    if (parent) {
      line_t *pline = &t->line[(size_t)parent->user[0] - t->tree_begin];
      pline->dcost += l->dcost + cost.w[x->cls];
    }
  }
  osk__corrected_t k = osk__correct_event(&cost, x->cls, x->dur, x->desc, c->n_cls,
                                          x->wait_ns + (double)trim + beyond_scale, x->child_corr_ns);
  x->corr_ns = k.raw_ns;
  if (cut == INT64_MAX && x->end < x->start + x->dur) {
    /* Clipped at its parent's end (a Python event outliving an operator):
     * its end was placed as reported past the parent's, which is placed
     * after it, moved back by x's own share after its end too. What the
     * parent holds of it, as the corrected trace is written, is its
     * corrected duration less that tail. */
    x->corr_in_ns = k.raw_ns - (double)(x->start + x->dur - x->end) - half;
    x->has_corr_in = 1;
  }
  osk_correct_op_t *op = &c->ops[x->name];
  op->calls++;
  /* Reported self time ends where x was closed (summary.c's rule, so both
   * read the same self time): at `cut` when a later event outlived x, at
   * its parent's end when it was clipped there. The corrected self and
   * total times are read back from the corrected time line as written
   * (readback), as the summary of the corrected trace reads them. */
  int64_t rself = osk__nest_self(x, cut);
  op->reported_total_ns += x->dur;
  op->reported_self_ns += rself > 0 ? rself : 0;
  for (size_t k = 0; k < c->n_cls; k++) {
    op->class_descendants[k] += x->desc[k];
    *(c->cls_py[k] ? &op->py_descendants : &op->descendants) += x->desc[k];
    *(c->cls_py[k] ? &op->waited_py_descendants : &op->waited_descendants) += x->wdesc[k];
  }
  op->waited_ns += x->wait_ns;
  if (c->n_named) {
    /* What the scales and the own deltas above W (x's and its
     * descendants') took out beyond W's. */
    double d0, h0;
    osk__cost_t base = cost_for(c, x->name, x->cls, 1.0); /* its own delta is no scale's */
    cost_of(&base, x->cls, &h0, &d0);
    double scaled = delta - d0 + l->dcost - class_cost(&c->cost, x->desc, c->n_cls);
    if (fabs(scaled) > 1e-6 * (l->dcost + 1.0)) op->scaled_ns += scaled;
    /* Each event's own cost beyond W (a scale, an own delta above it), once. */
    c->stats.scaled_ns += cost.w[x->cls] - c->cost.w[x->cls];
    if (trim) {
      op->trimmed_ns += (double)trim;
      c->stats.trimmed++;
      c->stats.trimmed_ns += (double)trim;
    }
  }
  l->want = k.total_ns;
  if (k.residual_ns > 0) {
    op->clamped++;
    op->residual_ns += k.residual_ns;
    c->stats.clamped++;
    c->stats.residual_ns += k.residual_ns;
  }
  if (!parent) {
    c->stats.reported_top_ns += x->dur;
    /* The stack is empty: every event pushed since the tree began closed. */
    size_t n = t->pushing - t->tree_begin;
    const held_t *ev = t->buf + t->tree_begin;
    int64_t root_r = ev[0].ts, root_end_r = osk__sat_add(ev[0].ts, ev[0].dur);
    /* The riders before it (between the previous tree and it), and inside
     * it (from its begin to its end, or to the begin of the next tree where
     * that one outlives it: what lies after is the next tree's). */
    size_t g0 = t->rid_pos, g1 = g0;
    while (g1 < t->n_rid && t->rid[g1].ts < root_r) g1++;
    size_t r1 = g1;
    int64_t upto = cut < root_end_r ? cut : root_end_r;
    while (r1 < t->n_rid && t->rid[r1].ts < upto) r1++;
    t->rid_pos = r1;
    osk__f64_line_t prev = t->fline;
    if (fit(t, ev, n) || float_safe(t, n, g1, r1)) return OSK_ENOMEM;
    place_gap(t, g0, g1, root_r, t->line[0].ws, &prev);
    if (t->line[0].early)
      for (size_t d = g1; d < r1; d++)
        if (!t->have_rider_after || t->rid[d].ws > t->rider_after) {
          t->rider_after = t->rid[d].ws;
          t->have_rider_after = 1;
        }
    int rc = put_riders(t, g0, g1, 1);
    if (!rc) rc = put_riders(t, g0, g1, 0);
    if (rc) return rc;
    /* The tree's events in their order, each complete rider before the
     * first event it begins before (or, beginning with it, outlasts). */
    size_t d = g1;
    for (size_t i = 0; i <= n; i++) {
      const line_t *li = i < n ? &t->line[i] : NULL;
      for (; d < r1; d++) {
        rider_t *rd = &t->rid[d];
        if (rd->dur < 0) continue;
        if (li && (rd->ws > li->ws || (rd->ws == li->ws && rd->we - rd->ws <= li->we - li->ws))) break;
        if ((rc = put_riders(t, d, d + 1, 1))) return rc;
      }
      if (!li) break;
      rc = readback(t, &ev[i], li, i == 0);
      if (rc) return rc;
      double longer = (double)(li->end2 - li->ts2) - li->want;
      if (longer > 1.0) { /* more than the rounding of its two boundaries */
        c->stats.stretched++;
        c->stats.stretched_ns += longer;
        c->ops[ev[i].name].stretched_ns += longer;
      } else if (longer < -1.0) {
        c->stats.shortened++;
        c->stats.shortened_ns -= longer;
      }
      if (c->o) write_event(c, t, &ev[i], li);
    }
    if ((rc = put_riders(t, g1, r1, 0))) return rc;
    t->have_prev = 1;
    t->prev_r = root_end_r;
    t->prev_w = t->line[0].we;
    t->tree_begin = t->pushing;
  }
  return 0;
}

/* Riders in time order, then arrival. */
static int cmp_rider(const void *pa, const void *pb) {
  const rider_t *a = pa, *b = pb;
  if (a->ts != b->ts) return a->ts < b->ts ? -1 : 1;
  return (a->seq > b->seq) - (a->seq < b->seq);
}

/* Drops what a flush wrote from the thread's riders and text: the events and
 * riders that stay keep theirs, renumbered, in arrival order. */
static int compact(thr_t *t) {
  size_t kept = 0;
  for (size_t i = 0; i < t->n_rid; i++)
    if (!t->rid[i].done) t->rid[kept++] = t->rid[i];
  t->n_rid = kept;
  if (!t->n && !t->n_rid) {
    t->n_raw = t->n_text = 0;
    return 0;
  }
  /* Each live raw record's new index, in order (the old ones are dropped). */
  uint32_t *map = malloc((t->n_raw ? t->n_raw : 1) * sizeof *map);
  if (!map) return OSK_ENOMEM;
  for (size_t i = 0; i < t->n_raw; i++) map[i] = UINT32_MAX;
  for (size_t i = 0; i < t->n; i++) map[t->buf[i].raw] = 0;
  for (size_t i = 0; i < t->n_rid; i++) map[t->rid[i].raw] = 0;
  size_t n = 0, text = 0;
  for (size_t i = 0; i < t->n_raw; i++) {
    if (map[i] == UINT32_MAX) continue;
    raw_t r = t->raw[i];
    memmove(t->text + text, t->text + r.at, r.len);
    r.at = text;
    text += r.len;
    t->raw[n] = r;
    map[i] = (uint32_t)n++;
  }
  for (size_t i = 0; i < t->n; i++) t->buf[i].raw = map[t->buf[i].raw];
  for (size_t i = 0; i < t->n_rid; i++) {
    t->rid[i].raw = map[t->rid[i].raw];
    t->rid[i].seq = (uint32_t)i;
  }
  free(map);
  t->n_raw = n;
  t->n_text = text;
  return 0;
}

/* osk__nest_push's order: start, longer first, arrival. */
static int cmp_held(const void *pa, const void *pb) {
  const held_t *a = pa, *b = pb;
  return osk__nest_order(a->ts, a->dur, a->seq, b->ts, b->dur, b->seq);
}

/* Nests, corrects and writes the thread's buffered events that start before
 * `limit` (all of them for INT64_MAX), in the nesting rule's order, and
 * drops them; the rest stay buffered, in order. The caller guarantees that
 * no event to come starts before the latest end of those events, so they
 * all close here, as the next push would close them. */
static int flush(thr_t *t, int64_t limit) {
  osk_correct_t *c = t->c;
  if (!t->n && !(limit == INT64_MAX && t->n_rid)) return 0;
  if (!t->in_order) qsort(t->buf, t->n, sizeof *t->buf, cmp_held);
  /* The riders in time order; the trees place them as they close. */
  if (t->n_rid > 1) qsort(t->rid, t->n_rid, sizeof *t->rid, cmp_rider);
  t->rid_pos = 0;
  size_t k = t->n;
  if (limit != INT64_MAX) /* INT64_MAX: all, even an event that starts there */
    while (k && t->buf[k - 1].ts >= limit) k--;
  t->tree_begin = 0;
  int rc = 0;
  for (size_t j = 0; j < k && !rc; j++) {
    const held_t *e = &t->buf[j];
    uint32_t cls = class_of(c, e->cat);
    double half, delta;
    if (!t->started) {
      /* Start the compressed time line at the thread's first event: its
       * pre-begin share is not taken from before the trace's start. */
      osk__cost_t first = cost_for(c, e->name, cls, scale_of(c, e->name, 1.0));
      cost_of(&first, cls, &half, &delta);
      t->removed = -half;
      t->last2 = INT64_MIN;
      t->started = 1;
    }
    t->pushing = j;
    osk__nest_frame_t *f;
    uint64_t overlaps = t->nest.overlaps;
    rc = osk__nest_push(&t->nest, e->ts, e->dur, e->name, cls, c->cls_py[cls], on_close, t, &f);
    if (rc) break;
    size_t li = j - t->tree_begin;
    if (osk__grow((void **)&t->line, &t->line_cap, li + 1, sizeof *t->line)) {
      rc = OSK_ENOMEM;
      break;
    }
    /* The new begin: (W - delta)/2 before it and delta after it. The
     * interval before it is its parent's self time (the thread's between
     * trees): a shortfall there is the parent's to make up. After an
     * improper overlap the outlived event's end was placed past this begin:
     * that shortfall is not instrument time and is dropped, as before. Its
     * cost: W scaled by its own name's span_w_scale, else its parent's. */
    line_t *pl = f > t->nest.stack ? &t->line[(size_t)f[-1].user[0] - t->tree_begin] : NULL;
    double scale = scale_of(c, e->name, pl ? pl->scale : 1.0);
    osk__cost_t cost = cost_for(c, e->name, cls, scale);
    cost_of(&cost, cls, &half, &delta);
    t->removed += half;
    int64_t *owed = t->nest.overlaps != overlaps ? NULL : pl ? &pl->debt : &t->debt;
    if (owed && f - 1 > t->nest.stack) {
      /* The parent has a child now: it takes over what its own parent still
       * owes, to be taken from its self time (this interval first). A
       * shortfall that an event's later self time cannot hold so goes down,
       * one level a begin, into the later events inside it that have
       * children, instead of stretching it: under with_stack every
       * ProfilerStep#N holds its operators through Python frames, whose
       * self time has room where the operators' gaps have none. Leaves are
       * never shortened (a leaf keeps reported - delta). */
      line_t *up = &t->line[(size_t)f[-2].user[0] - t->tree_begin];
      *owed = osk__sat_add(*owed, up->debt);
      up->debt = 0;
    }
    /* The parent's first child: the interval before it is the first of the
     * parent's self time, where a span's trim goes first (after what the
     * parent owes); what does not fit waits for the parent's end. */
    int64_t head = 0;
    if (pl && pl->head) {
      pl->head = 0;
      if (owed == &pl->debt) {
        head = pl->trim;
        pl->debt = osk__sat_add(pl->debt, head);
      }
    }
    int64_t begin2 = place(t, e->ts, owed, pl ? &f[-1] : NULL);
    if (head) {
      int64_t left = pl->debt < head ? pl->debt : head;
      pl->trim = left;
      pl->debt -= left;
    }
    t->removed += delta;
    f->user[0] = (int64_t)j;
    int64_t trim = c->n_named ? span_trim(c, e->name, e->dur, delta) : 0;
    t->line[li] = (line_t){.ts2 = begin2, .debt = 0, .desc = {0, 0}, .trim = trim, .head = trim > 0, .scale = scale,
                           .dcost = 0.0};
  }
  t->pushing = k;
  if (!rc) rc = osk__nest_close_all(&t->nest, on_close, t);
  if (!rc && limit == INT64_MAX && !flag_of(c->corr, c->n_corr, t->id)) {
    /* A pipe's thread with no corrected events: its records as read. */
    for (size_t i = 0; i < t->n_rid; i++) {
      const raw_t *r = &t->raw[t->rid[i].raw];
      if (c->o) put_passed(c, t->text + r->at, r, t->rid[i].ts, 1);
      c->stats.passed_events++;
      t->rid[i].done = 1;
    }
    t->rid_pos = t->n_rid;
  } else if (!rc && limit == INT64_MAX) {
    /* The riders after the thread's last tree. */
    place_gap(t, t->rid_pos, t->n_rid, INT64_MAX, 0, &t->fline);
    rc = put_riders(t, t->rid_pos, t->n_rid, 1);
    if (!rc) rc = put_riders(t, t->rid_pos, t->n_rid, 0);
    t->rid_pos = t->n_rid;
  }
  if (rc) return rc;
  /* What stays (events starting at the limit) is sorted: renumbered in
   * that order, it sorts again with later arrivals as it would have. */
  if (t->n > k) memmove(t->buf, t->buf + k, (t->n - k) * sizeof *t->buf);
  t->n -= k;
  for (size_t i = 0; i < t->n; i++) t->buf[i].seq = (uint32_t)i;
  t->in_order = 1;
  t->tree_begin = 0;
  c->held_now -= k;
  return compact(t);
}

/* The gap rule, on an arrival at `ts` of a thread that is not held:
 * returns 1 when the thread breaks it (the event starts before the last
 * gap), else 0 with *gap set when the arrival makes a gap: it starts at or
 * after the end of every event before it, so those that start before that
 * end may be written. */
static int breaks_rule(const thr_t *t, int64_t ts, int *gap) {
  *gap = t->seen && ts >= t->max_end;
  return t->seen && ts < t->floor;
}

static void note_arrival(thr_t *t, int64_t end, int gap) {
  if (gap) t->floor = t->max_end;
  if (!t->seen || end > t->max_end) t->max_end = end;
  t->seen = 1;
}

/* A thread broke the gap rule: what was written cannot stand. Hold it whole
 * in the next read, and from here on only look for other threads that break
 * the rule (the arrival times are all it takes). */
static int start_detecting(osk_correct_t *c, thr_t *t) {
  if (t->id >= c->n_hold) {
    size_t n = (size_t)t->id + 1 > 2 * c->n_hold ? (size_t)t->id + 1 : 2 * c->n_hold;
    unsigned char *h = realloc(c->hold, n);
    if (!h) return OSK_ENOMEM;
    memset(h + c->n_hold, 0, n - c->n_hold);
    c->hold = h;
    c->n_hold = n;
  }
  c->hold[t->id] = 1;
  t->held = 1;
  if (!c->detecting) {
    c->detecting = 1;
    for (size_t i = 0; i < c->n_thr; i++) thr_release(&c->thr[i]);
    c->held_now = 0;
    /* What was written is void: the temporary file goes now, not at the
     * end of the read. */
    if (c->o) osk__out_discard(c->o);
    c->o = NULL;
  }
  return 0;
}

/* Kineto's categories of CUDA (and ROCm) activity: the trace is a GPU run's,
 * where the autograd engine runs a backward on a device thread of its own. */
static int is_gpu_category(osk_str_t cat) {
  static const char *const gpu[] = {"kernel", "cuda_runtime", "cuda_driver", "gpu_memcpy", "gpu_memset"};
  for (size_t i = 0; i < sizeof gpu / sizeof *gpu; i++)
    if (osk__str_is(cat, gpu[i], strlen(gpu[i]))) return 1;
  return 0;
}

/* The cross-thread rule applies: asked for, or asked for where the trace
 * holds GPU activity (known by the end of a read). */
static int waits_apply(const osk_correct_t *c) {
  return c->opts.waits > 0 || (c->opts.waits < 0 && c->gpu);
}

/* Thread `id`'s process index (+1 in c->proc), found among the threads
 * seen before it (a trace has few processes). */
static int process_of(osk_correct_t *c, size_t id, uint32_t *out) {
  if (id < c->n_proc && c->proc[id]) {
    *out = c->proc[id] - 1;
    return 0;
  }
  if (osk__grow((void **)&c->proc, &c->cap_proc, id + 1, sizeof *c->proc)) return OSK_ENOMEM;
  if (id >= c->n_proc) {
    memset(c->proc + c->n_proc, 0, (id + 1 - c->n_proc) * sizeof *c->proc);
    c->n_proc = id + 1;
  }
  uint32_t p = (uint32_t)c->n_xp; /* a new process, unless a thread of it was seen */
  for (size_t i = 0; i < c->n_proc; i++)
    if (i != id && c->proc[i] && osk__id_eq(&c->th.th[i].pid, &c->th.th[id].pid)) {
      p = c->proc[i] - 1;
      break;
    }
  c->proc[id] = p + 1;
  *out = p;
  return 0;
}

/* The cross-thread profile: thread `id`'s event of class `cls` spans [ts, end]. */
static int note_event(osk_correct_t *c, size_t id, uint32_t cls, int64_t ts, int64_t end) {
  uint32_t p;
  int rc = process_of(c, id, &p);
  if (rc) return rc;
  if (p >= c->n_xp) {
    size_t cap = c->n_xp;
    if (osk__grow((void **)&c->xp, &cap, (size_t)p + 1, sizeof *c->xp)) return OSK_ENOMEM;
    memset(c->xp + c->n_xp, 0, ((size_t)p + 1 - c->n_xp) * sizeof *c->xp);
    c->n_xp = (size_t)p + 1;
  }
  xprof_t *x = &c->xp[p];
  if (osk__grow((void **)&x->ts[cls], &x->cap[cls], x->n[cls] + 1, sizeof *x->ts[cls]) ||
      osk__grow((void **)&x->te[cls], &x->cap_e[cls], x->n[cls] + 1, sizeof *x->te[cls]))
    return OSK_ENOMEM;
  x->ts[cls][x->n[cls]] = ts;
  x->te[cls][x->n[cls]++] = end;
  return 0;
}

static void free_profile(osk_correct_t *c) {
  for (size_t i = 0; i < c->n_xp; i++) {
    for (int k = 0; k < OSK__NCLS; k++) {
      free(c->xp[i].ts[k]);
      free(c->xp[i].te[k]);
    }
  }
  free(c->xp);
  c->xp = NULL;
  c->n_xp = 0;
  c->xp_ready = 0;
  free(c->proc);
  c->proc = NULL;
  c->n_proc = c->cap_proc = 0;
}

static void profile_ready(osk_correct_t *c) {
  for (size_t i = 0; i < c->n_xp; i++)
    for (int k = 0; k < OSK__NCLS; k++)
      if (c->xp[i].n[k]) {
        qsort(c->xp[i].ts[k], c->xp[i].n[k], sizeof *c->xp[i].ts[k], osk__cmp_i64);
        qsort(c->xp[i].te[k], c->xp[i].n[k], sizeof *c->xp[i].te[k], osk__cmp_i64);
      }
  c->xp_ready = 1;
}

/* The threads whose events overlap in time (first start to latest end, ends
 * included: a zero-length event at another's first start counts) another
 * thread's of the same process, in this read. */
static uint64_t overlapping_threads(const osk_correct_t *c) {
  uint64_t n = 0;
  for (size_t i = 0; i < c->n_thr; i++) {
    const thr_t *a = &c->thr[i];
    if (!a->spanned) continue;
    for (size_t j = 0; j < c->n_thr; j++) {
      const thr_t *b = &c->thr[j];
      if (j != i && b->spanned && a->span_lo <= b->span_hi && b->span_lo <= a->span_hi &&
          osk__id_eq(&c->th.th[i].pid, &c->th.th[j].pid)) {
        n++;
        break;
      }
    }
  }
  return n;
}

/* The compressed time line saturates at +-2^62 ns (moved_back): an event
 * beyond that (4.6e15 us, 146 years from the trace's origin) would be written
 * clamped there with no duration. */
#define OSK__LIM (INT64_C(1) << 62)

/* A record of another kind than the corrected events (an X event of another
 * category, an instant, a flow's start or end, a counter...): re-timed with
 * its thread's corrected events where it has a ts and its thread has them
 * (held with them: a rider), written as read otherwise (the GPU's rows,
 * Kineto's own spans and instants on threads of their own). */
static int other_record(osk_correct_t *c, const osk_reader_event_t *ev) {
  int timed = (ev->has & OSK_READER_EV_TS) && ev->ts_len && ev->ts_ns <= OSK__LIM && ev->ts_ns >= -OSK__LIM;
  if (!timed) return pass_record(c, ev);
  int64_t id = osk__threads_intern_ev(&c->th, ev);
  if (id < 0) return (int)id;
  if (!flag_of(c->corr, c->n_corr, (size_t)id) && !c->hold_all) {
    /* Unless its thread has corrected events further on: then this read is
     * void, and the next knows the thread from the start. */
    if (!c->collecting && flag_set(&c->passed, &c->n_passed, (size_t)id)) return OSK_ENOMEM;
    return pass_record(c, ev);
  }
  thr_t *t = thr_at(c, id);
  if (!t) return OSK_ENOMEM;
  if (c->collecting) return 0;
  /* Placed by the trees written: one that begins before the last gap came
   * after its tree was (Kineto writes CUDA's runtime calls after the
   * operators): the thread is held whole next time. */
  if (!t->held && ev->ts_ns < t->floor) return start_detecting(c, t);
  if (c->detecting) return 0;
  uint32_t raw;
  if (t->n_rid >= UINT32_MAX - 1) return OSK_ERANGE;
  if (keep_raw(t, ev, &raw) || osk__grow((void **)&t->rid, &t->cap_rid, t->n_rid + 1, sizeof *t->rid))
    return OSK_ENOMEM;
  int complete = osk__str_is(ev->ph, "X", 1) && osk__event_usable(ev, OSK__EV_COMPLETE) && ev->dur_len &&
                 ev->dur_ns <= OSK__LIM - (ev->ts_ns > 0 ? ev->ts_ns : 0);
  t->rid[t->n_rid] = (rider_t){.ts = ev->ts_ns, .dur = complete ? ev->dur_ns : -1, .raw = raw,
                               .seq = (uint32_t)t->n_rid, .parent = UINT32_MAX};
  t->n_rid++;
  return 0;
}

static int on_event(void *ctx, const osk_reader_event_t *ev) {
  osk_correct_t *c = ctx;
  c->stats.events++;
  if (osk__str_is(ev->ph, "M", 1)) {
    int rc = osk__threads_metadata_ev(&c->th, ev, NULL, NULL);
    return rc ? rc : pass_record(c, ev);
  }
  if (!osk__str_is(ev->ph, "X", 1)) {
    if (osk__str_is(ev->ph, "B", 1) || osk__str_is(ev->ph, "E", 1)) {
      /* Not read by the correction: written as they were. */
      if (category_index(c, ev->cat) >= 0) c->stats.begin_end_events++;
      return pass_record(c, ev);
    }
    return other_record(c, ev);
  }
  long cat = category_index(c, ev->cat);
  if (!osk__event_usable(ev, OSK__EV_COMPLETE) || ev->ts_ns > OSK__LIM || ev->ts_ns < -OSK__LIM ||
      ev->dur_ns > OSK__LIM - (ev->ts_ns > 0 ? ev->ts_ns : 0)) {
    c->stats.unusable_events++;
    return cat >= 0 ? pass_record(c, ev) : other_record(c, ev);
  }
  if (cat < 0) {
    c->stats.other_events++;
    if (!c->gpu && is_gpu_category(ev->cat)) c->gpu = 1;
    return other_record(c, ev);
  }
  int64_t thread = osk__threads_intern_ev(&c->th, ev);
  if (thread < 0) return (int)thread;
  if (flag_set(&c->corr, &c->n_corr, (size_t)thread)) return OSK_ENOMEM;
  if (flag_of(c->passed, c->n_passed, (size_t)thread)) c->redo = 1;
  thr_t *t = thr_at(c, thread);
  if (!t) return OSK_ENOMEM;
  int64_t end = ev->ts_ns + ev->dur_ns;
  if (!t->spanned || ev->ts_ns < t->span_lo) t->span_lo = ev->ts_ns;
  if (!t->spanned || end > t->span_hi) t->span_hi = end;
  t->spanned = 1;
  if (c->collecting || (c->hold_all && c->opts.waits != 0 && !c->xp_ready)) {
    int rc = note_event(c, (size_t)thread, class_of(c, (uint32_t)cat), ev->ts_ns, end);
    if (rc || c->collecting) return rc;
  }
  int gap = 0;
  if (c->detecting) {
    if (t->held) return 0;
    if (breaks_rule(t, ev->ts_ns, &gap)) return start_detecting(c, t);
    note_arrival(t, end, gap);
    return 0;
  }
  if (!t->held) {
    if (breaks_rule(t, ev->ts_ns, &gap)) return start_detecting(c, t);
    if (gap) {
      int rc = flush(t, t->max_end);
      if (rc) return rc;
    }
    note_arrival(t, end, gap);
  }
  if (t->n >= UINT32_MAX - 1) return OSK_ERANGE;
  if (osk__grow((void **)&t->buf, &t->cap, t->n + 1, sizeof *t->buf)) return OSK_ENOMEM;
  int64_t name = intern_name(c, ev->name);
  if (name < 0) return (int)name;
  uint32_t raw;
  if (keep_raw(t, ev, &raw)) return OSK_ENOMEM;
  held_t *e = &t->buf[t->n];
  e->ts = ev->ts_ns;
  e->dur = ev->dur_ns;
  e->name = (uint32_t)name;
  e->cat = (uint32_t)cat;
  if (!c->ops[e->name].category.ptr) {
    c->ops[e->name].category.ptr = c->cats[cat];
    c->ops[e->name].category.len = strlen(c->cats[cat]);
    c->ops[e->name].cost_class = class_of(c, (uint32_t)cat);
  }
  e->seq = (uint32_t)t->n;
  e->raw = raw;
  if (t->n && t->in_order && cmp_held(&t->buf[t->n - 1], e) > 0) t->in_order = 0;
  t->n++;
  c->stats.corrected_events++;
  if (++c->held_now > c->stats.held_peak) c->stats.held_peak = c->held_now;
  uint32_t cls = class_of(c, e->cat);
  c->stats.class_events[cls]++;
  if (c->cls_py[cls]) {
    c->stats.py_events++;
    c->ops[e->name].py_class = 1;
  }
  return 0;
}

/* ------------------------------------------------------------ public API */

static const char *const default_cats[] = {"cpu_op", "user_annotation"};
static const char *const default_py_cats[] = {"python_function"};

static int add_categories(osk_correct_t *c, const char *const *cats, size_t n, uint32_t cls) {
  for (size_t i = 0; i < n; i++) {
    if (!cats[i]) return OSK_EINVAL;
    for (size_t j = 0; j < c->n_cats; j++)
      if (strcmp(c->cats[j], cats[i]) == 0) return OSK_EINVAL; /* in two classes, or twice */
    if (!(c->cats[c->n_cats] = osk__dup_bytes(cats[i], strlen(cats[i])))) return OSK_ENOMEM;
    c->cat_cls[c->n_cats++] = cls;
  }
  return 0;
}

static int valid_cost(double w, double delta) { return w >= 0 && delta >= 0 && delta <= w && isfinite(w); }

/* The cost model: the caller's classes, or the default two from the
 * options' named fields (osk_correct_opts_t). OSK_EINVAL with `why`. */
static int set_classes(osk_correct_t *c, const osk_correct_opts_t *opts, const char **why) {
  osk_cost_class_t two[2] = {
      {"operator", opts->categories ? opts->categories : default_cats, opts->categories ? opts->n_categories : 2,
       opts->w_ns, opts->delta_ns, 0},
      {"python", opts->py_categories ? opts->py_categories : default_py_cats,
       opts->py_categories ? opts->n_py_categories : 1, opts->w_py_ns, opts->delta_py_ns, 1}};
  const osk_cost_class_t *cls = opts->n_classes ? opts->classes : two;
  size_t n = opts->n_classes ? opts->n_classes : 2, n_cats = 0;
  *why = "invalid cost classes (1 to OSK_MAX_COST_CLASSES, each with W >= delta >= 0 finite and a category)";
  if (n > OSK_MAX_COST_CLASSES || !cls) return OSK_EINVAL;
  for (size_t k = 0; k < n; k++) {
    if (!valid_cost(cls[k].w_ns, cls[k].delta_ns) || (!cls[k].categories && cls[k].n_categories)) return OSK_EINVAL;
    if (opts->n_classes && !cls[k].n_categories) return OSK_EINVAL;
    n_cats += cls[k].n_categories;
  }
  c->cats = calloc(n_cats ? n_cats : 1, sizeof *c->cats);
  c->cat_cls = calloc(n_cats ? n_cats : 1, sizeof *c->cat_cls);
  if (!c->cats || !c->cat_cls) return OSK_ENOMEM;
  c->n_cls = n;
  for (size_t k = 0; k < n; k++) {
    const char *name = cls[k].name && *cls[k].name ? cls[k].name : "class";
    if (!(c->cls_name[k] = osk__dup_bytes(name, strlen(name)))) return OSK_ENOMEM;
    c->cost.w[k] = cls[k].w_ns;
    c->cost.delta[k] = cls[k].delta_ns;
    c->cls_py[k] = cls[k].python != 0;
    int rc = add_categories(c, cls[k].categories, cls[k].n_categories, (uint32_t)k);
    if (rc) {
      *why = "a category is listed twice (or in two classes)";
      return rc;
    }
  }
  /* The default's shape: its header and args say no more than before. */
  c->two = n == 2 && !c->cls_py[0] && c->cls_py[1];
  return 0;
}

/* The caller's spans, by name id (the names interned here keep their ids
 * across passes); the options' arrays are not kept. */
static int add_spans(osk_correct_t *c, const osk_correct_opts_t *opts) {
  c->opts.span_names = NULL;
  c->opts.span_ns = NULL;
  c->opts.span_w_scale = NULL;
  c->opts.span_delta_ns = NULL;
  c->opts.n_spans = 0;
  if (!opts->n_spans) return 0;
  if (!opts->span_names || !opts->span_ns) return OSK_EINVAL;
  for (size_t i = 0; i < opts->n_spans; i++) {
    const char *name = opts->span_names[i];
    double v = opts->span_ns[i], sc = opts->span_w_scale ? opts->span_w_scale[i] : 1.0;
    double d = opts->span_delta_ns ? opts->span_delta_ns[i] : -1.0;
    if (!name || !isfinite(v) || !(sc > 0) || !isfinite(sc) || !isfinite(d)) return OSK_EINVAL;
    int64_t id = intern_name(c, (osk_str_t){name, strlen(name)});
    if (id < 0) return (int)id;
    if ((size_t)id >= c->n_named) {
      if (osk__grow((void **)&c->named, &c->cap_named, (size_t)id + 1, sizeof *c->named)) return OSK_ENOMEM;
      for (size_t k = c->n_named; k <= (size_t)id; k++) c->named[k] = (named_t){-1.0, 1.0, -1.0};
      c->n_named = (size_t)id + 1;
    }
    c->named[id] = (named_t){v < 0 ? -1.0 : v, sc, d < 0 ? -1.0 : d};
  }
  return 0;
}

/* The document's top-level members as reader r kept them, on one side of
 * its events: before them (`after` 0) or after them (1); the scalars, then
 * the objects and arrays (Kineto's distributedInfo and deviceProperties,
 * which HTA reads), each preceded by a comma and a newline. opskew's own
 * header and the events are written by the callers. */
static void write_members(osk__out_t *o, const osk_reader_t *r, int after) {
  size_t nb, ob;
  osk_reader_members_before_events(r, &nb, &ob);
  size_t i0 = after ? nb : 0, i1 = after ? osk_reader_meta_count(r) : nb;
  size_t j0 = after ? ob : 0, j1 = after ? osk_reader_object_count(r) : ob;
  for (size_t j = j0; j < j1; j++) {
    osk_str_t k, v;
    if (osk_reader_object_get(r, j, &k, &v) || osk__str_is(k, "opskew", 6)) continue;
    osk__out_puts(o, ",\n");
    osk__out_str(o, k.ptr, k.len);
    osk__out_put(o, ":", 1);
    osk__out_put(o, v.ptr, v.len); /* the reader checked it is JSON */
  }
  for (size_t i = i0; i < i1; i++) {
    osk_str_t k, v;
    int is_str;
    if (osk_reader_meta_get(r, i, &k, &v, &is_str)) continue;
    if (osk__str_is(k, "opskew", 6) || osk__str_is(k, "traceEvents", 11)) continue;
    osk__out_puts(o, ",\n");
    osk__out_str(o, k.ptr, k.len);
    osk__out_put(o, ":", 1);
    if (is_str) osk__out_str(o, v.ptr, v.len);
    else osk__out_put(o, v.ptr, v.len);
  }
}

/* The correction's "opskew" header, first (a reader keeps the first few
 * top-level objects only: it must be one of them, or the trace would not be
 * known as corrected), then the document's members that came before its
 * events (from `head`, a reader of the header alone; may be NULL), and the
 * start of the events array. */
static void write_header(osk__out_t *o, const osk_correct_t *c, const osk_reader_t *head,
                         const char *in_path) {
  osk__out_puts(o, "{\n");
  /* The one number formatter: any finite value fits, none truncates. */
  /* The first class of operators and the first Python class, as the
   * default model names them; every class where the model has others. */
  size_t op = 0, py = c->n_cls;
  while (op < c->n_cls && c->cls_py[op]) op++;
  for (size_t k = 0; k < c->n_cls && py == c->n_cls; k++)
    if (c->cls_py[k]) py = k;
  osk__out_key_num(o, "\"opskew\":{\"corrected\":{\"w_ns\":", op < c->n_cls ? c->cost.w[op] : 0.0);
  osk__out_key_num(o, ",\"delta_ns\":", op < c->n_cls ? c->cost.delta[op] : 0.0);
  osk__out_key_num(o, ",\"w_py_ns\":", py < c->n_cls ? c->cost.w[py] : 0.0);
  osk__out_key_num(o, ",\"delta_py_ns\":", py < c->n_cls ? c->cost.delta[py] : 0.0);
  if (!c->two) {
    osk__out_puts(o, ",\"classes\":[");
    for (size_t k = 0; k < c->n_cls; k++) {
      osk__out_puts(o, k ? ",{\"name\":" : "{\"name\":");
      put_cstr(o, c->cls_name[k]);
      osk__out_puts(o, ",\"categories\":[");
      int first = 1;
      for (size_t i = 0; i < c->n_cats; i++)
        if (c->cat_cls[i] == k) {
          if (!first) osk__out_puts(o, ",");
          put_cstr(o, c->cats[i]);
          first = 0;
        }
      osk__out_puts(o, "]");
      osk__out_key_num(o, ",\"w_ns\":", c->cost.w[k]);
      osk__out_key_num(o, ",\"delta_ns\":", c->cost.delta[k]);
      osk__out_puts(o, c->cls_py[k] ? ",\"python\":true}" : ",\"python\":false}");
    }
    osk__out_puts(o, "]");
  }
  if (c->opts.clock_offset_ns != 0 || c->opts.clock_drift != 0) {
    osk__out_puts(o, ",\"clock\":{\"origin_ns\":");
    osk__out_i64(o, c->opts.clock_origin_ns);
    osk__out_key_num(o, ",\"offset_ns\":", c->opts.clock_offset_ns);
    osk__out_key_num(o, ",\"drift\":", c->opts.clock_drift);
    osk__out_puts(o, ",\"map\":\"t -> origin + (t - origin - offset) / (1 + drift)\"}");
  }
  osk__out_puts(o, ",\"source\":");
  put_cstr(o, in_path);
  osk__out_puts(o, c->two ? ",\"model\":\"corrected = reported - delta - W * descendants - W_py * py_descendants"
                          : ",\"model\":\"corrected = reported - delta(class) - sum over classes of W(class) * "
                            "class_descendants");
  osk__out_puts(o, c->xp_ready
                      ? " - waited; time line compressed per thread, and a thread's self time "
                        "inside an open event also by the instrument time of other threads' events in it "
                        "(it waited for them)\"}"
                      : "; time line compressed per thread\"}");
  if (c->opts.run_json && *c->opts.run_json) {
    osk__out_puts(o, ",\"run\":");
    osk__out_puts(o, c->opts.run_json);
  }
  osk__out_puts(o, "}");
  if (head) write_members(o, head, 0);
  osk__out_puts(o, ",\n\"traceEvents\":[\n");
}

/* The end of the events array, and the document's members after its events
 * (from r, which read it whole). The metadata records ("M") were written as
 * they came, as every record of the input. */
static void write_trailer(osk_correct_t *c, const osk_reader_t *r) {
  osk__out_t *o = c->o;
  osk__out_puts(o, "\n]");
  write_members(o, r, 1);
  osk__out_puts(o, "}\n");
}

/* Forgets a pass's figures; names and threads keep their ids. */
static void reset_pass(osk_correct_t *c) {
  for (size_t i = 0; i < c->n_ops; i++) {
    osk_str_t name = c->ops[i].name;
    memset(&c->ops[i], 0, sizeof c->ops[i]);
    c->ops[i].name = name;
  }
  for (size_t i = 0; i < c->n_thr; i++) thr_release(&c->thr[i]);
  free(c->thr);
  c->thr = NULL;
  c->n_thr = c->cap_thr = 0;
  c->detecting = 0;
  c->held_now = 0;
  c->redo = 0;
  if (c->passed) memset(c->passed, 0, c->n_passed);
  c->n_pend = c->n_pend_rec = 0;
  uint64_t peak = c->stats.held_peak;
  int passes = c->stats.passes;
  memset(&c->stats, 0, sizeof c->stats);
  c->stats.held_peak = peak;
  c->stats.passes = passes;
}

/* Whether what was written to the output can be taken back: osk__out_*
 * writes a regular file (or a new one) to a temporary file renamed into
 * place at the end, but standard output ("-") and a device as it goes. */
/* Whether the output goes to a temporary file that a void read can throw
 * away (the writer's own rule, osk__out_target): a new or regular file, not
 * standard output or a device written as it goes. A refused target is
 * "voidable" too: osk__out_open refuses it before anything is read. */
static int voidable_output(const char *path) {
  osk__out_target_t t;
  if (osk__out_target(path, &t) == OSK_ENOMEM) return 1;
  return t.kind != OSK__OUT_STDOUT && t.kind != OSK__OUT_DEVICE;
}

/* Whether the input can be read a second time. */
static int rereadable(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static void set_err(osk_error_t *err, int code, const char *msg, int sys_errno) {
  err->code = code;
  err->message = msg;
  err->sys_errno = sys_errno;
}

/* One read of the trace: returns the reader's code, or the first failure;
 * *again is set when a thread broke the gap rule and another read is
 * needed. `head` is the header's reader for the leading members (NULL: the
 * input is held whole, and its members are written from this read). */
static int one_pass(osk_correct_t *c, const char *in_path, const char *out_path, osk__out_t *o,
                    const osk_reader_t *head, int detect_only, int *again, osk_error_t *err) {
  *again = 0;
  reset_pass(c);
  c->stats.passes++;
  c->collecting = c->collect_next;
  c->collect_next = 0;
  osk_reader_t *r = NULL;
  osk_reader_opts_t ropts = {.progress = c->opts.progress};
  int rc = osk_reader_open(&r, in_path, &ropts, err);
  if (rc) return rc;
  c->o = NULL;
  c->first = 1;
  c->detecting = detect_only;
  if (out_path && !c->hold_all && !detect_only && !c->collecting) {
    /* Events are written as the read goes: the header first. */
    int orc = osk__out_open(o, out_path, 0);
    if (!orc) orc = osk__out_gzip_by_name(o, out_path);
    if (orc) {
      if (orc == OSK_EIO) set_err(err, OSK_EIO, "cannot open the output file", o->sys_errno);
      osk_reader_free(r);
      return orc;
    }
    c->o = o;
    write_header(o, c, head, in_path);
  }
  rc = osk_reader_run(r, on_event, c, err);
  int read_rc = rc;
  if (rc && rc != OSK_ETRUNCATED) goto fail;
  if (c->collecting) {
    /* The starts are noted: the next read applies the cross-thread rule. */
    profile_ready(c);
    osk_reader_free(r);
    *again = 1;
    return read_rc;
  }
  /* Threads that overlap in time may wait for one another: the rule needs
   * every thread's starts before the first boundary is placed, a read that
   * notes them (the read that holds every thread noted them as it went). */
  uint64_t overlapping = waits_apply(c) ? overlapping_threads(c) : 0;
  int need_profile = overlapping && !c->xp_ready;
  if (c->hold_all && !c->xp_ready) {
    if (overlapping) profile_ready(c);
    else free_profile(c);
    need_profile = 0;
  }
  c->stats.overlapping_threads = overlapping;
  if (c->detecting || need_profile || c->redo) {
    /* This read is void: a thread broke the gap rule (it is held whole next
     * time), or the cross-thread rule needs the starts first (a collecting
     * read next), or a record was written unchanged before its thread was
     * known to have corrected events (the next read knows it). */
    c->collect_next = need_profile;
    if (c->o) osk__out_discard(c->o);
    c->o = NULL;
    osk_reader_free(r);
    if (out_path && !detect_only && !c->voidable) {
      /* Written as it went (standard output, a device) and not to be taken
       * back: only a trace that changed since the first read gets here. */
      set_err(err, OSK_EFORMAT, "the trace changed while it was read", 0);
      return OSK_EFORMAT;
    }
    *again = 1;
    return read_rc;
  }
  c->stats.truncated = rc == OSK_ETRUNCATED;
  for (size_t i = 0; i < c->n_thr; i++) c->stats.threads += c->thr[i].spanned != 0;
  if (out_path && c->hold_all) {
    /* Nothing was written during the read: the whole header now. */
    int orc = osk__out_open(o, out_path, 0);
    if (!orc) orc = osk__out_gzip_by_name(o, out_path);
    if (orc) {
      if (orc == OSK_EIO) set_err(err, OSK_EIO, "cannot open the output file", o->sys_errno);
      rc = orc;
      goto fail_out;
    }
    c->o = o;
    write_header(o, c, r, in_path);
    /* What was passed as read while the output was not open. */
    for (size_t i = 0; i < c->n_pend_rec; i++) {
      const pend_t *pr = &c->pend_rec[i];
      put_passed(c, c->pend + pr->r.at, &pr->r, pr->ts, pr->timed);
    }
  }
  /* The rest of every thread, held threads whole, in thread order. */
  for (size_t i = 0; i < c->n_thr; i++) {
    rc = flush(&c->thr[i], INT64_MAX);
    if (!rc) rc = osk__nest_close_all(&c->thr[i].rb, rb_close, &c->thr[i]);
    if (rc) goto fail;
    c->stats.overlaps += c->thr[i].nest.overlaps;
    c->stats.held_threads += c->thr[i].held && c->thr[i].spanned;
    thr_release(&c->thr[i]);
  }
  if (c->o) {
    write_trailer(c, r);
    if (osk__out_commit(c->o)) {
      set_err(err, OSK_EIO, "writing the corrected trace failed", c->o->sys_errno);
      c->o = NULL;
      osk_reader_free(r);
      return OSK_EIO;
    }
    c->o = NULL;
  }
  osk_reader_free(r);
  return read_rc;
fail:
  if (rc == OSK_ENOMEM || rc == OSK_ERANGE) {
    if (!err->code) set_err(err, rc, osk_strerror(rc), 0);
  }
fail_out:
  if (c->o) osk__out_discard(c->o);
  c->o = NULL;
  osk_reader_free(r);
  return rc;
}

int osk_correct_path(const char *in_path, const char *out_path, const osk_correct_opts_t *opts,
                     osk_correct_t **out, osk_error_t *err) {
  osk_error_t local;
  if (!err) err = &local;
  memset(err, 0, sizeof *err);
  err->message = "";
  if (out) *out = NULL;
  if (!in_path || !opts || !out ||
      (!opts->n_classes && (!valid_cost(opts->w_ns, opts->delta_ns) || !valid_cost(opts->w_py_ns, opts->delta_py_ns))) ||
      !isfinite(opts->clock_offset_ns) || !(opts->clock_drift > -0.5 && opts->clock_drift < 0.5)) {
    err->code = OSK_EINVAL;
    err->message = "invalid arguments (W >= delta >= 0 and W_py >= delta_py >= 0 required; a clock map's "
                   "offset finite and |drift| < 0.5)";
    return OSK_EINVAL;
  }
  *out = NULL;
  osk_correct_t *c = calloc(1, sizeof *c);
  if (!c) return OSK_ENOMEM;
  c->opts = *opts;
  const char *why = "";
  int crc0 = set_classes(c, opts, &why);
  if (crc0) {
    if (crc0 == OSK_EINVAL) {
      err->code = OSK_EINVAL;
      err->message = why;
    }
    osk_correct_free(c);
    return crc0;
  }
  c->opts.categories = NULL;
  c->opts.py_categories = NULL;
  c->opts.classes = NULL;
  if ((crc0 = add_spans(c, opts))) {
    if (crc0 == OSK_EINVAL) {
      err->code = OSK_EINVAL;
      err->message = "invalid spans (each needs a name, a finite span and a finite W scale > 0)";
    }
    osk_correct_free(c);
    return crc0;
  }
  c->hold_all = !rereadable(in_path);
  /* The members before the events go before them in the corrected trace
   * too (Perfetto reads displayTimeUnit only there): a read of the header
   * alone finds them. A failure here is the main read's to report. */
  osk_reader_t *head = NULL;
  if (out_path && !c->hold_all) {
    osk_reader_opts_t hopts = {.header_only = 1};
    osk_error_t herr;
    if (osk_reader_open(&head, in_path, &hopts, &herr) == 0) {
      osk_reader_run(head, NULL, NULL, &herr);
    } else {
      head = NULL;
    }
  }
  osk__out_t o;
  int rc = 0, again = 0;
  c->voidable = !out_path || voidable_output(out_path);
  c->want_out = out_path != NULL;
  /* The cross-thread rule asked for (waits > 0): the first read notes the
   * starts, and the second writes. Where the output is written as it goes, a
   * first read looks for threads that break the gap rule instead. */
  if (opts->waits > 0 && c->voidable && !c->hold_all) c->collect_next = 1;
  /* An output written as it goes cannot take back a read that a thread
   * voids: a first read only finds the threads that break the gap rule. */
  if (!c->voidable && !c->hold_all) rc = one_pass(c, in_path, out_path, &o, head, 1, &again, err);
  /* Each read that needs another holds at least one more thread whole, so
   * this ends (one read, two when a thread breaks the gap rule). */
  while (!rc || rc == OSK_ETRUNCATED) {
    rc = one_pass(c, in_path, out_path, &o, head, 0, &again, err);
    if (!again) break;
  }
  osk_reader_free(head);
  c->opts.run_json = NULL; /* the caller's, read only during this call */
  if (rc && rc != OSK_ETRUNCATED) {
    osk_correct_free(c);
    return rc;
  }
  *out = c;
  return rc;
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
  free(c->cat_cls);
  for (size_t k = 0; k < OSK__NCLS; k++) free(c->cls_name[k]);
  free(c->ops);
  free(c->named);
  osk__names_free(&c->names);
  osk__threads_free(&c->th);
  for (size_t i = 0; i < c->n_thr; i++) thr_release(&c->thr[i]);
  free(c->thr);
  free(c->hold);
  free_profile(c);
  osk__f64_free(&c->f64);
  free(c->corr);
  free(c->passed);
  free(c->pend);
  free(c->pend_rec);
  free(c);
}
