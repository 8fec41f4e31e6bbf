/* The events layer (src/events): the event record, each thread's ring, the
 * exact counters, the collector thread that drains the rings into the
 * sinks (through hcg_sinks, which it walks without naming any), its
 * watchdog, and the flight recorder that keeps rings and counts in a file
 * under `hcguard run`. Above the base layer; needs no <cuda.h>. */
#ifndef HCG_EVENTS_H
#define HCG_EVENTS_H

#include "base/base.h"
#include "base/names.h"

/* A skip of a record already reported at enqueue (audit mode): shown, but
 * not counted as a second error. */
#define HCG_EVF_REPORTED 0x01
/* A rejection: the record's fields were read (dst, src, bytes). */
#define HCG_EVF_HAVE_RECORD 0x02
/* A rejection in audit mode: the launch went through. */
#define HCG_EVF_PASSED 0x04
/* A run whose launch took no enqueue time stamp (sampled: 1 launch in
 * HCG_STAMP_EVERY when no output needs each one): drained with its
 * t_enqueue set to its t_start, so that no wait is made up; the summary's
 * queue wait leaves it out. */
#define HCG_EVF_NO_STAMP 0x08
#define HCG_STAMP_EVERY 16

typedef struct hcg_event {
    uint8_t kind;   /* hcg_evkind */
    uint8_t fnkind; /* hcg_fnkind */
    uint8_t reason; /* hcguard_status */
    uint8_t api;    /* hcg_api */
    uint8_t flags;  /* HCG_EVF_* */
    uint8_t fault_sig;  /* copy-faulted: SIGSEGV or SIGBUS (in the padding) */
    uint8_t fault_code; /* copy-faulted: its si_code */
    uint32_t tid;
    uint32_t enq_tid; /* the thread that enqueued it (runs), 0 unknown (in the padding) */
    uint64_t seq;
    uint64_t t_enqueue, t_start, t_end; /* hcg_ticks(); ns once drained */
    uint64_t bytes;
    uintptr_t fn, user, stream, dst, src;
    uintptr_t graph, node; /* graph host nodes; 0 for stream launches */
    union {
        uintptr_t fault_addr; /* a copy-faulted skip: the address that faulted */
        uint64_t reject_seq;  /* a run or skip flagged HCG_EVF_REPORTED: the seq of
                               * the rejection that reported its record at enqueue */
    };
    uintptr_t caller;      /* findings, rejections, skips, slow runs: the call site
                            * (check/callsite.c: hcg_callsite_name); 0 unknown */
} hcg_event;

/* Exact counters. Each thread counts what it did (ran, copied, skipped,
 * rejected, found) in its own ring's block when it pushes the event, one
 * writer per block (relaxed load and store, no read-modify-write), summed
 * on demand: never derived from drained events, which may be dropped. */
enum {
    HCG_CNT_RAN = 0,                                         /* + hcg_fnkind */
    HCG_CNT_BYTES = HCG_CNT_RAN + HCG_FN_KIND_COUNT,         /* copied */
    HCG_CNT_SKIPPED,                                         /* + hcguard_status */
    HCG_CNT_SKIPPED_REPORTED = HCG_CNT_SKIPPED + HCGUARD_STATUS_COUNT,
    HCG_CNT_GRAPH_RUNS,
    HCG_CNT_REJECTED,                                        /* + hcguard_status */
    HCG_CNT_FINDING = HCG_CNT_REJECTED + HCGUARD_STATUS_COUNT, /* + hcg_finding */
    HCG_CNT_N = HCG_CNT_FINDING + HCG_FIND_COUNT
};
typedef struct hcg_counts {
    uint64_t v[HCG_CNT_N];
} hcg_counts;
/* The sums over every thread (and the collector's own). */
void hcg_counts_get(hcg_counts *out);
/* A finding the collector makes itself (slow, hung): counted there. */
void hcg_count_collector(hcg_finding f);
/* Sum of n counters from first. */
uint64_t hcg_counts_sum(const hcg_counts *c, unsigned first, unsigned n);

