/* clock.c: raw timestamps and their conversion to nanoseconds.
 *
 * Raw TSC ticks are cheap (about 8-10 ns) and monotonic across cores when the
 * processor reports an invariant TSC; clock_gettime through the vDSO costs two
 * to three times more. Events store raw ticks; conversion happens at flush.
 */
#include "opskew.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <x86intrin.h>
#define OSK__HAVE_TSC 1
#else
#define OSK__HAVE_TSC 0
#endif

static osk_clock_t g_clock;
static pthread_once_t g_clock_once = PTHREAD_ONCE_INIT;
/* Read on every osk_clock_ticks call (and inlined by the tracer's hot path,
 * csrc/trace/trace_internal.h); written once under g_clock_once. */
#if defined(__GNUC__)
__attribute__((visibility("hidden")))
#endif
int osk__clock_tsc;

uint64_t osk_clock_monotonic_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#if OSK__HAVE_TSC
static int tsc_is_invariant(void) {
  unsigned a, b, c, d;
  if (__get_cpuid_max(0x80000000u, NULL) < 0x80000007u) return 0;
  __cpuid(0x80000007u, a, b, c, d);
  (void)a; (void)b; (void)c;
  return (d >> 8) & 1u; /* CPUID.80000007H:EDX[8] = invariant TSC */
}

static int cmp_double(const void *pa, const void *pb) {
  double a = *(const double *)pa, b = *(const double *)pb;
  return (a > b) - (a < b);
}

/* Ticks per ns from several short intervals against CLOCK_MONOTONIC_RAW; the
 * median resists a preemption in one of them, the spread is the uncertainty. */
static void calibrate_tsc(osk_clock_t *clk) {
  enum { ROUNDS = 7 };
  const uint64_t interval_ns = 2000000; /* 2 ms each: 14 ms in all */
  double slope[ROUNDS];
  for (int r = 0; r < ROUNDS; r++) {
    uint64_t n0 = osk_clock_monotonic_ns();
    uint64_t t0 = __rdtsc();
    uint64_t n1;
    do {
      n1 = osk_clock_monotonic_ns();
    } while (n1 - n0 < interval_ns);
    uint64_t t1 = __rdtsc();
    slope[r] = (double)(n1 - n0) / (double)(t1 - t0);
  }
  qsort(slope, ROUNDS, sizeof slope[0], cmp_double);
  clk->ns_per_tick = slope[ROUNDS / 2];
  clk->rel_uncertainty = (slope[ROUNDS - 2] - slope[1]) / (2.0 * clk->ns_per_tick);
  clk->ns0 = osk_clock_monotonic_ns();
  clk->tick0 = __rdtsc();
}
#endif

static void clock_init(void) {
  memset(&g_clock, 0, sizeof g_clock);
  const char *force = getenv("OPSKEW_CLOCK");
  int want_tsc = !(force && strcmp(force, "monotonic") == 0);
#if OSK__HAVE_TSC
  if (want_tsc && tsc_is_invariant()) {
    g_clock.kind = OSK_CLOCK_TSC;
    calibrate_tsc(&g_clock);
    osk__clock_tsc = 1;
    return;
  }
#else
  (void)want_tsc;
#endif
  g_clock.kind = OSK_CLOCK_MONOTONIC_RAW;
  g_clock.ns_per_tick = 1.0;
  g_clock.tick0 = 0;
  g_clock.ns0 = 0;
  g_clock.rel_uncertainty = 0.0;
  osk__clock_tsc = 0;
}

const osk_clock_t *osk_clock_get(void) {
  pthread_once(&g_clock_once, clock_init);
  return &g_clock;
}

uint64_t osk_clock_ticks(void) {
#if OSK__HAVE_TSC
  if (osk__clock_tsc) return __rdtsc();
#endif
  return osk_clock_monotonic_ns();
}

double osk_clock_ticks_to_ns(const osk_clock_t *clk, uint64_t ticks) {
  if (clk->kind == OSK_CLOCK_MONOTONIC_RAW) return (double)ticks;
  /* Signed difference: a tick taken before calibration is still valid. */
  double dt = (double)(int64_t)(ticks - clk->tick0);
  return (double)clk->ns0 + dt * clk->ns_per_tick;
}
