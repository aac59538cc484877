/* The six public headers compile together, and each alone (the
 * header_alone_* objects linked in), in C11; test_headers.cpp does the same
 * in C++. Also checks what the headers promise across modules: one error
 * struct, distinct event types for the reader and the tracer, the version
 * from meson.build, and the constructors' return-code convention. */
#include "opskew.h"
#include "opskew_collector.h"
#include "opskew_correct.h"
#include "opskew_job.h"
#include "opskew_reader.h"
#include "opskew_trace.h"
#include "opskew_version.h"
#include "header_alone.h"
#include "testutil.h"

#include <string.h>

int main(void) {
  CHECK(headers_alone() == HEADERS_ALONE);

  /* The version comes from project() in meson.build, through one place. */
  CHECK(strcmp(osk_version(), OSK_VERSION_STRING) == 0);

  /* The reader's and the tracer's events are different types. */
  osk_reader_event_t rev;
  osk_trace_event_t tev;
  memset(&rev, 0, sizeof rev);
  memset(&tev, 0, sizeof tev);
  CHECK(rev.ts_ns == 0 && tev.ts_ns == 0);

  /* One error struct, filled by the reader, the summary and the correction. */
  osk_error_t err = {0, "", 0, 0};
  osk_reader_t *r = NULL;
  CHECK(osk_reader_open(&r, "/nonexistent/opskew/trace.json", NULL, &err) == OSK_EIO);
  CHECK(r == NULL && err.code == OSK_EIO && err.message && err.sys_errno != 0);
  osk_summary_t *sum = NULL;
  CHECK(osk_summary_from_path("/nonexistent/opskew/trace.json", NULL, NULL, &sum, NULL, &err) ==
        OSK_EIO);
  CHECK(sum == NULL && err.code == OSK_EIO);
  osk_correct_t *c = NULL;
  osk_correct_opts_t opts;
  memset(&opts, 0, sizeof opts);
  CHECK(osk_correct_path("/nonexistent/opskew/trace.json", NULL, NULL, &c, &err) == OSK_EINVAL);
  CHECK(osk_correct_path("/nonexistent/opskew/trace.json", NULL, &opts, &c, &err) == OSK_EIO);
  CHECK(c == NULL && err.code == OSK_EIO);

  /* The tracer's constructors: a code, and NULL in *out on failure. */
  osk_trace_snapshot_t *snap = (osk_trace_snapshot_t *)&snap;
  CHECK(osk_trace_stop("t", &snap) == OSK_EINVAL && snap == NULL); /* no session */
  osk_trace_summary_t *ts = (osk_trace_summary_t *)&ts;
  CHECK(osk_trace_summarize(NULL, NULL, &ts) == OSK_EINVAL && ts == NULL);
  CHECK(osk_trace_summarize(NULL, NULL, NULL) == OSK_EINVAL);
  return 0;
}