/* The one constructor of the events made outside the trampoline (whose
 * run and skip events are filled in place, on the hot path): kind and
 * reason, the entry point, stream, function and data, the calling thread,
 * t_enqueue now, and for a finding t_start and t_end too; a rejection and
 * a finding also take a sequence number: the next one, or for a finding
 * the launch's that hcg_event_link_seq named. The caller adds the rest. */
hcg_event hcg_event_make(hcg_evkind kind, unsigned reason, hcg_api api, uintptr_t stream,
                         uintptr_t fn, uintptr_t user);
/* Copy *e into the calling thread's ring: no lock, no allocation (after a
 * thread's first event), no system call in the common path (the collector
 * is woken when the ring passes half full). Counts it once published (in
 * steps that the launcher finishes for a thread killed in the middle);
 * when the ring is full, counts it and counts the drop. */
void hcg_event_push(const hcg_event *e);
/* The same from an application thread, for an event of its own making
 * (a rejection, a finding at enqueue): when its ring is three quarters
 * full it first waits for the collector, as a launch does in flow
 * control, so that a flood of bad launches loses none (never inside a
 * host function, never without a collector, at most 2 s without
 * progress). */
void hcg_event_push_app(const hcg_event *e);
/* The next finding this thread makes belongs to the launch numbered seq
 * (made at its enqueue): it takes that number. */
void hcg_event_link_seq(uint64_t seq);
/* A new sequence number from the counter rejections and findings use (a
 * graph replay's, src/run). */
uint64_t hcg_event_next_seq(void);
/* Around a host function: what the thread runs (run: its event, with fn,
 * seq and stream; NULL when it returned), for the watchdog; tag (the run
 * layer's call) gives its enqueue site through the hook below. */
void hcg_event_running(const hcg_event *run, const void *tag, uint64_t since);
/* The run layer's: the enqueue site of a running call's tag (set once). */
void hcg_events_on_running(uintptr_t (*site_of)(const void *tag));
/* hcg_event_running(NULL, NULL, 0) and hcg_event_push(run) in one call:
 * the end of a host function's run, its event. */
void hcg_event_push_ran(const hcg_event *run);
/* The seq of the run the calling thread is in (0 if none yet). */
uint64_t hcg_event_running_seq(void);
/* A host function that ran longer than HCGUARD_SLOW_MS: run (a run event,
 * in ns) makes the slow-host-fn finding *out, of the run's seq, stream and
 * times, for the log and the trace. 1 if it is slow. */
int hcg_event_slow(const hcg_event *run, hcg_event *out);
/* Drain every ring into the sinks now (any thread; serialised). */
void hcg_events_flush(void);
/* Start the collector thread (idempotent; after fork, restarts), unless
 * a stop holds it (an exec under way, the exit). */
void hcg_collector_start(void);
/* Stop the collector and drain what is left (exec, exit); it stays stopped
 * until hcg_collector_resume (the exec failed): each stop needs its own. */
void hcg_collector_stop(void);
void hcg_collector_resume(void);
/* The errno of a collector start that failed (not yet started since), 0. */
int hcg_collector_failed(void);
/* After a failed start: try again (a launch with no collector). */
void hcg_collector_retry(void);
/* Events dropped because their thread could not map a ring (in
 * hcg_events_dropped too). */
uint64_t hcg_events_ringless(void);
void hcg_events_after_fork(void);
/* Flow control: how many undrained events the launches may leave
 * (half a ring; 0 when no collector runs); the count of drain passes, and
 * waiting (at most ms) for the next one, having woken the collector. */
uint64_t hcg_events_flow_room(void);
uint32_t hcg_events_drain_gen(void);
void hcg_events_wait_drain(uint32_t gen, unsigned ms);
uint64_t hcg_events_dropped(void);
/* Events in the rings not drained yet: after the last drain at exit, those
 * the program's other threads made meanwhile (counted, never written). */
