/* engine-profile-render.c — turning an engine profile plus a configuration
 * into a command.
 *
 * engine_profile_render() fills an argv array and "NAME=value" environment
 * entries from a loaded profile (engine-profile.c checked its keys and
 * placeholders), the deployment's parameters and the configuration's knob
 * values: fixed flags, one flag per knob, derived flags, the tensor-parallel
 * check. Never a shell string: engine_command_format() quotes for display
 * only. engine_profile_render_study() and engine_profile_check_study() add
 * what a study's quantization needs (a checkpoint). */
#include "engine-profile.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine-profile-internal.h"
#include "json-util.h"
#include "macro.h"

void engine_command_done(struct engine_command *c)
{
	if (!c)
		return;
	for (size_t i = 0; c->argv && c->argv[i]; i++)
		free(c->argv[i]);
	for (size_t i = 0; c->env && c->env[i]; i++)
		free(c->env[i]);
	free(c->argv);
	free(c->env);
	*c = (struct engine_command){ 0 };
}

/* A knob value as flag text: integers without a fraction, others %.15g. */
static int value_text(const cJSON *v, char *buf, size_t size)
{
	if (cJSON_IsString(v) && v->valuestring[0]) {
		snprintf(buf, size, "%s", v->valuestring);
		return 0;
	}
	if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))
		return -EINVAL;
	if (v->valuedouble == floor(v->valuedouble) && fabs(v->valuedouble) < 1e15)
		snprintf(buf, size, "%.0f", v->valuedouble);
	else
		snprintf(buf, size, "%.15g", v->valuedouble);
	return 0;
}

static int placeholder_value(const struct engine_render_params *params, const cJSON *knobs, const char *name, char *buf,
			     size_t size)
{
	if (strcmp(name, "model") == 0)
		snprintf(buf, size, "%s", params->model ? params->model : "");
	else if (strcmp(name, "served_model") == 0)
		snprintf(buf, size, "%s",
			 params->served_model ? params->served_model
			 : params->model      ? params->model
					      : "");
	else if (strcmp(name, "host") == 0)
		snprintf(buf, size, "%s", params->host ? params->host : "127.0.0.1");
	else if (strcmp(name, "port") == 0 && params->port_text)
		snprintf(buf, size, "%s", params->port_text);
	else if (strcmp(name, "port") == 0)
		snprintf(buf, size, "%u", params->port);
	else if (strcmp(name, "gpu_type") == 0)
		snprintf(buf, size, "%s", params->gpu_type ? params->gpu_type : "");
	else if (strcmp(name, "gpu_count") == 0)
		snprintf(buf, size, "%u", params->gpu_count ? params->gpu_count : 1);
	else if (strcmp(name, "draft_model") == 0) {
		if (!params->draft_model)
			return -EINVAL; /* a drafter the study does not name */
		snprintf(buf, size, "%s", params->draft_model);
	} else if (strcmp(name, "spec_acceptance") == 0)
		snprintf(buf, size, "%s", params->spec_acceptance ? params->spec_acceptance : "");
	else
		return value_text(cJSON_GetObjectItemCaseSensitive(knobs, name), buf, size);
	return 0;
}

/* Substitutes the placeholders of a template (validated at load time). */
static int substitute(const char *tmpl, const struct engine_render_params *params, const cJSON *knobs,
		      const char *where, char **ret, struct error *err)
{
	char out[4096], val[1024];
	size_t len = 0;

	for (const char *s = tmpl; *s;) {
		const char *c;
		size_t n;

		if ((s[0] == '{' && s[1] == '{') || (s[0] == '}' && s[1] == '}')) {
			/* a literal brace */
			if (len + 1 >= sizeof(out))
				return error_set(err, -E2BIG, "%s: rendered value too long", where);
			out[len++] = *s;
			s += 2;
			continue;
		}
		if (*s != '{' || !(c = strchr(s, '}'))) {
			if (len + 1 >= sizeof(out))
				return error_set(err, -E2BIG, "%s: rendered value too long", where);
			out[len++] = *s++;
			continue;
		}
		char name[OPT_KNOB_NAME_MAX];
		snprintf(name, sizeof(name), "%.*s", (int)(c - s - 1), s + 1);
		if (placeholder_value(params, knobs, name, val, sizeof(val)) < 0)
			return error_set(err, -EINVAL, "%s: {%s}: the configuration has no value for it", where, name);
		n = strlen(val);
		if (len + n >= sizeof(out))
			return error_set(err, -E2BIG, "%s: rendered value too long", where);
		memcpy(out + len, val, n);
		len += n;
		s = c + 1;
	}
	out[len] = 0;
	*ret = strdup(out);
	return *ret ? 0 : -ENOMEM;
}

