/* parse_yajl.c: reads a Chrome trace with yajl 2 (the packaged streaming
 * C parser, libyajl-dev) and counts the elements of traceEvents. It does the
 * least a yajl-based reader must do (tokenize everything, track depth), so
 * its time is a lower bound for one. Built by bench/bench_reader.py --parsers
 * when yajl is installed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yajl/yajl_parse.h>

typedef struct {
  int depth;
  long events;
} ctx_t;

static int on_start_map(void *c) {
  ctx_t *x = c;
  if (++x->depth == 2) x->events++;
  return 1;
}
static int on_end_map(void *c) { ((ctx_t *)c)->depth--; return 1; }
static int on_start_array(void *c) { ((ctx_t *)c)->depth++; return 1; }
static int on_end_array(void *c) { ((ctx_t *)c)->depth--; return 1; }
static int on_key(void *c, const unsigned char *k, size_t n) { (void)c; (void)k; (void)n; return 1; }
static int on_str(void *c, const unsigned char *k, size_t n) { (void)c; (void)k; (void)n; return 1; }
static int on_num(void *c, const char *k, size_t n) { (void)c; (void)k; (void)n; return 1; }
static int on_bool(void *c, int b) { (void)c; (void)b; return 1; }
static int on_null(void *c) { (void)c; return 1; }

int main(int argc, char **argv) {
  if (argc != 2) return 2;
  yajl_callbacks cb = {on_null, on_bool, NULL, NULL, on_num, on_str, on_start_map, on_key,
                       on_end_map, on_start_array, on_end_array};
  ctx_t ctx = {0, 0};
  yajl_handle h = yajl_alloc(&cb, NULL, &ctx);
  FILE *f = fopen(argv[1], "rb");
  if (!f) return 2;
  static unsigned char buf[1 << 20];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) {
    if (yajl_parse(h, buf, n) != yajl_status_ok) return 1;
  }
  if (yajl_complete_parse(h) != yajl_status_ok) return 1;
  printf("%ld\n", ctx.events);
  fclose(f);
  yajl_free(h);
  return 0;
}
