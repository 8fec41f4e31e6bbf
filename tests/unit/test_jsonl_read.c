/*
 * The event log's reader (src/jsonl_read.c): what the writer (src/jsonl.c)
 * writes for every kind of event reads back field for field; each way a
 * line can be wrong is refused with its reason; a file is read line by
 * line, and one cut short or holding a bad line names the line.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hcg.h"
#include "sinks/jsonl_read.h"
#include "../common/check.h"
#include "../common/stderr_redirect.h"

#define HEAD "{\"event\":\"reject\",\"pid\":12,\"seq\":3,\"api\":\"cuLaunchHostFunc\"," \
             "\"fn\":\"0x0\",\"fn_kind\":\"ordinary\",\"user_data\":\"0x10\",\"stream\":\"0x0\"," \
             "\"tid\":7,\"t_enqueue_ns\":99"

static hcg_logrec g_rec;
static char g_err[256];

static int parse(const char *line)
{
    return hcg_logrec_parse(line, strlen(line), &g_rec, g_err, sizeof g_err);
}

static void check_bad(const char *line, const char *why)
{
    CHECK_EQ(parse(line), -1);
    CHECK_HAS(g_err, why);
}

static void test_good(void)
{
    CHECK_EQ(parse(HEAD ",\"reason\":\"overlap\"}"), 0);
    CHECK_EQ(g_rec.kind, HCG_LOGREC_REJECT);
    CHECK_EQ(g_rec.pid, 12);
    CHECK_EQ(g_rec.user_data, 0x10);
    CHECK_STR(g_rec.reason, "overlap");
    CHECK_STR(g_err, "");
    /* a newer writer's extra scalar field is skipped */
    CHECK_EQ(parse(HEAD ",\"reason\":\"overlap\",\"new\":[1]}"), -1);
    CHECK_EQ(parse(HEAD ",\"reason\":\"overlap\",\"new\":-1.5e3,\"x\":null}"), 0);
    CHECK_EQ(parse("{\"event\":\"finding\",\"pid\":1,\"seq\":0,\"api\":\"a\",\"fn\":\"0xAbC\","
                   "\"fn_name\":\"q\\\"\\\\\\u0001\\u00e9\",\"fn_kind\":\"k\",\"user_data\":\"0x0\","
                   "\"stream\":\"0x0\",\"tid\":0,\"t_enqueue_ns\":0,\"finding\":\"slow-host-fn\"}"),
             0);
    CHECK_EQ(g_rec.fn, 0xabc);
    CHECK_STR(g_rec.fn_name, "q\"\\\001\xc3\xa9");
}

static void test_bad(void)
{
    check_bad("", "not a JSON object");
    check_bad("[]", "not a JSON object");
    check_bad("{}", "an empty object");
    check_bad(HEAD "}", "no \"reason\"");
    check_bad(HEAD ",\"reason\":\"overlap\"", "expected ',' or '}'");
    check_bad(HEAD ",\"reason\":\"overlap\"} x", "text after the object");
    check_bad(HEAD ",\"reason\":\"overlap\",\"seq\":4}", "\"seq\" appears twice");
    check_bad(HEAD ",\"reason\":\"overlap\",\"graph\":\"0x1\"}", "come together");
    check_bad(HEAD ",\"reason\":\"overlap\",\"gbps\":1.0}", "did not run");
    /* found by fuzz_jsonl: part of the times on an event that has none */
    check_bad(HEAD ",\"reason\":\"overlap\",\"t_start_ns\":1,\"t_end_ns\":2}", "come together");
    check_bad("{\"event\":\"Launch!\"}", "is not a record kind");
    check_bad("{\"event\":\"\"}", "is not a record kind");
    /* a kind a newer writer added reads as OTHER (the file reader skips it) */
    CHECK_EQ(parse("{\"event\":\"launch\",\"pid\":3}"), 0);
    CHECK_EQ(g_rec.kind, HCG_LOGREC_OTHER);
    check_bad("{\"event\":\"launch\"}", "no \"pid\"");
    /* the header: every field, schema not 0 */
    check_bad("{\"event\":\"header\",\"schema\":1,\"pid\":3}", "no \"hcguard\"");
    check_bad("{\"event\":\"header\",\"schema\":0,\"hcguard\":\"1\",\"pid\":3,\"ppid\":0,"
              "\"host\":\"h\",\"mode\":\"guard\",\"driver_version\":0,\"exe\":\"x\",\"t0_ns\":1}",
              "\"schema\" is 0");
    check_bad("{\"event\":\"header\",\"schema\":1,\"hcguard\":\"1\",\"pid\":3,\"ppid\":0,"
              "\"host\":\"h\",\"mode\":\"guard\",\"driver_version\":-1,\"exe\":\"x\",\"t0_ns\":1}",
              "driver_version");
    check_bad("{\"event\":\"run\",\"pid\":0}", "\"pid\"");
    check_bad("{\"event\":\"run\",\"pid\":-3}", "\"pid\"");
    check_bad("{\"event\":\"run\",\"seq\":01}", "leading zero");
    check_bad("{\"event\":\"run\",\"seq\":1.5}", "not a non-negative integer");
    check_bad("{\"event\":\"run\",\"seq\":18446744073709551616}", "too large");
    check_bad("{\"event\":\"run\",\"fn\":\"12\"}", "not an address");
    check_bad("{\"event\":\"run\",\"fn\":\"0x\"}", "not an address");
    check_bad("{\"event\":\"run\",\"fn\":\"0x00000000000000001\"}", "not an address");
    check_bad("{\"event\":\"run\",\"fn\":\"0xg\"}", "not an address");
    check_bad("{\"event\":\"run\",\"api\":\"a\tb\"}", "control character");
    check_bad("{\"event\":\"run\",\"api\":\"\\u0000\"}", "bad escape");
    check_bad("{\"event\":\"run\",\"api\":\"\\x\"}", "bad escape");
    check_bad("{\"event\":\"run\",\"api\":\"abc", "unterminated");
    check_bad("{\"event\":\"run\",\"gbps\":1e999}", "out of range");
    /* the times of an event that ran must agree */
    check_bad("{\"event\":\"run\",\"pid\":1,\"seq\":0,\"api\":\"a\",\"fn\":\"0x1\",\"fn_kind\":\"k\","
              "\"user_data\":\"0x0\",\"stream\":\"0x0\",\"tid\":0,\"t_enqueue_ns\":0,"
              "\"t_start_ns\":5,\"t_end_ns\":9,\"duration_ns\":3}",
              "duration_ns");
    /* a rejection's seq only on what was to run (audit mode), never 0 */
    check_bad(HEAD ",\"reason\":\"overlap\",\"reject_seq\":3}", "not to run");
    check_bad("{\"event\":\"skip\",\"reject_seq\":0,\"pid\":1,\"seq\":1,\"api\":\"a\","
              "\"fn\":\"0x1\",\"fn_kind\":\"k\",\"user_data\":\"0x0\",\"stream\":\"0x0\","
              "\"tid\":1,\"t_enqueue_ns\":0,\"t_start_ns\":1,\"t_end_ns\":1,\"duration_ns\":0,"
              "\"reason\":\"overlap\"}", "\"reject_seq\" is 0");
    /* thread ids are pid_t's: a trace's stream tracks are above them */
    check_bad("{\"event\":\"run\",\"tid\":2147483648}", "\"tid\": not a thread id");
    check_bad("{\"event\":\"run\",\"enqueue_tid\":4294967296}", "not a thread id");
    char nul[] = "{\"event\":\"run\"}";
    nul[3] = '\0';
    CHECK_EQ(hcg_logrec_parse(nul, sizeof nul - 1, &g_rec, g_err, sizeof g_err), -1);
    CHECK_HAS(g_err, "NUL or newline");
}

