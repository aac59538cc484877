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
 * Speed (about 60 instructions per event): names and categories are escaped
 * once, together with the fixed text around them; per event the writer
 * copies three padded pieces in 16-byte blocks, formats two timestamps from
 * integers with a two-digit table (no printf), and appends straight into a
 * 1 MiB buffer that goes out with write(2). The escaper, the formatters and
 * the buffered temp-then-rename file are csrc/tracecore's, shared with the
 * corrected-trace writer of opskew correct.
 */
#include "trace_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
  char tmp[32];
  osk__sb_put(sb, tmp, osk__fmt_num(tmp, v));
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

/* ------------------------------------------------------------ JSON escape */

size_t osk_trace_json_escape(const char *s, char *out, size_t cap) {
  return osk__json_escape(s, s ? strlen(s) : 0, out, cap);
}

/* A precomputed piece of an event, padded so that it can be copied in
 * whole 16-byte blocks (the output buffer keeps the slack for the
 * overshoot). Per event the writer copies three of them: the category
 * head, the name with the pid, the thread id. */
typedef struct {
  char *s;
  size_t n;
} osk__piece_t;

#define OSK__PAD 16u

static int piece_make(osk__piece_t *pc, const char *a, const char *esc, size_t esc_n, const char *b) {
  size_t na = strlen(a), nb = strlen(b);
  size_t n = na + esc_n + nb;
  pc->s = calloc(1, (n + OSK__PAD) & ~(size_t)(OSK__PAD - 1));
  if (!pc->s) return 0;
  memcpy(pc->s, a, na);
  memcpy(pc->s + na, esc, esc_n);
  memcpy(pc->s + na + esc_n, b, nb);
  pc->n = n;
  return 1;
}

/* JSON-escaped copy of s (malloc'ed, NUL-terminated), length in *n. */
static char *escape_dup(const char *s, size_t *n) {
  size_t need = osk_trace_json_escape(s, NULL, 0);
  char *e = malloc(need + 1);
  if (e) osk_trace_json_escape(s, e, need + 1);
  *n = need;
  return e;
}

static inline char *put_piece(char *p, const osk__piece_t *pc) {
  for (size_t i = 0; i < pc->n; i += OSK__PAD) memcpy(p + i, pc->s + i, OSK__PAD);
  return p + pc->n;
}

static void put_json_str(osk__out_t *o, const char *s) { osk__out_str(o, s, strlen(s)); }

static const char *calib_scope(const char *instrument) {
  if (strcmp(instrument, "pyhook") == 0)
    return "profile hook entry points; excludes CPython's dispatch of profile events";
  if (strcmp(instrument, "nvtx") == 0)
    return "collector entry points; excludes RecordFunction dispatch and NVTX string formatting";
  return "collector entry points; excludes RecordFunction dispatch";
}

