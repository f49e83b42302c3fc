/* bench-twin-real — the twin-guided search against real goodput-sim
 * processes, measured in real time by the probe through `goodput tune`.
 *
 * Each instance is a study (8B on 2×L40S, a small space) run by the real
 * `goodput tune` with "search": {"strategy": "twin"}: every deployment
 * starts a goodput-sim server and the probe measures it over loopback in
 * real time. Instances 0 and 1 (the first of each SLA) run the sim with its
 * published constants (an unperturbed sim, which the twin is built from: a
 * fallback there is a false one); the others give the sim, through an
 * engine profile whose command adds `--profile-file`, efficiency constants
 * perturbed by up to ±30 % each (bench-twin-gpu.h: the stand-in for a real
 * GPU whose efficiency differs from the defaults, as in bench-twin).
 * The tuner never sees them.
 *
 * The truth per instance: every configuration evaluated in virtual time by
 * the twin's own model with the instance's true constants (the same
 * engine model the sim runs); the optimum is the best of them. After each
 * real deployment the incumbent is the configuration with the best mean
 * measured cost; the figure is the number of deployments until the
 * incumbent's true cost is within 2 % of the optimum. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench-twin-gpu.h"
#include "file-util.h"
#include "json-util.h"
#include "macro.h"
#include "parse.h"
#include "store.h"
#include "study.h"
#include "twin.h"

extern char **environ;

#define TARGET      0.02
#define NOT_REACHED 1e9

struct options {
	unsigned instances, budget, prompts;
	const char *goodput, *sim, *engines_dir, *work_dir;
	double check_median;
	bool keep;
};

struct result {
	unsigned deployments, started;
	double to_target, final_regret;
	bool fallback;
	char best_key[OPT_KEY_MAX], optimum_key[OPT_KEY_MAX];
	double optimum; /* $/Mtok */
	double seconds;
};

/* dir/name into buf (PATH_MAX); -ENAMETOOLONG when it does not fit. */
static int join(char *buf, const char *dir, const char *name)
{
	int n = snprintf(buf, PATH_MAX, "%s/%s", dir, name);

	return n < 0 || n >= PATH_MAX ? -ENAMETOOLONG : 0;
}

static int write_text(const char *path, const char *text)
{
	FILE *f = fopen(path, "we");
	int r = 0;

	if (!f)
		return -errno;
	if (fputs(text, f) < 0)
		r = -EIO;
	if (fclose(f) != 0 && r == 0)
		r = -errno;
	return r;
}

static int write_json(const char *path, const cJSON *j)
{
	_cleanup_(cjson_freep) char *text = cJSON_Print(j);

	return text ? write_text(path, text) : -ENOMEM;
}

/* The studies: the twin's strategy on a small space, a light workload; a
 * loose SLA and a tight one (the optimum at a smaller batch). */
static const struct {
	const char *label, *sla;
} slas[] = {
	{ "TTFT 500 / TPOT 50 ms", "\"ttft_ms\": 500, \"tpot_ms\": 50" },
	{ "TTFT 250 / TPOT 15 ms", "\"ttft_ms\": 250, \"tpot_ms\": 15" },
};

static int write_spec(const struct options *o, unsigned i, const char *path)
{
	char buf[2048];

	snprintf(buf, sizeof(buf),
		 "{\"name\": \"twin-real-%u\", \"engine\": \"sim\", \"model\": {\"name\": \"llama-3.1-8b\"},\n"
		 " \"gpu\": {\"type\": \"L40S\", \"count\": 2, \"price_per_gpu_hour\": 0.99},\n"
		 " \"search_space\": {\"max_num_seqs\": {\"min\": 4, \"max\": 256, \"scale\": \"log2\"},\n"
		 "  \"max_num_batched_tokens\": {\"min\": 256, \"max\": 8192, \"scale\": \"log2\"},\n"
		 "  \"tensor_parallel\": [1, 2]},\n"
		 " \"quantizations\": [\"none\", \"fp8\", \"awq\"],\n"
		 " \"constraints\": [\"max_num_batched_tokens >= max_num_seqs\"],\n"
		 " \"workload\": {\"dataset\": \"random\", \"input_len\": 256, \"output_len\": 32, \"range_ratio\": "
		 "0.25,\n"
		 "  \"num_prompts\": %u, \"ignore_eos\": true, \"seed\": 7},\n"
		 " \"sla\": {%s, \"attainment\": 0.9},\n"
		 " \"budget\": {\"max_trials\": %u, \"max_wall_time\": \"15m\"},\n"
		 " \"probe\": {\"tolerance\": 0.1, \"max_steps\": 5, \"request_timeout\": 30},\n"
		 " \"deploy\": {\"method\": \"exec\", \"startup_timeout\": 60},\n"
		 " \"baseline\": false,\n"
		 " \"search\": {\"seed\": %u, \"strategy\": \"twin\"}}\n",
		 i, o->prompts, slas[i % ELEMENTSOF(slas)].sla, o->budget, 1 + i);
	return write_text(path, buf);
}

