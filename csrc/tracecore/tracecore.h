/* tracecore.h: the trace rules and the trace format, each written once.
 *
 * Three parts of opskew read or write Chrome traces: the streaming analyzer
 * (csrc/reader/summary.c), the overhead compensation (csrc/correct/) and the
 * operator tracer (csrc/trace/). What they share lives here, in its own
 * static library that each of them links, so that none depends on another
 * to get it:
 *   - interning of names, of threads by (pid, tid), and the process_name /
 *     thread_name metadata rule (intern.c);
 *   - the nesting rule (nest.c, osk__nest_push): one function decides which
 *     open events close and where a new one nests;
 *   - the correction formula of docs/design.md (correct.c,
 *     osk__correct_event);
 *   - the Chrome JSON output: one escaper, one microsecond formatter, one
 *     buffered file output that writes a temporary file next to the target
 *     and renames it into place (chrome_out.c).
 * Not part of csrc/core: that is the measurement engine (clock, statistics)
 * the calibration links, and it has no business with trace files; here the
 * library boundary is the trace format, with its own tests (tests/c/core).
 * Neither this header nor analysis.h, the reading side's interning and
 * nesting, needs a reader type: the trace core sits below the reader, whose
 * events reach analysis.h through csrc/reader/reader_analysis.h. Internal:
 * not installed, symbols hidden from the shared objects. Plain C11, never includes Python.h. Nothing here is
 * thread safe unless said so.
 */
#ifndef OPSKEW_TRACECORE_H
#define OPSKEW_TRACECORE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "opskew.h"

#if defined(__GNUC__)
#define OSK__CORE_HIDDEN __attribute__((visibility("hidden")))
#else
#define OSK__CORE_HIDDEN
#endif

/* ------------------------------------------------------------- helpers */

#define OSK__HASH_SEED 0xcbf29ce484222325ull

/* FNV-1a, the one string hash of opskew: one byte into h. Inline, so a
 * loop that hashes while it scans (the tracer's interning, which finds the
 * length as it goes) pays what a hand-written FNV step would. */
static inline uint64_t osk__hash_byte(uint64_t h, unsigned char c) {
  return (h ^ c) * 0x100000001b3ull;
}

/* FNV-1a over n bytes, continuing from h (start with OSK__HASH_SEED). */
static inline uint64_t osk__hash_bytes(uint64_t h, const void *p, size_t n) {
  const unsigned char *s = p;
  for (size_t i = 0; i < n; i++) h = osk__hash_byte(h, s[i]);
  return h;
}

/* THE clock map of a multi-rank job (opskew_job.h's fit): a rank's time t
 * on the reference rank's clock, origin + (t - origin - offset) / (1 +
 * drift), rounded to the nearest ns. The job summary and the corrected
 * traces (osk_correct_opts_t.clock_*) both map through it. */
static inline int64_t osk__clock_to_ref(int64_t t, int64_t origin, double offset, double drift) {
  double d = ((double)(t - origin) - offset) / (1 + drift);
  return origin + (int64_t)(d < 0 ? d - 0.5 : d + 0.5);
}

/* Sums of durations saturate instead of overflowing: a hostile trace can
 * hold durations near INT64_MAX ns, and signed overflow is undefined. */
static inline int64_t osk__sat_add(int64_t a, int64_t b) {
  if (b > 0 && a > INT64_MAX - b) return INT64_MAX;
  if (b < 0 && a < INT64_MIN - b) return INT64_MIN;
  return a + b;
}

/* Grows *p (elements of `elem` bytes) to hold `need`, doubling; 0 or OSK_ENOMEM. */
OSK__CORE_HIDDEN int osk__grow(void **p, size_t *cap, size_t need, size_t elem);
/* Frees the n arrays that ps[0..n) point at (osk__grow's, say), each
 * pointer left NULL; their owner resets the counts and capacities. */
OSK__CORE_HIDDEN void osk__free_arrays(void **const *ps, size_t n);
/* A NUL-terminated malloc'ed copy of n bytes, or NULL. */
OSK__CORE_HIDDEN char *osk__dup_bytes(const char *p, size_t n);
/* qsort's comparison of int64_t values, ascending. */
OSK__CORE_HIDDEN int osk__cmp_i64(const void *a, const void *b);
/* How many of the ascending a[0..n) are below t (the first index >= t). */
OSK__CORE_HIDDEN size_t osk__count_below(const int64_t *a, size_t n, int64_t t);

