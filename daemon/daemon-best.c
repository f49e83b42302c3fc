/* daemon-best.c — the best configuration of a finished study, written for
 * the operator into STATE_DIR/best/:
 *
 *   <study>.json  the study, the engine version measured, the winning knobs,
 *                 its cost (store_study_best: the mean of its measurements,
 *                 their count and spread), its measured figures and the
 *                 launch command (argv and environment)
 *   <study>.env   GOODPUT_* variables for a production unit's EnvironmentFile=
 *                 (GOODPUT_MAX_NUM_SEQS=64, GOODPUT_QUANTIZATION=fp8, ...) plus
 *                 the environment the engine profile sets
 *   <study>.cmd   the launch command, shell-quoted, for people
 *
 * A disaggregated answer has a command per role (its prefill and decode
 * workers and its router): "command" and "environment" are empty and
 * "command_line" and <study>.cmd hold one line per role ("prefill-0: ...").
 *
 * Each file is written to a temporary name and renamed, so a reader never
 * sees half a file. The launch command is rendered from the engine profile
 * with host 0.0.0.0 and port 8000; edit the unit, not the file, to change
 * them. */
#include "daemon-internal.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cost.h"
#include "engine-profile.h"
#include "file-util.h"
#include "json-util.h"

#define BEST_HOST "0.0.0.0"
#define BEST_PORT 8000

char *daemon_best_path(struct daemon *d, const char *study, const char *suffix)
{
	char *p;

	if (asprintf(&p, "%s/%s%s", d->best_dir, study, suffix) < 0)
		return NULL;
	return p;
}

/* Writes data to path through a temporary file, synced, and a rename; the
 * umask decides who may read it, as for any file goodputd creates. */
static int write_atomic(const char *path, const char *data, size_t len, struct error *err)
{
	int r = file_write_atomic(path, data, len, 0644, FILE_WRITE_SYNC | FILE_WRITE_UMASK);

	if (r < 0)
		return error_set(err, r, "%s: %s", path, strerror(-r));
	return 0;
}

/* A value for an EnvironmentFile=: bare when it is plain, else double-quoted. */
static void env_value(FILE *f, const char *v)
{
	bool plain = *v != '\0';

	for (const char *p = v; *p && plain; p++)
		plain = isalnum((unsigned char)*p) || strchr("_.,:/+-=@%", *p);
	if (plain) {
		fputs(v, f);
		return;
	}
	fputc('"', f);
	for (const char *p = v; *p; p++) {
		if (*p == '"' || *p == '\\' || *p == '$' || *p == '`')
			fputc('\\', f);
		if (*p == '\n')
			fputs("\\n", f);
		else
			fputc(*p, f);
	}
	fputc('"', f);
}

static void env_line(FILE *f, const char *key, const char *v)
{
	fprintf(f, "%s=", key);
	env_value(f, v);
	fputc('\n', f);
}

/* GOODPUT_<KNOB> lines for each knob. */
static void env_knobs(FILE *f, const cJSON *knobs)
{
	const cJSON *k;

	cJSON_ArrayForEach(k, knobs)
	{
		char key[128] = "GOODPUT_", val[64];
		size_t n = strlen(key);

		for (const char *p = k->string; p && *p && n < sizeof(key) - 1; p++)
			key[n++] = isalnum((unsigned char)*p) ? (char)toupper((unsigned char)*p) : '_';
		key[n] = '\0';
		if (cJSON_IsString(k))
			env_line(f, key, k->valuestring);
		else if (cJSON_IsNumber(k)) {
			snprintf(val, sizeof(val), "%.17g", k->valuedouble);
			env_line(f, key, val);
		}
	}
}

static int add_strv(cJSON *j, const char *key, char **v)
{
	cJSON *a = cJSON_AddArrayToObject(j, key);

	if (!a)
		return -ENOMEM;
	for (size_t i = 0; v && v[i]; i++)
		if (!cJSON_AddItemToArray(a, cJSON_CreateString(v[i])))
			return -ENOMEM;
	return 0;
}

struct best_ctx {
	struct store_study st;
	struct store_study_best b; /* the study's answer: its cost, and its first measurement */
	cJSON *knobs;
	struct engine_command cmd;
	char *cmdline;
};

static void best_ctx_done(struct best_ctx *c)
{
	store_study_done(&c->st);
	store_study_best_done(&c->b);
	cJSON_Delete(c->knobs);
	engine_command_done(&c->cmd);
	free(c->cmdline);
}

static int render(struct daemon *d, struct best_ctx *c, struct error *err)
{
	_cleanup_(engine_profile_freep) struct engine_profile *p = NULL;
	_cleanup_(study_freep) struct study *s = NULL;
	int r;

	r = engine_profile_load_study(c->st.spec_json, c->st.engine, d->config->engines_dir, &p, &s, err);
	if (r < 0)
		return r;
	/* disaggregated: a command per role, one line each; no single argv */
	if (opt_knobs_pd_shape(c->knobs, NULL))
		return engine_profile_format_roles(p, s, c->knobs, BEST_HOST, BEST_PORT, &c->cmdline, err);
	r = engine_profile_render_study(p, s, c->knobs, BEST_HOST, BEST_PORT, &c->cmd, err);
	if (r < 0)
		return r;
	c->cmdline = engine_command_format(&c->cmd);
	return c->cmdline ? 0 : error_set(err, -ENOMEM, "out of memory");
}

