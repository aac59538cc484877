/* The compensation in bounded memory (docs/correct.md, "Memory"): random
 * nested traces on three threads written parents first, children first, and
 * with one thread shuffled (the last two held whole in a second read), give
 * the same per-operator table and the same corrected trace; the trace is written in time order per thread, parents
 * first, so the summary reads it in one pass and finds, for every operator,
 * the table's corrected total and self time to the nanosecond; parents
 * first, the events held at once stay within one top-level tree per thread. Files go to a
 * mkdtemp directory under /tmp, removed at the end. */
#include "correct_testutil.h"

#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

static char dir[64];

static const char *in_dir(const char *name) {
  static char buf[4][160];
  static int k;
  k = (k + 1) % 4;
  snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
  return buf[k];
}

/* ------------------------------------------------------------ generator */

#define MAX_EV 6000
#define THREADS 3

typedef struct {
  int64_t ts, dur;
  int name, cat, tid, root;
} gen_ev_t;

typedef struct {
  gen_ev_t ev[MAX_EV]; /* per thread in pre-order (parents first) */
  int n;
  int post[MAX_EV];    /* the same events children first (by end) */
  int roots;
  int max_tree;        /* events in the largest top-level tree */
} gen_t;

static uint64_t rng = 88172645463325252ull;
static uint32_t rnd(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (uint32_t)(rng >> 16);
}

static const char *NAMES[] = {"aten::linear", "aten::addmm", "aten::t", "aten::relu",
                              "aten::add", "fwd", "py:step", "py:call"};
static const char *CATS[] = {"cpu_op", "user_annotation", "python_function"};

/* One event at `start` and its subtree: at least 1000 ns between any two
 * boundaries, so that no corrected time is clamped (exact figures). Returns
 * its end. */
static int64_t gen_tree(gen_t *g, int tid, int root, int64_t start, int depth, int *post_n) {
  int me = g->n++;
  CHECK(g->n <= MAX_EV);
  int kind = (int)(rnd() % 8);
  g->ev[me] = (gen_ev_t){start, 0, kind, kind == 5 ? 1 : kind >= 6 ? 2 : 0, tid, root};
  int64_t t = start + 1000 + rnd() % 500;
  int kids = depth < 4 ? (int)(rnd() % 4) : 0;
  for (int i = 0; i < kids; i++) t = gen_tree(g, tid, root, t, depth + 1, post_n) + 1000 + rnd() % 700;
  if (!kids) t = start + 500 + rnd() % 3000;
  g->ev[me].dur = t - start;
  g->post[(*post_n)++] = me;
  return t;
}

/* Trees on THREADS threads, their roots interleaved in the file. */
static void generate(gen_t *g, int roots) {
  memset(g, 0, sizeof *g);
  int post_n = 0;
  int64_t cursor[THREADS];
  for (int k = 0; k < THREADS; k++) cursor[k] = 1000000 + k * 333;
  g->roots = roots;
  for (int r = 0; r < roots; r++) {
    for (int k = 0; k < THREADS; k++) {
      int before = g->n;
      cursor[k] = gen_tree(g, k + 1, r, cursor[k], 0, &post_n) + 2000 + rnd() % 5000;
      if (g->n - before > g->max_tree) g->max_tree = g->n - before;
    }
  }
}

static void put_ev(FILE *f, const gen_ev_t *e, int *first) {
  fprintf(f, "%s{\"ph\":\"X\",\"cat\":\"%s\",\"name\":\"%s\",\"pid\":1,\"tid\":%d,\"ts\":%lld.%03lld,"
             "\"dur\":%lld.%03lld}",
          *first ? "" : ",\n", CATS[e->cat], NAMES[e->name], e->tid, (long long)(e->ts / 1000),
          (long long)(e->ts % 1000), (long long)(e->dur / 1000), (long long)(e->dur % 1000));
  *first = 0;
}

enum { PRE = 0, POST = 1, SHUFFLED = 2 };

