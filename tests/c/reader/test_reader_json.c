/* test_reader_json.c: JSON forms the reader must accept, and the errors (with
 * byte offsets) it must report. Every case is read whole and in small pieces,
 * which must agree (read_all_ways). */
#include "reader_testutil.h"

static void expect_error(const char *text, int want_rc, uint64_t offset, const char *fragment) {
  rec_t rec;
  osk_error_t err;
  int rc = read_all_ways(text, &rec, &err);
  if (rc != want_rc || err.offset != offset || !strstr(err.message, fragment)) {
    fprintf(stderr, "got rc %d offset %llu '%s', expected rc %d offset %llu '%s' for: %s\n", rc,
            (unsigned long long)err.offset, err.message, want_rc, (unsigned long long)offset,
            fragment, text);
    abort();
  }
  CHECK(err.code == rc);
}

static void test_kineto_event(void) {
  const char *t =
      "{\"schemaVersion\":1,\"deviceProperties\":[],\"displayTimeUnit\":\"ms\","
      "\"baseTimeNanoseconds\":1719853884000000000,\"traceEvents\":[\n"
      "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"aten::empty\",\"pid\":1074,\"tid\":1074,"
      "\"ts\":1212076812889.31,\"dur\":2.503,\"args\":{\"External id\":8490,\"Record function id\":0,"
      "\"Concrete Inputs\":[\"\",\"\",\"False\"],\"Input type\":[\"\",\"Scalar\"],"
      "\"Input Dims\":[[],[],[1,2]],\"Ev Idx\":7470}}\n],\"traceName\":\"x.json\"}";
  /* 71: TS|DUR|NAME and OSK_READER_EV_EXTERNAL_ID (its "External id" is 8490). */
  const char *want[] = {"X|aten::empty|cpu_op|1074|1074|1212076812889310|2503||71"};
  expect_events(t, 0, want, 1);
  osk_reader_t *r = read_mem(t, strlen(t), 0, NULL, NULL, NULL, 0, NULL);
  CHECK(osk_reader_meta_count(r) == 4);
  osk_str_t k, v;
  int is_str;
  CHECK(osk_reader_meta_get(r, 2, &k, &v, &is_str) == 0);
  CHECK(k.len == 19 && memcmp(k.ptr, "baseTimeNanoseconds", 19) == 0);
  CHECK(!is_str && v.len == 19 && memcmp(v.ptr, "1719853884000000000", 19) == 0);
  CHECK(osk_reader_meta_get(r, 3, &k, &v, &is_str) == 0);
  CHECK(is_str && v.len == 6 && memcmp(v.ptr, "x.json", 6) == 0);
  CHECK(osk_reader_meta_get(r, 4, &k, &v, &is_str) == OSK_ERANGE);
  CHECK(osk_reader_stats(r)->events == 1);
  CHECK(osk_reader_run(r, NULL, NULL, NULL) == OSK_EINVAL); /* runs once */
  osk_reader_free(r);
}

static void test_key_orders_and_unknown_fields(void) {
  const char *t =
      "{\"traceEvents\":[{\"args\":{\"a\":{\"b\":[{\"c\":null}]},\"name\":\"python\"},\"tid\":0,"
      "\"zzz\":[true,false,null,-1.5e-3,\"\\\"}\"],\"ts\":5,\"pid\":\"Spans\",\"name\":\"process_name\","
      "\"ph\":\"M\"},{\"dur\":1,\"name\":\"a\",\"ph\":\"X\",\"ts\":2,\"pid\":1,\"tid\":2,\"id\":7,\"bp\":\"e\"}],"
      "\"otherData\":{\"k\":{\"deep\":[1,2,{\"x\":\"]\"}]}},\"samples\":[],\"stackFrames\":{}}";
  /* 135: TS|DUR|NAME and OSK_READER_EV_ID (its "id" is 7). */
  const char *want[] = {"M|process_name||'Spans'|0|5000|0|python|5", "X|a||1|2|2000|1000||135"};
  expect_events(t, 0, want, 2);
}

