/* reader.c: the streaming Chrome-trace JSON reader (see opskew_reader.h).
 *
 * Design. The input is read in chunks into one buffer that always ends in a
 * NUL sentinel. The document is walked by a small state machine whose steps
 * are "units": a structural character, a top-level key, a top-level scalar,
 * one element of a top-level container, or one whole trace event. A unit is
 * parsed by plain recursive descent over the buffer; if it runs into the end
 * of the buffered data it reports "need more", the unparsed tail is moved to
 * the front of the buffer, more input is appended and the unit is parsed again
 * from its start, once the buffered part of it has doubled (so the work stays
 * linear: see osk_reader_run). So memory is one chunk plus at most twice the
 * largest unit (the buffer grows only for an event larger than a chunk),
 * never the document, and the hot loops need no resumable state. The sentinel lets the byte loops (white
 * space, string bodies, digits) run without a bounds check: NUL stops each of
 * them, and the caller then tells "end of data" from a real NUL by position.
 *
 * Why not a library: see docs/reader.md and bench/bench_reader.py. In short,
 * the only packaged streaming parser (yajl 2.1, unmaintained upstream since
 * 2014) would become a system dependency of the wheel, delivers every value
 * of the args objects through callbacks we would ignore, and cannot tell us
 * which byte a truncated event started at; this scanner skips args without
 * building anything and converts Kineto's "1234.567" times to integer ns
 * exactly.
 */
#include "opskew_reader.h"
#include "reader_internal.h"
#include "tracecore.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <zlib.h>

/* ------------------------------------------------------------ constants */

enum { P_OK = 0, P_MORE = 1, P_ERR = 2, P_HEADER = 3 /* header_only: events begin */ };

#define DEFAULT_CHUNK ((size_t)1 << 20)
#define DEFAULT_MAX_UNIT ((size_t)256 << 20)
#define MAX_DEPTH 1024
#define META_MAX 64
#define META_VALUE_MAX 4096
#define KEY_MAX 4096
#define ZIN_BYTES ((size_t)256 << 10)

/* Document states; see the file comment. */
enum {
  S_START,
  S_OBJ_FIRST, /* after '{': a key or '}' */
  S_OBJ_KEY,   /* after ',': a key */
  S_OBJ_COLON,
  S_OBJ_VALUE,
  S_OBJ_AFTER, /* after a member: ',' or '}' */
  S_EV_FIRST,  /* after '[' of traceEvents: an event or ']' */
  S_EV_NEXT,   /* after ',': an event */
  S_EV_AFTER,  /* after an event: ',' or ']' */
  S_C_FIRST,   /* inside another top-level container (streamed, skipped) */
  S_C_NEXT,
  S_C_AFTER,
  S_END,
};

typedef struct {
  char *key;
  size_t key_len;
  char *value;
  size_t value_len;
  int is_string;
} meta_entry_t;

/* A kept top-level object: key and raw JSON text, both NUL terminated. */
typedef struct {
  char *key;
  size_t key_len;
  char *json;
  size_t json_len;
} object_entry_t;

/* Option marks found in the args of the event being parsed (r->ev_marks). */
enum { MARK_INPUT_DIMS = 1, MARK_MODULE_HIERARCHY = 2, MARK_FLOPS = 4 };

struct osk_reader {
  osk_reader_opts_t opts;

  /* Source: a file descriptor or a memory block, optionally through zlib. */
  int fd;
  off_t start_off; /* where a seekable fd was at open: osk_reader_rewind goes back there */
  int spool_fd;    /* a pipe's bytes as read, for osk_reader_rewind (-1: none) */
  /* Why the pipe's copy could not be made or kept (NULL: it was, or none was
   * asked for). Only a rewind that needs the copy reports it: one pass
   * reads the pipe without it. */
  const char *spool_msg;
  int spool_errno;
  const char *io_msg; /* what failed in the last OSK_EIO of the source */
  const unsigned char *mem;
  size_t mem_len, mem_pos, piece;
  int src_eof;
  uint64_t raw_done;  /* the source's bytes read in this pass (opts.progress) */
  uint64_t src_total; /* the source's size where known (0: not), for each pass */
  unsigned char *zin; /* raw bytes not yet consumed (gzip input, or the sniffed head) */
  size_t zin_cap, zin_len, zin_pos;
  z_stream zs;
  int zs_live;    /* inflateInit2 succeeded */
  int z_ended;    /* the current gzip member ended */
  int z_error;    /* zlib found corrupt data after output that src_read returned first */

  /* The parse buffer: buf[0..len) holds bytes from stream offset `base`;
   * buf[len] is always NUL. */
  char *buf;
  size_t cap, len, pos;
  uint64_t base;
  int eof;
  /* Decoded strings of the current unit; never smaller than cap, because a
   * decoded string is never longer than its JSON text. */
  char *scratch;
  size_t scap, slen;

  int state, ev_return, c_is_obj, used;
  char key[KEY_MAX];
  size_t key_len;
  int key_truncated;

  meta_entry_t meta[META_MAX];
  size_t n_meta;
  object_entry_t objects[OSK_READER_OBJECTS_MAX];
  size_t n_objects;
  int events_reached;                    /* "traceEvents" began: the counts below hold */
  size_t meta_before, objects_before;    /* kept members before it */
  unsigned ev_marks; /* MARK_* bits of the current event's args */

  osk_reader_stats_t stats;

  const char *err_at;
  const char *err_msg;
};

/* Byte classes. STOP ends the fast scan of a string body: the quote, the
 * backslash and every control character (NUL included, which is also the
 * buffer's sentinel). */
enum { C_WS = 1, C_STOP = 2, C_DIGIT = 4, C_HEX = 8 };
static unsigned char cls[256];
static pthread_once_t cls_once = PTHREAD_ONCE_INIT;

static void init_classes_once(void) {
  for (int c = 0; c < 0x20; c++) cls[c] |= C_STOP;
  cls['"'] |= C_STOP;
  cls['\\'] |= C_STOP;
  cls[' '] |= C_WS;
  cls['\t'] |= C_WS;
  cls['\n'] |= C_WS;
  cls['\r'] |= C_WS;
  for (int c = '0'; c <= '9'; c++) cls[c] |= C_DIGIT | C_HEX;
  for (int c = 'a'; c <= 'f'; c++) cls[c] |= C_HEX;
  for (int c = 'A'; c <= 'F'; c++) cls[c] |= C_HEX;
}

/* Readers may be created from several threads (the Python binding releases
 * the GIL), so the table is filled exactly once. */
static void init_classes(void) { pthread_once(&cls_once, init_classes_once); }

#define U8(p) ((unsigned char)*(p))
#define IS_WS(p) (cls[U8(p)] & C_WS)
#define IS_DIGIT(p) (cls[U8(p)] & C_DIGIT)

#define FAIL(r, at, msg)   \
  do {                     \
    (r)->err_at = (at);    \
    (r)->err_msg = (msg);  \
    return P_ERR;          \
  } while (0)

static const char *skip_ws(const char *p) {
  while (IS_WS(p)) p++;
  return p;
}

static void set_err(osk_error_t *err, int code, const char *msg, uint64_t off, int sys) {
  if (!err) return;
  err->code = code;
  err->message = msg;
  err->offset = off;
  err->sys_errno = sys;
}

/* --------------------------------------------------------------- source */

/* osk_progress_t's fields, stored as C11 atomics (opskew_reader.h). */
_Static_assert(sizeof(_Atomic uint64_t) == sizeof(uint64_t) && _Alignof(_Atomic uint64_t) == _Alignof(uint64_t),
               "osk_progress_t's fields are stored as _Atomic uint64_t");
#define PROGRESS_SET(field, v) atomic_store_explicit((_Atomic uint64_t *)&(field), (v), memory_order_relaxed)

/* Counts `got` bytes of the source read, where the caller keeps progress. */
static void progressed(osk_reader_t *r, ssize_t got) {
  if (got <= 0) return;
  r->raw_done += (uint64_t)got;
  if (r->opts.progress) PROGRESS_SET(r->opts.progress->done, r->raw_done);
}

/* A pass begins (an open, a rewind): `total` bytes to read where known. */
static void pass_begins(osk_reader_t *r, uint64_t total) {
  r->raw_done = 0;
  r->src_total = total;
  osk_progress_t *p = r->opts.progress;
  if (!p) return;
  PROGRESS_SET(p->done, 0);
  PROGRESS_SET(p->total, total);
  atomic_fetch_add_explicit((_Atomic uint64_t *)&p->pass, 1, memory_order_relaxed);
}

