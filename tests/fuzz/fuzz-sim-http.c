/* fuzz-sim-http.c — libFuzzer target for goodput-sim's HTTP handling: the
 * input is what a client sends on one connection (request lines, headers,
 * bodies, several requests pipelined, or junk). One server runs for the
 * whole session on its own sd-event loop, exactly as `goodput-sim serve`
 * (libmicrohttpd in epoll mode, the routes, the body buffering and its caps,
 * the connection deadlines, the streaming pacer), with the fixed-ITL pacer so
 * that an answer takes microseconds; each input arrives on a socketpair
 * handed to MHD_add_connection. The loop then runs until the server has
 * nothing left to do with it (its idle deadline, a few milliseconds here,
 * may cut it first), the client end is closed, and the server must let go
 * of the connection and every byte it buffered. No crash, leak,
 * out-of-bounds access or undefined behaviour; no connection left behind. */
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "log.h"
#include "server-internal.h"
#include "time-util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static sd_event *event;
static struct sim_server *server;

static void setup(void)
{
	struct sim_server_config sc;
	struct sim_engine_config ec;
	struct error err = { 0 };

	signal(SIGPIPE, SIG_IGN);
	log_set_max_level(LOG_CRIT);
	if (sd_event_new(&event) < 0)
		abort();
	sim_server_config_init(&sc);
	sc.port = 0;
	sc.load_usec_set = true;
	sc.load_usec = 0;
	sc.fixed_itl_ms = 0.01;
	sc.max_body_bytes = 16384;
	sc.max_buffered_bytes = 65536;
	/* Deadlines short enough to pass while an input is handled: a connection
	 * left idle after its answers is cut by the server (server-conns.c). */
	sc.idle_timeout_usec = 2 * USEC_PER_MSEC;
	sc.header_timeout_usec = 5 * USEC_PER_MSEC;
	sc.body_timeout_usec = 5 * USEC_PER_MSEC;
	sim_engine_config_init(&ec);
	ec.max_model_len = 64; /* at most 64 tokens per answer */
	if (sim_server_new(event, &sc, &ec, &server, &err) < 0) {
		fprintf(stderr, "fuzz-sim-http: %s\n", err.msg);
		abort();
	}
	while (!server->ready)
		if (sd_event_run(event, 100 * USEC_PER_MSEC) < 0)
			abort();
}

/* Runs the loop until a run dispatches nothing for 3 ms (or 50 ms passed). */
static void settle(void)
{
	uint64_t end = mono_usec() + 50 * USEC_PER_MSEC;

	while (mono_usec() < end) {
		int r = sd_event_run(event, 3 * USEC_PER_MSEC);

		if (r < 0)
			abort();
		if (r == 0)
			break;
	}
}

static void drain(int fd)
{
	char buf[65536];

	while (read(fd, buf, sizeof(buf)) > 0)
		;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sockaddr_in peer = { .sin_family = AF_INET,
				    .sin_port = htons(40000),
				    .sin_addr.s_addr = htonl(0x7f000001) };
	unsigned before;
	int sv[2];

	if (!server)
		setup();
	before = server->n_conns;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) < 0)
		abort();
	/* What does not fit in the socket's buffer at once is not sent: inputs
	 * are small (-max_len), the buffer holds them. */
	if (size > 0 && write(sv[0], data, size) < 0 && errno != EAGAIN)
		abort();
	if (MHD_add_connection(server->mhd, sv[1], (const struct sockaddr *)&peer, sizeof(peer)) != MHD_YES)
		abort();
	sim_server_run_mhd(server);
	settle();
	drain(sv[0]);
	close(sv[0]);
	/* The client is gone: the server closes its end and frees everything. */
	for (int i = 0; i < 100 && (server->n_conns > before || server->body_bytes > 0); i++) {
		sim_server_run_mhd(server);
		settle();
	}
	if (server->n_conns > before || server->body_bytes > 0)
		abort();
	return 0;
}
