/* The sinks layer (src/sinks): what consumes events. The exit summary,
 * the audit's findings, the JSON Lines event log, the Chrome trace and the
 * files they write. The collector reaches them only through hcg_sinks
 * (sinks.c); they read the run layer's launch counts. */
#ifndef HCG_SINKS_H
#define HCG_SINKS_H

#include "run/run.h"

/* ---- sinks.c: the table of sinks, walked ------------------------------ */
/* Each sink's open (start-up), recover (the launcher, for a program that
 * died with its record f), after_fork, close (exit), in table order. */
void hcg_sinks_open(const hcg_config *c);
void hcg_sinks_recover(const hcg_flight *f, pid_t pid);
void hcg_sinks_after_fork(void);
void hcg_sinks_close(void);
/* Each file sink's state for the next image, in its slot of states
 * (HCG_SINK_LOG, HCG_SINK_TRACE); other slots are left as they are. */
void hcg_sinks_exec_states(char states[HCG_SINK_SLOTS], int forked);
/* The exit summary's lines about the sinks' files. */
void hcg_sinks_summary_lines(void);
/* The run's report: 1 if any sink has something to report; print each
 * sink's report (at exit, before exec); the errors found, for
 * --error-exitcode. */
int hcg_sinks_active(void);
void hcg_sinks_report(void);
/* The same at exit (not at an exec): the summary also names the events
 * the program's threads made after the last write. */
void hcg_sinks_report_exit(void);
uint64_t hcg_sinks_errors(void);
/* hcguard_get_stats's figures. */
void hcg_sinks_stats(hcguard_stats *out);
/* The launcher: the report of a program that died, from its record's
 * counts, and the errors among them. */
void hcg_sinks_report_recovered(const hcg_flight *f, const hcg_counts *c, uint64_t dropped,
                                pid_t pid, const char *how);
uint64_t hcg_sinks_errors_of(const hcg_counts *c);
/* One line at exit: hcguard was active, but no host function was launched. */
void hcg_sinks_report_idle(void);
/* hcguard report: the sinks that summarise events start anew, are given
 * the events read back from logs, and print the summary of them (title its
 * first line; c the counts made from the events; see hcg_summary_print_read). */
void hcg_sinks_read_start(void);
void hcg_sinks_read_event(const hcg_event *e);
void hcg_sinks_report_read(const char *title, const hcg_counts *c,
                           const uint64_t launched[HCG_FN_KIND_COUNT], uint64_t nodes, int mode);
/* hcguard report --trace: the trace's events of one process, as the trace
 * sink writes them (trace.c): its threads named, a slice per run on its
 * callback thread and on its stream's track (a pseudo-thread, docs/LOG.md),
 * the enqueue joined to the run by a flow, instants for the rest. At most
 * HCG_TRACE_STREAM_TRACKS streams get a track of their own, the rest share
 * one; pseudo-threads' ids are tid_base and up: above every real thread's
 * (Linux's are below 2^22). */
#define HCG_TRACE_STREAM_TRACKS 256
#define HCG_TRACE_TID_BASE 0x40000000u
typedef struct hcg_trace_proc hcg_trace_proc;
/* A process of a report: pid the trace's, times less base_ns, flow ids
 * from flow_first (unique in the file); named by the caller. NULL if out
 * of memory. */
hcg_trace_proc *hcg_sinks_trace_start(int pid, uint64_t base_ns, uint32_t tid_base,
                                      uint64_t flow_first);
void hcg_sinks_trace_end(hcg_trace_proc *tp);
/* e's trace events into out (room: HCG_SINK_EVENT_MAX is enough), one
 * object a line, ",\n" between them, none before or after; fn_name names
 * its function, enq_tid the thread that enqueued it (0 unknown). Returns
 * the length. */
size_t hcg_sinks_trace_event(hcg_trace_proc *tp, const hcg_event *e, const char *fn_name,
                             uint32_t enq_tid, char *out, size_t room);

/* ---- summary.c: aggregation and the exit summary ----------------------- */

void hcg_summary_event(const hcg_event *e); /* collector thread only */
void hcg_summary_stats(hcguard_stats *out);
void hcg_summary_print(void); /* where messages go */
/* The summary about to be printed is the exit's: it names the events the
 * program's threads made after the last write (not at an exec). */