static int write_json(struct daemon *d, struct best_ctx *c, struct error *err)
{
	_cleanup_(cJSON_Deletep) cJSON *j = cJSON_CreateObject();
	_cleanup_(freep) char *path = daemon_best_path(d, c->st.name, ".json");
	_cleanup_(cjson_freep) char *text = NULL;
	_cleanup_(freep) char *withnl = NULL;
	cJSON *trial = NULL;
	int r;

	if (!j || !path)
		return error_set(err, -ENOMEM, "out of memory");
	if (json_add_string(j, "study", c->st.name) < 0 || json_add_string(j, "engine", c->st.engine) < 0 ||
	    (c->b.engine_version ? json_add_string(j, "engine_version", c->b.engine_version)
				 : (cJSON_AddNullToObject(j, "engine_version") ? 0 : -ENOMEM)) < 0 ||
	    json_add_string(j, "model", c->st.model) < 0 ||
	    (c->st.label && json_add_string(j, "label", c->st.label) < 0) ||
	    !cJSON_AddItemToObject(j, "knobs", cJSON_Duplicate(c->knobs, true)) ||
	    json_add_number(j, "cost_per_mtok", c->b.cost_per_mtok) < 0 ||
	    json_add_number(j, "measurements", c->b.n) < 0 || json_add_number(j, "spread", c->b.spread) < 0 ||
	    json_add_number(j, "max_goodput", c->b.trial.max_goodput) < 0 ||
	    json_add_number(j, "max_rate", c->b.trial.max_rate) < 0 || add_strv(j, "command", c->cmd.argv) < 0 ||
	    add_strv(j, "environment", c->cmd.env) < 0 || json_add_string(j, "command_line", c->cmdline) < 0)
		return error_set(err, -ENOMEM, "out of memory");
	r = ctl_trial_to_json(&c->b.trial, &trial);
	if (r < 0 || !cJSON_AddItemToObject(j, "trial", trial)) {
		cJSON_Delete(trial);
		return error_set(err, -ENOMEM, "out of memory");
	}
	text = cJSON_Print(j);
	if (!text || asprintf(&withnl, "%s\n", text) < 0)
		return error_set(err, -ENOMEM, "out of memory");
	return write_atomic(path, withnl, strlen(withnl), err);
}

static int write_env_and_cmd(struct daemon *d, struct best_ctx *c, struct error *err)
{
	_cleanup_(freep) char *env_path = daemon_best_path(d, c->st.name, ".env");
	_cleanup_(freep) char *cmd_path = daemon_best_path(d, c->st.name, ".cmd");
	_cleanup_(freep) char *buf = NULL, *cmdline = NULL;
	size_t len = 0;
	char num[64];
	FILE *f;
	int r;

	if (!env_path || !cmd_path)
		return error_set(err, -ENOMEM, "out of memory");
	f = open_memstream(&buf, &len);
	if (!f)
		return error_set(err, -ENOMEM, "out of memory");
	fprintf(f, "# goodput: the best configuration of study %s (written by goodputd)\n", c->st.name);
	env_line(f, "GOODPUT_STUDY", c->st.name);
	env_line(f, "GOODPUT_ENGINE", c->st.engine);
	if (c->b.engine_version)
		env_line(f, "GOODPUT_ENGINE_VERSION", c->b.engine_version);
	env_line(f, "GOODPUT_MODEL", c->st.model);
	env_knobs(f, c->knobs);
	snprintf(num, sizeof(num), "%.6g", c->b.cost_per_mtok);
	env_line(f, "GOODPUT_COST_PER_MTOK", num);
	snprintf(num, sizeof(num), "%u", c->b.n);
	env_line(f, "GOODPUT_COST_MEASUREMENTS", num);
	snprintf(num, sizeof(num), "%.6g", c->b.spread);
	env_line(f, "GOODPUT_COST_SPREAD", num);
	snprintf(num, sizeof(num), "%.6g", c->b.trial.max_goodput);
	env_line(f, "GOODPUT_MAX_GOODPUT", num);
	for (size_t i = 0; c->cmd.env && c->cmd.env[i]; i++) {
		const char *eq = strchr(c->cmd.env[i], '=');

		if (eq) {
			_cleanup_(freep) char *key = strndup(c->cmd.env[i], (size_t)(eq - c->cmd.env[i]));

			if (key)
				env_line(f, key, eq + 1);
		}
	}
	if (fclose(f) != 0 || !buf)
		return error_set(err, -ENOMEM, "out of memory");
	r = write_atomic(env_path, buf, len, err);
	if (r < 0)
		return r;
	if (asprintf(&cmdline, "%s\n", c->cmdline) < 0)
		return error_set(err, -ENOMEM, "out of memory");
	return write_atomic(cmd_path, cmdline, strlen(cmdline), err);
}

int daemon_write_best(struct daemon *d, int64_t study_id, struct error *err)
{
	struct best_ctx c = { 0 };
	int r;

	r = store_study_get(d->store, study_id, &c.st, err);
	if (r >= 0)
		r = store_study_best(d->store, study_id, &c.b, err);
	if (r >= 0) {
		c.knobs = cJSON_Parse(c.b.trial.knobs_json ? c.b.trial.knobs_json : "{}");
		if (!c.knobs)
			r = error_set(err, -EINVAL, "trial %u: its knobs are not JSON", c.b.trial.seq);
	}
	if (r >= 0)
		r = render(d, &c, err);
	if (r >= 0)
		r = write_json(d, &c, err);
	if (r >= 0)
		r = write_env_and_cmd(d, &c, err);
	best_ctx_done(&c);
	return r;
}
