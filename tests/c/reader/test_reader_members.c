/* test_reader_members.c: the top-level objects the reader keeps (opskew's
 * "opskew" header among them) and the torch.profiler option marks it counts
 * while streaming. Every case is read whole and in small pieces, which must
 * agree. */
#include "reader_testutil.h"

/* Reads `text` with pieces of `piece` bytes and a `chunk`-byte buffer and
 * returns the reader after its run (the caller frees it). */
static osk_reader_t *run_text(const char *text, size_t len, size_t piece, size_t chunk,
                              size_t max_unit, int want_rc) {
  osk_reader_opts_t o = {.chunk_bytes = chunk, .max_unit_bytes = max_unit};
  return read_mem(text, len, piece, &o, NULL, NULL, want_rc, NULL);
}

static const size_t ways[][2] = {{0, 0}, {1, 16}, {7, 32}, {3, 1}};
#define N_WAYS (sizeof ways / sizeof ways[0])

static void test_opskew_header_is_kept(void) {
  const char *t =
      "{\"schemaVersion\":1,\"opskew\":{\"version\":\"0.1.0\",\"instrument\":\"itt\","
      "\"lost\":{\"total\":0}},\"deviceProperties\":[{\"id\":0}],\"traceEvents\":["
      "{\"ph\":\"X\",\"name\":\"a\",\"ts\":1,\"dur\":1}],"
      "\"distributedInfo\":{\"rank\":0},\"traceName\":\"x\"}";
  const char *header = "{\"version\":\"0.1.0\",\"instrument\":\"itt\",\"lost\":{\"total\":0}}";
  for (size_t w = 0; w < N_WAYS; w++) {
    osk_reader_t *r = run_text(t, strlen(t), ways[w][0], ways[w][1], 0, 0);
    CHECK(osk_reader_object_count(r) == 3); /* objects and arrays, in file order */
    osk_str_t k, v;
    CHECK(osk_reader_object_get(r, 0, &k, &v) == 0);
    CHECK(k.len == 6 && memcmp(k.ptr, "opskew", 6) == 0);
    CHECK(v.len == strlen(header) && v.ptr[v.len] == 0);
    CHECK_STR(v.ptr, header);
    CHECK(osk_reader_object_get(r, 1, &k, &v) == 0);
    CHECK_STR(k.ptr, "deviceProperties");
    CHECK_STR(v.ptr, "[{\"id\":0}]");
    CHECK(osk_reader_object_get(r, 2, &k, &v) == 0);
    CHECK_STR(k.ptr, "distributedInfo");
    CHECK_STR(v.ptr, "{\"rank\":0}");
    CHECK(osk_reader_object_get(r, 3, &k, &v) == OSK_ERANGE);
    CHECK(osk_reader_object_find(r, "opskew", &v) == 0);
    CHECK_STR(v.ptr, header);
    CHECK(osk_reader_object_find(r, "nope", &v) == OSK_ERANGE);
    CHECK(osk_reader_object_find(r, NULL, &v) == OSK_EINVAL);
    /* Scalars are still metadata, objects and arrays are not. */
    CHECK(osk_reader_meta_count(r) == 2);
    CHECK(osk_reader_stats(r)->events == 1);
    osk_reader_free(r);
  }
  CHECK(osk_reader_object_count(NULL) == 0);
  CHECK(osk_reader_object_get(NULL, 0, NULL, NULL) == OSK_ERANGE);
}

static int count_events(void *ctx, const osk_reader_event_t *ev) {
  (void)ev;
  ++*(int *)ctx;
  return 0;
}

/* header_only stops where traceEvents begins: the members before it are
 * kept, no event is delivered, members after it are not seen, and the run
 * returns 0 even though the rest of the text (here cut short) is unread. */
