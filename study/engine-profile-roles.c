/* engine-profile-roles.c — how an engine serves disaggregated: a profile's
 * "roles" key and the commands of a deployment's roles.
 *
 *   "roles": {
 *     "prefill": { "args": ["--kv-transfer-config", "{...}"], "env": {"VLLM_NIXL_SIDE_CHANNEL_PORT": "{aux_port}"} },
 *     "decode":  { "args": [...], "env": {...} },
 *     "router":  { "argv": ["toy_proxy_server.py", "--port", "{port}",
 *                           "--prefiller-hosts", ["{prefill_host}"], "--prefiller-ports", ["{prefill_port}"],
 *                           "--decoder-hosts", ["{decode_host}"], "--decoder-ports", ["{decode_port}"]],
 *                  "health": {"path": "/healthcheck"}, "port": {"mode": "free"}, "startup_timeout": 60 }
 *   }
 *
 * A worker is the engine's own command for its side's knobs (a study's
 * prefill_max_num_batched_tokens is the prefill workers'
 * max_num_batched_tokens, its prefill_tensor_parallel their
 * tensor_parallel; quantization and the like are everyone's) plus its
 * role's args and env. {aux_port} is a second port of the worker's own
 * (vLLM's NIXL side channel must differ between the workers of a host,
 * SGLang's bootstrap server likewise). The router (the engine's proxy)
 * comes last: a group — a nested array of its argv — is repeated for every
 * worker of the side its placeholders name, which writes vLLM's
 * "--prefiller-hosts H1 H2" and SGLang's "--prefill URL1 --prefill URL2"
 * alike. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine-profile-internal.h"
#include "json-util.h"
#include "macro.h"
#include "space.h"
#include "time-util.h"

#define ROFF(field) offsetof(struct engine_profile, roles.field)

static const char *const role_names[_ENGINE_ROLE_MAX] = {
	[ENGINE_ROLE_PREFILL] = "prefill",
	[ENGINE_ROLE_DECODE] = "decode",
	[ENGINE_ROLE_ROUTER] = "router",
};

const char *engine_role_to_string(enum engine_role r)
{
	return r < _ENGINE_ROLE_MAX ? role_names[r] : NULL;
}

/* ---- the shape of a configuration ---- */

/* The knobs of the shape itself: no worker's flag. */
static bool shape_knob(const char *name)
{
	return strcmp(name, OPT_KNOB_SHAPE) == 0 || strcmp(name, OPT_KNOB_PREFILL_WORKERS) == 0 ||
	       strcmp(name, OPT_KNOB_DECODE_WORKERS) == 0;
}

const char *engine_role_knob_base(const char *name)
{
	if (shape_knob(name))
		return NULL;
	if (strncmp(name, "prefill_", 8) == 0)
		return name + 8;
	if (strncmp(name, "decode_", 7) == 0)
		return name + 7;
	return name;
}

int engine_profile_add_role_knobs(struct engine_profile *p)
{
	static const char *const shape[] = { OPT_KNOB_SHAPE, OPT_KNOB_PREFILL_WORKERS, OPT_KNOB_DECODE_WORKERS };
	size_t n_extra = 0, n_new = ELEMENTSOF(shape) + 2 * p->n_knobs, size = 0, off = 0;
	const char **v;

	while (p->extra_knobs[n_extra])
		n_extra++;
	for (size_t i = 0; i < p->n_knobs; i++)
		size += 2 * (strlen(p->knobs[i].name) + 9);
	p->roles.knob_names = malloc(size + 1);
	v = reallocarray(p->extra_knobs, n_extra + n_new + 1, sizeof(char *));
	if (!p->roles.knob_names || !v) {
		if (v)
			p->extra_knobs = v;
		return -ENOMEM;
	}
	p->extra_knobs = v;
	for (size_t i = 0; i < ELEMENTSOF(shape); i++)
		v[n_extra++] = shape[i];
	for (size_t side = 0; side < 2; side++)
		for (size_t i = 0; i < p->n_knobs; i++) {
			char *name = p->roles.knob_names + off;

			off += (size_t)sprintf(name, "%s%s", side == 0 ? "prefill_" : "decode_", p->knobs[i].name) + 1;
			v[n_extra++] = name;
		}
	v[n_extra] = NULL;
	return 0;
}

