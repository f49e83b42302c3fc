/* deploy-util.c — the pieces of deploying that are facts about the host
 * rather than steps of the start-up: ports (a free one, whether one is free
 * again), killing orphans of an earlier run by their process group, reading
 * a server's log (its tail, out-of-memory patterns, lines that name its
 * address), the environment a server or hook starts with, the command
 * method's hook environment and the systemd unit's name. */
#include "deploy-internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <math.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "macro.h"

#define LOG_TAIL_MAX (64 * 1024)
#define LOG_SCAN_MAX (1024 * 1024)

extern char **environ;

/* ---- string vectors and environments ---- */

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

/* What systemd hands to a service's main process alone: a server started
 * by goodputd must not notify, pet the watchdog or take sockets in its
 * name (systemd refuses it and says so in the journal on every trial). */
static bool for_main_process_only(const char *entry)
{
	static const char *const names[] = { "NOTIFY_SOCKET=", "WATCHDOG_USEC=", "WATCHDOG_PID=",
					     "LISTEN_FDS=",    "LISTEN_PID=",    "LISTEN_FDNAMES=" };

	for (size_t i = 0; i < ELEMENTSOF(names); i++)
		if (strncmp(entry, names[i], strlen(names[i])) == 0)
			return true;
	return false;
}

char **deploy_environment(char **const *layers, size_t n_layers)
{
	size_t n = 0, k = 0;
	char **env;

	while (environ && environ[n])
		n++;
	for (size_t l = 0; l < n_layers; l++)
		for (size_t i = 0; layers[l] && layers[l][i]; i++)
			n++;
	env = calloc(n + 1, sizeof(char *));
	if (!env)
		return NULL;
	for (size_t i = 0; environ && environ[i]; i++)
		if (!for_main_process_only(environ[i]))
			env[k++] = environ[i];
	for (size_t l = 0; l < n_layers; l++)
		for (size_t i = 0; layers[l] && layers[l][i]; i++) {
			const char *v = layers[l][i], *eq = strchr(v, '=');
			size_t len = eq ? (size_t)(eq - v) + 1 : strlen(v);
			size_t j = 0;

			while (j < k && strncmp(env[j], v, len) != 0)
				j++;
			env[j] = layers[l][i];
			if (j == k)
				k++;
		}
	env[k] = NULL;
	return env;
}

void deploy_set_port(struct deployment *d, const char *host, uint16_t port)
{
	d->port = port;
	if (strchr(host, ':'))
		snprintf(d->base_url, sizeof(d->base_url), "http://[%s]:%u", host, port);
	else
		snprintf(d->base_url, sizeof(d->base_url), "http://%s:%u", host, port);
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

bool deploy_port_accepts(const char *host, uint16_t port)
{
	_cleanup_(closep) int fd = -1;
	struct sockaddr_storage ss;
	struct pollfd pfd;
	socklen_t len;
	int family, e = 0;

	family = make_addr(host, port, &ss, &len);
	if (family < 0)
		return false;
	fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return true; /* cannot tell: ask again */
	if (connect(fd, (struct sockaddr *)&ss, len) == 0)
		return true;
	if (errno != EINPROGRESS)
		return false; /* refused (nothing listens), or unreachable */
	/* a local address answers within the call; otherwise look once, without waiting */
	pfd = (struct pollfd){ .fd = fd, .events = POLLOUT };
	if (poll(&pfd, 1, 0) <= 0)
		return true; /* no answer yet: ask again */
	len = sizeof(e);
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &len) < 0)
		return true;
	return e == 0;
}

/* Reads a small file whole (NUL-terminated). */
static int read_small(const char *path, char *buf, size_t size)
{
	_cleanup_(closep) int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = read(fd, buf, size - 1);
	if (n < 0)
		return -errno;
	buf[n] = 0;
	return 0;
}

int deploy_process_identity(pid_t pid, char *buf, size_t size)
{
	char path[64], stat[1024], boot[64];
	unsigned long long start = 0;
	const char *p;
	int r;

	r = read_small("/proc/sys/kernel/random/boot_id", boot, sizeof(boot));
	if (r < 0)
		return r;
	boot[strcspn(boot, "\n")] = 0;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	r = read_small(path, stat, sizeof(stat));
	if (r < 0)
		return r == -ENOENT ? -ESRCH : r;
	/* after the command's ")" (a command may hold spaces and parentheses):
	 * state is field 3, starttime field 22 */
	p = strrchr(stat, ')');
	if (!p)
		return -EIO;
	p++;
	for (int field = 2; field < 21 && p; field++)
		p = strchr(p + 1, ' ');
	if (!p || sscanf(p, " %llu", &start) != 1)
		return -EIO;
	if ((size_t)snprintf(buf, size, "%s:%llu", boot, start) >= size)
		return -ENOBUFS;
	return 0;
}

/* Whether the group recorded as pgid/identity is the one that lives now. */
static bool same_group(int64_t pgid, const char *identity)
{
	char now[128];
	const char *colon = strrchr(identity, ':');
	int r;

	r = deploy_process_identity((pid_t)pgid, now, sizeof(now));
	if (r == 0)
		return strcmp(now, identity) == 0;
	if (r != -ESRCH || !colon)
		return false;
	/* the leader is gone: its group may live on (the pid stays taken while
	 * it does), unless this is another boot */
	r = deploy_process_identity(getpid(), now, sizeof(now));
	return r == 0 && strncmp(now, identity, (size_t)(colon - identity + 1)) == 0;
}

