/* test_audit.c: the CUDA clean-window audit (osk_audit_*, issue 36) and the
 * reader's ids it reads (correlation, External id, a flow's id), on
 * synthetic traces shaped as Kineto writes them (/tmp notes of issue 36,
 * docs/reader.md "The CUDA audit"): its key order, microseconds with 3
 * decimals, pid -1/tid 0 overhead records without args, kernels on
 * pid = device, tid = stream, ac2g flows, string pids, and its file order
 * (CPU events first, then the Trace span, then the GPU records in CUPTI's
 * order, then metadata, gpu_user_annotation and "Record Window End"). Every
 * trace is read from memory, whole and in small pieces, which must agree.
 * Times below are microseconds as in the traces; the audit reports ns. */
#include "reader_testutil.h"

/* ------------------------------------------------------- trace builder */

/* One element of traceEvents (the comma before it handled). */
#define EV(t, ...)                          \
  do {                                      \
    tb_put((t), (t)->n++ ? ",\n  " : "  "); \
    tb_put((t), __VA_ARGS__);               \
  } while (0)

/* Kineto's header members before traceEvents. */
static void tb_begin(tb_t *t) {
  memset(t, 0, sizeof *t);
  tb_put(t,
         "{\n  \"schemaVersion\": 1,\n  \"deviceProperties\": [{\"id\": 0, \"name\": \"NVIDIA H100 80GB "
         "HBM3\", \"numSms\": 132}],\n  \"cupti_version\": 26, \"cuda_runtime_version\": 12080,\n"
         "  \"displayTimeUnit\": \"ms\",\n  \"baseTimeNanoseconds\": 1782864000000000000,\n"
         "  \"traceEvents\": [\n");
}

static void tb_end(tb_t *t) {
  EV(t, "{\"ph\": \"i\", \"s\": \"g\", \"name\": \"Record Window End\", \"pid\": \"\", \"tid\": \"\", "
        "\"ts\": 5000000990.000}");
  tb_put(t, "\n  ],\n  \"traceName\": \"/tmp/trace.json\"\n}\n");
}

#define PID 4242
#define T0 5000000000.0 /* the window's first microsecond */

/* A cpu_op or user_annotation on CPU thread tid; ext 0: no External id. */
static void cpu(tb_t *t, const char *cat, const char *name, int tid, double ts, double dur, int ext) {
  char ext_s[64] = "";
  if (ext) snprintf(ext_s, sizeof ext_s, "\"External id\": %d, ", ext);
  EV(t, "{\"ph\": \"X\", \"cat\": \"%s\", \"name\": \"%s\", \"pid\": %d, \"tid\": %d, \"ts\": %.3f, "
        "\"dur\": %.3f, \"args\": {%s\"Record function id\": 0, \"Ev Idx\": %d}}",
     cat, name, PID, tid, T0 + ts, dur, ext_s, t->n);
}

/* A runtime call with its correlation and (ext > 0) External id, and the
 * "s" flow Kineto writes after a launch. */
static void runtime(tb_t *t, const char *name, int tid, double ts, double dur, int corr, int ext) {
  char ext_s[64] = "";
  if (ext) snprintf(ext_s, sizeof ext_s, "\"External id\": %d, ", ext);
  EV(t, "{\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"%s\", \"pid\": %d, \"tid\": %d, "
        "\"ts\": %.3f, \"dur\": %.3f, \"args\": {%s\"cbid\": 211, \"correlation\": %d}}",
     name, PID, tid, T0 + ts, dur, ext_s, corr);
  EV(t, "{\"ph\": \"s\", \"id\": %d, \"pid\": %d, \"tid\": %d, \"ts\": %.3f, \"cat\": \"ac2g\", "
        "\"name\": \"ac2g\"}",
     corr, PID, tid, T0 + ts);
}

/* A device record (cat kernel, gpu_memcpy, gpu_memset) on device 0, stream
 * 7, with its "f" flow; corr < 0: no correlation. */
static void device(tb_t *t, const char *cat, const char *name, double ts, double dur, int corr,
                   int ext) {
  char ext_s[64] = "", corr_s[64] = "";
  if (ext) snprintf(ext_s, sizeof ext_s, "\"External id\": %d, ", ext);
  if (corr >= 0) snprintf(corr_s, sizeof corr_s, ", \"correlation\": %d", corr);
  EV(t, "{\"ph\": \"X\", \"cat\": \"%s\", \"name\": \"%s\", \"pid\": 0, \"tid\": 7, \"ts\": %.3f, "
        "\"dur\": %.3f, \"args\": {%s\"queued\": 0, \"device\": 0, \"context\": 1, \"stream\": 7%s, "
        "\"registers per thread\": 26, \"grid\": [1, 1, 1], \"block\": [128, 1, 1]}}",
     cat, name, T0 + ts, dur, ext_s, corr_s);
  if (corr >= 0)
    EV(t, "{\"ph\": \"f\", \"id\": %d, \"pid\": 0, \"tid\": 7, \"ts\": %.3f, \"cat\": \"ac2g\", "
          "\"name\": \"ac2g\", \"bp\": \"e\"}",
       corr, T0 + ts);
}

static void kernel(tb_t *t, double ts, double dur, int corr, int ext) {
  device(t, "kernel", "void at::native::vectorized_elementwise_kernel<4>(int)", ts, dur, corr, ext);
}

/* A CUPTI overhead record: pid -1, tid 0, no args. */
static void overhead(tb_t *t, const char *name, double ts, double dur) {
  EV(t, "{\"ph\": \"X\", \"cat\": \"overhead\", \"name\": \"%s\", \"pid\": -1, \"tid\": 0, "
        "\"ts\": %.3f, \"dur\": %.3f}",
     name, T0 + ts, dur);
}

