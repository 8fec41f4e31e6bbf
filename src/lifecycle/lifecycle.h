/* The lifecycle layer (src/lifecycle): start-up, fork, exec, exit, fatal
 * signals, and the launcher's recovery of a program that died. The top:
 * it may call every layer below. */
#ifndef HCG_LIFECYCLE_H
#define HCG_LIFECYCLE_H

#include "sinks/sinks.h"
#include "wrap/wrap.h"

/* ---- fork.c: the fork hooks of every module ------------------------------ */
/* The modules' hooks (fork_lock before the fork, fork_unlock after it in
 * the parent, after_fork in the child) are declared in their layers'
 * headers; hcg_fork_register in base.h. */
void hcg_init_after_fork(void);
/* Whether hcguard's start has begun in this process (a fork child: in its
 * parent, until the child hooks run). */
int hcg_start_begun(void);

/* ---- lifecycle.c: exec, fatal signals ------------------------------------ */
/* For the chained handlers of fatal signals: write the events still in the
 * rings to the log and the trace, without waiting for any lock. */
void hcg_lifecycle_flush_from_signal(void);
/* init.c: the summary of an image about to exec, if it did anything. */
void hcg_lifecycle_exec_summary(void);

/* The launcher, after the program at pid ended (how: "exit status 3",
 * "signal 9 (Killed)"): if it did not finish itself, the events left in
 * its rings go to its log and trace and its summary is printed. 1 if it
 * did so (*errors: what --error-exitcode counts), 0 if there was nothing
 * to do, -1 if the file is not a record. */
int hcg_flight_recover(const char *path, pid_t pid, const char *how, uint64_t *errors);

#endif /* HCG_LIFECYCLE_H */
