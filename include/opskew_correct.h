/*
 * opskew_correct.h: overhead compensation of a trace (docs/design.md's model).
 *
 * Contents: options | per-name results | whole-trace results | compensation
 *
 * For every complete event of the instrumented categories:
 *   corrected = reported - delta(class) - sum over classes k of W(k) * descendants(k)
 * where W(k) is the instrument's whole cost per event of class k and delta
 * the part of it inside the event's own interval (TAU's scheme). A class is
 * a set of categories with its W and delta (osk_cost_class_t); the default
 * model has two: the operators ("cpu_op", "user_annotation": W, delta) and
 * the Python tracer's calls ("python_function": torch.profiler's with_stack
 * records every Python call, W_py, delta_py). Every class's events are nested
 * and corrected together, and an event's descendants are counted per class.
 * A result below zero is clamped and the
 * residual reported, never a negative duration: the residual is what
 * clamping the corrected total at 0 removed (clamping a self time is not
 * counted in it).
 *
 * Self time and residual (the same words in opskew_trace.h and
 * opskew_correct.h): a corrected self time is the event's corrected total
 * before its clamp less its children's corrected totals before theirs,
 * clamped at 0, so a child's over-compensation stays the child's; it is not
 * bounded by the corrected total (under a clamped total it can exceed it).
 * An event closed early by a later one that outlives it (an improper
 * overlap) has self time only up to that one's start, reported and
 * corrected: its reported time past that point comes off both, as
 * opskew_reader.h's summary counts it.
 * The residual is what clamping corrected totals at 0 removed; clamping a
 * self time is not counted in it.
 *
 * The corrected trace keeps nesting exact by compressing each thread's time
 * line: the instrument's cost is taken out where it happened, (W - delta)/2
 * before each begin, delta just after it, (W - delta)/2 after each end, so
 * every boundary moves back by the instrument time before it and each
 * corrected duration equals the formula above.
 *
 * Memory: bounded by the largest top-level tree, not by the trace. Each
 * thread's events are held (32 bytes each, with an output 40 more and their
 * text; more while their tree is written: docs/correct.md, "Memory") from one gap to the next: until an event starts at or after the
 * end of every event before it. The events before the gap are then sorted,
 * nested, corrected and written, parents first, and dropped. A thread whose
 * events break that rule (one starts before the last gap: with_stack's
 * Python events, written after all the operators) is held whole, in a second
 * read of the input; an input that is not a regular file, which cannot be
 * read twice, is held whole from the start (docs/correct.md, "Memory").
 * Names, threads and the per-name results are kept as well. Plain C11; never
 * includes Python.h. Prefix:
 * osk_correct_. Conventions as in opskew.h.
 */
#ifndef OPSKEW_CORRECT_H
#define OPSKEW_CORRECT_H

#include <stddef.h>
#include <stdint.h>

#include "opskew.h"
#include "opskew_reader.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- options */

/* The most cost classes a correction takes. */
#define OSK_MAX_COST_CLASSES 4

/* One class of the cost model: the events of its categories cost w_ns each,
 * delta_ns of it inside their own interval (W >= delta >= 0, finite). */
typedef struct {
  const char *name;               /* for the corrected trace's header ("operator", "python", ...); copied */
  const char *const *categories;  /* at least one; copied. A category is in one class at most */
  size_t n_categories;
  double w_ns;
  double delta_ns;
  /* 1: the Python tracer's events (written after the operators): one that
   * outlives an open event of another class nests inside it, clipped
   * (opskew_correct.h's nesting, docs/correct.md), and its self time runs
   * Python code. */
  int python;
} osk_cost_class_t;

/* What the instrument costs and which events it recorded. The caller owns
 * the options; osk_correct_path copies what it keeps (the strings too). */