/* Kineto's bookkeeping: the Trace span, after the CPU events. */
static void trace_span(tb_t *t) {
  EV(t, "{\"ph\": \"X\", \"cat\": \"Trace\", \"name\": \"PyTorch Profiler (0)\", \"pid\": \"Spans\", "
        "\"tid\": \"PyTorch Profiler\", \"ts\": %.3f, \"dur\": 1000.000, \"args\": {\"Op count\": 2}}",
     T0 - 10);
  EV(t, "{\"ph\": \"i\", \"s\": \"g\", \"name\": \"Iteration Start: PyTorch Profiler\", \"pid\": "
        "\"Traces\", \"tid\": \"Trace PyTorch Profiler\", \"ts\": %.3f}",
     T0 - 10);
}

/* The metadata rows, after the GPU records. */
static void metadata(tb_t *t) {
  EV(t, "{\"ph\": \"M\", \"name\": \"thread_name\", \"ts\": %.3f, \"pid\": %d, \"tid\": %d, "
        "\"args\": {\"name\": \"thread %d (python)\"}}",
     T0 - 10, PID, PID, PID);
  EV(t, "{\"ph\": \"M\", \"name\": \"thread_name\", \"ts\": %.3f, \"pid\": 0, \"tid\": 7, "
        "\"args\": {\"name\": \"stream 7 \"}}",
     T0 - 10);
  EV(t, "{\"ph\": \"M\", \"name\": \"process_name\", \"ts\": %.3f, \"pid\": -1, \"tid\": 0, "
        "\"args\": {\"name\": \"CUPTI Overhead\"}}",
     T0 - 10);
  EV(t, "{\"ph\": \"M\", \"name\": \"process_sort_index\", \"ts\": %.3f, \"pid\": -1, \"tid\": 0, "
        "\"args\": {\"sort_index\": 1048576}}",
     T0 - 10);
}

/* --------------------------------------------------------------- audits */

static osk_audit_t *audit_mem(const void *data, size_t len, size_t piece,
                              const osk_audit_opts_t *o, int want_rc) {
  osk_audit_t *a = NULL;
  osk_error_t err;
  int rc = osk_audit_from_mem(data, len, piece, o, NULL, &a, NULL, &err);
  if (rc != want_rc) {
    fprintf(stderr, "audit rc %d (%s at %llu), expected %d\n", rc, err.message,
            (unsigned long long)err.offset, want_rc);
    abort();
  }
  CHECK(err.code == rc);
  CHECK(a != NULL);
  return a;
}

static int str_eq(osk_str_t s, const char *lit) {
  return s.ptr && s.len == strlen(lit) && memcmp(s.ptr, lit, s.len) == 0;
}

/* A flat text of everything an audit holds, so reads can be compared. */
static char *audit_text(const osk_audit_t *a) {
  tb_t t;
  memset(&t, 0, sizeof t);
  const osk_audit_stats_t *s = osk_audit_stats(a);
  tb_put(&t,
         "dev %llu unc %llu launch %llu miss %llu head %llu orph %llu bad %llu before %llu ext %llu "
         "dup %llu matched %llu gap %lld/%lld/%lld ovh %llu/%lld in_launch %llu/%lld in_op "
         "%llu/%lld ops %llu steps %llu unusable %llu trunc %d\n",
         (unsigned long long)s->device_events, (unsigned long long)s->device_uncorrelated,
         (unsigned long long)s->launches, (unsigned long long)s->missing,
         (unsigned long long)s->missing_head, (unsigned long long)s->orphans,
         (unsigned long long)s->bad_time, (unsigned long long)s->before_launch,
         (unsigned long long)s->external_id_mismatch, (unsigned long long)s->duplicate_launches,
         (unsigned long long)s->matched_launches, (long long)s->gap_min_ns,
         (long long)s->gap_p50_ns, (long long)s->gap_max_ns, (unsigned long long)s->overhead_events,
         (long long)s->overhead_ns, (unsigned long long)s->overhead_in_launch,
         (long long)s->overhead_in_launch_ns, (unsigned long long)s->overhead_in_op,
         (long long)s->overhead_in_op_ns, (unsigned long long)s->operators,
         (unsigned long long)s->steps, (unsigned long long)s->unusable, s->truncated);
  for (size_t i = 0; i < osk_audit_overhead_kind_count(a); i++) {
    const osk_audit_overhead_kind_t *k = osk_audit_overhead_kind(a, i);
    tb_put(&t, "kind %.*s %llu %lld\n", (int)k->name.len, k->name.ptr,
           (unsigned long long)k->count, (long long)k->total_ns);
  }
  for (size_t i = 0; i < osk_audit_overhead_count(a); i++) {
    const osk_audit_overhead_t *o = osk_audit_overhead(a, i);
    tb_put(&t, "ovh %.*s %lld %lld op=%.*s@%lld launch=%.*s#%lld\n", (int)o->name.len, o->name.ptr,
           (long long)o->ts_ns, (long long)o->dur_ns, (int)o->op.len, o->op.ptr ? o->op.ptr : "",
           (long long)o->op_ts_ns, (int)o->launch.len, o->launch.ptr ? o->launch.ptr : "",
           (long long)o->launch_correlation);
  }
  for (int l = 0; l < 3; l++)
    for (size_t i = 0; i < osk_audit_event_count(a, (osk_audit_list_t)l); i++) {
      const osk_audit_event_t *e = osk_audit_event(a, (osk_audit_list_t)l, i);
      tb_put(&t, "list%d %.*s %lld/%d %lld %lld %d %lld\n", l, (int)e->name.len, e->name.ptr,
             (long long)e->correlation, e->has_correlation, (long long)e->ts_ns,
             (long long)e->dur_ns, e->has_launch, (long long)e->launch_ts_ns);
    }
  for (size_t i = 0; i < osk_audit_step_count(a); i++) {
    const osk_audit_step_t *st = osk_audit_step(a, i);
    tb_put(&t, "step %lld %lld %lld\n", (long long)st->step, (long long)st->ts_ns,
           (long long)st->dur_ns);
  }
  if (!t.buf) tb_put(&t, "-");
  return t.buf;
}

/* Audits `t` whole and in pieces of 1, 7 and 4096 bytes, which must agree;
 * returns the whole read's audit (the caller frees it). */
