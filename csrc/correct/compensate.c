/* compensate.c: overhead compensation of a trace (see opskew_correct.h). */
#include "opskew_correct.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ utilities */

static char *dup_bytes(const char *p, size_t n) {
  char *s = malloc(n + 1);
  if (!s) return NULL;
  if (n) memcpy(s, p, n);
  s[n] = '\0';
  return s;
}

static uint64_t hash_bytes(const char *p, size_t n, uint64_t h) {
  for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)p[i]) * 1099511628211ull; /* FNV-1a */
  return h;
}

/* An open-addressing table of strings (names) or thread keys -> index. */
typedef struct {
  uint64_t *hashes;
  uint32_t *slots; /* index + 1; 0 = empty */
  size_t cap;
} osk__index_t;

static int index_grow(osk__index_t *t, size_t need, const uint64_t *all_hashes) {
  if (need * 2 <= t->cap) return 0;
  size_t cap = t->cap ? t->cap * 2 : 256;
  while (need * 2 > cap) cap *= 2;
  uint32_t *slots = calloc(cap, sizeof *slots);
  if (!slots) return OSK_ENOMEM;
  for (size_t i = 0; i < t->cap; i++) {
    if (!t->slots[i]) continue;
    uint32_t id = t->slots[i] - 1;
    size_t j = all_hashes[id] & (cap - 1);
    while (slots[j]) j = (j + 1) & (cap - 1);
    slots[j] = id + 1;
  }
  free(t->slots);
  t->slots = slots;
  t->cap = cap;
  return 0;
}

/* ------------------------------------------------------------ the state */

typedef struct {
  int64_t ts, dur;
  uint32_t name, thread;
  uint32_t seq; /* file order, for a stable sort */
  uint32_t cat; /* index into the correction's categories; >= n_op_cats: Python class */
} osk__ev_t;

typedef struct {
  osk_id_kind_t pid_kind, tid_kind;
  int64_t pid_num, tid_num;
  char *pid_str, *tid_str;
  char *name; /* thread_name metadata */
} osk__thread_t;

typedef struct {
  osk_id_kind_t kind;
  int64_t num;
  char *str;
  char *name;
} osk__proc_t;

struct osk_correction {
  osk_correct_opts_t opts;
  char **cats;    /* the operator class's categories, then the Python class's */
  size_t n_cats;
  size_t n_op_cats;
  /* names */
  osk_correct_op_t *ops;
  uint64_t *name_hash;
  size_t n_ops, cap_ops, cap_name_hash;
  osk__index_t name_idx;
  /* threads */
  osk__thread_t *threads;
  uint64_t *thread_hash;
  size_t n_threads, cap_threads, cap_thread_hash;
  osk__index_t thread_idx;
  osk__proc_t *procs;
  size_t n_procs, cap_procs;
  /* events */
  osk__ev_t *ev;
  size_t n_ev, cap_ev;
  osk_correct_stats_t stats;
  int nomem;
};

static int grow(void **p, size_t *cap, size_t need, size_t elem) {
  if (need <= *cap) return 0;
  size_t cap2 = *cap ? *cap * 2 : 64;
  while (cap2 < need) cap2 *= 2;
  void *q = realloc(*p, cap2 * elem);
  if (!q) return OSK_ENOMEM;
  *p = q;
  *cap = cap2;
  return 0;
}

static int intern_name(osk_correction_t *c, osk_str_t s, uint32_t *out) {
  uint64_t h = hash_bytes(s.ptr, s.len, 1469598103934665603ull);
  if (c->name_idx.cap) {
    size_t j = h & (c->name_idx.cap - 1);
    while (c->name_idx.slots[j]) {
      uint32_t id = c->name_idx.slots[j] - 1;
      if (c->name_hash[id] == h && c->ops[id].name.len == s.len &&
          memcmp(c->ops[id].name.ptr, s.ptr, s.len) == 0) {
        *out = id;
        return 0;
      }
      j = (j + 1) & (c->name_idx.cap - 1);
    }
  }
  if (c->n_ops >= UINT32_MAX - 1) return OSK_ERANGE;
  if (grow((void **)&c->ops, &c->cap_ops, c->n_ops + 1, sizeof *c->ops)) return OSK_ENOMEM;
  if (grow((void **)&c->name_hash, &c->cap_name_hash, c->n_ops + 1, sizeof *c->name_hash))
    return OSK_ENOMEM;
  char *copy = dup_bytes(s.ptr, s.len);
  if (!copy) return OSK_ENOMEM;
  uint32_t id = (uint32_t)c->n_ops++;
  memset(&c->ops[id], 0, sizeof c->ops[id]);
  c->ops[id].name.ptr = copy;
  c->ops[id].name.len = s.len;
  c->name_hash[id] = h;
  if (index_grow(&c->name_idx, c->n_ops, c->name_hash)) return OSK_ENOMEM;
  size_t j = h & (c->name_idx.cap - 1);
  while (c->name_idx.slots[j]) j = (j + 1) & (c->name_idx.cap - 1);
  c->name_idx.slots[j] = id + 1;
  *out = id;
  return 0;
}

