/* test_reader_hardening.c: issue 11's reader items. Work stays linear in the
 * input whatever the size of one event (counted in stats.bytes_scanned, not
 * timed); out-of-range times are counted; a pipe (and "-") reads like a file,
 * the summary's second pass included; open errors keep their errno. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include "reader_testutil.h"

/* {"traceEvents":[ <small> , {"ph":"X",...,"args":{"s":"aaaa..."}} , <small> ]}
 * with a string of n bytes, or (as_array) an array of n/2 one-digit numbers. */
static char *big_event_trace(size_t n, int as_array, size_t *len) {
  const char *head =
      "{\"traceEvents\":[{\"ph\":\"X\",\"name\":\"a\",\"ts\":1,\"dur\":1,\"pid\":1,\"tid\":1},"
      "{\"ph\":\"X\",\"name\":\"big\",\"ts\":2,\"dur\":3,\"pid\":1,\"tid\":1,\"args\":{\"s\":";
  const char *tail = "}},{\"ph\":\"X\",\"name\":\"b\",\"ts\":9,\"dur\":1,\"pid\":1,\"tid\":1}]}";
  size_t a = strlen(head), b = strlen(tail);
  char *t = malloc(a + n + 3 + b + 1);
  CHECK(t != NULL);
  memcpy(t, head, a);
  char *p = t + a;
  *p++ = as_array ? '[' : '"';
  if (as_array) {
    for (size_t i = 0; i + 2 <= n; i += 2) {
      *p++ = '7';
      *p++ = ',';
    }
    *p++ = '7';
  } else {
    memset(p, 'a', n);
    p += n;
  }
  *p++ = as_array ? ']' : '"';
  memcpy(p, tail, b + 1);
  *len = (size_t)(p - t) + b;
  return t;
}

static int count_events(void *ctx, const osk_reader_event_t *ev) {
  (void)ev;
  ++*(uint64_t *)ctx;
  return 0;
}

/* Item 1: a 20 MB event read in 4 KiB refills; each refill used to re-parse
 * the event from its start (20 MB x 5000 refills). */
static void test_linear_work(void) {
  for (int as_array = 0; as_array <= 1; as_array++) {
    size_t len;
    char *t = big_event_trace((size_t)20 << 20, as_array, &len);
    osk_reader_opts_t o = {.chunk_bytes = 64 << 10};
    uint64_t n = 0;
    osk_reader_t *r = read_mem(t, len, 4096, &o, count_events, &n, 0, NULL);
    const osk_reader_stats_t *st = osk_reader_stats(r);
    CHECK(n == 3);
    CHECK(st->bytes == len);
    if (!(st->bytes_scanned >= len && st->bytes_scanned <= 3 * len)) {
      fprintf(stderr, "scanned %llu bytes of %zu\n", (unsigned long long)st->bytes_scanned, len);
      abort();
    }
    osk_reader_free(r);
    free(t);
  }
  /* An ordinary trace (events far below a chunk) is examined about once. */
  size_t cap = 4 << 20, len = 0;
  char *t = malloc(cap);
  CHECK(t != NULL);
  len += (size_t)snprintf(t, cap, "{\"traceEvents\":[");
  for (int i = 0; len + 200 < cap; i++)
    len += (size_t)snprintf(t + len, cap - len,
                            "%s{\"ph\":\"X\",\"name\":\"op%d\",\"ts\":%d.125,\"dur\":1.5,\"pid\":1,\"tid\":2}",
                            i ? "," : "", i % 50, i);
  len += (size_t)snprintf(t + len, cap - len, "]}");
  osk_reader_opts_t o = {.chunk_bytes = 64 << 10};
  osk_reader_t *r = read_mem(t, len, 0, &o, NULL, NULL, 0, NULL);
  const osk_reader_stats_t *st = osk_reader_stats(r);
  CHECK(st->bytes_scanned >= len && st->bytes_scanned <= len + len / 100);
  osk_reader_free(r);
  free(t);
}

/* Item 1, the limit: an event over max_unit_bytes is still refused. */
static void test_unit_limit(void) {
  size_t len;
  char *t = big_event_trace(3 << 20, 0, &len);
  osk_reader_opts_t o = {.chunk_bytes = 4096, .max_unit_bytes = 1 << 20};
  uint64_t n = 0;
  osk_reader_t *r = read_mem(t, len, 1000, &o, count_events, &n, OSK_ERANGE, NULL);
  CHECK(n == 1);
  osk_reader_free(r);
  /* ... and one just under the limit is read. */
  free(t);
  t = big_event_trace((1 << 20) - 300, 0, &len);
  n = 0;
  r = read_mem(t, len, 1000, &o, count_events, &n, 0, NULL);
  CHECK(n == 3);
  osk_reader_free(r);
  free(t);
}

