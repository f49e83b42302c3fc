/* daemon-log.c — goodputd's records of a study's events, with the journal
 * fields an operator selects them by: GOODPUT_STUDY=, GOODPUT_TRIAL=,
 * GOODPUT_PHASE= and, for the kinds of event monitoring watches for, a
 * MESSAGE_ID= (daemon-journal.h). `journalctl GOODPUT_STUDY=demo` then tells
 * one study's story: each trial deployed, measured or failed, and its end.
 * Outside the journal the same records are plain lines on stderr. */
#include "daemon-internal.h"

#include <math.h>
#include <stdio.h>

#include "daemon-journal.h"
#include "log.h"

struct fields {
	char study[STUDY_NAME_MAX + 32], trial[48], phase[64], id[64];
	const char *v[5];
};

/* The fields of a record (trial 0: none; message_id NULL: none). */
static const char *const *fields_of(struct fields *f, const char *study, unsigned trial, const char *phase,
				    const char *message_id)
{
	size_t n = 0;

	snprintf(f->study, sizeof(f->study), "GOODPUT_STUDY=%s", study ? study : "");
	f->v[n++] = f->study;
	if (trial) {
		snprintf(f->trial, sizeof(f->trial), "GOODPUT_TRIAL=%u", trial);
		f->v[n++] = f->trial;
	}
	snprintf(f->phase, sizeof(f->phase), "GOODPUT_PHASE=%s", phase);
	f->v[n++] = f->phase;
	if (message_id) {
		snprintf(f->id, sizeof(f->id), "MESSAGE_ID=%s", message_id);
		f->v[n++] = f->id;
	}
	f->v[n] = NULL;
	return f->v;
}

static unsigned trial_of(const struct runner_event *ev)
{
	return ev->trial ? ev->trial->seq : ev->status->trial;
}

void daemon_log_trial_phase(const struct runner_event *ev)
{
	enum runner_phase p = ev->trial ? ev->trial->phase : ev->status->phase;
	struct fields f;

	/* a runner's own phases (planning) are momentary; a trial's start
	 * says the most, the others are for debugging */
	if (!ev->trial || !ev->status)
		return;
	log_struct(p == RUNNER_DEPLOYING ? LOG_INFO : LOG_DEBUG,
		   fields_of(&f, ev->status->study_name, trial_of(ev), runner_phase_to_string(p), NULL),
		   "%s: trial %u %s %s%s%s", ev->status->study_name, trial_of(ev), runner_phase_to_string(p),
		   ev->trial->knobs, ev->trial->gpus[0] ? " on GPUs " : "", ev->trial->gpus);
}

void daemon_log_trial_finished(const struct runner_event *ev)
{
	const char *state = store_trial_state_to_string(ev->trial_state);
	bool done = ev->trial_state == STORE_TRIAL_DONE;
	struct fields f;
	const char *const *fv = fields_of(&f, ev->status->study_name, trial_of(ev), state,
					  done ? DAEMON_MESSAGE_TRIAL_DONE : DAEMON_MESSAGE_TRIAL_FAILED);

	if (!isnan(ev->cost_per_mtok))
		log_struct(LOG_INFO, fv, "%s: trial %u %s: $%.3f/Mtok at %.0f tok/s", ev->status->study_name,
			   trial_of(ev), state, ev->cost_per_mtok, ev->max_goodput);
	else
		log_struct(done ? LOG_INFO : LOG_WARNING, fv, "%s: trial %u %s%s%s", ev->status->study_name,
			   trial_of(ev), state, ev->failure_message ? ": " : "",
			   ev->failure_message ? ev->failure_message : "");
}

void daemon_log_study_end(const char *name, enum runner_end end, const struct runner_status *st, bool stopping)
{
	struct fields f;

	switch (end) {
	case RUNNER_END_DONE:
		if (st->have_best)
			log_struct(LOG_INFO, fields_of(&f, name, 0, "done", DAEMON_MESSAGE_STUDY_DONE),
				   "study %s: done, best $%.3f/Mtok (%s)", name, st->best_cost_per_mtok,
				   st->best_knobs);
		else
			log_struct(LOG_INFO, fields_of(&f, name, 0, "done", DAEMON_MESSAGE_STUDY_DONE),
				   "study %s: done, no configuration met the SLA", name);
		break;
	case RUNNER_END_CANCELLED:
		log_struct(LOG_INFO, fields_of(&f, name, 0, "cancelled", NULL), "study %s: cancelled", name);
		break;
	case RUNNER_END_FAILED:
		log_struct(LOG_ERR, fields_of(&f, name, 0, "failed", NULL), "study %s: failed: %s", name,
			   st->message ? st->message : "unknown error");
		break;
	case RUNNER_END_DISK_FULL:
		log_struct(LOG_WARNING, fields_of(&f, name, 0, "waiting", NULL),
			   "study %s: waiting: %s; it resumes once there is space", name,
			   st->message ? st->message : "disk full");
		break;
	case RUNNER_END_STOPPED:
		log_struct(LOG_INFO, fields_of(&f, name, 0, "stopped", NULL), "study %s: stopped; it resumes %s", name,
			   stopping ? "when goodputd starts again" : "when its window opens");
		break;
	case RUNNER_END_NONE:
		break;
	}
}
