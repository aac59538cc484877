/* job.c: a multi-rank job's traces together: per-rank and merged tables,
 * steps, collectives matched across ranks, clock alignment and TAU's
 * parallel correction (the model is at the top of opskew_job.h). */
#include "opskew_job.h"
#include "reader_analysis.h"
#include "reader_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ structures */

typedef struct {
  char *path;
  const void *data;
  size_t len;
  osk_summary_t *summary;
  int64_t first_ns; /* earliest complete event's start */
  int have_first;
  int status;       /* the first pass's code: 0, OSK_ETRUNCATED, OSK_EFORMAT */
  osk_error_t err;  /* and its error */
  osk_reader_stats_t rstats; /* the first pass's reader counters */
} source_t;

typedef struct {
  int64_t ts, end;
  uint64_t thread; /* hash of (pid, tid) */
  uint32_t name, seg;
  int family;
  int64_t step;
  uint32_t ord;
} coll_t;

typedef struct {
  int64_t ts, dur, n;
  uint32_t seg;
  int gpu; /* Kineto's copy on the GPU stream (cat "gpu_user_annotation") */
} step_t;

typedef struct {
  osk_job_rank_t pub;
  source_t *src;
  size_t n_src, src_cap;
  osk_summary_t *summary;
  coll_t *coll;
  size_t n_coll, coll_cap;
  uint64_t family_count[5];
  step_t *steps; /* after key_collectives: the CPU steps, then the GPU ones */
  size_t n_steps, steps_cap, n_gpu_steps;
  /* Clock fit: reference time t_ref -> t = t_ref + a + b (t_ref - t0). */
  double a, b;
  /* Count pass: sorted boundaries and the cost of events with start <= each. */
  int64_t *bounds;
  size_t n_bounds, bounds_cap;
  double *cum;
  uint64_t *cnt; /* events per gap, operator class; py in cnt_py */
  uint64_t *cnt_py;
  /* Sync points after the model: raw arrival, the shift after it, per
   * segment. */
  int64_t *sync_p;
  double *sync_d;
  uint32_t *sync_seg;
  size_t n_sync;
} rank_t;

typedef struct {
  osk_str_t name; /* owned */
  int py;
} icat_t;

typedef struct {
  osk_job_collective_t pub;
  size_t base; /* offset into the per-rank arrays */
} jcoll_t;

struct osk_job {
  osk_summary_opts_t sopts;
  char **sopt_strs; /* copies of the summary categories */
  size_t n_sopt_strs;
  int have_sopts;
  int align;
  /* The instrumented categories, operator class then Python class. */
  icat_t *icats;
  size_t n_icats, last_icat; /* last_icat: index + 1 of the last match */

  rank_t *ranks;
  size_t n_ranks, ranks_cap;
  osk__names_t names;
  osk_summary_t *merged;

  jcoll_t *coll;
  size_t n_coll, coll_cap;
  int64_t *c_enter, *c_exit;
  double *c_wait, *c_own, *c_shift, *c_cwait;
  size_t c_n, c_cap; /* entries of the per-rank arrays */

  osk_job_step_t *steps;
  size_t n_steps;
  int64_t *s_dur;
  double *s_corr;

  osk_job_stats_t stats;
  int ran;
  int failed;
  size_t failed_rank, failed_src;
};

static const char *const FAMILY_NAMES[] = {"nccl kernels", "gloo", "record_param_comms", "nccl",
                                           "c10d"};

/* ------------------------------------------------------------- helpers */

static int starts_with(osk_str_t s, const char *p) {
  size_t n = strlen(p);
  return s.len >= n && memcmp(s.ptr, p, n) == 0;
}

static int contains(osk_str_t s, const char *p) {
  size_t n = strlen(p);
  for (size_t i = 0; i + n <= s.len; i++)
    if (memcmp(s.ptr + i, p, n) == 0) return 1;
  return 0;
}

static int family_of(const osk_reader_event_t *ev) {
  osk_str_t n = ev->name;
  if (starts_with(n, "gloo:")) return OSK_JOB_FAMILY_GLOO;
  if (starts_with(n, "nccl:")) return OSK_JOB_FAMILY_NCCL;
  if (starts_with(n, "c10d::")) return OSK_JOB_FAMILY_C10D;
  if (osk__str_is(n, "record_param_comms", 18)) return OSK_JOB_FAMILY_PARAM_COMMS;
  if (starts_with(n, "nccl") && osk__str_is(ev->cat, "kernel", 6)) return OSK_JOB_FAMILY_NCCL_KERNEL;
  return OSK_JOB_FAMILY_NONE;
}

static uint64_t id_hash(uint64_t h, const osk_reader_id_t *id) {
  h = osk__hash_byte(h, (unsigned char)id->kind);
  if (id->kind == OSK_READER_ID_INT) return osk__hash_bytes(h, &id->num, sizeof id->num);
  return osk__hash_bytes(h, id->str.ptr, id->str.len);
}

/* "ProfilerStep#N" -> N; 0 when the name is not a step. */
static int step_number(osk_str_t n, int64_t *out) {
  static const char p[] = "ProfilerStep#";
  if (!starts_with(n, p) || n.len == sizeof p - 1 || n.len > sizeof p - 1 + 18) return 0;
  int64_t v = 0;
  for (size_t i = sizeof p - 1; i < n.len; i++) {
    if (n.ptr[i] < '0' || n.ptr[i] > '9') return 0;
    v = v * 10 + (n.ptr[i] - '0');
  }
  *out = v;
  return 1;
}

static char **copy_strs(const char *const *s, size_t n) {
  char **c = calloc(n ? n : 1, sizeof *c);
  if (!c) return NULL;
  for (size_t i = 0; i < n; i++) {
    if (!s[i] || !(c[i] = osk__dup_bytes(s[i], strlen(s[i])))) {
      for (size_t k = 0; k < i; k++) free(c[k]);
      free(c);
      return NULL;
    }
  }
  return c;
}

static void free_strs(char **s, size_t n) {
  for (size_t i = 0; s && i < n; i++) free(s[i]);
  free(s);
}

