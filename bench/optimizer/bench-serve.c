/* bench-serve.c — the evaluator over a pipe, so that a method written in
 * another language measures exactly as the others do (`bench-optimizer
 * --serve`), and the TPE run that uses it: bench-tpe.py (Optuna's TPE
 * sampler) starts `bench-optimizer --serve` itself and asks it for each
 * evaluation.
 *
 * Protocol, one JSON object per line:
 *   served:  {"knobs": [{"name": N, "values": [...], "categorical": B}, ...],
 *             "configurations": N, "max_deployments": M, "seed": S}
 *   asked:   {"config": {"max_num_seqs": 64, "quantization": "fp8", ...}}
 *   served:  {"value": C, "outcome": "measured"|"infeasible"|"sla_never_met"|"not_allowed",
 *             "deployed": B}
 *            or {"done": true} once every configuration (or M) has been deployed.
 *   At end of input (or {"done": true} asked): {"regret": [...], "started": [...]}
 * The peer sees what goodput's search sees: a configuration the memory
 * pre-flight refuses is answered "preflight" without a deployment, as one
 * that breaks the constraints ("not_allowed"); a configuration asked again
 * is deployed and measured again, with fresh noise, and counts — the
 * search's re-probes do too. Failed start-ups and refusals get a value
 * worse than any cost (PENALTY). Every run starts with the baseline
 * deployment (bench_eval_init), as the runner's does. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench-methods.h"
#include "json-util.h"
#include "macro.h"

#define PENALTY   1e4
#define LINE_MAX_ 65536

extern char **environ;

static int hello(const struct bench_space *bs, uint64_t seed, size_t max_deployments, FILE *out)
{
	const struct opt_space *s = bench_space_start(bs);
	_cleanup_(cJSON_Deletep) cJSON *o = cJSON_CreateObject();
	_cleanup_(cjson_freep) char *text = NULL;
	cJSON *knobs = o ? cJSON_AddArrayToObject(o, "knobs") : NULL;

	if (!knobs)
		return -ENOMEM;
	for (size_t k = 0; k < s->n_knobs; k++) {
		const struct opt_knob *kn = &s->knobs[k];
		cJSON *ko = cJSON_CreateObject(), *vals;

		if (!ko || !cJSON_AddItemToArray(knobs, ko) || json_add_string(ko, "name", kn->name) < 0 ||
		    !cJSON_AddBoolToObject(ko, "categorical", kn->categorical) ||
		    !(vals = cJSON_AddArrayToObject(ko, "values")))
			return -ENOMEM;
		for (size_t i = 0; i < kn->n_values; i++) {
			cJSON *v = kn->kind == OPT_KNOB_LIST_STRING ? cJSON_CreateString(kn->strings[i])
								    : cJSON_CreateNumber(kn->numbers[i]);

			if (!v || !cJSON_AddItemToArray(vals, v))
				return -ENOMEM;
		}
	}
	if (json_add_number(o, "configurations", (double)opt_space_count(s)) < 0 ||
	    json_add_number(o, "max_deployments", (double)max_deployments) < 0 ||
	    json_add_number(o, "seed", (double)seed) < 0 || !(text = cJSON_PrintUnformatted(o)))
		return -ENOMEM;
	fprintf(out, "%s\n", text);
	return fflush(out) == 0 ? 0 : -errno;
}

/* A configuration object {"knob": value, ...} of the start space. */
static int parse_config(const struct opt_space *s, const cJSON *o, struct opt_config *ret, struct error *err)
{
	char key[OPT_KEY_MAX];
	size_t len = 0;

	key[0] = 0;
	for (size_t k = 0; k < s->n_knobs; k++) {
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, s->knobs[k].name);
		char val[64];
		int n;

		if (cJSON_IsString(v))
			snprintf(val, sizeof(val), "%s", v->valuestring);
		else if (cJSON_IsNumber(v)) {
			struct opt_config probe = { 0 };
			char buf[64];

			/* the space's own spelling of the number */
			snprintf(val, sizeof(val), "%.17g", v->valuedouble);
			for (size_t i = 0; i < s->knobs[k].n_values; i++) {
				probe.idx[k] = (uint16_t)i;
				if (s->knobs[k].kind != OPT_KNOB_LIST_STRING &&
				    s->knobs[k].numbers[i] == v->valuedouble)
					snprintf(val, sizeof(val), "%s",
						 opt_config_text(s, &probe, k, buf, sizeof(buf)));
			}
		} else
			return error_set(err, -EINVAL, "config: %s missing", s->knobs[k].name);
		n = snprintf(key + len, sizeof(key) - len, "%s%s=%s", k ? "," : "", s->knobs[k].name, val);
		if (n < 0 || (size_t)n >= sizeof(key) - len)
			return -ENOBUFS;
		len += (size_t)n;
	}
	return opt_config_from_key(s, key, ret, err);
}

