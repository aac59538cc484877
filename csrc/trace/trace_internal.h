/* trace_internal.h: structures shared by the tracer runtime, its writer and
 * its summary. Not installed; collectors use include/opskew_trace.h. */
#ifndef OPSKEW_TRACE_INTERNAL_H
#define OPSKEW_TRACE_INTERNAL_H

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "opskew.h"
#include "opskew_trace.h"
#include "tracecore.h"

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

#if defined(__GNUC__)
#define OSK__LIKELY(x) __builtin_expect(!!(x), 1)
#define OSK__UNLIKELY(x) __builtin_expect(!!(x), 0)
/* For the rare branches of the per-event hot path (a full chunk, a new
 * thread): kept out of line, so the hot path saves no registers for them. */
#define OSK__COLD __attribute__((noinline, cold))
#else
#define OSK__LIKELY(x) (x)
#define OSK__UNLIKELY(x) (x)
#define OSK__COLD
#endif
#define OSK__HIDDEN OSK__CORE_HIDDEN

/* Events per chunk: 4096 * 24 bytes = 96 KiB, so a spill (one mutex section)
 * happens once every 4096 operators of a thread. */
#define OSK__CHUNK_EVENTS 4096u
/* Open operators tracked per thread; deeper ones are counted as lost. */
#define OSK__STACK_DEPTH 256u
/* Direct-mapped per-thread cache of name pointers. */
#define OSK__NAME_CACHE 256u
#define OSK__MAX_CATEGORIES 256u

/* One complete operator, as the owning thread stores it: raw ticks. */
typedef struct {
  uint64_t t0;
  uint64_t t1;
  uint32_t name; /* global name id; 0 = unnamed */
  uint16_t depth;
  uint16_t cat;
} osk__event_t;

/* A block of events written by one thread. `count` is the only field the
 * owner changes after publication: it stores the event, then publishes the
 * new count with a release store (A, matches the acquire B in collect).
 * `consumed` belongs to the collector and is only touched under g_lock. */
typedef struct osk__chunk {
  struct osk__chunk *next;
  uint64_t seq;     /* global allocation order: orders a thread's chunks */
  uint32_t tid;
  uint32_t cap;
  uint32_t consumed;
  _Atomic uint32_t count;
  osk__event_t ev[];
} osk__chunk_t;

struct osk_trace_name {
  _Atomic(void *) slot;
  uint64_t hash;
  uint32_t id;
  uint32_t len;
  char str[];
};

typedef struct {
  uint32_t tid;
  char name[20];
} osk__thread_info_t;

/* The spill file of a session (runtime.c): full chunks past the memory
 * budget are appended to it as raw osk__event_t arrays. Created exclusively
 * (O_CREAT|O_EXCL|O_NOFOLLOW, 0600) in $TMPDIR and unlinked at once, so it
 * disappears with its last descriptor, even on SIGKILL. Reference counted:
 * the session holds one reference while it may append, and every spilled
 * segment (pending or in a snapshot) one more; pread() at fixed offsets, so
 * any threads may read it at once. */
typedef struct {
  int fd;
  _Atomic uint64_t refs;
  uint64_t size; /* bytes appended; under the runtime's g_lock */
} osk__spill_file_t;

OSK__HIDDEN void osk__spill_unref(osk__spill_file_t *f);

/* A range [begin, end) of events that a snapshot owns: in memory (`chunk`)
 * or in a spill file (`file`, at byte offset `off`, events 0..end-begin).
 * `min_t0` is the earliest begin tick in the range. */
typedef struct {
  osk__chunk_t *chunk;      /* NULL for a spilled range */
  osk__spill_file_t *file;  /* NULL for a range in memory */
  uint64_t off;
  uint64_t seq;             /* the chunk's allocation order */
  uint64_t min_t0;
  uint32_t tid;
  uint32_t begin;
  uint32_t end;
} osk__seg_t;

/* The events of a segment: in place for one in memory; a spilled one is
 * read into `buf` (room for OSK__CHUNK_EVENTS events). NULL if the read
 * failed (the caller reports OSK_EIO). */
OSK__HIDDEN const osk__event_t *osk__seg_events(const osk__seg_t *g, osk__event_t *buf);

