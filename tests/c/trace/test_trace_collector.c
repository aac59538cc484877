/* The shared collector life cycle (csrc/trace/collector.c) with a collector
 * of the test's own: calibration through its pair function, sessions, the
 * `opskew record` session written at exit, and the fork checks (a child
 * forked while the session records must not write the parent's trace, and
 * one forked while another thread takes the tracer's locks finds them free). */
#include "opskew_collector.h"
#include "testutil.h"
#include "trace_internal.h" /* the snapshot's instrument */

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static int g_pairs;

static void pair(void *ctx) {
  (void)ctx;
  g_pairs++;
  osk_trace_begin(osk_trace_name("test::pair"), 0);
  osk_trace_end();
}

const osk__collector_desc_t osk__collector = {.instrument = "test", .pair = pair};

/* A thread that keeps taking the tracer's locks (a new name, an unknown
 * category, the launch lock) while the main thread forks: each child takes
 * them again and must not find one held by a thread it does not have. */
static _Atomic int g_stop;

static void *lock_taker(void *arg) {
  (void)arg;
  char s[64];
  for (unsigned i = 0; !atomic_load(&g_stop); i++) {
    snprintf(s, sizeof s, "test::busy_%u", i);
    (void)osk_trace_name(s);
    (void)osk_trace_category(s); /* past the category limit: the lock, every time */
    osk__collector_autostart();
  }
  return NULL;
}

static void fork_while_locked(void) {
  pthread_t th;
  CHECK(pthread_create(&th, NULL, lock_taker, NULL) == 0);
  for (int k = 0; k < 200; k++) {
    fflush(NULL);
    pid_t child = fork();
    CHECK(child >= 0);
    if (child == 0) {
      char s[64];
      snprintf(s, sizeof s, "test::child_%d", k);
      (void)osk_trace_name(s);
      (void)osk_trace_category(s);
      osk__collector_autostart();
      _exit(0);
    }
    int status = 0, waited = 0;
    pid_t got = 0;
    while ((got = waitpid(child, &status, WNOHANG)) == 0 && waited < 10000) {
      usleep(1000);
      waited++;
    }
    if (got == 0) {
      kill(child, SIGKILL);
      waitpid(child, &status, 0);
    }
    CHECK(got == child && WIFEXITED(status) && WEXITSTATUS(status) == 0); /* no child hung */
  }
  atomic_store(&g_stop, 1);
  CHECK(pthread_join(th, NULL) == 0);
}

static void record_ops(int n) {
  const osk_trace_name_t *op = osk_trace_name("test::op");
  for (int i = 0; i < n; i++) {
    osk_trace_begin(op, 0);
    osk_trace_end();
  }
}

static int exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0;
}

int main(void) {
  CHECK(!strcmp(osk_collector_instrument(), "test"));

  /* Hosts: none yet; a refusal alone reads -1; a success wins. */
  CHECK(osk_collector_bound() == 0);
  osk__collector_bound(0);
  CHECK(osk_collector_bound() == -1);
  osk__collector_bound(1);
  CHECK(osk_collector_bound() == 1);

  /* A session from a binding: calibrated once, through the pair. */
  CHECK(osk_collector_start() == 0);
  CHECK(g_pairs > 0);
  int pairs = g_pairs;
  CHECK(osk_collector_start() == OSK_EINVAL); /* sessions do not nest */
  record_ops(3);
  osk_trace_snapshot_t *s = NULL;
  CHECK(osk_collector_stop(&s) == 0 && s);
  CHECK(osk_trace_snapshot_events(s) == 3); /* the calibration pairs are not in it */
  CHECK(!strcmp(s->instrument, "test"));
  CHECK(osk_trace_snapshot_calib(s)->valid && osk_trace_snapshot_calib(s)->w_ns > 0);
  CHECK(osk_trace_snapshot_threads(s) == 1);
  osk_trace_snapshot_free(s);
  CHECK(osk_collector_stop(&s) == OSK_EINVAL && s == NULL);
  CHECK(osk_collector_start() == 0 && g_pairs == pairs); /* measured once per process */
  CHECK(osk_collector_stop(&s) == 0);
  osk_trace_snapshot_free(s);

  /* Nothing of ours to write before a record session. */
  CHECK(osk_collector_finish() == OSK_COLLECTOR_NOT_OURS);

  /* OPSKEW_TRACE_PID names the one process that records. */
  char pid[32], dir[] = "/tmp/opskew-collector-XXXXXX", out[96];
  CHECK(mkdtemp(dir));
  snprintf(out, sizeof out, "%s/t.json", dir);
  snprintf(pid, sizeof pid, "%d", (int)getpid() + 1);
  setenv("OPSKEW_TRACE_PID", pid, 1);
  setenv("OPSKEW_TRACE_OUT", out, 1);
  CHECK(osk_collector_record_begin() == OSK_EINVAL && !osk_trace_active());
  snprintf(pid, sizeof pid, "%d", (int)getpid());
  setenv("OPSKEW_TRACE_PID", pid, 1);

  /* Autostart is refused with OPSKEW_TRACE_AUTOSTART=0 and done once. */
  setenv("OPSKEW_TRACE_AUTOSTART", "0", 1);
  osk__collector_autostart();
  CHECK(!osk_trace_active());
  CHECK(osk_collector_record_begin() == 0);
  CHECK(osk_collector_record_begin() == OSK_EINVAL); /* already recording */
  record_ops(5);

  /* A forked child inherits the session and our atexit handler, but the
   * trace is the parent's: finish says "not ours", and exiting (which runs
   * the handler) writes nothing either. */
  fflush(NULL);
  pid_t child = fork();
  CHECK(child >= 0);
  if (child == 0) {
    record_ops(7);
    if (osk_collector_finish() != OSK_COLLECTOR_NOT_OURS || exists(out)) _exit(3);
    exit(0); /* runs the atexit handler */
  }
  int status = 0;
  CHECK(waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  CHECK(!exists(out));

  /* The parent writes it, once. */
  CHECK(osk_collector_finish() == 0);
  CHECK(exists(out) && !osk_trace_active());
  CHECK(osk_collector_finish() == OSK_COLLECTOR_NOT_OURS);
  FILE *f = fopen(out, "r");
  CHECK(f);
  char head[4096];
  size_t n = fread(head, 1, sizeof head - 1, f);
  head[n] = '\0';
  fclose(f);
  CHECK(strstr(head, "\"instrument\":\"test\""));
  CHECK(strstr(head, "\"events\":5"));
  unlink(out);
  rmdir(dir);
  fork_while_locked();
  printf("ok: collector life cycle\n");
  return 0;
}
