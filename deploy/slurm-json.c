/* slurm-json.c — reading what Slurm's client commands print as JSON:
 * squeue --json and sacct --json (jobs), sinfo --json (nodes and their
 * GPUs), and the state names goodput acts on.
 *
 * The formats moved between releases (Slurm's OpenAPI data parser v0.0.38
 * in 22.05, v0.0.39+ later): job_state is a string or a list of flags,
 * numbers are plain or {"set": true, "number": N}, sacct nests its state
 * under "state": {"current": ...} and its exit code under "exit_code":
 * {"return_code": ...}. Each reader accepts every shape it knows and skips
 * what it does not, so a newer Slurm degrades to "unknown", never to a
 * wrong state. Pure functions: no I/O. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "json-util.h"
#include "macro.h"
#include "slurm.h"

static const char *const state_names[_SLURM_STATE_MAX] = {
	[SLURM_STATE_UNKNOWN] = "unknown",
	[SLURM_STATE_PENDING] = "pending",
	[SLURM_STATE_RUNNING] = "running",
	[SLURM_STATE_COMPLETING] = "completing",
	[SLURM_STATE_COMPLETED] = "completed",
	[SLURM_STATE_FAILED] = "failed",
	[SLURM_STATE_CANCELLED] = "cancelled",
	[SLURM_STATE_TIMEOUT] = "timeout",
	[SLURM_STATE_OUT_OF_MEMORY] = "out_of_memory",
	[SLURM_STATE_NODE_FAIL] = "node_fail",
	[SLURM_STATE_PREEMPTED] = "preempted",
	[SLURM_STATE_BOOT_FAIL] = "boot_fail",
	[SLURM_STATE_DEADLINE] = "deadline",
	[SLURM_STATE_GONE] = "gone",
};

const char *slurm_state_to_string(enum slurm_state s)
{
	return (unsigned)s < _SLURM_STATE_MAX ? state_names[s] : "?";
}

enum slurm_state slurm_state_from_name(const char *name)
{
	static const struct {
		const char *name;
		enum slurm_state state;
	} map[] = {
		{ "PENDING", SLURM_STATE_PENDING },
		{ "CONFIGURING", SLURM_STATE_PENDING }, /* allocated, its nodes booting */
		{ "REQUEUED", SLURM_STATE_PENDING },
		{ "REQUEUE_HOLD", SLURM_STATE_PENDING },
		{ "REQUEUE_FED", SLURM_STATE_PENDING },
		{ "RESV_DEL_HOLD", SLURM_STATE_PENDING },
		{ "SUSPENDED", SLURM_STATE_PENDING },
		{ "STOPPED", SLURM_STATE_PENDING },
		{ "RESIZING", SLURM_STATE_RUNNING },
		{ "RUNNING", SLURM_STATE_RUNNING },
		{ "SIGNALING", SLURM_STATE_RUNNING },
		{ "STAGE_OUT", SLURM_STATE_COMPLETING },
		{ "COMPLETING", SLURM_STATE_COMPLETING },
		{ "COMPLETED", SLURM_STATE_COMPLETED },
		{ "FAILED", SLURM_STATE_FAILED },
		{ "SPECIAL_EXIT", SLURM_STATE_FAILED },
		{ "CANCELLED", SLURM_STATE_CANCELLED },
		{ "REVOKED", SLURM_STATE_CANCELLED },
		{ "TIMEOUT", SLURM_STATE_TIMEOUT },
		{ "OUT_OF_MEMORY", SLURM_STATE_OUT_OF_MEMORY },
		{ "NODE_FAIL", SLURM_STATE_NODE_FAIL },
		{ "PREEMPTED", SLURM_STATE_PREEMPTED },
		{ "BOOT_FAIL", SLURM_STATE_BOOT_FAIL },
		{ "DEADLINE", SLURM_STATE_DEADLINE },
	};
	size_t n;

	if (!name)
		return SLURM_STATE_UNKNOWN;
	/* sacct says "CANCELLED by 1000" */
	n = strcspn(name, " ");
	for (size_t i = 0; i < ELEMENTSOF(map); i++)
		if (strlen(map[i].name) == n && strncmp(map[i].name, name, n) == 0)
			return map[i].state;
	return SLURM_STATE_UNKNOWN;
}