static void test_escapes_and_unicode(void) {
  const char *t =
      "{\"traceEvents\":[{\"ph\":\"X\",\"name\":\"q\\\"b\\\\s\\/n\\n\\t\\r\\b\\f\",\"ts\":0,\"dur\":0},"
      "{\"ph\":\"X\",\"name\":\"\\u00e9\\u4e2d\\ud83d\\ude00\",\"ts\":0,\"dur\":0},"
      "{\"ph\":\"X\",\"name\":\"caf\xc3\xa9 \xf0\x9f\x98\x80\",\"ts\":0,\"dur\":0},"
      "{\"ph\":\"X\",\"name\":\"\\ud800x\\udc00\\ud800\\u0041\",\"ts\":0,\"dur\":0},"
      "{\"\\u0070h\":\"X\",\"n\\u0061me\":\"esc key\",\"ts\":0,\"dur\":0},"
      "{\"ph\":\"X\",\"name\":\"\\u0000nul\",\"ts\":0,\"dur\":0}]}";
  rec_t rec;
  read_all_ok(t, &rec, 6);
  CHECK_STR(rec.lines[0], "X|q\"b\\s/n\n\t\r\b\f||-|-|0|0||7");
  CHECK_STR(rec.lines[1], "X|\xc3\xa9\xe4\xb8\xad\xf0\x9f\x98\x80||-|-|0|0||7");
  CHECK_STR(rec.lines[2], "X|caf\xc3\xa9 \xf0\x9f\x98\x80||-|-|0|0||7");
  /* Lone surrogates become U+FFFD; the character after one is kept. */
  CHECK_STR(rec.lines[3], "X|\xef\xbf\xbdx\xef\xbf\xbd\xef\xbf\xbd" "A||-|-|0|0||7");
  CHECK_STR(rec.lines[4], "X|esc key||-|-|0|0||7");
  /* "\u0000" is a NUL inside the name: the length keeps it. */
  CHECK(stats_of(t).lone_surrogates == 3);
}

static void test_numbers_in_fields(void) {
  const char *t =
      "{\"traceEvents\":[{\"ph\":\"X\",\"name\":\"a\",\"ts\":1.5e3,\"dur\":2E-3,\"pid\":-3,\"tid\":1.5},"
      "{\"ph\":\"X\",\"name\":\"b\",\"ts\":-0.0005,\"dur\":0.0004,\"pid\":123456789012345678,"
      "\"tid\":1234567890123456789},"
      "{\"ph\":\"X\",\"name\":\"c\",\"ts\":\"12\",\"dur\":null,\"pid\":[1],\"tid\":{}},"
      "{\"ph\":\"X\",\"name\":\"d\",\"ts\":1e30,\"dur\":1}]}";
  const char *want[] = {
      "X|a||-3|'1.5'|1500000|2||7",
      "X|b||123456789012345678|'1234567890123456789'|-1|0||7",
      "X|c||-|-|0|0||12",
      "X|d||-|-|0|1000||30", /* 1e30 us: out of range (EV_RANGE with EV_BAD), not 0 */
  };
  expect_events(t, 0, want, 4);
}

static void test_top_level_forms(void) {
  /* The array form of the Chrome format, with a byte order mark. */
  const char *want[] = {"X|a||-|-|1000|0||7"};
  expect_events("\xef\xbb\xbf [ {\"ph\":\"X\",\"name\":\"a\",\"ts\":1,\"dur\":0} ] \n", 0, want, 1);
  expect_events("{}", 0, NULL, 0);
  expect_events("[]", 0, NULL, 0);
  expect_events(" {\"traceEvents\":[]} ", 0, NULL, 0);
  /* Elements that are not objects are skipped (and counted). */
  expect_events("{\"traceEvents\":[1,\"x\",[{}],null,{\"ph\":\"X\",\"name\":\"a\",\"ts\":1,\"dur\":0}]}",
                0, want, 1);
  /* Two traceEvents arrays are both read. */
  const char *two[] = {"X|a||-|-|1000|0||7", "X|a||-|-|1000|0||7"};
  expect_events("{\"traceEvents\":[{\"ph\":\"X\",\"name\":\"a\",\"ts\":1,\"dur\":0}],"
                "\"traceEvents\":[{\"ph\":\"X\",\"name\":\"a\",\"ts\":1,\"dur\":0}]}",
                0, two, 2);
}

