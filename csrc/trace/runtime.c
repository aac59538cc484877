/* runtime.c: per-thread event buffers, name interning, sessions, snapshots
 * and self-calibration of the operator tracer.
 *
 * Hot path (osk_trace_begin/end, osk_trace_name): one thread-local pointer,
 * no locks, no atomic read-modify-write. The only shared writes are the
 * release store that publishes a chunk's event count and, once per 4096
 * events, a mutex section that hands a full chunk to the global list.
 *
 * Memory budget: full chunks wait in the global list until a snapshot takes
 * them. Past the session's budget, the thread that hands a chunk off appends
 * its events to the session's spill file instead (one pwrite of 96 KiB in
 * that mutex section, once per 4096 events) and keeps the chunk as its next
 * one, so memory stays at the budget plus one chunk per thread. Snapshots
 * read spilled ranges back with pread (osk__seg_events).
 */
#include "trace_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------ thread state */

typedef struct {
  uint64_t t0;
  const osk_trace_name_t *name;
  uint16_t cat;
  uint8_t rec; /* a session was active at begin */
} osk__frame_t;

typedef struct {
  const char *ptr;
  osk_trace_name_t *name;
} osk__cache_slot_t;

typedef struct osk__tstate {
  struct osk__tstate *next; /* registry, under g_lock */
  _Atomic(osk__chunk_t *) chunk; /* written by the owner under g_lock */
  _Atomic uint32_t depth;  /* open operators; read (relaxed) by collect */
  uint32_t tid;
  int guard;
  int scratch; /* calibration state: never registered, never spills */
  osk__cache_slot_t cache[OSK__NAME_CACHE];
  osk__frame_t stack[OSK__STACK_DEPTH];
} osk__tstate_t;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static osk__tstate_t *g_threads;                 /* under g_lock */
static osk__chunk_t *g_full_head, *g_full_tail; /* under g_lock */
static osk__thread_info_t *g_tinfo;              /* under g_lock */
static size_t g_tinfo_n, g_tinfo_cap;
static _Atomic uint64_t g_chunk_seq;
static _Atomic int g_active;
static _Atomic uint64_t g_lost[OSK_TRACE_LOSS_COUNT];
static _Atomic uint64_t g_unmatched;
static osk_trace_calib_t g_calib;                /* under g_lock */
/* osk_trace_set_cost: the in-window W every snapshot carries, and where it
 * came from; g_cost_w < 0: the self-calibration's. Under g_lock. */
static double g_cost_w = -1;
static char g_cost_source[OSK_TRACE_SOURCE_MAX];
#define SELF_CALIBRATED \
  "self-calibrated: the collector's entry points only, a lower bound (opskew calibrate measures the in-window W)"
static uint64_t g_start_tick;                    /* under g_lock */

/* The memory budget and the spill (under g_lock). */
static int64_t g_budget_set = OSK_TRACE_BUDGET_ENV; /* osk_trace_set_budget */
/* Written under g_lock; read without it as a hint, to allocate outside. */
static _Atomic int64_t g_budget;  /* the session's, in bytes; 0: never spill */
static _Atomic uint64_t g_mem;    /* bytes of chunks in the full list */
static osk__spill_file_t *g_spill; /* the session's file, one reference; lazily */
static int g_spill_broken;        /* creating it failed this session */
static osk__seg_t *g_spilled;     /* spilled ranges not yet in a snapshot */
static size_t g_spilled_n, g_spilled_cap;

static pthread_key_t g_key;
static pthread_once_t g_key_once = PTHREAD_ONCE_INIT;
static int g_key_ok;

static _Thread_local osk__tstate_t *t_state;

OSK__COLD static void lost_add(int cause) {
  atomic_fetch_add_explicit(&g_lost[cause], 1, memory_order_relaxed);
}

static osk__chunk_t *chunk_new(uint32_t tid, uint32_t cap) {
  osk__chunk_t *c = malloc(sizeof *c + (size_t)cap * sizeof(osk__event_t));
  if (!c) return NULL;
  c->next = NULL;
  c->seq = atomic_fetch_add_explicit(&g_chunk_seq, 1, memory_order_relaxed);
  c->tid = tid;
  c->cap = cap;
  c->consumed = 0;
  atomic_init(&c->count, 0);
  return c;
}

static size_t chunk_bytes(const osk__chunk_t *c) {
  return sizeof *c + (size_t)c->cap * sizeof(osk__event_t);
}

/* Under g_lock. */
static void full_push(osk__chunk_t *c) {
  c->next = NULL;
  if (g_full_tail) g_full_tail->next = c;
  else g_full_head = c;
  g_full_tail = c;
  atomic_store_explicit(&g_mem, atomic_load_explicit(&g_mem, memory_order_relaxed) + chunk_bytes(c),
                        memory_order_relaxed);
}

/* Past the budget, a full chunk goes to the spill file. */
static int over_budget(const osk__chunk_t *c) {
  int64_t b = atomic_load_explicit(&g_budget, memory_order_relaxed);
  return b > 0 && atomic_load_explicit(&g_mem, memory_order_relaxed) + chunk_bytes(c) > (uint64_t)b;
}

/* ------------------------------------------------------------------- spill */

void osk__spill_unref(osk__spill_file_t *f) {
  if (!f) return;
  if (atomic_fetch_sub_explicit(&f->refs, 1, memory_order_acq_rel) == 1) {
    close(f->fd);
    free(f);
  }
}

/* Creates the session's spill file: exclusively, never through a link,
 * readable by us only, and unlinked at once, so nothing is left behind
 * whatever way the process ends. Under g_lock. */
static osk__spill_file_t *spill_open(void) {
  const char *dir = getenv("TMPDIR");
  if (!dir || !*dir) dir = "/tmp";
  static _Atomic unsigned g_spill_n;
  for (int attempt = 0; attempt < 16; attempt++) {
    char path[4096];
    int n = snprintf(path, sizeof path, "%s/opskew-spill.%d.%u", dir, (int)getpid(),
                     atomic_fetch_add_explicit(&g_spill_n, 1, memory_order_relaxed));
    if (n < 0 || (size_t)n >= sizeof path) return NULL;
    int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) {
      if (errno == EEXIST) continue;
      return NULL;
    }
    /* Ours: we just created it (O_EXCL), a regular file. */
    (void)unlink(path);
    osk__spill_file_t *f = malloc(sizeof *f);
    if (!f) {
      close(fd);
      return NULL;
    }
    f->fd = fd;
    f->size = 0;
    atomic_init(&f->refs, 1);
    return f;
  }
  return NULL;
}