struct osk_trace_snapshot {
  osk__seg_t *segs; /* sorted by (tid, seq): per thread, in end order */
  size_t nsegs;
  size_t n_events;
  osk__chunk_t **owned; /* chunks to free with the snapshot */
  size_t nowned;
  const osk_trace_name_t **names; /* by global name id; [0] = NULL */
  uint32_t n_names;
  const char **cats;
  uint32_t n_cats;
  osk__thread_info_t *threads;
  size_t n_threads;
  uint64_t lost[OSK_TRACE_LOSS_COUNT];
  uint64_t unmatched_ends;
  uint64_t open_at_stop;
  uint64_t spilled_events; /* events of the snapshot that went through the spill file */
  int64_t budget_bytes;    /* the session's memory budget; 0: never spills */
  osk_clock_t clock;
  osk_trace_calib_t calib;
  int64_t realtime_minus_mono_ns; /* to place events on the Unix time line */
  uint64_t start_tick;
  uint64_t stop_tick;
  int pid;
  char instrument[32];
  char w_source[OSK_TRACE_SOURCE_MAX]; /* where calib.w_ns came from (osk_trace_set_cost) */
};

/* osk_trace_begin(osk_trace_name(s), category) in one call, interning `s`
 * only when a session records the frame (runtime.c): the native route's
 * per-operator begin. */
OSK__HIDDEN void osk__trace_begin_str(const char *s, uint16_t category);

/* Locks of the collectors (collector.c, itt_collector.c) that a fork must
 * find free: the child's only thread would wait forever on one that another
 * thread of the parent held, and find what it guards half-written. Each is
 * registered in its slot, whose number is its rank: any thread that nests
 * two of them takes the lower slot first, and the fork handlers (runtime.c)
 * take them in slot order, before the runtime's own locks, which no thread
 * holds while taking one of these. Registering is idempotent and lock-free
 * (the owners call it before their first lock). */
enum { OSK__FORK_LAUNCH, OSK__FORK_CALIB, OSK__FORK_ITT, OSK__FORK_SLOTS };
OSK__HIDDEN void osk__fork_lock(int slot, pthread_mutex_t *m);

/* osk_clock_ticks(), inlined for the tracer's begin and end: a call into the
 * core library per timestamp was a tenth of the native route's own
 * instructions per operator (bench/bench_tracer_ir.py). */
OSK__HIDDEN extern int osk__clock_tsc; /* csrc/core/clock.c */
static inline uint64_t osk__ticks(void) {
#if defined(__x86_64__) || defined(__i386__)
  if (OSK__LIKELY(osk__clock_tsc)) return __rdtsc();
#endif
  return osk_clock_monotonic_ns();
}

/* Tick to ns on CLOCK_MONOTONIC_RAW's line, rounded. The same arithmetic
 * as osk_clock_ticks_to_ns(), inlined: the writer converts two timestamps
 * per event, and a call per conversion was a tenth of its time. */
static inline int64_t osk__ticks_ns(const osk_clock_t *clk, uint64_t t) {
  double ns;
  if (clk->kind == OSK_CLOCK_MONOTONIC_RAW) ns = (double)t;
  else ns = (double)clk->ns0 + (double)(int64_t)(t - clk->tick0) * clk->ns_per_tick;
  return (int64_t)(ns + (ns >= 0 ? 0.5 : -0.5));
}

/* Duration as the difference of the rounded ends, so that a child's
 * ts + dur never exceeds its parent's in the output. */
static inline int64_t osk__dur_ns(const osk_clock_t *clk, uint64_t t0, uint64_t t1) {
  if (t1 <= t0) return 0;
  return osk__ticks_ns(clk, t1) - osk__ticks_ns(clk, t0);
}

/* A growable string, for the table and JSON outputs. */
typedef struct {
  char *buf;
  size_t len;
  size_t cap;
  int failed;
} osk__sb_t;

OSK__HIDDEN void osk__sb_put(osk__sb_t *sb, const char *s, size_t n);
OSK__HIDDEN void osk__sb_puts(osk__sb_t *sb, const char *s);
OSK__HIDDEN void osk__sb_printf(osk__sb_t *sb, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
OSK__HIDDEN void osk__sb_json_str(osk__sb_t *sb, const char *s);
/* JSON numbers: non-finite values become null (JSON has no NaN). */
OSK__HIDDEN void osk__sb_json_num(osk__sb_t *sb, double v);
/* Returns the string (caller frees) or NULL if any append failed. */
OSK__HIDDEN char *osk__sb_finish(osk__sb_t *sb);


#endif
