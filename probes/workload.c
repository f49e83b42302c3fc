/* workload.c — generates the requests of a benchmark: their prompts, lengths
 * and arrival times, from a seed (see workload.h for the rules).
 *
 * The probe sends these requests to a real server and goodput-sim's
 * virtual-time mode feeds them to the engine model; both call
 * probe_workload_generate() with the same config, so for a seed they see the
 * same requests. Everything random comes from rng.h's xoshiro streams, one
 * per purpose (lengths, prompt ids, prefixes, arrivals, dataset order), so a
 * change to one knob (say the rate) leaves the other draws alone. Datasets
 * (ShareGPT JSON, JSONL) are read in workload-dataset.c.
 *
 * A generated workload is compact: each request holds its lengths, its
 * arrival and (for a dataset) the entry it takes, about 32 bytes; a prompt
 * is made when it is sent — its ids drawn from a stream of its own (seed,
 * prompt variant, request index), a dataset's text borrowed from the
 * entries kept once. The probe's workload is opened instead: one generator
 * makes each request in turn as it is sent (the lengths' stream and the
 * arrivals' move along), a second runs the arrivals ahead for the load
 * point's timer, so a million-request load point holds no request at all.
 * probe_workload_generate is that generator read to the end. */
#include "workload.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "rng.h"
#include "time-util.h"
#include "workload-internal.h"

enum {
	STREAM_LENGTHS = 1,
	STREAM_ARRIVALS = 3,
	STREAM_DATASET = 4,
	STREAM_SAMPLES = 5,
	STREAM_PREFIX = 0x100, /* + group number */
};
/* + request index: each prompt's own ids (above every prefix group's stream) */
#define STREAM_PROMPT (UINT64_C(1) << 32)
/* + request index: a turn's answer, resent with the next turn */
#define STREAM_ANSWER (UINT64_C(2) << 32)
/* + request index: which segments of a prompt repeat earlier ones */
#define STREAM_REPEAT (UINT64_C(3) << 32)
/* a repeated or fresh segment of a prompt is 8–32 tokens */
#define SEGMENT_MIN  8
#define SEGMENT_SPAN 25

const char *const probe_dataset_names[] = { "random", "sharegpt", "custom", NULL };
const char *const probe_dist_names[] = { "fixed", "uniform", "normal", "lognormal", "histogram", "samples", NULL };
const char *const probe_arrival_names[] = { "poisson", "gamma", "constant", "inf", "trace", NULL };

_Static_assert(PROBE_DIST_SAMPLES == 5 && PROBE_ARRIVAL_TRACE == 4 && PROBE_DATASET_CUSTOM == 2,
	       "the enums follow their names");

static int name_index(const char *const *names, const char *s)
{
	for (int i = 0; s && names[i]; i++)
		if (strcmp(names[i], s) == 0)
			return i;
	return -EINVAL;
}

const char *probe_dataset_name(enum probe_dataset d)
{
	return (unsigned)d < ELEMENTSOF(probe_dataset_names) - 1 ? probe_dataset_names[d] : "?";
}
const char *probe_dist_name(enum probe_dist d)
{
	return (unsigned)d < ELEMENTSOF(probe_dist_names) - 1 ? probe_dist_names[d] : "?";
}
const char *probe_arrival_name(enum probe_arrival a)
{
	return (unsigned)a < ELEMENTSOF(probe_arrival_names) - 1 ? probe_arrival_names[a] : "?";
}
int probe_dataset_from_name(const char *s)
{
	return name_index(probe_dataset_names, s);
}
int probe_dist_from_name(const char *s)
{
	return name_index(probe_dist_names, s);
}
int probe_arrival_from_name(const char *s)
{
	return name_index(probe_arrival_names, s);
}

void probe_workload_config_init(struct probe_workload_config *cfg)
{
	*cfg = (struct probe_workload_config){
		.dataset = PROBE_DATASET_RANDOM,
		.input = { .kind = PROBE_DIST_FIXED, .mean = 1024 },
		.output = { .kind = PROBE_DIST_FIXED, .mean = 128 },
		.num_prompts = 1000,
		.arrival = PROBE_ARRIVAL_INF,
		.request_rate = INFINITY,
		.burstiness = 1.0,
	};
}

static int check_histogram(const char *what, const struct probe_length_histogram *h, struct error *err)
{
	double total = 0;

	if (h->n == 0 || h->n > PROBE_HISTOGRAM_MAX_BUCKETS)
		return error_set(err, -EINVAL, "%s length: a histogram needs 1 to %u buckets, got %u", what,
				 PROBE_HISTOGRAM_MAX_BUCKETS, h->n);
	for (uint32_t i = 0; i < h->n; i++) {
		if (!(h->le[i] > (i ? h->le[i - 1] : 0)) || h->le[i] > PROBE_MAX_TOKENS_PER_REQUEST)
			return error_set(err, -EINVAL,
					 "%s length: bucket bound %u (%g) must be above the one before and at most %u",
					 what, i, h->le[i], PROBE_MAX_TOKENS_PER_REQUEST);
		if (!(h->count[i] >= 0) || !isfinite(h->count[i]))
			return error_set(err, -EINVAL, "%s length: bucket %u has count %g", what, i, h->count[i]);
		total += h->count[i];
	}
	if (!(total > 0))
		return error_set(err, -EINVAL, "%s length: every bucket of the histogram is empty", what);
	return 0;
}

