/* deploy.c — the part of the deployers every method shares: the deployment
 * object and its state machine, the deferred callback, ports (picking a free
 * one, checking one is free again), reading the tail of a server's log and
 * matching it against out-of-memory patterns, and killing orphans left by an
 * earlier run. The methods themselves live in deploy-<method>.c. */
#include "deploy-internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "macro.h"
#include "time-util.h"

#define LOG_TAIL_MAX (64 * 1024)
#define LOG_SCAN_MAX (1024 * 1024)

static const char *const state_names[] = {
	[DEPLOY_STARTING] = "starting", [DEPLOY_READY] = "ready",   [DEPLOY_STOPPING] = "stopping",
	[DEPLOY_STOPPED] = "stopped",   [DEPLOY_FAILED] = "failed",
};

static const char *const failure_names[] = {
	[DEPLOY_FAILURE_NONE] = "none",
	[DEPLOY_FAILURE_OOM] = "oom",
	[DEPLOY_FAILURE_CRASHED] = "crashed",
	[DEPLOY_FAILURE_STARTUP_TIMEOUT] = "startup_timeout",
};

const char *deploy_state_to_string(enum deploy_state s)
{
	return (unsigned)s < ELEMENTSOF(state_names) ? state_names[s] : "?";
}

const char *deploy_failure_to_string(enum deploy_failure f)
{
	return (unsigned)f < ELEMENTSOF(failure_names) ? failure_names[f] : "?";
}

void deploy_config_from_profile(struct deploy_config *cfg, const struct engine_profile *p,
				const struct engine_command *cmd, const char *log_path, const char *host, uint16_t port,
				uint64_t startup_timeout_usec, uint64_t stop_timeout_usec)
{
	*cfg = (struct deploy_config){
		.command = cmd,
		.log_path = log_path,
		.host = host,
		.port = port,
		.announce_prefix = p->port_mode == ENGINE_PORT_ANNOUNCE ? p->announce_prefix : NULL,
		.health_path = p->health_path,
		.health_interval_usec = p->health_interval_usec,
		.startup_timeout_usec = startup_timeout_usec ? startup_timeout_usec : p->startup_timeout_usec,
		.stop_timeout_usec = stop_timeout_usec ? stop_timeout_usec : p->stop_timeout_usec,
		.oom_patterns = p->oom_patterns,
	};
}

/* ---- state and callback ---- */

static int on_notify(sd_event_source *s, void *userdata)
{
	struct deployment *d = userdata;

	/* d may be freed by the callback: touch nothing after it. */
	if (d->cb)
		d->cb(d, d->state, d->userdata);
	return 0;
}

void deploy_set_state(struct deployment *d, enum deploy_state state)
{
	d->state = state;
	if (state == DEPLOY_READY && !d->ready_usec)
		d->ready_usec = mono_usec();
	if (state == DEPLOY_READY || state == DEPLOY_STOPPED || state == DEPLOY_FAILED)
		(void)sd_event_source_set_enabled(d->notify_source, SD_EVENT_ONESHOT);
}

void deploy_set_failure(struct deployment *d, enum deploy_failure f, const char *fmt, ...)
{
	va_list ap;
	char *m = NULL;

	if (d->failure != DEPLOY_FAILURE_NONE)
		return; /* the first cause wins */
	d->failure = f;
	va_start(ap, fmt);
	if (vasprintf(&m, fmt, ap) < 0)
		m = NULL;
	va_end(ap);
	free(d->message);
	d->message = m;
}

void deploy_set_port(struct deployment *d, const char *host, uint16_t port)
{
	d->port = port;
	if (strchr(host, ':'))
		snprintf(d->base_url, sizeof(d->base_url), "http://[%s]:%u", host, port);
	else
		snprintf(d->base_url, sizeof(d->base_url), "http://%s:%u", host, port);
}

/* ---- the object ---- */

static char **strv_copy(char *const *v)
{
	size_t n = 0;
	char **c;

	while (v && v[n])
		n++;
	c = calloc(n + 1, sizeof(char *));
	if (!c)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		c[i] = strdup(v[i]);
		if (!c[i]) {
			for (size_t k = 0; k < i; k++)
				free(c[k]);
			free(c);
			return NULL;
		}
	}
	return c;
}

