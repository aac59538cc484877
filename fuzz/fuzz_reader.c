/* fuzz_reader.c: libFuzzer target for the trace reader and the analyzer.
 *
 * Besides "no crash, no sanitizer report", it checks a differential oracle:
 * the same bytes read whole and read in small pieces through a tiny buffer
 * must give the same status, error offset and number of events, because the
 * chunk boundary is the reader's hardest part; the kept top-level objects and
 * the option marks must agree too. Each read must examine under 3x its input
 * (stats.bytes_scanned) and read the same again after osk_reader_rewind. The first input byte picks the
 * piece size; the rest is the trace. Built and run by fuzz/run.sh. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "opskew_reader.h"

typedef struct {
  uint64_t n;
  uint64_t sum;     /* a digest of what the events carried */
  uint64_t members; /* a digest of the kept objects and the option marks */
} tally_t;

/* Digests what the reader keeps besides events, and checks its contract: at
 * most OSK_READER_OBJECTS_MAX objects and arrays, each within the bound, NUL
 * terminated, an object's text in braces or an array's in brackets, and
 * found by key. */
static uint64_t members_digest(const osk_reader_t *r) {
  uint64_t h = 0;
  size_t n = osk_reader_object_count(r);
  if (n > OSK_READER_OBJECTS_MAX) abort();
  for (size_t i = 0; i < n; i++) {
    osk_str_t k, v;
    if (osk_reader_object_get(r, i, &k, &v)) abort();
    if (v.len < 2 || v.len > OSK_READER_OBJECT_MAX_BYTES || v.ptr[v.len] ||
        !((v.ptr[0] == '{' && v.ptr[v.len - 1] == '}') || (v.ptr[0] == '[' && v.ptr[v.len - 1] == ']')))
      abort();
    if (k.ptr[k.len]) abort();
    if (strlen(k.ptr) == k.len && osk_reader_object_find(r, k.ptr, NULL)) abort();
    for (size_t j = 0; j < v.len; j++) h = h * 131 + (unsigned char)v.ptr[j];
    h = h * 31 + k.len;
  }
  if (osk_reader_object_get(r, n, NULL, NULL) != OSK_ERANGE) abort();
  const osk_reader_marks_t *m = &osk_reader_stats(r)->marks;
  uint64_t marked = m->input_dims + m->python_function + m->memory + m->module_hierarchy + m->flops + m->backward;
  if (m->input_dims > osk_reader_stats(r)->events || m->memory > osk_reader_stats(r)->events ||
      m->backward > osk_reader_stats(r)->events)
    abort();
  return h * 7 + marked + 3 * m->input_dims + 5 * m->python_function + 11 * m->flops;
}

static int tally(void *ctx, const osk_reader_event_t *ev) {
  tally_t *t = ctx;
  t->n++;
  t->sum = t->sum * 31 + (uint64_t)ev->ts_ns + 7 * (uint64_t)ev->dur_ns + ev->name.len +
           ev->has + ev->arg_name.len + ev->ph.len + ev->pid.str.len + (uint64_t)ev->tid.num +
           11 * (uint64_t)ev->correlation + 13 * (uint64_t)ev->external_id + 17 * (uint64_t)ev->id;
  return 0;
}