static void test_header_only(void) {
  const char *t =
      "{\"schemaVersion\":1,\"opskew\":{\"version\":\"0.1.0\"},\"traceEvents\":["
      "{\"ph\":\"X\",\"name\":\"a\",\"ts\":1,\"dur\":1},{\"ph\":\"X\",\"na";
  for (size_t w = 0; w < N_WAYS; w++) {
    osk_reader_opts_t o = {.chunk_bytes = ways[w][1], .header_only = 1};
    int n = 0;
    osk_reader_t *r = read_mem(t, strlen(t), ways[w][0], &o, count_events, &n, 0, NULL);
    CHECK(n == 0 && osk_reader_stats(r)->events == 0 && osk_reader_stats(r)->header_only_stopped);
    osk_str_t v;
    CHECK(osk_reader_object_find(r, "opskew", &v) == 0);
    CHECK_STR(v.ptr, "{\"version\":\"0.1.0\"}");
    CHECK(osk_reader_meta_count(r) == 1);
    CHECK(osk_reader_stats(r)->bytes == (uint64_t)(strchr(t, '[') - t + 1));
    osk_reader_free(r);
  }
  /* Without traceEvents the document is read whole; a bare array stops at once. */
  const char *none = "{\"opskew\":{\"a\":1}}";
  const char *arr = "[{\"ph\":\"X\",\"name\":\"a\",\"ts\":1,\"dur\":1}]";
  osk_reader_opts_t o = {.header_only = 1};
  osk_reader_t *r = read_mem(none, strlen(none), 0, &o, NULL, NULL, 0, NULL);
  CHECK(!osk_reader_stats(r)->header_only_stopped);
  CHECK(osk_reader_object_count(r) == 1);
  osk_reader_free(r);
  int n = 0;
  r = read_mem(arr, strlen(arr), 0, &o, count_events, &n, 0, NULL);
  CHECK(n == 0);
  CHECK(osk_reader_stats(r)->header_only_stopped && osk_reader_stats(r)->array_format);
  osk_reader_free(r);
}

/* A kept object nests at most OSK_READER_OBJECT_MAX_DEPTH levels: a deeper
 * one (which Python's json.loads may refuse near 1000) is read past, not
 * kept, and counted; the document still reads. */
static void test_object_depth(void) {
  for (int depth = OSK_READER_OBJECT_MAX_DEPTH; depth <= 1000; depth += 1000 - OSK_READER_OBJECT_MAX_DEPTH) {
    size_t cap = (size_t)depth * 8 + 128, n = 0;
    char *t = malloc(cap);
    CHECK(t);
    n += (size_t)snprintf(t + n, cap - n, "{\"deep\":");
    for (int i = 1; i < depth; i++) n += (size_t)snprintf(t + n, cap - n, "{\"a\":");
    n += (size_t)snprintf(t + n, cap - n, "{}");
    for (int i = 1; i < depth; i++) t[n++] = '}';
    n += (size_t)snprintf(t + n, cap - n, ",\"ok\":{\"b\":[1]},\"traceEvents\":[]}");
    int keep = depth <= OSK_READER_OBJECT_MAX_DEPTH;
    for (size_t w = 0; w < N_WAYS; w++) {
      osk_reader_t *r = run_text(t, n, ways[w][0], ways[w][1], 0, 0);
      osk_str_t v;
      CHECK((osk_reader_object_find(r, "deep", &v) == 0) == keep);
      CHECK(osk_reader_stats(r)->objects_not_kept == (uint64_t)!keep);
      CHECK(osk_reader_object_find(r, "ok", &v) == 0);
      CHECK_STR(v.ptr, "{\"b\":[1]}");
      osk_reader_free(r);
    }
    free(t);
  }
}

