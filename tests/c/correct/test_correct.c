/* Unit tests for the compensation: known nesting, known W and delta, exact
 * expected durations, clamping, out-of-order input, and the corrected trace
 * read back through the reader. */
#include "correct_testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  CHECK(f);
  CHECK(fputs(text, f) >= 0);
  CHECK(fclose(f) == 0);
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

#define SEEN_MAX 12
typedef struct {
  int n;
  int64_t ts[SEEN_MAX], dur[SEEN_MAX];
  char name[SEEN_MAX][8];
} seen_t;

static int collect(void *ctx, const osk_reader_event_t *ev) {
  seen_t *s = ctx;
  if (ev->ph.len != 1 || ev->ph.ptr[0] != 'X') return 0;
  CHECK(s->n < SEEN_MAX);
  if (s->n >= SEEN_MAX) return 0;
  s->ts[s->n] = ev->ts_ns;
  s->dur[s->n] = ev->dur_ns;
  memcpy(s->name[s->n], ev->name.ptr, ev->name.len < 7 ? ev->name.len : 7);
  s->n++;
  return 0;
}

/* Reads a corrected trace's complete events into *s. */
static void read_back(const char *path, seen_t *s) {
  memset(s, 0, sizeof *s);
  read_path(path, collect, s);
}

static int find(const seen_t *s, const char *name) {
  for (int i = 0; i < s->n; i++)
    if (strcmp(s->name[i], name) == 0) return i;
  return -1;
}

/* Corrects the trace `text` under `opts`: the text is written to
 * correct_in.json and corrected, which must succeed; with `back`, the
 * corrected trace is written to correct_out.json and read back into *back.
 * The caller frees the result. (The files are the test's folder's.) */
static osk_correct_t *correct_text(const char *text, const osk_correct_opts_t *opts, seen_t *back) {
  write_file("correct_in.json", text);
  osk_correct_t *c = NULL;
  osk_error_t err;
  int rc = osk_correct_path("correct_in.json", back ? "correct_out.json" : NULL, opts, &c, &err);
  if (rc != 0) {
    fprintf(stderr, "correct_text: rc %d (%s)\n", rc, err.message);
    abort();
  }
  if (back) read_back("correct_out.json", back);
  return c;
}

static void test_known_nesting(void) {
  osk_correct_opts_t opts = {.w_ns = 100.0, .delta_ns = 10.0};
  seen_t s;
  osk_correct_t *c = correct_text(TRACE, &opts, &s);
  const osk_correct_stats_t *st = osk_correct_stats(c);
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
  CHECK_NEAR(t->corrected_total_ns, 1, 0);          /* written 1 ns long: no event is written shorter */
  CHECK(st->reported_top_ns == 1005);
  CHECK_NEAR(st->corrected_top_ns, 791, 1e-9);
  osk_correct_free(c);

  /* The corrected trace reads back with the same durations and proper
   * nesting: every child inside its parent; the GPU's kernel as it was. */
  CHECK(s.n == 5);
  int ia = find(&s, "A"), ib = find(&s, "B"), ip = find(&s, "P"), ik = find(&s, "k");
  CHECK(ia >= 0 && ib >= 0 && ip >= 0 && ik >= 0);
  CHECK(s.ts[ik] == 0 && s.dur[ik] == 9000);
  CHECK(s.dur[ia] == 190 && s.dur[ib] == 190 && s.dur[ip] == 790);
  CHECK(s.ts[ip] == 0); /* the time line starts at the first event */
  CHECK(s.ts[ia] >= s.ts[ip] && s.ts[ia] + s.dur[ia] <= s.ts[ib]);
  CHECK(s.ts[ib] + s.dur[ib] <= s.ts[ip] + s.dur[ip]);
}

/* A clock map (a rank of a job on another host): every time moves to the
 * reference clock, durations stay, and the header records the map. */
static void test_clock_map(void) {
  osk_correct_opts_t opts = {.w_ns = 100.0, .delta_ns = 10.0};
  seen_t plain, mapped;
  osk_correct_free(correct_text(TRACE, &opts, &plain));
  opts.clock_origin_ns = 0;
  opts.clock_offset_ns = 300000; /* this rank's clock reads 300 us ahead */
  osk_correct_t *c = correct_text(TRACE, &opts, &mapped);
  osk_correct_free(c);
  CHECK(mapped.n == plain.n && plain.n == 5); /* the kernel too: the rank's every record moves */
  for (int i = 0; i < plain.n; i++) {
    CHECK(strcmp(mapped.name[i], plain.name[i]) == 0);
    CHECK(mapped.ts[i] == plain.ts[i] - 300000 && mapped.dur[i] == plain.dur[i]);
  }
  char *text = osk_test_slurp("correct_out.json", NULL);
  CHECK(strstr(text, "\"clock\":{\"origin_ns\":0,\"offset_ns\":300000"));
  free(text);
  opts.clock_drift = 0.7; /* refused */
  osk_error_t err;
  CHECK(osk_correct_path("correct_in.json", "bad_out.json", &opts, &c, &err) == OSK_EINVAL && !c);
}

static void test_errors_and_truncation(void) {
  osk_correct_opts_t opts = {.w_ns = 100.0, .delta_ns = 10.0};
  osk_correct_t *c = NULL;
  osk_error_t err;
  CHECK(osk_correct_path("no-such-file.json", NULL, &opts, &c, &err) == OSK_EIO && !c);
  osk_correct_opts_t bad = {.w_ns = 10.0, .delta_ns = 20.0}; /* delta > W */
  CHECK(osk_correct_path("x", NULL, &bad, &c, &err) == OSK_EINVAL);
  osk_correct_opts_t bad_py = {.w_ns = 10.0, .w_py_ns = 5.0, .delta_py_ns = 6.0}; /* delta_py > W_py */
  CHECK(osk_correct_path("x", NULL, &bad_py, &c, &err) == OSK_EINVAL);
  static const char *const both[] = {"cpu_op"};
  osk_correct_opts_t twice = {.w_ns = 10.0, .categories = both, .n_categories = 1, .py_categories = both,
                              .n_py_categories = 1};
  write_file("correct_twice.json", TRACE);
  CHECK(osk_correct_path("correct_twice.json", NULL, &twice, &c, &err) == OSK_EINVAL && !c);
  remove("correct_twice.json");
  write_file("correct_bad.json", "{\"traceEvents\":[{\"ph\":\"X\",]}");
  CHECK(osk_correct_path("correct_bad.json", NULL, &opts, &c, &err) == OSK_EFORMAT && !c);
  CHECK(err.offset > 0);
  /* Cut in the middle of the second event: the first is still corrected. */
  write_file("correct_cut.json",
             "{\"traceEvents\":[{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"a\",\"pid\":1,\"tid\":1,"
             "\"ts\":1,\"dur\":1},{\"ph\":\"X\",\"na");
  CHECK(osk_correct_path("correct_cut.json", "correct_cut_out.json", &opts, &c, &err) == OSK_ETRUNCATED);
  CHECK(c && osk_correct_stats(c)->truncated && osk_correct_stats(c)->corrected_events == 1);
  osk_correct_free(c);
  FILE *f = fopen("correct_cut_out.json", "r");
  CHECK(f);
  fclose(f);
  remove("correct_bad.json");
  remove("correct_cut.json");
  remove("correct_cut_out.json");
}

