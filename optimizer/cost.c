/* cost.c — dollars per million tokens from a price, a GPU count and a token
 * rate (cost.h has the formula). Kept apart from the search so that the
 * study runner, the report and the benchmarks all compute cost one way. */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "cost.h"

int opt_scenario_from_string(const char *s, enum opt_scenario *ret)
{
	if (strcmp(s, "online") == 0)
		*ret = OPT_SCENARIO_ONLINE;
	else if (strcmp(s, "offline") == 0)
		*ret = OPT_SCENARIO_OFFLINE;
	else
		return -EINVAL;
	return 0;
}

const char *opt_scenario_to_string(enum opt_scenario s)
{
	return s == OPT_SCENARIO_OFFLINE ? "offline" : "online";
}

int opt_cost_tokens_from_string(const char *s, enum opt_cost_tokens *ret)
{
	if (strcmp(s, "output") == 0)
		*ret = OPT_COST_TOKENS_OUTPUT;
	else if (strcmp(s, "input+output") == 0)
		*ret = OPT_COST_TOKENS_TOTAL;
	else
		return -EINVAL;
	return 0;
}

const char *opt_cost_tokens_to_string(enum opt_cost_tokens t)
{
	return t == OPT_COST_TOKENS_TOTAL ? "input+output" : "output";
}

double opt_cost_tokens_per_sec(enum opt_scenario scenario, enum opt_cost_tokens tokens, const struct opt_throughput *t)
{
	double out = scenario == OPT_SCENARIO_OFFLINE ? t->saturated_output_tps : t->good_output_tps;
	double in = scenario == OPT_SCENARIO_OFFLINE ? t->saturated_input_tps : t->good_input_tps;

	return tokens == OPT_COST_TOKENS_TOTAL ? out + in : out;
}

int opt_cost_per_mtok(double usd_per_gpu_hour, unsigned gpus_per_replica, double tokens_per_sec, double *ret)
{
	if (!isfinite(usd_per_gpu_hour) || usd_per_gpu_hour < 0 || gpus_per_replica == 0)
		return -EINVAL;
	if (!isfinite(tokens_per_sec) || tokens_per_sec <= 0)
		return -EDOM;
	*ret = usd_per_gpu_hour * gpus_per_replica / (tokens_per_sec * 3600.0) * 1e6;
	return 0;
}

static const char *const gpu_knobs[] = { OPT_KNOB_DATA_PARALLEL, OPT_KNOB_TENSOR_PARALLEL, OPT_KNOB_PIPELINE_PARALLEL,
					 NULL };

/* A product of GPUs counts, capped so that nonsense cannot overflow. */
static unsigned times(unsigned n, double v)
{
	if (!isfinite(v) || v < 1)
		return n;
	return v > 65536 || (double)n * v > 65536 ? 65536 : (unsigned)((double)n * floor(v));
}

unsigned opt_config_gpus(const struct opt_space *space, const struct opt_config *config)
{
	unsigned n = 1;

	for (size_t i = 0; gpu_knobs[i]; i++) {
		double v;

		if (opt_config_number(space, config, gpu_knobs[i], &v) == 0)
			n = times(n, v);
	}
	return n;
}

unsigned opt_knobs_gpus(const cJSON *knobs)
{
	unsigned n = 1;

	for (size_t i = 0; gpu_knobs[i]; i++) {
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(knobs, gpu_knobs[i]);

		if (cJSON_IsNumber(v))
			n = times(n, v->valuedouble);
	}
	return n;
}
