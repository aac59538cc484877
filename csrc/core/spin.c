/* spin.c: a busy-wait of a set number of nanoseconds, the known-cost
 * instrument that the known-answer tests inject around each operator call. */
#include "opskew.h"

#include <math.h>

uint64_t osk_spin_ns(uint64_t ns) {
  const osk_clock_t *clk = osk_clock_get();
  /* No early return for ns == 0: a zero spin reads the clock as a longer one
   * does (the first read and the one that ends the loop), so busy-wait:0
   * costs what busy-wait:N costs apart from the wait itself, and measuring
   * one against the other leaves the injected time alone. */
  uint64_t t0 = osk_clock_ticks();
  /* Convert the budget to ticks once, so the loop compares integers. */
  uint64_t budget = (uint64_t)ceil((double)ns / clk->ns_per_tick);
  uint64_t t;
  do {
    t = osk_clock_ticks();
  } while (t - t0 < budget);
  return (uint64_t)llround((double)(t - t0) * clk->ns_per_tick);
}