/* Two classes: operators (W 100, delta 10) and the Python tracer's events
 * (W_py 50, delta_py 5), nested in each other as with_stack records them. */
static const char *PY_TRACE =
    "{\"traceEvents\":[\n"
    "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"iter\",\"pid\":1,\"tid\":1,\"ts\":0,\"dur\":3},\n"
    "{\"ph\":\"X\",\"cat\":\"python_function\",\"name\":\"f\",\"pid\":1,\"tid\":1,\"ts\":0.1,\"dur\":2},\n"
    "{\"ph\":\"X\",\"cat\":\"python_function\",\"name\":\"add\",\"pid\":1,\"tid\":1,\"ts\":0.2,\"dur\":0.8},\n"
    "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"aten::add\",\"pid\":1,\"tid\":1,\"ts\":0.3,\"dur\":0.4},\n"
    "{\"ph\":\"X\",\"cat\":\"python_function\",\"name\":\"g\",\"pid\":1,\"tid\":1,\"ts\":1.2,\"dur\":0.3}\n"
    "]}\n";

static void test_python_class(void) {
  osk_correct_opts_t opts = {.w_ns = 100.0, .delta_ns = 10.0, .w_py_ns = 50.0, .delta_py_ns = 5.0};
  seen_t s;
  osk_correct_t *c = correct_text(PY_TRACE, &opts, &s);
  const osk_correct_stats_t *st = osk_correct_stats(c);
  CHECK(st->corrected_events == 5 && st->py_events == 3 && st->other_events == 0);
  const osk_correct_op_t *it = op_named(c, "iter"), *f = op_named(c, "f"), *add = op_named(c, "add");
  const osk_correct_op_t *op = op_named(c, "aten::add"), *g = op_named(c, "g");
  CHECK(it && f && add && op && g);
  CHECK(!it->py_class && f->py_class && add->py_class && !op->py_class && g->py_class);
  /* Each name's category, as its first event has it. */
  CHECK(it->category.len == 15 && !memcmp(it->category.ptr, "user_annotation", 15));
  CHECK(op->category.len == 6 && !memcmp(op->category.ptr, "cpu_op", 6));
  CHECK(g->category.len == 15 && !memcmp(g->category.ptr, "python_function", 15));
  CHECK_NEAR(op->corrected_total_ns, 390, 1e-9);   /* 400 - delta */
  CHECK_NEAR(add->corrected_total_ns, 695, 1e-9);  /* 800 - delta_py - W */
  CHECK_NEAR(g->corrected_total_ns, 295, 1e-9);    /* 300 - delta_py */
  CHECK(f->descendants == 1 && f->py_descendants == 2);
  CHECK_NEAR(f->corrected_total_ns, 1795, 1e-9);   /* 2000 - 5 - 100 - 2 * 50 */
  CHECK(it->descendants == 1 && it->py_descendants == 3);
  CHECK_NEAR(it->corrected_total_ns, 2740, 1e-9);  /* 3000 - 10 - 100 - 3 * 50 */
  CHECK_NEAR(st->corrected_top_ns, 2740, 1e-9);
  osk_correct_free(c);

  /* Read back: durations as corrected, children inside parents, and the
   * Python events keep their category. */
  CHECK(s.n == 5);
  int ii = find(&s, "iter"), iff = find(&s, "f"), ia = find(&s, "add"), io = find(&s, "aten::a"),
      ig = find(&s, "g");
  CHECK(ii >= 0 && iff >= 0 && ia >= 0 && io >= 0 && ig >= 0);
  CHECK(s.dur[ii] == 2740 && s.dur[iff] == 1795 && s.dur[ia] == 695 && s.dur[io] == 390 && s.dur[ig] == 295);
  CHECK(s.ts[iff] >= s.ts[ii] && s.ts[iff] + s.dur[iff] <= s.ts[ii] + s.dur[ii]);
  CHECK(s.ts[ia] >= s.ts[iff] && s.ts[io] >= s.ts[ia] && s.ts[io] + s.dur[io] <= s.ts[ia] + s.dur[ia]);
  CHECK(s.ts[ig] >= s.ts[ia] + s.dur[ia] && s.ts[ig] + s.dur[ig] <= s.ts[iff] + s.dur[iff]);
  char *text = osk_test_slurp("correct_out.json", NULL);
  CHECK(strstr(text, "\"cat\":\"python_function\",\"name\":\"f\"") != NULL);
  CHECK(strstr(text, "\"cat\":\"user_annotation\",\"name\":\"iter\"") != NULL);
  free(text);
}

/* record_function under with_stack: the annotation starts inside the Python
 * tracer's __enter__ event and ends inside __exit__'s. enter, outlived by the
 * annotation, is closed at its start; exit, a Python event that outlives the
 * annotation, is clipped inside it at its end (osk__nest_push). */
static const char *OVERLAP_TRACE =
    "{\"traceEvents\":[\n"
    "{\"ph\":\"X\",\"cat\":\"python_function\",\"name\":\"enter\",\"pid\":1,\"tid\":1,\"ts\":0,\"dur\":0.5},\n"
    "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"iter\",\"pid\":1,\"tid\":1,\"ts\":0.2,\"dur\":3},\n"
    "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"op\",\"pid\":1,\"tid\":1,\"ts\":1,\"dur\":0.5},\n"
    "{\"ph\":\"X\",\"cat\":\"python_function\",\"name\":\"exit\",\"pid\":1,\"tid\":1,\"ts\":3,\"dur\":0.5}\n"
    "]}\n";

