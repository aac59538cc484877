/* The NVTX collector through the NVTX v3 injection ABI, driven the way an
 * NVTX3 instance drives it: dlopen the library, call
 * InitializeInjectionNvtx2 with a getExportTable that serves the callbacks
 * table, whose core module has one slot per NVTX function; then call the
 * slots the collector filled, from several threads, with strings formatted
 * like PyTorch's emit_nvtx ("name, seq = N, op_id = H"). Two instances (two
 * libraries using NVTX) are injected, as in a real process. */
#include "collector_testutil.h"

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

/* A fresh string per call, as PyTorch's emit_nvtx formats one per operator
 * ("name, seq = N, op_id = H", a child with its sizes), in the worker's
 * reused buffer, through the instance's push and pop slots. */
static void route_begin(void *ctx, const char *op, int i, char *buf, size_t cap) {
  const instance_t *in = ctx;
  int child = strcmp(op, "aten::linear") != 0;
  snprintf(buf, cap, "%s, seq = %d, op_id = %d%s", op, i, 3 * i + child, child ? ", sizes = [[1]]" : "");
  ((push_a_t)in->slot[9])(buf);
}

static void route_end(void *ctx) { ((pop_t)((const instance_t *)ctx)->slot[11])(); }

int main(int argc, char **argv) {
  CHECK(argc == 2);
  collector_t c = collector_open(argv[1]);
  int (*init)(const void *(*)(uint32_t));
  *(void **)&init = collector_sym(&c, "InitializeInjectionNvtx2");
  CHECK(strcmp(c.instrument(), "nvtx") == 0);
  CHECK(c.bound() == 0);

  /* A table NVTX cannot give: refused, nothing filled. */
  CHECK(init(get_nothing) == 0);
  CHECK(init(NULL) == 0);
  CHECK(c.bound() == -1);

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
  CHECK(g_table_calls == 2 && c.bound() == 2);
  /* Both instances call the same functions. */
  CHECK(g_inst[0].slot[9] == g_inst[1].slot[9] && g_inst[0].slot[11] == g_inst[1].slot[11]);

  /* Ranges before a session are not recorded. */
  ((push_a_t)g_inst[0].slot[9])("aten::before, seq = 1");
  ((pop_t)g_inst[0].slot[11])();

  CHECK(c.start() == 0);
  const worker_route_t routes[2] = {{route_begin, route_end, &g_inst[0]},
                                    {route_begin, route_end, &g_inst[1]}};
  workers_run(routes, 2);
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

  osk_trace_snapshot_t *s;
  size_t n;
  osk_trace_event_t *ev = collector_stop(&c, &s, &n);
  CHECK(n == WORKER_EVENTS + 4);
  CHECK(c.unmatched(s) == 1 && c.lost(s) == 0);
  size_t ops[3] = {0}, user = 0, wide = 0, w2 = 0, unnamed = 0; /* ops: linear, add, mul */
  uint32_t tids[WORKER_THREADS + 1] = {0};
  size_t ntids = 0;
  for (size_t i = 0; i < n; i++) {
    int seen = 0;
    for (size_t k = 0; k < ntids; k++) seen |= tids[k] == ev[i].tid;
    if (!seen) {
      CHECK(ntids < WORKER_THREADS + 1);
      tids[ntids++] = ev[i].tid;
    }
    const char *nm = c.name(s, ev[i].name);
    if (worker_event(ev, i, n, nm, ops)) continue;
    if (!strcmp(nm, "user_scope")) {
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
  }
  workers_check(ops);
  CHECK(user == 1 && wide == 1 && w2 == 1 && unnamed == 1);
  CHECK(ntids == WORKER_THREADS + 1); /* the workers and the main thread */
  free(ev);
  c.free(s);
  printf("ok: nvtx\n");
  return 0;
}
