/* sim-streams.c — how many concurrent SSE streams one goodput-sim process
 * paces accurately on this machine.
 *
 * For each stream count N it starts `goodput-sim --fixed-itl-ms ITL` (the
 * HTTP pacing path without the engine model, so every stream gets one token
 * per ITL at its own phase, as in PLATFORM.md's prototype), opens N
 * streaming completions from one epoll loop that reads and discards, and
 * after a warm-up compares two scrapes of /metrics: the server's own pacing
 * lateness histogram (actual hand-off to HTTP − scheduled time), its CPU
 * time (/proc/PID/stat) and resident memory (/proc/PID/status) against an
 * idle baseline. The client runs on the same two cores, so the figures are
 * for a loaded machine; the "client" and "others" columns show how much CPU
 * this client and every other process on the machine took meanwhile (in % of
 * one core), so a run disturbed by other work can be told apart.
 *
 * Usage: sim-streams --sim PATH [--streams 100,250,500,1000] [--duration S]
 *        [--warmup S] [--itl-ms MS] [--check-p99-ms MS] [--engine] [--sim-arg ARG]...
 * --engine paces by the engine model (all running streams get their tokens
 * at the same step ends: bursts) instead of the fixed ITL.
 * --check-p99-ms makes it exit 1 when any run's p99 exceeds MS or fewer than
 * 90 % of the expected tokens arrived (the smoke test). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_BUCKETS 64

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

struct sim_proc {
	pid_t pid;
	int port;
};

static char *extra_args[32];
static int n_extra_args;
static bool engine_mode;

static int start_sim(const char *exe, double itl_ms, int streams, struct sim_proc *ret)
{
	char itl[32], conns[32], line[256];
	char *args[48];
	int n = 0;
	int fds[2];
	pid_t pid;
	FILE *f;

	snprintf(itl, sizeof(itl), "%g", itl_ms);
	snprintf(conns, sizeof(conns), "%d", streams + 64);
	if (pipe(fds) < 0)
		return -errno;
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		int null = open("/dev/null", O_WRONLY | O_CLOEXEC);

		dup2(fds[1], STDOUT_FILENO);
		if (null >= 0)
			dup2(null, STDERR_FILENO);
		close(fds[0]);
		close(fds[1]);
		args[n++] = (char *)exe;
		args[n++] = (char *)"--port";
		args[n++] = (char *)"0";
		args[n++] = (char *)"--load-time";
		args[n++] = (char *)"0";
		args[n++] = (char *)"--max-connections";
		args[n++] = conns;
		if (!engine_mode) {
			args[n++] = (char *)"--fixed-itl-ms";
			args[n++] = itl;
		}
		for (int i = 0; i < n_extra_args; i++)
			args[n++] = extra_args[i];
		args[n] = NULL;
		execv(exe, args);
		_exit(127);
	}
	close(fds[1]);
	f = fdopen(fds[0], "r");
	if (!f)
		return -errno;
	ret->pid = pid;
	ret->port = 0;
	while (fgets(line, sizeof(line), f)) {
		char *p = strstr(line, "listening on http://");

		if (p && (p = strrchr(p, ':'))) {
			ret->port = atoi(p + 1);
			break;
		}
	}
	fclose(f);
	return ret->port > 0 ? 0 : -EIO;
}

static void stop_sim(struct sim_proc *p)
{
	int status;

	kill(p->pid, SIGTERM);
	waitpid(p->pid, &status, 0);
}

static int connect_nb(int port, bool nonblock)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		close(fd);
		return -errno;
	}
	if (nonblock)
		fcntl(fd, F_SETFL, O_NONBLOCK);
	return fd;
}

struct scrape {
	double le[MAX_BUCKETS];
	double cum[MAX_BUCKETS];
	int n;
	double count, cpu_s, rss_kb, t;
	double busy_s, self_s; /* whole machine's busy CPU time (/proc/stat), this client's */
};