static ssize_t raw_read(osk_reader_t *r, unsigned char *dst, size_t n) {
  if (r->mem) {
    size_t left = r->mem_len - r->mem_pos;
    if (r->piece && n > r->piece) n = r->piece;
    if (n > left) n = left;
    memcpy(dst, r->mem + r->mem_pos, n);
    r->mem_pos += n;
    progressed(r, (ssize_t)n);
    return (ssize_t)n;
  }
  ssize_t got;
  do
    got = read(r->fd, dst, n);
  while (got < 0 && errno == EINTR);
  if (got < 0) r->io_msg = "cannot read the trace";
  progressed(r, got);
  if (got > 0 && r->spool_fd >= 0) { /* a pipe's bytes also go to the copy */
    for (ssize_t done = 0; done < got;) {
      ssize_t w = write(r->spool_fd, dst + done, (size_t)(got - done));
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) { /* the copy is lost, not this read: only a rewind needs it */
        r->spool_errno = w == 0 ? ENOSPC : errno;
        r->spool_msg = "cannot write the temporary copy of the piped trace";
        close(r->spool_fd);
        r->spool_fd = -1;
        break;
      }
      done += w;
    }
  }
  return got;
}

/* Refills zin when it is empty. Returns 0 or OSK_EIO. */
static int zin_fill(osk_reader_t *r) {
  if (r->zin_pos < r->zin_len || r->src_eof) return 0;
  ssize_t got = raw_read(r, r->zin, r->zin_cap);
  if (got < 0) return OSK_EIO;
  if (got == 0) r->src_eof = 1;
  r->zin_pos = 0;
  r->zin_len = (size_t)got;
  if (r->stats.gzip) r->stats.compressed_bytes += (uint64_t)got;
  return 0;
}

/* Reads up to n decompressed (or plain) bytes; *got == 0 means end of input.
 * Returns 0, OSK_EIO, OSK_EFORMAT (corrupt gzip: r->err_msg is set). */
static int src_read(osk_reader_t *r, char *dst, size_t n, size_t *got) {
  *got = 0;
  if (!r->stats.gzip) {
    if (r->zin_pos < r->zin_len) { /* the sniffed head comes first */
      size_t k = r->zin_len - r->zin_pos;
      if (k > n) k = n;
      memcpy(dst, r->zin + r->zin_pos, k);
      r->zin_pos += k;
      *got = k;
      return 0;
    }
    if (r->src_eof) return 0;
    ssize_t k = raw_read(r, (unsigned char *)dst, n);
    if (k < 0) return OSK_EIO;
    if (k == 0) r->src_eof = 1;
    *got = (size_t)k;
    return 0;
  }
  if (r->z_error) return OSK_EFORMAT;
  r->zs.next_out = (Bytef *)dst;
  r->zs.avail_out = (uInt)(n > UINT_MAX ? UINT_MAX : n);
  uInt want = r->zs.avail_out;
  for (;;) {
    int rc = zin_fill(r);
    if (rc) return rc;
    r->zs.next_in = r->zin + r->zin_pos;
    r->zs.avail_in = (uInt)(r->zin_len - r->zin_pos);
    if (r->z_ended) {
      if (r->zs.avail_in == 0) return 0; /* clean end after the last member */
      /* Concatenated gzip members (as `cat a.gz b.gz` makes) form one stream. */
      if (inflateReset(&r->zs) != Z_OK) return OSK_EFORMAT;
      r->z_ended = 0;
    }
    int zr = inflate(&r->zs, Z_NO_FLUSH);
    r->zin_pos = r->zin_len - r->zs.avail_in;
    *got = want - r->zs.avail_out;
    if (zr == Z_STREAM_END) {
      r->z_ended = 1;
    } else if (zr == Z_BUF_ERROR || (zr == Z_OK && *got == 0 && r->zs.avail_in == 0)) {
      if (r->src_eof && r->zin_pos >= r->zin_len) {
        r->stats.gzip_unterminated = 1; /* the compressed file itself was cut */
        return 0;
      }
    } else if (zr != Z_OK) {
      r->err_msg = "gzip data is corrupt";
      /* What zlib wrote before the bad data is good: hand it out first (a
       * small file is inflated by one call, which used to lose it all). */
      if (*got > 0) {
        r->z_error = 1;
        return 0;
      }
      return OSK_EFORMAT;
    }
    if (*got > 0) return 0;
  }
}

static int reader_alloc(osk_reader_t **out, const osk_reader_opts_t *opts) {
  init_classes();
  osk_reader_t *r = calloc(1, sizeof *r);
  if (!r) return OSK_ENOMEM;
  r->fd = -1;
  r->spool_fd = -1;
  if (opts) r->opts = *opts;
  if (!r->opts.chunk_bytes) r->opts.chunk_bytes = DEFAULT_CHUNK;
  if (!r->opts.max_unit_bytes) r->opts.max_unit_bytes = DEFAULT_MAX_UNIT;
  if (r->opts.chunk_bytes > r->opts.max_unit_bytes) r->opts.chunk_bytes = r->opts.max_unit_bytes;
  r->cap = r->opts.chunk_bytes;
  r->buf = malloc(r->cap + 1);
  r->scap = r->cap;
  r->scratch = malloc(r->scap + 1);
  /* Compressed input is read in pieces of at most 256 KiB (zlib's output,
   * not its input, fills the parse buffer). */
  r->zin_cap = r->cap < ZIN_BYTES ? (r->cap < 4096 ? 4096 : r->cap) : ZIN_BYTES;
  r->zin = malloc(r->zin_cap);
  if (!r->buf || !r->scratch || !r->zin) {
    osk_reader_free(r);
    return OSK_ENOMEM;
  }
  r->buf[0] = 0;
  r->stats.peak_buffer = r->cap;
  *out = r;
  return 0;
}

/* Reads the first bytes and switches to zlib on the gzip magic. */
static int sniff(osk_reader_t *r, osk_error_t *err) {
  while (r->zin_len < 2 && !r->src_eof) {
    ssize_t got = raw_read(r, r->zin + r->zin_len, r->zin_cap - r->zin_len);
    if (got < 0) {
      set_err(err, OSK_EIO, r->io_msg ? r->io_msg : "cannot read the trace", 0, errno);
      return OSK_EIO;
    }
    if (got == 0) r->src_eof = 1;
    r->zin_len += (size_t)got;
  }
  if (r->zin_len >= 2 && r->zin[0] == 0x1f && r->zin[1] == 0x8b) {
    r->stats.gzip = 1;
    r->stats.compressed_bytes = r->zin_len;
    if (inflateInit2(&r->zs, 16 + MAX_WBITS) != Z_OK) {
      set_err(err, OSK_ENOMEM, "zlib initialization failed", 0, 0);
      return OSK_ENOMEM;
    }
    r->zs_live = 1;
  }
  return 0;
}

/* The start of both opens: the arguments checked (`missing` says what is
 * missing, or NULL), *out cleared, a reader allocated. 0, or the code,
 * reported in err. */
static int open_begin(osk_reader_t **out, const char *missing, const osk_reader_opts_t *opts,
                      osk_reader_t **r, osk_error_t *err) {
  set_err(err, 0, "", 0, 0);
  if (missing) {
    set_err(err, OSK_EINVAL, missing, 0, 0);
    return OSK_EINVAL;
  }
  *out = NULL;
  int rc = reader_alloc(r, opts);
  if (rc) set_err(err, rc, "out of memory", 0, 0);
  return rc;
}

/* The end of both opens: the first bytes read, then r is the caller's
 * (or freed on failure). */
static int open_end(osk_reader_t *r, osk_reader_t **out, osk_error_t *err) {
  int rc = sniff(r, err);
  if (rc) {
    osk_reader_free(r);
    return rc;
  }
  *out = r;
  return 0;
}

/* The copy of a pipe for the second pass: a file of our own, created with
 * O_EXCL (mkstemp) in $TMPDIR (else /tmp) and unlinked at once, so nothing
 * is left behind however the process ends; its space is freed when the
 * reader closes it. Returns 0, or -1 with errno set. */