static int check_dist(const char *what, const struct probe_length_dist *d, struct error *err)
{
	uint32_t lo = d->min ? d->min : 1, hi = d->max ? d->max : PROBE_MAX_TOKENS_PER_REQUEST;
	bool mean_optional = d->kind == PROBE_DIST_SAMPLES || (d->kind == PROBE_DIST_HISTOGRAM && isnan(d->mean));

	if (!mean_optional && (!isfinite(d->mean) || d->mean < 1 || d->mean > PROBE_MAX_TOKENS_PER_REQUEST))
		return error_set(err, -EINVAL, "%s length: expected a mean in [1, %u], got %g", what,
				 PROBE_MAX_TOKENS_PER_REQUEST, d->mean);
	if (lo > hi || hi > PROBE_MAX_TOKENS_PER_REQUEST)
		return error_set(err, -EINVAL, "%s length: bad clamp range [%u, %u]", what, lo, hi);
	switch (d->kind) {
	case PROBE_DIST_FIXED:
	case PROBE_DIST_SAMPLES:
		break;
	case PROBE_DIST_HISTOGRAM:
		return check_histogram(what, &d->hist, err);
	case PROBE_DIST_UNIFORM:
		if (!(d->range_ratio >= 0 && d->range_ratio < 1))
			return error_set(err, -EINVAL, "%s length: range ratio must be in [0, 1), got %g", what,
					 d->range_ratio);
		break;
	case PROBE_DIST_NORMAL:
	case PROBE_DIST_LOGNORMAL:
		if (!(d->stddev >= 0) || !isfinite(d->stddev) || (d->kind == PROBE_DIST_LOGNORMAL && d->stddev > 10))
			return error_set(err, -EINVAL, "%s length: bad standard deviation %g", what, d->stddev);
		break;
	default:
		return error_set(err, -EINVAL, "%s length: unknown distribution %d", what, (int)d->kind);
	}
	return 0;
}

static int check_profile(const struct probe_rate_profile *p, struct error *err)
{
	if (p->n > PROBE_RATE_PROFILE_MAX)
		return error_set(err, -EINVAL, "rate profile: at most %u points, got %u", PROBE_RATE_PROFILE_MAX, p->n);
	for (uint32_t i = 0; i < p->n; i++) {
		if (p->second_of_day[i] >= PROBE_SECONDS_PER_DAY ||
		    (i && p->second_of_day[i] <= p->second_of_day[i - 1]))
			return error_set(err, -EINVAL, "rate profile: point %u: times must increase within one day", i);
		if (!(p->rate[i] >= 0) || !isfinite(p->rate[i]))
			return error_set(err, -EINVAL, "rate profile: point %u: rate %g", i, p->rate[i]);
	}
	if (p->n && !(probe_rate_profile_mean(p) > 0))
		return error_set(err, -EINVAL, "rate profile: every rate is 0");
	if (p->n && (!(p->speed > 0) || !isfinite(p->speed)))
		return error_set(err, -EINVAL, "rate profile: speed must be > 0, got %g", p->speed);
	return 0;
}

uint32_t probe_workload_draw_length(const struct probe_length_dist *d, struct probe_rng *rng)
{
	uint32_t lo = d->min ? d->min : 1, hi = d->max ? d->max : PROBE_MAX_TOKENS_PER_REQUEST;
	double v;

	switch (d->kind) {
	case PROBE_DIST_UNIFORM: {
		/* vLLM: np.random.randint(floor(len·(1−r)), ceil(len·(1+r)) + 1) */
		uint64_t a = (uint64_t)floor(d->mean * (1.0 - d->range_ratio));
		uint64_t b = (uint64_t)ceil(d->mean * (1.0 + d->range_ratio));

		v = (double)(a + probe_rng_below(rng, b - a + 1));
		break;
	}
	case PROBE_DIST_NORMAL:
		v = round(d->mean + d->stddev * probe_rng_normal(rng));
		break;
	case PROBE_DIST_LOGNORMAL:
		v = round(d->mean * exp(d->stddev * probe_rng_normal(rng)));
		break;
	case PROBE_DIST_FIXED:
	default:
		v = round(d->mean);
		break;
	}
	if (!(v >= lo)) /* also NaN */
		return lo;
	if (v > hi)
		return hi;
	return (uint32_t)v;
}

static bool uses_samples(const struct probe_workload_config *cfg)
{
	return cfg->arrival == PROBE_ARRIVAL_TRACE ||
	       (cfg->dataset == PROBE_DATASET_RANDOM && cfg->input.kind == PROBE_DIST_SAMPLES) ||
	       (cfg->dataset != PROBE_DATASET_SHAREGPT && cfg->output.kind == PROBE_DIST_SAMPLES);
}

