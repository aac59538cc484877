/* test_reader_summary.c: nesting, self and inclusive times, descendants,
 * equal starts, overlaps, out-of-order threads (the sorted second pass),
 * B/E pairs, quantiles, the category filter and metadata, and the usable-event
 * rule every pass over read events applies (reader_analysis.h). */
#include <math.h>

#include "reader_analysis.h"
#include "reader_testutil.h"

static osk_summary_t *summarize(const char *text, const char *const *cats, size_t n_cats,
                                int want_rc) {
  osk_summary_t *s = NULL;
  osk_error_t err;
  osk_summary_opts_t o = {cats, n_cats, NULL, 0};
  int rc = osk_summary_from_mem(text, strlen(text), 5, cats ? &o : NULL, NULL, &s, NULL, &err);
  if (rc != want_rc) {
    fprintf(stderr, "rc %d (%s), expected %d\n", rc, err.message, want_rc);
    abort();
  }
  CHECK(s);
  return s;
}

static const osk_summary_op_t *op(const osk_summary_t *s, const char *name) {
  for (size_t i = 0; i < osk_summary_op_count(s); i++) {
    const osk_summary_op_t *o = osk_summary_op(s, i);
    if (o->name.len == strlen(name) && memcmp(o->name.ptr, name, o->name.len) == 0) return o;
  }
  fprintf(stderr, "no op %s\n", name);
  abort();
}

static size_t op_index(const osk_summary_t *s, const char *name) {
  const osk_summary_op_t *o = op(s, name);
  for (size_t i = 0;; i++)
    if (osk_summary_op(s, i) == o) return i;
}

#define X(name, ts, dur) "{\"ph\":\"X\",\"name\":\"" name "\",\"pid\":1,\"tid\":1,\"ts\":" ts ",\"dur\":" dur "}"

static void check_basic(const osk_summary_t *s) {
  const osk_summary_op_t *o = op(s, "outer");
  CHECK(o->calls == 2 && o->total_ns == 15000 && o->self_ns == 10000 && o->descendants == 3);
  CHECK(o->min_ns == 5000 && o->max_ns == 10000);
  o = op(s, "mid");
  CHECK(o->calls == 2 && o->total_ns == 5000 && o->self_ns == 4000 && o->descendants == 1);
  o = op(s, "leaf");
  CHECK(o->calls == 1 && o->total_ns == 1000 && o->self_ns == 1000 && o->descendants == 0);
  CHECK(osk_summary_thread_count(s) == 1);
  CHECK(osk_summary_thread(s, 0)->max_depth == 3);
  CHECK(osk_summary_thread(s, 0)->complete_events == 5);
  CHECK(osk_summary_stats(s)->first_ts_ns == 0 && osk_summary_stats(s)->last_end_ns == 25000);
}

static void test_nesting(void) {
  const char *t = "{\"traceEvents\":[" X("outer", "0", "10") "," X("mid", "1", "3") "," X(
      "leaf", "1.5", "1") "," X("mid", "5", "2") "," X("outer", "20", "5") "]}";
  osk_summary_t *s = summarize(t, NULL, 0, 0);
  check_basic(s);
  CHECK(osk_summary_stats(s)->passes == 1 && !osk_summary_thread(s, 0)->resorted);
  osk_summary_free(s);
  /* The same events out of order: nested from the sorted second pass. */
  const char *u = "{\"traceEvents\":[" X("mid", "5", "2") "," X("outer", "20", "5") "," X(
      "leaf", "1.5", "1") "," X("outer", "0", "10") "," X("mid", "1", "3") "]}";
  s = summarize(u, NULL, 0, 0);
  check_basic(s);
  CHECK(osk_summary_stats(s)->passes == 2 && osk_summary_thread(s, 0)->resorted);
  CHECK(osk_summary_stats(s)->resorted_events == 5);
  osk_summary_free(s);
}

