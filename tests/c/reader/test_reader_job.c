/* test_reader_job.c: a job's traces together (opskew_job.h): matching,
 * clock alignment and the cross-rank correction's exact arithmetic on
 * hand-made traces. Times below are in microseconds as in the traces; the
 * job reports nanoseconds. */
#include "opskew_job.h"
#include "reader_testutil.h"

static void tb_begin(tb_t *t, int rank) {
  memset(t, 0, sizeof *t);
  tb_put(t, "{\"distributedInfo\": {\"rank\": %d}, \"traceEvents\": [", rank);
}

/* One complete event: thread 1 is the main thread, 2 the collectives'. */
static void ev(tb_t *t, const char *name, const char *cat, int tid, double ts, double dur) {
  tb_put(t, "%s{\"ph\": \"X\", \"name\": \"%s\", \"cat\": \"%s\", \"pid\": 7, \"tid\": %d, \"ts\": %.3f, "
            "\"dur\": %.3f}",
         t->n++ ? ", " : "", name, cat, tid, ts, dur);
}

static void op(tb_t *t, double ts) { ev(t, "aten::add", "cpu_op", 1, ts, 0.5); }
static void coll(tb_t *t, const char *name, double enter, double exit) {
  ev(t, name, "user_annotation", 2, enter, exit - enter);
}
static void tb_end(tb_t *t) { tb_put(t, "]}"); }

static osk_job_t *run_job(tb_t *tr, size_t n, const double *w, int align) {
  osk_job_t *j;
  osk_job_opts_t o = {0};
  o.align = align;
  CHECK(osk_job_new(&j, &o) == 0);
  for (size_t r = 0; r < n; r++) CHECK(osk_job_add_mem(j, (int)r, tr[r].buf, tr[r].len) == 0);
  for (size_t r = 0; w && r < n; r++) CHECK(osk_job_set_cost(j, (int)r, w[r], 0) == 0);
  osk_error_t err;
  int rc = osk_job_run(j, &err);
  if (rc) fprintf(stderr, "osk_job_run: %d %s\n", rc, err.message ? err.message : "");
  CHECK(rc == 0);
  return j;
}

static void free_traces(tb_t *tr, size_t n) {
  for (size_t r = 0; r < n; r++) free(tr[r].buf);
}

/* A chain of three collectives; rank 0 has no overhead, rank 1 pays 2 us per
 * operator event: 3 events before the first, 2 before the second, none
 * before the third. */