static int check_arrival(const struct probe_workload_config *cfg, struct error *err)
{
	switch (cfg->arrival) {
	case PROBE_ARRIVAL_INF:
		return 0; /* all at once: a profile or a trace has nothing to shape */
	case PROBE_ARRIVAL_TRACE:
		if (cfg->profile.n)
			return error_set(err, -EINVAL,
					 "rate_profile: a replayed trace has its own arrivals (use poisson or gamma)");
		if (cfg->request_rate <= 0 || isnan(cfg->request_rate))
			return error_set(err, -EINVAL,
					 "request_rate: expected a rate > 0 to scale the trace to, got %g",
					 cfg->request_rate);
		return 0;
	case PROBE_ARRIVAL_GAMMA:
		if (!(cfg->burstiness > 0) || !isfinite(cfg->burstiness))
			return error_set(err, -EINVAL, "burstiness: expected a positive number, got %g",
					 cfg->burstiness);
		__attribute__((fallthrough));
	case PROBE_ARRIVAL_POISSON:
	case PROBE_ARRIVAL_CONSTANT:
		if (!(cfg->request_rate > 0) || !isfinite(cfg->request_rate))
			return error_set(err, -EINVAL, "request_rate: arrival %s needs a finite rate > 0, got %g",
					 probe_arrival_name(cfg->arrival), cfg->request_rate);
		return check_profile(&cfg->profile, err);
	default:
		return error_set(err, -EINVAL, "arrival: unknown kind %d", (int)cfg->arrival);
	}
}

static int check_config(const struct probe_workload_config *cfg, struct error *err)
{
	uint64_t n = (uint64_t)cfg->num_prompts + cfg->num_warmup;
	int r;

	if (cfg->num_prompts == 0)
		return error_set(err, -EINVAL, "num_prompts: expected at least 1, got 0");
	if (n > PROBE_MAX_REQUESTS)
		return error_set(err, -E2BIG, "num_prompts + num_warmups: at most %u requests, got %" PRIu64,
				 PROBE_MAX_REQUESTS, n);
	if ((unsigned)cfg->dataset > PROBE_DATASET_CUSTOM)
		return error_set(err, -EINVAL, "dataset: unknown kind %d", (int)cfg->dataset);
	if (cfg->dataset != PROBE_DATASET_RANDOM && (!cfg->dataset_path || !*cfg->dataset_path))
		return error_set(err, -EINVAL, "dataset %s: needs a dataset path", probe_dataset_name(cfg->dataset));
	if (cfg->dataset == PROBE_DATASET_RANDOM) {
		r = check_dist("input", &cfg->input, err);
		if (r < 0)
			return r;
		if ((uint64_t)cfg->prefix_len + cfg->input.mean > PROBE_MAX_TOKENS_PER_REQUEST)
			return error_set(err, -EINVAL, "prefix_len: %u + input length exceeds %u tokens",
					 cfg->prefix_len, PROBE_MAX_TOKENS_PER_REQUEST);
	} else if (cfg->turns > 1 || cfg->prompt_repetition > 0)
		return error_set(err, -EINVAL, "%s: only for the random dataset",
				 cfg->turns > 1 ? "turns" : "prompt_repetition");
	if (!(cfg->prompt_repetition >= 0 && cfg->prompt_repetition < 1))
		return error_set(err, -EINVAL, "prompt_repetition: expected a share in [0, 1), got %g",
				 cfg->prompt_repetition);
	if (cfg->dataset != PROBE_DATASET_SHAREGPT || cfg->dataset_output_len == 0) {
		r = check_dist("output", &cfg->output, err);
		if (r < 0)
			return r;
	}
	if (cfg->dataset_output_len > PROBE_MAX_TOKENS_PER_REQUEST)
		return error_set(err, -EINVAL, "dataset_output_len: at most %u, got %u", PROBE_MAX_TOKENS_PER_REQUEST,
				 cfg->dataset_output_len);
	if (uses_samples(cfg) && (!cfg->samples_path || !*cfg->samples_path))
		return error_set(err, -EINVAL, "samples_path: needed for samples lengths and trace arrivals");
	return check_arrival(cfg, err);
}

/* What a workload's requests are drawn from: the samples file, when one is
 * used, and the histograms ready to draw. */
struct gen {
	const struct probe_workload_config *cfg;
	struct probe_samples *samples;
	size_t *order; /* samples in the order requests take them */
	struct probe_histogram_draw *hist_in, *hist_out;
};

static void gen_done(struct gen *g)
{
	probe_samples_free(g->samples);
	free(g->order);
	free(g->hist_in);
	free(g->hist_out);
}

