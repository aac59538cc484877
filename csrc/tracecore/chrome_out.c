/* chrome_out.c: the one Chrome trace JSON output (see tracecore.h): string
 * escaping, numbers from integers, and the one file writer: a buffered file
 * written to a temporary name and renamed into place, or written through to
 * a character device or standard output, anything else refused
 * (docs/outputs.md). The tracer's writer, the corrected-trace writer and,
 * through opskew._engine.write_file, every Python output use it. */
#include "tracecore.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#define OSK__ZBUF ((size_t)1 << 16)

const char osk__digits2[201] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

const uint64_t osk__pow10[20] = {
    1ull, 10ull, 100ull, 1000ull, 10000ull, 100000ull, 1000000ull, 10000000ull, 100000000ull,
    1000000000ull, 10000000000ull, 100000000000ull, 1000000000000ull, 10000000000000ull,
    100000000000000ull, 1000000000000000ull, 10000000000000000ull, 100000000000000000ull,
    1000000000000000000ull, 10000000000000000000ull};

size_t osk__fmt_u64(char *out, uint64_t v) { return (size_t)(osk__put_dec(out, v) - out); }

/* ------------------------------------------------------------ JSON escape */

/* Length of a valid UTF-8 sequence at p (at most `left` bytes), or 0. */
static size_t utf8_len(const unsigned char *p, size_t left) {
  unsigned c = p[0];
  if (c < 0x80) return 1;
  size_t n;
  unsigned min;
  if ((c & 0xE0) == 0xC0) { n = 2; min = 0x80; c &= 0x1F; }
  else if ((c & 0xF0) == 0xE0) { n = 3; min = 0x800; c &= 0x0F; }
  else if ((c & 0xF8) == 0xF0) { n = 4; min = 0x10000; c &= 0x07; }
  else return 0;
  if (n > left) return 0;
  for (size_t i = 1; i < n; i++) {
    if ((p[i] & 0xC0) != 0x80) return 0;
    c = (c << 6) | (p[i] & 0x3F);
  }
  if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return 0;
  return n;
}

size_t osk__json_escape(const char *s, size_t len, char *out, size_t cap) {
  static const char hex[] = "0123456789abcdef";
  size_t n = 0;
#define OSK__EMIT(ch)                  \
  do {                                 \
    if (n + 1 < cap) out[n] = (ch);    \
    n++;                               \
  } while (0)
  const unsigned char *p = (const unsigned char *)(s ? s : "");
  const unsigned char *e = s ? p + len : p;
  while (p < e) {
    unsigned c = *p;
    if (c == '"' || c == '\\') {
      OSK__EMIT('\\');
      OSK__EMIT((char)c);
      p++;
    } else if (c < 0x20) {
      OSK__EMIT('\\');
      switch (c) {
      case '\n': OSK__EMIT('n'); break;
      case '\t': OSK__EMIT('t'); break;
      case '\r': OSK__EMIT('r'); break;
      default:
        OSK__EMIT('u'); OSK__EMIT('0'); OSK__EMIT('0');
        OSK__EMIT(hex[c >> 4]); OSK__EMIT(hex[c & 15]);
      }
      p++;
    } else if (c < 0x80) {
      OSK__EMIT((char)c);
      p++;
    } else {
      size_t k = utf8_len(p, (size_t)(e - p));
      if (k == 0) {
        const char *r = "\\ufffd";
        for (int i = 0; r[i]; i++) OSK__EMIT(r[i]);
        p++;
      } else {
        for (size_t i = 0; i < k; i++) OSK__EMIT((char)p[i]);
        p += k;
      }
    }
  }
#undef OSK__EMIT
  if (cap) out[n < cap ? n : cap - 1] = '\0';
  return n;
}

/* ------------------------------------------------------------ file output */