static osk_audit_t *audit_all_ways(const tb_t *t, const osk_audit_opts_t *o, int want_rc) {
  osk_audit_t *a = audit_mem(t->buf, t->len, 0, o, want_rc);
  char *ref = audit_text(a);
  static const size_t pieces[] = {1, 7, 4096};
  for (size_t i = 0; i < sizeof pieces / sizeof *pieces; i++) {
    osk_audit_t *b = audit_mem(t->buf, t->len, pieces[i], o, want_rc);
    char *got = audit_text(b);
    if (strcmp(ref, got)) {
      fprintf(stderr, "piece %zu:\n%s\nwhole:\n%s\n", pieces[i], got, ref);
      abort();
    }
    free(got);
    osk_audit_free(b);
  }
  free(ref);
  return a;
}

/* Ends the trace t and audits it every way (audit_all_ways, no options). */
static osk_audit_t *audit_trace(tb_t *t) {
  tb_end(t);
  return audit_all_ways(t, NULL, 0);
}

/* Runs `test` on a new trace, tb_begin's, and frees the trace after it. */
static void with_trace(void (*test)(tb_t *t)) {
  tb_t t;
  tb_begin(&t);
  test(&t);
  free(t.buf);
}

#define NS(us) ((int64_t)((us) * 1000.0 + ((us) < 0 ? -0.5 : 0.5)))
#define TNS(us) (NS(T0) + NS(us)) /* a time in the window, in ns */

static void check_clean_stats(const osk_audit_stats_t *s) {
  CHECK(s->missing == 0 && s->missing_head == 0 && s->orphans == 0 && s->bad_time == 0);
  CHECK(s->before_launch == 0 && s->external_id_mismatch == 0 && s->duplicate_launches == 0);
  CHECK(s->device_uncorrelated == 0 && s->unusable == 0 && !s->truncated);
}

/* ---------------------------------------------------------------- tests */

/* Kineto's ids as the reader hands them over: integers only, top level of
 * args only, the last repeated key wins, nothing else marked bad. */
typedef struct {
  int n;
  osk_reader_event_t ev[8];
} ids_t;

static int keep_ids(void *ctx, const osk_reader_event_t *ev) {
  ids_t *k = ctx;
  CHECK(k->n < 8);
  k->ev[k->n++] = *ev; /* only the numbers are looked at after the callback */
  return 0;
}

static void test_reader_ids(void) {
  const char *t =
      "{\"traceEvents\": [\n"
      "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k\", \"pid\": 0, \"tid\": 7, \"ts\": 1.000, "
      "\"dur\": 2.000, \"args\": {\"External id\": 8, \"grid\": [1, 1, 1], \"correlation\": 101, "
      "\"occupancy\": {\"correlation\": 5, \"External id\": 6}}},\n"
      "{\"ph\": \"s\", \"id\": 101, \"pid\": 1, \"tid\": 1, \"ts\": 1.000, \"cat\": \"ac2g\", "
      "\"name\": \"ac2g\"},\n"
      "{\"ph\": \"b\", \"id\": \"0x1f\", \"name\": \"async\", \"ts\": 1, "
      "\"args\": {\"correlation\": \"101\", \"External id\": 1.5}},\n"
      "{\"ph\": \"X\", \"name\": \"a\", \"ts\": 1, \"dur\": 1, \"id\": -9, "
      "\"args\": {\"correlation\": 1, \"correlation\": 123456789012345678, "
      "\"External id\": 7, \"External id\": null}},\n"
      "{\"ph\": \"X\", \"name\": \"big\", \"ts\": 1, \"dur\": 1, \"id\": 1234567890123456789, "
      "\"args\": {\"correlation\": -0, \"External id\": 1e3}},\n"
      "{\"ph\": \"X\", \"name\": \"none\", \"ts\": 1, \"dur\": 1, \"args\": {\"name\": \"x\"}}\n"
      "]}";
  static const size_t pieces[] = {0, 1, 3};
  for (size_t pi = 0; pi < 3; pi++) {
    ids_t k = {0};
    osk_reader_t *r;
    CHECK(osk_reader_open_mem(&r, t, strlen(t), pieces[pi], NULL, NULL) == 0);
    CHECK(osk_reader_run(r, keep_ids, &k, NULL) == 0);
    CHECK(osk_reader_stats(r)->bad_fields == 0);
    osk_reader_free(r);
    CHECK(k.n == 6);
    const unsigned ids = OSK_READER_EV_CORRELATION | OSK_READER_EV_EXTERNAL_ID | OSK_READER_EV_ID;
    /* A kernel: both ids from args' top level, not from the nested object. */
    CHECK((k.ev[0].has & ids) == (OSK_READER_EV_CORRELATION | OSK_READER_EV_EXTERNAL_ID));
    CHECK(k.ev[0].correlation == 101 && k.ev[0].external_id == 8 && k.ev[0].id == 0);
    /* A flow: its id is the correlation. */
    CHECK((k.ev[1].has & ids) == OSK_READER_EV_ID && k.ev[1].id == 101);
    /* Strings and fractions are not integer ids: no bit, 0, not bad. */
    CHECK((k.ev[2].has & (ids | OSK_READER_EV_BAD)) == 0);
    CHECK(k.ev[2].id == 0 && k.ev[2].correlation == 0 && k.ev[2].external_id == 0);
    /* The last repeated key wins, a null clears what came before. */
    CHECK((k.ev[3].has & ids) == (OSK_READER_EV_CORRELATION | OSK_READER_EV_ID));
    CHECK(k.ev[3].correlation == 123456789012345678 && k.ev[3].id == -9);
    CHECK(k.ev[3].external_id == 0);
    /* 19 digits do not fit the rule (at most 18); -0 is 0; 1e3 is not an integer. */
    CHECK((k.ev[4].has & ids) == OSK_READER_EV_CORRELATION && k.ev[4].correlation == 0);
    CHECK(k.ev[4].id == 0 && k.ev[4].external_id == 0);
    CHECK((k.ev[5].has & ids) == 0);
  }
}

/* A clean trace: two steps, a kernel, a memcpy and a memset each with its
 * launch, a synchronize and a host function (not launches of device work),
 * nothing flagged. */
