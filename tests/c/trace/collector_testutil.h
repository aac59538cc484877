/* collector_testutil.h: a built collector as its host reaches it, for the
 * tests that dlopen one (test_trace_itt.c, test_trace_nvtx.c,
 * test_trace_native.c): the library opened with its exported surface (the
 * life cycle and the snapshot) found by address and its internals hidden,
 * a session's events copied out; and the workers of the native and NVTX
 * tests, which record the same operators from several threads, each
 * through its collector's own entry points, and the check of what they
 * recorded. */
#ifndef OPSKEW_TEST_COLLECTOR_TESTUTIL_H
#define OPSKEW_TEST_COLLECTOR_TESTUTIL_H

#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "opskew_trace.h"
#include "testutil.h"

typedef struct {
  void *lib;
  const char *(*instrument)(void);
  int (*bound)(void);
  int (*start)(void);
  int (*stop)(osk_trace_snapshot_t **);
  size_t (*events)(const osk_trace_snapshot_t *);
  size_t (*copy)(const osk_trace_snapshot_t *, size_t, size_t, osk_trace_event_t *);
  const char *(*name)(const osk_trace_snapshot_t *, uint32_t);
  const char *(*category)(const osk_trace_snapshot_t *, uint32_t);
  uint64_t (*unmatched)(const osk_trace_snapshot_t *);
  uint64_t (*lost)(const osk_trace_snapshot_t *);
  const osk_trace_calib_t *(*calib)(const osk_trace_snapshot_t *);
  void (*free)(osk_trace_snapshot_t *);
} collector_t;

/* A symbol the collector must export (store it with *(void **)&fn = ...). */
static inline void *collector_sym(const collector_t *c, const char *name) {
  void *p = dlsym(c->lib, name);
  if (!p) fprintf(stderr, "%s is not exported\n", name);
  CHECK(p);
  return p;
}

static inline collector_t collector_open(const char *path) {
  collector_t c;
  memset(&c, 0, sizeof c);
  c.lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!c.lib) fprintf(stderr, "%s\n", dlerror());
  CHECK(c.lib);
  *(void **)&c.instrument = collector_sym(&c, "osk_collector_instrument");
  *(void **)&c.bound = collector_sym(&c, "osk_collector_bound");
  *(void **)&c.start = collector_sym(&c, "osk_collector_start");
  *(void **)&c.stop = collector_sym(&c, "osk_collector_stop");
  *(void **)&c.events = collector_sym(&c, "osk_trace_snapshot_events");
  *(void **)&c.copy = collector_sym(&c, "osk_trace_snapshot_copy");
  *(void **)&c.name = collector_sym(&c, "osk_trace_snapshot_name");
  *(void **)&c.category = collector_sym(&c, "osk_trace_snapshot_category");
  *(void **)&c.unmatched = collector_sym(&c, "osk_trace_snapshot_unmatched_ends");
  *(void **)&c.lost = collector_sym(&c, "osk_trace_snapshot_lost_total");
  *(void **)&c.calib = collector_sym(&c, "osk_trace_snapshot_calib");
  *(void **)&c.free = collector_sym(&c, "osk_trace_snapshot_free");
  CHECK(dlsym(c.lib, "osk__sb_put") == NULL); /* internals stay hidden */
  return c;
}

/* Stops the session: its snapshot into *s (the caller frees it with
 * c->free), and its events, copied out (the caller frees them), *n of them. */
static inline osk_trace_event_t *collector_stop(const collector_t *c, osk_trace_snapshot_t **s,
                                                size_t *n) {
  *s = NULL;
  CHECK(c->stop(s) == 0 && *s);
  *n = c->events(*s);
  osk_trace_event_t *ev = (osk_trace_event_t *)calloc(*n ? *n : 1, sizeof *ev);
  CHECK(ev && c->copy(*s, 0, *n, ev) == *n);
  return ev;
}

/* ---------------------------------------------------------------- workers */

#define WORKER_THREADS 4
#define WORKER_ITERATIONS 20000

/* A collector's entry points as a worker calls them. begin opens an
 * operator named `op`, the worker's i-th of that name; it may format the
 * name into `buf` (`cap` bytes), which the worker overwrites once the
 * operator is open: nothing may keep pointing into it. */
typedef struct {
  void (*begin)(void *ctx, const char *op, int i, char *buf, size_t cap);
  void (*end)(void *ctx);
  void *ctx;
} worker_route_t;

/* WORKER_ITERATIONS times an "aten::linear" with one child, "aten::add" and
 * "aten::mul" in turn. */
static inline void *worker_main(void *arg) {
  const worker_route_t *r = (const worker_route_t *)arg;
  char buf[128];
  for (int i = 0; i < WORKER_ITERATIONS; i++) {
    r->begin(r->ctx, "aten::linear", i, buf, sizeof buf);
    r->begin(r->ctx, i % 2 ? "aten::add" : "aten::mul", i, buf, sizeof buf);
    memset(buf, 'x', 40);
    r->end(r->ctx);
    r->end(r->ctx);
  }
  return NULL;
}

/* Runs WORKER_THREADS workers at once, worker t through routes[t % n]. */
static inline void workers_run(const worker_route_t *routes, size_t n) {
  pthread_t th[WORKER_THREADS];
  for (size_t t = 0; t < WORKER_THREADS; t++)
    CHECK(pthread_create(&th[t], NULL, worker_main, (void *)&routes[t % n]) == 0);
  for (size_t t = 0; t < WORKER_THREADS; t++) pthread_join(th[t], NULL);
}

/* Event i (named nm) as the workers record it: "aten::linear" at depth 0,
 * with one child, "aten::add" or "aten::mul", which ends before its parent,
 * the thread's next event. Counts it in counts[0..2] (linear, add, mul) and
 * returns 1; returns 0 for any other name. */
static inline int worker_event(const osk_trace_event_t *ev, size_t i, size_t n, const char *nm,
                               size_t counts[3]) {
  if (!strcmp(nm, "aten::linear")) {
    counts[0]++;
    CHECK(ev[i].depth == 0);
    return 1;
  }
  if (strcmp(nm, "aten::add") && strcmp(nm, "aten::mul")) return 0;
  counts[nm[6] == 'a' ? 1 : 2]++;
  CHECK(ev[i].depth == 1);
  CHECK(i + 1 < n && ev[i + 1].tid == ev[i].tid && ev[i + 1].depth == 0);
  CHECK(ev[i].ts_ns >= ev[i + 1].ts_ns &&
        ev[i].ts_ns + ev[i].dur_ns <= ev[i + 1].ts_ns + ev[i + 1].dur_ns);
  return 1;
}

/* The workers' events (counted by worker_event), one operator pair each. */
#define WORKER_EVENTS ((size_t)WORKER_THREADS * WORKER_ITERATIONS * 2)

/* Every operator the workers recorded was counted, half adds, half muls. */
static inline void workers_check(const size_t counts[3]) {
  CHECK(counts[0] == (size_t)WORKER_THREADS * WORKER_ITERATIONS);
  CHECK(counts[1] == counts[0] / 2 && counts[2] == counts[1]);
}

#endif