static int gen_init(const struct probe_workload_config *cfg, struct gen *g, struct error *err)
{
	struct probe_rng rng;
	int r;

	*g = (struct gen){ .cfg = cfg };
	if (cfg->input.kind == PROBE_DIST_HISTOGRAM) {
		g->hist_in = malloc(sizeof(*g->hist_in));
		if (!g->hist_in)
			return -ENOMEM;
		probe_histogram_prepare(&cfg->input, g->hist_in);
	}
	if (cfg->output.kind == PROBE_DIST_HISTOGRAM) {
		g->hist_out = malloc(sizeof(*g->hist_out));
		if (!g->hist_out)
			return -ENOMEM;
		probe_histogram_prepare(&cfg->output, g->hist_out);
	}
	if (!uses_samples(cfg))
		return 0;
	r = probe_samples_load(cfg->samples_path, &g->samples, err);
	if (r < 0)
		return r;
	if (cfg->arrival == PROBE_ARRIVAL_TRACE && !g->samples->have_time)
		return error_set(err, -EINVAL, "%s: trace arrivals need the requests' times", cfg->samples_path);
	g->order = malloc(g->samples->n * sizeof(size_t));
	if (!g->order)
		return -ENOMEM;
	for (size_t i = 0; i < g->samples->n; i++)
		g->order[i] = i;
	if (cfg->arrival == PROBE_ARRIVAL_TRACE)
		return 0; /* a replay: the log's own order */
	probe_rng_init(&rng, cfg->seed, STREAM_SAMPLES);
	for (size_t i = g->samples->n; i > 1; i--) { /* Fisher–Yates */
		size_t j = (size_t)probe_rng_below(&rng, i), t = g->order[i - 1];

		g->order[i - 1] = g->order[j];
		g->order[j] = t;
	}
	return 0;
}

/* The sample request i takes: measured request j takes sample j, warm-ups
 * the ones before it (from the end). */
static size_t sample_of(const struct gen *g, size_t i)
{
	size_t n = g->samples->n;

	return g->order[((i % n) + n - g->cfg->num_warmup % n) % n];
}

static uint32_t clamp_len(const struct probe_length_dist *d, uint32_t v)
{
	uint32_t lo = d->min ? d->min : 1, hi = d->max ? d->max : PROBE_MAX_TOKENS_PER_REQUEST;

	return MIN(MAX(v, lo), hi);
}

static uint32_t draw_length(const struct gen *g, bool input, size_t i, struct probe_rng *rng)
{
	const struct probe_length_dist *d = input ? &g->cfg->input : &g->cfg->output;

	switch (d->kind) {
	case PROBE_DIST_HISTOGRAM:
		return clamp_len(d, probe_histogram_draw(input ? g->hist_in : g->hist_out, rng));
	case PROBE_DIST_SAMPLES:
		return clamp_len(d, (input ? g->samples->input : g->samples->output)[sample_of(g, i)]);
	default:
		return probe_workload_draw_length(d, rng);
	}
}

/* ---- arrivals, one after another ----
 *
 * The measured requests' arrival offsets (µs): the first at 0, then the
 * gaps; with a rate profile, the gaps of a unit-rate process warped by it;
 * trace arrivals from the samples file. A capped point's window is scaled
 * to its rate (arrival_window_s, workload.h): the first k = rate × window
 * arrivals (k − 1 gaps, as offered_rate counts them) to span (k − 1) /
 * rate, every arrival by the same factor, measured once when the workload
 * is opened by running the sequence k arrivals ahead. */
struct arrivals {
	const struct gen *g;
	size_t j; /* the measured request whose arrival comes next */
	bool warp;
	struct probe_profile_warp pw;
	struct probe_rng rng;
	double t, tau, rate;
	/* trace */
	double trace_scale, cycle;
	/* the window: each arrival times want / span when span > 0 */
	double want, span;
};

static void arrivals_init(struct arrivals *a, const struct gen *g, double want, double span)
{
	const struct probe_workload_config *cfg = g->cfg;

	*a = (struct arrivals){
		.g = g,
		.warp = cfg->profile.n > 0 && cfg->arrival != PROBE_ARRIVAL_INF,
		.want = want,
		.span = span,
	};
	a->rate = a->warp ? 1.0 : cfg->request_rate;
	if (cfg->arrival == PROBE_ARRIVAL_TRACE) {
		/* the log's offsets scaled to the asked rate, the log starting
		 * again one mean gap after its end */
		const struct probe_samples *sm = g->samples;
		double rate = probe_samples_rate(sm), span_log = (double)sm->t_usec[sm->n - 1];

		a->cycle = span_log + (sm->n > 1 ? span_log / (double)(sm->n - 1) : 1e6);
		a->trace_scale = 1;
		if (isfinite(cfg->request_rate) && isfinite(rate) && fabs(rate / cfg->request_rate - 1) > 1e-12)
			a->trace_scale = rate / cfg->request_rate;
		return;
	}
	if (a->warp)
		probe_profile_warp_init(&cfg->profile, cfg->request_rate, &a->pw);
	probe_rng_init(&a->rng, cfg->seed + cfg->arrival_variant * UINT64_C(0xD1B54A32D192ED03), STREAM_ARRIVALS);
}