typedef struct {
  /* The cost model: n_classes (1 to OSK_MAX_COST_CLASSES) classes. With
   * n_classes 0 the two classes below make it: the operators (w_ns,
   * delta_ns, categories) and the Python tracer's calls (w_py_ns,
   * delta_py_ns, py_categories), the same results as those two given as
   * classes. */
  const osk_cost_class_t *classes;
  size_t n_classes;
  /* With n_classes 0 only: */
  double w_ns;     /* instrument cost per event, >= 0 */
  double delta_ns; /* the part inside the event's own interval, 0 <= delta <= W */
  /* Categories whose events the instrument recorded (NULL: "cpu_op" and
   * "user_annotation", what RecordFunction produces in torch.profiler
   * traces). Copied. */
  const char *const *categories;
  size_t n_categories;
  /* The second class: Python-function events, W_py >= delta_py >= 0. */
  double w_py_ns;
  double delta_py_ns;
  /* Their categories (NULL: "python_function"). Copied. A category may not
   * be in both lists. */
  const char *const *py_categories;
  size_t n_py_categories;
  /* Optional (NULL: none): one JSON value, written verbatim as the member
   * "run" of the corrected trace's "opskew" object (opskew.profile puts its
   * in-run constants and report there). The caller guarantees it is valid
   * JSON; it is read only during osk_correct_path, and not kept. */
  const char *run_json;
  /* Optional clock map, for a rank of a multi-rank job (opskew_job.h): every
   * written time t becomes origin + (t - origin - offset) / (1 + drift), the
   * reference rank's clock. All 0 (the default): times as corrected. */
  int64_t clock_origin_ns;
  double clock_offset_ns;
  double clock_drift;
  /* 1: the cross-thread rule (osk_correct_op_t.waited_ns). A thread's self
   * time inside one of its open events, while other threads' events ran,
   * was spent waiting for them: it shrinks by their instrument time too, as
   * far as it has room. True of the autograd engine's device threads (a CUDA
   * backward runs on one while the caller waits); not of threads that run
   * alongside each other, which is why it is asked for. 0: every thread's
   * time line is compressed by its own events alone. -1: the rule applies
   * where the trace holds GPU activity (Kineto's kernel, cuda_runtime,
   * cuda_driver, gpu_memcpy or gpu_memset events), as opskew's Python API
   * and command line do by default. It costs a read of its own (16 bytes per
   * event, freed at the end) when the trace's threads overlap in time. */
  int waits;
  /* Optional (n_spans 0: none): events named span_names[i] (opskew.profile's
   * ProfilerStep#N ranges) span span_ns[i] of the code they annotate, as that
   * code timed itself (opskew.profile: step N's body, from the end of one
   * step() to the start of the next). What their reported duration holds
   * beyond it and their own delta (the parts of step() inside the range) is
   * the annotation's own instrument time: taken out of its self time before
   * its first child, the rest after its last, and out of its corrected
   * duration (osk_correct_op_t.trimmed_ns). Names are copied; a name given
   * twice keeps its last entry; a span below 0 is none (a name with a scale
   * only), one not finite is invalid.
   * span_w_scale (NULL: 1 for every name): every event of a top-level tree
   * rooted by an event of that name, the root too, costs span_w_scale[i] x
   * W (x W_py) instead of W (delta at most that): opskew.profile's first
   * active step of a cycle, whose events cost more (the profiler's first
   * recorded step). Finite and > 0.
   * span_delta_ns (NULL: none): events of that name keep span_delta_ns[i]
   * of the instrument's time inside their own interval instead of delta
   * (delta_py for Python-class events): a per-name delta, as opskew.profile
   * measures it for leaf operators against opskew's tracer in the same run.
   * Up to W, W per event is unchanged, so only where the cost is taken out
   * moves: inside the event, and (W - delta)/2 on each side. Above W (W is
   * the mean over every event; one operator may pay more inside itself, as
   * a measured own delta can say), that name's W is raised to its delta:
   * nothing is taken out on either side of it, and every event around it
   * loses its delta as its cost (no ancestor's self time grows by the
   * excess; the excess is in their scaled_ns). Below 0: the class's delta.
   * Finite. The cross-thread rule prices other threads' events with the
   * class's delta. */
  const char *const *span_names;
  const double *span_ns;
  const double *span_w_scale;
  const double *span_delta_ns;
  size_t n_spans;
  /* Where the correction's read of the trace stands, each pass (NULL: not
   * kept; osk_progress_t in opskew_reader.h). */
  osk_progress_t *progress;
} osk_correct_opts_t;

/* ------------------------------------------------------- per-name results */

/* One name's figures. Owned by the osk_correct_t (osk_correct_op returns a
 * pointer into it, valid until osk_correct_free), as is `name`. */