static void test_equal_starts_and_overlaps(void) {
  /* The longer of two events that start together is the parent, whichever
   * comes first; equal intervals nest in file order. */
  const char *t = "{\"traceEvents\":[" X("c", "0", "2") "," X("p", "0", "5") "," X("x", "10", "5") "," X(
      "y", "10", "5") "," X("a", "20", "10") "," X("b", "25", "10") "]}";
  osk_summary_t *s = summarize(t, NULL, 0, 0);
  CHECK(op(s, "p")->self_ns == 3000 && op(s, "p")->descendants == 1);
  CHECK(op(s, "c")->self_ns == 2000);
  CHECK(op(s, "x")->self_ns == 0 && op(s, "y")->self_ns == 5000);
  /* b outlives a, which it starts in: counted, a is closed at b's start (so
   * b is not a's child, and a's self time ends there: 25..30 is b's, counted
   * once), and both keep their whole durations as totals. */
  CHECK(op(s, "a")->self_ns == 5000 && op(s, "a")->descendants == 0 && op(s, "b")->self_ns == 10000);
  CHECK(op(s, "a")->total_ns == 10000 && op(s, "b")->total_ns == 10000);
  CHECK(osk_summary_stats(s)->overlaps == 1);
  CHECK(osk_summary_thread(s, 0)->overlaps == 1);
  osk_summary_free(s);
  /* The with_stack shape: an annotation starts inside __enter__ and ends
   * inside __exit__; the operator in between is the annotation's child. */
  t = "{\"traceEvents\":[" X("enter", "0", "5") "," X("ann", "2", "30") "," X("op", "10", "5") "," X(
      "exit", "30", "5") "]}";
  s = summarize(t, NULL, 0, 0);
  /* ann is closed at exit's start (30): 2..30 less op's 5 us */
  CHECK(op(s, "ann")->descendants == 1 && op(s, "ann")->self_ns == 23000);
  CHECK(op(s, "enter")->self_ns == 2000 && op(s, "exit")->self_ns == 5000);
  CHECK(op(s, "enter")->descendants == 0 && op(s, "exit")->descendants == 0);
  CHECK(osk_summary_stats(s)->overlaps == 2);
  osk_summary_free(s);
  /* Inside a parent, the closed-early event counts only up to the later
   * one's start: the parent's children cover 0..40 once, self time 10 us. */
  t = "{\"traceEvents\":[" X("wrapper", "0", "50") "," X("enter", "0", "5") "," X("ann", "2", "30") "," X(
      "exit", "30", "10") "]}";
  s = summarize(t, NULL, 0, 0);
  CHECK(op(s, "wrapper")->descendants == 3 && op(s, "wrapper")->self_ns == 10000);
  /* and the self times add up to the wrapper's 50 us, once each */
  CHECK(op(s, "enter")->self_ns == 2000 && op(s, "ann")->self_ns == 28000 && op(s, "exit")->self_ns == 10000);
  osk_summary_free(s);
  /* Three nested events with the same start listed innermost first. */
  t = "{\"traceEvents\":[" X("in", "0", "1") "," X("mid", "0", "2") "," X("out", "0", "3") "]}";
  s = summarize(t, NULL, 0, 0);
  CHECK(op(s, "out")->self_ns == 1000 && op(s, "out")->descendants == 2);
  CHECK(op(s, "mid")->self_ns == 1000 && op(s, "in")->self_ns == 1000);
  CHECK(osk_summary_thread(s, 0)->max_depth == 3);
  CHECK(osk_summary_stats(s)->passes == 1);
  osk_summary_free(s);
}

