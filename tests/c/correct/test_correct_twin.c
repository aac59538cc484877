/* The corrected trace as written for its readers: float64 readers (ts and
 * ts + dur in float64) nest it as the exact text does (docs/outputs.md,
 * "Read as float64"). Runs in a private folder under $TMPDIR. */
#include "correct_testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  CHECK(f);
  CHECK(fputs(text, f) >= 0);
  CHECK(fclose(f) == 0);
}

#define MAXEV 64
typedef struct {
  int n;
  int64_t ts[MAXEV], end[MAXEV];
  char name[MAXEV][16];
} xs_t;

static int collect_x(void *ctx, const osk_reader_event_t *ev) {
  xs_t *s = ctx;
  if (ev->ph.len != 1 || ev->ph.ptr[0] != 'X' || s->n >= MAXEV) return 0;
  s->ts[s->n] = ev->ts_ns;
  s->end[s->n] = ev->ts_ns + ev->dur_ns;
  size_t k = ev->name.len < 15 ? ev->name.len : 15;
  memcpy(s->name[s->n], ev->name.ptr, k);
  s->name[s->n][k] = 0;
  s->n++;
  return 0;
}

/* ns as a reader reads the written microseconds: strtod of the text. */
static double read_us(int64_t ns) {
  char buf[40];
  snprintf(buf, sizeof buf, "%lld.%03lld", (long long)(ns / 1000), (long long)(ns % 1000));
  return strtod(buf, NULL);
}

static unsigned bits(double sa, double ea, double sb, double eb) {
  return (unsigned)(sa <= sb && eb <= ea) | (unsigned)(sb <= sa && ea <= eb) << 1 | (unsigned)(ea <= sb || eb <= sa) << 2;
}

/* How many pairs float64 reads otherwise than the exact text (one thread). */
static int crossed(const xs_t *s) {
  int bad = 0;
  for (int i = 0; i < s->n; i++)
    for (int j = i + 1; j < s->n; j++) {
      double fa = read_us(s->ts[i]), fb = read_us(s->ts[j]);
      volatile double ga = fa + read_us(s->end[i] - s->ts[i]), gb = fb + read_us(s->end[j] - s->ts[j]);
      unsigned x = (unsigned)(s->ts[i] <= s->ts[j] && s->end[j] <= s->end[i]) |
                   (unsigned)(s->ts[j] <= s->ts[i] && s->end[i] <= s->end[j]) << 1 |
                   (unsigned)(s->end[i] <= s->ts[j] || s->end[j] <= s->ts[i]) << 2;
      unsigned f = bits(fa, ga, fb, gb);
      if (x ? (x & ~f) : f) bad++;
    }
  return bad;
}

/* Near ts = 5.8e12 us one ulp is 0.98 ns: a child ending where its parent
 * ends and siblings abutting, ties in the text, read crossed in float64
 * unless the writer moves them. P holds A, C and B: A ends where C begins
 * and reads past it (...341.792 + ...), B ends where P ends and reads past
 * it; Q holds R, which holds S, all three ending together. */
static const char *TIES =
    "{\"traceEvents\":[\n"
    "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"P\",\"pid\":1,\"tid\":1,\"ts\":5784287967338.794,\"dur\":10.000},\n"
    "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"A\",\"pid\":1,\"tid\":1,\"ts\":5784287967339.771,\"dur\":2.021},\n"
    "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"C\",\"pid\":1,\"tid\":1,\"ts\":5784287967341.792,\"dur\":0.021},\n"
    "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"B\",\"pid\":1,\"tid\":1,\"ts\":5784287967341.813,\"dur\":6.981},\n"
    "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"Q\",\"pid\":1,\"tid\":1,\"ts\":5784287967350.001,\"dur\":7.333},\n"
    "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"R\",\"pid\":1,\"tid\":1,\"ts\":5784287967351.117,\"dur\":6.217},\n"
    "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"S\",\"pid\":1,\"tid\":1,\"ts\":5784287967352.229,\"dur\":5.105}\n"
    "]}\n";

