/* summary.c: per-operator statistics over a snapshot (calls, inclusive and
 * exclusive time, quantiles), corrected for the tracer's own cost.
 *
 * Self time comes from nesting without sorting: a thread's events are
 * stored in the order operators ended, so when an operator at depth d ends,
 * the events at depth d+1 that ended since the previous depth-d event (and
 * began after it began) are exactly its children. Per depth we accumulate
 * their durations, corrected durations, counts and descendant counts.
 *
 * The correction is osk__correct_event's, as for a trace file (opskew
 * correct): the tracer is a one-class instrument whose W and delta come from
 * its own calibration. Its corrected times are those of the corrected time
 * line that opskew correct writes (compensate.c's fit, docs/correct.md):
 * each operator written at its corrected total, whole ns and at least 1
 * where it took any,
 * or as long as its children's written times where they outlast it; its
 * self time what its children leave of that.
 */
#include "trace_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct osk_trace_summary {
  const osk_trace_snapshot_t *snap;
  osk_trace_calib_t calib;
  int calib_given; /* the caller's, not the snapshot's */
  osk_trace_op_t *rows;
  size_t nrows;
  size_t n_threads;
  int64_t residual_ns; /* what clamping corrected totals at 0 removed (not self times) */
};

typedef struct {
  int64_t sum;
  double corr; /* their corrected durations before clamping */
  int64_t written; /* their durations on the corrected time line */
  uint64_t count;
  uint64_t desc;
  int64_t min_t0; /* earliest begin among them (ns) */
} osk__acc_t;

static double quantile_sorted(const int64_t *x, size_t n, double q) {
  if (n == 0) return 0.0;
  double h = (double)(n - 1) * q;
  size_t lo = (size_t)h;
  size_t hi = lo + 1 < n ? lo + 1 : lo;
  return (double)x[lo] + (h - (double)lo) * (double)(x[hi] - x[lo]);
}

static int cmp_row(const void *pa, const void *pb) {
  const osk_trace_op_t *a = pa, *b = pb;
  if (a->self_ns != b->self_ns) return a->self_ns < b->self_ns ? 1 : -1;
  return (a->name > b->name) - (a->name < b->name);
}

int osk_trace_summarize(const osk_trace_snapshot_t *s, const osk_trace_calib_t *calib,
                        osk_trace_summary_t **out) {
  return osk_trace_summarize_window(s, calib, INT64_MIN, INT64_MAX, out);
}