static uint64_t id_hash(const osk_trace_id_t *id, uint64_t h) {
  h = hash_bytes((const char *)&id->kind, sizeof id->kind, h);
  if (id->kind == OSK_ID_INT) return hash_bytes((const char *)&id->num, sizeof id->num, h);
  if (id->kind == OSK_ID_STR) return hash_bytes(id->str.ptr, id->str.len, h);
  return h;
}

static int id_equal(osk_id_kind_t kind, int64_t num, const char *str, const osk_trace_id_t *id) {
  if (kind != id->kind) return 0;
  if (kind == OSK_ID_INT) return num == id->num;
  if (kind == OSK_ID_STR) return strlen(str) == id->str.len && memcmp(str, id->str.ptr, id->str.len) == 0;
  return 1;
}

static int intern_thread(osk_correction_t *c, const osk_trace_id_t *pid, const osk_trace_id_t *tid,
                         uint32_t *out) {
  uint64_t h = id_hash(tid, id_hash(pid, 1469598103934665603ull));
  if (c->thread_idx.cap) {
    size_t j = h & (c->thread_idx.cap - 1);
    while (c->thread_idx.slots[j]) {
      uint32_t id = c->thread_idx.slots[j] - 1;
      osk__thread_t *t = &c->threads[id];
      if (c->thread_hash[id] == h && id_equal(t->pid_kind, t->pid_num, t->pid_str, pid) &&
          id_equal(t->tid_kind, t->tid_num, t->tid_str, tid)) {
        *out = id;
        return 0;
      }
      j = (j + 1) & (c->thread_idx.cap - 1);
    }
  }
  if (grow((void **)&c->threads, &c->cap_threads, c->n_threads + 1, sizeof *c->threads))
    return OSK_ENOMEM;
  if (grow((void **)&c->thread_hash, &c->cap_thread_hash, c->n_threads + 1, sizeof *c->thread_hash))
    return OSK_ENOMEM;
  uint32_t id = (uint32_t)c->n_threads;
  osk__thread_t *t = &c->threads[id];
  memset(t, 0, sizeof *t);
  t->pid_kind = pid->kind;
  t->pid_num = pid->num;
  t->tid_kind = tid->kind;
  t->tid_num = tid->num;
  if (pid->kind == OSK_ID_STR && !(t->pid_str = dup_bytes(pid->str.ptr, pid->str.len))) return OSK_ENOMEM;
  if (tid->kind == OSK_ID_STR && !(t->tid_str = dup_bytes(tid->str.ptr, tid->str.len))) {
    free(t->pid_str);
    return OSK_ENOMEM;
  }
  c->n_threads++;
  c->thread_hash[id] = h;
  if (index_grow(&c->thread_idx, c->n_threads, c->thread_hash)) return OSK_ENOMEM;
  size_t j = h & (c->thread_idx.cap - 1);
  while (c->thread_idx.slots[j]) j = (j + 1) & (c->thread_idx.cap - 1);
  c->thread_idx.slots[j] = id + 1;
  *out = id;
  return 0;
}

static int str_is(osk_str_t s, const char *lit) {
  size_t n = strlen(lit);
  return s.len == n && memcmp(s.ptr, lit, n) == 0;
}

/* The category's index, or -1 when its events are not corrected. */
static long category_index(const osk_correction_t *c, osk_str_t cat) {
  for (size_t i = 0; i < c->n_cats; i++)
    if (str_is(cat, c->cats[i])) return (long)i;
  return -1;
}

static int is_py(const osk_correction_t *c, const osk__ev_t *e) { return e->cat >= c->n_op_cats; }