/* The next arrival before the window's scaling. */
static uint64_t arrivals_next_raw(struct arrivals *a)
{
	const struct probe_workload_config *cfg = a->g->cfg;
	size_t j = a->j++;
	uint64_t v;

	if (cfg->arrival == PROBE_ARRIVAL_TRACE) {
		const struct probe_samples *sm = a->g->samples;
		size_t k = a->g->order[j % sm->n];
		double t = (double)(j / sm->n) * a->cycle + (double)sm->t_usec[k];

		return a->trace_scale == 1 && j < sm->n ? sm->t_usec[k] : (uint64_t)llround(t * a->trace_scale);
	}
	v = sec_to_usec(a->warp ? probe_profile_warp(&a->pw, a->tau) : a->t);
	switch (cfg->arrival) {
	case PROBE_ARRIVAL_POISSON:
		a->t += probe_rng_exp(&a->rng) / a->rate;
		break;
	case PROBE_ARRIVAL_GAMMA:
		/* shape = burstiness, scale = 1/(rate·burstiness): mean gap 1/rate, CV 1/sqrt(burstiness) */
		a->t += probe_rng_gamma(&a->rng, cfg->burstiness) / (a->rate * cfg->burstiness);
		break;
	case PROBE_ARRIVAL_CONSTANT:
		a->t = (double)(j + 1) / a->rate;
		break;
	case PROBE_ARRIVAL_INF:
	default:
		break;
	}
	a->tau = a->t;
	return v;
}

static uint64_t arrivals_next(struct arrivals *a)
{
	uint64_t v = arrivals_next_raw(a);

	return a->span > 0 ? (uint64_t)llround((double)v * a->want / a->span) : v;
}

/* The window's scaling (see above): *want and *span, span 0 for none. */
static void window_scale(const struct gen *g, size_t n_requests, double *want, double *span)
{
	const struct probe_workload_config *cfg = g->cfg;
	size_t n = n_requests - MIN((size_t)cfg->num_warmup, n_requests), k;
	struct arrivals a;
	uint64_t last = 0;

	*want = *span = 0;
	if (!(cfg->arrival_window_s > 0) || cfg->profile.n > 0 || !(cfg->request_rate > 0) ||
	    (cfg->arrival != PROBE_ARRIVAL_POISSON && cfg->arrival != PROBE_ARRIVAL_GAMMA))
		return;
	k = (size_t)MIN(ceil(cfg->request_rate * cfg->arrival_window_s), (double)n);
	if (k < 3)
		return;
	arrivals_init(&a, g, 0, 0);
	for (size_t j = 0; j < k; j++)
		last = arrivals_next_raw(&a);
	if (!((double)last > 0))
		return;
	*want = (double)(k - 1) / cfg->request_rate * 1e6;
	*span = (double)last;
}

/* ---- requests, one after another ---- */

/* The lengths of a conversation's turn, for the turns after it. */
struct turn {
	uint32_t input_len, output_len;
};

struct probe_workload_stream {
	struct gen g; /* g.cfg is the workload's config */
	double want, span;
	/* the requests: the next one made, its lengths' stream and arrivals */
	size_t next;
	struct probe_rng lengths;
	struct arrivals arr;
	/* the arrivals read ahead (probe_workload_arrival): the next one, its value cached */
	struct arrivals ahead;
	size_t ahead_j;
	uint64_t ahead_usec;
	/* dataset: the entries (w->dataset's, or these with lengths_only) in the order requests take them */
	struct probe_dataset_entries *own_dataset;
	const struct probe_dataset_entries *d;
	size_t *perm;
	/* conversations (turns > 1): every request's lengths as it is made */
	struct turn *turns;
};

static void stream_free(struct probe_workload_stream *s)
{
	if (!s)
		return;
	gen_done(&s->g);
	probe_dataset_free(s->own_dataset);
	free(s->perm);
	free(s->turns);
	free(s);
}

/* Back to the first request (and the first arrival read ahead). */
static void stream_rewind(struct probe_workload_stream *s)
{
	s->next = 0;
	probe_rng_init(&s->lengths, s->g.cfg->seed, STREAM_LENGTHS);
	arrivals_init(&s->arr, &s->g, s->want, s->span);
}

static void ahead_rewind(struct probe_workload_stream *s)
{
	arrivals_init(&s->ahead, &s->g, s->want, s->span);
	s->ahead_j = SIZE_MAX; /* nothing cached */
}

/* Datasets: entries (already validated) go to requests in the seed's order
 * (ShareGPT) or the file's (JSONL); the workload keeps each entry once. */
