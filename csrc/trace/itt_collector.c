/* itt_collector.c: libopskew_itt.so, an ITT collector that PyTorch's
 * statically linked ittnotify loads, feeding the opskew tracer runtime.
 *
 * Route (intel/ittapi src/ittnotify/ittnotify_static.c): the first ITT call
 * that is not domain or string-handle creation runs __itt_init_ittlib, which
 * dlopen()s the library named by INTEL_LIBITTNOTIFY64. If that library
 * exports __itt_api_init ("version 2"), the static part calls it with its
 * __itt_global, holding the global's (recursive) mutex; the collector then
 * binds its own functions into the global's api list. We bind
 * domain_create, string_handle_create, task_begin and task_end (all that
 * torch/csrc/itt_wrapper.cpp uses) and set every other entry to its
 * null_func, as the static part itself does when no collector loads.
 *
 * PyTorch creates its domain when libtorch loads, and ittapi creates it only
 * if INTEL_LIBITTNOTIFY64 was set then; so that domain, and the first
 * string handle, were allocated by the static part before we loaded. We
 * tell our handles apart by a self-pointer in a reserved field, and look
 * foreign ones up by their string.
 *
 * Sessions, `opskew record`'s self-started one and the fork check are the
 * shared collector life cycle (collector.c, osk_collector_*): Python drives
 * it through ctypes, and dlopen() of the same path returns the same handle.
 */
#include "opskew_collector.h"
#include "trace_internal.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ the ITT ABI */

/* Our declarations of ittapi's structures (ittnotify.h and
 * ittnotify_config.h, #pragma pack(push, 8), non-Unicode Linux build).
 * Only the prefix of the global that we use is declared: later fields
 * differ between ittapi versions, and we only ever access it by pointer. */
typedef struct osk__itt_domain {
  volatile int flags; /* non-zero: enabled */
  const char *nameA;
  void *nameW;
  int extra1;
  void *extra2;
  struct osk__itt_domain *next;
} osk__itt_domain_t;

typedef struct osk__itt_string_handle {
  const char *strA;
  void *strW;
  int extra1;
  void *extra2; /* ours: points to the handle itself */
  struct osk__itt_string_handle *next;
} osk__itt_string_handle_t;

typedef struct {
  unsigned long long d1, d2, d3;
} osk__itt_id_t;

typedef int osk__itt_group_id_t; /* an enum in ittapi: int-sized */

typedef struct {
  const char *name; /* "__itt_" + name in the collector; NULL ends the list */
  void **func_ptr;
  void *init_func;
  void *null_func;
  osk__itt_group_id_t group;
} osk__itt_api_info_t;

typedef struct osk__itt_global {
  unsigned char magic[8];
  unsigned long version_major;
  unsigned long version_minor;
  unsigned long version_build;
  volatile long api_initialized;
  volatile long mutex_initialized;
  volatile long atomic_counter;
  pthread_mutex_t mutex;
  void *lib;
  void *error_handler;
  const char **dll_path_ptr;
  osk__itt_api_info_t *api_list_ptr;
  struct osk__itt_global *next;
  void *thread_list;
  osk__itt_domain_t *domain_list;
  osk__itt_string_handle_t *string_list;
} osk__itt_global_t;

#if defined(__x86_64__) && defined(__GLIBC__)
/* Offsets read from libtorch_cpu.so's __itt__ittapi_global (torch 2.13,
 * ittapi build 20250807) and from ittnotify_config.h. */
_Static_assert(offsetof(osk__itt_global_t, mutex) == 56, "ITT global layout");
_Static_assert(offsetof(osk__itt_global_t, api_list_ptr) == 120, "ITT global layout");
_Static_assert(offsetof(osk__itt_global_t, domain_list) == 144, "ITT global layout");
_Static_assert(sizeof(osk__itt_api_info_t) == 40, "ITT api_info layout");
_Static_assert(sizeof(osk__itt_string_handle_t) == 40, "ITT string handle layout");
#endif

static const unsigned char k_itt_magic[8] = {0xED, 0xAB, 0xAB, 0xEC, 0x0D, 0xEE, 0xDA, 0x30};

/* ---------------------------------------------------------------- handles */

typedef struct {
  osk__itt_string_handle_t itt; /* first: the pointer ITT passes around */
  osk_trace_name_t *name;
} osk__itt_handle_t;

static pthread_mutex_t g_itt_lock = PTHREAD_MUTEX_INITIALIZER;

/* g_itt_lock, registered for fork (trace_internal.h) before each use. */
static void itt_lock(void) {
  osk__fork_lock(OSK__FORK_ITT, &g_itt_lock);
  pthread_mutex_lock(&g_itt_lock);
}
static osk__itt_handle_t **g_handles; /* every handle we made (kept reachable) */
static size_t g_handles_n, g_handles_cap;
static osk__itt_domain_t *g_domains;  /* domains we made, under g_itt_lock */

/* Domain pointer -> event category, append-only, read without a lock. */
#define OSK__DOMAIN_CACHE 16
static _Atomic(const void *) g_dom_ptr[OSK__DOMAIN_CACHE];
static uint16_t g_dom_cat[OSK__DOMAIN_CACHE];
static _Atomic uint32_t g_dom_n;

static osk__itt_handle_t *handle_make(osk_trace_name_t *n) {
  itt_lock();
  osk__itt_handle_t *h = osk_trace_name_slot_get(n);
  if (h) goto out;
  if (g_handles_n == g_handles_cap) {
    size_t cap = g_handles_cap ? g_handles_cap * 2 : 256;
    osk__itt_handle_t **p = realloc(g_handles, cap * sizeof *p);
    if (!p) goto out;
    g_handles = p;
    g_handles_cap = cap;
  }
  h = calloc(1, sizeof *h);
  if (!h) goto out;
  h->itt.strA = osk_trace_name_str(n);
  h->itt.extra2 = h;
  h->name = n;
  g_handles[g_handles_n++] = h;
  osk_trace_name_slot_set(n, h);
out:
  pthread_mutex_unlock(&g_itt_lock);
  return h;
}