/* Writes the trace: every thread parents first (PRE), children first (POST),
 * or parents first but thread 2's events shuffled (SHUFFLED), between
 * leading and trailing document members. */
static void write_trace(const gen_t *g, int order, const char *path) {
  FILE *f = fopen(path, "w");
  CHECK(f);
  fputs("{\"schemaVersion\":1,\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n", f);
  int first = 1;
  int *idx = malloc((size_t)g->n * sizeof *idx);
  CHECK(idx);
  for (int i = 0; i < g->n; i++) idx[i] = order == POST ? g->post[i] : i;
  if (order == SHUFFLED) {
    /* Thread 2's events in a random order, in the places they had. */
    int pos[MAX_EV], m = 0;
    for (int i = 0; i < g->n; i++)
      if (g->ev[i].tid == 2) pos[m++] = i;
    for (int i = m - 1; i > 0; i--) {
      int j = (int)(rnd() % (uint32_t)(i + 1));
      int x = idx[pos[i]];
      idx[pos[i]] = idx[pos[j]];
      idx[pos[j]] = x;
    }
  }
  for (int i = 0; i < g->n; i++) {
    put_ev(f, &g->ev[idx[i]], &first);
    if (i == g->n / 2) {
      fputs(",\n{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k\",\"pid\":0,\"tid\":7,\"ts\":1,\"dur\":9}", f);
      fputs(",\n{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":1,\"tid\":2,\"args\":{\"name\":\"bwd\"}}", f);
    }
  }
  fputs("\n],\"traceName\":\"gen\"}\n", f);
  free(idx);
  CHECK(fclose(f) == 0);
}

/* ------------------------------------------------------------ read back */

typedef struct {
  int n;
  int64_t ts[MAX_EV], dur[MAX_EV];
  int tid[MAX_EV], name[MAX_EV];
  int metadata;
} back_t;

static int name_index(osk_str_t s) {
  for (int i = 0; i < 8; i++)
    if (s.len == strlen(NAMES[i]) && memcmp(s.ptr, NAMES[i], s.len) == 0) return i;
  return -1;
}

static int collect(void *ctx, const osk_reader_event_t *ev) {
  back_t *b = ctx;
  if (ev->ph.len == 1 && ev->ph.ptr[0] == 'M') b->metadata++;
  if (ev->ph.len != 1 || ev->ph.ptr[0] != 'X') return 0;
  CHECK(b->n < MAX_EV);
  b->ts[b->n] = ev->ts_ns;
  b->dur[b->n] = ev->dur_ns;
  b->tid[b->n] = (int)ev->tid.num;
  b->name[b->n] = name_index(ev->name);
  b->n++;
  return 0;
}

static void read_back(const char *path, back_t *b) {
  memset(b, 0, sizeof *b);
  read_path(path, collect, b);
}

/* The events of thread `tid`, in file order, equal in `a` and `b`. */
static void same_thread_events(const back_t *a, const back_t *b, int tid) {
  int i = 0, j = 0;
  for (;;) {
    while (i < a->n && a->tid[i] != tid) i++;
    while (j < b->n && b->tid[j] != tid) j++;
    if (i == a->n || j == b->n) break;
    CHECK(a->name[i] == b->name[j] && a->ts[i] == b->ts[j] && a->dur[i] == b->dur[j]);
    i++;
    j++;
  }
  CHECK(i == a->n && j == b->n);
}

/* W - delta even: every boundary moves back by whole nanoseconds, so each
 * written duration is the formula's exactly. */
static const osk_correct_opts_t OPTS = {.w_ns = 100.0, .delta_ns = 10.0, .w_py_ns = 50.0,
                                        .delta_py_ns = 6.0};

/* The table and the trace agree: the summary of the corrected trace (one
 * pass: it is in time order) has, for every operator, the table's calls,
 * corrected total and corrected self time, to the nanosecond. */
