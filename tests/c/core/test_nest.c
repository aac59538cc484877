/* The nesting rule (osk__nest_push): proper nesting, equal starts nest the
 * longer event outside whichever came first, the outlived-event rule and its
 * exception (a Python event that outlives an operator is clipped inside it), the
 * clip that only unsorted equal starts need, and what the core hands each
 * closed event's parent. */
#include "analysis.h"
#include "testutil.h"

#include <string.h>

/* What the close callback saw, in closing order. */
typedef struct {
  uint32_t name;
  int64_t child_ns, cut;
  uint64_t desc_op, desc_py;
  int has_parent;
  uint32_t parent_name;
  double child_corr;
} closed_t;

typedef struct {
  closed_t c[32];
  int n;
  double corr; /* what each close sets as its corrected duration; -1: its dur */
} log_t;

static int on_close(void *ctx, osk__nest_frame_t *f, const osk__nest_frame_t *p, int64_t cut) {
  log_t *l = ctx;
  CHECK(l->n < 32);
  l->c[l->n++] = (closed_t){f->name, f->child_ns, cut, f->desc[OSK__CLS_OP], f->desc[OSK__CLS_PY],
                            p != NULL, p ? p->name : 0, f->child_corr_ns};
  f->corr_ns = l->corr != -1 ? l->corr : (double)f->dur;
  return 0;
}

static const closed_t *find(const log_t *l, uint32_t name) {
  for (int i = 0; i < l->n; i++)
    if (l->c[i].name == name) return &l->c[i];
  CHECK(!"closed event not found");
  return NULL;
}

static void push(osk__nest_t *n, log_t *l, int64_t start, int64_t dur, uint32_t name,
                 uint32_t cls) {
  CHECK(osk__nest_push(n, start, dur, name, cls, cls == OSK__CLS_PY, on_close, l, NULL) == 0);
}

/* Events as {start, dur, name, class}, pushed in this order. */
typedef struct {
  int64_t start, dur;
  uint32_t name, cls;
} ev_t;

static void push_all(osk__nest_t *n, log_t *l, const ev_t *ev, size_t count) {
  for (size_t i = 0; i < count; i++) push(n, l, ev[i].start, ev[i].dur, ev[i].name, ev[i].cls);
}

/* Pushes the events, closes everything, returns the overlaps counted. */
static uint64_t run(log_t *l, const ev_t *ev, size_t count) {
  osk__nest_t n = {0};
  *l = (log_t){.corr = -1};
  push_all(&n, l, ev, count);
  CHECK(osk__nest_close_all(&n, on_close, l) == 0 && l->n == (int)count);
  uint64_t overlaps = n.overlaps;
  osk__nest_free(&n);
  return overlaps;
}

#define RUN(l, ...) \
  run(l, (const ev_t[]){__VA_ARGS__}, sizeof((const ev_t[]){__VA_ARGS__}) / sizeof(ev_t))

/* A [0,100) contains B [10,40) and C [50,90); C contains D [60,70). */
static void proper(void) {
  osk__nest_t n = {0};
  log_t l = {.corr = -1};
  const ev_t ev[] = {{0, 100, 1, OSK__CLS_OP}, {10, 30, 2, OSK__CLS_OP}, {50, 40, 3, OSK__CLS_PY}};
  push_all(&n, &l, ev, 3);
  CHECK(l.n == 1 && l.c[0].name == 2 && l.c[0].has_parent && l.c[0].parent_name == 1);
  push(&n, &l, 60, 10, 4, OSK__CLS_OP);
  CHECK(n.max_depth == 3);
  CHECK(osk__nest_close_all(&n, on_close, &l) == 0);
  CHECK(l.n == 4 && l.c[1].name == 4 && l.c[2].name == 3 && l.c[3].name == 1);
  const closed_t *a = find(&l, 1), *c = find(&l, 3);
  CHECK(!a->has_parent && a->child_ns == 30 + 40);
  CHECK(a->desc_op == 2 && a->desc_py == 1); /* B, D operators; C Python */
  CHECK(c->child_ns == 10 && c->desc_op == 1 && c->cut == INT64_MAX);
  CHECK(n.overlaps == 0);
  osk__nest_free(&n);
}

/* Equal starts: the longer one is the parent whether it comes first or not;
 * equal intervals nest in arrival order. */
static void equal_starts(void) {
  log_t l;
  for (int order = 0; order < 2; order++) {
    uint64_t overlaps = order == 0 ? RUN(&l, {0, 100, 1, 0}, {0, 50, 2, 0})
                                   : RUN(&l, {0, 50, 2, 0}, {0, 100, 1, 0});
    const closed_t *outer = find(&l, 1), *inner = find(&l, 2);
    CHECK(!outer->has_parent && outer->child_ns == 50 && outer->desc_op == 1);
    CHECK(inner->has_parent && inner->parent_name == 1 && overlaps == 0);
  }
  RUN(&l, {0, 10, 1, 0}, {0, 10, 2, 0});
  CHECK(find(&l, 2)->parent_name == 1 && !find(&l, 1)->has_parent);
}

