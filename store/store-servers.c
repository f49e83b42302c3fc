/* store-servers.c — the servers of a trial of several: a disaggregated
 * configuration's prefill and decode workers and its router, each recorded
 * before it runs, by role, as a single server is in the trial's own row
 * (store_trial_set_server): its process group with its leader's identity,
 * or its systemd unit. A restarted runner or goodputd ends each one left
 * over; clearing the trial's server clears them all. */
#include <errno.h>
#include <stdio.h>

#include "macro.h"
#include "store-internal.h"

#define COL(type, field) STORE_COLUMN(type, struct store_role_server, field)
static const struct store_column role_server_columns[] = {
	COL(INT64, trial_id), COL(TEXT, role), COL(INT64, pgid), COL(TEXT, identity), COL(TEXT, unit),
};
#undef COL

const struct store_row store_role_server_row = { role_server_columns, ELEMENTSOF(role_server_columns),
						 sizeof(struct store_role_server) };

STORE_ROW_DONE_FUNC(store_role_server_row, struct store_role_server, store_role_server_done)
STORE_ROW_ARRAY_FREE_FUNC(store_role_server_row, struct store_role_server, store_role_server_array_free)

int store_trial_add_server(struct store *s, int64_t id, const char *role, const struct store_server *server,
			   struct error *err)
{
	const struct store_value pgid =
		server->pgid > 0 ? (struct store_value)STORE_INT(server->pgid) : (struct store_value)STORE_TEXT(NULL);
	int r;

	if (!role || !*role)
		return error_set(err, -EINVAL, "%s: recording a trial's server: the role is required", s->path);
	r = store_exec(s, STMT_TRIAL_ADD_SERVER, "recording a trial's server",
		       STORE_VALUES(STORE_INT(id), STORE_TEXT(role), pgid,
				    STORE_TEXT(server->pgid > 0 ? server->identity : NULL), STORE_TEXT(server->unit)),
		       err);
	return r < 0 ? r : 0;
}

int store_study_role_servers(struct store *s, int64_t study_id, struct store_role_server **ret, size_t *ret_n,
			     struct error *err)
{
	return store_list(s, STMT_STUDY_ROLE_SERVERS, "reading a study's servers", STORE_VALUES(STORE_INT(study_id)),
			  (void **)ret, ret_n, err);
}