static void test_errors(void) {
  /* Offsets point at the offending byte. */
  expect_error("{\"traceEvents\":[{\"ph\":\"X\",}]}", OSK_EFORMAT, 26, "expected a string key");
  expect_error("{\"traceEvents\":[{\"ph\" \"X\"}]}", OSK_EFORMAT, 22, "expected ':'");
  expect_error("{\"traceEvents\":[{\"ts\":01}]}", OSK_EFORMAT, 23, "leading zero");
  expect_error("{\"traceEvents\":[{\"ts\":1.}]}", OSK_EFORMAT, 24, "digit after '.'");
  expect_error("{\"traceEvents\":[{\"ts\":1e+}]}", OSK_EFORMAT, 25, "exponent");
  expect_error("{\"traceEvents\":[{\"ts\":-}]}", OSK_EFORMAT, 23, "invalid number");
  expect_error("{\"traceEvents\":[{\"ts\":+1}]}", OSK_EFORMAT, 22, "expected a value");
  expect_error("{\"traceEvents\":[{\"ts\":.5}]}", OSK_EFORMAT, 22, "expected a value");
  expect_error("{\"traceEvents\":[{\"a\":tru}]}", OSK_EFORMAT, 24, "invalid literal");
  expect_error("{\"traceEvents\":[{\"a\":nul,}]}", OSK_EFORMAT, 24, "invalid literal");
  expect_error("{\"traceEvents\":[{\"a\":\"x\\qy\"}]}", OSK_EFORMAT, 23, "invalid escape");
  expect_error("{\"traceEvents\":[{\"a\":\"\\u12G4\"}]}", OSK_EFORMAT, 26, "hex digits");
  expect_error("{\"traceEvents\":[{\"a\":\"tab\there\"}]}", OSK_EFORMAT, 25, "control character");
  expect_error("{\"traceEvents\":[{\"a\":1},]}", OSK_EFORMAT, 24, "expected a value");
  expect_error("{\"traceEvents\":[{\"a\":1}}", OSK_EFORMAT, 23, "expected ',' or ']'");
  expect_error("{\"traceEvents\":[{\"a\":[1,2}]}", OSK_EFORMAT, 25, "expected ',' or ']'");
  expect_error("{\"traceEvents\":[{\"a\":{\"b\" 1}}]}", OSK_EFORMAT, 26, "expected ':'");
  expect_error("{\"traceEvents\":{}}", OSK_EFORMAT, 15, "not an array");
  expect_error("{\"traceEvents\":[]}x", OSK_EFORMAT, 18, "after the end");
  expect_error("{\"traceEvents\":[]}{}", OSK_EFORMAT, 18, "after the end");
  expect_error("  \"just a string\"", OSK_EFORMAT, 2, "expected '{' or '['");
  expect_error("{\"a\":1,}", OSK_EFORMAT, 7, "expected a string key");
  expect_error("{\"a\" 1}", OSK_EFORMAT, 5, "expected ':'");
  expect_error("{\"a\":1 \"b\":2}", OSK_EFORMAT, 7, "expected ',' or '}'");
  expect_error("{\"a\":[1 2]}", OSK_EFORMAT, 8, "expected ',' or ']'");
  expect_error("{\"a\":{\"k\":1,}}", OSK_EFORMAT, 12, "expected a string key");
  expect_error("{\"a\":x}", OSK_EFORMAT, 5, "expected a value");
  expect_error("{'a':1}", OSK_EFORMAT, 1, "expected a string key");
  expect_error("{\"traceEvents\":[{\"a\":\"\x01\"}]}", OSK_EFORMAT, 22, "control character");
  /* A real NUL byte in the input is an error at its own offset, not an end. */
  rec_t rec;
  osk_error_t err;
  const char nul[] = "{\"traceEvents\":[\0]}";
  CHECK(read_text(nul, sizeof nul - 1, 0, 0, &rec, &err) == OSK_EFORMAT && err.offset == 16);
  CHECK(read_text(nul, sizeof nul - 1, 1, 4, &rec, &err) == OSK_EFORMAT && err.offset == 16);
  /* Events before an error are delivered. */
  {
    const char *t = "[{\"ph\":\"i\"},{\"ph\":\"i\"},{\"ph\" 1}]";
    CHECK(read_text(t, strlen(t), 0, 0, &rec, &err) == OSK_EFORMAT);
  }
  CHECK(rec.n == 2 && err.offset == 29);
}

static void test_deep_nesting(void) {
  /* 1000 levels are fine; 2000 are refused without exhausting the stack. */
  for (int depth = 1000; depth <= 2000; depth += 1000) {
    size_t n = (size_t)depth * 2 + 64;
    char *t = malloc(n);
    CHECK(t);
    size_t k = (size_t)sprintf(t, "{\"traceEvents\":[{\"a\":");
    for (int i = 0; i < depth; i++) t[k++] = '[';
    for (int i = 0; i < depth; i++) t[k++] = ']';
    k += (size_t)sprintf(t + k, "}]}");
    rec_t rec;
    osk_error_t err;
    int rc = read_text(t, k, 0, 0, &rec, &err);
    if (depth == 1000) {
      CHECK(rc == 0 && rec.n == 1);
    } else {
      CHECK(rc == OSK_EFORMAT && strstr(err.message, "nesting"));
    }
    free(t);
  }
}

int main(void) {
  test_kineto_event();
  test_key_orders_and_unknown_fields();
  test_escapes_and_unicode();
  test_numbers_in_fields();
  test_top_level_forms();
  test_errors();
  test_deep_nesting();
  puts("reader json: ok");
  return 0;
}
