/* writer.c: the Chrome trace JSON writer, and the small string builder the
 * summary shares.
 *
 * Format: Kineto's (libkineto/src/output_json.cpp), so that Perfetto,
 * chrome://tracing and HolisticTraceAnalysis read our traces like
 * torch.profiler's: a top-level object with "schemaVersion",
 * "displayTimeUnit", "baseTimeNanoseconds" and "traceEvents"; complete
 * events {"ph":"X","cat":"cpu_op",...} with ts/dur in microseconds and a
 * 3-digit nanosecond fraction, ts relative to baseTimeNanoseconds on the
 * Unix time line; "M" events naming the process and threads. opskew adds a
 * top-level "opskew" object (clock, calibration, losses) and, when events
 * were lost, an instant event that viewers show on the timeline.
 *
 * Speed: timestamps are formatted from integers (no printf per event), names
 * are escaped once per name, and output goes through a 256 KiB buffer.
 */
#include "trace_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ----------------------------------------------------------- string builder */

static int sb_reserve(osk__sb_t *sb, size_t extra) {
  if (sb->failed) return 0;
  if (sb->len + extra + 1 <= sb->cap) return 1;
  size_t cap = sb->cap ? sb->cap : 256;
  while (cap < sb->len + extra + 1) cap *= 2;
  char *p = realloc(sb->buf, cap);
  if (!p) {
    sb->failed = 1;
    return 0;
  }
  sb->buf = p;
  sb->cap = cap;
  return 1;
}

void osk__sb_put(osk__sb_t *sb, const char *s, size_t n) {
  if (!sb_reserve(sb, n)) return;
  memcpy(sb->buf + sb->len, s, n);
  sb->len += n;
  sb->buf[sb->len] = '\0';
}

void osk__sb_puts(osk__sb_t *sb, const char *s) { osk__sb_put(sb, s, strlen(s)); }