static void strv_free(char **v)
{
	for (size_t i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
}

void deploy_strv_free(char **v)
{
	strv_free(v);
}

char **deploy_strv_copy(char *const *v)
{
	return strv_copy(v);
}

static char *strdup_or_null(const char *s, bool *oom)
{
	char *c;

	if (!s)
		return NULL;
	c = strdup(s);
	if (!c)
		*oom = true;
	return c;
}

int deploy_start(sd_event *e, enum study_deploy_method method, const struct deploy_config *cfg, deploy_event_fn cb,
		 void *userdata, struct deployment **ret, struct error *err)
{
	const struct deploy_ops *ops;
	struct deployment *d;
	bool oom = false;
	int r;

	if (!cfg->command || !cfg->command->argv || !cfg->command->argv[0] || !cfg->log_path || !cfg->health_path)
		return error_set(err, -EINVAL, "deploy: a command, a log file and a health path are needed");
	switch (method) {
	case STUDY_DEPLOY_EXEC:
		ops = &deploy_exec_ops;
		break;
	case STUDY_DEPLOY_SYSTEMD:
		ops = &deploy_systemd_ops;
		if (!cfg->unit_name)
			return error_set(err, -EINVAL, "deploy: systemd needs a unit name");
		break;
	case STUDY_DEPLOY_COMMAND:
		ops = &deploy_command_ops;
		if (!cfg->deploy_command || !cfg->deploy_command[0] || !cfg->teardown_command ||
		    !cfg->teardown_command[0])
			return error_set(err, -EINVAL, "deploy: the command method needs deploy and teardown commands");
		break;
	default:
		return error_set(err, -EOPNOTSUPP, "deploy: unknown method %d", (int)method);
	}
	/* The command method learns its URL from the deploy command. */
	if (method != STUDY_DEPLOY_COMMAND && cfg->port == 0 && !cfg->announce_prefix)
		return error_set(err, -EINVAL, "deploy: no port and no announce line to learn it from");
	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	d->ops = ops;
	d->event = sd_event_ref(e);
	d->cb = cb;
	d->userdata = userdata;
	d->argv = strv_copy(cfg->command->argv);
	d->env = strv_copy(cfg->command->env);
	d->oom_patterns = strv_copy((char *const *)cfg->oom_patterns);
	d->log_path = strdup_or_null(cfg->log_path, &oom);
	d->host = strdup_or_null(cfg->host ? cfg->host : "127.0.0.1", &oom);
	d->announce_prefix = strdup_or_null(cfg->announce_prefix, &oom);
	d->health_path = strdup_or_null(cfg->health_path, &oom);
	d->health_interval_usec = cfg->health_interval_usec ? cfg->health_interval_usec : USEC_PER_SEC;
	d->startup_timeout_usec = cfg->startup_timeout_usec ? cfg->startup_timeout_usec : 600 * USEC_PER_SEC;
	d->stop_timeout_usec = cfg->stop_timeout_usec ? cfg->stop_timeout_usec : 30 * USEC_PER_SEC;
	d->command_timeout_usec = cfg->command_timeout_usec ? cfg->command_timeout_usec : 120 * USEC_PER_SEC;
	d->user_bus = cfg->user_bus;
	d->unit_name = strdup_or_null(cfg->unit_name, &oom);
	if (cfg->deploy_command && !(d->deploy_command = strv_copy((char *const *)cfg->deploy_command)))
		oom = true;
	if (cfg->teardown_command && !(d->teardown_command = strv_copy((char *const *)cfg->teardown_command)))
		oom = true;
	if (cfg->health_command && !(d->health_command = strv_copy((char *const *)cfg->health_command)))
		oom = true;
	if (!(d->hook_env = strv_copy((char *const *)cfg->hook_env)))
		oom = true;
	d->state = DEPLOY_STARTING;
	d->start_usec = mono_usec();
	if (oom || !d->argv || !d->env || !d->oom_patterns) {
		deploy_free(d);
		return -ENOMEM;
	}
	r = sd_event_add_defer(e, &d->notify_source, on_notify, d);
	if (r >= 0)
		r = sd_event_source_set_enabled(d->notify_source, SD_EVENT_OFF);
	if (r >= 0)
		(void)sd_event_source_set_description(d->notify_source, "deploy-notify");
	if (r < 0) {
		deploy_free(d);
		return error_set(err, r, "deploy: cannot create an event source: %s", strerror(-r));
	}
	if (cfg->port)
		deploy_set_port(d, d->host, cfg->port);
	r = d->ops->start(d, err);
	if (r < 0) {
		deploy_free(d);
		return r;
	}
	*ret = d;
	return 0;
}

int deploy_stop(struct deployment *d)
{
	if (d->state != DEPLOY_STARTING && d->state != DEPLOY_READY)
		return -EALREADY;
	return d->ops->stop(d);
}

struct deployment *deploy_free(struct deployment *d)
{
	if (!d)
		return NULL;
	if (d->ops && d->ops->destroy)
		d->ops->destroy(d);
	sd_event_source_disable_unref(d->notify_source);
	sd_event_unref(d->event);
	strv_free(d->argv);
	strv_free(d->env);
	strv_free(d->oom_patterns);
	strv_free(d->deploy_command);
	strv_free(d->teardown_command);
	strv_free(d->health_command);
	strv_free(d->hook_env);
	free(d->unit_name);
	free(d->log_path);
	free(d->host);
	free(d->announce_prefix);
	free(d->health_path);
	free(d->message);
	free(d);
	return NULL;
}

enum deploy_state deploy_get_state(const struct deployment *d)
{
	return d->state;
}

enum deploy_failure deploy_get_failure(const struct deployment *d)
{
	return d->failure;
}

const char *deploy_get_message(const struct deployment *d)
{
	return d->message ? d->message : "";
}

const char *deploy_get_base_url(const struct deployment *d)
{
	return d->base_url[0] ? d->base_url : NULL;
}

uint16_t deploy_get_port(const struct deployment *d)
{
	return d->port;
}

int64_t deploy_get_pgid(const struct deployment *d)
{
	return d->pgid;
}

const char *deploy_get_unit(const struct deployment *d)
{
	return d->ops == &deploy_systemd_ops ? d->unit_name : NULL;
}

double deploy_get_startup_seconds(const struct deployment *d)
{
	return d->ready_usec ? usec_to_sec(d->ready_usec - d->start_usec) : NAN;
}

/* ---- ports ---- */

static int make_addr(const char *host, uint16_t port, struct sockaddr_storage *ss, socklen_t *len)
{
	struct sockaddr_in *in4 = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;

	memset(ss, 0, sizeof(*ss));
	if (!host || strcmp(host, "localhost") == 0)
		host = "127.0.0.1";
	if (inet_pton(AF_INET, host, &in4->sin_addr) == 1) {
		in4->sin_family = AF_INET;
		in4->sin_port = htons(port);
		*len = sizeof(*in4);
		return AF_INET;
	}
	if (inet_pton(AF_INET6, host, &in6->sin6_addr) == 1) {
		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons(port);
		*len = sizeof(*in6);
		return AF_INET6;
	}
	return -EAFNOSUPPORT;
}

int deploy_pick_free_port(const char *host, uint16_t *ret, struct error *err)
{
	_cleanup_(closep) int fd = -1;
	struct sockaddr_storage ss;
	socklen_t len;
	int family;

	family = make_addr(host, 0, &ss, &len);
	if (family < 0)
		return error_set(err, family, "deploy: \"%s\" is not a numeric address", host);
	fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return error_set(err, -errno, "deploy: socket: %s", strerror(errno));
	if (bind(fd, (struct sockaddr *)&ss, len) < 0 || getsockname(fd, (struct sockaddr *)&ss, &len) < 0)
		return error_set(err, -errno, "deploy: cannot find a free port on %s: %s", host, strerror(errno));
	*ret = ntohs(family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port
				       : ((struct sockaddr_in6 *)&ss)->sin6_port);
	return 0;
}

bool deploy_port_is_free(const char *host, uint16_t port)
{
	_cleanup_(closep) int fd = -1;
	struct sockaddr_storage ss;
	socklen_t len;
	int family, one = 1;

	family = make_addr(host, port, &ss, &len);
	if (family < 0)
		return true;
	fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return true;
	/* TIME_WAIT leftovers do not stop a server that sets SO_REUSEADDR itself. */
	(void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	return bind(fd, (struct sockaddr *)&ss, len) == 0;
}

int deploy_kill_orphan(int64_t pgid)
{
	if (pgid <= 1 || pgid == (int64_t)getpgrp())
		return 0;
	if (kill(-(pid_t)pgid, SIGKILL) < 0)
		return errno == ESRCH ? 0 : -errno;
	return 1;
}

/* ---- logs ---- */

/* Reads [max(offset, size - cap), size) of a file. */
static int read_region(const char *path, uint64_t offset, size_t cap, char **ret, size_t *ret_len)
{
	_cleanup_(closep) int fd = -1;
	struct stat st;
	uint64_t from;
	size_t len = 0;
	char *buf;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0)
		return -errno;
	from = (uint64_t)st.st_size > cap && (uint64_t)st.st_size - cap > offset ? (uint64_t)st.st_size - cap : offset;
	if (from > (uint64_t)st.st_size)
		from = (uint64_t)st.st_size;
	buf = malloc(cap + 1);
	if (!buf)
		return -ENOMEM;
	while (len < cap) {
		ssize_t n = pread(fd, buf + len, cap - len, (off_t)(from + len));

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	buf[len] = 0;
	*ret = buf;
	*ret_len = len;
	return 0;
}

int deploy_log_tail(const char *path, uint64_t offset, unsigned max_lines, char **ret)
{
	char *buf = NULL, *start;
	size_t len = 0;
	unsigned lines = 0;
	int r;

	r = read_region(path, offset, LOG_TAIL_MAX, &buf, &len);
	if (r < 0)
		return r;
	/* NULs would cut the text short: show them as spaces. */
	for (size_t i = 0; i < len; i++)
		if (buf[i] == 0)
			buf[i] = ' ';
	while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == '\r'))
		buf[--len] = 0;
	start = buf;
	for (size_t i = len; i > 0; i--)
		if (buf[i - 1] == '\n' && ++lines >= max_lines) {
			start = buf + i;
			break;
		}
	memmove(buf, start, strlen(start) + 1);
	*ret = buf;
	return 0;
}