static void test_object_bounds(void) {
  /* One object just within the bound, one just over it, then more than
   * OSK_READER_OBJECTS_MAX small ones: the big one and the surplus are read
   * past, not kept, and the document still reads completely. */
  size_t inner = OSK_READER_OBJECT_MAX_BYTES - 8; /* {"s":"...."} is inner + 8 bytes */
  size_t cap = 3 * OSK_READER_OBJECT_MAX_BYTES + 4096;
  char *t = malloc(cap);
  CHECK(t);
  size_t n = 0;
  n += (size_t)sprintf(t + n, "{\"fits\":{\"s\":\"");
  memset(t + n, 'a', inner);
  n += inner;
  n += (size_t)sprintf(t + n, "\"},\"over\":{\"s\":\"");
  memset(t + n, 'b', inner + 1);
  n += inner + 1;
  n += (size_t)sprintf(t + n, "\"}");
  for (int i = 0; i < OSK_READER_OBJECTS_MAX + 2; i++) n += (size_t)sprintf(t + n, ",\"o%d\":{\"i\":%d}", i, i);
  n += (size_t)sprintf(t + n, ",\"traceEvents\":[]}");
  CHECK(n < cap);
  for (size_t w = 0; w < 3; w++) {
    osk_reader_t *r = run_text(t, n, ways[w][0] ? ways[w][0] * 1000 : 0, ways[w][1] * 256, 0, 0);
    CHECK(osk_reader_object_count(r) == OSK_READER_OBJECTS_MAX);
    osk_str_t k, v;
    CHECK(osk_reader_object_get(r, 0, &k, &v) == 0);
    CHECK_STR(k.ptr, "fits");
    CHECK(v.len == OSK_READER_OBJECT_MAX_BYTES);
    CHECK(osk_reader_object_get(r, 1, &k, &v) == 0);
    CHECK_STR(k.ptr, "o0");
    CHECK(osk_reader_object_get(r, OSK_READER_OBJECTS_MAX - 1, &k, &v) == 0);
    CHECK_STR(k.ptr, "o6");
    CHECK(osk_reader_object_find(r, "over", NULL) == OSK_ERANGE);
    CHECK(osk_reader_object_find(r, "o7", NULL) == OSK_ERANGE);
    osk_reader_free(r);
  }
  /* A unit limit below the object bound: an object over the limit is read
   * past member by member instead of failing the read with OSK_ERANGE. */
  char *u = malloc(8192);
  CHECK(u);
  size_t m = (size_t)sprintf(u, "{\"big\":{");
  for (int i = 0; i < 400; i++) m += (size_t)sprintf(u + m, "%s\"k%d\":%d", i ? "," : "", i, i);
  m += (size_t)sprintf(u + m, "},\"small\":{\"a\":1},\"traceEvents\":[]}");
  CHECK(m > 4096 && m < 8192);
  for (size_t w = 0; w < N_WAYS; w++) {
    osk_reader_t *r = run_text(u, m, ways[w][0], ways[w][1], 4096, 0);
    CHECK(osk_reader_object_count(r) == 1);
    CHECK(osk_reader_object_find(r, "big", NULL) == OSK_ERANGE);
    CHECK(osk_reader_object_find(r, "small", NULL) == 0);
    osk_reader_free(r);
  }
  free(u);
  free(t);
}

static void test_objects_errors_and_truncation(void) {
  /* A malformed object fails at the same byte whether kept or not. */
  const char *bad = "{\"opskew\":{\"a\":1,}, \"traceEvents\":[]}";
  for (size_t w = 0; w < N_WAYS; w++) {
    osk_reader_opts_t o = {.chunk_bytes = ways[w][1]};
    osk_error_t err;
    osk_reader_t *r = read_mem(bad, strlen(bad), ways[w][0], &o, NULL, NULL, OSK_EFORMAT, &err);
    CHECK(err.offset == 17);
    CHECK(strstr(err.message, "expected a string key"));
    CHECK(osk_reader_object_count(r) == 0);
    osk_reader_free(r);
  }
  /* A document cut inside an object: truncated, earlier objects kept. */
  const char *cut = "{\"a\":{\"x\":[1,2]},\"opskew\":{\"version\":\"0.1";
  for (size_t w = 0; w < N_WAYS; w++) {
    osk_reader_t *r = run_text(cut, strlen(cut), ways[w][0], ways[w][1], 0, OSK_ETRUNCATED);
    CHECK(osk_reader_object_count(r) == 1);
    CHECK(osk_reader_object_find(r, "opskew", NULL) == OSK_ERANGE);
    osk_reader_free(r);
  }
  /* Escaped keys are decoded; an object after traceEvents counts too. */
  const char *esc = "{\"traceEvents\":[],\"op\\u0073kew\":{\"corrected\":{\"w_ns\":1.5}}}";
  osk_reader_t *r = run_text(esc, strlen(esc), 0, 0, 0, 0);
  osk_str_t v;
  CHECK(osk_reader_object_find(r, "opskew", &v) == 0);
  CHECK_STR(v.ptr, "{\"corrected\":{\"w_ns\":1.5}}");
  osk_reader_free(r);
}

