/*
 * opskew_job.h: the traces of a multi-rank job (torchrun), summarized,
 * aligned and corrected together (docs/multirank.md).
 *
 * Contents: options | per-rank results | collectives | steps | job
 *
 * A job is a set of ranks, each with one or more trace files (its sources:
 * the cycles of a schedule, in order; source i of every rank is segment i
 * of the job). Each source is read once, in C, by the streaming reader: the
 * per-name table (osk_summary_t) and, in the same pass, the rank's steps
 * (ProfilerStep#N) and collectives. With costs set for every rank
 * (osk_job_set_cost), a second read of each source counts the instrumented
 * events between the rank's sync points.
 *
 * Collectives. One family of events stands for the job's collectives, the
 * first of these present on every rank: NCCL kernels on the GPU ("nccl*",
 * cat "kernel"), "gloo:*" (gloo runs them on its worker threads),
 * "record_param_comms", "nccl:*" (the CPU side), "c10d::*". Only the
 * outermost event of the family on a thread counts. The k-th collective of
 * a rank is keyed by (segment, step, ordinal): the step is the last
 * ProfilerStep#N that started at or before it (-1: none), the ordinal its
 * place among the rank's collectives with the same segment and step. A key
 * present on every rank, with the same name, is a matched collective; a
 * pair "...send..." / "...recv..." under one key in a 2-rank job is a
 * point-to-point transfer. Anything else is counted as unmatched.
 *
 * Clocks. All ranks leave a collective at nearly the same moment, so the
 * exits of matched collectives give each rank's clock offset to the first
 * rank (the reference) and its drift: exit_r - exit_ref = offset + drift x
 * (exit_ref - first exit_ref), fitted by least squares, then again without
 * the points beyond 3 robust sd of the first fit (with fewer than 8
 * collectives: the offset alone, their median), with the residual
 * (1.4826 x the median absolute deviation, and the largest) over the
 * collectives. With opts.align the offsets are applied: every time the
 * job reports is then on the reference rank's clock.
 *
 * Cross-rank correction (TAU's parallel model, Malony, Shende et al.,
 * IJHPCA 2007), with each rank's own cost per event (W, W_py). Collectives
 * are sync points; a rank's time moves back by its shift D, which starts at
 * 0 in each segment. Before sync point k, rank r's cost o = W x its events
 * that started after its previous arrival (events beside an asynchronous
 * collective, DDP's backward beside its allreduce, delay the next arrival)
 * and at or before this arrival (the event's start; the steps' ranges and
 * the collectives' own events are not counted): its arrival moves back by
 * S = D + o. A
 * collective ends when its last participant arrives: after it every
 * participant's shift is max(P) - max(P - S) over the participants. A
 * point-to-point receive waits for its sender likewise (the receiver's
 * shift is max(P_send, P_recv) - max(P_send - S_send, P_recv - S_recv));
 * the sender does not wait for the receiver (its shift stays S). Per rank:
 * `own` is what its own events cost, `absorbed` the sum over sync points of
 * (new shift - S): the time its corrected waits lost (a rank with no cost
 * whose peers were late because of theirs), negative when its own cost hid
 * in time it would have waited anyway. Steps are corrected by the shift at
 * their end less the shift at their start; a sync point's shift counts from
 * its arrival, plus the rank's costs since.
 *
 * Matching is by key, not by time: a rank that lacks a collective in the
 * middle of a step shifts the ordinals of its later ones in that step, which
 * then pair with the wrong instances (only the last shows as unmatched).
 *
 * Memory: the per-name tables (bounded by names, as osk_summary_t), and per
 * rank its steps (40 bytes each) and the events of the five families (48
 * bytes each, nested ones included until the family is chosen); per matched
 * collective 48 bytes per rank, and with costs about 100 more per rank
 * (boundaries, counts, sync points): nothing grows with the number of
 * operator events.
 *
 * Ownership: osk_job_new creates the job into the caller's pointer; the
 * caller frees it with osk_job_free. Every row and string the accessors
 * return is the job's, valid until then. One thread at a time. Plain C11;
 * never includes Python.h. Prefix osk_job_; conventions as in opskew.h.
 */
