/* The one Chrome JSON output: escaping, numbers, and the file written to a
 * temporary name next to the target and renamed into place. */
#include "tracecore.h"
#include "testutil.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include <zlib.h>

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
  /* A directory target is refused at open: EISDIR, nothing created. */
  char sub[128], inner[160];
  snprintf(sub, sizeof sub, "%s/d", dir);
  snprintf(inner, sizeof inner, "%s/x", sub);
  CHECK(mkdir(sub, 0700) == 0);
  FILE *f = fopen(inner, "w");
  CHECK(f && fclose(f) == 0);
  CHECK(osk__out_open(&o, sub, 0) == OSK_EIO && o.sys_errno == EISDIR && errno == EISDIR);
  CHECK(o.refused && !strcmp(o.refused, "a directory"));
  osk__out_discard(&o);
  CHECK(count_like(dir, "d.tmp-opskew.") == 0);
  CHECK(unlink(inner) == 0 && rmdir(sub) == 0);
  CHECK(unlink(path) == 0 && rmdir(dir) == 0);
}

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  CHECK(f && fputs(text, f) >= 0 && fclose(f) == 0);
}

/* The whole content of path ("" when missing, at most 255 bytes). */
static const char *slurp(const char *path) {
  static char buf[256];
  buf[0] = 0;
  FILE *f = fopen(path, "r");
  if (!f) return buf;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  buf[n] = 0;
  fclose(f);
  return buf;
}

static int write_all(const char *path, const char *text) {
  osk__out_t o;
  int rc = osk__out_open(&o, path, 0);
  if (rc) return rc;
  osk__out_puts(&o, text);
  return osk__out_commit(&o);
}

/* The acceptance test of docs/outputs.md: symbolic links planted at every
 * temporary name the writer tries before the free one point at a victim
 * file elsewhere in the folder; the victim is untouched, the links stay,
 * and the output is complete. With every candidate taken, open fails and
 * still touches nothing. */
static void planted(const char *dir) {
  char victim[320], path[320], cand[400];
  snprintf(victim, sizeof victim, "%s/victim", dir);
  snprintf(path, sizeof path, "%s/out.json", dir);
  write_file(victim, "secret");
  CHECK(chmod(victim, 0600) == 0);
  enum { K = 7 };
  for (unsigned n = 0; n < K; n++) {
    CHECK(osk__out_tmp_name(cand, sizeof cand, path, n) == 0);
    CHECK(symlink(victim, cand) == 0);
  }
  CHECK(write_all(path, "{\"ok\":1}") == 0);
  CHECK(!strcmp(slurp(path), "{\"ok\":1}"));
  struct stat st;
  CHECK(stat(victim, &st) == 0 && (st.st_mode & 0777) == 0600 && !strcmp(slurp(victim), "secret"));
  CHECK(count_like(dir, "out.json.tmp-opskew.") == K); /* our links, untouched */
  for (unsigned n = 0; n < K; n++) {
    CHECK(osk__out_tmp_name(cand, sizeof cand, path, n) == 0);
    CHECK(lstat(cand, &st) == 0 && S_ISLNK(st.st_mode));
  }
  /* Every candidate taken: EEXIST, nothing written anywhere. */
  for (unsigned n = K; n < 100; n++) {
    CHECK(osk__out_tmp_name(cand, sizeof cand, path, n) == 0);
    CHECK(symlink(victim, cand) == 0);
  }
  osk__out_t o;
  CHECK(osk__out_open(&o, path, 0) == OSK_EIO && o.sys_errno == EEXIST);
  osk__out_discard(&o);
  CHECK(!strcmp(slurp(victim), "secret") && !strcmp(slurp(path), "{\"ok\":1}"));
  for (unsigned n = 0; n < 100; n++) {
    CHECK(osk__out_tmp_name(cand, sizeof cand, path, n) == 0);
    CHECK(unlink(cand) == 0);
  }
  CHECK(unlink(path) == 0 && unlink(victim) == 0);
}

/* Symbolic links at the target: written through to a regular file (the
 * link stays, the mode of its target too); a link to nothing and a loop are
 * refused without creating anything. */