/* A few system calls per megabyte instead of stdio's copy and locking. */
#define OSK__OUT_CAP (1u << 20)
/* Candidate temporary names tried per open before giving up (EEXIST). */
#define OSK__OUT_TRIES 100
/* The longest file name this writer builds (NAME_MAX of Linux file systems). */
#define OSK__NAME_MAX 255

static void fail(osk__out_t *o, int err) {
  if (!o->failed) o->sys_errno = err;
  o->failed = 1;
}

/* What mode says a refused file is. */
static const char *what_is(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a named pipe (FIFO)";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISBLK(mode)) return "a block device";
  return "not a regular file";
}

/* The errno a refusal reports to callers that have only errno. */
static int refusal_errno(mode_t mode) { return S_ISDIR(mode) ? EISDIR : EINVAL; }

/* 0 if the folder of path exists and takes new files (the temporary file
 * and the rename need that), else the errno; -1: out of memory. */
static int folder_takes_files(const char *path) {
  char *dir = osk__dup_bytes(path, strlen(path));
  if (!dir) return -1;
  char *slash = strrchr(dir, '/');
  const char *d = ".";
  if (slash == dir) d = "/";
  else if (slash) {
    *slash = '\0';
    d = dir;
  }
  struct stat st;
  int rc = stat(d, &st) != 0 ? errno : !S_ISDIR(st.st_mode) ? ENOTDIR
         : access(d, W_OK | X_OK) != 0 ? errno : 0;
  free(dir);
  return rc;
}

int osk__out_target(const char *path, osk__out_target_t *t) {
  memset(t, 0, sizeof *t);
  if (!strcmp(path, "-")) {
    t->kind = OSK__OUT_STDOUT;
    return 0;
  }
  struct stat st;
  int rc;
  if (lstat(path, &st) != 0) {
    if (errno != ENOENT) goto refused_errno;
    /* Nothing there: its folder must exist and take a new file. */
    rc = folder_takes_files(path);
    if (rc < 0) return OSK_ENOMEM;
    if (rc) goto refused_rc;
    t->kind = OSK__OUT_NEW;
    return 0;
  }
  if (S_ISLNK(st.st_mode)) {
    t->link = 1;
    if (stat(path, &st) != 0) {
      if (errno == ENOENT) t->what = "a symbolic link to nothing";
      goto refused_errno;
    }
  }
  t->dev = (uint64_t)st.st_dev;
  t->ino = (uint64_t)st.st_ino;
  if (S_ISREG(st.st_mode)) {
    /* Replaced in its own folder (a link's target's). */
    char *real = t->link ? realpath(path, NULL) : NULL;
    if (t->link && !real) goto refused_errno;
    rc = folder_takes_files(real ? real : path);
    free(real);
    if (rc < 0) return OSK_ENOMEM;
    if (rc) goto refused_rc;
    t->kind = OSK__OUT_FILE;
    return 0;
  }
  if (S_ISCHR(st.st_mode)) {
    t->kind = OSK__OUT_DEVICE;
    if (access(path, W_OK) != 0) goto refused_errno;
    return 0;
  }
  t->kind = OSK__OUT_REFUSED;
  t->what = what_is(st.st_mode);
  t->sys_errno = refusal_errno(st.st_mode);
  return OSK_EIO;
refused_errno:
  rc = errno;
refused_rc:
  t->kind = OSK__OUT_REFUSED;
  t->sys_errno = rc;
  return OSK_EIO;
}

int osk__out_tmp_name(char *out, size_t cap, const char *path, unsigned n) {
  const char *slash = strrchr(path, '/');
  const char *base = slash ? slash + 1 : path;
  char suffix[64];
  snprintf(suffix, sizeof suffix, ".tmp-opskew.%ld.%u", (long)getpid(), n);
  int k;
  if (strlen(base) + strlen(suffix) <= OSK__NAME_MAX) {
    k = snprintf(out, cap, "%s%s", path, suffix);
  } else { /* a name near the limit: the temporary gets a short name in the same folder */
    int dlen = slash ? (int)(slash - path) + 1 : 0;
    k = snprintf(out, cap, "%.*s%s", dlen, path, suffix);
  }
  return k >= 0 && (size_t)k < cap ? 0 : OSK_EINVAL;
}