void osk__sb_printf(osk__sb_t *sb, const char *fmt, ...) {
  char tmp[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  if (n < 0) {
    sb->failed = 1;
    return;
  }
  if ((size_t)n < sizeof tmp) {
    osk__sb_put(sb, tmp, (size_t)n);
    return;
  }
  if (!sb_reserve(sb, (size_t)n)) return;
  va_start(ap, fmt);
  vsnprintf(sb->buf + sb->len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  sb->len += (size_t)n;
}

void osk__sb_json_str(osk__sb_t *sb, const char *s) {
  size_t need = osk_trace_json_escape(s, NULL, 0);
  if (!sb_reserve(sb, need + 2)) return;
  sb->buf[sb->len++] = '"';
  osk_trace_json_escape(s, sb->buf + sb->len, need + 1);
  sb->len += need;
  sb->buf[sb->len++] = '"';
  sb->buf[sb->len] = '\0';
}

void osk__sb_json_num(osk__sb_t *sb, double v) {
  if (v != v || v > 1e300 || v < -1e300) osk__sb_puts(sb, "null");
  else osk__sb_printf(sb, "%.10g", v);
}

char *osk__sb_finish(osk__sb_t *sb) {
  if (sb->failed) {
    free(sb->buf);
    sb->buf = NULL;
    return NULL;
  }
  if (!sb->buf && !sb_reserve(sb, 0)) return NULL;
  return sb->buf;
}

/* Two digits per step from a table: formatting dominates the writer's CPU
 * time after the copy into the kernel. */
static const char k_digits2[201] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

size_t osk__fmt_u64(char *out, uint64_t v) {
  char tmp[24];
  size_t n = sizeof tmp;
  while (v >= 100) {
    unsigned r = (unsigned)(v % 100);
    v /= 100;
    tmp[--n] = k_digits2[2 * r + 1];
    tmp[--n] = k_digits2[2 * r];
  }
  if (v >= 10) {
    tmp[--n] = k_digits2[2 * v + 1];
    tmp[--n] = k_digits2[2 * v];
  } else {
    tmp[--n] = (char)('0' + v);
  }
  memcpy(out, tmp + n, sizeof tmp - n);
  return sizeof tmp - n;
}

/* ------------------------------------------------------------ JSON escape */

/* Length of a valid UTF-8 sequence starting at p, or 0 if invalid. */
static size_t utf8_len(const unsigned char *p) {
  unsigned c = p[0];
  if (c < 0x80) return 1;
  size_t n;
  unsigned min;
  if ((c & 0xE0) == 0xC0) { n = 2; min = 0x80; c &= 0x1F; }
  else if ((c & 0xF0) == 0xE0) { n = 3; min = 0x800; c &= 0x0F; }
  else if ((c & 0xF8) == 0xF0) { n = 4; min = 0x10000; c &= 0x07; }
  else return 0;
  for (size_t i = 1; i < n; i++) {
    if ((p[i] & 0xC0) != 0x80) return 0; /* also stops at the NUL */
    c = (c << 6) | (p[i] & 0x3F);
  }
  if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return 0;
  return n;
}

size_t osk_trace_json_escape(const char *s, char *out, size_t cap) {
  static const char hex[] = "0123456789abcdef";
  size_t n = 0;
#define OSK__EMIT(ch)                  \
  do {                                 \
    if (n + 1 < cap) out[n] = (ch);    \
    n++;                               \
  } while (0)
  const unsigned char *p = (const unsigned char *)(s ? s : "");
  while (*p) {
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
      size_t k = utf8_len(p);
      if (k == 0) { /* invalid UTF-8 would make the whole file unreadable */
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

typedef struct {
  FILE *f;
  char *buf;
  size_t len;
  size_t cap;
  int failed;
} osk__out_t;

static void out_flush(osk__out_t *o) {
  if (o->len && !o->failed && fwrite(o->buf, 1, o->len, o->f) != o->len) o->failed = 1;
  o->len = 0;
}

static inline void out_put(osk__out_t *o, const char *s, size_t n) {
  if (OSK__UNLIKELY(o->len + n > o->cap)) {
    out_flush(o);
    if (n > o->cap) {
      if (!o->failed && fwrite(s, 1, n, o->f) != n) o->failed = 1;
      return;
    }
  }
  memcpy(o->buf + o->len, s, n);
  o->len += n;
}

static void out_puts(osk__out_t *o, const char *s) { out_put(o, s, strlen(s)); }

/* A string literal, its length computed by the compiler. */
#define OSK__LIT(o, lit) out_put((o), (lit), sizeof(lit) - 1)

/* Microseconds with a 3-digit nanosecond fraction, from an integer. */
static size_t fmt_us(char *p, int64_t ns) {
  size_t n = 0;
  if (ns < 0) {
    p[n++] = '-';
    ns = -ns;
  }
  n += osk__fmt_u64(p + n, (uint64_t)ns / 1000u);
  unsigned f = (unsigned)((uint64_t)ns % 1000u);
  p[n++] = '.';
  p[n++] = (char)('0' + f / 100);
  p[n++] = (char)('0' + f / 10 % 10);
  p[n++] = (char)('0' + f % 10);
  return n;
}

static void put_json_str(osk__out_t *o, const char *s) {
  char small[256];
  size_t need = osk_trace_json_escape(s, small, sizeof small);
  out_put(o, "\"", 1);
  if (need < sizeof small) {
    out_put(o, small, need);
  } else {
    char *big = malloc(need + 1);
    if (big) {
      osk_trace_json_escape(s, big, need + 1);
      out_put(o, big, need);
      free(big);
    } else {
      o->failed = 1;
    }
  }
  out_put(o, "\"", 1);
}

static void put_num(osk__out_t *o, double v) {
  char tmp[64];
  if (v != v || v > 1e300 || v < -1e300) {
    out_puts(o, "null");
    return;
  }
  int n = snprintf(tmp, sizeof tmp, "%.10g", v);
  out_put(o, tmp, (size_t)n);
}

static void put_u64(osk__out_t *o, uint64_t v) {
  char tmp[24];
  out_put(o, tmp, osk__fmt_u64(tmp, v));
}

static void put_i64(osk__out_t *o, int64_t v) {
  if (v < 0) {
    out_put(o, "-", 1);
    put_u64(o, (uint64_t)(-(v + 1)) + 1u);
  } else {
    put_u64(o, (uint64_t)v);
  }
}

typedef struct {
  char *s;
  size_t n;
} osk__str_t;

static void write_header(osk__out_t *o, const osk_trace_snapshot_t *s, int64_t base_ns) {
  out_puts(o, "{\"schemaVersion\":1,\"deviceProperties\":[],\"displayTimeUnit\":\"ms\",");
  out_puts(o, "\"baseTimeNanoseconds\":");
  put_i64(o, base_ns);
  out_puts(o, ",\n\"opskew\":{\"version\":\"" OSK_VERSION_STRING "\",\"instrument\":");
  put_json_str(o, s->instrument);
  out_puts(o, ",\"clock\":{\"kind\":\"");
  out_puts(o, s->clock.kind == OSK_CLOCK_TSC ? "tsc" : "monotonic_raw");
  out_puts(o, "\",\"ns_per_tick\":");
  put_num(o, s->clock.ns_per_tick);
  out_puts(o, ",\"rel_uncertainty\":");
  put_num(o, s->clock.rel_uncertainty);
  out_puts(o, "},\"calibration\":");
  if (s->calib.valid) {
    out_puts(o, "{\"w_ns\":");
    put_num(o, s->calib.w_ns);
    out_puts(o, ",\"delta_ns\":");
    put_num(o, s->calib.delta_ns);
    out_puts(o, ",\"w_spread_ns\":");
    put_num(o, s->calib.w_spread_ns);
    out_puts(o, ",\"pairs\":");
    put_u64(o, s->calib.pairs);
    out_puts(o, ",\"rounds\":");
    put_u64(o, s->calib.rounds);
    out_puts(o, ",\"scope\":\"collector entry points; excludes RecordFunction dispatch\"}");
  } else {
    out_puts(o, "null");
  }
  out_puts(o, ",\"events\":");
  put_u64(o, s->n_events);
  out_puts(o, ",\"lost\":{\"total\":");
  put_u64(o, osk_trace_snapshot_lost_total(s));
  for (int i = 0; i < OSK_TRACE_LOSS_COUNT; i++) {
    out_puts(o, ",\"");
    out_puts(o, osk_trace_loss_key(i));
    out_puts(o, "\":");
    put_u64(o, s->lost[i]);
  }
  out_puts(o, "},\"unmatched_ends\":");
  put_u64(o, s->unmatched_ends);
  out_puts(o, ",\"open_at_stop\":");
  put_u64(o, s->open_at_stop);
  out_puts(o, ",\"window_ns\":{\"start\":");
  put_i64(o, osk__ticks_ns(&s->clock, s->start_tick) + s->realtime_minus_mono_ns - base_ns);
  out_puts(o, ",\"stop\":");
  put_i64(o, osk__ticks_ns(&s->clock, s->stop_tick) + s->realtime_minus_mono_ns - base_ns);
  out_puts(o, "}},\n\"traceEvents\":[\n");
}

int osk_trace_write_chrome(const osk_trace_snapshot_t *s, const char *path) {
  if (!s || !path || !*path) return OSK_EINVAL;
  int guard = osk_trace_guard_enter();
  int rc = 0;
  size_t plen = strlen(path);
  char *tmp = malloc(plen + 32);
  osk__str_t *names = calloc(s->n_names ? s->n_names : 1, sizeof *names);
  osk__str_t *cats = calloc(s->n_cats ? s->n_cats : 1, sizeof *cats);
  osk__out_t o = {0};
  o.cap = 256 * 1024;
  o.buf = malloc(o.cap);
  if (!tmp || !names || !cats || !o.buf) {
    rc = OSK_ENOMEM;
    goto done;
  }
  snprintf(tmp, plen + 32, "%s.tmp.%d", path, (int)getpid());
  o.f = fopen(tmp, "wb");
  if (!o.f) {
    rc = OSK_EIO;
    goto done;
  }

  /* Base time: the earliest start (or the window start), floored to a whole
   * second of Unix time, so every ts is small and non-negative. */
  uint64_t first_tick = s->start_tick ? s->start_tick : s->stop_tick;
  for (size_t i = 0; i < s->nsegs; i++) {
    const osk__seg_t *g = &s->segs[i];
    for (uint32_t j = g->begin; j < g->end; j++)
      if (g->chunk->ev[j].t0 < first_tick) first_tick = g->chunk->ev[j].t0;
  }
  int64_t first = osk__ticks_ns(&s->clock, first_tick);
  int64_t off = s->realtime_minus_mono_ns;
  int64_t base = ((first + off) / 1000000000ll) * 1000000000ll;
  if (first + off < base) base -= 1000000000ll;
  write_header(&o, s, base);

  char pidbuf[24];
  size_t pidlen = osk__fmt_u64(pidbuf, (uint64_t)s->pid);
  int first_ev = 1;
#define OSK__SEP()                               \
  do {                                           \
    if (!first_ev) OSK__LIT(&o, ",\n");        \
    first_ev = 0;                                \
  } while (0)
  OSK__SEP();
  out_puts(&o, "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":");
  out_put(&o, pidbuf, pidlen);
  out_puts(&o, ",\"tid\":0,\"args\":{\"name\":\"python (opskew ");
  out_puts(&o, s->instrument);
  out_puts(&o, ")\"}}");
  /* One thread_name per thread that has events (the list may hold threads
   * that recorded nothing in this session; a tid reused by a later thread
   * keeps the latest name). */
  for (size_t i = 0; i < s->nsegs; i++) {
    uint32_t tid = s->segs[i].chunk->tid;
    if (i > 0 && s->segs[i - 1].chunk->tid == tid) continue;
    const char *tname = NULL;
    for (size_t k = 0; k < s->n_threads; k++)
      if (s->threads[k].tid == tid && s->threads[k].name[0]) tname = s->threads[k].name;
    OSK__SEP();
    out_puts(&o, "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":");
    out_put(&o, pidbuf, pidlen);
    out_puts(&o, ",\"tid\":");
    put_u64(&o, tid);
    out_puts(&o, ",\"args\":{\"name\":");
    char label[64];
    if (tname) snprintf(label, sizeof label, "%s (%u)", tname, (unsigned)tid);
    else snprintf(label, sizeof label, "thread %u", (unsigned)tid);
    put_json_str(&o, label);
    out_puts(&o, "}}");
  }

  uint32_t cur_tid = 0;
  char tidbuf[24];
  size_t tidlen = 0;
  for (size_t i = 0; i < s->nsegs; i++) {
    const osk__seg_t *g = &s->segs[i];
    if (i == 0 || g->chunk->tid != cur_tid) {
      cur_tid = g->chunk->tid;
      tidlen = osk__fmt_u64(tidbuf, cur_tid);
    }
    for (uint32_t j = g->begin; j < g->end; j++) {
      const osk__event_t *e = &g->chunk->ev[j];
      uint32_t nid = e->name < s->n_names ? e->name : 0;
      uint16_t cid = e->cat < s->n_cats ? e->cat : 0;
      if (OSK__UNLIKELY(!names[nid].s)) {
        const char *str = osk_trace_snapshot_name(s, nid);
        size_t need = osk_trace_json_escape(str, NULL, 0);
        names[nid].s = malloc(need + 1);
        if (!names[nid].s) {
          rc = OSK_ENOMEM;
          goto close;
        }
        osk_trace_json_escape(str, names[nid].s, need + 1);
        names[nid].n = need;
      }
      if (OSK__UNLIKELY(!cats[cid].s)) {
        const char *str = osk_trace_snapshot_category(s, cid);
        size_t need = osk_trace_json_escape(str, NULL, 0);
        cats[cid].s = malloc(need + 1);
        if (!cats[cid].s) {
          rc = OSK_ENOMEM;
          goto close;
        }
        osk_trace_json_escape(str, cats[cid].s, need + 1);
        cats[cid].n = need;
      }
      char num[64];
      OSK__SEP();
      OSK__LIT(&o, "{\"ph\":\"X\",\"cat\":\"");
      out_put(&o, cats[cid].s, cats[cid].n);
      OSK__LIT(&o, "\",\"name\":\"");
      out_put(&o, names[nid].s, names[nid].n);
      OSK__LIT(&o, "\",\"pid\":");
      out_put(&o, pidbuf, pidlen);
      OSK__LIT(&o, ",\"tid\":");
      out_put(&o, tidbuf, tidlen);
      OSK__LIT(&o, ",\"ts\":");
      out_put(&o, num, fmt_us(num, osk__ticks_ns(&s->clock, e->t0) + off - base));
      OSK__LIT(&o, ",\"dur\":");
      out_put(&o, num, fmt_us(num, osk__dur_ns(&s->clock, e->t0, e->t1)));
      OSK__LIT(&o, ",\"args\":{\"depth\":");
      out_put(&o, num, osk__fmt_u64(num, e->depth));
      OSK__LIT(&o, "}}");
    }
  }
  uint64_t lost = osk_trace_snapshot_lost_total(s);
  if (lost) {
    char num[64];
    OSK__SEP();
    out_puts(&o, "{\"ph\":\"i\",\"s\":\"g\",\"cat\":\"opskew\",\"name\":\"opskew: events lost\",\"pid\":");
    out_put(&o, pidbuf, pidlen);
    out_puts(&o, ",\"tid\":0,\"ts\":");
    out_put(&o, num, fmt_us(num, osk__ticks_ns(&s->clock, s->stop_tick) + off - base));
    out_puts(&o, ",\"args\":{\"lost\":");
    put_u64(&o, lost);
    out_puts(&o, "}}");
  }
#undef OSK__SEP
  out_puts(&o, "\n],\n\"traceName\":");
  put_json_str(&o, path);
  out_puts(&o, "}\n");
close:
  out_flush(&o);
  if (fclose(o.f) != 0) o.failed = 1;
  if (rc == 0 && o.failed) rc = OSK_EIO;
  if (rc == 0 && rename(tmp, path) != 0) rc = OSK_EIO;
  if (rc != 0) unlink(tmp);
done:
  if (names)
    for (uint32_t i = 0; i < s->n_names; i++) free(names[i].s);
  if (cats)
    for (uint32_t i = 0; i < s->n_cats; i++) free(cats[i].s);
  free(names);
  free(cats);
  free(o.buf);
  free(tmp);
  osk_trace_guard_leave(guard);
  return rc;
}