static int spool_create(void) {
  const char *dir = getenv("TMPDIR");
  if (!dir || !*dir) dir = "/tmp";
  char path[4096];
  int n = snprintf(path, sizeof path, "%s/opskew-pipe-XXXXXX", dir);
  if (n < 0 || (size_t)n >= sizeof path) {
    errno = ENAMETOOLONG;
    return -1;
  }
  /* Close-on-exec from the start: another thread's fork+exec never inherits it. */
  int fd = mkostemp(path, O_CLOEXEC);
  if (fd < 0) return -1;
  unlink(path); /* the regular file mkostemp just created for us, by name */
  return fd;
}

static int spool_open(osk_reader_t *r) {
  r->spool_fd = spool_create();
  return r->spool_fd < 0 ? -1 : 0;
}

int osk_reader_spool(const char *path, int *fd_out, osk_error_t *err) {
  set_err(err, 0, "", 0, 0);
  if (!path || !fd_out) {
    set_err(err, OSK_EINVAL, "no path given", 0, 0);
    return OSK_EINVAL;
  }
  *fd_out = -1;
  int in = strcmp(path, "-") == 0 ? fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 0) : open(path, O_RDONLY | O_CLOEXEC);
  struct stat st;
  int e = 0;
  if (in < 0 || fstat(in, &st) != 0)
    e = errno;
  else if (S_ISDIR(st.st_mode))
    e = EISDIR;
  if (e) {
    if (in >= 0) close(in);
    set_err(err, OSK_EIO, "cannot open the trace", 0, e);
    return OSK_EIO;
  }
  if (S_ISREG(st.st_mode)) {
    *fd_out = in;
    return 0;
  }
  int copy = spool_create();
  if (copy < 0) {
    int e = errno;
    close(in);
    set_err(err, OSK_EIO, "cannot create a temporary copy of the piped trace", 0, e);
    return OSK_EIO;
  }
  char buf[1 << 16];
  for (;;) {
    ssize_t got = read(in, buf, sizeof buf);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      int e = errno;
      close(in);
      close(copy);
      set_err(err, OSK_EIO, "cannot read the trace", 0, e);
      return OSK_EIO;
    }
    if (got == 0) break;
    for (ssize_t done = 0; done < got;) {
      ssize_t w = write(copy, buf + done, (size_t)(got - done));
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        int e = w < 0 ? errno : ENOSPC;
        close(in);
        close(copy);
        set_err(err, OSK_EIO, "cannot write the temporary copy of the piped trace", 0, e);
        return OSK_EIO;
      }
      done += w;
    }
  }
  close(in);
  if (lseek(copy, 0, SEEK_SET) != 0) {
    int e = errno;
    close(copy);
    set_err(err, OSK_EIO, "cannot rewind the temporary copy of the piped trace", 0, e);
    return OSK_EIO;
  }
  *fd_out = copy;
  return 0;
}

int osk_reader_open(osk_reader_t **out, const char *path, const osk_reader_opts_t *opts,
                    osk_error_t *err) {
  osk_reader_t *r;
  int rc = open_begin(out, !out || !path ? "no path given" : NULL, opts, &r, err);
  if (rc) return rc;
  const char *what = "cannot open the trace";
  struct stat st;
  if (strcmp(path, "-") == 0) /* standard input; our own descriptor, which free closes */
    r->fd = fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 0);
  else
    r->fd = open(path, O_RDONLY | O_CLOEXEC);
  if (r->fd < 0 || fstat(r->fd, &st) != 0) goto fail;
  if (S_ISDIR(st.st_mode)) {
    errno = EISDIR;
    goto fail;
  }
  if (S_ISREG(st.st_mode)) {
    r->start_off = lseek(r->fd, 0, SEEK_CUR);
    if (r->start_off < 0) goto fail;
    pass_begins(r, st.st_size > r->start_off ? (uint64_t)(st.st_size - r->start_off) : 0);
  } else if (r->opts.rewindable) {
    r->start_off = -1;
    if (spool_open(r)) { /* reported only if a rewind needs the copy */
      r->spool_errno = errno;
      r->spool_msg = "cannot create a temporary copy of the piped trace";
    }
  } else {
    r->start_off = -1;
  }
  if (!S_ISREG(st.st_mode)) pass_begins(r, 0);
  return open_end(r, out, err);
fail:;
  int e = errno;
  osk_reader_free(r);
  set_err(err, OSK_EIO, what, 0, e);
  return OSK_EIO;
}

int osk_reader_open_mem(osk_reader_t **out, const void *data, size_t len, size_t piece,
                        const osk_reader_opts_t *opts, osk_error_t *err) {
  osk_reader_t *r;
  int rc = open_begin(out, !out || (!data && len) ? "no data given" : NULL, opts, &r, err);
  if (rc) return rc;
  static const unsigned char empty[1] = {0};
  r->mem = len ? data : empty;
  r->mem_len = len;
  r->piece = piece;
  pass_begins(r, len);
  return open_end(r, out, err);
}

/* Frees what one read built up (zlib, members) so the reader can read again. */
static void free_parse_state(osk_reader_t *r) {
  if (r->zs_live) inflateEnd(&r->zs);
  r->zs_live = 0;
  for (size_t i = 0; i < r->n_meta; i++) {
    free(r->meta[i].key);
    free(r->meta[i].value);
  }
  for (size_t i = 0; i < r->n_objects; i++) {
    free(r->objects[i].key);
    free(r->objects[i].json);
  }
  r->n_meta = r->n_objects = 0;
  r->events_reached = 0;
  r->meta_before = r->objects_before = 0;
}

int osk_reader_rewind(osk_reader_t *r, osk_error_t *err) {
  set_err(err, 0, "", 0, 0);
  if (!r) {
    set_err(err, OSK_EINVAL, "no reader given", 0, 0);
    return OSK_EINVAL;
  }
  /* The next pass reads what this one did: a pipe's copy holds what came. */
  uint64_t total = r->spool_fd >= 0 ? r->raw_done : r->src_total;
  if (r->mem) {
    r->mem_pos = 0;
  } else if (r->spool_fd >= 0) { /* a pipe: read on from the copy of what came */
    close(r->fd);
    r->fd = r->spool_fd;
    r->spool_fd = -1;
    r->start_off = 0; /* the copy rewinds as a file from now on */
    if (lseek(r->fd, 0, SEEK_SET) != 0) {
      set_err(err, OSK_EIO, "cannot read the temporary copy of the piped trace", 0, errno);
      return OSK_EIO;
    }
  } else if (r->start_off < 0 && r->spool_msg) { /* the copy this read needs failed */
    set_err(err, OSK_EIO, r->spool_msg, 0, r->spool_errno);
    return OSK_EIO;
  } else if (r->start_off < 0 || lseek(r->fd, r->start_off, SEEK_SET) != r->start_off) {
    set_err(err, OSK_EIO, "the trace cannot be read a second time (a pipe opened without rewindable)",
            0, r->start_off < 0 ? ESPIPE : errno);
    return OSK_EIO;
  }
  free_parse_state(r);
  memset(&r->zs, 0, sizeof r->zs);
  size_t peak = r->stats.peak_buffer;
  memset(&r->stats, 0, sizeof r->stats);
  r->stats.peak_buffer = peak;
  r->src_eof = r->z_ended = r->z_error = 0;
  r->zin_len = r->zin_pos = 0;
  r->len = r->pos = r->slen = 0;
  r->base = 0;
  r->eof = 0;
  r->buf[0] = 0;
  r->state = S_START;
  r->ev_return = r->c_is_obj = r->used = 0;
  r->key_len = 0;
  r->key_truncated = 0;
  r->ev_marks = 0;
  r->err_at = r->err_msg = r->io_msg = NULL;
  pass_begins(r, total);
  return sniff(r, err);
}

void osk_reader_free(osk_reader_t *r) {
  if (!r) return;
  if (r->fd >= 0) close(r->fd);
  if (r->spool_fd >= 0) close(r->spool_fd);
  free_parse_state(r);
  free(r->zin);
  free(r->buf);
  free(r->scratch);
  free(r);
}

const osk_reader_stats_t *osk_reader_stats(const osk_reader_t *r) { return &r->stats; }

size_t osk_reader_meta_count(const osk_reader_t *r) { return r ? r->n_meta : 0; }

void osk_reader_members_before_events(const osk_reader_t *r, size_t *n_meta, size_t *n_objects) {
  int reached = r && r->events_reached;
  if (n_meta) *n_meta = !r ? 0 : reached ? r->meta_before : r->n_meta;
  if (n_objects) *n_objects = !r ? 0 : reached ? r->objects_before : r->n_objects;
}

