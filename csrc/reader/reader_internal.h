/* reader_internal.h: declarations shared inside the reader and with its
 * tests; not part of the public API (include/opskew_reader.h). */
#ifndef OPSKEW_READER_INTERNAL_H
#define OPSKEW_READER_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "opskew_reader.h"

/* Converts a validated JSON number of microseconds, s[0..e), to integer ns,
 * rounding to nearest (ties away from zero). Exact for up to 19 significant
 * digits, which covers every time a profiler writes. Returns 0, or -1 when
 * the result does not fit int64. */
int osk__us_text_to_ns(const char *s, const char *e, int64_t *out);

/* The one-call analyses (osk_summary_from_*, osk_audit_from_*) end the same
 * way. osk__fail: *err is code rc with its standard message (osk_strerror)
 * and no position; returns rc. osk__read_kept: whether a read that returned
 * rc still gives a result: it succeeded, or it stopped at a truncation or at
 * invalid JSON, keeping what came before. */
static inline int osk__fail(osk_error_t *err, int rc) {
  *err = (osk_error_t){rc, osk_strerror(rc), 0, 0};
  return rc;
}

static inline int osk__read_kept(int rc) {
  return !rc || rc == OSK_ETRUNCATED || rc == OSK_EFORMAT;
}

/* The one-call summary of a file (`path`) or of memory (`data`, `len`),
 * which also hands every event of the first pass to `tap` after the
 * summary has it (the job summary, job.c, collects its steps and
 * collectives so, in the same read). Return codes and *out as
 * osk_summary_from_path. */
int osk__summary_tapped(const char *path, const void *data, size_t len,
                        const osk_summary_opts_t *opts, osk_reader_event_fn tap, void *tap_ctx,
                        osk_summary_t **out, osk_reader_stats_t *rstats, osk_error_t *err);

#endif
