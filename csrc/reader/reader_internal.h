/* reader_internal.h: declarations shared inside the reader and with its
 * tests; not part of the public API (include/opskew_reader.h). */
#ifndef OPSKEW_READER_INTERNAL_H
#define OPSKEW_READER_INTERNAL_H

#include <stdint.h>

/* Converts a validated JSON number of microseconds, s[0..e), to integer ns,
 * rounding to nearest (ties away from zero). Exact for up to 19 significant
 * digits, which covers every time a profiler writes. Returns 0, or -1 when
 * the result does not fit int64. */
int osk__us_text_to_ns(const char *s, const char *e, int64_t *out);

#endif
