/*
 * opskew_trace.h: the operator tracer runtime (C11, no Python.h).
 *
 * Contents: recording | losses | calibration | sessions and snapshots |
 *           Chrome trace | summary | session outputs | collectors | layouts
 *
 * Model. A collector (the ITT collector in csrc/trace/itt_collector.c, or a
 * test) calls osk_trace_begin()/osk_trace_end() from whatever thread runs an
 * operator. Each thread appends complete events (begin tick, end tick, name,
 * nesting depth) to its own chunk of memory without locks; a full chunk is
 * handed to a global list and the thread takes a fresh one, so nothing is
 * dropped while memory lasts; past the session's memory budget, full chunks
 * go to a spill file instead and are read back with the snapshot (see
 * osk_trace_set_budget). Timestamps are raw osk_clock_ticks(); they are
 * converted to nanoseconds only when a snapshot is read. Anything that could
 * not be recorded is counted by cause and reported with the snapshot.
 *
 * A session is the interval between osk_trace_start() and osk_trace_stop();
 * stop hands the caller a snapshot that owns every event recorded in the
 * session.
 * Snapshots are immutable and may be read from any thread.
 *
 * Thread safety: every function may be called from any thread unless its
 * comment says otherwise. Recording functions never block except when a
 * chunk fills (one short mutex section per 4096 events; past the budget that
 * section also writes the chunk, 96 KiB, to the spill file).
 *
 * Ownership: the tracer owns the interned names and categories for the life
 * of the process. Snapshots and summaries are created into the caller's
 * pointer (int return, `T **out`, as everywhere in opskew) and freed by the
 * caller; strings the summary formats are malloc'ed and freed with
 * osk_trace_free(). Prefixes: osk_trace_ for the runtime, osk_collector_ for
 * the life cycle every collector exports. The tracer's event type,
 * osk_trace_event_t, is not the reader's (osk_reader_event_t).
 */
#ifndef OPSKEW_TRACE_H
#define OPSKEW_TRACE_H

#include <stddef.h>
#include <stdint.h>

#include "opskew.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Symbols that a shared collector exports to Python (ctypes) and to tests. */
#if defined(__GNUC__)
#define OSK_TRACE_API __attribute__((visibility("default")))
#else
#define OSK_TRACE_API
#endif

/* -------------------------------------------------------------- recording */

/* An interned operator name. Opaque. The tracer owns every entry: never
 * freed or moved, so a pointer stays valid for the life of the process and
 * may be shared by any threads. */
typedef struct osk_trace_name osk_trace_name_t;

/* Returns the interned entry for the NUL-terminated string `s`. The fast path
 * is a per-thread cache keyed by the pointer `s`, verified against the stored
 * copy (a caller may reuse the same buffer for another string); a miss falls
 * back to a lock-free content hash lookup, and a new name is inserted under a
 * mutex. Returns NULL if `s` is NULL or memory ran out (counted as a loss of
 * cause OSK_TRACE_LOSS_NAME when the event is then recorded without name).
 * Unlike the constructors it returns the entry itself, not a code and an
 * out-parameter: it runs on the hot path, once per operator a collector
 * sees, the caller frees nothing, and its one failure needs no detail (the
 * event is recorded without a name and the loss counted). */
OSK_TRACE_API osk_trace_name_t *osk_trace_name(const char *s);

/* Dense id of a name (1, 2, ...; 0 is reserved for "no name"). */
OSK_TRACE_API uint32_t osk_trace_name_id(const osk_trace_name_t *name);
/* The stored copy of the name; never NULL for a non-NULL entry. */
OSK_TRACE_API const char *osk_trace_name_str(const osk_trace_name_t *name);
/* One pointer-sized slot per name that a collector may use to attach its own
 * handle. Read with acquire, write with release semantics (it is _Atomic). */
OSK_TRACE_API void *osk_trace_name_slot_get(const osk_trace_name_t *name);
OSK_TRACE_API void osk_trace_name_slot_set(osk_trace_name_t *name, void *value);

/* Interns an event category ("cpu_op" is always id 0). At most 255
 * categories; beyond that, and on allocation failure, returns 0. */
OSK_TRACE_API uint16_t osk_trace_category(const char *s);

/* Opens an operator on the calling thread: takes the begin timestamp and
 * pushes it on the thread's stack of open operators. `name` may be NULL
 * (recorded as "<unnamed>"). Recorded only if a session is active at begin. */
