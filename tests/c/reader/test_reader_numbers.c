/* test_reader_numbers.c: microsecond text to integer nanoseconds, in every
 * JSON number form, and the number grammar at chunk boundaries. */
#include "reader_internal.h"
#include "reader_testutil.h"

static int64_t ns(const char *s) {
  int64_t v = 123456789;
  CHECK(osk__us_text_to_ns(s, s + strlen(s), &v) == 0);
  return v;
}

static int overflows(const char *s) {
  int64_t v;
  return osk__us_text_to_ns(s, s + strlen(s), &v) != 0;
}

/* A number's text and its ns, or OUT: it does not fit int64 ns (INT64_MIN
 * is out of range too, so never a result). */
#define OUT INT64_MIN
typedef struct {
  const char *text;
  int64_t ns;
} case_t;

static void check_cases(const case_t *c, size_t n) {
  for (size_t i = 0; i < n; i++) {
    int64_t v = 123456789;
    int rc = osk__us_text_to_ns(c[i].text, c[i].text + strlen(c[i].text), &v);
    if (c[i].ns == OUT ? rc == 0 : rc != 0 || v != c[i].ns) {
      fprintf(stderr, "%s: rc %d, %lld ns; expected %lld\n", c[i].text, rc, (long long)v,
              (long long)c[i].ns);
      abort();
    }
  }
}

static void test_conversion(void) {
  static const case_t cases[] = {
    {"0", 0},
    {"-0", 0},
    {"1", 1000},
    {"-1", -1000},
    {"2.503", 2503}, /* Kineto's ns fraction */
    {"1212076812889.31", 1212076812889310}, /* HTA's example */
    {"5372353852070.241", 5372353852070241},
    {"1719853884000000", 1719853884000000000}, /* absolute us (2024) */
    {"0.001", 1},
    {"0.0005", 1}, /* ties round away from zero */
    {"0.00049", 0},
    {"-0.0015", -2},
    {"0.0014999", 1},
    {"1e3", 1000000},
    {"1E+3", 1000000},
    {"25e-1", 2500},
    {"2.5E-3", 3},
    {"123.456e2", 12345600},
    {"0.000000000000000000000000001", 0},
    {"1e-400", 0},
    {"0e400", 0},
    {"9223372036854775.807", INT64_MAX},
    {"-9223372036854775.807", -INT64_MAX},
    {"9223372036854775.808", OUT},
    {"1e16", OUT},
    {"1e400", OUT},
    {"100000000000000000000000", OUT},
    /* More than 19 significant digits: the rest only rounds. */
    {"1.0000000000000000000000001", 1000},
    {"1000.0000000000000000009", 1000000},
    {"12345678901234.56789012345", 12345678901234568},
    {"0.99999999999999999999999", 1000},
  };
  check_cases(cases, sizeof cases / sizeof cases[0]);
}

/* A number made of `pre`, n copies of `fill`, then `post` (for mantissas of
 * any length); the caller frees it. */
static char *long_number(const char *pre, char fill, size_t n, const char *post) {
  size_t a = strlen(pre), b = strlen(post);
  char *t = malloc(a + n + b + 1);
  CHECK(t != NULL);
  memcpy(t, pre, a);
  memset(t + a, fill, n);
  memcpy(t + a + n, post, b + 1);
  return t;
}