static int write_all(int fd, const void *buf, size_t n, uint64_t off) {
  const char *p = buf;
  while (n) {
    ssize_t w = pwrite(fd, p, n, (off_t)off);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return -1;
    p += w;
    n -= (size_t)w;
    off += (uint64_t)w;
  }
  return 0;
}

/* Appends the unconsumed events of the full chunk `c` to the spill file and
 * records the range for the next snapshot; on failure counts them lost.
 * Either way `c` may be reused. Under g_lock. */
static void spill_chunk(osk__chunk_t *c) {
  uint32_t n = atomic_load_explicit(&c->count, memory_order_relaxed);
  if (n <= c->consumed) return;
  uint32_t k = n - c->consumed;
  const osk__event_t *ev = c->ev + c->consumed;
  if (!g_spill && !g_spill_broken) {
    g_spill = spill_open();
    g_spill_broken = g_spill == NULL;
  }
  int ok = g_spill != NULL &&
           osk__grow((void **)&g_spilled, &g_spilled_cap, g_spilled_n + 1, sizeof *g_spilled) == 0;
  if (ok) ok = write_all(g_spill->fd, ev, (size_t)k * sizeof *ev, g_spill->size) == 0;
  if (!ok) {
    atomic_fetch_add_explicit(&g_lost[OSK_TRACE_LOSS_SPILL], k, memory_order_relaxed);
    return;
  }
  uint64_t min_t0 = UINT64_MAX;
  for (uint32_t i = 0; i < k; i++)
    if (ev[i].t0 < min_t0) min_t0 = ev[i].t0;
  atomic_fetch_add_explicit(&g_spill->refs, 1, memory_order_relaxed);
  g_spilled[g_spilled_n++] = (osk__seg_t){.file = g_spill, .off = g_spill->size, .seq = c->seq,
                                          .min_t0 = min_t0, .tid = c->tid, .begin = 0, .end = k};
  g_spill->size += (uint64_t)k * sizeof *ev;
}

/* Drops the session's reference to its spill file (spilled ranges, pending
 * or in snapshots, keep theirs); the next spill creates a new file. Under
 * g_lock. */
static void spill_reset(void) {
  osk__spill_unref(g_spill);
  g_spill = NULL;
  g_spill_broken = 0;
}

const osk__event_t *osk__seg_events(const osk__seg_t *g, osk__event_t *buf) {
  if (g->chunk) return g->chunk->ev + g->begin;
  size_t want = (size_t)(g->end - g->begin) * sizeof *buf;
  char *p = (char *)buf;
  uint64_t off = g->off;
  while (want) {
    ssize_t r = pread(g->file->fd, p, want, (off_t)off);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return NULL;
    p += r;
    want -= (size_t)r;
    off += (uint64_t)r;
  }
  return buf;
}

int osk_trace_budget_from_env(int64_t *bytes) {
  const char *v = getenv("OPSKEW_TRACE_BUDGET_MB");
  int64_t mb = OSK_TRACE_BUDGET_DEFAULT_MB;
  if (v && *v) {
    mb = 0;
    for (const char *p = v; *p; p++) {
      if (*p < '0' || *p > '9' || mb > ((int64_t)1 << 40)) return OSK_EINVAL;
      mb = mb * 10 + (*p - '0');
    }
    if (mb > ((int64_t)1 << 40)) return OSK_EINVAL;
  }
  if (bytes) *bytes = mb << 20;
  return 0;
}

int osk_trace_set_budget(int64_t bytes) {
  if (bytes < 0 && bytes != OSK_TRACE_BUDGET_ENV) return OSK_EINVAL;
  pthread_mutex_lock(&g_lock);
  g_budget_set = bytes;
  pthread_mutex_unlock(&g_lock);
  return 0;
}

/* Thread exit (pthread key destructor): hand the current chunk to the global
 * list so its events survive the thread, unregister, free the state. */
static void tstate_retire(void *p) {
  osk__tstate_t *ts = p;
  if (!ts) return;
  pthread_mutex_lock(&g_lock);
  for (osk__tstate_t **pp = &g_threads; *pp; pp = &(*pp)->next) {
    if (*pp == ts) {
      *pp = ts->next;
      break;
    }
  }
  osk__chunk_t *c = atomic_load_explicit(&ts->chunk, memory_order_relaxed);
  if (c) {
    if (atomic_load_explicit(&c->count, memory_order_relaxed) <= c->consumed) {
      free(c);
    } else if (over_budget(c)) {
      spill_chunk(c); /* many short-lived threads must not grow past the budget */
      free(c);
    } else {
      full_push(c);
    }
  }
  pthread_mutex_unlock(&g_lock);
  if (t_state == ts) t_state = NULL;
  free(ts);
}

static void key_init(void) { g_key_ok = pthread_key_create(&g_key, tstate_retire) == 0; }

/* The collectors' locks, by rank (trace_internal.h), and the runtime's own
 * (g_names_lock, g_cats_lock, g_lock: no thread nests these, nor takes a
 * collector's while holding one), all taken around fork(). */
static _Atomic(pthread_mutex_t *) g_fork_locks[OSK__FORK_SLOTS];
static pthread_mutex_t g_names_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t g_cats_lock = PTHREAD_MUTEX_INITIALIZER;

static void fork_lock_all(void) {
  for (int i = 0; i < OSK__FORK_SLOTS; i++) {
    pthread_mutex_t *m = atomic_load_explicit(&g_fork_locks[i], memory_order_acquire);
    if (m) pthread_mutex_lock(m);
  }
  pthread_mutex_lock(&g_names_lock);
  pthread_mutex_lock(&g_cats_lock);
  pthread_mutex_lock(&g_lock);
}

/* In the parent, and in the child, whose only thread (the forking one) is
 * the one that took them: re-initializing a locked mutex would be undefined,
 * and left ThreadSanitizer believing it still held. */
