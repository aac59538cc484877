/* testutil.h: an abort-on-failure check for the C unit tests, and reading a file whole. */
#ifndef OPSKEW_TESTUTIL_H
#define OPSKEW_TESTUTIL_H
#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

static char osk_test_dir_[4096];

static inline int osk_test_rm_(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st;
  (void)flag;
  (void)ftw;
  return remove(path);
}

static inline void osk_test_leave_dir_(void) {
  if (chdir("/") == 0 && osk_test_dir_[0]) nftw(osk_test_dir_, osk_test_rm_, 16, FTW_DEPTH | FTW_PHYS);
}

/* Runs the rest of the test in a fresh private folder of its own under
 * $TMPDIR (else /tmp), removed with what the test left in it at exit: files
 * a test names by relative path never land in the build tree. */
static inline void osk_test_in_tmpdir(void) {
  const char *t = getenv("TMPDIR");
  snprintf(osk_test_dir_, sizeof osk_test_dir_, "%s/opskew-ctest-XXXXXX", t && *t ? t : "/tmp");
  CHECK(mkdtemp(osk_test_dir_) != NULL && chdir(osk_test_dir_) == 0);
  CHECK(atexit(osk_test_leave_dir_) == 0);
}

#endif