/* Everything the writer writes, read back: the header, then a run (with
 * its enqueuing thread), a skip of a graph node, a rejection, a slow
 * finding, a hung one (times and stream), a CUDA call made through one of
 * hcguard's wrappers (called), a copy that faulted (the fault). */
#define N_WRITTEN 8
static void write_events(const char *path)
{
    CHECK_EQ(hcg_jsonl_open(path, path), 0);
    hcg_event e = {0};
    e.tid = 5;
    e.fn = (uintptr_t)hcguard_host_copy;
    e.fnkind = HCG_FN_COPY_HCGUARD;
    e.user = 0x1234;
    e.stream = 0x99;
    e.dst = 0x1000;
    e.src = 0x2000;
    e.bytes = 4096;
    e.t_enqueue = 10;
    e.t_start = 20;
    e.t_end = 30;
    uint8_t kinds[] = {HCG_EV_RUN, HCG_EV_SKIP, HCG_EV_REJECT, HCG_EV_FINDING,
                       HCG_EV_FINDING, HCG_EV_FINDING, HCG_EV_SKIP};
    uint8_t reasons[] = {0, HCGUARD_ERR_OVERLAP, HCGUARD_ERR_OVERLAP, HCG_FIND_SLOW,
                         HCG_FIND_HANG, HCG_FIND_CUDA_CALL, HCGUARD_ERR_COPY_FAULTED};
    for (int i = 0; i < 7; i++) {
        e.kind = kinds[i];
        e.seq = (uint64_t)i + 1;
        e.reason = reasons[i];
        e.enq_tid = i == 0 ? 4 : 0;
        e.graph = i == 1 ? 0xab : 0;
        e.node = i == 1 ? 0xcd : 0;
        /* the skip names the rejection that reported it (audit mode); the
         * rejection itself does not, even with the flag */
        e.flags = i == 1 || i == 2 ? HCG_EVF_REPORTED : 0;
        e.reject_seq = i == 1 || i == 2 ? 3 : 0;
        if (i == 5) {
            e.fnkind = HCG_FN_ORDINARY;
            e.bytes = HCG_FIND_WRAPPER_BIT | HCG_API_LAUNCH_HOST_FUNC;
        }
        if (i == 6) {
            e.fnkind = HCG_FN_COPY_HCGUARD;
            e.bytes = 64;
            e.fault_sig = SIGBUS;
            e.fault_code = BUS_ADRERR;
            e.fault_addr = 0x3000;
        }
        hcg_jsonl_event(&e);
    }
    hcg_jsonl_close();
}

typedef struct seen {
    int n;
    hcg_logrec rec[N_WRITTEN];
} seen;

static int collect(const hcg_logrec *r, void *ctx)
{
    seen *s = ctx;
    if (s->n < N_WRITTEN)
        s->rec[s->n] = *r;
    s->n++;
    return 0;
}

static void test_writer_read_back(void)
{
    char path[] = "/tmp/hcg_jsonl_readXXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    write_events(path);
    fd = open(path, O_RDONLY);
    seen s = {0};
    char err[300];
    CHECK_EQ(hcg_logrec_read_fd(fd, collect, &s, err, sizeof err), N_WRITTEN);
    close(fd);
    CHECK_EQ(s.n, N_WRITTEN);
    const hcg_logrec *h = &s.rec[0], *r = &s.rec[1];
    CHECK_EQ(h->kind, HCG_LOGREC_HEADER);
    CHECK_EQ(h->schema, HCG_LOGREC_SCHEMA);
    CHECK_EQ(h->pid, getpid());
    CHECK_EQ(h->ppid, (uint64_t)getppid());
    CHECK(h->host[0] && h->exe[0] && h->version[0] && h->t0_ns > 0);
    CHECK_STR(h->mode, "guard");
    CHECK(!(h->have & HCG_LR_RANK)); /* no rank in the test's environment */
    CHECK_EQ(r[0].kind, HCG_LOGREC_RUN);
    CHECK_EQ(r[0].bytes, 4096);
    CHECK_EQ(r[0].pid, getpid());
    CHECK_EQ(r[0].enqueue_tid, 4);
    CHECK(r[0].have & HCG_LR_GBPS);
    CHECK_STR(r[0].fn_name, "hcguard_host_copy");
    CHECK_EQ(r[1].kind, HCG_LOGREC_SKIP);
    CHECK_EQ(r[1].graph, 0xab);
    CHECK_STR(r[1].reason, "overlap");
    CHECK_EQ(r[1].reject_seq, 3);
    CHECK(!(r[0].have & HCG_LR_REJECT_SEQ) && !(r[2].have & HCG_LR_REJECT_SEQ));
    CHECK_EQ(r[2].kind, HCG_LOGREC_REJECT);
    CHECK_EQ(r[2].seq, 3);
    CHECK_EQ(r[3].kind, HCG_LOGREC_FINDING);
    CHECK_STR(r[3].finding, "slow-host-fn");
    CHECK_EQ(r[3].duration_ns, 10);
    CHECK_STR(r[4].finding, "hung-host-fn");
    CHECK_EQ(r[4].stream, 0x99);
    CHECK(r[4].have & HCG_LR_T_START);
    CHECK_STR(r[5].finding, "cuda-call-in-host-fn");
    CHECK_STR(r[5].called, "cuLaunchHostFunc");
    CHECK_STR(r[6].reason, "copy-faulted");
    CHECK_STR(r[6].fault, "SIGBUS");
    CHECK_EQ(r[6].fault_addr, 0x3000);
    for (int i = 1; i < N_WRITTEN; i++)
        CHECK_EQ(s.rec[i].seq, (uint64_t)i);
    unlink(path);
}

static long read_text(const char *text, char *err, size_t errlen)
{
    char path[] = "/tmp/hcg_jsonl_readXXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    CHECK_EQ(write(fd, text, strlen(text)), (long)strlen(text));
    lseek(fd, 0, SEEK_SET);
    long n = hcg_logrec_read_fd(fd, NULL, NULL, err, errlen);
    close(fd);
    unlink(path);
    return n;
}

