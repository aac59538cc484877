/* The native collector through the two entry points opskew's C++ shim calls
 * (osk_native_begin(name), osk_native_end()), reached the way the shim
 * reaches them: by address, from dlopen+dlsym, with no link to the library.
 * Several threads, nested operators, a reused name buffer (RecordFunction
 * user scopes), calls outside a session, and the calibration the life cycle
 * measures through the same entry points. */
#include "collector_testutil.h"

typedef void (*begin_t)(const char *);
typedef void (*end_t)(void);

static begin_t g_begin;
static end_t g_end;

/* An operator's schema name is a stable pointer; a user scope's is a reused
 * buffer, interned by content. */
static void route_begin(void *ctx, const char *op, int i, char *buf, size_t cap) {
  (void)ctx;
  (void)i;
  if (!strcmp(op, "aten::linear")) {
    g_begin(op);
    return;
  }
  snprintf(buf, cap, "%s", op);
  g_begin(buf);
}

static void route_end(void *ctx) {
  (void)ctx;
  g_end();
}

int main(int argc, char **argv) {
  CHECK(argc == 2);
  collector_t c = collector_open(argv[1]);
  *(void **)&g_begin = collector_sym(&c, "osk_native_begin");
  *(void **)&g_end = collector_sym(&c, "osk_native_end");
  void (*attached)(void);
  *(void **)&attached = collector_sym(&c, "osk_native_attached");
  CHECK(strcmp(c.instrument(), "native") == 0);
  CHECK(c.bound() == 0);
  attached();
  CHECK(c.bound() == 1);

  g_begin("aten::before"); /* outside a session: not recorded */
  g_end();

  CHECK(c.start() == 0);
  const worker_route_t route = {route_begin, route_end, NULL};
  workers_run(&route, 1);
  g_begin(NULL); /* RecordFunction never passes NULL, but it must not crash */
  g_end();
  g_end(); /* unmatched: counted, not recorded */

  osk_trace_snapshot_t *s;
  size_t n;
  osk_trace_event_t *ev = collector_stop(&c, &s, &n);
  CHECK(n == WORKER_EVENTS + 1);
  CHECK(c.unmatched(s) == 1 && c.lost(s) == 0);
  const osk_trace_calib_t *cal = c.calib(s);
  CHECK(cal && cal->valid && cal->w_ns > 0 && cal->delta_ns >= 0);
  size_t ops[3] = {0}, unnamed = 0; /* linear, add, mul */
  for (size_t i = 0; i < n; i++) {
    const char *nm = c.name(s, ev[i].name);
    CHECK(strcmp(c.category(s, ev[i].category), "cpu_op") == 0);
    if (worker_event(ev, i, n, nm, ops)) continue;
    if (strcmp(nm, "<unnamed>")) fprintf(stderr, "unexpected name %s\n", nm);
    CHECK(!strcmp(nm, "<unnamed>"));
    unnamed++;
  }
  workers_check(ops);
  CHECK(unnamed == 1);
  free(ev);
  c.free(s);
  printf("ok: native\n");
  return 0;
}
