/* control-internal.h — what control.c (connections, lines, answers) shares
 * with control-peer.c (who is connecting: credentials, groups, privilege,
 * and how many connections each uid holds). Not for other modules. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "control.h"

/* Reads SO_PEERCRED into peer (pid, uid, gid) and the peer's supplementary
 * groups (SO_PEERGROUPS, else the user database) into *ret_groups (owned by
 * the caller; may stay NULL when none could be read). */
int ctl_peer_read(int fd, struct ctl_peer *peer, gid_t **ret_groups, int *ret_n_groups);

/* Root, the daemon's own uid, or (when has_group) a member of gid by primary
 * or supplementary group. */
bool ctl_peer_is_privileged(const struct ctl_peer *peer, const gid_t *groups, int n_groups, bool has_group, gid_t gid,
			    uid_t own_uid);

/* Connections held per uid (a small table: a host has few users). */
struct ctl_uid_counts {
	struct ctl_uid_count {
		uid_t uid;
		unsigned n;
	} * v;
	size_t n, cap;
};

unsigned ctl_uid_counts_get(const struct ctl_uid_counts *c, uid_t uid);
int ctl_uid_counts_add(struct ctl_uid_counts *c, uid_t uid);
void ctl_uid_counts_remove(struct ctl_uid_counts *c, uid_t uid);
void ctl_uid_counts_done(struct ctl_uid_counts *c);