static void test_files(void)
{
    char err[300];
    const char *good = HEAD ",\"reason\":\"overlap\"}\n";
    char text[4096];
    snprintf(text, sizeof text, "%s%s", good, good);
    CHECK_EQ(read_text(text, err, sizeof err), 2);
    CHECK_EQ(read_text("", err, sizeof err), 0);
    snprintf(text, sizeof text, "%s%.*s", good, (int)strlen(good) - 1, good);
    CHECK_EQ(read_text(text, err, sizeof err), -1);
    CHECK_HAS(err, "line 2: no newline at its end");
    snprintf(text, sizeof text, "%s{\"event\":\"run\"}\n", good);
    CHECK_EQ(read_text(text, err, sizeof err), -1);
    CHECK_HAS(err, "line 2: no \"pid\"");
    static char big[HCG_LOGREC_LINE_MAX * 3];
    memset(big, 'x', sizeof big - 2);
    big[sizeof big - 2] = '\n';
    CHECK_EQ(read_text(big, err, sizeof err), -1);
    CHECK_HAS(err, "line 1: longer than the limit");
    /* a newer schema stops the reader; an unknown kind is skipped */
    CHECK_EQ(read_text("{\"event\":\"header\",\"schema\":2,\"hcguard\":\"9\",\"pid\":3,\"ppid\":1,"
                       "\"host\":\"h\",\"mode\":\"guard\",\"driver_version\":0,\"exe\":\"x\","
                       "\"t0_ns\":1}\n", err, sizeof err), -1);
    CHECK_HAS(err, "line 1: a log of schema 2, newer than this reader's (1)");
    snprintf(text, sizeof text, "{\"event\":\"launch\",\"pid\":3}\n%s", good);
    CHECK_EQ(read_text(text, err, sizeof err), 2);
}

/* path's whole text (at most len - 1 bytes). */
static const char *slurp(const char *path, char *buf, size_t len)
{
    int fd = open(path, O_RDONLY);
    ssize_t n = fd >= 0 ? read(fd, buf, len - 1) : -1;
    if (fd >= 0)
        close(fd);
    buf[n > 0 ? n : 0] = '\0';
    return buf;
}

static void put_text(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_TRUNC);
    CHECK(fd >= 0);
    CHECK_EQ(write(fd, text, strlen(text)), (long)strlen(text));
    close(fd);
}

/* A new empty file at path (a mkstemp template). */
static void make_temp(char *path)
{
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd >= 0)
        close(fd);
}

/* A run of hcguard's own copy, at ticks 1 (enqueued), 2 and 3. */
static hcg_event copy_run(uint64_t seq)
{
    hcg_event e = {0};
    e.kind = HCG_EV_RUN;
    e.seq = seq;
    e.fn = (uintptr_t)hcguard_host_copy;
    e.t_enqueue = 1;
    e.t_start = 2;
    e.t_end = 3;
    return e;
}

/* The identity a program's record keeps of its file at path (as the
 * launcher finds it there). */
static const hcg_fileid *id_of(const char *path)
{
    static hcg_fileid id;
    struct stat st;
    CHECK_EQ(stat(path, &st), 0);
    id.dev = st.st_dev;
    id.ino = st.st_ino;
    return &id;
}

/* A file the program moved away, another of its own at the path: the
 * launcher writes none of the dead program's events there; none when the
 * program had no file open (its record's identity 0). */
static void test_reopen_elsewhere(void)
{
    char path[] = "/tmp/hcg_jsonl_elseXXXXXX", moved[64], text[256];
    make_temp(path);
    put_text(path, "HCGUARD'S");
    hcg_fileid was = *id_of(path);
    snprintf(moved, sizeof moved, "%s.moved", path);
    CHECK_EQ(rename(path, moved), 0);
    close(open(path, O_CREAT | O_EXCL | O_WRONLY, 0600));
    put_text(path, "PROGRAM DATA, no newline");
    hcg_event e = copy_run(9);
    CHECK_EQ(hcg_jsonl_reopen(path, getpid(), &was), -1);
    hcg_jsonl_event(&e);
    hcg_jsonl_close();
    CHECK_EQ(hcg_trace_reopen(path, getpid(), &was), -1);
    hcg_trace_event(&e);
    hcg_trace_close();
    slurp(path, text, sizeof text);
    CHECK_STR(text, "PROGRAM DATA, no newline");
    slurp(moved, text, sizeof text);
    CHECK_STR(text, "HCGUARD'S");
    unlink(moved);
    unlink(path);
    hcg_fileid none = {0, 0};
    CHECK_EQ(hcg_jsonl_reopen(path, getpid(), &none), -1);
    hcg_jsonl_close();
    CHECK(access(path, F_OK) != 0); /* not made */
}

/* The launcher continues the files of a program that died: a last event
 * cut short by the death (half a line, half a trace event) is removed, a
 * whole one kept, so that what it appends reads. */
static void test_reopen_cut(void)
{
    char path[] = "/tmp/hcg_jsonl_cutXXXXXX", text[8192], err[300];
    make_temp(path);
    hcg_event e = copy_run(9);
    const char *good = HEAD ",\"reason\":\"overlap\"}\n";
    snprintf(text, sizeof text, "%s{\"event\":\"run\",\"pid\":1", good);
    put_text(path, text);
    CHECK_EQ(hcg_jsonl_reopen(path, getpid(), id_of(path)), 0);
    hcg_jsonl_event(&e);
    hcg_jsonl_close();
    int fd = open(path, O_RDONLY);
    CHECK_EQ(hcg_logrec_read_fd(fd, NULL, NULL, err, sizeof err), 2);
    close(fd);

    static const struct { const char *before, *kept; } traces[] = {
        {"[\n{\"a\":1},\n{\"name\":\"x", "[\n{\"a\":1},\n{"},   /* half the last */
        {"[\n{\"na", "[\n{"},                                     /* half the first */
        {"[\n{\"a\":{\"b\":\"}\\\"\"}}", "[\n{\"a\":{\"b\":\"}\\\"\"}},\n{"}, /* whole */
        {"[\n{\"a\":{\"b\":1}", "[\n{"},                          /* the args' brace only */
    };
    for (size_t i = 0; i < sizeof traces / sizeof traces[0]; i++) {
        put_text(path, traces[i].before);
        CHECK_EQ(hcg_trace_reopen(path, getpid(), id_of(path)), 0);
        hcg_trace_event(&e);
        hcg_trace_close();
        slurp(path, text, sizeof text);
        CHECK(strncmp(text, traces[i].kept, strlen(traces[i].kept)) == 0);
        CHECK(strcmp(text + strlen(text) - 3, "}\n]") == 0 || strstr(text, "}\n]\n") != NULL);
        CHECK(strstr(text, "\"x") == NULL && strstr(text, "\"na\"") == NULL);
    }
    unlink(path);
}

static int count_of(const char *text, const char *what)
{
    int n = 0;
    for (const char *p = text; (p = strstr(p, what)); p += strlen(what))
        n++;
    return n;
}

static off_t size_of(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? st.st_size : -1;
}

/* A program killed after writing a batch of events and before giving
 * their ring slots back: the launcher writes the batch again from the
 * ring, and each file holds each event once. The log keeps what another
 * process (a fork child sharing it) appended among the batch's lines, and
 * the lines of the batch it holds skip their events once each (a finding
 * has its run's seq); the trace is cut back to where the batch began, but
 * only to where an event ended. */
