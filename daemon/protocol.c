/* protocol.c — the JSON-lines protocol of goodputd's control socket: request
 * parsing and validation, response and row serialisation, and the blocking
 * client call the `goodput` command line uses.
 *
 * Both ends share this file so that a key is spelled in one place. The
 * daemon side never blocks (control.c owns the I/O; this file only turns
 * bytes into a checked struct and structs into JSON); the client side is a
 * short-lived program and may wait on poll() with a deadline. */
#include "protocol.h"

#include <errno.h>
#include <math.h>
#include <poll.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "json-dispatch.h"
#include "json-util.h"
#include "store.h"
#include "time-util.h"
#include "utf8.h"

static const char *const command_names[_CTL_COMMAND_MAX + 1] = {
	[CTL_SUBMIT] = "submit", [CTL_STATUS] = "status", [CTL_LIST] = "list",
	[CTL_BEST] = "best",     [CTL_TRIALS] = "trials", [CTL_CANCEL] = "cancel",
	[CTL_PAUSE] = "pause",   [CTL_RESUME] = "resume", [CTL_REPORT] = "report",
};

const char *ctl_command_to_string(enum ctl_command c)
{
	return c < _CTL_COMMAND_MAX ? command_names[c] : NULL;
}

int ctl_command_from_string(const char *s)
{
	for (int i = 0; i < _CTL_COMMAND_MAX; i++)
		if (s && strcmp(s, command_names[i]) == 0)
			return i;
	return -EINVAL;
}

bool ctl_command_changes_state(enum ctl_command c)
{
	return c == CTL_SUBMIT || c == CTL_CANCEL || c == CTL_PAUSE || c == CTL_RESUME;
}

/* ---- requests ---- */

static int read_id(const cJSON *v, const char *path, const struct json_field *f, void *base, struct error *err)
{
	struct ctl_request *r = base;

	(void)f;
	if (!cJSON_IsNumber(v) && !cJSON_IsString(v))
		return json_wrong(v, path, "a number or a string", err);
	r->id = v;
	return 0;
}

static int read_spec(const cJSON *v, const char *path, const struct json_field *f, void *base, struct error *err)
{
	struct ctl_request *r = base;

	(void)f;
	if (!cJSON_IsObject(v))
		return error_set(err, -EINVAL, "%s: expected the study spec as an object", path);
	r->spec = v;
	return 0;
}

#define REQ(field) offsetof(struct ctl_request, field)

_Static_assert(sizeof(enum ctl_command) == sizeof(int), "command is stored as the index of its name");

/* The keys every request has; command was read (and its name checked) first. */
// clang-format off
#define COMMON_ROWS                                                                                         \
	{ "command", JSON_ENUM, REQ(command), .flags = JSON_MANDATORY, .choices = command_names,            \
	  .doc = "what to do" },                                                                            \
	{ "id", JSON_ANY, .callback = read_id, .doc = "echoed in the response (a number or a string)" }
// clang-format on

static const struct json_field plain_fields[] = {
	COMMON_ROWS,
	{ 0 },
};

static const struct json_field study_fields[] = {
	COMMON_ROWS,
	{ "study", JSON_STRING, REQ(study), .flags = JSON_NULLABLE, .max = 1024, .doc = "a study name" },
	{ 0 },
};

static const struct json_field submit_fields[] = {
	COMMON_ROWS,
	{ "study", JSON_ANY, .callback = read_spec, .doc = "the study spec (an object)" },
	{ 0 },
};

static const struct json_field best_fields[] = {
	COMMON_ROWS,
	{ "study", JSON_STRING, REQ(study), .flags = JSON_NULLABLE, .max = 1024, .doc = "a study name" },
	{ "model", JSON_STRING, REQ(model), .flags = JSON_NULLABLE, .max = 1024, .doc = "model, without a study" },
	{ "engine", JSON_STRING, REQ(engine), .flags = JSON_NULLABLE, .max = 1024, .doc = "engine, without a study" },
	{ "label", JSON_STRING, REQ(label), .flags = JSON_NULLABLE, .max = 4096, .doc = "the studies' label" },
	{ 0 },
};

static const struct json_field report_fields[] = {
	COMMON_ROWS,
	{ "study", JSON_STRING, REQ(study), .flags = JSON_NULLABLE, .max = 1024, .doc = "a study name" },
	{ "html", JSON_BOOL, REQ(html), .def = "false", .doc = "write the HTML report instead of answering Markdown" },
	{ 0 },
};

