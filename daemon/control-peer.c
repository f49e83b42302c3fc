/* control-peer.c — who is on the other end of a control connection: the
 * peer's credentials as the kernel reports them (SO_PEERCRED, SO_PEERGROUPS),
 * whether it may change state, how many connections each uid holds, so
 * that one local user cannot take every slot (see control.c's admission),
 * and how much of the loop's time each uid owes for its answers (control.c's
 * budget). */
#include "control-internal.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdlib.h>
#include <sys/socket.h>

#include "array.h"
#include "macro.h"

bool ctl_peer_is_privileged(const struct ctl_peer *peer, const gid_t *groups, int n_groups, bool has_group, gid_t gid,
			    uid_t own_uid)
{
	if (peer->uid == 0 || peer->uid == own_uid)
		return true;
	if (!has_group)
		return false;
	if (peer->gid == gid)
		return true;
	for (int i = 0; i < n_groups; i++)
		if (groups[i] == gid)
			return true;
	return false;
}

/* The peer's supplementary groups: SO_PEERGROUPS (the groups the connecting
 * process had), else the user database (getgrouplist). */
static void read_groups(int fd, const struct ctl_peer *peer, gid_t **ret, int *ret_n)
{
	socklen_t len = 64 * sizeof(gid_t);
	gid_t *groups;
	int n = 256;

	for (int attempt = 0; attempt < 3; attempt++) {
		gid_t *g = malloc(len ? len : sizeof(gid_t));

		if (!g)
			return;
		if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, g, &len) == 0) {
			*ret = g;
			*ret_n = (int)(len / sizeof(gid_t));
			return;
		}
		free(g);
		if (errno != ERANGE)
			break;
	}

	struct passwd pw, *res = NULL;
	char buf[4096];

	if (getpwuid_r(peer->uid, &pw, buf, sizeof(buf), &res) != 0 || !res)
		return;
	groups = calloc((size_t)n, sizeof(gid_t));
	if (!groups)
		return;
	if (getgrouplist(pw.pw_name, peer->gid, groups, &n) < 0)
		n = 256; /* truncated: the first 256 are enough to decide for most hosts */
	*ret = groups;
	*ret_n = n;
}

int ctl_peer_read(int fd, struct ctl_peer *peer, gid_t **ret_groups, int *ret_n_groups)
{
	struct ucred cred = { 0 };
	socklen_t len = sizeof(cred);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
		return -errno;
	peer->pid = cred.pid;
	peer->uid = cred.uid;
	peer->gid = cred.gid;
	read_groups(fd, peer, ret_groups, ret_n_groups);
	return 0;
}

uint64_t ctl_budget_owed(struct ctl_budget *b, uint64_t now_usec, unsigned rate_pct)
{
	if (now_usec > b->at_usec) {
		uint64_t paid = (now_usec - b->at_usec) * rate_pct / 100;

		b->owed_usec = b->owed_usec > paid ? b->owed_usec - paid : 0;
		b->at_usec = now_usec;
	}
	return b->owed_usec;
}

void ctl_budget_charge(struct ctl_budget *b, uint64_t cost_usec, uint64_t now_usec, unsigned rate_pct)
{
	(void)ctl_budget_owed(b, now_usec, rate_pct);
	b->owed_usec += cost_usec;
}

uint64_t ctl_budget_wait(const struct ctl_budget *b, uint64_t burst_usec, unsigned rate_pct)
{
	if (b->owed_usec <= burst_usec || rate_pct == 0)
		return 0;
	return (b->owed_usec - burst_usec) * 100 / rate_pct;
}

unsigned ctl_uid_counts_get(const struct ctl_uid_counts *c, uid_t uid)
{
	for (size_t i = 0; i < c->n; i++)
		if (c->v[i].uid == uid)
			return c->v[i].n;
	return 0;
}

int ctl_uid_counts_add(struct ctl_uid_counts *c, uid_t uid)
{
	for (size_t i = 0; i < c->n; i++)
		if (c->v[i].uid == uid) {
			c->v[i].n++;
			return 0;
		}
	/* uids without connections that owe nothing any more go first */
	for (size_t i = 0; i < c->n;)
		if (c->v[i].n == 0 && c->v[i].budget.owed_usec == 0)
			c->v[i] = c->v[--c->n];
		else
			i++;
	if (ARRAY_GROW(c->v, c->cap, c->n) < 0)
		return -ENOMEM;
	c->v[c->n++] = (struct ctl_uid_count){ .uid = uid, .n = 1 };
	return 0;
}

void ctl_uid_counts_remove(struct ctl_uid_counts *c, uid_t uid)
{
	for (size_t i = 0; i < c->n; i++)
		if (c->v[i].uid == uid) {
			/* kept while it owes: its debt outlives its connections */
			if (--c->v[i].n == 0 && c->v[i].budget.owed_usec == 0)
				c->v[i] = c->v[--c->n];
			return;
		}
}

struct ctl_budget *ctl_uid_counts_budget(struct ctl_uid_counts *c, uid_t uid)
{
	for (size_t i = 0; i < c->n; i++)
		if (c->v[i].uid == uid)
			return &c->v[i].budget;
	return NULL;
}

void ctl_uid_counts_done(struct ctl_uid_counts *c)
{
	free(c->v);
	*c = (struct ctl_uid_counts){ 0 };
}
