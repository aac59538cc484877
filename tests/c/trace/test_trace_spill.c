/* The memory budget and the time order of the written trace.
 *
 * - A budget of one chunk, several threads of nested operators: most events
 *   go through the spill file, none is lost, the counts are exact, and the
 *   trace written from the spilled snapshot is byte for byte the one written
 *   from the same events held in memory (the snapshot is copied into memory
 *   through the tracer's internal reader, osk__seg_events).
 * - Every thread's events are in the file in time order: start ascending, at
 *   equal starts the longer first, at equal intervals the shallower first
 *   (the parent), checked on the recording and on a hand-built snapshot with
 *   equal timestamps, zero durations and deep nesting.
 * - A spill file that cannot be created or written loses events under the
 *   "spill" cause, counted exactly, never a crash.
 * - OPSKEW_TRACE_BUDGET_MB: accepted and refused values.
 *
 * The spill file goes to $TMPDIR, set here to a fresh mkdtemp directory,
 * which must be empty at the end (the file is unlinked as soon as it is
 * open). */
#include "opskew_trace.h"
#include "trace_internal.h"
#include "testutil.h"
#include "json_check.h"

#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

enum { THREADS = 4, ITERS = 3000 };
/* Per iteration: a depth-0 operator holding a chain of four and a leaf
 * sibling: 6 events, depths 0..4. */
enum { PER_ITER = 6 };
static const int64_t ONE_CHUNK = (int64_t)(sizeof(osk__chunk_t) + OSK__CHUNK_EVENTS * sizeof(osk__event_t));


static void *producer(void *arg) {
  (void)arg;
  osk_trace_name_t *n[5];
  char buf[32];
  for (int d = 0; d < 5; d++) {
    snprintf(buf, sizeof buf, "op::d%d", d);
    n[d] = osk_trace_name(buf);
  }
  osk_trace_name_t *leaf = osk_trace_name("op::leaf");
  for (int i = 0; i < ITERS; i++) {
    for (int d = 0; d < 5; d++) osk_trace_begin(n[d], 0);
    for (int d = 0; d < 4; d++) osk_trace_end();
    osk_trace_begin(leaf, 0);
    osk_trace_end();
    osk_trace_end();
  }
  return NULL;
}

static void *short_lived(void *arg) {
  (void)arg;
  osk_trace_name_t *n = osk_trace_name("op::short");
  for (int i = 0; i < 1000; i++) {
    osk_trace_begin(n, 0);
    osk_trace_end();
  }
  return NULL; /* its partial chunk is handed off at exit */
}

/* Threads that exit with a partial chunk each: past the budget, those
 * chunks are spilled too, so many short threads stay within it. */
static void test_short_threads(void) {
  enum { SHORT = 40 };
  CHECK(osk_trace_set_budget(ONE_CHUNK) == 0);
  CHECK(osk_trace_start(NULL) == 0);
  for (int i = 0; i < SHORT; i++) {
    pthread_t th;
    CHECK(pthread_create(&th, NULL, short_lived, NULL) == 0);
    CHECK(pthread_join(th, NULL) == 0);
  }
  osk_trace_snapshot_t *s = NULL;
  CHECK(osk_trace_stop("short", &s) == 0 && s);
  CHECK(osk_trace_snapshot_events(s) == SHORT * 1000u && osk_trace_snapshot_lost_total(s) == 0);
  size_t in_mem = 0;
  for (size_t i = 0; i < s->nsegs; i++) in_mem += s->segs[i].chunk != NULL;
  CHECK(in_mem == 1); /* the one chunk the budget holds */
  CHECK(osk_trace_snapshot_spilled(s) == (SHORT - 1) * 1000u);
  osk_trace_snapshot_free(s);
}

static osk_trace_snapshot_t *record(int64_t budget) {
  CHECK(osk_trace_set_budget(budget) == 0);
  CHECK(osk_trace_start(NULL) == 0);
  pthread_t th[THREADS];
  for (int i = 0; i < THREADS; i++) CHECK(pthread_create(&th[i], NULL, producer, NULL) == 0);
  for (int i = 0; i < THREADS; i++) CHECK(pthread_join(th[i], NULL) == 0);
  osk_trace_snapshot_t *s = NULL;
  CHECK(osk_trace_stop("spill", &s) == 0 && s);
  return s;
}

