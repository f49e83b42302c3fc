/* The search widened at an edge: when it ends with its best on the top of
 * the max_num_seqs range, the range is doubled (a new search phase that
 * starts after the trials made so far) and the search goes on from what it
 * knows, until the best leaves the edge; the optimum above the initial
 * range is found; the widening helper keeps the old grid inside the new one;
 * and a study resumed from any prefix of its history, with the phases
 * recorded so far, replays the same trials. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "json-util.h"
#include "macro.h"
#include "opt.h"
#include "tests.h"

#define PHASES_MAX 8

/* Cheapest at max_num_seqs 256 (a valley in log2 space), chunk 2048. */
static void landscape(const struct opt_space *s, const struct opt_config *c, size_t n, struct opt_trial *t)
{
	double b, m;

	CHECK_INT_EQ(opt_config_number(s, c, "max_num_seqs", &b), 0);
	CHECK_INT_EQ(opt_config_number(s, c, "max_num_batched_tokens", &m), 0);
	b = log2(b) - 8;
	m = log2(m) - 11;
	*t = (struct opt_trial){ .config = *c, .outcome = OPT_OUTCOME_MEASURED };
	t->cost = 1.0 * exp(0.1 * b * b + 0.05 * m * m) * (1 + 0.01 * sin((double)n * 7.1));
}

struct phase {
	size_t start; /* trials before it */
	int64_t max;  /* max_num_seqs's range top */
};

/* The space as of a list of phases (the initial range, then each widening). */
static struct opt_space *space_at(const struct phase *phases, size_t n_phases)
{
	static const char *text = "{\"max_num_seqs\": {\"min\": 8, \"max\": 64, \"scale\": \"log2\"},"
				  "\"max_num_batched_tokens\": {\"min\": 512, \"max\": 8192, \"scale\": \"log2\"}}";
	_cleanup_(cJSON_Deletep) cJSON *j = NULL;
	struct opt_space *s = NULL;
	struct error err = { 0 };

	CHECK(json_parse_strict("test", text, strlen(text), &j, &err) == 0);
	for (size_t i = 0; i < n_phases; i++)
		CHECK_INT_EQ(opt_space_set_range_json(j, "max_num_seqs", 8, phases[i].max), 0);
	CHECK_MSG(opt_space_from_json(j, "search_space", NULL, NULL, NULL, &s, &err) == 0, "%s", err.msg);
	return s;
}

/* Runs the study to its end, widening at the top edge; returns the phases
 * through *ret (n) and the final candidate. The history may start non-empty
 * (a resume) with the phases recorded so far. */
static struct opt_candidate run(struct opt_history *h, struct phase *phases, size_t *n_phases)
{
	struct opt_candidate c = { 0 };
	struct error err = { 0 };

	for (size_t step = 0; step < 500; step++) {
		_cleanup_(opt_space_freep) struct opt_space *s = space_at(phases, *n_phases);
		struct opt_settings set;
		struct opt_trial t;

		opt_settings_init(&set);
		set.confirm_probes = 0;
		set.phase_start = *n_phases > 0 ? phases[*n_phases - 1].start : 0;
		set.phase_knob = *n_phases > 0 ? opt_space_knob_index(s, "max_num_seqs") : -1;
		set.phase_upper = true;
		CHECK_MSG(opt_next(s, &set, h, &c, &err) == 0, "%s", err.msg);
		if (c.ask == OPT_ASK_DONE) {
			int k = opt_space_knob_index(s, "max_num_seqs");

			if (c.reason != OPT_DONE_BUDGET && (size_t)c.best.config.idx[k] + 1 == s->knobs[k].n_values &&
			    *n_phases < PHASES_MAX && s->knobs[k].max < 1024) {
				/* the best sits on the top: one more log2 step */
				phases[*n_phases] = (struct phase){ .start = h->n, .max = s->knobs[k].max * 2 };
				(*n_phases)++;
				continue;
			}
			break;
		}
		landscape(s, &c.config, h->n, &t);
		CHECK_INT_EQ(opt_history_add(h, &t), 0);
	}
	return c;
}

