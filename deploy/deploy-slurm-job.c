/* deploy-slurm-job.c — the two ends of a trial's job file: the coordinating
 * host writes it (deploy_job_file_write), the node reads it and becomes the
 * server (deploy_job_exec, `goodput job-exec FILE`).
 *
 * A job must run the engine's argv exactly as rendered, yet the batch
 * script Slurm runs is a shell script, and sbatch --wrap is a shell command
 * line. So nothing of the trial is ever in the script: its text is fixed
 * (deploy_job_script_text: `exec goodput job-exec "$1"`), and the argv and
 * environment travel as JSON strings in the job file beside the trial's
 * log, on a file system the nodes share. The launcher reads them, picks a
 * free port on the node (bind to port 0), puts it wherever the rendered
 * command has ENGINE_PORT_PLACEHOLDER, writes the address file — the URL
 * the coordinating host reaches the server at, the node, the GPUs Slurm
 * gave the job (CUDA_VISIBLE_DEVICES) — and execs the engine, which so
 * becomes the job's process: scancel's signals reach it directly.
 *
 * The URL's host: the address the server listens on when it is a specific
 * one; for a wildcard (0.0.0.0, ::) the node's own address on the route
 * to the submitting host (SLURM_SUBMIT_HOST; a UDP socket connected there
 * tells it without sending anything), else the node's host name. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "deploy-internal.h"
#include "file-util.h"
#include "json-util.h"
#include "macro.h"

#define JOB_FILE_MAX (1024 * 1024)

extern char **environ;

const char *deploy_job_script_text(void)
{
	return "#!/bin/sh\n"
	       "# goodput: one trial's server as a Slurm job. Its command and environment are\n"
	       "# in the job file named by the first argument, written by goodput and never\n"
	       "# read by this shell: `goodput job-exec` picks a port on this node, reports\n"
	       "# the address beside the job file and becomes the server.\n"
	       "exec goodput job-exec \"$1\"\n";
}

int deploy_write_file_atomic(const char *path, const char *text, mode_t mode, struct error *err)
{
	int r = file_write_atomic(path, text, strlen(text), mode, FILE_WRITE_UMASK);

	if (r < 0)
		return error_set(err, r, "%s: %s", path, strerror(-r));
	return 0;
}

static cJSON *strv_to_json(char *const *v)
{
	cJSON *a = cJSON_CreateArray();

	for (size_t i = 0; a && v && v[i]; i++)
		if (!cJSON_AddItemToArray(a, cJSON_CreateString(v[i]))) {
			cJSON_Delete(a);
			return NULL;
		}
	return a;
}

int deploy_job_file_write(const char *path, char *const *argv, char *const *env, const char *host,
			  const char *address_file, unsigned gpus, struct error *err)
{
	_cleanup_(cJSON_Deletep) cJSON *j = cJSON_CreateObject();
	_cleanup_(freep) char *text = NULL;
	cJSON *a = strv_to_json(argv), *e = strv_to_json(env);

	if (!j || !a || !cJSON_AddItemToObject(j, "argv", a)) {
		cJSON_Delete(a);
		cJSON_Delete(e);
		return error_set(err, -ENOMEM, "out of memory");
	}
	if (!e || !cJSON_AddItemToObject(j, "env", e)) {
		cJSON_Delete(e);
		return error_set(err, -ENOMEM, "out of memory");
	}
	if (json_add_string(j, "host", host) < 0 || json_add_string(j, "address_file", address_file) < 0 ||
	    json_add_string(j, "port_placeholder", ENGINE_PORT_PLACEHOLDER) < 0 ||
	    (gpus && json_add_number(j, "gpus", gpus) < 0) || !(text = cJSON_Print(j)))
		return error_set(err, -ENOMEM, "out of memory");
	return deploy_write_file_atomic(path, text, 0644, err);
}

/* ---- the launcher, on the node ---- */

struct job_file {
	cJSON *json;
	char **argv, **env; /* strings into json */
	const char *host, *address_file, *placeholder;
	uint32_t gpus;              /* the GPUs the server uses (0: all the job got) */
	char **run_argv, **run_env; /* with the port filled in (owned) */
};

static void job_file_done(struct job_file *f)
{
	free(f->argv);
	free(f->env);
	deploy_strv_free(f->run_argv);
	deploy_strv_free(f->run_env);
	cJSON_Delete(f->json);
}