/* Item 2: times that do not fit are counted, never 0. */
static void test_out_of_range(void) {
  const char *t =
      "{\"traceEvents\":[{\"ph\":\"X\",\"name\":\"a\",\"ts\":1e30,\"dur\":1},"
      "{\"ph\":\"X\",\"name\":\"b\",\"ts\":1,\"dur\":1e100000000000000000},"
      "{\"ph\":\"X\",\"name\":\"c\",\"ts\":-9223372036854775.808,\"dur\":1e-100000000000000000},"
      "{\"ph\":\"X\",\"name\":\"d\",\"ts\":1e-400,\"dur\":0e999999999999999999999}]}";
  /* a's ts, b's dur and c's ts are left unset (not in `has`) and the events
   * flagged bad and out of range; d's underflow to 0, which fits. */
  const char *want[] = {"X|a||-|-|0|1000||30", "X|b||-|-|1000|0||29", "X|c||-|-|0|0||28",
                        "X|d||-|-|0|0||7"};
  expect_events(t, 0, want, 4);
  osk_reader_stats_t st = stats_of(t);
  CHECK(st.out_of_range == 3 && st.bad_fields == 3);
  /* NaN and Infinity are not JSON numbers: the read fails, no 0 is made. */
  rec_t rec;
  osk_error_t err;
  const char *nan = "{\"traceEvents\":[{\"ph\":\"X\",\"name\":\"a\",\"ts\":NaN,\"dur\":1}]}";
  CHECK(read_all_ways(nan, &rec, &err) == OSK_EFORMAT);
  const char *inf = "{\"traceEvents\":[{\"ph\":\"X\",\"name\":\"a\",\"ts\":1,\"dur\":-Infinity}]}";
  CHECK(read_all_ways(inf, &rec, &err) == OSK_EFORMAT);
}

/* Out of order (children before parents, as opskew's tracer writes them):
 * the summary needs its second pass. */
static const char ooo[] =
    "{\"opskew\":{\"lost\":{\"total\":3,\"depth\":3}},\"traceEvents\":["
    "{\"ph\":\"X\",\"name\":\"child\",\"ts\":2,\"dur\":1,\"pid\":1,\"tid\":1},"
    "{\"ph\":\"X\",\"name\":\"parent\",\"ts\":1,\"dur\":5,\"pid\":1,\"tid\":1},"
    "{\"ph\":\"X\",\"name\":\"child\",\"ts\":12,\"dur\":1,\"pid\":1,\"tid\":1},"
    "{\"ph\":\"X\",\"name\":\"parent\",\"ts\":11,\"dur\":5,\"pid\":1,\"tid\":1}]}";

/* A pipe that a thread of its own fills with `data`, in small writes (so
 * the reader reads many times), and closes; `path` reads it. */
typedef struct {
  int fds[2];
  const char *data;
  size_t len;
  pthread_t writer;
  char path[32];
} feed_t;

static void *feed_write(void *arg) {
  feed_t *f = arg;
  for (size_t off = 0; off < f->len;) {
    size_t n = f->len - off < 7 ? f->len - off : 7;
    ssize_t k = write(f->fds[1], f->data + off, n);
    if (k < 0 && errno == EINTR) continue;
    CHECK(k > 0);
    off += (size_t)k;
  }
  close(f->fds[1]);
  return NULL;
}

static void feed_start(feed_t *f, const char *data) {
  CHECK(pipe(f->fds) == 0);
  f->data = data;
  f->len = strlen(data);
  snprintf(f->path, sizeof f->path, "/dev/fd/%d", f->fds[0]);
  CHECK(pthread_create(&f->writer, NULL, feed_write, f) == 0);
}

/* Waits for the writer; the read end stays open for the caller to close. */
static void feed_join(feed_t *f) { CHECK(pthread_join(f->writer, NULL) == 0); }

static void summary_text(const osk_summary_t *s, char *out, size_t cap) {
  size_t n = 0;
  for (size_t i = 0; i < osk_summary_op_count(s); i++) {
    const osk_summary_op_t *op = osk_summary_op(s, i);
    n += (size_t)snprintf(out + n, cap - n, "%.*s %llu %lld %lld %llu;", (int)op->name.len,
                          op->name.ptr, (unsigned long long)op->calls, (long long)op->total_ns,
                          (long long)op->self_ns, (unsigned long long)op->descendants);
  }
  snprintf(out + n, cap - n, "passes %d objects %zu", osk_summary_stats(s)->passes,
           osk_summary_object_count(s));
}

/* Item 3: a pipe read through "/dev/fd/N" and through "-" (descriptor 0)
 * gives the summary of the same bytes in memory, second pass included. */
