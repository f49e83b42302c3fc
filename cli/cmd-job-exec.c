/* cmd-job-exec.c — `goodput job-exec FILE`: the start of a trial's server
 * on a cluster node. The batch script of a Slurm job (fixed text, nothing
 * of the trial in it) runs it with the job file goodput wrote beside the
 * trial's log; the launcher (deploy_job_exec) picks a free port on the
 * node, reports the server's address back and becomes the engine. Not
 * for people: goodput runs it through Slurm. */
#include <stdio.h>

#include "commands.h"
#include "deploy.h"
#include "exit-status.h"
#include "log.h"

static int run(const struct verb *v, int argc, char **argv)
{
	struct error err = { 0 };
	int r;

	r = deploy_job_exec(argv[0], &err);
	/* only a failure returns: the job fails, and its log (the trial's) says why */
	log_error("goodput job-exec: %s", error_str(&err, r));
	return CLI_EXIT_FAILED;
}

/* The command: what its help says, then how it runs; a few lines. */
/* clang-format off */
const struct verb verb_job_exec = {
	.summary = "start a trial's server inside a cluster job (run by Slurm, not by people)",
	.about = "Reads the job file goodput wrote for one trial (the engine's argv and environment, the "
		 "address to listen on), picks a free port on this node, writes the server's address beside the "
		 "job file and executes the engine in its place. The batch script of every job of "
		 "\"deploy\": {\"method\": \"slurm\"} runs it.",
	.name = "job-exec", .usage = "JOB_FILE",
	.args = { "JOB_FILE", 1, 1 },
	.run = run,
};
/* clang-format on */
