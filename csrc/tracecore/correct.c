/* correct.c: the correction formula (see osk__correct_event in tracecore.h
 * and docs/design.md, "The overhead model"). The compensation of a trace
 * file and the tracer's own summary both call it, so they agree. */
#include "tracecore.h"

osk__corrected_t osk__correct_event(const osk__cost_t *c, uint32_t cls, int64_t reported_ns,
                                    const uint64_t *desc, size_t n_cls, double waited_ns,
                                    double children_raw_ns) {
  osk__corrected_t r = {0, 0, 0, 0, 0};
  r.raw_ns = (double)reported_ns - c->delta[cls];
  for (size_t k = 0; k < n_cls; k++) r.raw_ns -= c->w[k] * (double)desc[k];
  r.raw_ns -= waited_ns;
  r.total_ns = r.raw_ns;
  if (r.total_ns < 0) {
    r.residual_ns = -r.total_ns;
    r.total_ns = 0;
  }
  r.self_ns = r.raw_ns - children_raw_ns;
  if (r.self_ns < 0) {
    r.self_residual_ns = -r.self_ns;
    r.self_ns = 0;
  }
  return r;
}
