/* goodputd-bench.c — what goodputd costs and how fast it answers.
 *
 * Starts a private goodputd (its own socket and state directory in /tmp),
 * then measures:
 *   1. idle memory and CPU: VmRSS as the kernel reports it, split into
 *      anonymous and file-backed pages, Pss, private clean/dirty pages
 *      (smaps_rollup) and the largest mappings, and the CPU time used over
 *      an idle interval;
 *   2. `best` latency under load: a study runs (real goodput-sim servers by
 *      default, or --dry-run), and once it has a best configuration N
 *      clients connected at once each send `best` at the same moment, for
 *      several rounds; every request's latency (send -> full answer line) is
 *      recorded on one epoll loop, and p50/p90/p99/max are printed;
 *   3. memory again once the study has finished.
 * --per-round prints each burst's slowest answer and what the study was
 * doing then (slow bursts come with a server starting or a probe beginning,
 * when the study's processes take the CPU).
 * --check-p99-ms and --check-rss-mb turn the figures into a pass/fail
 * (the small run in suite 'bench-smoke' uses generous bounds). */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

extern char **environ;

struct opts {
	const char *goodputd, *sim_dir;
	unsigned clients, rounds, trials;
	double idle_sec;
	bool dry_run, per_round;
	double check_p99_ms, check_rss_mb;
};

static char tmpdir[64], sock_path[96], log_path[96];
static pid_t daemon_pid;

static double now_sec(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void sleep_sec(double s)
{
	struct timespec ts = { .tv_sec = (time_t)s, .tv_nsec = (long)((s - (double)(time_t)s) * 1e9) };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st, (void)flag, (void)ftw;
	(void)remove(path);
	return 0;
}

static void show_log_tail(void)
{
	char buf[4096];
	FILE *f = fopen(log_path, "re");
	size_t n;

	if (!f)
		return;
	if (fseek(f, -(long)sizeof(buf) + 1, SEEK_END) < 0)
		rewind(f);
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	fprintf(stderr, "---- goodputd log (tail) ----\n%s\n", buf);
}

static void cleanup(void)
{
	if (daemon_pid > 0) {
		kill(daemon_pid, SIGTERM);
		for (int i = 0; i < 300 && waitpid(daemon_pid, NULL, WNOHANG) == 0; i++)
			sleep_sec(0.1);
		if (waitpid(daemon_pid, NULL, WNOHANG) == 0) {
			kill(daemon_pid, SIGKILL);
			waitpid(daemon_pid, NULL, 0);
		}
		daemon_pid = 0;
	}
	if (tmpdir[0])
		nftw(tmpdir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static _Noreturn void die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static _Noreturn void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fprintf(stderr, "goodputd-bench: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	show_log_tail();
	cleanup();
	exit(1);
}

static int connect_daemon(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		die("socket: %s", strerror(errno));
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock_path);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int e = errno;

		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

/* One request on a fresh connection; the answer (the caller frees) or NULL. */
static cJSON *request(const char *line)
{
	char buf[1 << 16];
	size_t len = 0, ll = strlen(line);
	int fd = connect_daemon();
	cJSON *j = NULL;

	if (fd < 0)
		return NULL;
	if (write(fd, line, ll) != (ssize_t)ll) {
		close(fd);
		return NULL;
	}
	while (len < sizeof(buf) - 1 && !memchr(buf, '\n', len)) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ssize_t n;

		if (poll(&p, 1, 10000) <= 0)
			break;
		n = read(fd, buf + len, sizeof(buf) - 1 - len);
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	close(fd);
	buf[len] = '\0';
	if (memchr(buf, '\n', len))
		j = cJSON_Parse(buf);
	return j;
}

static bool is_ok(const cJSON *j)
{
	return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "ok"));
}

static void start_daemon(const struct opts *o)
{
	char *argv[8], *path_env = NULL, **env;
	posix_spawn_file_actions_t fa;
	size_t n = 0, k = 0;
	const char *path = getenv("PATH");
	char state[128];

	snprintf(state, sizeof(state), "%s/state", tmpdir);
	argv[k++] = (char *)o->goodputd;
	argv[k++] = "--socket";
	argv[k++] = sock_path;
	argv[k++] = "--state-dir";
	argv[k++] = state;
	if (o->dry_run)
		argv[k++] = "--dry-run";
	argv[k] = NULL;

	while (environ[n])
		n++;
	env = calloc(n + 2, sizeof(char *));
	if (!env || asprintf(&path_env, "PATH=%s%s%s", o->sim_dir ? o->sim_dir : "", o->sim_dir ? ":" : "",
			     path ? path : "/usr/bin:/bin") < 0)
		die("out of memory");
	k = 0;
	env[k++] = path_env;
	for (size_t i = 0; i < n; i++)
		if (strncmp(environ[i], "PATH=", 5) != 0 && strncmp(environ[i], "NOTIFY_SOCKET=", 14) != 0 &&
		    strncmp(environ[i], "LISTEN_", 7) != 0 && strncmp(environ[i], "WATCHDOG_", 9) != 0)
			env[k++] = environ[i];
	env[k] = NULL;

	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 1, log_path, O_WRONLY | O_CREAT | O_APPEND, 0644);
	posix_spawn_file_actions_adddup2(&fa, 1, 2);
	if (posix_spawn(&daemon_pid, o->goodputd, &fa, NULL, argv, env) != 0)
		die("cannot start %s: %s", o->goodputd, strerror(errno));
	posix_spawn_file_actions_destroy(&fa);
	free(path_env);
	free(env);

	for (double end = now_sec() + 30; now_sec() < end; sleep_sec(0.02)) {
		cJSON *j;

		if (waitpid(daemon_pid, NULL, WNOHANG) == daemon_pid) {
			daemon_pid = 0;
			die("goodputd exited during start-up");
		}
		j = request("{\"command\":\"status\"}\n");
		if (j && is_ok(j)) {
			cJSON_Delete(j);
			return;
		}
		cJSON_Delete(j);
	}
	die("goodputd did not answer on %s", sock_path);
}

