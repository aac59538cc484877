/* collector.c: the life cycle every collector shares
 * (include/opskew_collector.h): the calibration measured once per process, a
 * session started and stopped from Python, and the `opskew record` session
 * that the collector starts by itself and writes at exit. Written once, so that the ITT and NVTX collectors and
 * the pyhook extension behave the same, fork check included; see
 * docs/design.md, "Layers".
 *
 * Fork. A child forked while a session records inherits the session (its
 * copy of the buffers keeps filling) and our atexit handler. The trace
 * belongs to the process that started the session: only that pid writes it,
 * so a child that exits (multiprocessing with fork, a subprocess helper)
 * never replaces the parent's trace with its own partial copy.
 */
#include "opskew_collector.h"
#include "trace_internal.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ------------------------------------------------------------ calibration */

static pthread_mutex_t g_calib_lock = PTHREAD_MUTEX_INITIALIZER;
static osk_trace_calib_t g_calib; /* written under g_calib_lock, before g_calib_done */
static _Atomic int g_calib_done;

int osk__collector_calibrate(void *ctx) {
  if (atomic_load_explicit(&g_calib_done, memory_order_acquire)) return 0; /* C, matches D */
  int rc = 0;
  osk__fork_lock(OSK__FORK_CALIB, &g_calib_lock);
  pthread_mutex_lock(&g_calib_lock);
  if (!atomic_load_explicit(&g_calib_done, memory_order_relaxed)) {
    /* osk_trace_calibrate swaps in a scratch thread state, so the pairs run
     * the collector's full path but never reach a trace. */
    osk_trace_calib_t c;
    rc = osk_trace_calibrate(osk__collector.pair, ctx, &c);
    if (rc == 0) {
      g_calib = c;
      atomic_store_explicit(&g_calib_done, 1, memory_order_release); /* D: publishes g_calib */
    }
  }
  pthread_mutex_unlock(&g_calib_lock);
  return rc;
}

/* What a session starts with: the measurement, or none (the trace then says
 * the calibration is missing rather than carry zeros). */
static const osk_trace_calib_t *session_calib(void) {
  if (!osk__collector.pair_needs_ctx) (void)osk__collector_calibrate(NULL);
  return atomic_load_explicit(&g_calib_done, memory_order_acquire) ? &g_calib : NULL; /* E, matches D */
}

/* ----------------------------------------------------------------- hosts */

static _Atomic int g_bound;   /* hosts that bound us */
static _Atomic int g_refused; /* hosts whose ABI we did not know */

void osk__collector_bound(int ok) { atomic_fetch_add(ok ? &g_bound : &g_refused, 1); }

/* ------------------------------------------------ the `opskew record` session */

static pthread_mutex_t g_launch_lock = PTHREAD_MUTEX_INITIALIZER;
static int g_owner_pid;      /* the process that started it; 0: none */
static int g_atexit_done;
static int g_autostart_done;
static _Atomic int g_finished;

static void at_exit(void) { (void)osk_collector_finish(); }

/* g_launch_lock, registered for fork (trace_internal.h) before each use. */
static void launch_lock(void) {
  osk__fork_lock(OSK__FORK_LAUNCH, &g_launch_lock);
  pthread_mutex_lock(&g_launch_lock);
}

int osk_collector_record_begin(void) {
  int pid = (int)getpid();
  /* Children inherit the environment; only the process the launcher meant
   * writes the trace. */
  const char *want = getenv("OPSKEW_TRACE_PID");
  if (want && *want && atoi(want) != pid) return OSK_EINVAL;
  launch_lock();
  int rc = OSK_EINVAL; /* already recording */
  if (g_owner_pid != pid) rc = osk_trace_start(session_calib());
  if (rc == 0) {
    g_owner_pid = pid;
    atomic_store(&g_finished, 0); /* a forked child's own session, after the parent's */
    if (!g_atexit_done) {
      g_atexit_done = 1;
      atexit(at_exit);
    }
  }
  pthread_mutex_unlock(&g_launch_lock);
  return rc;
}

void osk__collector_autostart(void) {
  launch_lock();
  int first = !g_autostart_done;
  g_autostart_done = 1;
  pthread_mutex_unlock(&g_launch_lock);
  if (!first) return;
  const char *out = getenv("OPSKEW_TRACE_OUT");
  const char *aut = getenv("OPSKEW_TRACE_AUTOSTART");
  if (!out || !*out || (aut && strcmp(aut, "0") == 0)) return;
  (void)osk_collector_record_begin();
}

int osk_collector_finish(void) {
  launch_lock();
  int ours = g_owner_pid != 0 && g_owner_pid == (int)getpid();
  pthread_mutex_unlock(&g_launch_lock);
  if (!ours) return OSK_COLLECTOR_NOT_OURS; /* never started here, or a forked child */
  int expected = 0;
  if (!atomic_compare_exchange_strong(&g_finished, &expected, 1)) return OSK_COLLECTOR_NOT_OURS;
  osk_trace_snapshot_t *s = NULL;
  int err = osk_trace_stop(osk__collector.instrument, &s);
  if (!s) {
    fprintf(stderr, "opskew: no trace written: %s\n", osk_strerror(err));
    return err ? err : OSK_EINVAL;
  }
  int rc = osk_trace_write_outputs_env(s);
  osk_trace_snapshot_free(s);
  return rc;
}

/* ------------------------------------------------- the exported surface */

const char *osk_collector_instrument(void) { return osk__collector.instrument; }

int osk_collector_bound(void) {
  int n = atomic_load(&g_bound);
  return n ? n : (atomic_load(&g_refused) ? -1 : 0);
}

int osk_collector_start(void) { return osk_trace_start(session_calib()); }

int osk_collector_stop(osk_trace_snapshot_t **out) { return osk_trace_stop(osk__collector.instrument, out); }