static void test_float64_ties(void) {
  write_file("ties.json", TIES);
  /* The input itself reads crossed: its ties are exact in the text. */
  xs_t in = {0};
  read_path("ties.json", collect_x, &in);
  CHECK(in.n == 7);
  int raw_crossed = crossed(&in);
  /* At W = 0 and at a W that moves every boundary, the written trace reads
   * as it is: no pair crossed, and the table is the written trace. */
  const double ws[] = {0.0, 100.0, 333.0};
  int moved_any = 0;
  for (size_t k = 0; k < sizeof ws / sizeof *ws; k++) {
    osk_correct_opts_t opts = {.w_ns = ws[k], .delta_ns = ws[k] / 10};
    osk_correct_t *c = NULL;
    osk_error_t err;
    CHECK(osk_correct_path("ties.json", "ties.out.json", &opts, &c, &err) == 0);
    xs_t out = {0};
    read_path("ties.out.json", collect_x, &out);
    CHECK(out.n == 7);
    CHECK(crossed(&out) == 0);
    const osk_correct_stats_t *st = osk_correct_stats(c);
    moved_any += st->float_moved > 0;
    double lost = 0;
    for (int i = 0; i < out.n; i++) {
      const osk_correct_op_t *op = op_named(c, out.name[i]);
      CHECK(op && op->corrected_total_ns == (double)(out.end[i] - out.ts[i]));
      lost += op->float_ns;
      /* Nesting as written: the exact text keeps the tree. */
      CHECK(out.ts[i] <= out.end[i]);
    }
    CHECK(lost >= 0 && lost <= st->float_moved_ns + 1e-9);
    /* Ends move by a few ns only (a chain of three ties: up to 3 each). */
    CHECK(st->float_moved_ns <= 6.0 * 7);
    if (ws[k] == 0.0) {
      /* Moved earlier a few ns where they would read crossed: whole, into
       * free time before them, or by their end. */
      for (int i = 0; i < out.n; i++) {
        CHECK(in.ts[i] - out.ts[i] >= 0 && in.ts[i] - out.ts[i] <= 6);
        CHECK(in.end[i] - out.end[i] >= 0 && in.end[i] - out.end[i] <= 6);
      }
    }
    osk_correct_free(c);
  }
  CHECK(raw_crossed >= 2 && moved_any == 3);
  printf("float64 ties: %d pairs of the input read crossed, none of the output\n", raw_crossed);
}

/* Every record of the output, by name: its ph, times and text. */
#define MAXREC 32
typedef struct {
  int n;
  char ph[MAXREC][4], name[MAXREC][24];
  int64_t ts[MAXREC], dur[MAXREC];
  int has_dur[MAXREC];
  char *text[MAXREC];
} recs_t;

static int collect_rec(void *ctx, const osk_reader_event_t *ev) {
  recs_t *r = ctx;
  CHECK(r->n < MAXREC);
  int i = r->n++;
  snprintf(r->ph[i], sizeof r->ph[i], "%.*s", (int)(ev->ph.len < 3 ? ev->ph.len : 3), ev->ph.ptr ? ev->ph.ptr : "");
  snprintf(r->name[i], sizeof r->name[i], "%.*s", (int)(ev->name.len < 23 ? ev->name.len : 23),
           ev->name.ptr ? ev->name.ptr : "");
  r->ts[i] = ev->ts_ns;
  r->dur[i] = ev->dur_ns;
  r->has_dur[i] = (ev->has & OSK_READER_EV_DUR) != 0;
  r->text[i] = malloc(ev->text.len + 1);
  CHECK(r->text[i]);
  memcpy(r->text[i], ev->text.ptr, ev->text.len);
  r->text[i][ev->text.len] = 0;
  return 0;
}

static void recs_free(recs_t *r) {
  for (int i = 0; i < r->n; i++) free(r->text[i]);
  memset(r, 0, sizeof *r);
}

static int rec(const recs_t *r, const char *ph, const char *name) {
  for (int i = 0; i < r->n; i++)
    if (!strcmp(r->ph[i], ph) && !strcmp(r->name[i], name)) return i;
  return -1;
}

/* A Kineto-shaped thread: P holds A and B; a flow starts at A's begin, a
 * runtime call runs inside A, an instant and a flow's end lie inside B;
 * the GPU's kernel, Kineto's span and instants on rows of their own,
 * metadata, a "B"/"E" pair; Q, a top-level operator after P. In `late`, the
 * runtime call and the flow's start come after every operator (as Kineto
 * writes CUDA's runtime calls), after P's tree was written. */
