/* fuzz_correct.c: libFuzzer target for the compensation (csrc/correct).
 *
 * The first input byte picks the model: W from 0 to 3100 ns, delta 0 or
 * 50, W_py, a span with a W scale on "ProfilerStep#1", and the cross-thread
 * rule off, on or automatic; large W over-compensates, which is where the
 * placement carries shortfalls, stretches events and relays roots. The rest
 * is the trace, written to a temporary file and corrected into another.
 * Besides "no crash, no sanitizer report" it checks what the correction
 * promises of its figures whatever the input: every count and sum finite
 * and not negative where it cannot be, corrected top-level time at most the
 * reported where W >= delta (nothing is added), and the corrected trace,
 * when written, read back by the reader; that it is the input's twin
 * (every record of the input in it: as many of each "ph"); that a float64
 * reader (strtod of the written text, ts + dur added in float64) nests every
 * pair of the complete events it wrote times for (corrected or re-timed, of
 * one thread) as the exact text does (docs/outputs.md, "Read as float64");
 * and that the summary of it reads the table (docs/correct.md, "One time
 * line"). Built and run by fuzz/run.sh. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "opskew_correct.h"
#include "opskew_reader.h"

static char dir[64];

static void remove_dir(void) {
  char p[96];
  snprintf(p, sizeof p, "%s/in.json", dir);
  unlink(p);
  snprintf(p, sizeof p, "%s/out.json", dir);
  unlink(p);
  rmdir(dir);
}

/* Records per "ph", and names the table does not hold alone: of records
 * the correction does not correct (another category, "B"/"E", unusable
 * times), which the summary of the twin counts too. */
#define PHS 32
#define SKIPS 256
typedef struct {
  char ph[PHS][8];
  uint64_t count[PHS];
  size_t n_ph;
  int overflow; /* a "ph" that did not fit */
  char *skip[SKIPS];
  size_t n_skip;
} census_t;

static void census_add(census_t *cs, const osk_reader_event_t *ev) {
  size_t len = ev->ph.len < 7 ? ev->ph.len : 7;
  char ph[8] = {0};
  if (len) memcpy(ph, ev->ph.ptr, len);
  if (ev->ph.len > 7) cs->overflow = 1;
  size_t i = 0;
  while (i < cs->n_ph && strcmp(cs->ph[i], ph)) i++;
  if (i == cs->n_ph) {
    if (i == PHS) {
      cs->overflow = 1;
      return;
    }
    memcpy(cs->ph[cs->n_ph++], ph, 8);
  }
  cs->count[i]++;
}

static int is_corrected_cat(osk_str_t cat) {
  static const char *const cats[] = {"cpu_op", "user_annotation", "python_function"};
  for (size_t i = 0; i < 3; i++)
    if (cat.len == strlen(cats[i]) && !memcmp(cat.ptr, cats[i], cat.len)) return 1;
  return 0;
}

static int census_in(void *ctx, const osk_reader_event_t *ev) {
  census_t *cs = ctx;
  census_add(cs, ev);
  int x = ev->ph.len == 1 && ev->ph.ptr[0] == 'X', be = ev->ph.len == 1 && (ev->ph.ptr[0] == 'B' || ev->ph.ptr[0] == 'E');
  unsigned need = OSK_READER_EV_TS | OSK_READER_EV_DUR | OSK_READER_EV_NAME;
  const int64_t lim = INT64_C(1) << 62;
  int usable = (ev->has & need) == need && !(ev->has & OSK_READER_EV_BAD) && ev->dur_ns >= 0 && ev->ts_ns <= lim &&
               ev->ts_ns >= -lim && ev->dur_ns <= lim - (ev->ts_ns > 0 ? ev->ts_ns : 0);
  if ((be || (x && !(usable && is_corrected_cat(ev->cat)))) && ev->name.len && cs->n_skip < SKIPS) {
    char *n = malloc(ev->name.len + 1);
    if (!n) abort();
    memcpy(n, ev->name.ptr, ev->name.len);
    n[ev->name.len] = 0;
    cs->skip[cs->n_skip++] = n;
  }
  return 0;
}

static int skipped(const census_t *cs, osk_str_t name) {
  if (cs->n_skip == SKIPS) return 1; /* too many to tell */
  for (size_t i = 0; i < cs->n_skip; i++)
    if (strlen(cs->skip[i]) == name.len && !memcmp(cs->skip[i], name.ptr, name.len)) return 1;
  return 0;
}