/* Adds the categories to j->icats; OSK_EINVAL for a NULL one. */
static int add_icats(osk_job_t *j, const char *const *c, size_t n, int py) {
  icat_t *t = realloc(j->icats, (j->n_icats + n + 1) * sizeof *t);
  if (!t) return OSK_ENOMEM;
  j->icats = t;
  for (size_t i = 0; i < n; i++) {
    if (!c[i]) return OSK_EINVAL;
    size_t len = strlen(c[i]);
    char *d = osk__dup_bytes(c[i], len);
    if (!d) return OSK_ENOMEM;
    j->icats[j->n_icats++] = (icat_t){{d, len}, py};
  }
  return 0;
}

/* An event's class by its category: 0 operator, 1 Python, -1 neither.
 * Events come in runs of one category: the last match is tried first. */
static int cat_class(osk_job_t *j, osk_str_t cat) {
  if (j->last_icat && osk__str_is(cat, j->icats[j->last_icat - 1].name.ptr, j->icats[j->last_icat - 1].name.len))
    return j->icats[j->last_icat - 1].py;
  for (size_t i = 0; i < j->n_icats; i++) {
    if (osk__str_is(cat, j->icats[i].name.ptr, j->icats[i].name.len)) {
      j->last_icat = i + 1;
      return j->icats[i].py;
    }
  }
  return -1;
}

/* ------------------------------------------------------------------ API */

int osk_job_new(osk_job_t **out, const osk_job_opts_t *opts) {
  if (!out) return OSK_EINVAL;
  *out = NULL;
  osk_job_t *j = calloc(1, sizeof *j);
  if (!j) return OSK_ENOMEM;
  static const char *const dcats[] = {"cpu_op", "user_annotation"};
  static const char *const dpy[] = {"python_function"};
  const char *const *cats = opts && opts->categories ? opts->categories : dcats;
  size_t nc = opts && opts->categories ? opts->n_categories : 2;
  const char *const *py = opts && opts->py_categories ? opts->py_categories : dpy;
  size_t np = opts && opts->py_categories ? opts->n_py_categories : 1;
  int rc = add_icats(j, cats, nc, 0);
  if (!rc) rc = add_icats(j, py, np, 1);
  if (!rc && opts && opts->summary) {
    const osk_summary_opts_t *so = opts->summary;
    size_t n = (so->categories ? so->n_categories : 0) +
               (so->exclude_categories ? so->n_exclude_categories : 0);
    const char **all = calloc(n ? n : 1, sizeof *all);
    if (!all) rc = OSK_ENOMEM;
    size_t k = 0;
    for (size_t i = 0; !rc && so->categories && i < so->n_categories; i++) all[k++] = so->categories[i];
    for (size_t i = 0; !rc && so->exclude_categories && i < so->n_exclude_categories; i++)
      all[k++] = so->exclude_categories[i];
    if (!rc) {
      for (size_t i = 0; i < k; i++)
        if (!all[i]) rc = OSK_EINVAL;
    }
    if (!rc && !(j->sopt_strs = copy_strs(all, k))) rc = OSK_ENOMEM;
    free(all);
    if (!rc) {
      j->n_sopt_strs = k;
      j->have_sopts = 1;
      size_t ni = so->categories ? so->n_categories : 0;
      j->sopts.categories = so->categories ? (const char *const *)j->sopt_strs : NULL;
      j->sopts.n_categories = ni;
      j->sopts.exclude_categories =
          so->exclude_categories ? (const char *const *)j->sopt_strs + ni : NULL;
      j->sopts.n_exclude_categories = so->exclude_categories ? so->n_exclude_categories : 0;
    }
  }
  if (rc) {
    osk_job_free(j);
    return rc;
  }
  j->align = opts ? opts->align != 0 : 0;
  j->stats.family = OSK_JOB_FAMILY_NONE;
  j->stats.family_name = "none";
  *out = j;
  return 0;
}

static rank_t *rank_get(osk_job_t *j, int rank, int create) {
  size_t i = 0;
  while (i < j->n_ranks && j->ranks[i].pub.rank < rank) i++;
  if (i < j->n_ranks && j->ranks[i].pub.rank == rank) return &j->ranks[i];
  if (!create) return NULL;
  if (osk__grow((void **)&j->ranks, &j->ranks_cap, j->n_ranks + 1, sizeof *j->ranks)) return NULL;
  memmove(&j->ranks[i + 1], &j->ranks[i], (j->n_ranks - i) * sizeof *j->ranks);
  memset(&j->ranks[i], 0, sizeof *j->ranks);
  j->ranks[i].pub.rank = rank;
  j->n_ranks++;
  return &j->ranks[i];
}

static int add_source(osk_job_t *j, int rank, const char *path, const void *data, size_t len) {
  if (!j || rank < 0 || j->ran || (!path && !data)) return OSK_EINVAL;
  rank_t *r = rank_get(j, rank, 1);
  if (!r) return OSK_ENOMEM;
  if (osk__grow((void **)&r->src, &r->src_cap, r->n_src + 1, sizeof *r->src)) return OSK_ENOMEM;
  source_t *s = &r->src[r->n_src];
  memset(s, 0, sizeof *s);
  if (path && !(s->path = osk__dup_bytes(path, strlen(path)))) return OSK_ENOMEM;
  s->data = data;
  s->len = len;
  r->n_src++;
  r->pub.sources = r->n_src;
  return 0;
}

int osk_job_add_path(osk_job_t *j, int rank, const char *path) {
  return path ? add_source(j, rank, path, NULL, 0) : OSK_EINVAL;
}

int osk_job_add_mem(osk_job_t *j, int rank, const void *data, size_t len) {
  return data ? add_source(j, rank, NULL, data, len) : OSK_EINVAL;
}