/* The same snapshot with every range in memory: what the writer would have
 * been given without a budget. */
static osk_trace_snapshot_t *in_memory(const osk_trace_snapshot_t *s) {
  osk_trace_snapshot_t *m = malloc(sizeof *m);
  CHECK(m);
  *m = *s;
  m->segs = calloc(s->nsegs + 1, sizeof *m->segs);
  m->owned = calloc(s->nsegs + 1, sizeof *m->owned);
  m->names = calloc(s->n_names, sizeof *m->names);
  m->cats = calloc(s->n_cats, sizeof *m->cats);
  m->threads = calloc(s->n_threads + 1, sizeof *m->threads);
  CHECK(m->segs && m->owned && m->names && m->cats && m->threads);
  memcpy(m->names, s->names, s->n_names * sizeof *m->names);
  memcpy(m->cats, s->cats, s->n_cats * sizeof *m->cats);
  memcpy(m->threads, s->threads, s->n_threads * sizeof *m->threads);
  m->nowned = 0;
  osk__event_t *buf = malloc(OSK__CHUNK_EVENTS * sizeof *buf);
  CHECK(buf);
  for (size_t i = 0; i < s->nsegs; i++) {
    const osk__seg_t *g = &s->segs[i];
    uint32_t n = g->end - g->begin;
    const osk__event_t *ev = osk__seg_events(g, buf);
    CHECK(ev);
    osk__chunk_t *c = malloc(sizeof *c + (size_t)n * sizeof *ev);
    CHECK(c);
    memcpy(c->ev, ev, (size_t)n * sizeof *ev);
    c->tid = g->tid;
    c->seq = g->seq;
    c->cap = n;
    m->owned[m->nowned++] = c;
    m->segs[i] = (osk__seg_t){.chunk = c, .seq = g->seq, .min_t0 = g->min_t0, .tid = g->tid, .begin = 0, .end = n};
  }
  free(buf);
  return m;
}

/* strstr without the sanitizers' interceptor, which measures the whole
 * rest of the text at every call (quadratic over a trace). */
static const char *find(const char *p, const char *needle) {
  size_t n = strlen(needle);
  for (; *p; p++)
    if (*p == needle[0] && strncmp(p, needle, n) == 0) return p;
  return NULL;
}

/* Checks that each thread's "X" events are in time order (start ascending;
 * an event that starts with the one before it and is deeper is not longer:
 * the parent first) and returns their number. */
static size_t check_time_order(const char *text) {
  size_t n = 0;
  struct {
    unsigned long tid;
    double ts, dur;
    int depth;
  } last = {0, -1, 0, 0};
  for (const char *p = text; (p = find(p, "{\"ph\":\"X\"")) != NULL; p++, n++) {
    const char *t = find(p, "\"tid\":");
    CHECK(t);
    unsigned long tid = strtoul(t + 6, NULL, 10);
    const char *q = find(t, "\"ts\":");
    double ts = strtod(q + 5, NULL);
    q = find(q, "\"dur\":");
    double dur = strtod(q + 6, NULL);
    q = find(q, "\"depth\":");
    int depth = atoi(q + 8);
    if (tid == last.tid) {
      CHECK(ts >= last.ts);
      if (ts == last.ts && depth > last.depth) CHECK(dur <= last.dur);
      if (ts == last.ts && dur == last.dur && depth != last.depth) CHECK(depth > last.depth);
    }
    last.tid = tid;
    last.ts = ts;
    last.dur = dur;
    last.depth = depth;
  }
  return n;
}

static size_t count(const char *hay, const char *needle) {
  size_t n = 0;
  for (const char *p = hay; (p = find(p, needle)) != NULL; p += strlen(needle)) n++;
  return n;
}

/* A hand-built snapshot on the nanosecond clock (ticks are ns): given
 * events in end order, as threads store them. */
