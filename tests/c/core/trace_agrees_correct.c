/* The correcting side of test_trace_agrees.c (see trace_agrees.h). */
#include "opskew_correct.h"
#include "testutil.h"
#include "trace_agrees.h"

#include <string.h>

int agree_correct(const char *path, double w, double delta, const char *name, agree_row_t *out) {
  osk_correct_opts_t opts = {.w_ns = w, .delta_ns = delta};
  osk_correction_t *c = NULL;
  osk_read_error_t err;
  CHECK(osk_correct_path(path, NULL, &opts, &c, &err) == 0);
  int rc = -1;
  for (size_t i = 0; i < osk_correction_op_count(c); i++) {
    const osk_correct_op_t *o = osk_correction_op(c, i);
    if (o->name.len != strlen(name) || memcmp(o->name.ptr, name, o->name.len)) continue;
    *out = (agree_row_t){o->calls, o->descendants, o->clamped, o->reported_total_ns,
                         o->reported_self_ns, o->corrected_total_ns, o->corrected_self_ns};
    rc = 0;
  }
  osk_correction_free(c);
  return rc;
}