static int push(char ***v, size_t *n, char *s)
{
	char **nv;

	if (!s)
		return -ENOMEM;
	nv = reallocarray(*v, *n + 2, sizeof(char *));
	if (!nv) {
		free(s);
		return -ENOMEM;
	}
	nv[(*n)++] = s;
	nv[*n] = NULL;
	*v = nv;
	return 0;
}

/* Tensor parallelism splits the host's GPUs into equal replicas: the size
 * must be a whole number that divides the GPU count. */
static int check_tensor_parallel(const cJSON *knobs, unsigned gpu_count, struct error *err)
{
	const cJSON *tp = cJSON_GetObjectItemCaseSensitive(knobs, OPT_KNOB_TENSOR_PARALLEL);
	double v;

	if (!tp)
		return 0;
	if (!cJSON_IsNumber(tp) || !isfinite(tp->valuedouble) || tp->valuedouble < 1 || tp->valuedouble > 64 ||
	    tp->valuedouble != floor(tp->valuedouble))
		return error_set(err, -EINVAL, "knob tensor_parallel: expected a whole number of GPUs in [1, 64]");
	v = tp->valuedouble;
	if (gpu_count > 0 && gpu_count % (unsigned)v != 0)
		return error_set(err, -EINVAL, "knob tensor_parallel: %.0f does not divide the host's %u GPUs", v,
				 gpu_count);
	if (gpu_count > 0 && opt_knobs_gpus(knobs) > gpu_count)
		return error_set(err, -EINVAL,
				 "knobs: data_parallel × tensor_parallel × pipeline_parallel = %u GPUs, more than the "
				 "host's %u",
				 opt_knobs_gpus(knobs), gpu_count);
	return 0;
}

/* Returns 1 with the value in buf, 0 when a named knob has no value. */
static int render_derived(const struct engine_profile *p, const struct engine_derived *d, const cJSON *knobs, char *buf,
			  size_t size, struct error *err)
{
	double prod = 1;
	const cJSON *e;

	cJSON_ArrayForEach(e, d->product)
	{
		const cJSON *v = cJSON_IsString(e) ? cJSON_GetObjectItemCaseSensitive(knobs, e->valuestring) : e;

		if (!v)
			return 0;
		if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble <= 0)
			return error_set(err, -EINVAL, "knob %s: %s needs a positive number", e->valuestring, d->flag);
		prod *= v->valuedouble;
	}
	if (prod > 1e15)
		return error_set(err, -ERANGE, "%s: the product %g is too large for engine %s", d->flag, prod, p->name);
	if (prod == floor(prod))
		snprintf(buf, size, "%.0f", prod);
	else
		snprintf(buf, size, "%.15g", prod);
	return 1;
}

/* Every knob is one the engine has a flag for, with a value that renders. */
static int check_knobs(const struct engine_profile *p, const cJSON *knobs, struct error *err)
{
	const cJSON *item;

	if (knobs && !cJSON_IsObject(knobs))
		return error_set(err, -EINVAL, "knobs: expected an object");
	cJSON_ArrayForEach(item, knobs)
	{
		char buf[256];

		/* one server: the deployment's shape, no flag (the disaggregated one renders per role) */
		if (strcmp(item->string, OPT_KNOB_SHAPE) == 0 && cJSON_IsString(item) &&
		    strcmp(item->valuestring, "aggregated") == 0)
			continue;
		if (!engine_profile_find_knob(p, item->string))
			return error_set(err, -EINVAL, "knob %s: engine %s has no flag for it", item->string, p->name);
		if (value_text(item, buf, sizeof(buf)) < 0)
			return error_set(err, -EINVAL, "knob %s: expected a number or a string", item->string);
		if (cJSON_IsString(item) && buf[0] == '-')
			return error_set(err, -EINVAL, "knob %s: \"%.64s\" would be taken for a flag", item->string,
					 buf);
	}
	return 0;
}

/* The profile's argv with its placeholders filled in, then its gpu_args
 * when the study has GPUs. */