/* Issue 11, item 2: one rounding, exact for any digits and any exponent. */
static void test_exact(void) {
  static const case_t cases[] = {
    /* The old parser rounded the 19 kept digits up, then the result: 1001. */
    {"1.00049999999999999999999", 1000},
    {"1.000499999999999999999999999999999999", 1000},
    {"-1.00049999999999999999999", -1000},
    {"0.00049999999999999999999999", 0},
    {"1.0005", 1001}, /* a tie: away from zero */
    {"-1.0005", -1001},
    {"1.00050000000000000000000000001", 1001},
    {"1.5e-3", 2},
    {"2.5e-3", 3}, /* away from zero, not to even */
    {"0.5e-3", 1},
    {"4.5e-4", 0},
    {"0.4999999999999999999999999e-3", 0},
    {"5e-4", 1},
    {"5e-5", 0},
    /* Exponents: leading zeros, and far beyond the old cap of 100000. */
    {"1e0000000000000000000000000003", 1000000},
    {"1e-0000000000000000000000000003", 1},
    {"1e-99999999999999999", 0}, /* 16 nines and one: still exact, below 0.1 ns */
    {"1e99999999999999999", OUT},
    {"1e100000000000000000", OUT}, /* an absurd exponent: out of range, not 0 */
    {"1e-100000000000000000", OUT},
    {"1e-1000000000000000000000000000000", OUT},
    {"0e100000000000000000000000", 0}, /* zero is zero at any exponent */
    {"0.000e-100000000000000000000000", 0},
    /* The int64 boundary, with digits past the 19th deciding. */
    {"9223372036854775.8074999999999", INT64_MAX},
    {"9223372036854775.8075", OUT},
    {"-9223372036854775.8075", OUT},
    {"-9223372036854775.808", OUT}, /* INT64_MIN is out of range too */
    {"9223372036854775807e-3", INT64_MAX},
    {"92233720368547758070000000e-10", INT64_MAX},
    {"9999999999999999999.5", OUT},
    {"999999999999999.9994999", 999999999999999999},
    {"999999999999999.9995", 1000000000000000000},
  };
  check_cases(cases, sizeof cases / sizeof cases[0]);
  /* Mantissas of any length: 1 us written with 300000 digits; `text` is
   * pre, n copies of fill, post. */
  static const struct {
    const char *pre;
    char fill;
    size_t n;
    const char *post;
    int64_t ns;
  } longs[] = {
    {"0.", '0', 299999, "1e300000", 1000},
    {"1", '0', 300000, "e-300000", 1000},
    {"0.", '0', 299999, "1e+300003", 1000000},
    {"1.000", '0', 300000, "5", 1000}, /* 1000.000...05 ns */
    {"1.0004", '9', 300000, "", 1000}, /* 1000.4999... ns */
    {"1.0005", '0', 300000, "", 1001}, /* a tie, far out */
    {"1.0005", '0', 300000, "1", 1001},
    {"0.", '0', 300000, "1", 0},
    {"9", '0', 300000, "e-300000", 9000},
    {"1", '0', 300000, "", OUT}, /* 10^300000 us */
  };
  for (size_t i = 0; i < sizeof longs / sizeof longs[0]; i++) {
    case_t c = {long_number(longs[i].pre, longs[i].fill, longs[i].n, longs[i].post), longs[i].ns};
    check_cases(&c, 1);
    free((char *)c.text);
  }
  /* Every placement of one digit around the ns point, both signs. */
  for (int e = -30; e <= 30; e++) {
    for (int d = 1; d <= 9; d++) {
      char t[64];
      snprintf(t, sizeof t, "%de%d", d, e); /* d x 10^(e+3) ns */
      int64_t want;
      int p = e + 3;
      if (p >= 0 && p <= 17) {
        want = d;
        for (int i = 0; i < p; i++) want *= 10;
      } else if (p == -1) {
        want = d >= 5; /* 0.d ns */
      } else if (p < -1) {
        want = 0;
      } else {
        want = p == 18 && d <= 9 ? (int64_t)d * 1000000000000000000 : -1;
      }
      if (want < 0) {
        CHECK(overflows(t));
      } else {
        CHECK(ns(t) == want);
        t[0] = '-';
        snprintf(t, sizeof t, "-%de%d", d, e);
        CHECK(ns(t) == -want);
      }
    }
  }
}

static void test_grammar_at_boundaries(void) {
  /* Each number, placed as a ts, parses identically in every piece size. */
  const char *nums[] = {"0", "-0", "7", "-12.5", "1e1", "1E-1", "1.25e+2", "0.000", "-0e0",
                        "123456789.123456789"};
  for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++) {
    char t[256];
    snprintf(t, sizeof t, "{\"traceEvents\":[{\"ph\":\"X\",\"name\":\"n\",\"dur\":%s,\"ts\":%s}]}",
             nums[i], nums[i]);
    rec_t rec;
    read_all_ok(t, &rec, 1);
    int64_t v = ns(nums[i]);
    char want[128];
    snprintf(want, sizeof want, "X|n||-|-|%lld|%lld||7", (long long)v, (long long)v);
    CHECK_STR(rec.lines[0], want);
  }
}

int main(void) {
  test_conversion();
  test_exact();
  test_grammar_at_boundaries();
  puts("reader numbers: ok");
  return 0;
}
