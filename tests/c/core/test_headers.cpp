// test_headers.c's compile checks in C++: the six public headers together
// (each alone is in the header_alone_*_cpp objects), linked against the C
// libraries through their extern "C" blocks.
#include "opskew.h"
#include "opskew_collector.h"
#include "opskew_correct.h"
#include "opskew_job.h"
#include "opskew_reader.h"
#include "opskew_trace.h"
#include "opskew_version.h"
#include "header_alone.h"
#include "testutil.h"

#include <cstring>

int main() {
  CHECK(headers_alone() == HEADERS_ALONE);
  CHECK(std::strcmp(osk_version(), OSK_VERSION_STRING) == 0);
  osk_reader_event_t rev = osk_reader_event_t();
  osk_trace_event_t tev = osk_trace_event_t();
  CHECK(rev.ts_ns == 0 && tev.ts_ns == 0);
  osk_error_t err = osk_error_t();
  osk_reader_t *r = nullptr;
  CHECK(osk_reader_open(&r, "/nonexistent/opskew/trace.json", nullptr, &err) == OSK_EIO);
  CHECK(r == nullptr && err.code == OSK_EIO);
  osk_correct_t *c = nullptr;
  osk_correct_opts_t opts = osk_correct_opts_t();
  CHECK(osk_correct_path("/nonexistent/opskew/trace.json", nullptr, &opts, &c, nullptr) ==
        OSK_EIO);
  osk_trace_summary_t *ts = nullptr;
  CHECK(osk_trace_summarize(nullptr, nullptr, &ts) == OSK_EINVAL && ts == nullptr);
  CHECK(std::strcmp(osk_strerror(OSK_EINVAL), "invalid argument") == 0);
  return 0;
}
