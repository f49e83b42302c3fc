/* simulate-cmd.c — `goodput-sim simulate`: the engine flags of goodput-sim
 * plus the workload/SLA flags of `goodput probe` (probes/workload-flags.h),
 * one virtual-time run (or a rate search with --find-max-rate), printed as
 * vLLM's benchmark table or, with --json, as the probe's result object.
 * With --startup-model the start-up time the engine would take is reported
 * beside it (the run itself starts once the engine is ready). */

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "json-util.h"
#include "macro.h"
#include "simulate.h"
#include "workload-flags.h"

enum {
	ARG_JSON = 256,
	ARG_FIND_MAX_RATE,
	ARG_ENGINE_FIRST = 300, /* engine flags: ARG_ENGINE_FIRST + index in engine_flags[] */
};

/* The engine flags simulate accepts (--seed is the workload's and seeds both). */
static const char *const engine_flags[] = {
	"model",
	"model-config",
	"gpu",
	"gpus",
	"tensor-parallel-size",
	"tp",
	"pipeline-parallel-size",
	"pp",
	"data-parallel-size",
	"dp",
	"dp-load-balance",
	"speculative-config",
	"spec-method",
	"spec-tokens",
	"spec-draft-model",
	"spec-draft-tp",
	"spec-acceptance",
	"prefix-caching",
	"max-num-seqs",
	"max-num-batched-tokens",
	"max-model-len",
	"quantization",
	"kv-cache-dtype",
	"gpu-memory-utilization",
	"profile",
	"profile-file",
	"jitter",
	"enable-prefix-caching",
	"no-enable-prefix-caching",
	"long-prefill-token-threshold",
	"startup-model",
	"weights-read-gbps",
	"init-seconds",
	"graph-capture-seconds",
	"prefill-workers",
	"decode-workers",
	"prefill-tp",
	"decode-tp",
	"prefill-max-num-seqs",
	"prefill-max-num-batched-tokens",
	"decode-max-num-seqs",
	"decode-max-num-batched-tokens",
	"interconnect",
	"interconnect-gbps",
	NULL,
};

static void help(void)
{
	printf("Usage: goodput-sim simulate [ENGINE FLAGS] [WORKLOAD FLAGS] [--json]\n"
	       "\n"
	       "Runs a workload through goodput-sim's engine model in virtual time (instantly)\n"
	       "and prints what `goodput probe` would report against the real-time server.\n"
	       "\n"
	       "Engine flags (as goodput-sim's):\n");
	sim_engine_flags_help(stdout);
	printf("\nWorkload, SLA and report flags (as `goodput probe`'s; --seed also seeds the engine):\n");
	probe_workload_flags_help(stdout);
	printf("\nOutput:\n"
	       "  --json                        the result object of `goodput probe --json` (with\n"
	       "                                --startup-model: startup_seconds and its phases)\n"
	       "  --find-max-rate               search the largest request rate meeting the SLA\n"
	       "                                (needs --goodput or --sla) and report it with $/Mtok\n"
	       "  -h, --help                    this text\n"
	       "\n"
	       "Exit status: 0 done, 1 the configuration cannot start (vLLM's error on stderr)\n"
	       "or the run failed, 2 usage error.\n");
}

/* The start-up model's phases, when it is on: what a virtual-time runner
 * charges before the first request. */
static int add_startup(cJSON *j, const struct sim_startup_phases *ph)
{
	cJSON *o;

	if (json_add_number(j, "startup_seconds", ph->total_s) < 0)
		return -ENOMEM;
	o = cJSON_AddObjectToObject(j, "startup");
	if (!o || json_add_number(o, "weights_gb", ph->weights_gb) < 0 ||
	    json_add_number(o, "weights_seconds", ph->weights_s) < 0 ||
	    json_add_number(o, "init_seconds", ph->init_s) < 0 ||
	    json_add_number(o, "graph_capture_seconds", ph->graphs_s) < 0)
		return -ENOMEM;
	return 0;
}

static int print_result(const struct probe_result *res, bool json, const struct sim_rate_search *search,
			const struct sim_startup_phases *startup)
{
	if (json) {
		_cleanup_(cJSON_Deletep) cJSON *j = NULL;
		_cleanup_(cjson_freep) char *text = NULL;

		if (probe_result_to_json(res, &j) < 0)
			return -ENOMEM;
		if (search) {
			/* The search's own figures beside the result at the found rate. */
			if (json_add_number(j, "max_request_rate", search->max_rate) < 0 ||
			    json_add_number(j, "saturated_request_throughput", search->saturated.request_throughput) <
				    0 ||
			    json_add_number(j, "saturated_output_throughput", search->saturated.output_throughput) <
				    0 ||
			    json_add_number(j, "usd_per_mtok",
					    isfinite(search->usd_per_mtok) ? search->usd_per_mtok : -1) < 0 ||
			    json_add_number(j, "search_runs", search->runs) < 0)
				return -ENOMEM;
		}
		if (startup && add_startup(j, startup) < 0)
			return -ENOMEM;
		text = cJSON_Print(j);
		if (!text)
			return -ENOMEM;
		printf("%s\n", text);
		return 0;
	}
	probe_result_print(stdout, res);
	if (startup)
		printf("%-40s %.2f (weights %.2f GB in %.2f, init %.2f, CUDA graphs %.2f)\n",
		       "Start-up time (s):", startup->total_s, startup->weights_gb, startup->weights_s, startup->init_s,
		       startup->graphs_s);
	if (search) {
		printf("%-40s %.3f\n", "Max request rate meeting the SLA (req/s):", search->max_rate);
		printf("%-40s %.2f\n", "Saturated output throughput (tok/s):", search->saturated.output_throughput);
		if (isfinite(search->usd_per_mtok))
			printf("%-40s %.3f\n", "Cost at that rate ($/Mtok):", search->usd_per_mtok);
		printf("%-40s %u\n", "Simulate runs:", search->runs);
	}
	return 0;
}

