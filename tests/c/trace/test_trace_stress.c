/* Many producers, one concurrent collector: every event arrives exactly
 * once and intact. Run under ThreadSanitizer (suite 'tsan').
 *
 * Each thread nests three operators whose names encode the thread's index
 * and the depth, so a torn or misattributed event shows up as a name that
 * does not match its thread id or depth.
 *
 * With the argument "spill", the memory budget is one chunk: the producers
 * append full chunks to the spill file (in $TMPDIR, a fresh mkdtemp
 * directory here) while the collector takes the spilled ranges, and every
 * event must still arrive exactly once. */
#include "opskew_trace.h"
#include "testutil.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

enum { THREADS = 6, ITERS = 40000 }; /* 3 events each: 720000 events */

static uint32_t g_tid[THREADS];
static atomic_int g_done;

static void *producer(void *arg) {
  int idx = (int)(intptr_t)arg;
  g_tid[idx] = (uint32_t)syscall(SYS_gettid);
  char buf[3][32];
  osk_trace_name_t *n[3];
  for (int d = 0; d < 3; d++) {
    snprintf(buf[d], sizeof buf[d], "t%d/d%d", idx, d);
    n[d] = osk_trace_name(buf[d]);
    CHECK(n[d]);
  }
  for (int i = 0; i < ITERS; i++) {
    osk_trace_begin(osk_trace_name(buf[0]), 0); /* the lookup path, too */
    osk_trace_begin(n[1], 0);
    osk_trace_begin(n[2], 0);
    osk_trace_end();
    osk_trace_end();
    osk_trace_end();
  }
  atomic_fetch_add(&g_done, 1);
  return NULL;
}

typedef struct {
  osk_trace_snapshot_t *snaps[4096];
  size_t n;
} collected_t;

static void check_snapshot(osk_trace_snapshot_t *s, size_t *per_thread) {
  size_t n = osk_trace_snapshot_events(s);
  osk_trace_event_t *ev = malloc((n ? n : 1) * sizeof *ev);
  CHECK(ev && osk_trace_snapshot_copy(s, 0, n, ev) == n);
  for (size_t i = 0; i < n; i++) {
    int idx = -1;
    for (int k = 0; k < THREADS; k++)
      if (g_tid[k] == ev[i].tid) idx = k;
    CHECK(idx >= 0);
    char expect[32];
    snprintf(expect, sizeof expect, "t%d/d%d", idx, (int)ev[i].depth);
    CHECK(strcmp(osk_trace_snapshot_name(s, ev[i].name), expect) == 0);
    CHECK(ev[i].dur_ns >= 0);
    per_thread[idx]++;
  }
  free(ev);
}

int main(int argc, char **argv) {
  int spill = argc > 1 && strcmp(argv[1], "spill") == 0;
  char dir[] = "/tmp/opskew_test_stress_XXXXXX";
  if (spill) {
    CHECK(mkdtemp(dir));
    setenv("TMPDIR", dir, 1);
    /* One chunk (4096 events of 24 bytes and its header) fits, two do not. */
    CHECK(osk_trace_set_budget(4096 * 24 + 64) == 0);
  } else {
    CHECK(osk_trace_set_budget(0) == 0);
  }
  CHECK(osk_trace_start(NULL) == 0);
  pthread_t th[THREADS];
  for (int i = 0; i < THREADS; i++) CHECK(pthread_create(&th[i], NULL, producer, (void *)(intptr_t)i) == 0);
  /* Collect concurrently while the producers run and exit. */
  static collected_t c;
  while (atomic_load(&g_done) < THREADS && c.n < 4000) {
    int err = 0;
    osk_trace_snapshot_t *s = NULL;
    err = osk_trace_collect("stress", &s);
    CHECK(s && err == 0);
    c.snaps[c.n++] = s;
    usleep(200);
  }
  for (int i = 0; i < THREADS; i++) CHECK(pthread_join(th[i], NULL) == 0);
  CHECK(osk_trace_stop("stress", &c.snaps[c.n++]) == 0);
  CHECK(c.snaps[c.n - 1]);

  size_t per_thread[THREADS] = {0}, total = 0, spilled = 0;
  for (size_t i = 0; i < c.n; i++) {
    spilled += osk_trace_snapshot_spilled(c.snaps[i]);
    CHECK(osk_trace_snapshot_lost_total(c.snaps[i]) == 0);
    CHECK(osk_trace_snapshot_unmatched_ends(c.snaps[i]) == 0);
    check_snapshot(c.snaps[i], per_thread);
    total += osk_trace_snapshot_events(c.snaps[i]);
    osk_trace_snapshot_free(c.snaps[i]);
  }
  for (int i = 0; i < THREADS; i++) CHECK(per_thread[i] == 3u * ITERS);
  CHECK(total == (size_t)THREADS * 3u * ITERS);
  CHECK(spill ? spilled > 0 : spilled == 0);
  if (spill) CHECK(rmdir(dir) == 0); /* the spill file was unlinked when opened */
  printf("ok: stress, %zu events in %zu snapshots, %zu spilled\n", total, c.n, spilled);
  return 0;
}
