/* Name interning: keyed by pointer, verified by content, so a reused buffer
 * never returns a stale name; ids are dense and stable; the table grows. */
#include "opskew_trace.h"
#include "testutil.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

static void *intern_many(void *arg) {
  (void)arg;
  char buf[64];
  for (int i = 0; i < 3000; i++) {
    snprintf(buf, sizeof buf, "op::%d", i % 1500);
    osk_trace_name_t *n = osk_trace_name(buf);
    CHECK(n && strcmp(osk_trace_name_str(n), buf) == 0);
  }
  return NULL;
}

int main(void) {
  CHECK(osk_trace_name(NULL) == NULL);
  const char *lit = "aten::add";
  osk_trace_name_t *a = osk_trace_name(lit);
  CHECK(a && osk_trace_name(lit) == a);
  CHECK(strcmp(osk_trace_name_str(a), "aten::add") == 0);
  CHECK(osk_trace_name_id(a) >= 1);
  CHECK(osk_trace_name_id(NULL) == 0);
  CHECK(strcmp(osk_trace_name_str(NULL), "<unnamed>") == 0);

  /* Same content at another address: the same entry. */
  char copy[32];
  strcpy(copy, "aten::add");
  CHECK(osk_trace_name(copy) == a);

  /* The same buffer reused for other names: never the stale entry. */
  char buf[32];
  strcpy(buf, "aten::mul");
  osk_trace_name_t *m = osk_trace_name(buf);
  strcpy(buf, "aten::mm");
  osk_trace_name_t *mm = osk_trace_name(buf);
  strcpy(buf, "aten::mul_");
  osk_trace_name_t *mul_ = osk_trace_name(buf);
  strcpy(buf, "aten::mu");
  osk_trace_name_t *mu = osk_trace_name(buf);
  CHECK(m && mm && mul_ && mu);
  CHECK(m != mm && m != mul_ && m != mu && mm != mu && mul_ != mu);
  CHECK(strcmp(osk_trace_name_str(mm), "aten::mm") == 0);
  CHECK(strcmp(osk_trace_name_str(mu), "aten::mu") == 0);
  strcpy(buf, "aten::mul");
  CHECK(osk_trace_name(buf) == m);
  CHECK(osk_trace_name("") != NULL);

  /* Many names from several threads at once: the table grows while others
   * read it; every lookup returns the right string. */
  pthread_t th[4];
  for (int i = 0; i < 4; i++) CHECK(pthread_create(&th[i], NULL, intern_many, NULL) == 0);
  for (int i = 0; i < 4; i++) CHECK(pthread_join(th[i], NULL) == 0);
  uint32_t seen_max = 0;
  for (int i = 0; i < 1500; i++) {
    snprintf(buf, sizeof buf, "op::%d", i);
    osk_trace_name_t *n = osk_trace_name(buf);
    CHECK(n && strcmp(osk_trace_name_str(n), buf) == 0);
    if (osk_trace_name_id(n) > seen_max) seen_max = osk_trace_name_id(n);
  }
  CHECK(seen_max < 1500 + 16); /* dense ids: no duplicates were created */

  /* The collector slot. */
  CHECK(osk_trace_name_slot_get(a) == NULL);
  osk_trace_name_slot_set(a, &copy);
  CHECK(osk_trace_name_slot_get(a) == &copy);

  /* Categories: cpu_op is 0. */
  CHECK(osk_trace_category("cpu_op") == 0);
  uint16_t c = osk_trace_category("oneDNN");
  CHECK(c > 0 && osk_trace_category("oneDNN") == c);
  CHECK(osk_trace_category(NULL) == 0);
  printf("ok: names\n");
  return 0;
}