static void test_same_name_only_child(void) {
  const char *t = "{\"traceEvents\":[" X("aten::div_", "0", "10") "," X("aten::div_", "1", "8") "," X(
      "aten::add", "20", "5") "," X("aten::add", "21", "1") "," X("aten::mul", "22", "1") "]}";
  osk_summary_t *s = summarize(t, NULL, 0, 0);
  CHECK(op(s, "aten::div_")->calls == 2 && op(s, "aten::div_")->only_child_same_name == 1);
  /* aten::add's child is not an only child: key_averages keeps both. */
  CHECK(op(s, "aten::add")->only_child_same_name == 0);
  osk_summary_free(s);
}

static void test_threads_and_metadata(void) {
  const char *t =
      "{\"traceEvents\":["
      "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":1,\"tid\":0,\"args\":{\"name\":\"python\"}},"
      "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":1,\"tid\":2,\"args\":{\"name\":\"bwd\"}},"
      "{\"ph\":\"X\",\"name\":\"a\",\"pid\":1,\"tid\":1,\"ts\":0,\"dur\":10},"
      "{\"ph\":\"X\",\"name\":\"a\",\"pid\":1,\"tid\":2,\"ts\":1,\"dur\":10},"
      "{\"ph\":\"X\",\"name\":\"b\",\"pid\":1,\"tid\":1,\"ts\":2,\"dur\":2},"
      "{\"ph\":\"X\",\"name\":\"b\",\"pid\":1,\"tid\":\"1\",\"ts\":3,\"dur\":2},"
      "{\"ph\":\"X\",\"name\":\"c\",\"pid\":1,\"tid\":2},"
      "{\"ph\":\"X\",\"name\":\"c\",\"pid\":1,\"tid\":2,\"ts\":5,\"dur\":-1},"
      "{\"ph\":\"s\",\"name\":\"fwdbwd\",\"pid\":1,\"tid\":2,\"ts\":5,\"id\":3},"
      "{\"ph\":\"i\",\"s\":\"g\",\"name\":\"Record Window End\",\"pid\":\"\",\"tid\":\"\",\"ts\":20},"
      "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":\"Spans\",\"args\":{\"name\":\"spans\"}},"
      "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":1,\"args\":{\"name\":\"python3\"}}"
      "]}";
  osk_summary_t *s = summarize(t, NULL, 0, 0);
  /* tid 1 and tid "1" are different threads. */
  CHECK(osk_summary_thread_count(s) == 3);
  CHECK(op(s, "a")->self_ns == 18000 && op(s, "b")->self_ns == 4000);
  const osk_summary_thread_t *th = osk_summary_thread(s, 0);
  CHECK(th->tid.kind == OSK_READER_ID_INT && th->tid.num == 2 && th->name.len == 3);
  /* Processes in first-named order; the latest name wins. */
  CHECK(osk_summary_process_count(s) == 2 && osk_summary_process(s, 2) == NULL);
  const osk_summary_process_t *p0 = osk_summary_process(s, 0), *p1 = osk_summary_process(s, 1);
  CHECK(p0->pid.kind == OSK_READER_ID_INT && p0->pid.num == 1);
  CHECK(p0->name.len == 7 && memcmp(p0->name.ptr, "python3", 7) == 0);
  CHECK(p1->pid.kind == OSK_READER_ID_STR && p1->pid.str.len == 5 && memcmp(p1->pid.str.ptr, "Spans", 5) == 0);
  CHECK(p1->name.len == 5 && memcmp(p1->name.ptr, "spans", 5) == 0);
  const osk_summary_stats_t *st = osk_summary_stats(s);
  CHECK(st->events == 12 && st->complete_events == 4 && st->unusable_events == 2);
  osk_summary_free(s);
}