static int open_dataset(struct probe_workload *w, struct probe_workload_stream *s, struct error *err)
{
	const struct probe_workload_config *cfg = &w->config;
	_cleanup_(probe_dataset_freep) struct probe_dataset_entries *d = NULL;
	struct probe_rng order;
	int r;

	if (cfg->dataset == PROBE_DATASET_SHAREGPT)
		r = probe_dataset_load_sharegpt(cfg->dataset_path, &d, err);
	else
		r = probe_dataset_load_jsonl(cfg->dataset_path, &d, err);
	if (r < 0)
		return r;
	if (d->n > UINT32_MAX)
		return error_set(err, -E2BIG, "%s: more than %" PRIu32 " entries", cfg->dataset_path, UINT32_MAX);
	s->perm = malloc(d->n * sizeof(size_t));
	if (!s->perm)
		return -ENOMEM;
	for (size_t i = 0; i < d->n; i++)
		s->perm[i] = i;
	if (cfg->dataset == PROBE_DATASET_SHAREGPT) {
		probe_rng_init(&order, cfg->seed, STREAM_DATASET);
		for (size_t i = d->n; i > 1; i--) { /* Fisher–Yates */
			size_t j = (size_t)probe_rng_below(&order, i);
			size_t t = s->perm[i - 1];

			s->perm[i - 1] = s->perm[j];
			s->perm[j] = t;
		}
	}
	s->d = d;
	if (cfg->lengths_only)
		s->own_dataset = TAKE_PTR(d);
	else
		w->dataset = TAKE_PTR(d);
	return 0;
}

/* Conversations in a workload of n requests (1 without turns). */
static size_t conversations(const struct probe_workload_config *cfg, size_t n)
{
	return cfg->turns > 1 ? MAX((n + cfg->turns - 1) / cfg->turns, (size_t)1) : MAX(n, (size_t)1);
}

/* Request s->next, the lengths' stream moved past its draws. */
static void stream_make(const struct probe_workload *w, struct probe_workload_stream *s, struct probe_request_spec *q)
{
	const struct probe_workload_config *cfg = &w->config;
	size_t i = s->next++;

	*q = (struct probe_request_spec){ .index = (uint32_t)i, .warmup = i < cfg->num_warmup };
	if (cfg->dataset == PROBE_DATASET_RANDOM) {
		uint32_t group_size = cfg->prefix_group_size ? cfg->prefix_group_size : UINT32_MAX;
		size_t conv = conversations(cfg, w->n_requests);
		uint32_t body = draw_length(&s->g, true, i, &s->lengths);
		uint64_t len = (uint64_t)cfg->prefix_len + body;

		q->output_len = draw_length(&s->g, false, i, &s->lengths);
		/* a later turn resends the conversation so far: the previous prompt and its answer */
		if (cfg->turns > 1 && i >= conv)
			len = (uint64_t)s->turns[i - conv].input_len + s->turns[i - conv].output_len + body;
		q->input_len = (uint32_t)MIN(len, (uint64_t)PROBE_MAX_TOKENS_PER_REQUEST);
		if (cfg->prefix_len > 0)
			q->prefix_id = (uint32_t)((cfg->turns > 1 ? i % conv : i) / group_size) + 1;
		if (s->turns)
			s->turns[i] = (struct turn){ q->input_len, q->output_len };
	} else {
		/* a prompt variant starts where the previous one's requests ended */
		size_t at = (size_t)(((uint64_t)cfg->prompt_variant * w->n_requests + i) % s->d->n);
		const struct probe_dataset_entry *e = &s->d->entries[s->perm[at]];

		q->entry = (uint32_t)s->perm[at];
		q->input_len = e->input_len;
		if (cfg->dataset_output_len > 0)
			q->output_len = cfg->dataset_output_len;
		else if (e->output_len > 0)
			q->output_len = e->output_len;
		else
			q->output_len = draw_length(&s->g, false, i, &s->lengths);
	}
	/* warm-ups come at 0: the caller runs them before the measured run */
	q->arrival_usec = q->warmup ? 0 : arrivals_next(&s->arr);
}

int probe_workload_open(const struct probe_workload_config *cfg, struct probe_workload **ret, struct error *err)
{
	_cleanup_(probe_workload_freep) struct probe_workload *w = NULL;
	struct probe_workload_stream *s;
	int r;

	r = check_config(cfg, err);
	if (r < 0)
		return r;
	w = calloc(1, sizeof(*w));
	if (!w)
		return error_set(err, -ENOMEM, "workload: out of memory");
	w->config = *cfg;
	w->n_requests = (size_t)cfg->num_warmup + cfg->num_prompts;
	s = w->stream = calloc(1, sizeof(*s));
	if (!s)
		return error_set(err, -ENOMEM, "workload: out of memory");
	r = gen_init(&w->config, &s->g, err);
	if (r >= 0 && cfg->dataset != PROBE_DATASET_RANDOM)
		r = open_dataset(w, s, err);
	if (r >= 0 && cfg->dataset == PROBE_DATASET_RANDOM && cfg->turns > 1) {
		/* calloc: pages come as the requests are made */
		s->turns = calloc(w->n_requests, sizeof(*s->turns));
		if (!s->turns)
			r = -ENOMEM;
	}
	if (r < 0)
		return r == -ENOMEM ? error_set(err, r, "workload: out of memory") : r;
	window_scale(&s->g, w->n_requests, &s->want, &s->span);
	stream_rewind(s);
	ahead_rewind(s);
	*ret = TAKE_PTR(w);
	return 0;
}