static void build_clean(tb_t *t) {
  tb_begin(t);
  cpu(t, "user_annotation", "ProfilerStep#1", PID, 0, 60.5, 7);
  cpu(t, "cpu_op", "aten::add", PID, 10.12, 25.3, 8);
  cpu(t, "user_annotation", "ProfilerStep#2", PID, 70, 50, 9);
  cpu(t, "cpu_op", "aten::copy_", PID, 72, 20, 10);
  cpu(t, "cpu_op", "aten::zero_", PID, 95, 10, 11);
  cpu(t, "cpu_op", "aten::item", PID, 106, 10, 12);
  trace_span(t);
  runtime(t, "cudaLaunchKernel", PID, 18.4, 14.9, 101, 8);
  kernel(t, 36.8, 2.208, 101, 8);
  runtime(t, "cudaMemcpyAsync", PID, 74, 5, 102, 10);
  device(t, "gpu_memcpy", "Memcpy HtoD (Pageable -> Device)", 80, 3, 102, 10);
  runtime(t, "cudaMemsetAsync", PID, 96, 4, 103, 11);
  device(t, "gpu_memset", "Memset (Device)", 101, 1, 103, 11);
  runtime(t, "cudaLaunchHostFunc", PID, 107, 2, 104, 12);
  runtime(t, "cudaStreamSynchronize", PID, 110, 5, 105, 12);
  metadata(t);
  EV(t, "{\"ph\": \"X\", \"cat\": \"gpu_user_annotation\", \"name\": \"ProfilerStep#1\", \"pid\": 0, "
        "\"tid\": 7, \"ts\": %.3f, \"dur\": 2.210, \"args\": {\"External id\": 7}}",
     T0 + 36.799);
  tb_end(t);
}

static void test_clean(void) {
  tb_t t;
  build_clean(&t);
  osk_audit_t *a = audit_all_ways(&t, NULL, 0);
  const osk_audit_stats_t *s = osk_audit_stats(a);
  check_clean_stats(s);
  CHECK(s->device_events == 3 && s->launches == 3 && s->matched_launches == 3);
  CHECK(s->overhead_events == 0 && s->overhead_ns == 0 && s->overhead_in_op == 0);
  CHECK(s->operators == 6 && s->steps == 2);
  /* Gaps: 36.8 - 18.4, 80 - 74, 101 - 96: min, lower median, max. */
  CHECK(s->gap_min_ns == 5000 && s->gap_p50_ns == 6000 && s->gap_max_ns == 18400);
  CHECK(osk_audit_overhead_kind_count(a) == 0 && osk_audit_overhead_count(a) == 0);
  for (int l = 0; l < 3; l++) CHECK(osk_audit_event_count(a, (osk_audit_list_t)l) == 0);
  CHECK(osk_audit_step_count(a) == 2);
  CHECK(osk_audit_step(a, 0)->step == 1 && osk_audit_step(a, 0)->ts_ns == TNS(0));
  CHECK(osk_audit_step(a, 0)->dur_ns == 60500);
  CHECK(osk_audit_step(a, 1)->step == 2 && osk_audit_step(a, 1)->ts_ns == TNS(70));
  CHECK(osk_audit_step(a, 1)->dur_ns == 50000 && osk_audit_step(a, 2) == NULL);
  osk_audit_free(a);
  free(t.buf);
}

/* The trace of the example: an "Activity Buffer Request" inside
 * aten::add's cudaLaunchKernel; aten::mul on another thread started later
 * and also holds the record's start, but the launch's thread wins. A "Lazy
 * Function Loading" after aten::add, with no launch, lands in
 * ProfilerStep#1; an "Instrumentation" record lands in nothing. Written
 * into a begun trace (tb_begin), which it ends. */
static void build_buffer_request(tb_t *t, int reversed_gpu) {
  cpu(t, "user_annotation", "ProfilerStep#1", PID, 0, 60.5, 7);
  cpu(t, "cpu_op", "aten::add", PID, 10.12, 25.3, 8);
  cpu(t, "cpu_op", "aten::mul", PID + 1, 19, 11, 20);
  trace_span(t);
  if (!reversed_gpu) {
    runtime(t, "cudaLaunchKernel", PID, 18.4, 14.9, 101, 8);
    overhead(t, "Activity Buffer Request", 20.0, 11.2);
    kernel(t, 36.8, 2.208, 101, 8);
    overhead(t, "Lazy Function Loading", 40.0, 1.0);
    overhead(t, "Instrumentation", 200.0, 0.5);
    overhead(t, "Activity Buffer Request", 45.0, 0.3);
  } else { /* the same records in another file order */
    overhead(t, "Activity Buffer Request", 45.0, 0.3);
    overhead(t, "Instrumentation", 200.0, 0.5);
    kernel(t, 36.8, 2.208, 101, 8);
    overhead(t, "Lazy Function Loading", 40.0, 1.0);
    overhead(t, "Activity Buffer Request", 20.0, 11.2);
    runtime(t, "cudaLaunchKernel", PID, 18.4, 14.9, 101, 8);
  }
  metadata(t);
  tb_end(t);
}

