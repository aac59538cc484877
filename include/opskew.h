/*
 * opskew.h: the public C API of the opskew engine.
 *
 * Contents: version | errors | strings | clock | statistics | busy-wait instrument
 *
 * The core every module shares: the error codes and error struct, the byte
 * string, the clock, the statistics. The modules have their own headers,
 * each with its own prefix: opskew_reader.h (osk_reader_, osk_summary_),
 * opskew_correct.h (osk_correct_), opskew_trace.h (osk_trace_,
 * osk_collector_), opskew_job.h (osk_job_). All five compile together, in
 * C11 and in C++.
 * The engine is plain C11 and never includes Python.h; the Python extensions
 * are thin bindings over these functions.
 *
 * Conventions, for every module:
 * - Functions return 0 or a positive count on success and a negative OSK_E*
 *   code on failure.
 * - A function that creates an object takes an out-parameter (`T **out`, set
 *   to NULL on failure unless it says it returns a partial result) and, when
 *   there is a position or an errno to report, an optional osk_error_t *.
 *   The caller owns what it gets and frees it with the matching _free (NULL
 *   is a no-op). The one exception is on the tracer's hot path and says why.
 * - Pointers a function returns into an object are borrowed: valid until
 *   that object is freed. Pointers passed in are not kept unless said so.
 * - Each type's comment says who owns it and which threads may use it.
 *   Functions in this header are safe from any thread at once.
 */
#ifndef OPSKEW_H
#define OPSKEW_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- version */

/* The engine's version, "MAJOR.MINOR.PATCH", as meson.build's project()
 * declares it (the one place it is written). Static storage; never NULL;
 * any thread. Code built by meson may also include the generated
 * "opskew_version.h" for OSK_VERSION_* macros at compile time; this header
 * defines none, so it needs no generated file. */
const char *osk_version(void);

/* ----------------------------------------------------------------- errors */

/* X-macro table: one place defines each code, its name and its message. */
#define OSK_ERRNO_MAP(X)                                                      \
  X(INVAL, -1, "invalid argument")                                            \
  X(NOMEM, -2, "out of memory")                                               \
  X(RANGE, -3, "value out of range")                                          \
  X(TOOFEW, -4, "too few samples for the requested statistic")                \
  X(IO, -5, "input/output error")                                             \
  X(FORMAT, -6, "malformed input")                                            \
  X(TRUNCATED, -7, "input ended early")                                       \
  X(UNSUPPORTED, -8, "not supported on this machine")

typedef enum {
#define OSK__ERR_ENUM(name, code, msg) OSK_E##name = (code),
  OSK_ERRNO_MAP(OSK__ERR_ENUM)
#undef OSK__ERR_ENUM
} osk_errno_t;

/* Where and why a call failed: the optional last argument of every
 * function that reads input (NULL: not wanted). One struct for every
 * module. The caller owns it (usually on its stack); the function fills it
 * on failure and, where it says so, on success (code 0, message ""). It
 * holds no pointer to free: `message` is static. Thread: the caller's. */
typedef struct {
  int code;            /* 0, or the OSK_E* code the call returned */
  const char *message; /* constant (static storage), never NULL after a failure; "" on success */
  /* Byte offset in the input (for the reader: the JSON text after
   * decompression) where the problem was found: the offending byte for
   * OSK_EFORMAT, the end of input for OSK_ETRUNCATED. 0 when not about a
   * position (OSK_EIO, OSK_ENOMEM). */
  uint64_t offset;
  int sys_errno;       /* errno for OSK_EIO, else 0 */
} osk_error_t;

/* Constant message for an error code; never NULL ("unknown error" otherwise).
 * Static storage; any thread. */
const char *osk_strerror(int err);
/* Constant symbolic name ("OSK_EINVAL"); never NULL. */
const char *osk_err_name(int err);

/* ---------------------------------------------------------------- strings */

/* A byte string that is not NUL terminated, shared by every module. It may
 * contain NUL bytes (the reader decodes "\u0000" escapes). Strings decoded
 * from JSON are UTF-8 whenever the input was; the reader checks escapes, not
 * the UTF-8 of raw bytes. Never owns its bytes: the function or object that
 * hands one out says how long `ptr` stays valid. */
typedef struct {
  const char *ptr;
  size_t len;
} osk_str_t;

/* ------------------------------------------------------------------ clock */