int probe_workload_request(struct probe_workload *w, size_t i, struct probe_request_spec *ret)
{
	struct probe_workload_stream *s = w->stream;

	if (i >= w->n_requests)
		return -ERANGE;
	if (!s) {
		*ret = w->requests[i];
		return 0;
	}
	if (i < s->next)
		stream_rewind(s);
	while (s->next < i)
		stream_make(w, s, ret);
	stream_make(w, s, ret);
	return 0;
}

uint64_t probe_workload_arrival(struct probe_workload *w, size_t i)
{
	struct probe_workload_stream *s = w->stream;
	size_t j;

	if (i >= w->n_requests)
		return UINT64_MAX;
	if (!s)
		return w->requests[i].arrival_usec;
	if (i < w->config.num_warmup)
		return 0;
	j = i - w->config.num_warmup;
	if (j == s->ahead_j)
		return s->ahead_usec;
	if (s->ahead_j != SIZE_MAX && j < s->ahead_j) {
		/* back (a stopped load point takes its sending up again at the
		 * first request not sent): from the requests' own cursor when it
		 * is not past j, else from the start */
		if (s->arr.j <= j)
			s->ahead = s->arr;
		else
			ahead_rewind(s);
	}
	while (s->ahead.j <= j)
		s->ahead_usec = arrivals_next(&s->ahead);
	s->ahead_j = j;
	return s->ahead_usec;
}

int probe_workload_generate(const struct probe_workload_config *cfg, struct probe_workload **ret, struct error *err)
{
	_cleanup_(probe_workload_freep) struct probe_workload *w = NULL;
	int r;

	r = probe_workload_open(cfg, &w, err);
	if (r < 0)
		return r;
	w->requests = calloc(w->n_requests, sizeof(*w->requests));
	if (!w->requests)
		return error_set(err, -ENOMEM, "workload: out of memory");
	for (size_t i = 0; i < w->n_requests; i++)
		stream_make(w, w->stream, &w->requests[i]);
	/* laid out: the generator is done with (the dataset's texts stay) */
	stream_free(TAKE_PTR(w->stream));
	*ret = TAKE_PTR(w);
	return 0;
}

/* The seed of the token ids: the workload's, moved by the prompt variant. */
static uint64_t prompt_seed(const struct probe_workload_config *cfg)
{
	return cfg->seed + cfg->prompt_variant * UINT64_C(0x9E3779B97F4A7C15);
}

bool probe_workload_ids_matter(const struct probe_workload_config *cfg)
{
	return cfg->prefix_len > 0 || cfg->turns > 1 || cfg->prompt_repetition > 0;
}

bool probe_workload_arrivals_scale(const struct probe_workload_config *cfg)
{
	return cfg->arrival == PROBE_ARRIVAL_INF || cfg->arrival == PROBE_ARRIVAL_TRACE || cfg->profile.n == 0;
}

void probe_workload_at_rate(const struct probe_workload_config *base, double rate, struct probe_workload_config *ret)
{
	struct probe_workload_config c = *base;

	if (isinf(rate)) {
		c.arrival = PROBE_ARRIVAL_INF;
	} else {
		c.request_rate = rate;
		if (c.arrival == PROBE_ARRIVAL_INF)
			c.arrival =
				c.burstiness > 0 && c.burstiness != 1.0 ? PROBE_ARRIVAL_GAMMA : PROBE_ARRIVAL_POISSON;
	}
	*ret = c;
}

void probe_workload_at_point(const struct probe_workload_config *base, double rate, uint32_t point_index,
			     uint32_t num_prompts, struct probe_workload_config *ret)
{
	struct probe_workload_config c;

	probe_workload_at_rate(base, rate, &c);
	if (num_prompts > 0)
		c.num_prompts = num_prompts;
	if (point_index > 0)
		c.num_warmup = 0;
	c.prompt_variant = point_index;
	*ret = c;
}

struct probe_workload *probe_workload_free(struct probe_workload *w)
{
	if (!w)
		return NULL;
	stream_free(w->stream);
	probe_dataset_free(w->dataset);
	free(w->requests);
	free(w);
	return NULL;
}

bool probe_workload_has_ids(const struct probe_workload *w)
{
	return w->config.dataset == PROBE_DATASET_RANDOM;
}

/* One draw of a token id. */
static uint32_t draw_id(struct probe_rng *rng)
{
	return PROBE_TOKEN_ID_MIN + (uint32_t)probe_rng_below(rng, PROBE_TOKEN_ID_MAX - PROBE_TOKEN_ID_MIN);
}

/* ids[from, to) of request index's own tokens (its prompt input_len long):
 * fresh draws, or with repetition segments of them copied from
 * ids[0, from + ...) before. The length moves the stream too: two workloads
 * of one seed (a chat and a RAG run against one server) share no prompt
 * beginnings a prefix cache would find. */