static int on_metadata(osk_correction_t *c, const osk_trace_event_t *ev) {
  if (!ev->arg_name.len) return 0;
  if (str_is(ev->name, "thread_name")) {
    uint32_t t;
    int rc = intern_thread(c, &ev->pid, &ev->tid, &t);
    if (rc) return rc;
    free(c->threads[t].name);
    c->threads[t].name = dup_bytes(ev->arg_name.ptr, ev->arg_name.len);
    return c->threads[t].name ? 0 : OSK_ENOMEM;
  }
  if (str_is(ev->name, "process_name")) {
    if (grow((void **)&c->procs, &c->cap_procs, c->n_procs + 1, sizeof *c->procs)) return OSK_ENOMEM;
    osk__proc_t *p = &c->procs[c->n_procs];
    memset(p, 0, sizeof *p);
    p->kind = ev->pid.kind;
    p->num = ev->pid.num;
    if (ev->pid.kind == OSK_ID_STR && !(p->str = dup_bytes(ev->pid.str.ptr, ev->pid.str.len)))
      return OSK_ENOMEM;
    if (!(p->name = dup_bytes(ev->arg_name.ptr, ev->arg_name.len))) {
      free(p->str);
      return OSK_ENOMEM;
    }
    c->n_procs++;
  }
  return 0;
}

static int on_event(void *ctx, const osk_trace_event_t *ev) {
  osk_correction_t *c = ctx;
  c->stats.events++;
  if (str_is(ev->ph, "M")) return on_metadata(c, ev);
  if (!str_is(ev->ph, "X")) return 0;
  const unsigned need = OSK_EV_TS | OSK_EV_DUR | OSK_EV_NAME;
  if ((ev->has & need) != need || (ev->has & OSK_EV_BAD) || ev->dur_ns < 0) return 0;
  long cat = category_index(c, ev->cat);
  if (cat < 0) {
    c->stats.other_events++;
    return 0;
  }
  if (c->n_ev >= UINT32_MAX) return OSK_ERANGE;
  if (grow((void **)&c->ev, &c->cap_ev, c->n_ev + 1, sizeof *c->ev)) return OSK_ENOMEM;
  osk__ev_t *e = &c->ev[c->n_ev];
  int rc = intern_name(c, ev->name, &e->name);
  if (rc) return rc;
  rc = intern_thread(c, &ev->pid, &ev->tid, &e->thread);
  if (rc) return rc;
  e->ts = ev->ts_ns;
  e->dur = ev->dur_ns;
  e->seq = (uint32_t)c->n_ev;
  e->cat = (uint32_t)cat;
  if (is_py(c, e)) {
    c->stats.py_events++;
    c->ops[e->name].py_class = 1;
  }
  c->n_ev++;
  return 0;
}

/* Thread, then start, then longer first (the parent of an equal start), then
 * file order. */
static int cmp_ev(const void *pa, const void *pb) {
  const osk__ev_t *a = pa, *b = pb;
  if (a->thread != b->thread) return a->thread < b->thread ? -1 : 1;
  if (a->ts != b->ts) return a->ts < b->ts ? -1 : 1;
  if (a->dur != b->dur) return a->dur > b->dur ? -1 : 1;
  return (a->seq > b->seq) - (a->seq < b->seq);
}

/* ------------------------------------------------------------ the output */

typedef struct {
  FILE *f;
  int first;
  int failed;
} osk__out_t;

static void put_json_string(FILE *f, const char *s, size_t n) {
  fputc('"', f);
  for (size_t i = 0; i < n; i++) {
    unsigned char ch = (unsigned char)s[i];
    if (ch == '"' || ch == '\\') {
      fputc('\\', f);
      fputc(ch, f);
    } else if (ch < 0x20) {
      fprintf(f, "\\u%04x", ch);
    } else {
      fputc(ch, f);
    }
  }
  fputc('"', f);
}

/* Microseconds with a 3-digit nanosecond fraction, from integers. */
static void put_us(FILE *f, int64_t ns) {
  if (ns < 0) {
    fputc('-', f);
    ns = -ns;
  }
  fprintf(f, "%lld.%03lld", (long long)(ns / 1000), (long long)(ns % 1000));
}

static void put_id(FILE *f, osk_id_kind_t kind, int64_t num, const char *str) {
  if (kind == OSK_ID_INT) fprintf(f, "%lld", (long long)num);
  else if (kind == OSK_ID_STR) put_json_string(f, str, strlen(str));
  else fputs("0", f);
}

static void sep(osk__out_t *o) {
  if (!o->first) fputs(",\n", o->f);
  o->first = 0;
}

