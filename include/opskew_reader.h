/*
 * opskew_reader.h: the streaming Chrome-trace reader and the trace analyzer.
 *
 * Contents: ids | events | reader | summary (analyzer) | one-call summaries |
 *           CUDA audit (osk_audit_)
 *
 * The reader parses Chrome trace JSON as torch.profiler (Kineto) exports it
 * and as opskew's tracer writes it, plain or gzip-compressed, in bounded
 * memory: it reads the input in chunks, parses one event at a time and hands
 * each to a callback. Its memory is the read buffer plus the largest single
 * event, never the whole trace. The analyzer consumes those events and keeps
 * per-thread nesting stacks and per-name aggregates, so its memory grows with
 * the number of distinct operator names and threads, not with events (the
 * one exception, threads whose events are out of order, is documented at
 * osk_summary_t).
 *
 * Conventions (as in opskew.h): functions return 0 or a count on success and
 * a negative OSK_E* code on failure; constructors fill an out-parameter and
 * an optional osk_error_t. Prefixes: osk_reader_ for reading, osk_summary_
 * for the analyzer, osk_audit_ for the CUDA audit. Objects (osk_reader_t,
 * osk_summary_t, osk_audit_t) are not thread
 * safe: use one object from one thread at a time; distinct objects are
 * independent, so several threads may each read their own trace. Plain C11,
 * never includes Python.h.
 */
#ifndef OPSKEW_READER_H
#define OPSKEW_READER_H

#include <stddef.h>
#include <stdint.h>

#include "opskew.h"

