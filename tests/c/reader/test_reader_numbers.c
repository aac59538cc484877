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
  test_grammar_at_boundaries();
  puts("reader numbers: ok");
  return 0;
}
