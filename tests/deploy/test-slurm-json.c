/* What Slurm's client commands print, read: squeue --json of Slurm 22.05
 * (a pending, a running, a failed and a cancelled job; exit codes as wait
 * statuses), the shapes of later releases (job_state a list, numbers as
 * {"set", "number"}, exit_code an object), sacct --json's nested state, the
 * state names goodput maps (PREEMPTED, NODE_FAIL, OUT_OF_MEMORY, "CANCELLED
 * by 0"), sinfo --json's GPUs per partition, and output that is not a job
 * list. */
#include <errno.h>
#include <string.h>

#include "macro.h"
#include "slurm.h"
#include "tests.h"

static const char squeue_22[] =
	"{\"meta\": {}, \"errors\": [], \"jobs\": ["
	"{\"job_id\": 2, \"job_state\": \"PENDING\", \"state_reason\": \"Resources\", \"name\": \"goodput-s-2\","
	" \"comment\": \"goodput:s:17:2\", \"nodes\": \"\", \"user_id\": 0, \"exit_code\": 0, \"submit_time\": "
	"1796148447,"
	" \"start_time\": 1827684451, \"gres_detail\": []},"
	"{\"job_id\": 3, \"job_state\": \"RUNNING\", \"state_reason\": \"None\", \"name\": \"goodput-s-3\","
	" \"comment\": \"\", \"nodes\": \"node7\", \"user_id\": 1000, \"exit_code\": 0, \"submit_time\": 1796148447,"
	" \"start_time\": 1796148451, \"gres_detail\": [\"gpu:2(IDX:0-1)\"]},"
	"{\"job_id\": 4, \"job_state\": \"FAILED\", \"state_reason\": \"NonZeroExitCode\", \"exit_code\": 768},"
	"{\"job_id\": 5, \"job_state\": \"CANCELLED\", \"exit_code\": 15},"
	"{\"name\": \"no id\"}]}";

static const char squeue_24[] =
	"{\"jobs\": [{\"job_id\": 9, \"job_state\": [\"RUNNING\", \"COMPLETING\"], \"nodes\": \"n1\","
	" \"start_time\": {\"set\": true, \"infinite\": false, \"number\": 1796148451},"
	" \"exit_code\": {\"status\": [\"SUCCESS\"], \"return_code\": {\"set\": true, \"number\": 0}}},"
	"{\"job_id\": {\"set\": true, \"number\": 10}, \"job_state\": [\"PREEMPTED\"],"
	" \"exit_code\": {\"status\": [\"SIGNALED\"], \"return_code\": {\"set\": true, \"number\": 0},"
	" \"signal\": {\"id\": {\"set\": true, \"number\": 9}, \"name\": \"KILL\"}}}]}";

static const char sacct_22[] =
	"{\"jobs\": [{\"job_id\": 7, \"name\": \"goodput-s-7\", \"state\": {\"current\": \"OUT_OF_MEMORY\","
	" \"reason\": \"OutOfMemory\"}, \"exit_code\": {\"status\": \"FAILED\", \"return_code\": 137},"
	" \"comment\": {\"job\": \"goodput:s:17:7\", \"administrator\": null},"
	" \"time\": {\"submission\": 100, \"start\": 160}}]}";

static const char sinfo_22[] =
	"{\"nodes\": ["
	"{\"name\": \"a1\", \"gres\": \"gpu:8\", \"partitions\": [\"gpu\", \"all\"]},"
	"{\"name\": \"a2\", \"gres\": \"gpu:h100:4(S:0-1)\", \"partitions\": [\"gpu\"]},"
	"{\"name\": \"c1\", \"gres\": \"\", \"partitions\": [\"cpu\", \"all\"]},"
	"{\"name\": \"b1\", \"gres\": \"gpu:a100:2,gpu:l4:2,mps:100\", \"partitions\": [\"all\"]}]}";

static void test_squeue_22(void)
{
	_cleanup_(freep) struct slurm_job *j = NULL;
	size_t n = 0;

	CHECK(slurm_parse_jobs(squeue_22, strlen(squeue_22), &j, &n, NULL) == 0);
	CHECK_INT_EQ(n, 4);
	CHECK_INT_EQ(j[0].id, 2);
	CHECK_INT_EQ(j[0].state, SLURM_STATE_PENDING);
	CHECK_STR_EQ(j[0].reason, "Resources");
	CHECK_STR_EQ(j[0].comment, "goodput:s:17:2");
	CHECK_INT_EQ(j[0].start_time, 0); /* a pending job's start is an estimate */
	CHECK_INT_EQ(j[1].state, SLURM_STATE_RUNNING);
	CHECK_STR_EQ(j[1].nodes, "node7");
	CHECK_INT_EQ(j[1].user_id, 1000);
	CHECK_INT_EQ(j[1].start_time, 1796148451);
	CHECK_INT_EQ(j[2].state, SLURM_STATE_FAILED);
	CHECK_INT_EQ(j[2].exit_code, 3);
	CHECK_INT_EQ(j[2].exit_signal, 0);
	CHECK_INT_EQ(j[3].state, SLURM_STATE_CANCELLED);
	CHECK_INT_EQ(j[3].exit_signal, 15);
	CHECK(slurm_state_is_final(j[3].state) && !slurm_state_is_final(j[1].state));
}

