/* abi.c: the layout of the public structs, for bindings that read them in
 * place (Python's ctypes mirrors check theirs against it when they load),
 * so that a changed struct fails loudly instead of being misread. */
#include "trace_internal.h"

#include <string.h>

typedef struct {
  const char *type;
  const char *field; /* NULL: the struct itself */
  size_t offset;
  size_t size;
} osk__abi_t;

#define OSK__STRUCT(T) {#T, NULL, 0, sizeof(T)}
#define OSK__FIELD(T, f) {#T, #f, offsetof(T, f), sizeof(((T *)0)->f)}

static const osk__abi_t k_abi[] = {
    OSK__STRUCT(osk_trace_calib_t),
    OSK__FIELD(osk_trace_calib_t, w_ns),
    OSK__FIELD(osk_trace_calib_t, delta_ns),
    OSK__FIELD(osk_trace_calib_t, w_spread_ns),
    OSK__FIELD(osk_trace_calib_t, pairs),
    OSK__FIELD(osk_trace_calib_t, rounds),
    OSK__FIELD(osk_trace_calib_t, valid),
    OSK__STRUCT(osk_trace_event_t),
    OSK__FIELD(osk_trace_event_t, ts_ns),
    OSK__FIELD(osk_trace_event_t, dur_ns),
    OSK__FIELD(osk_trace_event_t, name),
    OSK__FIELD(osk_trace_event_t, tid),
    OSK__FIELD(osk_trace_event_t, depth),
    OSK__FIELD(osk_trace_event_t, category),
    OSK__STRUCT(osk_trace_op_t),
    OSK__FIELD(osk_trace_op_t, name),
    OSK__FIELD(osk_trace_op_t, calls),
    OSK__FIELD(osk_trace_op_t, total_ns),
    OSK__FIELD(osk_trace_op_t, self_ns),
    OSK__FIELD(osk_trace_op_t, total_corrected_ns),
    OSK__FIELD(osk_trace_op_t, self_corrected_ns),
    OSK__FIELD(osk_trace_op_t, mean_ns),
    OSK__FIELD(osk_trace_op_t, p50_ns),
    OSK__FIELD(osk_trace_op_t, p99_ns),
    OSK__FIELD(osk_trace_op_t, max_ns),
    OSK__FIELD(osk_trace_op_t, children),
    OSK__FIELD(osk_trace_op_t, descendants),
};

int osk_trace_abi_field(const char *type, const char *field, size_t *offset, size_t *size) {
  if (!type) return OSK_EINVAL;
  for (size_t i = 0; i < sizeof k_abi / sizeof k_abi[0]; i++) {
    const osk__abi_t *a = &k_abi[i];
    if (strcmp(a->type, type) != 0) continue;
    if (field ? !a->field || strcmp(a->field, field) != 0 : a->field != NULL) continue;
    if (offset) *offset = a->offset;
    if (size) *size = a->size;
    return 0;
  }
  return OSK_EINVAL;
}
