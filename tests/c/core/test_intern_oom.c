/* Interning a thread when memory runs out: every allocation made while
 * interning fails in turn (malloc is wrapped at link time), and each failure
 * must leave the table freeable: a string id that could not be copied must
 * not point into the caller's buffer, which freeing would then free. */
#include "analysis.h"
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

void *__real_malloc(size_t n);
void *__wrap_malloc(size_t n);
static int fail_at = -1; /* the index of the allocation to fail; -1: none */
static int seen;

void *__wrap_malloc(size_t n) {
  if (fail_at >= 0 && seen++ == fail_at) return NULL;
  return __real_malloc(n);
}

int main(void) {
  char pid_text[] = "process one", tid_text[] = "thread two";
  osk__id_t pid = {.kind = OSK__ID_STR, .str = {pid_text, strlen(pid_text)}};
  osk__id_t tid = {.kind = OSK__ID_STR, .str = {tid_text, strlen(tid_text)}};
  int failed = 0;
  for (int k = 0; k < 16; k++) {
    osk__threads_t t = {0};
    seen = 0;
    fail_at = k;
    int64_t id = osk__threads_intern(&t, &pid, &tid);
    fail_at = -1;
    CHECK(id == 0 || id == OSK_ENOMEM);
    failed += id == OSK_ENOMEM;
    if (id == 0) CHECK(t.n == 1 && t.th[0].tid.str.ptr != tid_text);
    osk__threads_free(&t); /* under ASan, freeing the caller's buffer aborts */
  }
  CHECK(failed > 0);
  puts("intern_oom: ok");
  return 0;
}