static void test_overlapping_annotation(void) {
  osk_correct_opts_t opts = {.w_ns = 100.0, .delta_ns = 10.0, .w_py_ns = 50.0, .delta_py_ns = 5.0};
  seen_t s;
  osk_correct_t *c = correct_text(OVERLAP_TRACE, &opts, &s);
  const osk_correct_stats_t *st = osk_correct_stats(c);
  CHECK(st->overlaps == 2);
  const osk_correct_op_t *en = op_named(c, "enter"), *it = op_named(c, "iter"), *op = op_named(c, "op"),
                         *ex = op_named(c, "exit");
  CHECK(en && it && op && ex);
  CHECK(it->reported_total_ns == 3000 && it->descendants == 1 && it->py_descendants == 1);
  CHECK_NEAR(it->corrected_total_ns, 2840, 1e-9); /* 3000 - 10 - 100 - 50: its whole interval */
  CHECK(en->descendants == 0 && en->py_descendants == 0);
  CHECK_NEAR(en->corrected_total_ns, 495, 1e-9);
  CHECK_NEAR(ex->corrected_total_ns, 495, 1e-9);
  CHECK(st->reported_top_ns == 3500); /* enter and iter; exit is iter's */
  CHECK_NEAR(st->corrected_top_ns, 3335, 1e-9);
  /* Reported self times end where the events were closed, as the summary
   * counts them: enter at iter's start (200 ns), exit at iter's end (200
   * ns), iter 3000 less op's 500 and exit's 200 inside it. */
  CHECK(en->reported_self_ns == 200 && it->reported_self_ns == 2300 && ex->reported_self_ns == 200);
  double en_self = en->corrected_self_ns, it_self = it->corrected_self_ns, ex_self = ex->corrected_self_ns;
  osk_correct_free(c);
  int ie = find(&s, "enter"), ii = find(&s, "iter"), io = find(&s, "op"), ix = find(&s, "exit");
  CHECK(ie >= 0 && ii >= 0 && io >= 0 && ix >= 0);
  /* Every written duration is the formula's (to 1 ns of rounding), and the
   * overlaps stay as reported: iter begins inside enter and exit inside
   * iter. Placing enter's end before iter's begin moved iter, and every
   * boundary after it, to enter's end (shifted and shortened, even at W = 0). */
  CHECK(llabs(s.dur[ie] - 495) <= 1 && llabs(s.dur[ii] - 2840) <= 1 && llabs(s.dur[io] - 490) <= 1 &&
        llabs(s.dur[ix] - 495) <= 1);
  CHECK(s.ts[ie] < s.ts[ii] && s.ts[ii] < s.ts[ie] + s.dur[ie]);
  CHECK(s.ts[ii] < s.ts[ix] && s.ts[ix] < s.ts[ii] + s.dur[ii]);
  /* The corrected self times are the written time line's, read as the
   * summary reads it: enter up to iter's begin, exit up to iter's end, iter
   * less op and the part of exit inside it. */
  int64_t it_end = s.ts[ii] + s.dur[ii];
  CHECK_NEAR(en_self, (double)(s.ts[ii] - s.ts[ie]), 1e-9);
  CHECK_NEAR(ex_self, (double)(it_end - s.ts[ix]), 1e-9);
  CHECK_NEAR(it_self, (double)(s.dur[ii] - s.dur[io] - (it_end - s.ts[ix])), 1e-9);
  CHECK(s.ts[io] >= s.ts[ii] && s.ts[io] + s.dur[io] <= s.ts[ii] + s.dur[ii]);
  /* W = 0: the trace is written as it was read. */
  osk_correct_opts_t zero = {0};
  osk_correct_free(correct_text(OVERLAP_TRACE, &zero, &s));
  static const int64_t ts0[] = {0, 200, 1000, 3000}, dur0[] = {500, 3000, 500, 500};
  const int at[] = {find(&s, "enter"), find(&s, "iter"), find(&s, "op"), find(&s, "exit")};
  for (int k = 0; k < 4; k++) CHECK(s.ts[at[k]] == ts0[k] && s.dur[at[k]] == dur0[k]);
  /* Inside a parent (py "wrapper", 0..4 us), enter counts for it only up to
   * iter's start (0.2 us) and iter whole (3 us, exit inside it clipped at
   * its end: exit's last 0.3 us is the wrapper's), so its reported self time
   * is 800 ns. */
  static const char *WRAPPED =
      "{\"traceEvents\":[\n"
      "{\"ph\":\"X\",\"cat\":\"python_function\",\"name\":\"wrapper\",\"pid\":1,\"tid\":1,\"ts\":0,\"dur\":4},\n"
      "{\"ph\":\"X\",\"cat\":\"python_function\",\"name\":\"enter\",\"pid\":1,\"tid\":1,\"ts\":0,\"dur\":0.5},\n"
      "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"iter\",\"pid\":1,\"tid\":1,\"ts\":0.2,\"dur\":3},\n"
      "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"op\",\"pid\":1,\"tid\":1,\"ts\":1,\"dur\":0.5},\n"
      "{\"ph\":\"X\",\"cat\":\"python_function\",\"name\":\"exit\",\"pid\":1,\"tid\":1,\"ts\":3,\"dur\":0.5}\n"
      "]}\n";
  c = correct_text(WRAPPED, &opts, NULL);
  const osk_correct_op_t *w = op_named(c, "wrapper");
  CHECK(w && w->reported_self_ns == 800 && w->descendants == 2 && w->py_descendants == 2);
  /* 4000 - 5 - 100 * 2 - 50 * 2 */
  CHECK_NEAR(w->corrected_total_ns, 3695, 1e-9);
  CHECK(osk_correct_stats(c)->overlaps == 2);
  osk_correct_free(c);
}

/* A huge finite W is written whole by the one number formatter: the
 * corrected trace stays valid JSON. A zero-duration child's correction
 * (-delta) counts whole for its parent's self time. */
static void test_huge_w_and_zero_child(void) {
  /* Times past the compressed time line's 2^62 ns were written clamped there
   * with no duration: they are skipped and counted instead. */
  {
    osk_correct_opts_t zero = {0};
    osk_correct_t *c = correct_text("{\"traceEvents\":[\n"
                                    "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"A\",\"pid\":1,\"tid\":1,\"ts\":4.7e15,\"dur\":1000},\n"
                                    "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"B\",\"pid\":1,\"tid\":1,\"ts\":4.5e15,\"dur\":5}\n"
                                    "]}\n",
                                    &zero, NULL);
    CHECK(osk_correct_stats(c)->unusable_events == 1 && osk_correct_stats(c)->corrected_events == 1);
    CHECK(op_named(c, "B") && !op_named(c, "A"));
    osk_correct_free(c);
  }
  const char *zero_child =
      "{\"traceEvents\":[\n"
      "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"P\",\"pid\":1,\"tid\":1,\"ts\":0,\"dur\":1},\n"
      "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"Z\",\"pid\":1,\"tid\":1,\"ts\":0.5,\"dur\":0}\n"
      "]}\n";
  osk_correct_opts_t opts = {.w_ns = 100.0, .delta_ns = 10.0};
  seen_t s;
  osk_correct_t *c = correct_text(zero_child, &opts, &s);
  const osk_correct_op_t *p = op_named(c, "P"), *z = op_named(c, "Z");
  CHECK(p && z && z->clamped == 1);
  CHECK_NEAR(z->residual_ns, 10, 1e-9);
  CHECK_NEAR(p->corrected_total_ns, 890, 1e-9);  /* 1000 - 10 - 100 */
  /* One time line: Z is written as it reported, 0 ns long; P's self time
   * is all of P's 890 ns. Z's over-compensation (-10) stays in the residual. */
  CHECK_NEAR(z->corrected_total_ns, 0, 1e-9);
  CHECK_NEAR(p->corrected_self_ns, 890, 1e-9);
  CHECK_NEAR(osk_correct_stats(c)->residual_ns, 10, 1e-9);
  osk_correct_free(c);

  osk_correct_opts_t huge = {.w_ns = 1e300, .delta_ns = 1e299, .w_py_ns = 1.5e200};
  osk_correct_free(correct_text(zero_child, &huge, &s)); /* the reader accepts the whole file */
  CHECK(s.n == 2);
  char *text = osk_test_slurp("correct_out.json", NULL);
  CHECK(strstr(text, "\"w_ns\":1e+300,\"delta_ns\":1e+299,\"w_py_ns\":1.5e+200,\"delta_py_ns\":0,"));
  free(text);
}