static osk_trace_snapshot_t *handmade(const osk__event_t *ev, size_t n, const uint32_t *tids) {
  osk_trace_snapshot_t *s = calloc(1, sizeof *s);
  CHECK(s);
  s->clock = *osk_clock_get();
  s->clock.kind = OSK_CLOCK_MONOTONIC_RAW;
  s->clock.ns_per_tick = 1.0;
  snprintf(s->instrument, sizeof s->instrument, "hand");
  s->pid = 1;
  s->segs = calloc(n, sizeof *s->segs);
  s->owned = calloc(n, sizeof *s->owned);
  s->threads = calloc(1, sizeof *s->threads);
  s->n_names = 3;
  s->names = calloc(3, sizeof *s->names);
  s->n_cats = 1;
  s->cats = calloc(1, sizeof *s->cats);
  CHECK(s->segs && s->owned && s->threads && s->names && s->cats);
  s->names[1] = osk_trace_name("hand::a");
  s->names[2] = osk_trace_name("hand::b");
  s->cats[0] = "cpu_op";
  s->start_tick = 1000;
  s->stop_tick = 1000000;
  /* One chunk per run of a thread's events (chunks of one event each
   * would do as well: the writer's grouping crosses ranges). */
  for (size_t i = 0; i < n;) {
    size_t j = i;
    while (j < n && tids[j] == tids[i]) j++;
    osk__chunk_t *c = malloc(sizeof *c + (j - i) * sizeof *ev);
    CHECK(c);
    memcpy(c->ev, ev + i, (j - i) * sizeof *ev);
    c->tid = tids[i];
    c->seq = i;
    c->cap = (uint32_t)(j - i);
    s->owned[s->nowned++] = c;
    uint64_t min_t0 = UINT64_MAX;
    for (size_t k = i; k < j; k++)
      if (ev[k].t0 < min_t0) min_t0 = ev[k].t0;
    s->segs[s->nsegs++] = (osk__seg_t){.chunk = c, .seq = i, .min_t0 = min_t0, .tid = tids[i], .begin = 0,
                                       .end = (uint32_t)(j - i)};
    s->n_events += j - i;
    i = j;
  }
  return s;
}

static void test_handmade_order(const char *path) {
  /* Thread 7, in end order: a tree whose root A [100, 200] holds B [100,
   * 200] (equal interval, depth 1) holding C [100, 150] (equal start) and
   * D [150, 150] (zero duration at C's end), then E [150, 190] holding a
   * chain F..I of depth 3..6 at [160, 170]; then a lone top-level J [200,
   * 200] starting where A ends, and K [200, 260]; thread 9: children whose
   * parent was never recorded (depth 1 without a depth 0), then a root. */
  osk__event_t ev[] = {
      {100, 150, 1, 2, 0}, /* C */
      {150, 150, 2, 2, 0}, /* D */
      {160, 170, 1, 6, 0}, /* I */
      {160, 170, 1, 5, 0}, /* H */
      {160, 170, 2, 4, 0}, /* G */
      {160, 170, 1, 3, 0}, /* F */
      {150, 190, 2, 2, 0}, /* E */
      {100, 200, 2, 1, 0}, /* B */
      {100, 200, 1, 0, 0}, /* A */
      {200, 200, 1, 0, 0}, /* J */
      {200, 260, 2, 0, 0}, /* K */
      {310, 320, 1, 1, 0}, /* orphans of thread 9 */
      {300, 330, 2, 1, 0},
      {340, 350, 1, 0, 0},
  };
  uint32_t tids[] = {7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 9, 9, 9};
  size_t n = sizeof ev / sizeof ev[0];
  osk_trace_snapshot_t *s = handmade(ev, n, tids);
  CHECK(osk_trace_write_chrome(s, path) == 0);
  char *text = osk_test_slurp(path, NULL);
  CHECK(json_valid(text));
  CHECK(check_time_order(text) == n);
  /* The exact order of thread 7: A B C E D F G H I J K (D starts at 150,
   * at E's start but shorter; J, a zero-duration top-level operator, ended
   * before K began, at the same tick: it is written first, as a sibling,
   * which a reader nests the same way). C, 0.100 + 0.050, reads in float64
   * as 0.15000000000000002, past E's begin at 0.150: it is written 1 ns
   * shorter, which reads before it (docs/outputs.md, "Read as float64"). */
  const char *want[] = {"\"ts\":0.100,\"dur\":0.100,\"args\":{\"depth\":0}",
                        "\"ts\":0.100,\"dur\":0.100,\"args\":{\"depth\":1}",
                        "\"ts\":0.100,\"dur\":0.049,\"args\":{\"depth\":2}",
                        "\"ts\":0.150,\"dur\":0.040,\"args\":{\"depth\":2}",
                        "\"ts\":0.150,\"dur\":0.000,\"args\":{\"depth\":2}",
                        "\"ts\":0.160,\"dur\":0.010,\"args\":{\"depth\":3}",
                        "\"ts\":0.160,\"dur\":0.010,\"args\":{\"depth\":4}",
                        "\"ts\":0.160,\"dur\":0.010,\"args\":{\"depth\":5}",
                        "\"ts\":0.160,\"dur\":0.010,\"args\":{\"depth\":6}",
                        "\"ts\":0.200,\"dur\":0.000,\"args\":{\"depth\":0}",
                        "\"ts\":0.200,\"dur\":0.060,\"args\":{\"depth\":0}",
                        "\"ts\":0.300,\"dur\":0.030,\"args\":{\"depth\":1}",
                        "\"ts\":0.310,\"dur\":0.010,\"args\":{\"depth\":1}",
                        "\"ts\":0.340,\"dur\":0.010,\"args\":{\"depth\":0}"};
  const char *p = text;
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    const char *q = strstr(p, want[i]);
    if (!q) fprintf(stderr, "missing or out of order: %s\n%s\n", want[i], text);
    CHECK(q);
    p = q + 1;
  }
  free(text);
  osk_trace_snapshot_free(s);
}

