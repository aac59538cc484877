/* nvtx_collector.c: libopskew_nvtx.so, an NVTX v3 injection library that
 * feeds the opskew tracer runtime with the ranges PyTorch's emit_nvtx()
 * pushes on CUDA builds.
 *
 * Route (NVIDIA/NVTX c/include/nvtx3/nvtxDetail/nvtxInit.h, nvtxImpl.h,
 * nvtxTypes.h): every linkage unit that uses NVTX3 (libtorch_cuda.so,
 * libtorch_python.so, ...) keeps its own table of function pointers. Its
 * first NVTX call dlopen()s the library named by NVTX_INJECTION64_PATH and
 * calls our InitializeInjectionNvtx2(getExportTable). We ask for the
 * callbacks export table (NVTX_ETID_CALLBACKS), get the core module's
 * function table, and store our functions in the RangePushA, RangePushEx,
 * RangePushW and RangePop slots. NVTX then sets every slot we left alone to
 * a no-op. So we expect one call per NVTX-using library, and must answer
 * each one the same way.
 *
 * Names. PyTorch formats a fresh string per operator
 * ("aten::add, seq = 12, op_id = 34, ..."; torch/csrc/profiler/util.cpp,
 * getNvtxStr), so interning by pointer would intern every operator call.
 * We hash the prefix up to the first ',' while scanning it, and look it up
 * in a per-thread cache keyed by that hash and verified by content; only
 * a miss goes to the runtime's interning. Names that contain a ',' of their
 * own are cut there.
 *
 * Driving it is the same as the ITT collector: OPSKEW_TRACE_OUT (set by
 * `opskew record --device cuda`) writes the trace at exit; otherwise Python
 * calls osk_nvtx_start/osk_nvtx_stop through ctypes.
 */
#include "trace_internal.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <wchar.h>

/* ----------------------------------------------------------- the NVTX ABI */

/* Our declarations, binary-compatible with nvtxTypes.h and nvToolsExt.h. */
typedef void (*osk__nvtx_fn_t)(void);       /* NvtxFunctionPointer */
typedef osk__nvtx_fn_t **osk__nvtx_table_t; /* NvtxFunctionTable: array of slot addresses */
typedef const void *(*osk__nvtx_get_export_table_t)(uint32_t export_table_id);

typedef struct {
  size_t struct_size;
  /* module is an enum (int-sized); returns non-zero on success */
  int (*GetModuleFunctionTable)(int module, osk__nvtx_table_t *out_table, unsigned int *out_size);
} osk__nvtx_callbacks_t;

enum {
  OSK__NVTX_ETID_CALLBACKS = 1,
  OSK__NVTX_CB_MODULE_CORE = 1,
  OSK__NVTX_CBID_CORE_RangePushEx = 8,
  OSK__NVTX_CBID_CORE_RangePushA = 9,
  OSK__NVTX_CBID_CORE_RangePushW = 10,
  OSK__NVTX_CBID_CORE_RangePop = 11,
  OSK__NVTX_MESSAGE_TYPE_ASCII = 1,
  OSK__NVTX_MESSAGE_TYPE_UNICODE = 2,
};

/* nvtxEventAttributes_v2. `size` tells how much of it the caller filled. */
typedef struct {
  uint16_t version;
  uint16_t size;
  uint32_t category;
  int32_t colorType;
  uint32_t color;
  int32_t payloadType;
  int32_t reserved0;
  union {
    uint64_t u64;
    int64_t i64;
    double d;
  } payload;
  int32_t messageType;
  union {
    const char *ascii;
    const wchar_t *unicode;
    const void *registered;
  } message;
} osk__nvtx_attr_t;

#if defined(__x86_64__) || defined(__aarch64__)
_Static_assert(offsetof(osk__nvtx_attr_t, messageType) == 32, "nvtxEventAttributes_v2 layout");
_Static_assert(offsetof(osk__nvtx_attr_t, message) == 40, "nvtxEventAttributes_v2 layout");
_Static_assert(sizeof(osk__nvtx_attr_t) == 48, "nvtxEventAttributes_v2 layout");
#endif

/* ------------------------------------------------------------------ names */

#define OSK__NVTX_CACHE 256u
#define OSK__NVTX_NAME_MAX 1024u /* longer prefixes are cut (and still interned) */

