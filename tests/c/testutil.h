/* testutil.h: an abort-on-failure check for the C unit tests. */
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

#endif