int osk_trace_summarize_window(const osk_trace_snapshot_t *s, const osk_trace_calib_t *calib, int64_t from_ns,
                               int64_t to_ns, osk_trace_summary_t **out) {
  if (!out) return OSK_EINVAL;
  *out = NULL;
  if (!s || from_ns > to_ns) return OSK_EINVAL;
  uint32_t nn = s->n_names ? s->n_names : 1;
  osk_trace_summary_t *sum = calloc(1, sizeof *sum);
  osk_trace_op_t *by = calloc(nn, sizeof *by);
  osk__acc_t *acc = calloc(OSK__STACK_DEPTH + 2, sizeof *acc);
  size_t *off = calloc((size_t)nn + 1, sizeof *off);
  int64_t *durs = malloc((s->n_events ? s->n_events : 1) * sizeof *durs);
  osk__event_t *buf = malloc(OSK__CHUNK_EVENTS * sizeof *buf); /* spilled ranges are read into it */
  size_t *fill = NULL;
  int rc = OSK_ENOMEM;
  if (!sum || !by || !acc || !off || !durs || !buf) goto fail;
  sum->snap = s;
  sum->calib = calib ? *calib : s->calib;
  sum->calib_given = calib != NULL;
  osk__cost_t cost = {{0}, {0}};
  if (sum->calib.valid) {
    cost.w[OSK__CLS_OP] = sum->calib.w_ns;
    cost.delta[OSK__CLS_OP] = sum->calib.delta_ns;
  }

  /* Pass 1: calls per name (for the quantile slices). */
  for (size_t i = 0; i < s->nsegs; i++) {
    const osk__seg_t *g = &s->segs[i];
    const osk__event_t *ev = osk__seg_events(g, buf);
    if (!ev) goto io;
    for (uint32_t j = 0; j < g->end - g->begin; j++) {
      int64_t t0 = osk__ticks_ns(&s->clock, ev[j].t0);
      if (t0 < from_ns || t0 >= to_ns) continue;
      uint32_t id = ev[j].name;
      by[id < nn ? id : 0].calls++;
    }
  }
  for (uint32_t id = 0; id < nn; id++) off[id + 1] = off[id] + by[id].calls;
  fill = calloc(nn, sizeof *fill);
  if (!fill) goto fail;

  /* Pass 2: times, nesting, corrections. */
  uint32_t tid = 0;
  for (size_t i = 0; i < s->nsegs; i++) {
    const osk__seg_t *g = &s->segs[i];
    if (i == 0 || g->tid != tid) {
      tid = g->tid;
      sum->n_threads++;
      memset(acc, 0, (OSK__STACK_DEPTH + 2) * sizeof *acc);
    }
    const osk__event_t *ev = osk__seg_events(g, buf);
    if (!ev) goto io;
    for (uint32_t j = 0; j < g->end - g->begin; j++) {
      const osk__event_t *e = &ev[j];
      uint32_t id = e->name < nn ? e->name : 0;
      uint32_t d = e->depth < OSK__STACK_DEPTH ? e->depth : OSK__STACK_DEPTH - 1;
      int64_t t0 = osk__ticks_ns(&s->clock, e->t0);
      int64_t dur = osk__dur_ns(&s->clock, e->t0, e->t1);
      osk__acc_t *kids = &acc[d + 1];
      if (t0 < from_ns || t0 >= to_ns) {
        /* Outside the window: neither it nor its children count (those
         * inside it are dropped with it). */
        memset(kids, 0, sizeof *kids);
        continue;
      }
      int64_t kid_sum = 0, kid_written = 0;
      double kid_corr = 0;
      uint64_t kid_n = 0, desc = 0;
      /* Children that began before this operator are left over from an
       * operator whose own event is missing (lost, or begun before the
       * session): they are not ours. */
      if (kids->count && kids->min_t0 >= t0) {
        kid_sum = kids->sum;
        kid_corr = kids->corr;
        kid_written = kids->written;
        kid_n = kids->count;
        desc = kids->desc + kids->count;
      }
      memset(kids, 0, sizeof *kids);
      int64_t self = dur - kid_sum;
      if (self < 0) self = 0;
      uint64_t descs[1] = {desc};
      osk__corrected_t c = osk__correct_event(&cost, OSK__CLS_OP, dur, descs, 1, 0, kid_corr);
      /* The residual is the clamped part of the corrected total only, as
       * in osk_correct_stats_t: one definition for both callers. */
      sum->residual_ns += (int64_t)c.residual_ns;
      int64_t written = llround(c.total_ns), least = dur > 0 ? 1 : 0;
      if (written < least) written = least;
      if (written < kid_written) written = kid_written;
      osk__acc_t *me = &acc[d];
      if (me->count == 0 || t0 < me->min_t0) me->min_t0 = t0;
      me->sum += dur;
      me->corr += c.raw_ns;
      me->written += written;
      me->count++;
      me->desc += desc;

      osk_trace_op_t *r = &by[id];
      r->total_ns += dur;
      r->self_ns += self;
      r->total_corrected_ns += written;
      r->self_corrected_ns += written - kid_written;
      r->children += kid_n;
      r->descendants += desc;
      if (dur > r->max_ns) r->max_ns = dur;
      durs[off[id] + fill[id]++] = dur;
    }
  }
  free(fill);
  fill = NULL;
  free(buf);
  buf = NULL;

  size_t nrows = 0;
  for (uint32_t id = 0; id < nn; id++) nrows += by[id].calls > 0;
  sum->rows = calloc(nrows ? nrows : 1, sizeof *sum->rows);
  if (!sum->rows) goto fail;
  for (uint32_t id = 0; id < nn; id++) {
    osk_trace_op_t *r = &by[id];
    if (!r->calls) continue;
    int64_t *x = durs + off[id];
    qsort(x, r->calls, sizeof *x, osk__cmp_i64);
    r->name = id;
    r->mean_ns = (double)r->total_ns / (double)r->calls;
    r->p50_ns = quantile_sorted(x, r->calls, 0.50);
    r->p99_ns = quantile_sorted(x, r->calls, 0.99);
    sum->rows[sum->nrows++] = *r;
  }
  qsort(sum->rows, sum->nrows, sizeof *sum->rows, cmp_row);
  free(by);
  free(acc);
  free(off);
  free(durs);
  *out = sum;
  return 0;
io:
  rc = OSK_EIO; /* a spilled range could not be read back */
fail:
  if (sum) free(sum->rows);
  free(sum);
  free(by);
  free(acc);
  free(off);
  free(durs);
  free(buf);
  free(fill);
  return rc;
}