static void table_agrees_with_trace(const osk_correct_t *c, const char *out) {
  osk_summary_t *s = NULL;
  osk_error_t err;
  CHECK(osk_summary_from_path(out, NULL, NULL, &s, NULL, &err) == 0);
  CHECK(osk_summary_stats(s)->passes == 1);
  CHECK(osk_summary_stats(s)->resorted_events == 0);
  size_t checked = 0;
  for (size_t i = 0; i < osk_summary_op_count(s); i++) {
    const osk_summary_op_t *so = osk_summary_op(s, i);
    if (so->cat.len == 6 && !memcmp(so->cat.ptr, "kernel", 6)) continue; /* the GPU's, as read */
    const osk_correct_op_t *co = op_named(c, so->name.ptr);
    CHECK(co && co->calls == so->calls && co->clamped == 0);
    CHECK((double)so->total_ns == co->corrected_total_ns);
    CHECK((double)so->self_ns == co->corrected_self_ns);
    CHECK(so->descendants == co->descendants + co->py_descendants);
    checked++;
  }
  CHECK(checked == 8); /* every name of the generator */
  osk_summary_free(s);
}

/* Per thread: times never go back, and the events come in the generator's
 * pre-order (parents first, siblings in time order). */
static void in_time_order(const back_t *b, const gen_t *g) {
  for (int tid = 1; tid <= THREADS; tid++) {
    int j = 0;
    int64_t last = INT64_MIN;
    for (int i = 0; i < b->n; i++) {
      if (b->tid[i] != tid) continue;
      CHECK(b->ts[i] >= last);
      last = b->ts[i];
      while (j < g->n && g->ev[j].tid != tid) j++;
      CHECK(j < g->n && g->ev[j].name == b->name[i]);
      j++;
    }
  }
}

static void test_orders_agree(void) {
  static gen_t g;
  generate(&g, 40);
  static back_t b[3];
  osk_correct_t *c[3] = {NULL, NULL, NULL};
  osk_error_t err;
  const char *in[3] = {in_dir("pre.json"), in_dir("post.json"), in_dir("shuf.json")};
  const char *out[3] = {"pre_out.json", "post_out.json", "shuf_out.json"};
  for (int v = 0; v < 3; v++) {
    write_trace(&g, v, in[v]);
    char o[160];
    snprintf(o, sizeof o, "%s", in_dir(out[v]));
    CHECK(osk_correct_path(in[v], o, &OPTS, &c[v], &err) == 0);
    const osk_correct_stats_t *st = osk_correct_stats(c[v]);
    CHECK(st->corrected_events == (uint64_t)g.n && st->other_events == 1 && st->threads == THREADS);
    CHECK(st->clamped == 0 && st->overlaps == 0);
    read_back(o, &b[v]);
    CHECK(b[v].n == g.n + 1); /* and the kernel, as read */
    CHECK(b[v].metadata == 1); /* the thread's name, as read */
    in_time_order(&b[v], &g);
    table_agrees_with_trace(c[v], o);
    /* Leading members stay before the events, trailing ones after. */
    FILE *f = fopen(o, "r");
    CHECK(f);
    static char text[1 << 20];
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = 0;
    fclose(f);
    char *unit = strstr(text, "\"displayTimeUnit\":\"ms\""), *evs = strstr(text, "\"traceEvents\"");
    char *name = strstr(text, "\"traceName\":\"gen\"");
    CHECK(unit && evs && name && unit < evs && evs < name && strstr(text, "\"opskew\"") < evs);
    remove(o);
    remove(in[v]);
  }
  /* Parents first: one read, one top-level tree per thread held (and the
   * event that closes it). */
  const osk_correct_stats_t *pre = osk_correct_stats(c[PRE]);
  CHECK(pre->passes == 1 && pre->held_threads == 0);
  CHECK(pre->held_peak <= (uint64_t)(THREADS * (g.max_tree + 1)));
  CHECK(pre->held_peak * 3 < (uint64_t)g.n);
  /* Children first: a gap between siblings looks like one between trees
   * until their parent comes, which breaks the gap rule; so does an event
   * of a shuffled thread. A second read holds such threads whole. */
  const osk_correct_stats_t *post = osk_correct_stats(c[POST]);
  CHECK(post->passes == 2 && post->held_threads == THREADS);
  const osk_correct_stats_t *sh = osk_correct_stats(c[SHUFFLED]);
  CHECK(sh->passes == 2 && sh->held_threads == 1);
  same_table(c[PRE], c[POST]);
  same_table(c[PRE], c[SHUFFLED]);
  for (int tid = 1; tid <= THREADS; tid++) {
    same_thread_events(&b[PRE], &b[POST], tid);
    same_thread_events(&b[PRE], &b[SHUFFLED], tid);
  }
  for (int v = 0; v < 3; v++) osk_correct_free(c[v]);
}