static void write_kineto(const char *path, int late) {
  FILE *f = fopen(path, "w");
  CHECK(f);
  const char *rt = ",\n{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaLaunchKernel\",\"pid\":9,\"tid\":9,"
                   "\"ts\":5784287967332.500,\"dur\":1.000,\"args\":{\"External id\":2,\"correlation\":77}}"
                   ",\n{\"ph\":\"s\",\"id\":77,\"pid\":9,\"tid\":9,\"ts\":5784287967332.500,\"cat\":\"ac2g\",\"name\":\"ac2g\"}";
  fputs("{\"schemaVersion\":1,\"deviceProperties\":[{\"id\":0}],\"traceEvents\":[\n"
        "{\"ph\":\"M\",\"name\":\"process_name\",\"ts\":5784287967000.000,\"pid\":9,\"tid\":0,\"args\":{\"name\":\"python\"}},\n"
        "{\"ph\":\"M\",\"name\":\"process_labels\",\"ts\":5784287967000.000,\"pid\":9,\"tid\":0,\"args\":{\"labels\":\"CPU\"}},\n"
        "{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"ts\":5784287967000.000,\"pid\":9,\"tid\":9,\"args\":{\"sort_index\":9}},\n"
        "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"P\",\"pid\":9,\"tid\":9,\"ts\":5784287967330.000,"
        "\"dur\":10.000,\"args\":{\"External id\":1,\"Ev Idx\":0}},\n"
        "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"A\",\"pid\":9,\"tid\":9,\"ts\":5784287967332.000,\"dur\":2.000,"
        "\"args\":{\"External id\":2,\"Input Dims\":[[16, 16], []],\"Ev Idx\":1}}",
        f);
  if (!late) fputs(rt, f);
  fputs(",\n{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"B\",\"pid\":9,\"tid\":9,\"ts\":5784287967336.000,\"dur\":2.000,"
        "\"args\":{}},\n"
        "{\"ph\":\"i\",\"s\":\"t\",\"name\":\"mark\",\"pid\":9,\"tid\":9,\"ts\":5784287967337.000},\n"
        "{\"ph\":\"f\",\"id\":5,\"pid\":9,\"tid\":9,\"ts\":5784287967336.000,\"cat\":\"fwdbwd\",\"name\":\"fwdbwd\",\"bp\":\"e\"},\n"
        "{\"ph\":\"B\",\"cat\":\"cpu_op\",\"name\":\"be\",\"pid\":9,\"tid\":9,\"ts\":5784287967345.000},\n"
        "{\"ph\":\"E\",\"pid\":9,\"tid\":9,\"ts\":5784287967346.000},\n"
        "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"Q\",\"pid\":9,\"tid\":9,\"ts\":5784287967350.000,\"dur\":1.000},\n"
        "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k\",\"pid\":0,\"tid\":7,\"ts\":5784287967335.000,\"dur\":1.500,"
        "\"args\":{\"correlation\":77,\"External id\":2}},\n"
        "{\"ph\":\"f\",\"id\":77,\"pid\":0,\"tid\":7,\"ts\":5784287967335.000,\"cat\":\"ac2g\",\"name\":\"ac2g\",\"bp\":\"e\"},\n"
        "{\"ph\":\"X\",\"cat\":\"Trace\",\"name\":\"PyTorch Profiler (0)\",\"pid\":\"Spans\",\"tid\":\"PyTorch Profiler\","
        "\"ts\":5784287967300.000,\"dur\":100.000,\"args\":{\"Op count\":0}},\n"
        "{\"ph\":\"i\",\"s\":\"g\",\"name\":\"Record Window End\",\"pid\":\"\",\"tid\":\"\",\"ts\":5784287967400.000}",
        f);
  if (late) fputs(rt, f);
  fputs("\n],\"traceName\":\"k.json\"}\n", f);
  CHECK(fclose(f) == 0);
}

/* The records the correction does not correct are in the corrected trace:
 * as read where they are not on an operator's thread (the text the same,
 * its whitespace aside), re-timed with the operators that hold them where
 * they are (inside the same operator as in the trace). Kineto's order (the
 * runtime call after the operators) holds the thread in a second read and
 * writes the same. */
