/* f64.c: written times that float64 readers nest as the exact decimal text
 * nests (tracecore.h, "float64 readers"; docs/outputs.md, "Read as
 * float64"). Used by the tracer's writer and the corrected-trace writer. */
#include "tracecore.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct osk__f64_pt {
  int64_t v;
  uint32_t ev;
  int end;
};

double osk__us_f64(int64_t ns) {
  const int64_t exact = INT64_C(1) << 53;
  if (ns < exact && ns > -exact) return (double)ns / 1000.0; /* both steps correctly rounded */
  char buf[32];
  *osk__put_us(buf, ns) = '\0';
  return strtod(buf, NULL);
}

int osk__f64_exact(int64_t ts, int64_t end) {
  volatile double sum = osk__us_f64(ts) + osk__us_f64(end - ts); /* one double addition, as a reader's */
  return sum == osk__us_f64(end);
}

int osk__f64_near(int64_t a, int64_t b) {
  if (a == b) return 1;
  double d = a > b ? (double)a - (double)b : (double)b - (double)a;
  double x = fabs(osk__us_f64(a)), y = fabs(osk__us_f64(b)), m = x > y ? x : y;
  double ulp = nextafter(m, INFINITY) - m;
  /* A start or an exact end reads within ulp/2 of its value; an inexact end
   * within ulp (its ts's rounding and the sum's) and dur's rounding. */
  return d * 1e-3 <= 3.0 * ulp;
}

int64_t osk__f64_exact_end(int64_t ts, int64_t end) {
  for (int64_t e = end; e > ts; e--)
    if (osk__f64_exact(ts, e)) return e;
  return ts;
}

int osk__f64_reserve(osk__f64_tree_t *t, size_t n) {
  if (n <= t->cap) return 0;
  size_t cap = t->cap ? t->cap : 16;
  while (cap < n) cap *= 2;
  /* Every array holds cap elements (a failure leaves some larger: harmless). */
  struct {
    void **p;
    size_t size;
  } arr[] = {{(void **)&t->s, sizeof *t->s},         {(void **)&t->e, sizeof *t->e},
             {(void **)&t->s0, sizeof *t->s0},       {(void **)&t->e0, sizeof *t->e0},
             {(void **)&t->cut, sizeof *t->cut},     {(void **)&t->shift, sizeof *t->shift},
             {(void **)&t->sh, sizeof *t->sh},       {(void **)&t->parent, sizeof *t->parent},
             {(void **)&t->sib, sizeof *t->sib},     {(void **)&t->mark, sizeof *t->mark},
             {(void **)&t->hit, sizeof *t->hit}};
  for (size_t k = 0; k < sizeof arr / sizeof *arr; k++) {
    void *q = realloc(*arr[k].p, cap * arr[k].size);
    if (!q) return OSK_ENOMEM;
    *arr[k].p = q;
  }
  if (osk__grow((void **)&t->pt, &t->pt_cap, 2 * cap, sizeof *t->pt)) return OSK_ENOMEM;
  t->cap = cap;
  return 0;
}

void osk__f64_free(osk__f64_tree_t *t) {
  free(t->s);
  free(t->e);
  free(t->s0);
  free(t->e0);
  free(t->parent);
  free(t->mark);
  free(t->cut);
  free(t->hit);
  free(t->shift);
  free(t->sh);
  free(t->sib);
  free(t->pt);
  memset(t, 0, sizeof *t);
}

/* What holds between intervals a and b: bit 0 a holds b, bit 1 b holds a,
 * bit 2 they are disjoint (touching ends included); none: they overlap. */
static unsigned relation(double sa, double ea, double sb, double eb) {
  return (unsigned)(sa <= sb && eb <= ea) | (unsigned)(sb <= sa && ea <= eb) << 1 | (unsigned)(ea <= sb || eb <= sa) << 2;
}

unsigned osk__f64_relation(int64_t sa, int64_t ea, int64_t sb, int64_t eb, int as_f64) {
  if (!as_f64)
    return (unsigned)(sa <= sb && eb <= ea) | (unsigned)(sb <= sa && ea <= eb) << 1 |
           (unsigned)(ea <= sb || eb <= sa) << 2;
  double fa = osk__us_f64(sa), fb = osk__us_f64(sb);
  volatile double ga = fa + osk__us_f64(ea - sa), gb = fb + osk__us_f64(eb - sb);
  return relation(fa, ga, fb, gb);
}

/* Whether float64 readers see events i and j of the tree nest as the exact
 * text has them: what holds exactly holds, and an overlap stays one. */