int osk_job_set_cost(osk_job_t *j, int rank, double w_ns, double w_py_ns) {
  if (!j || j->ran || !(w_ns >= 0) || !(w_py_ns >= 0) || !isfinite(w_ns) || !isfinite(w_py_ns))
    return OSK_EINVAL;
  rank_t *r = rank_get(j, rank, 0);
  if (!r) return OSK_EINVAL;
  r->pub.costed = 1;
  r->pub.w_ns = w_ns;
  r->pub.w_py_ns = w_py_ns;
  return 0;
}

/* ------------------------------------------------------------ first pass */

typedef struct {
  osk_job_t *j;
  rank_t *r;
  source_t *s;
  uint32_t seg;
} tap_t;

static int tap_event(void *ctx, const osk_reader_event_t *ev) {
  tap_t *t = ctx;
  if (ev->ph.len != 1 || ev->ph.ptr[0] != 'X' || !osk__event_usable(ev, OSK__EV_COMPLETE)) return 0;
  if (!t->s->have_first || ev->ts_ns < t->s->first_ns) {
    t->s->first_ns = ev->ts_ns;
    t->s->have_first = 1;
  }
  rank_t *r = t->r;
  int64_t n;
  if (step_number(ev->name, &n)) {
    if (osk__grow((void **)&r->steps, &r->steps_cap, r->n_steps + 1, sizeof *r->steps))
      return OSK_ENOMEM;
    int gpu = osk__str_is(ev->cat, "gpu_user_annotation", 19);
    r->steps[r->n_steps++] = (step_t){ev->ts_ns, ev->dur_ns, n, t->seg, gpu};
    if (gpu) r->n_gpu_steps++;
    return 0;
  }
  int fam = family_of(ev);
  if (fam < 0) return 0;
  int64_t id = osk__names_intern(&t->j->names, ev->name.ptr, ev->name.len);
  if (id < 0) return (int)id;
  if (osk__grow((void **)&r->coll, &r->coll_cap, r->n_coll + 1, sizeof *r->coll)) return OSK_ENOMEM;
  uint64_t th = id_hash(id_hash(1469598103934665603ull, &ev->pid), &ev->tid);
  r->coll[r->n_coll++] = (coll_t){ev->ts_ns, ev->ts_ns + ev->dur_ns, th, (uint32_t)id, t->seg, fam, -1, 0};
  r->family_count[fam]++;
  return 0;
}

static int read_sources(osk_job_t *j, osk_error_t *err) {
  int worst = 0;
  for (size_t i = 0; i < j->n_ranks; i++) {
    rank_t *r = &j->ranks[i];
    for (size_t k = 0; k < r->n_src; k++) {
      source_t *s = &r->src[k];
      tap_t t = {j, r, s, (uint32_t)k};
      int rc = osk__summary_tapped(s->path, s->data, s->len, j->have_sopts ? &j->sopts : NULL,
                                   tap_event, &t, &s->summary, &s->rstats, &s->err);
      s->status = rc;
      if (rc == OSK_ETRUNCATED || rc == OSK_EFORMAT) {
        if (!r->pub.status) r->pub.status = rc;
        if (!worst) { /* the first source that ended early is the one `err` names */
          worst = rc;
          *err = s->err;
          j->failed_rank = i;
          j->failed_src = k;
        }
      } else if (rc) {
        *err = s->err;
        j->failed = 1;
        j->failed_rank = i;
        j->failed_src = k;
        return rc;
      }
    }
  }
  return worst;
}

static int merge_tables(osk_job_t *j) {
  int rc = osk_summary_new(&j->merged, NULL);
  for (size_t i = 0; !rc && i < j->n_ranks; i++) {
    rank_t *r = &j->ranks[i];
    rc = osk_summary_new(&r->summary, NULL);
    for (size_t k = 0; !rc && k < r->n_src; k++) rc = osk_summary_merge(r->summary, r->src[k].summary);
    if (!rc) rc = osk_summary_merge(j->merged, r->summary);
    r->pub.summary = r->summary;
  }
  return rc;
}

/* ------------------------------------------------- steps and collectives */

static int step_cmp(const void *a, const void *b) {
  const step_t *x = a, *y = b;
  if (x->gpu != y->gpu) return x->gpu - y->gpu;
  if (x->seg != y->seg) return x->seg < y->seg ? -1 : 1;
  return (x->ts > y->ts) - (x->ts < y->ts);
}

static int coll_cmp(const void *a, const void *b) {
  const coll_t *x = a, *y = b;
  if (x->seg != y->seg) return x->seg < y->seg ? -1 : 1;
  if (x->ts != y->ts) return x->ts < y->ts ? -1 : 1;
  return (y->end > x->end) - (y->end < x->end); /* the longer (outer) first */
}

/* Keeps the outermost events of `fam`, sorted, and keys them. */
static void key_collectives(rank_t *r, int fam) {
  size_t n = 0;
  for (size_t i = 0; i < r->n_coll; i++)
    if (r->coll[i].family == fam) r->coll[n++] = r->coll[i];
  if (n) qsort(r->coll, n, sizeof *r->coll, coll_cmp);
  size_t kept = 0;
  for (size_t i = 0; i < n; i++) {
    coll_t *c = &r->coll[i];
    int inner = 0;
    /* An event inside an earlier one of its thread is nested: look back
     * over the recent kept events (collectives rarely overlap). */
    for (size_t b = kept; b-- > 0 && kept - b <= 16;) {
      coll_t *o = &r->coll[b];
      if (o->seg == c->seg && o->thread == c->thread && c->ts >= o->ts && c->end <= o->end) {
        inner = 1;
        break;
      }
    }
    if (!inner) r->coll[kept++] = *c;
  }
  r->n_coll = kept;
  if (r->n_steps) qsort(r->steps, r->n_steps, sizeof *r->steps, step_cmp);
  /* GPU kernels are keyed by the steps' copies on the GPU stream when the
   * trace has them (the GPU runs behind the CPU), else by the CPU's. */
  size_t n_cpu = r->n_steps - r->n_gpu_steps;
  const step_t *st = r->steps;
  size_t ns = n_cpu;
  if (fam == OSK_JOB_FAMILY_NCCL_KERNEL && r->n_gpu_steps) {
    st = r->steps + n_cpu;
    ns = r->n_gpu_steps;
  }
  size_t si = 0;
  for (size_t i = 0; i < kept; i++) {
    coll_t *c = &r->coll[i];
    while (si < ns && (st[si].seg < c->seg || (st[si].seg == c->seg && st[si].ts <= c->ts))) si++;
    /* st[si - 1] is the last step starting at or before c, if in c's segment */
    c->step = si > 0 && st[si - 1].seg == c->seg ? st[si - 1].n : -1;
    c->ord = i > 0 && r->coll[i - 1].seg == c->seg && r->coll[i - 1].step == c->step
                 ? r->coll[i - 1].ord + 1
                 : 0;
  }
  r->pub.collectives = kept;
  r->n_steps = n_cpu; /* the job's steps are the CPU's */
  r->pub.steps = n_cpu;
}