/* run_json goes verbatim into the "opskew" object as "run", after
 * "corrected"; the file stays one valid trace. */
static void test_run_json(void) {
  const char *one =
      "{\"traceEvents\":[\n"
      "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"P\",\"pid\":1,\"tid\":1,\"ts\":0,\"dur\":1}\n"
      "]}\n";
  osk_correct_opts_t opts = {.w_ns = 10.0, .run_json = "{\"cycle\":2,\"w\":[1,2]}"};
  seen_t s;
  osk_correct_free(correct_text(one, &opts, &s));
  CHECK(s.n == 1);
  char *text = osk_test_slurp("correct_out.json", NULL);
  CHECK(strstr(text, "per thread\"},\"run\":{\"cycle\":2,\"w\":[1,2]}},\n\"traceEvents\""));
  free(text);
  /* Without it, no "run" member. */
  osk_correct_opts_t plain = {.w_ns = 10.0};
  osk_correct_free(correct_text(one, &plain, &s));
  text = osk_test_slurp("correct_out.json", NULL);
  CHECK(!strstr(text, "\"run\"") && strstr(text, "per thread\"}},\n\"traceEvents\""));
  free(text);
}

/* A gap shorter than the model's instrument time (W = 100, delta 0: 100 ns
 * between A's end and B's begin, 60 there). P's self time holds it: every
 * written duration is still the formula's, the leaf B is not shortened (it
 * was written 160 ns: the shortfall was taken from it), and the table
 * agrees with the trace. In Q the children's corrected durations (200 + 60)
 * outlast Q's own (400 - 2 x 100): Q cannot nest them at 200 ns; it is
 * written as long as they need, its leaves exact, and counted; the table
 * says what the trace holds. */
static const char *GAP_TRACE =
    "{\"traceEvents\":[\n"
    "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"P\",\"pid\":1,\"tid\":1,\"ts\":0,\"dur\":1},\n"
    "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"A\",\"pid\":1,\"tid\":1,\"ts\":0.1,\"dur\":0.2},\n"
    "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"B\",\"pid\":1,\"tid\":1,\"ts\":0.36,\"dur\":0.2},\n"
    "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"Q\",\"pid\":1,\"tid\":1,\"ts\":2,\"dur\":0.4},\n"
    "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"C\",\"pid\":1,\"tid\":1,\"ts\":2.05,\"dur\":0.2},\n"
    "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"D\",\"pid\":1,\"tid\":1,\"ts\":2.3,\"dur\":0.06}\n"
    "]}\n";

static void test_short_gap(void) {
  osk_correct_opts_t opts = {.w_ns = 100.0, .delta_ns = 0.0};
  seen_t s;
  osk_correct_t *c = correct_text(GAP_TRACE, &opts, &s);
  CHECK_NEAR(op_named(c, "P")->corrected_total_ns, 800, 1e-9);
  /* The table reads the time line as written: Q's 260 ns, of which 60
   * more than its formula's 200 (stretched_ns). */
  CHECK_NEAR(op_named(c, "Q")->corrected_total_ns, 260, 1e-9);
  CHECK_NEAR(op_named(c, "Q")->corrected_self_ns, 0, 1e-9);
  CHECK(osk_correct_stats(c)->clamped == 0);
  CHECK(osk_correct_stats(c)->stretched == 1);
  CHECK_NEAR(osk_correct_stats(c)->stretched_ns, 60, 1e-9);
  /* Per name: Q is the one written longer, by the stats' 60 ns. */
  CHECK_NEAR(op_named(c, "Q")->stretched_ns, 60, 1e-9);
  CHECK(op_named(c, "P")->stretched_ns == 0 && op_named(c, "C")->stretched_ns == 0);
  osk_correct_free(c);
  int ip = find(&s, "P"), ia = find(&s, "A"), ib = find(&s, "B");
  int iq = find(&s, "Q"), ic = find(&s, "C"), id = find(&s, "D");
  CHECK(s.n == 6 && ip >= 0 && ia >= 0 && ib >= 0 && iq >= 0 && ic >= 0 && id >= 0);
  CHECK(s.dur[ip] == 800 && s.dur[ia] == 200 && s.dur[ib] == 200);
  CHECK(s.ts[ia] + s.dur[ia] <= s.ts[ib] && s.ts[ib] + s.dur[ib] <= s.ts[ip] + s.dur[ip]);
  CHECK(s.dur[ic] == 200 && s.dur[id] == 60 && s.dur[iq] == 260);
  CHECK(s.ts[ic] >= s.ts[iq] && s.ts[ic] + s.dur[ic] <= s.ts[id]);
  CHECK(s.ts[id] + s.dur[id] <= s.ts[iq] + s.dur[iq]);
}

/* A child written longer than its formula (W = 100, delta 0). Q, as in
 * test_short_gap, cannot nest its leaves at its formula's 200 ns: written
 * 260. Its parent S still has its formula's 4550 - 5 x 100: the 60 ns come
 * out of S's own self time (the fit), and N and every leaf keep their
 * formula's durations (N used to be written 60 ns shorter, taking S's
 * shortfall before its leaf). */
static const char *DOWN_TRACE =
    "{\"traceEvents\":[\n"
    "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"S\",\"pid\":1,\"tid\":1,\"ts\":0,\"dur\":4.55},\n"
    "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"Q\",\"pid\":1,\"tid\":1,\"ts\":2,\"dur\":0.4},\n"
    "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"C\",\"pid\":1,\"tid\":1,\"ts\":2.05,\"dur\":0.2},\n"
    "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"D\",\"pid\":1,\"tid\":1,\"ts\":2.3,\"dur\":0.06},\n"
    "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"N\",\"pid\":1,\"tid\":1,\"ts\":2.5,\"dur\":2},\n"
    "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"L\",\"pid\":1,\"tid\":1,\"ts\":3.5,\"dur\":0.2}\n"
    "]}\n";