static void test_twin_records(void) {
  recs_t out[2];
  for (int late = 0; late < 2; late++) {
    write_kineto("k.json", late);
    osk_correct_opts_t opts = {.w_ns = 500.0, .delta_ns = 20.0};
    osk_correct_t *c = NULL;
    osk_error_t err;
    CHECK(osk_correct_path("k.json", "k.out.json", &opts, &c, &err) == 0);
    const osk_correct_stats_t *st = osk_correct_stats(c);
    CHECK(st->events == 17 && st->corrected_events == 4 && st->retimed_events == 4 && st->passed_events == 9);
    CHECK(st->begin_end_events == 1 && st->other_events == 3); /* the "E" names no category */
    CHECK(st->passes == (late ? 2 : 1) && st->held_threads == (uint64_t)late);
    osk_correct_free(c);
    recs_t *r = &out[late];
    memset(r, 0, sizeof *r);
    read_path("k.out.json", collect_rec, r);
    CHECK(r->n == 17);
    int p = rec(r, "X", "P"), a = rec(r, "X", "A"), b = rec(r, "X", "B"), rt = rec(r, "X", "cudaLaunchKernel");
    int s = rec(r, "s", "ac2g"), fk = rec(r, "f", "ac2g"), fb = rec(r, "f", "fwdbwd"), mk = rec(r, "i", "mark");
    int k = rec(r, "X", "k"), span = rec(r, "X", "PyTorch Profiler (0)"), end = rec(r, "i", "Record Window End");
    CHECK(p >= 0 && a >= 0 && b >= 0 && rt >= 0 && s >= 0 && fk >= 0 && fb >= 0 && mk >= 0 && k >= 0 && span >= 0 &&
          end >= 0);
    /* The operators moved, their args kept, opskew's beside. */
    CHECK(r->ts[a] != INT64_C(5784287967332000) && r->dur[a] < 2000);
    CHECK(strstr(r->text[a], "\"Input Dims\":[[16,16],[]],\"Ev Idx\":1,\"reported_ts\":5784287967332.000"));
    CHECK(strstr(r->text[b], "\"args\":{\"reported_ts\":"));
    /* Re-timed with them, inside the same operators: the runtime call and
     * the flow's start in A (the flow at its begin), the instant and the
     * backward flow's end in B (that one at B's begin). */
    CHECK(r->ts[rt] > r->ts[a] && r->ts[rt] + r->dur[rt] < r->ts[a] + r->dur[a]);
    CHECK(strstr(r->text[rt], "\"correlation\":77,\"reported_ts\":5784287967332.500,\"reported_dur\":1.000"));
    CHECK(r->ts[s] == r->ts[rt] && strstr(r->text[s], "\"args\":{\"reported_ts\":5784287967332.500}"));
    CHECK(r->ts[mk] > r->ts[b] && r->ts[mk] < r->ts[b] + r->dur[b]);
    CHECK(r->ts[fb] == r->ts[b]);
    /* As read: the GPU's kernel and its flow's end, Kineto's span and
     * instant, the metadata, the "B"/"E" pair. */
    CHECK(r->ts[k] == INT64_C(5784287967335000) && r->dur[k] == 1500 && r->ts[fk] == r->ts[k]);
    CHECK(!strcmp(r->text[k], "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k\",\"pid\":0,\"tid\":7,"
                              "\"ts\":5784287967335.000,\"dur\":1.500,\"args\":{\"correlation\":77,\"External id\":2}}"));
    CHECK(r->ts[span] == INT64_C(5784287967300000) && r->dur[span] == 100000);
    CHECK(r->ts[end] == INT64_C(5784287967400000) && !strstr(r->text[end], "reported_ts"));
    CHECK(rec(r, "M", "process_labels") >= 0 && rec(r, "M", "thread_sort_index") >= 0);
    int be = rec(r, "B", "be");
    CHECK(be >= 0 && r->ts[be] == INT64_C(5784287967345000));
    char *text = osk_test_slurp("k.out.json", NULL);
    CHECK(strstr(text, "\"deviceProperties\":[{\"id\":0}]") && strstr(text, "\"traceName\":\"k.json\""));
    free(text);
  }
  /* Both orders, the same records at the same times. */
  for (int i = 0; i < out[0].n; i++) {
    int j = rec(&out[1], out[0].ph[i], out[0].name[i]);
    CHECK(j >= 0 && out[1].ts[j] == out[0].ts[i] && out[1].dur[j] == out[0].dur[i]);
  }
  recs_free(&out[0]);
  recs_free(&out[1]);
}

int main(void) {
  osk_test_in_tmpdir();
  test_float64_ties();
  test_twin_records();
  puts("test_correct_twin: ok");
  return 0;
}