static int key_cmp(const coll_t *x, const coll_t *y) {
  if (x->seg != y->seg) return x->seg < y->seg ? -1 : 1;
  if (x->step != y->step) return x->step < y->step ? -1 : 1;
  return (x->ord > y->ord) - (x->ord < y->ord);
}

/* Rank time -> the reference's clock, when aligned. */
static int64_t to_ref(const osk_job_t *j, const rank_t *r, int64_t t, int64_t t0) {
  return j->align ? osk__clock_to_ref(t, t0, r->a, r->b) : t;
}

/* Resizes *p to `cap` elements of `elem` bytes; *p is kept on failure.
 * Parallel arrays grow one at a time, each valid whichever fails. */
static int resize(void **p, size_t cap, size_t elem) {
  void *np = realloc(*p, cap * elem);
  if (!np) return OSK_ENOMEM;
  *p = np;
  return 0;
}

static int grow_coll(osk_job_t *j, size_t nr) {
  if (osk__grow((void **)&j->coll, &j->coll_cap, j->n_coll + 1, sizeof *j->coll)) return OSK_ENOMEM;
  size_t need = j->c_n + nr, cap = j->c_cap;
  if (need > cap) {
    size_t nc = cap ? cap * 2 : 64;
    while (nc < need) nc *= 2;
    if (resize((void **)&j->c_enter, nc, sizeof *j->c_enter) ||
        resize((void **)&j->c_exit, nc, sizeof *j->c_exit))
      return OSK_ENOMEM;
    double **ds[] = {&j->c_wait, &j->c_own, &j->c_shift, &j->c_cwait};
    for (size_t k = 0; k < sizeof ds / sizeof *ds; k++)
      if (resize((void **)ds[k], nc, sizeof **ds[k])) return OSK_ENOMEM;
    j->c_cap = nc;
  }
  return 0;
}

/* Matches the keyed collectives of every rank; fills j->coll with indices
 * into each rank's list (enter/exit hold the raw times until alignment). */
static int match(osk_job_t *j, size_t **idx_out) {
  size_t nr = j->n_ranks;
  size_t *pos = calloc(nr, sizeof *pos);
  size_t *idx = NULL, idx_cap = 0, n = 0;
  if (!pos) return OSK_ENOMEM;
  for (;;) {
    const coll_t *min = NULL;
    for (size_t r = 0; r < nr; r++) {
      rank_t *rk = &j->ranks[r];
      if (pos[r] < rk->n_coll && (!min || key_cmp(&rk->coll[pos[r]], min) < 0)) min = &rk->coll[pos[r]];
    }
    if (!min) break;
    coll_t key = *min;
    size_t have = 0, sends = 0, recvs = 0, sender = 0;
    for (size_t r = 0; r < nr; r++) {
      rank_t *rk = &j->ranks[r];
      if (pos[r] < rk->n_coll && key_cmp(&rk->coll[pos[r]], &key) == 0) {
        osk_str_t nm = j->names.str[rk->coll[pos[r]].name];
        have++;
        if (contains(nm, "send")) {
          sends++;
          sender = r;
        } else if (contains(nm, "recv")) {
          recvs++;
        }
      }
    }
    int same = have == nr;
    for (size_t r = 1; same && r < nr; r++) same = j->ranks[r].coll[pos[r]].name == j->ranks[0].coll[pos[0]].name;
    int p2p = have == nr && nr == 2 && sends == 1 && recvs == 1;
    if (p2p || same) {
      int rc = grow_coll(j, nr);
      if (!rc && osk__grow((void **)&idx, &idx_cap, (n + 1) * nr, sizeof *idx)) rc = OSK_ENOMEM;
      if (rc) {
        free(pos);
        free(idx);
        return rc;
      }
      jcoll_t *c = &j->coll[j->n_coll++];
      memset(c, 0, sizeof *c);
      c->base = j->c_n;
      j->c_n += nr;
      c->pub.segment = key.seg;
      c->pub.step = key.step;
      c->pub.ordinal = key.ord;
      c->pub.name = j->names.str[j->ranks[0].coll[pos[0]].name];
      c->pub.p2p = p2p;
      c->pub.sender = sender;
      for (size_t r = 0; r < nr; r++) idx[n * nr + r] = pos[r];
      n++;
      for (size_t r = 0; r < nr; r++) pos[r]++;
    } else {
      j->stats.unmatched++;
      for (size_t r = 0; r < nr; r++) {
        rank_t *rk = &j->ranks[r];
        if (pos[r] < rk->n_coll && key_cmp(&rk->coll[pos[r]], &key) == 0) pos[r]++;
      }
    }
  }
  free(pos);
  j->stats.matched = j->n_coll;
  *idx_out = idx;
  return 0;
}

/* ----------------------------------------------------------------- clocks */

static double median_of(double *x, size_t n) {
  double m = 0;
  osk_median(x, n, &m);
  return m;
}

/* Fits rank r's exits against the reference's (both raw): offset at the
 * first matched exit, drift, residuals. */