bool slurm_state_is_final(enum slurm_state s)
{
	return s >= SLURM_STATE_COMPLETED && s < _SLURM_STATE_MAX;
}

/* ---- values in either shape ---- */

/* A number, or {"set": true, "number": N} / {"number": N}; false when absent or unset. */
static bool get_number(const cJSON *o, const char *key, double *ret)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

	if (cJSON_IsObject(v)) {
		const cJSON *set = cJSON_GetObjectItemCaseSensitive(v, "set");

		if (set && !cJSON_IsTrue(set))
			return false;
		v = cJSON_GetObjectItemCaseSensitive(v, "number");
	}
	if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))
		return false;
	*ret = v->valuedouble;
	return true;
}

static uint64_t get_u64(const cJSON *o, const char *key)
{
	double v;

	return get_number(o, key, &v) && v >= 0 && v < 1.8e19 ? (uint64_t)v : 0;
}

static void get_text(const cJSON *o, const char *key, char *buf, size_t size)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

	buf[0] = 0;
	if (cJSON_IsString(v))
		snprintf(buf, size, "%s", v->valuestring);
}

/* The state: a string, the first known name of a list (["RUNNING",
 * "COMPLETING"] reads as its base state), or sacct's {"current": ...}. */
static void get_state(const cJSON *job, struct slurm_job *j)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(job, "job_state"), *e;

	if (!v) {
		const cJSON *s = cJSON_GetObjectItemCaseSensitive(job, "state");

		v = cJSON_IsObject(s) ? cJSON_GetObjectItemCaseSensitive(s, "current") : s;
		if (cJSON_IsObject(s))
			get_text(s, "reason", j->reason, sizeof(j->reason));
	}
	if (cJSON_IsString(v)) {
		snprintf(j->state_name, sizeof(j->state_name), "%s", v->valuestring);
		j->state = slurm_state_from_name(v->valuestring);
		return;
	}
	cJSON_ArrayForEach(e, v)
	{
		/* a flag such as COMPLETING rides on the base state: the base state wins */
		enum slurm_state s = cJSON_IsString(e) ? slurm_state_from_name(e->valuestring) : SLURM_STATE_UNKNOWN;

		if (s == SLURM_STATE_UNKNOWN)
			continue;
		if (j->state == SLURM_STATE_UNKNOWN || j->state == SLURM_STATE_COMPLETING) {
			j->state = s;
			snprintf(j->state_name, sizeof(j->state_name), "%s", e->valuestring);
		}
	}
}

/* squeue of 22.05: the wait status as a number (768: exited with 3; 9:
 * killed by SIGKILL); sacct and later squeue: {"return_code": N,
 * "signal": {...}}. */
static void get_exit(const cJSON *job, struct slurm_job *j)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(job, "exit_code");
	double d;

	j->exit_code = -1;
	if (cJSON_IsNumber(v) && v->valuedouble >= 0 && v->valuedouble < 65536) {
		int status = (int)v->valuedouble;

		if (status & 0x7f)
			j->exit_signal = status & 0x7f;
		else
			j->exit_code = (status >> 8) & 0xff;
		return;
	}
	if (!cJSON_IsObject(v))
		return;
	if (get_number(v, "return_code", &d))
		j->exit_code = (int)d;
	v = cJSON_GetObjectItemCaseSensitive(v, "signal");
	if (cJSON_IsObject(v) && get_number(v, "id", &d))
		j->exit_signal = (int)d;
	else if (cJSON_IsObject(v) && get_number(v, "signal_id", &d))
		j->exit_signal = (int)d;
}

static void get_times(const cJSON *job, struct slurm_job *j)
{
	const cJSON *t = cJSON_GetObjectItemCaseSensitive(job, "time");

	j->submit_time = get_u64(job, "submit_time");
	j->start_time = get_u64(job, "start_time");
	if (cJSON_IsObject(t)) { /* sacct */
		j->submit_time = get_u64(t, "submission");
		j->start_time = get_u64(t, "start");
	}
}