uint64_t hcg_events_undrained(void);
/* Before an exec: each sink's file left whole (hcg_sink.seal), and no
 * drain writes to the files until hcg_events_unseal_files (the exec
 * failed; as many as were sealed, execs of several threads at once):
 * events made meanwhile stay in the rings. */
void hcg_events_seal_files(void);
void hcg_events_unseal_files(void);
/* At exit, after the last drain: no drain writes to the files from now on
 * (another thread's hcguard_get_stats would write after their close), and
 * what the rings hold now is what was made after the last write. */
void hcg_events_files_done(void);
/* Host functions that ran or were skipped so far, on every thread (their
 * events dropped or not; graph nodes too): whether any runs at all. Not
 * rejections or findings, which an application thread may make while no
 * host function runs. */
uint64_t hcg_events_runs(void);
/* Drain every ring and write the files' buffers out now (before exec). */
void hcg_events_flush_files(void);
/* The same from a fatal signal's handler: only if no drain is under way
 * (a trylock), so it never waits; async-signal-safe as far as the sinks'
 * formatting (snprintf) is. */
void hcg_events_flush_from_signal(void);
/* The calling thread's id, cached per thread: inline, as every host
 * function's event takes it. */
uint32_t hcg_gettid_slow(void);
static inline uint32_t hcg_gettid(void)
{
    if (HCG_LIKELY(hcg_self.tid != 0))
        return hcg_self.tid;
    return hcg_gettid_slow();
}

/* Called by the collector with the sequence number of each stream launch
 * whose event has been drained (flow control, src/run); set once. */
void hcg_events_on_drained(void (*hook)(uint64_t seq));
/* The same for a launch whose event was dropped (any thread). */
void hcg_events_on_lost(void (*hook)(uint64_t seq));

/* ---- the sinks: what consumes events ----------------------------------- */
/* A sink (src/sinks) is one of these, a row of hcg_sinks[]: the collector
 * walks the table for event and flush, the layers above through the
 * sinks layer's hcg_sinks_* (src/sinks/sinks.c) for the rest; nothing
 * outside src/sinks names a sink. Any function may be NULL but event.
 * Only file sinks (flush set) get the events of a record left by a
 * program that died, and those written from a fatal signal's handler. */
struct hcg_flight;
typedef struct hcg_sink {
    const char *name;
    void (*event)(const hcg_event *e); /* collector, one drain at a time */
    void (*flush)(void);               /* write out buffered events (a file) */
    /* At start-up: open what the configuration names (0, or -1 said). */
    int (*open)(const hcg_config *c);
    /* The launcher: continue the file of the program at pid, which died
     * with its record f. */
    int (*recover)(const struct hcg_flight *f, pid_t pid);
    /* Where its file ends now (-1: none), taken before each batch of events
     * is written to it while recording; and, in the launcher, that the
     * program died between writing such a batch, begun at off, and giving
     * its ring slots back: the batch is written again from the ring, and
     * what of it the file holds must not be there twice. */
    int64_t (*file_end)(void);
    void (*rewrite_from)(int64_t off);
    void (*after_fork)(void);  /* in a fork child: its own from now on */
    int exec_slot;             /* its letter in HCGUARD_EXEC (HCG_SINK_LOG, ...) */
    /* What the next image does with its file; forked: the image a child of
     * vfork or _Fork execs, which takes the file as a fork child would. */
    char (*exec_state)(int forked);
    void (*close)(void);       /* at exit, after the last drain */
    /* Before an exec, after the last drain: the file left whole (the next
     * image may never continue it); the next event written to it, here
     * (the exec failed) or by the image that continues it, reopens it. */
    void (*seal)(void);
    void (*summary)(void);     /* its line in the exit summary */
    /* The run's report: whether there is anything to report, print it
     * (exit, exec), and the errors --error-exitcode counts. */
    int (*active)(void);
    void (*report)(void);
    uint64_t (*errors)(void);
    /* hcguard report: an event read back from a log (the sinks that
     * summarise them; after_fork starts them anew). */
    void (*read_event)(const hcg_event *e);
} hcg_sink;
/* Every sink, in the order they see each event; NULL-terminated. Defined
 * by the sinks layer (src/sinks/sinks.c). */