/* The sim's engine profile, its command given the instance's constants. */
static int write_engine(const struct options *o, const char *dir, const char *profile_path, struct error *err)
{
	_cleanup_(cJSON_Deletep) cJSON *j = NULL;
	char src[PATH_MAX], dst[PATH_MAX];
	cJSON *argv;
	int r;

	if (join(src, o->engines_dir, "sim.json") < 0 || join(dst, dir, "sim.json") < 0)
		return error_set(err, -ENAMETOOLONG, "%s: path too long", dir);
	r = json_parse_file(src, 1 << 20, &j, err);
	if (r < 0)
		return r;
	argv = cJSON_GetObjectItemCaseSensitive(j, "argv");
	if (!cJSON_IsArray(argv))
		return error_set(err, -EINVAL, "%s: no argv", src);
	if (profile_path && (!cJSON_AddItemToArray(argv, cJSON_CreateString("--profile-file")) ||
			     !cJSON_AddItemToArray(argv, cJSON_CreateString(profile_path))))
		return error_set(err, -ENOMEM, "out of memory");
	r = write_json(dst, j);
	return r < 0 ? error_set(err, r, "%s: %s", dst, strerror(-r)) : 0;
}

/* The profile file of the instance's constants (only the perturbed ones). */
static int write_profile(const struct sim_profile *truth, const char *path)
{
	_cleanup_(cJSON_Deletep) cJSON *j = cJSON_CreateObject();
	struct sim_profile copy = *truth;

	if (!j)
		return -ENOMEM;
	for (size_t i = 0; sim_profile_field_name(i); i++)
		if (bench_twin_perturbed(sim_profile_field_name(i)) &&
		    !cJSON_AddNumberToObject(j, sim_profile_field_name(i), *sim_profile_field(&copy, i)))
			return -ENOMEM;
	return write_json(path, j);
}

