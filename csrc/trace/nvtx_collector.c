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
 * Driving it is the shared collector life cycle (collector.c,
 * osk_collector_*), the same as the ITT collector's: OPSKEW_TRACE_OUT (set
 * by `opskew record --device cuda`) writes the trace at exit; otherwise
 * Python starts and stops sessions through ctypes.
 */
#include "opskew_collector.h"
#include "trace_internal.h"

#include <string.h>
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
  uint64_t h = OSK__HASH_SEED; /* hashed while the prefix is scanned */
  uint32_t len = 0;
  for (; s[len] && s[len] != ','; len++) h = osk__hash_byte(h, (unsigned char)s[len]);
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

/* One pair through our NVTX callbacks, for the calibration. */
static void calib_pair(void *ctx) {
  (void)ctx;
  nvtx_push_a("opskew::calibration, seq = 1, op_id = 2");
  nvtx_pop();
}

/* The life cycle is collector.c's: sessions, `opskew record`, fork check. */
const osk__collector_desc_t osk__collector = {.instrument = "nvtx", .pair = calib_pair};

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
    osk__collector_bound(0);
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
  osk__collector_bound(1);
  osk__collector_autostart();
  return 1;
}
