/* outputs.c: what a recording session leaves behind at exit (the Chrome
 * trace and the summary files), shared by every collector so that
 * `opskew record` behaves the same whichever instrument recorded. */
#include "trace_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int write_text(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  if (!f) return OSK_EIO;
  size_t n = strlen(text);
  int ok = fwrite(text, 1, n, f) == n;
  ok &= fclose(f) == 0;
  return ok ? 0 : OSK_EIO;
}

int osk_trace_write_outputs(const osk_trace_snapshot_t *s, const char *trace_path,
                            const char *summary_txt, const char *summary_json, size_t max_rows) {
  if (!s) return OSK_EINVAL;
  int rc = trace_path && *trace_path ? osk_trace_write_chrome(s, trace_path) : 0;
  if (rc) fprintf(stderr, "opskew: could not write the trace to %s: %s\n", trace_path, osk_strerror(rc));
  int want_txt = summary_txt && *summary_txt, want_json = summary_json && *summary_json;
  if (!want_txt && !want_json) return rc;
  osk_trace_summary_t *sum = NULL;
  (void)osk_trace_summarize(s, NULL, &sum); /* NULL on failure: reported below as OSK_EIO */
  char *t = sum && want_txt ? osk_trace_summary_table(sum, max_rows) : NULL;
  char *j = sum && want_json ? osk_trace_summary_json(sum) : NULL;
  if (want_txt && (!t || write_text(summary_txt, t) != 0)) rc = rc ? rc : OSK_EIO;
  if (want_json && (!j || write_text(summary_json, j) != 0)) rc = rc ? rc : OSK_EIO;
  free(t);
  free(j);
  osk_trace_summary_free(sum);
  return rc;
}

int osk_trace_write_outputs_env(const osk_trace_snapshot_t *s) {
  const char *rows = getenv("OPSKEW_SUMMARY_ROWS");
  size_t max_rows = rows && *rows ? (size_t)strtoul(rows, NULL, 10) : 0;
  return osk_trace_write_outputs(s, getenv("OPSKEW_TRACE_OUT"), getenv("OPSKEW_SUMMARY_TXT"),
                                 getenv("OPSKEW_SUMMARY_JSON"), max_rows);
}