static void fork_unlock_all(void) {
  pthread_mutex_unlock(&g_lock);
  pthread_mutex_unlock(&g_cats_lock);
  pthread_mutex_unlock(&g_names_lock);
  for (int i = OSK__FORK_SLOTS - 1; i >= 0; i--) {
    pthread_mutex_t *m = atomic_load_explicit(&g_fork_locks[i], memory_order_relaxed);
    if (m) pthread_mutex_unlock(m);
  }
}

static void fork_child(void) {
  /* Only the forking thread survives: the other states would never retire,
   * and their chunks hold the parent's events. Drop what we can reach
   * safely: the child starts with its own, empty registry. */
  /* The parent keeps appending to its spill file at offsets of its own:
   * the child spills to a file of its own (what it spilled so far stays
   * readable through the inherited descriptor). */
  spill_reset();
  /* ...but a child makes no spill file at all: it never writes the parent's
   * trace (collector.c), so a fork-based worker would fill an unlinked file
   * that nothing reads for as long as it runs. Past the budget its events
   * are counted lost (OSK_TRACE_LOSS_SPILL) instead. */
  g_spill_broken = 1;
  g_threads = NULL;
  if (t_state) {
    t_state->next = NULL;
    g_threads = t_state;
  }
  fork_unlock_all();
}
static pthread_once_t g_fork_once = PTHREAD_ONCE_INIT;
static void fork_init(void) { pthread_atfork(fork_lock_all, fork_unlock_all, fork_child); }

void osk__fork_lock(int slot, pthread_mutex_t *m) {
  pthread_once(&g_fork_once, fork_init);
  if (slot >= 0 && slot < OSK__FORK_SLOTS) atomic_store_explicit(&g_fork_locks[slot], m, memory_order_release);
}

static void thread_info_add(uint32_t tid) {
  if (g_tinfo_n == g_tinfo_cap) {
    size_t cap = g_tinfo_cap ? g_tinfo_cap * 2 : 16;
    osk__thread_info_t *p = realloc(g_tinfo, cap * sizeof *p);
    if (!p) return; /* the thread keeps a numeric name only */
    g_tinfo = p;
    g_tinfo_cap = cap;
  }
  osk__thread_info_t *ti = &g_tinfo[g_tinfo_n++];
  memset(ti, 0, sizeof *ti);
  ti->tid = tid;
  char name[16] = {0};
  if (pthread_getname_np(pthread_self(), name, sizeof name) == 0) {
    memcpy(ti->name, name, sizeof name);
  }
}

OSK__COLD static osk__tstate_t *tstate_create(void) {
  pthread_once(&g_key_once, key_init);
  pthread_once(&g_fork_once, fork_init);
  osk__tstate_t *ts = calloc(1, sizeof *ts);
  if (!ts) return NULL;
  ts->tid = (uint32_t)syscall(SYS_gettid);
  atomic_init(&ts->chunk, NULL);
  atomic_init(&ts->depth, 0);
  pthread_mutex_lock(&g_lock);
  ts->next = g_threads;
  g_threads = ts;
  thread_info_add(ts->tid);
  pthread_mutex_unlock(&g_lock);
  t_state = ts;
  if (g_key_ok) pthread_setspecific(g_key, ts);
  return ts;
}

static inline osk__tstate_t *tstate_get(void) {
  osk__tstate_t *ts = t_state;
  if (OSK__LIKELY(ts != NULL)) return ts;
  return tstate_create();
}

/* The current chunk is full or absent: hand it off and take a fresh one.
 * Past the budget the full chunk goes to the spill file and is reused. */
OSK__COLD static osk__chunk_t *spill(osk__tstate_t *ts, osk__chunk_t *old) {
  if (ts->scratch) {
    /* Calibration overwrites its private chunk; nothing reaches a trace. */
    if (old) atomic_store_explicit(&old->count, 0, memory_order_relaxed);
    return old;
  }
  /* Allocate outside the lock unless the chunk will likely be spilled (the
   * hint is checked again under the lock). */
  osk__chunk_t *c = NULL;
  if (!old || !over_budget(old)) c = chunk_new(ts->tid, OSK__CHUNK_EVENTS);
  pthread_mutex_lock(&g_lock);
  if (old) {
    if (over_budget(old)) {
      spill_chunk(old);
      free(c);
      c = old; /* reused: a fresh seq keeps the thread's order */
      c->seq = atomic_fetch_add_explicit(&g_chunk_seq, 1, memory_order_relaxed);
      c->consumed = 0;
      atomic_store_explicit(&c->count, 0, memory_order_relaxed);
    } else {
      full_push(old);
      if (!c) c = chunk_new(ts->tid, OSK__CHUNK_EVENTS);
    }
  }
  /* Under g_lock, so collect() sees either the old chunk (not yet in the
   * full list) or the new one, never both and never neither. */
  atomic_store_explicit(&ts->chunk, c, memory_order_release);
  pthread_mutex_unlock(&g_lock);
  return c;
}

static inline void append(osk__tstate_t *ts, uint64_t t0, uint64_t t1, uint32_t name,
                          uint32_t depth, uint16_t cat) {
  osk__chunk_t *c = atomic_load_explicit(&ts->chunk, memory_order_relaxed);
  uint32_t n = c ? atomic_load_explicit(&c->count, memory_order_relaxed) : 0;
  if (OSK__UNLIKELY(!c || n == c->cap)) {
    c = spill(ts, c);
    if (!c) {
      lost_add(OSK_TRACE_LOSS_NOMEM_CHUNK);
      return;
    }
    n = atomic_load_explicit(&c->count, memory_order_relaxed);
  }
  osk__event_t *e = &c->ev[n];
  e->t0 = t0;
  e->t1 = t1;
  e->name = name;
  e->depth = (uint16_t)depth;
  e->cat = cat;
  /* A: publishes the event; matches the acquire B in collect_locked(). */
  atomic_store_explicit(&c->count, n + 1, memory_order_release);
}

/* Pushes a frame for `ts` (present, not guarded). `s`, when not NULL, is the
 * name still to be interned, which only a recorded frame needs. */
