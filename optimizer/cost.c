/* cost.c — dollars per million tokens from a price, a GPU count and a token
 * rate (cost.h has the formula). Kept apart from the search so that the
 * study runner, the report and the benchmarks all compute cost one way. */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "macro.h"

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

unsigned opt_pd_shape_gpus(const struct opt_pd_shape *s)
{
	uint64_t n = (uint64_t)s->prefill_workers * s->prefill_tp + (uint64_t)s->decode_workers * s->decode_tp;

	return (unsigned)MIN(n, (uint64_t)65536);
}

static unsigned knob_count(const cJSON *knobs, const char *name, unsigned def)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(knobs, name);

	return cJSON_IsNumber(v) && v->valuedouble >= 1 && v->valuedouble <= 65536 ? (unsigned)v->valuedouble : def;
}

bool opt_knobs_pd_shape(const cJSON *knobs, struct opt_pd_shape *ret)
{
	const cJSON *shape = cJSON_GetObjectItemCaseSensitive(knobs, OPT_KNOB_SHAPE);
	unsigned tp = knob_count(knobs, OPT_KNOB_TENSOR_PARALLEL, 1);

	if (cJSON_IsString(shape) ? strcmp(shape->valuestring, "disaggregated") != 0
				  : !cJSON_GetObjectItemCaseSensitive(knobs, OPT_KNOB_PREFILL_WORKERS) &&
					    !cJSON_GetObjectItemCaseSensitive(knobs, OPT_KNOB_DECODE_WORKERS))
		return false;
	if (ret)
		*ret = (struct opt_pd_shape){
			.prefill_workers = knob_count(knobs, OPT_KNOB_PREFILL_WORKERS, 1),
			.decode_workers = knob_count(knobs, OPT_KNOB_DECODE_WORKERS, 1),
			.prefill_tp = knob_count(knobs, OPT_KNOB_PREFILL_TENSOR_PARALLEL, tp),
			.decode_tp = knob_count(knobs, OPT_KNOB_DECODE_TENSOR_PARALLEL, tp),
		};
	return true;
}

/* A GPU knob's value in the configuration: def when it has none (absent, or inactive). */
static unsigned config_count(const struct opt_space *space, const struct opt_config *config, const char *name,
			     unsigned def)
{
	int k = opt_space_knob_index(space, name);
	double v;

	if (k < 0 || !opt_knob_active(space, config, (size_t)k) || opt_config_number(space, config, name, &v) < 0 ||
	    !(v >= 1))
		return def;
	return v > 65536 ? 65536 : (unsigned)v;
}

unsigned opt_config_gpus(const struct opt_space *space, const struct opt_config *config)
{
	int shape = opt_space_knob_index(space, OPT_KNOB_SHAPE);
	unsigned n = 1;
	char buf[64];

	if (shape >= 0 ? strcmp(opt_config_text(space, config, (size_t)shape, buf, sizeof(buf)), "disaggregated") == 0
		       : opt_space_knob_index(space, OPT_KNOB_PREFILL_WORKERS) >= 0 ||
				 opt_space_knob_index(space, OPT_KNOB_DECODE_WORKERS) >= 0) {
		unsigned tp = config_count(space, config, OPT_KNOB_TENSOR_PARALLEL, 1);
		struct opt_pd_shape pd = {
			.prefill_workers = config_count(space, config, OPT_KNOB_PREFILL_WORKERS, 1),
			.decode_workers = config_count(space, config, OPT_KNOB_DECODE_WORKERS, 1),
			.prefill_tp = config_count(space, config, OPT_KNOB_PREFILL_TENSOR_PARALLEL, tp),
			.decode_tp = config_count(space, config, OPT_KNOB_DECODE_TENSOR_PARALLEL, tp),
		};

		return opt_pd_shape_gpus(&pd);
	}
	for (size_t i = 0; gpu_knobs[i]; i++)
		n = times(n, config_count(space, config, gpu_knobs[i], 1));
	return n;
}

unsigned opt_knobs_gpus(const cJSON *knobs)
{
	struct opt_pd_shape pd;
	unsigned n = 1;

	if (opt_knobs_pd_shape(knobs, &pd))
		return opt_pd_shape_gpus(&pd);

	for (size_t i = 0; gpu_knobs[i]; i++) {
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(knobs, gpu_knobs[i]);

		if (cJSON_IsNumber(v))
			n = times(n, v->valuedouble);
	}
	return n;
}