static void write_header(osk__out_t *o, const osk_trace_snapshot_t *s, int64_t base_ns) {
  osk__out_puts(o, "{\"schemaVersion\":1,\"deviceProperties\":[],\"displayTimeUnit\":\"ms\",");
  osk__out_puts(o, "\"baseTimeNanoseconds\":");
  osk__out_i64(o, base_ns);
  osk__out_puts(o, ",\n\"opskew\":{\"version\":\"");
  osk__out_puts(o, osk_version());
  osk__out_puts(o, "\",\"instrument\":");
  put_json_str(o, s->instrument);
  osk__out_puts(o, ",\"clock\":{\"kind\":\"");
  osk__out_puts(o, s->clock.kind == OSK_CLOCK_TSC ? "tsc" : "monotonic_raw");
  osk__out_key_num(o, "\",\"ns_per_tick\":", s->clock.ns_per_tick);
  osk__out_key_num(o, ",\"rel_uncertainty\":", s->clock.rel_uncertainty);
  osk__out_puts(o, "},\"calibration\":");
  if (s->calib.valid) {
    osk__out_key_num(o, "{\"w_ns\":", s->calib.w_ns);
    osk__out_key_num(o, ",\"delta_ns\":", s->calib.delta_ns);
    osk__out_key_num(o, ",\"w_spread_ns\":", s->calib.w_spread_ns);
    osk__out_puts(o, ",\"pairs\":");
    osk__out_u64(o, s->calib.pairs);
    osk__out_puts(o, ",\"rounds\":");
    osk__out_u64(o, s->calib.rounds);
    osk__out_puts(o, ",\"scope\":");
    put_json_str(o, calib_scope(s->instrument));
    osk__out_puts(o, ",\"w_source\":");
    put_json_str(o, osk_trace_snapshot_w_source(s));
    osk__out_puts(o, "}");
  } else {
    osk__out_puts(o, "null");
  }
  osk__out_puts(o, ",\"events\":");
  osk__out_u64(o, s->n_events);
  osk__out_puts(o, ",\"lost\":{\"total\":");
  osk__out_u64(o, osk_trace_snapshot_lost_total(s));
  for (int i = 0; i < OSK_TRACE_LOSS_COUNT; i++) {
    osk__out_puts(o, ",\"");
    osk__out_puts(o, osk_trace_loss_key(i));
    osk__out_puts(o, "\":");
    osk__out_u64(o, s->lost[i]);
  }
  osk__out_puts(o, "},\"unmatched_ends\":");
  osk__out_u64(o, s->unmatched_ends);
  osk__out_puts(o, ",\"open_at_stop\":");
  osk__out_u64(o, s->open_at_stop);
  /* Events that went through the spill file past the memory budget (all of
   * them are in the trace). */
  osk__out_puts(o, ",\"spill\":{\"events\":");
  osk__out_u64(o, s->spilled_events);
  osk__out_puts(o, ",\"bytes\":");
  osk__out_u64(o, s->spilled_events * sizeof(osk__event_t));
  osk__out_puts(o, ",\"budget_bytes\":");
  osk__out_i64(o, s->budget_bytes);
  osk__out_puts(o, "},\"window_ns\":{\"start\":");
  osk__out_i64(o, osk__ticks_ns(&s->clock, s->start_tick) + s->realtime_minus_mono_ns - base_ns);
  osk__out_puts(o, ",\"stop\":");
  osk__out_i64(o, osk__ticks_ns(&s->clock, s->stop_tick) + s->realtime_minus_mono_ns - base_ns);
  osk__out_puts(o, "}},\n\"traceEvents\":[\n");
}

static void pieces_free(osk__piece_t *p, size_t n) {
  if (!p) return;
  for (size_t i = 0; i < n; i++) free(p[i].s);
  free(p);
}

/* The event writer's state: the precomputed pieces and the output cursor. */
typedef struct {
  osk__out_t *o;
  char *p, *limit; /* the slack past limit holds one event */
  const osk__piece_t *names, *cats;
  uint32_t n_names, n_cats;
  osk__piece_t thr;
  const osk_clock_t *clk;
  int64_t shift;
  /* Float64 readers (docs/outputs.md, "Read as float64"): the thread's
   * trees so far, the ns its later trees are written later by, scratch. */
  osk__f64_line_t line;
  int64_t nudge;
  osk__f64_tree_t f64;
} osk__emit_t;

/* The hot loop's body: per event, three padded piece copies, two
 * timestamps and three constant strings, straight into the buffer (no call
 * per field). */
static inline void emit(osk__emit_t *w, const osk__event_t *e, int64_t ts, int64_t dur) {
  char *p = w->p;
  if (OSK__UNLIKELY(p >= w->limit)) {
    w->o->len = (size_t)(p - w->o->buf);
    osk__out_flush(w->o);
    p = w->o->buf;
  }
  uint32_t nid = e->name < w->n_names ? e->name : 0;
  uint16_t cid = e->cat < w->n_cats ? e->cat : 0;
  p = put_piece(p, &w->cats[cid]);
  p = put_piece(p, &w->names[nid]);
  p = put_piece(p, &w->thr);
  p = osk__put_us(p, ts);
  memcpy(p, ",\"dur\":", 7);
  p = osk__put_us(p + 7, dur);
  memcpy(p, ",\"args\":{\"depth\":", 17);
  p += 17;
  if (OSK__LIKELY(e->depth < 10)) *p++ = (char)('0' + e->depth);
  else p = osk__put_dec(p, e->depth);
  memcpy(p, "}}", 2);
  w->p = p + 2;
}