int sim_cmd_simulate(int argc, char **argv)
{
	static const struct option own_tail[] = { { "json", no_argument, NULL, ARG_JSON },
						  { "find-max-rate", no_argument, NULL, ARG_FIND_MAX_RATE },
						  { "help", no_argument, NULL, 'h' } };
	struct option own[ELEMENTSOF(engine_flags) + ELEMENTSOF(own_tail)];
	_cleanup_(freep) struct option *opts = NULL;
	_cleanup_(probe_workload_flags_done) struct probe_workload_flags wf = { 0 };
	struct sim_engine_config cfg;
	struct sim_startup_phases ph, *startup = NULL;
	struct probe_workload *w = NULL;
	struct probe_result res;
	struct error err = { 0 };
	bool json = false, find = false;
	size_t k = 0;
	int c, r;

	for (size_t i = 0; engine_flags[i]; i++)
		own[k++] =
			(struct option){ engine_flags[i],
					 sim_engine_flag_takes_value(engine_flags[i]) ? required_argument : no_argument,
					 NULL, ARG_ENGINE_FIRST + (int)i };
	for (size_t i = 0; i < ELEMENTSOF(own_tail); i++)
		own[k++] = own_tail[i];
	own[k] = (struct option){ 0 };

	sim_engine_config_init(&cfg);
	probe_workload_flags_init(&wf);
	r = probe_workload_flags_merge_options(own, &opts);
	if (r < 0) {
		fprintf(stderr, "goodput-sim simulate: out of memory\n");
		return 1;
	}
	optind = 0;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) >= 0) {
		switch (c) {
		case 'h':
			help();
			return 0;
		case ARG_JSON:
			json = true;
			break;
		case ARG_FIND_MAX_RATE:
			find = true;
			break;
		case '?':
			fprintf(stderr, "Try 'goodput-sim simulate --help'.\n");
			return 2;
		default:
			if (c >= ARG_ENGINE_FIRST && c < ARG_ENGINE_FIRST + (int)ELEMENTSOF(engine_flags) - 1) {
				r = sim_engine_config_apply_flag(&cfg, engine_flags[c - ARG_ENGINE_FIRST], optarg,
								 &err);
			} else {
				r = probe_workload_flags_handle(c, optarg, argc, argv, &wf, &err);
				if (r == 0) {
					fprintf(stderr, "goodput-sim simulate: unexpected option\n");
					return 2;
				}
			}
			if (r < 0) {
				fprintf(stderr, "goodput-sim simulate: %s\n", error_str(&err, r));
				return 2;
			}
		}
	}
	if (optind < argc) {
		fprintf(stderr, "goodput-sim simulate: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	r = probe_workload_flags_finish(&wf, &err);
	if (r < 0) {
		fprintf(stderr, "goodput-sim simulate: %s\n", error_str(&err, r));
		return 2;
	}
	cfg.seed = wf.workload.seed;
	r = sim_engine_config_resolve(&cfg, &err);
	if (r < 0) {
		fprintf(stderr, "goodput-sim simulate: %s\n", error_str(&err, r));
		return r == -ENOENT || r == -EINVAL ? 2 : 1;
	}
	if (cfg.startup.enabled) {
		(void)sim_engine_startup_usec(&cfg, &ph);
		startup = &ph;
	}

	if (find) {
		struct sim_rate_search s;

		if (probe_sla_empty(&wf.sla)) {
			fprintf(stderr, "goodput-sim simulate: --find-max-rate needs an SLA (--goodput or --sla)\n");
			return 2;
		}
		r = sim_find_max_rate(&cfg, &wf.workload, &wf.sla, 0, 0, &s, &err);
		if (r < 0) {
			fprintf(stderr, "%s\n", error_str(&err, r));
			return 1;
		}
		r = print_result(s.max_rate > 0 ? &s.at_max : &s.saturated, json, &s, startup);
		return r < 0 ? 1 : 0;
	}

	r = probe_workload_generate(&wf.workload, &w, &err);
	if (r < 0) {
		fprintf(stderr, "goodput-sim simulate: %s\n", error_str(&err, r));
		return 1;
	}
	r = sim_simulate(&cfg, w, &wf.sla, wf.percentiles, wf.n_percentiles, &res, NULL, &err);
	probe_workload_free(w);
	if (r < 0) {
		/* Start-up refusals carry vLLM's wording, as the real server prints them. */
		fprintf(stderr, "%s\n", error_str(&err, r));
		return 1;
	}
	r = print_result(&res, json, NULL, startup);
	return r < 0 ? 1 : 0;
}