/* The outlived-event rule: A [0,100) holds E [10,30); B [20,150) starts in
 * E and outlives both: E and A close at 20, counted as overlaps, and B keeps
 * its whole interval. A counts E only up to 20 and B not at all (B is no
 * child of A); C [30,40) is B's. */
static void outlived(void) {
  log_t l;
  CHECK(RUN(&l, {0, 100, 1, 0}, {10, 20, 5, 0}, {20, 130, 2, 0}, {30, 10, 3, 0}) == 2);
  CHECK(l.c[0].name == 5 && l.c[1].name == 1); /* closed at B's start */
  const closed_t *e = find(&l, 5), *a = find(&l, 1), *b = find(&l, 2);
  CHECK(e->cut == 20 && e->parent_name == 1);
  CHECK(a->cut == 20 && !a->has_parent && a->child_ns == 10);
  CHECK(!b->has_parent && b->child_ns == 10 && b->desc_op == 1);
  CHECK(find(&l, 3)->parent_name == 2);
}

/* A Python event that outlives an open operator or annotation does not
 * close it (the optimizer.step() frame the step boundary runs in starts in
 * ProfilerStep#N and ends in #N+1): P [0,100) an annotation holds C [10,20);
 * the Python W [50,130) nests inside P, its end clipped to 100 (an overlap),
 * and P stays open: X [60,70) and Z [90,95) are W's, so P's descendants. Y
 * [105,115) starts after P's end: no one's child. */
/* P [0,100) holding C [10,20), then event 3 [start, start+dur) of class
 * cls: its frame. */
static osk__nest_frame_t *after_p_and_c(osk__nest_t *n, log_t *l, int64_t start, int64_t dur, uint32_t cls) {
  push(n, l, 0, 100, 1, OSK__CLS_OP);
  push(n, l, 10, 10, 2, OSK__CLS_OP);
  osk__nest_frame_t *f = NULL;
  CHECK(osk__nest_push(n, start, dur, 3, cls, cls == OSK__CLS_PY, on_close, l, &f) == 0);
  return f;
}

static void python_outlives_op(void) {
  osk__nest_t n = {0};
  log_t l = {.corr = -1};
  osk__nest_frame_t *f = after_p_and_c(&n, &l, 50, 80, OSK__CLS_PY);
  CHECK(f && f->end == 100 && f->dur == 80 && n.overlaps == 1 && n.depth == 2);
  CHECK(n.stack[0].name == 1 && n.stack[0].end == 100);
  push(&n, &l, 60, 10, 4, OSK__CLS_OP);
  push(&n, &l, 90, 5, 5, OSK__CLS_OP);
  push(&n, &l, 105, 10, 6, OSK__CLS_OP);
  CHECK(osk__nest_close_all(&n, on_close, &l) == 0 && l.n == 6 && n.overlaps == 1);
  const closed_t *p = find(&l, 1), *w = find(&l, 3);
  CHECK(p->cut == INT64_MAX && !p->has_parent && p->child_ns == 10 + 50);
  CHECK(p->desc_op == 3 && p->desc_py == 1);
  CHECK(w->cut == INT64_MAX && w->parent_name == 1 && w->child_ns == 15 && w->desc_op == 2);
  CHECK(find(&l, 2)->parent_name == 1);
  CHECK(find(&l, 4)->parent_name == 3 && find(&l, 5)->parent_name == 3);
  CHECK(!find(&l, 6)->has_parent);
  osk__nest_free(&n);
}

/* The other improper overlaps are as before: an operator that outlives an
 * open Python frame (record_function's annotation starting in the tracer's
 * __enter__) closes it at its start, and so does a Python frame outliving
 * a Python frame; the outliving event keeps its whole interval. */
static void op_outlives_python(void) {
  log_t l;
  CHECK(RUN(&l, {0, 100, 1, OSK__CLS_PY}, {20, 130, 2, OSK__CLS_OP}, {120, 10, 3, OSK__CLS_OP}) == 1);
  CHECK(find(&l, 1)->cut == 20 && !find(&l, 2)->has_parent && find(&l, 3)->parent_name == 2);
  CHECK(RUN(&l, {0, 100, 1, OSK__CLS_PY}, {20, 130, 2, OSK__CLS_PY}, {120, 10, 3, OSK__CLS_OP}) == 1);
  CHECK(find(&l, 1)->cut == 20 && !find(&l, 2)->has_parent && find(&l, 3)->parent_name == 2);
  CHECK(find(&l, 2)->desc_op == 1 && find(&l, 1)->child_ns == 0);
}

/* Nested stacks: M [0,1000) Python holds the annotation P [100,500), which
 * holds the Python Q [200,300). The Python W [250,600) outlives Q and P: Q
 * (Python in Python) closes at 250, P stays open and W nests in it, clipped
 * at 500: two overlaps. S [550,560) is M's. An operator R [520,900) that
 * outlives P in M closes it, as before. */