static int render_base(const struct engine_profile *p, const struct engine_render_params *params, const cJSON *knobs,
		       char ***argv, size_t *n, struct error *err)
{
	size_t n_gpu_args = 0;
	char *s = NULL;
	int r;

	while (!params->cpu && p->gpu_args && p->gpu_args[n_gpu_args])
		n_gpu_args++;
	for (size_t i = 0; i < p->n_argv + n_gpu_args; i++) {
		const char *tmpl = i < p->n_argv ? p->argv[i] : p->gpu_args[i - p->n_argv];
		char where[32];

		if (i < p->n_argv)
			snprintf(where, sizeof(where), "argv[%zu]", i);
		else
			snprintf(where, sizeof(where), "gpu_args[%zu]", i - p->n_argv);
		r = substitute(tmpl, params, knobs, where, &s, err);
		/* A value ("{model}") must not turn an argument into a flag. */
		if (r >= 0 && s[0] == '-' && tmpl[0] != '-') {
			r = error_set(err, -EINVAL, "%s: \"%.64s\" would be taken for a flag", where, s);
			free(s);
		}
		if (r >= 0)
			r = push(argv, n, TAKE_PTR(s));
		if (r < 0)
			return r;
	}
	return 0;
}

static int push_flag(char ***argv, size_t *n, const char *flag, const char *value)
{
	int r = push(argv, n, strdup(flag));

	return r < 0 ? r : push(argv, n, strdup(value));
}

/* The knobs' flags in the profile's knob order, so that equal configurations
 * render equally, then the flags derived from them. */
static int render_knobs(const struct engine_profile *p, const struct engine_render_params *params, const cJSON *knobs,
			char ***argv, size_t *n, struct error *err)
{
	int r;

	for (size_t i = 0; i < p->n_knobs; i++) {
		const struct engine_knob *k = &p->knobs[i];
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(knobs, k->name);
		char buf[256];

		if (!v)
			continue;
		(void)value_text(v, buf, sizeof(buf)); /* checked by check_knobs */
		if (k->values) {
			const cJSON *mapped = cJSON_GetObjectItemCaseSensitive(k->values, buf);

			if (!mapped)
				return error_set(err, -EINVAL, "knob %s: engine %s does not support \"%s\"", k->name,
						 p->name, buf);
			if (cJSON_IsNull(mapped))
				continue;
			if (cJSON_IsArray(mapped)) { /* its own arguments, perhaps of placeholders */
				const cJSON *a;

				cJSON_ArrayForEach(a, mapped)
				{
					char *arg = NULL, where[160];

					snprintf(where, sizeof(where), "knob %s: value %.64s", k->name, buf);
					if (!strchr(a->valuestring, '{'))
						arg = strdup(a->valuestring);
					else if (!params)
						continue;
					else {
						r = substitute(a->valuestring, params, knobs, where, &arg, err);
						if (r < 0)
							return r;
					}
					r = push(argv, n, arg);
					if (r < 0)
						return r;
				}
				continue;
			}
			if (cJSON_IsTrue(mapped)) { /* a switch: the flags alone */
				for (size_t f = 0; f < k->n_flags; f++) {
					r = push(argv, n, strdup(k->flags[f]));
					if (r < 0)
						return r;
				}
				continue;
			}
			if (strchr(mapped->valuestring, '{')) {
				/* a value built of other knobs and the study's facts (vLLM's JSON flags) */
				_cleanup_(freep) char *v2 = NULL;
				char where[160];

				if (!params)
					continue; /* a default's text: nothing to build it from */

				snprintf(where, sizeof(where), "knob %s: value %.64s", k->name, buf);
				r = substitute(mapped->valuestring, params, knobs, where, &v2, err);
				if (r < 0)
					return r;
				for (size_t f = 0; f < k->n_flags; f++) {
					r = push_flag(argv, n, k->flags[f], v2);
					if (r < 0)
						return r;
				}
				continue;
			}
			snprintf(buf, sizeof(buf), "%s", mapped->valuestring);
		}
		for (size_t f = 0; f < k->n_flags; f++) {
			r = push_flag(argv, n, k->flags[f], buf);
			if (r < 0)
				return r;
		}
	}
	for (size_t i = 0; i < p->n_derived; i++) {
		char buf[64];

		r = render_derived(p, &p->derived[i], knobs, buf, sizeof(buf), err);
		if (r == 0)
			continue;
		if (r > 0)
			r = push_flag(argv, n, p->derived[i].flag, buf);
		if (r < 0)
			return r;
	}
	return 0;
}