static int read_strv(const cJSON *j, const char *key, bool nonempty, char ***ret, struct error *err)
{
	const cJSON *a = cJSON_GetObjectItemCaseSensitive(j, key), *e;
	char **v;
	size_t n = 0;

	if (!cJSON_IsArray(a) || (nonempty && cJSON_GetArraySize(a) == 0))
		return error_set(err, -EINVAL, "%s: expected a%s array of strings", key, nonempty ? " non-empty" : "n");
	v = calloc((size_t)cJSON_GetArraySize(a) + 1, sizeof(char *));
	if (!v)
		return -ENOMEM;
	cJSON_ArrayForEach(e, a)
	{
		if (!cJSON_IsString(e)) {
			free(v);
			return error_set(err, -EINVAL, "%s[%zu]: expected a string", key, n);
		}
		v[n++] = e->valuestring;
	}
	*ret = v;
	return 0;
}

static int job_file_read(const char *path, struct job_file *f, struct error *err)
{
	int r;

	r = json_parse_file(path, JOB_FILE_MAX, &f->json, err);
	if (r >= 0)
		r = read_strv(f->json, "argv", true, &f->argv, err);
	if (r >= 0)
		r = read_strv(f->json, "env", false, &f->env, err);
	if (r >= 0)
		r = json_require_string(f->json, "", "host", 255, &f->host, err);
	if (r >= 0)
		r = json_require_string(f->json, "", "address_file", 4096, &f->address_file, err);
	if (r >= 0)
		r = json_require_string(f->json, "", "port_placeholder", 64, &f->placeholder, err);
	if (r >= 0)
		r = json_get_u32(f->json, "", "gpus", 1, 1024, &f->gpus, err);
	if (r < 0)
		return error_prefix(err, r, "%s", path);
	return 0;
}

/* s with every placeholder replaced by port; NULL when out of memory. */
static char *fill_port(const char *s, const char *placeholder, const char *port)
{
	size_t pl = strlen(placeholder), n = 0;
	char *out, *o;

	for (const char *p = strstr(s, placeholder); p; p = strstr(p + pl, placeholder))
		n++;
	out = malloc(strlen(s) + n * strlen(port) + 1);
	if (!out)
		return NULL;
	o = out;
	while (*s) {
		if (strncmp(s, placeholder, pl) == 0) {
			o = stpcpy(o, port);
			s += pl;
		} else
			*o++ = *s++;
	}
	*o = 0;
	return out;
}

/* Each string of v with the port filled in (owned, NULL-terminated). */
static char **fill_port_strv(char *const *v, const char *placeholder, const char *port)
{
	size_t n = 0;
	char **out;

	while (v[n])
		n++;
	out = calloc(n + 1, sizeof(char *));
	for (size_t i = 0; out && i < n; i++)
		if (!(out[i] = fill_port(v[i], placeholder, port))) {
			deploy_strv_free(out);
			return NULL;
		}
	return out;
}

static bool strv_has(char *const *v, const char *needle)
{
	for (size_t i = 0; v && v[i]; i++)
		if (strstr(v[i], needle))
			return true;
	return false;
}

static bool is_wildcard(const char *host)
{
	return !host[0] || strcmp(host, "0.0.0.0") == 0 || strcmp(host, "::") == 0 || strcmp(host, "[::]") == 0;
}

/* The node's address on the route to the submitting host, into buf. */
static bool route_address(char *buf, size_t size)
{
	const char *submit = getenv("SLURM_SUBMIT_HOST");
	struct addrinfo hints = { .ai_socktype = SOCK_DGRAM }, *res = NULL;
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	bool ok = false;

	if (!submit || getaddrinfo(submit, "9", &hints, &res) != 0)
		return false;
	for (struct addrinfo *a = res; a && !ok; a = a->ai_next) {
		_cleanup_(closep) int fd = socket(a->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);

		if (fd < 0 || connect(fd, a->ai_addr, a->ai_addrlen) < 0 ||
		    getsockname(fd, (struct sockaddr *)&ss, &len) < 0)
			continue;
		if (ss.ss_family == AF_INET)
			ok = inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, buf, (socklen_t)size) != NULL;
		else if (ss.ss_family == AF_INET6) {
			char a6[INET6_ADDRSTRLEN];

			ok = inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, a6, sizeof(a6)) != NULL;
			if (ok)
				snprintf(buf, size, "[%s]", a6);
		}
	}
	freeaddrinfo(res);
	return ok;
}

static void url_host(const char *listen, char *buf, size_t size)
{
	if (!is_wildcard(listen)) {
		snprintf(buf, size, strchr(listen, ':') && listen[0] != '[' ? "[%s]" : "%s", listen);
		return;
	}
	if (route_address(buf, size))
		return;
	if (gethostname(buf, size) < 0)
		snprintf(buf, size, "localhost");
	buf[size - 1] = 0;
}

/* A job with its node to itself (sbatch --exclusive) gets every GPU of the
 * node, and Slurm's CUDA_VISIBLE_DEVICES lists them all: the server sees
 * the first of them as many as the trial asked for. */
