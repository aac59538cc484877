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
      for (int i = 0; i < out.n; i++) {
        CHECK(out.ts[i] == in.ts[i]);
        CHECK(in.end[i] - out.end[i] >= 0 && in.end[i] - out.end[i] <= 6);
      }
    }
    osk_correct_free(c);
  }
  CHECK(raw_crossed >= 2 && moved_any == 3);
  printf("float64 ties: %d pairs of the input read crossed, none of the output\n", raw_crossed);
}

int main(void) {
  osk_test_in_tmpdir();
  test_float64_ties();
  puts("test_correct_twin: ok");
  return 0;
}
