/* Unit tests for stats.c against values computed independently (R's
 * wilcox.test / binom.test and hand enumeration). */
#include "opskew.h"
#include "testutil.h"

#include <string.h>

static void test_median_quantile(void) {
  double x[] = {5, 1, 4, 2, 3};
  double m;
  CHECK(osk_median(x, 5, &m) == 0);
  CHECK_NEAR(m, 3.0, 0);
  CHECK(x[0] == 5); /* input untouched */
  double y[] = {1, 2, 3, 4};
  CHECK(osk_median(y, 4, &m) == 0);
  CHECK_NEAR(m, 2.5, 0);
  CHECK(osk_quantile(y, 4, 0.0, &m) == 0 && m == 1);
  CHECK(osk_quantile(y, 4, 1.0, &m) == 0 && m == 4);
  CHECK(osk_quantile(y, 4, 0.25, &m) == 0);
  CHECK_NEAR(m, 1.75, 1e-12);
  CHECK(osk_median(y, 0, &m) == OSK_EINVAL);
  CHECK(osk_median(NULL, 3, &m) == OSK_EINVAL);
  CHECK(osk_quantile(y, 4, 1.5, &m) == OSK_EINVAL);
  double bad[] = {1, NAN};
  CHECK(osk_median(bad, 2, &m) == OSK_EINVAL);
}

static void test_binom(void) {
  CHECK_NEAR(osk_binom_half_cdf(0, 7), 1.0 / 128, 1e-15);
  CHECK_NEAR(osk_binom_half_cdf(1, 7), 8.0 / 128, 1e-15);
  CHECK_NEAR(osk_binom_half_cdf(7, 7), 1.0, 0);
  CHECK_NEAR(osk_binom_half_cdf(2, 10), 56.0 / 1024, 1e-15);
  /* Large n stays finite and symmetric: P(X <= 499) for n = 1000. */
  double p = osk_binom_half_cdf(499, 1000);
  CHECK(p > 0.48 && p < 0.5);
}

static void test_paired_known(void) {
  /* All seven differences positive: sign test p = 2/128; Wilcoxon exact
   * p = 2/128 as well (only the all-positive assignment is as extreme). */
  double base[7] = {10, 10, 10, 10, 10, 10, 10};
  double trt[7] = {11, 12, 13, 14, 15, 16, 17};
  osk_paired_t r;
  CHECK(osk_paired_analyze(base, trt, 7, 1.0, 0.95, &r) == 0);
  CHECK(r.n == 7 && r.n_positive == 7 && r.n_negative == 0);
  CHECK_NEAR(r.median, 4.0, 0);
  CHECK_NEAR(r.mean, 4.0, 1e-12);
  CHECK_NEAR(r.sign_p, 2.0 / 128, 1e-12);
  CHECK_NEAR(r.wilcoxon_p, 2.0 / 128, 1e-12);
  /* n = 7: k = 1, interval [d(1), d(7)] with coverage 1 - 2/128. */
  CHECK_NEAR(r.ci_low, 1.0, 0);
  CHECK_NEAR(r.ci_high, 7.0, 0);
  CHECK_NEAR(r.ci_coverage, 1.0 - 2.0 / 128, 1e-12);

  /* Scaling applies to every difference. */
  CHECK(osk_paired_analyze(base, trt, 7, 1000.0, 0.95, &r) == 0);
  CHECK_NEAR(r.median, 4000.0, 1e-9);
}

static void test_paired_wilcoxon_values(void) {
  /* d = {1.5, -0.5, 2, 3, -1, 4, 2.5, 0.5, 3.5, 5}: ranks of |d|:
   * 0.5->1.5, 0.5->1.5, 1->3, 1.5->4, 2->5, 2.5->6, 3->7, 3.5->8, 4->9, 5->10;
   * W- = 1.5 + 3 = 4.5, so the tail counts sign patterns with W- <= 4.5.
   * Hand count over doubled ranks {3,3,6,8,...}: subsets with doubled sum <= 9:
   * {}, {3a}, {3b}, {6}, {8}, {3a,3b}, {3a,6}, {3b,6} -> 8 of 1024,
   * two-sided p = 16/1024. */
  double base[10] = {0};
  double trt[10] = {1.5, -0.5, 2, 3, -1, 4, 2.5, 0.5, 3.5, 5};
  osk_paired_t r;
  CHECK(osk_paired_analyze(base, trt, 10, 1.0, 0.95, &r) == 0);
  CHECK_NEAR(r.wilcoxon_p, 16.0 / 1024, 1e-12);
  CHECK(r.n_positive == 8 && r.n_negative == 2);
  /* sign test: 2 * P(X <= 2 | n=10) = 2 * 56/1024 */
  CHECK_NEAR(r.sign_p, 112.0 / 1024, 1e-12);
  /* n = 10: k = 2 since P(X<=1) = 11/1024 <= .025 < P(X<=2) = 56/1024. */
  CHECK_NEAR(r.ci_low, -0.5, 0);
  CHECK_NEAR(r.ci_high, 4.0, 0);
  CHECK_NEAR(r.ci_coverage, 1.0 - 22.0 / 1024, 1e-12);
}