OSK_TRACE_API void osk_trace_begin(const osk_trace_name_t *name, uint16_t category);
/* Closes the innermost open operator of the calling thread and appends the
 * complete event. An end without a matching begin is counted, not recorded. */
OSK_TRACE_API void osk_trace_end(void);

/* Nesting guard: while a thread is inside the tracer's own code (flush,
 * write, calibration) its begin/end calls are ignored, so the tracer never
 * records itself. Returns the previous state. */
OSK_TRACE_API int osk_trace_guard_enter(void);
OSK_TRACE_API void osk_trace_guard_leave(int previous);

/* ------------------------------------------------------- losses, counters */

/* Why an event was not recorded. Written into every trace. */
#define OSK_TRACE_LOSS_MAP(X)                                                 \
  X(NOMEM_CHUNK, "nomem_chunk", "no memory for a new event chunk")            \
  X(NOMEM_THREAD, "nomem_thread", "no memory for a thread's tracer state")    \
  X(DEPTH, "depth", "operator nested deeper than the tracer's stack")          \
  X(NAME, "name", "recorded without a name: no memory to intern it")          \
  X(SPILL, "spill", "past the memory budget, the spill file could not be created or written")

typedef enum {
#define OSK__LOSS_ENUM(id, key, msg) OSK_TRACE_LOSS_##id,
  OSK_TRACE_LOSS_MAP(OSK__LOSS_ENUM)
#undef OSK__LOSS_ENUM
  OSK_TRACE_LOSS_COUNT
} osk_trace_loss_t;

/* Number of loss causes (OSK_TRACE_LOSS_COUNT), for bindings. */
OSK_TRACE_API int osk_trace_loss_count(void);
/* Short JSON key ("nomem_chunk") and message of a loss cause; never NULL. */
OSK_TRACE_API const char *osk_trace_loss_key(int cause);
OSK_TRACE_API const char *osk_trace_loss_message(int cause);

/* ------------------------------------------------------------ calibration */

/* The tracer's own cost, measured on this machine at session start.
 * `delta_ns`: the part of one begin+end pair that falls inside the recorded
 * interval (the recorded duration of an empty operator). `w_ns`: the wall
 * time one begin+end pair adds. Both are medians over `rounds` rounds of
 * `pairs` pairs. Scope: the collector's entry points only; the cost of
 * PyTorch's RecordFunction dispatch is not included (the bench measures
 * that). The summary subtracts them: see osk_trace_summarize(). Plain
 * values: the caller owns it; a session and its snapshot keep a copy. */
typedef struct {
  double w_ns;
  double delta_ns;
  double w_spread_ns;     /* (max - min) of the per-round W medians */
  uint32_t pairs;
  uint32_t rounds;
  int valid;              /* 0 until measured */
} osk_trace_calib_t;

/* One begin+end pair through a collector's entry points, for calibration. */
typedef void (*osk_trace_pair_fn)(void *ctx);

/* Measures the calibration with `pair` (NULL: osk_trace_begin/end directly),
 * on the calling thread, into a private buffer that never reaches a trace.
 * Takes about 10 ms. Returns 0 or OSK_ENOMEM. */
OSK_TRACE_API int osk_trace_calibrate(osk_trace_pair_fn pair, void *ctx,
                                      osk_trace_calib_t *out);

/* ------------------------------------------------- sessions and snapshots */

/* The events of a session, with their names, losses and calibration.
 * Opaque. osk_trace_stop() or osk_trace_collect() creates it into the
 * caller's pointer; the caller frees it with osk_trace_snapshot_free(),
 * after any summary made from it. It never changes once made: any threads
 * may read it at once. */
typedef struct osk_trace_snapshot osk_trace_snapshot_t;

/* Starts recording. `calib` (may be NULL) is stored with the session and
 * copied into its snapshot. The memory budget is fixed here (see
 * osk_trace_set_budget). Returns 0, or OSK_EINVAL if a session is already
 * active or OPSKEW_TRACE_BUDGET_MB is invalid (then a line on stderr says
 * which value and what is expected). */
OSK_TRACE_API int osk_trace_start(const osk_trace_calib_t *calib);
/* 1 while a session is active. */
OSK_TRACE_API int osk_trace_active(void);

