/* The native collector through the two entry points opskew's C++ shim calls
 * (osk_native_begin(name), osk_native_end()), reached the way the shim
 * reaches them: by address, from dlopen+dlsym, with no link to the library.
 * Several threads, nested operators, a reused name buffer (RecordFunction
 * user scopes), calls outside a session, and the calibration the life cycle
 * measures through the same entry points. */
#include "opskew_trace.h"
#include "testutil.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

typedef void (*begin_t)(const char *);
typedef void (*end_t)(void);

static begin_t g_begin;
static end_t g_end;

#define THREADS 4
#define PER_THREAD 20000

static void *worker(void *arg) {
  (void)arg;
  char scope[32];
  for (int i = 0; i < PER_THREAD; i++) {
    g_begin("aten::linear"); /* an operator's schema name: a stable pointer */
    snprintf(scope, sizeof scope, "%s", i % 2 ? "aten::add" : "aten::mul");
    g_begin(scope); /* a reused buffer: interned by content */
    memset(scope, 'x', 8);
    g_end();
    g_end();
  }
  return NULL;
}

int main(int argc, char **argv) {
  CHECK(argc == 2);
  void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!lib) fprintf(stderr, "%s\n", dlerror());
  CHECK(lib);
  *(void **)&g_begin = dlsym(lib, "osk_native_begin");
  *(void **)&g_end = dlsym(lib, "osk_native_end");
  void (*attached)(void);
  int (*bound)(void);
  int (*start)(void);
  int (*stop)(osk_trace_snapshot_t **);
  const char *(*instrument)(void);
  *(void **)&attached = dlsym(lib, "osk_native_attached");
  *(void **)&bound = dlsym(lib, "osk_collector_bound");
  *(void **)&start = dlsym(lib, "osk_collector_start");
  *(void **)&stop = dlsym(lib, "osk_collector_stop");
  *(void **)&instrument = dlsym(lib, "osk_collector_instrument");
  CHECK(g_begin && g_end && attached && bound && start && stop && instrument);
  CHECK(dlsym(lib, "osk__sb_put") == NULL); /* internals stay hidden */
  CHECK(strcmp(instrument(), "native") == 0);
  CHECK(bound() == 0);
  attached();
  CHECK(bound() == 1);

  g_begin("aten::before"); /* outside a session: not recorded */
  g_end();

  CHECK(start() == 0);
  pthread_t th[THREADS];
  for (int t = 0; t < THREADS; t++) CHECK(pthread_create(&th[t], NULL, worker, NULL) == 0);
  for (int t = 0; t < THREADS; t++) pthread_join(th[t], NULL);
  g_begin(NULL); /* RecordFunction never passes NULL, but it must not crash */
  g_end();
  g_end(); /* unmatched: counted, not recorded */

  osk_trace_snapshot_t *s = NULL;
  CHECK(stop(&s) == 0 && s);
  size_t (*n_events)(const osk_trace_snapshot_t *);
  size_t (*copy)(const osk_trace_snapshot_t *, size_t, size_t, osk_trace_event_t *);
  const char *(*name)(const osk_trace_snapshot_t *, uint32_t);
  uint64_t (*unmatched)(const osk_trace_snapshot_t *);
  uint64_t (*lost)(const osk_trace_snapshot_t *);
  const osk_trace_calib_t *(*calib)(const osk_trace_snapshot_t *);
  const char *(*category)(const osk_trace_snapshot_t *, uint32_t);
  *(void **)&category = dlsym(lib, "osk_trace_snapshot_category");
  CHECK(category);
  void (*snap_free)(osk_trace_snapshot_t *);
  *(void **)&n_events = dlsym(lib, "osk_trace_snapshot_events");
  *(void **)&copy = dlsym(lib, "osk_trace_snapshot_copy");
  *(void **)&name = dlsym(lib, "osk_trace_snapshot_name");
  *(void **)&unmatched = dlsym(lib, "osk_trace_snapshot_unmatched_ends");
  *(void **)&lost = dlsym(lib, "osk_trace_snapshot_lost_total");
  *(void **)&calib = dlsym(lib, "osk_trace_snapshot_calib");
  *(void **)&snap_free = dlsym(lib, "osk_trace_snapshot_free");
  CHECK(n_events && copy && name && unmatched && lost && calib && snap_free);

  size_t n = n_events(s);
  CHECK(n == (size_t)THREADS * PER_THREAD * 2 + 1);
  CHECK(unmatched(s) == 1 && lost(s) == 0);
  const osk_trace_calib_t *c = calib(s);
  CHECK(c && c->valid && c->w_ns > 0 && c->delta_ns >= 0);
  osk_trace_event_t *ev = calloc(n, sizeof *ev);
  CHECK(ev && copy(s, 0, n, ev) == n);
  size_t linear = 0, add = 0, mul = 0, unnamed = 0;
  for (size_t i = 0; i < n; i++) {
    const char *nm = name(s, ev[i].name);
    CHECK(strcmp(category(s, ev[i].category), "cpu_op") == 0);
    if (!strcmp(nm, "aten::linear")) {
      linear++;
      CHECK(ev[i].depth == 0);
    } else if (!strcmp(nm, "aten::add") || !strcmp(nm, "aten::mul")) {
      *(nm[6] == 'a' ? &add : &mul) += 1;
      CHECK(ev[i].depth == 1);
      CHECK(i + 1 < n && ev[i + 1].tid == ev[i].tid && ev[i + 1].depth == 0);
      CHECK(ev[i].ts_ns >= ev[i + 1].ts_ns &&
            ev[i].ts_ns + ev[i].dur_ns <= ev[i + 1].ts_ns + ev[i + 1].dur_ns);
    } else if (!strcmp(nm, "<unnamed>")) {
      unnamed++;
    } else {
      fprintf(stderr, "unexpected name %s\n", nm);
      CHECK(0);
    }
  }
  CHECK(linear == (size_t)THREADS * PER_THREAD);
  CHECK(add == (size_t)THREADS * PER_THREAD / 2 && mul == add && unnamed == 1);
  free(ev);
  snap_free(s);
  printf("ok: native\n");
  return 0;
}