static void test_chain_of_three(void) {
  tb_t tr[2];
  tb_begin(&tr[0], 0);
  ev(&tr[0], "ProfilerStep#1", "user_annotation", 1, 0, 100);
  op(&tr[0], 2);
  coll(&tr[0], "gloo:all_reduce", 10, 40);
  coll(&tr[0], "gloo:all_reduce", 50, 70);
  coll(&tr[0], "gloo:all_reduce", 80, 95);
  tb_end(&tr[0]);
  tb_begin(&tr[1], 1);
  ev(&tr[1], "ProfilerStep#1", "user_annotation", 1, 0, 100);
  op(&tr[1], 1);
  op(&tr[1], 3);
  op(&tr[1], 5);
  coll(&tr[1], "gloo:all_reduce", 30, 41);
  op(&tr[1], 42);
  op(&tr[1], 44);
  coll(&tr[1], "gloo:all_reduce", 60, 70);
  coll(&tr[1], "gloo:all_reduce", 75, 95);
  tb_end(&tr[1]);
  /* Rank 0's op costs nothing, rank 1's 2 us each. */
  const double w[2] = {0, 2000};
  osk_job_t *j = run_job(tr, 2, w, 0);
  const osk_job_stats_t *st = osk_job_stats(j);
  CHECK(st->family == OSK_JOB_FAMILY_GLOO && st->matched == 3 && st->unmatched == 0 && st->corrected);
  CHECK(osk_job_collective_count(j) == 3);
  /* Collective 1: rank 1 arrives 20 us late, 6 us of it its cost: the exit
   * moves back 6 us; rank 0's wait loses 6 us (20 -> 14). */
  const osk_job_collective_t *c = osk_job_collective(j, 0);
  CHECK(c->step == 1 && c->ordinal == 0 && !c->p2p && c->last == 1);
  CHECK_NEAR(c->lateness_ns, 20000, 0);
  CHECK_NEAR(c->wait_ns[0], 20000, 0);
  CHECK_NEAR(c->own_ns[1], 6000, 0);
  CHECK_NEAR(c->own_ns[0], 0, 0);
  CHECK_NEAR(c->shift_ns[0], 6000, 0);
  CHECK_NEAR(c->corrected_wait_ns[0], 14000, 0);
  CHECK_NEAR(c->corrected_wait_ns[1], 0, 0);
  /* Collective 2: shifts 6 + (0 | 4): max(50 - 6, 60 - 10) = 50; shift 10. */
  c = osk_job_collective(j, 1);
  CHECK_NEAR(c->own_ns[1], 4000, 0);
  CHECK_NEAR(c->shift_ns[0], 10000, 0);
  CHECK_NEAR(c->shift_ns[1], 10000, 0);
  CHECK_NEAR(c->corrected_wait_ns[0], 6000, 0); /* 10 measured: rank 1 is still 6 us late */
  /* Collective 3: no new cost; rank 0 arrives last; shift stays 10. */
  c = osk_job_collective(j, 2);
  CHECK(c->last == 0);
  CHECK_NEAR(c->shift_ns[1], 10000, 0);
  CHECK_NEAR(c->corrected_wait_ns[1], 5000, 0);
  const osk_job_rank_t *r0 = osk_job_rank(j, 0), *r1 = osk_job_rank(j, 1);
  CHECK(r0->rank == 0 && r1->rank == 1 && r0->collectives == 3 && r1->steps == 1);
  CHECK_NEAR(r0->own_ns, 0, 0);
  CHECK_NEAR(r0->absorbed_ns, 10000, 0); /* 6 + 4: all of rank 1's cost */
  CHECK_NEAR(r1->own_ns, 10000, 0);       /* 5 events x 2 us */
  CHECK_NEAR(r1->own_before_sync_ns, 10000, 0);
  CHECK_NEAR(r1->absorbed_ns, 0, 0);
  CHECK(r1->events == 5 && r0->events == 1);
  CHECK(r1->last_arrivals == 2 && r0->last_arrivals == 1);
  CHECK_NEAR(r0->wait_ns, 20000 + 10000 + 0, 0);
  /* The step: 100 us on both ranks, 90 corrected (rank 0 waited 10 us for
   * rank 1's cost; rank 1 paid it). */
  CHECK(osk_job_step_count(j) == 1);
  const osk_job_step_t *s = osk_job_step(j, 0);
  CHECK(s->step == 1 && s->dur_ns[0] == 100000 && s->dur_ns[1] == 100000);
  CHECK_NEAR(s->corrected_ns[0], 90000, 0);
  CHECK_NEAR(s->corrected_ns[1], 90000, 0);
  /* The merged table holds both ranks' events. */
  const osk_summary_t *m = osk_job_merged(j);
  int found = 0;
  for (size_t i = 0; i < osk_summary_op_count(m); i++) {
    const osk_summary_op_t *o = osk_summary_op(m, i);
    if (o->name.len == 9 && memcmp(o->name.ptr, "aten::add", 9) == 0) {
      CHECK(o->calls == 6);
      found = 1;
    }
  }
  CHECK(found);
  osk_job_free(j);
  /* Without costs: waits only, nothing corrected. */
  j = run_job(tr, 2, NULL, 0);
  CHECK(!osk_job_stats(j)->corrected && osk_job_rank(j, 1)->own_ns == 0);
  CHECK_NEAR(osk_job_rank(j, 0)->wait_ns, 30000, 0);
  CHECK(osk_job_step(j, 0)->corrected_ns[0] == -1);
  osk_job_free(j);
  free_traces(tr, 2);
}

