/* control.h — goodputd's control socket: a UNIX stream socket on the
 * daemon's sd-event loop speaking the JSON-lines protocol of protocol.h.
 *
 * The server owns the connections; it reads lines (capped), parses them,
 * refuses state-changing commands from unprivileged peers (SO_PEERCRED and
 * the peer's groups), hands the rest to the daemon's handler and queues the
 * answer. Everything is non-blocking and bounded: a client sending junk gets
 * an error line, one sending a line longer than the limit gets an error and
 * is dropped, a silent one is dropped after the idle timeout, and clients
 * beyond the connection limits are told so and closed: the total, a cap per
 * uid, and slots reserved for privileged peers, so that no local user can
 * lock root or the socket group out (root and the daemon's uid get a few
 * connections beyond the total). Every uid but root's and the daemon's has a
 * budget of the loop's time for its answers; past it, its requests wait
 * unread. None of it touches other clients or the study that is running. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <cjson/cJSON.h>
#include <systemd/sd-event.h>

#include "error.h"
#include "protocol.h"

struct ctl_server;
struct ctl_pending;

struct ctl_limits {
	unsigned max_connections;
	unsigned max_connections_per_uid; /* any uid but root and the daemon's own; 0: no cap */
	unsigned reserved_connections;    /* of max_connections, kept for privileged peers */
	size_t max_request_bytes;         /* longest request line, newline excluded */
	uint64_t idle_timeout_usec;
};

struct ctl_peer {
	pid_t pid;
	uid_t uid;
	gid_t gid;
	bool privileged; /* root, the daemon's uid, or a member of the configured group */
};

/* Answers one request (already parsed and permitted). Returns the response
 * object (the server adds nothing and frees it) or NULL when out of memory.
 * A top-level raw item (cJSON_CreateRaw) is sent as it is: the handler has
 * made it one line of valid UTF-8 JSON. */
typedef cJSON *(*ctl_handler_fn)(const struct ctl_peer *peer, const struct ctl_request *req, void *userdata);

/* An answer that takes time (a report drawn by a child process): the
 * handler calls ctl_server_defer, returns NULL, and later hands the answer
 * to ctl_pending_answer. The connection reads no further requests until
 * then (answers stay in order); the rest of the server carries on. */
struct ctl_pending *ctl_server_defer(struct ctl_server *s);
/* Queues answer (taken over; NULL: "out of memory") on the deferred
 * request's connection, or drops it when the client has gone, and frees p. */
void ctl_pending_answer(struct ctl_pending *p, cJSON *answer);

/* Serves listen_fd (a listening UNIX stream socket; consumed, also on
 * failure) on loop e. */
int ctl_server_new(sd_event *e, int listen_fd, const struct ctl_limits *limits, ctl_handler_fn handler, void *userdata,
		   struct ctl_server **ret);
/* Closes every connection and the listening socket. When the server bound
 * the socket itself (ctl_server_set_unlink_path), its path is removed.
 * Accepts NULL; returns NULL. */
struct ctl_server *ctl_server_free(struct ctl_server *s);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct ctl_server *, ctl_server_free)

/* New limits apply to new lines and new connections (on reload). */
void ctl_server_set_limits(struct ctl_server *s, const struct ctl_limits *limits);
/* Members of gid may change state; has_group false: only root and the daemon's uid. */
void ctl_server_set_group(struct ctl_server *s, bool has_group, gid_t gid);
/* The path to unlink on free (the copy is owned). */
int ctl_server_set_unlink_path(struct ctl_server *s, const char *path);
unsigned ctl_server_n_connections(const struct ctl_server *s);

/* Binds and listens on path: a stale socket nobody answers on is removed
 * first, one that answers is -EADDRINUSE. Sets mode, and the group when gid
 * != (gid_t)-1. */
int ctl_listen_unix(const char *path, mode_t mode, gid_t gid, int *ret_fd, struct error *err);
/* The socket passed by systemd (sd_listen_fds): 1 when one was passed and
 * *ret_fd is set, 0 when none was passed, -errno (with err) when more than
 * one or not a listening UNIX stream socket. */
int ctl_listen_fds(int *ret_fd, struct error *err);