static void fill_own(const struct probe_workload_config *cfg, uint32_t index, uint32_t input_len, uint32_t *ids,
		     uint32_t from, uint32_t to)
{
	struct probe_rng rng, rep;
	uint32_t k = from;

	probe_rng_init(&rng, prompt_seed(cfg) ^ ((uint64_t)input_len * UINT64_C(0xC2B2AE3D27D4EB4F)),
		       STREAM_PROMPT + index);
	if (cfg->prompt_repetition <= 0) {
		for (; k < to; k++)
			ids[k] = draw_id(&rng);
		return;
	}
	probe_rng_init(&rep, prompt_seed(cfg), STREAM_REPEAT + index);
	while (k < to) {
		uint32_t len = MIN(SEGMENT_MIN + (uint32_t)probe_rng_below(&rep, SEGMENT_SPAN), to - k);
		bool copy = k >= SEGMENT_MIN && probe_rng_double(&rep) < cfg->prompt_repetition;

		if (copy) {
			/* an earlier stretch, token by token (it may run into what it copies) */
			uint32_t src = (uint32_t)probe_rng_below(&rep, k - SEGMENT_MIN + 1);

			for (uint32_t j = 0; j < len; j++)
				ids[k + j] = ids[src + j];
		} else
			for (uint32_t j = 0; j < len; j++)
				ids[k + j] = draw_id(&rng);
		k += len;
	}
}

/* The lengths of request i (r's conversation's turn i, at most r) */
static struct turn turn_of(const struct probe_workload *w, const struct probe_request_spec *r, size_t i)
{
	if (i == r->index)
		return (struct turn){ r->input_len, r->output_len };
	if (w->requests)
		return (struct turn){ w->requests[i].input_len, w->requests[i].output_len };
	return w->stream->turns[i];
}

int probe_workload_prompt_ids(const struct probe_workload *w, const struct probe_request_spec *r, uint32_t *ids)
{
	const struct probe_workload_config *cfg = &w->config;
	size_t conv = conversations(cfg, w->n_requests), first = cfg->turns > 1 ? r->index % conv : r->index;
	uint32_t prefix = r->prefix_id > 0 ? MIN(cfg->prefix_len, r->input_len) : 0, at;
	struct turn t = turn_of(w, r, first);
	struct probe_rng rng;

	if (!probe_workload_has_ids(w))
		return -ENODATA;
	if (prefix > 0) {
		probe_rng_init(&rng, prompt_seed(cfg), STREAM_PREFIX + (r->prefix_id - 1));
		for (uint32_t k = 0; k < prefix; k++)
			ids[k] = draw_id(&rng);
	}
	/* The conversation's first turn, then each later one up to r: answer, new message. */
	at = MIN(t.input_len, r->input_len);
	fill_own(cfg, (uint32_t)first, t.input_len, ids, prefix, at);
	for (size_t i = first + conv; cfg->turns > 1 && i <= r->index; i += conv) {
		uint32_t answer_end = MIN(at + t.output_len, r->input_len);

		probe_rng_init(&rng, prompt_seed(cfg), STREAM_ANSWER + (i - conv));
		for (uint32_t k = at; k < answer_end; k++)
			ids[k] = draw_id(&rng);
		t = turn_of(w, r, i);
		at = MIN(t.input_len, r->input_len);
		fill_own(cfg, (uint32_t)i, t.input_len, ids, answer_end, at);
	}
	return 0;
}

const char *probe_workload_prompt_text(const struct probe_workload *w, const struct probe_request_spec *r)
{
	if (!w->dataset || r->entry >= w->dataset->n)
		return NULL;
	return w->dataset->entries[r->entry].prompt;
}

char *probe_request_prompt_text(const struct probe_workload *w, const struct probe_request_spec *r)
{
	_cleanup_(freep) uint32_t *ids = NULL;
	const char *text;
	char *buf, *p;
	size_t size;

	text = probe_workload_prompt_text(w, r);
	if (text)
		return strdup(text);
	if (!probe_workload_has_ids(w) || r->input_len == 0)
		return strdup("");
	ids = malloc((size_t)r->input_len * sizeof(uint32_t));
	if (!ids || probe_workload_prompt_ids(w, r, ids) < 0)
		return NULL;
	/* "w" + up to 10 digits + a space per id */
	size = (size_t)r->input_len * 12 + 1;
	buf = malloc(size);
	if (!buf)
		return NULL;
	p = buf;
	for (uint32_t k = 0; k < r->input_len; k++)
		p += snprintf(p, size - (size_t)(p - buf), k ? " w%" PRIu32 : "w%" PRIu32, ids[k]);
	*p = '\0';
	return buf;
}

uint32_t probe_count_words(const char *text)
{
	uint32_t n = 0;
	bool in_word = false;

	for (const unsigned char *p = (const unsigned char *)text; p && *p; p++) {
		/* the C locale's whitespace, whatever the process locale is */
		bool space = *p == ' ' || *p == '\t' || *p == '\n' || *p == '\v' || *p == '\f' || *p == '\r';

		if (!space && !in_word && n < UINT32_MAX)
			n++;
		in_word = !space;
	}
	return n;
}
