/* The correction formula (osk__correct_event), with its clamping, and the
 * interning and metadata rules of the trace core. */
#include "analysis.h"
#include "testutil.h"

#include <string.h>

/* The formula with the default model's two classes: `op` operator and
 * `py` Python descendants. */
static osk__corrected_t two(const osk__cost_t *c, uint32_t cls, int64_t reported, uint64_t op, uint64_t py,
                            double waited, double kids) {
  uint64_t desc[2] = {op, py};
  return osk__correct_event(c, cls, reported, desc, 2, waited, kids);
}

static void formula(void) {
  osk__cost_t c = {.w = {100, 500}, .delta = {30, 200}};
  /* A leaf: reported - delta. */
  osk__corrected_t k = two(&c, OSK__CLS_OP, 1000, 0, 0, 0, 0);
  CHECK_NEAR(k.total_ns, 970, 1e-9);
  CHECK_NEAR(k.self_ns, 970, 1e-9);
  CHECK(k.residual_ns == 0 && k.self_residual_ns == 0);
  /* A parent with 3 operator and 2 Python descendants; its children's
   * corrected time is 400. */
  k = two(&c, OSK__CLS_OP, 5000, 3, 2, 0, 400);
  CHECK_NEAR(k.total_ns, 5000 - 30 - 3 * 100 - 2 * 500, 1e-9);
  CHECK_NEAR(k.self_ns, 5000 - 30 - 300 - 1000 - 400, 1e-9);
  /* A Python-class event pays its own delta. */
  k = two(&c, OSK__CLS_PY, 5000, 1, 0, 0, 0);
  CHECK_NEAR(k.total_ns, 5000 - 200 - 100, 1e-9);
  /* Over-compensation clamps at 0 and reports the residual. */
  k = two(&c, OSK__CLS_OP, 200, 3, 0, 0, 0);
  CHECK(k.total_ns == 0 && k.self_ns == 0);
  CHECK_NEAR(k.residual_ns, 30 + 300 - 200, 1e-9);
  CHECK_NEAR(k.self_residual_ns, 130, 1e-9); /* the self column clamps too */
  /* Self below zero: children's corrected time above the parent's. */
  k = two(&c, OSK__CLS_OP, 1000, 1, 0, 0, 900);
  CHECK_NEAR(k.total_ns, 870, 1e-9);
  CHECK(k.self_ns == 0);
  CHECK_NEAR(k.self_residual_ns, 30, 1e-9);
  /* A child's over-compensation stays the child's: the parent subtracts its
   * children's totals before their clamping, so its self time is what the
   * instrument left in its own exclusive time. */
  osk__corrected_t child = two(&c, OSK__CLS_OP, 100, 1, 0, 0, 0);
  CHECK(child.total_ns == 0 && child.raw_ns < 0);
  k = two(&c, OSK__CLS_OP, 3000, 2, 0, 0, child.raw_ns);
  /* reported self - delta - (W - delta) * children */
  CHECK_NEAR(k.self_ns, (3000 - 100) - 30 - (100 - 30) * 1, 1e-9);
  /* A clamped parent's self still comes from its raw total. */
  k = two(&c, OSK__CLS_OP, 200, 3, 0, 0, -500);
  CHECK(k.total_ns == 0);
  CHECK_NEAR(k.self_ns, 200 - 30 - 300 + 500, 1e-9);
  /* Time waited for other threads' events comes off the total, and off the
   * self time, where it was (its children's totals carry their own). */
  k = two(&c, OSK__CLS_OP, 5000, 1, 0, 700, 400);
  CHECK_NEAR(k.total_ns, 5000 - 30 - 100 - 700, 1e-9);
  CHECK_NEAR(k.self_ns, 5000 - 30 - 100 - 700 - 400, 1e-9);
  k = two(&c, OSK__CLS_OP, 500, 0, 0, 600, 0);
  CHECK(k.total_ns == 0);
  CHECK_NEAR(k.residual_ns, 130, 1e-9);
  /* No instrument cost: nothing changes. */
  osk__cost_t zero = {{0}, {0}};
  k = two(&zero, OSK__CLS_OP, 1234, 7, 7, 0, 1000);
  CHECK(k.total_ns == 1234 && k.self_ns == 234);
  /* Any number of classes: each of a class's descendants costs its W, the
   * event its own class's delta. */
  osk__cost_t three = {.w = {100, 500, 40}, .delta = {30, 200, 10}};
  uint64_t desc[3] = {3, 2, 5};
  k = osk__correct_event(&three, 2, 5000, desc, 3, 0, 0);
  CHECK_NEAR(k.total_ns, 5000 - 10 - 3 * 100 - 2 * 500 - 5 * 40, 1e-9);
  /* The first n_cls classes only. */
  k = osk__correct_event(&three, 0, 5000, desc, 1, 0, 0);
  CHECK_NEAR(k.total_ns, 5000 - 30 - 3 * 100, 1e-9);
}