/* Point to point: the receiver waits for the sender, never the reverse. */
static void p2p_case(double send_at, double recv_at, const double *w, double expect_recv_absorbed,
                     double expect_recv_cwait) {
  tb_t tr[2];
  tb_begin(&tr[0], 0);
  for (int i = 0; i < 5; i++) op(&tr[0], 1 + i);
  coll(&tr[0], "gloo:send", send_at, send_at + 2);
  tb_end(&tr[0]);
  tb_begin(&tr[1], 1);
  for (int i = 0; i < 5; i++) op(&tr[1], 1 + i);
  coll(&tr[1], "gloo:recv", recv_at, (send_at > recv_at ? send_at : recv_at) + 3);
  tb_end(&tr[1]);
  osk_job_t *j = run_job(tr, 2, w, 0);
  CHECK(osk_job_stats(j)->matched == 1);
  const osk_job_collective_t *c = osk_job_collective(j, 0);
  CHECK(c->p2p && c->sender == 0);
  CHECK_NEAR(c->wait_ns[0], 0, 0);
  CHECK_NEAR(c->wait_ns[1], send_at > recv_at ? (send_at - recv_at) * 1000 : 0, 1e-6);
  CHECK_NEAR(osk_job_rank(j, 1)->absorbed_ns, expect_recv_absorbed, 1e-6);
  CHECK_NEAR(c->corrected_wait_ns[1], expect_recv_cwait, 1e-6);
  /* The sender waits for nobody: its shift is its own cost (5 events at W). */
  CHECK_NEAR(c->shift_ns[0], 5 * w[0], 1e-6);
  CHECK_NEAR(osk_job_rank(j, 0)->absorbed_ns, 0, 1e-6);
  CHECK(c->last == (send_at > recv_at ? 0u : 1u));
  osk_job_free(j);
  free_traces(tr, 2);
}

static void test_late_sender_and_receiver(void) {
  /* Late sender: 8 us late, 5 of it its cost: the receiver's wait loses 5. */
  const double sender_pays[2] = {1000, 0};
  p2p_case(20, 12, sender_pays, 5000, 3000);
  /* Late by 2 us only: the receiver's wait (2) goes, no more. */
  p2p_case(14, 12, sender_pays, 2000, 0);
  /* Late receiver: its own 5 us moved its arrival; the sender waited for
   * nobody, so nobody absorbed anything. */
  const double receiver_pays[2] = {0, 1000};
  p2p_case(10, 20, receiver_pays, 0, 0);
}

/* Known clock offsets and drifts: the fit recovers them within the residual
 * it reports; aligned exits then agree. */
static void test_clock_offsets(void) {
  enum { RANKS = 3, K = 60 };
  const double off_us[RANKS] = {0, 300, -450}, drift_ppm[RANKS] = {0, 20, -35};
  tb_t tr[RANKS];
  unsigned seed = 12345;
  for (int r = 0; r < RANKS; r++) tb_begin(&tr[r], r);
  for (int k = 0; k < K; k++) {
    double exit_true = 1000.0 + 1000.0 * k; /* one collective per ms */
    for (int r = 0; r < RANKS; r++) {
      seed = seed * 1103515245u + 12345u;
      double jitter = ((double)((seed >> 16) % 4001) - 2000) / 1000.0; /* +-2 us */
      double t = exit_true + jitter;
      double local = t + off_us[r] + drift_ppm[r] * 1e-6 * (t - 1000.0);
      double enter = local - 50 - 10 * r;
      coll(&tr[r], "gloo:all_reduce", enter, local);
    }
  }
  for (int r = 0; r < RANKS; r++) tb_end(&tr[r]);
  osk_job_t *j = run_job(tr, RANKS, NULL, 1);
  CHECK(osk_job_stats(j)->matched == K && osk_job_stats(j)->aligned);
  for (int r = 1; r < RANKS; r++) {
    const osk_job_rank_t *rk = osk_job_rank(j, (size_t)r);
    CHECK(rk->clock_points == K);
    CHECK(rk->residual_ns > 0 && rk->residual_ns < 4000);
    CHECK_NEAR(rk->offset_ns, off_us[r] * 1000, rk->residual_ns);
    /* The drift, over the 59 ms span, is within the residual as well. */
    CHECK_NEAR(rk->drift_ppm * 1e-6 * 59e6, drift_ppm[r] * 1e-6 * 59e6, rk->residual_ns);
  }
  double worst = 0;
  for (int r = 1; r < RANKS; r++) worst = fmax(worst, osk_job_rank(j, (size_t)r)->residual_max_ns);
  for (size_t k = 0; k < K; k++) {
    const osk_job_collective_t *c = osk_job_collective(j, k);
    for (int r = 1; r < RANKS; r++) CHECK_NEAR((double)c->exit_ns[r], (double)c->exit_ns[0], worst + 1);
  }
  osk_job_free(j);
  /* Not applied: the times stay each rank's own. */
  j = run_job(tr, RANKS, NULL, 0);
  CHECK(!osk_job_stats(j)->aligned);
  CHECK_NEAR((double)osk_job_collective(j, 0)->exit_ns[1] - (double)osk_job_collective(j, 0)->exit_ns[0],
             300000, 5000);
  osk_job_free(j);
  free_traces(tr, RANKS);
}

