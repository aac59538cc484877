/* test_reader_stream.c: chunk boundaries, truncation at every byte, gzip
 * (whole, multi-member, cut, corrupt), files, large events and the bounded
 * buffer. */
#include <errno.h>
#include <unistd.h>

#include "reader_testutil.h"

static const char *TRACE =
    "{\n  \"schemaVersion\": 1,\n  \"deviceProperties\": [],\n  \"displayTimeUnit\": \"ms\",\n"
    "  \"traceEvents\": [\n"
    "  {\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": 7, \"tid\": 7, \"args\": {\"name\": \"main\"}},\n"
    "  {\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"aten::add\", \"pid\": 7, \"tid\": 7,\n"
    "   \"ts\": 10.5, \"dur\": 2.25, \"args\": {\"External id\": 1, \"Input Dims\": [[4], [4], []]}},\n"
    "  {\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"aten::\\u00e9\", \"pid\": 7, \"tid\": 7,\n"
    "   \"ts\": 13.000, \"dur\": 1e0, \"args\": {}},\n"
    "  {\"ph\": \"i\", \"s\": \"g\", \"name\": \"Record Window End\", \"pid\": \"\", \"tid\": \"\", \"ts\": 20}\n"
    "  ],\n  \"traceName\": \"t.json\"\n}\n";

static void check_same(const rec_t *a, const rec_t *b) {
  CHECK(a->n == b->n);
  for (size_t i = 0; i < a->n; i++) CHECK_STR(a->lines[i], b->lines[i]);
}

static void test_every_piece_size(rec_t *ref) {
  osk_error_t err;
  size_t len = strlen(TRACE);
  CHECK(read_text(TRACE, len, 0, 0, ref, &err) == 0);
  CHECK(ref->n == 4);
  CHECK_STR(ref->lines[0], "M|thread_name||7|7|0|0|main|4");
  /* 71: TS|DUR|NAME and OSK_READER_EV_EXTERNAL_ID (args["External id"] is 1). */
  CHECK_STR(ref->lines[1], "X|aten::add|cpu_op|7|7|10500|2250||71");
  CHECK_STR(ref->lines[2], "X|aten::\xc3\xa9|cpu_op|7|7|13000|1000||7");
  CHECK_STR(ref->lines[3], "i|Record Window End||''|''|20000|0||5");
  for (size_t piece = 1; piece <= 48; piece++) {
    for (size_t chunk = 1; chunk <= 64; chunk *= 4) {
      rec_t rec;
      CHECK(read_text(TRACE, len, piece, chunk, &rec, &err) == 0);
      check_same(&rec, ref);
    }
  }
}

/* Every proper prefix of a valid trace is "truncated", never "invalid", and
 * yields the complete events before the cut. */
static void test_truncation_everywhere(void) {
  size_t len = strlen(TRACE);
  size_t last_n = 0;
  for (size_t cut = 0; cut < len; cut++) {
    rec_t rec;
    osk_error_t err;
    int rc = read_text(TRACE, cut, 0, 0, &rec, &err);
    int only_ws_left = strspn(TRACE + cut, " \n") == len - cut;
    if (only_ws_left) {
      CHECK(rc == 0);
    } else {
      if (rc != OSK_ETRUNCATED) {
        fprintf(stderr, "cut %zu: rc %d %s\n", cut, rc, err.message);
        abort();
      }
      CHECK(err.offset == cut);
      CHECK(err.message && *err.message);
    }
    CHECK(rec.n >= last_n);
    last_n = rec.n;
    rec_t rec1;
    osk_error_t err1;
    CHECK(read_text(TRACE, cut, 1, 8, &rec1, &err1) == rc);
    check_same(&rec1, &rec);
  }
  CHECK(last_n == 4);
  /* The message says where it ended. */
  rec_t rec;
  osk_error_t err;
  CHECK(read_text(TRACE, 200, 0, 0, &rec, &err) == OSK_ETRUNCATED);
  CHECK(strstr(err.message, "traceEvents"));
  CHECK(read_text(TRACE, 0, 0, 0, &rec, &err) == OSK_ETRUNCATED);
  CHECK(strstr(err.message, "empty"));
}