static int answer(FILE *out, double value, const char *outcome, bool deployed)
{
	fprintf(out, "{\"value\": %.17g, \"outcome\": \"%s\", \"deployed\": %s}\n", value, outcome,
		deployed ? "true" : "false");
	return fflush(out) == 0 ? 0 : -errno;
}

static int print_trace(FILE *out, const struct bench_trace *t)
{
	fputs("{\"regret\": [", out);
	for (size_t i = 0; i < t->n; i++)
		fprintf(out, "%s%.17g", i ? ", " : "", isfinite(t->regret[i]) ? t->regret[i] : -1.0);
	fputs("], \"started\": [", out);
	for (size_t i = 0; i < t->n; i++)
		fprintf(out, "%s%d", i ? ", " : "", t->started[i] ? 1 : 0);
	fputs("], \"dear\": [", out);
	for (size_t i = 0; i < t->n; i++)
		fprintf(out, "%s%d", i ? ", " : "", t->dear[i] ? 1 : 0);
	fputs("]}\n", out);
	return fflush(out) == 0 ? 0 : -errno;
}

int bench_serve(const struct bench_space *bs, double sigma, uint64_t seed, size_t max_deployments, int in_fd,
		int out_fd, struct error *err)
{
	const struct opt_space *s = bench_space_start(bs);
	_cleanup_(fclosep) FILE *in = fdopen(dup(in_fd), "r");
	_cleanup_(fclosep) FILE *out = fdopen(dup(out_fd), "w");
	_cleanup_(freep) char *line = malloc(LINE_MAX_);
	struct bench_trace t = { 0 };
	struct bench_eval e;
	size_t deployed = 0, n_start = MIN((size_t)opt_space_count(s), max_deployments);
	int r;

	if (!in || !out || !line)
		return -ENOMEM;
	r = bench_eval_init(&e, bs, sigma, seed, &t);
	if (r >= 0)
		r = hello(bs, seed, n_start, out);
	while (r >= 0 && fgets(line, LINE_MAX_, in)) {
		_cleanup_(cJSON_Deletep) cJSON *req = cJSON_Parse(line);
		const cJSON *cfg = req ? cJSON_GetObjectItemCaseSensitive(req, "config") : NULL;
		struct opt_config c;
		enum opt_outcome o;
		double cost;
		ssize_t i;

		if (req && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(req, "done")))
			break;
		if (!cfg) {
			r = error_set(err, -EINVAL, "--serve: expected {\"config\": {...}}, got %s", line);
			break;
		}
		r = parse_config(s, cfg, &c, err);
		if (r < 0)
			break;
		if (!opt_space_allowed(s, &c)) {
			r = answer(out, PENALTY, "not_allowed", false);
			continue;
		}
		i = bench_space_lookup(bs, s, &c);
		if (i < 0) {
			r = error_set(err, -EINVAL, "--serve: a configuration outside the truth");
			break;
		}
		if (bs->preflight.usable &&
		    bs->preflight.hook.fit(bs->space, &bs->configs[i], bs->preflight.hook.userdata) == OPT_FIT_NO) {
			r = answer(out, PENALTY, "preflight", false);
			continue;
		}
		if (deployed >= n_start) {
			fputs("{\"done\": true}\n", out);
			r = fflush(out) == 0 ? 0 : -errno;
			continue;
		}
		r = bench_eval_deploy(&e, (size_t)i, &o, &cost);
		if (r < 0)
			break;
		deployed++;
		r = answer(out, o == OPT_OUTCOME_MEASURED ? cost : PENALTY, opt_outcome_to_string(o), true);
	}
	if (r >= 0)
		r = print_trace(out, &t);
	bench_eval_done(&e);
	bench_trace_done(&t);
	return r;
}