static void test_rewrite_batch(void)
{
    char path[] = "/tmp/hcg_jsonl_batchXXXXXX", text[16384];
    make_temp(path);
    pid_t me = getpid();
    hcg_event e = copy_run(0);
    hcg_event f = e;
    f.kind = HCG_EV_FINDING;
    f.reason = HCG_FIND_SLOW;

    /* The log: seq 1 written before the batch; of the batch (2, its
     * finding, 3, 4) the run 2 and its finding written, then another
     * process's run 3; the rest is in the ring. */
    CHECK_EQ(hcg_jsonl_reopen(path, me, id_of(path)), 0);
    e.seq = 1;
    hcg_jsonl_event(&e);
    hcg_jsonl_flush();
    off_t off = size_of(path);
    e.seq = f.seq = 2;
    hcg_jsonl_event(&e);
    hcg_jsonl_event(&f);
    hcg_jsonl_close();
    int fd = open(path, O_WRONLY | O_APPEND);
    const char *other = "{\"event\":\"run\",\"pid\":1,\"seq\":3,\"api\":\"x\"}\n";
    CHECK_EQ(write(fd, other, strlen(other)), (long)strlen(other));
    close(fd);
    CHECK_EQ(hcg_jsonl_reopen(path, me, id_of(path)), 0);
    hcg_jsonl_rewrite_from(off);
    for (uint64_t seq = 2; seq <= 4; seq++) {
        e.seq = f.seq = seq;
        hcg_jsonl_event(&e);
        if (seq == 2)
            hcg_jsonl_event(&f);
    }
    e.seq = 2; /* forgotten once skipped: a second line is written */
    hcg_jsonl_event(&e);
    hcg_jsonl_close();
    slurp(path, text, sizeof text);
    char key[128];
    for (uint64_t seq = 1; seq <= 4; seq++) {
        snprintf(key, sizeof key, "{\"event\":\"run\",\"pid\":%d,\"seq\":%" PRIu64 ",",
                 (int)me, seq);
        CHECK_EQ(count_of(text, key), seq == 2 ? 2 : 1);
    }
    snprintf(key, sizeof key, "{\"event\":\"finding\",\"pid\":%d,\"seq\":2,", (int)me);
    CHECK_EQ(count_of(text, key), 1);
    CHECK_EQ(count_of(text, other), 1);

    /* The trace: event 1, then the batch (2) written whole. */
    put_text(path, "");
    CHECK_EQ(hcg_trace_reopen(path, me, id_of(path)), 0);
    e.seq = 1;
    hcg_trace_event(&e);
    hcg_trace_flush();
    off = size_of(path);
    e.seq = 2;
    hcg_trace_event(&e);
    hcg_trace_flush();
    off_t whole = size_of(path);
    CHECK_EQ(hcg_trace_reopen(path, me, id_of(path)), 0);
    hcg_trace_rewrite_from(off + 3); /* not where an event ended: untouched */
    CHECK_EQ(size_of(path), whole);
    hcg_trace_rewrite_from(whole); /* nothing of the batch written */
    CHECK_EQ(size_of(path), whole);
    hcg_trace_rewrite_from(off);
    CHECK_EQ(size_of(path), off);
    hcg_trace_event(&e);
    hcg_trace_close();
    slurp(path, text, sizeof text);
    CHECK_EQ(count_of(text, "\"seq\":1"), 2); /* a slice on its thread and its stream */
    CHECK_EQ(count_of(text, "\"seq\":2"), 2);
    CHECK(strcmp(text + strlen(text) - 3, "\n]\n") == 0);
    unlink(path);
}

/* A run's slice on its callback thread begins no earlier than the last one
 * there ended (two clock references may disagree by a few ns), whichever
 * other threads ran in between, ids that share a slot of the table of last
 * ends (ids 64 apart) included; one converted so early that it ends
 * before the last one did is moved after it whole, its duration kept. */
static void test_trace_thread_ends(void)
{
    hcg_trace_proc *tp = hcg_sinks_trace_start(7, 0, HCG_TRACE_TID_BASE, 1);
    CHECK(tp != NULL);
    static const struct { uint32_t tid; uintptr_t stream; uint64_t start, end; } runs[] = {
        {100, 0x10, 1000000, 2000000},
        {164, 0x20, 1500000, 2500000},
        {100, 0x30, 1999990, 3000000}, /* 10 ns before the first one's end */
        {100, 0x40, 2999000, 2999500}, /* ends 500 ns before that one did */
    };
    static const char *const want[] = {
        "\"ts\":1000.000,\"dur\":1000.000,", "\"ts\":1500.000,\"dur\":1000.000,",
        "\"ts\":2000.000,\"dur\":1000.000,", "\"ts\":3000.000,\"dur\":0.500,",
    };
    char out[HCG_SINK_EVENT_MAX];
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        hcg_event e = {0};
        e.kind = HCG_EV_RUN;
        e.seq = i + 1;
        e.tid = runs[i].tid;
        e.stream = runs[i].stream;
        e.t_enqueue = e.t_start = runs[i].start;
        e.t_end = runs[i].end;
        out[hcg_sinks_trace_event(tp, &e, "f", 0, out, sizeof out)] = '\0';
        const char *at = strstr(out, "\"ts\":");
        CHECK(at != NULL && strncmp(at, want[i], strlen(want[i])) == 0);
    }
    hcg_sinks_trace_end(tp);
}

/* On the track the streams past the first 256 share, two callback threads
 * run at the same time, again and again (runs of 10 ms, side by side): a
 * run is shown nested or from when the other ended (docs/LOG.md), never
 * later, however many ran before it. */
static void test_trace_shared_track(void)
{
    hcg_trace_proc *tp = hcg_sinks_trace_start(7, 0, HCG_TRACE_TID_BASE, 1);
    CHECK(tp != NULL);
    char out[HCG_SINK_EVENT_MAX];
    hcg_event e = {0};
    e.kind = HCG_EV_RUN;
    e.tid = 100;
    for (unsigned i = 0; i < HCG_TRACE_STREAM_TRACKS; i++) { /* every track of its own taken */
        e.seq++;
        e.stream = 0x1000 + 16 * i;
        e.t_enqueue = e.t_start = 1000 + 10 * i;
        e.t_end = e.t_start + 5;
        hcg_sinks_trace_event(tp, &e, "f", 0, out, sizeof out);
    }
    const uint64_t t0 = 1000000, run = 10000000;
    uint64_t worst = 0;
    for (unsigned i = 0; i < 100; i++)
        for (unsigned k = 0; k < 2; k++) {
            e.seq++;
            e.tid = 200 + k;
            e.stream = 0x100000 + 16 * k;
            e.t_enqueue = e.t_start = t0 + i * run;
            e.t_end = e.t_start + run;
            out[hcg_sinks_trace_event(tp, &e, "f", 0, out, sizeof out)] = '\0';
            const char *at = strstr(out, "\"ts\":");
            REQUIRE(at != NULL);
            uint64_t shown = (uint64_t)(strtod(at + 5, NULL) * 1000.0 + 0.5);
            if (shown > e.t_start && shown - e.t_start > worst)
                worst = shown - e.t_start;
        }
    CHECK_MSG(worst <= run, "a run shown %.3f ms after it began (want at most %.3f)",
              worst / 1e6, run / 1e6);
    hcg_sinks_trace_end(tp);
}

/* hcg_text (the trace's printf-free formatting) writes what snprintf
 * writes, with every room from 1 up: the same bytes, cut at the same
 * place, always terminated, never a byte past room. */
/* Whether s (n bytes) is valid UTF-8: decoded to code points, each
 * checked for its shortest form, the range and surrogates (the writer
 * checks byte ranges instead). */