bool deploy_log_matches_oom(const struct deployment *d, uint64_t offset)
{
	_cleanup_(freep) char *buf = NULL;
	size_t len = 0;

	if (!d->oom_patterns || !d->oom_patterns[0])
		return false;
	if (read_region(d->log_path, offset, LOG_SCAN_MAX, &buf, &len) < 0)
		return false;
	for (size_t i = 0; i < len; i++)
		if (buf[i] == 0)
			buf[i] = ' ';
	for (size_t i = 0; d->oom_patterns[i]; i++)
		if (strstr(buf, d->oom_patterns[i]))
			return true;
	return false;
}

/* ---- announce lines and reported URLs ---- */

bool deploy_scan_announce(struct deployment *d, const char *prefix, uint64_t *offset)
{
	_cleanup_(closep) int fd = -1;
	char buf[16384];
	ssize_t n;

	fd = open(d->log_path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return false;
	n = pread(fd, buf, sizeof(buf) - 1, (off_t)*offset);
	if (n <= 0)
		return false;
	buf[n] = 0;
	for (char *line = buf, *nl; (nl = memchr(line, '\n', (size_t)(buf + n - line))); line = nl + 1) {
		char host[64], *p, *h;
		unsigned long port;

		*nl = 0;
		*offset += (uint64_t)(nl + 1 - line);
		p = strstr(line, prefix);
		if (!p)
			continue;
		p += strlen(prefix);
		if (*p == '[') {
			char *e = strchr(p, ']');
			if (!e || e[1] != ':' || (size_t)(e - p - 1) >= sizeof(host))
				continue;
			snprintf(host, sizeof(host), "%.*s", (int)(e - p - 1), p + 1);
			p = e + 2;
		} else {
			char *e = strrchr(p, ':');
			if (!e || (size_t)(e - p) >= sizeof(host))
				continue;
			snprintf(host, sizeof(host), "%.*s", (int)(e - p), p);
			p = e + 1;
		}
		port = strtoul(p, NULL, 10);
		if (port == 0 || port > 65535)
			continue;
		if (strcmp(host, "0.0.0.0") == 0)
			snprintf(host, sizeof(host), "127.0.0.1");
		else if (strcmp(host, "::") == 0)
			snprintf(host, sizeof(host), "::1");
		h = strdup(host);
		if (!h)
			return false;
		free(d->host);
		d->host = h;
		deploy_set_port(d, d->host, (uint16_t)port);
		return true;
	}
	return false;
}

int deploy_set_base_url(struct deployment *d, const char *url)
{
	const char *hostpart, *colon, *end;
	size_t len = strlen(url);

	while (len > 0 && (url[len - 1] == '/' || url[len - 1] == '\r' || url[len - 1] == ' '))
		len--;
	if ((strncmp(url, "http://", 7) != 0 && strncmp(url, "https://", 8) != 0) || len >= sizeof(d->base_url) ||
	    len <= 8)
		return -EINVAL;
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)url[i] <= ' ' || url[i] == '"' || url[i] == '\\')
			return -EINVAL;
	snprintf(d->base_url, sizeof(d->base_url), "%.*s", (int)len, url);
	hostpart = strstr(d->base_url, "://") + 3;
	end = strchr(hostpart, '/');
	if (!end)
		end = d->base_url + strlen(d->base_url);
	colon = memrchr(hostpart, ':', (size_t)(end - hostpart));
	if (colon && (!strchr(hostpart, ']') || colon > strchr(hostpart, ']')))
		d->port = (uint16_t)strtoul(colon + 1, NULL, 10);
	else
		d->port = strncmp(url, "https", 5) == 0 ? 443 : 80;
	return 0;
}