static void write_event(osk__out_t *o, const osk_correction_t *c, const osk__ev_t *e, int64_t ts2,
                        int64_t dur2, uint64_t desc, uint64_t py_desc) {
  const osk__thread_t *t = &c->threads[e->thread];
  FILE *f = o->f;
  sep(o);
  fputs("{\"ph\":\"X\",\"cat\":", f);
  put_json_string(f, c->cats[e->cat], strlen(c->cats[e->cat]));
  fputs(",\"name\":", f);
  put_json_string(f, c->ops[e->name].name.ptr, c->ops[e->name].name.len);
  fputs(",\"pid\":", f);
  put_id(f, t->pid_kind, t->pid_num, t->pid_str);
  fputs(",\"tid\":", f);
  put_id(f, t->tid_kind, t->tid_num, t->tid_str);
  fputs(",\"ts\":", f);
  put_us(f, ts2);
  fputs(",\"dur\":", f);
  put_us(f, dur2);
  fputs(",\"args\":{\"reported_ts\":", f);
  put_us(f, e->ts);
  fputs(",\"reported_dur\":", f);
  put_us(f, e->dur);
  fprintf(f, ",\"descendants\":%llu,\"py_descendants\":%llu}}", (unsigned long long)desc,
          (unsigned long long)py_desc);
}

/* ------------------------------------------------------- the compensation */

typedef struct {
  const osk__ev_t *e;
  int64_t end;          /* reported end */
  uint64_t desc;        /* operator-class events nested inside */
  uint64_t py_desc;     /* Python-class events nested inside */
  int64_t child_rep;    /* sum of children's reported durations */
  double child_corr;    /* sum of children's corrected durations */
  int64_t begin2;       /* corrected begin on the compressed time line */
} osk__open_t;

/* The instrument's cost of one event of e's class: outside its interval on
 * each side (`half`) and inside it (`delta`). */
static void event_cost(const osk_correction_t *c, const osk__ev_t *e, double *half, double *delta) {
  double w = is_py(c, e) ? c->opts.w_py_ns : c->opts.w_ns;
  *delta = is_py(c, e) ? c->opts.delta_py_ns : c->opts.delta_ns;
  *half = (w - *delta) / 2.0;
}

/* Closes the innermost open event. `cut` (INT64_MAX: none) is the start of
 * a later event that outlives it: its parent then counts it only up to there
 * in the children's time, which the later event also fills. */
static void close_event(osk_correction_t *c, osk__open_t *stack, size_t *depth, double *removed,
                        int64_t *last2, osk__out_t *o, int64_t cut) {
  osk__open_t *x = &stack[--*depth];
  double half, delta;
  event_cost(c, x->e, &half, &delta);
  int64_t dur = x->end - x->e->ts;
  /* The compressed end: every instrument nanosecond before it is removed. */
  int64_t end2 = x->end - (int64_t)llround(*removed);
  if (end2 < *last2) end2 = *last2; /* over-compensation: keep time monotonic */
  if (end2 < x->begin2) end2 = x->begin2;
  *last2 = end2;
  *removed += half;
  double corr = (double)dur - delta - c->opts.w_ns * (double)x->desc -
                c->opts.w_py_ns * (double)x->py_desc;
  double resid = 0.0;
  if (corr < 0) {
    resid = -corr;
    corr = 0;
  }
  osk_correct_op_t *op = &c->ops[x->e->name];
  op->calls++;
  op->reported_total_ns += dur;
  op->reported_self_ns += dur - x->child_rep;
  op->corrected_total_ns += corr;
  double self_corr = corr - x->child_corr;
  op->corrected_self_ns += self_corr > 0 ? self_corr : 0;
  op->descendants += x->desc;
  op->py_descendants += x->py_desc;
  if (resid > 0) {
    op->clamped++;
    op->residual_ns += resid;
    c->stats.clamped++;
    c->stats.residual_ns += resid;
  }
  if (*depth > 0) {
    osk__open_t *p = &stack[*depth - 1];
    p->desc += x->desc + !is_py(c, x->e);
    p->py_desc += x->py_desc + is_py(c, x->e);
    int64_t span = (x->end < cut ? x->end : cut) - x->e->ts;
    p->child_rep += span;
    p->child_corr += dur > 0 ? corr * (double)span / (double)dur : 0.0;
  } else {
    c->stats.reported_top_ns += dur;
    c->stats.corrected_top_ns += corr;
  }
  if (o && o->f) write_event(o, c, x->e, x->begin2, end2 - x->begin2, x->desc, x->py_desc);
}