/* The memory budget: bytes of full event chunks (24 bytes an event, 4096
 * events a chunk) a session keeps in memory before it appends further full
 * chunks to its spill file (created in $TMPDIR, else /tmp, unlinked as soon
 * as it is open) and reads them back when the snapshot is written or read.
 * Nothing is lost by spilling; a chunk the file cannot take is counted as
 * lost (OSK_TRACE_LOSS_SPILL). Each thread's current chunk (96 KiB) is on
 * top of the budget. */
#define OSK_TRACE_BUDGET_DEFAULT_MB 256
/* osk_trace_set_budget(OSK_TRACE_BUDGET_ENV): take it from the environment
 * variable OPSKEW_TRACE_BUDGET_MB at each start (a whole number of MiB; 0:
 * never spill; unset or empty: OSK_TRACE_BUDGET_DEFAULT_MB). The default. */
#define OSK_TRACE_BUDGET_ENV (-1)
/* Sets the budget in bytes for the sessions started afterwards (0: never
 * spill; OSK_TRACE_BUDGET_ENV: from the environment). Returns 0, or
 * OSK_EINVAL for any other negative value. */
OSK_TRACE_API int osk_trace_set_budget(int64_t bytes);
/* The budget in bytes that OPSKEW_TRACE_BUDGET_MB asks for (unset or empty:
 * the default), into *bytes. Returns 0, or OSK_EINVAL if the value is not a
 * whole number of MiB (digits only, at most 2^40). */
OSK_TRACE_API int osk_trace_budget_from_env(int64_t *bytes);

/* Stops recording and sets *out to a snapshot owning every event recorded
 * since osk_trace_start(). `instrument` names what produced the events
 * ("itt", "pyhook", "nvtx"; at most 31 bytes; NULL: "unknown"); it is
 * copied. Events still open at stop are not in the snapshot; their number is
 * reported (open_at_stop). Returns 0; OSK_EINVAL (`out` NULL, or no active
 * session: *out NULL); OSK_ENOMEM, with *out NULL, or with *out holding the
 * events that could be copied (the rest stay with their threads for a
 * later collect). The caller frees a non-NULL *out with
 * osk_trace_snapshot_free(). These report only a code: there is no input
 * position or errno to give, so they take no osk_error_t. */
OSK_TRACE_API int osk_trace_stop(const char *instrument, osk_trace_snapshot_t **out);

/* Takes events recorded so far without ending the session (used by tests
 * and by a flush at exit while threads may still run). Same returns and
 * ownership as osk_trace_stop(), except that it needs no active session. */
OSK_TRACE_API int osk_trace_collect(const char *instrument, osk_trace_snapshot_t **out);

/* Frees the snapshot and its events; NULL is a no-op. */
OSK_TRACE_API void osk_trace_snapshot_free(osk_trace_snapshot_t *snap);

/* Counts. */
OSK_TRACE_API size_t osk_trace_snapshot_events(const osk_trace_snapshot_t *snap);
OSK_TRACE_API uint64_t osk_trace_snapshot_lost(const osk_trace_snapshot_t *snap, int cause);
OSK_TRACE_API uint64_t osk_trace_snapshot_lost_total(const osk_trace_snapshot_t *snap);
OSK_TRACE_API uint64_t osk_trace_snapshot_unmatched_ends(const osk_trace_snapshot_t *snap);
OSK_TRACE_API uint64_t osk_trace_snapshot_open_at_stop(const osk_trace_snapshot_t *snap);
OSK_TRACE_API const osk_trace_calib_t *osk_trace_snapshot_calib(const osk_trace_snapshot_t *snap);

/* One W for the tracer everywhere (docs/tracer.md). The self-calibration
 * above times the collector's entry points only; what the tracer adds per
 * operator in the window (RecordFunction's dispatch included) is what
 * `opskew calibrate` measures and stores. osk_trace_set_cost(W, source)
 * makes every snapshot taken after it carry that W (its delta stays the
 * self-calibrated one, capped at W), and `source` (copied, at most
 * OSK_TRACE_SOURCE_MAX - 1 bytes) says where it came from; the trace's
 * header, the summary and `opskew correct` then use the same W. A negative
 * W goes back to the self-calibration. Returns 0, or OSK_EINVAL for a W that
 * is not a number or above 1 ms. Any thread. */