/* ---------------------------------------------------------- correction */

/* Event classes (osk_correct_opts_t.classes): any number up to OSK__NCLS,
 * each with its own W and delta (docs/design.md, "The overhead model").
 * The default model's two: the instrument's operators, and the Python
 * tracer's calls, which cost another W. */
enum { OSK__CLS_OP = 0, OSK__CLS_PY = 1, OSK__NCLS = 4 };


/* The instrument's cost per event, per class (docs/design.md): W in all,
 * delta of it inside the event's own interval. */
typedef struct {
  double w[OSK__NCLS], delta[OSK__NCLS];
} osk__cost_t;

typedef struct {
  double total_ns;         /* corrected inclusive duration, >= 0 */
  double self_ns;          /* corrected exclusive duration, >= 0 */
  double residual_ns;      /* what clamping total_ns at 0 removed: THE residual
                            * both callers report */
  double self_residual_ns; /* what clamping self_ns at 0 removed; not part of
                            * any reported residual */
  double raw_ns;           /* total_ns before clamping: what its parent's self subtracts */
} osk__corrected_t;

/* THE correction formula (docs/design.md, "The overhead model"):
 *   total = reported - delta(cls) - sum over classes k of W(k) * desc[k] - waited
 *   self  = total - children_raw_ns
 * desc[k] the events of class k nested inside (k < n_cls), subtracted in
 * class order. waited is the instrument time of other threads' events that
 * ran while the event (or a descendant) waited for them (compensate.c's
 * cross-thread rule; 0 for the tracer's summary, which holds one thread's
 * events).
 * each clamped at 0, total before its clamp; the residual callers report is
 * what clamping total removed (residual_ns) only. self is not clamped to
 * total: under a clamped total it can exceed it.
 * children_raw_ns is the sum of the children's totals before clamping (their
 * raw_ns, in proportion to the part of them inside this event), so that a
 * child's over-compensation stays the child's: without cuts the self time is
 *   self = reported_self - delta - sum over k of (W(k) - delta(k)) * children[k],
 * the instrument time that fell in the event's own exclusive time, whatever
 * its children's clamps did. */
OSK__CORE_HIDDEN osk__corrected_t osk__correct_event(const osk__cost_t *c, uint32_t cls,
                                                     int64_t reported_ns, const uint64_t *desc,
                                                     size_t n_cls, double waited_ns,
                                                     double children_raw_ns);

/* ------------------------------------------------------- Chrome output */

/* JSON string body of n bytes (quotes not included) into out (cap bytes,
 * NUL-terminated when cap > 0); returns the full length. Control characters
 * become escapes, invalid UTF-8 becomes U+FFFD (one bad byte would make the
 * whole file unreadable). */
OSK__CORE_HIDDEN size_t osk__json_escape(const char *s, size_t n, char *out, size_t cap);

extern OSK__CORE_HIDDEN const char osk__digits2[201];
extern OSK__CORE_HIDDEN const uint64_t osk__pow10[20];

/* Number of decimal digits of v, without a division per digit: log10 from
 * the bit length (1233/4096 ~ log10(2)), corrected by one comparison. */
static inline size_t osk__dec_len(uint64_t v) {
#if defined(__GNUC__)
  unsigned bits = 64u - (unsigned)__builtin_clzll(v | 1u);
  size_t n = (size_t)((bits * 1233u) >> 12);
  /* v | 1: zero has one digit; it never crosses a power of ten, which is even. */
  return n + ((v | 1u) >= osk__pow10[n]);
#else
  size_t n = 1;
  while (n < 20 && v >= osk__pow10[n]) n++;
  return n;
#endif
}

/* Writes v in decimal at p and returns the end: two digits per step from a
 * table, backwards after counting the digits (no printf: formatting is most
 * of a writer's CPU time after the copy into the kernel). */
static inline char *osk__put_dec(char *p, uint64_t v) {
  char *end = p + osk__dec_len(v);
  char *q = end;
  while (v >= 100) {
    unsigned r = (unsigned)(v % 100);
    v /= 100;
    *--q = osk__digits2[2 * r + 1];
    *--q = osk__digits2[2 * r];
  }
  if (v >= 10) {
    *--q = osk__digits2[2 * v + 1];
    *--q = osk__digits2[2 * v];
  } else {
    *--q = (char)('0' + v);
  }
  return end;
}