#ifndef OPSKEW_JOB_H
#define OPSKEW_JOB_H

#include <stddef.h>
#include <stdint.h>

#include "opskew.h"
#include "opskew_reader.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- options */

/* Options; the caller owns them, osk_job_new copies what it keeps. */
typedef struct {
  /* Categories of the per-name tables (as osk_summary_opts_t); NULL: all. */
  const osk_summary_opts_t *summary;
  /* Nonzero: apply the estimated clock offsets (ranks on different hosts).
   * Zero: estimate and report them only (one host: one clock). */
  int align;
  /* The instrumented categories the correction counts (NULL: "cpu_op" and
   * "user_annotation"), and the Python class's (NULL: "python_function"),
   * as osk_correct_opts_t. Copied. */
  const char *const *categories;
  size_t n_categories;
  const char *const *py_categories;
  size_t n_py_categories;
} osk_job_opts_t;

/* The collective families, in order of preference. */
typedef enum {
  OSK_JOB_FAMILY_NONE = -1,
  OSK_JOB_FAMILY_NCCL_KERNEL = 0,
  OSK_JOB_FAMILY_GLOO = 1,
  OSK_JOB_FAMILY_PARAM_COMMS = 2,
  OSK_JOB_FAMILY_NCCL = 3,
  OSK_JOB_FAMILY_C10D = 4,
} osk_job_family_t;

/* ------------------------------------------------------- per-rank results */

/* One rank's figures; owned by the job (osk_job_rank returns a pointer
 * into it, valid until osk_job_free). Times in ns. */
typedef struct {
  int rank;
  size_t sources;
  /* The rank's per-name table: its sources' summaries merged. */
  const osk_summary_t *summary;
  int status;             /* 0, or OSK_ETRUNCATED / OSK_EFORMAT: a source ended early
                           * (what was read before is used) */
  uint64_t collectives;   /* outermost events of the job's family */
  uint64_t steps;         /* ProfilerStep#N events */
  /* Clock, against the reference rank (0 for the reference itself). */
  int64_t clock_origin_ns; /* the reference's first matched exit, on its clock */
  double offset_ns;       /* this clock minus the reference's, at the origin */
  double drift_ppm;       /* change of the offset per second of the reference's time, in 1e-6 */
  double residual_ns;     /* robust sd of the exit differences around the fit */
  double residual_max_ns; /* the largest of them */
  uint64_t clock_points;  /* matched collectives the fit used */
  /* Waits, measured (aligned when applied), over matched collectives. */
  double wait_ns;          /* sum of (last arrival - its arrival); receives: wait for the sender */
  uint64_t last_arrivals;  /* collectives it arrived at last */
  double lateness_ns;      /* sum over those of (its arrival - the next latest) */
  /* Correction (costed: a cost was set; the figures below are 0 otherwise). */
  int costed;
  double w_ns, w_py_ns;
  uint64_t events, py_events; /* instrumented events counted */
  double own_ns;              /* W x events + W_py x py_events */
  double own_before_sync_ns;  /* the part that delayed its arrivals at sync points */
  double absorbed_ns;         /* see the top of this file */
  double corrected_wait_ns;   /* wait_ns after the correction */
} osk_job_rank_t;

/* --------------------------------------------------------- collectives */

/* One matched collective (or transfer). Arrays have one entry per rank, in
 * rank order (osk_job_rank's index). Owned by the job. */
typedef struct {
  size_t segment;
  int64_t step;            /* see the top of this file */
  uint32_t ordinal;
  osk_str_t name;          /* the reference rank's */
  int p2p;                 /* 1: a transfer from rank index `sender` */
  size_t sender;
  size_t last;             /* index of the last arrival (for a transfer: the sender
                            * when the receiver waited for it, else the receiver) */
  double lateness_ns;      /* last arrival - first; a transfer: the receiver's wait */
  const int64_t *enter_ns; /* per rank: the event's start (aligned when applied) */
  const int64_t *exit_ns;  /* per rank: its end */
  const double *wait_ns;   /* per rank: measured wait */
  /* With costs (else all 0): */
  const double *own_ns;    /* per rank: the cost that delayed its arrival */
  const double *shift_ns;  /* per rank: its shift after this sync point */
  const double *corrected_wait_ns;
} osk_job_collective_t;