/* ---- a TPE run ---- */

static int read_trace(const char *text, struct bench_trace *t, struct error *err)
{
	_cleanup_(cJSON_Deletep) cJSON *j = cJSON_Parse(text);
	const cJSON *reg = j ? cJSON_GetObjectItemCaseSensitive(j, "regret") : NULL;
	const cJSON *st = j ? cJSON_GetObjectItemCaseSensitive(j, "started") : NULL;
	const cJSON *dr = j ? cJSON_GetObjectItemCaseSensitive(j, "dear") : NULL;
	int n, r = 0;

	if (!cJSON_IsArray(reg) || !cJSON_IsArray(st) || !cJSON_IsArray(dr) ||
	    cJSON_GetArraySize(reg) != cJSON_GetArraySize(st) || cJSON_GetArraySize(reg) != cJSON_GetArraySize(dr))
		return error_set(err, -EINVAL, "bench-tpe.py: expected {\"regret\": [...], \"started\": [...]}");
	n = cJSON_GetArraySize(reg);
	t->n = 0;
	for (int i = 0; i < n && r >= 0; i++) {
		double v = cJSON_GetArrayItem(reg, i)->valuedouble;

		r = bench_trace_push(t, v < 0 ? INFINITY : v, cJSON_GetArrayItem(st, i)->valueint != 0,
				     cJSON_GetArrayItem(dr, i)->valueint != 0);
	}
	return r;
}

int bench_run_tpe(const char *python, const char *script, const char *self, size_t space_index, bool sim,
		  const char *source_root, const char *cache_dir, double sigma, uint64_t seed, size_t max_deployments,
		  struct bench_trace *t, struct error *err)
{
	char idx[32], seedbuf[32], sig[32], maxbuf[32];
	const char *argv[24];
	size_t n = 0;
	posix_spawn_file_actions_t fa;
	_cleanup_(freep) char *buf = NULL;
	size_t len = 0, cap = 0;
	int fds[2], status, r;
	pid_t pid;

	snprintf(idx, sizeof(idx), "%zu", space_index);
	snprintf(seedbuf, sizeof(seedbuf), "%" PRIu64, seed);
	snprintf(sig, sizeof(sig), "%.17g", sigma);
	snprintf(maxbuf, sizeof(maxbuf), "%zu", max_deployments);
	argv[n++] = python;
	argv[n++] = script;
	argv[n++] = "--";
	argv[n++] = self;
	argv[n++] = "--serve";
	argv[n++] = idx;
	argv[n++] = "--seed";
	argv[n++] = seedbuf;
	argv[n++] = "--sigma";
	argv[n++] = sig;
	argv[n++] = "--max-deployments";
	argv[n++] = maxbuf;
	argv[n++] = "--source-root";
	argv[n++] = source_root;
	if (sim)
		argv[n++] = "--sim";
	if (cache_dir) {
		argv[n++] = "--cache-dir";
		argv[n++] = cache_dir;
	} else
		argv[n++] = "--no-cache";
	argv[n] = NULL;

	if (pipe2(fds, O_CLOEXEC) < 0)
		return error_set(err, -errno, "pipe: %s", strerror(errno));
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, fds[1], STDOUT_FILENO);
	r = posix_spawn(&pid, python, &fa, NULL, (char *const *)argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(fds[1]);
	if (r != 0) {
		close(fds[0]);
		return error_set(err, -r, "%s: %s", python, strerror(r));
	}
	for (;;) {
		ssize_t k;

		if (cap - len < 4096) {
			char *nb = realloc(buf, cap + 65536);

			if (!nb) {
				r = -ENOMEM;
				break;
			}
			buf = nb;
			cap += 65536;
		}
		k = read(fds[0], buf + len, cap - len - 1);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			break;
		len += (size_t)k;
	}
	close(fds[0]);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (r < 0)
		return r;
	if (WIFEXITED(status) && WEXITSTATUS(status) == 77)
		return -ENOPKG;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return error_set(err, -EIO, "%s %s failed (status %d)", python, script, status);
	buf[len] = 0;
	return read_trace(buf, t, err);
}