static void test_shortfall_goes_down(void) {
  osk_correct_opts_t opts = {.w_ns = 100.0, .delta_ns = 0.0};
  seen_t s;
  osk_correct_t *c = correct_text(DOWN_TRACE, &opts, &s);
  const osk_correct_stats_t *st = osk_correct_stats(c);
  CHECK_NEAR(op_named(c, "S")->corrected_total_ns, 4050, 1e-9);
  CHECK_NEAR(op_named(c, "N")->corrected_total_ns, 1900, 1e-9);
  CHECK(st->clamped == 0 && st->stretched == 1 && st->shortened == 0);
  CHECK_NEAR(st->stretched_ns, 60, 1e-9);
  CHECK_NEAR(op_named(c, "Q")->stretched_ns, 60, 1e-9);
  CHECK(op_named(c, "S")->stretched_ns == 0);
  /* S's self time: 4050 less Q's 260 and N's 1900 as written. */
  CHECK_NEAR(op_named(c, "S")->corrected_self_ns, 4050 - 260 - 1900, 1e-9);
  osk_correct_free(c);
  int is = find(&s, "S"), iq = find(&s, "Q"), in = find(&s, "N"), il = find(&s, "L");
  int ic = find(&s, "C"), id = find(&s, "D");
  CHECK(s.n == 6 && is >= 0 && iq >= 0 && in >= 0 && il >= 0 && ic >= 0 && id >= 0);
  CHECK(s.dur[is] == 4050 && s.dur[iq] == 260 && s.dur[in] == 1900);
  CHECK(s.dur[ic] == 200 && s.dur[id] == 60 && s.dur[il] == 200);
  /* Nesting stays exact. */
  CHECK(s.ts[iq] >= s.ts[is] && s.ts[iq] + s.dur[iq] <= s.ts[in]);
  CHECK(s.ts[il] >= s.ts[in] && s.ts[il] + s.dur[il] <= s.ts[in] + s.dur[in]);
  CHECK(s.ts[in] + s.dur[in] <= s.ts[is] + s.dur[is]);
}

/* A shortfall found late, with room early (W = 400, delta 0): G's four
 * leaves sit 50 ns apart, so G cannot nest them at its formula's 2400 ns
 * (they take 3700) and is written longer; the forward placement carries
 * that into P's later self time, 100 ns, and P came out longer than its
 * formula, 11600 - 7 x 400 = 8800, though its self time before F (3 us)
 * had room. The relayout takes P's excess from the self time of its
 * stretched events (P's own here; G's gaps have none left, F is not
 * stretched) in proportion: P is written at 8800, F at its formula, every
 * leaf exact, nesting kept, and O, the next tree, starts after P's end at
 * the place the time line gives it. */
static const char *RELAY_TRACE =
    "{\"traceEvents\":[\n"
    "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"P\",\"pid\":1,\"tid\":1,\"ts\":0,\"dur\":11.6},\n"
    "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"F\",\"pid\":1,\"tid\":1,\"ts\":3,\"dur\":4},\n"
    "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"A\",\"pid\":1,\"tid\":1,\"ts\":5,\"dur\":0.5},\n"
    "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"G\",\"pid\":1,\"tid\":1,\"ts\":7.5,\"dur\":4},\n"
    "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"L1\",\"pid\":1,\"tid\":1,\"ts\":7.6,\"dur\":1},\n"
    "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"L2\",\"pid\":1,\"tid\":1,\"ts\":8.65,\"dur\":1},\n"
    "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"L3\",\"pid\":1,\"tid\":1,\"ts\":9.7,\"dur\":1},\n"
    "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"L4\",\"pid\":1,\"tid\":1,\"ts\":10.75,\"dur\":0.7},\n"
    "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"O\",\"pid\":1,\"tid\":1,\"ts\":20,\"dur\":1}\n"
    "]}\n";

static void test_relayout(void) {
  osk_correct_opts_t opts = {.w_ns = 400.0, .delta_ns = 0.0};
  seen_t s;
  osk_correct_t *c = correct_text(RELAY_TRACE, &opts, &s);
  const osk_correct_stats_t *st = osk_correct_stats(c);
  CHECK_NEAR(op_named(c, "P")->corrected_total_ns, 8800, 1e-9);
  CHECK_NEAR(op_named(c, "F")->corrected_total_ns, 3600, 1e-9);
  /* G as written: its leaves need 3700 (1300 more than its formula's 2400). */
  CHECK_NEAR(op_named(c, "G")->corrected_total_ns, 3700, 1e-9);
  CHECK(st->relaid == 1 && st->relaid_ns > 1000);
  CHECK(op_named(c, "P")->stretched_ns == 0 && op_named(c, "F")->stretched_ns == 0);
  CHECK(op_named(c, "G")->stretched_ns >= 1300 - 1e-9);
  double relaid = st->relaid_ns;
  osk_correct_free(c);
  int ip = find(&s, "P"), iff = find(&s, "F"), ia = find(&s, "A"), ig = find(&s, "G"), io = find(&s, "O");
  int il[4] = {find(&s, "L1"), find(&s, "L2"), find(&s, "L3"), find(&s, "L4")};
  CHECK(s.n == 9 && ip >= 0 && iff >= 0 && ia >= 0 && ig >= 0 && io >= 0);
  CHECK(llabs(s.dur[ip] - 8800) <= 1 && s.dur[iff] == 3600 && s.dur[ia] == 500 && s.dur[io] == 1000);
  const int64_t leaf[4] = {1000, 1000, 1000, 700};
  for (int k = 0; k < 4; k++) {
    CHECK(il[k] >= 0 && s.dur[il[k]] == leaf[k]);
    CHECK(s.ts[il[k]] >= s.ts[ig] && s.ts[il[k]] + s.dur[il[k]] <= s.ts[ig] + s.dur[ig]);
    if (k) CHECK(s.ts[il[k]] >= s.ts[il[k - 1]] + s.dur[il[k - 1]]);
  }
  CHECK(s.ts[ia] >= s.ts[iff] && s.ts[ia] + s.dur[ia] <= s.ts[iff] + s.dur[iff]);
  CHECK(s.ts[iff] >= s.ts[ip] && s.ts[iff] + s.dur[iff] <= s.ts[ig]);
  CHECK(s.ts[ig] + s.dur[ig] <= s.ts[ip] + s.dur[ip]);
  /* O: the 8 events before it removed 400 each (the line starts at P's
   * begin, so P's half before it is not taken, and O's is), so it begins
   * 20000 - 8 x 400 after P: the relayout moved P's tree, not the line. */
  CHECK(s.ts[io] >= s.ts[ip] + s.dur[ip]);
  CHECK(llabs((s.ts[io] - s.ts[ip]) - (20000 - 8 * 400)) <= 1);
  /* What it took is P's excess over its formula. */
  CHECK(relaid > 1000 && relaid < 11600 - 8800);
}