static int valid_utf8(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        unsigned c = p[i], len = c < 0x80 ? 1 : c >> 5 == 6 ? 2 : c >> 4 == 14 ? 3
                                             : c >> 3 == 30 ? 4 : 0;
        if (!len || i + len > n)
            return 0;
        unsigned long cp = len == 1 ? c : c & (0x7fu >> len);
        for (unsigned k = 1; k < len; k++) {
            if (p[i + k] >> 6 != 2)
                return 0;
            cp = cp << 6 | (p[i + k] & 0x3f);
        }
        static const unsigned long least[] = {0, 0, 0x80, 0x800, 0x10000};
        if (cp < least[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
            return 0;
        i += len;
    }
    return 1;
}

/* Names as the log and the trace write them (hcg_json_str): escaped,
 * valid UTF-8 whatever the bytes (a symbol may hold any), cut at whole
 * characters, terminated within room. The log passed invalid bytes on and
 * cut inside a character: a strict reader refused the line. */
static void test_json_str(void)
{
    static const struct {
        const char *in, *want;
    } cases[] = {
        {"plain_name", "plain_name"},
        {"a\"b\\c\n\x01", "a\\\"b\\\\c\\u000a\\u0001"},
        {"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"},
        {"x\xff\xfey", "x??y"},                 /* not UTF-8 at all */
        {"\xc0\xaf", "??"},                     /* overlong '/' */
        {"\xe0\x80\xaf", "???"},                /* overlong, three bytes */
        {"\xed\xa0\x80", "???"},                /* a surrogate */
        {"\xf4\x90\x80\x80", "????"},           /* past U+10FFFF */
        {"\xe2\x82", "??"},                     /* cut short */
        {"del\x7f", "del?"},
    };
    /* The oracle itself, on what it must refuse and take. */
    CHECK(!valid_utf8("\xed\xa0\x80", 3) && !valid_utf8("\xc0\xaf", 2) &&
          !valid_utf8("\xf4\x90\x80\x80", 4) && !valid_utf8("\xe2\x82", 2) &&
          !valid_utf8("\xff", 1) && !valid_utf8("\xe0\x80\xaf", 3));
    CHECK(valid_utf8("\xf0\x9f\x98\x80\xc3\xa9z", 7) && valid_utf8("\xf4\x8f\xbf\xbf", 4));
    char out[64];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        CHECK_EQ(hcg_json_str(out, sizeof out, cases[i].in), strlen(cases[i].want));
        CHECK_STR(out, cases[i].want);
    }
    /* 3000 two-byte characters into rooms of every size up to 130: whole
     * characters only. */
    static char e3000[6001];
    for (int i = 0; i < 3000; i++)
        memcpy(e3000 + 2 * i, "\xc3\xa9", 2);
    for (size_t room = 1; room <= 130; room++) {
        size_t n = hcg_json_str(out + 0, room < sizeof out ? room : sizeof out, e3000);
        size_t lim = room < sizeof out ? room : sizeof out;
        CHECK(n < lim && out[n] == '\0' && n % 2 == 0 && n + 2 >= lim);
        CHECK(valid_utf8(out, n));
    }
    /* Random bytes: always valid UTF-8 out, never past the room. */
    unsigned seed = 12345;
    char in[200], big[4096];
    for (int round = 0; round < 20000; round++) {
        size_t len = (size_t)(rand_r(&seed) % (sizeof in - 1)) + 1;
        for (size_t i = 0; i < len; i++)
            in[i] = (char)(rand_r(&seed) % 255 + 1); /* no NUL */
        in[len] = '\0';
        size_t room = (size_t)(rand_r(&seed) % sizeof big) + 1;
        memset(big, 'Z', sizeof big);
        size_t n = hcg_json_str(big, room, in);
        CHECK(n < room && big[n] == '\0');
        CHECK(room == sizeof big || big[room] == 'Z');
        CHECK(valid_utf8(big, n));
    }
}

static void test_text(void)
{
    static const uint64_t vals[] = {0, 1, 9, 10, 999, 1000, 1001, 123456789, UINT32_MAX,
                                    (uint64_t)INT64_MAX, UINT64_MAX};
    for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++) {
        uint64_t v = vals[i];
        char want[256];
        int n = snprintf(want, sizeof want, "a%" PRIu64 "|%" PRId64 "|0x%" PRIx64 "|%" PRIu64
                         ".%03u|%s|%d", v, (int64_t)v, v, v / 1000, (unsigned)(v % 1000),
                         "str\"ing", 42);
        for (size_t room = 1; room <= (size_t)n + 2; room++) {
            char buf[300];
            memset(buf, '#', sizeof buf);
            hcg_text t = {buf, 0, room};
            buf[0] = '\0';
            hcg_text_lit(&t, "a");
            hcg_text_u64(&t, v);
            hcg_text_lit(&t, "|");
            hcg_text_i64(&t, (int64_t)v);
            hcg_text_lit(&t, "|");
            hcg_text_hex(&t, v);
            hcg_text_lit(&t, "|");
            hcg_text_us(&t, v);
            hcg_text_lit(&t, "|");
            hcg_text_str(&t, "str\"ing");
            hcg_text_printf(&t, "|%d", 42);
            char cut[256];
            snprintf(cut, room, "%s", want);
            CHECK_MSG(t.len == strlen(cut) && strcmp(buf, cut) == 0 && buf[room] == '#',
                      "value %" PRIu64 ", room %zu: \"%s\" (%zu), want \"%s\"", v, room, buf,
                      t.len, cut);
        }
    }
    char buf[8];
    hcg_text t = {buf, 0, sizeof buf};
    hcg_text_i64(&t, INT64_MIN);
    CHECK(strcmp(buf, "-922337") == 0 && t.len == 7);
}

/* Every field a run's trace objects can carry, at once, written exactly
 * as the viewers and the tests read them (names escaped once, the same
 * in all three slices); a room too small for them cuts them, terminated. */
