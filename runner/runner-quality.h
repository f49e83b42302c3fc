/* runner-quality.h — the operator's quality check of a deployed
 * configuration (the study's quality_check argv, e.g. an eval harness), one
 * job per trial, for the deploy evaluator. Internal to runner/. */
#pragma once

#include <stdbool.h>

#include "error.h"

struct runner_trial;
struct runner_quality;

/* Called once from the loop: passed, or why not ("quality check X exited
 * with status 1 (log: ...)"). The job may be freed inside. */
typedef void (*runner_quality_fn)(struct runner_quality *q, bool passed, const char *why, void *userdata);

enum {
	RUNNER_QUALITY_RUNNING,     /* cb follows */
	RUNNER_QUALITY_NOT_STARTED, /* the check could not be started: err says why (no configuration can pass) */
};

/* Starts the check of trial t, whose server answers at base_url: argv
 * without a shell, the knobs and the URL in its environment, its output
 * appended to the trial's log, an hour at most (then killed: a failure).
 * Returns RUNNER_QUALITY_*, or -ENOMEM with err set (the study cannot go
 * on). */
int runner_quality_start(const struct runner_trial *t, const char *base_url, runner_quality_fn cb, void *userdata,
			 struct runner_quality **ret, struct error *err);
/* Kills a check still running; accepts NULL. */
struct runner_quality *runner_quality_free(struct runner_quality *q);