static int fit_clock(osk_job_t *j, size_t r, const size_t *idx, int64_t t0) {
  rank_t *rk = &j->ranks[r];
  size_t nr = j->n_ranks, m = 0;
  double *t = malloc((j->n_coll ? j->n_coll : 1) * sizeof *t);
  double *d = malloc((j->n_coll ? j->n_coll : 1) * sizeof *d);
  double *w = malloc((j->n_coll ? j->n_coll : 1) * sizeof *w);
  if (!t || !d || !w) {
    free(t);
    free(d);
    free(w);
    return OSK_ENOMEM;
  }
  for (size_t k = 0; k < j->n_coll; k++) {
    if (j->coll[k].pub.p2p) continue;
    int64_t xr = j->ranks[r].coll[idx[k * nr + r]].end, x0 = j->ranks[0].coll[idx[k * nr]].end;
    t[m] = (double)(x0 - t0);
    d[m] = (double)(xr - x0);
    m++;
  }
  /* Offset alone (the median) below 8 points; else a least-squares line,
   * fitted again without the points beyond 3 robust sd of the first fit
   * (a collective one rank left late, a descheduled thread). */
  double a = 0, b = 0;
  for (size_t k = 0; k < m; k++) w[k] = d[k];
  if (m) a = median_of(w, m);
  if (m >= 8 && t[m - 1] > t[0]) {
    double cut = INFINITY;
    for (int pass = 0; pass < 2; pass++) {
      double st = 0, sd = 0, n = 0;
      for (size_t k = 0; k < m; k++) {
        if (fabs(d[k] - a - b * t[k]) > cut) continue;
        st += t[k];
        sd += d[k];
        n++;
      }
      if (n < 3) break;
      double mt = st / n, md = sd / n, sxy = 0, sxx = 0;
      for (size_t k = 0; k < m; k++) {
        if (fabs(d[k] - a - b * t[k]) > cut) continue;
        sxy += (t[k] - mt) * (d[k] - md);
        sxx += (t[k] - mt) * (t[k] - mt);
      }
      if (!(sxx > 0)) break;
      double nb = sxy / sxx, na = md - nb * mt;
      for (size_t k = 0; k < m; k++) w[k] = fabs(d[k] - na - nb * t[k]);
      cut = 3 * 1.4826 * median_of(w, m) + 1;
      a = na;
      b = nb;
    }
  }
  double mx = 0;
  for (size_t k = 0; k < m; k++) {
    w[k] = fabs(d[k] - a - b * t[k]);
    if (w[k] > mx) mx = w[k];
  }
  rk->a = a;
  rk->b = b;
  rk->pub.clock_origin_ns = t0;
  rk->pub.offset_ns = a;
  rk->pub.drift_ppm = b * 1e6;
  rk->pub.residual_ns = m ? 1.4826 * median_of(w, m) : 0;
  rk->pub.residual_max_ns = mx;
  rk->pub.clock_points = m;
  free(t);
  free(d);
  free(w);
  return 0;
}

/* ----------------------------------------------------------- count pass */

static int add_bound(rank_t *r, int64_t t) {
  if (osk__grow((void **)&r->bounds, &r->bounds_cap, r->n_bounds + 1, sizeof *r->bounds))
    return OSK_ENOMEM;
  r->bounds[r->n_bounds++] = t;
  return 0;
}

/* Index of the first boundary >= t (n_bounds when none). */
static size_t gap_of(const rank_t *r, int64_t t) { return osk__count_below(r->bounds, r->n_bounds, t); }

typedef struct {
  osk_job_t *j;
  rank_t *r;
} count_t;

static int count_event(void *ctx, const osk_reader_event_t *ev) {
  count_t *c = ctx;
  if (ev->ph.len != 1 || ev->ph.ptr[0] != 'X' || !osk__event_usable(ev, OSK__EV_COMPLETE)) return 0;
  /* The steps' ranges and the collectives themselves are not operators
   * whose cost delays an arrival (docs/multirank.md). */
  int64_t n;
  int f = family_of(ev);
  if (step_number(ev->name, &n) || (f >= 0 && f == (int)c->j->stats.family)) return 0;
  int py = cat_class(c->j, ev->cat);
  if (py < 0) return 0;
  size_t g = gap_of(c->r, ev->ts_ns);
  if (py) c->r->cnt_py[g]++;
  else c->r->cnt[g]++;
  return 0;
}

/* C(bounds[i]): the cost of the events that started at or before it. */
static double cost_at(const rank_t *r, int64_t t) {
  size_t g = gap_of(r, t);
  return g < r->n_bounds && r->bounds[g] == t ? r->cum[g] : (g ? r->cum[g - 1] : 0);
}

static int count_pass(osk_job_t *j, const size_t *idx, osk_error_t *err) {
  size_t nr = j->n_ranks;
  for (size_t r = 0; r < nr; r++) {
    rank_t *rk = &j->ranks[r];
    int rc = 0;
    for (size_t k = 0; !rc && k < j->n_coll; k++) {
      const coll_t *c = &rk->coll[idx[k * nr + r]];
      rc = add_bound(rk, c->ts);
      if (!rc) rc = add_bound(rk, c->end);
    }
    for (size_t s = 0; !rc && s < rk->n_steps; s++) {
      rc = add_bound(rk, rk->steps[s].ts);
      if (!rc) rc = add_bound(rk, rk->steps[s].ts + rk->steps[s].dur);
    }
    for (size_t s = 0; !rc && s < rk->n_src; s++)
      if (rk->src[s].have_first && rk->src[s].first_ns > INT64_MIN) rc = add_bound(rk, rk->src[s].first_ns - 1);
    if (rc) return rc;
    if (rk->n_bounds) qsort(rk->bounds, rk->n_bounds, sizeof *rk->bounds, osk__cmp_i64);
    size_t u = 0;
    for (size_t i = 0; i < rk->n_bounds; i++)
      if (!u || rk->bounds[i] != rk->bounds[u - 1]) rk->bounds[u++] = rk->bounds[i];
    rk->n_bounds = u;
    rk->cnt = calloc(u + 1, sizeof *rk->cnt);
    rk->cnt_py = calloc(u + 1, sizeof *rk->cnt_py);
    rk->cum = calloc(u + 1, sizeof *rk->cum);
    if (!rk->cnt || !rk->cnt_py || !rk->cum) return OSK_ENOMEM;
    count_t cc = {j, rk};
    for (size_t s = 0; s < rk->n_src; s++) {
      osk_reader_t *rd;
      source_t *src = &rk->src[s];
      rc = src->path ? osk_reader_open(&rd, src->path, NULL, err)
                     : osk_reader_open_mem(&rd, src->data, src->len, 0, NULL, err);
      if (!rc) {
        rc = osk_reader_run(rd, count_event, &cc, err);
        osk_reader_free(rd);
      }
      if (rc == OSK_ETRUNCATED || rc == OSK_EFORMAT) rc = 0; /* the first pass said so */
      if (rc) {
        j->failed = 1;
        j->failed_rank = r;
        j->failed_src = s;
        return rc;
      }
    }
    double acc = 0;
    for (size_t i = 0; i <= u; i++) {
      acc += rk->pub.w_ns * (double)rk->cnt[i] + rk->pub.w_py_ns * (double)rk->cnt_py[i];
      rk->cum[i] = acc;
      rk->pub.events += rk->cnt[i];
      rk->pub.py_events += rk->cnt_py[i];
    }
    rk->pub.own_ns = acc;
  }
  return 0;
}