/* Microseconds with a 3-digit nanosecond fraction, from integer ns (Kineto's
 * format; the reader converts it back exactly). At most 25 bytes. */
static inline char *osk__put_us(char *p, int64_t ns) {
  uint64_t u;
  if (ns < 0) {
    *p++ = '-';
    u = (uint64_t)(-(ns + 1)) + 1u;
  } else {
    u = (uint64_t)ns;
  }
  p = osk__put_dec(p, u / 1000u);
  unsigned f = (unsigned)(u % 1000u);
  p[0] = '.';
  p[1] = (char)('0' + f / 100);
  p[2] = osk__digits2[2 * (f % 100)];
  p[3] = osk__digits2[2 * (f % 100) + 1];
  return p + 4;
}

/* The one way opskew writes a file (traces, corrected traces, and through
 * opskew._engine.write_file every Python output: JSON, CSV, plots,
 * calibrations, snippets); the rules are in docs/outputs.md. What the
 * target names decides how (osk__out_target):
 *   - nothing, or a regular file (or a symbolic link to one, written
 *     through: the link's target is replaced and the link stays): a
 *     temporary file next to it, "<path>.tmp-opskew.<pid>.<n>" (n = 0, 1, ...
 *     tried in turn; "<folder>/.tmp-opskew.<pid>.<n>" when that name would
 *     pass 255 bytes), created with O_CREAT|O_EXCL|O_NOFOLLOW and mode 0666
 *     less the umask, or the replaced file's own 0777 bits; written, fsynced
 *     and renamed into place. Readers never see half a file; a failure
 *     leaves the old file and removes only the temporary file.
 *   - "-": standard output, written as it goes;
 *   - a character device (/dev/null, a terminal): opened O_WRONLY, without
 *     O_CREAT or O_TRUNC, written as it goes; never removed or replaced;
 *   - anything else (a directory, a FIFO, a socket, a block device, a link
 *     to nothing) is refused; nothing is created.
 * Nothing but the temporary file this writer created is ever unlinked, and
 * rename never goes over something that is not a regular file. */
enum {
  OSK__OUT_NEW = 1, /* nothing there yet: created */
  OSK__OUT_FILE,    /* a regular file, or a symbolic link to one: replaced */
  OSK__OUT_DEVICE,  /* a character device: written through */
  OSK__OUT_STDOUT,  /* "-": standard output */
  OSK__OUT_REFUSED, /* anything else */
};

/* What a path names for the writer, before writing: kind; for
 * OSK__OUT_REFUSED, sys_errno (EISDIR for a directory, EINVAL for another
 * kind of file, or the errno of the lookup: ELOOP, ENOENT for a missing
 * folder or a link to nothing, EACCES, ENOTDIR) and `what` (a static
 * description, "a directory", "a named pipe (FIFO)", ..., or NULL when
 * sys_errno says it all); dev and ino of the existing file (after links),
 * and link when the path itself is a symbolic link. */
typedef struct {
  int kind;
  int sys_errno;
  const char *what;
  int link;
  uint64_t dev, ino;
} osk__out_target_t;

/* Fills t; returns 0, OSK_EIO (refused) or OSK_ENOMEM. */
OSK__CORE_HIDDEN int osk__out_target(const char *path, osk__out_target_t *t);

/* The n-th temporary name osk__out_open tries for path in this process
 * (tests plant files there). Returns 0, or OSK_EINVAL if cap is too small. */
OSK__CORE_HIDDEN int osk__out_tmp_name(char *out, size_t cap, const char *path, unsigned n);

/* A file written through one large buffer and write(2), as above. */
typedef struct {
  int fd;
  char *buf;
  size_t len;
  size_t cap;    /* the flush threshold; buf holds cap + slack bytes */
  int failed;
  int sys_errno; /* errno of the first failure */
  char *tmp;     /* the temporary file's path while it exists */
  char *path;    /* the file renamed into place (a link's target, resolved) */
  int kind;      /* OSK__OUT_* of the target */
  const char *refused; /* a refused target: what it is (static), or NULL */
  void *z;             /* a z_stream while the file is written gzipped (osk__out_gzip_by_name) */
  unsigned char *zbuf; /* deflate's output chunk */
} osk__out_t;