/* The operator's: the program, and fixed flags after all of the profile's. */
static int render_operator(const struct engine_render_params *params, char ***argv, size_t *n)
{
	int r;

	if (params->binary && *argv) {
		char *s = strdup(params->binary);

		if (!s)
			return -ENOMEM;
		free((*argv)[0]);
		(*argv)[0] = s;
	}
	for (size_t i = 0; params->extra_args && params->extra_args[i]; i++) {
		r = push(argv, n, strdup(params->extra_args[i]));
		if (r < 0)
			return r;
	}
	return 0;
}

/* The trial's GPUs in the profile's gpu_env (CUDA_VISIBLE_DEVICES=0,1). */
static int render_gpu_env(const struct engine_profile *p, const struct engine_render_params *params, const cJSON *knobs,
			  char ***env, size_t *n, struct error *err)
{
	/* every replica's and stage's GPUs: data_parallel × tensor_parallel × pipeline_parallel */
	unsigned g = opt_knobs_gpus(knobs);
	char list[512], *kv = NULL;
	size_t len = 0;

	if (g > 64)
		return error_set(err, -EINVAL,
				 "knobs: %u GPUs (data_parallel × tensor_parallel × pipeline_parallel) is "
				 "too many",
				 g);
	if (params->devices && params->n_devices != g)
		return error_set(
			err, -EINVAL,
			"knobs: %u GPUs (data_parallel × tensor_parallel × pipeline_parallel), but the trial was "
			"given %u",
			g, params->n_devices);
	for (unsigned i = 0; i < g; i++)
		len += (size_t)snprintf(list + len, sizeof(list) - len, "%s%u", i ? "," : "",
					params->devices ? params->devices[i] : i);
	if (asprintf(&kv, "%s=%s", p->gpu_env, list) < 0)
		return -ENOMEM;
	return push(env, n, kv);
}

/* The profile's environment, then the trial's GPUs. */
static int render_env(const struct engine_profile *p, const struct engine_render_params *params, const cJSON *knobs,
		      char ***env, size_t *n, struct error *err)
{
	const cJSON *item;
	int r;

	cJSON_ArrayForEach(item, p->env)
	{
		char where[128], *val = NULL, *kv = NULL;

		snprintf(where, sizeof(where), "env.%s", item->string);
		r = substitute(item->valuestring, params, knobs, where, &val, err);
		if (r < 0)
			return r;
		/* a variable of a placeholder with nothing to say ({spec_acceptance} unset) is left out */
		if (!val[0] && strchr(item->valuestring, '{')) {
			free(val);
			continue;
		}
		r = asprintf(&kv, "%s=%s", item->string, val);
		free(val);
		if (r < 0)
			return -ENOMEM;
		r = push(env, n, kv);
		if (r < 0)
			return r;
	}
	if (p->gpu_env && !params->port_text && !params->cpu) {
		r = render_gpu_env(p, params, knobs, env, n, err);
		if (r < 0)
			return r;
	}
	if (!*env) {
		*env = calloc(1, sizeof(char *));
		if (!*env)
			return -ENOMEM;
	}
	return 0;
}

int engine_profile_defaults_text(const struct engine_profile *p, const cJSON *defaults, const cJSON *knobs, char *buf,
				 size_t size)
{
	const cJSON *item;
	size_t len = 0;
	int r;

	if (size == 0)
		return -EINVAL;
	buf[0] = 0;
	cJSON_ArrayForEach(item, defaults)
	{
		_cleanup_(cJSON_Deletep) cJSON *one = cJSON_CreateObject();
		char **argv = NULL, val[64];
		size_t n = 0, before = len;

		if (cJSON_GetObjectItemCaseSensitive(knobs, item->string))
			continue;
		if (!one || !cJSON_AddItemToObject(one, item->string, cJSON_Duplicate(item, false)))
			return -ENOMEM;
		r = render_knobs(p, NULL, one, &argv, &n, NULL);
		for (size_t i = 0; r >= 0 && i < n; i++)
			len += (size_t)snprintf(buf + len, size - MIN(len, size), "%s%s", len ? " " : "", argv[i]);
		if (r >= 0 && n == 0 && value_text(item, val, sizeof(val)) >= 0)
			/* the default passes no flag (flash_attn off) */
			len += (size_t)snprintf(buf + len, size - MIN(len, size), "%s(%s %s: no flag)", len ? " " : "",
						item->string, val);
		for (size_t i = 0; i < n; i++)
			free(argv[i]);
		free(argv);
		if (r < 0)
			return r;
		if (len >= size) {
			buf[MIN(before, size - 1)] = 0;
			return -ENOBUFS;
		}
	}
	return 0;
}