struct mem {
	long vmrss, rss_anon, rss_file, pss, priv_clean, priv_dirty, shared_clean;
};

static long field_kb(const char *text, const char *key)
{
	const char *p = strstr(text, key);

	return p ? strtol(p + strlen(key), NULL, 10) : -1;
}

static size_t read_text(const char *path, char *buf, size_t size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	size_t len = 0;
	ssize_t n;

	if (fd < 0)
		return 0;
	while (len < size - 1 && (n = read(fd, buf + len, size - 1 - len)) > 0)
		len += (size_t)n;
	close(fd);
	buf[len] = '\0';
	return len;
}

static void read_mem(struct mem *m)
{
	char path[64], buf[8192];

	snprintf(path, sizeof(path), "/proc/%d/status", (int)daemon_pid);
	read_text(path, buf, sizeof(buf));
	m->vmrss = field_kb(buf, "\nVmRSS:");
	m->rss_anon = field_kb(buf, "\nRssAnon:");
	m->rss_file = field_kb(buf, "\nRssFile:");
	snprintf(path, sizeof(path), "/proc/%d/smaps_rollup", (int)daemon_pid);
	read_text(path, buf, sizeof(buf));
	m->pss = field_kb(buf, "\nPss:");
	m->priv_clean = field_kb(buf, "\nPrivate_Clean:");
	m->priv_dirty = field_kb(buf, "\nPrivate_Dirty:");
	m->shared_clean = field_kb(buf, "\nShared_Clean:");
}

static void print_mem(const char *what, const struct mem *m)
{
	printf("%s: VmRSS %.1f MB (anon %.1f, file %.1f), Pss %.1f MB, private %.1f MB "
	       "(dirty %.1f, clean %.1f), shared clean %.1f MB\n",
	       what, m->vmrss / 1024.0, m->rss_anon / 1024.0, m->rss_file / 1024.0, m->pss / 1024.0,
	       (m->priv_clean + m->priv_dirty) / 1024.0, m->priv_dirty / 1024.0, m->priv_clean / 1024.0,
	       m->shared_clean / 1024.0);
}