/* The nesting rule's edge cases (equal starts, shorter first in the file;
 * zero durations on a boundary; an event that outlives the one it starts
 * in; back-to-back events) streamed in file order give what the sorted
 * whole thread gives: the same events with the first one moved to the end
 * break the gap rule (it starts before the last gap), and are held and
 * sorted whole in a second read. */
static const char *EDGE[] = {
    "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"a\",\"pid\":1,\"tid\":1,\"ts\":0,\"dur\":1}",
    "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"z\",\"pid\":1,\"tid\":1,\"ts\":1,\"dur\":0}",
    "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"short\",\"pid\":1,\"tid\":1,\"ts\":1,\"dur\":2}",
    "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"long\",\"pid\":1,\"tid\":1,\"ts\":1,\"dur\":5}",
    "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"z\",\"pid\":1,\"tid\":1,\"ts\":6,\"dur\":0}",
    "{\"ph\":\"X\",\"cat\":\"python_function\",\"name\":\"enter\",\"pid\":1,\"tid\":1,\"ts\":6,\"dur\":0.5}",
    "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"iter\",\"pid\":1,\"tid\":1,\"ts\":6.2,\"dur\":3}",
    "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"op\",\"pid\":1,\"tid\":1,\"ts\":7,\"dur\":0.5}",
    "{\"ph\":\"X\",\"cat\":\"python_function\",\"name\":\"exit\",\"pid\":1,\"tid\":1,\"ts\":9,\"dur\":0.5}",
    "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"z\",\"pid\":1,\"tid\":1,\"ts\":9.5,\"dur\":0}",
    "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"a\",\"pid\":1,\"tid\":1,\"ts\":9.5,\"dur\":0}",
    "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"b\",\"pid\":1,\"tid\":1,\"ts\":9.5,\"dur\":1}",
    "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"a\",\"pid\":1,\"tid\":1,\"ts\":12,\"dur\":1}",
};

static void write_edge(const char *path, int rotated) {
  FILE *f = fopen(path, "w");
  CHECK(f);
  fputs("{\"traceEvents\":[\n", f);
  size_t n = sizeof EDGE / sizeof *EDGE;
  for (size_t i = 0; i < n; i++) fprintf(f, "%s%s", i ? ",\n" : "", EDGE[rotated ? (i + 1) % n : i]);
  fputs("\n]}\n", f);
  CHECK(fclose(f) == 0);
}

typedef struct {
  int n;
  char line[32][96];
} raw_t;

static int collect_raw(void *ctx, const osk_reader_event_t *ev) {
  raw_t *r = ctx;
  if (ev->ph.len != 1 || ev->ph.ptr[0] != 'X') return 0;
  CHECK(r->n < 32);
  snprintf(r->line[r->n++], 96, "%.*s %lld %lld", (int)ev->name.len, ev->name.ptr, (long long)ev->ts_ns,
           (long long)ev->dur_ns);
  return 0;
}