#define OSK_TRACE_SOURCE_MAX 160
OSK_TRACE_API int osk_trace_set_cost(double w_ns, const char *source);
/* Now, in nanoseconds on the time line the snapshots' events are written on
 * (CLOCK_MONOTONIC_RAW's, through this process's clock calibration): for
 * bounds that osk_trace_summarize_window compares with events' times. Read
 * from clock_gettime directly, a long-lived process's calibrated TSC can be
 * hundreds of us away from it. Any thread. */
OSK_TRACE_API int64_t osk_trace_now_ns(void);
/* Where the snapshot's calib.w_ns came from: the source given to
 * osk_trace_set_cost, or "self-calibrated ..." (never NULL). */
OSK_TRACE_API const char *osk_trace_snapshot_w_source(const osk_trace_snapshot_t *snap);
/* Events of the snapshot that were spilled to disk past the memory budget
 * (all of them are in the snapshot: spilling loses nothing), and the budget
 * of the session in bytes (0: never spills). */
OSK_TRACE_API uint64_t osk_trace_snapshot_spilled(const osk_trace_snapshot_t *snap);
OSK_TRACE_API int64_t osk_trace_snapshot_budget(const osk_trace_snapshot_t *snap);

/* Names referenced by the snapshot: ids 0..osk_trace_snapshot_names()-1,
 * id 0 is "<unnamed>". Strings are owned by the tracer (never freed). */
OSK_TRACE_API uint32_t osk_trace_snapshot_names(const osk_trace_snapshot_t *snap);
OSK_TRACE_API const char *osk_trace_snapshot_name(const osk_trace_snapshot_t *snap, uint32_t id);
OSK_TRACE_API uint32_t osk_trace_snapshot_categories(const osk_trace_snapshot_t *snap);
OSK_TRACE_API const char *osk_trace_snapshot_category(const osk_trace_snapshot_t *snap, uint32_t id);

/* One complete event, in nanoseconds on CLOCK_MONOTONIC_RAW's time line.
 * Plain values, copied into the caller's array by osk_trace_snapshot_copy;
 * `name` and `category` are ids into the snapshot's tables. */
typedef struct {
  int64_t ts_ns;
  int64_t dur_ns;
  uint32_t name;     /* snapshot name id */
  uint32_t tid;      /* kernel thread id */
  uint16_t depth;    /* 0 for a top-level operator of its thread */
  uint16_t category; /* snapshot category id */
  uint32_t reserved;
} osk_trace_event_t;

/* Copies up to `cap` events starting at event `first` into `out` (grouped by
 * thread; within a thread in the order operators ended, which is not the
 * Chrome trace's order: see osk_trace_write_chrome). Spilled events are read
 * back from the spill file. Returns the number copied (fewer if reading the
 * spill file failed). Columns instead of structs for bindings: any pointer
 * may be NULL. */
OSK_TRACE_API size_t osk_trace_snapshot_copy(const osk_trace_snapshot_t *snap, size_t first,
                                             size_t cap, osk_trace_event_t *out);
OSK_TRACE_API size_t osk_trace_snapshot_columns(const osk_trace_snapshot_t *snap,
                                                int64_t *ts_ns, int64_t *dur_ns,
                                                uint32_t *name, uint32_t *tid,
                                                uint16_t *depth);

/* -------------------------------------------------------- Chrome trace */

/* Writes the snapshot as Chrome trace JSON with Kineto's conventions
 * (ph "X", cat "cpu_op", ts/dur in microseconds with nanosecond fractions,
 * process and thread metadata events) and an "opskew" object with the
 * clock, the calibration, the losses and the spill. Events are grouped by
 * thread and, within a thread, in time order: start ascending, at equal
 * starts the longer (the parent) first, as osk__nest_order sorts them, so a
 * reader nests them in one pass. Memory: one top-level operator's tree at a
 * time (spilled events are streamed back). Writes a new temporary file next
 * to `path` (mode 0666 less the umask, or an existing regular file's own
 * permission bits), fsyncs it and renames it over
 * `path`, so a reader never sees half a file. Returns 0, OSK_EIO, OSK_ENOMEM
 * or OSK_EINVAL. */
OSK_TRACE_API int osk_trace_write_chrome(const osk_trace_snapshot_t *snap, const char *path);

