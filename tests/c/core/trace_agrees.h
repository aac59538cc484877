/* trace_agrees.h: the correcting side of test_trace_agrees.c. */
#ifndef OPSKEW_TEST_TRACE_AGREES_H
#define OPSKEW_TEST_TRACE_AGREES_H
#include <stdint.h>

typedef struct {
  uint64_t calls, descendants, clamped;
  int64_t reported_total_ns, reported_self_ns;
  double corrected_total_ns, corrected_self_ns;
} agree_row_t;

/* Corrects the trace at `path` with W and delta (operator class only) and
 * returns the figures of `name`: 0, or -1 if there is no such name. */
int agree_correct(const char *path, double w, double delta, const char *name, agree_row_t *out);
#endif