int engine_role_knobs(const cJSON *knobs, enum engine_role role, cJSON **ret)
{
	_cleanup_(cJSON_Deletep) cJSON *o = cJSON_CreateObject();
	const char *mine = role == ENGINE_ROLE_PREFILL ? "prefill_" : "decode_";
	const char *other = role == ENGINE_ROLE_PREFILL ? "decode_" : "prefill_";
	const cJSON *item;

	if (!o)
		return -ENOMEM;
	/* everyone's first, then the side's own replace them */
	for (int pass = 0; pass < 2; pass++)
		cJSON_ArrayForEach(item, knobs)
		{
			const char *name = item->string;
			bool own = strncmp(name, mine, strlen(mine)) == 0;
			cJSON *copy;

			if (shape_knob(name) || strncmp(name, other, strlen(other)) == 0 || own != (pass == 1))
				continue;
			if (own)
				name += strlen(mine);
			copy = cJSON_Duplicate(item, false);
			if (!copy)
				return -ENOMEM;
			cJSON_DeleteItemFromObjectCaseSensitive(o, name);
			if (!cJSON_AddItemToObject(o, name, copy)) {
				cJSON_Delete(copy);
				return -ENOMEM;
			}
		}
	*ret = TAKE_PTR(o);
	return 0;
}

/* ---- the profile's key ---- */

/* The placeholders a role's text may hold besides the knobs. */
static bool worker_placeholder(const char *name)
{
	static const char *const names[] = { "model",    "served_model", "host",      "port",
					     "aux_port", "gpu_type",     "gpu_count", NULL };

	for (size_t i = 0; names[i]; i++)
		if (strcmp(names[i], name) == 0)
			return true;
	return false;
}

/* The router's placeholders; side: 0 outside a group, 1 prefill, 2 decode (the group's side once seen). */
static bool router_placeholder(const char *name, int *side)
{
	static const char *const fixed[] = { "host", "port", "model", "served_model", NULL };
	static const char *const per[] = { "url", "host", "port", "aux_port", NULL };

	for (size_t i = 0; fixed[i]; i++)
		if (strcmp(fixed[i], name) == 0)
			return true;
	for (int k = 1; side && k <= 2; k++) {
		const char *prefix = k == 1 ? "prefill_" : "decode_";

		if (strncmp(name, prefix, strlen(prefix)) != 0)
			continue;
		for (size_t i = 0; per[i]; i++)
			if (strcmp(name + strlen(prefix), per[i]) == 0) {
				if (*side != 0 && *side != k)
					return false; /* a group names one side */
				*side = k;
				return true;
			}
	}
	return false;
}

/* A placeholder at o ("{name}", name of [a-z0-9_]): its name into buf, or
 * false when o is a brace of the text itself (JSON in an argument:
 * --kv-transfer-config '{"kv_connector": ...}'). */
static bool placeholder_at(const char *o, char *buf, size_t size)
{
	size_t n = 0;

	if (*o != '{')
		return false;
	while (o[1 + n] && (islower((unsigned char)o[1 + n]) || isdigit((unsigned char)o[1 + n]) || o[1 + n] == '_'))
		n++;
	if (n == 0 || o[1 + n] != '}' || n >= size)
		return false;
	snprintf(buf, size, "%.*s", (int)n, o + 1);
	return true;
}

/* Checks each {name} of s with ok(name). */
static int check_text(const char *s, const char *where, bool (*ok)(const char *, int *), int *side,
		      const struct engine_profile *p, struct error *err)
{
	for (const char *o = strchr(s, '{'); o; o = strchr(o + 1, '{')) {
		char name[OPT_KNOB_NAME_MAX];

		if (!placeholder_at(o, name, sizeof(name)))
			continue;
		if (!ok(name, side) && !(p && engine_profile_find_knob(p, name)))
			return error_set(err, -EINVAL, "%s: \"%s\": unknown placeholder {%s}", where, s, name);
	}
	return 0;
}

static bool worker_ok(const char *name, int *side)
{
	return worker_placeholder(name);
}

