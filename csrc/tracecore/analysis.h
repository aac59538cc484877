/* analysis.h: the reading side of the trace core (see tracecore.h):
 * interning of names and threads, the metadata rule, and the nesting rule.
 * Its types are the trace core's own (osk__id_t, osk__meta_event_t), so it
 * needs no reader: the reader's events reach it through
 * csrc/reader/reader_analysis.h, which the streaming summary, the job and
 * the compensation include. */
#ifndef OPSKEW_ANALYSIS_H
#define OPSKEW_ANALYSIS_H

#include "tracecore.h"

static inline int osk__str_is(osk_str_t a, const char *b, size_t n) {
  return a.len == n && (n == 0 || memcmp(a.ptr, b, n) == 0);
}

/* ----------------------------------------------------------------- ids */

/* A pid or tid as a trace gives it: absent, an integer, or a string (a
 * number that is not an int64 comes as its text). A value type; `str` is
 * borrowed from whoever hands the id in, and owned by the tables below for
 * the ids they keep. */
typedef enum {
  OSK__ID_NONE = 0,
  OSK__ID_INT = 1,
  OSK__ID_STR = 2,
} osk__id_kind_t;

typedef struct {
  osk__id_kind_t kind;
  int64_t num;
  osk_str_t str;
} osk__id_t;

/* ----------------------------------------------------------- interning */

/* An open-addressing index from 64-bit hashes to dense ids; the caller keeps
 * the keys and decides equality. */
typedef struct {
  uint32_t *slots; /* id + 1; 0 empty */
  size_t cap;
} osk__index_t;

/* Names: byte strings to dense ids 0..n-1. Each copy is its own allocation,
 * so pointers to it stay valid while the table grows. */
typedef struct {
  osk_str_t *str; /* NUL-terminated copies */
  uint64_t *hash;
  size_t n, cap;
  osk__index_t idx;
} osk__names_t;

/* Returns the id of the name, adding it if new, or a negative OSK_E* code. */
OSK__CORE_HIDDEN int64_t osk__names_intern(osk__names_t *t, const char *p, size_t n);
OSK__CORE_HIDDEN void osk__names_free(osk__names_t *t);

/* A thread of a trace, known by (pid, tid); string ids are owned copies. */
typedef struct {
  osk__id_t pid, tid;
  osk_str_t name; /* the latest thread_name metadata; ptr NULL when none */
  uint64_t hash;
} osk__thread_id_t;

/* A process named by "process_name" metadata: pid and name owned copies. */
typedef struct {
  osk__id_t pid;
  osk_str_t name;
} osk__process_t;

typedef struct {
  osk__thread_id_t *th;
  size_t n, cap;
  osk__index_t idx;
  size_t last; /* id + 1 of the last thread found: events come in runs */
  osk__process_t *procs; /* process_name metadata, one per pid */
  size_t n_procs, procs_cap;
} osk__threads_t;

/* Whether two pids (or tids) are the same: kind and value. */
OSK__CORE_HIDDEN int osk__id_eq(const osk__id_t *a, const osk__id_t *b);

/* Returns the thread's id, adding it if new, or a negative OSK_E* code. */
OSK__CORE_HIDDEN int64_t osk__threads_intern(osk__threads_t *t, const osk__id_t *pid,
                                             const osk__id_t *tid);

/* What the metadata rule reads of a metadata ("M") event. */
typedef struct {
  osk_str_t name;     /* the event's name: "thread_name", "process_name", ... */
  osk_str_t arg_name; /* its args.name when that is a string; ptr NULL otherwise */
  osk__id_t pid, tid;
} osk__meta_event_t;

/* The metadata rule: a "thread_name" event names its (pid, tid), adding the
 * thread if new; a "process_name" event names its pid; the latest name wins;
 * an event without a string args.name, and any other metadata, is ignored.
 * *named (may be NULL) gets the id of the thread it named, or -1;
 * *named_proc (may be NULL) the index in procs of the process it named, or
 * -1. Returns 0 or a negative OSK_E* code. */
OSK__CORE_HIDDEN int osk__threads_metadata(osk__threads_t *t, const osk__meta_event_t *ev,
                                           int64_t *named, int64_t *named_proc);
OSK__CORE_HIDDEN void osk__threads_free(osk__threads_t *t);

/* ------------------------------------------------------------- nesting */