static void test_budget_env(void) {
  int64_t b = -7;
  unsetenv("OPSKEW_TRACE_BUDGET_MB");
  CHECK(osk_trace_budget_from_env(&b) == 0 && b == (int64_t)OSK_TRACE_BUDGET_DEFAULT_MB << 20);
  setenv("OPSKEW_TRACE_BUDGET_MB", "", 1);
  CHECK(osk_trace_budget_from_env(&b) == 0 && b == (int64_t)OSK_TRACE_BUDGET_DEFAULT_MB << 20);
  setenv("OPSKEW_TRACE_BUDGET_MB", "0", 1);
  CHECK(osk_trace_budget_from_env(&b) == 0 && b == 0);
  setenv("OPSKEW_TRACE_BUDGET_MB", "12", 1);
  CHECK(osk_trace_budget_from_env(&b) == 0 && b == (int64_t)12 << 20);
  const char *bad[] = {"abc", "-1", "1.5", "12MB", " 1", "1e3", "99999999999999999999999"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    setenv("OPSKEW_TRACE_BUDGET_MB", bad[i], 1);
    CHECK(osk_trace_budget_from_env(&b) == OSK_EINVAL);
  }
  /* An invalid value refuses the start (with a line on stderr), unless the
   * budget was set through the API. */
  setenv("OPSKEW_TRACE_BUDGET_MB", "lots", 1);
  CHECK(osk_trace_set_budget(OSK_TRACE_BUDGET_ENV) == 0);
  CHECK(osk_trace_start(NULL) == OSK_EINVAL && !osk_trace_active());
  CHECK(osk_trace_set_budget(-2) == OSK_EINVAL);
  CHECK(osk_trace_set_budget(0) == 0);
  CHECK(osk_trace_start(NULL) == 0);
  osk_trace_snapshot_t *s = NULL;
  CHECK(osk_trace_stop("env", &s) == 0 && s && osk_trace_snapshot_budget(s) == 0);
  osk_trace_snapshot_free(s);
  setenv("OPSKEW_TRACE_BUDGET_MB", "3", 1);
  CHECK(osk_trace_set_budget(OSK_TRACE_BUDGET_ENV) == 0);
  CHECK(osk_trace_start(NULL) == 0);
  CHECK(osk_trace_stop("env", &s) == 0 && s && osk_trace_snapshot_budget(s) == (int64_t)3 << 20);
  osk_trace_snapshot_free(s);
  unsetenv("OPSKEW_TRACE_BUDGET_MB");
}