static void test_buffer_request(tb_t *t) {
  build_buffer_request(t, 0);
  osk_audit_t *a = audit_all_ways(t, NULL, 0);
  const osk_audit_stats_t *s = osk_audit_stats(a);
  check_clean_stats(s);
  CHECK(s->device_events == 1 && s->launches == 1 && s->matched_launches == 1);
  CHECK(s->overhead_events == 4 && s->overhead_ns == 11200 + 1000 + 500 + 300);
  CHECK(s->overhead_in_launch == 1 && s->overhead_in_launch_ns == 11200);
  CHECK(s->overhead_in_op == 3 && s->overhead_in_op_ns == 11200 + 1000 + 300);
  /* Per name, the largest total first. */
  CHECK(osk_audit_overhead_kind_count(a) == 3);
  const osk_audit_overhead_kind_t *k = osk_audit_overhead_kind(a, 0);
  CHECK(str_eq(k->name, "Activity Buffer Request") && k->count == 2 && k->total_ns == 11500);
  k = osk_audit_overhead_kind(a, 1);
  CHECK(str_eq(k->name, "Lazy Function Loading") && k->count == 1 && k->total_ns == 1000);
  k = osk_audit_overhead_kind(a, 2);
  CHECK(str_eq(k->name, "Instrumentation") && k->count == 1 && k->total_ns == 500);
  /* The records in time order, each placed. */
  CHECK(osk_audit_overhead_count(a) == 4);
  const osk_audit_overhead_t *o = osk_audit_overhead(a, 0);
  CHECK(str_eq(o->name, "Activity Buffer Request") && o->ts_ns == TNS(20) && o->dur_ns == 11200);
  CHECK(str_eq(o->op, "aten::add") && o->op_ts_ns == TNS(10.12) && o->op_dur_ns == 25300);
  CHECK(o->op_pid.kind == OSK_READER_ID_INT && o->op_pid.num == PID);
  CHECK(o->op_tid.kind == OSK_READER_ID_INT && o->op_tid.num == PID);
  CHECK(str_eq(o->launch, "cudaLaunchKernel") && o->launch_correlation == 101);
  CHECK(o->launch_ts_ns == TNS(18.4) && o->launch_dur_ns == 14900);
  o = osk_audit_overhead(a, 1);
  CHECK(str_eq(o->name, "Lazy Function Loading") && str_eq(o->op, "ProfilerStep#1"));
  CHECK(o->launch.ptr == NULL && o->launch_correlation == 0);
  o = osk_audit_overhead(a, 2);
  CHECK(str_eq(o->name, "Activity Buffer Request") && o->ts_ns == TNS(45));
  CHECK(str_eq(o->op, "ProfilerStep#1") && o->launch.ptr == NULL);
  o = osk_audit_overhead(a, 3);
  CHECK(str_eq(o->name, "Instrumentation") && o->op.ptr == NULL && o->launch.ptr == NULL);
  CHECK(o->op_pid.kind == OSK_READER_ID_NONE);
  CHECK(osk_audit_overhead(a, 4) == NULL);

  /* Another file order: the same audit. */
  char *ref = audit_text(a);
  tb_t r;
  tb_begin(&r);
  build_buffer_request(&r, 1);
  osk_audit_t *b = audit_all_ways(&r, NULL, 0);
  char *got = audit_text(b);
  CHECK(strcmp(ref, got) == 0);
  free(got);
  osk_audit_free(b);
  free(r.buf);
  free(ref);

  /* Not operator time anywhere: the summary of the same trace keeps
   * aten::add's times its own (25.3 us, 25.3 - 14.9 us of self time beside
   * its launch), the launch's 14.9 us, and the records on their own row,
   * pid -1, nested in nothing. */
  osk_summary_t *sum;
  CHECK(osk_summary_from_mem(t->buf, t->len, 0, NULL, NULL, &sum, NULL, NULL) == 0);
  int seen = 0;
  for (size_t i = 0; i < osk_summary_op_count(sum); i++) {
    const osk_summary_op_t *op = osk_summary_op(sum, i);
    if (str_eq(op->name, "aten::add")) {
      CHECK(op->total_ns == 25300 && op->self_ns == 25300 - 14900 && op->descendants == 1);
      seen++;
    } else if (str_eq(op->name, "cudaLaunchKernel")) {
      CHECK(op->total_ns == 14900 && op->self_ns == 14900 && op->descendants == 0);
      seen++;
    } else if (str_eq(op->name, "Activity Buffer Request")) {
      CHECK(op->calls == 2 && op->total_ns == 11500 && op->self_ns == 11500);
      seen++;
    }
  }
  CHECK(seen == 3);
  for (size_t i = 0; i < osk_summary_thread_count(sum); i++) {
    const osk_summary_thread_t *th = osk_summary_thread(sum, i);
    if (th->pid.kind == OSK_READER_ID_INT && th->pid.num == -1) CHECK(th->complete_events == 4);
  }
  osk_summary_free(sum);
  osk_audit_free(a);

  /* max_records: the lists are cut, the counts are not; NONE keeps none. */
  osk_audit_opts_t opt = {.max_records = 1};
  a = audit_mem(t->buf, t->len, 0, &opt, 0);
  CHECK(osk_audit_overhead_count(a) == 1 && osk_audit_stats(a)->overhead_events == 4);
  CHECK(osk_audit_stats(a)->overhead_in_op == 3 && osk_audit_overhead_kind_count(a) == 3);
  CHECK(str_eq(osk_audit_overhead(a, 0)->op, "aten::add"));
  osk_audit_free(a);
  opt.max_records = OSK_AUDIT_RECORDS_NONE;
  a = audit_mem(t->buf, t->len, 0, &opt, 0);
  CHECK(osk_audit_overhead_count(a) == 0 && osk_audit_stats(a)->overhead_events == 4);
  osk_audit_free(a);
}

/* Where a record lands, rule by rule: the innermost operator on the
 * launch's thread; with no launch, the operator that started last on any
 * thread; improper overlap (with_stack's annotation outliving the Python
 * event it started in) by the nesting rule; a zero-length record; the
 * launch with the largest overlap. */
