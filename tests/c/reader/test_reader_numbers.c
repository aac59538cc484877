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

static void test_conversion(void) {
  CHECK(ns("0") == 0);
  CHECK(ns("-0") == 0);
  CHECK(ns("1") == 1000);
  CHECK(ns("-1") == -1000);
  CHECK(ns("2.503") == 2503);                        /* Kineto's ns fraction */
  CHECK(ns("1212076812889.31") == 1212076812889310); /* HTA's example */
  CHECK(ns("5372353852070.241") == 5372353852070241);
  CHECK(ns("1719853884000000") == 1719853884000000000); /* absolute us (2024) */
  CHECK(ns("0.001") == 1);
  CHECK(ns("0.0005") == 1);   /* ties round away from zero */
  CHECK(ns("0.00049") == 0);
  CHECK(ns("-0.0015") == -2);
  CHECK(ns("0.0014999") == 1);
  CHECK(ns("1e3") == 1000000);
  CHECK(ns("1E+3") == 1000000);
  CHECK(ns("25e-1") == 2500);
  CHECK(ns("2.5E-3") == 3);
  CHECK(ns("123.456e2") == 12345600);
  CHECK(ns("0.000000000000000000000000001") == 0);
  CHECK(ns("1e-400") == 0);
  CHECK(ns("0e400") == 0);
  CHECK(ns("9223372036854775.807") == INT64_MAX);
  CHECK(ns("-9223372036854775.807") == -INT64_MAX);
  CHECK(overflows("9223372036854775.808"));
  CHECK(overflows("1e16"));
  CHECK(overflows("1e400"));
  CHECK(overflows("100000000000000000000000"));
  /* More than 19 significant digits: the rest only rounds. */
  CHECK(ns("1.0000000000000000000000001") == 1000);
  CHECK(ns("1000.0000000000000000009") == 1000000);
  CHECK(ns("12345678901234.56789012345") == 12345678901234568);
  CHECK(ns("0.99999999999999999999999") == 1000);
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

static int64_t ns_long(const char *pre, char fill, size_t n, const char *post) {
  char *t = long_number(pre, fill, n, post);
  int64_t v = 123456789;
  int rc = osk__us_text_to_ns(t, t + strlen(t), &v);
  free(t);
  return rc == 0 ? v : INT64_MIN; /* INT64_MIN: out of range (never a result) */
}

/* Issue 11, item 2: one rounding, exact for any digits and any exponent. */
static void test_exact(void) {
  /* The old parser rounded the 19 kept digits up, then the result: 1001. */
  CHECK(ns("1.00049999999999999999999") == 1000);
  CHECK(ns("1.000499999999999999999999999999999999") == 1000);
  CHECK(ns("-1.00049999999999999999999") == -1000);
  CHECK(ns("0.00049999999999999999999999") == 0);
  CHECK(ns("1.0005") == 1001); /* a tie: away from zero */
  CHECK(ns("-1.0005") == -1001);
  CHECK(ns("1.00050000000000000000000000001") == 1001);
  CHECK(ns("1.5e-3") == 2);
  CHECK(ns("2.5e-3") == 3); /* away from zero, not to even */
  CHECK(ns("0.5e-3") == 1);
  CHECK(ns("4.5e-4") == 0);
  CHECK(ns("0.4999999999999999999999999e-3") == 0);
  CHECK(ns("5e-4") == 1);
  CHECK(ns("5e-5") == 0);
  /* Exponents: leading zeros, and far beyond the old cap of 100000. */
  CHECK(ns("1e0000000000000000000000000003") == 1000000);
  CHECK(ns("1e-0000000000000000000000000003") == 1);
  CHECK(ns("1e-99999999999999999") == 0); /* 16 nines and one: still exact, below 0.1 ns */
  CHECK(overflows("1e99999999999999999"));
  CHECK(overflows("1e100000000000000000")); /* an absurd exponent: out of range, not 0 */
  CHECK(overflows("1e-100000000000000000"));
  CHECK(overflows("1e-1000000000000000000000000000000"));
  CHECK(ns("0e100000000000000000000000") == 0); /* zero is zero at any exponent */
  CHECK(ns("0.000e-100000000000000000000000") == 0);
  /* The int64 boundary, with digits past the 19th deciding. */
  CHECK(ns("9223372036854775.8074999999999") == INT64_MAX);
  CHECK(overflows("9223372036854775.8075"));
  CHECK(overflows("-9223372036854775.8075"));
  CHECK(overflows("-9223372036854775.808")); /* INT64_MIN is out of range too */
  CHECK(ns("9223372036854775807e-3") == INT64_MAX);
  CHECK(ns("92233720368547758070000000e-10") == INT64_MAX);
  CHECK(overflows("9999999999999999999.5"));
  CHECK(ns("999999999999999.9994999") == 999999999999999999);
  CHECK(ns("999999999999999.9995") == 1000000000000000000);
  /* Mantissas of any length: 1 us written with 300000 digits. */
  CHECK(ns_long("0.", '0', 299999, "1e300000") == 1000);
  CHECK(ns_long("1", '0', 300000, "e-300000") == 1000);
  CHECK(ns_long("0.", '0', 299999, "1e+300003") == 1000000);
  CHECK(ns_long("1.000", '0', 300000, "5") == 1000);         /* 1000.000...05 ns */
  CHECK(ns_long("1.0004", '9', 300000, "") == 1000);         /* 1000.4999... ns */
  CHECK(ns_long("1.0005", '0', 300000, "") == 1001);         /* a tie, far out */
  CHECK(ns_long("1.0005", '0', 300000, "1") == 1001);
  CHECK(ns_long("0.", '0', 300000, "1") == 0);
  CHECK(ns_long("9", '0', 300000, "e-300000") == 9000);
  CHECK(ns_long("1", '0', 300000, "") == INT64_MIN);        /* 10^300000 us */
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
    osk_error_t err;
    CHECK(read_all_ways(t, &rec, &err) == 0);
    CHECK(rec.n == 1);
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