typedef struct {
  osk_str_t name;            /* owned by the correction */
  uint64_t calls;
  int64_t reported_total_ns; /* sum of inclusive durations as reported */
  int64_t reported_self_ns;  /* sum of exclusive durations as reported */
  double corrected_total_ns;
  double corrected_self_ns;  /* see the top of this file: may exceed a clamped total */
  uint64_t descendants;      /* events of the classes not `python` nested inside, summed */
  uint64_t py_descendants;   /* events of the `python` classes nested inside, summed */
  int py_class;              /* 1: the name's events are of a `python` class */
  uint32_t cost_class;       /* the class of the name's first event (its index) */
  uint64_t class_descendants[OSK_MAX_COST_CLASSES]; /* per class, summed */
  /* The category of the name's first event (one of the correction's
   * categories; owned by the correction): "user_annotation" tells a
   * record_function range, whose self time runs its caller's code, from an
   * operator. */
  osk_str_t category;
  uint64_t clamped;          /* calls whose corrected duration fell below zero */
  double residual_ns;        /* sum of what clamping corrected totals at 0 removed */
  /* Summed over calls: how much longer than corrected_total_ns the corrected
   * trace writes the name's events (the stats' stretched_ns, per name; 0
   * where the trace holds the formula's durations). */
  double stretched_ns;
  /* Summed over calls: other threads' events (per class) that ran while the
   * name's events waited for them, and the instrument time of those events
   * taken out of the name's corrected durations (the cross-thread rule,
   * docs/correct.md: a thread's self time inside an open event shrinks by the
   * instrument time of the other threads' events in it; the autograd engine
   * runs a CUDA backward on a thread of its own while the caller waits). */
  uint64_t waited_descendants;    /* of the classes not `python` */
  uint64_t waited_py_descendants; /* of the `python` classes */
  double waited_ns;
  /* Summed over calls: what a span (osk_correct_opts_t.span_ns) took out of
   * the name's corrected durations beyond delta. */
  double trimmed_ns;
  /* Summed over calls: what a W scale (osk_correct_opts_t.span_w_scale) or
   * an own delta above W (span_delta_ns) on its events or their descendants
   * took out beyond W's own. */
  double scaled_ns;
  /* Summed over calls: what the name's written durations lost to the
   * float64 rule (docs/outputs.md, "Read as float64": an end moved earlier,
   * a few ns where it would read crossed with another boundary) and to
   * keeping a re-timed record out of an event that began after it
   * (docs/correct.md, "The twin"). The table, read from the written trace,
   * counts it. */
  double float_ns;
} osk_correct_op_t;

/* ---------------------------------------------------- whole-trace results */

