/* Unit tests for the compensation: known nesting, known W and delta, exact
 * expected durations, clamping, out-of-order input, and the corrected trace
 * read back through the reader. */
#include "opskew_correct.h"
#include "testutil.h"

#include <string.h>

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  CHECK(f);
  CHECK(fputs(text, f) >= 0);
  CHECK(fclose(f) == 0);
}

static const osk_correct_op_t *op_named(const osk_correction_t *c, const char *name) {
  for (size_t i = 0; i < osk_correction_op_count(c); i++) {
    const osk_correct_op_t *op = osk_correction_op(c, i);
    if (op->name.len == strlen(name) && memcmp(op->name.ptr, name, op->name.len) == 0) return op;
  }
  return NULL;
}

/* Times in the file are microseconds: 1.000 = 1000 ns. The child B comes
 * before its parent in the file, and thread 2's events before thread 1's end. */
static const char *TRACE =
    "{\"schemaVersion\":1,\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n"
    "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":1,\"tid\":\"worker\",\"args\":{\"name\":\"w\\\"1\"}},\n"
    "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"B\",\"pid\":1,\"tid\":7,\"ts\":0.400,\"dur\":0.200},\n"
    "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"P\",\"pid\":1,\"tid\":7,\"ts\":0,\"dur\":1.000},\n"
    "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"tiny\",\"pid\":1,\"tid\":\"worker\",\"ts\":5,\"dur\":0.005},\n"
    "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k\",\"pid\":0,\"tid\":7,\"ts\":0,\"dur\":9},\n"
    "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"A\",\"pid\":1,\"tid\":7,\"ts\":0.100,\"dur\":0.200}\n"
    "]}\n";

typedef struct {
  int n;
  int64_t ts[8], dur[8];
  char name[8][8];
} seen_t;

static int collect(void *ctx, const osk_trace_event_t *ev) {
  seen_t *s = ctx;
  if (ev->ph.len != 1 || ev->ph.ptr[0] != 'X') return 0;
  CHECK(s->n < 8);
  s->ts[s->n] = ev->ts_ns;
  s->dur[s->n] = ev->dur_ns;
  memcpy(s->name[s->n], ev->name.ptr, ev->name.len < 7 ? ev->name.len : 7);
  s->n++;
  return 0;
}

static int find(const seen_t *s, const char *name) {
  for (int i = 0; i < s->n; i++)
    if (strcmp(s->name[i], name) == 0) return i;
  return -1;
}

static void test_known_nesting(void) {
  write_file("correct_in.json", TRACE);
  osk_correct_opts_t opts = {100.0, 10.0, NULL, 0};
  osk_correction_t *c = NULL;
  osk_read_error_t err;
  CHECK(osk_correct_path("correct_in.json", "correct_out.json", &opts, &c, &err) == 0);
  const osk_correct_stats_t *st = osk_correction_stats(c);
  CHECK(st->corrected_events == 4 && st->other_events == 1 && st->threads == 2);
  const osk_correct_op_t *a = op_named(c, "A"), *b = op_named(c, "B"), *p = op_named(c, "P");
  const osk_correct_op_t *t = op_named(c, "tiny");
  CHECK(a && b && p && t);
  CHECK_NEAR(a->corrected_total_ns, 190, 1e-9);     /* 200 - delta */
  CHECK_NEAR(b->corrected_total_ns, 190, 1e-9);
  CHECK_NEAR(p->corrected_total_ns, 790, 1e-9);     /* 1000 - 10 - 100 * 2 */
  CHECK(p->descendants == 2 && p->reported_self_ns == 600);
  CHECK_NEAR(p->corrected_self_ns, 410, 1e-9);      /* 790 - 2 * 190 */
  CHECK(t->clamped == 1);                           /* 5 ns < delta */
  CHECK_NEAR(t->residual_ns, 5, 1e-9);
  CHECK_NEAR(t->corrected_total_ns, 0, 0);
  CHECK(st->reported_top_ns == 1005);
  CHECK_NEAR(st->corrected_top_ns, 790, 1e-9);
  osk_correction_free(c);

  /* The corrected trace reads back with the same durations and proper
   * nesting: every child inside its parent. */
  osk_reader_t *r = NULL;
  CHECK(osk_reader_open(&r, "correct_out.json", NULL, &err) == 0);
  seen_t s;
  memset(&s, 0, sizeof s);
  CHECK(osk_reader_run(r, collect, &s, &err) == 0);
  osk_reader_free(r);
  CHECK(s.n == 4);
  int ia = find(&s, "A"), ib = find(&s, "B"), ip = find(&s, "P");
  CHECK(ia >= 0 && ib >= 0 && ip >= 0);
  CHECK(s.dur[ia] == 190 && s.dur[ib] == 190 && s.dur[ip] == 790);
  CHECK(s.ts[ip] == 0); /* the time line starts at the first event */
  CHECK(s.ts[ia] >= s.ts[ip] && s.ts[ia] + s.dur[ia] <= s.ts[ib]);
  CHECK(s.ts[ib] + s.dur[ib] <= s.ts[ip] + s.dur[ip]);
  remove("correct_in.json");
  remove("correct_out.json");
}

static void test_errors_and_truncation(void) {
  osk_correct_opts_t opts = {100.0, 10.0, NULL, 0};
  osk_correction_t *c = NULL;
  osk_read_error_t err;
  CHECK(osk_correct_path("no-such-file.json", NULL, &opts, &c, &err) == OSK_EIO && !c);
  osk_correct_opts_t bad = {10.0, 20.0, NULL, 0}; /* delta > W */
  CHECK(osk_correct_path("x", NULL, &bad, &c, &err) == OSK_EINVAL);
  write_file("correct_bad.json", "{\"traceEvents\":[{\"ph\":\"X\",]}");
  CHECK(osk_correct_path("correct_bad.json", NULL, &opts, &c, &err) == OSK_EFORMAT && !c);
  CHECK(err.offset > 0);
  /* Cut in the middle of the second event: the first is still corrected. */
  write_file("correct_cut.json",
             "{\"traceEvents\":[{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"a\",\"pid\":1,\"tid\":1,"
             "\"ts\":1,\"dur\":1},{\"ph\":\"X\",\"na");
  CHECK(osk_correct_path("correct_cut.json", "correct_cut_out.json", &opts, &c, &err) == OSK_ETRUNCATED);
  CHECK(c && osk_correction_stats(c)->truncated && osk_correction_stats(c)->corrected_events == 1);
  osk_correction_free(c);
  FILE *f = fopen("correct_cut_out.json", "r");
  CHECK(f);
  fclose(f);
  remove("correct_bad.json");
  remove("correct_cut.json");
  remove("correct_cut_out.json");
}

int main(void) {
  test_known_nesting();
  test_errors_and_truncation();
  puts("test_correct: ok");
  return 0;
}