/* The mappings with the most resident pages, by file name (smaps). */
static void print_top_mappings(unsigned top)
{
	struct {
		char name[64];
		long rss, priv;
	} agg[128];
	size_t n = 0, cur = SIZE_MAX;
	char path[64], line[512];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/smaps", (int)daemon_pid);
	f = fopen(path, "re");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		unsigned long a, b;
		char name[256] = "[anon]";
		long v;

		/* A mapping's header: "start-end perms offset dev inode [path]"; the
		 * field lines ("Rss:    12 kB") never parse as "hex-hex". */
		if (sscanf(line, "%lx-%lx %*s %*s %*s %*s %255s", &a, &b, name) >= 2) {
			const char *base = strrchr(name, '/') ? strrchr(name, '/') + 1 : name;

			cur = SIZE_MAX;
			for (size_t i = 0; i < n; i++)
				if (strcmp(agg[i].name, base) == 0)
					cur = i;
			if (cur == SIZE_MAX && n < 128) {
				cur = n++;
				snprintf(agg[cur].name, sizeof(agg[cur].name), "%s", base);
				agg[cur].rss = agg[cur].priv = 0;
			}
		} else if (cur != SIZE_MAX && sscanf(line, "Rss: %ld", &v) == 1)
			agg[cur].rss += v;
		else if (cur != SIZE_MAX &&
			 (sscanf(line, "Private_Dirty: %ld", &v) == 1 || sscanf(line, "Private_Clean: %ld", &v) == 1))
			agg[cur].priv += v;
	}
	fclose(f);
	printf("  largest resident mappings:");
	for (unsigned k = 0; k < top && k < n; k++) {
		size_t best = k;

		for (size_t i = k + 1; i < n; i++)
			if (agg[i].rss > agg[best].rss)
				best = i;
		if (best != k) {
			__typeof__(agg[0]) t = agg[k];
			agg[k] = agg[best];
			agg[best] = t;
		}
		printf("%s %s %ld kB (private %ld)", k ? "," : "", agg[k].name, agg[k].rss, agg[k].priv);
	}
	printf("\n");
}

static bool curl_mapped(void)
{
	char path[64], line[512];
	bool found = false;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)daemon_pid);
	f = fopen(path, "re");
	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f))
		found = strstr(line, "libcurl") != NULL;
	fclose(f);
	return found;
}

static double cpu_sec(void)
{
	char path[64], buf[2048], *p;
	unsigned long ut = 0, st = 0;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)daemon_pid);
	read_text(path, buf, sizeof(buf));
	p = strrchr(buf, ')');
	if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
		return 0;
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static void submit(const char *name, unsigned trials)
{
	char line[2048];
	cJSON *j;

	snprintf(line, sizeof(line),
		 "{\"command\":\"submit\",\"study\":{\"name\":\"%s\",\"engine\":\"sim\",\"label\":\"bench 128/16\","
		 "\"model\":{\"name\":\"llama-3.1-8b\"},\"quantizations\":[\"none\",\"fp8\"],"
		 "\"gpu\":{\"type\":\"L40S\",\"count\":1,\"price_per_gpu_hour\":0.99},"
		 "\"search_space\":{\"max_num_seqs\":{\"min\":8,\"max\":256,\"scale\":\"log2\"},"
		 "\"max_num_batched_tokens\":{\"min\":512,\"max\":8192,\"scale\":\"log2\"},\"tensor_parallel\":[1]},"
		 "\"workload\":{\"dataset\":\"random\",\"input_len\":128,\"output_len\":16,\"num_prompts\":24,"
		 "\"ignore_eos\":true,\"seed\":7},"
		 "\"sla\":{\"ttft_ms\":2000,\"tpot_ms\":100,\"attainment\":0.9},"
		 "\"budget\":{\"max_trials\":%u,\"max_wall_time\":\"10m\"},"
		 "\"probe\":{\"tolerance\":0.3,\"max_steps\":3,\"request_timeout\":30},"
		 "\"deploy\":{\"method\":\"exec\",\"startup_timeout\":30},"
		 "\"search\":{\"seed\":1,\"algorithm\":\"LN_SBPLX\"}}}\n",
		 name, trials);
	j = request(line);
	if (!j || !is_ok(j))
		die("submit %s: %s", name, j ? cJSON_PrintUnformatted(j) : "no answer");
	cJSON_Delete(j);
}