static osk_trace_name_t *name_cached(osk__tstate_t *ts, const char *s);

static inline void begin_on(osk__tstate_t *ts, const osk_trace_name_t *name, const char *s,
                            uint16_t category) {
  uint32_t d = atomic_load_explicit(&ts->depth, memory_order_relaxed);
  atomic_store_explicit(&ts->depth, d + 1, memory_order_relaxed);
  int rec = atomic_load_explicit(&g_active, memory_order_relaxed) | ts->scratch;
  if (OSK__UNLIKELY(d >= OSK__STACK_DEPTH)) {
    if (rec) lost_add(OSK_TRACE_LOSS_DEPTH);
    return;
  }
  osk__frame_t *f = &ts->stack[d];
  if (s && rec) name = name_cached(ts, s);
  f->name = name;
  f->cat = category;
  f->rec = (uint8_t)rec;
  /* The timestamp is the last thing begin does, so that little of the
   * tracer's own work falls inside the recorded interval (delta). */
  f->t0 = osk__ticks();
}

/* The calling thread's state for a begin; NULL when it has none (no memory:
 * counted as lost if a session records) or is guarded. */
static inline osk__tstate_t *begin_state(void) {
  osk__tstate_t *ts = tstate_get();
  if (OSK__UNLIKELY(!ts)) {
    if (atomic_load_explicit(&g_active, memory_order_relaxed)) lost_add(OSK_TRACE_LOSS_NOMEM_THREAD);
    return NULL;
  }
  return OSK__UNLIKELY(ts->guard) ? NULL : ts;
}

void osk_trace_begin(const osk_trace_name_t *name, uint16_t category) {
  osk__tstate_t *ts = begin_state();
  if (ts) begin_on(ts, name, NULL, category);
}

/* osk_trace_begin(osk_trace_name(s), category) with one thread-state lookup,
 * and the name interned only when the frame is recorded: the native route's
 * begin for every operator. */
void osk__trace_begin_str(const char *s, uint16_t category) {
  osk__tstate_t *ts = begin_state();
  if (ts) begin_on(ts, NULL, s, category);
}

void osk_trace_end(void) {
  /* ...and the first thing end does. */
  uint64_t t1 = osk__ticks();
  osk__tstate_t *ts = t_state;
  if (OSK__UNLIKELY(!ts)) {
    atomic_fetch_add_explicit(&g_unmatched, 1, memory_order_relaxed);
    return;
  }
  if (OSK__UNLIKELY(ts->guard)) return;
  uint32_t d = atomic_load_explicit(&ts->depth, memory_order_relaxed);
  if (OSK__UNLIKELY(d == 0)) {
    atomic_fetch_add_explicit(&g_unmatched, 1, memory_order_relaxed);
    return;
  }
  d--;
  atomic_store_explicit(&ts->depth, d, memory_order_relaxed);
  if (OSK__UNLIKELY(d >= OSK__STACK_DEPTH)) return; /* counted at begin */
  const osk__frame_t *f = &ts->stack[d];
  if (!f->rec) return;
  uint32_t id = 0;
  if (OSK__LIKELY(f->name != NULL)) id = f->name->id;
  else lost_add(OSK_TRACE_LOSS_NAME);
  append(ts, f->t0, t1, id, d, f->cat);
}

int osk_trace_guard_enter(void) {
  osk__tstate_t *ts = tstate_get();
  if (!ts) return 0;
  int prev = ts->guard;
  ts->guard = 1;
  return prev;
}

void osk_trace_guard_leave(int previous) {
  osk__tstate_t *ts = t_state;
  if (ts) ts->guard = previous;
}

/* ------------------------------------------------------------------- names */

/* Open-addressing table keyed by content hash. Readers probe it without a
 * lock: slots go from NULL to an entry exactly once (release store C,
 * matches the acquire loads D). Growing publishes a new table (E, matches
 * F); the old one stays allocated, reachable from g_names_retired, because
 * a reader may still be probing it. Names are few (hundreds), so this costs
 * at most the size of the final table again. */
typedef struct osk__name_table {
  struct osk__name_table *retired_next;
  size_t cap;
  _Atomic(osk_trace_name_t *) slot[];
} osk__name_table_t;

static _Atomic(osk__name_table_t *) g_names_tab;
static osk__name_table_t *g_names_retired;
static osk_trace_name_t **g_names_by_id; /* under g_names_lock; [0] unused */
static uint32_t g_names_n, g_names_cap;

static char *g_cats[OSK__MAX_CATEGORIES];
static _Atomic uint32_t g_cats_n;

static uint64_t name_hash(const char *s, uint32_t *len) {
  /* One pass: the length is found while hashing. */
  uint64_t h = OSK__HASH_SEED;
  const unsigned char *p = (const unsigned char *)s;
  uint32_t n = 0;
  for (; p[n]; n++) h = osk__hash_byte(h, p[n]);
  *len = n;
  return h;
}

static osk__name_table_t *table_new(size_t cap) {
  osk__name_table_t *t = calloc(1, sizeof *t + cap * sizeof(t->slot[0]));
  if (!t) return NULL;
  t->cap = cap;
  for (size_t i = 0; i < cap; i++) atomic_init(&t->slot[i], NULL);
  return t;
}

static osk_trace_name_t *table_find(osk__name_table_t *t, const char *s, uint64_t h, uint32_t len) {
  if (!t) return NULL;
  size_t mask = t->cap - 1;
  for (size_t i = (size_t)h & mask;; i = (i + 1) & mask) {
    /* D: matches C. */
    osk_trace_name_t *e = atomic_load_explicit(&t->slot[i], memory_order_acquire);
    if (!e) return NULL;
    if (e->hash == h && e->len == len && memcmp(e->str, s, len) == 0) return e;
  }
}

static void table_put(osk__name_table_t *t, osk_trace_name_t *e) {
  size_t mask = t->cap - 1;
  size_t i = (size_t)e->hash & mask;
  while (atomic_load_explicit(&t->slot[i], memory_order_relaxed)) i = (i + 1) & mask;
  /* C: the entry is fully written before it becomes visible. */
  atomic_store_explicit(&t->slot[i], e, memory_order_release);
}