/* Opens the output for path as described above. `slack`: bytes callers may
 * append directly at buf + len beyond cap; a caller writing directly calls
 * osk__out_flush before len would pass cap + slack.
 * Returns 0, OSK_EIO (sys_errno and errno say why; `refused` what a refused
 * target is) or OSK_ENOMEM. */
OSK__CORE_HIDDEN int osk__out_open(osk__out_t *o, const char *path, size_t slack);
/* After a successful open: when the target is a regular file whose name
 * ends in ".gz", everything put from here on is written gzip-compressed, as
 * it goes (what reads by the name, gzip.open or HTA, then opens it).
 * Standard output and devices are written as they are. Returns 0, or
 * OSK_ENOMEM (the output is then discarded). */
OSK__CORE_HIDDEN int osk__out_gzip_by_name(osk__out_t *o, const char *path);
OSK__CORE_HIDDEN void osk__out_flush(osk__out_t *o);
OSK__CORE_HIDDEN void osk__out_put(osk__out_t *o, const char *s, size_t n);
OSK__CORE_HIDDEN void osk__out_puts(osk__out_t *o, const char *s);
/* A quoted, escaped JSON string of n bytes. */
OSK__CORE_HIDDEN void osk__out_str(osk__out_t *o, const char *s, size_t n);
OSK__CORE_HIDDEN void osk__out_u64(osk__out_t *o, uint64_t v);
OSK__CORE_HIDDEN void osk__out_i64(osk__out_t *o, int64_t v);
OSK__CORE_HIDDEN void osk__out_us(osk__out_t *o, int64_t ns);
/* A double as %.10g; non-finite values become null (JSON has no NaN). */
OSK__CORE_HIDDEN void osk__out_num(osk__out_t *o, double v);
/* `text` (what precedes the number: separator, quoted key, colon), then v
 * as osk__out_num writes it: one number member of a JSON object. */
OSK__CORE_HIDDEN void osk__out_key_num(osk__out_t *o, const char *text, double v);
/* The same into out (at least 32 bytes, NUL-terminated); returns the length. */
OSK__CORE_HIDDEN size_t osk__fmt_num(char *out, double v);
/* Flushes, fsyncs, closes and renames the file into place (a device or
 * standard output: flushes and closes); on any failure unlinks the
 * temporary file (only it). Returns 0 or OSK_EIO (sys_errno, errno and
 * refused say why, as for open). */
OSK__CORE_HIDDEN int osk__out_commit(osk__out_t *o);
/* Closes and unlinks the temporary file, and frees; safe after commit and
 * after a failed open; keeps errno. */
OSK__CORE_HIDDEN void osk__out_discard(osk__out_t *o);

/* ------------------------------------------------- float64 readers (f64.c)
 *
 * Viewers and scripts (torch-tb-profiler, HTA, pandas) read "ts" and "dur"
 * as float64 microseconds and an event's end as ts + dur in float64. Near
 * ts = 5.8e12 us one ulp is about 1 ns, so an exact tie the writer makes (a
 * child ending where its parent ends, siblings abutting) can read as an
 * overlap. The rule (docs/outputs.md, "Read as float64"): where an event's
 * end does not read as the double nearest its exact value (`exact` below) and
 * lies within float64's reach (`near`) of a boundary of another event of its
 * thread with which float64 reads it nested otherwise than the exact text
 * (osk__f64_relation), the inner event of the two moves earlier, a ns at a
 * time, whole (with what it holds) where the time before it is free, else
 * its end alone, until it reads the same or exactly. Elsewhere float64's
 * error is smaller than the distance and cannot change the nesting. */

/* The double a reader gets from the "%.3f"-microsecond text of ns
 * (strtod's correctly rounded result). */
OSK__CORE_HIDDEN double osk__us_f64(int64_t ns);
/* Whether ts + dur, both read as float64 and added in float64, is the double
 * nearest the exact end (ns). */
OSK__CORE_HIDDEN int osk__f64_exact(int64_t ts, int64_t end);
/* Whether a and b (ns) are within float64's reach of each other: two
 * readings of them, each off by up to the error of an end that is not exact,
 * could cross (3 ulp of the larger magnitude; equal values always). */
OSK__CORE_HIDDEN int osk__f64_near(int64_t a, int64_t b);
/* What holds between events [sa, ea] and [sb, eb] (ns), read exactly
 * (as_f64 0) or as float64 readers read the text (ts, and ts + dur in
 * float64): bit 0 a holds b, bit 1 b holds a, bit 2 disjoint (touching
 * included); 0: they overlap. A float64 reading nests a pair as the exact
 * one when it keeps every bit the exact one has (and 0 stays 0). */
