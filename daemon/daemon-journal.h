/* daemon-journal.h — the MESSAGE_ID of each kind of event goodputd logs
 * about a study, for `journalctl MESSAGE_ID=...`. Records of a study's events
 * also carry GOODPUT_STUDY=, GOODPUT_TRIAL= and GOODPUT_PHASE= (log.h's
 * log_struct). The ids are fixed: monitoring matches on them. goodputd(8)
 * lists them (the page is written from this header). */
#pragma once

#define DAEMON_MESSAGE_TRIAL_DONE   "64615704a80747e6b82fef06641a10f0" /* a trial was measured */
#define DAEMON_MESSAGE_TRIAL_FAILED "2363423dfce442888a8c98d9f2615c16" /* a trial failed or was infeasible */
#define DAEMON_MESSAGE_STUDY_DONE   "d86493fbb10b42d2b56594488881765a" /* a study finished */
