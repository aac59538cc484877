/* Corrections side by side: opskew.verdict.per_operator runs its three
 * corrections of one trace (W's median and both ends of its CI) in threads of
 * their own. Three threads correct the same file at once, one of them writing
 * the corrected trace, and each gives the table, and the written trace the
 * bytes, of the same correction run alone. The trace nests operators under
 * annotations on two threads, with Python events written after the
 * operators, so one thread is held whole in a second read. Run under
 * ThreadSanitizer too (the tsan suite). Files go to a mkdtemp directory under
 * /tmp, removed at the end. */
#include "correct_testutil.h"

#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

static char dir[64];
static char in_path[128], out_alone[128], out_side[128];

static void write_trace(void) {
  FILE *f = fopen(in_path, "w");
  CHECK(f);
  fputs("{\"traceEvents\":[\n", f);
  int first = 1;
#define EV(cat, name, tid, ts, dur)                                                               \
  do {                                                                                            \
    fprintf(f, "%s{\"ph\":\"X\",\"cat\":\"%s\",\"name\":\"%s\",\"pid\":1,\"tid\":%d,\"ts\":%d.%03d," \
               "\"dur\":%d.%03d}",                                                                \
            first ? "" : ",\n", cat, name, tid, (ts) / 1000, (ts) % 1000, (dur) / 1000, (dur) % 1000); \
    first = 0;                                                                                    \
  } while (0)
  for (int tid = 1; tid <= 2; tid++) {
    int t = 1000;
    for (int r = 0; r < 400; r++) {
      int root = t;
      t += 700;
      for (int k = 0; k < 3; k++) {
        EV("cpu_op", "aten::linear", tid, t, 2900);
        EV("cpu_op", "aten::addmm", tid, t + 400, 1900);
        EV("cpu_op", "aten::empty", tid, t + 600, 300 + 10 * (r % 7));
        t += 3300;
      }
      EV("user_annotation", "fwd", tid, root, t - root + 500);
      t += 1500;
    }
  }
  /* with_stack's Python events come after the operators: thread 1 breaks
   * the streaming rule and is held whole, in a second read. */
  for (int r = 0, t = 1000; r < 400; r++, t += 12100) EV("python_function", "py:step", 1, t - 200, 11800);
  fputs("\n]}\n", f);
  CHECK(fclose(f) == 0);
#undef EV
}

typedef struct {
  osk_correct_opts_t opts;
  const char *out;
  osk_correct_t *c;
  int rc;
} job_t;

static void *run(void *arg) {
  job_t *j = arg;
  osk_error_t err;
  j->rc = osk_correct_path(in_path, j->out, &j->opts, &j->c, &err);
  return NULL;
}

int main(void) {
  snprintf(dir, sizeof dir, "/tmp/opskew-threads-XXXXXX");
  CHECK(mkdtemp(dir));
  snprintf(in_path, sizeof in_path, "%s/in.json", dir);
  snprintf(out_alone, sizeof out_alone, "%s/alone.json", dir);
  snprintf(out_side, sizeof out_side, "%s/side.json", dir);
  write_trace();
  /* W's median, its CI's upper and lower ends, as per_operator asks. */
  const double w[3] = {300.0, 400.0, 200.0}, wp[3] = {120.0, 150.0, 100.0};
  job_t alone[3], side[3];
  for (int k = 0; k < 3; k++) {
    osk_correct_opts_t o = {.w_ns = w[k], .delta_ns = 40.0, .w_py_ns = wp[k], .delta_py_ns = 10.0};
    alone[k] = (job_t){.opts = o, .out = k == 0 ? out_alone : NULL};
    side[k] = (job_t){.opts = o, .out = k == 0 ? out_side : NULL};
    run(&alone[k]);
    CHECK(alone[k].rc == 0 && alone[k].c);
  }
  CHECK(osk_correct_stats(alone[0].c)->passes == 2); /* the held thread's second read */
  pthread_t th[3];
  for (int k = 0; k < 3; k++) CHECK(pthread_create(&th[k], NULL, run, &side[k]) == 0);
  for (int k = 0; k < 3; k++) CHECK(pthread_join(th[k], NULL) == 0);
  for (int k = 0; k < 3; k++) {
    CHECK(side[k].rc == 0 && side[k].c);
    same_table(alone[k].c, side[k].c);
    CHECK(osk_correct_op_count(alone[k].c) >= 5);
    CHECK(osk_correct_stats(alone[k].c)->passes == osk_correct_stats(side[k].c)->passes);
  }
  /* The three models differ: a larger W leaves less. */
  CHECK(osk_correct_stats(alone[1].c)->corrected_top_ns < osk_correct_stats(alone[0].c)->corrected_top_ns);
  CHECK(osk_correct_stats(alone[0].c)->corrected_top_ns < osk_correct_stats(alone[2].c)->corrected_top_ns);
  size_t na, nb;
  char *a = osk_test_slurp(out_alone, &na), *b = osk_test_slurp(out_side, &nb);
  CHECK(na == nb && na > 1000 && memcmp(a, b, na) == 0);
  free(a);
  free(b);
  for (int k = 0; k < 3; k++) {
    osk_correct_free(alone[k].c);
    osk_correct_free(side[k].c);
  }
  CHECK(remove(in_path) == 0 && remove(out_alone) == 0 && remove(out_side) == 0);
  CHECK(rmdir(dir) == 0);
  puts("test_correct_threads: ok");
  return 0;
}