static void test_edge_cases_as_sorted(void) {
  osk_correct_opts_t opts = {.w_ns = 100.0, .delta_ns = 10.0, .w_py_ns = 50.0, .delta_py_ns = 5.0};
  osk_correct_t *c[2];
  raw_t raw[2];
  osk_error_t err;
  for (int v = 0; v < 2; v++) {
    write_edge(in_dir("edge.json"), v);
    CHECK(osk_correct_path(in_dir("edge.json"), in_dir("edge_out.json"), &opts, &c[v], &err) == 0);
    memset(&raw[v], 0, sizeof raw[v]);
    osk_reader_t *r = NULL;
    CHECK(osk_reader_open(&r, in_dir("edge_out.json"), NULL, &err) == 0);
    CHECK(osk_reader_run(r, collect_raw, &raw[v], &err) == 0);
    osk_reader_free(r);
  }
  CHECK(osk_correct_stats(c[0])->passes == 1 && osk_correct_stats(c[0])->held_threads == 0);
  CHECK(osk_correct_stats(c[1])->passes == 2 && osk_correct_stats(c[1])->held_threads == 1);
  CHECK(osk_correct_stats(c[0])->overlaps == 2);
  for (size_t i = 0; i < osk_correct_op_count(c[0]); i++) {
    const osk_correct_op_t *x = osk_correct_op(c[0], i), *y = op_named(c[1], x->name.ptr);
    CHECK(y && x->calls == y->calls && x->descendants == y->descendants);
    CHECK(x->py_descendants == y->py_descendants && x->reported_self_ns == y->reported_self_ns);
    CHECK(x->corrected_total_ns == y->corrected_total_ns && x->corrected_self_ns == y->corrected_self_ns);
    CHECK(x->clamped == y->clamped && x->residual_ns == y->residual_ns);
  }
  /* "long" holds "short" (equal starts: the longer outside), and the
   * zero-duration "z" at 1 us nests in both, after them. */
  CHECK(op_named(c[0], "long")->descendants == 2 && op_named(c[0], "short")->descendants == 1);
  CHECK(raw[0].n == 13 && raw[1].n == 13);
  for (int i = 0; i < raw[0].n; i++) CHECK(strcmp(raw[0].line[i], raw[1].line[i]) == 0);
  CHECK(strncmp(raw[0].line[1], "long ", 5) == 0 && strncmp(raw[0].line[2], "short ", 6) == 0);
  CHECK(strncmp(raw[0].line[3], "z ", 2) == 0);
  osk_correct_free(c[0]);
  osk_correct_free(c[1]);
  remove(in_dir("edge.json"));
  remove(in_dir("edge_out.json"));
}

/* An input that cannot be read twice (a pipe) is held whole in one read,
 * and corrects as a file does. */
static void test_pipe_input(void) {
  static gen_t g;
  generate(&g, 5);
  write_trace(&g, SHUFFLED, in_dir("p.json"));
  osk_correct_t *file = NULL, *pipe_c = NULL;
  osk_error_t err;
  CHECK(osk_correct_path(in_dir("p.json"), in_dir("p_out.json"), &OPTS, &file, &err) == 0);
  CHECK(mkfifo(in_dir("fifo"), 0600) == 0);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    /* The writer: copies the trace into the pipe. */
    int in = open(in_dir("p.json"), O_RDONLY), out = open(in_dir("fifo"), O_WRONLY);
    if (in < 0 || out < 0) _exit(1);
    char buf[4096];
    ssize_t n;
    while ((n = read(in, buf, sizeof buf)) > 0)
      if (write(out, buf, (size_t)n) != n) _exit(1);
    _exit(0);
  }
  CHECK(osk_correct_path(in_dir("fifo"), in_dir("f_out.json"), &OPTS, &pipe_c, &err) == 0);
  int status;
  CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
  const osk_correct_stats_t *st = osk_correct_stats(pipe_c);
  CHECK(st->passes == 1 && st->held_threads == THREADS && st->held_peak == (uint64_t)g.n);
  same_table(file, pipe_c);
  static back_t a, b;
  read_back(in_dir("p_out.json"), &a);
  read_back(in_dir("f_out.json"), &b);
  for (int tid = 1; tid <= THREADS; tid++) same_thread_events(&a, &b, tid);
  table_agrees_with_trace(pipe_c, in_dir("f_out.json"));
  osk_correct_free(file);
  osk_correct_free(pipe_c);
  remove(in_dir("fifo"));
  remove(in_dir("p.json"));
  remove(in_dir("p_out.json"));
  remove(in_dir("f_out.json"));
}