/* A collective on one rank only is unmatched; the rest still match. The
 * family is the first one every rank has. */
static void test_unmatched_and_family(void) {
  tb_t tr[2];
  tb_begin(&tr[0], 0);
  ev(&tr[0], "ProfilerStep#3", "user_annotation", 1, 0, 50);
  coll(&tr[0], "gloo:all_reduce", 10, 20);
  ev(&tr[0], "c10d::allreduce_", "cpu_op", 1, 9, 1);
  ev(&tr[0], "ProfilerStep#4", "user_annotation", 1, 50, 50);
  coll(&tr[0], "gloo:all_reduce", 60, 70);
  coll(&tr[0], "gloo:broadcast", 80, 90);
  tb_end(&tr[0]);
  tb_begin(&tr[1], 1);
  ev(&tr[1], "ProfilerStep#3", "user_annotation", 1, 0, 50);
  coll(&tr[1], "gloo:all_reduce", 12, 20);
  ev(&tr[1], "ProfilerStep#4", "user_annotation", 1, 50, 50);
  coll(&tr[1], "gloo:all_reduce", 61, 70);
  tb_end(&tr[1]);
  osk_job_t *j = run_job(tr, 2, NULL, 0);
  const osk_job_stats_t *st = osk_job_stats(j);
  CHECK(st->family == OSK_JOB_FAMILY_GLOO && strcmp(st->family_name, "gloo") == 0);
  CHECK(st->matched == 2 && st->unmatched == 1);
  CHECK(osk_job_collective(j, 1)->step == 4 && osk_job_collective(j, 1)->ordinal == 0);
  CHECK(osk_job_step_count(j) == 2 && osk_job_step(j, 1)->step == 4);
  osk_job_free(j);
  free_traces(tr, 2);
  /* Bad arguments. */
  osk_job_t *e;
  CHECK(osk_job_new(&e, NULL) == 0);
  CHECK(osk_job_run(e, NULL) == OSK_EINVAL); /* no ranks */
  osk_job_free(e);
  CHECK(osk_job_new(&e, NULL) == 0);
  CHECK(osk_job_add_mem(e, -1, "x", 1) == OSK_EINVAL);
  CHECK(osk_job_set_cost(e, 0, 1, 0) == OSK_EINVAL); /* no such rank */
  CHECK(osk_job_add_path(e, 0, "no-such-trace.json") == 0);
  CHECK(osk_job_set_cost(e, 0, NAN, 0) == OSK_EINVAL);
  osk_error_t err;
  size_t ri, si;
  CHECK(osk_job_run(e, &err) == OSK_EIO);
  CHECK(osk_job_failed(e, &ri, &si) == 0 && ri == 0 && si == 0);
  osk_job_free(e);
}