/* The study's state from `list`, into buf. */
static const char *study_state(const char *name, char *buf, size_t size)
{
	cJSON *j = request("{\"command\":\"list\"}\n"), *s;

	snprintf(buf, size, "?");
	cJSON_ArrayForEach(s, cJSON_GetObjectItemCaseSensitive(j, "studies"))
	{
		const cJSON *n = cJSON_GetObjectItemCaseSensitive(s, "name");
		const cJSON *st = cJSON_GetObjectItemCaseSensitive(s, "state");

		if (cJSON_IsString(n) && strcmp(n->valuestring, name) == 0 && cJSON_IsString(st))
			snprintf(buf, size, "%s", st->valuestring);
	}
	cJSON_Delete(j);
	return buf;
}

static void print_current(const char *when)
{
	cJSON *j = request("{\"command\":\"status\"}\n");
	const cJSON *c = cJSON_GetObjectItemCaseSensitive(j, "current");

	if (cJSON_IsObject(c))
		printf("  %s: study running, trial %d/%d, phase %s\n", when,
		       cJSON_GetObjectItemCaseSensitive(c, "trial")->valueint,
		       cJSON_GetObjectItemCaseSensitive(c, "max_trials")->valueint,
		       cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c, "phase")));
	else
		printf("  %s: no study running\n", when);
	cJSON_Delete(j);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

struct client {
	int fd;
	double t0;
	size_t len;
	bool waiting;
	char buf[16384];
};

/* rounds x clients `best` requests; latencies (ms) into lat. Returns how many. */
static size_t load(const struct opts *o, const char *study, double *lat)
{
	struct client *c = calloc(o->clients, sizeof(*c));
	int ep = epoll_create1(EPOLL_CLOEXEC);
	char line[256];
	size_t n_lat = 0, ll;

	if (!c || ep < 0)
		die("out of memory");
	ll = (size_t)snprintf(line, sizeof(line), "{\"command\":\"best\",\"study\":\"%s\"}\n", study);
	for (unsigned i = 0; i < o->clients; i++) {
		struct epoll_event ev = { .events = EPOLLIN, .data.u32 = i };

		c[i].fd = connect_daemon();
		if (c[i].fd < 0)
			die("client %u: connect: %s", i, strerror(errno));
		if (epoll_ctl(ep, EPOLL_CTL_ADD, c[i].fd, &ev) < 0)
			die("epoll_ctl: %s", strerror(errno));
	}
	for (unsigned r = 0; r < o->rounds; r++) {
		unsigned pending = o->clients;
		double deadline;

		for (unsigned i = 0; i < o->clients; i++) {
			c[i].t0 = now_sec();
			c[i].len = 0;
			c[i].waiting = true;
			if (write(c[i].fd, line, ll) != (ssize_t)ll)
				die("client %u: write: %s", i, strerror(errno));
		}
		deadline = now_sec() + 30;
		while (pending > 0) {
			struct epoll_event evs[64];
			int k = epoll_wait(ep, evs, 64, 1000);

			if (now_sec() > deadline)
				die("round %u: %u of %u clients got no answer in 30 s", r, pending, o->clients);
			for (int e = 0; e < k; e++) {
				struct client *x = &c[evs[e].data.u32];
				ssize_t m = read(x->fd, x->buf + x->len, sizeof(x->buf) - 1 - x->len);
				double t = now_sec();

				if (m <= 0)
					die("a client's connection closed: %s", m < 0 ? strerror(errno) : "EOF");
				x->len += (size_t)m;
				if (!x->waiting || !memchr(x->buf, '\n', x->len))
					continue;
				x->buf[x->len] = '\0';
				if (strncmp(x->buf, "{\"ok\":true", 10) != 0)
					die("answer not ok: %.300s", x->buf);
				lat[n_lat++] = (t - x->t0) * 1e3;
				x->waiting = false;
				pending--;
			}
		}
		if (o->per_round) {
			double worst = 0;

			for (size_t k = n_lat - o->clients; k < n_lat; k++)
				worst = lat[k] > worst ? lat[k] : worst;
			printf("  round %u: slowest %.2f ms;", r, worst);
			print_current("then");
		}
		sleep_sec(0.05); /* let the loop do the study's work between bursts */
	}
	for (unsigned i = 0; i < o->clients; i++)
		close(c[i].fd);
	close(ep);
	free(c);
	return n_lat;
}