static void test_trace_format(void)
{
    hcg_trace_proc *tp = hcg_sinks_trace_start(7, 1000, HCG_TRACE_TID_BASE, 5);
    CHECK(tp != NULL);
    hcg_event e = {0};
    e.kind = HCG_EV_SKIP;
    e.fnkind = HCG_FN_COPY_HCGUARD;
    e.reason = HCGUARD_ERR_COPY_FAULTED;
    e.flags = HCG_EVF_REPORTED;
    e.reject_seq = 41;
    e.api = HCG_API_LAUNCH_HOST_FUNC;
    e.seq = 42;
    e.tid = 100;
    e.stream = 0xabc0;
    e.graph = 0x1234;
    e.node = 0x5678;
    e.bytes = 4096;
    e.t_enqueue = 2000;
    e.t_start = 1002500;
    e.t_end = 3004567;
    static const char want[] =
        "{\"ph\":\"M\",\"pid\":7,\"tid\":100,\"args\":{\"name\":\"CUDA host functions (thread "
        "100)\"},\"name\":\"thread_name\"},\n"
        "{\"ph\":\"M\",\"pid\":7,\"tid\":%u,\"args\":{\"name\":\"stream 0xabc0\",\"stream\":"
        "\"0xabc0\"},\"name\":\"thread_name\"},\n"
        "{\"ph\":\"M\",\"pid\":7,\"tid\":%u,\"args\":{\"sort_index\":%u},\"name\":"
        "\"thread_sort_index\"},\n"
        "{\"ph\":\"M\",\"pid\":7,\"tid\":200,\"args\":{\"name\":\"thread 200\"},\"name\":"
        "\"thread_name\"},\n"
        "{\"name\":\"launch: a\\\"b\\\\c\\u0001\xc3\xa9?\",\"cat\":\"enqueue\",\"ph\":\"X\","
        "\"ts\":1.000,\"dur\":0.002,\"pid\":7,\"tid\":200,\"args\":{\"api\":\"cuLaunchHostFunc\","
        "\"stream\":\"0xabc0\",\"seq\":42}},\n"
        "{\"name\":\"host function\",\"cat\":\"flow\",\"ph\":\"s\",\"id\":6,\"ts\":1.001,"
        "\"pid\":7,\"tid\":200},\n"
        "{\"name\":\"host function\",\"cat\":\"flow\",\"ph\":\"f\",\"bp\":\"e\",\"id\":6,"
        "\"ts\":1001.501,\"pid\":7,\"tid\":100},\n"
        "{\"name\":\"skipped: a\\\"b\\\\c\\u0001\xc3\xa9?\",\"cat\":\"skipped copy\","
        "\"ph\":\"X\",\"ts\":1001.500,\"dur\":2002.067,\"pid\":7,\"tid\":%u,\"args\":{\"api\":"
        "\"cuLaunchHostFunc\",\"stream\":\"0xabc0\",\"seq\":42,\"graph\":\"0x1234\",\"node\":"
        "\"0x5678\",\"wait_us\":1000.500,\"enqueued_by\":200,\"reject_seq\":41,\"bytes\":4096,"
        "\"reason\":\"copy-faulted\"}}";
    char out[HCG_SINK_EVENT_MAX], exp[2 * sizeof want];
    size_t n = hcg_sinks_trace_event(tp, &e, "a\"b\\c\x01\xc3\xa9\xff", 200, out, sizeof out);
    out[n] = '\0';
    char *second = strstr(out, "},\n{\"name\":\"skipped: ");
    REQUIRE(second != NULL);
    second = strstr(second + 3, "},\n{\"name\":\"skipped: ");
    REQUIRE(second != NULL); /* the stream track's slice: the same but its tid */
    unsigned track = 0;
    REQUIRE(sscanf(strchr(out, '\n') + 1, "{\"ph\":\"M\",\"pid\":7,\"tid\":%u", &track) == 1);
    second[1] = '\0';
    snprintf(exp, sizeof exp, want, track, track, track - HCG_TRACE_TID_BASE + 1000000u, 100u);
    CHECK_MSG(strcmp(out, exp) == 0, "got\n%s\nwant\n%s", out, exp);
    /* a run of a copy: its GB/s, no reason */
    e.kind = HCG_EV_RUN;
    e.flags = 0;
    e.seq = 43;
    n = hcg_sinks_trace_event(tp, &e, "f", 200, out, sizeof out);
    out[n] = '\0';
    CHECK_MSG(strstr(out, "\"bytes\":4096,\"gbps\":0.002}}") != NULL && !strstr(out, "reason"),
              "%s", out);
    /* too little room: cut, terminated, nothing past it */
    for (size_t room = 1; room < 64; room++) {
        char small[80];
        memset(small, '#', sizeof small);
        e.seq++;
        n = hcg_sinks_trace_event(tp, &e, "f", 200, small, room);
        CHECK(n < room && small[n] == '\0' && small[room] == '#');
    }
    hcg_sinks_trace_end(tp);
}

/* The descriptor of the log at path (hcguard's own), or -1. */
static int fd_of(const char *path)
{
    char link[64], target[512];
    for (int fd = 3; fd < 1024; fd++) {
        snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
        ssize_t n = readlink(link, target, sizeof target - 1);
        if (n > 0 && (target[n] = '\0', strcmp(target, path) == 0))
            return fd;
    }
    return -1;
}

static void *message_blocked(void *arg)
{
    (void)arg;
    hcg_msg("a message to a full pipe: blocks with the message lock held");
    return NULL;
}

static void stuck(int sig)
{
    (void)sig;
    static const char say[] = "FAIL: the flush waited for the message lock\n";
    if (write(STDOUT_FILENO, say, sizeof say - 1) < 0)
        _exit(1);
    _exit(1);
}

/* The log's descriptor closed by the program and its path gone: a death
 * signal's handler flushing (hcg_self.dying, as hcg_events_flush_from_signal
 * sets it) that finds it so says nothing: its thread may hold the message
 * lock, and would wait for it for ever (here another thread holds it, in
 * a write to a full pipe). */
static void test_lost_fd_quiet(void)
{
    char path[] = "/tmp/hcg_jsonl_lostXXXXXX";
    make_temp(path);
    CHECK_EQ(hcg_jsonl_reopen(path, getpid(), id_of(path)), 0);
    hcg_event e = copy_run(1);
    hcg_jsonl_event(&e);
    hcg_jsonl_flush();
    int fd = fd_of(path), pipefd[2];
    REQUIRE(fd >= 0 && pipe(pipefd) == 0);
    fcntl(pipefd[1], F_SETFL, O_NONBLOCK);
    char junk[4096];
    memset(junk, 'x', sizeof junk);
    while (write(pipefd[1], junk, sizeof junk) > 0)
        ;
    fcntl(pipefd[1], F_SETFL, 0);
    int saved = dup(STDERR_FILENO);
    hcg_test_redirect_stderr(pipefd[1]);
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, message_blocked, NULL) == 0);
    usleep(200000); /* in its write, the lock held */
    close(fd);
    unlink(path);
    signal(SIGALRM, stuck);
    alarm(10);
    e.seq = 2;
    hcg_jsonl_event(&e);
    hcg_self.dying = 1;
    hcg_jsonl_flush();
    hcg_self.dying = 0;
    alarm(0);
    while (read(pipefd[0], junk, sizeof junk) == (ssize_t)sizeof junk) /* let it go */
        ;
    pthread_join(t, NULL);
    hcg_test_redirect_stderr(saved);
    close(saved);
    close(pipefd[0]);
    close(pipefd[1]);
    hcg_jsonl_close();
}

/* The slices [start, end] (ns) on track tid in trace text, in order; their
 * number. */
static int slices_of(const char *text, unsigned tid, uint64_t out[][2], int max)
{
    static const char key[] = "\"ph\":\"X\",\"ts\":";
    char want[32];
    snprintf(want, sizeof want, ",\"tid\":%u,", tid);
    int n = 0;
    for (const char *p = text; (p = strstr(p, key)) != NULL && n < max; p++) {
        const char *eol = strchr(p, '\n'), *t = strstr(p, want);
        if (!t || (eol && t > eol))
            continue;
        double ts = strtod(p + sizeof key - 1, NULL), dur = strtod(strstr(p, "\"dur\":") + 6, NULL);
        out[n][0] = (uint64_t)(ts * 1000.0 + 0.5);
        out[n][1] = out[n][0] + (uint64_t)(dur * 1000.0 + 0.5);
        n++;
    }
    return n;
}

/* A trace continued by hcguard run after the program died: the events it
 * left in memory were converted with another clock reference than the
 * slice before them, which may end a few ns after the next one begins.
 * On the callback thread and on the stream's track the two must still
 * follow one another (they overlapped partly: a fresh clone's CI). */