static int same_nesting(const osk__f64_tree_t *t, uint32_t i, uint32_t j) {
  unsigned x = osk__f64_relation(t->s[i], t->e[i], t->s[j], t->e[j], 0);
  unsigned f = osk__f64_relation(t->s[i], t->e[i], t->s[j], t->e[j], 1);
  return x ? (x & ~f) == 0 : f == 0;
}

/* By value, then event and begin before end: one total order (an earlier
 * kept end of the previous tree, ev UINT32_MAX, after the tree's at the same
 * value), the order a stable sort of the points as built gives, so that the
 * rounds after the first can re-sort by insertion (sort_again). */
static int before(const struct osk__f64_pt *a, const struct osk__f64_pt *b) {
  if (a->v != b->v) return a->v < b->v;
  if (a->ev != b->ev) return a->ev < b->ev;
  return a->end < b->end;
}

static int cmp_pt(const void *pa, const void *pb) {
  const struct osk__f64_pt *a = pa, *b = pb;
  return before(b, a) - before(a, b);
}

/* The points sorted in the previous round, their values read again from the
 * moved events and sorted by insertion: each moved by a few ns, so few are
 * out of place (a qsort per round was a fifth of a with_stack correction's
 * time). */
static void sort_again(const osk__f64_tree_t *t, struct osk__f64_pt *pt, size_t m) {
  for (size_t k = 0; k < m; k++)
    if (pt[k].ev != UINT32_MAX) pt[k].v = pt[k].end ? t->e[pt[k].ev] : t->s[pt[k].ev];
  for (size_t k = 1; k < m; k++) {
    struct osk__f64_pt x = pt[k];
    size_t j = k;
    for (; j > 0 && before(&x, &pt[j - 1]); j--) pt[j] = pt[j - 1];
    pt[j] = x;
  }
}

/* The boundaries from the base values, the moves and the marks: in
 * pre-order, each event moved earlier by shift[i] ns and its parent's, kept
 * inside its parent's end as moved, its end cut by cut[i] ns, each marked
 * end exact. */
static void apply(osk__f64_tree_t *t, size_t n) {
  for (size_t i = 0; i < n; i++) {
    uint32_t p = t->parent[i];
    int64_t sh = t->shift[i] + (p < i ? t->sh[p] : 0); /* it moves with its parent */
    t->sh[i] = sh;
    int64_t s = t->s0[i] - sh, e = (t->e0[i] > t->s0[i] ? t->e0[i] : t->s0[i]) - sh;
    if (p < i && t->e0[i] <= t->e0[p] && e > t->e[p]) { /* its end was inside its parent's */
      e = t->e[p];
      if (s > e) s = e;
    }
    e = e - t->cut[i] > s ? e - t->cut[i] : s;
    t->s[i] = s;
    t->e[i] = t->mark[i] ? osk__f64_exact_end(s, e) : e;
  }
}

/* Rounds of cuts before every end is made exact instead (a tie takes 1 to 3
 * ns near 2^52 ns, one below). */
#define OSK__F64_ROUNDS 16

