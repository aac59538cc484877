/* The NVTX collector through the NVTX v3 injection ABI, driven the way an
 * NVTX3 instance drives it: dlopen the library, call
 * InitializeInjectionNvtx2 with a getExportTable that serves the callbacks
 * table, whose core module has one slot per NVTX function; then call the
 * slots the collector filled, from several threads, with strings formatted
 * like PyTorch's emit_nvtx ("name, seq = N, op_id = H"). Two instances (two
 * libraries using NVTX) are injected, as in a real process. */
#include "opskew_trace.h"
#include "testutil.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <wchar.h>

typedef void (*fn_t)(void);

/* An NVTX instance: its slots, the table of slot addresses NVTX hands out. */
#define CORE_SIZE 16
typedef struct {
  fn_t slot[CORE_SIZE];
  fn_t *table[CORE_SIZE];
} instance_t;

static instance_t g_inst[2];
static int g_cur; /* instance being initialized */
static int g_table_calls;

static int get_module_table(int module, fn_t ***out_table, unsigned *out_size) {
  g_table_calls++;
  if (module != 1) return 0; /* only the core module */
  *out_table = g_inst[g_cur].table;
  *out_size = CORE_SIZE;
  return 1;
}

typedef struct {
  size_t struct_size;
  int (*get)(int, fn_t ***, unsigned *);
} callbacks_t;
static const callbacks_t g_callbacks = {sizeof(callbacks_t), get_module_table};

static const void *get_export_table(uint32_t id) { return id == 1 ? (const void *)&g_callbacks : NULL; }
static const void *get_nothing(uint32_t id) {
  (void)id;
  return NULL;
}

typedef struct {
  uint16_t version, size;
  uint32_t category;
  int32_t color_type;
  uint32_t color;
  int32_t payload_type, reserved0;
  uint64_t payload;
  int32_t message_type;
  const void *message;
} attr_t;

typedef int (*push_a_t)(const char *);
typedef int (*push_w_t)(const wchar_t *);
typedef int (*push_ex_t)(const attr_t *);
typedef int (*pop_t)(void);

#define THREADS 4
#define PER_THREAD 20000

static void *worker(void *arg) {
  const instance_t *in = arg;
  push_a_t push = (push_a_t)in->slot[9];
  pop_t pop = (pop_t)in->slot[11];
  char buf[128];
  for (int i = 0; i < PER_THREAD; i++) {
    /* A fresh string per call, as PyTorch formats one per operator. */
    snprintf(buf, sizeof buf, "aten::linear, seq = %d, op_id = %d", i, 3 * i);
    push(buf);
    snprintf(buf, sizeof buf, "%s, seq = %d, op_id = %d, sizes = [[1]]", i % 2 ? "aten::add" : "aten::mul", i,
             3 * i + 1);
    push(buf);
    memset(buf, 'x', 40); /* the buffer is reused: nothing may point into it */
    pop();
    pop();
  }
  return NULL;
}