static int read_job(const cJSON *job, struct slurm_job *j)
{
	const cJSON *comment = cJSON_GetObjectItemCaseSensitive(job, "comment");
	double v;

	*j = (struct slurm_job){ .user_id = -1, .exit_code = -1 };
	if (!get_number(job, "job_id", &v) || v < 1 || v > 1e15)
		return -EINVAL;
	j->id = (uint64_t)v;
	get_state(job, j);
	if (!j->reason[0])
		get_text(job, "state_reason", j->reason, sizeof(j->reason));
	get_text(job, "name", j->name, sizeof(j->name));
	if (cJSON_IsObject(comment)) /* sacct: {"job": ..., "administrator": ...} */
		get_text(comment, "job", j->comment, sizeof(j->comment));
	else
		get_text(job, "comment", j->comment, sizeof(j->comment));
	get_text(job, "nodes", j->nodes, sizeof(j->nodes));
	if (get_number(job, "user_id", &v))
		j->user_id = (int64_t)v;
	get_exit(job, j);
	get_times(job, j);
	if (j->state == SLURM_STATE_PENDING) /* a pending job's start is the scheduler's estimate */
		j->start_time = 0;
	return 0;
}

int slurm_parse_jobs(const char *json, size_t len, struct slurm_job **ret, size_t *ret_n, struct error *err)
{
	_cleanup_(cJSON_Deletep) cJSON *root = NULL;
	_cleanup_(freep) struct slurm_job *jobs = NULL;
	const cJSON *list, *job;
	size_t n = 0;
	int r;

	r = json_parse_strict("the job list", json, len, &root, err);
	if (r < 0)
		return r;
	list = cJSON_GetObjectItemCaseSensitive(root, "jobs");
	if (!cJSON_IsArray(list))
		return error_set(err, -EINVAL, "the job list: no \"jobs\" array");
	jobs = calloc((size_t)cJSON_GetArraySize(list) + 1, sizeof(*jobs));
	if (!jobs)
		return -ENOMEM;
	cJSON_ArrayForEach(job, list) if (read_job(job, &jobs[n]) >= 0) n++;
	*ret = TAKE_PTR(jobs);
	*ret_n = n;
	return 0;
}

/* "gpu:8", "gpu:h100:8(S:0-1)", "gpu:h100:4,gpu:a100:4": the GPUs named. */
static unsigned gres_gpus(const char *gres)
{
	unsigned total = 0;
	const char *p = gres;

	while (p && *p) {
		size_t len = strcspn(p, ",");
		char entry[256], *paren, *colon;

		snprintf(entry, sizeof(entry), "%.*s", (int)MIN(len, sizeof(entry) - 1), p);
		paren = strchr(entry, '(');
		if (paren)
			*paren = 0;
		colon = strrchr(entry, ':');
		if (strncmp(entry, "gpu", 3) == 0 && (entry[3] == ':' || entry[3] == 0) && colon)
			total += (unsigned)strtoul(colon + 1, NULL, 10);
		p = p[len] ? p + len + 1 : NULL;
	}
	return total;
}

static bool in_partition(const cJSON *node, const char *partition)
{
	const cJSON *parts = cJSON_GetObjectItemCaseSensitive(node, "partitions"), *p;

	if (!partition)
		return true;
	cJSON_ArrayForEach(p, parts) if (cJSON_IsString(p) && strcmp(p->valuestring, partition) == 0) return true;
	return false;
}

int slurm_parse_gpus(const char *json, size_t len, const char *partition, unsigned *ret_gpus, unsigned *ret_nodes,
		     unsigned *ret_per_node, struct error *err)
{
	_cleanup_(cJSON_Deletep) cJSON *root = NULL;
	const cJSON *nodes, *node;
	unsigned gpus = 0, n = 0, most = 0;
	int r;

	r = json_parse_strict("the node list", json, len, &root, err);
	if (r < 0)
		return r;
	nodes = cJSON_GetObjectItemCaseSensitive(root, "nodes");
	if (!cJSON_IsArray(nodes))
		return error_set(err, -EINVAL, "the node list: no \"nodes\" array");
	cJSON_ArrayForEach(node, nodes)
	{
		const cJSON *g = cJSON_GetObjectItemCaseSensitive(node, "gres");
		unsigned k;

		if (!cJSON_IsString(g) || !in_partition(node, partition))
			continue;
		k = gres_gpus(g->valuestring);
		if (k == 0)
			continue;
		gpus += k;
		n++;
		most = MAX(most, k);
	}
	*ret_gpus = gpus;
	*ret_nodes = n;
	*ret_per_node = most;
	return 0;
}