OSK__CORE_HIDDEN unsigned osk__f64_relation(int64_t sa, int64_t ea, int64_t sb, int64_t eb, int as_f64);
/* The latest end in [ts, end] that reads exactly (osk__f64_exact); ts at
 * worst (a zero duration always does). */
OSK__CORE_HIDDEN int64_t osk__f64_exact_end(int64_t ts, int64_t end);

/* One tree of a thread, made float-safe in place: s[i], e[i] its events'
 * written boundaries in pre-order (a parent before its children, parent[i]
 * its index or UINT32_MAX for the root, properly or improperly nested);
 * mark[i] nonzero: make i's end exact whatever is near it. Events only move
 * earlier, whole into free time before them (their durations kept) or by
 * their end; a child whose end was inside its parent's stays inside it;
 * after 16 rounds every end is made exact (osk__f64_exact_end).
 * The caller fills s, e, parent and mark after osk__f64_reserve(n). */
typedef struct {
  int64_t *s, *e, *s0, *e0, *cut, *shift, *sh;
  uint32_t *parent, *sib;
  unsigned char *mark, *hit;
  struct osk__f64_pt *pt;
  size_t cap, pt_cap;
  uint64_t moved; /* ends moved, over the scratch's life */
} osk__f64_tree_t;
OSK__CORE_HIDDEN int osk__f64_reserve(osk__f64_tree_t *t, size_t n);
/* Returns 0, or OSK_ENOMEM; *moved_ns (may be NULL) gets what the ends
 * lost. extra[0..n_extra): other boundaries of the thread (fixed) that the
 * tree's ends must keep out of reach of, or read exactly. */
OSK__CORE_HIDDEN int osk__f64_fix(osk__f64_tree_t *t, size_t n, const int64_t *extra, size_t n_extra,
                                  int64_t *moved_ns);
OSK__CORE_HIDDEN void osk__f64_free(osk__f64_tree_t *t);

/* Between a thread's trees, written one after another: what the previous
 * tree left. A tree that begins within reach of the previous tree's inexact
 * root end is moved later, whole (osk__f64_next returns by how many ns). A
 * tree whose root was outlived by a later event (the next tree begins inside
 * it) is written with every end exact, and its ends that may lie inside the
 * next tree (those of events outlived, clipped Python tails) are kept
 * (osk__f64_keep) and count as boundaries of the next tree
 * (osk__f64_fix's `extra`). */
typedef struct {
  int valid;      /* a tree was written */
  int64_t end;    /* its root's written end */
  int end_exact;  /* that end reads exactly */
  int64_t *kept;  /* its ends that may lie inside the next tree */
  size_t n_kept, cap_kept;
} osk__f64_line_t;
/* For the next tree, whose earliest written start is `first`: the ns to
 * move it later by. */
OSK__CORE_HIDDEN int64_t osk__f64_next(const osk__f64_line_t *l, int64_t first);
/* The same for the tree in t (n events, its root first), moved by it;
 * *nudge (the thread's) grows by it. Returns it. */
OSK__CORE_HIDDEN int64_t osk__f64_place(const osk__f64_line_t *l, osk__f64_tree_t *t, size_t n, int64_t *nudge);
/* A tree was written: its root's end, whether exact; its kept ends are added
 * by osk__f64_keep after this. Returns 0. */
OSK__CORE_HIDDEN void osk__f64_done(osk__f64_line_t *l, int64_t root_s, int64_t root_e);
OSK__CORE_HIDDEN int osk__f64_keep(osk__f64_line_t *l, int64_t end);
OSK__CORE_HIDDEN void osk__f64_line_free(osk__f64_line_t *l);

/* In JSON text s[0..n) whose s[i] opens a string: the index of the quote
 * that closes it (n if none). */
static inline size_t osk__json_str_close(const char *s, size_t n, size_t i) {
  for (i++; i < n; i++) {
    if (s[i] == '\\') i++;
    else if (s[i] == '"') return i;
  }
  return n;
}

/* Writes v as decimal into out (at least 21 bytes); returns the length. */
OSK__CORE_HIDDEN size_t osk__fmt_u64(char *out, uint64_t v);

#endif