static void links(const char *dir) {
  char real[320], link[320], dangling[320], loop_a[320], loop_b[320];
  snprintf(real, sizeof real, "%s/real.json", dir);
  snprintf(link, sizeof link, "%s/link.json", dir);
  snprintf(dangling, sizeof dangling, "%s/dangling.json", dir);
  snprintf(loop_a, sizeof loop_a, "%s/loop_a", dir);
  snprintf(loop_b, sizeof loop_b, "%s/loop_b", dir);
  write_file(real, "old");
  CHECK(chmod(real, 0640) == 0);
  CHECK(symlink("real.json", link) == 0);
  CHECK(write_all(link, "new") == 0);
  struct stat st;
  CHECK(lstat(link, &st) == 0 && S_ISLNK(st.st_mode));
  CHECK(stat(real, &st) == 0 && (st.st_mode & 0777) == 0640 && !strcmp(slurp(real), "new"));
  CHECK(count_like(dir, "real.json.tmp-opskew.") == 0 && count_like(dir, "link.json.tmp") == 0);

  char missing[320];
  snprintf(missing, sizeof missing, "%s/nowhere", dir);
  CHECK(symlink(missing, dangling) == 0);
  osk__out_t o;
  CHECK(osk__out_open(&o, dangling, 0) == OSK_EIO && o.sys_errno == ENOENT);
  CHECK(o.refused && strstr(o.refused, "link to nothing"));
  osk__out_discard(&o);
  CHECK(access(missing, F_OK) != 0);

  CHECK(symlink("loop_b", loop_a) == 0 && symlink("loop_a", loop_b) == 0);
  CHECK(osk__out_open(&o, loop_a, 0) == OSK_EIO && o.sys_errno == ELOOP);
  osk__out_discard(&o);
  CHECK(unlink(loop_a) == 0 && unlink(loop_b) == 0 && unlink(dangling) == 0);
  CHECK(unlink(link) == 0 && unlink(real) == 0);
}

/* Not regular files: a FIFO is refused (nothing created, the FIFO stays);
 * a character device is written through, never replaced (a copy of
 * /dev/null and of /dev/full made with mknod in the test's folder, where
 * this process may; /dev itself is never touched); "-" is standard output. */
static void special(const char *dir) {
  char fifo[320];
  snprintf(fifo, sizeof fifo, "%s/fifo", dir);
  CHECK(mkfifo(fifo, 0600) == 0);
  osk__out_t o;
  osk__out_target_t t;
  CHECK(osk__out_target(fifo, &t) == OSK_EIO && t.kind == OSK__OUT_REFUSED && strstr(t.what, "FIFO"));
  CHECK(osk__out_open(&o, fifo, 0) == OSK_EIO && o.sys_errno == EINVAL && strstr(o.refused, "FIFO"));
  osk__out_discard(&o);
  struct stat st;
  CHECK(lstat(fifo, &st) == 0 && S_ISFIFO(st.st_mode) && count_like(dir, "fifo.tmp") == 0);
  CHECK(unlink(fifo) == 0);

  char null_dev[320], full_dev[320];
  snprintf(null_dev, sizeof null_dev, "%s/null", dir);
  snprintf(full_dev, sizeof full_dev, "%s/full", dir);
  if (mknod(null_dev, S_IFCHR | 0666, makedev(1, 3)) == 0) {
    CHECK(mknod(full_dev, S_IFCHR | 0666, makedev(1, 7)) == 0);
    CHECK(osk__out_target(null_dev, &t) == 0 && t.kind == OSK__OUT_DEVICE);
    CHECK(write_all(null_dev, "{}") == 0);
    CHECK(lstat(null_dev, &st) == 0 && S_ISCHR(st.st_mode) && st.st_rdev == makedev(1, 3));
    CHECK(write_all(full_dev, "{}") == OSK_EIO && errno == ENOSPC);
    CHECK(lstat(full_dev, &st) == 0 && S_ISCHR(st.st_mode) && st.st_rdev == makedev(1, 7));
    CHECK(count_like(dir, "null.tmp") == 0 && count_like(dir, "full.tmp") == 0);
    CHECK(unlink(null_dev) == 0 && unlink(full_dev) == 0);
  } else {
    printf("chrome_out: mknod not permitted (%s): device cases skipped\n", strerror(errno));
  }

  char captured[320];
  snprintf(captured, sizeof captured, "%s/stdout", dir);
  fflush(stdout);
  int keep = dup(1);
  FILE *f = fopen(captured, "w");
  CHECK(keep >= 0 && f && dup2(fileno(f), 1) == 1);
  CHECK(osk__out_target("-", &t) == 0 && t.kind == OSK__OUT_STDOUT);
  CHECK(write_all("-", "to stdout") == 0);
  CHECK(dup2(keep, 1) == 1 && close(keep) == 0 && fclose(f) == 0);
  CHECK(!strcmp(slurp(captured), "to stdout") && count_like(dir, "-.tmp") == 0);
  CHECK(unlink(captured) == 0);
}

/* Something appears at a new target while the output is being written:
 * a FIFO or a directory is never replaced (the output fails and its
 * temporary file goes), a regular file is replaced as one that was there
 * from the start would be. */