static void test_pipe_summary(void) {
  osk_summary_t *s;
  osk_error_t err;
  char want[512], got[512];
  CHECK(osk_summary_from_mem(ooo, strlen(ooo), 0, NULL, NULL, &s, NULL, &err) == 0);
  summary_text(s, want, sizeof want);
  CHECK(osk_summary_stats(s)->passes == 2);
  CHECK(strstr(want, "parent 2 10000 8000 2;") != NULL);
  osk_str_t k, v;
  CHECK(osk_summary_object_get(s, 0, &k, &v) == 0);
  CHECK_STR(k.ptr, "opskew");
  CHECK_STR(v.ptr, "{\"lost\":{\"total\":3,\"depth\":3}}");
  osk_summary_free(s);

  for (int via_stdin = 0; via_stdin <= 1; via_stdin++) {
    feed_t f;
    feed_start(&f, ooo);
    int saved = -1;
    if (via_stdin) { /* the pipe as descriptor 0 */
      saved = dup(0);
      CHECK(saved >= 0 && dup2(f.fds[0], 0) == 0);
      snprintf(f.path, sizeof f.path, "-");
    }
    osk_reader_stats_t rs;
    CHECK(osk_summary_from_path(f.path, NULL, NULL, &s, &rs, &err) == 0);
    feed_join(&f);
    summary_text(s, got, sizeof got);
    CHECK_STR(got, want);
    CHECK(rs.bytes == strlen(ooo));
    osk_summary_free(s);
    if (via_stdin) {
      CHECK(dup2(saved, 0) == 0);
      close(saved);
    }
    close(f.fds[0]);
  }
}

/* osk_reader_rewind: memory and files again from the start; a pipe only
 * with rewindable, and then from the copy. */
static void test_rewind(void) {
  osk_error_t err;
  uint64_t n = 0;
  osk_reader_t *r = read_mem(ooo, strlen(ooo), 5, NULL, count_events, &n, 0, NULL);
  CHECK(osk_reader_run(r, count_events, &n, &err) == OSK_EINVAL); /* once per rewind */
  CHECK(osk_reader_rewind(r, &err) == 0);
  CHECK(osk_reader_run(r, count_events, &n, &err) == 0);
  CHECK(n == 8 && osk_reader_stats(r)->events == 4 && osk_reader_object_count(r) == 1);
  osk_reader_free(r);

  const char *file = "hardening_rewind.json";
  FILE *f = fopen(file, "wb");
  CHECK(f && fwrite(ooo, 1, strlen(ooo), f) == strlen(ooo) && fclose(f) == 0);
  CHECK(osk_reader_open(&r, file, NULL, &err) == 0);
  n = 0;
  CHECK(osk_reader_run(r, count_events, &n, &err) == 0);
  CHECK(osk_reader_rewind(r, &err) == 0);
  CHECK(osk_reader_run(r, count_events, &n, &err) == 0);
  CHECK(n == 8);
  osk_reader_free(r);
  unlink(file);

  for (int rewindable = 0; rewindable <= 1; rewindable++) {
    feed_t f;
    feed_start(&f, ooo);
    osk_reader_opts_t o = {.rewindable = rewindable, .chunk_bytes = 16};
    CHECK(osk_reader_open(&r, f.path, &o, &err) == 0);
    n = 0;
    CHECK(osk_reader_run(r, count_events, &n, &err) == 0);
    feed_join(&f);
    if (rewindable) {
      CHECK(osk_reader_rewind(r, &err) == 0);
      CHECK(osk_reader_run(r, count_events, &n, &err) == 0);
      CHECK(n == 8 && osk_reader_stats(r)->bytes == strlen(ooo));
      /* The copy is read from now on, and rewinds like a file. */
      CHECK(osk_reader_rewind(r, &err) == 0);
      CHECK(osk_reader_run(r, count_events, &n, &err) == 0);
      CHECK(n == 12);
    } else {
      CHECK(osk_reader_rewind(r, &err) == OSK_EIO);
      CHECK(err.sys_errno == ESPIPE);
    }
    osk_reader_free(r);
    close(f.fds[0]);
  }
}

/* osk_reader_spool: a pipe's whole content in a descriptor that reads from
 * the start as often as asked (correct's two reads); a regular file as it
 * is; a directory refused. */