/* goodput tune SPEC, its stderr in log_path; returns the exit status. */
static int run_tune(const struct options *o, const char *spec, const char *db, const char *engines, const char *logs,
		    const char *log_path)
{
	const char *argv[] = { o->goodput, "tune",   "--db", db,  "--engines-dir", engines, "--log-dir",
			       logs,       "--json", spec,   NULL };
	posix_spawn_file_actions_t fa;
	pid_t pid;
	int r, status;

	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
	posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, log_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	r = posix_spawn(&pid, o->goodput, &fa, NULL, (char *const *)argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (r != 0)
		return -r;
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -errno;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static bool file_contains(const char *path, const char *needle)
{
	_cleanup_(freep) char *text = NULL;
	size_t len;
	struct error err = { 0 };

	if (file_read_regular(path, 0, 16 << 20, &text, &len, &err) < 0)
		return false;
	return strstr(text, needle) != NULL;
}

/* The twin's view of the study, as `goodput tune` builds it, with a fine
 * rate search: the ruler of true costs. */
static int truth_twin(const struct study *s, struct twin **ret, struct error *err)
{
	struct twin_setup setup;

	twin_setup_init(&setup);
	snprintf(setup.model, sizeof(setup.model), "%s", s->model.name);
	snprintf(setup.gpu, sizeof(setup.gpu), "%s", s->gpu.type);
	setup.gpus = s->gpu.count;
	setup.usd_per_gpu_hour = s->gpu.price_per_gpu_hour;
	setup.scenario = s->scenario;
	setup.cost_tokens = s->cost_tokens;
	setup.workload = s->workload;
	setup.workload.dataset_path = NULL;
	setup.sla = s->sla;
	setup.rel_tol = 0.02;
	return twin_new(s->space, &setup, ret, err);
}

static double true_cost(struct twin *t, const struct sim_profile *truth, const struct opt_config *c)
{
	struct twin_trial tr;
	struct error err = { 0 };

	if (twin_measure_sim(t, truth, c, &tr, &err) < 0 || tr.trial.outcome != OPT_OUTCOME_MEASURED)
		return INFINITY;
	return tr.trial.cost;
}

/* Reads the study's trials from the store and scores them against the truth. */
static int score(const struct study *s, struct twin *t, const struct sim_profile *truth, double optimum, const char *db,
		 const char *name, struct result *res, struct error *err)
{
	_cleanup_(store_closep) struct store *st = NULL;
	struct store_study study = { 0 };
	struct store_trial *trials = NULL;
	size_t n = 0;
	double best_mean = INFINITY;
	const char *best = NULL;
	const char *keys[64];
	double sum[64] = { 0 };
	unsigned cnt[64] = { 0 };
	size_t n_keys = 0;
	int r;

	r = store_open(db, &(struct store_open_options){ .flags = STORE_OPEN_READ_ONLY }, &st, err);
	if (r >= 0)
		r = store_study_get_by_name(st, name, &study, err);
	if (r >= 0)
		r = store_trial_history(st, study.id, &trials, &n, err);
	store_study_done(&study);
	if (r < 0)
		return r;
	for (size_t i = 0; i < n && r >= 0; i++) {
		const struct store_trial *tr = &trials[i];
		struct opt_config c;
		size_t k;

		if (tr->failure == STORE_FAILURE_CONSTRAINT || tr->started_usec == 0)
			continue; /* never deployed */
		res->deployments++;
		if (tr->failure != STORE_FAILURE_OOM && tr->failure != STORE_FAILURE_STARTUP_TIMEOUT &&
		    tr->failure != STORE_FAILURE_CRASHED && tr->failure != STORE_FAILURE_DEPLOY_ERROR)
			res->started++;
		if (tr->state == STORE_TRIAL_DONE && isfinite(tr->cost_per_mtok) && tr->cost_per_mtok > 0) {
			for (k = 0; k < n_keys && strcmp(keys[k], tr->canonical_key) != 0; k++)
				;
			if (k == n_keys && n_keys < ELEMENTSOF(keys))
				keys[n_keys++] = tr->canonical_key;
			if (k < n_keys) {
				sum[k] += tr->cost_per_mtok;
				cnt[k]++;
			}
			best_mean = INFINITY;
			for (size_t b = 0; b < n_keys; b++)
				if (cnt[b] && sum[b] / cnt[b] < best_mean) {
					best_mean = sum[b] / cnt[b];
					best = keys[b];
				}
		}
		if (!best)
			continue;
		r = opt_config_from_key(s->space, best, &c, err);
		if (r >= 0) {
			res->final_regret = true_cost(t, truth, &c) / optimum - 1;
			if (res->final_regret <= TARGET && res->to_target >= NOT_REACHED)
				res->to_target = res->deployments;
		}
	}
	if (best && strlen(best) < sizeof(res->best_key))
		strcpy(res->best_key, best);
	store_trial_array_free(trials, n);
	return r;
}

static int run_instance(const struct options *o, unsigned i, struct result *res, struct error *err)
{
	_cleanup_(study_freep) struct study *s = NULL;
	_cleanup_(twin_freep) struct twin *t = NULL;
	char dir[PATH_MAX], spec[PATH_MAX], db[PATH_MAX], engines[PATH_MAX], logs[PATH_MAX], prof[PATH_MAX],
		log[PATH_MAX], name[64];
	struct sim_profile truth;
	struct opt_config best;
	struct twin_prediction pr;
	struct timespec t0, t1;
	int r;

	*res = (struct result){ .to_target = NOT_REACHED, .final_regret = INFINITY };
	snprintf(name, sizeof(name), "instance-%u", i);
	if (join(dir, o->work_dir, name) < 0 || join(spec, dir, "study.json") < 0 || join(db, dir, "goodput.db") < 0 ||
	    join(engines, dir, "engines") < 0 || join(logs, dir, "logs") < 0 || join(prof, dir, "profile.json") < 0 ||
	    join(log, dir, "tune.log") < 0)
		return error_set(err, -ENAMETOOLONG, "%s: path too long", o->work_dir);
	snprintf(name, sizeof(name), "twin-real-%u", i);
	if ((mkdir(dir, 0755) < 0 && errno != EEXIST) || (mkdir(engines, 0755) < 0 && errno != EEXIST))
		return error_set(err, -errno, "%s: %s", dir, strerror(errno));
	unlink(db);
	r = write_spec(o, i, spec);
	if (r < 0)
		return error_set(err, r, "%s: %s", spec, strerror(-r));
	r = study_load_file(spec, NULL, &s, err);
	if (r >= 0)
		r = truth_twin(s, &t, err);
	if (r < 0)
		return r;
	twin_base_profile(t, &truth);
	if (i >= ELEMENTSOF(slas)) /* the first of each SLA: the sim as published */
		bench_twin_perturb(&truth, i);
	r = write_profile(&truth, prof);
	if (r < 0)
		return error_set(err, r, "%s: %s", prof, strerror(-r));
	r = write_engine(o, engines, i >= ELEMENTSOF(slas) ? prof : NULL, err);
	if (r < 0)
		return r;
	r = twin_predict_best(t, &truth, &best, &pr, err);
	if (r < 0)
		return error_prefix(err, r, "the instance's optimum");
	pr.cost = true_cost(t, &truth, &best);
	res->optimum = pr.cost;
	(void)opt_config_key(s->space, &best, res->optimum_key, sizeof(res->optimum_key));
	clock_gettime(CLOCK_MONOTONIC, &t0);
	r = run_tune(o, spec, db, engines, logs, log);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	res->seconds = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	if (r != 0)
		return error_set(err, r < 0 ? r : -EIO, "goodput tune exited %d (see %s)", r, log);
	res->fallback = file_contains(log, "poor fit");
	return score(s, t, &truth, pr.cost, db, name, res, err);
}

static void help(void)
{
	printf("bench-twin-real --goodput PATH --sim-dir DIR --engines-dir DIR [OPTIONS]\n"
	       "The twin-guided search against real goodput-sim processes measured by the probe in real\n"
	       "time (goodput tune, \"search\": {\"strategy\": \"twin\"}), a loose and a tight SLA in turn;\n"
	       "instances 0 and 1 run the unperturbed sim, the others constants perturbed by up to ±30 %%.\n"
	       "  --goodput PATH      the goodput program\n"
	       "  --sim-dir DIR       where goodput-sim is (put first on PATH)\n"
	       "  --engines-dir DIR   where the sim's engine profile (sim.json) is\n"
	       "  --instances N       studies (default 4)\n"
	       "  --budget N          deployments per study (max_trials, default 10)\n"
	       "  --prompts N         requests per load point (default 40)\n"
	       "  --work-dir DIR      where the studies, stores and logs go (default: a new /tmp dir)\n"
	       "  --check-median X    exit 1 unless the median deployments to 2 %% is <= X and the\n"
	       "                      unperturbed sim did not fall back\n");
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "goodput", required_argument, NULL, 'g' },
		{ "sim-dir", required_argument, NULL, 's' },
		{ "engines-dir", required_argument, NULL, 'e' },
		{ "instances", required_argument, NULL, 'i' },
		{ "budget", required_argument, NULL, 'b' },
		{ "prompts", required_argument, NULL, 'p' },
		{ "work-dir", required_argument, NULL, 'w' },
		{ "check-median", required_argument, NULL, 'c' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct options o = { .instances = 4, .budget = 10, .prompts = 40 };
	char tmp[] = "/tmp/bench-twin-real-XXXXXX";
	_cleanup_(freep) char *path = NULL;
	_cleanup_(freep) double *to = NULL;
	unsigned n_run = 0, reached = 0, false_fallbacks = 0, fallbacks = 0, deployments = 0, started = 0;
	double med;
	struct error err = { 0 };
	int c, r = 0;

	while (r >= 0 && (c = getopt_long(argc, argv, "h", longopts, NULL)) >= 0) {
		switch (c) {
		case 'g':
			o.goodput = optarg;
			break;
		case 's':
			o.sim = optarg;
			break;
		case 'e':
			o.engines_dir = optarg;
			break;
		case 'i':
			r = parse_u32("--instances", optarg, 1, 1000, &o.instances, &err);
			break;
		case 'b':
			r = parse_u32("--budget", optarg, 3, 1000, &o.budget, &err);
			break;
		case 'p':
			r = parse_u32("--prompts", optarg, 8, 100000, &o.prompts, &err);
			break;
		case 'w':
			o.work_dir = optarg;
			break;
		case 'c':
			r = parse_double("--check-median", optarg, 0, 1000, &o.check_median, &err);
			break;
		case 'h':
			help();
			return 0;
		default:
			return 2;
		}
	}
	if (r < 0) {
		fprintf(stderr, "bench-twin-real: %s\n", error_str(&err, r));
		return 2;
	}
	if (!o.goodput || !o.sim || !o.engines_dir) {
		fprintf(stderr, "bench-twin-real: --goodput, --sim-dir and --engines-dir are required\n");
		return 2;
	}
	if (!o.work_dir) {
		if (!mkdtemp(tmp)) {
			perror("mkdtemp");
			return 1;
		}
		o.work_dir = tmp;
	}
	if (asprintf(&path, "%s:%s", o.sim, getenv("PATH") ? getenv("PATH") : "/usr/bin:/bin") < 0 ||
	    setenv("PATH", path, 1) < 0)
		return 1;
	to = calloc(o.instances, sizeof(double));
	if (!to)
		return 1;
	printf("twin in real time: %u studies of llama-3.1-8b on 2xL40S (goodput tune, real goodput-sim servers, "
	       "%u requests per load point, max_trials %u); instances 0 and 1 unperturbed, the others ±30 %%\n",
	       o.instances, o.prompts, o.budget);
	printf("%4s %6s %7s %6s %9s %8s %7s  %s\n", "inst", "to 2%", "deploys", "start", "regret", "fallback", "time",
	       "answer");
	fflush(stdout);
	for (unsigned i = 0; i < o.instances; i++) {
		struct result res;

		r = run_instance(&o, i, &res, &err);
		if (r < 0) {
			fprintf(stderr, "instance %u: %s\n", i, error_str(&err, r));
			return 1;
		}
		to[n_run++] = res.to_target;
		reached += res.to_target < NOT_REACHED;
		fallbacks += res.fallback;
		false_fallbacks += res.fallback && i < ELEMENTSOF(slas);
		deployments += res.deployments;
		started += res.started;
		if (res.to_target >= NOT_REACHED)
			printf("%4u %6s", i, "never");
		else
			printf("%4u %6.0f", i, res.to_target);
		printf(" %7u %6u %8.1f%% %8s %6.0fs  %s\n", res.deployments, res.started, res.final_regret * 100,
		       res.fallback ? "yes" : "no", res.seconds, res.best_key);
		printf("%36s %s, optimum $%.4f/Mtok at %s\n", "", slas[i % ELEMENTSOF(slas)].label, res.optimum,
		       res.optimum_key);
		fflush(stdout);
	}
	med = bench_twin_median(to, n_run);
	printf("median real deployments to 2 %%: %.1f (reached on %u/%u); fallbacks %u/%u, false ones (the "
	       "unperturbed sims) %u; %u of %u deployments started\n",
	       med, reached, n_run, fallbacks, n_run, false_fallbacks, started, deployments);
	printf("studies, stores and logs in %s\n", o.work_dir);
	if (o.check_median > 0 && (med > o.check_median || false_fallbacks > 0)) {
		fprintf(stderr, "bench-twin-real: check failed (median %.1f, limit %.1f; false fallbacks %u)\n", med,
			o.check_median, false_fallbacks);
		return 1;
	}
	return 0;
}