static int parse_args(const cJSON *v, const char *path, const struct json_field *f, void *base, struct error *err)
{
	const struct engine_profile *p = base;
	const cJSON *item;
	size_t i = 0;

	cJSON_ArrayForEach(item, v)
	{
		char where[128];
		int r;

		snprintf(where, sizeof(where), "%s[%zu]", path, i++);
		if (!cJSON_IsString(item) || !item->valuestring[0])
			return error_set(err, -EINVAL, "%s: expected a non-empty string", where);
		r = check_text(item->valuestring, where, worker_ok, NULL, p, err);
		if (r < 0)
			return r;
	}
	return json_dispatch_store(v, path, f, base, err);
}

static int parse_role_env(const cJSON *v, const char *path, const struct json_field *f, void *base, struct error *err)
{
	const struct engine_profile *p = base;
	const cJSON *item;

	cJSON_ArrayForEach(item, v)
	{
		char where[128];
		int r;

		json_path_join(where, sizeof(where), path, item->string);
		if (!item->string[0] || strchr(item->string, '='))
			return error_set(err, -EINVAL, "%s: not a variable name", where);
		if (!cJSON_IsString(item))
			return error_set(err, -EINVAL, "%s: expected a string", where);
		r = check_text(item->valuestring, where, worker_ok, NULL, p, err);
		if (r < 0)
			return r;
	}
	return json_dispatch_store(v, path, f, base, err);
}

static bool router_ok_outside(const char *name, int *side)
{
	return router_placeholder(name, NULL);
}

static bool router_ok_group(const char *name, int *side)
{
	return router_placeholder(name, side);
}

static int parse_router_argv(const cJSON *v, const char *path, const struct json_field *f, void *base,
			     struct error *err)
{
	const cJSON *item;
	size_t i = 0;

	if (cJSON_GetArraySize(v) < 1 || !cJSON_IsString(cJSON_GetArrayItem(v, 0)))
		return error_set(err, -EINVAL, "%s: expected the router's program first", path);
	cJSON_ArrayForEach(item, v)
	{
		char where[128];
		const cJSON *g;
		int side = 0, r;

		snprintf(where, sizeof(where), "%s[%zu]", path, i++);
		if (cJSON_IsString(item) && item->valuestring[0]) {
			r = check_text(item->valuestring, where, router_ok_outside, NULL, NULL, err);
			if (r < 0)
				return r;
			continue;
		}
		if (!cJSON_IsArray(item) || cJSON_GetArraySize(item) < 1)
			return error_set(err, -EINVAL, "%s: expected a string or a group (an array of strings)", where);
		cJSON_ArrayForEach(g, item)
		{
			if (!cJSON_IsString(g) || !g->valuestring[0])
				return error_set(err, -EINVAL, "%s: a group holds non-empty strings", where);
			r = check_text(g->valuestring, where, router_ok_group, &side, NULL, err);
			if (r < 0)
				return r;
		}
		if (side == 0)
			return error_set(err, -EINVAL,
					 "%s: a group names the workers it is repeated for ({prefill_url}, "
					 "{decode_host}, ...)",
					 where);
	}
	return json_dispatch_store(v, path, f, base, err);
}

static int parse_router_path(const cJSON *v, const char *path, const struct json_field *f, void *base,
			     struct error *err)
{
	if (v->valuestring[0] != '/' || strpbrk(v->valuestring, " \t\r\n"))
		return error_set(err, -EINVAL, "%s: expected a path starting with '/', got \"%s\"", path,
				 v->valuestring);
	return json_dispatch_store(v, path, f, base, err);
}

static const char *const router_port_modes[] = { "free", "announce", NULL };

static const struct json_field worker_fields_prefill[] = {
	{ "args", JSON_ARRAY, ROFF(prefill_args), .callback = parse_args, .max = ENGINE_MAX_ARGS,
	  .schema = "{\"items\": {\"type\": \"string\"}}",
	  .doc = "arguments after a prefill worker's command, with placeholders ({aux_port}: a second free port)" },
	{ "env", JSON_OBJECT, ROFF(prefill_env), .callback = parse_role_env,
	  .doc = "a prefill worker's extra environment: NAME → value with placeholders" },
	{ 0 },
};

