/* reader_analysis.h: the trace core's analysis (csrc/tracecore/analysis.h)
 * over the reader's events: the usable-event rule, and the reader's ids and
 * metadata events in the core's own types. The trace core sits below the
 * reader and knows nothing of it; this header is where the two meet, for
 * every pass over read events (the streaming summary, the job, the
 * compensation). Internal: not part of include/opskew_reader.h. */
#ifndef OPSKEW_READER_ANALYSIS_H
#define OPSKEW_READER_ANALYSIS_H

#include "analysis.h"
#include "opskew_reader.h"

/* ------------------------------------------------------- usable events */

/* What a complete ("X") event needs to be analyzed. */
#define OSK__EV_COMPLETE (OSK_READER_EV_NAME | OSK_READER_EV_TS | OSK_READER_EV_DUR)

/* THE usable-event rule, for every pass over read events: the fields in
 * `need` are present, the reader marked nothing BAD, and when a duration is
 * needed it is >= 0 and its end (ts + dur) fits in int64 ns. Complete events
 * pass OSK__EV_COMPLETE; only events that pass may reach osk__nest_push. */
static inline int osk__event_usable(const osk_reader_event_t *ev, unsigned need) {
  if ((ev->has & need) != need || (ev->has & OSK_READER_EV_BAD)) return 0;
  if (need & OSK_READER_EV_DUR) return ev->dur_ns >= 0 && ev->ts_ns <= INT64_MAX - ev->dur_ns;
  return 1;
}

/* ----------------------------------------------------------------- ids */

_Static_assert(OSK__ID_NONE == (int)OSK_READER_ID_NONE && OSK__ID_INT == (int)OSK_READER_ID_INT &&
                   OSK__ID_STR == (int)OSK_READER_ID_STR,
               "the core's id kinds are the reader's");

/* The reader's id as the core's, and back; `str` stays borrowed. */
static inline osk__id_t osk__id_of(const osk_reader_id_t *id) {
  return (osk__id_t){(osk__id_kind_t)id->kind, id->num, id->str};
}

static inline osk_reader_id_t osk__reader_id(const osk__id_t *id) {
  return (osk_reader_id_t){(osk_reader_id_kind_t)id->kind, id->num, id->str};
}

/* The id of the event's thread, (pid, tid), in the table: osk__threads_intern. */
static inline int64_t osk__threads_intern_ev(osk__threads_t *t, const osk_reader_event_t *ev) {
  osk__id_t pid = osk__id_of(&ev->pid), tid = osk__id_of(&ev->tid);
  return osk__threads_intern(t, &pid, &tid);
}

/* The metadata rule (osk__threads_metadata) on a read "M" event. */
static inline int osk__threads_metadata_ev(osk__threads_t *t, const osk_reader_event_t *ev,
                                           int64_t *named, int64_t *named_proc) {
  osk__meta_event_t m = {ev->name, ev->arg_name, osk__id_of(&ev->pid), osk__id_of(&ev->tid)};
  return osk__threads_metadata(t, &m, named, named_proc);
}

#endif