typedef struct {
  uint64_t hash;
  uint32_t len;
  osk_trace_name_t *name;
} osk__nvtx_slot_t;

/* Per thread, so the hot path takes no lock. 256 slots * 24 bytes. */
static _Thread_local osk__nvtx_slot_t t_cache[OSK__NVTX_CACHE];

static osk_trace_name_t *name_slow(const char *s, uint32_t len, osk__nvtx_slot_t *slot, uint64_t h) {
  char buf[OSK__NVTX_NAME_MAX + 1];
  if (len > OSK__NVTX_NAME_MAX) len = OSK__NVTX_NAME_MAX;
  memcpy(buf, s, len);
  buf[len] = '\0';
  osk_trace_name_t *n = osk_trace_name(buf);
  if (n) {
    slot->hash = h;
    slot->len = len;
    slot->name = n;
  }
  return n;
}

/* The interned name of the prefix of `s` up to the first ','. */
static inline osk_trace_name_t *prefix_name(const char *s) {
  uint64_t h = 1469598103934665603ull; /* FNV-1a over the prefix */
  uint32_t len = 0;
  for (; s[len] && s[len] != ','; len++) {
    h ^= (unsigned char)s[len];
    h *= 1099511628211ull;
  }
  osk__nvtx_slot_t *slot = &t_cache[(h ^ (h >> 29)) & (OSK__NVTX_CACHE - 1)];
  if (OSK__LIKELY(slot->name && slot->hash == h && slot->len == len &&
                  memcmp(slot->name->str, s, len) == 0))
    return slot->name;
  return name_slow(s, len, slot, h);
}

/* Wide names (nvtxRangePushW, or PushEx with a Unicode message) are rare:
 * keep ASCII, replace the rest, then treat them like narrow ones. */
static osk_trace_name_t *wide_name(const wchar_t *w) {
  char buf[OSK__NVTX_NAME_MAX + 1];
  size_t n = 0;
  for (; w[n] && n < OSK__NVTX_NAME_MAX; n++) buf[n] = (w[n] > 0 && w[n] < 0x80) ? (char)w[n] : '?';
  buf[n] = '\0';
  return prefix_name(buf);
}

/* -------------------------------------------------------- the callbacks */

static int nvtx_push_a(const char *message) {
  osk_trace_begin(message ? prefix_name(message) : NULL, 0);
  return 0;
}

static int nvtx_push_w(const wchar_t *message) {
  osk_trace_begin(message ? wide_name(message) : NULL, 0);
  return 0;
}

static int nvtx_push_ex(const osk__nvtx_attr_t *attr) {
  const osk_trace_name_t *n = NULL;
  /* Read the message only if the caller's struct is large enough to hold it. */
  if (attr && attr->size >= offsetof(osk__nvtx_attr_t, message) + sizeof attr->message) {
    if (attr->messageType == OSK__NVTX_MESSAGE_TYPE_ASCII && attr->message.ascii)
      n = prefix_name(attr->message.ascii);
    else if (attr->messageType == OSK__NVTX_MESSAGE_TYPE_UNICODE && attr->message.unicode)
      n = wide_name(attr->message.unicode);
    /* Registered strings need the domain API, which we do not take over. */
  }
  osk_trace_begin(n, 0);
  return 0;
}

static int nvtx_pop(void) {
  osk_trace_end();
  return 0;
}

/* ---------------------------------------------------------- injection */

static _Atomic int g_inits;     /* successful InitializeInjectionNvtx2 calls */
static _Atomic int g_init_errs; /* calls we could not serve */

static void autostart(void);

OSK_TRACE_API int InitializeInjectionNvtx2(osk__nvtx_get_export_table_t get_export_table);