int osk_reader_meta_get(const osk_reader_t *r, size_t i, osk_str_t *key, osk_str_t *value,
                        int *is_string) {
  if (!r || i >= r->n_meta) return OSK_ERANGE;
  const meta_entry_t *m = &r->meta[i];
  if (key) *key = (osk_str_t){m->key, m->key_len};
  if (value) *value = (osk_str_t){m->value, m->value_len};
  if (is_string) *is_string = m->is_string;
  return 0;
}

size_t osk_reader_object_count(const osk_reader_t *r) { return r ? r->n_objects : 0; }

int osk_reader_object_get(const osk_reader_t *r, size_t i, osk_str_t *key, osk_str_t *json) {
  if (!r || i >= r->n_objects) return OSK_ERANGE;
  const object_entry_t *o = &r->objects[i];
  if (key) *key = (osk_str_t){o->key, o->key_len};
  if (json) *json = (osk_str_t){o->json, o->json_len};
  return 0;
}

int osk_reader_object_find(const osk_reader_t *r, const char *key, osk_str_t *json) {
  if (!r || !key) return OSK_EINVAL;
  size_t n = strlen(key);
  for (size_t i = r->n_objects; i-- > 0;) {
    const object_entry_t *o = &r->objects[i];
    if (o->key_len == n && memcmp(o->key, key, n) == 0) {
      if (json) *json = (osk_str_t){o->json, o->json_len};
      return 0;
    }
  }
  return OSK_ERANGE;
}

/* ------------------------------------------------------------- scanning */

static int hex4(osk_reader_t *r, const char *s, const char *end, unsigned *cp) {
  unsigned v = 0;
  for (int i = 0; i < 4; i++) {
    if (s + i >= end) return P_MORE;
    unsigned char c = (unsigned char)s[i];
    if (!(cls[c] & C_HEX)) FAIL(r, s + i, "invalid \\u escape: expected 4 hex digits");
    v = v * 16 + (unsigned)(c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10);
  }
  *cp = v;
  return P_OK;
}

static char *put_utf8(char *d, unsigned cp) {
  if (cp < 0x80) {
    *d++ = (char)cp;
  } else if (cp < 0x800) {
    *d++ = (char)(0xC0 | (cp >> 6));
    *d++ = (char)(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    *d++ = (char)(0xE0 | (cp >> 12));
    *d++ = (char)(0x80 | ((cp >> 6) & 0x3F));
    *d++ = (char)(0x80 | (cp & 0x3F));
  } else {
    *d++ = (char)(0xF0 | (cp >> 18));
    *d++ = (char)(0x80 | ((cp >> 12) & 0x3F));
    *d++ = (char)(0x80 | ((cp >> 6) & 0x3F));
    *d++ = (char)(0x80 | (cp & 0x3F));
  }
  return d;
}

/* The slow path of a string body, from the first backslash at s. `d` is the
 * output (NULL to validate only). */
static int string_escaped(osk_reader_t *r, const char *s, const char *end, char *d, char **dend,
                          const char **next) {
  for (;;) {
    while (!(cls[U8(s)] & C_STOP)) {
      if (d) *d++ = *s;
      s++;
    }
    if (s >= end) return P_MORE;
    unsigned char c = (unsigned char)*s;
    if (c == '"') break;
    if (c != '\\') FAIL(r, s, "control character in a string (must be escaped)");
    if (s + 1 >= end) return P_MORE;
    char out;
    switch (s[1]) {
    case '"': out = '"'; break;
    case '\\': out = '\\'; break;
    case '/': out = '/'; break;
    case 'b': out = '\b'; break;
    case 'f': out = '\f'; break;
    case 'n': out = '\n'; break;
    case 'r': out = '\r'; break;
    case 't': out = '\t'; break;
    case 'u': {
      unsigned cp;
      int rc = hex4(r, s + 2, end, &cp);
      if (rc) return rc;
      s += 6;
      if (cp >= 0xD800 && cp <= 0xDBFF) {
        /* A high surrogate pairs with an immediately following \uDC00-\uDFFF;
         * to know whether it does, those 6 bytes must be in the buffer. */
        if (s >= end || (s[0] == '\\' && s + 1 >= end)) return P_MORE;
        unsigned lo = 0;
        if (s[0] == '\\' && s[1] == 'u') {
          rc = hex4(r, s + 2, end, &lo);
          if (rc) return rc;
        }
        if (lo >= 0xDC00 && lo <= 0xDFFF) {
          cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          s += 6;
        } else {
          cp = 0xFFFD; /* a lone high surrogate has no UTF-8 form */
          r->stats.lone_surrogates++;
        }
      } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
        cp = 0xFFFD;
        r->stats.lone_surrogates++;
      }
      if (d) d = put_utf8(d, cp);
      continue;
    }
    default:
      FAIL(r, s, "invalid escape in a string");
    }
    if (d) *d++ = out;
    s += 2;
  }
  if (dend) *dend = d;
  *next = s + 1;
  return P_OK;
}

/* A string at p (which is the opening quote). With `out`, the decoded string
 * points into the buffer when it has no escapes, else into the scratch area. */
static int scan_string(osk_reader_t *r, const char *p, const char *end, osk_str_t *out,
                       const char **next) {
  const char *s = p + 1;
  while (!(cls[U8(s)] & C_STOP)) s++;
  if (*s == '"' && s < end) {
    if (out) *out = (osk_str_t){p + 1, (size_t)(s - p - 1)};
    *next = s + 1;
    return P_OK;
  }
  if (s >= end) return P_MORE;
  if (*s != '\\') FAIL(r, s, "control character in a string (must be escaped)");
  if (!out) return string_escaped(r, s, end, NULL, NULL, next);
  char *d0 = r->scratch + r->slen, *d = d0;
  size_t plain = (size_t)(s - p - 1);
  memcpy(d, p + 1, plain);
  d += plain;
  char *dend;
  int rc = string_escaped(r, s, end, d, &dend, next);
  if (rc) return rc;
  out->ptr = d0;
  out->len = (size_t)(dend - d0);
  r->slen += out->len;
  return P_OK;
}

/* A number at p, validated against the JSON grammar. */
static int scan_number(osk_reader_t *r, const char *p, const char *end, const char **next,
                       int *is_integer) {
  const char *s = p;
  if (*s == '-') s++;
  if (s >= end) return P_MORE;
  if (*s == '0') {
    s++;
    if (IS_DIGIT(s)) FAIL(r, s, "leading zero in a number");
  } else if (IS_DIGIT(s)) {
    while (IS_DIGIT(s)) s++;
  } else {
    FAIL(r, s, "invalid number");
  }
  int integer = 1;
  if (*s == '.') {
    integer = 0;
    s++;
    if (s >= end) return P_MORE;
    if (!IS_DIGIT(s)) FAIL(r, s, "invalid number: expected a digit after '.'");
    while (IS_DIGIT(s)) s++;
  }
  if (*s == 'e' || *s == 'E') {
    integer = 0;
    s++;
    if (s >= end) return P_MORE;
    if (*s == '+' || *s == '-') s++;
    if (s >= end) return P_MORE;
    if (!IS_DIGIT(s)) FAIL(r, s, "invalid number: expected a digit in the exponent");
    while (IS_DIGIT(s)) s++;
  }
  /* A number touching the end of the data may go on in the next chunk. */
  if (s >= end) return P_MORE;
  if (is_integer) *is_integer = integer;
  *next = s;
  return P_OK;
}

static const uint64_t pow10_u64[20] = {1ull,
                                       10ull,
                                       100ull,
                                       1000ull,
                                       10000ull,
                                       100000ull,
                                       1000000ull,
                                       10000000ull,
                                       100000000ull,
                                       1000000000ull,
                                       10000000000ull,
                                       100000000000ull,
                                       1000000000000ull,
                                       10000000000000ull,
                                       100000000000000ull,
                                       1000000000000000ull,
                                       10000000000000000ull,
                                       100000000000000000ull,
                                       1000000000000000000ull,
                                       10000000000000000000ull};

/* Declared in reader_internal.h. Integer arithmetic rather than strtod:
 * Kineto's "1212076812889.310" must become exactly 1212076812889310 ns so that
 * equal timestamps compare equal, which a double near 1e15 does not promise
 * after the multiplication by 1000.
 *
 * Exact for any number of digits and any exponent, with one rounding: the
 * value is 0.d1d2d3... x 10^K ns (d1 the first nonzero digit, K counted
 * without limit from the text and the exponent). An int64 has at most 19
 * digits, so the result's integer part lies within d1..d19 whenever it fits,
 * and to nearest with ties away from zero needs only the first digit after
 * it: the rounding digit is either in the 19 kept digits or the 20th, never
 * a digit already rounded (the old parser rounded the 19 digits first, then
 * the result: 1.00049999999999999999999 us became 1001 ns). */
