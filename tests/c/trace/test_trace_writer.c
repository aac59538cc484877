/* Chrome trace writer: valid JSON, Kineto's field conventions, names
 * escaped, timestamps as microseconds with 3-digit fractions, metadata. */
#include "opskew_trace.h"
#include "testutil.h"
#include "json_check.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char *slurp(const char *path) { return osk_test_slurp(path, NULL); }

static size_t count(const char *hay, const char *needle) {
  size_t n = 0;
  for (const char *p = hay; (p = strstr(p, needle)) != NULL; p += strlen(needle)) n++;
  return n;
}

int main(void) {
  char out[64];
  /* Escaping. */
  CHECK(osk_trace_json_escape("plain", out, sizeof out) == 5 && !strcmp(out, "plain"));
  CHECK(osk_trace_json_escape("a\"b\\c", out, sizeof out) == 7 && !strcmp(out, "a\\\"b\\\\c"));
  CHECK(osk_trace_json_escape("x\ny\t\x01", out, sizeof out) == 12 && !strcmp(out, "x\\ny\\t\\u0001"));
  CHECK(osk_trace_json_escape("caf\xc3\xa9", out, sizeof out) == 5 && !strcmp(out, "caf\xc3\xa9"));
  CHECK(!strcmp((osk_trace_json_escape("bad\xff", out, sizeof out), out), "bad\\ufffd"));
  CHECK(!strcmp((osk_trace_json_escape("\xc3", out, sizeof out), out), "\\ufffd")); /* cut */
  CHECK(!strcmp((osk_trace_json_escape("\xed\xa0\x80", out, sizeof out), out),
                "\\ufffd\\ufffd\\ufffd")); /* surrogate */
  CHECK(osk_trace_json_escape("abcdef", out, 4) == 6 && !strcmp(out, "abc")); /* truncated */
  CHECK(osk_trace_json_escape(NULL, out, sizeof out) == 0 && out[0] == '\0');
  CHECK(osk_trace_json_escape("abc", NULL, 0) == 3);

  /* A trace with awkward names, nesting and two threads' worth of events. */
  osk_trace_name_t *odd = osk_trace_name("my \"scope\"\\\n\xff");
  osk_trace_name_t *add = osk_trace_name("aten::add");
  uint16_t other = osk_trace_category("user \"domain\"");
  osk_trace_calib_t cal = {.w_ns = 25.5, .delta_ns = 11.25, .pairs = 10, .rounds = 3, .valid = 1};
  CHECK(osk_trace_start(&cal) == 0);
  for (int i = 0; i < 5000; i++) {
    osk_trace_begin(odd, other);
    osk_trace_begin(add, 0);
    osk_trace_end();
    osk_trace_end();
  }
  osk_trace_begin(NULL, 0); /* unnamed */
  osk_trace_end();
  osk_trace_snapshot_t *s = NULL;
  CHECK(osk_trace_stop("test", &s) == 0);
  CHECK(s && osk_trace_snapshot_events(s) == 10001);

  char path[] = "/tmp/opskew_test_writer_XXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0);
  close(fd);
  CHECK(osk_trace_write_chrome(s, path) == 0);
  char *text = slurp(path);
  CHECK(json_valid(text));
  CHECK(!strncmp(text, "{\"schemaVersion\":1,", 19));
  CHECK(strstr(text, "\"traceEvents\":["));
  CHECK(strstr(text, "\"baseTimeNanoseconds\":"));
  CHECK(strstr(text, "\"displayTimeUnit\":\"ms\""));
  CHECK(count(text, "\"ph\":\"X\"") == 10001);
  CHECK(count(text, "\"name\":\"aten::add\"") == 5000);
  CHECK(count(text, "\"cat\":\"cpu_op\"") == 5001);
  CHECK(count(text, "\"cat\":\"user \\\"domain\\\"\"") == 5000);
  CHECK(count(text, "\"name\":\"my \\\"scope\\\"\\\\\\n\\ufffd\"") == 5000);
  CHECK(count(text, "\"name\":\"<unnamed>\"") == 1);
  CHECK(count(text, "\"name\":\"process_name\"") == 1);
  CHECK(count(text, "\"name\":\"thread_name\"") == 1);
  CHECK(strstr(text, "\"calibration\":{\"w_ns\":25.5,\"delta_ns\":11.25"));
  CHECK(strstr(text, "\"lost\":{\"total\":0,"));
  CHECK(strstr(text, "\"clock\":{\"kind\":\""));
  /* ts and dur: digits, a point, exactly three digits. */
  size_t nts = 0;
  for (const char *p = text; (p = strstr(p, "\"dur\":")) != NULL; nts++) {
    p += 6;
    CHECK(*p >= '0' && *p <= '9');
    while (*p >= '0' && *p <= '9') p++;
    CHECK(p[0] == '.' && p[1] >= '0' && p[1] <= '9' && p[2] >= '0' && p[2] <= '9' && p[3] >= '0' &&
          p[3] <= '9' && (p[4] == ',' || p[4] == '}'));
  }
  CHECK(nts == 10001);
  CHECK(count(text, "\"ts\":-") == 0);
  free(text);

  /* Failure leaves no partial file behind and says so. */
  CHECK(osk_trace_write_chrome(s, "/nonexistent-dir/x.json") == OSK_EIO);
  CHECK(osk_trace_write_chrome(s, "") == OSK_EINVAL);
  CHECK(osk_trace_write_chrome(NULL, path) == OSK_EINVAL);

  /* Losses appear in the metadata and as an instant event. */
  CHECK(osk_trace_start(NULL) == 0);
  for (int i = 0; i < 300; i++) osk_trace_begin(add, 0);
  for (int i = 0; i < 300; i++) osk_trace_end();
  osk_trace_snapshot_t *s2 = NULL;
  CHECK(osk_trace_stop("test", &s2) == 0);
  CHECK(s2 && osk_trace_snapshot_lost_total(s2) > 0);
  CHECK(osk_trace_write_chrome(s2, path) == 0);
  text = slurp(path);
  CHECK(json_valid(text));
  CHECK(strstr(text, "\"name\":\"opskew: events lost\""));
  CHECK(strstr(text, "\"calibration\":null"));
  char expect[64];
  snprintf(expect, sizeof expect, "\"depth\":%llu", (unsigned long long)osk_trace_snapshot_lost(s2, OSK_TRACE_LOSS_DEPTH));
  CHECK(strstr(text, expect));
  free(text);

  /* The instrument name is escaped wherever it appears, the process name
   * included. */
  CHECK(osk_trace_start(NULL) == 0);
  osk_trace_begin(add, 0);
  osk_trace_end();
  osk_trace_snapshot_t *s3 = NULL;
  CHECK(osk_trace_stop("in\"st\\x", &s3) == 0);
  CHECK(osk_trace_write_chrome(s3, path) == 0);
  text = slurp(path);
  CHECK(json_valid(text));
  CHECK(strstr(text, "\"name\":\"python (opskew in\\\"st\\\\x)\""));
  free(text);
  osk_trace_snapshot_free(s3);
  unlink(path);
  osk_trace_snapshot_free(s2);
  osk_trace_snapshot_free(s);
  printf("ok: writer\n");
  return 0;
}