void osk_trace_summary_free(osk_trace_summary_t *sum) {
  if (!sum) return;
  free(sum->rows);
  free(sum);
}

size_t osk_trace_summary_rows(const osk_trace_summary_t *sum) { return sum ? sum->nrows : 0; }

int64_t osk_trace_summary_residual_ns(const osk_trace_summary_t *sum) {
  return sum ? sum->residual_ns : 0;
}

const osk_trace_op_t *osk_trace_summary_row(const osk_trace_summary_t *sum, size_t i) {
  return (sum && i < sum->nrows) ? &sum->rows[i] : NULL;
}

static double us(double ns) { return ns / 1000.0; }

char *osk_trace_summary_table(const osk_trace_summary_t *sum, size_t max_rows) {
  if (!sum) return NULL;
  const osk_trace_snapshot_t *s = sum->snap;
  osk__sb_t sb = {0};
  size_t width = 4;
  size_t shown = (max_rows && max_rows < sum->nrows) ? max_rows : sum->nrows;
  for (size_t i = 0; i < shown; i++) {
    size_t n = strlen(osk_trace_snapshot_name(s, sum->rows[i].name));
    if (n > width) width = n;
  }
  if (width > 60) width = 60;
  int w = (int)width;
  int64_t tot_self = 0;
  for (size_t i = 0; i < sum->nrows; i++) tot_self += sum->rows[i].self_ns;
  osk__sb_printf(&sb, "opskew trace: instrument %s, %zu events, %zu thread%s, lost %llu\n",
                 s->instrument, s->n_events, sum->n_threads, sum->n_threads == 1 ? "" : "s",
                 (unsigned long long)osk_trace_snapshot_lost_total(s));
  if (s->spilled_events)
    osk__sb_printf(&sb, "memory budget %.0f MiB: %llu events (%.1f MiB) went through the spill file\n",
                   (double)s->budget_bytes / 1048576.0, (unsigned long long)s->spilled_events,
                   (double)s->spilled_events * (double)sizeof(osk__event_t) / 1048576.0);
  if (sum->calib.valid)
    osk__sb_printf(&sb, "tracer cost: W %.1f ns/event, delta %.1f ns (W: %s); 'corr' columns subtract it\n",
                   sum->calib.w_ns, sum->calib.delta_ns,
                   sum->calib_given ? "given to the summary" : osk_trace_snapshot_w_source(s));
  osk__sb_printf(&sb, "%-*s %10s %12s %12s %7s %12s %10s %10s %10s\n", w, "Name", "Calls",
                 "Total us", "Self us", "Self %", "Self corr us", "Mean us", "p50 us", "p99 us");
  for (size_t i = 0; i < (size_t)w + 98; i++) osk__sb_put(&sb, "-", 1);
  osk__sb_put(&sb, "\n", 1);
  for (size_t i = 0; i < shown; i++) {
    const osk_trace_op_t *r = &sum->rows[i];
    const char *name = osk_trace_snapshot_name(s, r->name);
    char cut[64];
    if (strlen(name) > width) {
      snprintf(cut, sizeof cut, "%.*s...", w - 3, name);
      name = cut;
    }
    osk__sb_printf(&sb, "%-*s %10llu %12.3f %12.3f %6.2f%% %12.3f %10.3f %10.3f %10.3f\n", w, name,
                   (unsigned long long)r->calls, us((double)r->total_ns), us((double)r->self_ns),
                   tot_self ? 100.0 * (double)r->self_ns / (double)tot_self : 0.0,
                   us((double)r->self_corrected_ns), us(r->mean_ns), us(r->p50_ns), us(r->p99_ns));
  }
  if (shown < sum->nrows)
    osk__sb_printf(&sb, "(%zu more operators not shown)\n", sum->nrows - shown);
  osk__sb_printf(&sb, "Self time total: %.3f us\n", us((double)tot_self));
  if (osk_trace_snapshot_lost_total(s)) {
    osk__sb_puts(&sb, "LOST EVENTS:");
    for (int i = 0; i < OSK_TRACE_LOSS_COUNT; i++)
      if (s->lost[i])
        osk__sb_printf(&sb, " %llu %s;", (unsigned long long)s->lost[i], osk_trace_loss_message(i));
    osk__sb_put(&sb, "\n", 1);
  }
  return osk__sb_finish(&sb);
}