void hcg_summary_at_exit(void);
uint64_t hcg_summary_errors(void);
/* In a fork child: counters start from nothing (the child reports its own). */
void hcg_summary_after_fork(void);
/* Whether this process launched, ran or was told anything worth a summary. */
int hcg_summary_active(void);

/* The summary of a record's counts (a program that died). */
void hcg_summary_print_recovered(const hcg_flight *f, const hcg_counts *c, uint64_t dropped,
                                 pid_t pid, const char *how);
uint64_t hcg_summary_errors_of(const hcg_counts *c);
/* The summary of events read back from logs (hcguard report): title its
 * first line; the counts made from the events; the times and findings of
 * the events given to hcg_summary_event and hcg_audit_event since both
 * last started anew (hcg_summary_after_fork, hcg_audit_after_fork). */
void hcg_summary_print_read(const char *title, const hcg_counts *c,
                            const uint64_t launched[HCG_FN_KIND_COUNT], uint64_t nodes, int mode);

/* One line: hcguard was active, but no host function was launched. */
void hcg_summary_print_idle(void);

/* ---- findings.c: rejections, skips and findings, merged and printed ------ */
/* What a cuda-call-in-host-fn finding's bytes name: a thunk's entry point
 * or one of hcguard's wrappers ("a driver function" if none). */
const char *hcg_called_name(uint64_t what);
void hcg_audit_event(const hcg_event *e); /* collector */
void hcg_audit_after_fork(void); /* a fork child's findings are its own */
/* Errors and warnings (the README's table): of an event's kind
 * (HCG_EV_REJECT, HCG_EV_SKIP, HCG_EV_FINDING) and reason. */
enum { HCG_SEV_ERROR = 1, HCG_SEV_WARNING = 2 };
int hcg_severity_of(uint8_t ev, unsigned reason);
/* The findings counted in c that are of severity sev. */
uint64_t hcg_findings_of_severity(const hcg_counts *c, int sev);
/* The summary's lines for every group of (ev, reason), most frequent
 * first: count, function, call site (slow ones: times and what waited). */
void hcg_findings_print_groups(uint8_t ev, unsigned reason);

/* ---- sinkfile.c: the sinks' output files --------------------------------- */
#define HCG_SINK_EVENT_MAX 4096 /* room reserved for one event's text */
#define HCG_SINK_BUF_EVENTS 1024 /* events a buffer holds at most */

typedef struct hcg_sinkfile {
    const char *what;               /* "event log", "trace": for messages */
    int fd;                         /* -1: none */
    int shared_ok;                  /* a fork child may append to the parent's file */
    int open_pending;               /* a fork child's own file, not opened yet */
    int unshared;                   /* a fork child that may not share, with no %p */
    int busy;                       /* may not share: another process writes the file */
    int started;                    /* an event was written to this file */
    int err;                        /* the first write error, 0 if none */
    int replaced;                   /* err: the program closed fd, path is another file */
    int elsewhere;                  /* replaced: hcguard run found another file there */
    int continued;                  /* hcguard run continued it for a dead program */
    int locked;                     /* flock held: a process tree's log being claimed */
    int claim_err;                  /* why that log could not be started anew, 0 */
    int slot;                       /* HCG_SINK_*, for the flight record */
    hcg_fileid id;                  /* fd's file, checked before each batch is written */
    pid_t pid;
    uint64_t written, lost;         /* events */
    unsigned buf_events;
    /* Where each event in buf ends: a write cut short (a full disk, the
     * file size limit) counts those before the cut as written. */
    uint32_t ends[HCG_SINK_BUF_EVENTS];
    size_t used;
    char path[HCG_PATH_MAX], pattern[HCG_PATH_MAX];
    char buf[1 << 16];
} hcg_sinkfile;

/* f's file is one process's (the trace): the lock (flock) that says so
 * taken for as long as f->fd is open, 0; -1 if another process holds it:
 * f->fd closed, f->busy set. Where the file system refuses the lock, 0. */
int hcg_sinkfile_take(hcg_sinkfile *f);
/* The flock hcg_sinkfile_open took on a process tree's log, let go once
 * its header is written. */