/* One open event on a thread's stack. */
typedef struct {
  int64_t start;
  int64_t end;           /* where nesting closes it: its end, or clipped */
  int64_t dur;           /* reported duration */
  int64_t child_ns;      /* children's reported time inside it */
  double child_corr_ns;  /* children's corrected time inside it (their corr_ns) */
  double corr_ns;        /* set by the close callback: its corrected duration
                          * before clamping (osk__corrected_t.raw_ns) */
  double corr_in_ns;     /* set by the close callback with has_corr_in: the
                          * part of corr_ns that its parent holds (a clipped
                          * event's, whose tail past the parent's end stays
                          * as reported); else corr_ns in proportion */
  uint32_t has_corr_in;
  uint64_t desc[OSK__NCLS]; /* events nested inside, per class */
  /* Other threads' instrumented events that fell in its self time or its
   * descendants' while it waited for them, per class, and their instrument
   * time taken out of it (compensate.c's cross-thread rule; 0 elsewhere). */
  uint64_t wdesc[OSK__NCLS];
  double wait_ns;
  uint32_t name, cls;    /* cls: its class's index (< OSK__NCLS) */
  uint32_t py;           /* 1: of a Python-tracer class (the nesting rule's exception) */
  uint32_t n_children, last_child; /* last_child: the last child's name */
  int64_t user[2];       /* the caller's */
} osk__nest_frame_t;

/* Called for each event the rule closes, innermost first. `f` is its frame,
 * already off the stack; `parent` the frame it nested in, or NULL at top
 * level; `cut` is INT64_MAX, or the start of a later event that outlived f,
 * where f was closed. Return 0, or a negative code to stop. After it returns,
 * the core adds f to the parent: f's reported time up to the cut, its
 * corr_ns in proportion (or its corr_in_ns where the callback set
 * has_corr_in), its descendants and itself. */
typedef int (*osk__close_fn)(void *ctx, osk__nest_frame_t *f, const osk__nest_frame_t *parent,
                             int64_t cut);

/* A thread's open events. Zero-initialize; osk__nest_free releases. */
typedef struct {
  osk__nest_frame_t *stack;
  uint32_t depth, cap;
  uint32_t max_depth; /* deepest nesting seen */
  uint64_t overlaps;  /* events closed early or clipped (see osk__nest_push) */
} osk__nest_t;

/* THE nesting rule. Complete events nest per thread in (start, longer
 * first) order: an event is a child of the innermost open event that
 * contains its start. Pushing an event first closes every open event that
 * ended at or before its start, then every open event it outlives that
 * started before it: that one is closed at the new event's start and counted
 * as an overlap (under torch.profiler's with_stack, record_function's
 * annotation starts inside the Python tracer's __enter__ event and outlives
 * it; the annotation keeps its whole interval). Except: a Python event
 * (`py` 1: of a Python-tracer class) that outlives an open event of another
 * class (an operator or annotation) does not close it: it nests inside, its
 * end clipped to the
 * operator's (an overlap too); the frame around optimizer.step() that the
 * step boundary runs in starts in ProfilerStep#N and ends in #N+1, and the
 * step keeps the optimizer's operators. Events that start together
 * nest the longer one outside, whichever came first; equal intervals nest in
 * arrival order. For a shorter event of equal start that arrived first
 * above an outlived event, the new event's end is clipped to the outlived
 * one's too (an overlap): sorted input never needs it.
 * Events must arrive in start order; osk__nest_order sorts them so.
 * Precondition: dur >= 0 and start + dur <= INT64_MAX (osk__event_usable,
 * csrc/reader/reader_analysis.h, checks both for read events); the end is
 * computed without a check.
 * `cls` is the event's class (< OSK__NCLS): its parent counts it there.
 * `*pushed` (may be NULL) gets the new frame, valid until the next call.
 * Returns 0, OSK_ENOMEM, or the callback's code. */
OSK__CORE_HIDDEN int osk__nest_push(osk__nest_t *n, int64_t start, int64_t dur, uint32_t name,
                                    uint32_t cls, uint32_t py, osk__close_fn close, void *ctx,
                                    osk__nest_frame_t **pushed);
/* Closes every open event (the end of the thread's events). */
OSK__CORE_HIDDEN int osk__nest_close_all(osk__nest_t *n, osk__close_fn close, void *ctx);
OSK__CORE_HIDDEN void osk__nest_free(osk__nest_t *n);

/* THE self time of an event the rule closed (at `cut`, as the close
 * callback has it): its span up to where it was closed (a later event that
 * outlived it, or its parent's end where it was clipped) less its
 * children's time inside it. The summary and the correction's table (its
 * reported figures, and the corrected ones read back from the written
 * trace) all take it from here. May be < 0 for hostile input; callers clamp. */
static inline int64_t osk__nest_self(const osk__nest_frame_t *f, int64_t cut) {
  return ((f->end < cut ? f->end : cut) - f->start) - f->child_ns;
}

/* The order osk__nest_push needs: start, then longer first (the parent of an
 * equal start), then arrival. A qsort-style result. */
static inline int osk__nest_order(int64_t start_a, int64_t dur_a, uint64_t seq_a, int64_t start_b,
                                  int64_t dur_b, uint64_t seq_b) {
  if (start_a != start_b) return start_a < start_b ? -1 : 1;
  if (dur_a != dur_b) return dur_a > dur_b ? -1 : 1;
  return (seq_a > seq_b) - (seq_a < seq_b);
}

#endif
