/* Summary: calls, inclusive and exclusive time from nesting, quantiles, and
 * the calibration-based correction, checked against the events themselves. */
#include "opskew_trace.h"
#include "testutil.h"
#include "json_check.h"

#include <stdlib.h>
#include <string.h>

static const osk_trace_op_t *row(const osk_trace_summary_t *sum, const osk_trace_snapshot_t *s,
                                 const char *name) {
  for (size_t i = 0; i < osk_trace_summary_rows(sum); i++) {
    const osk_trace_op_t *r = osk_trace_summary_row(sum, i);
    if (!strcmp(osk_trace_snapshot_name(s, r->name), name)) return r;
  }
  return NULL;
}

int main(void) {
  osk_trace_name_t *parent = osk_trace_name("t::parent");
  osk_trace_name_t *child = osk_trace_name("t::child");
  osk_trace_name_t *leaf = osk_trace_name("t::leaf");
  CHECK(osk_trace_start(NULL) == 0);
  const int N = 200;
  for (int i = 0; i < N; i++) {
    osk_trace_begin(parent, 0);
    osk_spin_ns(2000);
    for (int k = 0; k < 2; k++) {
      osk_trace_begin(child, 0);
      osk_spin_ns(1000);
      osk_trace_begin(leaf, 0);
      osk_spin_ns(500);
      osk_trace_end();
      osk_trace_end();
    }
    osk_trace_end();
  }
  int err = 0;
  osk_trace_snapshot_t *s = NULL;
  err = osk_trace_stop("test", &s);
  CHECK(s && osk_trace_snapshot_events(s) == (size_t)(5 * N));

  /* Expected values straight from the events. */
  size_t n = osk_trace_snapshot_events(s);
  osk_trace_event_t *ev = malloc(n * sizeof *ev);
  CHECK(ev && osk_trace_snapshot_copy(s, 0, n, ev) == n);
  int64_t tot[3] = {0}, kids[3] = {0};
  for (size_t i = 0; i < n; i++) {
    const char *nm = osk_trace_snapshot_name(s, ev[i].name);
    int k = !strcmp(nm, "t::parent") ? 0 : !strcmp(nm, "t::child") ? 1 : 2;
    tot[k] += ev[i].dur_ns;
    if (k > 0) kids[k - 1] += ev[i].dur_ns;
  }
  osk_trace_calib_t cal = {.w_ns = 40.0, .delta_ns = 15.0, .valid = 1};
  osk_trace_summary_t *sum = NULL;
  err = osk_trace_summarize(s, &cal, &sum);
  CHECK(sum && err == 0 && osk_trace_summary_rows(sum) == 3);
  const osk_trace_op_t *rp = row(sum, s, "t::parent");
  const osk_trace_op_t *rc = row(sum, s, "t::child");
  const osk_trace_op_t *rl = row(sum, s, "t::leaf");
  CHECK(rp && rc && rl);
  CHECK(rp->calls == (uint64_t)N && rc->calls == (uint64_t)(2 * N) && rl->calls == (uint64_t)(2 * N));
  CHECK(rp->total_ns == tot[0] && rc->total_ns == tot[1] && rl->total_ns == tot[2]);
  CHECK(rp->self_ns == tot[0] - kids[0]);
  CHECK(rc->self_ns == tot[1] - kids[1]);
  CHECK(rl->self_ns == tot[2]);
  CHECK(rp->children == (uint64_t)(2 * N) && rp->descendants == (uint64_t)(4 * N));
  CHECK(rc->children == (uint64_t)(2 * N) && rc->descendants == (uint64_t)(2 * N));
  CHECK(rl->children == 0 && rl->descendants == 0);
  /* Spins of 2000+1000+500 ns: self times at least what was spun. */
  CHECK(rp->self_ns >= (int64_t)N * 2000 && rl->self_ns >= (int64_t)(2 * N) * 500);
  /* Corrections follow the model exactly (events are long: no clamping). */
  CHECK_NEAR((double)rl->self_corrected_ns, (double)rl->self_ns - 2.0 * N * 15.0, 2.0 * N);
  CHECK_NEAR((double)rc->self_corrected_ns, (double)rc->self_ns - 2.0 * N * 15.0 - 25.0 * 2 * N, 2.0 * N);
  CHECK_NEAR((double)rp->total_corrected_ns, (double)rp->total_ns - N * 15.0 - 40.0 * 4 * N, 2.0 * N);
  CHECK(rl->p50_ns >= 500 && rl->p99_ns >= rl->p50_ns && (double)rl->max_ns >= rl->p99_ns);
  CHECK_NEAR(rl->mean_ns, (double)rl->total_ns / (2.0 * N), 1e-6);
  /* Sorted by self time. */
  for (size_t i = 1; i < osk_trace_summary_rows(sum); i++)
    CHECK(osk_trace_summary_row(sum, i - 1)->self_ns >= osk_trace_summary_row(sum, i)->self_ns);

  char *table = osk_trace_summary_table(sum, 0);
  CHECK(table && strstr(table, "t::parent") && strstr(table, "Self corr us"));
  char *json = osk_trace_summary_json(sum);
  CHECK(json && json_valid(json));
  CHECK(strstr(json, "\"schema\":\"opskew.trace.summary/1\""));
  CHECK(strstr(json, "\"name\":\"t::leaf\",\"calls\":400,"));
  char *table1 = osk_trace_summary_table(sum, 1);
  CHECK(table1 && strstr(table1, "(2 more operators not shown)"));
  printf("%s", table);
  osk_trace_free(table);
  osk_trace_free(table1);
  osk_trace_free(json);
  osk_trace_summary_free(sum);

  /* Tiny events with a large calibration clamp, never negative: on the
   * corrected time line each is 1 ns long, a parent as long as its
   * children side by side (self 0), a leaf 1 ns of self time. */
  /* (1000 s: 1 ms was less than a leaf preempted on a loaded machine took.) */
  osk_trace_calib_t big = {.w_ns = 1e12, .delta_ns = 1e12, .valid = 1};
  err = osk_trace_summarize(s, &big, &sum);
  CHECK(sum);
  for (size_t i = 0; i < osk_trace_summary_rows(sum); i++) {
    const osk_trace_op_t *r = osk_trace_summary_row(sum, i);
    CHECK(r->self_corrected_ns == (r->descendants ? 0 : (int64_t)r->calls));
    CHECK(r->total_corrected_ns >= (int64_t)r->calls &&
          r->total_corrected_ns <= (int64_t)(r->calls + r->descendants));
  }
  osk_trace_summary_free(sum);

  /* A window: the events that begin in [from, to). Parents 50 to 149 whole
   * (the events are stored in the order they ended: each parent's 4
   * descendants, then it). */
  int64_t p_ts[200] = {0}, c_ts = 0;
  int ip = 0;
  for (size_t i = 0; i < n; i++) {
    const char *nm = osk_trace_snapshot_name(s, ev[i].name);
    if (!strcmp(nm, "t::parent") && ip < N) p_ts[ip++] = ev[i].ts_ns;
    if (!strcmp(nm, "t::child") && i / 5 == 10 && !c_ts) c_ts = ev[i].ts_ns; /* parent 10's first child */
  }
  CHECK(ip == N && c_ts > p_ts[10]);
  int64_t wt[3] = {0};
  for (size_t i = 0; i < n; i++) {
    if (ev[i].ts_ns < p_ts[50] || ev[i].ts_ns >= p_ts[150]) continue;
    const char *nm = osk_trace_snapshot_name(s, ev[i].name);
    wt[!strcmp(nm, "t::parent") ? 0 : !strcmp(nm, "t::child") ? 1 : 2] += ev[i].dur_ns;
  }
  err = osk_trace_summarize_window(s, &cal, p_ts[50], p_ts[150], &sum);
  CHECK(sum && err == 0);
  rp = row(sum, s, "t::parent");
  rc = row(sum, s, "t::child");
  rl = row(sum, s, "t::leaf");
  CHECK(rp && rc && rl && rp->calls == 100 && rc->calls == 200 && rl->calls == 200);
  CHECK(rp->total_ns == wt[0] && rc->total_ns == wt[1] && rl->total_ns == wt[2]);
  CHECK(rp->descendants == 400 && rc->descendants == 200);
  osk_trace_summary_free(sum);
  /* One that begins inside parent 10: its children count as top level, it
   * does not. */
  err = osk_trace_summarize_window(s, &cal, c_ts, p_ts[11], &sum);
  CHECK(sum && err == 0 && !row(sum, s, "t::parent"));
  rc = row(sum, s, "t::child");
  CHECK(rc && rc->calls == 2 && rc->descendants == 2 && row(sum, s, "t::leaf")->calls == 2);
  osk_trace_summary_free(sum);
  CHECK(osk_trace_summarize_window(s, &cal, 2, 1, &sum) == OSK_EINVAL && sum == NULL);
  free(ev);
  osk_trace_snapshot_free(s);

  /* An empty snapshot summarizes to nothing, cleanly. */
  CHECK(osk_trace_start(NULL) == 0);
  err = osk_trace_stop("test", &s);
  err = osk_trace_summarize(s, NULL, &sum);
  CHECK(sum && osk_trace_summary_rows(sum) == 0);
  json = osk_trace_summary_json(sum);
  CHECK(json && json_valid(json) && strstr(json, "\"calibration\":null"));
  osk_trace_free(json);
  osk_trace_summary_free(sum);
  osk_trace_snapshot_free(s);
  printf("ok: summary\n");
  return 0;
}
