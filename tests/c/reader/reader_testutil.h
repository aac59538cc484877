/* reader_testutil.h: helpers shared by the reader's C tests. */
#ifndef OPSKEW_READER_TESTUTIL_H
#define OPSKEW_READER_TESTUTIL_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "opskew_reader.h"
#include "testutil.h"

/* Events copied out of the callback, with their strings flattened into one
 * line each, so tests can compare whole reads with strcmp. */
typedef struct {
  size_t n;
  char lines[64][256];
} rec_t;

/* The strings a and b must be equal. */
#define CHECK_STR(a, b)                                                          \
  do {                                                                           \
    const char *a_ = (a), *b_ = (b);                                             \
    if (strcmp(a_, b_)) {                                                        \
      fprintf(stderr, "%s:%d: got\n  %s\nexpected\n  %s\n", __FILE__, __LINE__, a_, b_); \
      abort();                                                                   \
    }                                                                            \
  } while (0)

static inline void rec_id(char *out, size_t cap, const osk_reader_id_t *id) {
  if (id->kind == OSK_READER_ID_INT)
    snprintf(out, cap, "%lld", (long long)id->num);
  else if (id->kind == OSK_READER_ID_STR)
    snprintf(out, cap, "'%.*s'", (int)id->str.len, id->str.ptr);
  else
    snprintf(out, cap, "-");
}

static inline int rec_event(void *ctx, const osk_reader_event_t *ev) {
  rec_t *r = ctx;
  if (r->n >= 64) return 0;
  char pid[64], tid[64];
  rec_id(pid, sizeof pid, &ev->pid);
  rec_id(tid, sizeof tid, &ev->tid);
  snprintf(r->lines[r->n++], 256, "%.*s|%.*s|%.*s|%s|%s|%lld|%lld|%.*s|%u", (int)ev->ph.len,
           ev->ph.ptr ? ev->ph.ptr : "", (int)ev->name.len, ev->name.ptr ? ev->name.ptr : "",
           (int)ev->cat.len, ev->cat.ptr ? ev->cat.ptr : "", pid, tid, (long long)ev->ts_ns,
           (long long)ev->dur_ns, (int)ev->arg_name.len, ev->arg_name.ptr ? ev->arg_name.ptr : "",
           ev->has);
  return 0;
}

/* Reads `len` bytes at `data` from memory, in pieces of `piece` bytes (0:
 * at once) with options `o` (may be NULL), handing each event to `fn` (may
 * be NULL) with `ctx`; checks that the read returns `want_rc` and returns
 * the reader, for its stats and members (the caller frees it). `err` (may
 * be NULL) gets the read's error. */
static inline osk_reader_t *read_mem(const void *data, size_t len, size_t piece,
                                     const osk_reader_opts_t *o, osk_reader_event_fn fn, void *ctx,
                                     int want_rc, osk_error_t *err) {
  osk_reader_t *r;
  osk_error_t own;
  if (!err) err = &own;
  CHECK(osk_reader_open_mem(&r, data, len, piece, o, err) == 0);
  int rc = osk_reader_run(r, fn, ctx, err);
  if (rc != want_rc) {
    fprintf(stderr, "rc %d (%s at %llu), expected %d\n", rc, err->message,
            (unsigned long long)err->offset, want_rc);
    abort();
  }
  return r;
}

/* Reads `text` in pieces of `piece` bytes (0: all at once) with a small
 * buffer, so units cross chunk boundaries and the buffer must grow. */
static inline int read_text(const char *text, size_t len, size_t piece, size_t chunk, rec_t *rec,
                     osk_error_t *err) {
  osk_reader_t *r;
  osk_reader_opts_t o = {.chunk_bytes = chunk};
  int rc = osk_reader_open_mem(&r, text, len, piece, &o, err);
  CHECK(rc == 0);
  memset(rec, 0, sizeof *rec);
  rc = osk_reader_run(r, rec_event, rec, err);
  osk_reader_free(r);
  return rc;
}

/* Reads `text` every way (whole; 1-byte pieces with a 16-byte buffer; 7-byte
 * pieces) and checks that all ways agree; returns the code. */