#define EXP_ABSURD 100000000000000000LL /* 1e17: |exponent| at or above is out of range */

int osk__us_text_to_ns(const char *s, const char *e, int64_t *out) {
  int neg = 0;
  if (s < e && *s == '-') {
    neg = 1;
    s++;
  }
  uint64_t mant = 0;  /* the first (at most 19) significant digits */
  int nk = 0;         /* how many digits mant holds */
  int d20 = -1;       /* the 20th significant digit, -1 if none */
  int64_t point = 0;  /* K before the exponent: integer digits from d1 on */
  int seen_dot = 0, seen_sig = 0;
  for (; s < e; s++) {
    unsigned dig = (unsigned)(unsigned char)*s - '0';
    if (dig <= 9) {
      if (!seen_sig) {
        if (dig == 0) {
          if (seen_dot) point--;
          continue;
        }
        seen_sig = 1;
      }
      if (!seen_dot) point++;
      if (nk < 19) {
        mant = mant * 10 + dig;
        nk++;
      } else if (d20 < 0) {
        d20 = (int)dig;
      }
      continue;
    }
    if (*s == '.') {
      seen_dot = 1;
      continue;
    }
    break; /* 'e' or 'E' */
  }
  int64_t ex = 0;
  int absurd = 0;
  if (s < e) {
    s++;
    int eneg = 0;
    if (s < e && (*s == '+' || *s == '-')) eneg = *s++ == '-';
    for (; s < e; s++) {
      if (ex >= EXP_ABSURD) {
        absurd = 1;
        break;
      }
      ex = ex * 10 + (*s - '0');
    }
    if (ex >= EXP_ABSURD) absurd = 1;
    if (eneg) ex = -ex;
  }
  if (!seen_sig) { /* zero, whatever its exponent */
    *out = 0;
    return 0;
  }
  if (absurd) return -1;
  int64_t k = point + ex + 3; /* microseconds to nanoseconds */
  uint64_t v;
  if (k > 19) return -1;
  if (k < 0) {
    v = 0; /* below 0.1 ns */
  } else if (k == 0) {
    v = mant / pow10_u64[nk - 1] >= 5; /* 0.d1... rounds to 1 from 0.5 on */
  } else if (k < nk) {
    uint64_t p = pow10_u64[nk - k];
    v = mant / p;
    uint64_t rem = mant % p;
    if (rem >= p - rem) v++; /* the fraction is at least one half */
  } else if (k == nk) {
    v = mant + (d20 >= 5);
  } else { /* fewer digits than the integer part: exact, no rounding */
    uint64_t p = pow10_u64[k - nk];
    if (mant > UINT64_MAX / p) return -1;
    v = mant * p;
  }
  if (v > (uint64_t)INT64_MAX) return -1;
  *out = neg ? -(int64_t)v : (int64_t)v;
  return 0;
}

static int skip_value(osk_reader_t *r, const char *p, const char *end, const char **next,
                      int depth);

static int scan_literal(osk_reader_t *r, const char *p, const char *end, const char *lit,
                        size_t n, const char **next) {
  for (size_t i = 0; i < n; i++) {
    if (p + i >= end) return P_MORE;
    if (p[i] != lit[i]) FAIL(r, p + i, "invalid literal (expected true, false or null)");
  }
  *next = p + n;
  return P_OK;
}

/* ------------------------------------------------------------ containers */

/* The helpers below walk an object or array member by member; P_NEXT, their
 * own code, says that one more follows. Inline: every key of every event
 * passes through them. */
enum { P_NEXT = P_HEADER + 1 };

static int key_is(osk_str_t k, const char *lit, size_t n) {
  return k.len == n && memcmp(k.ptr, lit, n) == 0;
}

/* The start of a container whose opening bracket is just before p: P_OK
 * with *next past `close` when it is empty, else P_NEXT with *next at its
 * first member or element. */
static inline int container_open(const char *p, const char *end, char close, const char **next) {
  p = skip_ws(p);
  if (p >= end) return P_MORE;
  *next = *p == close ? p + 1 : p;
  return *p == close ? P_OK : P_NEXT;
}

/* An object member's key (into *key; NULL: not kept) and its ':'; *next
 * gets where its value starts. */
static inline int member_key(osk_reader_t *r, const char *p, const char *end, osk_str_t *key,
                             const char **next) {
  if (*p != '"') FAIL(r, p, "expected a string key");
  int rc = scan_string(r, p, end, key, &p);
  if (rc) return rc;
  p = skip_ws(p);
  if (p >= end) return P_MORE;
  if (*p != ':') FAIL(r, p, "expected ':' after a key");
  p = skip_ws(p + 1);
  if (p >= end) return P_MORE;
  *next = p;
  return P_OK;
}

/* After a member or element: a ',' and the next one (P_NEXT, *next at it),
 * or the closing bracket (P_OK, *next past it); anything else fails with
 * `msg`. */
static inline int container_next(osk_reader_t *r, const char *p, const char *end, char close,
                                 const char *msg, const char **next) {
  p = skip_ws(p);
  if (p >= end) return P_MORE;
  if (*p == ',') {
    p = skip_ws(p + 1);
    if (p >= end) return P_MORE;
    *next = p;
    return P_NEXT;
  }
  if (*p != close) FAIL(r, p, msg);
  *next = p + 1;
  return P_OK;
}

/* Skips an object or array body after its opening bracket. */
static int skip_container(osk_reader_t *r, const char *p, const char *end, const char **next,
                          int depth, int is_obj) {
  if (depth > MAX_DEPTH) FAIL(r, p - 1, "nesting deeper than 1024 levels");
  char close = is_obj ? '}' : ']';
  const char *msg = is_obj ? "expected ',' or '}' in an object" : "expected ',' or ']' in an array";
  int rc = container_open(p, end, close, &p);
  while (rc == P_NEXT) {
    if (is_obj && (rc = member_key(r, p, end, NULL, &p)) != P_OK) return rc;
    if ((rc = skip_value(r, p, end, &p, depth + 1)) != P_OK) return rc;
    rc = container_next(r, p, end, close, msg, &p);
  }
  if (rc == P_OK) *next = p;
  return rc;
}

static int skip_value(osk_reader_t *r, const char *p, const char *end, const char **next,
                      int depth) {
  if (p >= end) return P_MORE;
  switch (*p) {
  case '"':
    return scan_string(r, p, end, NULL, next);
  case '{':
    return skip_container(r, p + 1, end, next, depth, 1);
  case '[':
    return skip_container(r, p + 1, end, next, depth, 0);
  case 't':
    return scan_literal(r, p, end, "true", 4, next);
  case 'f':
    return scan_literal(r, p, end, "false", 5, next);
  case 'n':
    return scan_literal(r, p, end, "null", 4, next);
  default:
    if (*p == '-' || IS_DIGIT(p)) return scan_number(r, p, end, next, NULL);
    FAIL(r, p, "expected a value");
  }
}

/* ---------------------------------------------------------------- events */

/* A time field: a number of microseconds; anything else marks the event bad. */
static int parse_time(osk_reader_t *r, const char *p, const char *end, const char **next,
                      int64_t *out, unsigned *has, unsigned bit) {
  if (*p == '-' || IS_DIGIT(p)) {
    int rc = scan_number(r, p, end, next, NULL);
    if (rc) return rc;
    if (osk__us_text_to_ns(p, *next, out) == 0)
      *has |= bit;
    else
      *has |= OSK_READER_EV_BAD | OSK_READER_EV_RANGE;
    return P_OK;
  }
  *has |= OSK_READER_EV_BAD;
  return skip_value(r, p, end, next, 2);
}