/* Spans (opts.span_*; opskew.profile's steps' bodies), W = 100, delta 10.
 * S1 reports 10000 ns for a span of 7000: 2990 beyond it and delta, taken
 * out of its self time: 945 before its first child (what the 1000 ns there
 * holds after delta and A's half), the other 2045 after its last child
 * (its 4000 ns tail holds them and B's half). S1 is written at its formula,
 * 10000 - 10 - 2 x 100 - 2990 = 6800, its leaves at reported - delta. S2
 * (3000 for a span of 1000) has 100 ns on each side of its one child: 45 of
 * its 1990 fit before it, 55 after it; it is written 1890 longer than its
 * formula's 900 and owes that between trees, where the gap before O holds
 * it. O has no span; a span's name that never comes changes nothing. */
static const char *SPAN_TRACE =
    "{\"traceEvents\":[\n"
    "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"S1\",\"pid\":1,\"tid\":1,\"ts\":0,\"dur\":10},\n"
    "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"A\",\"pid\":1,\"tid\":1,\"ts\":1,\"dur\":1},\n"
    "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"B\",\"pid\":1,\"tid\":1,\"ts\":5,\"dur\":1},\n"
    "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"S2\",\"pid\":1,\"tid\":1,\"ts\":20,\"dur\":3},\n"
    "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"C\",\"pid\":1,\"tid\":1,\"ts\":20.1,\"dur\":2.8},\n"
    "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"O\",\"pid\":1,\"tid\":1,\"ts\":30,\"dur\":1}\n"
    "]}\n";