#ifdef __cplusplus
extern "C" {
#endif

/* -------------------------------------------------------------------- ids */

/* osk_str_t and osk_error_t are opskew.h's, shared by every module. */

/* pid and tid are numbers in most traces and strings in some ("Spans",
 * "Traces", "" in Kineto's own bookkeeping events). A value type; `str` is
 * borrowed from whatever holds the id (an event: the callback; a summary
 * row: the summary). */
typedef enum {
  OSK_READER_ID_NONE = 0, /* the field was absent */
  OSK_READER_ID_INT = 1,  /* an integer that fits int64: `num` */
  OSK_READER_ID_STR = 2,  /* a string, or a number that is not an int64, as text: `str` */
} osk_reader_id_kind_t;

typedef struct {
  osk_reader_id_kind_t kind;
  int64_t num;
  osk_str_t str;
} osk_reader_id_t;

/* ----------------------------------------------------------------- events */

/* Which fields an event carried (osk_reader_event_t.has). */
enum {
  OSK_READER_EV_TS = 1 << 0,   /* ts is a number that fits int64 nanoseconds */
  OSK_READER_EV_DUR = 1 << 1,  /* dur likewise */
  OSK_READER_EV_NAME = 1 << 2, /* name is a string */
  OSK_READER_EV_BAD = 1 << 3,  /* a known field had the wrong type or was out of range */
  OSK_READER_EV_RANGE = 1 << 4, /* ts or dur was a number not representable as int64 ns
                                 * (also sets BAD; counted in stats.out_of_range) */
  OSK_READER_EV_CORRELATION = 1 << 5, /* args.correlation is an integer: `correlation` */
  OSK_READER_EV_EXTERNAL_ID = 1 << 6, /* args["External id"] is an integer: `external_id` */
  OSK_READER_EV_ID = 1 << 7,          /* the event's own "id" is an integer: `id` */
};

/* One trace event, as the reader hands it to the callback. The reader owns
 * it and every pointer in it: valid only during the callback; copy what you
 * keep. (The tracer's recorded event is a different type,
 * osk_trace_event_t in opskew_trace.h.) */
typedef struct {
  osk_str_t ph;         /* phase: "X", "B", "E", "M", "i", "s", "f", ...; len 0 if absent */
  osk_str_t name;       /* len 0 if absent */
  osk_str_t cat;        /* len 0 if absent */
  osk_reader_id_t pid;
  osk_reader_id_t tid;
  /* ts and dur in integer nanoseconds. Chrome traces give microseconds;
   * Kineto writes a 3-digit fraction, which converts exactly; any other
   * number is rounded once to the nearest ns (ties away from zero), exactly,
   * whatever its number of digits or exponent. A number whose result does
   * not fit int64 (|ns| > INT64_MAX), or whose exponent has 18 digits or
   * more (and a nonzero mantissa), is out of range: the field is absent
   * from `has`, OSK_READER_EV_RANGE and OSK_READER_EV_BAD are set, and the
   * value is never 0 silently. NaN and Infinity are not JSON: OSK_EFORMAT. */
  int64_t ts_ns;
  int64_t dur_ns;
  osk_str_t arg_name;   /* args.name when it is a string (metadata events) */
  unsigned has;         /* OSK_READER_EV_* bits */
  uint64_t offset;      /* byte offset of the event's '{' in the JSON text */
  /* The ids that tie Kineto's events together (the CUDA audit, osk_audit_*):
   * args.correlation (a runtime call and the kernel, memcpy or memset it
   * launched share it), args["External id"] (the PyTorch operator an event
   * belongs to) and the event's own top-level "id" (a flow's: "s"/"f" of
   * cat "ac2g" carry the correlation). Each is set, with its has-bit, only
   * when the value is an integer JSON number that fits int64 (at most 18
   * digits): another value (a string id, a fraction, a huge number) leaves
   * the bit clear and the field 0, without marking the event BAD. Only the
   * top level of args is looked at; a repeated key: the last one wins. */
  int64_t correlation;  /* OSK_READER_EV_CORRELATION */
  int64_t external_id;  /* OSK_READER_EV_EXTERNAL_ID */
  int64_t id;           /* OSK_READER_EV_ID */
  /* The event's own JSON text, from its '{' to its '}', as read (plain
   * text, whitespace included), and where the values of "ts", "dur" and
   * "args" lie in it: offsets from text.ptr and lengths, both 0 where the
   * key is absent (a repeated key: the last one). `opskew correct` writes
   * the event again from them with other times (docs/correct.md, "The
   * twin"). Elements of traceEvents that are not objects are not events. */
  osk_str_t text;
  uint32_t ts_at, ts_len, dur_at, dur_len, args_at, args_len;
} osk_reader_event_t;

/* Called once per element of traceEvents, in file order, on the thread that
 * called osk_reader_run, with the `ctx` given there. Return 0 to go on, or a
 * negative OSK_E* code to stop: reading then returns that code. It must not
 * call osk_reader_run or osk_reader_free on the reader that calls it. */
typedef int (*osk_reader_event_fn)(void *ctx, const osk_reader_event_t *ev);

/* ----------------------------------------------------------------- reader */

/* Where a long read stands, for another of the caller's threads to show
 * (opskew's progress on stderr; the reader runs without the GIL). `done`:
 * the source's bytes read so far in this pass (the compressed ones of a gzip
 * file, so against its size); `total`: the source's size where it is known at
 * open (a regular file, memory), else 0 (a pipe); `pass`: the passes begun
 * (each open and rewind that was given it). The reader stores each field as
 * a C11 relaxed atomic store (through an _Atomic uint64_t of the same size
 * and alignment, checked where it is built: the header stays C++-clean); read
 * them with relaxed atomic loads, or as aligned 64-bit words. The caller
 * zeroes it before the first open. */
typedef struct {
  uint64_t done;
  uint64_t total;
  uint64_t pass;
} osk_progress_t;

/* Reading options. The caller owns them; the reader copies them at open. */
typedef struct {
  /* Bytes asked of the source per read (default 1 MiB when 0). */
  size_t chunk_bytes;
  /* A single event (or top-level scalar) larger than this is refused with
   * OSK_ERANGE, which bounds the reader's memory (default 256 MiB when 0). */
  size_t max_unit_bytes;
  /* Nonzero: read only the header, the top-level members before
   * "traceEvents" (opskew's writers put their "opskew" object there), and
   * stop where the events array begins: no event is delivered, members after
   * the events are not seen, osk_reader_run returns 0 (or the error met
   * before that point) and stats.header_only_stopped is set. A document
   * without "traceEvents" is read whole; a bare array stops at once. */
  int header_only;
  /* Nonzero: osk_reader_rewind works on any input. A file that is not
   * seekable (a pipe, standard input, a FIFO, a socket) is then copied, as
   * it is read, into a temporary file of the reader's own (created with
   * O_EXCL in $TMPDIR, else /tmp, and unlinked at once, so nothing is left
   * behind), from which the second read comes. Regular files and memory are
   * rewound without a copy, whatever this says. */
  int rewindable;
  /* Where the read stands, stored as it goes (NULL: not kept). The caller
   * keeps it alive while the reader is. */
  osk_progress_t *progress;
} osk_reader_opts_t;

/* Marks of the torch.profiler options that made a trace, counted while
 * streaming: each is the number of events that carry the option's sign. A
 * trace made without the option has none of its events, so a count above
 * zero says the option was on (`opskew correct` picks its calibration by
 * them; see docs/design.md). Only the top level of args is looked at.
 * Plain values, inside osk_reader_stats_t. */
typedef struct {
  uint64_t input_dims;       /* args has "Input Dims": record_shapes */
  uint64_t python_function;  /* cat is "python_function": with_stack */
  uint64_t memory;           /* name is "[memory]": profile_memory */
  uint64_t module_hierarchy; /* args has "Module Hierarchy": with_modules */
  uint64_t flops;            /* args has "flops": with_flops */
  /* Not an option: name starts "autograd::engine::evaluate_function", a
   * backward node the autograd engine ran (a training step's capture,
   * whose operators record autograd nodes; `opskew correct` prices them
   * on the training step, others on the inference step). */
  uint64_t backward;
} osk_reader_marks_t;

/* Counters of one read, for warnings and for the benchmark. The reader owns
 * them (osk_reader_stats returns a pointer into it, valid until
 * osk_reader_free); the one-call summaries copy them into the caller's. */
typedef struct {
  uint64_t bytes;            /* JSON bytes consumed (after decompression) */
  uint64_t compressed_bytes; /* gzip bytes read; 0 for plain input */
  uint64_t events;           /* elements of traceEvents delivered */
  uint64_t bad_fields;       /* events with OSK_READER_EV_BAD */
  uint64_t lone_surrogates;  /* \uD800-\uDFFF escapes without a partner, read as U+FFFD */
  uint64_t out_of_range;     /* events with OSK_READER_EV_RANGE (a ts or dur not int64 ns) */
  /* Bytes the parser examined, those it examined again after a refill
   * included: below 3 x bytes for any input (each unit is re-parsed only
   * after its buffered part doubled), about 1 x for ordinary traces. A
   * measure of work that tests can assert without a clock. */
  uint64_t bytes_scanned;
  size_t peak_buffer;        /* largest read buffer used, bytes */
  int gzip;                  /* the input was gzip */
  int gzip_unterminated;     /* the gzip stream ended before its trailer */
  int gzip_corrupt;          /* the gzip data was corrupt after some JSON: the input was
                              * taken to end there (OSK_ETRUNCATED unless the document
                              * was complete before it); corrupt from its first byte
                              * is OSK_EFORMAT */
  int array_format;          /* the document is a bare array of events */
  osk_reader_marks_t marks;  /* option marks of the traceEvents delivered */
  uint64_t objects_not_kept; /* top-level objects that could be kept but were too
                              * large or too deep (see osk_reader_object_get) */
  int header_only_stopped;   /* header_only: the read stopped at traceEvents */
} osk_reader_stats_t;

/* A reader of one trace. Opaque. Created by osk_reader_open or
 * osk_reader_open_mem into the caller's pointer, which then owns it and
 * frees it with osk_reader_free; everything the reader hands out (events,
 * stats, members) is borrowed from it. One thread at a time. */
typedef struct osk_reader osk_reader_t;

/* Opens a trace file for reading; gzip is recognized by its magic bytes, not
 * by the name. "-" is standard input (the reader reads a duplicate of
 * descriptor 0 and closes only that). Any file that can be read in order
 * works: a pipe, /dev/stdin, a FIFO, a socket. `opts` may be NULL
 * (defaults). On success *out owns the file until osk_reader_free. Returns
 * 0, OSK_EINVAL (NULL path or out), OSK_EIO (err->sys_errno says why:
 * ENOENT, EISDIR for a directory, ELOOP, EACCES, ENXIO for a socket file,
 * ...; with rewindable, a failure to create the pipe's copy also), OSK_ENOMEM.
 * `err` may be NULL. */
int osk_reader_open(osk_reader_t **out, const char *path, const osk_reader_opts_t *opts,
                    osk_error_t *err);

/* Reads from memory, which the caller keeps valid and unchanged until
 * osk_reader_free. Gzip is recognized as for files. `piece` > 0 limits every
 * read to that many bytes, so tests can exercise chunk boundaries. */
int osk_reader_open_mem(osk_reader_t **out, const void *data, size_t len, size_t piece,
                        const osk_reader_opts_t *opts, osk_error_t *err);

/* Reads the whole document and calls `fn` (which may be NULL to only
 * validate) for each event. Returns:
 *   0               the document was complete and valid;
 *   OSK_ETRUNCATED  the input ended early (a profiler killed mid-write, or
 *                   gzip data corrupt after some JSON: stats.gzip_corrupt):
 *                   every complete event before that point was delivered,
 *                   whatever the size of the file;
 *   OSK_EFORMAT     invalid JSON or not a trace; events before the error
 *                   were delivered; err->offset is the offending byte;
 *   OSK_ERANGE      an event exceeded max_unit_bytes;
 *   OSK_EIO, OSK_ENOMEM, or the callback's negative code.
 * A reader runs once; a second call returns OSK_EINVAL. */
int osk_reader_run(osk_reader_t *r, osk_reader_event_fn fn, void *ctx, osk_error_t *err);

/* Makes the reader read its input again from the start, as if just opened
 * (stats, members and the run-once rule are reset; the options are kept).
 * A regular file is read again from where it was at open; a pipe only when
 * opened with opts.rewindable, from the copy of what the first read took
 * from it (a first read that stopped early was copied only so far). Returns
 * 0, OSK_EINVAL, OSK_EIO (a pipe without rewindable: sys_errno ESPIPE), or
 * what opening returns. */
int osk_reader_rewind(osk_reader_t *r, osk_error_t *err);

/* A descriptor of `path` ("-": standard input) that can be read from the
 * start more than once, for callers that read a trace in several passes
 * through paths (opskew correct: detection, then correction). A regular
 * file is opened as it is; anything else (a pipe, a FIFO, a socket) is
 * copied whole into a temporary file of our own (O_EXCL in $TMPDIR, else
 * /tmp, unlinked at once) and that copy is returned, at its start. *fd is
 * the caller's to close (close-on-exec). Returns 0, or OSK_EIO with `err`
 * saying which side failed (opening the input, or the copy), OSK_EINVAL. */
int osk_reader_spool(const char *path, int *fd, osk_error_t *err);

/* Counters so far; never NULL for a non-NULL reader. */
const osk_reader_stats_t *osk_reader_stats(const osk_reader_t *r);

/* Top-level members of the document whose values are scalars
 * ("schemaVersion", "displayTimeUnit", "baseTimeNanoseconds", "traceName",
 * ...), in file order, at most 64 of at most 4 KiB each. `value` is the
 * decoded string when *is_string, else the JSON text of the number or
 * literal. Pointers stay valid until osk_reader_free. Returns 0, or
 * OSK_ERANGE when i is out of range. */
size_t osk_reader_meta_count(const osk_reader_t *r);
/* How many of the kept scalars (osk_reader_meta_get) and objects and arrays
 * (osk_reader_object_get) came before "traceEvents": all of them when it
 * has not been reached. Either pointer may be NULL. */
void osk_reader_members_before_events(const osk_reader_t *r, size_t *n_meta, size_t *n_objects);
int osk_reader_meta_get(const osk_reader_t *r, size_t i, osk_str_t *key, osk_str_t *value,
                        int *is_string);

/* Top-level members whose values are objects or arrays (opskew's own
 * "opskew" header, Kineto's "distributedInfo" and "deviceProperties", ...)
 * are kept as their raw JSON text, in file order: at most OSK_READER_OBJECTS_MAX of them, each at most
 * OSK_READER_OBJECT_MAX_BYTES of text (and at most the reader's
 * max_unit_bytes) nesting at most OSK_READER_OBJECT_MAX_DEPTH levels of
 * objects and arrays (itself included), so that any JSON reader can decode
 * it. Larger or deeper ones (counted in stats.objects_not_kept), later ones
 * and those with keys over 4 KiB are read past in bounded memory as before,
 * and not kept. The text is valid JSON
 * (the reader checked it) and NUL terminated; `key` is decoded. A key that
 * appears twice is kept twice. Pointers stay valid until osk_reader_free.
 * Members after an error or a truncation point are not seen. */
#define OSK_READER_OBJECTS_MAX 8
#define OSK_READER_OBJECT_MAX_BYTES ((size_t)64 << 10)
#define OSK_READER_OBJECT_MAX_DEPTH 64

/* Number of kept objects; 0 for NULL. */
size_t osk_reader_object_count(const osk_reader_t *r);
/* Object i: `key` and `json` may be NULL. Returns 0, or OSK_ERANGE when i is
 * out of range (or r is NULL). */
int osk_reader_object_get(const osk_reader_t *r, size_t i, osk_str_t *key, osk_str_t *json);
/* The last kept object whose key is the NUL-terminated `key` (the one a JSON
 * reader keeps). Returns 0, OSK_EINVAL for a NULL argument, OSK_ERANGE when
 * there is none. */
int osk_reader_object_find(const osk_reader_t *r, const char *key, osk_str_t *json);

/* Closes the source and frees everything; NULL is a no-op. */
void osk_reader_free(osk_reader_t *r);

/* --------------------------------------------------------------- analyzer */

/*
 * osk_summary_t: per-thread nesting and per-name aggregates of a trace.
 *
 * Complete events ("X") nest per (pid, tid): an event is a child of the
 * innermost open event that contains its start. Nesting needs a thread's
 * events in start order; Kineto writes them so, and the analyzer checks. While
 * they are in order it keeps only the open stack per thread. When a thread's
 * start times go backwards, that thread's nesting so far is dropped and the
 * one-call summaries read the trace a second time (osk_reader_rewind: a pipe
 * from the reader's copy of it), keeping only that thread's complete events
 * (24 bytes each), sort them by (start, longer first) and nest them then:
 * memory grows with the events of out-of-order threads only.
 * Equal start times nest the longer event outside, whichever comes first. An
 * event outlived by a later one that starts inside it is closed at the later
 * one's start and counted as an overlap: its parent counts it only up to
 * there, and the later event keeps its whole interval and nests in the
 * innermost open event that holds it (under torch.profiler's with_stack, record_function's
 * annotation starts inside the Python tracer's __enter__ event and outlives
 * it). Only an event of equal start that arrived after a shorter one, above
 * an outlived event, has its end clipped to that event's (also an overlap).
 * The compensation (opskew_correct.h) applies the same rule.
 * "B"/"E" pairs nest among themselves on a per-thread stack.
 *
 * Per name: calls, inclusive total/min/max/mean, self total, descendants, and
 * p50/p99 of the inclusive duration: exact for names with at most 64 calls,
 * else from a log-linear histogram (64 buckets per power of two: values below
 * 128 ns are exact, larger ones within 0.8% relative error, by bucket
 * midpoint, clamped to the observed min and max).
 *
 * Ownership: osk_summary_new or the one-call summaries create it into the
 * caller's pointer; the caller frees it with osk_summary_free. The rows and
 * strings the accessors return are the summary's, valid until then. One
 * thread at a time while events are added; after osk_summary_finish it is
 * only read, and its accessors may be called from several threads at once.
 */
typedef struct osk_summary osk_summary_t;

/* Summary options. The caller owns them; the summary copies them (and the
 * strings) at osk_summary_new. */
typedef struct {
  /* Only events whose "cat" is one of these are analyzed (NULL: all). The
   * strings are copied. */
  const char *const *categories;
  size_t n_categories;
  /* Events whose "cat" is one of these are ignored (NULL: none), for example
   * Kineto's own "Trace" span. Applied after `categories`; copied. */
  const char *const *exclude_categories;
  size_t n_exclude_categories;
} osk_summary_opts_t;

/* One operator name's figures. Owned by the summary (osk_summary_op returns
 * a pointer into it, valid until osk_summary_free), as are its strings. */
typedef struct {
  osk_str_t name;          /* owned by the summary */
  osk_str_t cat;           /* category of the first event with this name */
  uint64_t calls;
  int64_t total_ns;        /* sum of inclusive durations */
  int64_t self_ns;         /* sum of exclusive durations */
  int64_t min_ns, max_ns;
  uint64_t descendants;    /* sum over calls of events nested inside */
  /* Calls that are the only child of a parent with the same name (as in
   * aten::div_ -> aten::div_). torch's key_averages() folds these into the
   * parent, so its count is calls - only_child_same_name. */
  uint64_t only_child_same_name;
} osk_summary_op_t;

/* One thread's figures; one process's names. Owned by the summary, as
 * osk_summary_op_t. */
typedef struct {
  osk_reader_id_t pid, tid; /* strings owned by the summary */
  osk_str_t name;          /* from a "thread_name" metadata event; len 0 if none */
  uint64_t complete_events;
  uint32_t max_depth;      /* deepest nesting seen (1: no nesting) */
  uint64_t overlaps;       /* events closed early by one that outlived them (or clipped) */
  int resorted;            /* out of order: nested from a sorted second pass */
} osk_summary_thread_t;

typedef struct {
  osk_reader_id_t pid;
  osk_str_t name;          /* from "process_name" metadata */
} osk_summary_process_t;

/* Counters of the whole summary; owned by it, as osk_summary_op_t. */
typedef struct {
  uint64_t events;           /* every traceEvents element seen */
  uint64_t complete_events;  /* "X" (and matched B/E) events analyzed */
  uint64_t filtered_events;  /* dropped by the category filter */
  uint64_t unusable_events;  /* X without name, ts or dur, negative dur, or OSK_READER_EV_BAD */
  uint64_t overlaps;         /* over all threads */
  uint64_t unmatched_end;    /* "E" without an open "B" */
  uint64_t unclosed_begin;   /* "B" still open at the end */
  uint64_t resorted_events;  /* complete events held for out-of-order threads */
  int passes;                /* 1, or 2 when some thread needed sorting */
  int64_t first_ts_ns, last_end_ns; /* time span of complete events */
} osk_summary_stats_t;

/* Creates an empty summary. `opts` may be NULL. Returns 0, OSK_EINVAL,
 * OSK_ENOMEM. */
int osk_summary_new(osk_summary_t **out, const osk_summary_opts_t *opts);

/* Adds one event (an osk_reader_event_fn: pass the summary as ctx). Returns 0 or
 * OSK_ENOMEM. */
int osk_summary_add(void *summary, const osk_reader_event_t *ev);

/* Names the threads whose events were out of order (they need the sorted
 * second pass). Returns their count. */
size_t osk_summary_unsorted_threads(const osk_summary_t *s);

/* Second pass over the same events, for the out-of-order threads only (an
 * osk_reader_event_fn); call osk_summary_finish after it. */
int osk_summary_add_resort(void *summary, const osk_reader_event_t *ev);

/* Closes every open stack, sorts and nests held events, and merges per-thread
 * figures into the per-name results. Call once, after the last event; the
 * accessors below need it. Returns 0 or OSK_ENOMEM. */
int osk_summary_finish(osk_summary_t *s);

/* Adds the per-name figures and the counters of `src` (finished) to `dst`:
 * per name, calls, totals, self times, min and max, descendants and the
 * quantiles' data (exact values or histogram buckets) add up, so a merged
 * name's p50/p99 are those of all its calls, within the histogram's 0.8%.
 * Threads, processes, metadata and objects are not merged. `dst` is a new
 * summary (osk_summary_new, no events added) or one that only received
 * merges; it counts as finished afterwards. Returns 0, OSK_EINVAL (NULL, an
 * unfinished src, or a dst that holds events of its own), OSK_ENOMEM (dst
 * then holds part of src). One job's per-rank summaries merge into its
 * table across ranks (opskew_job.h). */
int osk_summary_merge(osk_summary_t *dst, const osk_summary_t *src);

/* Results (after osk_summary_finish). Pointers stay valid until
 * osk_summary_free. Ops are in first-seen order. */
size_t osk_summary_op_count(const osk_summary_t *s);
const osk_summary_op_t *osk_summary_op(const osk_summary_t *s, size_t i);
/* Quantile q in [0,1] of op i's inclusive durations (see precision above).
 * Returns 0, OSK_ERANGE (bad i or q), OSK_ETOOFEW (no calls). */
int osk_summary_op_quantile(const osk_summary_t *s, size_t i, double q, double *out_ns);
size_t osk_summary_thread_count(const osk_summary_t *s);
const osk_summary_thread_t *osk_summary_thread(const osk_summary_t *s, size_t i);
size_t osk_summary_process_count(const osk_summary_t *s);
const osk_summary_process_t *osk_summary_process(const osk_summary_t *s, size_t i);
const osk_summary_stats_t *osk_summary_stats(const osk_summary_t *s);
/* The document's top-level scalars, as osk_reader_meta_get; filled by the
 * one-call summaries only. */
size_t osk_summary_meta_count(const osk_summary_t *s);
int osk_summary_meta_get(const osk_summary_t *s, size_t i, osk_str_t *key, osk_str_t *value,
                         int *is_string);

/* The document's top-level objects the reader kept (osk_reader_object_get:
 * opskew's "opskew" header, with its "lost" counts, among them), as
 * osk_reader_object_get; filled by the one-call summaries only. */
size_t osk_summary_object_count(const osk_summary_t *s);
int osk_summary_object_get(const osk_summary_t *s, size_t i, osk_str_t *key, osk_str_t *json);

/* Frees everything; NULL is a no-op. */
void osk_summary_free(osk_summary_t *s);

/* ------------------------------------------------------ one-call summaries */

/* Reads a trace file and summarizes it, with the second pass when needed
 * (through osk_reader_rewind, so "-", /dev/stdin and other pipes work: see
 * osk_reader_opts_t.rewindable, which the one-call summaries always set).
 * On success and on OSK_ETRUNCATED and OSK_EFORMAT, *out holds the summary
 * of everything read before the end or the error (finished; free it with
 * osk_summary_free); on other failures *out is NULL. `rstats` (may be NULL)
 * receives the first pass's reader counters. Return codes as osk_reader_run. */
int osk_summary_from_path(const char *path, const osk_summary_opts_t *opts,
                       const osk_reader_opts_t *ropts, osk_summary_t **out,
                       osk_reader_stats_t *rstats, osk_error_t *err);

/* The same from memory (`piece` as in osk_reader_open_mem). */
int osk_summary_from_mem(const void *data, size_t len, size_t piece, const osk_summary_opts_t *opts,
                      const osk_reader_opts_t *ropts, osk_summary_t **out,
                      osk_reader_stats_t *rstats, osk_error_t *err);

/* ------------------------------------------------------------- CUDA audit */

/*
 * osk_audit_t: the clean-window audit of a CUDA trace (issue 36;
 * docs/reader.md, "The CUDA audit"): what inside the active window is not the
 * program's own time, and whether the GPU records are whole. One streaming
 * read, in file order (Kineto writes the CPU events, then the GPU records,
 * not in time order); everything is resolved after the read.
 *
 * What it reads: complete ("X") events with a ts (and a dur where needed),
 * of these categories; everything else is skipped.
 *   device events  cat "kernel", "gpu_memcpy", "gpu_memset" (Kineto: pid the
 *                  device, tid the stream, args.correlation).
 *   launches       cat "cuda_runtime" or "cuda_driver" with an integer
 *                  args.correlation, whose name contains "Launch", "Memcpy"
 *                  or "Memset" and not "HostFunc" (cudaLaunchHostFunc runs
 *                  on the host and has no device record).
 *   overhead       cat "overhead": CUPTI's own records (Kineto: pid -1, tid 0,
 *                  no args; "Activity Buffer Request", "Lazy Function
 *                  Loading", "Instrumentation", ...).
 *   operators      cat "cpu_op" and "user_annotation", for where an
 *                  overhead record landed.
 *   steps          user_annotation events named "ProfilerStep#<n>".
 *
 * The checks:
 *   - a launch and the device events of its correlation belong together;
 *     a launch with none is `missing` (a dropped record: a corrupt
 *     timestamp put it out of the window, T #192021, or the buffer cap
 *     stopped collection); one of them before the first launch that has
 *     its device event is also `missing_head` (#192021's signature: the
 *     first launches of a later session). A device event whose correlation
 *     no launch has is an orphan (its launch fell before the window). A
 *     device event without an integer correlation is only counted
 *     (`device_uncorrelated`). Several launches of one correlation: the
 *     earliest is matched, the others counted (`duplicate_launches`).
 *   - `bad_time`: a device event with dur <= 0 (Kineto clamps a negative
 *     duration to 0) or that starts before its launch (a clock offset;
 *     `before_launch`).
 *   - `external_id_mismatch`: a device event whose "External id" differs
 *     from its launch's, one of them having none included.
 *   - the launch-to-device gap (the first device event's start minus the
 *     launch's), min, median and max over matched launches: a gap that
 *     grows session by session is T #175790's signature.
 *   - overhead records: count and total per name, and each record's
 *     operator and launch. The launch is the one whose interval overlaps
 *     the record's most (ties: the earlier start, then file order); a
 *     zero-length interval overlaps what holds it, intervals that only
 *     touch do not. The operator is the innermost cpu_op or user_annotation
 *     that contains the record's start (op.ts <= ts < op.ts + op.dur), by
 *     the nesting rule of docs/design.md per thread: first on the thread
 *     of the record's launch, if it has one; otherwise, on any thread, the
 *     one that started last (ties: the shorter, then the thread first
 *     seen). The audit only reports them: no overhead time is added to or
 *     taken from any operator's (a record lands in an operator by time, as
 *     CUPTI gives it no link; torch once charged the operator's device time
 *     to each record: T PR #193924).
 *   - ProfilerStep#<n> spans in time order, so the caller can tell a first
 *     active step that ran long (a warm-up too short).
 * Lists keep the first max_records entries in time order (missing
 * launches, orphans, bad-time device events, overhead records); counts are
 * over all.
 *
 * Memory: O(events of the categories above): per device event 48 bytes,
 * per launch 48 (and 8 for its gap), per operator 32, per overhead record
 * 24, per step 24, plus the distinct names and threads; never the other
 * events. Time: O(n log n) in those events (sorted once each), plus, per
 * overhead record, the launches that overlap it and the nesting depth.
 *
 * Ownership: osk_audit_new or the one-call audits create it into the
 * caller's pointer; the caller frees it with osk_audit_free. Rows and
 * strings the accessors return are the audit's, valid until then. One
 * thread at a time while events are added; after osk_audit_finish it is
 * only read, and its accessors may be called from several threads at once.
 */
typedef struct osk_audit osk_audit_t;

#define OSK_AUDIT_RECORDS_DEFAULT 100
#define OSK_AUDIT_RECORDS_NONE SIZE_MAX

/* Audit options. The caller owns them; the audit copies them. */
typedef struct {
  /* Entries each list keeps (osk_audit_event, osk_audit_overhead): 0 is
   * OSK_AUDIT_RECORDS_DEFAULT; OSK_AUDIT_RECORDS_NONE keeps none (counts
   * only). */
  size_t max_records;
} osk_audit_opts_t;

/* The audit's counters; owned by it. Times in ns. */
typedef struct {
  uint64_t events;               /* events handed to osk_audit_add */
  uint64_t device_events;        /* kernel, gpu_memcpy, gpu_memset with ts and dur */
  uint64_t device_uncorrelated;  /* of them, without an integer args.correlation */
  uint64_t launches;             /* launches with a correlation, ts and dur >= 0 */
  uint64_t missing;              /* launches without a device event of their correlation */
  uint64_t missing_head;         /* of them, before the first launch that has one */
  uint64_t orphans;              /* device events whose correlation no launch has */
  uint64_t bad_time;             /* device events with dur <= 0 or before their launch */
  uint64_t before_launch;        /* of them, those that start before their launch */
  uint64_t external_id_mismatch; /* device events whose External id is not their launch's */
  uint64_t duplicate_launches;   /* launches of a correlation an earlier launch has */
  uint64_t matched_launches;     /* launches with their device events */
  int64_t gap_min_ns, gap_p50_ns, gap_max_ns; /* launch -> first device event; 0 when none */
  uint64_t overhead_events;      /* overhead records (with ts and dur >= 0) */
  int64_t overhead_ns;           /* their total duration (saturating) */
  uint64_t overhead_in_launch;   /* records that overlap a launch */
  int64_t overhead_in_launch_ns;
  uint64_t overhead_in_op;       /* records that landed in an operator */
  int64_t overhead_in_op_ns;
  uint64_t operators;            /* cpu_op and user_annotation events held */
  uint64_t steps;                /* ProfilerStep#<n> annotations */
  uint64_t unusable;             /* events of the categories above the audit could not
                                  * use: no ts or dur, a negative dur where a launch,
                                  * operator or overhead record needs one, a BAD field */
  int truncated;                 /* the one-call audits: the trace ended early
                                  * (OSK_ETRUNCATED); what was read is audited */
} osk_audit_stats_t;

/* One overhead record; owned by the audit, as its strings. */
typedef struct {
  osk_str_t name;             /* its kind: the event's name */
  int64_t ts_ns, dur_ns;
  osk_str_t op;               /* the operator it landed in; ptr NULL when none */
  osk_reader_id_t op_pid, op_tid; /* that operator's thread (kind NONE when none) */
  int64_t op_ts_ns, op_dur_ns;
  osk_str_t launch;           /* the launch it overlaps; ptr NULL when none */
  int64_t launch_correlation; /* that launch's correlation (0 when none) */
  int64_t launch_ts_ns, launch_dur_ns;
} osk_audit_overhead_t;

/* Overhead records of one name. */
typedef struct {
  osk_str_t name;
  uint64_t count;
  int64_t total_ns; /* saturating */
} osk_audit_overhead_kind_t;

/* The lists of osk_audit_event. */
typedef enum {
  OSK_AUDIT_MISSING = 0,  /* launches without device events */
  OSK_AUDIT_ORPHANS = 1,  /* device events without a launch */
  OSK_AUDIT_BAD_TIME = 2, /* device events with dur <= 0 or before their launch */
} osk_audit_list_t;

/* A launch (OSK_AUDIT_MISSING) or a device event (the other lists). */
typedef struct {
  osk_str_t name;
  int64_t correlation;  /* 0 when has_correlation is 0 */
  int has_correlation;
  int64_t ts_ns, dur_ns;
  int has_launch;       /* device events: it has a launch (launch_ts_ns is its start) */
  int64_t launch_ts_ns;
} osk_audit_event_t;

/* One ProfilerStep#<n> annotation. */
typedef struct {
  int64_t step; /* n */
  int64_t ts_ns, dur_ns;
} osk_audit_step_t;

/* Creates an empty audit. `opts` may be NULL. Returns 0, OSK_EINVAL,
 * OSK_ENOMEM. */
int osk_audit_new(osk_audit_t **out, const osk_audit_opts_t *opts);

/* Adds one event (an osk_reader_event_fn: pass the audit as ctx). Returns 0,
 * OSK_ENOMEM, OSK_ERANGE (more than 2^32 - 2 events of one kind), OSK_EINVAL
 * (after osk_audit_finish). */
int osk_audit_add(void *audit, const osk_reader_event_t *ev);

/* Matches launches and device events, places the overhead records, sorts
 * the lists. Call once, after the last event; the accessors need it.
 * Returns 0, OSK_ENOMEM, OSK_EINVAL (called twice). */
int osk_audit_finish(osk_audit_t *a);

/* Reads a trace file ("-" and pipes as osk_reader_open: one pass) and
 * audits it. On success and on OSK_ETRUNCATED (stats.truncated set) and
 * OSK_EFORMAT, *out holds the audit of everything read before the end or
 * the error (finished; free it with osk_audit_free); on other failures *out
 * is NULL. `rstats` (may be NULL) receives the reader's counters. Return
 * codes as osk_reader_run. */
int osk_audit_from_path(const char *path, const osk_audit_opts_t *opts,
                        const osk_reader_opts_t *ropts, osk_audit_t **out,
                        osk_reader_stats_t *rstats, osk_error_t *err);

/* The same from memory (`piece` as in osk_reader_open_mem). */
int osk_audit_from_mem(const void *data, size_t len, size_t piece, const osk_audit_opts_t *opts,
                       const osk_reader_opts_t *ropts, osk_audit_t **out,
                       osk_reader_stats_t *rstats, osk_error_t *err);

/* Results (after osk_audit_finish; before it: counts 0, rows NULL). Pointers
 * stay valid until osk_audit_free. */
const osk_audit_stats_t *osk_audit_stats(const osk_audit_t *a);
/* Overhead names, by total time (largest first; ties: count, then name). */
size_t osk_audit_overhead_kind_count(const osk_audit_t *a);
const osk_audit_overhead_kind_t *osk_audit_overhead_kind(const osk_audit_t *a, size_t i);
/* The first max_records overhead records in time order (ts, then file order). */
size_t osk_audit_overhead_count(const osk_audit_t *a);
const osk_audit_overhead_t *osk_audit_overhead(const osk_audit_t *a, size_t i);
/* The first max_records entries of a list, in time order (ts, then file order). */
size_t osk_audit_event_count(const osk_audit_t *a, osk_audit_list_t list);
const osk_audit_event_t *osk_audit_event(const osk_audit_t *a, osk_audit_list_t list, size_t i);
/* Every ProfilerStep#<n> in time order (ts, then n). */
size_t osk_audit_step_count(const osk_audit_t *a);
const osk_audit_step_t *osk_audit_step(const osk_audit_t *a, size_t i);

/* Frees everything; NULL is a no-op. */
void osk_audit_free(osk_audit_t *a);

#ifdef __cplusplus
}
#endif
#endif /* OPSKEW_READER_H */