static void test_begin_end(void) {
  const char *t =
      "{\"traceEvents\":["
      "{\"ph\":\"B\",\"name\":\"f\",\"pid\":1,\"tid\":1,\"ts\":0},"
      "{\"ph\":\"B\",\"name\":\"g\",\"pid\":1,\"tid\":1,\"ts\":1},"
      "{\"ph\":\"E\",\"pid\":1,\"tid\":1,\"ts\":3},"
      "{\"ph\":\"E\",\"pid\":1,\"tid\":1,\"ts\":10},"
      "{\"ph\":\"E\",\"pid\":1,\"tid\":1,\"ts\":11},"
      "{\"ph\":\"B\",\"name\":\"h\",\"pid\":1,\"tid\":1,\"ts\":12}"
      "]}";
  osk_summary_t *s = summarize(t, NULL, 0, 0);
  CHECK(op(s, "f")->total_ns == 10000 && op(s, "f")->self_ns == 8000);
  CHECK(op(s, "g")->total_ns == 2000 && op(s, "g")->self_ns == 2000);
  CHECK(osk_summary_stats(s)->unmatched_end == 1 && osk_summary_stats(s)->unclosed_begin == 1);
  osk_summary_free(s);
}

static void test_quantiles(void) {
  /* 64 calls of 1..64 ns: exact. Then 1000 calls of 1000..1999 ns: from the
   * histogram, within its stated 0.8%. */
  size_t cap = 1100 * 96 + 64, k = 0;
  char *t = malloc(cap);
  CHECK(t);
  k += (size_t)sprintf(t + k, "[");
  for (int i = 1; i <= 64; i++)
    k += (size_t)sprintf(t + k, "{\"ph\":\"X\",\"name\":\"q\",\"ts\":%d,\"dur\":0.%03d},", i * 10, i);
  for (int i = 0; i < 1000; i++)
    k += (size_t)sprintf(t + k, "%s{\"ph\":\"X\",\"name\":\"r\",\"ts\":%d,\"dur\":%d.%03d}", i ? "," : "",
                         i * 10, (1000 + i) / 1000, (1000 + i) % 1000);
  k += (size_t)sprintf(t + k, "]");
  osk_summary_t *s = summarize(t, NULL, 0, 0);
  double v;
  size_t q = op_index(s, "q"), r = op_index(s, "r");
  CHECK(osk_summary_op_quantile(s, q, 0.5, &v) == 0);
  CHECK_NEAR(v, 32.5, 1e-9);
  CHECK(osk_summary_op_quantile(s, q, 0.99, &v) == 0);
  CHECK_NEAR(v, 1 + 0.99 * 63, 1e-9);
  CHECK(osk_summary_op_quantile(s, q, 0, &v) == 0 && v == 1);
  CHECK(osk_summary_op_quantile(s, q, 1, &v) == 0 && v == 64);
  CHECK(osk_summary_op_quantile(s, r, 0.5, &v) == 0);
  CHECK_NEAR(v, 1499.5, 1499.5 * 0.008);
  CHECK(osk_summary_op_quantile(s, r, 0.99, &v) == 0);
  CHECK_NEAR(v, 1000 + 0.99 * 999, 1989 * 0.008);
  CHECK(osk_summary_op_quantile(s, r, 1, &v) == 0 && v == 1999);
  CHECK(osk_summary_op_quantile(s, r, 1.5, &v) == OSK_ERANGE);
  CHECK(osk_summary_op_quantile(s, 99, 0.5, &v) == OSK_ERANGE);
  /* Each q starts with an r and is nested in it (the longer is the parent). */
  CHECK(op(s, "r")->self_ns == op(s, "r")->total_ns - 64 * 65 / 2);
  CHECK(op(s, "r")->descendants == 64 && osk_summary_stats(s)->passes == 2);
  osk_summary_free(s);
  free(t);

  /* Precision over a wide range: values 1 ns .. ~1 s, log spaced. */
  osk_summary_t *w;
  CHECK(osk_summary_new(&w, NULL) == 0);
  int64_t vals[4000];
  for (int i = 0; i < 4000; i++) {
    vals[i] = (int64_t)(1.0 * pow(1e9, i / 3999.0));
    osk_reader_event_t ev;
    memset(&ev, 0, sizeof ev);
    ev.ph = (osk_str_t){"X", 1};
    ev.name = (osk_str_t){"w", 1};
    ev.ts_ns = (int64_t)i * 2000000000;
    ev.dur_ns = vals[i];
    ev.has = OSK_READER_EV_NAME | OSK_READER_EV_TS | OSK_READER_EV_DUR;
    CHECK(osk_summary_add(w, &ev) == 0);
  }
  CHECK(osk_summary_finish(w) == 0);
  for (double qq = 0.01; qq < 1; qq += 0.07) {
    double exact, approx;
    double d[4000];
    for (int i = 0; i < 4000; i++) d[i] = (double)vals[i];
    CHECK(osk_quantile(d, 4000, qq, &exact) == 0);
    CHECK(osk_summary_op_quantile(w, 0, qq, &approx) == 0);
    /* Neighbouring order statistics differ by ~0.5% here, so interpolation
     * between bucket midpoints adds to the bucket error. */
    CHECK_NEAR(approx, exact, exact * 0.013 + 1);
  }
  osk_summary_free(w);
}