/* Time order. A thread's events arrive in end order: with their depths,
 * each top-level operator's tree in post-order, the tree closed by its
 * depth-0 event. Nothing after that event began before it (it would have
 * been its parent), so sorting one tree at a time sorts the thread. The
 * group holds the events since the last depth-0 one: memory for the
 * largest top-level tree, not for the trace. */
typedef struct {
  osk__event_t e;
  uint64_t pos; /* arrival: the last tie-break */
} osk__held_t;

typedef struct {
  osk__held_t *ev;
  size_t n, cap;
  uint64_t pos;
} osk__group_t;

/* Start ascending; at equal starts the longer first (the parent, as in
 * osk__nest_order); at equal intervals the shallower (the parent) first;
 * then arrival. */
static int held_cmp(const void *pa, const void *pb) {
  const osk__event_t *a = &((const osk__held_t *)pa)->e, *b = &((const osk__held_t *)pb)->e;
  if (a->t0 != b->t0) return a->t0 < b->t0 ? -1 : 1;
  if (a->t1 != b->t1) return a->t1 > b->t1 ? -1 : 1;
  if (a->depth != b->depth) return a->depth < b->depth ? -1 : 1;
  uint64_t x = ((const osk__held_t *)pa)->pos, y = ((const osk__held_t *)pb)->pos;
  return (x > y) - (x < y);
}

/* The written begin and end of e, ns from the trace's base. */
static void written(const osk__emit_t *w, const osk__event_t *e, int64_t *ts, int64_t *end) {
  int64_t t0 = osk__ticks_ns(w->clk, e->t0);
  *ts = t0 + w->shift + w->nudge;
  *end = (e->t1 > e->t0 ? osk__ticks_ns(w->clk, e->t1) : t0) + w->shift + w->nudge;
}

/* Writes a thread's top-level tree (the root and its descendants, or the
 * root alone) in time order, each end where float64 readers nest it as the
 * text says (osk__f64_fix; almost never moved: with ts under 2^43 us from
 * the base, only exact ties are within reach). Returns 0 or OSK_ENOMEM. */
static int group_flush(osk__group_t *gr, osk__emit_t *w) {
  size_t n = gr->n;
  if (!n) return 0;
  if (n > 1) qsort(gr->ev, n, sizeof *gr->ev, held_cmp);
  osk__f64_tree_t *f = &w->f64;
  if (osk__f64_reserve(f, n)) return OSK_ENOMEM;
  for (size_t i = 0; i < n; i++) {
    written(w, &gr->ev[i].e, &f->s[i], &f->e[i]);
    /* The parent: the latest event before it that is shallower. */
    uint32_t p = i ? (uint32_t)(i - 1) : UINT32_MAX;
    while (p != UINT32_MAX && gr->ev[p].e.depth >= gr->ev[i].e.depth) p = f->parent[p];
    f->parent[i] = p;
    f->mark[i] = 0;
  }
  osk__f64_place(&w->line, f, n, &w->nudge);
  if (n > 1 || w->line.n_kept) {
    int near = 0;
    /* Neighbours in time are neighbours in the tree's walk (a begin, the
     * events inside, the end): a parent's begin and its first child's, a
     * child's end and its parent's, a sibling's end and the next one's
     * begin. Only those pairs can be within reach (a closer look if so). */
    for (size_t i = 1; i < n && !near; i++) {
      uint32_t p = f->parent[i], j = (uint32_t)(i - 1);
      while (j != UINT32_MAX && j != p && f->parent[j] != p) j = f->parent[j];
      near = (p != UINT32_MAX && (osk__f64_near(f->e[i], f->e[p]) || osk__f64_near(f->s[i], f->s[p]))) ||
             (j != UINT32_MAX && j != p && osk__f64_near(f->e[j], f->s[i]));
    }
    if (near && osk__f64_fix(f, n, w->line.kept, w->line.n_kept, NULL)) return OSK_ENOMEM;
  }
  osk__f64_done(&w->line, f->s[0], f->e[0]);
  for (size_t i = 0; i < n; i++) emit(w, &gr->ev[i].e, f->s[i], f->e[i] - f->s[i]);
  gr->n = 0;
  return 0;
}