/* ---- the command method's environment, the systemd unit's name ---- */

static int push_env(char ***v, size_t *n, const char *name, const char *value)
{
	char **nv, *kv = NULL;

	if (asprintf(&kv, "%s=%s", name, value) < 0)
		return -ENOMEM;
	nv = reallocarray(*v, *n + 2, sizeof(char *));
	if (!nv) {
		free(kv);
		return -ENOMEM;
	}
	nv[(*n)++] = kv;
	nv[*n] = NULL;
	*v = nv;
	return 0;
}

int deploy_hook_env(const cJSON *knobs, const char *study, int64_t trial_id, const char *model, const char *host,
		    uint16_t port, char ***ret)
{
	char **v = calloc(1, sizeof(char *));
	const cJSON *k;
	size_t n = 0;
	char num[32];
	int r = 0;

	if (!v)
		return -ENOMEM;
	cJSON_ArrayForEach(k, knobs)
	{
		char name[96], val[128];
		size_t i = 0;

		i = (size_t)snprintf(name, sizeof(name), "GOODPUT_KNOB_");
		for (const char *c = k->string; *c && i + 1 < sizeof(name); c++)
			name[i++] = (*c >= 'a' && *c <= 'z')                                 ? (char)(*c - 'a' + 'A')
				    : ((*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9')) ? *c
											     : '_';
		name[i] = 0;
		if (cJSON_IsString(k))
			snprintf(val, sizeof(val), "%s", k->valuestring);
		else if (cJSON_IsNumber(k) && k->valuedouble == (double)(int64_t)k->valuedouble)
			snprintf(val, sizeof(val), "%" PRId64, (int64_t)k->valuedouble);
		else if (cJSON_IsNumber(k))
			snprintf(val, sizeof(val), "%.15g", k->valuedouble);
		else
			continue;
		r = push_env(&v, &n, name, val);
		if (r < 0)
			break;
	}
	if (r >= 0 && port) {
		snprintf(num, sizeof(num), "%u", port);
		r = push_env(&v, &n, "GOODPUT_PORT", num);
	}
	if (r >= 0 && host)
		r = push_env(&v, &n, "GOODPUT_HOST", host);
	if (r >= 0 && trial_id > 0) {
		snprintf(num, sizeof(num), "%" PRId64, trial_id);
		r = push_env(&v, &n, "GOODPUT_TRIAL_ID", num);
	}
	if (r >= 0 && study)
		r = push_env(&v, &n, "GOODPUT_STUDY", study);
	if (r >= 0 && model)
		r = push_env(&v, &n, "GOODPUT_MODEL", model);
	if (r < 0) {
		strv_free(v);
		return r;
	}
	*ret = v;
	return 0;
}

int deploy_unit_name(const char *study, int64_t trial_id, char *buf, size_t size)
{
	size_t i;
	int n = snprintf(buf, size, "goodput-%s-%" PRId64 ".service", study ? study : "study", trial_id);

	if (n < 0 || (size_t)n >= size || n > 255)
		return -ENAMETOOLONG;
	for (i = 8; buf[i]; i++)
		if (!((buf[i] >= 'a' && buf[i] <= 'z') || (buf[i] >= 'A' && buf[i] <= 'Z') ||
		      (buf[i] >= '0' && buf[i] <= '9') || buf[i] == '-' || buf[i] == '_' || buf[i] == '.' ||
		      buf[i] == ':'))
			buf[i] = '_';
	return 0;
}