static osk__itt_string_handle_t *itt_string_handle_create(const char *name) {
  osk_trace_name_t *n = osk_trace_name(name);
  if (OSK__UNLIKELY(!n)) return NULL;
  osk__itt_handle_t *h = osk_trace_name_slot_get(n);
  if (OSK__UNLIKELY(!h)) h = handle_make(n);
  return h ? &h->itt : NULL;
}

static osk__itt_domain_t *itt_domain_create(const char *name) {
  if (!name) return NULL;
  itt_lock();
  osk__itt_domain_t *d = g_domains;
  for (; d; d = d->next)
    if (strcmp(d->nameA, name) == 0) break;
  if (!d) {
    d = calloc(1, sizeof *d);
    char *copy = d ? strdup(name) : NULL;
    if (d && copy) {
      d->flags = 1;
      d->nameA = copy;
      d->next = g_domains;
      g_domains = d;
    } else {
      free(d);
      d = NULL;
    }
  }
  pthread_mutex_unlock(&g_itt_lock);
  return d;
}

static uint16_t domain_category_slow(const osk__itt_domain_t *d) {
  /* PyTorch's operators are Kineto's "cpu_op"; other domains keep their
   * name as the category. */
  const char *name = d && d->nameA ? d->nameA : "PyTorch";
  uint16_t cat = strcmp(name, "PyTorch") == 0 ? osk_trace_category("cpu_op") : osk_trace_category(name);
  itt_lock();
  uint32_t n = atomic_load_explicit(&g_dom_n, memory_order_relaxed);
  if (n < OSK__DOMAIN_CACHE) {
    g_dom_cat[n] = cat;
    atomic_store_explicit(&g_dom_ptr[n], (const void *)d, memory_order_relaxed);
    atomic_store_explicit(&g_dom_n, n + 1, memory_order_release); /* G, matches H */
  }
  pthread_mutex_unlock(&g_itt_lock);
  return cat;
}

static inline uint16_t domain_category(const osk__itt_domain_t *d) {
  uint32_t n = atomic_load_explicit(&g_dom_n, memory_order_acquire); /* H */
  for (uint32_t i = 0; i < n; i++)
    if (atomic_load_explicit(&g_dom_ptr[i], memory_order_relaxed) == (const void *)d) return g_dom_cat[i];
  return domain_category_slow(d);
}

static void itt_task_begin(const osk__itt_domain_t *domain, osk__itt_id_t id, osk__itt_id_t parent,
                           osk__itt_string_handle_t *handle) {
  (void)id;
  (void)parent;
  const osk_trace_name_t *n = NULL;
  if (OSK__LIKELY(handle && handle->extra2 == (void *)handle)) {
    n = ((osk__itt_handle_t *)handle)->name;
  } else if (handle && handle->strA) {
    /* Allocated by the static part before we were loaded. */
    n = osk_trace_name(handle->strA);
  }
  osk_trace_begin(n, domain_category(domain));
}

static void itt_task_end(const osk__itt_domain_t *domain) {
  (void)domain;
  osk_trace_end();
}

/* ------------------------------------------------------------- binding */

static void *fn_ptr(void (*f)(void)) {
  void *p;
  memcpy(&p, &f, sizeof p); /* function to object pointer, without UB warnings */
  return p;
}

/* One pair through our ITT entry points, for the calibration. */
static void calib_pair(void *ctx) {
  (void)ctx;
  static const char name[] = "opskew::calibration";
  osk__itt_string_handle_t *h = itt_string_handle_create(name);
  itt_task_begin(NULL, (osk__itt_id_t){0, 0, 0}, (osk__itt_id_t){0, 0, 0}, h);
  itt_task_end(NULL);
}

/* The life cycle is collector.c's: sessions, `opskew record`, fork check. */
const osk__collector_desc_t osk__collector = {.instrument = "itt", .pair = calib_pair};

OSK_TRACE_API void __itt_api_init(osk__itt_global_t *g, osk__itt_group_id_t init_groups);

/* Called by each static ittnotify copy in the process, under its mutex. */
void __itt_api_init(osk__itt_global_t *g, osk__itt_group_id_t init_groups) {
  (void)init_groups;
  if (!g || memcmp(g->magic, k_itt_magic, sizeof k_itt_magic) != 0 || g->version_major != 3 ||
      !g->api_list_ptr) {
    /* Unknown layout: touch nothing. The static part then keeps its init
     * stubs, which do nothing once initialized. */
    osk__collector_bound(0);
    return;
  }
  for (osk__itt_api_info_t *a = g->api_list_ptr; a->name; a++) {
    void *f = a->null_func;
    if (strcmp(a->name, "__itt_domain_create") == 0) f = fn_ptr((void (*)(void))itt_domain_create);
    else if (strcmp(a->name, "__itt_string_handle_create") == 0)
      f = fn_ptr((void (*)(void))itt_string_handle_create);
    else if (strcmp(a->name, "__itt_task_begin") == 0) f = fn_ptr((void (*)(void))itt_task_begin);
    else if (strcmp(a->name, "__itt_task_end") == 0) f = fn_ptr((void (*)(void))itt_task_end);
    if (a->func_ptr) *a->func_ptr = f;
  }
  osk__collector_bound(1);
  osk__collector_autostart();
}