extern const hcg_sink *const hcg_sinks[];
/* While events are written from a signal handler: on, then off (names
 * only from caches). Defined with hcg_sinks. */
extern void (*const hcg_sinks_signal_mode)(int on);

/* ---- flight.c: the flight recorder (under hcguard run) -------------------- */
#define HCG_FLIGHT_MAGIC 0x3372666467636868ull /* "hhcgdfr3": events on lines of their own */
#define HCG_FLIGHT_MAX_RINGS 64

/* At the start of the file HCGUARD_FLIGHT names; then the call pools'
 * store (pools_off) and the rings (rings_off, ring_bytes each). */
typedef struct hcg_flight {
    uint64_t magic;                  /* HCG_FLIGHT_MAGIC once set up */
    uint64_t bytes, ring_bytes, pools_off, rings_off;
    _Atomic int32_t pid;             /* the process recording into it */
    _Atomic int32_t finished;        /* it wrote everything and its summary */
    _Atomic uint32_t n_rings;
    int32_t mode;                    /* hcg_mode */
    _Atomic uint64_t nodes_launched[HCG_FN_KIND_COUNT]; /* set on graph nodes */
    _Atomic uint64_t nodes_made;
    _Atomic uint64_t coll_cnt[HCG_CNT_N]; /* the collector's own counts */
    char log_path[HCG_PATH_MAX], trace_path[HCG_PATH_MAX];
    char report_path[HCG_PATH_MAX];  /* HCGUARD_LOG_FILE, expanded */
    hcg_fileid out_id[HCG_SINK_SLOTS]; /* the files at those paths (0: none open) */
    _Atomic uint32_t clock_gen;      /* odd while clock is written */
    hcg_clock_ref_t clock;           /* the last drain's clock reference */
} hcg_flight;

extern hcg_flight *hcg_g_flight; /* NULL: not recording */
/* Map HCGUARD_FLIGHT's file, if set and not another process's (start-up,
 * before any ring or pool is made), with pools_size bytes in it for the
 * call pools' store (the run layer's launch counts, which the record keeps
 * too). Returns that memory, or NULL if not recording. */
void *hcg_flight_attach(size_t pools_size);
/* Memory for the next ring in the file (ring_bytes, not zeroed), or NULL. */
void *hcg_flight_ring(void);
void hcg_flight_finished(int done);
/* The clock reference a drain converts with, kept (the recording process);
 * and, in the launcher, the last one kept (0 if none whole): the events
 * left in the rings are converted as the program would have, so that
 * their times agree with those it wrote. */
void hcg_flight_note_clock(const hcg_clock_ref_t *ref);
int hcg_flight_clock(const hcg_flight *f, hcg_clock_ref_t *ref);
/* A path field of a record (log_path, ...) copied out whole into out: out,
 * or NULL if it is empty or does not end inside its field (the program
 * may have written over its record: a stray write, a fork child still
 * running), rather than read on into the fields after it. */
const char *hcg_flight_path(const char *field, char out[HCG_PATH_MAX]);
void hcg_flight_after_fork(void); /* first of the fork child's hooks */
/* events.c, trampoline.c: the parts of the record they keep. */
size_t hcg_events_ring_bytes(void);
/* events.c: the events left in a record's rings, to the file sinks; its counts. */
void hcg_events_recover(const hcg_flight *f, hcg_counts *counts, uint64_t *dropped);

#endif /* HCG_EVENTS_H */