/* One event of the thread, in end order. Returns 0 or OSK_ENOMEM. */
static inline int group_add(osk__group_t *gr, osk__emit_t *w, const osk__event_t *e) {
  uint64_t pos = gr->pos++;
  if (e->depth == 0 && gr->n == 0) { /* a lone top-level operator: no copy */
    int64_t ts, end;
    written(w, e, &ts, &end);
    int64_t k = osk__f64_next(&w->line, ts);
    w->nudge += k;
    osk__f64_done(&w->line, ts + k, end + k);
    emit(w, e, ts + k, end - ts);
    return 0;
  }
  if (gr->n == gr->cap && osk__grow((void **)&gr->ev, &gr->cap, gr->n + 1, sizeof *gr->ev)) return OSK_ENOMEM;
  gr->ev[gr->n++] = (osk__held_t){*e, pos};
  return e->depth == 0 ? group_flush(gr, w) : 0;
}

int osk_trace_write_chrome(const osk_trace_snapshot_t *s, const char *path) {
  if (!s || !path || !*path) return OSK_EINVAL;
  int guard = osk_trace_guard_enter();
  int rc = 0;
  uint32_t n_names = s->n_names ? s->n_names : 1;
  uint32_t n_cats = s->n_cats ? s->n_cats : 1;
  osk__piece_t *names = calloc(n_names, sizeof *names);
  osk__piece_t *cats = calloc(n_cats, sizeof *cats);
  osk__out_t o = {.fd = -1};
  int opened = 0;
  char pidbuf[24];
  pidbuf[osk__fmt_u64(pidbuf, (uint64_t)s->pid)] = '\0';
  size_t longest = 0; /* the longest category + name piece */
  osk__group_t gr = {0};
  osk__emit_t w = {0};
  osk__event_t *buf = NULL; /* spilled ranges are read into it */
  if (!names || !cats) {
    rc = OSK_ENOMEM;
    goto done;
  }
  /* Names and categories are escaped once, with the fixed text around them
   * (and the pid, which is the same for every event). */
  size_t max_name = 0, max_cat = 0;
  for (uint32_t i = 0; i < n_names; i++) {
    size_t n;
    char *e = escape_dup(osk_trace_snapshot_name(s, i), &n);
    char tail[48];
    snprintf(tail, sizeof tail, "\",\"pid\":%s,\"tid\":", pidbuf);
    int ok = e && piece_make(&names[i], "", e, n, tail);
    free(e);
    if (!ok) {
      rc = OSK_ENOMEM;
      goto done;
    }
    if (names[i].n > max_name) max_name = names[i].n;
  }
  for (uint32_t i = 0; i < n_cats; i++) {
    size_t n;
    char *e = escape_dup(osk_trace_snapshot_category(s, i), &n);
    /* Every operator event follows at least the process_name event, so
     * each one starts with the separator. */
    int ok = e && piece_make(&cats[i], ",\n{\"ph\":\"X\",\"cat\":\"", e, n, "\",\"name\":\"");
    free(e);
    if (!ok) {
      rc = OSK_ENOMEM;
      goto done;
    }
    if (cats[i].n > max_cat) max_cat = cats[i].n;
  }
  longest = max_name + max_cat;
  /* Room for one whole event after any flush: pieces, numbers, text, and
   * the 16-byte overshoot of padded copies. */
  size_t slack = longest + 256;
  rc = osk__out_open(&o, path, slack);
  if (!rc) rc = osk__out_gzip_by_name(&o, path);
  if (rc) goto done;
  opened = 1;

  /* Base time: the earliest start (or the window start), floored to a whole
   * second of Unix time, so every ts is small and non-negative. */
  uint64_t first_tick = s->start_tick ? s->start_tick : s->stop_tick;
  for (size_t i = 0; i < s->nsegs; i++)
    if (s->segs[i].min_t0 < first_tick) first_tick = s->segs[i].min_t0;
  int64_t first = osk__ticks_ns(&s->clock, first_tick);
  int64_t off = s->realtime_minus_mono_ns;
  int64_t base = ((first + off) / 1000000000ll) * 1000000000ll;
  if (first + off < base) base -= 1000000000ll;
  write_header(&o, s, base);

  osk__out_puts(&o, "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":");
  osk__out_puts(&o, pidbuf);
  osk__out_puts(&o, ",\"tid\":0,\"args\":{\"name\":");
  {
    /* The instrument name is the caller's: escaped like every string. */
    char pname[sizeof s->instrument + 32];
    snprintf(pname, sizeof pname, "python (opskew %s)", s->instrument);
    put_json_str(&o, pname);
  }
  osk__out_puts(&o, "}}");
  /* One thread_name per thread that has events (the list may hold threads
   * that recorded nothing in this session; a tid reused by a later thread
   * keeps the latest name). */
  for (size_t i = 0; i < s->nsegs; i++) {
    uint32_t tid = s->segs[i].tid;
    if (i > 0 && s->segs[i - 1].tid == tid) continue;
    const char *tname = NULL;
    for (size_t k = 0; k < s->n_threads; k++)
      if (s->threads[k].tid == tid && s->threads[k].name[0]) tname = s->threads[k].name;
    osk__out_puts(&o, ",\n{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":");
    osk__out_puts(&o, pidbuf);
    osk__out_puts(&o, ",\"tid\":");
    osk__out_u64(&o, tid);
    osk__out_puts(&o, ",\"args\":{\"name\":");
    char label[64];
    if (tname) snprintf(label, sizeof label, "%s (%u)", tname, (unsigned)tid);
    else snprintf(label, sizeof label, "thread %u", (unsigned)tid);
    put_json_str(&o, label);
    osk__out_puts(&o, "}}");
  }

  /* The events, thread by thread, each thread's in time order. */
  char thr_s[48] = {0};
  w = (osk__emit_t){.o = &o, .p = o.buf + o.len, .limit = o.buf + o.cap, .names = names, .cats = cats,
                    .n_names = n_names, .n_cats = n_cats, .thr = {thr_s, 0}, .clk = &s->clock,
                    .shift = off - base};
  const osk_clock_t *clk = &s->clock;
  int64_t shift = off - base;
  for (size_t i = 0; i < s->nsegs && !o.failed && !rc; i++) {
    const osk__seg_t *g = &s->segs[i];
    if (i == 0 || g->tid != s->segs[i - 1].tid) {
      rc = group_flush(&gr, &w); /* the previous thread's last events */
      if (rc) break;
      osk__f64_line_free(&w.line); /* a thread's trees only */
      w.nudge = 0;
      char *q = osk__put_dec(thr_s, g->tid);
      memcpy(q, ",\"ts\":", 6);
      w.thr.n = (size_t)(q + 6 - thr_s);
    }
    if (!g->chunk && !buf && !(buf = malloc(OSK__CHUNK_EVENTS * sizeof *buf))) {
      rc = OSK_ENOMEM;
      break;
    }
    const osk__event_t *ev = osk__seg_events(g, buf);
    if (!ev) {
      rc = OSK_EIO; /* the spill file could not be read back */
      break;
    }
    for (uint32_t j = 0; j < g->end - g->begin && !rc; j++) rc = group_add(&gr, &w, &ev[j]);
  }
  if (!rc) rc = group_flush(&gr, &w);
  o.len = (size_t)(w.p - o.buf);
  if (rc) goto done;
  uint64_t lost = osk_trace_snapshot_lost_total(s);
  if (lost) {
    char num[64];
    osk__out_puts(&o, ",\n{\"ph\":\"i\",\"s\":\"g\",\"cat\":\"opskew\",\"name\":\"opskew: events lost\",\"pid\":");
    osk__out_puts(&o, pidbuf);
    osk__out_puts(&o, ",\"tid\":0,\"ts\":");
    osk__out_put(&o, num, (size_t)(osk__put_us(num, osk__ticks_ns(clk, s->stop_tick) + shift) - num));
    osk__out_puts(&o, ",\"args\":{\"lost\":");
    osk__out_u64(&o, lost);
    osk__out_puts(&o, "}}");
  }
  osk__out_puts(&o, "\n],\n\"traceName\":");
  put_json_str(&o, path);
  osk__out_puts(&o, "}\n");
  rc = osk__out_commit(&o);
done:
  if (opened) osk__out_discard(&o);
  free(gr.ev);
  free(buf);
  osk__f64_line_free(&w.line);
  osk__f64_free(&w.f64);
  pieces_free(names, n_names);
  pieces_free(cats, n_cats);
  osk_trace_guard_leave(guard);
  return rc;
}