/* ----------------------------------------------------------------- steps */

/* One step number of one segment, over ranks. Owned by the job. */
typedef struct {
  size_t segment;
  int64_t step;                 /* N of ProfilerStep#N */
  const int64_t *dur_ns;        /* per rank; -1 when the rank has no such step */
  const double *corrected_ns;   /* per rank, with costs; -1 otherwise */
} osk_job_step_t;

/* ------------------------------------------------------------------- job */

typedef struct {
  osk_job_family_t family;
  const char *family_name;      /* "nccl kernels", "gloo", ...; "none" */
  uint64_t matched;             /* collectives and transfers matched on every rank */
  uint64_t unmatched;           /* keys present on some ranks only, or whose names differ */
  int aligned;                  /* opts.align: the offsets were applied */
  /* The span of every rank's complete events, on the reference clock when
   * aligned (the merged table's own span mixes the ranks' clocks). */
  int64_t first_ts_ns, last_end_ns;
  int corrected;                /* every rank had a cost */
} osk_job_stats_t;

typedef struct osk_job osk_job_t;

/* Creates an empty job. `opts` may be NULL. Returns 0, OSK_EINVAL, OSK_ENOMEM. */
int osk_job_new(osk_job_t **out, const osk_job_opts_t *opts);

/* Adds a source to rank `rank` (>= 0): a trace file (copied path; read in
 * osk_job_run, twice with costs, so it must be a regular file) or memory
 * the caller keeps until osk_job_free. Returns 0, OSK_EINVAL, OSK_ENOMEM. */
int osk_job_add_path(osk_job_t *j, int rank, const char *path);
int osk_job_add_mem(osk_job_t *j, int rank, const void *data, size_t len);

/* The rank's instrument cost per event (W) and per Python event (W_py),
 * both >= 0 and finite. Returns 0, OSK_EINVAL (also for a rank without
 * sources), OSK_ENOMEM. */
int osk_job_set_cost(osk_job_t *j, int rank, double w_ns, double w_py_ns);

/* Reads every source and computes everything. Returns 0; OSK_ETRUNCATED or
 * OSK_EFORMAT when a source ended early (its rank's status says which; the
 * results use what was read); another OSK_E* code (then `err` and
 * osk_job_failed say which source) with no results. Runs once. */
int osk_job_run(osk_job_t *j, osk_error_t *err);

/* After a failed osk_job_run: the rank index and source index that failed.
 * Returns 0, or OSK_ERANGE when none did. */
int osk_job_failed(const osk_job_t *j, size_t *rank_index, size_t *source);

/* Results, after osk_job_run. Ranks are in increasing rank order. */
size_t osk_job_rank_count(const osk_job_t *j);
const osk_job_rank_t *osk_job_rank(const osk_job_t *j, size_t i);
/* Source k of rank index i: its own summary (threads, metadata, objects). */
const osk_summary_t *osk_job_source_summary(const osk_job_t *j, size_t i, size_t k);
/* Source k of rank index i: how its read ended (0, OSK_ETRUNCATED,
 * OSK_EFORMAT) and its error (err may be NULL); OSK_ERANGE for a bad index. */
int osk_job_source_status(const osk_job_t *j, size_t i, size_t k, osk_error_t *err);
/* Source k of rank index i: the reader's counters of its (first) read. */
const osk_reader_stats_t *osk_job_source_reader_stats(const osk_job_t *j, size_t i, size_t k);
/* The per-name table of every rank merged (osk_summary_merge). */
const osk_summary_t *osk_job_merged(const osk_job_t *j);
size_t osk_job_collective_count(const osk_job_t *j);
const osk_job_collective_t *osk_job_collective(const osk_job_t *j, size_t i);
size_t osk_job_step_count(const osk_job_t *j);
const osk_job_step_t *osk_job_step(const osk_job_t *j, size_t i);
const osk_job_stats_t *osk_job_stats(const osk_job_t *j);

/* Frees everything; NULL is a no-op. */
void osk_job_free(osk_job_t *j);

#ifdef __cplusplus
}
#endif
#endif /* OPSKEW_JOB_H */