static int read_once(const uint8_t *d, size_t n, size_t piece, size_t chunk, tally_t *t,
                     osk_error_t *err) {
  osk_reader_t *r;
  osk_reader_opts_t o = {.chunk_bytes = chunk, .max_unit_bytes = 1 << 20};
  if (osk_reader_open_mem(&r, d, n, piece, &o, err)) abort();
  memset(t, 0, sizeof *t);
  int rc = osk_reader_run(r, tally, t, err);
  t->members = members_digest(r);
  /* The work bound (issue 11): each unit is re-parsed only after its
   * buffered part doubled, so the parser examines under 3x the input. */
  const osk_reader_stats_t *st = osk_reader_stats(r);
  if (st->bytes_scanned > 3 * (st->bytes + 1) + 16) { /* bytes: of JSON, after gzip */
    fprintf(stderr, "examined %llu bytes of %llu\n", (unsigned long long)st->bytes_scanned,
            (unsigned long long)st->bytes);
    abort();
  }
  /* A rewound reader reads the same again. */
  tally_t again = {0};
  osk_error_t err2;
  if (osk_reader_rewind(r, &err2)) abort();
  int rc2 = osk_reader_run(r, tally, &again, &err2);
  if (rc2 != rc || again.n != t->n || again.sum != t->sum || members_digest(r) != t->members ||
      (rc && err2.offset != err->offset))
    abort();
  osk_reader_free(r);
  return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  size_t piece = 1 + data[0] % 13, chunk = 1 + (data[0] >> 4);
  data++;
  size--;
  tally_t a, b;
  osk_error_t ea, eb;
  /* "Whole": no piece limit and a buffer larger than any input (max_len). */
  int ra = read_once(data, size, 0, 8192, &a, &ea);
  int rb = read_once(data, size, piece, chunk, &b, &eb);
  /* Corrupt gzip is noticed by zlib after a chunk-dependent amount of output,
   * so for gzip input only the status must agree. */
  int gz = size >= 2 && data[0] == 0x1f && data[1] == 0x8b;
  if (ra != rb || (!gz && (a.n != b.n || a.sum != b.sum || a.members != b.members ||
                                ea.offset != eb.offset))) {
    fprintf(stderr, "whole vs pieces differ: rc %d/%d events %llu/%llu offset %llu/%llu\n", ra, rb,
            (unsigned long long)a.n, (unsigned long long)b.n, (unsigned long long)ea.offset,
            (unsigned long long)eb.offset);
    abort();
  }
  if (ra != 0 && ra != OSK_ETRUNCATED && ra != OSK_EFORMAT && ra != OSK_ERANGE) abort();
  if (ra && (!ea.message || !*ea.message)) abort();
  /* The analyzer over the same input, including its sorted second pass. */
  osk_summary_t *s = NULL;
  osk_reader_opts_t ro = {.chunk_bytes = chunk, .max_unit_bytes = 1 << 20};
  int rs = osk_summary_from_mem(data, size, piece, NULL, &ro, &s, NULL, NULL);
  if (rs != ra) abort();
  for (size_t i = 0; i < osk_summary_op_count(s); i++) {
    const osk_summary_op_t *op = osk_summary_op(s, i);
    double v;
    if (op->self_ns < 0 || op->total_ns < 0) abort();
    /* An op can exist without calls: a "B" that never ended. */
    int rq = osk_summary_op_quantile(s, i, 0.99, &v);
    if (op->calls == 0 && rq == OSK_ETOOFEW) continue;
    if (rq != 0) abort();
    if (v < (double)op->min_ns || v > (double)op->max_ns) abort();
  }
  osk_summary_free(s);
  /* The CUDA audit over the same input (issue 36): its counts agree with
   * each other and its lists are within them. */
  osk_audit_t *au = NULL;
  osk_audit_opts_t ao = {.max_records = 1 + piece % 3};
  int ru = osk_audit_from_mem(data, size, piece, &ao, &ro, &au, NULL, NULL);
  if (ru != ra || !au) abort();
  const osk_audit_stats_t *u = osk_audit_stats(au);
  if (u->matched_launches + u->missing + u->duplicate_launches != u->launches ||
      u->missing_head > u->missing || u->orphans + u->device_uncorrelated > u->device_events ||
      u->bad_time > u->device_events || u->before_launch > u->bad_time ||
      u->external_id_mismatch > u->device_events || u->overhead_in_launch > u->overhead_events ||
      u->overhead_in_op > u->overhead_events || u->truncated != (ru == OSK_ETRUNCATED) ||
      u->gap_min_ns > u->gap_p50_ns || u->gap_p50_ns > u->gap_max_ns)
    abort();
  if (osk_audit_event_count(au, OSK_AUDIT_MISSING) > u->missing ||
      osk_audit_event_count(au, OSK_AUDIT_ORPHANS) > u->orphans ||
      osk_audit_event_count(au, OSK_AUDIT_BAD_TIME) > u->bad_time ||
      osk_audit_overhead_count(au) > u->overhead_events || osk_audit_step_count(au) != u->steps)
    abort();
  uint64_t kinds = 0;
  for (size_t i = 0; i < osk_audit_overhead_kind_count(au); i++) kinds += osk_audit_overhead_kind(au, i)->count;
  if (kinds != u->overhead_events) abort();
  for (size_t i = 0; i < osk_audit_overhead_count(au); i++) {
    const osk_audit_overhead_t *o = osk_audit_overhead(au, i);
    /* The operator holds the record's start. */
    if (o->op.ptr && (o->op_ts_ns > o->ts_ns || o->ts_ns - o->op_ts_ns >= o->op_dur_ns)) abort();
    if (i && o->ts_ns < osk_audit_overhead(au, i - 1)->ts_ns) abort();
  }
  osk_audit_free(au);
  return 0;
}