static void test_category_filter(void) {
  const char *t =
      "{\"traceEvents\":["
      "{\"ph\":\"X\",\"cat\":\"python_function\",\"name\":\"f\",\"pid\":1,\"tid\":1,\"ts\":0,\"dur\":10},"
      "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"aten::add\",\"pid\":1,\"tid\":1,\"ts\":1,\"dur\":2},"
      "{\"ph\":\"B\",\"cat\":\"other\",\"name\":\"g\",\"pid\":1,\"tid\":1,\"ts\":1},"
      "{\"ph\":\"E\",\"pid\":1,\"tid\":1,\"ts\":3}"
      "]}";
  const char *cats[] = {"cpu_op", "user_annotation"};
  osk_summary_t *s = summarize(t, cats, 2, 0);
  CHECK(osk_summary_op_count(s) == 1);
  CHECK(op(s, "aten::add")->calls == 1);
  CHECK(osk_summary_stats(s)->filtered_events == 2);
  CHECK(osk_summary_stats(s)->unmatched_end == 0);
  osk_summary_free(s);
  /* Excluding a category keeps every other one, listed or not. */
  const char *ex[] = {"python_function"};
  osk_summary_opts_t o = {NULL, 0, ex, 1};
  CHECK(osk_summary_from_mem(t, strlen(t), 0, &o, NULL, &s, NULL, NULL) == 0);
  CHECK(osk_summary_op_count(s) == 2 && op(s, "g")->calls == 1);
  CHECK(osk_summary_stats(s)->filtered_events == 1);
  osk_summary_free(s);
  /* An include list and an exclusion combine. */
  o = (osk_summary_opts_t){cats, 2, cats, 1};
  CHECK(osk_summary_from_mem(t, strlen(t), 0, &o, NULL, &s, NULL, NULL) == 0);
  CHECK(osk_summary_op_count(s) == 0 && osk_summary_stats(s)->filtered_events == 3);
  osk_summary_free(s);
}

static void test_truncated_and_invalid(void) {
  const char *t = "{\"traceEvents\":[" X("outer", "0", "10") "," X("mid", "1", "3") ",{\"ph\":\"X\",\"na";
  osk_summary_t *s = summarize(t, NULL, 0, OSK_ETRUNCATED);
  CHECK(op(s, "outer")->self_ns == 7000 && op(s, "mid")->calls == 1);
  osk_summary_free(s);
  s = summarize("{\"traceEvents\":[" X("a", "0", "1") ",{]}", NULL, 0, OSK_EFORMAT);
  CHECK(op(s, "a")->calls == 1);
  osk_summary_free(s);
  osk_summary_t *none = (osk_summary_t *)1;
  osk_error_t err;
  CHECK(osk_summary_from_path("/nonexistent/trace.json", NULL, NULL, &none, NULL, &err) == OSK_EIO);
  CHECK(none == NULL);
}