static const struct json_field worker_fields_decode[] = {
	{ "args", JSON_ARRAY, ROFF(decode_args), .callback = parse_args, .max = ENGINE_MAX_ARGS,
	  .schema = "{\"items\": {\"type\": \"string\"}}", .doc = "arguments after a decode worker's command" },
	{ "env", JSON_OBJECT, ROFF(decode_env), .callback = parse_role_env,
	  .doc = "a decode worker's extra environment" },
	{ 0 },
};

static const struct json_field router_port_fields[] = {
	{ "mode", JSON_ENUM, ROFF(router_port_mode), .choices = router_port_modes, .def = "free",
	  .doc = "free (the deployer picks a port) or announce (port 0, the router prints where)" },
	{ "announce_prefix", JSON_STRING, ROFF(router_announce_prefix), .max = 128,
	  .doc = "announce: what the router prints before HOST:PORT" },
	{ 0 },
};

static const struct json_field router_health_fields[] = {
	{ "path", JSON_STRING, ROFF(router_health_path), .callback = parse_router_path, .flags = JSON_MANDATORY,
	  .max = 256, .doc = "HTTP path that answers 200 once the router serves (vLLM's proxy: /healthcheck)" },
	{ "interval", JSON_SECONDS, ROFF(router_health_interval_usec), .min = 0.01, .max = 60, .def = "1",
	  .doc = "seconds between polls" },
	{ 0 },
};

static const struct json_field router_fields[] = {
	{ "argv", JSON_ARRAY, ROFF(router_argv), .callback = parse_router_argv, .flags = JSON_MANDATORY, .min = 1,
	  .max = ENGINE_MAX_ARGS,
	  .schema = "{\"items\": {\"anyOf\": [{\"type\": \"string\"}, {\"type\": \"array\", \"items\": {\"type\": "
		    "\"string\"}}]}}",
	  .doc = "the router's program and arguments; a group (an array) is repeated for each worker its "
		 "placeholders name: {prefill_url}, {prefill_host}, {prefill_port}, {prefill_aux_port}, "
		 "{decode_url}, ...; outside groups {host}, {port}, {model}, {served_model}" },
	{ "env", JSON_OBJECT, ROFF(router_env), .callback = parse_role_env, .doc = "the router's extra environment" },
	{ "port", JSON_OBJECT, .fields = router_port_fields, .doc = "how the router's port is chosen" },
	{ "health", JSON_OBJECT, .fields = router_health_fields, .flags = JSON_MANDATORY,
	  .doc = "the router's readiness" },
	{ "startup_timeout", JSON_SECONDS, ROFF(router_startup_timeout_usec), .min = 1, .max = 86400, .def = "120",
	  .doc = "time for the router's health path to answer once the workers are ready" },
	{ 0 },
};

const struct json_field engine_profile_roles_fields[] = {
	{ "prefill", JSON_OBJECT, .fields = worker_fields_prefill, .flags = JSON_MANDATORY,
	  .doc = "what a prefill worker adds to the engine's command" },
	{ "decode", JSON_OBJECT, .fields = worker_fields_decode, .flags = JSON_MANDATORY,
	  .doc = "what a decode worker adds to the engine's command" },
	{ "router", JSON_OBJECT, .fields = router_fields, .flags = JSON_MANDATORY,
	  .doc = "the engine's proxy in front of the workers" },
	{ 0 },
};

int engine_profile_parse_roles(const cJSON *v, const char *path, const struct json_field *f, void *base,
			       struct error *err)
{
	struct engine_profile *p = base;
	int r;

	p->roles.router_health_interval_usec = USEC_PER_SEC;
	p->roles.router_startup_timeout_usec = 120 * USEC_PER_SEC;
	r = json_dispatch(v, path, f->fields, 0, base, err);
	if (r < 0)
		return r;
	p->roles.present = true;
	return 0;
}

/* ---- rendering ---- */

/* What a placeholder stands for in one role's text. */
struct role_values {
	const struct study *s;
	const cJSON *knobs; /* the worker's */
	const char *host, *port, *aux_port;
	const struct engine_worker_address *worker; /* in a router's group: the worker it is repeated for */
	int side;                                   /* the group's: 1 prefill, 2 decode */
};

