/*
 * opskew_collector.h: the collector interface, the trace layer's side for
 * the hosts of the tracer (C11, no Python.h).
 *
 * A collector is a shared object that hosts the tracer runtime: the ITT,
 * NVTX and native collectors (csrc/trace/{itt,nvtx,native}_collector.c),
 * the pyhook extension (csrc/ext/pyhook.c), a test's own. Each links the
 * one life cycle (calibrate, start, stop, the session it starts by itself
 * for `opskew record`, and finish: csrc/trace/collector.c, the meson
 * dependency collector_dep) and defines the one descriptor below, with what
 * is its own: the instrument's name and the pair function that calibration
 * times. Everything else a collector keeps is its host's ABI (ITT's api
 * list, NVTX's injection table, Python's profile hook) and its name handles.
 *
 * Nothing here is exported: the symbols stay inside each shared object
 * (hidden), hence their osk__ prefix. What a collector exports, the same in
 * every one so that Python declares it once, is osk_collector_* in
 * opskew_trace.h; see docs/design.md, "Headers".
 */
#ifndef OPSKEW_COLLECTOR_H
#define OPSKEW_COLLECTOR_H

#include "opskew_trace.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define OSK__COLLECTOR_HIDDEN __attribute__((visibility("hidden")))
#else
#define OSK__COLLECTOR_HIDDEN
#endif

typedef struct {
  /* Names the snapshots this collector's sessions produce ("itt", "nvtx",
   * "pyhook"); at most 31 bytes. */
  const char *instrument;
  /* One begin+end pair through the collector's own entry points. */
  osk_trace_pair_fn pair;
  /* 1 when `pair` needs a context only the host can give (pyhook: a torch
   * builtin, called with the GIL held). Such a collector is calibrated by an
   * explicit osk__collector_calibrate(ctx) before its sessions start; a
   * session then uses what was measured, or none. Otherwise start measures
   * once per process, with a NULL context. */
  int pair_needs_ctx;
} osk__collector_desc_t;

/* Defined by the collector: exactly one per shared object (or test). */
extern OSK__COLLECTOR_HIDDEN const osk__collector_desc_t osk__collector;

/* Measures the calibration once per process with osk__collector.pair(ctx).
 * Returns 0 (also when already measured) or OSK_ENOMEM, after which a later
 * call tries again. */
OSK__COLLECTOR_HIDDEN int osk__collector_calibrate(void *ctx);

/* A host bound the collector (ok = 1: an ITT global, an NVTX instance, the
 * pyhook module) or offered an ABI we refused (ok = 0). */
OSK__COLLECTOR_HIDDEN void osk__collector_bound(int ok);

/* With OPSKEW_TRACE_OUT set, starts the `opskew record` session the first
 * time it is called, unless OPSKEW_TRACE_AUTOSTART=0 (the record bootstrap
 * then starts it itself, after a probe operator, so that the probe is not in
 * the trace). Collectors that a host loads call it once bound. */
OSK__COLLECTOR_HIDDEN void osk__collector_autostart(void);

#ifdef __cplusplus
}
#endif
#endif /* OPSKEW_COLLECTOR_H */
