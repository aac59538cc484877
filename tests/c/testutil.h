/* testutil.h: an abort-on-failure check for the C unit tests, and reading a file whole. */
#ifndef OPSKEW_TESTUTIL_H
#define OPSKEW_TESTUTIL_H
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define CHECK(cond)                                                          \
  do {                                                                       \
    if (!(cond)) {                                                           \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      abort();                                                               \
    }                                                                        \
  } while (0)

#define CHECK_NEAR(a, b, tol)                                                \
  do {                                                                       \
    double a_ = (a), b_ = (b);                                               \
    if (!(fabs(a_ - b_) <= (tol))) {                                         \
      fprintf(stderr, "%s:%d: %s = %.12g, expected %.12g (+-%g)\n", __FILE__, \
              __LINE__, #a, a_, b_, (double)(tol));                          \
      abort();                                                               \
    }                                                                        \
  } while (0)

/* The whole file at `path`, NUL-terminated, malloc'd (the caller frees);
 * its length in *len when len is not NULL. Aborts when it cannot be read. */
static inline char *osk_test_slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  CHECK(f);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  CHECK(n >= 0);
  fseek(f, 0, SEEK_SET);
  char *buf = (char *)malloc((size_t)n + 1); /* the cast: C++ tests include this too */
  CHECK(buf && fread(buf, 1, (size_t)n, f) == (size_t)n);
  buf[n] = '\0';
  fclose(f);
  if (len) *len = (size_t)n;
  return buf;
}

#endif