OSK__COLD static osk_trace_name_t *name_intern(const char *s) {
  uint32_t len;
  uint64_t h = name_hash(s, &len);
  /* F: matches E. */
  osk_trace_name_t *e = table_find(atomic_load_explicit(&g_names_tab, memory_order_acquire), s, h, len);
  if (e) return e;
  pthread_mutex_lock(&g_names_lock);
  osk__name_table_t *t = atomic_load_explicit(&g_names_tab, memory_order_relaxed);
  e = table_find(t, s, h, len);
  if (e) goto out;
  if (!t || (size_t)(g_names_n + 1) * 2 > t->cap) {
    osk__name_table_t *nt = table_new(t ? t->cap * 2 : 256);
    if (!nt) goto out;
    for (uint32_t i = 1; i <= g_names_n; i++) table_put(nt, g_names_by_id[i]);
    if (t) {
      t->retired_next = g_names_retired;
      g_names_retired = t;
    }
    /* E: readers that load the new table see every entry put above. */
    atomic_store_explicit(&g_names_tab, nt, memory_order_release);
    t = nt;
  }
  if (g_names_n + 1 >= g_names_cap) {
    uint32_t cap = g_names_cap ? g_names_cap * 2 : 256;
    osk_trace_name_t **p = realloc(g_names_by_id, (size_t)cap * sizeof *p);
    if (!p) goto out;
    g_names_by_id = p;
    g_names_cap = cap;
  }
  e = malloc(sizeof *e + (size_t)len + 1);
  if (!e) goto out;
  atomic_init(&e->slot, NULL);
  e->hash = h;
  e->len = len;
  memcpy(e->str, s, (size_t)len + 1);
  e->id = ++g_names_n;
  g_names_by_id[e->id] = e;
  table_put(t, e);
out:
  pthread_mutex_unlock(&g_names_lock);
  return e;
}

/* The thread's name cache: keyed by pointer, verified by content. PyTorch
 * passes the same schema string for every call of an operator, but names of
 * user scopes and autograd nodes live in std::strings whose buffers get
 * reused. strcmp stops at the first difference (never past the end of a
 * shorter `s`) and compares a word or more at a time. */
static osk_trace_name_t *name_cached(osk__tstate_t *ts, const char *s) {
  uintptr_t p = (uintptr_t)s;
  osk__cache_slot_t *slot = &ts->cache[((p >> 4) ^ (p >> 12)) & (OSK__NAME_CACHE - 1)];
  if (OSK__LIKELY(slot->ptr == s && strcmp(slot->name->str, s) == 0)) return slot->name;
  osk_trace_name_t *e = name_intern(s);
  if (e) {
    slot->ptr = s;
    slot->name = e;
  }
  return e;
}

osk_trace_name_t *osk_trace_name(const char *s) {
  if (!s) return NULL;
  osk__tstate_t *ts = tstate_get();
  if (OSK__UNLIKELY(!ts)) return name_intern(s);
  return name_cached(ts, s);
}

uint32_t osk_trace_name_id(const osk_trace_name_t *name) { return name ? name->id : 0; }
const char *osk_trace_name_str(const osk_trace_name_t *name) { return name ? name->str : "<unnamed>"; }

void *osk_trace_name_slot_get(const osk_trace_name_t *name) {
  return atomic_load_explicit(&((osk_trace_name_t *)name)->slot, memory_order_acquire);
}

void osk_trace_name_slot_set(osk_trace_name_t *name, void *value) {
  atomic_store_explicit(&name->slot, value, memory_order_release);
}

uint16_t osk_trace_category(const char *s) {
  if (!s) return 0;
  uint32_t n = atomic_load_explicit(&g_cats_n, memory_order_acquire);
  for (uint32_t i = 0; i < n; i++)
    if (strcmp(g_cats[i], s) == 0) return (uint16_t)i;
  pthread_mutex_lock(&g_cats_lock);
  uint16_t id = 0;
  n = atomic_load_explicit(&g_cats_n, memory_order_relaxed);
  if (n == 0) { /* id 0 is always cpu_op, Kineto's category for operators */
    g_cats[0] = strdup("cpu_op");
    if (g_cats[0]) atomic_store_explicit(&g_cats_n, n = 1, memory_order_release);
  }
  for (uint32_t i = 0; i < n; i++) {
    if (strcmp(g_cats[i], s) == 0) {
      id = (uint16_t)i;
      goto out;
    }
  }
  if (n < OSK__MAX_CATEGORIES) {
    g_cats[n] = strdup(s);
    if (g_cats[n]) {
      id = (uint16_t)n;
      atomic_store_explicit(&g_cats_n, n + 1, memory_order_release);
    }
  }
out:
  pthread_mutex_unlock(&g_cats_lock);
  return id;
}

/* ------------------------------------------------------------------ losses */

static const char *const k_loss_key[] = {
#define OSK__LOSS_KEY(id, key, msg) key,
    OSK_TRACE_LOSS_MAP(OSK__LOSS_KEY)
#undef OSK__LOSS_KEY
};
static const char *const k_loss_msg[] = {
#define OSK__LOSS_MSG(id, key, msg) msg,
    OSK_TRACE_LOSS_MAP(OSK__LOSS_MSG)
#undef OSK__LOSS_MSG
};

int osk_trace_loss_count(void) { return OSK_TRACE_LOSS_COUNT; }
const char *osk_trace_loss_key(int cause) {
  return (cause >= 0 && cause < OSK_TRACE_LOSS_COUNT) ? k_loss_key[cause] : "unknown";
}
const char *osk_trace_loss_message(int cause) {
  return (cause >= 0 && cause < OSK_TRACE_LOSS_COUNT) ? k_loss_msg[cause] : "unknown cause";
}

/* --------------------------------------------------------------- snapshots */

static int seg_cmp(const void *pa, const void *pb) {
  const osk__seg_t *a = pa, *b = pb;
  if (a->tid != b->tid) return a->tid < b->tid ? -1 : 1;
  return (a->seq > b->seq) - (a->seq < b->seq);
}

/* A range of a chunk in memory (min_t0 is filled in after g_lock). */
static osk__seg_t seg_mem(osk__chunk_t *c, uint32_t begin, uint32_t end) {
  return (osk__seg_t){.chunk = c, .seq = c->seq, .min_t0 = UINT64_MAX, .tid = c->tid, .begin = begin, .end = end};
}

