/* parse_opskew.c: the same job as parse_yajl.c with opskew's reader
 * (parse, validate, decode the fields an event carries; no analysis), for a
 * like-for-like comparison of the parsers. Built by bench/bench_reader.py
 * --parsers. */
#include <stdio.h>

#include "opskew_reader.h"

static int count(void *ctx, const osk_reader_event_t *ev) {
  (void)ev;
  ++*(long *)ctx;
  return 0;
}

int main(int argc, char **argv) {
  if (argc != 2) return 2;
  osk_reader_t *r;
  osk_error_t err;
  if (osk_reader_open(&r, argv[1], NULL, &err)) return 2;
  long events = 0;
  int rc = osk_reader_run(r, count, &events, &err);
  osk_reader_free(r);
  if (rc) return 1;
  printf("%ld\n", events);
  return 0;
}