int engine_profile_render(const struct engine_profile *p, const struct engine_render_params *params, const cJSON *knobs,
			  struct engine_command *ret, struct error *err)
{
	_cleanup_(engine_command_done) struct engine_command c = { 0 };
	size_t n_argv = 0, n_env = 0;
	int r;

	r = check_knobs(p, knobs, err);
	if (r >= 0)
		r = check_tensor_parallel(knobs, params->gpu_count, err);
	if (r >= 0)
		r = render_base(p, params, knobs, &c.argv, &n_argv, err);
	if (r >= 0)
		r = render_knobs(p, params, knobs, &c.argv, &n_argv, err);
	if (r >= 0)
		r = render_operator(params, &c.argv, &n_argv);
	if (r >= 0)
		r = render_env(p, params, knobs, &c.env, &n_env, err);
	if (r < 0)
		return r;
	*ret = c;
	c = (struct engine_command){ 0 };
	return 0;
}

static enum study_quant knobs_quant(const cJSON *knobs)
{
	const cJSON *q = cJSON_GetObjectItemCaseSensitive(knobs, OPT_KNOB_QUANTIZATION);
	int v = cJSON_IsString(q) ? study_quant_from_string(q->valuestring) : STUDY_QUANT_NONE;

	return v < 0 ? STUDY_QUANT_NONE : (enum study_quant)v;
}

static int need_checkpoint(const struct engine_profile *p, const struct study *s, enum study_quant q, struct error *err)
{
	const struct engine_knob *k = engine_profile_find_knob(p, OPT_KNOB_QUANTIZATION);

	if (k && (k->checkpoint_required & (1u << q)) && !s->model.checkpoints[q])
		return error_set(err, -EINVAL, "model.checkpoints.%s: engine %s needs a separate checkpoint for %s",
				 study_quant_to_string(q), p->name, study_quant_to_string(q));
	return 0;
}

/* The study's facts about speculation for the knobs' spec_method: its
 * drafter and the workload's acceptance. */
static int speculation(const struct engine_profile *p, const struct study *s, const cJSON *knobs,
		       struct engine_render_params *params, char *acc, size_t size, struct error *err)
{
	const cJSON *m = cJSON_GetObjectItemCaseSensitive(knobs, OPT_KNOB_SPEC_METHOD);
	const char *method = cJSON_IsString(m) ? m->valuestring : NULL;
	const struct engine_knob *k = engine_profile_find_knob(p, OPT_KNOB_SPEC_METHOD);
	const cJSON *mapped = k && k->values && method ? cJSON_GetObjectItemCaseSensitive(k->values, method) : NULL;

	if (!method || strcmp(method, "none") == 0)
		return 0;
	params->draft_model = study_draft_model(s, method);
	if (study_spec_acceptance_text(s, method, acc, size))
		params->spec_acceptance = acc;
	if (!params->draft_model && cJSON_IsString(mapped) && strstr(mapped->valuestring, "{draft_model}"))
		return error_set(err, -EINVAL, "model.drafts.%s: engine %s loads a drafter for spec_method %s; name it",
				 method, p->name, method);
	return 0;
}

int engine_profile_render_study(const struct engine_profile *p, const struct study *s, const cJSON *knobs,
				const char *host, uint16_t port, struct engine_command *ret, struct error *err)
{
	return engine_profile_render_trial(p, s, knobs, host, port, NULL, 0, ret, err);
}

int engine_profile_render_trial(const struct engine_profile *p, const struct study *s, const cJSON *knobs,
				const char *host, uint16_t port, const unsigned *devices, unsigned n_devices,
				struct engine_command *ret, struct error *err)
{
	enum study_quant q = knobs_quant(knobs);
	struct engine_render_params params = {
		.model = study_checkpoint(s, q),
		.served_model = s->model.name,
		.host = host ? host : s->deploy.host,
		.port = port,
		.gpu_type = s->gpu.type,
		.gpu_count = s->gpu.per_node,
		.cpu = s->gpu.cpu,
		.devices = devices,
		.n_devices = n_devices,
		.binary = s->engine_binary,
		.extra_args = s->engine_args,
	};
	char acc[256];
	int r;