static void help(void)
{
	printf("Usage: goodputd-bench --goodputd PATH [OPTIONS]\n\n"
	       "Starts a private goodputd and prints its idle RSS and CPU, and the latency of `best`\n"
	       "with N clients querying at once while a study runs.\n\n"
	       "  --goodputd PATH      the daemon to measure\n"
	       "  --sim-dir DIR        where goodput-sim is (prepended to PATH)\n"
	       "  --dry-run            the study runs in virtual time (no servers)\n"
	       "  --clients N          concurrent clients (default 200)\n"
	       "  --rounds N           bursts of N requests (default 20)\n"
	       "  --trials N           the study's trial budget (default 8)\n"
	       "  --idle SEC           idle interval for the CPU figure (default 5)\n"
	       "  --per-round          print each burst's slowest answer and the study's phase\n"
	       "  --check-p99-ms MS    fail when p99 exceeds MS\n"
	       "  --check-rss-mb MB    fail when idle VmRSS exceeds MB\n"
	       "  -h, --help           this help\n");
}

static double parse_num(const char *what, const char *s, double min, double max)
{
	char *end = NULL;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || !end || *end || end == s || v < min || v > max) {
		fprintf(stderr, "goodputd-bench: %s: expected a number in [%g, %g], got \"%s\"\n", what, min, max, s);
		exit(2);
	}
	return v;
}