static void nested_stacks(void) {
  log_t l;
  CHECK(RUN(&l, {0, 1000, 1, OSK__CLS_PY}, {100, 400, 2, OSK__CLS_OP}, {200, 100, 3, OSK__CLS_PY},
            {250, 350, 4, OSK__CLS_PY}, {260, 10, 5, OSK__CLS_OP}, {550, 10, 6, OSK__CLS_OP}) == 2);
  const closed_t *p = find(&l, 2), *q = find(&l, 3), *w = find(&l, 4);
  CHECK(q->cut == 250 && q->parent_name == 2);
  CHECK(w->cut == INT64_MAX && w->parent_name == 2 && w->desc_op == 1);
  CHECK(p->cut == INT64_MAX && p->parent_name == 1 && p->child_ns == 50 + 250);
  CHECK(p->desc_op == 1 && p->desc_py == 2);
  CHECK(find(&l, 5)->parent_name == 4 && find(&l, 6)->parent_name == 1);
  CHECK(find(&l, 1)->child_ns == 400 + 10);
  CHECK(RUN(&l, {0, 1000, 1, OSK__CLS_PY}, {100, 400, 2, OSK__CLS_OP}, {300, 600, 3, OSK__CLS_OP}) == 1);
  CHECK(find(&l, 2)->cut == 300 && find(&l, 3)->parent_name == 1);
}

/* An event that ends exactly where the open one ends is its child; one that
 * starts where it ends is not. */
static void boundaries(void) {
  log_t l;
  CHECK(RUN(&l, {0, 100, 1, 0}, {50, 50, 2, 0}, {100, 10, 3, 0}) == 0);
  CHECK(find(&l, 2)->parent_name == 1 && !find(&l, 3)->has_parent);
}

/* Unsorted equal starts above an outlived event: S [10,20) came before the
 * longer L [10,200), inside P [0,100). L nests under P above S, its end
 * clipped to P's so that P's self time stays >= 0: an overlap. */
static void clipped(void) {
  osk__nest_t n = {0};
  log_t l = {.corr = -1};
  osk__nest_frame_t *f = after_p_and_c(&n, &l, 10, 190, OSK__CLS_OP);
  CHECK(f && f->end == 100 && f->dur == 190 && n.overlaps == 1);
  CHECK(osk__nest_close_all(&n, on_close, &l) == 0);
  CHECK(find(&l, 2)->parent_name == 3 && find(&l, 3)->parent_name == 1);
  CHECK(find(&l, 1)->child_ns == 90);
  osk__nest_free(&n);
}

/* The parent gets its children's corrected time in proportion to the part
 * of them it holds: a child closed at a cut gives its share up to there. */
static void corrected_share(void) {
  log_t l = {.corr = 40}; /* every closed event's corrected duration */
  osk__nest_t k = {0};
  push(&k, &l, 0, 100, 1, OSK__CLS_OP);
  push(&k, &l, 10, 20, 2, OSK__CLS_OP);
  push(&k, &l, 40, 10, 3, OSK__CLS_OP); /* 2 ended: all of it counts */
  CHECK(k.depth == 2 && k.stack[0].child_ns == 20);
  CHECK_NEAR(k.stack[0].child_corr_ns, 40.0, 1e-9);
  osk__nest_free(&k);
  osk__nest_t m = {0};
  l.n = 0;
  push(&m, &l, 0, 100, 1, OSK__CLS_OP);
  push(&m, &l, 10, 20, 2, OSK__CLS_OP);
  push(&m, &l, 20, 100, 3, OSK__CLS_OP); /* 2 and 1 cut at 20: half of 2 */
  CHECK(m.depth == 1 && m.stack[0].name == 3 && l.n == 2);
  CHECK_NEAR(find(&l, 1)->child_corr, 20.0, 1e-9);
  CHECK(find(&l, 1)->child_ns == 10);
  osk__nest_free(&m);
  /* A zero-duration child has nothing to prorate: its whole corrected value
   * (negative: -delta - W x desc) counts for its parent. */
  osk__nest_t z = {0};
  l = (log_t){.corr = -7};
  push(&z, &l, 0, 100, 1, OSK__CLS_OP);
  push(&z, &l, 10, 0, 2, OSK__CLS_OP);
  push(&z, &l, 50, 10, 3, OSK__CLS_OP); /* 2 ended at 10 */
  CHECK(z.depth == 2 && z.stack[0].child_ns == 0);
  CHECK_NEAR(z.stack[0].child_corr_ns, -7.0, 1e-9);
  osk__nest_free(&z);
}

static int order_cmp(const void *a, const void *b) {
  const int64_t *x = a, *y = b;
  return osk__nest_order(x[0], x[1], (uint64_t)x[2], y[0], y[1], (uint64_t)y[2]);
}

static void order(void) {
  int64_t ev[4][3] = {{10, 5, 0}, {0, 10, 1}, {10, 50, 2}, {10, 50, 3}};
  qsort(ev, 4, sizeof ev[0], order_cmp);
  CHECK(ev[0][2] == 1 && ev[1][2] == 2 && ev[2][2] == 3 && ev[3][2] == 0);
}

int main(void) {
  proper();
  equal_starts();
  outlived();
  python_outlives_op();
  op_outlives_python();
  nested_stacks();
  boundaries();
  clipped();
  corrected_share();
  order();
  puts("nest: ok");
  return 0;
}