	r = need_checkpoint(p, s, q, err);
	if (r >= 0)
		r = speculation(p, s, knobs, &params, acc, sizeof(acc), err);
	if (r < 0)
		return r;
	return engine_profile_render(p, &params, knobs, ret, err);
}

int engine_profile_render_job(const struct engine_profile *p, const struct study *s, const cJSON *knobs,
			      const char *host, struct engine_command *ret, struct error *err)
{
	enum study_quant q = knobs_quant(knobs);
	struct engine_render_params params = {
		.model = study_checkpoint(s, q),
		.served_model = s->model.name,
		.host = host ? host : s->deploy.host,
		.gpu_type = s->gpu.type,
		.gpu_count = s->gpu.per_node,
		.cpu = s->gpu.cpu,
		.port_text = ENGINE_PORT_PLACEHOLDER,
	};
	char acc[256];
	int r;

	r = need_checkpoint(p, s, q, err);
	if (r >= 0)
		r = speculation(p, s, knobs, &params, acc, sizeof(acc), err);
	if (r < 0)
		return r;
	return engine_profile_render(p, &params, knobs, ret, err);
}

int engine_profile_check_study(const struct engine_profile *p, const struct study *s, struct error *err)
{
	const struct engine_knob *qk = engine_profile_find_knob(p, OPT_KNOB_QUANTIZATION);
	int r;

	if (s->deploy.shape != STUDY_SHAPE_AGGREGATED && !p->roles.present)
		return error_set(
			err, -EINVAL,
			"deploy.shape: engine %s has no prefill and decode roles (its profile's \"roles\"): it "
			"serves aggregated only",
			p->name);
	for (size_t i = 0; s->space && i < s->space->n_knobs; i++) {
		const struct opt_knob *sk = &s->space->knobs[i];
		const char *base = p->roles.present ? engine_role_knob_base(sk->name) : sk->name;
		const struct engine_knob *k = base ? engine_profile_find_knob(p, base) : NULL;

		if (!base)
			continue; /* the shape's own: the deployment, not a flag */
		if (!k)
			return error_set(err, -EINVAL, "search_space.%s: engine %s has no flag for this knob", sk->name,
					 p->name);
		/* a value the engine has no mapping for (TGI's speculation is n-gram only) */
		for (size_t v = 0; k->values && sk->kind == OPT_KNOB_LIST_STRING && v < sk->n_values; v++) {
			const cJSON *mapped = cJSON_GetObjectItemCaseSensitive(k->values, sk->strings[v]);
			bool drafter = false;

			if (!mapped)
				return error_set(err, -EINVAL, "search_space.%s: engine %s does not support \"%s\"",
						 sk->name, p->name, sk->strings[v]);
			if (cJSON_IsString(mapped))
				drafter = strstr(mapped->valuestring, "{draft_model}") != NULL;
			else if (cJSON_IsArray(mapped)) {
				const cJSON *a;

				cJSON_ArrayForEach(a, mapped) drafter =
					drafter || strstr(a->valuestring, "{draft_model}");
			}
			if (drafter && !study_draft_model(s, sk->strings[v]))
				return error_set(
					err, -EINVAL,
					"model.drafts.%s: search_space.%s has \"%s\", for which engine %s loads a "
					"drafter; name it",
					sk->strings[v], sk->name, sk->strings[v], p->name);
		}
	}
	for (int q = 0; q < _STUDY_QUANT_MAX; q++) {
		if (!(s->quantizations & (1u << q)))
			continue;
		if (q != STUDY_QUANT_NONE && !qk)
			return error_set(err, -EINVAL, "quantizations: engine %s has no quantization flag for %s",
					 p->name, study_quant_to_string((enum study_quant)q));
		if (qk && qk->values &&
		    !cJSON_GetObjectItemCaseSensitive(qk->values, study_quant_to_string((enum study_quant)q)))
			return error_set(err, -EINVAL, "quantizations: engine %s does not support %s", p->name,
					 study_quant_to_string((enum study_quant)q));
		r = need_checkpoint(p, s, (enum study_quant)q, err);
		if (r < 0)
			return r;
	}
	return 0;
}