static void test_spill_failures(const char *dir) {
  const size_t total = (size_t)THREADS * ITERS * PER_ITER;
  /* The spill file cannot be created: what passes the budget is lost. */
  char missing[4200];
  snprintf(missing, sizeof missing, "%s/no-such-dir", dir);
  setenv("TMPDIR", missing, 1);
  osk_trace_snapshot_t *s = record(ONE_CHUNK);
  uint64_t lost = osk_trace_snapshot_lost(s, OSK_TRACE_LOSS_SPILL);
  CHECK(lost > 0 && osk_trace_snapshot_spilled(s) == 0);
  CHECK(osk_trace_snapshot_events(s) + lost == total);
  CHECK(osk_trace_snapshot_lost_total(s) == lost);
  osk_trace_snapshot_free(s);

  /* The disk fills up (a file size limit: writes past it fail with EFBIG):
   * what was spilled before stays, the rest is lost, exactly. */
  setenv("TMPDIR", dir, 1);
  struct rlimit old, lim;
  CHECK(getrlimit(RLIMIT_FSIZE, &old) == 0);
  lim = old;
  lim.rlim_cur = 3 * OSK__CHUNK_EVENTS * sizeof(osk__event_t) + 100;
  signal(SIGXFSZ, SIG_IGN);
  CHECK(setrlimit(RLIMIT_FSIZE, &lim) == 0);
  s = record(ONE_CHUNK);
  CHECK(setrlimit(RLIMIT_FSIZE, &old) == 0);
  lost = osk_trace_snapshot_lost(s, OSK_TRACE_LOSS_SPILL);
  CHECK(lost > 0);
  CHECK(osk_trace_snapshot_spilled(s) == 3u * OSK__CHUNK_EVENTS);
  CHECK(osk_trace_snapshot_events(s) + lost == total);
  /* What was spilled reads back. */
  size_t n = osk_trace_snapshot_events(s);
  osk_trace_event_t *ev = malloc(n * sizeof *ev);
  CHECK(ev && osk_trace_snapshot_copy(s, 0, n, ev) == n);
  free(ev);
  osk_trace_snapshot_free(s);
}

/* A forked child never spills (it never writes the parent's trace): past
 * the budget its events are counted lost under `spill`, none spilled. */
static void test_fork_child_does_not_spill(void) {
  CHECK(osk_trace_set_budget(ONE_CHUNK) == 0);
  CHECK(osk_trace_start(NULL) == 0);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    osk_trace_name_t *n = osk_trace_name("op::child");
    for (int i = 0; i < 4 * (int)OSK__CHUNK_EVENTS; i++) {
      osk_trace_begin(n, 0);
      osk_trace_end();
    }
    osk_trace_snapshot_t *s = NULL;
    int ok = osk_trace_stop("child", &s) == 0 && s && osk_trace_snapshot_spilled(s) == 0 &&
             osk_trace_snapshot_lost(s, OSK_TRACE_LOSS_SPILL) > 0 &&
             osk_trace_snapshot_events(s) + osk_trace_snapshot_lost(s, OSK_TRACE_LOSS_SPILL) ==
                 4u * OSK__CHUNK_EVENTS;
    _exit(ok ? 0 : 1);
  }
  int status = 0;
  CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
  osk_trace_snapshot_t *s = NULL;
  CHECK(osk_trace_stop("parent", &s) == 0 && s);
  osk_trace_snapshot_free(s);
}