int osk__f64_fix(osk__f64_tree_t *t, size_t n, const int64_t *extra, size_t n_extra, int64_t *moved_ns) {
  if (moved_ns) *moved_ns = 0;
  if (!n) return 0;
  if (osk__grow((void **)&t->pt, &t->pt_cap, 2 * n + n_extra, sizeof *t->pt)) return OSK_ENOMEM;
  memcpy(t->s0, t->s, n * sizeof *t->s);
  memcpy(t->e0, t->e, n * sizeof *t->e);
  memset(t->cut, 0, n * sizeof *t->cut);
  memset(t->shift, 0, n * sizeof *t->shift);
  /* Each event's previous sibling (the event before it with its parent). */
  for (size_t i = 0; i < n; i++) t->sh[i] = -1;
  for (size_t i = 0; i < n; i++) {
    uint32_t p = t->parent[i];
    t->sib[i] = UINT32_MAX;
    if (p < i) {
      if (t->sh[p] >= 0) t->sib[i] = (uint32_t)t->sh[p];
      t->sh[p] = (int64_t)i;
    }
  }
  for (int round = 0;; round++) {
    apply(t, n);
    if (n == 1 && !n_extra) break;
    struct osk__f64_pt *pt = t->pt;
    size_t m = 2 * n + n_extra;
    if (round == 0) {
      for (size_t i = 0; i < n; i++) {
        pt[2 * i] = (struct osk__f64_pt){t->s[i], (uint32_t)i, 0};
        pt[2 * i + 1] = (struct osk__f64_pt){t->e[i], (uint32_t)i, 1};
      }
      for (size_t i = 0; i < n_extra; i++) pt[2 * n + i] = (struct osk__f64_pt){extra[i], UINT32_MAX, 1};
      qsort(pt, m, sizeof *pt, cmp_pt);
    } else {
      sort_again(t, pt, m);
    }
    int changed = 0;
    memset(t->hit, 0, n);
    for (size_t k = 0; k < m; k++) {
      uint32_t i = pt[k].ev;
      if (!pt[k].end || i == UINT32_MAX || t->mark[i] || osk__f64_exact(t->s[i], t->e[i])) continue;
      /* Within reach of a boundary of another event, a pair float64 reads
       * otherwise: the inner event of the two (the later-ending one's
       * neighbour of a disjoint pair, the held one of a nesting) has its end
       * cut by one more ns, or made exact where nothing is left to cut. A
       * kept end of the previous tree: i's. */
      for (int dir = -1; dir <= 1; dir += 2) {
        for (size_t j = k + (size_t)dir; j < m && osk__f64_near(pt[j].v, pt[k].v); j += (size_t)dir) {
          uint32_t o = pt[j].ev;
          uint32_t culprit = i;
          if (o == i) continue;
          if (o != UINT32_MAX) {
            if (same_nesting(t, i, o)) continue;
            unsigned x = osk__f64_relation(t->s[i], t->e[i], t->s[o], t->e[o], 0);
            if ((x & 1) && !(x & 2) && !t->mark[o]) culprit = o; /* i holds o */
            else if ((x & 4) && t->e[o] <= t->s[i] && !t->mark[o]) culprit = o; /* o ends first */
          }
          t->hit[culprit] = 1;
          changed = 1;
        }
      }
    }
    for (size_t i = 0; i < n; i++) {
      if (!t->hit[i]) continue;
      /* Whole, where the ns before it is free (after its parent's begin,
       * never onto it, and after its previous sibling's end) and it stays
       * after the event before it in the tree's order (which a reader's sort
       * by begin, longer first, keeps): its duration, and what it holds,
       * kept. Else its end. Not onto its parent's begin: a point there (a
       * flow's end, an instant) is its parent's, and a reader gives a point
       * where two events begin to the inner one (the twin's riders, placed
       * 1 ns before a child that began after them: docs/correct.md). */
      uint32_t p = t->parent[i], b = t->sib[i];
      int64_t floor = p < i ? osk__sat_add(t->s[p], 1) : INT64_MAX;
      if (b != UINT32_MAX && t->e[b] > floor) floor = t->e[b];
      int after = i == 0 || t->s[i] - 1 > t->s[i - 1] ||
                  (t->s[i] - 1 == t->s[i - 1] && t->e[i] - t->s[i] <= t->e[i - 1] - t->s[i - 1]);
      if (p < i && t->s[i] - 1 >= floor && after) t->shift[i]++;
      else if (t->e[i] > t->s[i]) t->cut[i]++;
      else t->mark[i] = 1;
    }
    if (!changed) break;
    if (round >= OSK__F64_ROUNDS) {
      memset(t->mark, 1, n);
      apply(t, n);
      break;
    }
  }
  for (size_t i = 0; i < n; i++) {
    int64_t e0 = t->e0[i] > t->s0[i] ? t->e0[i] : t->s0[i];
    if (t->e[i] != e0 || t->s[i] != t->s0[i]) {
      t->moved++;
      if (moved_ns) *moved_ns += (e0 - t->s0[i]) - (t->e[i] - t->s[i]); /* the duration it lost */
    }
  }
  return 0;
}

int64_t osk__f64_next(const osk__f64_line_t *l, int64_t first) {
  int64_t k = 0;
  if (l->valid && !l->end_exact && first >= l->end)
    while (osk__f64_near(l->end, first + k)) k++;
  return k;
}

int64_t osk__f64_place(const osk__f64_line_t *l, osk__f64_tree_t *t, size_t n, int64_t *nudge) {
  int64_t k = n ? osk__f64_next(l, t->s[0]) : 0;
  for (size_t i = 0; k && i < n; i++) {
    t->s[i] += k;
    t->e[i] += k;
  }
  *nudge += k;
  return k;
}

void osk__f64_done(osk__f64_line_t *l, int64_t root_s, int64_t root_e) {
  l->valid = 1;
  l->end = root_e;
  l->end_exact = osk__f64_exact(root_s, root_e);
  l->n_kept = 0;
}

int osk__f64_keep(osk__f64_line_t *l, int64_t end) {
  if (osk__grow((void **)&l->kept, &l->cap_kept, l->n_kept + 1, sizeof *l->kept)) return OSK_ENOMEM;
  l->kept[l->n_kept++] = end;
  return 0;
}

void osk__f64_line_free(osk__f64_line_t *l) {
  free(l->kept);
  memset(l, 0, sizeof *l);
}