static void test_landing_rules(tb_t *t) {
  /* Thread A: outer [0, 100) > inner [10, 50) > leaf [20, 30); two launches. */
  cpu(t, "cpu_op", "outer", PID, 0, 100, 1);
  cpu(t, "cpu_op", "inner", PID, 10, 40, 2);
  cpu(t, "cpu_op", "leaf", PID, 20, 10, 3);
  /* Thread B: "late" [60, 90), "py" [200, 210) then "annot" [205, 260)
   * outliving it (an improper overlap), equal starts "long" [300, 350)
   * holding "short" [300, 310). */
  cpu(t, "cpu_op", "late", PID + 1, 60, 30, 4);
  cpu(t, "python_function", "not an operator", PID + 1, 61, 1, 0);
  cpu(t, "cpu_op", "py", PID + 1, 200, 10, 5);
  cpu(t, "user_annotation", "annot", PID + 1, 205, 55, 6);
  cpu(t, "cpu_op", "short", PID + 1, 300, 10, 8);
  cpu(t, "cpu_op", "long", PID + 1, 300, 50, 7);
  runtime(t, "cudaLaunchKernel", PID, 21, 5, 11, 3);
  runtime(t, "cudaLaunchKernel", PID, 26, 3, 12, 3);
  runtime(t, "cuLaunchKernel", PID, 70, 10, 13, 0); /* a driver-side name, no External id */
  kernel(t, 40, 1, 11, 3);
  kernel(t, 41, 1, 12, 3);
  kernel(t, 90, 1, 13, 0);
  overhead(t, "o1", 25, 2);    /* [25, 27): 1 us in launch 11, 1 us in 12: the earlier */
  overhead(t, "o2", 25.5, 3);  /* [25.5, 28.5): 0.5 in 11, 2.5 in 12 */
  overhead(t, "o3", 75, 1);    /* launch 13 on A, A's innermost there: outer, not B's late */
  overhead(t, "o4", 65, 1);    /* no launch: late (B) started after outer (A) */
  overhead(t, "o5", 207, 1);   /* py [200,210) was closed by annot at 205: annot */
  overhead(t, "o6", 305, 0);   /* zero length, in short (inside long) */
  overhead(t, "o7", 310, 1);   /* short ended at 310: long */
  overhead(t, "o8", 26, 0);    /* a point where 11 ends and 12 starts: 12 holds it */
  overhead(t, "o9", 29, 2);    /* [29, 31) only touches launch 12's end at 29: none */
  osk_audit_t *a = audit_trace(t);
  const osk_audit_stats_t *s = osk_audit_stats(a);
  check_clean_stats(s);
  CHECK(s->operators == 8 && s->launches == 3 && s->overhead_events == 9);
  static const struct {
    const char *name, *op, *launch;
    int corr;
  } want[] = {
      {"o1", "leaf", "cudaLaunchKernel", 11},  {"o2", "leaf", "cudaLaunchKernel", 12},
      {"o8", "leaf", "cudaLaunchKernel", 12},  {"o9", "leaf", NULL, 0},
      {"o4", "late", NULL, 0},                 {"o3", "outer", "cuLaunchKernel", 13},
      {"o5", "annot", NULL, 0},                {"o6", "short", NULL, 0},
      {"o7", "long", NULL, 0},
  };
  CHECK(osk_audit_overhead_count(a) == 9);
  for (size_t i = 0; i < 9; i++) {
    const osk_audit_overhead_t *o = osk_audit_overhead(a, i);
    if (!str_eq(o->name, want[i].name) || !str_eq(o->op, want[i].op) ||
        (want[i].launch ? !str_eq(o->launch, want[i].launch) : o->launch.ptr != NULL) ||
        o->launch_correlation != want[i].corr) {
      fprintf(stderr, "record %zu: %.*s in %.*s, launch %.*s #%lld; expected %s in %s, %s #%d\n", i,
              (int)o->name.len, o->name.ptr, (int)o->op.len, o->op.ptr ? o->op.ptr : "",
              (int)o->launch.len, o->launch.ptr ? o->launch.ptr : "",
              (long long)o->launch_correlation, want[i].name, want[i].op,
              want[i].launch ? want[i].launch : "-", want[i].corr);
      abort();
    }
  }
  CHECK(s->overhead_in_launch == 4 && s->overhead_in_op == 9);
  osk_audit_free(a);
}

/* A launch without its kernel (T #192021: the first launches of a later
 * session lose their kernels), one later as well, and a duplicate. */
static void test_missing_kernel(tb_t *t) {
  cpu(t, "user_annotation", "ProfilerStep#5", PID, 0, 100, 1);
  cpu(t, "cpu_op", "aten::add", PID, 1, 90, 2);
  runtime(t, "cudaLaunchKernel", PID, 2, 3, 201, 2);
  runtime(t, "cudaLaunchKernel", PID, 6, 3, 202, 2);
  runtime(t, "cudaLaunchKernel", PID, 10, 3, 203, 2);
  runtime(t, "cudaLaunchKernel", PID, 14, 3, 203, 2); /* the same correlation again */
  runtime(t, "cudaMemcpyAsync", PID, 20, 3, 204, 2);
  kernel(t, 12, 1, 203, 2);
  osk_audit_t *a = audit_trace(t);
  const osk_audit_stats_t *s = osk_audit_stats(a);
  CHECK(s->launches == 5 && s->device_events == 1 && s->matched_launches == 1);
  CHECK(s->missing == 3 && s->missing_head == 2 && s->duplicate_launches == 1);
  CHECK(s->orphans == 0 && s->bad_time == 0 && s->external_id_mismatch == 0);
  CHECK(s->gap_min_ns == 2000 && s->gap_p50_ns == 2000 && s->gap_max_ns == 2000);
  CHECK(osk_audit_event_count(a, OSK_AUDIT_MISSING) == 3);
  const osk_audit_event_t *e = osk_audit_event(a, OSK_AUDIT_MISSING, 0);
  CHECK(str_eq(e->name, "cudaLaunchKernel") && e->correlation == 201 && e->has_correlation);
  CHECK(e->ts_ns == TNS(2) && e->dur_ns == 3000 && !e->has_launch);
  CHECK(osk_audit_event(a, OSK_AUDIT_MISSING, 1)->correlation == 202);
  e = osk_audit_event(a, OSK_AUDIT_MISSING, 2);
  CHECK(str_eq(e->name, "cudaMemcpyAsync") && e->correlation == 204 && e->ts_ns == TNS(20));
  CHECK(osk_audit_event(a, OSK_AUDIT_MISSING, 3) == NULL);
  CHECK(osk_audit_event_count(a, OSK_AUDIT_ORPHANS) == 0);
  CHECK(osk_audit_step_count(a) == 1 && osk_audit_step(a, 0)->step == 5);
  osk_audit_free(a);
}

/* A kernel whose launch fell before the window, and one without a
 * correlation at all (counted apart, not an orphan). */