static const struct json_field *command_fields(enum ctl_command c)
{
	switch (c) {
	case CTL_SUBMIT:
		return submit_fields;
	case CTL_TRIALS:
	case CTL_CANCEL:
	case CTL_PAUSE:
	case CTL_RESUME:
		return study_fields;
	case CTL_BEST:
		return best_fields;
	case CTL_REPORT:
		return report_fields;
	default:
		return plain_fields;
	}
}

/* What a command needs beyond its keys' types. */
static int check_request(const struct ctl_request *r, struct error *err)
{
	if (r->command == CTL_SUBMIT && !r->spec)
		return error_set(err, -EINVAL, "study: missing (submit takes the study spec as an object)");
	if ((r->command == CTL_TRIALS || r->command == CTL_CANCEL || r->command == CTL_REPORT) && !r->study)
		return error_set(err, -EINVAL, "study: missing (%s takes a study name)",
				 ctl_command_to_string(r->command));
	if (r->command != CTL_BEST)
		return 0;
	if (r->study && (r->model || r->engine || r->label))
		return error_set(err, -EINVAL, "best: give either \"study\" or \"model\" + \"engine\" [+ \"label\"]");
	if (!r->study && (!r->model || !r->engine))
		return error_set(err, -EINVAL, "best: needs \"study\", or \"model\" and \"engine\"");
	return 0;
}

int ctl_request_parse(const char *line, size_t len, struct ctl_request *ret, struct error *err)
{
	struct ctl_request r = { 0 };
	const char *name = NULL;
	int c, k;

	k = json_parse_strict("request", line, len, &r.json, err);
	if (k < 0)
		return k;
	if (!cJSON_IsObject(r.json)) {
		k = error_set(err, -EINVAL, "request: expected a JSON object");
		goto fail;
	}
	k = json_require_string(r.json, "", "command", 64, &name, err);
	if (k < 0)
		goto fail;
	c = ctl_command_from_string(name);
	if (c < 0) {
		k = error_set(err, -EINVAL,
			      "command: unknown command \"%s\" (submit, status, list, best, trials, cancel, pause, "
			      "resume, report)",
			      name);
		goto fail;
	}
	k = json_dispatch(r.json, "", command_fields((enum ctl_command)c), 0, &r, err);
	if (k < 0)
		goto fail;
	k = check_request(&r, err);
	if (k < 0)
		goto fail;
	*ret = r;
	return 0;
fail:
	cJSON_Delete(r.json);
	return k;
}

void ctl_request_done(struct ctl_request *r)
{
	if (!r)
		return;
	cJSON_Delete(r->json);
	*r = (struct ctl_request){ 0 };
}

cJSON *ctl_response_ok(const cJSON *id)
{
	_cleanup_(cJSON_Deletep) cJSON *j = cJSON_CreateObject();

	if (!j || !cJSON_AddBoolToObject(j, "ok", true))
		return NULL;
	if (id) {
		cJSON *copy = cJSON_Duplicate(id, true);

		if (!copy || !cJSON_AddItemToObject(j, "id", copy)) {
			cJSON_Delete(copy);
			return NULL;
		}
	}
	return TAKE_PTR(j);
}