/* Sets errno to the failure's errno, for callers that only look there. */
static int failed_with(osk__out_t *o, int rc) {
  errno = o->sys_errno;
  return rc;
}

int osk__out_open(osk__out_t *o, const char *path, size_t slack) {
  memset(o, 0, sizeof *o);
  o->fd = -1;
  o->cap = OSK__OUT_CAP;
  o->buf = malloc(OSK__OUT_CAP + slack);
  osk__out_target_t t;
  int trc = o->buf ? osk__out_target(path, &t) : OSK_ENOMEM;
  if (trc == OSK_ENOMEM) {
    osk__out_discard(o);
    return OSK_ENOMEM;
  }
  if (trc) {
    free(o->buf);
    o->buf = NULL;
    o->refused = t.what;
    fail(o, t.sys_errno ? t.sys_errno : EINVAL);
    return failed_with(o, OSK_EIO);
  }
  o->kind = t.kind;
  if (t.kind == OSK__OUT_STDOUT || t.kind == OSK__OUT_DEVICE) {
    /* Written through as it goes: never created, truncated, replaced or
     * removed. Standard output through a duplicate, so commit can close it. */
    o->fd = t.kind == OSK__OUT_STDOUT ? fcntl(1, F_DUPFD_CLOEXEC, 3)
                                      : open(path, O_WRONLY | O_NOCTTY | O_CLOEXEC);
    struct stat st;
    if (o->fd >= 0 && t.kind == OSK__OUT_DEVICE && (fstat(o->fd, &st) != 0 || !S_ISCHR(st.st_mode))) {
      close(o->fd); /* it changed since we looked: not what we were asked to write through */
      o->fd = -1;
      errno = EINVAL;
    }
    if (o->fd < 0) {
      int err = errno;
      free(o->buf);
      o->buf = NULL;
      fail(o, err);
      return failed_with(o, OSK_EIO);
    }
    return 0;
  }
  /* A regular file, new or replaced. A symbolic link to a regular file is
   * written through: its target is replaced, the link stays. */
  o->path = t.link ? realpath(path, NULL) : osk__dup_bytes(path, strlen(path));
  size_t tcap = (o->path ? strlen(o->path) : 0) + 64;
  char *tmp = malloc(tcap);
  if (!tmp || !o->path) {
    int err = errno;
    free(tmp);
    osk__out_discard(o);
    if (!t.link || err == ENOMEM) return OSK_ENOMEM;
    fail(o, err); /* realpath failed: the link changed since we looked */
    return failed_with(o, OSK_EIO);
  }
  /* A name next to the target, so that the rename stays within one file
   * system. Candidates n = 0, 1, ... in turn, each created with O_EXCL and
   * O_NOFOLLOW: whatever already sits at one (another writer's file, a
   * planted link) is left alone and the next is tried. */
  for (unsigned n = 0; n < OSK__OUT_TRIES; n++) {
    if (osk__out_tmp_name(tmp, tcap, o->path, n)) {
      errno = ENAMETOOLONG;
      break;
    }
    o->fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (o->fd >= 0 || errno != EEXIST) break;
  }
  if (o->fd < 0) {
    int err = errno;
    free(tmp); /* nothing was created: there is nothing to remove */
    osk__out_discard(o);
    fail(o, err);
    return failed_with(o, OSK_EIO);
  }
  o->tmp = tmp; /* ours from here on: discard removes it */
  /* rename gives the target the temporary's mode: a regular file we replace
   * keeps its own permission bits (best effort; not its owner). */
  struct stat st;
  if (t.kind == OSK__OUT_FILE && stat(o->path, &st) == 0 && S_ISREG(st.st_mode))
    (void)fchmod(o->fd, st.st_mode & 0777);
  return 0;
}