static void test_orphan_kernel(tb_t *t) {
  cpu(t, "cpu_op", "aten::add", PID, 1, 20, 2);
  runtime(t, "cudaLaunchKernel", PID, 2, 3, 302, 2);
  kernel(t, 0.5, 1, 301, 1);
  kernel(t, 6, 1, 302, 2);
  device(t, "kernel", "no correlation", 8, 1, -1, 0);
  osk_audit_t *a = audit_trace(t);
  const osk_audit_stats_t *s = osk_audit_stats(a);
  CHECK(s->device_events == 3 && s->device_uncorrelated == 1 && s->launches == 1);
  CHECK(s->orphans == 1 && s->missing == 0 && s->bad_time == 0 && s->matched_launches == 1);
  CHECK(s->external_id_mismatch == 0);
  CHECK(osk_audit_event_count(a, OSK_AUDIT_ORPHANS) == 1);
  const osk_audit_event_t *e = osk_audit_event(a, OSK_AUDIT_ORPHANS, 0);
  CHECK(e->correlation == 301 && e->ts_ns == TNS(0.5) && e->dur_ns == 1000 && !e->has_launch);
  CHECK(str_eq(e->name, "void at::native::vectorized_elementwise_kernel<4>(int)"));
  osk_audit_free(a);
}

/* A kernel as audit_three_launches writes it: start, duration (us), External id
 * (0: none). */
typedef struct {
  double ts, dur;
  int ext;
} kern_t;

/* aten::add [1, 41) with External id ext and its three launches of 3 us at
 * 10, 20 and 30 us, correlations corr + 1 to corr + 3, each with External
 * id ext, then their kernels k[0..3); audited every way. */
static osk_audit_t *audit_three_launches(int corr, int ext, const kern_t k[3]) {
  tb_t t;
  tb_begin(&t);
  cpu(&t, "cpu_op", "aten::add", PID, 1, 40, ext);
  for (int i = 0; i < 3; i++)
    runtime(&t, "cudaLaunchKernel", PID, 10 * (i + 1), 3, corr + i + 1, ext);
  for (int i = 0; i < 3; i++) kernel(&t, k[i].ts, k[i].dur, corr + i + 1, k[i].ext);
  osk_audit_t *a = audit_trace(&t);
  free(t.buf);
  return a;
}

/* A kernel's time and External id against its launch's. */
static void test_kernel_time_and_ids(void) {
  /* A kernel that starts before its launch (a clock offset), one of
   * duration 0 (what Kineto writes for end < start), one fine. */
  static const kern_t early[3] = {{9.5, 1, 2}, {25, 0, 2}, {35, 1, 2}};
  osk_audit_t *a = audit_three_launches(400, 2, early);
  const osk_audit_stats_t *s = osk_audit_stats(a);
  CHECK(s->bad_time == 2 && s->before_launch == 1 && s->missing == 0 && s->orphans == 0);
  CHECK(s->matched_launches == 3);
  CHECK(s->gap_min_ns == -500 && s->gap_p50_ns == 5000 && s->gap_max_ns == 5000);
  CHECK(osk_audit_event_count(a, OSK_AUDIT_BAD_TIME) == 2);
  const osk_audit_event_t *e = osk_audit_event(a, OSK_AUDIT_BAD_TIME, 0);
  CHECK(e->correlation == 401 && e->ts_ns == TNS(9.5) && e->has_launch && e->launch_ts_ns == TNS(10));
  e = osk_audit_event(a, OSK_AUDIT_BAD_TIME, 1);
  CHECK(e->correlation == 402 && e->dur_ns == 0 && e->has_launch && e->launch_ts_ns == TNS(20));
  osk_audit_free(a);

  /* A kernel whose External id is another operator's, and one without any
   * while its launch has one. */
  static const kern_t ids[3] = {{15, 1, 9}, {25, 1, 0}, {35, 1, 8}};
  a = audit_three_launches(500, 8, ids);
  s = osk_audit_stats(a);
  CHECK(s->external_id_mismatch == 2 && s->missing == 0 && s->orphans == 0 && s->bad_time == 0);
  osk_audit_free(a);
}

/* gzip audits as plain; a trace cut anywhere audits what was read, flagged;
 * cut after a launch and before its kernel, that launch is missing. */
static void test_gzip_and_truncated(tb_t *t) {
  build_buffer_request(t, 0);
  osk_audit_t *a = audit_mem(t->buf, t->len, 0, NULL, 0);
  char *ref = audit_text(a);
  osk_audit_free(a);
  size_t gz_len;
  unsigned char *gz = gzip_of(t->buf, t->len, &gz_len);
  osk_reader_stats_t rs;
  CHECK(osk_audit_from_mem(gz, gz_len, 0, NULL, NULL, &a, &rs, NULL) == 0 && rs.gzip);
  char *got = audit_text(a);
  CHECK(strcmp(ref, got) == 0);
  free(got);
  osk_audit_free(a);

  /* Cut before the kernel: its launch is missing, the Buffer Request
   * before it is placed, the trace is flagged. */
  const char *k = strstr(t->buf, "\"cat\": \"kernel\"");
  CHECK(k);
  size_t cut = (size_t)(k - t->buf) - 10;
  osk_error_t err;
  CHECK(osk_audit_from_mem(t->buf, cut, 0, NULL, NULL, &a, NULL, &err) == OSK_ETRUNCATED);
  CHECK(err.code == OSK_ETRUNCATED);
  const osk_audit_stats_t *s = osk_audit_stats(a);
  CHECK(s->truncated && s->launches == 1 && s->device_events == 0 && s->missing == 1);
  CHECK(s->overhead_events == 1 && str_eq(osk_audit_overhead(a, 0)->op, "aten::add"));
  osk_audit_free(a);

  /* The gzip cut short: the same. */
  CHECK(osk_audit_from_mem(gz, gz_len / 2, 0, NULL, NULL, &a, &rs, NULL) == OSK_ETRUNCATED);
  CHECK(osk_audit_stats(a)->truncated && rs.gzip_unterminated);
  osk_audit_free(a);

  /* Every prefix: truncated (the empty one too), never a crash, and never
   * more than the whole. */
  for (size_t n = 0; n < t->len - 2; n++) {
    a = audit_mem(t->buf, n, 0, NULL, OSK_ETRUNCATED);
    s = osk_audit_stats(a);
    CHECK(s->truncated && s->overhead_events <= 4 && s->launches <= 1 && s->missing <= s->launches);
    osk_audit_free(a);
  }
  /* Invalid JSON: the audit of what came before, not flagged as truncated. */
  char *bad = malloc(t->len + 1);
  memcpy(bad, t->buf, t->len + 1);
  char *p = strstr(bad, "\"cat\": \"kernel\"");
  p[0] = '!';
  a = audit_mem(bad, t->len, 0, NULL, OSK_EFORMAT);
  CHECK(!osk_audit_stats(a)->truncated && osk_audit_stats(a)->launches == 1);
  osk_audit_free(a);
  free(bad);
  free(gz);
  free(ref);
}