static int role_value(const struct role_values *v, const char *name, char *buf, size_t size)
{
	const char *pre = v->side == 1 ? "prefill_" : "decode_", *local = name;
	const cJSON *k;

	if (v->worker && strncmp(name, pre, strlen(pre)) == 0) {
		local = name + strlen(pre);
		if (strcmp(local, "host") == 0)
			snprintf(buf, size, "%s", v->worker->host);
		else if (strcmp(local, "port") == 0)
			snprintf(buf, size, "%u", v->worker->port);
		else if (strcmp(local, "aux_port") == 0)
			snprintf(buf, size, "%u", v->worker->aux_port);
		else if (strcmp(local, "url") == 0)
			snprintf(buf, size, "http://%s%s%s:%u", strchr(v->worker->host, ':') ? "[" : "",
				 v->worker->host, strchr(v->worker->host, ':') ? "]" : "", v->worker->port);
		else
			return -EINVAL;
		return 0;
	}
	if (strcmp(name, "host") == 0)
		snprintf(buf, size, "%s", v->host);
	else if (strcmp(name, "port") == 0)
		snprintf(buf, size, "%s", v->port);
	else if (strcmp(name, "aux_port") == 0 && v->aux_port)
		snprintf(buf, size, "%s", v->aux_port);
	else if (strcmp(name, "model") == 0)
		snprintf(buf, size, "%s", v->s->model.name);
	else if (strcmp(name, "served_model") == 0)
		snprintf(buf, size, "%s", v->s->model.name);
	else if (strcmp(name, "gpu_type") == 0)
		snprintf(buf, size, "%s", v->s->gpu.type);
	else if (strcmp(name, "gpu_count") == 0)
		snprintf(buf, size, "%u", v->s->gpu.per_node);
	else if ((k = cJSON_GetObjectItemCaseSensitive(v->knobs, name)) && cJSON_IsString(k))
		snprintf(buf, size, "%s", k->valuestring);
	else if (k && cJSON_IsNumber(k))
		snprintf(buf, size, "%.15g", k->valuedouble);
	else
		return -EINVAL;
	return 0;
}

static int role_substitute(const struct role_values *v, const char *tmpl, const char *where, char **ret,
			   struct error *err)
{
	char out[4096], val[1024];
	size_t len = 0;

	for (const char *s = tmpl; *s;) {
		char name[OPT_KNOB_NAME_MAX];
		size_t n;

		if (!placeholder_at(s, name, sizeof(name))) {
			if (len + 1 >= sizeof(out))
				return error_set(err, -E2BIG, "%s: rendered value too long", where);
			out[len++] = *s++;
			continue;
		}
		if (role_value(v, name, val, sizeof(val)) < 0)
			return error_set(err, -EINVAL, "%s: {%s}: the configuration has no value for it", where, name);
		n = strlen(val);
		if (len + n >= sizeof(out))
			return error_set(err, -E2BIG, "%s: rendered value too long", where);
		memcpy(out + len, val, n);
		len += n;
		s += strlen(name) + 2;
	}
	out[len] = '\0';
	*ret = strdup(out);
	return *ret ? 0 : -ENOMEM;
}

static int strv_push(char ***v, char *s)
{
	size_t n = 0;
	char **nv;

	if (!s)
		return -ENOMEM;
	while (*v && (*v)[n])
		n++;
	nv = reallocarray(*v, n + 2, sizeof(char *));
	if (!nv) {
		free(s);
		return -ENOMEM;
	}
	nv[n] = s;
	nv[n + 1] = NULL;
	*v = nv;
	return 0;
}

/* Appends a role's args to argv and its env (replacing a variable of the
 * same name) to env. */
static int add_role(const struct role_values *v, const cJSON *args, const cJSON *env, const char *what,
		    struct engine_command *cmd, struct error *err)
{
	const cJSON *item;
	int r;

