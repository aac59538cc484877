/* correct_testutil.h: helpers shared by the correction's C tests: a name's
 * row, two tables that must agree, a written trace read back. */
#ifndef OPSKEW_CORRECT_TESTUTIL_H
#define OPSKEW_CORRECT_TESTUTIL_H

#include <string.h>

#include "opskew_correct.h"
#include "testutil.h"

/* The row of the name of `len` bytes at `name`, or NULL. */
static inline const osk_correct_op_t *op_named_n(const osk_correct_t *c, const char *name,
                                                 size_t len) {
  for (size_t i = 0; i < osk_correct_op_count(c); i++) {
    const osk_correct_op_t *op = osk_correct_op(c, i);
    if (op->name.len == len && memcmp(op->name.ptr, name, len) == 0) return op;
  }
  return NULL;
}

static inline const osk_correct_op_t *op_named(const osk_correct_t *c, const char *name) {
  return op_named_n(c, name, strlen(name));
}

/* Two corrections of the same events and model (read in another order, or
 * run beside others) agree: the same names with the same figures, and the
 * same whole-trace figures. Integer-valued doubles far below 2^53: the
 * sums are exact in any order, so they compare exactly. */
static inline void same_table(const osk_correct_t *a, const osk_correct_t *b) {
  CHECK(osk_correct_op_count(a) == osk_correct_op_count(b));
  for (size_t i = 0; i < osk_correct_op_count(a); i++) {
    const osk_correct_op_t *x = osk_correct_op(a, i);
    const osk_correct_op_t *y = op_named_n(b, x->name.ptr, x->name.len);
    CHECK(y && x->calls == y->calls && x->descendants == y->descendants);
    CHECK(x->reported_total_ns == y->reported_total_ns && x->reported_self_ns == y->reported_self_ns);
    CHECK(x->py_descendants == y->py_descendants && x->clamped == y->clamped);
    CHECK(x->corrected_total_ns == y->corrected_total_ns && x->corrected_self_ns == y->corrected_self_ns);
    CHECK(x->stretched_ns == y->stretched_ns);
  }
  const osk_correct_stats_t *s = osk_correct_stats(a), *t = osk_correct_stats(b);
  CHECK(s->corrected_events == t->corrected_events && s->py_events == t->py_events);
  CHECK(s->reported_top_ns == t->reported_top_ns && s->corrected_top_ns == t->corrected_top_ns);
  CHECK(s->overlaps == t->overlaps && s->other_events == t->other_events);
}

/* Reads the trace at `path` (a corrected trace, read back), handing its
 * events to `fn` with `ctx`; the read must succeed. */
static inline void read_path(const char *path, osk_reader_event_fn fn, void *ctx) {
  osk_reader_t *r = NULL;
  osk_error_t err;
  CHECK(osk_reader_open(&r, path, NULL, &err) == 0);
  CHECK(osk_reader_run(r, fn, ctx, &err) == 0);
  osk_reader_free(r);
}

#endif