static inline int read_all_ways(const char *text, rec_t *rec, osk_error_t *err) {
  size_t len = strlen(text);
  int rc = read_text(text, len, 0, 0, rec, err);
  static const size_t pieces[][2] = {{1, 16}, {7, 32}, {3, 1}};
  for (size_t k = 0; k < sizeof pieces / sizeof pieces[0]; k++) {
    rec_t r2;
    osk_error_t e2;
    int rc2 = read_text(text, len, pieces[k][0], pieces[k][1], &r2, &e2);
    if (rc2 != rc || r2.n != rec->n || e2.offset != err->offset) {
      fprintf(stderr, "piece %zu: rc %d vs %d, n %zu vs %zu, offset %llu vs %llu\n",
              pieces[k][0], rc2, rc, r2.n, rec->n, (unsigned long long)e2.offset,
              (unsigned long long)err->offset);
      abort();
    }
    for (size_t i = 0; i < rec->n; i++) {
      if (strcmp(r2.lines[i], rec->lines[i])) {
        fprintf(stderr, "piece %zu event %zu:\n  %s\n  %s\n", pieces[k][0], i, r2.lines[i],
                rec->lines[i]);
        abort();
      }
    }
  }
  return rc;
}

/* Reads `text` every way (read_all_ways), which must end with `want_rc` and
 * give the n events `lines` (as rec_event flattens them). */
static inline void expect_events(const char *text, int want_rc, const char *const *lines, size_t n) {
  rec_t rec;
  osk_error_t err;
  int rc = read_all_ways(text, &rec, &err);
  if (rc != want_rc) {
    fprintf(stderr, "rc %d (%s at %llu), expected %d for: %s\n", rc, err.message,
            (unsigned long long)err.offset, want_rc, text);
    abort();
  }
  CHECK(rec.n == n);
  for (size_t i = 0; i < n; i++) CHECK_STR(rec.lines[i], lines[i]);
}

/* The reader's counters after reading `text` whole, which must succeed. */
static inline osk_reader_stats_t stats_of(const char *text) {
  osk_reader_t *r = read_mem(text, strlen(text), 0, NULL, NULL, NULL, 0, NULL);
  osk_reader_stats_t st = *osk_reader_stats(r);
  osk_reader_free(r);
  return st;
}

/* Reads `text` every way (read_all_ways), which must succeed with n events. */
static inline void read_all_ok(const char *text, rec_t *rec, size_t n) {
  osk_error_t err;
  int rc = read_all_ways(text, rec, &err);
  if (rc != 0 || rec->n != n) {
    fprintf(stderr, "rc %d (%s at %llu), %zu events; expected 0, %zu events\n", rc, err.message,
            (unsigned long long)err.offset, rec->n, n);
    abort();
  }
}

/* A text built by appending, the tests' hand-made traces: buf holds len
 * bytes and a NUL; n is the builder's own count (the elements written so
 * far, for their commas). Start from all zeros; the caller frees buf. */
typedef struct {
  char *buf;
  size_t len, cap;
  int n;
} tb_t;

/* Appends printf's text of `fmt` to t. */
static inline void tb_put(tb_t *t, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  CHECK(n >= 0);
  if (t->len + (size_t)n + 1 > t->cap) {
    t->cap = (t->len + (size_t)n + 1) * 2;
    t->buf = realloc(t->buf, t->cap);
    CHECK(t->buf);
  }
  va_start(ap, fmt);
  vsnprintf(t->buf + t->len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  t->len += (size_t)n;
}

/* gzip (one member, deflate level 6) of n bytes at `in` into out, which
 * must hold it (cap bytes); returns its length. */
static inline size_t gzip_into(const void *in, size_t n, unsigned char *out, size_t cap) {
  z_stream z;
  memset(&z, 0, sizeof z);
  CHECK(deflateInit2(&z, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) == Z_OK);
  z.next_in = (Bytef *)in;
  z.avail_in = (uInt)n;
  z.next_out = out;
  z.avail_out = (uInt)cap;
  CHECK(deflate(&z, Z_FINISH) == Z_STREAM_END);
  size_t got = cap - z.avail_out;
  deflateEnd(&z);
  return got;
}

/* gzip of n bytes at `in` (gzip_into) in a malloc'ed buffer, its length in
 * *out_len; the caller frees it. */
static inline unsigned char *gzip_of(const void *in, size_t n, size_t *out_len) {
  /* compressBound is zlib's wrapper (6 bytes); gzip's header and trailer
   * take 18. */
  size_t cap = compressBound((uLong)n) + 64;
  unsigned char *out = malloc(cap);
  CHECK(out);
  *out_len = gzip_into(in, n, out, cap);
  return out;
}

#endif