static int parse_id(osk_reader_t *r, const char *p, const char *end, const char **next,
                    osk_reader_id_t *id, unsigned *has) {
  if (*p == '"') {
    id->kind = OSK_READER_ID_STR;
    id->num = 0;
    return scan_string(r, p, end, &id->str, next);
  }
  if (*p == '-' || IS_DIGIT(p)) {
    int integer;
    int rc = scan_number(r, p, end, next, &integer);
    if (rc) return rc;
    /* Integers that fit int64 compare as numbers; any other number keeps its
     * text, so 1.5 and "1.5" name the same thread, as they print the same. */
    if (integer && (size_t)(*next - p) - (*p == '-') <= 18) {
      int64_t v = 0;
      const char *s = p + (*p == '-');
      for (; s < *next; s++) v = v * 10 + (*s - '0');
      id->kind = OSK_READER_ID_INT;
      id->num = *p == '-' ? -v : v;
      id->str = (osk_str_t){NULL, 0};
    } else {
      id->kind = OSK_READER_ID_STR;
      id->str = (osk_str_t){p, (size_t)(*next - p)};
    }
    return P_OK;
  }
  *has |= OSK_READER_EV_BAD;
  return skip_value(r, p, end, next, 2);
}

/* An integer id (args.correlation, args["External id"], the event's "id"):
 * an integer number of at most 18 digits sets *out and `bit` in *has; any
 * other value clears both (a repeated key: the last one wins) and is skipped,
 * without marking the event bad (a string flow id is valid Chrome JSON). */
static int parse_int_id(osk_reader_t *r, const char *p, const char *end, const char **next,
                        int64_t *out, unsigned *has, unsigned bit) {
  *has &= ~bit;
  *out = 0;
  if (*p == '-' || IS_DIGIT(p)) {
    int integer;
    int rc = scan_number(r, p, end, next, &integer);
    if (rc) return rc;
    const char *s = p + (*p == '-');
    if (integer && *next - s <= 18) {
      int64_t v = 0;
      for (; s < *next; s++) v = v * 10 + (*s - '0');
      *out = *p == '-' ? -v : v;
      *has |= bit;
    }
    return P_OK;
  }
  return skip_value(r, p, end, next, 3);
}

/* args: args.name is kept (metadata events name threads with it), the ids
 * correlation and "External id" are read, and the keys of the option marks
 * are noted. One dispatch on the key's length, as parse_event's: most keys
 * (Kineto's "Record function id", "Ev Idx", "Input type", ...) cost one
 * switch and at most one memcmp. */
static int parse_args(osk_reader_t *r, const char *p, const char *end, const char **next,
                      osk_reader_event_t *ev) {
  const char *s;
  int rc = container_open(p + 1, end, '}', &s);
  while (rc == P_NEXT) {
    osk_str_t key;
    if ((rc = member_key(r, s, end, &key, &s)) != P_OK) return rc;
    switch (key.len) {
    case 4:
      if (key_is(key, "name", 4) && *s == '"') {
        rc = scan_string(r, s, end, &ev->arg_name, &s);
        goto value_done;
      }
      break;
    case 5: /* the keys torch.profiler's options add (osk_reader_marks_t) */
      if (key_is(key, "flops", 5)) r->ev_marks |= MARK_FLOPS;
      break;
    case 10:
      if (key_is(key, "Input Dims", 10)) r->ev_marks |= MARK_INPUT_DIMS;
      break;
    case 11:
      if (key_is(key, "correlation", 11)) {
        rc = parse_int_id(r, s, end, &s, &ev->correlation, &ev->has, OSK_READER_EV_CORRELATION);
        goto value_done;
      }
      if (key_is(key, "External id", 11)) {
        rc = parse_int_id(r, s, end, &s, &ev->external_id, &ev->has, OSK_READER_EV_EXTERNAL_ID);
        goto value_done;
      }
      break;
    case 16:
      if (key_is(key, "Module Hierarchy", 16)) r->ev_marks |= MARK_MODULE_HIERARCHY;
      break;
    default:
      break;
    }
    rc = skip_value(r, s, end, &s, 3);
  value_done:
    if (rc) return rc;
    rc = container_next(r, s, end, '}', "expected ',' or '}' in an object", &s);
  }
  if (rc == P_OK) *next = s;
  return rc;
}

/* One element of traceEvents. Elements that are not objects are valid JSON
 * but not events: they are skipped and counted as bad. *is_event says which. */
static int parse_event(osk_reader_t *r, const char *p, const char *end, const char **next,
                       osk_reader_event_t *ev, int *is_event) {
  r->slen = 0;
  if (*p != '{') {
    *is_event = 0;
    return skip_value(r, p, end, next, 1);
  }
  *is_event = 1;
  memset(ev, 0, sizeof *ev);
  r->ev_marks = 0; /* a unit parsed again after "need more" starts afresh */
  ev->offset = r->base + (uint64_t)(p - r->buf);
  const char *s;
  int rc = container_open(p + 1, end, '}', &s);
  while (rc == P_NEXT) {
    osk_str_t key;
    if ((rc = member_key(r, s, end, &key, &s)) != P_OK) return rc;
    /* Dispatch on the keys the analysis uses; the rest are skipped. A
     * repeated key overrides the earlier one, as in most JSON readers. */
    osk_str_t *str_field = NULL;
    unsigned str_bit = 0;
    switch (key.len) {
    case 2:
      if (key_is(key, "ph", 2)) str_field = &ev->ph;
      else if (key_is(key, "ts", 2)) {
        const char *v = s;
        rc = parse_time(r, s, end, &s, &ev->ts_ns, &ev->has, OSK_READER_EV_TS);
        ev->ts_at = (uint32_t)(v - p);
        ev->ts_len = (uint32_t)(s - v);
        goto value_done;
      } else if (key_is(key, "id", 2)) {
        rc = parse_int_id(r, s, end, &s, &ev->id, &ev->has, OSK_READER_EV_ID);
        goto value_done;
      }
      break;
    case 3:
      if (key_is(key, "cat", 3)) str_field = &ev->cat;
      else if (key_is(key, "dur", 3)) {
        const char *v = s;
        rc = parse_time(r, s, end, &s, &ev->dur_ns, &ev->has, OSK_READER_EV_DUR);
        ev->dur_at = (uint32_t)(v - p);
        ev->dur_len = (uint32_t)(s - v);
        goto value_done;
      } else if (key_is(key, "pid", 3)) {
        rc = parse_id(r, s, end, &s, &ev->pid, &ev->has);
        goto value_done;
      } else if (key_is(key, "tid", 3)) {
        rc = parse_id(r, s, end, &s, &ev->tid, &ev->has);
        goto value_done;
      }
      break;
    case 4:
      if (key_is(key, "name", 4)) {
        str_field = &ev->name;
        str_bit = OSK_READER_EV_NAME;
      } else if (key_is(key, "args", 4) && *s == '{') {
        const char *v = s;
        rc = parse_args(r, s, end, &s, ev);
        ev->args_at = (uint32_t)(v - p);
        ev->args_len = (uint32_t)(s - v);
        goto value_done;
      }
      break;
    default:
      break;
    }
    if (str_field) {
      if (*s == '"') {
        rc = scan_string(r, s, end, str_field, &s);
        ev->has |= str_bit;
      } else {
        *str_field = (osk_str_t){NULL, 0};
        if (str_bit) ev->has &= ~str_bit;
        ev->has |= OSK_READER_EV_BAD;
        rc = skip_value(r, s, end, &s, 2);
      }
    } else {
      rc = skip_value(r, s, end, &s, 2);
    }
  value_done:
    if (rc) return rc;
    rc = container_next(r, s, end, '}', "expected ',' or '}' in an event", &s);
  }
  if (rc == P_OK) {
    *next = s;
    ev->text = (osk_str_t){p, (size_t)(s - p)};
  }
  return rc;
}

/* ------------------------------------------------------------- document */

/* Copies the current top-level key and a value for keeping; 0, or -1 when
 * out of memory (then nothing is kept: metadata is best effort and the read
 * goes on). */
static int copy_member(const osk_reader_t *r, const char *v, size_t n, char **key, char **value) {
  *key = malloc(r->key_len + 1);
  *value = malloc(n + 1);
  if (!*key || !*value) {
    free(*key);
    free(*value);
    *key = *value = NULL;
    return -1;
  }
  memcpy(*key, r->key, r->key_len);
  (*key)[r->key_len] = 0;
  memcpy(*value, v, n);
  (*value)[n] = 0;
  return 0;
}

static void add_meta(osk_reader_t *r, const char *v, size_t n, int is_string) {
  if (r->n_meta >= META_MAX || r->key_truncated || n > META_VALUE_MAX) return;
  meta_entry_t *m = &r->meta[r->n_meta];
  if (copy_member(r, v, n, &m->key, &m->value)) return;
  m->key_len = r->key_len;
  m->value_len = n;
  m->is_string = is_string;
  r->n_meta++;
}