/* Appends s shell-quoted when it needs quoting. */
static void append_quoted(char **buf, size_t *len, size_t *cap, const char *s)
{
	bool plain = *s &&
		     strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_@%+=:,./-") == strlen(s);
	size_t need = strlen(s) * 4 + 4;

	if (*len + need + 1 > *cap) {
		size_t c = MAX(*cap * 2, *len + need + 1);
		char *nb = realloc(*buf, c);
		if (!nb)
			return;
		*buf = nb;
		*cap = c;
	}
	if (*len)
		(*buf)[(*len)++] = ' ';
	if (plain) {
		memcpy(*buf + *len, s, strlen(s));
		*len += strlen(s);
	} else {
		(*buf)[(*len)++] = '\'';
		for (const char *p = s; *p; p++) {
			if (*p == '\'') {
				memcpy(*buf + *len, "'\\''", 4);
				*len += 4;
			} else
				(*buf)[(*len)++] = *p;
		}
		(*buf)[(*len)++] = '\'';
	}
	(*buf)[*len] = 0;
}

char *engine_command_format(const struct engine_command *c)
{
	size_t len = 0, cap = 256;
	char *buf = malloc(cap);

	if (!buf)
		return NULL;
	buf[0] = 0;
	for (size_t i = 0; c->env && c->env[i]; i++) {
		const char *eq = strchr(c->env[i], '=');
		/* NAME=value: quote only the value. */
		char *name = strndup(c->env[i], eq ? (size_t)(eq - c->env[i]) : strlen(c->env[i]));
		if (!name) {
			free(buf);
			return NULL;
		}
		append_quoted(&buf, &len, &cap, name);
		free(name);
		if (eq) {
			size_t l0 = len;
			append_quoted(&buf, &len, &cap, eq + 1);
			/* join "NAME" and "value" with '=' instead of the space */
			if (len > l0 && buf[l0] == ' ')
				buf[l0] = '=';
		}
	}
	for (size_t i = 0; c->argv && c->argv[i]; i++)
		append_quoted(&buf, &len, &cap, c->argv[i]);
	return buf;
}

static int strv_to_json(cJSON *o, const char *key, char *const *v)
{
	cJSON *a = cJSON_AddArrayToObject(o, key);

	if (!a)
		return -ENOMEM;
	for (size_t i = 0; v && v[i]; i++) {
		cJSON *item = cJSON_CreateString(v[i]);

		if (!item || !cJSON_AddItemToArray(a, item)) {
			cJSON_Delete(item);
			return -ENOMEM;
		}
	}
	return 0;
}

int engine_command_to_json(const struct engine_command *c, char **ret)
{
	_cleanup_(cJSON_Deletep) cJSON *o = cJSON_CreateObject();
	char *s;

	if (!o || strv_to_json(o, "argv", c->argv) < 0 || strv_to_json(o, "env", c->env) < 0)
		return -ENOMEM;
	s = cJSON_PrintUnformatted(o);
	if (!s)
		return -ENOMEM;
	*ret = strdup(s);
	cJSON_free(s);
	return *ret ? 0 : -ENOMEM;
}

static int strv_from_json(const cJSON *o, const char *key, bool need_one, char ***ret)
{
	const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, key), *item;
	char **v;
	size_t n = 0;

	if (!cJSON_IsArray(a) || (need_one && cJSON_GetArraySize(a) < 1))
		return -EINVAL;
	v = calloc((size_t)cJSON_GetArraySize(a) + 1, sizeof(char *));
	if (!v)
		return -ENOMEM;
	cJSON_ArrayForEach(item, a)
	{
		if (!cJSON_IsString(item) || !(v[n] = strdup(item->valuestring))) {
			int r = cJSON_IsString(item) ? -ENOMEM : -EINVAL;

			for (size_t i = 0; i < n; i++)
				free(v[i]);
			free(v);
			return r;
		}
		n++;
	}
	*ret = v;
	return 0;
}

int engine_command_from_json(const char *json, struct engine_command *ret)
{
	_cleanup_(cJSON_Deletep) cJSON *o = json ? cJSON_Parse(json) : NULL;
	_cleanup_(engine_command_done) struct engine_command c = { 0 };
	int r;

	if (!cJSON_IsObject(o))
		return -EINVAL;
	r = strv_from_json(o, "argv", true, &c.argv);
	if (r >= 0)
		r = strv_from_json(o, "env", false, &c.env);
	if (r < 0)
		return r;
	*ret = c;
	c = (struct engine_command){ 0 };
	return 0;
}