static void test_spans(void) {
  const char *names[] = {"S2", "S1", "never", "S1"};
  const double spans[] = {1000.0, 1.0, 5.0, 7000.0}; /* S1 twice: the last span counts */
  osk_correct_opts_t opts = {.w_ns = 100.0, .delta_ns = 10.0, .span_names = names, .span_ns = spans, .n_spans = 4};
  seen_t s;
  osk_correct_t *c = correct_text(SPAN_TRACE, &opts, &s);
  const osk_correct_stats_t *st = osk_correct_stats(c);
  CHECK_NEAR(op_named(c, "S1")->corrected_total_ns, 6800, 1e-9);
  CHECK_NEAR(op_named(c, "S1")->trimmed_ns, 2990, 1e-9);
  /* S2 as written: as long as its child, 1890 more than its formula's 900. */
  CHECK_NEAR(op_named(c, "S2")->corrected_total_ns, 2790, 1e-9);
  CHECK_NEAR(op_named(c, "S2")->trimmed_ns, 1990, 1e-9);
  CHECK(op_named(c, "O")->trimmed_ns == 0 && op_named(c, "A")->trimmed_ns == 0);
  CHECK(op_named(c, "never")->calls == 0);
  CHECK(st->trimmed == 2);
  CHECK_NEAR(st->trimmed_ns, 4980, 1e-9);
  CHECK(st->stretched == 1 && st->shortened == 0 && st->clamped == 0);
  CHECK_NEAR(op_named(c, "S2")->stretched_ns, 1890, 1e-9);
  osk_correct_free(c);
  int i1 = find(&s, "S1"), ia = find(&s, "A"), ib = find(&s, "B"), i2 = find(&s, "S2");
  int ic = find(&s, "C"), io = find(&s, "O");
  CHECK(s.n == 6 && i1 >= 0 && ia >= 0 && ib >= 0 && i2 >= 0 && ic >= 0 && io >= 0);
  CHECK(s.dur[i1] == 6800 && s.dur[ia] == 990 && s.dur[ib] == 990);
  /* The head took 945 of the 1000 ns before A; A to B keeps 3000 less the two halves. */
  CHECK(s.ts[ia] == s.ts[i1] && s.ts[ib] - (s.ts[ia] + s.dur[ia]) == 2910);
  CHECK(s.ts[ib] + s.dur[ib] <= s.ts[i1] + s.dur[i1]);
  CHECK(s.dur[i2] == 2790 && s.dur[ic] == 2790 && s.ts[ic] == s.ts[i2] && s.dur[io] == 990);
  CHECK(s.ts[i2] >= s.ts[i1] + s.dur[i1] && s.ts[io] >= s.ts[i2] + s.dur[i2]);
  /* W scaled by a tree's root (span_w_scale; a span below 0 is none): S1's
   * tree at 2 x W (its W 200, delta 10: S1 10000 - 10 - 200, A 1000 - 10,
   * A placed 10 + 95 ns earlier than S1's 1000 ns before it), S2's at W. */
  const char *sn[] = {"S1"};
  const double no_span[] = {-1.0}, twice[] = {2.0};
  osk_correct_opts_t scaled = {.w_ns = 100.0, .delta_ns = 10.0, .span_names = sn, .span_ns = no_span,
                               .span_w_scale = twice, .n_spans = 1};
  c = correct_text(SPAN_TRACE, &scaled, &s);
  CHECK_NEAR(op_named(c, "S1")->corrected_total_ns, 10000 - 10 - 2 * 200, 1e-9);
  CHECK_NEAR(op_named(c, "A")->corrected_total_ns, 990, 1e-9);
  CHECK_NEAR(op_named(c, "S2")->corrected_total_ns, 3000 - 10 - 100, 1e-9);
  CHECK(osk_correct_stats(c)->trimmed == 0 && osk_correct_stats(c)->stretched == 0);
  /* Beyond W: S1's own 100 and its 2 children's 100 each; per name, S1's tree. */
  CHECK_NEAR(osk_correct_stats(c)->scaled_ns, 300, 1e-6);
  CHECK_NEAR(op_named(c, "S1")->scaled_ns, 200, 1e-6);
  CHECK_NEAR(op_named(c, "A")->scaled_ns, 0, 1e-6);
  CHECK(op_named(c, "S2")->scaled_ns == 0);
  osk_correct_free(c);
  i1 = find(&s, "S1"), ia = find(&s, "A"), i2 = find(&s, "S2"), ic = find(&s, "C");
  CHECK(s.dur[i1] == 9590 && s.dur[ia] == 990 && s.ts[ia] - s.ts[i1] == 1000 - 10 - 95);
  CHECK(s.dur[i2] == 2890 && s.dur[ic] == 2790 && s.ts[ic] - s.ts[i2] == 100 - 10 - 45);
  /* A scaled tree inside an unscaled event P: P's formula takes its
   * descendants' costs at their own scale (10 + 200 + 200 off P), and P is
   * written at it. */
  const char *nest =
      "{\"traceEvents\":[\n"
      "{\"ph\":\"X\",\"cat\":\"python_function\",\"name\":\"P\",\"pid\":1,\"tid\":1,\"ts\":0,\"dur\":20},\n"
      "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"S1\",\"pid\":1,\"tid\":1,\"ts\":1,\"dur\":10},\n"
      "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"A\",\"pid\":1,\"tid\":1,\"ts\":2,\"dur\":1}\n"
      "]}\n";
  const char *pc[] = {"python_function"};
  osk_correct_opts_t nested = scaled;
  nested.w_py_ns = 100.0;
  nested.delta_py_ns = 10.0;
  nested.py_categories = pc;
  nested.n_py_categories = 1;
  c = correct_text(nest, &nested, &s);
  CHECK_NEAR(op_named(c, "P")->corrected_total_ns, 20000 - 10 - 200 - 200, 1e-6);
  CHECK_NEAR(op_named(c, "S1")->corrected_total_ns, 10000 - 10 - 200, 1e-6);
  CHECK(osk_correct_stats(c)->shortened == 0 && osk_correct_stats(c)->stretched == 0);
  CHECK_NEAR(op_named(c, "P")->scaled_ns, 200, 1e-6); /* S1's 100 and A's 100 beyond W */
  osk_correct_free(c);
  CHECK(s.dur[find(&s, "P")] == 19590 && s.dur[find(&s, "S1")] == 9790 && s.dur[find(&s, "A")] == 990);
  /* Per-name delta (span_delta_ns; no span, no scale): A keeps 60 of its
   * W inside it, C 500, more than W = 100; B and the ranges keep the
   * class's 10. Up to W, W per event is unchanged, so the parents' formulas
   * are; only where A's cost comes out moves: 20 on each side of it, not 45.
   * C's W is raised to its 500: S2 loses 500 for it, not 100, so S2's self
   * time loses its own delta and no more (it gained 400 when C's sides gave
   * 200 each back), and nothing comes out on either side of C. */
  const char *dn[] = {"A", "C"};
  const double no_spans[] = {-1.0, -1.0}, own_delta[] = {60.0, 500.0};
  osk_correct_opts_t by_name = {.w_ns = 100.0, .delta_ns = 10.0, .span_names = dn, .span_ns = no_spans,
                                .span_delta_ns = own_delta, .n_spans = 2};
  c = correct_text(SPAN_TRACE, &by_name, &s);
  CHECK_NEAR(op_named(c, "A")->corrected_total_ns, 1000 - 60, 1e-9);
  CHECK_NEAR(op_named(c, "B")->corrected_total_ns, 1000 - 10, 1e-9);
  CHECK_NEAR(op_named(c, "C")->corrected_total_ns, 2800 - 500, 1e-9);
  CHECK_NEAR(op_named(c, "S1")->corrected_total_ns, 10000 - 10 - 200, 1e-9);
  CHECK_NEAR(op_named(c, "S2")->corrected_total_ns, 3000 - 10 - 500, 1e-9);
  CHECK_NEAR(op_named(c, "S2")->corrected_self_ns, op_named(c, "S2")->reported_self_ns - 10, 1e-9);
  CHECK(op_named(c, "A")->scaled_ns == 0 && op_named(c, "S1")->scaled_ns == 0 && op_named(c, "C")->scaled_ns == 0);
  CHECK_NEAR(op_named(c, "S2")->scaled_ns, 400, 1e-9);
  CHECK_NEAR(osk_correct_stats(c)->scaled_ns, 400, 1e-9);
  CHECK(osk_correct_stats(c)->trimmed == 0);
  CHECK(osk_correct_stats(c)->stretched == 0 && osk_correct_stats(c)->shortened == 0);
  osk_correct_free(c);
  i1 = find(&s, "S1"), ia = find(&s, "A"), ib = find(&s, "B"), i2 = find(&s, "S2"), ic = find(&s, "C");
  CHECK(s.dur[i1] == 9790 && s.dur[ia] == 940 && s.dur[ib] == 990 && s.dur[ic] == 2300 && s.dur[i2] == 2490);
  CHECK(s.ts[ia] - s.ts[i1] == 1000 - 10 - 20 && s.ts[ib] - (s.ts[ia] + s.dur[ia]) == 3000 - 20 - 45);
  CHECK(s.ts[ic] - s.ts[i2] == 100 - 10); /* C's sides: nothing out, nothing back */
  /* A span not finite, a scale not > 0, a delta not finite, or an entry
   * without a name is refused. */
  osk_correct_opts_t nan_delta = by_name;
  const double nan_d[] = {60.0, NAN};
  nan_delta.span_delta_ns = nan_d;
  osk_error_t err;
  CHECK(osk_correct_path("correct_in.json", NULL, &nan_delta, &c, &err) == OSK_EINVAL && c == NULL);
  const double bad[] = {NAN}, zero[] = {0.0};
  const char *none[] = {NULL};
  osk_correct_opts_t nan_span = {.w_ns = 100.0, .span_names = names, .span_ns = bad, .n_spans = 1};
  osk_correct_opts_t no_scale = {.w_ns = 100.0, .span_names = names, .span_ns = spans, .span_w_scale = zero,
                                 .n_spans = 1};
  osk_correct_opts_t unnamed = {.w_ns = 100.0, .span_names = none, .span_ns = spans, .n_spans = 1};
  osk_correct_opts_t missing = {.w_ns = 100.0, .n_spans = 1};
  CHECK(osk_correct_path("correct_in.json", NULL, &nan_span, &c, &err) == OSK_EINVAL && c == NULL);
  CHECK(err.code == OSK_EINVAL && strstr(err.message, "spans"));
  CHECK(osk_correct_path("correct_in.json", NULL, &no_scale, &c, &err) == OSK_EINVAL && c == NULL);
  CHECK(osk_correct_path("correct_in.json", NULL, &unnamed, &c, &err) == OSK_EINVAL && c == NULL);
  CHECK(osk_correct_path("correct_in.json", NULL, &missing, &c, &err) == OSK_EINVAL && c == NULL);
}

/* The cross-thread rule (opts.waits): thread 1's ProfilerStep waits in its
 * self time while thread 2 runs 4 events (a CUDA backward on the autograd
 * engine's device thread). The worker's events come first in the file. */
static const char *WAIT_TRACE =
    "{\"traceEvents\":[\n"
    "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"w0\",\"pid\":1,\"tid\":2,\"ts\":2,\"dur\":0.5},\n"
    "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"w1\",\"pid\":1,\"tid\":2,\"ts\":2.1,\"dur\":0.2},\n"
    "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"w0\",\"pid\":1,\"tid\":2,\"ts\":3,\"dur\":0.5},\n"
    "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"w0\",\"pid\":1,\"tid\":2,\"ts\":4,\"dur\":0.5},\n"
    "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"S\",\"pid\":1,\"tid\":1,\"ts\":0,\"dur\":10},\n"
    "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"A\",\"pid\":1,\"tid\":1,\"ts\":0.1,\"dur\":0.4},\n"
    "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"B\",\"pid\":1,\"tid\":1,\"ts\":9,\"dur\":0.5}\n"
    "]}\n";