static void test_paired_edges(void) {
  double a[3] = {1, 2, 3}, b[3] = {1, 2, 3};
  osk_paired_t r;
  /* No difference at all: p = 1 for both tests. */
  int rc = osk_paired_analyze(a, b, 3, 1.0, 0.95, &r);
  CHECK(rc == OSK_ETOOFEW); /* 3 pairs cannot reach 95% */
  CHECK(r.sign_p == 1.0 && r.wilcoxon_p == 1.0);
  CHECK_NEAR(r.ci_coverage, 1.0 - 2.0 / 8, 1e-12);
  /* One pair: its difference, no evidence (p = 1), no interval (was all
   * zeros, p = 0, read as W = 0 with certainty by opskew.profile). */
  double one_b[1] = {10.0}, one_t[1] = {12.5};
  CHECK(osk_paired_analyze(one_b, one_t, 1, 1.0, 0.95, &r) == OSK_ETOOFEW);
  CHECK(r.n == 1 && r.n_positive == 1 && r.n_negative == 0);
  CHECK_NEAR(r.median, 2.5, 0);
  CHECK_NEAR(r.mean, 2.5, 0);
  CHECK(r.stdev == 0.0 && r.sign_p == 1.0 && r.wilcoxon_p == 1.0);
  CHECK(r.ci_low == 2.5 && r.ci_high == 2.5 && r.ci_coverage == 0.0);
  CHECK(osk_paired_analyze(one_b, one_t, 0, 1.0, 0.95, &r) == OSK_ETOOFEW);
  CHECK(r.n == 0 && r.sign_p == 1.0 && r.wilcoxon_p == 1.0);
  CHECK(osk_paired_analyze(NULL, b, 3, 1.0, 0.95, &r) == OSK_EINVAL);
  CHECK(osk_paired_analyze(a, b, 3, 1.0, 1.5, &r) == OSK_EINVAL);
  double inf[3] = {1, INFINITY, 3};
  CHECK(osk_paired_analyze(a, inf, 3, 1.0, 0.95, &r) == OSK_EINVAL);

  /* Large n takes the normal approximation and still finds a clear shift. */
  enum { N = 200 };
  static double x[N], y[N];
  for (int i = 0; i < N; i++) {
    x[i] = 100.0 + (i % 7);
    y[i] = x[i] + 1.0 + 0.01 * (i % 13) - 0.05;
  }
  CHECK(osk_paired_analyze(x, y, N, 1.0, 0.95, &r) == 0);
  CHECK(r.wilcoxon_p < 1e-10);
  CHECK(r.ci_low > 0.9 && r.ci_high < 1.1);
  CHECK(r.ci_coverage >= 0.95);
}

/* The interval's rank against its definition, from osk_binom_half_cdf, for
 * small and large n (the rank is accumulated term by term in stats.c): with
 * d = 0, 1, ..., n-1, [d(k), d(n-k+1)] is [k-1, n-k]. */
static void test_paired_ci_rank(void) {
  static const size_t ns[] = {6, 7, 8, 9, 10, 17, 30, 61, 100, 255, 1000, 1801, 4000};
  static double base[4000], trt[4000];
  for (size_t t = 0; t < sizeof ns / sizeof ns[0]; t++) {
    size_t n = ns[t];
    for (size_t i = 0; i < n; i++) {
      base[i] = 0.0;
      trt[i] = (double)i;
    }
    size_t k = 0;
    while (k + 1 <= n / 2 && osk_binom_half_cdf(k, n) <= 0.025) k++;
    osk_paired_t r;
    CHECK(osk_paired_analyze(base, trt, n, 1.0, 0.95, &r) == 0);
    CHECK_NEAR(r.ci_low, (double)(k - 1), 0);
    CHECK_NEAR(r.ci_high, (double)(n - k), 0);
    CHECK_NEAR(r.ci_coverage, 1.0 - 2.0 * osk_binom_half_cdf(k - 1, n), 1e-12);
    CHECK(r.ci_coverage >= 0.95);
  }
}

static void test_errors(void) {
  CHECK(strcmp(osk_strerror(OSK_EINVAL), "invalid argument") == 0);
  CHECK(strcmp(osk_err_name(OSK_ETOOFEW), "OSK_ETOOFEW") == 0);
  CHECK(strcmp(osk_strerror(12345), "unknown error") == 0);
}

int main(void) {
  test_median_quantile();
  test_binom();
  test_paired_known();
  test_paired_wilcoxon_values();
  test_paired_edges();
  test_paired_ci_rank();
  test_errors();
  puts("test_stats: ok");
  return 0;
}