static void appeared(const char *dir) {
  char path[320];
  snprintf(path, sizeof path, "%s/late", dir);
  osk__out_t o;
  struct stat st;

  CHECK(osk__out_open(&o, path, 0) == 0);
  osk__out_puts(&o, "trace");
  CHECK(mkfifo(path, 0600) == 0);
  CHECK(osk__out_commit(&o) == OSK_EIO && strstr(o.refused, "FIFO"));
  CHECK(lstat(path, &st) == 0 && S_ISFIFO(st.st_mode) && count_like(dir, "late.tmp") == 0);
  CHECK(unlink(path) == 0);

  CHECK(osk__out_open(&o, path, 0) == 0);
  osk__out_puts(&o, "trace");
  CHECK(mkdir(path, 0700) == 0);
  CHECK(osk__out_commit(&o) == OSK_EIO);
  CHECK(lstat(path, &st) == 0 && S_ISDIR(st.st_mode) && count_like(dir, "late.tmp") == 0);
  CHECK(rmdir(path) == 0);

  CHECK(osk__out_open(&o, path, 0) == 0);
  osk__out_puts(&o, "trace");
  write_file(path, "someone else's");
  CHECK(osk__out_commit(&o) == 0 && !strcmp(slurp(path), "trace"));
  CHECK(unlink(path) == 0 && count_like(dir, "late") == 0);
}

/* A name so long that the suffix would pass NAME_MAX: the temporary file
 * gets a short name in the same folder. */
static void long_name(const char *dir) {
  char path[512], cand[600];
  int k = snprintf(path, sizeof path, "%s/", dir);
  memset(path + k, 'n', 250);
  path[k + 250] = 0;
  CHECK(osk__out_tmp_name(cand, sizeof cand, path, 3) == 0);
  CHECK(strncmp(cand, path, (size_t)k) == 0 && strstr(cand + k, ".tmp-opskew.") == cand + k);
  CHECK(write_all(path, "x") == 0 && !strcmp(slurp(path), "x"));
  CHECK(count_like(dir, ".tmp-opskew.") == 0 && unlink(path) == 0);
}

/* A name ending in .gz is written gzipped as it goes, across many flushes;
 * a name without it, or a discarded one, is left as before. */
static void gzipped(const char *dir) {
  char path[320], plain[320];
  snprintf(path, sizeof path, "%s/t.json.gz", dir);
  snprintf(plain, sizeof plain, "%s/t.json", dir);
  osk__out_t o;
  CHECK(osk__out_open(&o, path, 0) == 0 && osk__out_gzip_by_name(&o, path) == 0 && o.z);
  osk__out_puts(&o, "[0");
  /* Several buffers' worth, so that deflate runs on every flush. */
  for (int i = 1; i < 2000000; i++) {
    osk__out_put(&o, ",", 1);
    osk__out_u64(&o, (uint64_t)i);
  }
  osk__out_puts(&o, "]");
  CHECK(osk__out_commit(&o) == 0 && count_like(dir, "t.json.gz.tmp") == 0);
  gzFile g = gzopen(path, "rb");
  CHECK(g);
  char got[4];
  int n = gzread(g, got, 3);
  CHECK(n == 3 && !memcmp(got, "[0,", 3));
  uint64_t next = 1, value = 0;
  int c, digits = 0;
  while ((c = gzgetc(g)) != -1) { /* every number in order, then the bracket */
    if (c == ',' || c == ']') {
      CHECK(digits && value == next);
      next++;
      value = 0;
      digits = 0;
      if (c == ']') break;
    } else {
      CHECK(c >= '0' && c <= '9');
      value = value * 10 + (uint64_t)(c - '0');
      digits++;
    }
  }
  CHECK(next == 2000000 && gzgetc(g) == -1);
  gzclose(g);
  struct stat st;
  CHECK(stat(path, &st) == 0 && st.st_size > 0 && st.st_size < 8000000); /* compressed: 14.9 MB of text */
  /* Not a .gz name: plain, even when asked. */
  CHECK(osk__out_open(&o, plain, 0) == 0 && osk__out_gzip_by_name(&o, plain) == 0 && !o.z);
  osk__out_puts(&o, "{}");
  CHECK(osk__out_commit(&o) == 0 && !strcmp(slurp(plain), "{}"));
  /* Discarded mid-way: the old .gz stays, the temporary goes. */
  CHECK(osk__out_open(&o, path, 0) == 0 && osk__out_gzip_by_name(&o, path) == 0);
  osk__out_puts(&o, "partial");
  osk__out_flush(&o);
  osk__out_discard(&o);
  CHECK(stat(path, &st) == 0 && st.st_size > 1000 && count_like(dir, "t.json.gz.tmp") == 0);
  CHECK(unlink(path) == 0 && unlink(plain) == 0);
}

int main(void) {
  escape();
  numbers();
  file();
  /* A fresh private folder under $TMPDIR: everything below happens there. */
  const char *tmpdir = getenv("TMPDIR");
  char dir[256];
  snprintf(dir, sizeof dir, "%s/opskew-out2-XXXXXX", tmpdir && *tmpdir && strlen(tmpdir) < 128 ? tmpdir : "/tmp");
  CHECK(mkdtemp(dir) != NULL);
  planted(dir);
  links(dir);
  special(dir);
  appeared(dir);
  long_name(dir);
  gzipped(dir);
  CHECK(rmdir(dir) == 0);
  puts("chrome_out: ok");
  return 0;
}
