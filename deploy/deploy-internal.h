/* deploy-internal.h — what the generic part of the deployers (deploy.c)
 * shares with each method (deploy-exec.c, later systemd and command). */
#pragma once

#include "deploy.h"
#include "macro.h"

struct deploy_ops {
	const char *name;
	/* Starts the server described by d->cfg; fills d->pgid. */
	int (*start)(struct deployment *d, struct error *err);
	/* Begins teardown; the method calls deploy_finish() when it is done. */
	int (*stop)(struct deployment *d);
	/* Frees the method's state, killing the server hard when it still runs. */
	void (*destroy)(struct deployment *d);
};

extern const struct deploy_ops deploy_exec_ops;
extern const struct deploy_ops deploy_command_ops;
extern const struct deploy_ops deploy_systemd_ops;

struct deployment {
	const struct deploy_ops *ops;
	sd_event *event;
	deploy_event_fn cb;
	void *userdata;

	/* the config, copied */
	char **argv, **env;
	char *log_path, *host, *announce_prefix, *health_path;
	char **oom_patterns;
	uint64_t health_interval_usec, startup_timeout_usec, stop_timeout_usec;
	char **deploy_command, **teardown_command, **health_command, **hook_env; /* command */
	uint64_t command_timeout_usec;
	char *unit_name; /* systemd */
	bool user_bus;

	enum deploy_state state;
	enum deploy_failure failure;
	char *message;
	uint16_t port;
	char base_url[256];
	int64_t pgid;
	uint64_t start_usec, ready_usec; /* CLOCK_MONOTONIC */

	sd_event_source *notify_source; /* deferred callback */
	void *impl;                     /* the method's own state */
};

/* Moves to state and schedules the callback (READY, STOPPED, FAILED). */
void deploy_set_state(struct deployment *d, enum deploy_state state);
/* Records a failure; the message is formatted and owned by d. */
void deploy_set_failure(struct deployment *d, enum deploy_failure f, const char *fmt, ...) _printf_(3, 4);
/* Sets port and base_url. */
void deploy_set_port(struct deployment *d, const char *host, uint16_t port);
/* Whether the log since offset contains one of the out-of-memory patterns. */
bool deploy_log_matches_oom(const struct deployment *d, uint64_t offset);
/* Scans complete lines of the log from *offset for "<prefix>HOST:PORT" (the
 * announce line) and sets host, port and base URL; advances *offset. Returns
 * true once found. */
bool deploy_scan_announce(struct deployment *d, const char *prefix, uint64_t *offset);
/* Sets the base URL (and port, when the URL names one) from a URL a hook reported. */
int deploy_set_base_url(struct deployment *d, const char *url);
char **deploy_strv_copy(char *const *v);