static void test_later_shapes(void)
{
	_cleanup_(freep) struct slurm_job *j = NULL;
	size_t n = 0;

	CHECK(slurm_parse_jobs(squeue_24, strlen(squeue_24), &j, &n, NULL) == 0);
	CHECK_INT_EQ(n, 2);
	/* a flag rides on the base state */
	CHECK_INT_EQ(j[0].state, SLURM_STATE_RUNNING);
	CHECK_INT_EQ(j[0].start_time, 1796148451);
	CHECK_INT_EQ(j[0].exit_code, 0);
	CHECK_INT_EQ(j[1].id, 10);
	CHECK_INT_EQ(j[1].state, SLURM_STATE_PREEMPTED);
	CHECK_INT_EQ(j[1].exit_signal, 9);
}

static void test_sacct(void)
{
	_cleanup_(freep) struct slurm_job *j = NULL;
	size_t n = 0;

	CHECK(slurm_parse_jobs(sacct_22, strlen(sacct_22), &j, &n, NULL) == 0);
	CHECK_INT_EQ(n, 1);
	CHECK_INT_EQ(j[0].state, SLURM_STATE_OUT_OF_MEMORY);
	CHECK_STR_EQ(j[0].reason, "OutOfMemory");
	CHECK_INT_EQ(j[0].exit_code, 137);
	CHECK_STR_EQ(j[0].comment, "goodput:s:17:7");
	CHECK_INT_EQ(j[0].submit_time, 100);
	CHECK_INT_EQ(j[0].start_time, 160);
}

static void test_states(void)
{
	CHECK_INT_EQ(slurm_state_from_name("NODE_FAIL"), SLURM_STATE_NODE_FAIL);
	CHECK_INT_EQ(slurm_state_from_name("CANCELLED by 0"), SLURM_STATE_CANCELLED);
	CHECK_INT_EQ(slurm_state_from_name("TIMEOUT"), SLURM_STATE_TIMEOUT);
	CHECK_INT_EQ(slurm_state_from_name("CONFIGURING"), SLURM_STATE_PENDING);
	CHECK_INT_EQ(slurm_state_from_name("COMPLETING"), SLURM_STATE_COMPLETING);
	CHECK_INT_EQ(slurm_state_from_name("RUNNINGX"), SLURM_STATE_UNKNOWN);
	CHECK_INT_EQ(slurm_state_from_name(NULL), SLURM_STATE_UNKNOWN);
	CHECK(!slurm_state_is_final(SLURM_STATE_COMPLETING));
	CHECK(slurm_state_is_final(SLURM_STATE_GONE));
	CHECK_STR_EQ(slurm_state_to_string(SLURM_STATE_OUT_OF_MEMORY), "out_of_memory");
}

static void test_gpus(void)
{
	unsigned gpus = 0, nodes = 0, per = 0;

	CHECK(slurm_parse_gpus(sinfo_22, strlen(sinfo_22), "gpu", &gpus, &nodes, &per, NULL) == 0);
	CHECK_INT_EQ(gpus, 12);
	CHECK_INT_EQ(nodes, 2);
	CHECK_INT_EQ(per, 8);
	CHECK(slurm_parse_gpus(sinfo_22, strlen(sinfo_22), NULL, &gpus, &nodes, &per, NULL) == 0);
	CHECK_INT_EQ(gpus, 16);
	CHECK_INT_EQ(nodes, 3);
	CHECK(slurm_parse_gpus(sinfo_22, strlen(sinfo_22), "cpu", &gpus, &nodes, &per, NULL) == 0);
	CHECK_INT_EQ(gpus, 0);
}

static void test_not_a_list(void)
{
	static const char *const bad[] = { "", "squeue: error: slurm_load_jobs error", "{\"jobs\": 3}", "[1, 2]",
					   "{\"jobs\": []} trailing" };
	struct error err = { 0 };

	for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
		struct slurm_job *j = NULL;
		size_t n = 0;

		CHECK(slurm_parse_jobs(bad[i], strlen(bad[i]), &j, &n, &err) < 0);
		CHECK(j == NULL);
	}
	CHECK(slurm_parse_gpus("{}", 2, NULL, &(unsigned){ 0 }, &(unsigned){ 0 }, &(unsigned){ 0 }, &err) < 0);
}

int main(void)
{
	test_squeue_22();
	test_later_shapes();
	test_sacct();
	test_states();
	test_gpus();
	test_not_a_list();
	return 0;
}
