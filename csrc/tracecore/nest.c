/* nest.c: the nesting rule (see osk__nest_push in tracecore.h). The
 * streaming summary feeds it a thread's events as they come; the correction
 * feeds it events sorted by osk__nest_order. What happens when an event
 * closes (self times, corrections, output) is the caller's close callback. */
#include "analysis.h"

#include <stdlib.h>
#include <string.h>

/* Closes the innermost open event. Its span up to `cut` counts for its
 * parent: all of it when cut is INT64_MAX; an event closed early, because a
 * later one outlives it, counts only up to that one's start, which the
 * parent also counts as the later one's, so no time is counted twice. */
static int pop(osk__nest_t *n, osk__close_fn close, void *ctx, int64_t cut) {
  osk__nest_frame_t f = n->stack[--n->depth];
  osk__nest_frame_t *p = n->depth ? &n->stack[n->depth - 1] : NULL;
  f.corr_ns = 0;
  f.has_corr_in = 0;
  int rc = close ? close(ctx, &f, p, cut) : 0;
  if (rc) return rc;
  if (p) {
    int64_t span = (f.end < cut ? f.end : cut) - f.start;
    p->child_ns = osk__sat_add(p->child_ns, span);
    /* The streaming summary corrects nothing (corr_ns 0): no division
     * per event there. A zero-duration child (whole-microsecond traces
     * have many) has nothing to prorate: its whole correction counts. */
    if (f.has_corr_in)
      p->child_corr_ns += f.corr_in_ns;
    else if (f.corr_ns != 0)
      p->child_corr_ns += f.dur > 0 ? f.corr_ns * (double)span / (double)f.dur : f.corr_ns;
    for (int k = 0; k < OSK__NCLS; k++) {
      p->desc[k] += f.desc[k];
      p->wdesc[k] += f.wdesc[k];
    }
    p->desc[f.cls]++;
    p->wait_ns += f.wait_ns;
    p->n_children++;
    p->last_child = f.name;
  }
  return 0;
}

int osk__nest_push(osk__nest_t *n, int64_t start, int64_t dur, uint32_t name, uint32_t cls, uint32_t py,
                   osk__close_fn close, void *ctx, osk__nest_frame_t **pushed) {
  int64_t end = start + dur;
  /* Events that ended by this start are done. */
  while (n->depth && n->stack[n->depth - 1].end <= start) {
    int rc = pop(n, close, ctx, INT64_MAX);
    if (rc) return rc;
  }
  /* Improper overlap: the event outlives the open one it starts in, which
   * is closed here, at this start; the new event keeps its children. Under
   * torch.profiler's with_stack this is the rule, not noise: annotations
   * opened from Python (record_function's user_annotation, ProfilerStep#N)
   * start inside the Python tracer's __enter__ event and end in __exit__'s.
   * One exception: a Python event that outlives an open operator or
   * annotation does not close it. The step boundary runs inside the Python
   * frame around optimizer.step(), which starts in ProfilerStep#N and ends
   * in #N+1; closing the step there would take the optimizer's operators
   * from it. The operator stays open and keeps its later children; the
   * Python event nests inside it, clipped at its end (below, as an event
   * clipped under events of equal start). Open Python frames it outlives
   * still close here, and so does a Python frame an operator outlives. */
  while (n->depth && n->stack[n->depth - 1].start < start && n->stack[n->depth - 1].end < end) {
    if (py && !n->stack[n->depth - 1].py) break;
    n->overlaps++;
    int rc = pop(n, close, ctx, start);
    if (rc) return rc;
  }
  /* Events that start together nest the longer one outside, whichever came
   * first; equal intervals nest in arrival order. */
  uint32_t pos = n->depth;
  while (pos && n->stack[pos - 1].start == start && n->stack[pos - 1].end < end) pos--;
  int64_t nest_end = end;
  if (pos && end > n->stack[pos - 1].end) {
    /* Left when events of equal start sit above the outlived one, or when
     * a Python event outlives an open operator: clip, so the parent's self
     * time stays >= 0. */
    n->overlaps++;
    nest_end = n->stack[pos - 1].end;
  }
  if (n->depth == n->cap) {
    if (n->cap >= UINT32_MAX / 2) return OSK_ENOMEM;
    uint32_t ncap = n->cap ? n->cap * 2 : 16;
    osk__nest_frame_t *ns = realloc(n->stack, ncap * sizeof *ns);
    if (!ns) return OSK_ENOMEM;
    n->stack = ns;
    n->cap = ncap;
  }
  memmove(&n->stack[pos + 1], &n->stack[pos], (n->depth - pos) * sizeof *n->stack);
  osk__nest_frame_t *f = &n->stack[pos];
  memset(f, 0, sizeof *f);
  f->start = start;
  f->end = nest_end;
  f->dur = dur;
  f->name = name;
  f->cls = cls;
  f->py = py;
  n->depth++;
  if (n->depth > n->max_depth) n->max_depth = n->depth;
  if (pushed) *pushed = f;
  return 0;
}

int osk__nest_close_all(osk__nest_t *n, osk__close_fn close, void *ctx) {
  while (n->depth) {
    int rc = pop(n, close, ctx, INT64_MAX);
    if (rc) return rc;
  }
  return 0;
}

void osk__nest_free(osk__nest_t *n) {
  free(n->stack);
  memset(n, 0, sizeof *n);
}