static void test_trace_continued(void)
{
    char path[] = "/tmp/hcg_trace_contXXXXXX", text[16384];
    make_temp(path);
    hcg_event e = copy_run(1);
    e.tid = 100;
    e.stream = 0x10;
    e.t_enqueue = 999000;
    e.t_start = 1000000;
    e.t_end = 1000100;
    CHECK_EQ(hcg_trace_reopen(path, getpid(), id_of(path)), 0); /* the program writes */
    hcg_trace_event(&e);
    hcg_trace_flush();
    CHECK_EQ(hcg_trace_reopen(path, getpid(), id_of(path)), 0); /* it died: the launcher goes on */
    e.seq = 2;
    e.t_enqueue = 999500;
    e.t_start = 1000095; /* 5 ns before the last one ended, by another reference */
    e.t_end = 1000200;
    hcg_trace_event(&e);
    hcg_trace_close();
    slurp(path, text, sizeof text);
    unsigned tracks[2] = {100, 0};
    /* The stream's track: the tid of the pseudo-thread named for 0x10. */
    const char *named = strstr(text, "stream 0x10");
    REQUIRE(named != NULL);
    const char *tid_at = named;
    while (tid_at > text && strncmp(tid_at, "\"tid\":", 6) != 0)
        tid_at--;
    tracks[1] = (unsigned)strtoul(tid_at + 6, NULL, 10);
    CHECK(tracks[1] >= HCG_TRACE_TID_BASE);
    for (int k = 0; k < 2; k++) {
        uint64_t sl[4][2];
        int n = slices_of(text, tracks[k], sl, 4);
        CHECK_EQ(n, 2);
        if (n == 2)
            CHECK_MSG(sl[1][0] >= sl[0][1], "track %u: [%" PRIu64 ", %" PRIu64 "] then [%" PRIu64
                      ", %" PRIu64 "] overlap partly", tracks[k], sl[0][0], sl[0][1], sl[1][0],
                      sl[1][1]);
    }
    unlink(path);
}

/* Two launches of one thread whose enqueue times, converted by two drains'
 * clock references, come out 1 ns apart (here in reverse order, as the
 * drains may write them): their 2 ns enqueue slices are the same slice or
 * do not overlap at all, never partly (e2e_trace_vfork once failed so). */
static void test_trace_enqueue_close(void)
{
    hcg_trace_proc *tp = hcg_sinks_trace_start(7, 0, HCG_TRACE_TID_BASE, 1);
    CHECK(tp != NULL);
    static const uint64_t enq[][2] = {{5001, 5000}, {6000, 5999}, {7002, 7003}, {8000, 8002}};
    char out[HCG_SINK_EVENT_MAX];
    for (size_t k = 0; k < sizeof enq / sizeof enq[0]; k++) {
        uint64_t ts[2];
        for (int i = 0; i < 2; i++) {
            hcg_event e = {0};
            e.kind = HCG_EV_RUN;
            e.seq = 2 * k + (uint64_t)i + 1;
            e.tid = 100;
            e.stream = 0x10;
            e.t_enqueue = enq[k][i];
            e.t_start = 100000 * (k + 1) + 10 * (uint64_t)i;
            e.t_end = e.t_start + 5;
            out[hcg_sinks_trace_event(tp, &e, "f", 200, out, sizeof out)] = '\0';
            static const char key[] = "\"cat\":\"enqueue\",\"ph\":\"X\",\"ts\":";
            const char *at = strstr(out, key);
            REQUIRE(at != NULL);
            ts[i] = (uint64_t)(strtod(at + sizeof key - 1, NULL) * 1000.0 + 0.5);
            CHECK(strstr(at, "\"dur\":0.002,") != NULL);
        }
        uint64_t gap = ts[0] > ts[1] ? ts[0] - ts[1] : ts[1] - ts[0];
        CHECK_MSG(gap == 0 || gap >= 2, "enqueues at %" PRIu64 " and %" PRIu64 " ns: slices at %"
                  PRIu64 " and %" PRIu64 " overlap partly", enq[k][0], enq[k][1], ts[0], ts[1]);
    }
    hcg_sinks_trace_end(tp);
}

/* The header record (hcg_loghdr_parse): read when it is one, "not a
 * header" (1) for an event line, refused with a reason when it cannot be
 * used, a newer schema above all. */
static void test_header(void)
{
    hcg_loghdr h;
    char err[256];
    const char *good = "{\"event\":\"header\",\"schema\":1,\"hcguard\":\"0.1.0\",\"pid\":42,"
                       "\"ppid\":1,\"host\":\"n\\u00e9\",\"rank\":\"3\",\"mode\":\"audit\","
                       "\"driver_version\":13000,\"exe\":\"/bin/a\",\"t0_ns\":5,\"new\":true}";
#define HDR(s) hcg_loghdr_parse(s, strlen(s), &h, err, sizeof err)
    CHECK_EQ(HDR(good), 0);
    CHECK_EQ(h.pid, 42);
    CHECK_EQ(h.schema, 1);
    CHECK_EQ(h.driver_version, 13000);
    CHECK_EQ(h.t0_ns, 5);
    CHECK_STR(h.host, "n\xc3\xa9");
    CHECK_STR(h.rank, "3");
    CHECK_STR(h.mode, "audit");
    CHECK_STR(h.version, "0.1.0");
    CHECK_EQ(HDR("{\"schema\":1,\"pid\":3,\"event\":\"header\"}"), 0); /* any order */
    CHECK_EQ(HDR(HEAD ",\"reason\":\"overlap\"}"), 1);                   /* an event */
    CHECK_EQ(HDR("{}"), 1);
    CHECK_EQ(HDR("garbage"), 1);
    CHECK_EQ(HDR("{\"event\":\"header\",\"schema\":2,\"pid\":3}"), -1);
    CHECK_HAS(err, "schema 2 is newer than this hcguard reads (1)");
    CHECK_EQ(HDR("{\"event\":\"header\",\"pid\":3}"), -1);
    CHECK_HAS(err, "no \"schema\"");
    CHECK_EQ(HDR("{\"event\":\"header\",\"schema\":1}"), -1);
    CHECK_HAS(err, "no \"pid\"");
    CHECK_EQ(HDR("{\"event\":\"header\",\"schema\":1,\"pid\":0}"), -1);
    CHECK_HAS(err, "\"pid\": ");
    CHECK_EQ(HDR("{\"event\":\"header\",\"schema\":1,\"schema\":1,\"pid\":2}"), -1);
    CHECK_HAS(err, "appears twice");
    CHECK_EQ(HDR("{\"event\":\"header\",\"schema\":1,\"pid\":2,\"host\":{}}"), -1);
    CHECK_HAS(err, "\"host\": expected");
    CHECK_EQ(HDR("{\"event\":\"header\",\"schema\":1,\"pid\":2} x"), -1);
    CHECK_HAS(err, "text after the object");
    /* one parser, the header's rules: an error before "event" says it is a
     * header is "not a header"; a rank up to 31 bytes and an exe up to
     * 1023 are read (a record's rank is the writer's 15) */
    CHECK_EQ(HDR("{\"pid\":\"x\",\"event\":\"header\",\"schema\":1}"), 1);
    CHECK_EQ(HDR("{\"event\":\"run\",\"pid\":\"x\"}"), 1);
    CHECK_EQ(HDR("{\"event\":\"header\",\"schema\":1,\"pid\":2,\"seq\":\"not a number\"}"), 0);
    CHECK_EQ(HDR("{\"event\":\"header\",\"schema\":1,\"pid\":2,"
                 "\"rank\":\"0123456789012345678901234567890\"}"), 0);
    CHECK_STR(h.rank, "0123456789012345678901234567890");
    CHECK_EQ(parse("{\"event\":\"header\",\"schema\":1,\"hcguard\":\"1\",\"pid\":3,\"ppid\":0,"
                   "\"host\":\"h\",\"rank\":\"0123456789012345\",\"mode\":\"guard\","
                   "\"driver_version\":0,\"exe\":\"x\",\"t0_ns\":1}"), -1);
    CHECK_HAS(g_err, "\"rank\": a string longer than 15 bytes");
    {
        char big[1200];
        int n = snprintf(big, sizeof big, "{\"event\":\"header\",\"schema\":1,\"pid\":2,\"exe\":\"");
        memset(big + n, 'x', 1024);
        snprintf(big + n + 1024, sizeof big - (size_t)n - 1024, "\"}");
        CHECK_EQ(HDR(big), -1);
        CHECK_HAS(err, "\"exe\": a string longer than 1023 bytes");
    }
    /* the record reader takes the same line as a header record, alike */
    CHECK_EQ(parse(good), 0);
    CHECK_EQ(g_rec.kind, HCG_LOGREC_HEADER);
    CHECK_EQ(g_rec.pid, 42);
#undef HDR
}