int main(int argc, char **argv)
{
	static const struct option options[] = {
		{ "help", no_argument, NULL, 'h' },
		{ "goodputd", required_argument, NULL, 'g' },
		{ "sim-dir", required_argument, NULL, 's' },
		{ "dry-run", no_argument, NULL, 'd' },
		{ "clients", required_argument, NULL, 'c' },
		{ "rounds", required_argument, NULL, 'r' },
		{ "trials", required_argument, NULL, 't' },
		{ "idle", required_argument, NULL, 'i' },
		{ "per-round", no_argument, NULL, 'R' },
		{ "check-p99-ms", required_argument, NULL, 'p' },
		{ "check-rss-mb", required_argument, NULL, 'm' },
		{ NULL, 0, NULL, 0 },
	};
	struct opts o = { .clients = 200, .rounds = 20, .trials = 8, .idle_sec = 5 };
	struct mem idle, after;
	double cpu0, cpu1, *lat, t0;
	size_t n;
	char st[32];
	int ch, fail = 0;

	while ((ch = getopt_long(argc, argv, "h", options, NULL)) >= 0) {
		switch (ch) {
		case 'h':
			help();
			return 0;
		case 'g':
			o.goodputd = optarg;
			break;
		case 's':
			o.sim_dir = optarg;
			break;
		case 'd':
			o.dry_run = true;
			break;
		case 'c':
			o.clients = (unsigned)parse_num("--clients", optarg, 1, 1000);
			break;
		case 'r':
			o.rounds = (unsigned)parse_num("--rounds", optarg, 1, 10000);
			break;
		case 't':
			o.trials = (unsigned)parse_num("--trials", optarg, 1, 1000);
			break;
		case 'i':
			o.idle_sec = parse_num("--idle", optarg, 0.1, 600);
			break;
		case 'R':
			o.per_round = true;
			break;
		case 'p':
			o.check_p99_ms = parse_num("--check-p99-ms", optarg, 0.001, 1e6);
			break;
		case 'm':
			o.check_rss_mb = parse_num("--check-rss-mb", optarg, 0.1, 1e6);
			break;
		default:
			return 2;
		}
	}
	if (!o.goodputd || optind < argc) {
		fprintf(stderr, "goodputd-bench: --goodputd PATH is required (see --help)\n");
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/goodputd-bench-XXXXXX");
	if (!mkdtemp(tmpdir))
		die("mkdtemp: %s", strerror(errno));
	snprintf(sock_path, sizeof(sock_path), "%s/d.sock", tmpdir);
	snprintf(log_path, sizeof(log_path), "%s/d.log", tmpdir);

	start_daemon(&o);
	sleep_sec(1); /* start-up settles */
	cpu0 = cpu_sec();
	sleep_sec(o.idle_sec);
	cpu1 = cpu_sec();
	read_mem(&idle);
	print_mem("idle", &idle);
	print_top_mappings(6);
	printf("  libcurl mapped while idle: %s\n", curl_mapped() ? "yes" : "no");
	printf("idle CPU: %.2f%% over %.1f s (%.3f s of CPU)\n", (cpu1 - cpu0) / o.idle_sec * 100, o.idle_sec,
	       cpu1 - cpu0);
	fflush(stdout);

	submit("bench", o.trials);
	t0 = now_sec();
	for (;;) {
		cJSON *j = request("{\"command\":\"best\",\"study\":\"bench\"}\n");
		bool ok = j && is_ok(j);

		cJSON_Delete(j);
		if (ok)
			break;
		if (now_sec() - t0 > 180)
			die("the study has no best configuration after 180 s");
		sleep_sec(0.1);
	}
	printf("study 'bench' (%s, %u trials) has a best after %.1f s\n", o.dry_run ? "dry run" : "goodput-sim",
	       o.trials, now_sec() - t0);
	print_current("before the load");
	lat = calloc((size_t)o.clients * o.rounds, sizeof(double));
	if (!lat)
		die("out of memory");
	cpu0 = cpu_sec();
	t0 = now_sec();
	n = load(&o, "bench", lat);
	cpu1 = cpu_sec();
	print_current("after the load");
	printf("  goodputd CPU during the load: %.2f s over %.2f s (%.0f us per request, the study included)\n",
	       cpu1 - cpu0, now_sec() - t0, (cpu1 - cpu0) / (double)n * 1e6);
	qsort(lat, n, sizeof(double), cmp_double);
	printf("best, %u concurrent clients x %u rounds (%zu requests): p50 %.2f ms, p90 %.2f ms, p99 %.2f ms, "
	       "max %.2f ms\n",
	       o.clients, o.rounds, n, lat[n / 2], lat[n * 9 / 10], lat[(size_t)((double)n * 0.99)], lat[n - 1]);
	if (o.check_p99_ms > 0 && lat[(size_t)((double)n * 0.99)] > o.check_p99_ms) {
		fprintf(stderr, "FAIL: p99 %.2f ms > %.2f ms\n", lat[(size_t)((double)n * 0.99)], o.check_p99_ms);
		fail = 1;
	}
	free(lat);
	fflush(stdout);

	t0 = now_sec();
	while (strcmp(study_state("bench", st, sizeof(st)), "done") != 0) {
		if (now_sec() - t0 > 600)
			die("the study did not finish in 600 s (state %s)", st);
		sleep_sec(0.2);
	}
	sleep_sec(1);
	read_mem(&after);
	print_mem("idle after the study", &after);
	print_top_mappings(6);
	printf("  libcurl mapped after the study: %s\n", curl_mapped() ? "yes" : "no");
	if (o.check_rss_mb > 0 && idle.vmrss > o.check_rss_mb * 1024) {
		fprintf(stderr, "FAIL: idle VmRSS %.1f MB > %.1f MB\n", idle.vmrss / 1024.0, o.check_rss_mb);
		fail = 1;
	}
	cleanup();
	printf(fail ? "FAIL\n" : "ok\n");
	return fail;
}