void hcg_sinkfile_unlock(hcg_sinkfile *f);
/* Open path (expanded from pattern, kept for a fork child's own %p).
 * shared_ok: a fork child without %p appends to the same file; else it
 * writes none. An image started by exec continues the file the image
 * before it had open. 0, or -1 with a message. */
int hcg_sinkfile_open(hcg_sinkfile *f, const char *what, const char *path, const char *pattern,
                      int shared_ok, int slot);
/* hcguard run: the file of the program at pid, which died, continued if
 * path still names the file the program had open (id, from its record);
 * else none is written, said. 0, or -1. */
int hcg_sinkfile_reopen(hcg_sinkfile *f, const char *what, const char *path, pid_t pid,
                        const hcg_fileid *id);
/* A file continued for a program that died: the last bytes (up to len) and
 * the file's size; and cutting it back to size. A process killed while it
 * wrote (exit_group cuts a write short between pages) can leave half an
 * event, which the events appended after it would make unreadable. */
size_t hcg_sinkfile_tail(const hcg_sinkfile *f, char *buf, size_t len, off_t *size);
void hcg_sinkfile_cut(hcg_sinkfile *f, off_t size, const char *why);
#define HCG_SINK_CUT_HALF                                                                   \
    "its last event was cut short when the program died: removed (the event is written "   \
    "again from memory)"
#define HCG_SINK_CUT_CLOSED                                                                 \
    "the program closed it before it died: opened again for the events left in memory"
/* The file's size (-1: no file); len bytes of it from off (pread's answer). */
int64_t hcg_sinkfile_end(const hcg_sinkfile *f);
ssize_t hcg_sinkfile_pread(const hcg_sinkfile *f, off_t off, char *buf, size_t len);
/* Write out what is buffered, keeping the file open (before exec). */
void hcg_sinkfile_flush(hcg_sinkfile *f);
/* What the next image should do with this file: 'c', 'n' or '-'. */
char hcg_sinkfile_exec_state(const hcg_sinkfile *f, int forked);
/* Room for one event (HCG_SINK_EVENT_MAX bytes), or NULL if there is no
 * file; then hcg_sinkfile_commit with the length written. */
char *hcg_sinkfile_reserve(hcg_sinkfile *f);
void hcg_sinkfile_commit(hcg_sinkfile *f, size_t len);
/* The same for a line that is not an event (the log's header). */
void hcg_sinkfile_commit_uncounted(hcg_sinkfile *f, size_t len);
/* Write out the rest and text (may be NULL), the file left open. */
void hcg_sinkfile_put(hcg_sinkfile *f, const char *text);
/* Write out the rest and footer (may be NULL), close, report an error. */
void hcg_sinkfile_close(hcg_sinkfile *f, const char *footer);
void hcg_sinkfile_after_fork(hcg_sinkfile *f);
void hcg_sinkfile_summary(const hcg_sinkfile *f); /* the summary's line */
/* hcguard run's summary for a dead program: the file's line, path from its
 * record (said as continued, found to be another file, or not at all when
 * the program had none open). */
void hcg_sinkfile_recovered_line(const hcg_sinkfile *f, const char *path, const char *done);
/* From now on every function is "unknown" (the launcher, writing events of
 * a program that ended). */
void hcg_fn_names_gone(void);
/* on: hcg_fn_name answers from its cache alone ("unknown" else): a signal
 * handler is writing. */
void hcg_fn_names_cached_only(int on);
/* 1 while names come from the cache alone (a signal handler, the launcher). */
int hcg_fn_names_cached(void);
/* fn's symbol (or "anonymous"), looked up once per function (collector). */
const char *hcg_fn_name(uintptr_t fn);
/* An event's call site (its caller field) as "main+0x1c (in app)", looked
 * up once per site (collector); "" for none, "unknown" as hcg_fn_name. */
const char *hcg_caller_name(uintptr_t site);
/* The thread that enqueued a run or skip (launched its graph), 0 if
 * unknown: the event's own, or for a stream launch its pool's owner. */
uint32_t hcg_event_enqueuer(const hcg_event *e);
/* The seq of the rejection that reported a run's or skip's record at
 * enqueue (audit mode), 0 if none. */