int main(void) {
  char dir[] = "/tmp/opskew_test_spill_XXXXXX";
  CHECK(mkdtemp(dir));
  setenv("TMPDIR", dir, 1);
  char path[4200];
  snprintf(path, sizeof path, "%s/trace.json", dir);

  test_budget_env();
  test_handmade_order(path);
  test_fork_child_does_not_spill();

  /* Without a budget nothing spills; with one of one chunk most events do. */
  const size_t total = (size_t)THREADS * ITERS * PER_ITER;
  osk_trace_snapshot_t *s0 = record(0);
  CHECK(osk_trace_snapshot_events(s0) == total && osk_trace_snapshot_spilled(s0) == 0);
  CHECK(osk_trace_snapshot_lost_total(s0) == 0);
  CHECK(osk_trace_write_chrome(s0, path) == 0);
  char *text0 = osk_test_slurp(path, NULL);
  CHECK(strstr(text0, "\"spill\":{\"events\":0,\"bytes\":0,\"budget_bytes\":0}"));
  CHECK(check_time_order(text0) == total);
  free(text0);
  osk_trace_snapshot_free(s0);

  osk_trace_snapshot_t *s = record(ONE_CHUNK);
  CHECK(osk_trace_snapshot_events(s) == total);
  CHECK(osk_trace_snapshot_lost_total(s) == 0 && osk_trace_snapshot_lost(s, OSK_TRACE_LOSS_SPILL) == 0);
  CHECK(osk_trace_snapshot_unmatched_ends(s) == 0 && osk_trace_snapshot_open_at_stop(s) == 0);
  CHECK(osk_trace_snapshot_threads(s) == THREADS);
  /* Exact: every event is either spilled or in memory, and memory held at
   * most one full chunk past the threads' current ones. */
  uint64_t spilled = osk_trace_snapshot_spilled(s), in_mem = 0, full_in_mem = 0;
  for (size_t i = 0; i < s->nsegs; i++) {
    if (s->segs[i].chunk) {
      in_mem += s->segs[i].end - s->segs[i].begin;
      full_in_mem += s->segs[i].end - s->segs[i].begin == OSK__CHUNK_EVENTS;
    }
  }
  CHECK(spilled > 0);
  CHECK(spilled + in_mem == total);
  CHECK(full_in_mem <= 1 + THREADS);
  CHECK(osk_trace_snapshot_budget(s) == ONE_CHUNK);

  size_t len1, len2;
  CHECK(osk_trace_write_chrome(s, path) == 0);
  char *text1 = osk_test_slurp(path, &len1);
  osk_trace_snapshot_t *m = in_memory(s);
  CHECK(osk_trace_write_chrome(m, path) == 0);
  char *text2 = osk_test_slurp(path, &len2);
  CHECK(len1 == len2 && memcmp(text1, text2, len1) == 0);
  CHECK(json_valid(text1));
  CHECK(check_time_order(text1) == total);
  char expect[128];
  snprintf(expect, sizeof expect, "\"spill\":{\"events\":%llu,\"bytes\":%llu,\"budget_bytes\":%lld}",
           (unsigned long long)spilled, (unsigned long long)spilled * 24, (long long)ONE_CHUNK);
  CHECK(strstr(text1, expect));
  CHECK(count(text1, "\"name\":\"op::leaf\"") == (size_t)THREADS * ITERS);
  CHECK(count(text1, "\"name\":\"op::d4\"") == (size_t)THREADS * ITERS);

  /* The summary and the copies read the spilled events back: the same as
   * from memory. */
  osk_trace_summary_t *a = NULL, *b = NULL;
  CHECK(osk_trace_summarize(s, NULL, &a) == 0 && osk_trace_summarize(m, NULL, &b) == 0);
  char *ja = osk_trace_summary_json(a), *jb = osk_trace_summary_json(b);
  CHECK(ja && jb && strcmp(ja, jb) == 0);
  CHECK(strstr(ja, expect));
  char *ta = osk_trace_summary_table(a, 0);
  CHECK(ta && strstr(ta, "went through the spill file"));
  osk_trace_free(ta);
  osk_trace_free(ja);
  osk_trace_free(jb);
  osk_trace_summary_free(a);
  osk_trace_summary_free(b);
  osk_trace_event_t *ea = malloc(total * sizeof *ea), *eb = malloc(total * sizeof *eb);
  CHECK(ea && eb);
  CHECK(osk_trace_snapshot_copy(s, 0, total, ea) == total && osk_trace_snapshot_copy(m, 0, total, eb) == total);
  CHECK(memcmp(ea, eb, total * sizeof *ea) == 0);
  /* Paging from the middle of a spilled range. */
  CHECK(osk_trace_snapshot_copy(s, 5000, 10, ea) == 10 && memcmp(ea, eb + 5000, 10 * sizeof *ea) == 0);
  int64_t *ts = malloc(total * sizeof *ts);
  CHECK(ts && osk_trace_snapshot_columns(s, ts, NULL, NULL, NULL, NULL) == total);
  for (size_t i = 0; i < total; i++) CHECK(ts[i] == eb[i].ts_ns);
  free(ts);
  free(ea);
  free(eb);
  free(text1);
  free(text2);
  osk_trace_snapshot_free(m);
  osk_trace_snapshot_free(s);

  test_spill_failures(dir);
  test_short_threads();

  /* Nothing left behind: the spill files were unlinked when opened. */
  unlink(path);
  DIR *d = opendir(dir);
  CHECK(d);
  struct dirent *de;
  while ((de = readdir(d)) != NULL) CHECK(!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."));
  closedir(d);
  CHECK(rmdir(dir) == 0);
  printf("ok: spill (%llu of %zu events spilled)\n", (unsigned long long)spilled, total);
  return 0;
}