static void test_gzip(const rec_t *ref) {
  size_t len = strlen(TRACE);
  unsigned char gz[4096], gz2[4096];
  size_t n = gzip_into(TRACE, len, gz, sizeof gz);
  for (size_t piece = 0; piece <= 5; piece++) {
    rec_t rec;
    memset(&rec, 0, sizeof rec);
    osk_reader_t *r = read_mem(gz, n, piece, NULL, rec_event, &rec, 0, NULL);
    CHECK(osk_reader_stats(r)->gzip == 1);
    CHECK(osk_reader_stats(r)->compressed_bytes == n);
    CHECK(osk_reader_stats(r)->bytes == len);
    CHECK(!osk_reader_stats(r)->gzip_unterminated);
    osk_reader_free(r);
    check_same(&rec, ref);
  }
  /* Two members, as `cat a.gz b.gz` makes, are one document. */
  size_t half = len / 2;
  size_t n1 = gzip_into(TRACE, half, gz2, sizeof gz2);
  size_t n2 = gzip_into(TRACE + half, len - half, gz2 + n1, sizeof gz2 - n1);
  rec_t rec;
  osk_error_t err;
  CHECK(read_text((const char *)gz2, n1 + n2, 3, 16, &rec, &err) == 0);
  check_same(&rec, ref);
  /* A cut compressed file is a truncated trace, or a complete one whose
   * gzip trailer is missing. */
  for (size_t cut = 2; cut < n; cut += 3) {
    osk_reader_t *r;
    CHECK(osk_reader_open_mem(&r, gz, cut, 0, NULL, &err) == 0);
    memset(&rec, 0, sizeof rec);
    int rc = osk_reader_run(r, rec_event, &rec, &err);
    CHECK(rc == OSK_ETRUNCATED || (rc == 0 && osk_reader_stats(r)->gzip_unterminated));
    osk_reader_free(r);
  }
  /* Corrupt data is an error, whichever layer notices first. */
  for (size_t at = 12; at < n; at += 7) {
    unsigned char bad[4096];
    memcpy(bad, gz, n);
    bad[at] ^= 0x55;
    int rc = read_text((const char *)bad, n, 0, 0, &rec, &err);
    CHECK(rc == OSK_EFORMAT || rc == OSK_ETRUNCATED);
    CHECK(err.message && *err.message);
  }
}

static void test_files(const rec_t *ref) {
  char dir[] = "/tmp/osk_reader_test_XXXXXX";
  CHECK(mkdtemp(dir));
  char plain[256], gzpath[256];
  snprintf(plain, sizeof plain, "%s/t.json", dir);
  snprintf(gzpath, sizeof gzpath, "%s/t.json.gz", dir);
  FILE *f = fopen(plain, "wb");
  CHECK(f && fwrite(TRACE, 1, strlen(TRACE), f) == strlen(TRACE));
  fclose(f);
  unsigned char gz[4096];
  size_t n = gzip_into(TRACE, strlen(TRACE), gz, sizeof gz);
  f = fopen(gzpath, "wb");
  CHECK(f && fwrite(gz, 1, n, f) == n);
  fclose(f);
  const char *paths[] = {plain, gzpath};
  const size_t sizes[] = {strlen(TRACE), n};
  for (int i = 0; i < 2; i++) {
    osk_reader_t *r;
    osk_error_t err;
    rec_t rec;
    memset(&rec, 0, sizeof rec);
    /* Where the read stands, in the file's own bytes (gzip's compressed
     * ones), each pass apart. */
    osk_progress_t prog;
    memset(&prog, 0, sizeof prog);
    osk_reader_opts_t o = {.progress = &prog, .chunk_bytes = 7};
    CHECK(osk_reader_open(&r, paths[i], &o, &err) == 0);
    CHECK(prog.pass == 1 && prog.total == sizes[i]);
    CHECK(osk_reader_run(r, rec_event, &rec, &err) == 0);
    CHECK(prog.done == sizes[i]);
    CHECK(osk_reader_rewind(r, &err) == 0);
    CHECK(prog.pass == 2 && prog.total == sizes[i] && prog.done <= sizes[i]);
    osk_reader_free(r);
    check_same(&rec, ref);
  }
  osk_reader_t *r = (osk_reader_t *)1;
  osk_error_t err;
  char missing[300];
  snprintf(missing, sizeof missing, "%s/missing.json", dir);
  CHECK(osk_reader_open(&r, missing, NULL, &err) == OSK_EIO);
  CHECK(r == NULL && err.code == OSK_EIO && err.sys_errno == ENOENT);
  CHECK(osk_reader_open(&r, dir, NULL, &err) == OSK_EIO); /* a directory: read fails */
  CHECK(err.sys_errno == EISDIR);
  CHECK(osk_reader_open(NULL, plain, NULL, &err) == OSK_EINVAL);
  CHECK(osk_reader_open(&r, NULL, NULL, NULL) == OSK_EINVAL);
  unlink(plain);
  unlink(gzpath);
  rmdir(dir);
}