int deploy_end_orphan(int64_t pgid, const char *identity)
{
	if (pgid <= 1 || pgid > INT32_MAX || pgid == (int64_t)getpgrp())
		return 0;
	if (identity && !same_group(pgid, identity))
		return 0;
	if (kill(-(pid_t)pgid, SIGKILL) < 0)
		return errno == ESRCH ? 0 : -errno;
	return 1;
}

/* ---- logs ---- */

/* Reads [max(offset, size - cap), size) of a file as text: NUL-terminated,
 * with NULs inside shown as spaces (they would cut the text short). */
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
	for (size_t i = 0; i < len; i++)
		if (buf[i] == 0)
			buf[i] = ' ';
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
	for (size_t i = 0; d->oom_patterns[i]; i++)
		if (strstr(buf, d->oom_patterns[i]))
			return true;
	return false;
}

bool deploy_log_matches_busy(const struct deployment *d, uint64_t offset)
{
	_cleanup_(freep) char *buf = NULL;
	size_t len = 0;
	unsigned gpu;

	if (read_region(d->log_path, offset, LOG_SCAN_MAX, &buf, &len) < 0)
		return false;
	/* cudaErrorDevicesUnavailable: "CUDA-capable device(s) is/are busy or unavailable" */
	if (strstr(buf, "busy or unavailable"))
		return true;
	for (const char *p = buf; (p = strstr(p, "GPU ")); p += 4) {
		char word[8] = "";

		if (sscanf(p, "GPU %u %7s", &gpu, word) == 2 && strncmp(word, "busy", 4) == 0)
			return true;
	}
	return false;
}

bool deploy_log_matches_port_in_use(const struct deployment *d, uint64_t offset)
{
	_cleanup_(freep) char *buf = NULL;
	size_t len = 0;

	if (read_region(d->log_path, offset, LOG_SCAN_MAX, &buf, &len) < 0)
		return false;
	/* strerror(EADDRINUSE) in C, Python and Rust servers alike; uvicorn lower-cases it */
	return strcasestr(buf, "address already in use") || strstr(buf, "couldn't bind HTTP server socket");
}

void deploy_log_classify(const struct deployment *d, uint64_t offset, enum engine_failure_cause *ret_cause,
			 uint64_t *ret_suggested_len)
{
	_cleanup_(freep) char *buf = NULL;
	size_t len = 0;

	*ret_cause = ENGINE_FAILURE_NONE;
	*ret_suggested_len = 0;
	if (!d->profile) {
		if (deploy_log_matches_oom(d, offset))
			*ret_cause = ENGINE_FAILURE_OOM;
		return;
	}
	if (read_region(d->log_path, offset, LOG_SCAN_MAX, &buf, &len) < 0)
		return;
	engine_profile_classify_failure(d->profile, buf, ret_cause, ret_suggested_len);
}

/* ---- lines that name the server's address ---- */

bool deploy_log_scan(struct deployment *d, bool (*match)(struct deployment *d, char *line))
{
	_cleanup_(closep) int fd = -1;
	char buf[16384];
	ssize_t n;

	fd = open(d->log_path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return false;
	n = pread(fd, buf, sizeof(buf) - 1, (off_t)d->scan_offset);
	if (n <= 0)
		return false;
	buf[n] = 0;
	for (char *line = buf, *nl; (nl = memchr(line, '\n', (size_t)(buf + n - line))); line = nl + 1) {
		*nl = 0;
		d->scan_offset += (uint64_t)(nl + 1 - line);
		if (match(d, line))
			return true;
	}
	return false;
}

/* "HOST:PORT" or "[HOST]:PORT" at p into host and *ret_port. */
static bool parse_host_port(const char *p, char *host, size_t size, unsigned long *ret_port)
{
	const char *e;
	unsigned long port;

	if (*p == '[') {
		e = strchr(p, ']');
		if (!e || e[1] != ':' || (size_t)(e - p - 1) >= size)
			return false;
		snprintf(host, size, "%.*s", (int)(e - p - 1), p + 1);
		p = e + 2;
	} else {
		e = strrchr(p, ':');
		if (!e || (size_t)(e - p) >= size)
			return false;
		snprintf(host, size, "%.*s", (int)(e - p), p);
		p = e + 1;
	}
	port = strtoul(p, NULL, 10);
	if (port == 0 || port > 65535)
		return false;
	*ret_port = port;
	return true;
}

bool deploy_match_announce(struct deployment *d, char *line)
{
	char host[64], *p = d->announce_prefix ? strstr(line, d->announce_prefix) : NULL, *h;
	unsigned long port;

	if (!p || !parse_host_port(p + strlen(d->announce_prefix), host, sizeof(host), &port))
		return false;
	/* A server listening on every address is reached on loopback. */
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
		else if (cJSON_IsNumber(k) && fabs(k->valuedouble) < 1e15 && k->valuedouble == floor(k->valuedouble))
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