/* The whole trace's figures; owned by the osk_correct_t, as osk_correct_op_t. */
typedef struct {
  uint64_t events;            /* traceEvents elements read */
  uint64_t corrected_events;  /* complete events of the instrumented categories, every class */
  uint64_t py_events;         /* of which of the `python` classes */
  uint64_t class_events[OSK_MAX_COST_CLASSES]; /* of which of each class */
  uint64_t other_events;      /* complete events of other categories: not corrected; written,
                               * re-timed on a thread with corrected events (retimed_events) */
  uint64_t unusable_events;   /* complete events without a name, ts or dur, or with a negative
                               * or out-of-range time: not corrected, written as read */
  uint64_t begin_end_events;  /* "B"/"E" events of the instrumented categories: the correction
                               * reads complete ("X") events only; written as read */
  uint64_t threads;
  uint64_t clamped;
  double residual_ns;
  /* Top-level events (no instrumented parent), summed over threads: the
   * share of the trace that is instrument is 1 - corrected/reported. */
  int64_t reported_top_ns;
  double corrected_top_ns;
  uint64_t overlaps;          /* events that ended after an event started inside them; the
                               * outlived event was closed at that start (see compensate.c) */
  /* Events written longer than their corrected duration (by more than 1 ns
   * of rounding): their children's corrected durations outlast their own
   * (an over-compensating W), so the corrected trace cannot nest them at the
   * formula's duration; and the nanoseconds they were written longer by. */
  uint64_t stretched;
  double stretched_ns;
  int truncated;              /* the input ended early; what was read is used */
  /* Memory and reads: the most corrected events held at once, over all
   * threads and reads (the bound above: 32 bytes each, plus 96 for those of
   * the tree being written, and 134 more while it is fitted); the threads held whole in the last read; the
   * reads of the input (1, or 2 when a thread broke the gap rule). */
  uint64_t held_peak;
  uint64_t held_threads;
  int passes;
  /* The cross-thread rule (osk_correct_op_t.waited_ns): the instrument time
   * of other threads' events taken out of the threads that waited for them,
   * summed over the threads' self-time intervals (each at most the interval's
   * room); and the threads whose events overlap another's in time (0 or >= 2:
   * the rule applies, at the cost of a read that notes each event's start and end, 16
   * bytes each, and one more read). */
  double waited_ns;
  uint64_t overlapping_threads;
  /* Events written shorter than their corrected duration (by more than 1 ns
   * of rounding), and by how much in all: only an event with no time of its
   * own to give (every interval of it belongs to an event that outlived it;
   * docs/correct.md). */
  uint64_t shortened;
  double shortened_ns;
  /* Events with a span (osk_correct_opts_t.span_ns) whose reported duration
   * exceeded it and their delta, and the nanoseconds taken out for that. */
  uint64_t trimmed;
  double trimmed_ns;
  /* What W scales (osk_correct_opts_t.span_w_scale) and own deltas above W
   * (span_delta_ns) priced the events they cover at beyond W, each event
   * once. */
  double scaled_ns;
  /* Top-level trees whose root's end the fit moved from where the forward
   * placement put it (by more than 1 ns: a shortfall found after the self
   * time that could hold it had passed, under with_stack), and the
   * nanoseconds it moved by in all, either way (compensate.c, fit;
   * docs/correct.md, "One time line"). */
  uint64_t relaid;
  double relaid_ns;
  /* Events written earlier (whole, or by their end) so that a float64
   * reader (ts + dur added in float64) nests them as the exact text does,
   * and the nanoseconds of duration they lost plus those trees were written
   * later by for it (docs/outputs.md, "Read as float64"). The table reads
   * the trace as written, so it counts them (osk_correct_op_t.float_ns). */
  uint64_t float_moved;
  double float_moved_ns;
  /* The twin (docs/correct.md, "The twin"): records of the input written as
   * they were read (metadata, the GPU's rows, "B"/"E" events, records of
   * threads without corrected events), and records of other kinds re-timed
   * with their thread's corrected events (X events of other categories,
   * instants, flows' ends). With the corrected events, every record. */
  uint64_t passed_events;
  uint64_t retimed_events;
} osk_correct_stats_t;

/* ----------------------------------------------------------- compensation */

/* The result of one compensation. Opaque. osk_correct_path creates it into
 * the caller's pointer; the caller frees it with osk_correct_free (NULL is a
 * no-op). It is complete when returned and never changes: its accessors may
 * be called from several threads at once; free it after the last of them. */
typedef struct osk_correct osk_correct_t;

/* Reads `in_path` (JSON or gzip), compensates, and when `out_path` is not
 * NULL writes the corrected Chrome trace there: the input's twin, every
 * record of it as read, only times changed (docs/correct.md, "The twin").
 * The corrected events keep their args and gain "reported_ts" and
 * "reported_dur" (microseconds), "descendants" and "py_descendants" (and
 * "class_descendants", one count per class, where the model has classes
 * other than the default two's shape); records
 * of other kinds on their threads (flows, instants, runtime calls) are
 * re-timed with them ("reported_ts" beside); the rest is written as read.
 * Each thread's events in time order, parents first (osk__nest_order),
 * written as their top-level trees close (the memory bound above); a thread
 * that breaks the gap rule, or whose record to re-time comes after its tree
 * was written, makes it read the input a second time. Returns 0,
 * OSK_ETRUNCATED (what was read is corrected and written, *out is set),
 * OSK_EINVAL (bad options), OSK_EFORMAT, OSK_EIO, OSK_ENOMEM; `err` (may be
 * NULL) says where. On success and OSK_ETRUNCATED *out must be freed.
 * Any thread; each call reads its own file and builds its own result. */
int osk_correct_path(const char *in_path, const char *out_path, const osk_correct_opts_t *opts,
                     osk_correct_t **out, osk_error_t *err);

/* Results: per name, in first-seen order (i < osk_correct_op_count; NULL
 * when out of range), and for the whole trace. 0 / NULL for a NULL `c`. */
size_t osk_correct_op_count(const osk_correct_t *c);
const osk_correct_op_t *osk_correct_op(const osk_correct_t *c, size_t i);
const osk_correct_stats_t *osk_correct_stats(const osk_correct_t *c);
void osk_correct_free(osk_correct_t *c);

#ifdef __cplusplus
}
#endif
#endif /* OPSKEW_CORRECT_H */