static int stop_at_second(void *ctx, const osk_reader_event_t *ev) {
  (void)ev;
  return ++*(int *)ctx == 2 ? OSK_ENOMEM : 0;
}

static void test_callback_stop(void) {
  osk_error_t err;
  int seen = 0;
  osk_reader_t *r = read_mem(TRACE, strlen(TRACE), 0, NULL, stop_at_second, &seen, OSK_ENOMEM, &err);
  CHECK(seen == 2 && err.code == OSK_ENOMEM);
  osk_reader_free(r);
}

static void test_large_event_and_bounded_buffer(void) {
  /* One event of ~100 KB read with a 4 KiB chunk: the buffer grows for it. */
  size_t big = 100000;
  char *t = malloc(big + 256);
  CHECK(t);
  size_t k = (size_t)sprintf(t, "{\"traceEvents\":[{\"ph\":\"X\",\"args\":{\"Call stack\":\"");
  for (size_t i = 0; i < big; i++) t[k++] = (char)('a' + i % 26);
  k += (size_t)sprintf(t + k, "\"},\"name\":\"big\",\"ts\":1,\"dur\":2}]}");
  osk_error_t err;
  osk_reader_opts_t o = {.chunk_bytes = 4096};
  rec_t rec;
  memset(&rec, 0, sizeof rec);
  osk_reader_t *r = read_mem(t, k, 0, &o, rec_event, &rec, 0, NULL);
  CHECK(rec.n == 1);
  CHECK(osk_reader_stats(r)->peak_buffer >= big);
  osk_reader_free(r);
  /* ... unless it exceeds the limit. */
  o.max_unit_bytes = 8192;
  r = read_mem(t, k, 0, &o, NULL, NULL, OSK_ERANGE, &err);
  CHECK(err.code == OSK_ERANGE && strstr(err.message, "larger"));
  osk_reader_free(r);
  free(t);

  /* 20000 small events (about 2 MB) through a 4 KiB chunk never grow the
   * buffer: memory does not depend on the length of the trace. */
  size_t n_ev = 20000, cap = n_ev * 128 + 64;
  t = malloc(cap);
  CHECK(t);
  k = (size_t)sprintf(t, "{\"traceEvents\":[");
  for (size_t i = 0; i < n_ev; i++)
    k += (size_t)sprintf(t + k, "%s{\"ph\":\"X\",\"name\":\"op%zu\",\"ts\":%zu.125,\"dur\":0.5}",
                         i ? ",\n" : "", i % 10, i);
  k += (size_t)sprintf(t + k, "]}");
  CHECK(osk_reader_open_mem(&r, t, k, 0, &o, &err) == 0);
  CHECK(osk_reader_run(r, NULL, NULL, &err) == 0);
  CHECK(osk_reader_stats(r)->events == n_ev);
  CHECK(osk_reader_stats(r)->peak_buffer == 4096);
  CHECK(osk_reader_stats(r)->bytes == k);
  osk_reader_free(r);
  free(t);
}

int main(void) {
  rec_t ref;
  test_every_piece_size(&ref);
  test_truncation_everywhere();
  test_gzip(&ref);
  test_files(&ref);
  test_callback_stop();
  test_large_event_and_bounded_buffer();
  puts("reader stream: ok");
  return 0;
}
