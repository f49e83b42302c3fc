/* daemon.h — goodputd's core: one sd-event loop holding the store, the
 * control socket, the queue of studies and the runner of the one that runs.
 *
 * goodputd.c parses the command line and calls daemon_new, daemon_run and
 * daemon_free; everything else (signals, sd_notify, reloads, the queue, the
 * answers on the socket, the best-configuration files) lives behind this
 * header in daemon.c, daemon-queue.c, daemon-handlers.c and daemon-best.c. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "error.h"

#define DAEMON_DEFAULT_STATE_DIR "/var/lib/goodputd"

struct daemon;

struct daemon_options {
	const char *state_dir;   /* NULL: $STATE_DIRECTORY, else DAEMON_DEFAULT_STATE_DIR */
	const char *socket_path; /* NULL: CTL_DEFAULT_SOCKET; unused under socket activation */
	mode_t socket_mode;      /* of a socket the daemon binds itself (goodputd.c's default: 0660) */
	const char *config_path; /* NULL: DAEMON_CONFIG_DEFAULT_PATH, a missing file meaning defaults */
	bool dry_run;            /* trials in virtual time (sim core) instead of real servers */
	uint32_t max_trials;     /* overrides every study's budget when > 0 (tests) */
};

/* Reads the configuration, creates the state directory, opens the store,
 * sets up the loop, signals and the control socket. Nothing is announced
 * to systemd yet. err says what failed. */
int daemon_new(const struct daemon_options *o, struct daemon **ret, struct error *err);
/* Resumes the queue, sends READY=1 and runs the loop until SIGTERM/SIGINT
 * have been handled (the running trial stopped and marked interrupted).
 * Returns 0, or -errno when the loop failed. */
int daemon_run(struct daemon *d);
/* Accepts NULL; returns NULL. */
struct daemon *daemon_free(struct daemon *d);
static inline void daemon_freep(struct daemon **d)
{
	if (*d)
		*d = daemon_free(*d);
}
