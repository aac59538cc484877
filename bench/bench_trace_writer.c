/* bench_trace_writer: the cost per event of stopping a session (collect into
 * a snapshot) and of writing it as Chrome trace JSON, without Python or
 * torch in the way. Not a test: run it with
 *   meson compile -C BUILD bench/bench_trace_writer && BUILD/bench/bench_trace_writer [events] [out]
 * Events: 80% leaves named like aten ops under 20% parents, two threads. The
 * medians of 5 runs are printed in ns per event. */
#include "opskew_trace.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static size_t g_events = 1000000;

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static void *produce(void *arg) {
  (void)arg;
  static const char *const names[] = {"aten::add", "aten::mul", "aten::empty", "aten::linear",
                                      "aten::addmm", "aten::relu", "aten::t", "aten::copy_"};
  osk_trace_name_t *n[8];
  for (int i = 0; i < 8; i++) n[i] = osk_trace_name(names[i]);
  size_t per_thread = g_events / 2;
  for (size_t i = 0; i < per_thread; i += 5) {
    osk_trace_begin(n[3], 0);
    for (int k = 0; k < 4; k++) {
      osk_trace_begin(n[(i + (size_t)k) % 8], 0);
      osk_trace_end();
    }
    osk_trace_end();
  }
  return NULL;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  if (argc > 1) g_events = (size_t)strtoull(argv[1], NULL, 10);
  const char *out = argc > 2 ? argv[2] : "/tmp/opskew-bench-writer.json";
  enum { RUNS = 5 };
  double stop[RUNS], write[RUNS];
  size_t n = 0;
  long bytes = 0;
  for (int r = 0; r < RUNS; r++) {
    if (osk_trace_start(NULL) != 0) return 1;
    pthread_t t[2];
    for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, produce, NULL);
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    double t0 = now_ns();
    osk_trace_snapshot_t *s = NULL;
    (void)osk_trace_stop("bench", &s); /* failure: s stays NULL */
    double t1 = now_ns();
    if (!s) return 1;
    n = osk_trace_snapshot_events(s);
    if (osk_trace_write_chrome(s, out) != 0) return 1;
    double t2 = now_ns();
    osk_trace_snapshot_free(s);
    stop[r] = (t1 - t0) / (double)n;
    write[r] = (t2 - t1) / (double)n;
    FILE *f = fopen(out, "rb");
    if (f) {
      fseek(f, 0, SEEK_END);
      bytes = ftell(f);
      fclose(f);
    }
  }
  qsort(stop, RUNS, sizeof stop[0], cmp);
  qsort(write, RUNS, sizeof write[0], cmp);
  printf("events %zu, %.1f bytes/event: stop %.1f ns/event, write %.1f ns/event, "
         "stop+write %.1f ns/event (medians of %d runs; min write %.1f)\n",
         n, (double)bytes / (double)n, stop[RUNS / 2], write[RUNS / 2], stop[RUNS / 2] + write[RUNS / 2],
         RUNS, write[0]);
  unlink(out);
  return 0;
}