static void write_all(osk__out_t *o, const char *p, size_t n) {
  size_t off = 0;
  while (off < n && !o->failed) {
    ssize_t w = write(o->fd, p + off, n - off);
    if (w < 0) {
      if (errno != EINTR) fail(o, errno);
    } else {
      off += (size_t)w;
    }
  }
}

int osk__out_gzip_by_name(osk__out_t *o, const char *path) {
  size_t n = strlen(path);
  if ((o->kind != OSK__OUT_NEW && o->kind != OSK__OUT_FILE) || n < 3 || memcmp(path + n - 3, ".gz", 3) != 0) return 0;
  z_stream *z = calloc(1, sizeof *z);
  o->zbuf = malloc(OSK__ZBUF);
  /* 15 + 16: a gzip header and trailer around the deflate stream. */
  if (!z || !o->zbuf || deflateInit2(z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    free(z);
    osk__out_discard(o);
    return OSK_ENOMEM;
  }
  o->z = z;
  return 0;
}

/* Compresses what the buffer holds and writes each full chunk; with
 * Z_FINISH, to the end of the stream. */
static void deflate_out(osk__out_t *o, int mode) {
  z_stream *z = o->z;
  z->next_in = (Bytef *)o->buf;
  z->avail_in = (uInt)o->len;
  for (;;) {
    z->next_out = o->zbuf;
    z->avail_out = (uInt)OSK__ZBUF;
    int rc = deflate(z, mode);
    if (rc == Z_STREAM_ERROR) {
      fail(o, EIO);
      return;
    }
    write_all(o, (const char *)o->zbuf, OSK__ZBUF - z->avail_out);
    if (o->failed || (mode == Z_FINISH ? rc == Z_STREAM_END : z->avail_out != 0)) return;
  }
}

void osk__out_flush(osk__out_t *o) {
  if (o->z) {
    if (!o->failed) deflate_out(o, Z_NO_FLUSH);
  } else {
    write_all(o, o->buf, o->len);
  }
  o->len = 0;
}

void osk__out_put(osk__out_t *o, const char *s, size_t n) {
  if (!o->buf) return;
  while (n > 0 && !o->failed) {
    if (o->len >= o->cap) osk__out_flush(o);
    size_t k = o->cap - o->len < n ? o->cap - o->len : n;
    memcpy(o->buf + o->len, s, k);
    o->len += k;
    s += k;
    n -= k;
  }
}

void osk__out_puts(osk__out_t *o, const char *s) { osk__out_put(o, s, strlen(s)); }

void osk__out_str(osk__out_t *o, const char *s, size_t n) {
  char small[256];
  size_t need = osk__json_escape(s, n, small, sizeof small);
  char *e = need < sizeof small ? small : malloc(need + 1);
  if (!e) {
    fail(o, ENOMEM);
    return;
  }
  if (e != small) osk__json_escape(s, n, e, need + 1);
  osk__out_put(o, "\"", 1);
  osk__out_put(o, e, need);
  osk__out_put(o, "\"", 1);
  if (e != small) free(e);
}

void osk__out_u64(osk__out_t *o, uint64_t v) {
  char tmp[24];
  osk__out_put(o, tmp, (size_t)(osk__put_dec(tmp, v) - tmp));
}

void osk__out_i64(osk__out_t *o, int64_t v) {
  char tmp[24], *p = tmp;
  if (v < 0) {
    *p++ = '-';
    p = osk__put_dec(p, (uint64_t)(-(v + 1)) + 1u);
  } else {
    p = osk__put_dec(p, (uint64_t)v);
  }
  osk__out_put(o, tmp, (size_t)(p - tmp));
}

void osk__out_us(osk__out_t *o, int64_t ns) {
  char tmp[32];
  osk__out_put(o, tmp, (size_t)(osk__put_us(tmp, ns) - tmp));
}

size_t osk__fmt_num(char *out, double v) {
  if (v != v || v > 1e300 || v < -1e300) {
    memcpy(out, "null", 5);
    return 4;
  }
  int n = snprintf(out, 32, "%.10g", v);
  return n > 0 ? (size_t)n : 0;
}

void osk__out_num(osk__out_t *o, double v) {
  char tmp[32];
  osk__out_put(o, tmp, osk__fmt_num(tmp, v));
}

void osk__out_key_num(osk__out_t *o, const char *text, double v) {
  osk__out_puts(o, text);
  osk__out_num(o, v);
}

/* Renames the finished temporary file onto the target, never over
 * something that is not a regular file, even one that appeared while we
 * wrote. A target that is absent now is taken with RENAME_NOREPLACE, so
 * nothing can slip in between the look and the rename; one that exists is
 * looked at just before the rename (a window of one system call, for a
 * regular file the user asked to replace). */
static void place(osk__out_t *o) {
  for (int tries = 0; tries < 4; tries++) {
    struct stat st;
    if (lstat(o->path, &st) == 0) {
      if (!S_ISREG(st.st_mode)) {
        o->refused = S_ISLNK(st.st_mode) ? "a symbolic link that appeared while writing" : what_is(st.st_mode);
        fail(o, S_ISLNK(st.st_mode) ? EEXIST : refusal_errno(st.st_mode));
        return;
      }
      if (rename(o->tmp, o->path) != 0) fail(o, errno);
      return;
    }
    if (errno != ENOENT) {
      fail(o, errno);
      return;
    }
#ifdef RENAME_NOREPLACE
    if (renameat2(AT_FDCWD, o->tmp, AT_FDCWD, o->path, RENAME_NOREPLACE) == 0) return;
    if (errno == EEXIST) continue; /* something appeared: look at it again */
    if (errno != EINVAL && errno != ENOSYS) {
      fail(o, errno);
      return;
    }
    /* The file system cannot: the plain rename below, as before. */
#endif
    if (rename(o->tmp, o->path) != 0) fail(o, errno);
    return;
  }
  fail(o, EEXIST); /* the target kept changing under us */
}

int osk__out_commit(osk__out_t *o) {
  if (o->fd < 0) {
    if (!o->failed) fail(o, EBADF);
    return failed_with(o, OSK_EIO);
  }
  osk__out_flush(o);
  if (o->z && !o->failed) deflate_out(o, Z_FINISH);
  int through = o->kind == OSK__OUT_STDOUT || o->kind == OSK__OUT_DEVICE;
  /* fsync before rename: otherwise a crash can leave the new name on an
   * empty file where the old trace was. */
  if (!through && !o->failed && fsync(o->fd) != 0 && errno != EINVAL && errno != EROFS) fail(o, errno);
  if (close(o->fd) != 0) fail(o, errno);
  o->fd = -1;
  if (!through && !o->failed) place(o);
  int rc = o->failed ? OSK_EIO : 0;
  if (!rc) {
    free(o->tmp); /* renamed: nothing left to remove */
    o->tmp = NULL;
  }
  int err = o->sys_errno, failed = o->failed;
  const char *refused = o->refused;
  osk__out_discard(o);
  o->sys_errno = err;
  o->failed = failed;
  o->refused = refused;
  return rc ? failed_with(o, rc) : 0;
}

void osk__out_discard(osk__out_t *o) {
  int saved = errno; /* callers read a failure's errno after discarding */
  if (o->fd >= 0) close(o->fd);
  o->fd = -1;
  if (o->tmp) unlink(o->tmp);
  if (o->z) deflateEnd(o->z);
  free(o->z);
  free(o->zbuf);
  o->z = NULL;
  o->zbuf = NULL;
  free(o->tmp);
  free(o->path);
  free(o->buf);
  o->tmp = o->path = o->buf = NULL;
  o->len = o->cap = 0;
  errno = saved;
}
