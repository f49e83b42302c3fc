/* goodputd.c — the goodput service: flags, then daemon.c does the work.
 *
 * Under systemd (goodputd.service + goodputd.socket) it takes its socket
 * from socket activation and its state directory from $STATE_DIRECTORY;
 * for development and tests `--socket PATH --state-dir DIR` run it as any
 * user. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "daemon.h"
#include "log.h"
#include "parse.h"
#include "protocol.h"

enum {
	ARG_SOCKET = 256,
	ARG_SOCKET_MODE,
	ARG_STATE_DIR,
	ARG_CONFIG,
	ARG_DRY_RUN,
	ARG_MAX_TRIALS,
	ARG_VERSION,
};

static void help(void)
{
	printf("Usage: goodputd [OPTIONS]\n"
	       "\n"
	       "The goodput service: runs tuning studies one at a time from a queue, survives\n"
	       "restarts without losing or repeating a trial, and answers `goodput status|list|best|...`\n"
	       "on a UNIX socket (JSON lines). The manual: goodputd(8).\n"
	       "\n"
	       "  --socket PATH        listen on PATH when systemd passes no socket (default %s)\n"
	       "  --socket-mode MODE   octal mode of that socket (default 0660)\n"
	       "  --state-dir DIR      database, server logs and best configurations\n"
	       "                       (default $STATE_DIRECTORY, else /var/lib/goodputd)\n"
	       "  --config FILE        the daemon's configuration (default %s; must exist when given)\n"
	       "  --dry-run            run trials in virtual time (the sim core) instead of servers\n"
	       "  --max-trials N       cap every study's trial budget (tests)\n"
	       "  -v, --verbose        debug logging\n"
	       "  --version            print the version\n"
	       "  -h, --help           this help\n"
	       "\n"
	       "Signals: SIGTERM/SIGINT stop gracefully (the trial in flight is torn down and redone\n"
	       "on the next start), SIGHUP re-reads the configuration.\n"
	       "\n"
	       "Debugging: with GOODPUTD_DEBUG_STALL_SECONDS=N in the environment, SIGUSR1 blocks the\n"
	       "loop for N seconds, so that a unit's WatchdogSec= restart can be tried out.\n",
	       CTL_DEFAULT_SOCKET, "/etc/goodput/goodputd.json");
}

/* An octal mode of 1-4 digits, nothing else (strtoul would take " +0x1"
 * apart). It must let its owner connect: a mode without u+rw is a typo. */
static int parse_socket_mode(const char *s, mode_t *ret, struct error *err)
{
	size_t n = strlen(s);
	unsigned m = 0;

	if (n == 0 || n > 4 || strspn(s, "01234567") != n)
		return error_set(err, -EINVAL, "--socket-mode: expected an octal mode such as 0660, got \"%.32s\"", s);
	for (size_t i = 0; i < n; i++)
		m = m * 8 + (unsigned)(s[i] - '0');
	if (m > 0777)
		return error_set(err, -EINVAL, "--socket-mode: %s: only permission bits (at most 0777)", s);
	if ((m & 0600) != 0600)
		return error_set(err, -EINVAL,
				 "--socket-mode: %s does not let the socket's owner read and write it; expected a "
				 "mode such as 0600, 0660 or 0666",
				 s);
	*ret = (mode_t)m;
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option options[] = {
		{ "help", no_argument, NULL, 'h' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "version", no_argument, NULL, ARG_VERSION },
		{ "socket", required_argument, NULL, ARG_SOCKET },
		{ "socket-mode", required_argument, NULL, ARG_SOCKET_MODE },
		{ "state-dir", required_argument, NULL, ARG_STATE_DIR },
		{ "config", required_argument, NULL, ARG_CONFIG },
		{ "dry-run", no_argument, NULL, ARG_DRY_RUN },
		{ "max-trials", required_argument, NULL, ARG_MAX_TRIALS },
		{ NULL, 0, NULL, 0 },
	};
	struct daemon_options o = { .socket_mode = 0660 };
	struct daemon *d = NULL;
	struct error err = { 0 };
	bool version = false;
	int c, r;

	log_set_program("goodputd");
	while ((c = getopt_long(argc, argv, "hv", options, NULL)) >= 0) {
		switch (c) {
		case 'h':
			help();
			return 0;
		case 'v':
			log_set_max_level(LOG_DEBUG);
			break;
		case ARG_VERSION:
			version = true; /* after the rest is checked: --version --bogus is a usage error */
			break;
		case ARG_SOCKET:
			o.socket_path = optarg;
			break;
		case ARG_SOCKET_MODE:
			r = parse_socket_mode(optarg, &o.socket_mode, &err);
			if (r < 0) {
				log_error("%s", error_str(&err, r));
				return 2;
			}
			break;
		case ARG_STATE_DIR:
			o.state_dir = optarg;
			break;
		case ARG_CONFIG:
			o.config_path = optarg;
			break;
		case ARG_DRY_RUN:
			o.dry_run = true;
			break;
		case ARG_MAX_TRIALS:
			r = parse_u32("--max-trials", optarg, 1, 100000, &o.max_trials, &err);
			if (r < 0) {
				log_error("%s", error_str(&err, r));
				return 2;
			}
			break;
		default:
			return 2;
		}
	}
	if (optind < argc) {
		log_error("unexpected argument '%s' (see --help)", argv[optind]);
		return 2;
	}
	if (version) {
		printf("goodputd %s\n", GOODPUT_VERSION);
		return 0;
	}

	r = daemon_new(&o, &d, &err);
	if (r < 0) {
		log_error("%s", error_str(&err, r));
		return 1;
	}
	r = daemon_run(d);
	daemon_free(d);
	log_info("stopped");
	return r < 0 ? 1 : 0;
}