	cJSON_ArrayForEach(item, args)
	{
		char *text = NULL;

		r = role_substitute(v, item->valuestring, what, &text, err);
		if (r >= 0)
			r = strv_push(&cmd->argv, text);
		if (r < 0)
			return r;
	}
	cJSON_ArrayForEach(item, env)
	{
		_cleanup_(freep) char *val = NULL;
		char *entry = NULL;
		size_t len = strlen(item->string);

		r = role_substitute(v, item->valuestring, what, &val, err);
		if (r < 0)
			return r;
		if (asprintf(&entry, "%s=%s", item->string, val) < 0)
			return -ENOMEM;
		for (size_t i = 0; cmd->env && cmd->env[i]; i++)
			if (strncmp(cmd->env[i], item->string, len) == 0 && cmd->env[i][len] == '=') {
				free(cmd->env[i]);
				cmd->env[i] = TAKE_PTR(entry);
				break;
			}
		if (entry && strv_push(&cmd->env, entry) < 0)
			return -ENOMEM;
	}
	return 0;
}

int engine_profile_render_worker(const struct engine_profile *p, const struct study *s, const cJSON *knobs,
				 enum engine_role role, const char *host, uint16_t port, uint16_t aux_port,
				 const unsigned *devices, unsigned n_devices, bool job, struct engine_command *ret,
				 struct error *err)
{
	_cleanup_(cJSON_Deletep) cJSON *mine = NULL;
	struct engine_command cmd = { 0 };
	char port_text[16], aux_text[16];
	struct role_values v = { .s = s };
	int r;

	if (!p->roles.present)
		return error_set(err, -EOPNOTSUPP,
				 "engine %s: its profile has no \"roles\": it does not serve "
				 "disaggregated",
				 p->name);
	if (role != ENGINE_ROLE_PREFILL && role != ENGINE_ROLE_DECODE)
		return error_set(err, -EINVAL, "a worker prefills or decodes");
	r = engine_role_knobs(knobs, role, &mine);
	if (r < 0)
		return r;
	r = job ? engine_profile_render_job(p, s, mine, host, &cmd, err)
		: engine_profile_render_trial(p, s, mine, host, port, devices, n_devices, &cmd, err);
	if (r < 0)
		return error_prefix(err, r, "%s worker", engine_role_to_string(role));
	snprintf(port_text, sizeof(port_text), "%u", port);
	snprintf(aux_text, sizeof(aux_text), "%u", aux_port);
	v.knobs = mine;
	v.host = host ? host : s->deploy.host ? s->deploy.host : "127.0.0.1";
	v.port = job ? ENGINE_PORT_PLACEHOLDER : port_text;
	v.aux_port = job ? ENGINE_AUX_PORT_PLACEHOLDER : aux_text;
	r = add_role(&v, role == ENGINE_ROLE_PREFILL ? p->roles.prefill_args : p->roles.decode_args,
		     role == ENGINE_ROLE_PREFILL ? p->roles.prefill_env : p->roles.decode_env,
		     role == ENGINE_ROLE_PREFILL ? "roles.prefill" : "roles.decode", &cmd, err);
	if (r < 0) {
		engine_command_done(&cmd);
		return r;
	}
	*ret = cmd;
	return 0;
}

int engine_profile_render_router(const struct engine_profile *p, const struct study *s, const char *host, uint16_t port,
				 bool job, const struct engine_worker_address *prefill, size_t n_prefill,
				 const struct engine_worker_address *decode, size_t n_decode,
				 struct engine_command *ret, struct error *err)
{
	struct engine_command cmd = { 0 };
	struct role_values v = { .s = s };
	char port_text[16];
	const cJSON *item;
	size_t i = 0;
	int r = 0;