static void test_waits(void) {
  for (int waits = 0; waits <= 1; waits++) {
    osk_correct_opts_t opts = {.w_ns = 100.0, .delta_ns = 0.0, .waits = waits};
    seen_t s;
    osk_correct_t *c = correct_text(WAIT_TRACE, &opts, &s);
    const osk_correct_op_t *st = op_named(c, "S"), *b = op_named(c, "B"), *w0 = op_named(c, "w0");
    const osk_correct_stats_t *stats = osk_correct_stats(c);
    CHECK(st && b && w0);
    /* S: 10 us - W x its own 2 descendants, and with the rule the worker's
     * 4 events' W too, counted as waited for. */
    CHECK_NEAR(st->corrected_total_ns, waits ? 9400 : 9800, 1e-9);
    CHECK(st->waited_descendants == (uint64_t)(waits ? 4 : 0) && st->waited_py_descendants == 0);
    CHECK_NEAR(st->waited_ns, waits ? 400 : 0, 1e-9);
    CHECK_NEAR(stats->waited_ns, waits ? 400 : 0, 1e-9);
    CHECK(stats->overlapping_threads == (uint64_t)(waits ? 2 : 0));
    /* Asked for: a read that notes the starts, then one that applies them. */
    CHECK(stats->passes == (waits ? 2 : 1));
    /* The worker's own events and the leaves are untouched by the rule. */
    CHECK_NEAR(w0->corrected_total_ns, 3 * 500 - 100, 1e-9);
    CHECK(w0->waited_descendants == 0 && b->waited_ns == 0);
    CHECK(stats->stretched == 0 && stats->clamped == 0);
    osk_correct_free(c);
    int is = find(&s, "S"), ia = find(&s, "A"), ib = find(&s, "B");
    CHECK(s.n == 7 && is >= 0 && ia >= 0 && ib >= 0);
    /* The written trace agrees: S is 400 ns shorter, B 400 ns earlier. */
    CHECK(s.dur[is] == (waits ? 9400 : 9800) && s.dur[ia] == 400 && s.dur[ib] == 500);
    CHECK(s.ts[ib] - s.ts[is] == (waits ? 9000 - 150 - 400 : 9000 - 150));
    CHECK(s.ts[ib] + s.dur[ib] <= s.ts[is] + s.dur[is]);
  }
  /* The rule takes no more than the interval has room for: with W = 3 us
   * the worker's 12 us cannot fit in S's 8.5 us of waiting; nothing is
   * written shorter than its children, and S keeps its own children's W. */
  osk_correct_opts_t big = {.w_ns = 3000.0, .delta_ns = 0.0, .waits = 1};
  seen_t s;
  osk_correct_t *c = correct_text(WAIT_TRACE, &big, &s);
  const osk_correct_op_t *st = op_named(c, "S");
  CHECK(st->waited_ns > 0 && st->waited_ns < 12000);
  CHECK(st->waited_descendants == 4);
  osk_correct_free(c);
  int is = find(&s, "S"), ia = find(&s, "A"), ib = find(&s, "B");
  CHECK(s.ts[ia] >= s.ts[is] && s.ts[ia] + s.dur[ia] <= s.ts[ib]);
  CHECK(s.ts[ib] + s.dur[ib] <= s.ts[is] + s.dur[is]);
  /* -1: where the trace holds GPU activity. This one holds none: no rule;
   * with a kernel event, the rule, as with 1. */
  osk_correct_opts_t autow = {.w_ns = 100.0, .delta_ns = 0.0, .waits = -1};
  c = correct_text(WAIT_TRACE, &autow, NULL);
  CHECK(op_named(c, "S")->waited_descendants == 0 && osk_correct_stats(c)->passes == 1);
  osk_correct_free(c);
  char gpu[2048];
  snprintf(gpu, sizeof gpu, "%.*s,\n{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k\",\"pid\":0,\"tid\":7,"
           "\"ts\":1,\"dur\":2}\n]}\n", (int)(strstr(WAIT_TRACE, "\n]}") - WAIT_TRACE), WAIT_TRACE);
  c = correct_text(gpu, &autow, NULL);
  CHECK_NEAR(op_named(c, "S")->corrected_total_ns, 9400, 1e-9);
  /* Known only at the end of a read: that read is void, then one notes the
   * starts and one writes. */
  CHECK(op_named(c, "S")->waited_descendants == 4 && osk_correct_stats(c)->passes == 3);
  osk_correct_free(c);
  /* The same worker in another process: no thread waits for another
   * process's events. */
  const char *other_process =
      "{\"traceEvents\":[\n"
      "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"w0\",\"pid\":2,\"tid\":2,\"ts\":2,\"dur\":0.5},\n"
      "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"S\",\"pid\":1,\"tid\":1,\"ts\":0,\"dur\":10},\n"
      "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"A\",\"pid\":1,\"tid\":1,\"ts\":0.1,\"dur\":0.4}\n"
      "]}\n";
  osk_correct_opts_t on = {.w_ns = 100.0, .delta_ns = 0.0, .waits = 1};
  c = correct_text(other_process, &on, NULL);
  CHECK(op_named(c, "S")->waited_descendants == 0 && osk_correct_stats(c)->overlapping_threads == 0);
  CHECK_NEAR(op_named(c, "S")->corrected_total_ns, 9900, 1e-9);
  osk_correct_free(c);
  /* Zero-length events of another thread at the waiting interval's start
   * side count: the threads overlap (ends included). */
  const char *zero_length =
      "{\"traceEvents\":[\n"
      "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k\",\"pid\":0,\"tid\":7,\"ts\":0,\"dur\":1},\n"
      "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"S\",\"pid\":1,\"tid\":1,\"ts\":0,\"dur\":10},\n"
      "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"A\",\"pid\":1,\"tid\":1,\"ts\":0.1,\"dur\":0.4},\n"
      "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"z\",\"pid\":1,\"tid\":2,\"ts\":10,\"dur\":0},\n"
      "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"z\",\"pid\":1,\"tid\":2,\"ts\":5,\"dur\":0}\n"
      "]}\n";
  c = correct_text(zero_length, &autow, NULL);
  CHECK(osk_correct_stats(c)->overlapping_threads == 2);
  CHECK(op_named(c, "S")->waited_descendants == 1); /* the one at 5 us; 10 us is S's end */
  osk_correct_free(c);
}

int main(void) {
  osk_test_in_tmpdir();
  test_waits(); /* the files below are named by relative path */
  test_huge_w_and_zero_child();
  test_run_json();
  test_overlapping_annotation();
  test_known_nesting();
  test_short_gap();
  test_shortfall_goes_down();
  test_relayout();
  test_spans();
  test_clock_map();
  test_python_class();
  test_errors_and_truncation();
  puts("test_correct: ok");
  return 0;
}
