/* Tracer buffers: events survive chunk hand-off and thread exit, each event
 * is collected exactly once, nesting depth is recorded, and whatever cannot
 * be recorded is counted by cause. */
#include "opskew_trace.h"
#include "testutil.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static osk_trace_event_t *all_events(osk_trace_snapshot_t *s, size_t *n) {
  *n = osk_trace_snapshot_events(s);
  osk_trace_event_t *ev = malloc((*n ? *n : 1) * sizeof *ev);
  CHECK(ev);
  CHECK(osk_trace_snapshot_copy(s, 0, *n, ev) == *n);
  return ev;
}

static void *worker(void *arg) {
  osk_trace_name_t *leaf = osk_trace_name("worker::leaf");
  int n = *(int *)arg;
  for (int i = 0; i < n; i++) {
    osk_trace_begin(leaf, 0);
    osk_trace_end();
  }
  return NULL; /* exits before the snapshot: its chunks must survive */
}

int main(void) {
  osk_trace_name_t *outer = osk_trace_name("test::outer");
  osk_trace_name_t *inner = osk_trace_name("test::inner");
  CHECK(outer && inner && outer != inner);

  /* Nothing is recorded outside a session. */
  osk_trace_begin(outer, 0);
  osk_trace_end();
  CHECK(!osk_trace_active());
  int err = 0;
  osk_trace_snapshot_t *none = NULL;
  CHECK(osk_trace_stop("t", &none) == OSK_EINVAL && none == NULL);

  /* An operator open across start is not recorded, its end pairs up. */
  osk_trace_begin(outer, 0);
  CHECK(osk_trace_start(NULL) == 0);
  CHECK(osk_trace_start(NULL) == OSK_EINVAL);
  CHECK(osk_trace_active());
  osk_trace_end();

  /* 10000 outer operators with one inner each: 20000 events, 5 chunks. */
  const int N = 10000;
  for (int i = 0; i < N; i++) {
    osk_trace_begin(outer, 0);
    osk_trace_begin(inner, 0);
    osk_trace_end();
    osk_trace_end();
  }
  /* A worker thread that exits before the snapshot. */
  int wn = 5000;
  pthread_t th;
  CHECK(pthread_create(&th, NULL, worker, &wn) == 0);
  CHECK(pthread_join(th, NULL) == 0);

  /* One end too many. */
  osk_trace_end();

  /* The tracer does not record itself. */
  int g = osk_trace_guard_enter();
  osk_trace_begin(outer, 0);
  osk_trace_end();
  osk_trace_guard_leave(g);

  /* A partial collect in the middle takes events exactly once. */
  osk_trace_snapshot_t *mid = NULL;
  err = osk_trace_collect("t", &mid);
  CHECK(mid && err == 0);
  size_t nmid = osk_trace_snapshot_events(mid);
  CHECK(nmid == (size_t)(2 * N + wn));
  for (int i = 0; i < 100; i++) {
    osk_trace_begin(inner, 0);
    osk_trace_end();
  }
  osk_trace_snapshot_t *s = NULL;
  err = osk_trace_stop("test", &s);
  CHECK(s && err == 0 && !osk_trace_active());
  CHECK(osk_trace_snapshot_events(s) == 100);
  CHECK(osk_trace_snapshot_unmatched_ends(mid) == 1);
  CHECK(osk_trace_snapshot_lost_total(mid) == 0);
  CHECK(osk_trace_snapshot_lost_total(s) == 0);

  size_t n;
  osk_trace_event_t *ev = all_events(mid, &n);
  size_t n_outer = 0, n_inner = 0, n_leaf = 0;
  uint32_t main_tid = 0;
  for (size_t i = 0; i < n; i++) {
    const char *name = osk_trace_snapshot_name(mid, ev[i].name);
    CHECK(ev[i].dur_ns >= 0);
    CHECK(strcmp(osk_trace_snapshot_category(mid, ev[i].category), "cpu_op") == 0);
    if (strcmp(name, "test::outer") == 0) {
      n_outer++;
      CHECK(ev[i].depth == 0);
      /* Its inner ended just before it, inside it. */
      CHECK(i > 0 && ev[i - 1].depth == 1 && ev[i - 1].tid == ev[i].tid);
      CHECK(ev[i - 1].ts_ns >= ev[i].ts_ns);
      CHECK(ev[i - 1].ts_ns + ev[i - 1].dur_ns <= ev[i].ts_ns + ev[i].dur_ns);
      main_tid = ev[i].tid;
    } else if (strcmp(name, "test::inner") == 0) {
      n_inner++;
      CHECK(ev[i].depth == 1);
    } else if (strcmp(name, "worker::leaf") == 0) {
      n_leaf++;
      CHECK(ev[i].depth == 0);
    } else {
      CHECK(0 && "unexpected name");
    }
  }
  CHECK(n_outer == (size_t)N && n_inner == (size_t)N && n_leaf == (size_t)wn);
  /* Grouped by thread; within a thread in end order (ts of depth-0 events
   * increasing). */
  int64_t last = -1;
  for (size_t i = 0; i < n; i++) {
    if (ev[i].tid != main_tid || ev[i].depth != 0) continue;
    CHECK(ev[i].ts_ns >= last);
    last = ev[i].ts_ns;
  }
  /* Columns agree with the struct copy. */
  int64_t *ts = malloc(n * sizeof *ts);
  uint16_t *dp = malloc(n * sizeof *dp);
  CHECK(ts && dp);
  CHECK(osk_trace_snapshot_columns(mid, ts, NULL, NULL, NULL, dp) == n);
  for (size_t i = 0; i < n; i++) CHECK(ts[i] == ev[i].ts_ns && dp[i] == ev[i].depth);
  free(ts);
  free(dp);
  free(ev);
  osk_trace_snapshot_free(mid);
  osk_trace_snapshot_free(s);

  /* Nesting deeper than the stack: the excess is counted, not recorded,
   * and the ends still pair up. */
  CHECK(osk_trace_start(NULL) == 0);
  const int DEEP = 300;
  for (int i = 0; i < DEEP; i++) osk_trace_begin(inner, 0);
  for (int i = 0; i < DEEP; i++) osk_trace_end();
  osk_trace_begin(outer, 0); /* open at stop */
  err = osk_trace_stop("test", &s);
  CHECK(s);
  size_t recorded = osk_trace_snapshot_events(s);
  uint64_t lost = osk_trace_snapshot_lost(s, OSK_TRACE_LOSS_DEPTH);
  CHECK(lost > 0);
  CHECK(recorded + lost == (size_t)DEEP);
  CHECK(osk_trace_snapshot_lost_total(s) == lost);
  CHECK(osk_trace_snapshot_unmatched_ends(s) == 0);
  CHECK(osk_trace_snapshot_open_at_stop(s) == 1);
  osk_trace_snapshot_free(s);
  osk_trace_end();

  /* Calibration runs into a private buffer: nothing reaches a session. */
  CHECK(osk_trace_start(NULL) == 0);
  osk_trace_calib_t cal;
  CHECK(osk_trace_calibrate(NULL, NULL, &cal) == 0);
  CHECK(cal.valid && cal.w_ns > 0 && cal.delta_ns >= 0 && cal.delta_ns <= cal.w_ns * 50);
  err = osk_trace_stop("test", &s);
  CHECK(s && osk_trace_snapshot_events(s) == 0);
  osk_trace_snapshot_free(s);

  /* The calibration given at start travels with the snapshot. */
  CHECK(osk_trace_start(&cal) == 0);
  err = osk_trace_stop("test", &s);
  CHECK(s && osk_trace_snapshot_calib(s)->valid && osk_trace_snapshot_calib(s)->w_ns == cal.w_ns);
  osk_trace_snapshot_free(s);
  printf("ok: buffers (W %.1f ns, delta %.1f ns)\n", cal.w_ns, cal.delta_ns);
  return 0;
}