	if (!p->roles.present)
		return error_set(err, -EOPNOTSUPP, "engine %s: its profile has no router", p->name);
	snprintf(port_text, sizeof(port_text), "%u", port);
	v.host = host ? host : "127.0.0.1";
	v.port = job ? ENGINE_PORT_PLACEHOLDER : port_text;
	cmd.env = calloc(1, sizeof(char *));
	if (!cmd.env)
		return -ENOMEM;
	cJSON_ArrayForEach(item, p->roles.router_argv)
	{
		char where[64], *text = NULL;

		snprintf(where, sizeof(where), "roles.router.argv[%zu]", i);
		if (cJSON_IsString(item)) {
			/* the study's router_binary replaces the program */
			if (i == 0 && s->deploy.router_binary)
				text = strdup(s->deploy.router_binary);
			else if (i == 0 && p->own_program && strcmp(item->valuestring, "goodput-sim") == 0)
				text = strdup(p->own_program); /* goodput's own, as the workers' */
			else
				r = role_substitute(&v, item->valuestring, where, &text, err);
			if (r >= 0)
				r = strv_push(&cmd.argv, text);
		} else {
			/* a group: once for each worker of the side it names */
			const cJSON *g;
			bool pre = false;

			cJSON_ArrayForEach(g, item) pre = pre || strstr(g->valuestring, "{prefill_");
			for (size_t w = 0; r >= 0 && w < (pre ? n_prefill : n_decode); w++) {
				struct role_values gv = v;

				gv.worker = pre ? &prefill[w] : &decode[w];
				gv.side = pre ? 1 : 2;
				cJSON_ArrayForEach(g, item)
				{
					text = NULL;
					r = role_substitute(&gv, g->valuestring, where, &text, err);
					if (r >= 0)
						r = strv_push(&cmd.argv, text);
					if (r < 0)
						break;
				}
			}
		}
		if (r < 0)
			break;
		i++;
	}
	if (r >= 0)
		r = add_role(&v, NULL, p->roles.router_env, "roles.router.env", &cmd, err);
	if (r < 0) {
		engine_command_done(&cmd);
		return r;
	}
	*ret = cmd;
	return 0;
}

int engine_profile_format_roles(const struct engine_profile *p, const struct study *s, const cJSON *knobs,
				const char *host, uint16_t port, char **ret, struct error *err)
{
	struct engine_worker_address addr[2][64];
	_cleanup_(freep) char *out = NULL;
	struct opt_pd_shape pd;
	size_t len = 0, cap = 0;
	unsigned next_gpu = 0, n[2];
	uint16_t next_port = (uint16_t)(port + 100), next_aux = 5600;
	int r = 0;

	if (!opt_knobs_pd_shape(knobs, &pd))
		return error_set(err, -EINVAL, "not a disaggregated configuration");
	n[0] = MIN(pd.prefill_workers, 64u);
	n[1] = MIN(pd.decode_workers, 64u);
	host = host ? host : "127.0.0.1";
	for (int side = 0; side < 2 && r >= 0; side++)
		for (unsigned w = 0; w < n[side] && r >= 0; w++) {
			enum engine_role role = side == 0 ? ENGINE_ROLE_PREFILL : ENGINE_ROLE_DECODE;
			unsigned tp = side == 0 ? pd.prefill_tp : pd.decode_tp, devices[64];
			_cleanup_(engine_command_done) struct engine_command cmd = { 0 };
			_cleanup_(freep) char *line = NULL, *text = NULL;

			for (unsigned g = 0; g < tp && g < 64; g++)
				devices[g] = next_gpu++;
			addr[side][w] = (struct engine_worker_address){ host, next_port++, next_aux++ };
			r = engine_profile_render_worker(p, s, knobs, role, host, addr[side][w].port,
							 addr[side][w].aux_port, devices, MIN(tp, 64u), false, &cmd,
							 err);
			if (r < 0)
				break;
			text = engine_command_format(&cmd);
			if (!text || asprintf(&line, "%s-%u: %s\n", engine_role_to_string(role), w, text) < 0)
				return -ENOMEM;
			if (len + strlen(line) + 1 > cap) {
				char *b = realloc(out, (cap = (len + strlen(line) + 1) * 2));

				if (!b)
					return -ENOMEM;
				out = b;
			}
			memcpy(out + len, line, strlen(line) + 1);
			len += strlen(line);
		}
	if (r >= 0) {
		_cleanup_(engine_command_done) struct engine_command cmd = { 0 };
		_cleanup_(freep) char *text = NULL, *all = NULL;

		r = engine_profile_render_router(p, s, host, port, false, addr[0], n[0], addr[1], n[1], &cmd, err);
		if (r < 0)
			return r;
		text = engine_command_format(&cmd);
		if (!text || asprintf(&all, "%srouter: %s", out ? out : "", text) < 0)
			return -ENOMEM;
		*ret = TAKE_PTR(all);
	}
	return r;
}