/* Escapes `s` for a JSON string body (without quotes) into `out` (capacity
 * `cap`, NUL-terminated when cap > 0). Returns the length needed, excluding
 * the NUL: if it is >= cap the output was truncated. */
OSK_TRACE_API size_t osk_trace_json_escape(const char *s, char *out, size_t cap);

/* ----------------------------------------------------------------- summary */

/* Per operator name, over all threads. Durations in ns. `self` excludes
 * the time of nested operators. The corrected figures remove the tracer's
 * own cost with the calibration, per call, by the formula opskew correct
 * applies to trace files (docs/design.md, "The overhead model"):
 *   total_corrected = total - delta - W*descendants, clamped at 0
 *   self_corrected  = self - delta - (W - delta)*children, clamped at 0
 * Self time and residual (the same words in opskew_trace.h and
 * opskew_correct.h): a corrected self time is the event's corrected total
 * before its clamp less its children's corrected totals before theirs,
 * clamped at 0, so a child's over-compensation stays the child's; it is not
 * bounded by the corrected total (under a clamped total it can exceed it).
 * The residual is what clamping corrected totals at 0 removed; clamping a
 * self time is not counted in it.
 * The JSON summary's "residual_ns" is that residual. Owned by the summary
 * (osk_trace_summary_row returns a pointer into it, valid until
 * osk_trace_summary_free). */
typedef struct {
  uint32_t name;
  uint64_t calls;
  int64_t total_ns;
  int64_t self_ns;
  int64_t total_corrected_ns;
  int64_t self_corrected_ns;
  double mean_ns;   /* total / calls */
  double p50_ns;    /* quantiles of one call's inclusive duration (type 7) */
  double p99_ns;
  int64_t max_ns;
  uint64_t children;    /* direct children of all calls */
  uint64_t descendants; /* all nested events of all calls */
} osk_trace_op_t;

/* A snapshot's per-operator summary. Opaque. osk_trace_summarize() creates
 * it into the caller's pointer; the caller frees it with
 * osk_trace_summary_free(). It borrows its snapshot (for names), so it must
 * be freed first. It never changes once made: any threads may read it. */
typedef struct osk_trace_summary osk_trace_summary_t;

/* Builds the summary of `snap` into *out; `calib` NULL uses the snapshot's
 * own (copied either way). The summary borrows `snap` for names: free the
 * summary first. Spilled events are read back (twice). Returns 0, OSK_EINVAL
 * (`snap` or `out` NULL), OSK_ENOMEM, OSK_EIO (the spill file could not be
 * read back);
 * *out is NULL on failure. The caller frees *out with
 * osk_trace_summary_free(). */
OSK_TRACE_API int osk_trace_summarize(const osk_trace_snapshot_t *snap,
                                      const osk_trace_calib_t *calib,
                                      osk_trace_summary_t **out);
/* osk_trace_summarize over the events that begin in [from_ns, to_ns) of the
 * snapshot's clock (CLOCK_MONOTONIC_RAW's nanoseconds: what the Chrome
 * output writes, in us): one step of several in one session (opskew.profile
 * summarizes each tracer step apart, because a session's first step runs
 * cold). An event outside the window is dropped with its children, so a
 * window that cuts through an operator counts the children inside it as
 * top-level events. from_ns > to_ns: OSK_EINVAL. */
OSK_TRACE_API int osk_trace_summarize_window(const osk_trace_snapshot_t *snap, const osk_trace_calib_t *calib,
                                             int64_t from_ns, int64_t to_ns, osk_trace_summary_t **out);
/* Frees the summary (not its snapshot); NULL is a no-op. */
OSK_TRACE_API void osk_trace_summary_free(osk_trace_summary_t *sum);
/* Rows sorted by self time, descending. */
OSK_TRACE_API size_t osk_trace_summary_rows(const osk_trace_summary_t *sum);
OSK_TRACE_API const osk_trace_op_t *osk_trace_summary_row(const osk_trace_summary_t *sum, size_t i);
/* What clamping corrected totals at 0 removed, summed over every event (the
 * residual of docs/design.md's model); 0 for a NULL summary. */
OSK_TRACE_API int64_t osk_trace_summary_residual_ns(const osk_trace_summary_t *sum);

/* A key_averages()-like table (`max_rows` 0: all) or JSON (schema
 * "opskew.trace.summary/1"), as a malloc'ed NUL-terminated string the caller
 * frees with osk_trace_free(). NULL on OSK_ENOMEM. */