static int keep_gpus(uint32_t n, struct error *err)
{
	_cleanup_(freep) char *list = NULL;
	const char *v = getenv("CUDA_VISIBLE_DEVICES");
	char *p;

	if (!n || !v)
		return 0;
	list = strdup(v);
	if (!list)
		return error_set(err, -ENOMEM, "out of memory");
	p = list;
	for (uint32_t i = 0; p && i < n; i++)
		if ((p = strchr(p, ',')) && i + 1 < n)
			p++;
	if (!p)
		return 0;
	*p = 0;
	if (setenv("CUDA_VISIBLE_DEVICES", list, 1) < 0)
		return error_set(err, -errno, "CUDA_VISIBLE_DEVICES: %s", strerror(errno));
	return 0;
}

static int write_address(const struct job_file *f, const char *url, uint16_t aux_port, struct error *err)
{
	_cleanup_(cJSON_Deletep) cJSON *j = cJSON_CreateObject();
	_cleanup_(freep) char *text = NULL;
	const char *node = getenv("SLURMD_NODENAME"), *gpus = getenv("CUDA_VISIBLE_DEVICES");
	const char *job = getenv("SLURM_JOB_ID");
	char host[256] = "";

	if (!node) {
		(void)gethostname(host, sizeof(host) - 1);
		node = host;
	}
	if (!j || json_add_string(j, "url", url) < 0 || json_add_string(j, "node", node) < 0 ||
	    json_add_string(j, "gpus", gpus ? gpus : "") < 0 || json_add_string(j, "job_id", job ? job : "") < 0 ||
	    json_add_number(j, "pid", getpid()) < 0 || (aux_port && json_add_number(j, "aux_port", aux_port) < 0) ||
	    !(text = cJSON_Print(j)))
		return error_set(err, -ENOMEM, "out of memory");
	return deploy_write_file_atomic(f->address_file, text, 0644, err);
}

static const char *env_or(const char *name, const char *fallback)
{
	const char *v = getenv(name);

	return v ? v : fallback;
}

int deploy_job_exec(const char *path, struct error *err)
{
	_cleanup_(job_file_done) struct job_file f = { 0 };
	_cleanup_(freep) char **env = NULL;
	char port_text[8], aux_text[8], host[300], url[400];
	uint16_t port, aux_port = 0;
	int r;

	r = job_file_read(path, &f, err);
	if (r >= 0)
		r = keep_gpus(f.gpus, err);
	if (r < 0)
		return r;
	r = deploy_pick_free_port(f.host, &port, err);
	if (r < 0)
		return r;
	snprintf(port_text, sizeof(port_text), "%u", port);
	f.run_argv = fill_port_strv(f.argv, f.placeholder, port_text);
	f.run_env = fill_port_strv(f.env, f.placeholder, port_text);
	if (!f.run_argv || !f.run_env)
		return error_set(err, -ENOMEM, "out of memory");
	/* a role's second port (its KV side channel, its bootstrap server): another free one */
	if (strv_has(f.run_argv, ENGINE_AUX_PORT_PLACEHOLDER) || strv_has(f.run_env, ENGINE_AUX_PORT_PLACEHOLDER)) {
		char **argv2, **env2;

		do
			r = deploy_pick_free_port(f.host, &aux_port, err);
		while (r >= 0 && aux_port == port);
		if (r < 0)
			return r;
		snprintf(aux_text, sizeof(aux_text), "%u", aux_port);
		argv2 = fill_port_strv(f.run_argv, ENGINE_AUX_PORT_PLACEHOLDER, aux_text);
		env2 = fill_port_strv(f.run_env, ENGINE_AUX_PORT_PLACEHOLDER, aux_text);
		deploy_strv_free(f.run_argv);
		deploy_strv_free(f.run_env);
		f.run_argv = argv2;
		f.run_env = env2;
		if (!f.run_argv || !f.run_env)
			return error_set(err, -ENOMEM, "out of memory");
	}
	url_host(f.host, host, sizeof(host));
	snprintf(url, sizeof(url), "http://%s:%u", host, port);
	r = write_address(&f, url, aux_port, err);
	if (r < 0)
		return r;
	env = deploy_environment((char **[]){ f.run_env }, 1);
	if (!env)
		return error_set(err, -ENOMEM, "out of memory");
	printf("goodput job-exec: job %s on %s (GPUs %s): %s\n", env_or("SLURM_JOB_ID", "?"),
	       env_or("SLURMD_NODENAME", host), env_or("CUDA_VISIBLE_DEVICES", "none"), url);
	fflush(stdout);
	execvpe(f.run_argv[0], f.run_argv, env);
	return error_set(err, -errno, "cannot run %s: %s", f.run_argv[0], strerror(errno));
}