/* ----------------------------------------------------------------- model */

static int add_sync(rank_t *r, int64_t p, double d, uint32_t seg) {
  size_t cap = r->n_sync;
  if ((r->n_sync & (r->n_sync - 1)) == 0) { /* powers of two: grow */
    cap = r->n_sync ? r->n_sync * 2 : 1;
    if (resize((void **)&r->sync_p, cap, sizeof *r->sync_p) ||
        resize((void **)&r->sync_d, cap, sizeof *r->sync_d) ||
        resize((void **)&r->sync_seg, cap, sizeof *r->sync_seg))
      return OSK_ENOMEM;
  }
  r->sync_p[r->n_sync] = p;
  r->sync_d[r->n_sync] = d;
  r->sync_seg[r->n_sync] = seg;
  r->n_sync++;
  return 0;
}

/* The waits and, with costs, the parallel correction (top of opskew_job.h). */
static int model(osk_job_t *j, const size_t *idx, int costs) {
  size_t nr = j->n_ranks;
  double *D = calloc(nr, sizeof *D), *S = calloc(nr, sizeof *S), *P = calloc(nr, sizeof *P);
  int64_t *lastp = calloc(nr, sizeof *lastp);
  int *have_last = calloc(nr, sizeof *have_last);
  int rc = D && S && P && lastp && have_last ? 0 : OSK_ENOMEM;
  size_t seg = (size_t)-1;
  for (size_t k = 0; !rc && k < j->n_coll; k++) {
    jcoll_t *c = &j->coll[k];
    size_t b = c->base;
    if (c->pub.segment != seg) {
      seg = c->pub.segment;
      for (size_t r = 0; r < nr; r++) {
        D[r] = 0;
        have_last[r] = 0;
      }
    }
    /* Measured waits. */
    double maxp = -INFINITY, second = -INFINITY, minp = INFINITY;
    size_t last = 0;
    for (size_t r = 0; r < nr; r++) {
      double p = (double)j->c_enter[b + r];
      if (p > maxp) {
        second = maxp;
        maxp = p;
        last = r;
      } else if (p > second) {
        second = p;
      }
      if (p < minp) minp = p;
    }
    size_t snd = c->pub.sender, rcv = 1 - c->pub.sender;
    if (c->pub.p2p) {
      double wait = (double)(j->c_enter[b + snd] - j->c_enter[b + rcv]);
      for (size_t r = 0; r < nr; r++) j->c_wait[b + r] = 0;
      j->c_wait[b + rcv] = wait > 0 ? wait : 0;
      c->pub.last = wait > 0 ? snd : rcv;
      c->pub.lateness_ns = wait > 0 ? wait : 0;
      j->ranks[rcv].pub.wait_ns += j->c_wait[b + rcv];
      if (wait > 0) {
        j->ranks[snd].pub.last_arrivals++;
        j->ranks[snd].pub.lateness_ns += wait;
      }
    } else {
      c->pub.last = last;
      c->pub.lateness_ns = maxp - minp;
      for (size_t r = 0; r < nr; r++) {
        j->c_wait[b + r] = maxp - (double)j->c_enter[b + r];
        j->ranks[r].pub.wait_ns += j->c_wait[b + r];
      }
      j->ranks[last].pub.last_arrivals++;
      j->ranks[last].pub.lateness_ns += nr > 1 ? maxp - second : 0;
    }
    for (size_t r = 0; r < nr; r++) j->c_own[b + r] = j->c_shift[b + r] = j->c_cwait[b + r] = 0;
    if (!costs) continue;
    /* The correction. */
    for (size_t r = 0; r < nr; r++) {
      rank_t *rk = &j->ranks[r];
      const coll_t *rc_ = &rk->coll[idx[k * nr + r]];
      /* From the previous arrival: what ran beside that collective (DDP's
       * backward beside its bucket's allreduce) delays this arrival. */
      double from = have_last[r] ? cost_at(rk, lastp[r])
                                 : (rk->src[seg].have_first ? cost_at(rk, rk->src[seg].first_ns - 1) : 0);
      double o = (!have_last[r] || rc_->ts > lastp[r]) ? cost_at(rk, rc_->ts) - from : 0;
      if (o < 0) o = 0;
      j->c_own[b + r] = o;
      rk->pub.own_before_sync_ns += o;
      S[r] = D[r] + o;
      P[r] = (double)j->c_enter[b + r];
    }
    if (c->pub.p2p) {
      double m = fmax(P[snd], P[rcv]), m2 = fmax(P[snd] - S[snd], P[rcv] - S[rcv]);
      double nd = m - m2;
      j->ranks[rcv].pub.absorbed_ns += nd - S[rcv];
      D[rcv] = nd;
      D[snd] = S[snd];
      double cw = (P[snd] - S[snd]) - (P[rcv] - S[rcv]);
      j->c_cwait[b + rcv] = cw > 0 ? cw : 0;
      j->c_cwait[b + snd] = 0;
    } else {
      double m = -INFINITY, m2 = -INFINITY;
      for (size_t r = 0; r < nr; r++) {
        m = fmax(m, P[r]);
        m2 = fmax(m2, P[r] - S[r]);
      }
      double nd = m - m2;
      for (size_t r = 0; r < nr; r++) {
        j->ranks[r].pub.absorbed_ns += nd - S[r];
        j->c_cwait[b + r] = m2 - (P[r] - S[r]);
        D[r] = nd;
      }
    }
    for (size_t r = 0; r < nr; r++) {
      rank_t *rk = &j->ranks[r];
      j->c_shift[b + r] = D[r];
      j->ranks[r].pub.corrected_wait_ns += j->c_cwait[b + r];
      lastp[r] = rk->coll[idx[k * nr + r]].ts;
      have_last[r] = 1;
      rc = add_sync(rk, lastp[r], D[r], (uint32_t)seg);
      if (rc) break;
    }
  }
  free(D);
  free(S);
  free(P);
  free(lastp);
  free(have_last);
  return rc;
}