uint64_t hcg_event_reject_seq(const hcg_event *e);
/* s as the inside of a JSON string, into out (room bytes, terminated):
 * '"' and '\\' escaped, control characters as \\u00XX, a byte that is
 * not UTF-8 (and DEL) as '?'; whole characters only, cut where the next
 * does not fit. Returns the length written. */
size_t hcg_json_str(char *out, size_t room, const char *s);

/* Text built without printf: the trace writes five objects for each host
 * function, on the collector, which must keep up with the callback
 * threads, and vsnprintf was most of its time. Bounded as snprintf is: at
 * most room - 1 bytes, always terminated, what does not fit cut off. */
typedef struct hcg_text {
    char *p;
    size_t len, room; /* room >= 1 */
} hcg_text;
void hcg_text_mem(hcg_text *t, const char *s, size_t n);
#define hcg_text_lit(t, s) hcg_text_mem((t), "" s, sizeof(s) - 1)
void hcg_text_str(hcg_text *t, const char *s);
void hcg_text_u64(hcg_text *t, uint64_t v);
void hcg_text_i64(hcg_text *t, int64_t v);
void hcg_text_hex(hcg_text *t, uint64_t v); /* "0x" PRIx64 */
void hcg_text_us(hcg_text *t, uint64_t ns); /* microseconds, three decimals */
void hcg_text_printf(hcg_text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* JSON fields: ,"key":v and ,"key":"0x..." */
void hcg_text_key_u64(hcg_text *t, const char *key, uint64_t v);
void hcg_text_key_hex(hcg_text *t, const char *key, uint64_t v);

/* ---- jsonl.c: the event log -------------------------------------------- */
/* The log's schema (docs/LOG.md), in its header: raised when a field
 * changes meaning or goes; new fields do not raise it. */
#define HCG_LOG_SCHEMA 1
/* 0 or -1 (message printed). pattern: as configured, so that a fork child
 * whose log name holds %p writes a log of its own. */
int hcg_jsonl_open(const char *path, const char *pattern);
/* In a fork child: the parent's unwritten events are the parent's. */
void hcg_jsonl_after_fork(void);
void hcg_jsonl_event(const hcg_event *e);
void hcg_jsonl_flush(void);       /* drains serialised: under the drain lock */
char hcg_jsonl_exec_state(int forked);
/* Write out what is left and close; a write error is reported here. */
void hcg_jsonl_close(void);
/* The summary's line about the log (after hcg_jsonl_close). */
void hcg_jsonl_summary(void);

/* ---- trace.c: the Chrome trace -------------------------------------------- */
int hcg_trace_open(const char *path, const char *pattern); /* 0 or -1 (message printed) */
void hcg_trace_event(const hcg_event *e);
void hcg_trace_flush(void);
char hcg_trace_exec_state(int forked);
void hcg_trace_close(void);
void hcg_trace_seal(void);
void hcg_trace_after_fork(void);
void hcg_trace_summary(void);
/* The formatting of one process's events (hcg_sinks_trace_*). */
hcg_trace_proc *hcg_trace_proc_new(int pid, uint64_t base_ns, uint32_t tid_base,
                                   uint64_t flow_first);
void hcg_trace_proc_free(hcg_trace_proc *tp);
size_t hcg_trace_format(hcg_trace_proc *tp, const hcg_event *e, const char *fn_name,
                        uint32_t enq_tid, char *out, size_t room);

/* continue the file of process pid (the launcher), if path still names
 * the file id; then its line in the launcher's summary, path from the
 * record (hcg_sinkfile_recovered_line). */
int hcg_jsonl_reopen(const char *path, pid_t pid, const hcg_fileid *id);
int hcg_trace_reopen(const char *path, pid_t pid, const hcg_fileid *id);
void hcg_jsonl_recovered_line(const char *path);
void hcg_trace_recovered_line(const char *path);
/* hcg_sink's file_end and rewrite_from (src/events/events.h). */
int64_t hcg_jsonl_file_end(void);
int64_t hcg_trace_file_end(void);
void hcg_jsonl_rewrite_from(int64_t off);
void hcg_trace_rewrite_from(int64_t off);

#endif /* HCG_SINKS_H */
