/* The one Chrome JSON output: escaping, numbers, and the file written to a
 * temporary name next to the target and renamed into place. */
#include "tracecore.h"
#include "testutil.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void escape(void) {
  char out[64];
  size_t n = osk__json_escape("a\"b\\c\n\t\r\x01", 9, out, sizeof out);
  CHECK(n == strlen(out) && !strcmp(out, "a\\\"b\\\\c\\n\\t\\r\\u0001"));
  n = osk__json_escape("x\0y", 3, out, sizeof out); /* a NUL inside a name */
  CHECK(!strcmp(out, "x\\u0000y") && n == 8);
  n = osk__json_escape("\xc3\xa9\xff\xe2\x82", 5, out, sizeof out); /* e-acute, bad, cut */
  CHECK(!strcmp(out, "\xc3\xa9\\ufffd\\ufffd\\ufffd"));
  n = osk__json_escape("abcdef", 6, out, 4); /* truncated, length still full */
  CHECK(n == 6 && !strcmp(out, "abc"));
}

static void numbers(void) {
  char b[32];
  *osk__put_us(b, 0) = 0;
  CHECK(!strcmp(b, "0.000"));
  *osk__put_us(b, 1234567) = 0;
  CHECK(!strcmp(b, "1234.567"));
  *osk__put_us(b, -5) = 0;
  CHECK(!strcmp(b, "-0.005"));
  *osk__put_us(b, INT64_MIN) = 0;
  CHECK(!strcmp(b, "-9223372036854775.808"));
  CHECK(osk__fmt_num(b, 1.5) == 3 && !strcmp(b, "1.5"));
  CHECK(osk__fmt_num(b, 1.0 / 0.0) == 4 && !strcmp(b, "null"));
  CHECK(osk__fmt_num(b, -123456789.0123) == 10 && !strcmp(b, "-123456789")); /* 10 digits */
  b[osk__fmt_u64(b, UINT64_MAX)] = 0;
  CHECK(!strcmp(b, "18446744073709551615"));
  for (uint64_t v = 1, k = 1; k < 20; v *= 10, k++) {
    CHECK(osk__dec_len(v) == k && osk__dec_len(v - 1) == (k > 1 ? k - 1 : 1));
  }
}

/* Files in dir whose names start with prefix. */
static int count_like(const char *dir, const char *prefix) {
  DIR *d = opendir(dir);
  CHECK(d);
  int n = 0;
  for (struct dirent *e; (e = readdir(d));) n += !strncmp(e->d_name, prefix, strlen(prefix));
  closedir(d);
  return n;
}

static void file(void) {
  char dir[64], path[96];
  snprintf(dir, sizeof dir, "/tmp/opskew-out-%d", (int)getpid());
  CHECK(mkdir(dir, 0700) == 0);
  snprintf(path, sizeof path, "%s/t.json", dir);
  mode_t old = umask(027);
  osk__out_t o;
  CHECK(osk__out_open(&o, path, 0) == 0);
  CHECK(count_like(dir, "t.json.tmp-opskew.") == 1 && access(path, F_OK) != 0);
  osk__out_puts(&o, "{\"s\":");
  osk__out_str(&o, "q\"", 2);
  osk__out_puts(&o, ",\"n\":[");
  osk__out_i64(&o, -42);
  osk__out_put(&o, ",", 1);
  osk__out_u64(&o, 7);
  osk__out_put(&o, ",", 1);
  osk__out_us(&o, 1500);
  osk__out_put(&o, ",", 1);
  osk__out_num(&o, 0.0 / 0.0);
  /* More than the buffer, so that it flushes on the way. */
  for (int i = 0; i < 300000; i++) osk__out_puts(&o, ",1");
  osk__out_puts(&o, "]}");
  CHECK(osk__out_commit(&o) == 0);
  umask(old);
  struct stat st;
  CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0640); /* 0666 less the umask */
  CHECK(st.st_size == (off_t)(strlen("{\"s\":\"q\\\"\",\"n\":[-42,7,1.500,null") + 600000 + 2));
  CHECK(count_like(dir, "t.json.tmp-opskew.") == 0);
  osk__out_discard(&o); /* after commit: a no-op */
  CHECK(access(path, F_OK) == 0);
  /* Discarding leaves the old file and removes only its own temporary. */
  CHECK(osk__out_open(&o, path, 0) == 0);
  osk__out_puts(&o, "partial");
  osk__out_discard(&o);
  CHECK(stat(path, &st) == 0 && st.st_size > 600000);
  CHECK(count_like(dir, "t.json.tmp-opskew.") == 0);
  /* Replacing an existing regular file keeps its mode, whatever the umask. */
  CHECK(chmod(path, 0604) == 0);
  CHECK(osk__out_open(&o, path, 0) == 0);
  osk__out_puts(&o, "{}");
  CHECK(osk__out_commit(&o) == 0);
  CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0604 && st.st_size == 2);
  /* A directory that does not exist: EIO with errno, nothing created. */
  char bad[128];
  snprintf(bad, sizeof bad, "%s/missing/t.json", dir);
  CHECK(osk__out_open(&o, bad, 0) == OSK_EIO && o.sys_errno == ENOENT);
  osk__out_discard(&o);
  /* A rename that fails (the target is a non-empty directory): EIO, and
   * the temporary file is gone. */
  char sub[128], inner[160];
  snprintf(sub, sizeof sub, "%s/d", dir);
  snprintf(inner, sizeof inner, "%s/x", sub);
  CHECK(mkdir(sub, 0700) == 0);
  FILE *f = fopen(inner, "w");
  CHECK(f && fclose(f) == 0);
  CHECK(osk__out_open(&o, sub, 0) == 0);
  osk__out_puts(&o, "{}");
  CHECK(osk__out_commit(&o) == OSK_EIO && o.sys_errno != 0);
  CHECK(count_like(dir, "d.tmp-opskew.") == 0);
  CHECK(unlink(inner) == 0 && rmdir(sub) == 0);
  CHECK(unlink(path) == 0 && rmdir(dir) == 0);
}

int main(void) {
  escape();
  numbers();
  file();
  puts("chrome_out: ok");
  return 0;
}