static int compensate(osk_correction_t *c, osk__out_t *o) {
  qsort(c->ev, c->n_ev, sizeof *c->ev, cmp_ev);
  size_t cap = 64, depth = 0;
  osk__open_t *stack = malloc(cap * sizeof *stack);
  if (!stack) return OSK_ENOMEM;
  uint32_t thread = UINT32_MAX;
  double removed = 0;
  int64_t last2 = INT64_MIN;
  for (size_t i = 0; i <= c->n_ev; i++) {
    const osk__ev_t *e = i < c->n_ev ? &c->ev[i] : NULL;
    if (!e || e->thread != thread) {
      while (depth) close_event(c, stack, &depth, &removed, &last2, o, INT64_MAX);
      if (!e) break;
      thread = e->thread;
      /* Start the compressed time line at the thread's first event: its
       * pre-begin share is not taken from before the trace's start. */
      double half0, delta0;
      event_cost(c, e, &half0, &delta0);
      removed = -half0;
      last2 = INT64_MIN;
    }
    while (depth && stack[depth - 1].end <= e->ts)
      close_event(c, stack, &depth, &removed, &last2, o, INT64_MAX);
    int64_t end = e->ts + e->dur;
    /* Improper nesting: e outlives the open event it starts in. This is the
     * rule, not noise, for annotations opened from Python under with_stack:
     * record_function's user_annotation starts inside the Python tracer's
     * __enter__ event and ends inside __exit__'s. Clipping e would cut the
     * annotation to the __enter__ call; instead the events e outlives are
     * closed here, at e's start, so e keeps its whole interval and its
     * descendants, and the corrected time line stays properly nested. */
    while (depth && stack[depth - 1].end < end) {
      close_event(c, stack, &depth, &removed, &last2, o, e->ts);
      c->stats.overlaps++;
    }
    if (depth == cap) {
      osk__open_t *s2 = realloc(stack, 2 * cap * sizeof *stack);
      if (!s2) {
        free(stack);
        return OSK_ENOMEM;
      }
      stack = s2;
      cap *= 2;
    }
    double half, delta;
    event_cost(c, e, &half, &delta);
    removed += half;
    int64_t begin2 = e->ts - (int64_t)llround(removed);
    if (begin2 < last2) begin2 = last2;
    last2 = begin2;
    removed += delta;
    stack[depth++] = (osk__open_t){e, end, 0, 0, 0, 0.0, begin2};
  }
  free(stack);
  return 0;
}

/* ------------------------------------------------------------ public API */

static const char *const default_cats[] = {"cpu_op", "user_annotation"};
static const char *const default_py_cats[] = {"python_function"};

static int add_categories(osk_correction_t *c, const char *const *cats, size_t n) {
  for (size_t i = 0; i < n; i++) {
    for (size_t j = 0; j < c->n_cats; j++)
      if (strcmp(c->cats[j], cats[i]) == 0) return OSK_EINVAL; /* in both classes, or twice */
    if (!(c->cats[c->n_cats] = dup_bytes(cats[i], strlen(cats[i])))) return OSK_ENOMEM;
    c->n_cats++;
  }
  return 0;
}