static void test_huge_durations_saturate(void) {
  /* Durations near INT64_MAX ns: sums saturate rather than overflow (UBSan
   * would report an overflow). */
  const char *t = "[{\"ph\":\"X\",\"name\":\"h\",\"ts\":0,\"dur\":9e15},"
                  "{\"ph\":\"X\",\"name\":\"h\",\"ts\":0,\"dur\":9e15},"
                  "{\"ph\":\"X\",\"name\":\"h\",\"ts\":1,\"dur\":9e15},"
                  "{\"ph\":\"B\",\"name\":\"b\",\"ts\":-9e15},{\"ph\":\"B\",\"name\":\"c\",\"ts\":-9e15},"
                  "{\"ph\":\"E\",\"ts\":9e15},{\"ph\":\"B\",\"name\":\"c\",\"ts\":-9e15},"
                  "{\"ph\":\"E\",\"ts\":9e15},{\"ph\":\"E\",\"ts\":9e15},"
                  "{\"ph\":\"B\",\"name\":\"d\",\"ts\":0},{\"ph\":\"B\",\"name\":\"e\",\"ts\":0},"
                  "{\"ph\":\"E\",\"ts\":9e15},{\"ph\":\"B\",\"name\":\"e\",\"ts\":0},"
                  "{\"ph\":\"E\",\"ts\":9e15},{\"ph\":\"E\",\"ts\":9e15}]";
  osk_summary_t *s = summarize(t, NULL, 0, 0);
  CHECK(op(s, "h")->calls == 3 && op(s, "h")->total_ns == INT64_MAX);
  /* b and c span 18e18 ns, more than int64 holds: unusable, and counted. */
  CHECK(op(s, "c")->calls == 0 && op(s, "b")->calls == 0);
  CHECK(osk_summary_stats(s)->unusable_events == 3);
  /* e twice inside d, 9e18 ns each: the child sum saturates, d's self is 0. */
  CHECK(op(s, "e")->total_ns == INT64_MAX && op(s, "d")->self_ns == 0);
  osk_summary_free(s);
}

/* A trace of n calls of "a" with durations base, base + step, ... (us),
 * and one "b" of each kind; malloc'd text. */
static char *calls_trace(int n, int base, int step) {
  size_t cap = 128 + (size_t)n * 96;
  char *t = malloc(cap);
  CHECK(t);
  size_t len = (size_t)snprintf(t, cap, "{\"traceEvents\": [");
  for (int i = 0; i < n; i++)
    len += (size_t)snprintf(t + len, cap - len,
                            "%s{\"ph\":\"X\",\"name\":\"a\",\"pid\":1,\"tid\":1,\"ts\":%d,\"dur\":%d}",
                            i ? "," : "", i * 100000, base + step * i);
  snprintf(t + len, cap - len, ",{\"ph\":\"X\",\"name\":\"b\",\"pid\":1,\"tid\":2,\"ts\":1,\"dur\":%d}]}",
           base);
  return t;
}

/* Merged summaries give what one summary of all the events gives: calls,
 * totals, min, max, and quantiles (exact lists and histograms alike). */