/* NCCL: the GPU kernels are the collectives when every rank has them (the
 * CPU-side nccl:* events only enqueue); else the next family. */
static void test_nccl_family(void) {
  tb_t tr[2];
  for (int r = 0; r < 2; r++) {
    tb_begin(&tr[r], r);
    ev(&tr[r], "nccl:all_reduce", "cpu_op", 1, 5, 2);
    ev(&tr[r], "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)", "kernel", 7,
       10 + 20 * r, 40 - 20 * r);
    ev(&tr[r], "nccl:all_reduce", "cpu_op", 1, 60, 2);
    if (r == 0) ev(&tr[r], "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
                   "kernel", 7, 70, 20);
    tb_end(&tr[r]);
  }
  osk_job_t *j = run_job(tr, 2, NULL, 0);
  CHECK(osk_job_stats(j)->family == OSK_JOB_FAMILY_NCCL_KERNEL);
  CHECK(osk_job_stats(j)->matched == 1 && osk_job_stats(j)->unmatched == 1);
  const osk_job_collective_t *c = osk_job_collective(j, 0);
  CHECK(c->last == 1 && c->lateness_ns == 20000 && c->wait_ns[0] == 20000);
  osk_job_free(j);
  free_traces(tr, 2);
  /* One rank without kernels: the CPU side is what both have. */
  tb_begin(&tr[0], 0);
  ev(&tr[0], "nccl:all_reduce", "cpu_op", 1, 5, 2);
  ev(&tr[0], "ncclDevKernel_AllReduce", "kernel", 7, 10, 40);
  tb_end(&tr[0]);
  tb_begin(&tr[1], 1);
  ev(&tr[1], "nccl:all_reduce", "cpu_op", 1, 6, 2);
  tb_end(&tr[1]);
  j = run_job(tr, 2, NULL, 0);
  CHECK(osk_job_stats(j)->family == OSK_JOB_FAMILY_NCCL && osk_job_stats(j)->matched == 1);
  CHECK(strcmp(osk_job_stats(j)->family_name, "nccl") == 0);
  osk_job_free(j);
  free_traces(tr, 2);
}

/* No collective on any rank: each rank's own cost still comes out of its
 * steps. */
static void test_costs_without_collectives(void) {
  tb_t tr[2];
  for (int r = 0; r < 2; r++) {
    tb_begin(&tr[r], r);
    ev(&tr[r], "ProfilerStep#1", "user_annotation", 1, 0, 100);
    for (int i = 0; i < 10; i++) op(&tr[r], 1 + i);
    tb_end(&tr[r]);
  }
  const double w[2] = {1000, 2000};
  osk_job_t *j = run_job(tr, 2, w, 0);
  CHECK(osk_job_stats(j)->family == OSK_JOB_FAMILY_NONE && osk_job_stats(j)->matched == 0);
  CHECK_NEAR(osk_job_rank(j, 0)->own_ns, 10000, 0);
  CHECK_NEAR(osk_job_rank(j, 1)->own_ns, 20000, 0);
  CHECK_NEAR(osk_job_step(j, 0)->corrected_ns[0], 90000, 0);
  CHECK_NEAR(osk_job_step(j, 0)->corrected_ns[1], 80000, 0);
  osk_job_free(j);
  free_traces(tr, 2);
}

/* Events that start after a rank's arrival at a collective (beside it, as
 * DDP's backward runs beside its allreduce) delay its next arrival; two
 * segments (a rank's two traces) start from shift 0 each; offsets applied
 * with costs move arrivals onto rank 0's clock before the model compares
 * them. */
/* One segment of the test below, from t0 us: rank 1 (tr[1]) runs 3 events
 * beside its first collective (after arriving at t0 + 10), then arrives at
 * the second at t0 + 60, 30 us after rank 0 (tr[0]). */
