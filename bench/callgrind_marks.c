/* callgrind_marks.c: callgrind client requests for bench/bench_tracer_ir.py.
 * Compiled by that script into a temporary folder (it needs valgrind's
 * headers); natively every request is a no-op. Not part of opskew. */
#include <valgrind/callgrind.h>

void osk_bench_start(void);
void osk_bench_toggle(void);
void osk_bench_dump(const char *label);

/* Turns instrumentation on (the run starts with it off: importing torch
 * under full instrumentation takes minutes). */
void osk_bench_start(void) { CALLGRIND_START_INSTRUMENTATION; }

/* Starts or stops counting (the run starts with counting off). */
void osk_bench_toggle(void) { CALLGRIND_TOGGLE_COLLECT; }

/* Writes what was counted since the last dump, under `label`. */
void osk_bench_dump(const char *label) { CALLGRIND_DUMP_STATS_AT(label); }