#ifndef HCG_TEST_NO_SELF_EXEC
/* ---- a header that just fits ----------------------------------------------
 * The log's header names the program's path, up to 4095 bytes: a header
 * of exactly the room's 4095 bytes is written, one byte more is not (never
 * half). One process (one pid, so the header's other fields keep their
 * length) runs this program from paths made to give headers of 4094, 4095
 * and 4096 bytes, exec'ing each copy from the one before. */
#define CHAIN "--header-chain"

/* A copy of this program at a path of exactly len bytes below dir. */
static int copy_self(const char *dir, size_t len, char *path)
{
    size_t n = (size_t)snprintf(path, len + 1, "%s", dir);
    while (len - n - 1 > 250) { /* directories of 200 bytes, then the file */
        path[n++] = '/';
        memset(path + n, 'd', 200);
        n += 200;
        path[n] = '\0';
        if (mkdir(path, 0700) != 0 && errno != EEXIST)
            return -1;
    }
    path[n++] = '/';
    memset(path + n, 'f', len - n);
    path[len] = '\0';
    int in = open("/proc/self/exe", O_RDONLY), out = open(path, O_WRONLY | O_CREAT, 0700);
    char buf[65536];
    ssize_t k;
    while (in >= 0 && out >= 0 && (k = read(in, buf, sizeof buf)) > 0)
        if (write(out, buf, (size_t)k) != k)
            k = -1;
    int ok = in >= 0 && out >= 0 && close(out) == 0;
    close(in);
    return ok ? 0 : -1;
}

/* Its header and one event into DIR/log<step>. */
static void chain_write(const char *dir, int step)
{
    char log[64];
    snprintf(log, sizeof log, "%s/log%d", dir, step);
    if (hcg_jsonl_open(log, log) != 0)
        _exit(2);
    hcg_event e = {0};
    e.kind = HCG_EV_RUN;
    e.seq = 1;
    hcg_jsonl_event(&e);
    hcg_jsonl_close();
}

static size_t first_line(const char *dir, int step, char *line, size_t room)
{
    char log[64];
    snprintf(log, sizeof log, "%s/log%d", dir, step);
    FILE *f = fopen(log, "r");
    size_t n = f && fgets(line, (int)room, f) ? strlen(line) : 0;
    if (f)
        fclose(f);
    return n;
}

/* argv: CHAIN DIR STEP [NEXT...]; step 0 makes the copies from its own
 * header's length, and each step execs the next. */
static int header_chain(int argc, char **argv)
{
    const char *dir = argv[2];
    int step = atoi(argv[3]);
    chain_write(dir, step);
    static char paths[3][4200];
    char *next[8] = {argv[0], CHAIN, argv[2], NULL, NULL, NULL, NULL, NULL};
    char steps[12];
    if (step == 0) {
        static char line[8192], self[4200];
        ssize_t e0 = readlink("/proc/self/exe", self, sizeof self - 1);
        size_t h0 = first_line(dir, 0, line, sizeof line);
        if (e0 <= 0 || h0 == 0 || h0 > 4000)
            return 3;
        size_t fit = (size_t)e0 + HCG_SINK_EVENT_MAX - 1 - h0; /* a header of 4095 bytes */
        for (int i = 0; i < 3; i++)
            if (fit + 1 >= sizeof paths[i] || copy_self(dir, fit - 1 + (size_t)i, paths[i]) != 0)
                return 4;
        next[4] = paths[1];
        next[5] = paths[2];
        next[0] = paths[0];
    } else {
        if (argc <= 4)
            return 0;
        next[0] = argv[4];
        next[4] = argc > 5 ? argv[5] : NULL;
    }
    snprintf(steps, sizeof steps, "%d", step + 1);
    next[3] = steps;
    execv(next[0], next);
    return 5;
}

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

static void test_header_fits(void)
{
    char dir[] = "/tmp/hcg_hdrXXXXXX";
    REQUIRE(mkdtemp(dir) != NULL);
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        execl("/proc/self/exe", "test_jsonl_read", CHAIN, dir, "0", (char *)NULL);
        _exit(127);
    }
    int st = 0;
    REQUIRE(waitpid(pid, &st, 0) == pid);
    CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the chain of copies ended with status %d",
              st);
    static char line[8192];
    static const size_t want[] = {4094, 4095, 0}; /* 0: no header */
    for (int i = 0; i < 3; i++) {
        size_t n = first_line(dir, i + 1, line, sizeof line);
        int header = strncmp(line, "{\"event\":\"header\"", 17) == 0;
        CHECK_MSG(header ? n == want[i] && line[n - 1] == '\n' : want[i] == 0 && n > 0,
                  "copy %d: first line of %zu bytes, %s; want a header of %zu", i + 1, n,
                  header ? "a header" : "no header", want[i]);
    }
    nftw(dir, remove_one, 16, FTW_DEPTH | FTW_PHYS);
}
#endif

static const check_case cases[] = {
    CHECK_CASE(header),
    CHECK_CASE(good),
    CHECK_CASE(bad),
    CHECK_CASE(writer_read_back),
    CHECK_CASE(files),
    CHECK_CASE(reopen_cut),
    CHECK_CASE(reopen_elsewhere),
    CHECK_CASE(rewrite_batch),
    CHECK_CASE(trace_thread_ends),
    CHECK_CASE(trace_shared_track),
    CHECK_CASE(text),
    CHECK_CASE(json_str),
    CHECK_CASE(trace_format),
    CHECK_CASE(trace_enqueue_close),
    CHECK_CASE(trace_continued),
    CHECK_CASE(lost_fd_quiet),
#ifndef HCG_TEST_NO_SELF_EXEC
    CHECK_CASE(header_fits),
#endif
};

int main(int argc, char **argv)
{
#ifndef HCG_TEST_NO_SELF_EXEC
    if (argc >= 4 && strcmp(argv[1], CHAIN) == 0)
        return header_chain(argc, argv);
#endif
    return check_main("test_jsonl_read", CHECK_CASES(cases), argc, argv);
}