static void beside_segment(tb_t tr[2], double t0) {
  tb_begin(&tr[0], 0);
  coll(&tr[0], "gloo:all_reduce", t0 + 10, t0 + 20);
  coll(&tr[0], "gloo:all_reduce", t0 + 30, t0 + 70);
  tb_end(&tr[0]);
  tb_begin(&tr[1], 1);
  coll(&tr[1], "gloo:all_reduce", t0 + 10, t0 + 20);
  for (int k = 0; k < 3; k++) op(&tr[1], t0 + 12 + 2 * k);
  coll(&tr[1], "gloo:all_reduce", t0 + 60, t0 + 70);
  tb_end(&tr[1]);
}

static void test_beside_segments_and_aligned_costs(void) {
  tb_t tr[4];
  beside_segment(&tr[0], 0);
  beside_segment(&tr[2], 1000); /* the same again; shifts restart at 0 */
  osk_job_t *j;
  CHECK(osk_job_new(&j, NULL) == 0);
  CHECK(osk_job_add_mem(j, 0, tr[0].buf, tr[0].len) == 0);
  CHECK(osk_job_add_mem(j, 1, tr[1].buf, tr[1].len) == 0);
  CHECK(osk_job_add_mem(j, 0, tr[2].buf, tr[2].len) == 0);
  CHECK(osk_job_add_mem(j, 1, tr[3].buf, tr[3].len) == 0);
  CHECK(osk_job_set_cost(j, 0, 0, 0) == 0 && osk_job_set_cost(j, 1, 5000, 0) == 0);
  CHECK(osk_job_run(j, NULL) == 0);
  CHECK(osk_job_stats(j)->matched == 4 && osk_job_rank(j, 1)->sources == 2);
  for (size_t k = 1; k < 4; k += 2) {
    const osk_job_collective_t *c = osk_job_collective(j, k);
    CHECK(c->segment == k / 2);
    CHECK_NEAR(c->own_ns[1], 15000, 0);  /* the 3 events beside the previous one */
    CHECK_NEAR(c->shift_ns[0], 15000, 0); /* max(30, 60) - max(30, 60 - 15) */
    CHECK_NEAR(c->corrected_wait_ns[0], 15000, 0);
  }
  CHECK_NEAR(osk_job_rank(j, 0)->absorbed_ns, 30000, 0);
  CHECK_NEAR(osk_job_rank(j, 1)->own_before_sync_ns, 30000, 0);
  osk_job_free(j);
  for (int i = 0; i < 4; i++) free(tr[i].buf);

  /* Aligned with costs: rank 1's clock reads 500 us ahead; on rank 0's
   * clock it arrives 20 us late, 10 of them its cost (2 events x 5 us). */
  tb_t a[2];
  tb_begin(&a[0], 0);
  tb_begin(&a[1], 1);
  for (int k = 0; k < 10; k++) {
    double t = 100.0 * k;
    coll(&a[0], "gloo:all_reduce", t + 10, t + 50);
    op(&a[1], 500 + t + 20);
    op(&a[1], 500 + t + 25);
    coll(&a[1], "gloo:all_reduce", 500 + t + 30, 500 + t + 50);
  }
  tb_end(&a[0]);
  tb_end(&a[1]);
  const double w[2] = {0, 5000};
  j = run_job(a, 2, w, 1);
  CHECK_NEAR(osk_job_rank(j, 1)->offset_ns, 500000, 1);
  for (size_t k = 1; k < 10; k++) {
    const osk_job_collective_t *c = osk_job_collective(j, k);
    CHECK_NEAR((double)(c->enter_ns[1] - c->enter_ns[0]), 20000, 1);
    CHECK_NEAR(c->wait_ns[0], 20000, 1);
    CHECK_NEAR(c->corrected_wait_ns[0], 10000, 1);
  }
  osk_job_free(j);
  free_traces(a, 2);
}

int main(void) {
  test_chain_of_three();
  test_late_sender_and_receiver();
  test_clock_offsets();
  test_unmatched_and_family();
  test_nccl_family();
  test_costs_without_collectives();
  test_beside_segments_and_aligned_costs();
  puts("ok");
  return 0;
}
