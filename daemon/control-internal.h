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

/* The loop's time owed for answers: what answering cost is added, and
 * paid back at rate_pct percent of the time that passes. */
struct ctl_budget {
	uint64_t owed_usec;
	uint64_t at_usec; /* when owed_usec was last brought up to date */
};

/* What is owed at now, after paying back since the last time. */
uint64_t ctl_budget_owed(struct ctl_budget *b, uint64_t now_usec, unsigned rate_pct);
void ctl_budget_charge(struct ctl_budget *b, uint64_t cost_usec, uint64_t now_usec, unsigned rate_pct);
/* How long until at most burst_usec is owed (0: now). */
uint64_t ctl_budget_wait(const struct ctl_budget *b, uint64_t burst_usec, unsigned rate_pct);

/* Connections held per uid, and the loop's time each owes (a small table:
 * a host has few users). A uid stays while it holds connections or owes
 * time, so that closing its connections does not wipe its debt. */
struct ctl_uid_counts {
	struct ctl_uid_count {
		uid_t uid;
		unsigned n;
		struct ctl_budget budget;
	} * v;
	size_t n, cap;
};

unsigned ctl_uid_counts_get(const struct ctl_uid_counts *c, uid_t uid);
int ctl_uid_counts_add(struct ctl_uid_counts *c, uid_t uid);
void ctl_uid_counts_remove(struct ctl_uid_counts *c, uid_t uid);
/* uid's budget (NULL when the uid holds no connection and owes nothing). */
struct ctl_budget *ctl_uid_counts_budget(struct ctl_uid_counts *c, uid_t uid);
void ctl_uid_counts_done(struct ctl_uid_counts *c);