static void test_merge(void) {
  const int sizes[][2] = {{10, 20}, {10, 200}, {200, 300}, {1, 500}};
  for (size_t c = 0; c < sizeof sizes / sizeof *sizes; c++) {
    char *ta = calls_trace(sizes[c][0], 3, 7), *tb = calls_trace(sizes[c][1], 1000, 11);
    osk_summary_t *a, *b, *m, *all;
    CHECK(osk_summary_from_mem(ta, strlen(ta), 0, NULL, NULL, &a, NULL, NULL) == 0);
    CHECK(osk_summary_from_mem(tb, strlen(tb), 0, NULL, NULL, &b, NULL, NULL) == 0);
    CHECK(osk_summary_new(&m, NULL) == 0);
    CHECK(osk_summary_merge(m, a) == 0 && osk_summary_merge(m, b) == 0);
    /* One summary of both: the second trace's events on another thread. */
    CHECK(osk_summary_new(&all, NULL) == 0);
    osk_reader_t *r;
    CHECK(osk_reader_open_mem(&r, ta, strlen(ta), 0, NULL, NULL) == 0);
    CHECK(osk_reader_run(r, osk_summary_add, all, NULL) == 0);
    osk_reader_free(r);
    for (char *p = tb; (p = strstr(p, "\"tid\":")); p += 6) p[6] = p[6] == '1' ? '3' : '4';
    CHECK(osk_reader_open_mem(&r, tb, strlen(tb), 0, NULL, NULL) == 0);
    CHECK(osk_reader_run(r, osk_summary_add, all, NULL) == 0);
    osk_reader_free(r);
    CHECK(osk_summary_finish(all) == 0);
    CHECK(osk_summary_op_count(m) == osk_summary_op_count(all));
    for (size_t i = 0; i < osk_summary_op_count(all); i++) {
      const osk_summary_op_t *x = osk_summary_op(all, i), *y = osk_summary_op(m, i);
      CHECK(x->name.len == y->name.len && memcmp(x->name.ptr, y->name.ptr, x->name.len) == 0);
      CHECK(x->calls == y->calls && x->total_ns == y->total_ns && x->self_ns == y->self_ns);
      CHECK(x->min_ns == y->min_ns && x->max_ns == y->max_ns);
      for (double q = 0; q <= 1.0; q += 0.125) {
        double qx, qy;
        CHECK(osk_summary_op_quantile(all, i, q, &qx) == 0 && osk_summary_op_quantile(m, i, q, &qy) == 0);
        CHECK_NEAR(qy, qx, 1e-9 + 0.008 * qx);
      }
    }
    CHECK(osk_summary_stats(m)->complete_events == osk_summary_stats(all)->complete_events);
    /* A summary that holds events of its own does not take merges. */
    CHECK(osk_summary_merge(all, a) == OSK_EINVAL);
    osk_summary_free(a);
    osk_summary_free(b);
    osk_summary_free(m);
    osk_summary_free(all);
    free(ta);
    free(tb);
  }
}

/* The one usable-event rule every pass applies before osk__nest_push. */
static void test_usable(void) {
  osk_reader_event_t ev = {.has = OSK__EV_COMPLETE, .ts_ns = 5, .dur_ns = 0};
  CHECK(osk__event_usable(&ev, OSK__EV_COMPLETE)); /* zero duration is usable */
  ev.dur_ns = -1;
  CHECK(!osk__event_usable(&ev, OSK__EV_COMPLETE));
  CHECK(osk__event_usable(&ev, OSK_READER_EV_TS)); /* no duration needed */
  ev.dur_ns = INT64_MAX - 5;
  CHECK(osk__event_usable(&ev, OSK__EV_COMPLETE)); /* ends exactly at INT64_MAX */
  ev.dur_ns = INT64_MAX - 4;
  CHECK(!osk__event_usable(&ev, OSK__EV_COMPLETE)); /* end overflows */
  ev.dur_ns = 1;
  ev.has = OSK_READER_EV_TS | OSK_READER_EV_DUR;
  CHECK(!osk__event_usable(&ev, OSK__EV_COMPLETE)); /* no name */
  ev.has = OSK__EV_COMPLETE | OSK_READER_EV_BAD;
  CHECK(!osk__event_usable(&ev, OSK__EV_COMPLETE));
}

int main(void) {
  test_usable();
  test_nesting();
  test_equal_starts_and_overlaps();
  test_same_name_only_child();
  test_threads_and_metadata();
  test_begin_end();
  test_quantiles();
  test_category_filter();
  test_truncated_and_invalid();
  test_huge_durations_saturate();
  test_merge();
  puts("reader summary: ok");
  return 0;
}