void osk_trace_snapshot_free(osk_trace_snapshot_t *s) {
  if (!s) return;
  for (size_t i = 0; i < s->nsegs; i++) osk__spill_unref(s->segs[i].file);
  for (size_t i = 0; i < s->nowned; i++) free(s->owned[i]);
  free(s->owned);
  free(s->segs);
  free(s->names);
  free(s->cats);
  free(s->threads);
  free(s);
}

/* Takes every published, not yet consumed event. Under g_lock no thread can
 * hand off a chunk, so each chunk is either in the full list or some
 * thread's current chunk, and each event is taken exactly once. */
static osk_trace_snapshot_t *collect(const char *instrument, int *err) {
  int dummy;
  if (!err) err = &dummy;
  *err = 0;
  osk_trace_snapshot_t *s = calloc(1, sizeof *s);
  if (!s) {
    *err = OSK_ENOMEM;
    return NULL;
  }
  s->clock = *osk_clock_get();
  snprintf(s->instrument, sizeof s->instrument, "%s", instrument ? instrument : "unknown");
  s->pid = (int)getpid();

  pthread_mutex_lock(&g_lock);
  size_t nfull = 0, nthreads = 0;
  for (osk__chunk_t *c = g_full_head; c; c = c->next) nfull++;
  for (osk__tstate_t *ts = g_threads; ts; ts = ts->next) nthreads++;
  size_t maxsegs = nfull + nthreads + g_spilled_n;
  s->segs = malloc((maxsegs ? maxsegs : 1) * sizeof *s->segs);
  s->owned = malloc((maxsegs ? maxsegs : 1) * sizeof *s->owned);
  s->threads = malloc((g_tinfo_n ? g_tinfo_n : 1) * sizeof *s->threads);
  if (!s->segs || !s->owned || !s->threads) {
    pthread_mutex_unlock(&g_lock);
    osk_trace_snapshot_free(s);
    *err = OSK_ENOMEM;
    return NULL;
  }
  /* Spilled ranges move into the snapshot with their file references. */
  for (size_t i = 0; i < g_spilled_n; i++) {
    s->segs[s->nsegs++] = g_spilled[i];
    s->spilled_events += g_spilled[i].end - g_spilled[i].begin;
  }
  g_spilled_n = 0;
  /* Full chunks move into the snapshot. */
  for (osk__chunk_t *c = g_full_head, *next; c; c = next) {
    next = c->next;
    uint32_t n = atomic_load_explicit(&c->count, memory_order_acquire);
    s->owned[s->nowned++] = c;
    if (n > c->consumed) s->segs[s->nsegs++] = seg_mem(c, c->consumed, n);
  }
  g_full_head = g_full_tail = NULL;
  atomic_store_explicit(&g_mem, 0, memory_order_relaxed);
  /* Current chunks stay with their threads: copy the new part. */
  for (osk__tstate_t *ts = g_threads; ts; ts = ts->next) {
    s->open_at_stop += atomic_load_explicit(&ts->depth, memory_order_relaxed);
    osk__chunk_t *c = atomic_load_explicit(&ts->chunk, memory_order_acquire);
    if (!c) continue;
    /* B: matches A; events below n are complete. */
    uint32_t n = atomic_load_explicit(&c->count, memory_order_acquire);
    if (n <= c->consumed) continue;
    osk__chunk_t *copy = malloc(sizeof *copy + (size_t)(n - c->consumed) * sizeof(osk__event_t));
    if (!copy) {
      /* Leave them for the next collect rather than lose them. */
      *err = OSK_ENOMEM;
      continue;
    }
    copy->next = NULL;
    copy->seq = c->seq;
    copy->tid = c->tid;
    copy->cap = n - c->consumed;
    copy->consumed = 0;
    atomic_init(&copy->count, copy->cap);
    memcpy(copy->ev, c->ev + c->consumed, (size_t)copy->cap * sizeof(osk__event_t));
    c->consumed = n;
    s->owned[s->nowned++] = copy;
    s->segs[s->nsegs++] = seg_mem(copy, 0, copy->cap);
  }
  memcpy(s->threads, g_tinfo, g_tinfo_n * sizeof *s->threads);
  s->n_threads = g_tinfo_n;
  s->calib = g_calib;
  if (g_cost_w >= 0 && s->calib.valid) {
    s->calib.w_ns = g_cost_w;
    if (s->calib.delta_ns > g_cost_w) s->calib.delta_ns = g_cost_w;
    memcpy(s->w_source, g_cost_source, sizeof s->w_source);
  } else {
    snprintf(s->w_source, sizeof s->w_source, "%s", SELF_CALIBRATED);
  }
  s->start_tick = g_start_tick;
  s->budget_bytes = atomic_load_explicit(&g_budget, memory_order_relaxed);
  pthread_mutex_unlock(&g_lock);

  for (int i = 0; i < OSK_TRACE_LOSS_COUNT; i++)
    s->lost[i] = atomic_exchange_explicit(&g_lost[i], 0, memory_order_relaxed);
  s->unmatched_ends = atomic_exchange_explicit(&g_unmatched, 0, memory_order_relaxed);

  /* Names: copy the id table (entries are immutable and never freed). */
  pthread_mutex_lock(&g_names_lock);
  s->n_names = g_names_n + 1;
  s->names = calloc(s->n_names, sizeof *s->names);
  if (s->names) memcpy(s->names + 1, g_names_by_id + 1, (size_t)g_names_n * sizeof *s->names);
  pthread_mutex_unlock(&g_names_lock);
  uint32_t ncats = atomic_load_explicit(&g_cats_n, memory_order_acquire);
  s->n_cats = ncats ? ncats : 1;
  s->cats = calloc(s->n_cats, sizeof *s->cats);
  if (!s->names || !s->cats) {
    osk_trace_snapshot_free(s);
    *err = OSK_ENOMEM;
    return NULL;
  }
  for (uint32_t i = 0; i < ncats; i++) s->cats[i] = g_cats[i];
  if (!ncats) s->cats[0] = "cpu_op";

  qsort(s->segs, s->nsegs, sizeof *s->segs, seg_cmp);
  for (size_t i = 0; i < s->nsegs; i++) {
    osk__seg_t *g = &s->segs[i];
    s->n_events += g->end - g->begin;
    for (uint32_t j = g->begin; g->chunk && j < g->end; j++)
      if (g->chunk->ev[j].t0 < g->min_t0) g->min_t0 = g->chunk->ev[j].t0;
  }

  struct timespec rt, mono;
  clock_gettime(CLOCK_REALTIME, &rt);
  clock_gettime(CLOCK_MONOTONIC_RAW, &mono);
  s->realtime_minus_mono_ns = ((int64_t)rt.tv_sec - (int64_t)mono.tv_sec) * 1000000000ll +
                              ((int64_t)rt.tv_nsec - (int64_t)mono.tv_nsec);
  s->stop_tick = osk_clock_ticks();
  return s;
}

