/* test-control.c — the control socket server (control.c) on a real sd-event
 * loop and real UNIX sockets in one process: many clients answered in one
 * burst, pipelined requests answered in order, a deferred answer holding
 * back only its own connection, and clients that leave while their answer
 * is deferred; and the arithmetic of a uid's budget of the loop's time. */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "control-internal.h"
#include "control.h"
#include "macro.h"
#include "tests.h"
#include "time-util.h"

#define N_CLIENTS 100

struct fixture {
	sd_event *e;
	struct ctl_server *s;
	struct ctl_pending *pending[4];
	unsigned n_pending, n_handled;
	char path[108];
};

/* "status" answers {"ok":true,"n":N}; "report" defers its answer. */
static cJSON *handler(const struct ctl_peer *peer, const struct ctl_request *req, void *userdata)
{
	struct fixture *f = userdata;
	cJSON *j;

	f->n_handled++;
	if (req->command == CTL_REPORT) {
		CHECK(f->n_pending < ELEMENTSOF(f->pending));
		f->pending[f->n_pending] = ctl_server_defer(f->s);
		CHECK(f->pending[f->n_pending]);
		f->n_pending++;
		return NULL;
	}
	j = ctl_response_ok(req->id);
	CHECK(j && cJSON_AddNumberToObject(j, "n", f->n_handled));
	return j;
}

static void setup(struct fixture *f)
{
	struct ctl_limits l = { .max_connections = 2 * N_CLIENTS,
				.max_request_bytes = 4096,
				.idle_timeout_usec = 30 * USEC_PER_SEC };
	struct error err = { 0 };
	char dir[] = "/tmp/test-control-XXXXXX";
	int fd = -1;

	CHECK(mkdtemp(dir));
	snprintf(f->path, sizeof(f->path), "%s/s", dir);
	CHECK_INT_EQ(sd_event_new(&f->e), 0);
	CHECK_INT_EQ(ctl_listen_unix(f->path, 0600, (gid_t)-1, &fd, &err), 0);
	CHECK_INT_EQ(ctl_server_new(f->e, fd, &l, handler, f, &f->s), 0);
	CHECK_INT_EQ(ctl_server_set_unlink_path(f->s, f->path), 0);
}

static void teardown(struct fixture *f)
{
	char dir[108];

	snprintf(dir, sizeof(dir), "%s", f->path);
	*strrchr(dir, '/') = '\0';
	f->s = ctl_server_free(f->s);
	for (unsigned i = 0; i < f->n_pending; i++)
		ctl_pending_answer(f->pending[i], NULL); /* orphaned: only freed */
	f->e = sd_event_unref(f->e);
	CHECK(access(f->path, F_OK) < 0);
	CHECK_INT_EQ(rmdir(dir), 0);
}

static int client(const struct fixture *f)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

	CHECK(fd >= 0);
	strcpy(sa.sun_path, f->path);
	CHECK_INT_EQ(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return fd;
}

static void send_str(int fd, const char *s)
{
	CHECK_INT_EQ(write(fd, s, strlen(s)), (ssize_t)strlen(s));
}

/* Runs the loop until fd has `lines` complete lines (or the deadline). */
static size_t pump_until(struct fixture *f, int fd, char *buf, size_t size, unsigned lines, uint64_t max_usec)
{
	uint64_t end = mono_usec() + max_usec;
	size_t len = 0;

	for (;;) {
		unsigned n = 0;
		ssize_t k;

		CHECK(sd_event_run(f->e, 10 * USEC_PER_MSEC) >= 0);
		k = read(fd, buf + len, size - 1 - len);
		if (k > 0)
			len += (size_t)k;
		buf[len] = '\0';
		for (char *p = buf; (p = strchr(p, '\n')); p++)
			n++;
		if (n >= lines || mono_usec() > end || k == 0)
			return len;
	}
}

static void test_burst(void)
{
	struct fixture f = { 0 };
	int fds[N_CLIENTS];
	char buf[256];
	unsigned answered = 0;

	setup(&f);
	for (int i = 0; i < N_CLIENTS; i++)
		fds[i] = client(&f);
	/* Accept everyone, then all ask at once. */
	for (int i = 0; i < 20; i++)
		CHECK(sd_event_run(f.e, 1000) >= 0);
	CHECK_INT_EQ(ctl_server_n_connections(f.s), N_CLIENTS);
	for (int i = 0; i < N_CLIENTS; i++)
		send_str(fds[i], "{\"command\":\"status\",\"id\":1}\n");
	for (uint64_t end = mono_usec() + 10 * USEC_PER_SEC; answered < N_CLIENTS && mono_usec() < end;) {
		CHECK(sd_event_run(f.e, 10 * USEC_PER_MSEC) >= 0);
		for (int i = 0; i < N_CLIENTS; i++) {
			ssize_t k;

			if (fds[i] < 0)
				continue;
			k = read(fds[i], buf, sizeof(buf) - 1);
			if (k <= 0)
				continue;
			buf[k] = '\0';
			CHECK_STR_CONTAINS(buf, "{\"ok\":true,\"id\":1,\"n\":");
			CHECK(buf[k - 1] == '\n');
			fds[i] = safe_close(fds[i]);
			answered++;
		}
	}
	CHECK_INT_EQ(answered, N_CLIENTS);
	CHECK_INT_EQ(f.n_handled, N_CLIENTS);
	/* Closed clients are noticed and freed. */
	for (int i = 0; i < 20 && ctl_server_n_connections(f.s) > 0; i++)
		CHECK(sd_event_run(f.e, 10 * USEC_PER_MSEC) >= 0);
	CHECK_INT_EQ(ctl_server_n_connections(f.s), 0);
	teardown(&f);
}