static int write_header(osk__out_t *o, const osk_correction_t *c, const osk_reader_t *r,
                        const char *in_path) {
  FILE *f = o->f;
  fputs("{\n", f);
  size_t nm = osk_reader_meta_count(r);
  for (size_t i = 0; i < nm; i++) {
    osk_str_t k, v;
    int is_str;
    if (osk_reader_meta_get(r, i, &k, &v, &is_str)) continue;
    if (str_is(k, "opskew") || str_is(k, "traceEvents")) continue;
    put_json_string(f, k.ptr, k.len);
    fputc(':', f);
    if (is_str) put_json_string(f, v.ptr, v.len);
    else fwrite(v.ptr, 1, v.len, f);
    fputs(",\n", f);
  }
  fprintf(f,
          "\"opskew\":{\"corrected\":{\"w_ns\":%.3f,\"delta_ns\":%.3f,\"w_py_ns\":%.3f,"
          "\"delta_py_ns\":%.3f,\"source\":",
          c->opts.w_ns, c->opts.delta_ns, c->opts.w_py_ns, c->opts.delta_py_ns);
  put_json_string(f, in_path, strlen(in_path));
  fputs(",\"model\":\"corrected = reported - delta - W * descendants - W_py * py_descendants; "
        "time line compressed per thread\"}},\n\"traceEvents\":[\n",
        f);
  o->first = 1;
  for (size_t i = 0; i < c->n_procs; i++) {
    sep(o);
    fputs("{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":", f);
    put_id(f, c->procs[i].kind, c->procs[i].num, c->procs[i].str);
    fputs(",\"args\":{\"name\":", f);
    put_json_string(f, c->procs[i].name, strlen(c->procs[i].name));
    fputs("}}", f);
  }
  for (size_t i = 0; i < c->n_threads; i++) {
    const osk__thread_t *t = &c->threads[i];
    if (!t->name) continue;
    sep(o);
    fputs("{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":", f);
    put_id(f, t->pid_kind, t->pid_num, t->pid_str);
    fputs(",\"tid\":", f);
    put_id(f, t->tid_kind, t->tid_num, t->tid_str);
    fputs(",\"args\":{\"name\":", f);
    put_json_string(f, t->name, strlen(t->name));
    fputs("}}", f);
  }
  return 0;
}

int osk_correct_path(const char *in_path, const char *out_path, const osk_correct_opts_t *opts,
                     osk_correction_t **out, osk_read_error_t *err) {
  osk_read_error_t local;
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
  osk_correction_t *c = calloc(1, sizeof *c);
  if (!c) return OSK_ENOMEM;
  c->opts = *opts;
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
    osk_correction_free(c);
    return crc0;
  }
  c->opts.categories = NULL;
  c->opts.py_categories = NULL;
  osk_reader_t *r = NULL;
  int rc = osk_reader_open(&r, in_path, NULL, err);
  if (rc) {
    osk_correction_free(c);
    return rc;
  }
  rc = osk_reader_run(r, on_event, c, err);
  if (rc && rc != OSK_ETRUNCATED) {
    osk_reader_free(r);
    osk_correction_free(c);
    return rc;
  }
  int truncated = rc == OSK_ETRUNCATED;
  c->stats.truncated = truncated;
  c->stats.corrected_events = c->n_ev;
  c->stats.threads = c->n_threads;
  osk__out_t o = {NULL, 1, 0};
  char *tmp = NULL;
  if (out_path) {
    size_t n = strlen(out_path);
    tmp = malloc(n + 16);
    if (!tmp) {
      osk_reader_free(r);
      osk_correction_free(c);
      return OSK_ENOMEM;
    }
    snprintf(tmp, n + 16, "%s.tmp-opskew", out_path);
    o.f = fopen(tmp, "w");
    if (!o.f) {
      err->code = OSK_EIO;
      err->sys_errno = errno;
      err->message = "cannot open the output file";
      free(tmp);
      osk_reader_free(r);
      osk_correction_free(c);
      return OSK_EIO;
    }
    write_header(&o, c, r, in_path);
  }
  osk_reader_free(r);
  int crc = compensate(c, &o);
  if (o.f) {
    fputs("\n]}\n", o.f);
    int bad = ferror(o.f);
    bad |= fclose(o.f) != 0;
    if (crc == 0 && !bad && rename(tmp, out_path) != 0) bad = 1;
    if (bad || crc) {
      remove(tmp);
      if (!crc) {
        err->code = OSK_EIO;
        err->sys_errno = errno;
        err->message = "writing the corrected trace failed";
        crc = OSK_EIO;
      }
    }
    free(tmp);
  }
  if (crc) {
    osk_correction_free(c);
    return crc;
  }
  *out = c;
  return truncated ? OSK_ETRUNCATED : 0;
}

size_t osk_correction_op_count(const osk_correction_t *c) { return c ? c->n_ops : 0; }

const osk_correct_op_t *osk_correction_op(const osk_correction_t *c, size_t i) {
  return c && i < c->n_ops ? &c->ops[i] : NULL;
}

const osk_correct_stats_t *osk_correction_stats(const osk_correction_t *c) {
  return c ? &c->stats : NULL;
}

void osk_correction_free(osk_correction_t *c) {
  if (!c) return;
  for (size_t i = 0; i < c->n_cats; i++) free(c->cats[i]);
  free(c->cats);
  for (size_t i = 0; i < c->n_ops; i++) free((char *)c->ops[i].name.ptr);
  free(c->ops);
  free(c->name_hash);
  free(c->name_idx.slots);
  for (size_t i = 0; i < c->n_threads; i++) {
    free(c->threads[i].pid_str);
    free(c->threads[i].tid_str);
    free(c->threads[i].name);
  }
  free(c->threads);
  free(c->thread_hash);
  free(c->thread_idx.slots);
  for (size_t i = 0; i < c->n_procs; i++) {
    free(c->procs[i].str);
    free(c->procs[i].name);
  }
  free(c->procs);
  free(c->ev);
  free(c);
}