cJSON *ctl_response_error(const cJSON *id, const char *fmt, ...)
{
	_cleanup_(cJSON_Deletep) cJSON *j = cJSON_CreateObject();
	char msg[ERROR_MSG_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (!j || !cJSON_AddBoolToObject(j, "ok", false) || !cJSON_AddStringToObject(j, "error", msg))
		return NULL;
	if (id) {
		cJSON *copy = cJSON_Duplicate(id, true);

		if (!copy || !cJSON_AddItemToObject(j, "id", copy)) {
			cJSON_Delete(copy);
			return NULL;
		}
	}
	return TAKE_PTR(j);
}

int ctl_format_line(const cJSON *j, char **ret, size_t *ret_len)
{
	_cleanup_(cjson_freep) char *s = cJSON_PrintUnformatted(j);
	_cleanup_(freep) char *fixed = NULL;
	const char *body = s;
	size_t n;
	char *line;

	if (!s)
		return -ENOMEM;
	n = strlen(s);
	/* Input and the store hold valid UTF-8 only, but a message cut at a
	 * byte count ("%.64s") may split a character: never send invalid JSON. */
	if (!utf8_is_valid(s, n)) {
		fixed = utf8_sanitize(s);
		if (!fixed)
			return -ENOMEM;
		body = fixed;
		n = strlen(fixed);
	}
	line = malloc(n + 2);
	if (!line)
		return -ENOMEM;
	memcpy(line, body, n);
	line[n] = '\n';
	line[n + 1] = '\0';
	*ret = line;
	*ret_len = n + 1;
	return 0;
}

/* Adds a string or null. */
static int add_string_or_null(cJSON *j, const char *key, const char *v)
{
	if (v)
		return json_add_string(j, key, v);
	return cJSON_AddNullToObject(j, key) ? 0 : -ENOMEM;
}

/* Adds a finite number or null. */
static int add_number_or_null(cJSON *j, const char *key, double v)
{
	if (isfinite(v))
		return json_add_number(j, key, v);
	return cJSON_AddNullToObject(j, key) ? 0 : -ENOMEM;
}

/* Adds an ISO 8601 time, or null for 0. */
static int add_time(cJSON *j, const char *key, uint64_t usec)
{
	char buf[64];

	if (usec == 0)
		return cJSON_AddNullToObject(j, key) ? 0 : -ENOMEM;
	return json_add_string(j, key, format_iso8601(buf, sizeof(buf), usec));
}

int ctl_study_to_json(const struct store_study *st, const struct store_study_best *best, cJSON **ret)
{
	_cleanup_(cJSON_Deletep) cJSON *j = cJSON_CreateObject();

	if (!j)
		return -ENOMEM;
	if (json_add_number(j, "id", (double)st->id) < 0 || json_add_string(j, "name", st->name) < 0 ||
	    json_add_string(j, "state", store_study_state_to_string(st->state)) < 0 ||
	    add_string_or_null(j, "engine", st->engine) < 0 || add_string_or_null(j, "model", st->model) < 0 ||
	    add_string_or_null(j, "label", st->label) < 0 || add_string_or_null(j, "message", st->message) < 0 ||
	    add_time(j, "created", st->created_usec) < 0 || add_time(j, "started", st->started_usec) < 0 ||
	    add_time(j, "finished", st->finished_usec) < 0 ||
	    json_add_number(j, "best_trial_id", (double)st->best_trial_id) < 0 ||
	    add_number_or_null(j, "best_cost_per_mtok", best ? best->cost_per_mtok : NAN) < 0 ||
	    add_number_or_null(j, "best_measurements", best ? best->n : NAN) < 0 ||
	    add_number_or_null(j, "best_spread", best ? best->spread : NAN) < 0)
		return -ENOMEM;
	*ret = TAKE_PTR(j);
	return 0;
}

int ctl_trial_to_json(const struct store_trial *t, cJSON **ret)
{
	_cleanup_(cJSON_Deletep) cJSON *j = cJSON_CreateObject();
	cJSON *knobs = NULL;

	if (!j)
		return -ENOMEM;
	if (t->knobs_json)
		knobs = cJSON_Parse(t->knobs_json);
	if (!knobs)
		knobs = cJSON_CreateObject();
	if (!knobs || !cJSON_AddItemToObject(j, "knobs", knobs)) {
		cJSON_Delete(knobs);
		return -ENOMEM;
	}
	if (json_add_number(j, "id", (double)t->id) < 0 || json_add_number(j, "seq", t->seq) < 0 ||
	    add_string_or_null(j, "kind", t->kind) < 0 ||
	    json_add_string(j, "state", store_trial_state_to_string(t->state)) < 0 ||
	    add_string_or_null(j, "failure",
			       t->failure == STORE_FAILURE_NONE ? NULL : store_failure_to_string(t->failure)) < 0 ||
	    add_string_or_null(j, "failure_message", t->failure_message) < 0 ||
	    add_number_or_null(j, "deploy_seconds", t->deploy_seconds) < 0 ||
	    add_number_or_null(j, "max_rate", t->max_rate) < 0 ||
	    add_number_or_null(j, "max_goodput", t->max_goodput) < 0 ||
	    add_number_or_null(j, "concurrency", t->concurrency) < 0 ||
	    add_number_or_null(j, "cost_per_mtok", t->cost_per_mtok) < 0 ||
	    add_time(j, "started", t->started_usec) < 0 || add_time(j, "finished", t->finished_usec) < 0 ||
	    add_string_or_null(j, "log_path", t->log_path) < 0)
		return -ENOMEM;
	/* a job on a cluster: its id, node, GPUs there, wait for resources, jobs lost */
	if (t->job_id > 0 &&
	    (json_add_number(j, "job_id", (double)t->job_id) < 0 || add_string_or_null(j, "node", t->job_node) < 0 ||
	     add_string_or_null(j, "gpus", t->gpus) < 0 ||
	     add_number_or_null(j, "pending_seconds", t->pending_seconds) < 0 ||
	     json_add_number(j, "jobs_lost", t->job_lost) < 0))
		return -ENOMEM;
	*ret = TAKE_PTR(j);
	return 0;
}

int ctl_best_to_json(const struct store_study_best *b, cJSON **ret)
{
	_cleanup_(cJSON_Deletep) cJSON *j = NULL;
	int r;

	r = ctl_trial_to_json(&b->trial, &j);
	if (r < 0)
		return r;
	cJSON_DeleteItemFromObjectCaseSensitive(j, "cost_per_mtok");
	if (add_number_or_null(j, "cost_per_mtok", b->cost_per_mtok) < 0 ||
	    json_add_number(j, "measurements", b->n) < 0 || add_number_or_null(j, "spread", b->spread) < 0 ||
	    add_number_or_null(j, "trial_cost_per_mtok", b->trial.cost_per_mtok) < 0 ||
	    add_string_or_null(j, "engine_version", b->engine_version) < 0)
		return -ENOMEM;
	*ret = TAKE_PTR(j);
	return 0;
}

/* ---- client ---- */

int ctl_client_connect(const char *path, int *ret_fd, struct error *err)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	_cleanup_(closep) int fd = -1;

	if (strlen(path) >= sizeof(sa.sun_path))
		return error_set(err, -ENAMETOOLONG, "%s: socket path too long", path);
	strcpy(sa.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return error_set(err, -errno, "socket: %s", strerror(errno));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int r = -errno;

		if (r == -ENOENT || r == -ECONNREFUSED)
			return error_set(err, r,
					 "cannot connect to goodputd at %s: %s (is it running? "
					 "'systemctl start goodputd.socket', or pass --socket)",
					 path, strerror(-r));
		return error_set(err, r, "cannot connect to goodputd at %s: %s", path, strerror(-r));
	}
	*ret_fd = TAKE_FD(fd);
	return 0;
}