int main(int argc, char **argv) {
  CHECK(argc == 2);
  void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!lib) fprintf(stderr, "%s\n", dlerror());
  CHECK(lib);
  int (*init)(const void *(*)(uint32_t));
  *(void **)&init = dlsym(lib, "InitializeInjectionNvtx2");
  CHECK(init);
  int (*bound)(void);
  int (*start)(void);
  int (*stop)(osk_trace_snapshot_t **);
  *(void **)&bound = dlsym(lib, "osk_collector_bound");
  *(void **)&start = dlsym(lib, "osk_collector_start");
  *(void **)&stop = dlsym(lib, "osk_collector_stop");
  CHECK(bound && start && stop);
  CHECK(dlsym(lib, "osk__sb_put") == NULL); /* internals stay hidden */
  CHECK(bound() == 0);

  /* A table NVTX cannot give: refused, nothing filled. */
  CHECK(init(get_nothing) == 0);
  CHECK(init(NULL) == 0);
  CHECK(bound() == -1);

  for (int k = 0; k < 2; k++) {
    for (int i = 0; i < CORE_SIZE; i++) g_inst[k].table[i] = &g_inst[k].slot[i];
    g_inst[k].table[0] = NULL; /* NVTX_CBID_CORE_INVALID has no slot */
    g_cur = k;
    CHECK(init(get_export_table) == 1);
    for (int i = 0; i < CORE_SIZE; i++) {
      int filled = g_inst[k].slot[i] != NULL;
      CHECK(filled == (i == 8 || i == 9 || i == 10 || i == 11));
    }
  }
  CHECK(g_table_calls == 2 && bound() == 2);
  /* Both instances call the same functions. */
  CHECK(g_inst[0].slot[9] == g_inst[1].slot[9] && g_inst[0].slot[11] == g_inst[1].slot[11]);

  /* Ranges before a session are not recorded. */
  ((push_a_t)g_inst[0].slot[9])("aten::before, seq = 1");
  ((pop_t)g_inst[0].slot[11])();

  CHECK(start() == 0);
  pthread_t th[THREADS];
  for (int t = 0; t < THREADS; t++) CHECK(pthread_create(&th[t], NULL, worker, &g_inst[t % 2]) == 0);
  for (int t = 0; t < THREADS; t++) pthread_join(th[t], NULL);
  /* PushEx with ASCII and Unicode messages, PushW; a struct too small to
   * hold a message gives an unnamed range. */
  attr_t a = {.version = 3, .size = sizeof(attr_t), .message_type = 1, .message = "user_scope, extra"};
  CHECK(((push_ex_t)g_inst[1].slot[8])(&a) == 0);
  ((pop_t)g_inst[1].slot[11])();
  a.message_type = 2;
  a.message = L"wide_scope, x";
  ((push_ex_t)g_inst[1].slot[8])(&a);
  ((pop_t)g_inst[1].slot[11])();
  ((push_w_t)g_inst[0].slot[10])(L"w\u00e9, y");
  ((pop_t)g_inst[0].slot[11])();
  a.size = 16;
  ((push_ex_t)g_inst[0].slot[8])(&a);
  ((pop_t)g_inst[0].slot[11])();
  ((pop_t)g_inst[0].slot[11])(); /* unmatched: counted, not recorded */

  osk_trace_snapshot_t *s = NULL;
  CHECK(stop(&s) == 0);
  CHECK(s);
  size_t (*n_events)(const osk_trace_snapshot_t *);
  size_t (*copy)(const osk_trace_snapshot_t *, size_t, size_t, osk_trace_event_t *);
  const char *(*name)(const osk_trace_snapshot_t *, uint32_t);
  uint64_t (*unmatched)(const osk_trace_snapshot_t *);
  uint64_t (*lost)(const osk_trace_snapshot_t *);
  void (*snap_free)(osk_trace_snapshot_t *);
  *(void **)&n_events = dlsym(lib, "osk_trace_snapshot_events");
  *(void **)&copy = dlsym(lib, "osk_trace_snapshot_copy");
  *(void **)&name = dlsym(lib, "osk_trace_snapshot_name");
  *(void **)&unmatched = dlsym(lib, "osk_trace_snapshot_unmatched_ends");
  *(void **)&lost = dlsym(lib, "osk_trace_snapshot_lost_total");
  *(void **)&snap_free = dlsym(lib, "osk_trace_snapshot_free");
  CHECK(n_events && copy && name && unmatched && lost && snap_free);

  size_t n = n_events(s);
  CHECK(n == (size_t)THREADS * PER_THREAD * 2 + 4);
  CHECK(unmatched(s) == 1 && lost(s) == 0);
  osk_trace_event_t *ev = calloc(n, sizeof *ev);
  CHECK(ev && copy(s, 0, n, ev) == n);
  size_t linear = 0, add = 0, mul = 0, user = 0, wide = 0, w2 = 0, unnamed = 0;
  uint32_t tids[THREADS + 1] = {0};
  size_t ntids = 0;
  for (size_t i = 0; i < n; i++) {
    const char *nm = name(s, ev[i].name);
    if (!strcmp(nm, "aten::linear")) {
      linear++;
      CHECK(ev[i].depth == 0);
    } else if (!strcmp(nm, "aten::add") || !strcmp(nm, "aten::mul")) {
      *(nm[6] == 'a' ? &add : &mul) += 1;
      CHECK(ev[i].depth == 1);
      /* The child ends before its parent, which is the next event. */
      CHECK(i + 1 < n && ev[i + 1].tid == ev[i].tid && ev[i + 1].depth == 0);
      CHECK(ev[i].ts_ns >= ev[i + 1].ts_ns &&
            ev[i].ts_ns + ev[i].dur_ns <= ev[i + 1].ts_ns + ev[i + 1].dur_ns);
    } else if (!strcmp(nm, "user_scope")) {
      user++;
    } else if (!strcmp(nm, "wide_scope")) {
      wide++;
    } else if (!strcmp(nm, "w?")) {
      w2++;
    } else if (!strcmp(nm, "<unnamed>")) {
      unnamed++;
    } else {
      fprintf(stderr, "unexpected name %s\n", nm);
      CHECK(0);
    }
    int seen = 0;
    for (size_t k = 0; k < ntids; k++) seen |= tids[k] == ev[i].tid;
    if (!seen) {
      CHECK(ntids < THREADS + 1);
      tids[ntids++] = ev[i].tid;
    }
  }
  CHECK(linear == (size_t)THREADS * PER_THREAD);
  CHECK(add == (size_t)THREADS * PER_THREAD / 2 && mul == add);
  CHECK(user == 1 && wide == 1 && w2 == 1 && unnamed == 1);
  CHECK(ntids == THREADS + 1); /* four workers and the main thread */
  free(ev);
  snap_free(s);
  printf("ok: nvtx\n");
  return 0;
}
