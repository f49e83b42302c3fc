/* cost.h — the cost model: dollars per million tokens of a configuration.
 *
 *   $/Mtok = $/GPU-hour × GPUs per replica ÷ (tokens/s × 3600) × 10⁶
 *
 * The GPUs a configuration holds are data_parallel × tensor_parallel ×
 * pipeline_parallel (each 1 without its knob): every replica's GPUs are
 * paid for. Tokens/s is the max goodput under the SLA for an `online` study and
 * the saturated throughput for an `offline` one; a study counts either the
 * output tokens (the default) or input + output tokens. */
#pragma once

#include "error.h"
#include "space.h"

enum opt_scenario {
	OPT_SCENARIO_ONLINE,  /* cost from max goodput under the SLA */
	OPT_SCENARIO_OFFLINE, /* cost from saturated throughput, no latency bounds */
};

enum opt_cost_tokens {
	OPT_COST_TOKENS_OUTPUT, /* "output" */
	OPT_COST_TOKENS_TOTAL,  /* "input+output" */
};

/* Token rates measured for one configuration (tokens/s; 0 when unknown). */
struct opt_throughput {
	double good_output_tps;      /* output tokens/s of SLA-meeting requests at the max SLA rate */
	double good_input_tps;       /* their prompt tokens/s */
	double saturated_output_tps; /* output tokens/s at saturation */
	double saturated_input_tps;
};

/* "online"/"offline" and "output"/"input+output" (names used in study specs). */
int opt_scenario_from_string(const char *s, enum opt_scenario *ret);
const char *opt_scenario_to_string(enum opt_scenario s);
int opt_cost_tokens_from_string(const char *s, enum opt_cost_tokens *ret);
const char *opt_cost_tokens_to_string(enum opt_cost_tokens t);

/* The token rate the study's cost counts. */
double opt_cost_tokens_per_sec(enum opt_scenario scenario, enum opt_cost_tokens tokens, const struct opt_throughput *t);

/* $/Mtok for the given price, GPUs per replica and token rate. -EDOM when
 * tokens_per_sec is not > 0 (an SLA never met has no cost: record the trial
 * as such), -EINVAL for a negative or non-finite price or 0 GPUs. */
int opt_cost_per_mtok(double usd_per_gpu_hour, unsigned gpus_per_replica, double tokens_per_sec, double *ret);

/* The GPUs a configuration holds: data_parallel × tensor_parallel ×
 * pipeline_parallel, each 1 when the configuration lacks it; disaggregated
 * (opt_knobs_pd_shape), P × TP_p + D × TP_d. One rule for the slots a
 * trial takes, the GPUs its server is given, its cost, the pre-flight and
 * the report. */
unsigned opt_config_gpus(const struct opt_space *space, const struct opt_config *config);
/* The same for a knobs object ({"tensor_parallel": 4, "data_parallel": 2}). */
unsigned opt_knobs_gpus(const cJSON *knobs);

/* A disaggregated configuration's workers: P prefill and D decode, each of
 * its side's TP. */
struct opt_pd_shape {
	unsigned prefill_workers, decode_workers;
	unsigned prefill_tp, decode_tp;
};
/* Whether knobs describe a disaggregated configuration — shape
 * "disaggregated", or without a shape knob a workers knob — and its shape
 * (a workers knob absent: 1; a side's TP absent: tensor_parallel, else 1). */
bool opt_knobs_pd_shape(const cJSON *knobs, struct opt_pd_shape *ret);
/* P × TP_p + D × TP_d. */
unsigned opt_pd_shape_gpus(const struct opt_pd_shape *s);