/* The deepest nesting of objects and arrays in valid JSON text (1 for a
 * flat object). */
static int text_depth(const char *s, size_t n) {
  int d = 0, max = 0;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    if (c == '"') {
      i = osk__json_str_close(s, n, i);
    } else if (c == '{' || c == '[') {
      if (++d > max) max = d;
    } else if (c == '}' || c == ']') {
      d--;
    }
  }
  return max;
}

/* Keeps a top-level object's text (the caller checked the bounds). */
static void add_object(osk_reader_t *r, const char *text, size_t n) {
  object_entry_t *o = &r->objects[r->n_objects];
  if (copy_member(r, text, n, &o->key, &o->json)) return;
  o->key_len = r->key_len;
  o->json_len = n;
  r->n_objects++;
}

/* The names of the backward nodes the autograd engine runs start so. */
static const char BACKWARD_NODE[] = "autograd::engine::evaluate_function";

/* Counts the option marks of one delivered event. */
static void count_marks(osk_reader_t *r, const osk_reader_event_t *ev) {
  osk_reader_marks_t *m = &r->stats.marks;
  if (r->ev_marks) {
    m->input_dims += (r->ev_marks & MARK_INPUT_DIMS) != 0;
    m->module_hierarchy += (r->ev_marks & MARK_MODULE_HIERARCHY) != 0;
    m->flops += (r->ev_marks & MARK_FLOPS) != 0;
  }
  if (key_is(ev->cat, "python_function", 15)) m->python_function++;
  if (key_is(ev->name, "[memory]", 8)) m->memory++;
  if (ev->name.len >= sizeof BACKWARD_NODE - 1 && memcmp(ev->name.ptr, BACKWARD_NODE, sizeof BACKWARD_NODE - 1) == 0)
    m->backward++;
}

/* The walk's state after a member or element of the container it is in:
 * `next` on ',', `done` on `close`; anything else fails with `msg`. */
static inline int walk_after(osk_reader_t *r, const char *p, char close, int next, int done,
                             const char *msg) {
  if (*p != ',' && *p != close) FAIL(r, p, msg);
  r->state = *p == ',' ? next : done;
  return P_OK;
}

/* Runs the state machine over the buffered data. Returns P_MORE with r->pos
 * at the start of the unfinished unit, P_ERR, P_OK at the end of the
 * document, or a negative code from the callback. */
static int walk(osk_reader_t *r, osk_reader_event_fn fn, void *ctx) {
  const char *buf = r->buf;
  const char *end = buf + r->len;
  const char *p = buf + r->pos;
  int rc;
  for (;;) {
    p = skip_ws(p);
    const char *unit = p;
    if (p >= end) {
      r->pos = (size_t)(p - buf);
      return r->state == S_END ? P_OK : P_MORE;
    }
    switch (r->state) {
    case S_START:
      if (r->base == 0 && p == buf && U8(p) == 0xEF) { /* UTF-8 byte order mark */
        if (p + 3 > end) goto more;
        if (U8(p + 1) != 0xBB || U8(p + 2) != 0xBF) FAIL(r, p, "expected '{' or '[' at the start");
        p += 3;
        continue;
      }
      if (*p == '{') {
        r->state = S_OBJ_FIRST;
      } else if (*p == '[') {
        r->stats.array_format = 1;
        r->ev_return = S_END;
        r->state = S_EV_FIRST;
        if (r->opts.header_only) { /* a bare array has no header */
          r->pos = (size_t)(p + 1 - buf);
          return P_HEADER;
        }
      } else {
        FAIL(r, p, "expected '{' or '[' at the start of a trace");
      }
      p++;
      break;
    case S_OBJ_FIRST:
    case S_OBJ_KEY: {
      if (*p == '}' && r->state == S_OBJ_FIRST) {
        r->state = S_END;
        p++;
        break;
      }
      if (*p != '"') FAIL(r, p, "expected a string key");
      osk_str_t key;
      r->slen = 0;
      rc = scan_string(r, p, end, &key, &p);
      if (rc == P_MORE) goto more;
      if (rc) return rc;
      r->key_truncated = key.len > KEY_MAX;
      r->key_len = key.len > KEY_MAX ? KEY_MAX : key.len;
      memcpy(r->key, key.ptr, r->key_len);
      r->state = S_OBJ_COLON;
      break;
    }
    case S_OBJ_COLON:
      if (*p != ':') FAIL(r, p, "expected ':' after a key");
      p++;
      r->state = S_OBJ_VALUE;
      break;
    case S_OBJ_VALUE: {
      int is_events = !r->key_truncated && r->key_len == 11 && memcmp(r->key, "traceEvents", 11) == 0;
      if (*p == '[' && is_events) {
        r->events_reached = 1;
        r->meta_before = r->n_meta;
        r->objects_before = r->n_objects;
        r->ev_return = S_OBJ_AFTER;
        r->state = S_EV_FIRST;
        p++;
        if (r->opts.header_only) {
          r->pos = (size_t)(p - buf);
          return P_HEADER;
        }
        break;
      }
      if (is_events) FAIL(r, p, "traceEvents is not an array");
      if ((*p == '{' || *p == '[') && !r->key_truncated && r->n_objects < OSK_READER_OBJECTS_MAX) {
        /* Kept whole when it fits the bound: parsed as one unit, which waits
         * for more input until the object is complete or the buffered part
         * already exceeds the bound (or the unit limit); then it is read past
         * element by element below, as any other container. */
        r->slen = 0;
        const char *after;
        rc = skip_value(r, p, end, &after, 1);
        if (rc == P_OK && (size_t)(after - unit) <= OSK_READER_OBJECT_MAX_BYTES) {
          /* Too deep an object is not kept either: other JSON readers
           * (Python's json.loads near 1000 levels) may refuse it. */
          if (text_depth(unit, (size_t)(after - unit)) <= OSK_READER_OBJECT_MAX_DEPTH) {
            add_object(r, unit, (size_t)(after - unit));
            p = after;
            r->state = S_OBJ_AFTER;
            break;
          }
        } else {
          if (rc == P_ERR) return rc;
          size_t have = (size_t)(end - unit);
          if (rc == P_MORE && have <= OSK_READER_OBJECT_MAX_BYTES && have < r->opts.max_unit_bytes)
            goto more;
        }
        r->stats.objects_not_kept++;
      }
      if (*p == '[' || *p == '{') {
        r->c_is_obj = *p == '{';
        r->state = S_C_FIRST;
        p++;
        break;
      }
      r->slen = 0;
      if (*p == '"') {
        osk_str_t v;
        rc = scan_string(r, p, end, &v, &p);
        if (rc == P_MORE) goto more;
        if (rc) return rc;
        add_meta(r, v.ptr, v.len, 1);
      } else {
        rc = skip_value(r, p, end, &p, 1);
        if (rc == P_MORE) goto more;
        if (rc) return rc;
        add_meta(r, unit, (size_t)(p - unit), 0);
      }
      r->state = S_OBJ_AFTER;
      break;
    }
    case S_OBJ_AFTER:
      rc = walk_after(r, p, '}', S_OBJ_KEY, S_END, "expected ',' or '}' after a top-level member");
      if (rc) return rc;
      p++;
      break;
    case S_EV_FIRST:
    case S_EV_NEXT: {
      if (*p == ']' && r->state == S_EV_FIRST) {
        r->state = r->ev_return;
        p++;
        break;
      }
      osk_reader_event_t ev;
      int is_event;
      rc = parse_event(r, p, end, &p, &ev, &is_event);
      if (rc == P_MORE) goto more;
      if (rc) return rc;
      r->stats.events++;
      if (!is_event || (ev.has & OSK_READER_EV_BAD)) r->stats.bad_fields++;
      if (is_event && (ev.has & OSK_READER_EV_RANGE)) r->stats.out_of_range++;
      if (is_event) count_marks(r, &ev);
      if (is_event && fn) {
        r->pos = (size_t)(p - buf); /* so a stop leaves a consistent position */
        int cb = fn(ctx, &ev);
        if (cb) return cb < 0 ? cb : OSK_EINVAL;
      }
      r->state = S_EV_AFTER;
      break;
    }
    case S_EV_AFTER:
      rc = walk_after(r, p, ']', S_EV_NEXT, r->ev_return, "expected ',' or ']' after an event");
      if (rc) return rc;
      p++;
      break;
    case S_C_FIRST:
    case S_C_NEXT: {
      char close = r->c_is_obj ? '}' : ']';
      if (*p == close && r->state == S_C_FIRST) {
        r->state = S_OBJ_AFTER;
        p++;
        break;
      }
      r->slen = 0;
      rc = r->c_is_obj ? member_key(r, p, end, NULL, &p) : P_OK;
      if (rc == P_OK) rc = skip_value(r, p, end, &p, 2);
      if (rc == P_MORE) goto more;
      if (rc) return rc;
      r->state = S_C_AFTER;
      break;
    }
    case S_C_AFTER:
      rc = walk_after(r, p, r->c_is_obj ? '}' : ']', S_C_NEXT, S_OBJ_AFTER,
                      r->c_is_obj ? "expected ',' or '}' in an object" : "expected ',' or ']' in an array");
      if (rc) return rc;
      p++;
      break;
    case S_END:
    default:
      FAIL(r, p, "unexpected data after the end of the trace");
    }
    continue;
  more:
    r->pos = (size_t)(unit - buf);
    return P_MORE;
  }
}