static void test_widened_search(void)
{
	struct phase phases[PHASES_MAX], again[PHASES_MAX];
	size_t n_phases = 0;
	struct opt_history h;
	struct opt_candidate c;
	double best;

	opt_history_init(&h);
	c = run(&h, phases, &n_phases);
	{
		_cleanup_(opt_space_freep) struct opt_space *s = space_at(phases, n_phases);

		CHECK_INT_EQ(opt_config_number(s, &c.best.config, "max_num_seqs", &best), 0);
	}
	fprintf(stderr, "widened %zu times (max_num_seqs up to %lld), best at %g after %zu trials\n", n_phases,
		n_phases ? (long long)phases[n_phases - 1].max : 64LL, best, h.n);
	CHECK(n_phases >= 2);
	CHECK(best == 256);
	CHECK(h.n < 40);

	/* resumed from every prefix, with the phases recorded by then */
	for (size_t k = 0; k < h.n; k++) {
		struct opt_history part;
		size_t m = 0;

		opt_history_init(&part);
		for (size_t i = 0; i < k; i++)
			CHECK_INT_EQ(opt_history_add(&part, &h.trials[i]), 0);
		while (m < n_phases && phases[m].start <= k) {
			again[m] = phases[m];
			m++;
		}
		/* a phase that began exactly at k is decided again by the run */
		if (m > 0 && again[m - 1].start == k)
			m--;
		run(&part, again, &m);
		CHECK_INT_EQ(part.n, h.n);
		CHECK_INT_EQ(m, n_phases);
		for (size_t i = 0; i < h.n; i++)
			CHECK_MSG(memcmp(&part.trials[i], &h.trials[i], sizeof(h.trials[i])) == 0,
				  "resumed after %zu trials: trial %zu differs", k, i);
		opt_history_done(&part);
	}
	opt_history_done(&h);
}

static void test_widen_json(void)
{
	_cleanup_(cJSON_Deletep) cJSON *j = cJSON_Parse(
		"{\"max_num_seqs\": {\"min\": 8, \"max\": 64, \"scale\": \"log2\"}, \"max_num_batched_tokens\":"
		" {\"min\": 1000, \"max\": 3000, \"step\": 500}, \"quantization\": [\"none\"]}");
	int64_t min, max;

	CHECK_INT_EQ(opt_space_widen_json(j, "max_num_seqs", true, 1, 1024, &min, &max), 0);
	CHECK(min == 8 && max == 128);
	CHECK_INT_EQ(opt_space_widen_json(j, "max_num_seqs", false, 1, 1024, &min, &max), 0);
	CHECK(min == 4 && max == 128);
	CHECK_INT_EQ(opt_space_widen_json(j, "max_num_seqs", true, 1, 128, &min, &max), -ERANGE);
	/* linear: as many steps again as the range holds, on its step */
	CHECK_INT_EQ(opt_space_widen_json(j, "max_num_batched_tokens", true, 1, 100000, &min, &max), 0);
	CHECK(min == 1000 && max == 5000);
	CHECK_INT_EQ(opt_space_widen_json(j, "max_num_batched_tokens", false, 16, 100000, &min, &max), 0);
	CHECK(min == 500 && max == 5000);
	CHECK_INT_EQ(opt_space_widen_json(j, "quantization", true, 1, 2, &min, &max), -EINVAL);
	/* a range already past the engine's limit stays as it is: nothing of
	 * the old grid is dropped, on either scale and at either end */
	CHECK_INT_EQ(opt_space_widen_json(j, "max_num_batched_tokens", true, 16, 3000, &min, &max), -ERANGE);
	CHECK_INT_EQ(opt_space_widen_json(j, "max_num_batched_tokens", false, 1000, 100000, &min, &max), -ERANGE);
	CHECK_INT_EQ(opt_space_widen_json(j, "max_num_seqs", true, 1, 64, &min, &max), -ERANGE);
	CHECK_INT_EQ(opt_space_widen_json(j, "max_num_seqs", false, 8, 1024, &min, &max), -ERANGE);
	{
		const cJSON *b = cJSON_GetObjectItemCaseSensitive(j, "max_num_batched_tokens");

		CHECK(cJSON_GetObjectItemCaseSensitive(b, "min")->valuedouble == 500);
		CHECK(cJSON_GetObjectItemCaseSensitive(b, "max")->valuedouble == 5000);
	}
}

int main(void)
{
	test_widen_json();
	test_widened_search();
	return 0;
}