/* The corrected trace's records, for the twin and the float64 checks. */
typedef struct {
  census_t cs;
  uint64_t n;       /* complete events */
  size_t k, cap;    /* those it wrote times for (args.reported_dur), with usable times */
  struct fev {
    char thread[80]; /* pid and tid, as text */
    int64_t ts, end;
  } *ev;
} seen_t;

static void id_text(char *out, size_t cap, const osk_reader_id_t *id) {
  if (id->kind == OSK_READER_ID_INT) snprintf(out, cap, "%lld", (long long)id->num);
  else if (id->kind == OSK_READER_ID_STR) snprintf(out, cap, "\"%.*s\"", (int)(id->str.len > 30 ? 30 : id->str.len), id->str.ptr);
  else snprintf(out, cap, "-");
}

/* Whether text holds `needle`. */
static int holds(const char *text, size_t n, const char *needle) {
  size_t k = strlen(needle);
  for (size_t i = 0; i + k <= n; i++)
    if (!memcmp(text + i, needle, k)) return 1;
  return 0;
}

static int count_event(void *ctx, const osk_reader_event_t *ev) {
  seen_t *s = ctx;
  census_add(&s->cs, ev);
  if (!(ev->ph.len == 1 && ev->ph.ptr[0] == 'X')) return 0;
  s->n++;
  unsigned need = OSK_READER_EV_TS | OSK_READER_EV_DUR;
  if ((ev->has & need) != need || ev->dur_ns < 0 || s->k >= 4096) return 0;
  if (!holds(ev->text.ptr, ev->text.len, "\"reported_dur\":")) return 0;
  if (s->k == s->cap) {
    size_t cap = s->cap ? 2 * s->cap : 64;
    struct fev *e = realloc(s->ev, cap * sizeof *e);
    if (!e) abort();
    s->ev = e;
    s->cap = cap;
  }
  struct fev *e = &s->ev[s->k++];
  char a[40], b[40];
  id_text(a, sizeof a, &ev->pid);
  id_text(b, sizeof b, &ev->tid);
  snprintf(e->thread, sizeof e->thread, "%s/%s", a, b);
  e->ts = ev->ts_ns;
  e->end = ev->ts_ns + ev->dur_ns;
  return 0;
}

/* ns as a float64 reader reads the written microseconds (3 decimals). */
static double as_read(int64_t ns) {
  char buf[40];
  uint64_t u = ns < 0 ? (uint64_t)(-(ns + 1)) + 1u : (uint64_t)ns;
  snprintf(buf, sizeof buf, "%s%llu.%03llu", ns < 0 ? "-" : "", (unsigned long long)(u / 1000),
           (unsigned long long)(u % 1000));
  return strtod(buf, NULL);
}

/* Bit 0: a holds b; bit 1: b holds a; bit 2: disjoint (touching too). */
static unsigned nest_bits(double sa, double ea, double sb, double eb) {
  return (unsigned)(sa <= sb && eb <= ea) | (unsigned)(sb <= sa && ea <= eb) << 1 | (unsigned)(ea <= sb || eb <= sa) << 2;
}

/* Every pair of one thread nests in float64 as in exact ns: what holds
 * exactly holds, an overlap stays one. (The times fit 2^62 ns, so the exact
 * comparisons of int64 are exact.) */