/* A CPU-only trace (no CUDA activity): nothing to flag, nothing placed. */
static void test_no_cuda(tb_t *t) {
  cpu(t, "user_annotation", "ProfilerStep#0", PID, 0, 50, 1);
  cpu(t, "cpu_op", "aten::add", PID, 1, 5, 2);
  cpu(t, "user_annotation", "ProfilerStep#1", PID, 60, 40, 3);
  cpu(t, "user_annotation", "ProfilerStep#x", PID, 61, 1, 4); /* not a step */
  trace_span(t);
  metadata(t);
  osk_audit_t *a = audit_trace(t);
  const osk_audit_stats_t *s = osk_audit_stats(a);
  check_clean_stats(s);
  CHECK(s->device_events == 0 && s->launches == 0 && s->overhead_events == 0 && s->matched_launches == 0);
  CHECK(s->gap_min_ns == 0 && s->gap_p50_ns == 0 && s->gap_max_ns == 0);
  CHECK(s->operators == 4 && s->steps == 2 && osk_audit_step_count(a) == 2);
  CHECK(osk_audit_step(a, 0)->step == 0 && osk_audit_step(a, 1)->step == 1);
  CHECK(osk_audit_overhead_kind_count(a) == 0 && osk_audit_overhead_count(a) == 0);
  osk_audit_free(a);

  /* Not even events: an empty document, and a bare array. */
  a = audit_mem("{}", 2, 0, NULL, 0);
  CHECK(osk_audit_stats(a)->events == 0 && osk_audit_step_count(a) == 0);
  osk_audit_free(a);
  a = audit_mem("[]", 2, 0, NULL, 0);
  osk_audit_free(a);
}

/* The streaming API and its misuse. */
static void test_api(void) {
  osk_audit_t *a;
  CHECK(osk_audit_new(NULL, NULL) == OSK_EINVAL);
  CHECK(osk_audit_new(&a, NULL) == 0);
  CHECK(osk_audit_overhead_count(a) == 0 && osk_audit_event(a, OSK_AUDIT_MISSING, 0) == NULL);
  osk_reader_event_t ev = {0};
  ev.ph = (osk_str_t){"X", 1};
  ev.cat = (osk_str_t){"overhead", 8};
  ev.name = (osk_str_t){"Resource", 8};
  ev.has = OSK_READER_EV_TS | OSK_READER_EV_DUR | OSK_READER_EV_NAME;
  ev.ts_ns = 5;
  ev.dur_ns = -1; /* unusable: a negative duration */
  CHECK(osk_audit_add(a, &ev) == 0);
  ev.dur_ns = 3;
  CHECK(osk_audit_add(a, &ev) == 0);
  ev.cat = (osk_str_t){"kernel", 6}; /* a device event without a name */
  ev.name = (osk_str_t){NULL, 0};
  ev.has = OSK_READER_EV_TS | OSK_READER_EV_DUR;
  CHECK(osk_audit_add(a, &ev) == 0);
  CHECK(osk_audit_finish(a) == 0);
  CHECK(osk_audit_finish(a) == OSK_EINVAL);
  CHECK(osk_audit_add(a, &ev) == OSK_EINVAL);
  const osk_audit_stats_t *s = osk_audit_stats(a);
  CHECK(s->events == 3 && s->unusable == 1 && s->overhead_events == 1 && s->overhead_ns == 3);
  CHECK(s->device_events == 1 && s->device_uncorrelated == 1 && s->orphans == 0);
  CHECK(osk_audit_overhead_count(a) == 1 && osk_audit_overhead(a, 0)->op.ptr == NULL);
  osk_audit_free(a);
  osk_audit_free(NULL);
  CHECK(osk_audit_stats(NULL)->events == 0);
  osk_error_t err;
  CHECK(osk_audit_from_path(NULL, NULL, NULL, &a, NULL, &err) == OSK_EINVAL);
  CHECK(osk_audit_from_path("no/such/trace.json", NULL, NULL, &a, NULL, &err) == OSK_EIO);
  CHECK(a == NULL && err.code == OSK_EIO && err.sys_errno != 0);
  CHECK(osk_audit_from_mem("{}", 2, 0, NULL, NULL, NULL, NULL, &err) == OSK_EINVAL);

  /* A file, as the binding reads it. */
  tb_t t;
  build_clean(&t);
  FILE *f = fopen("audit.json", "wb");
  CHECK(f && fwrite(t.buf, 1, t.len, f) == t.len && fclose(f) == 0);
  CHECK(osk_audit_from_path("audit.json", NULL, NULL, &a, NULL, &err) == 0 && err.code == 0);
  CHECK(osk_audit_stats(a)->matched_launches == 3);
  osk_audit_free(a);
  free(t.buf);
}

int main(void) {
  osk_test_in_tmpdir();
  test_reader_ids();
  test_clean();
  with_trace(test_buffer_request);
  with_trace(test_landing_rules);
  with_trace(test_missing_kernel);
  with_trace(test_orphan_kernel);
  test_kernel_time_and_ids();
  with_trace(test_gzip_and_truncated);
  with_trace(test_no_cuda);
  test_api();
  puts("test_audit: ok");
  return 0;
}