char *osk_trace_summary_json(const osk_trace_summary_t *sum) {
  if (!sum) return NULL;
  const osk_trace_snapshot_t *s = sum->snap;
  osk__sb_t sb = {0};
  osk__sb_puts(&sb, "{\"schema\":\"opskew.trace.summary/1\",\"instrument\":");
  osk__sb_json_str(&sb, s->instrument);
  osk__sb_printf(&sb, ",\"events\":%zu,\"threads\":%zu,\"lost\":{\"total\":%llu", s->n_events,
                 sum->n_threads, (unsigned long long)osk_trace_snapshot_lost_total(s));
  for (int i = 0; i < OSK_TRACE_LOSS_COUNT; i++)
    osk__sb_printf(&sb, ",\"%s\":%llu", osk_trace_loss_key(i), (unsigned long long)s->lost[i]);
  osk__sb_printf(&sb, "},\"unmatched_ends\":%llu,\"open_at_stop\":%llu,", (unsigned long long)s->unmatched_ends,
                 (unsigned long long)s->open_at_stop);
  osk__sb_printf(&sb, "\"spill\":{\"events\":%llu,\"bytes\":%llu,\"budget_bytes\":%lld},\"calibration\":",
                 (unsigned long long)s->spilled_events,
                 (unsigned long long)(s->spilled_events * sizeof(osk__event_t)), (long long)s->budget_bytes);
  if (sum->calib.valid) {
    osk__sb_puts(&sb, "{\"w_ns\":");
    osk__sb_json_num(&sb, sum->calib.w_ns);
    osk__sb_puts(&sb, ",\"delta_ns\":");
    osk__sb_json_num(&sb, sum->calib.delta_ns);
    osk__sb_puts(&sb, strcmp(s->instrument, "pyhook") == 0 ? ",\"scope\":\"profile hook\",\"w_source\":"
                                                            : ",\"scope\":\"collector\",\"w_source\":");
    osk__sb_json_str(&sb, sum->calib_given ? "given to the summary" : osk_trace_snapshot_w_source(s));
    osk__sb_puts(&sb, "}");
  } else {
    osk__sb_puts(&sb, "null");
  }
  osk__sb_printf(&sb, ",\"residual_ns\":%lld,\"ops\":[", (long long)sum->residual_ns);
  for (size_t i = 0; i < sum->nrows; i++) {
    const osk_trace_op_t *r = &sum->rows[i];
    if (i) osk__sb_put(&sb, ",", 1);
    osk__sb_puts(&sb, "\n{\"name\":");
    osk__sb_json_str(&sb, osk_trace_snapshot_name(s, r->name));
    osk__sb_printf(&sb,
                   ",\"calls\":%llu,\"total_ns\":%lld,\"self_ns\":%lld,\"total_corrected_ns\":%lld,"
                   "\"self_corrected_ns\":%lld,\"mean_ns\":",
                   (unsigned long long)r->calls, (long long)r->total_ns, (long long)r->self_ns,
                   (long long)r->total_corrected_ns, (long long)r->self_corrected_ns);
    osk__sb_json_num(&sb, r->mean_ns);
    osk__sb_puts(&sb, ",\"p50_ns\":");
    osk__sb_json_num(&sb, r->p50_ns);
    osk__sb_puts(&sb, ",\"p99_ns\":");
    osk__sb_json_num(&sb, r->p99_ns);
    osk__sb_printf(&sb, ",\"max_ns\":%lld,\"children\":%llu,\"descendants\":%llu}", (long long)r->max_ns,
                   (unsigned long long)r->children, (unsigned long long)r->descendants);
  }
  osk__sb_puts(&sb, "]}\n");
  return osk__sb_finish(&sb);
}