/* Which hardware clock the engine uses for raw timestamps. */
typedef enum {
  OSK_CLOCK_TSC = 1,           /* rdtsc on an invariant TSC */
  OSK_CLOCK_MONOTONIC_RAW = 2, /* clock_gettime(CLOCK_MONOTONIC_RAW) */
} osk_clock_kind_t;

/* The process clock's calibration. The engine owns the one instance
 * (static storage, written once under a lock, read-only after); callers get
 * a const pointer and may read it from any thread. */
typedef struct {
  osk_clock_kind_t kind;
  /* ns = (ticks - tick0) * ns_per_tick + ns0. For MONOTONIC_RAW ticks are ns. */
  double ns_per_tick;
  uint64_t tick0;
  uint64_t ns0;
  /* Relative uncertainty of ns_per_tick from the calibration spread (0 if exact). */
  double rel_uncertainty;
} osk_clock_t;

/* Calibrates the process-wide clock once (thread safe, idempotent) and returns
 * it. The TSC is used only when CPUID reports an invariant TSC; set
 * OPSKEW_CLOCK=monotonic in the environment to force the fallback. Never NULL. */
const osk_clock_t *osk_clock_get(void);

/* Raw ticks of the process clock. Cheap: one rdtsc, or one clock_gettime. */
uint64_t osk_clock_ticks(void);

/* Converts raw ticks to nanoseconds on CLOCK_MONOTONIC_RAW's time line. */
double osk_clock_ticks_to_ns(const osk_clock_t *clk, uint64_t ticks);

/* Nanoseconds from CLOCK_MONOTONIC_RAW, for callers that need no speed. */
uint64_t osk_clock_monotonic_ns(void);

/* ------------------------------------------------------------- statistics */

/* Summary of a paired comparison (instrumented minus baseline), the core of
 * every overhead figure opskew prints. Point estimate: median of the paired
 * differences. Interval: the distribution-free confidence interval for the
 * median obtained by inverting the sign test (order statistics k and n-k+1),
 * whose exact coverage is reported because with few pairs it exceeds the
 * nominal level. Test: exact two-sided sign test, and the exact Wilcoxon
 * signed-rank test (normal approximation above 60 pairs). Plain values,
 * no pointers: the caller owns it (osk_paired_analyze fills it). */
typedef struct {
  size_t n;              /* pairs used */
  double median;         /* median of differences */
  double mean;           /* mean of differences */
  double stdev;          /* sample standard deviation of differences */
  double ci_low;         /* confidence interval for the median */
  double ci_high;
  double ci_coverage;    /* exact coverage of [ci_low, ci_high], >= requested */
  size_t n_positive;     /* differences > 0 */
  size_t n_negative;     /* differences < 0 */
  double sign_p;         /* two-sided exact sign test p-value */
  double wilcoxon_p;     /* two-sided Wilcoxon signed-rank p-value */
} osk_paired_t;

/* Analyses n pairs: d[i] = treated[i] - baseline[i], each scaled by `scale`
 * (for example 1e9 / events to get ns per event). `level` is the requested
 * confidence (0.95). Returns 0, OSK_EINVAL for NULL or a level outside (0,1)
 * or a non-finite input, OSK_ETOOFEW when n < 2 or no order statistic reaches
 * the level (then ci_low/ci_high span the whole sample and ci_coverage says
 * what it is). One pair is still analysed (its difference, p-values of 1,
 * stdev 0); no pair gives p-values of 1 and zeros. Does not keep the
 * pointers. */
int osk_paired_analyze(const double *baseline, const double *treated, size_t n,
                       double scale, double level, osk_paired_t *out);

/* The statistics keep no state: any thread, concurrently, on separate or
 * shared (read-only) input. */

/* Median of x[0..n) (copied, not modified). OSK_EINVAL on n == 0 or NULL. */
int osk_median(const double *x, size_t n, double *out);

/* Quantile q in [0,1] with linear interpolation (type 7). */
int osk_quantile(const double *x, size_t n, double q, double *out);

/* P(X <= k) for X ~ Binomial(n, 1/2), exact in double precision. */
double osk_binom_half_cdf(size_t k, size_t n);

/* --------------------------------------------------- busy-wait instrument */

/* Spins for `ns` nanoseconds on the calibrated clock. Used by the known-answer
 * tests as an instrument whose cost per event is known. Returns the ns
 * actually spent (>= ns unless the clock failed). A zero spin still reads the
 * clock twice, as every spin does, so two spins differ in cost by their
 * budgets alone. */
uint64_t osk_spin_ns(uint64_t ns);

#ifdef __cplusplus
}
#endif
#endif /* OPSKEW_H */