/* Rank r's shift at raw time t of segment seg. A sync point's shift is
 * taken at its arrival (the time its wait shrinks lies between arrival and
 * exit), so a step gets the shifts of the sync points it arrived at; the
 * rank's own costs count from the arrival on, as for the next arrival. */
static double shift_at(const rank_t *r, uint32_t seg, int64_t t) {
  /* The last sync point of seg arrived at by t. */
  size_t best = (size_t)-1;
  for (size_t lo = 0, hi = r->n_sync; lo < hi;) {
    size_t mid = lo + (hi - lo) / 2;
    if (r->sync_seg[mid] < seg || (r->sync_seg[mid] == seg && r->sync_p[mid] <= t)) {
      best = mid;
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  if (best != (size_t)-1 && r->sync_seg[best] == seg)
    return r->sync_d[best] + cost_at(r, t) - cost_at(r, r->sync_p[best]);
  double from = seg < r->n_src && r->src[seg].have_first ? cost_at(r, r->src[seg].first_ns - 1) : 0;
  return cost_at(r, t) - from;
}

static int step_key_cmp(const void *a, const void *b) {
  const osk_job_step_t *x = a, *y = b;
  if (x->segment != y->segment) return x->segment < y->segment ? -1 : 1;
  return (x->step > y->step) - (x->step < y->step);
}

static int build_steps(osk_job_t *j, int costs) {
  size_t nr = j->n_ranks, total = 0;
  for (size_t r = 0; r < nr; r++) total += j->ranks[r].n_steps;
  osk_job_step_t *all = calloc(total ? total : 1, sizeof *all);
  if (!all) return OSK_ENOMEM;
  size_t n = 0;
  for (size_t r = 0; r < nr; r++)
    for (size_t s = 0; s < j->ranks[r].n_steps; s++)
      all[n++] = (osk_job_step_t){j->ranks[r].steps[s].seg, j->ranks[r].steps[s].n, NULL, NULL};
  if (n) qsort(all, n, sizeof *all, step_key_cmp);
  size_t u = 0;
  for (size_t i = 0; i < n; i++)
    if (!u || step_key_cmp(&all[i], &all[u - 1]) != 0) all[u++] = all[i];
  j->steps = all;
  j->n_steps = u;
  size_t cells = u * nr;
  j->s_dur = malloc((cells ? cells : 1) * sizeof *j->s_dur);
  j->s_corr = malloc((cells ? cells : 1) * sizeof *j->s_corr);
  if (!j->s_dur || !j->s_corr) return OSK_ENOMEM;
  for (size_t i = 0; i < u * nr; i++) {
    j->s_dur[i] = -1;
    j->s_corr[i] = -1;
  }
  for (size_t r = 0; r < nr; r++) {
    rank_t *rk = &j->ranks[r];
    for (size_t s = 0; s < rk->n_steps; s++) {
      osk_job_step_t key = {rk->steps[s].seg, rk->steps[s].n, NULL, NULL};
      osk_job_step_t *hit = bsearch(&key, j->steps, u, sizeof *j->steps, step_key_cmp);
      size_t i = (size_t)(hit - j->steps);
      j->s_dur[i * nr + r] = rk->steps[s].dur;
      if (costs) {
        int64_t t0 = rk->steps[s].ts, t1 = t0 + rk->steps[s].dur;
        double c = (double)rk->steps[s].dur - (shift_at(rk, rk->steps[s].seg, t1) -
                                               shift_at(rk, rk->steps[s].seg, t0));
        j->s_corr[i * nr + r] = c > 0 ? c : 0;
      }
    }
  }
  for (size_t i = 0; i < u; i++) {
    j->steps[i].dur_ns = &j->s_dur[i * nr];
    j->steps[i].corrected_ns = &j->s_corr[i * nr];
  }
  return 0;
}

int osk_job_run(osk_job_t *j, osk_error_t *err) {
  osk_error_t local;
  if (!err) err = &local;
  *err = (osk_error_t){0, NULL, 0, 0};
  if (!j || j->ran || !j->n_ranks) return OSK_EINVAL;
  j->ran = 1;
  int status = read_sources(j, err);
  if (status && status != OSK_ETRUNCATED && status != OSK_EFORMAT) return status;
  int rc = merge_tables(j);
  /* The family: the first one every rank has. */
  for (int f = 0; !rc && f < 5 && j->stats.family == OSK_JOB_FAMILY_NONE; f++) {
    size_t have = 0;
    for (size_t r = 0; r < j->n_ranks; r++) have += j->ranks[r].family_count[f] > 0;
    if (have == j->n_ranks) {
      j->stats.family = (osk_job_family_t)f;
      j->stats.family_name = FAMILY_NAMES[f];
    }
  }
  for (size_t r = 0; !rc && r < j->n_ranks; r++) key_collectives(&j->ranks[r], j->stats.family);
  size_t *idx = NULL;
  if (!rc) rc = match(j, &idx);
  size_t nr = j->n_ranks;
  int64_t t0 = !rc && j->n_coll ? j->ranks[0].coll[idx[0]].end : 0;
  for (size_t r = 1; !rc && r < nr; r++) rc = fit_clock(j, r, idx, t0);
  j->stats.aligned = j->align;
  for (size_t r = 0; !rc && r < nr; r++) {
    const osk_summary_stats_t *ss = osk_summary_stats(j->ranks[r].summary);
    if (!ss->complete_events) continue;
    int64_t a = to_ref(j, &j->ranks[r], ss->first_ts_ns, t0), b = to_ref(j, &j->ranks[r], ss->last_end_ns, t0);
    int first = j->stats.first_ts_ns == 0 && j->stats.last_end_ns == 0;
    if (first || a < j->stats.first_ts_ns) j->stats.first_ts_ns = a;
    if (first || b > j->stats.last_end_ns) j->stats.last_end_ns = b;
  }
  for (size_t k = 0; !rc && k < j->n_coll; k++) {
    for (size_t r = 0; r < nr; r++) {
      const coll_t *c = &j->ranks[r].coll[idx[k * nr + r]];
      j->c_enter[j->coll[k].base + r] = to_ref(j, &j->ranks[r], c->ts, t0);
      j->c_exit[j->coll[k].base + r] = to_ref(j, &j->ranks[r], c->end, t0);
    }
  }
  int costs = 1;
  for (size_t r = 0; r < nr; r++) costs = costs && j->ranks[r].pub.costed;
  j->stats.corrected = costs;
  if (!rc && costs) rc = count_pass(j, idx, err);
  if (!rc) rc = model(j, idx, costs);
  if (!rc) rc = build_steps(j, costs);
  free(idx);
  for (size_t k = 0; !rc && k < j->n_coll; k++) {
    jcoll_t *c = &j->coll[k];
    c->pub.enter_ns = &j->c_enter[c->base];
    c->pub.exit_ns = &j->c_exit[c->base];
    c->pub.wait_ns = &j->c_wait[c->base];
    c->pub.own_ns = &j->c_own[c->base];
    c->pub.shift_ns = &j->c_shift[c->base];
    c->pub.corrected_wait_ns = &j->c_cwait[c->base];
  }
  if (rc) {
    if (!err->code) *err = (osk_error_t){rc, osk_strerror(rc), 0, 0};
    return rc;
  }
  return status;
}

/* -------------------------------------------------------------- results */

int osk_job_failed(const osk_job_t *j, size_t *rank_index, size_t *source) {
  if (!j || !j->failed) return OSK_ERANGE;
  if (rank_index) *rank_index = j->failed_rank;
  if (source) *source = j->failed_src;
  return 0;
}

size_t osk_job_rank_count(const osk_job_t *j) { return j ? j->n_ranks : 0; }

const osk_job_rank_t *osk_job_rank(const osk_job_t *j, size_t i) {
  return j && i < j->n_ranks ? &j->ranks[i].pub : NULL;
}

const osk_summary_t *osk_job_source_summary(const osk_job_t *j, size_t i, size_t k) {
  return j && i < j->n_ranks && k < j->ranks[i].n_src ? j->ranks[i].src[k].summary : NULL;
}

const osk_reader_stats_t *osk_job_source_reader_stats(const osk_job_t *j, size_t i, size_t k) {
  return j && i < j->n_ranks && k < j->ranks[i].n_src ? &j->ranks[i].src[k].rstats : NULL;
}

int osk_job_source_status(const osk_job_t *j, size_t i, size_t k, osk_error_t *err) {
  if (!j || i >= j->n_ranks || k >= j->ranks[i].n_src) return OSK_ERANGE;
  if (err) *err = j->ranks[i].src[k].err;
  return j->ranks[i].src[k].status;
}

const osk_summary_t *osk_job_merged(const osk_job_t *j) { return j ? j->merged : NULL; }

size_t osk_job_collective_count(const osk_job_t *j) { return j && j->ran ? j->n_coll : 0; }

const osk_job_collective_t *osk_job_collective(const osk_job_t *j, size_t i) {
  return j && j->ran && i < j->n_coll && j->coll[i].pub.enter_ns ? &j->coll[i].pub : NULL;
}

size_t osk_job_step_count(const osk_job_t *j) { return j ? j->n_steps : 0; }

const osk_job_step_t *osk_job_step(const osk_job_t *j, size_t i) {
  return j && i < j->n_steps ? &j->steps[i] : NULL;
}

const osk_job_stats_t *osk_job_stats(const osk_job_t *j) { return j ? &j->stats : NULL; }

void osk_job_free(osk_job_t *j) {
  if (!j) return;
  for (size_t i = 0; i < j->n_ranks; i++) {
    rank_t *r = &j->ranks[i];
    for (size_t k = 0; k < r->n_src; k++) {
      free(r->src[k].path);
      osk_summary_free(r->src[k].summary);
    }
    free(r->src);
    osk_summary_free(r->summary);
    free(r->coll);
    free(r->steps);
    free(r->bounds);
    free(r->cum);
    free(r->cnt);
    free(r->cnt_py);
    free(r->sync_p);
    free(r->sync_d);
    free(r->sync_seg);
  }
  free(j->ranks);
  osk__names_free(&j->names);
  osk_summary_free(j->merged);
  free(j->coll);
  free(j->c_enter);
  free(j->c_exit);
  free(j->c_wait);
  free(j->c_own);
  free(j->c_shift);
  free(j->c_cwait);
  free(j->steps);
  free(j->s_dur);
  free(j->s_corr);
  for (size_t i = 0; i < j->n_icats; i++) free((void *)j->icats[i].name.ptr);
  free(j->icats);
  free_strs(j->sopt_strs, j->n_sopt_strs);
  free(j);
}