static void machine_cpu(struct scrape *s)
{
	unsigned long long v[10] = { 0 };
	struct rusage ru;
	FILE *f = fopen("/proc/stat", "re");

	if (f) {
		if (fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5],
			   &v[6], &v[7]) == 8)
			s->busy_s = (double)(v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / (double)sysconf(_SC_CLK_TCK);
		fclose(f);
	}
	if (getrusage(RUSAGE_SELF, &ru) == 0)
		s->self_s = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
			    (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

/* GET /metrics (blocking: the server answers within milliseconds) + /proc figures. */
static int scrape(const struct sim_proc *p, struct scrape *s)
{
	static const char req[] = "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
	char *buf = NULL, path[64], line[512];
	size_t len = 0, cap = 0;
	unsigned long ut = 0, st = 0;
	int fd = connect_nb(p->port, false);
	FILE *f;

	if (fd < 0)
		return fd;
	if (write(fd, req, sizeof(req) - 1) < 0) {
		close(fd);
		return -errno;
	}
	for (;;) {
		ssize_t n;

		if (len + 65536 > cap) {
			cap = cap ? cap * 2 : 262144;
			buf = realloc(buf, cap);
			if (!buf)
				return -ENOMEM;
		}
		n = read(fd, buf + len, cap - len - 1);
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	close(fd);
	buf[len] = '\0';
	memset(s, 0, sizeof(*s));
	s->t = now_s();
	for (char *l = strtok(buf, "\n"); l; l = strtok(NULL, "\n")) {
		char *le;

		if (strncmp(l, "goodput_sim_pacing_lateness_seconds_bucket", 42) == 0 && (le = strstr(l, "le=\"")) &&
		    s->n < MAX_BUCKETS) {
			s->le[s->n] = strncmp(le + 4, "+Inf", 4) == 0 ? INFINITY : strtod(le + 4, NULL);
			s->cum[s->n] = strtod(strrchr(l, ' ') + 1, NULL);
			s->n++;
		} else if (strncmp(l, "goodput_sim_pacing_lateness_seconds_count", 41) == 0)
			s->count = strtod(strrchr(l, ' ') + 1, NULL);
	}
	free(buf);

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)p->pid);
	f = fopen(path, "re");
	if (f) {
		/* Fields 14 and 15: utime, stime (after the ")" of comm). */
		if (fgets(line, sizeof(line), f)) {
			char *q = strrchr(line, ')');

			if (q)
				sscanf(q + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st);
		}
		fclose(f);
	}
	s->cpu_s = (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
	machine_cpu(s);
	snprintf(path, sizeof(path), "/proc/%d/status", (int)p->pid);
	f = fopen(path, "re");
	if (f) {
		while (fgets(line, sizeof(line), f))
			if (strncmp(line, "VmRSS:", 6) == 0)
				s->rss_kb = strtod(line + 6, NULL);
		fclose(f);
	}
	return 0;
}

/* Quantile q of the lateness observed between a and b (linear within a bucket). */
static double quantile(const struct scrape *a, const struct scrape *b, double q)
{
	double total = b->count - a->count, target = q * total, prev_cum = 0, prev_le = 0;

	if (total <= 0)
		return NAN;
	for (int i = 0; i < b->n && i < a->n; i++) {
		double cum = b->cum[i] - a->cum[i];

		if (cum >= target) {
			if (isinf(b->le[i]))
				return prev_le;
			return prev_le +
			       (b->le[i] - prev_le) * (cum > prev_cum ? (target - prev_cum) / (cum - prev_cum) : 1);
		}
		prev_cum = cum;
		prev_le = b->le[i];
	}
	return prev_le;
}

static double fraction_below(const struct scrape *a, const struct scrape *b, double le)
{
	double total = b->count - a->count;

	for (int i = 0; i < b->n && i < a->n; i++)
		if (fabs(b->le[i] - le) < 1e-12)
			return total > 0 ? (b->cum[i] - a->cum[i]) / total : NAN;
	return NAN;
}

struct result {
	int streams;
	double p50_ms, p99_ms, below2, cpu_frac, rss_per_stream_kb, rss_mb, tokens_ratio;
	double client_frac, other_frac; /* this client's CPU, everything else's (cores) */
};

static int run_one(const char *exe, int n, double itl_ms, double warmup, double duration, struct result *res)
{
	struct sim_proc p = { 0 };
	struct scrape idle, a, b;
	struct epoll_event ev, evs[256];
	int *fds, ep, r;
	unsigned long long tokens = 0, tokens_a = 0;
	unsigned max_tokens = (unsigned)((warmup + duration + 2.0) * 1000.0 / itl_ms) + 10;
	char body[256], req[512];
	double t_end, t_a = 0;
	bool scraped_a = false;

	r = start_sim(exe, itl_ms, n, &p);
	if (r < 0) {
		fprintf(stderr, "sim-streams: cannot start %s\n", exe);
		return r;
	}
	usleep(100000);
	scrape(&p, &idle);
	fds = calloc((size_t)n, sizeof(int));
	ep = epoll_create1(EPOLL_CLOEXEC);
	snprintf(body, sizeof(body), "{\"prompt\":\"w1 w2 w3\",\"max_tokens\":%u,\"stream\":true,\"ignore_eos\":true}",
		 max_tokens);
	snprintf(req, sizeof(req),
		 "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: "
		 "%zu\r\n\r\n%s",
		 strlen(body), body);
	for (int i = 0; i < n; i++) {
		fds[i] = connect_nb(p.port, false);
		if (fds[i] < 0 || write(fds[i], req, strlen(req)) < 0) {
			fprintf(stderr, "sim-streams: connection %d failed\n", i);
			n = i;
			break;
		}
		fcntl(fds[i], F_SETFL, O_NONBLOCK);
		ev = (struct epoll_event){ .events = EPOLLIN, .data.fd = fds[i] };
		epoll_ctl(ep, EPOLL_CTL_ADD, fds[i], &ev);
	}
	t_end = now_s() + warmup + duration;
	t_a = now_s() + warmup;
	while (now_s() < t_end) {
		int k = epoll_wait(ep, evs, 256, 50);

		for (int i = 0; i < k; i++) {
			char buf[16384];
			ssize_t m;

			while ((m = read(evs[i].data.fd, buf, sizeof(buf))) > 0)
				for (ssize_t j = 0; j + 5 < m; j++)
					if (buf[j] == 'd' && memcmp(buf + j, "data:", 5) == 0)
						tokens++;
		}
		if (!scraped_a && now_s() >= t_a) {
			scrape(&p, &a);
			tokens_a = tokens;
			scraped_a = true;
		}
	}
	scrape(&p, &b);
	for (int i = 0; i < n; i++)
		close(fds[i]);
	close(ep);
	free(fds);
	stop_sim(&p);

	res->streams = n;
	res->p50_ms = quantile(&a, &b, 0.50) * 1000;
	res->p99_ms = quantile(&a, &b, 0.99) * 1000;
	res->below2 = fraction_below(&a, &b, 0.002);
	res->cpu_frac = (b.cpu_s - a.cpu_s) / (b.t - a.t);
	res->client_frac = (b.self_s - a.self_s) / (b.t - a.t);
	res->other_frac = (b.busy_s - a.busy_s) / (b.t - a.t) - res->cpu_frac - res->client_frac;
	res->rss_mb = b.rss_kb / 1024;
	res->rss_per_stream_kb = n > 0 ? (b.rss_kb - idle.rss_kb) / n : 0;
	res->tokens_ratio = (double)(tokens - tokens_a) / ((b.t - a.t) * n * 1000.0 / itl_ms);
	return 0;
}

int main(int argc, char **argv)
{
	const char *exe = NULL, *list = "100,250,500,1000";
	double duration = 5, warmup = 1, itl_ms = 10, check_p99 = 0;
	struct rlimit rl;
	int status = 0;
	char *copy, *save = NULL;

	for (int i = 1; i < argc; i++) {
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (strcmp(argv[i], "--engine") == 0) {
			engine_mode = true;
			continue;
		}
		if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
			printf("Usage: sim-streams --sim PATH [--streams 100,250,500,1000] [--duration S] [--warmup "
			       "S]\n"
			       "                   [--itl-ms MS] [--check-p99-ms MS] [--engine] [--sim-arg ARG]...\n"
			       "--engine paces by the engine model instead of --fixed-itl-ms (pass the model with\n"
			       "--sim-arg, e.g. --sim-arg --gpu --sim-arg A100); the tokens column is then relative\n"
			       "to --itl-ms, not a check.\n");
			return 0;
		}
		if (!v) {
			fprintf(stderr, "sim-streams: %s needs a value\n", argv[i]);
			return 2;
		}
		if (strcmp(argv[i], "--sim") == 0)
			exe = v;
		else if (strcmp(argv[i], "--streams") == 0)
			list = v;
		else if (strcmp(argv[i], "--duration") == 0)
			duration = atof(v);
		else if (strcmp(argv[i], "--warmup") == 0)
			warmup = atof(v);
		else if (strcmp(argv[i], "--itl-ms") == 0)
			itl_ms = atof(v);
		else if (strcmp(argv[i], "--check-p99-ms") == 0)
			check_p99 = atof(v);
		else if (strcmp(argv[i], "--sim-arg") == 0 &&
			 n_extra_args < (int)(sizeof(extra_args) / sizeof(extra_args[0])))
			extra_args[n_extra_args++] = (char *)v;
		else {
			fprintf(stderr, "sim-streams: unknown flag %s\n", argv[i]);
			return 2;
		}
		i++;
	}
	if (!exe || duration <= 0 || itl_ms <= 0) {
		fprintf(stderr, "sim-streams: --sim PATH is required (see --help)\n");
		return 2;
	}
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	signal(SIGPIPE, SIG_IGN);

	printf("goodput-sim pacing, one token per %g ms per stream, %g s measured after %g s warm-up\n", itl_ms,
	       duration, warmup);
	printf("%8s %9s %9s %8s %7s %11s %8s %10s %8s %7s %7s\n", "streams", "p50 ms", "p99 ms", "<=2ms", "cpu",
	       "cpu/stream", "rss MB", "KB/stream", "tokens", "client", "others");
	copy = strdup(list);
	for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		struct result r;

		if (run_one(exe, atoi(tok), itl_ms, warmup, duration, &r) < 0) {
			status = 1;
			break;
		}
		printf("%8d %9.3f %9.3f %7.2f%% %6.1f%% %10.3f%% %8.1f %10.1f %7.1f%% %6.1f%% %6.1f%%\n", r.streams,
		       r.p50_ms, r.p99_ms, r.below2 * 100, r.cpu_frac * 100, r.cpu_frac * 100 / r.streams, r.rss_mb,
		       r.rss_per_stream_kb, r.tokens_ratio * 100, r.client_frac * 100, r.other_frac * 100);
		fflush(stdout);
		if (check_p99 > 0 && (!(r.p99_ms <= check_p99) || r.tokens_ratio < 0.9)) {
			fprintf(stderr, "sim-streams: %d streams: p99 %.3f ms (limit %g), %.1f%% of tokens\n",
				r.streams, r.p99_ms, check_p99, r.tokens_ratio * 100);
			status = 1;
		}
	}
	free(copy);
	return status;
}