int osk_trace_collect(const char *instrument, osk_trace_snapshot_t **out) {
  if (!out) return OSK_EINVAL;
  int err = 0, g = osk_trace_guard_enter();
  *out = collect(instrument, &err);
  osk_trace_guard_leave(g);
  return err;
}

int osk_trace_start(const osk_trace_calib_t *calib) {
  int expected = 0;
  (void)osk_clock_get(); /* calibrate the clock now, not inside an operator */
  pthread_mutex_lock(&g_lock);
  int64_t budget = g_budget_set;
  pthread_mutex_unlock(&g_lock);
  if (budget == OSK_TRACE_BUDGET_ENV && osk_trace_budget_from_env(&budget) != 0) {
    fprintf(stderr,
            "opskew: OPSKEW_TRACE_BUDGET_MB=%s is not a whole number of MiB "
            "(digits only; 0: never spill; unset: %d)\n",
            getenv("OPSKEW_TRACE_BUDGET_MB"), OSK_TRACE_BUDGET_DEFAULT_MB);
    return OSK_EINVAL;
  }
  int g = osk_trace_guard_enter();
  /* Drop what was recorded before this session (operators that began in an
   * earlier session and ended after its stop). */
  osk_trace_snapshot_free(collect(NULL, NULL));
  pthread_mutex_lock(&g_lock);
  if (calib) g_calib = *calib;
  else memset(&g_calib, 0, sizeof g_calib);
  g_start_tick = osk_clock_ticks();
  int ok = atomic_compare_exchange_strong(&g_active, &expected, 1);
  if (ok) {
    spill_reset(); /* a fresh spill file, created when first needed */
    atomic_store_explicit(&g_budget, budget, memory_order_relaxed);
  }
  pthread_mutex_unlock(&g_lock);
  osk_trace_guard_leave(g);
  return ok ? 0 : OSK_EINVAL;
}

int64_t osk_trace_now_ns(void) {
  const osk_clock_t *clk = osk_clock_get();
  return osk__ticks_ns(clk, osk_clock_ticks());
}

int osk_trace_set_cost(double w_ns, const char *source) {
  if (w_ns != w_ns || w_ns > 1e6) return OSK_EINVAL;
  pthread_mutex_lock(&g_lock);
  if (w_ns < 0) {
    g_cost_w = -1;
    g_cost_source[0] = 0;
  } else {
    g_cost_w = w_ns;
    snprintf(g_cost_source, sizeof g_cost_source, "%s", source && *source ? source : "set by the caller");
  }
  pthread_mutex_unlock(&g_lock);
  return 0;
}

const char *osk_trace_snapshot_w_source(const osk_trace_snapshot_t *s) {
  return s && s->w_source[0] ? s->w_source : SELF_CALIBRATED;
}

int osk_trace_active(void) { return atomic_load_explicit(&g_active, memory_order_relaxed); }

int osk_trace_stop(const char *instrument, osk_trace_snapshot_t **out) {
  if (!out) return OSK_EINVAL;
  *out = NULL;
  int expected = 1;
  if (!atomic_compare_exchange_strong(&g_active, &expected, 0)) return OSK_EINVAL;
  int rc = osk_trace_collect(instrument, out);
  /* The snapshot holds its own references to the spill file: it goes away
   * with the snapshot. */
  pthread_mutex_lock(&g_lock);
  spill_reset();
  pthread_mutex_unlock(&g_lock);
  return rc;
}

size_t osk_trace_snapshot_events(const osk_trace_snapshot_t *s) { return s ? s->n_events : 0; }
uint64_t osk_trace_snapshot_lost(const osk_trace_snapshot_t *s, int cause) {
  return (s && cause >= 0 && cause < OSK_TRACE_LOSS_COUNT) ? s->lost[cause] : 0;
}
uint64_t osk_trace_snapshot_lost_total(const osk_trace_snapshot_t *s) {
  uint64_t t = 0;
  for (int i = 0; s && i < OSK_TRACE_LOSS_COUNT; i++)
    if (i != OSK_TRACE_LOSS_NAME) t += s->lost[i]; /* unnamed events are kept */
  return t;
}
uint64_t osk_trace_snapshot_unmatched_ends(const osk_trace_snapshot_t *s) { return s ? s->unmatched_ends : 0; }
uint64_t osk_trace_snapshot_open_at_stop(const osk_trace_snapshot_t *s) { return s ? s->open_at_stop : 0; }
const osk_trace_calib_t *osk_trace_snapshot_calib(const osk_trace_snapshot_t *s) { return s ? &s->calib : NULL; }
uint64_t osk_trace_snapshot_spilled(const osk_trace_snapshot_t *s) { return s ? s->spilled_events : 0; }
int64_t osk_trace_snapshot_budget(const osk_trace_snapshot_t *s) { return s ? s->budget_bytes : 0; }