static void test_option_marks(void) {
  const char *t =
      "{\"traceEvents\":["
      "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"aten::add\",\"ts\":1,\"dur\":2,"
      "\"args\":{\"Input Dims\":[[1],[1]],\"flops\":2,\"Module Hierarchy\":\"m\"}},"
      "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"aten::mul\",\"ts\":1,\"dur\":2,"
      "\"args\":{\"Input Dims\":[[1]],\"nested\":{\"flops\":1}}},"
      "{\"ph\":\"X\",\"cat\":\"python_function\",\"name\":\"f.py(1): f\",\"ts\":1,\"dur\":2},"
      "{\"ph\":\"X\",\"cat\":\"python_function\",\"name\":\"f.py(2): g\",\"ts\":1,\"dur\":2},"
      "{\"ph\":\"X\",\"cat\":\"python_function\",\"name\":\"f.py(3): h\",\"ts\":1,\"dur\":2},"
      "{\"ph\":\"i\",\"cat\":\"cpu_instant_event\",\"name\":\"[memory]\",\"ts\":1,"
      "\"args\":{\"Bytes\":16}},"
      /* Look-alikes that are not marks: a value, a nested key, another cat. */
      "{\"ph\":\"X\",\"cat\":\"python_function_x\",\"name\":\"Input Dims\",\"ts\":1,\"dur\":1,"
      "\"args\":{\"name\":\"flops\",\"x\":\"Module Hierarchy\"}},"
      "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"[memory]x\",\"ts\":1,\"dur\":1,\"args\":7},"
      "5]}";
  for (size_t w = 0; w < N_WAYS; w++) {
    osk_reader_t *r = run_text(t, strlen(t), ways[w][0], ways[w][1], 0, 0);
    const osk_reader_marks_t *m = &osk_reader_stats(r)->marks;
    CHECK(m->input_dims == 2);
    CHECK(m->flops == 1);
    CHECK(m->module_hierarchy == 1);
    CHECK(m->python_function == 3);
    CHECK(m->memory == 1);
    CHECK(osk_reader_stats(r)->events == 9);
    osk_reader_free(r);
  }
  /* A plain trace has no marks; a trace cut mid-event counts only the events
   * delivered before the cut. */
  const char *cut = "{\"traceEvents\":[{\"name\":\"a\",\"args\":{\"Input Dims\":[]}},"
                    "{\"name\":\"b\",\"args\":{\"Input Dims\":[]";
  osk_reader_t *r = run_text(cut, strlen(cut), 0, 0, 0, OSK_ETRUNCATED);
  CHECK(osk_reader_stats(r)->marks.input_dims == 1);
  osk_reader_free(r);
  const char *plain = "[{\"ph\":\"X\",\"name\":\"a\",\"ts\":1,\"dur\":1}]";
  r = run_text(plain, strlen(plain), 0, 0, 0, 0);
  osk_reader_marks_t zero = {0};
  CHECK(memcmp(&osk_reader_stats(r)->marks, &zero, sizeof zero) == 0);
  osk_reader_free(r);
}

static void test_summarize_carries_marks(void) {
  const char *t = "{\"traceEvents\":[{\"ph\":\"X\",\"cat\":\"python_function\",\"name\":\"f\","
                  "\"ts\":1,\"dur\":2,\"args\":{\"Input Dims\":[]}}]}";
  osk_summary_t *s = NULL;
  osk_reader_stats_t rs;
  CHECK(osk_summary_from_mem(t, strlen(t), 0, NULL, NULL, &s, &rs, NULL) == 0);
  CHECK(rs.marks.python_function == 1 && rs.marks.input_dims == 1 && rs.marks.flops == 0);
  osk_summary_free(s);
}

int main(void) {
  test_opskew_header_is_kept();
  test_object_bounds();
  test_header_only();
  test_object_depth();
  test_objects_errors_and_truncation();
  test_option_marks();
  test_summarize_carries_marks();
  puts("test_reader_members: ok");
  return 0;
}