static void check_float_nesting(const seen_t *s) {
  for (size_t i = 0; i < s->k; i++) {
    const struct fev *a = &s->ev[i];
    double fsa = as_read(a->ts);
    volatile double fea = fsa + as_read(a->end - a->ts);
    for (size_t j = i + 1; j < s->k; j++) {
      const struct fev *b = &s->ev[j];
      if (strcmp(a->thread, b->thread)) continue;
      unsigned x = (unsigned)(a->ts <= b->ts && b->end <= a->end) | (unsigned)(b->ts <= a->ts && a->end <= b->end) << 1 |
                   (unsigned)(a->end <= b->ts || b->end <= a->ts) << 2;
      double fsb = as_read(b->ts);
      volatile double feb = fsb + as_read(b->end - b->ts);
      unsigned f = nest_bits(fsa, fea, fsb, feb);
      if (x ? (x & ~f) != 0 : f != 0) {
        fprintf(stderr, "float64 nests otherwise: %s [%lld, %lld] and [%lld, %lld]: exact %u, float64 %u\n", a->thread,
                (long long)a->ts, (long long)a->end, (long long)b->ts, (long long)b->end, x, f);
        abort();
      }
    }
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  if (!dir[0]) {
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/osk-fuzz-XXXXXX", tmp && strlen(tmp) < 40 ? tmp : "/tmp");
    if (!mkdtemp(dir)) abort();
    atexit(remove_dir);
  }
  char in[96], out[96];
  snprintf(in, sizeof in, "%s/in.json", dir);
  snprintf(out, sizeof out, "%s/out.json", dir);
  FILE *f = fopen(in, "wb");
  if (!f) abort();
  if (size > 1 && fwrite(data + 1, 1, size - 1, f) != size - 1) abort();
  fclose(f);

  uint8_t m = data[0];
  /* The step's span and W scale, and two operators' own deltas: add's
   * above W (its W is raised to it), mul's below. */
  const double w = 100.0 * (m & 0x1f);
  const char *names[] = {"ProfilerStep#1", "aten::add", "aten::mul"};
  const double spans[] = {(m & 0x40) ? 500.0 : -1.0, -1.0, -1.0}, scales[] = {(m & 0x80) ? 2.5 : 1.0, 1.0, 1.0};
  const double own[] = {-1.0, 3.0 * w + 7.0, w / 2};
  osk_correct_opts_t opts = {.w_ns = w, .delta_ns = (m & 0x20) ? 50.0 : 0.0};
  if (opts.delta_ns > opts.w_ns) opts.delta_ns = opts.w_ns;
  opts.w_py_ns = opts.w_ns / 4;
  opts.delta_py_ns = 0.0;
  opts.waits = (int)(m % 3) - 1;
  opts.span_names = names;
  opts.span_ns = spans;
  opts.span_w_scale = scales;
  opts.span_delta_ns = own;
  opts.n_spans = 3;
  /* Inputs of odd length under a three-class model (osk_cost_class_t): the
   * record_function ranges priced apart, at 1.5 W. */
  static const char *const op_cats[] = {"cpu_op"}, *const ann_cats[] = {"user_annotation"};
  static const char *const py_cats[] = {"python_function"};
  const osk_cost_class_t three[3] = {{"operator", op_cats, 1, opts.w_ns, opts.delta_ns, 0},
                                     {"annotation", ann_cats, 1, 1.5 * opts.w_ns, opts.delta_ns, 0},
                                     {"python", py_cats, 1, opts.w_py_ns, 0.0, 1}};
  if (size & 1) {
    opts.classes = three;
    opts.n_classes = 3;
  }

  osk_correct_t *c = NULL;
  osk_error_t err;
  int rc = osk_correct_path(in, out, &opts, &c, &err);
  if (rc == 0 || rc == OSK_ETRUNCATED) {
    const osk_correct_stats_t *s = osk_correct_stats(c);
    if (!c || !s) abort();
    const double sums[] = {s->residual_ns, s->corrected_top_ns, s->stretched_ns, s->waited_ns,
                           s->shortened_ns, s->trimmed_ns, s->relaid_ns};
    for (size_t i = 0; i < sizeof sums / sizeof *sums; i++)
      if (!isfinite(sums[i]) || sums[i] < 0) abort();
    if (s->relaid_ns > 0 && !s->relaid) abort();
    /* The formula only takes time out; a span's W scale above 1 too. */
    if (s->corrected_top_ns > (double)s->reported_top_ns + 1.0 + 1e-9 * (double)s->reported_top_ns) abort();
    for (size_t i = 0; i < osk_correct_op_count(c); i++) {
      const osk_correct_op_t *op = osk_correct_op(c, i);
      if (!op || !isfinite(op->corrected_total_ns) || op->corrected_total_ns < 0 || op->stretched_ns < 0) abort();
      /* Numbers that add up: the correction takes instrument time out of an
       * event and out of every event around it, so no name's corrected self
       * or total time exceeds what it reported, beyond what the events
       * written longer than their corrected total hold (stretched) and 1 ns
       * a call of rounding. (An own delta above W once gave the time on its
       * sides back, into its parent's self time.) Not where the input has
       * improper overlaps: an event that outlived the one it started in by
       * less than the instrument time inside it no longer outlives it once
       * corrected, so the corrected trace nests it inside, and that one's
       * self time is read up to its end instead of up to the overlap (a
       * known miss, docs/correct.md, "Known misses"). */
      if (rc == 0 && s->overlaps == 0) {
        double slack = (double)op->calls + op->stretched_ns;
        if (op->corrected_self_ns > (double)op->reported_self_ns + slack ||
            op->corrected_total_ns > (double)op->reported_total_ns + slack) {
          fprintf(stderr, "adds up otherwise: %.*s reported %lld self %lld total, corrected %.0f self %.0f total\n",
                  (int)op->name.len, op->name.ptr, (long long)op->reported_self_ns, (long long)op->reported_total_ns,
                  op->corrected_self_ns, op->corrected_total_ns);
          abort();
        }
      }
    }
    /* The corrected trace reads back: the input's twin, every record of it
     * (as many of each "ph"). */
    static census_t in_cs;
    for (size_t i = 0; i < in_cs.n_skip; i++) free(in_cs.skip[i]);
    memset(&in_cs, 0, sizeof in_cs);
    osk_reader_t *r = NULL;
    if (osk_reader_open(&r, in, NULL, NULL) == 0) {
      osk_reader_run(r, census_in, &in_cs, NULL);
      osk_reader_free(r);
    }
    r = NULL;
    if (osk_reader_open(&r, out, NULL, NULL) == 0) {
      static seen_t seen;
      memset(&seen, 0, sizeof seen);
      int rr = osk_reader_run(r, count_event, &seen, NULL);
      if (rr != 0 && rc == 0) abort();
      if (rr == 0 && seen.n < s->corrected_events) abort();
      if (rr == 0 && rc == 0 && !in_cs.overflow && !seen.cs.overflow) {
        if (in_cs.n_ph != seen.cs.n_ph) abort();
        for (size_t i = 0; i < in_cs.n_ph; i++) {
          size_t j = 0;
          while (j < seen.cs.n_ph && strcmp(seen.cs.ph[j], in_cs.ph[i])) j++;
          if (j == seen.cs.n_ph || seen.cs.count[j] != in_cs.count[i]) {
            fprintf(stderr, "twin: %llu records of ph \"%s\" in, %llu out\n", (unsigned long long)in_cs.count[i],
                    in_cs.ph[i], j < seen.cs.n_ph ? (unsigned long long)seen.cs.count[j] : 0ull);
            abort();
          }
        }
        if (s->passed_events + s->retimed_events + s->corrected_events != s->events) abort();
      }
      osk_reader_free(r);
      /* Times past 2^53 ns (104 days of clock, ulp 1 ns and more) are out
       * of float64's reach of ns: the rule moves ends there too, but a
       * distinct pair may read equal. */
      int small = 1;
      for (size_t i = 0; i < seen.k && small; i++)
        small = seen.ev[i].ts > -(INT64_C(1) << 52) && seen.ev[i].end < (INT64_C(1) << 52);
      /* (An input that holds opskew's own arg names cannot tell.) */
      if (rr == 0 && small && !holds((const char *)data, size, "reported_dur")) check_float_nesting(&seen);
      free(seen.ev);
      /* One time line: the summary of the corrected trace reads the table's
       * self and total times back, per name, to the ns. Not where the input
       * has improper overlaps: an event that outlives its parent and its
       * parent's parent has a self time in the table far below what the
       * corrected trace's summary reads (a known miss, docs/correct.md,
       * "Known misses"; found 2026-12-08). */
      osk_summary_t *sum = NULL;
      osk_error_t serr;
      if (rr == 0 && rc == 0 && s->overlaps == 0 && osk_summary_from_path(out, NULL, NULL, &sum, NULL, &serr) == 0) {
        for (size_t i = 0; i < osk_correct_op_count(c); i++) {
          const osk_correct_op_t *op = osk_correct_op(c, i);
          if (!op->calls || skipped(&in_cs, op->name)) continue; /* a name records it did not correct share */
          const osk_summary_op_t *so = NULL;
          for (size_t j = 0; j < osk_summary_op_count(sum) && !so; j++) {
            const osk_summary_op_t *x = osk_summary_op(sum, j);
            if (x->name.len == op->name.len && !memcmp(x->name.ptr, op->name.ptr, x->name.len)) so = x;
          }
          if (!so) {
            /* A name the output escaped (not UTF-8, a control byte) reads
             * back as another string. */
            int plain = 1;
            for (size_t k = 0; k < op->name.len; k++) {
              unsigned char b = (unsigned char)op->name.ptr[k];
              if (b < 0x20 || b >= 0x7f || b == '"' || b == '\\') plain = 0;
            }
            if (plain) abort();
            continue;
          }
          if ((double)so->total_ns != op->corrected_total_ns || (double)so->self_ns != op->corrected_self_ns) abort();
        }
      }
      osk_summary_free(sum);
    } else if (rc == 0) {
      abort();
    }
  }
  osk_correct_free(c);
  unlink(in);
  unlink(out);
  return 0;
}