static osk__id_t num(int64_t v) { return (osk__id_t){OSK__ID_INT, v, {NULL, 0}}; }
static osk__id_t str(const char *s) { return (osk__id_t){OSK__ID_STR, 0, {s, strlen(s)}}; }

static void interning(void) {
  osk__names_t names = {0};
  char buf[32];
  for (int i = 0; i < 1000; i++) {
    snprintf(buf, sizeof buf, "aten::op%d", i);
    CHECK(osk__names_intern(&names, buf, strlen(buf)) == i);
  }
  CHECK(osk__names_intern(&names, "aten::op17", 10) == 17);
  CHECK(osk__names_intern(&names, "a\0b", 3) == 1000); /* NUL bytes are part of a name */
  CHECK(osk__names_intern(&names, "a", 1) == 1001);
  CHECK(names.n == 1002 && names.str[1000].len == 3);
  osk__names_free(&names);

  osk__threads_t th = {0};
  osk__id_t p1 = num(1), t1 = num(7), ps = str("Spans"), ts = str("7");
  CHECK(osk__threads_intern(&th, &p1, &t1) == 0);
  CHECK(osk__threads_intern(&th, &ps, &t1) == 1);
  CHECK(osk__threads_intern(&th, &p1, &ts) == 2); /* "7" is not 7 */
  for (int i = 0; i < 300; i++) {
    osk__id_t t = num(100 + i);
    CHECK(osk__threads_intern(&th, &p1, &t) == 3 + i);
  }
  CHECK(osk__threads_intern(&th, &ps, &t1) == 1);
  CHECK(th.n == 303 && th.th[1].pid.kind == OSK__ID_STR && th.th[1].pid.str.ptr != ps.str.ptr);

  /* Metadata: the latest name wins, per thread and per process. */
  osk__meta_event_t ev = {.name = {"thread_name", 11}, .pid = p1, .tid = num(9)};
  ev.arg_name = (osk_str_t){"worker", 6};
  int64_t named = -2, proc = -2;
  CHECK(osk__threads_metadata(&th, &ev, &named, &proc) == 0 && named == 303 && proc == -1);
  ev.arg_name = (osk_str_t){"main", 4};
  CHECK(osk__threads_metadata(&th, &ev, &named, NULL) == 0 && named == 303);
  CHECK(osk__str_is(th.th[303].name, "main", 4));
  ev.name = (osk_str_t){"process_name", 12};
  ev.arg_name = (osk_str_t){"python", 6};
  CHECK(osk__threads_metadata(&th, &ev, &named, &proc) == 0 && named == -1 && proc == 0);
  ev.arg_name = (osk_str_t){"python3", 7};
  CHECK(osk__threads_metadata(&th, &ev, NULL, NULL) == 0);
  CHECK(th.n_procs == 1 && osk__str_is(th.procs[0].name, "python3", 7));
  ev.pid = ps; /* another process */
  CHECK(osk__threads_metadata(&th, &ev, &named, &proc) == 0 && named == -1 && proc == 1);
  CHECK(th.n_procs == 2 && th.procs[1].pid.kind == OSK__ID_STR && th.procs[1].pid.str.ptr != ps.str.ptr);
  ev.arg_name = (osk_str_t){NULL, 0}; /* no string args.name: ignored */
  CHECK(osk__threads_metadata(&th, &ev, &named, &proc) == 0 && named == -1 && proc == -1);
  ev.name = (osk_str_t){"process_sort_index", 18};
  ev.arg_name = (osk_str_t){"x", 1};
  CHECK(osk__threads_metadata(&th, &ev, &named, &proc) == 0 && named == -1 && proc == -1 &&
        th.n_procs == 2);
  osk__threads_free(&th);
}

int main(void) {
  formula();
  interning();
  puts("correct_event: ok");
  return 0;
}