static void test_deferred(void)
{
	struct fixture f = { 0 };
	char buf[1024];
	int a, b, c;
	size_t len;

	setup(&f);
	a = client(&f);
	b = client(&f);
	/* a: a deferred request, then a pipelined one that must wait for it. */
	send_str(a, "{\"command\":\"report\",\"study\":\"x\",\"id\":1}\n{\"command\":\"status\",\"id\":2}\n");
	len = pump_until(&f, a, buf, sizeof(buf), 1, 200 * USEC_PER_MSEC);
	CHECK_INT_EQ(len, 0);
	CHECK_INT_EQ(f.n_pending, 1);
	CHECK_INT_EQ(f.n_handled, 1);
	/* b is answered meanwhile. */
	send_str(b, "{\"command\":\"status\",\"id\":3}\n");
	len = pump_until(&f, b, buf, sizeof(buf), 1, 2 * USEC_PER_SEC);
	CHECK_STR_CONTAINS(buf, "\"id\":3");
	/* The deferred answer arrives: both of a's answers, in order. */
	{
		cJSON *ans = ctl_response_ok(NULL);

		CHECK(ans && cJSON_AddStringToObject(ans, "html", "/x/report.html"));
		ctl_pending_answer(f.pending[0], ans);
		f.pending[0] = NULL;
	}
	len = pump_until(&f, a, buf, sizeof(buf), 2, 2 * USEC_PER_SEC);
	CHECK(len > 0);
	CHECK_STR_EQ(buf, "{\"ok\":true,\"html\":\"/x/report.html\"}\n{\"ok\":true,\"id\":2,\"n\":3}\n");

	/* c leaves while its answer is deferred: the answer is dropped. */
	c = client(&f);
	send_str(c, "{\"command\":\"report\",\"study\":\"x\"}\n");
	for (int i = 0; i < 20 && f.n_pending < 2; i++)
		CHECK(sd_event_run(f.e, 10 * USEC_PER_MSEC) >= 0);
	CHECK_INT_EQ(f.n_pending, 2);
	safe_close(c);
	for (int i = 0; i < 20 && ctl_server_n_connections(f.s) > 2; i++)
		CHECK(sd_event_run(f.e, 10 * USEC_PER_MSEC) >= 0);
	CHECK_INT_EQ(ctl_server_n_connections(f.s), 2);
	ctl_pending_answer(f.pending[1], ctl_response_ok(NULL));
	f.pending[1] = NULL;
	CHECK(sd_event_run(f.e, 10 * USEC_PER_MSEC) >= 0);

	/* b's deferred answer is still awaited when the server goes away. */
	send_str(b, "{\"command\":\"report\",\"study\":\"y\"}\n");
	for (int i = 0; i < 20 && f.n_pending < 3; i++)
		CHECK(sd_event_run(f.e, 10 * USEC_PER_MSEC) >= 0);
	CHECK_INT_EQ(f.n_pending, 3);
	safe_close(a);
	safe_close(b);
	teardown(&f); /* frees pending[2] after the server */
}

/* What is owed is paid back at the rate, never below zero; the wait is
 * until it is back within the burst; a uid's debt outlives its connections. */
static void test_budget(void)
{
	struct ctl_budget b = { 0 };
	struct ctl_uid_counts c = { 0 };

	ctl_budget_charge(&b, 300000, 1000000, 25);
	CHECK_INT_EQ(ctl_budget_owed(&b, 1000000, 25), 300000);
	CHECK_INT_EQ(ctl_budget_wait(&b, 200000, 25), 400000); /* 100 ms over, paid at 25 %: 400 ms */
	CHECK_INT_EQ(ctl_budget_owed(&b, 1400000, 25), 200000);
	CHECK_INT_EQ(ctl_budget_wait(&b, 200000, 25), 0);
	CHECK_INT_EQ(ctl_budget_owed(&b, 9000000, 25), 0);
	ctl_budget_charge(&b, 1000, 9000000, 25);
	CHECK_INT_EQ(ctl_budget_owed(&b, 9000000, 25), 1000);

	CHECK(ctl_uid_counts_add(&c, 65534) == 0);
	CHECK(ctl_uid_counts_budget(&c, 65534) && !ctl_uid_counts_budget(&c, 65533));
	ctl_budget_charge(ctl_uid_counts_budget(&c, 65534), 50000, 0, 25);
	ctl_uid_counts_remove(&c, 65534);
	CHECK_INT_EQ(ctl_uid_counts_get(&c, 65534), 0);
	CHECK(ctl_uid_counts_budget(&c, 65534)); /* reconnecting does not wipe it */
	CHECK(ctl_uid_counts_add(&c, 65534) == 0);
	CHECK_INT_EQ(ctl_budget_owed(ctl_uid_counts_budget(&c, 65534), 0, 25), 50000);
	ctl_uid_counts_done(&c);
}

int main(void)
{
	test_budget();
	test_burst();
	test_deferred();
	return 0;
}
