/* The cost model: $/Mtok from the price, the GPUs a replica uses and the
 * token rate the study counts (online goodput or offline throughput; output
 * or input + output tokens). */
#include <errno.h>

#include "cost.h"
#include "json-util.h"
#include "macro.h"
#include "tests.h"

int main(void)
{
	struct opt_throughput t = {
		.good_output_tps = 1000,
		.good_input_tps = 3000,
		.saturated_output_tps = 1500,
		.saturated_input_tps = 4500,
	};
	enum opt_scenario sc;
	enum opt_cost_tokens tok;
	double c;

	/* $2/GPU-h × 2 GPUs for 1000 tok/s: $4 per 3.6 Mtok = $1.111/Mtok. */
	CHECK_INT_EQ(opt_cost_per_mtok(2.0, 2, 1000, &c), 0);
	CHECK_REL(c, 4.0 / 3.6, 1e-12);
	CHECK_INT_EQ(opt_cost_per_mtok(2.0, 1, 0, &c), -EDOM);
	CHECK_INT_EQ(opt_cost_per_mtok(2.0, 1, -5, &c), -EDOM);
	CHECK_INT_EQ(opt_cost_per_mtok(-1, 1, 5, &c), -EINVAL);
	CHECK_INT_EQ(opt_cost_per_mtok(1, 0, 5, &c), -EINVAL);

	CHECK(opt_cost_tokens_per_sec(OPT_SCENARIO_ONLINE, OPT_COST_TOKENS_OUTPUT, &t) == 1000);
	CHECK(opt_cost_tokens_per_sec(OPT_SCENARIO_ONLINE, OPT_COST_TOKENS_TOTAL, &t) == 4000);
	CHECK(opt_cost_tokens_per_sec(OPT_SCENARIO_OFFLINE, OPT_COST_TOKENS_OUTPUT, &t) == 1500);
	CHECK(opt_cost_tokens_per_sec(OPT_SCENARIO_OFFLINE, OPT_COST_TOKENS_TOTAL, &t) == 6000);

	CHECK_INT_EQ(opt_scenario_from_string("offline", &sc), 0);
	CHECK_INT_EQ(sc, OPT_SCENARIO_OFFLINE);
	CHECK_STR_EQ(opt_scenario_to_string(sc), "offline");
	CHECK_INT_EQ(opt_scenario_from_string("batch", &sc), -EINVAL);
	CHECK_INT_EQ(opt_cost_tokens_from_string("input+output", &tok), 0);
	CHECK_STR_EQ(opt_cost_tokens_to_string(tok), "input+output");
	CHECK_INT_EQ(opt_cost_tokens_from_string("input", &tok), -EINVAL);

	/* The GPUs a configuration holds: its tensor_parallel, times data_parallel and
	 * pipeline_parallel where it has them. */
	{
		const char *spec = "{\"max_num_seqs\": [8, 16], \"tensor_parallel\": [1, 2, 4]}";
		const char *extras[] = { "data_parallel", "pipeline_parallel", NULL };
		struct opt_space_options o = { .extra_knobs = extras };
		_cleanup_(cJSON_Deletep) cJSON *j = NULL, *k = NULL;
		_cleanup_(opt_space_freep) struct opt_space *s = NULL, *s2 = NULL;
		struct error err = { 0 };
		struct opt_config cfg = { 0 };

		CHECK_INT_EQ(json_parse_strict("test", spec, strlen(spec), &j, &err), 0);
		CHECK_MSG(opt_space_from_json(j, "search_space", NULL, NULL, NULL, &s, &err) == 0, "%s", err.msg);
		cfg.idx[1] = 2;
		CHECK_INT_EQ(opt_config_gpus(s, &cfg), 4);
		cfg.idx[1] = 0;
		CHECK_INT_EQ(opt_config_gpus(s, &cfg), 1);

		cJSON_Delete(j);
		spec = "{\"tensor_parallel\": [1, 2], \"data_parallel\": [1, 2, 4], \"pipeline_parallel\": [1, 2]}";
		CHECK_INT_EQ(json_parse_strict("test", spec, strlen(spec), &j, &err), 0);
		CHECK_MSG(opt_space_from_json(j, "search_space", NULL, NULL, &o, &s2, &err) == 0, "%s", err.msg);
		cfg = (struct opt_config){ 0 };
		for (size_t i = 0; i < s2->n_knobs; i++)
			cfg.idx[i] = (uint16_t)(s2->knobs[i].n_values - 1); /* tp 2, dp 4, pp 2 */
		CHECK_INT_EQ(opt_config_gpus(s2, &cfg), 16);
		CHECK_INT_EQ(opt_config_to_json(s2, &cfg, &k), 0);
		CHECK_INT_EQ(opt_knobs_gpus(k), 16);
		cJSON_DeleteItemFromObject(k, "data_parallel");
		CHECK_INT_EQ(opt_knobs_gpus(k), 4);
	}
	return 0;
}