int InitializeInjectionNvtx2(osk__nvtx_get_export_table_t get_export_table) {
  const osk__nvtx_callbacks_t *cb =
      get_export_table ? get_export_table(OSK__NVTX_ETID_CALLBACKS) : NULL;
  osk__nvtx_table_t table = NULL;
  unsigned int size = 0;
  if (!cb || cb->struct_size < sizeof *cb || !cb->GetModuleFunctionTable ||
      !cb->GetModuleFunctionTable(OSK__NVTX_CB_MODULE_CORE, &table, &size) || !table ||
      size <= OSK__NVTX_CBID_CORE_RangePop) {
    /* 0 makes NVTX unload us and turn this library's NVTX calls into
     * no-ops, which is the right outcome for a table we do not understand. */
    atomic_fetch_add(&g_init_errs, 1);
    return 0;
  }
  /* Casting to void (*)(void) is how NVTX passes them; it casts back to
   * the slot's own type before calling. */
  struct {
    unsigned id;
    osk__nvtx_fn_t fn;
  } const binds[] = {
      {OSK__NVTX_CBID_CORE_RangePushA, (osk__nvtx_fn_t)nvtx_push_a},
      {OSK__NVTX_CBID_CORE_RangePushEx, (osk__nvtx_fn_t)nvtx_push_ex},
      {OSK__NVTX_CBID_CORE_RangePushW, (osk__nvtx_fn_t)nvtx_push_w},
      {OSK__NVTX_CBID_CORE_RangePop, (osk__nvtx_fn_t)nvtx_pop},
  };
  for (size_t i = 0; i < sizeof binds / sizeof binds[0]; i++)
    if (table[binds[i].id]) *table[binds[i].id] = binds[i].fn;
  atomic_fetch_add(&g_inits, 1);
  autostart();
  return 1;
}

/* ------------------------------------------------------------ sessions */

/* The same life cycle as the ITT collector (itt_collector.c): a session
 * started from Python (osk_nvtx_start/stop), or the `opskew record` session
 * that starts at injection or from the bootstrap and is written at exit. */

static osk__launch_t g_launch;
static _Atomic int g_finished;
static osk_trace_calib_t g_calib;
static pthread_once_t g_calib_once = PTHREAD_ONCE_INIT;

static void calib_pair(void *ctx) {
  (void)ctx;
  nvtx_push_a("opskew::calibration, seq = 1, op_id = 2");
  nvtx_pop();
}

static void calib_once(void) {
  if (osk_trace_calibrate(calib_pair, NULL, &g_calib) != 0) memset(&g_calib, 0, sizeof g_calib);
}

static void at_exit(void);

static void ensure_calib(void) { pthread_once(&g_calib_once, calib_once); }

static int record_begin(void) { return osk__launch_record(&g_launch, ensure_calib, &g_calib, at_exit); }

static void autostart(void) { osk__launch_autostart(&g_launch, record_begin); }

/* Number of NVTX instances (libraries) that injected us; -1 if one offered
 * a table we could not use and none succeeded. */
OSK_TRACE_API int osk_nvtx_bound(void);
int osk_nvtx_bound(void) {
  int n = atomic_load(&g_inits);
  return n ? n : (atomic_load(&g_init_errs) ? -1 : 0);
}

OSK_TRACE_API int osk_nvtx_start(void);
int osk_nvtx_start(void) {
  pthread_once(&g_calib_once, calib_once);
  return osk_trace_start(&g_calib);
}

OSK_TRACE_API int osk_nvtx_record_begin(void);
int osk_nvtx_record_begin(void) { return record_begin(); }

OSK_TRACE_API osk_trace_snapshot_t *osk_nvtx_stop(int *err);
osk_trace_snapshot_t *osk_nvtx_stop(int *err) { return osk_trace_stop("nvtx", err); }

OSK_TRACE_API const osk_trace_calib_t *osk_nvtx_calibration(void);
const osk_trace_calib_t *osk_nvtx_calibration(void) { return &g_calib; }

OSK_TRACE_API int osk_nvtx_finish(void);
int osk_nvtx_finish(void) {
  int expected = 0;
  if (!g_launch.owner_pid || g_launch.owner_pid != (int)getpid()) return 0;
  if (!atomic_compare_exchange_strong(&g_finished, &expected, 1)) return 0;
  int err = 0;
  osk_trace_snapshot_t *s = osk_trace_stop("nvtx", &err);
  if (!s) {
    fprintf(stderr, "opskew: no trace written: %s\n", osk_strerror(err));
    return err ? err : OSK_EINVAL;
  }
  int rc = osk_trace_write_outputs_env(s);
  osk_trace_snapshot_free(s);
  return rc;
}

static void at_exit(void) { (void)osk_nvtx_finish(); }