/* Waits for events on fd until the deadline; -ETIMEDOUT when it passes. */
static int wait_fd(int fd, short events, uint64_t deadline_usec)
{
	for (;;) {
		struct pollfd p = { .fd = fd, .events = events };
		uint64_t now = mono_usec();
		int r;

		if (now >= deadline_usec)
			return -ETIMEDOUT;
		r = poll(&p, 1, (int)MIN((deadline_usec - now + 999) / 1000, (uint64_t)INT32_MAX));
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r > 0)
			return 0;
	}
}

static int send_all(int fd, const char *buf, size_t len, uint64_t deadline_usec)
{
	while (len > 0) {
		ssize_t n = send(fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
			int r = wait_fd(fd, POLLOUT, deadline_usec);

			if (r < 0)
				return r;
			continue;
		}
		if (n < 0)
			return -errno;
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

int ctl_client_call(int fd, const cJSON *request, uint64_t timeout_usec, cJSON **ret, struct error *err)
{
	uint64_t deadline = timeout_usec == USEC_INFINITY ? USEC_INFINITY : mono_usec() + timeout_usec;
	_cleanup_(freep) char *line = NULL, *buf = NULL;
	size_t len, used = 0, size = 0;
	int r;

	r = ctl_format_line(request, &line, &len);
	if (r < 0)
		return error_set(err, r, "formatting the request: %s", strerror(-r));
	r = send_all(fd, line, len, deadline);
	if (r == -ETIMEDOUT)
		return error_set(err, r, "goodputd did not take the request in time");
	if (r < 0)
		return error_set(err, r, "sending the request to goodputd: %s", strerror(-r));

	for (;;) {
		char *nl = used > 0 ? memchr(buf, '\n', used) : NULL;
		ssize_t n;

		if (nl)
			return json_parse_strict("goodputd's response", buf, (size_t)(nl - buf), ret, err);
		if (used == size) {
			size_t nsize = size ? size * 2 : 16384;
			char *p;

			if (size >= CTL_RESPONSE_MAX)
				return error_set(err, -EMSGSIZE, "goodputd's response is longer than %zu bytes",
						 CTL_RESPONSE_MAX);
			nsize = MIN(nsize, CTL_RESPONSE_MAX);
			p = realloc(buf, nsize);
			if (!p)
				return error_set(err, -ENOMEM, "out of memory");
			buf = p;
			size = nsize;
		}
		n = recv(fd, buf + used, size - used, MSG_DONTWAIT);
		if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
			r = wait_fd(fd, POLLIN, deadline);
			if (r == -ETIMEDOUT)
				return error_set(err, r, "goodputd did not answer in time");
			if (r < 0)
				return error_set(err, r, "waiting for goodputd: %s", strerror(-r));
			continue;
		}
		if (n < 0)
			return error_set(err, -errno, "reading goodputd's response: %s", strerror(errno));
		if (n == 0)
			return error_set(err, -ECONNRESET, "goodputd closed the connection without answering");
		used += (size_t)n;
	}
}
