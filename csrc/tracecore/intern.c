/* intern.c: names and threads to dense ids, and the metadata rule (see
 * tracecore.h). Memory grows with distinct names and threads, not events. */
#include "analysis.h"

#include <stdlib.h>
#include <string.h>

int osk__grow(void **p, size_t *cap, size_t need, size_t elem) {
  if (need <= *cap) return 0;
  size_t ncap = *cap ? *cap : 8;
  while (ncap < need) ncap *= 2;
  void *np = realloc(*p, ncap * elem);
  if (!np) return OSK_ENOMEM;
  *p = np;
  *cap = ncap;
  return 0;
}

void osk__free_arrays(void **const *ps, size_t n) {
  for (size_t i = 0; i < n; i++) {
    free(*ps[i]);
    *ps[i] = NULL;
  }
}

char *osk__dup_bytes(const char *p, size_t n) {
  char *d = malloc(n + 1);
  if (!d) return NULL;
  if (n) memcpy(d, p, n);
  d[n] = 0;
  return d;
}

int osk__cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

size_t osk__count_below(const int64_t *a, size_t n, int64_t t) {
  size_t lo = 0, hi = n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (a[mid] < t) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/* Makes room for n ids (load at most 1/2), re-placing them from their hashes. */
static int index_fit(osk__index_t *x, size_t n, const void *items, size_t stride, size_t hash_off) {
  if (n * 2 <= x->cap) return 0;
  size_t cap = x->cap ? x->cap * 2 : 64;
  while (n * 2 > cap) cap *= 2;
  uint32_t *slots = calloc(cap, sizeof *slots);
  if (!slots) return OSK_ENOMEM;
  for (size_t i = 0; i + 1 < n; i++) {
    uint64_t h;
    memcpy(&h, (const char *)items + i * stride + hash_off, sizeof h);
    size_t j = (size_t)h & (cap - 1);
    while (slots[j]) j = (j + 1) & (cap - 1);
    slots[j] = (uint32_t)(i + 1);
  }
  free(x->slots);
  x->slots = slots;
  x->cap = cap;
  return 0;
}

/* Adds id n - 1 (hash h) to the index, after index_fit(n). */
static void index_add(osk__index_t *x, uint64_t h, size_t n) {
  size_t j = (size_t)h & (x->cap - 1);
  while (x->slots[j]) j = (j + 1) & (x->cap - 1);
  x->slots[j] = (uint32_t)n;
}

/* ----------------------------------------------------------------- names */

int64_t osk__names_intern(osk__names_t *t, const char *p, size_t n) {
  uint64_t h = osk__hash_bytes(OSK__HASH_SEED, p, n);
  if (t->idx.cap) {
    size_t j = (size_t)h & (t->idx.cap - 1);
    for (uint32_t k; (k = t->idx.slots[j]) != 0; j = (j + 1) & (t->idx.cap - 1))
      if (t->hash[k - 1] == h && osk__str_is(t->str[k - 1], p, n)) return k - 1;
  }
  if (t->n >= UINT32_MAX - 1) return OSK_ERANGE;
  size_t cap = t->cap;
  if (osk__grow((void **)&t->str, &cap, t->n + 1, sizeof *t->str)) return OSK_ENOMEM;
  if (osk__grow((void **)&t->hash, &t->cap, t->n + 1, sizeof *t->hash)) return OSK_ENOMEM;
  /* Both arrays grew to the same capacity (same doubling from the same start). */
  char *copy = osk__dup_bytes(p, n);
  if (!copy) return OSK_ENOMEM;
  t->str[t->n] = (osk_str_t){copy, n};
  t->hash[t->n] = h;
  /* index_fit reads hashes through a stride: the hash array's own. */
  if (index_fit(&t->idx, t->n + 1, t->hash, sizeof *t->hash, 0)) {
    free(copy);
    return OSK_ENOMEM;
  }
  t->n++;
  index_add(&t->idx, h, t->n);
  return (int64_t)(t->n - 1);
}

void osk__names_free(osk__names_t *t) {
  for (size_t i = 0; i < t->n; i++) free((void *)t->str[i].ptr);
  free(t->str);
  free(t->hash);
  free(t->idx.slots);
  memset(t, 0, sizeof *t);
}

/* --------------------------------------------------------------- threads */

static uint64_t id_hash(uint64_t h, const osk__id_t *id) {
  h = osk__hash_bytes(h, &id->kind, sizeof id->kind);
  if (id->kind == OSK__ID_INT) return osk__hash_bytes(h, &id->num, sizeof id->num);
  if (id->kind == OSK__ID_STR) return osk__hash_bytes(h, id->str.ptr, id->str.len);
  return h;
}

int osk__id_eq(const osk__id_t *a, const osk__id_t *b) {
  if (a->kind != b->kind) return 0;
  if (a->kind == OSK__ID_INT) return a->num == b->num;
  if (a->kind == OSK__ID_STR) return osk__str_is(a->str, b->str.ptr, b->str.len);
  return 1;
}

static int id_eq(const osk__id_t *a, const osk__id_t *b) { return osk__id_eq(a, b); }

/* On failure dst still owns nothing it would free: never a pointer into
 * the caller's buffer, which id_free would then free. */
static int id_copy(osk__id_t *dst, const osk__id_t *src) {
  *dst = *src;
  dst->str = (osk_str_t){NULL, 0};
  if (src->kind == OSK__ID_STR) {
    char *p = osk__dup_bytes(src->str.ptr, src->str.len);
    if (!p) return OSK_ENOMEM;
    dst->str = (osk_str_t){p, src->str.len};
  }
  return 0;
}

static void id_free(osk__id_t *id) {
  if (id->kind == OSK__ID_STR) free((void *)id->str.ptr);
}

int64_t osk__threads_intern(osk__threads_t *t, const osk__id_t *pid,
                            const osk__id_t *tid) {
  if (t->last) {
    osk__thread_id_t *x = &t->th[t->last - 1];
    if (id_eq(&x->tid, tid) && id_eq(&x->pid, pid)) return (int64_t)(t->last - 1);
  }
  uint64_t h = id_hash(id_hash(OSK__HASH_SEED, pid), tid);
  if (t->idx.cap) {
    size_t j = (size_t)h & (t->idx.cap - 1);
    for (uint32_t k; (k = t->idx.slots[j]) != 0; j = (j + 1) & (t->idx.cap - 1)) {
      osk__thread_id_t *x = &t->th[k - 1];
      if (x->hash == h && id_eq(&x->tid, tid) && id_eq(&x->pid, pid)) {
        t->last = k;
        return k - 1;
      }
    }
  }
  if (t->n >= UINT32_MAX - 1) return OSK_ERANGE;
  if (osk__grow((void **)&t->th, &t->cap, t->n + 1, sizeof *t->th)) return OSK_ENOMEM;
  osk__thread_id_t *x = &t->th[t->n];
  memset(x, 0, sizeof *x);
  if (id_copy(&x->pid, pid)) return OSK_ENOMEM;
  if (id_copy(&x->tid, tid) ||
      index_fit(&t->idx, t->n + 1, t->th, sizeof *t->th, offsetof(osk__thread_id_t, hash))) {
    id_free(&x->pid);
    id_free(&x->tid);
    return OSK_ENOMEM;
  }
  x->hash = h;
  t->n++;
  index_add(&t->idx, h, t->n);
  t->last = t->n;
  return (int64_t)(t->n - 1);
}

static int set_name(osk_str_t *dst, osk_str_t src) {
  char *n = osk__dup_bytes(src.ptr, src.len);
  if (!n) return OSK_ENOMEM;
  free((void *)dst->ptr);
  *dst = (osk_str_t){n, src.len};
  return 0;
}

int osk__threads_metadata(osk__threads_t *t, const osk__meta_event_t *ev, int64_t *named,
                          int64_t *named_proc) {
  int64_t dummy, dummy_proc;
  if (!named) named = &dummy;
  if (!named_proc) named_proc = &dummy_proc;
  *named = *named_proc = -1;
  if (!ev->arg_name.ptr) return 0; /* no string args.name */
  if (osk__str_is(ev->name, "thread_name", 11)) {
    int64_t id = osk__threads_intern(t, &ev->pid, &ev->tid);
    if (id < 0) return (int)id;
    int rc = set_name(&t->th[id].name, ev->arg_name);
    if (!rc) *named = id;
    return rc;
  }
  if (osk__str_is(ev->name, "process_name", 12)) {
    size_t i = 0;
    while (i < t->n_procs && !id_eq(&t->procs[i].pid, &ev->pid)) i++;
    if (i == t->n_procs) {
      if (osk__grow((void **)&t->procs, &t->procs_cap, t->n_procs + 1, sizeof *t->procs))
        return OSK_ENOMEM;
      osk__process_t *p = &t->procs[t->n_procs];
      memset(p, 0, sizeof *p);
      if (id_copy(&p->pid, &ev->pid)) return OSK_ENOMEM;
      t->n_procs++;
    }
    int rc = set_name(&t->procs[i].name, ev->arg_name);
    if (!rc) *named_proc = (int64_t)i;
    return rc;
  }
  return 0;
}

void osk__threads_free(osk__threads_t *t) {
  for (size_t i = 0; i < t->n; i++) {
    id_free(&t->th[i].pid);
    id_free(&t->th[i].tid);
    free((void *)t->th[i].name.ptr);
  }
  for (size_t i = 0; i < t->n_procs; i++) {
    id_free(&t->procs[i].pid);
    free((void *)t->procs[i].name.ptr);
  }
  free(t->th);
  free(t->procs);
  free(t->idx.slots);
  memset(t, 0, sizeof *t);
}