static void test_spool(void) {
  const char *doc = "{\"traceEvents\":[{\"ph\":\"X\",\"name\":\"a\",\"ts\":1,\"dur\":2}]}";
  feed_t f;
  feed_start(&f, doc);
  osk_error_t err;
  int fd = -1;
  CHECK(osk_reader_spool(f.path, &fd, &err) == 0 && fd >= 0);
  feed_join(&f);
  close(f.fds[0]);
  char path[32];
  struct stat st;
  CHECK(fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_nlink == 0 && st.st_size == (off_t)strlen(doc));
  snprintf(path, sizeof path, "/dev/fd/%d", fd);
  for (int pass = 0; pass < 2; pass++) {
    osk_reader_t *r = NULL;
    uint64_t n = 0;
    CHECK(osk_reader_open(&r, path, NULL, &err) == 0);
    CHECK(osk_reader_run(r, count_events, &n, &err) == 0 && n == 1);
    osk_reader_free(r);
  }
  close(fd);
  CHECK(mkdir("hardening_spool_dir", 0700) == 0 || errno == EEXIST);
  CHECK(osk_reader_spool("hardening_spool_dir", &fd, &err) == OSK_EIO && err.sys_errno == EISDIR && fd == -1);
  rmdir("hardening_spool_dir");
}

/* Item 4: each open failure keeps its errno for the command to name. */
static void test_open_errors(void) {
  osk_reader_t *r = NULL;
  osk_error_t err;
  CHECK(mkdir("hardening_dir", 0700) == 0 || errno == EEXIST);
  CHECK(osk_reader_open(&r, "hardening_dir", NULL, &err) == OSK_EIO);
  CHECK(err.sys_errno == EISDIR && r == NULL);
  rmdir("hardening_dir");
  unlink("hardening_loop");
  CHECK(symlink("hardening_loop", "hardening_loop") == 0);
  CHECK(osk_reader_open(&r, "hardening_loop", NULL, &err) == OSK_EIO);
  CHECK(err.sys_errno == ELOOP);
  unlink("hardening_loop");
  CHECK(osk_reader_open(&r, "hardening_no_such_file", NULL, &err) == OSK_EIO);
  CHECK(err.sys_errno == ENOENT);
}

/* Item 6: a small gzip cut in half or corrupt in the middle is read up to
 * the damage (OSK_ETRUNCATED, the events before it), the same in any piece
 * size; corrupt from the first byte is invalid. */
static void test_damaged_gzip(void) {
  size_t cap = 1 << 20, len = 0;
  char *t = malloc(cap);
  CHECK(t != NULL);
  len += (size_t)snprintf(t, cap, "{\"traceEvents\":[");
  for (int i = 0; len + 200 < cap; i++)
    len += (size_t)snprintf(t + len, cap - len, "%s{\"ph\":\"X\",\"name\":\"op%d\",\"ts\":%d,\"dur\":%d}",
                            i ? "," : "", (i * 7919) % 1000, i, i % 13);
  len += (size_t)snprintf(t + len, cap - len, "]}");
  size_t zn;
  unsigned char *z = gzip_of(t, len, &zn);
  for (int damage = 0; damage < 3; damage++) {
    unsigned char *d = malloc(zn);
    CHECK(d != NULL);
    memcpy(d, z, zn);
    size_t dn = zn;
    if (damage == 0) dn = zn / 2;                             /* cut */
    if (damage == 1) for (size_t i = zn / 2; i < zn / 2 + 8; i++) d[i] ^= 0xA5; /* corrupt */
    if (damage == 2) d[zn - 5] ^= 1;                          /* a bad length in the trailer */
    uint64_t first = 0;
    for (size_t piece = 0; piece <= 7; piece += 7) {
      osk_reader_t *r;
      osk_error_t err;
      CHECK(osk_reader_open_mem(&r, d, dn, piece, NULL, &err) == 0);
      uint64_t n = 0;
      int rc = osk_reader_run(r, count_events, &n, &err);
      const osk_reader_stats_t *st = osk_reader_stats(r);
      if (damage < 2) {
        CHECK(rc == OSK_ETRUNCATED);
        CHECK(n > 1000 && st->bytes < len);
        CHECK(damage == 0 ? st->gzip_unterminated : st->gzip_corrupt);
      } else { /* the JSON was whole: read, but the damage makes it a partial result */
        CHECK(rc == OSK_ETRUNCATED && st->gzip_corrupt && st->bytes == len);
        CHECK(strstr(err.message, "check value") != NULL);
      }
      if (piece == 0) first = n;
      CHECK(n == first);
      osk_reader_free(r);
    }
    free(d);
  }
  free(z);
  free(t);
  const unsigned char junk[] = {0x1f, 0x8b, 0x08, 0x00, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  osk_reader_free(read_mem(junk, sizeof junk, 0, NULL, NULL, NULL, OSK_EFORMAT, NULL));
}

int main(void) {
  osk_test_in_tmpdir(); /* the files below are named by relative path */
  test_linear_work();
  test_unit_limit();
  test_out_of_range();
  test_pipe_summary();
  test_rewind();
  test_spool();
  test_open_errors();
  test_damaged_gzip();
  puts("reader hardening: ok");
  return 0;
}