/* An output that is written as it goes ("-": standard output; a device)
 * cannot take back a read that a thread voids: a first read only finds the
 * threads that break the gap rule, and the second writes. (Run from the
 * temporary directory: a writer without a standard-output route makes a
 * file named "-" there.) */
static void test_output_written_as_it_goes(void) {
  static gen_t g;
  generate(&g, 2);
  char cwd[4096];
  CHECK(getcwd(cwd, sizeof cwd));
  CHECK(chdir(dir) == 0);
  for (int v = 0; v < 2; v++) {
    /* Parents first; then the edge cases with one event moved to the end. */
    if (v == 0) write_trace(&g, PRE, "in.json");
    else write_edge("in.json", 1);
    osk_correct_t *c = NULL;
    osk_error_t err;
    CHECK(osk_correct_path("in.json", "-", &OPTS, &c, &err) == 0);
    const osk_correct_stats_t *st = osk_correct_stats(c);
    CHECK(st->passes == 2);
    CHECK(v == 0 ? st->held_threads == 0 && st->corrected_events == (uint64_t)g.n
                 : st->held_threads == 1 && st->corrected_events == 13);
    osk_correct_free(c);
    remove("in.json");
    remove("-");
  }
  CHECK(chdir(cwd) == 0);
}

/* An event may start at the last nanosecond the compressed time line holds
 * (2^62 - 1): the end of the input still writes it (the end is not a gap
 * before it), at its time. One at the last nanosecond int64 holds is past
 * that line: it was written clamped to 2^62 with no duration; it is now
 * not corrected, counted as unusable and written as read (the twin). */
static void test_last_nanosecond(void) {
  FILE *f = fopen(in_dir("max.json"), "w");
  CHECK(f);
  fputs("{\"traceEvents\":[\n"
        "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"a\",\"pid\":1,\"tid\":1,\"ts\":0,\"dur\":1},\n"
        "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"z\",\"pid\":1,\"tid\":1,"
        "\"ts\":4611686018427387.903,\"dur\":0},\n"
        "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"m\",\"pid\":1,\"tid\":1,"
        "\"ts\":9223372036854775.807,\"dur\":0}\n]}\n", f);
  CHECK(fclose(f) == 0);
  osk_correct_opts_t opts = {.w_ns = 0, .delta_ns = 0};
  osk_correct_t *c = NULL;
  osk_error_t err;
  CHECK(osk_correct_path(in_dir("max.json"), in_dir("max_out.json"), &opts, &c, &err) == 0);
  CHECK(osk_correct_stats(c)->corrected_events == 2 && op_named(c, "z") && op_named(c, "z")->calls == 1);
  CHECK(osk_correct_stats(c)->unusable_events == 1 && !op_named(c, "m"));
  osk_correct_free(c);
  static back_t b;
  read_back(in_dir("max_out.json"), &b);
  CHECK(b.n == 3 && (b.ts[0] == INT64_MAX || b.ts[1] == INT64_MAX || b.ts[2] == INT64_MAX));
  remove(in_dir("max.json"));
  remove(in_dir("max_out.json"));
}

int main(void) {
  snprintf(dir, sizeof dir, "/tmp/opskew-correct-XXXXXX");
  CHECK(mkdtemp(dir));
  test_orders_agree();
  test_edge_cases_as_sorted();
  test_pipe_input();
  test_last_nanosecond();
  test_output_written_as_it_goes();
  CHECK(rmdir(dir) == 0);
  puts("test_correct_stream: ok");
  return 0;
}