size_t osk_trace_snapshot_threads(const osk_trace_snapshot_t *s) {
  size_t n = 0;
  /* Segments are sorted by thread: count where the thread changes. */
  for (size_t i = 0; s && i < s->nsegs; i++) n += i == 0 || s->segs[i].tid != s->segs[i - 1].tid;
  return n;
}
uint32_t osk_trace_snapshot_names(const osk_trace_snapshot_t *s) { return s ? s->n_names : 0; }
const char *osk_trace_snapshot_name(const osk_trace_snapshot_t *s, uint32_t id) {
  if (!s || id == 0 || id >= s->n_names || !s->names[id]) return "<unnamed>";
  return s->names[id]->str;
}
uint32_t osk_trace_snapshot_categories(const osk_trace_snapshot_t *s) { return s ? s->n_cats : 0; }
const char *osk_trace_snapshot_category(const osk_trace_snapshot_t *s, uint32_t id) {
  if (!s || id >= s->n_cats || !s->cats[id]) return "cpu_op";
  return s->cats[id];
}

size_t osk_trace_snapshot_copy(const osk_trace_snapshot_t *s, size_t first, size_t cap,
                               osk_trace_event_t *out) {
  if (!s || !out) return 0;
  osk__event_t *buf = NULL;
  size_t k = 0, idx = 0;
  for (size_t i = 0; i < s->nsegs && k < cap; i++) {
    const osk__seg_t *g = &s->segs[i];
    size_t n = g->end - g->begin;
    if (idx + n <= first) {
      idx += n;
      continue;
    }
    if (!g->chunk && !buf && !(buf = malloc(OSK__CHUNK_EVENTS * sizeof *buf))) break;
    const osk__event_t *ev = osk__seg_events(g, buf);
    if (!ev) break;
    for (size_t j = 0; j < n && k < cap; j++, idx++) {
      if (idx < first) continue;
      const osk__event_t *e = &ev[j];
      osk_trace_event_t *o = &out[k++];
      o->ts_ns = osk__ticks_ns(&s->clock, e->t0);
      o->dur_ns = osk__dur_ns(&s->clock, e->t0, e->t1);
      o->name = e->name < s->n_names ? e->name : 0;
      o->tid = g->tid;
      o->depth = e->depth;
      o->category = e->cat < s->n_cats ? e->cat : 0;
      o->reserved = 0;
    }
  }
  free(buf);
  return k;
}

size_t osk_trace_snapshot_columns(const osk_trace_snapshot_t *s, int64_t *ts_ns, int64_t *dur_ns,
                                  uint32_t *name, uint32_t *tid, uint16_t *depth) {
  if (!s) return 0;
  osk__event_t *buf = NULL;
  size_t k = 0;
  for (size_t i = 0; i < s->nsegs; i++) {
    const osk__seg_t *g = &s->segs[i];
    if (!g->chunk && !buf && !(buf = malloc(OSK__CHUNK_EVENTS * sizeof *buf))) break;
    const osk__event_t *ev = osk__seg_events(g, buf);
    if (!ev) break;
    for (uint32_t j = 0; j < g->end - g->begin; j++, k++) {
      const osk__event_t *e = &ev[j];
      if (ts_ns) ts_ns[k] = osk__ticks_ns(&s->clock, e->t0);
      if (dur_ns) dur_ns[k] = osk__dur_ns(&s->clock, e->t0, e->t1);
      if (name) name[k] = e->name < s->n_names ? e->name : 0;
      if (tid) tid[k] = g->tid;
      if (depth) depth[k] = e->depth;
    }
  }
  free(buf);
  return k;
}

/* ------------------------------------------------------------- calibration */

static void default_pair(void *ctx) {
  osk_trace_begin((const osk_trace_name_t *)ctx, 0);
  osk_trace_end();
}

static int cmp_d(const void *pa, const void *pb) {
  double a = *(const double *)pa, b = *(const double *)pb;
  return (a > b) - (a < b);
}

int osk_trace_calibrate(osk_trace_pair_fn pair, void *ctx, osk_trace_calib_t *out) {
  enum { PAIRS = 2000, ROUNDS = 9 };
  if (!out) return OSK_EINVAL;
  memset(out, 0, sizeof *out);
  const osk_clock_t *clk = osk_clock_get();
  osk__tstate_t *scratch = calloc(1, sizeof *scratch);
  osk__chunk_t *c = scratch ? chunk_new(0, PAIRS + 64) : NULL;
  double *durs = malloc(PAIRS * sizeof *durs);
  if (!scratch || !c || !durs) {
    free(scratch);
    free(c);
    free(durs);
    return OSK_ENOMEM;
  }
  scratch->scratch = 1;
  scratch->tid = (uint32_t)syscall(SYS_gettid);
  atomic_init(&scratch->chunk, c);
  atomic_init(&scratch->depth, 0);
  /* Swap this thread's state for the scratch one: the pairs run through
   * exactly the code an operator runs through, but land in `c`. */
  osk__tstate_t *saved = t_state;
  t_state = scratch;
  if (!pair) {
    pair = default_pair;
    ctx = osk_trace_name("opskew::calibration");
  }
  double w[ROUNDS], dl[ROUNDS];
  for (int r = -1; r < ROUNDS; r++) { /* round -1 warms caches up */
    atomic_store_explicit(&c->count, 0, memory_order_relaxed);
    uint64_t t0 = osk_clock_ticks();
    for (int i = 0; i < PAIRS; i++) pair(ctx);
    uint64_t t1 = osk_clock_ticks();
    if (r < 0) continue;
    uint32_t n = atomic_load_explicit(&c->count, memory_order_relaxed);
    if (n > PAIRS) n = PAIRS;
    for (uint32_t i = 0; i < n; i++) durs[i] = (double)(c->ev[i].t1 - c->ev[i].t0) * clk->ns_per_tick;
    qsort(durs, n, sizeof *durs, cmp_d);
    dl[r] = n ? durs[n / 2] : 0.0;
    w[r] = (double)(t1 - t0) * clk->ns_per_tick / PAIRS;
  }
  t_state = saved;
  free(c);
  free(scratch);
  free(durs);
  qsort(w, ROUNDS, sizeof w[0], cmp_d);
  qsort(dl, ROUNDS, sizeof dl[0], cmp_d);
  out->w_ns = w[ROUNDS / 2];
  out->delta_ns = dl[ROUNDS / 2];
  out->w_spread_ns = w[ROUNDS - 1] - w[0];
  out->pairs = PAIRS;
  out->rounds = ROUNDS;
  out->valid = 1;
  return 0;
}

void osk_trace_free(void *p) { free(p); }