/* Moves the unfinished unit to the front and appends input. Returns 0, or
 * a negative code with err filled. */
static int refill(osk_reader_t *r, osk_error_t *err) {
  size_t keep = r->len - r->pos;
  if (r->pos) {
    memmove(r->buf, r->buf + r->pos, keep);
    r->base += r->pos;
    r->len = keep;
    r->pos = 0;
  }
  if (r->len == r->cap) {
    if (r->cap >= r->opts.max_unit_bytes) {
      set_err(err, OSK_ERANGE, "a single event is larger than the reader's limit", r->base, 0);
      return OSK_ERANGE;
    }
    size_t ncap = r->cap * 2;
    if (ncap > r->opts.max_unit_bytes) ncap = r->opts.max_unit_bytes;
    char *nb = realloc(r->buf, ncap + 1);
    if (!nb) goto nomem;
    r->buf = nb;
    char *ns = realloc(r->scratch, ncap + 1);
    if (!ns) goto nomem;
    r->scratch = ns;
    r->cap = r->scap = ncap;
    if (ncap > r->stats.peak_buffer) r->stats.peak_buffer = ncap;
  }
  size_t want = r->cap - r->len;
  if (want > r->opts.chunk_bytes) want = r->opts.chunk_bytes;
  size_t got = 0;
  int rc = src_read(r, r->buf + r->len, want, &got);
  if (rc == OSK_EIO) {
    set_err(err, rc, r->io_msg ? r->io_msg : "cannot read the trace", r->base + r->len, errno);
    return rc;
  }
  if (rc == OSK_EFORMAT && r->base + r->len > 0) {
    /* Corrupt gzip after some JSON: the input ends there, as a cut file
     * does (osk_reader_run then says which), so what came before is read. */
    r->stats.gzip_corrupt = 1;
    rc = 0;
    got = 0;
  }
  if (rc) {
    set_err(err, rc, r->err_msg ? r->err_msg : "gzip data is corrupt", r->base + r->len, 0);
    return rc;
  }
  if (got == 0) r->eof = 1;
  r->len += got;
  r->buf[r->len] = 0;
  r->stats.bytes = r->base + r->len;
  return 0;
nomem:
  set_err(err, OSK_ENOMEM, "out of memory", r->base, 0);
  return OSK_ENOMEM;
}

static const char *truncation_message(int state) {
  switch (state) {
  case S_START:
    return "the trace is empty";
  case S_EV_FIRST:
  case S_EV_NEXT:
  case S_EV_AFTER:
    return "the trace ends inside traceEvents (truncated: a profiler stopped mid-write?)";
  default:
    return "the trace ends before the end of its JSON document (truncated)";
  }
}

/* After a JSON error in gzip input: inflates the rest (into the scratch
 * area, which the failed parse no longer needs) and says whether zlib finds
 * it corrupt (bad data or a bad check value). r->err_msg is kept. */
static int gzip_rest_corrupt(osk_reader_t *r) {
  if (r->stats.gzip_corrupt) return 1;
  const char *msg = r->err_msg;
  int corrupt = 0;
  for (;;) {
    size_t got = 0;
    int rc = src_read(r, r->scratch, r->scap, &got);
    if (rc) {
      corrupt = rc == OSK_EFORMAT;
      break;
    }
    if (got == 0) break;
  }
  r->err_msg = msg;
  return corrupt;
}

int osk_reader_run(osk_reader_t *r, osk_reader_event_fn fn, void *ctx, osk_error_t *err) {
  set_err(err, 0, "", 0, 0);
  if (!r || r->used) {
    set_err(err, OSK_EINVAL, "a reader runs once", 0, 0);
    return OSK_EINVAL;
  }
  r->used = 1;
  for (;;) {
    size_t pos0 = r->pos;
    int rc = walk(r, fn, ctx);
    /* The parser went from pos0 to the end of the data, or to where it
     * stopped (the error's byte, the callback's stop, the header's end). */
    size_t upto = rc == P_MORE || rc == P_OK ? r->len
                  : rc == P_ERR              ? (size_t)(r->err_at - r->buf) + 1
                                             : r->pos;
    if (upto > r->len) upto = r->len;
    if (upto > pos0) r->stats.bytes_scanned += upto - pos0;
    if (rc == P_HEADER) { /* header_only: the members before the events are read */
      r->stats.header_only_stopped = 1;
      r->stats.bytes = r->base + r->pos;
      return 0;
    }
    if (rc == P_OK) {
      if (!r->eof) { /* data may follow the document: it must be white space */
        rc = refill(r, err);
        if (rc) return rc;
        if (r->len > r->pos) continue;
        if (!r->eof) continue;
      }
      r->stats.bytes = r->base + r->len;
      if (r->stats.gzip_corrupt) { /* whole JSON, but zlib rejects what follows or the check */
        set_err(err, OSK_ETRUNCATED,
                "the gzip data is corrupt after the JSON document (a bad check value or trailer): "
                "the trace was read but may be damaged",
                r->base + r->len, 0);
        return OSK_ETRUNCATED;
      }
      return 0;
    }
    if (rc == P_ERR && r->stats.gzip && gzip_rest_corrupt(r)) {
      /* Corrupt deflate data usually inflates to garbage before zlib can
       * tell: broken JSON in a gzip stream that zlib then rejects is the
       * gzip's fault, and is read as the corrupt input it is, up to the
       * break, as a cut file is. */
      uint64_t off = r->base + (uint64_t)(r->err_at - r->buf);
      r->stats.gzip_corrupt = 1;
      set_err(err, OSK_ETRUNCATED,
              "the gzip data is corrupt: its JSON breaks at this point (the trace is read up to it)",
              off, 0);
      r->stats.bytes = off;
      return OSK_ETRUNCATED;
    }
    if (rc == P_ERR) {
      uint64_t off = r->base + (uint64_t)(r->err_at - r->buf);
      /* A NUL at the end of the data is the sentinel, not input. */
      set_err(err, OSK_EFORMAT, r->err_msg, off, 0);
      r->stats.bytes = off;
      return OSK_EFORMAT;
    }
    if (rc != P_MORE) {
      set_err(err, rc, "stopped by the event callback", r->base + r->pos, 0);
      return rc;
    }
    if (r->eof) {
      set_err(err, OSK_ETRUNCATED,
              r->stats.gzip_corrupt ? "the gzip data is corrupt from this point on (the trace is read up to it)"
                                    : truncation_message(r->state),
              r->base + r->len, 0);
      r->stats.bytes = r->base + r->len;
      return OSK_ETRUNCATED;
    }
    /* The unfinished unit is parsed again from its start, but only once the
     * buffered part of it has at least doubled (or the input ended, or the
     * unit reached the reader's limit): the attempts on one unit of n bytes
     * then examine less than 2n bytes before the last one, which examines n,
     * so reading stays linear in the input whatever the size of an event
     * (re-parsing after every chunk made a 250 MB event quadratic). An
     * ordinary event left unfinished at the end of a chunk is short, so one
     * chunk completes it, as before. */
    size_t tried = r->len - r->pos;
    size_t target = tried > r->opts.max_unit_bytes / 2 ? r->opts.max_unit_bytes : 2 * tried;
    do {
      rc = refill(r, err);
      if (rc) return rc;
    } while (!r->eof && r->len - r->pos < target);
  }
}