OSK_TRACE_API char *osk_trace_summary_table(const osk_trace_summary_t *sum, size_t max_rows);
OSK_TRACE_API char *osk_trace_summary_json(const osk_trace_summary_t *sum);
OSK_TRACE_API void osk_trace_free(void *p);

/* ------------------------------------------------------ session outputs */

/* Writes what `opskew record` asks for at the end of a session: the Chrome
 * trace to `trace_path` and the summary as a table (`max_rows` 0: all) to
 * `summary_txt` and as JSON to `summary_json`. Any path may be NULL or ""
 * (not written). Failures are reported on stderr; returns 0 or the first
 * error (OSK_EIO, OSK_EINVAL). */
OSK_TRACE_API int osk_trace_write_outputs(const osk_trace_snapshot_t *snap, const char *trace_path,
                                          const char *summary_txt, const char *summary_json,
                                          size_t max_rows);
/* The same, with the paths from the environment that `opskew record` sets:
 * OPSKEW_TRACE_OUT, OPSKEW_SUMMARY_TXT, OPSKEW_SUMMARY_JSON, OPSKEW_SUMMARY_ROWS. */
OSK_TRACE_API int osk_trace_write_outputs_env(const osk_trace_snapshot_t *snap);

/* ------------------------------------------------------------- collectors */

/* Every collector (libopskew_itt.so, libopskew_nvtx.so, opskew._pyhook)
 * exports this same life cycle, written once (csrc/trace/collector.c), so
 * that a binding declares it once whatever the instrument. Each shared
 * object holds its own tracer runtime: call these on the object whose
 * instrument recorded. Any thread; none of them needs Python. */

/* The instrument the collector records for: "itt", "nvtx" or "pyhook".
 * Static storage; never NULL. */
OSK_TRACE_API const char *osk_collector_instrument(void);

/* Number of hosts that bound the collector (ITT globals, NVTX instances, the
 * pyhook module); 0 if none did (for ITT and NVTX: torch was imported before
 * the environment named the collector, or ran no operator yet); -1 if none
 * did and one offered an ABI the collector does not know. */
OSK_TRACE_API int osk_collector_bound(void);

/* Starts a session, with the calibration measured once per process (the
 * pyhook instrument measures it beforehand, from Python). Returns 0, or
 * OSK_EINVAL if a session is already active. */
OSK_TRACE_API int osk_collector_start(void);

/* Stops the session: osk_trace_stop() with the collector's instrument name,
 * same returns and ownership. */
OSK_TRACE_API int osk_collector_stop(osk_trace_snapshot_t **out);

/* Starts the `opskew record` session, which osk_collector_finish() writes
 * at exit (an atexit handler is registered). Refused (OSK_EINVAL) when this
 * process already records it, when a session is active, or when
 * OPSKEW_TRACE_PID names another process. */
OSK_TRACE_API int osk_collector_record_begin(void);

/* What osk_collector_finish() returns when it has nothing to write: no
 * record session was started in this process, it was written already, or it
 * was started by the parent of this forked child (whose trace it is). */
#define OSK_COLLECTOR_NOT_OURS 1

/* Ends the `opskew record` session and writes the trace and summaries named
 * by the environment (osk_trace_write_outputs_env). Idempotent; returns 0,
 * OSK_COLLECTOR_NOT_OURS, or a negative error code. */
OSK_TRACE_API int osk_collector_finish(void);

/* ----------------------------------------------------- layouts, for bindings */

/* Where `field` lies in the public struct named `type` ("osk_trace_calib_t",
 * "osk_trace_event_t", "osk_trace_op_t"): its byte offset and size; with
 * `field` NULL, the size of the struct in *size. A binding that mirrors a
 * struct checks its mirror with this when it loads. Returns 0, or OSK_EINVAL
 * for an unknown type or field. Either output pointer may be NULL. */
OSK_TRACE_API int osk_trace_abi_field(const char *type, const char *field, size_t *offset, size_t *size);

/* Number of threads with at least one event in the snapshot. */
OSK_TRACE_API size_t osk_trace_snapshot_threads(const osk_trace_snapshot_t *snap);

#ifdef __cplusplus
}
#endif
#endif /* OPSKEW_TRACE_H */
