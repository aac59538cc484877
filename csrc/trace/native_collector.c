/* native_collector.c: libopskew_native.so, the collector of the "native"
 * route: a C++ RecordFunction callback (python/opskew/_native_shim.cpp,
 * compiled against the user's torch at first use) calls the two entry points
 * below for every operator begin and end.
 *
 * Why two exported functions instead of the runtime's own: the shim receives
 * their addresses from Python (ctypes) when it attaches, so it needs no link
 * to this library, and one call carries what the runtime needs (the name,
 * interned here, and the category). The shim holds the pointers; this file
 * holds what is specific to the route, like the ITT and NVTX collectors, and
 * links the shared life cycle (collector.c) for sessions and calibration.
 */
#include "opskew_collector.h"
#include "trace_internal.h"

/* RecordFunction::name() for an operator is its schema's name, a stable
 * pointer; user scopes pass reused buffers, which the runtime's interning
 * verifies by content. Every event is "cpu_op" (category 0), as on the ITT
 * route, whose PyTorch domain maps to it. */
OSK_TRACE_API void osk_native_begin(const char *name);
OSK_TRACE_API void osk_native_end(void);

void osk_native_begin(const char *name) { osk__trace_begin_str(name, 0); }

void osk_native_end(void) { osk_trace_end(); }

/* The shim attached itself to torch (Python reports it, so that
 * osk_collector_bound() means the same as for the other collectors). */
OSK_TRACE_API void osk_native_attached(void);
void osk_native_attached(void) { osk__collector_bound(1); }

/* One pair through the same entry points the shim calls, for the
 * calibration: the collector's part, not RecordFunction's. */
static void calib_pair(void *ctx) {
  (void)ctx;
  osk_native_begin("opskew::calibration");
  osk_native_end();
}

const osk__collector_desc_t osk__collector = {.instrument = "native", .pair = calib_pair};
