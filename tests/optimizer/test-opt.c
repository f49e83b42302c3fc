/* The search as the study runner uses it: ask -> measure -> tell on
 * synthetic cost landscapes. Checks that the replay is deterministic (an
 * interrupted study resumed from its history continues exactly as if never
 * interrupted), that out-of-memory results rule out larger configurations,
 * that failures are retried then given up, that budgets and exhaustion stop
 * the search, that the best and runner-up are confirmed, that the search
 * re-probes the point it converged on, that several may be asked for at
 * once (trials in flight at stand-in costs), and that it finds the optimum with
 * far fewer deployments than the grid — also on a grid edge behind a flat,
 * noisy plateau, as goodput-sim's landscapes have it. */
#include <errno.h>
#include <math.h>
#include <stdio.h>

#include "json-util.h"
#include "macro.h"
#include "opt.h"
#include "tests.h"

typedef void (*landscape_fn)(const struct opt_space *s, const struct opt_config *c, const struct opt_history *h,
			     struct opt_trial *ret);

static struct opt_space *space_new(const char *search_space, unsigned gpus)
{
	_cleanup_(cJSON_Deletep) cJSON *j = NULL;
	struct opt_space_options o = { .gpus = gpus };
	struct opt_space *s = NULL;
	struct error err = { 0 };

	CHECK_MSG(json_parse_strict("test", search_space, strlen(search_space), &j, &err) == 0, "%s", err.msg);
	CHECK_MSG(opt_space_from_json(j, "search_space", NULL, NULL, &o, &s, &err) == 0, "%s", err.msg);
	return s;
}

static double num(const struct opt_space *s, const struct opt_config *c, const char *knob)
{
	double v = 0;

	CHECK_INT_EQ(opt_config_number(s, c, knob, &v), 0);
	return v;
}

static const char *text(const struct opt_space *s, const struct opt_config *c, const char *knob)
{
	char buf[64];
	int k = opt_space_knob_index(s, knob);

	CHECK(k >= 0);
	return opt_config_text(s, c, (size_t)k, buf, sizeof(buf)); /* string knobs: points into s */
}

/* Deterministic measurement noise: ±3 % from the trial's position. */
static double noise(size_t i)
{
	uint64_t x = (i + 1) * UINT64_C(0x9E3779B97F4A7C15);

	x ^= x >> 31;
	return 1 + 0.03 * ((double)(x % 2001) / 1000.0 - 1);
}

/* A smooth valley in log2 space with its minimum at (64, 2048). */
static void valley(const struct opt_space *s, const struct opt_config *c, const struct opt_history *h,
		   struct opt_trial *t)
{
	double a = log2(num(s, c, "max_num_seqs")) - 6, b = log2(num(s, c, "max_num_batched_tokens")) - 11;

	*t = (struct opt_trial){ .config = *c, .outcome = OPT_OUTCOME_MEASURED };
	t->cost = 2.0 * exp(0.08 * a * a + 0.05 * b * b + 0.03 * a * b);
	(void)h;
}

/* The valley quantised into plateaus (as a coarse rate search sees it). */
static void plateaus(const struct opt_space *s, const struct opt_config *c, const struct opt_history *h,
		     struct opt_trial *t)
{
	valley(s, c, h, t);
	t->cost = ceil(t->cost * 4) / 4;
}

/* Shaped like a 70B model on 80 GB GPUs: throughput rises with the batch
 * until the TPOT bound cuts it, chunks too small hurt TTFT and too large
 * stall decode; bf16 does not fit on one GPU and large batch × chunk runs out
 * of memory at bf16 on two; each quantization has its own best TP. */
static void realistic(const struct opt_space *s, const struct opt_config *c, const struct opt_history *h,
		      struct opt_trial *t)
{
	const char *q = text(s, c, "quantization");
	double tp = num(s, c, "tensor_parallel"), b = num(s, c, "max_num_seqs");
	double mbt = num(s, c, "max_num_batched_tokens");
	double wfac = strcmp(q, "none") == 0 ? 1 : strcmp(q, "fp8") == 0 ? 0.5 : 0.28;
	double weights = 140 * wfac / tp, need = weights + (b * mbt / 1048576.0 * 3 + b * 0.02) / tp;
	double step_ms, bmax, tput;

	*t = (struct opt_trial){ .config = *c };
	if (weights > 74 || need > 78) {
		t->outcome = OPT_OUTCOME_INFEASIBLE;
		return;
	}
	/* Decode step: weight read + per-sequence KV read + a TP sync cost. */
	step_ms = weights / (2.0 * 0.8) + 0.06 * b / tp + 1.5 * (tp - 1);
	if (strcmp(q, "awq") == 0)
		step_ms *= 1.25; /* dequantisation */
	bmax = (50 - (weights / 1.6 + 1.5 * (tp - 1)) * (strcmp(q, "awq") == 0 ? 1.25 : 1)) / 0.06 * tp;
	if (bmax < 1) {
		t->outcome = OPT_OUTCOME_SLA_NEVER_MET;
		return;
	}
	b = MIN(b, bmax);
	step_ms = (weights / 1.6 + 0.06 * b / tp + 1.5 * (tp - 1)) * (strcmp(q, "awq") == 0 ? 1.25 : 1);
	tput = b / step_ms * 1000;
	tput /= 1 + 600 / mbt;   /* small chunks: slow prefill, TTFT cuts the rate */
	tput /= 1 + mbt / 40000; /* large chunks: decode stalls, TPOT cuts the rate */
	t->outcome = OPT_OUTCOME_MEASURED;
	t->cost = 2.5 * tp / (tput * 3600) * 1e6;
	if (h->n > 0) /* noise-free for true_min() */
		t->cost *= noise(h->n);
}

/* The true optimum of a landscape over the whole grid (noise-free). */
static double true_min(const struct opt_space *s, landscape_fn f)
{
	_cleanup_(freep) struct opt_config *all = NULL;
	struct opt_history empty = { 0 };
	double best = INFINITY;
	size_t n = 0;

	CHECK_INT_EQ(opt_space_enumerate(s, &all, &n), 0);
	for (size_t i = 0; i < n; i++) {
		struct opt_trial t;

		f(s, &all[i], &empty, &t);
		if (t.outcome == OPT_OUTCOME_MEASURED)
			best = MIN(best, t.cost);
	}
	return best;
}

/* Runs ask/measure/tell until done (or max_steps); returns the last candidate. */
static struct opt_candidate study(const struct opt_space *s, const struct opt_settings *set, landscape_fn f,
				  struct opt_history *h, size_t max_steps)
{
	struct opt_candidate cand = { 0 };
	struct error err = { 0 };

	for (size_t step = 0; step < max_steps; step++) {
		struct opt_trial t;

		CHECK_MSG(opt_next(s, set, h, &cand, &err) == 0, "%s", err.msg);
		if (cand.ask == OPT_ASK_DONE)
			break;
		f(s, &cand.config, h, &t);
		t.confirm = cand.ask == OPT_ASK_CONFIRM;
		CHECK_INT_EQ(opt_history_add(h, &t), 0);
	}
	return cand;
}

static const char *realistic_space = "{\"max_num_seqs\": {\"min\": 8, \"max\": 1024, \"scale\": \"log2\"},"
				     "\"max_num_batched_tokens\": {\"min\": 512, \"max\": 32768, \"scale\": \"log2\"},"
				     "\"quantization\": [\"none\", \"fp8\", \"awq\"], \"tensor_parallel\": [1, 2, 4]}";

static void test_deterministic_resume(void)
{
	_cleanup_(opt_space_freep) struct opt_space *s = space_new(realistic_space, 4);
	struct opt_history full, part;
	struct opt_candidate a, b, c;
	struct opt_settings set;
	struct error err = { 0 };

	opt_settings_init(&set);
	set.seed = 42;
	opt_history_init(&full);
	c = study(s, &set, realistic, &full, 1000);
	CHECK_INT_EQ(c.ask, OPT_ASK_DONE);
	CHECK(full.n > 10);

	/* The same history gives the same next candidate. */
	CHECK_INT_EQ(opt_next(s, &set, &full, &a, &err), 0);
	CHECK_INT_EQ(opt_next(s, &set, &full, &b, &err), 0);
	CHECK(memcmp(&a, &b, sizeof(a)) == 0);

	/* Interrupted after k tells and resumed from the stored history: the
	 * same sequence as the uninterrupted run. */
	for (size_t k = 0; k < full.n; k += 3) {
		opt_history_init(&part);
		for (size_t i = 0; i < k; i++)
			CHECK_INT_EQ(opt_history_add(&part, &full.trials[i]), 0);
		study(s, &set, realistic, &part, 1000);
		CHECK_INT_EQ(part.n, full.n);
		CHECK_MSG(memcmp(part.trials, full.trials, full.n * sizeof(full.trials[0])) == 0,
			  "resume after %zu trials diverged", k);
		opt_history_done(&part);
	}
	opt_history_done(&full);
}

/* Asking for several at once: each candidate goes in flight (pending, at
 * its stand-in cost) before the next is asked. The first is opt_next's, no
 * candidate is one in flight or measured before, the answer never includes a
 * stand-in, and the order of the trials in flight does not matter. */
static void test_pending(void)
{
	_cleanup_(opt_space_freep) struct opt_space *s = space_new(realistic_space, 4);
	struct opt_trial pending[8], reversed[8];
	struct opt_candidate first, cand, again;
	struct opt_history full, h;
	struct opt_settings set;
	struct opt_result best;
	struct error err = { 0 };
	size_t n = 0;

	opt_settings_init(&set);
	set.seed = 42;
	opt_history_init(&full);
	study(s, &set, realistic, &full, 1000);
	opt_history_init(&h);
	for (size_t i = 0; i < 8; i++)
		CHECK_INT_EQ(opt_history_add(&h, &full.trials[i]), 0);
	opt_best(s, &h, &best, NULL);
	CHECK(best.valid);
	CHECK_INT_EQ(opt_next(s, &set, &h, &first, &err), 0);
	for (n = 0; n < 6; n++) {
		CHECK_MSG(opt_next_pending(s, &set, &h, pending, n, &cand, &err) == 0, "%s", err.msg);
		CHECK(cand.ask != OPT_ASK_DONE);
		if (n == 0)
			CHECK(memcmp(&cand.config, &first.config, sizeof(cand.config)) == 0);
		for (size_t i = 0; i < n; i++)
			CHECK_MSG(memcmp(&pending[i].config, &cand.config, sizeof(cand.config)) != 0 ||
					  cand.ask == OPT_ASK_CONFIRM,
				  "candidate %zu is already in flight", n);
		for (size_t i = 0; i < h.n && cand.ask == OPT_ASK_TRIAL; i++)
			CHECK(h.trials[i].confirm ||
			      memcmp(&h.trials[i].config, &cand.config, sizeof(cand.config)) != 0);
		/* the answer is what was measured */
		CHECK(cand.best.valid && cand.best.cost == best.cost);
		pending[n] = (struct opt_trial){ .config = cand.config,
						 .outcome = OPT_OUTCOME_MEASURED,
						 .cost = opt_stand_in(s, &h, &cand.config, cand.ask == OPT_ASK_CONFIRM),
						 .confirm = cand.ask == OPT_ASK_CONFIRM };
		CHECK(pending[n].cost == best.cost * (1 + OPT_LIAR_MARGIN) || pending[n].confirm);
	}
	/* the same trials in flight in another order: the same next candidate */
	CHECK_INT_EQ(opt_next_pending(s, &set, &h, pending, n, &cand, &err), 0);
	for (size_t i = 0; i < n; i++)
		reversed[i] = pending[n - 1 - i];
	CHECK_INT_EQ(opt_next_pending(s, &set, &h, reversed, n, &again, &err), 0);
	CHECK(cand.ask == again.ask && memcmp(&cand.config, &again.config, sizeof(cand.config)) == 0);
	/* a stand-in is a cost */
	pending[0].cost = NAN;
	CHECK_INT_EQ(opt_next_pending(s, &set, &h, pending, 1, &cand, &err), -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "stand-in");
	opt_history_done(&h);
	opt_history_done(&full);
}

/* Cheaper with every doubling of the batch, out of memory from 64 up. */
static void oom_above_32(const struct opt_space *s, const struct opt_config *c, const struct opt_history *h,
			 struct opt_trial *t)
{
	double b = num(s, c, "max_num_seqs");

	*t = (struct opt_trial){ .config = *c, .outcome = b >= 64 ? OPT_OUTCOME_INFEASIBLE : OPT_OUTCOME_MEASURED };
	t->cost = 10 / b;
	(void)h;
}

static void test_oom_inferred(void)
{
	_cleanup_(opt_space_freep) struct opt_space *s =
		space_new("{\"max_num_seqs\": {\"min\": 8, \"max\": 1024, \"scale\": \"log2\"},"
			  "\"max_num_batched_tokens\": [4096]}",
			  0);
	struct opt_history h;
	struct opt_candidate c;
	struct opt_settings set;
	size_t ooms = 0;

	opt_settings_init(&set);
	set.confirm_probes = 0;
	opt_history_init(&h);
	c = study(s, &set, oom_above_32, &h, 1000);
	for (size_t i = 0; i < h.n; i++)
		ooms += h.trials[i].outcome == OPT_OUTCOME_INFEASIBLE;
	/* Screening hits 128 (OOM) then 32; of 64 and up at most one more
	 * OOM is deployed, the rest are ruled out. */
	CHECK(ooms >= 1 && ooms <= 2);
	CHECK(num(s, &c.best.config, "max_num_seqs") == 32);
	CHECK_INT_EQ(c.reason, OPT_DONE_EXHAUSTED);
	fprintf(stderr, "oom: %u deployed, %u inferred\n", c.evaluated, c.inferred);
	CHECK(c.evaluated <= 5); /* 256, 64, then 8 16 32 */
	opt_history_done(&h);
}

/* No deployed configuration is dominated by an earlier out-of-memory one. */
static void test_oom_dominance(void)
{
	_cleanup_(opt_space_freep) struct opt_space *s = space_new(realistic_space, 4);
	struct opt_history h;
	struct opt_candidate c;
	struct opt_settings set;
	size_t ooms = 0;

	opt_settings_init(&set);
	opt_history_init(&h);
	c = study(s, &set, realistic, &h, 1000);
	for (size_t i = 0; i < h.n; i++) {
		ooms += h.trials[i].outcome == OPT_OUTCOME_INFEASIBLE;
		for (size_t j = 0; j < i; j++) {
			const struct opt_config *x = &h.trials[i].config, *o = &h.trials[j].config;

			if (h.trials[j].outcome != OPT_OUTCOME_INFEASIBLE)
				continue;
			CHECK_MSG(!(x->idx[2] == o->idx[2] && x->idx[3] == o->idx[3] && x->idx[0] >= o->idx[0] &&
				    x->idx[1] >= o->idx[1]),
				  "trial %zu is dominated by out-of-memory trial %zu", i, j);
		}
	}
	CHECK(ooms > 0);
	CHECK(c.best.valid);

	/* Directly: after an OOM at the first screen point nothing it
	 * dominates is asked next. */
	{
		struct opt_history one;
		struct opt_candidate first, next;
		struct opt_trial t;
		struct error err = { 0 };

		opt_history_init(&one);
		CHECK_INT_EQ(opt_next(s, &set, &one, &first, &err), 0);
		t = (struct opt_trial){ .config = first.config, .outcome = OPT_OUTCOME_INFEASIBLE };
		CHECK_INT_EQ(opt_history_add(&one, &t), 0);
		CHECK_INT_EQ(opt_next(s, &set, &one, &next, &err), 0);
		/* Screening moves on to the next combination first. */
		CHECK(!(next.config.idx[2] == first.config.idx[2] && next.config.idx[3] == first.config.idx[3] &&
			next.config.idx[0] >= first.config.idx[0] && next.config.idx[1] >= first.config.idx[1]));
		opt_history_done(&one);
	}
	opt_history_done(&h);
}

static void check_finds(const char *what, const char *space_json, unsigned gpus, landscape_fn f, double tol,
			double max_fraction)
{
	_cleanup_(opt_space_freep) struct opt_space *s = space_new(space_json, gpus);
	double best = true_min(s, f);
	uint64_t grid = opt_space_count(s);
	struct opt_history h;
	struct opt_candidate c;
	struct opt_settings set;
	char key[OPT_KEY_MAX];

	opt_settings_init(&set);
	opt_history_init(&h);
	c = study(s, &set, f, &h, 1000);
	CHECK_INT_EQ(c.ask, OPT_ASK_DONE);
	CHECK(c.best.valid);
	CHECK_INT_EQ(opt_config_key(s, &c.best.config, key, sizeof(key)), 0);
	fprintf(stderr, "%s: %u of %" PRIu64 " configurations deployed (%s), best %s at %.4g, optimum %.4g\n", what,
		c.evaluated, grid, opt_done_reason_to_string(c.reason), key, c.best.cost, best);
	CHECK_MSG(c.best.cost <= best * (1 + tol), "%s: best %g, optimum %g", what, c.best.cost, best);
	CHECK_MSG(c.evaluated <= max_fraction * (double)grid, "%s: %u of %" PRIu64, what, c.evaluated, grid);
	opt_history_done(&h);
}

static void test_finds_optimum(void)
{
	const char *two_d = "{\"max_num_seqs\": {\"min\": 1, \"max\": 1024, \"scale\": \"log2\"},"
			    "\"max_num_batched_tokens\": {\"min\": 64, \"max\": 65536, \"scale\": \"log2\"}}";
	const char *linear = "{\"max_num_seqs\": {\"min\": 8, \"max\": 256, \"step\": 8},"
			     "\"max_num_batched_tokens\": {\"min\": 512, \"max\": 8192, \"step\": 512}}";

	check_finds("valley", two_d, 0, valley, 1e-12, 0.35);
	check_finds("plateaus", two_d, 0, plateaus, 1e-12, 0.35);
	check_finds("valley on a linear grid", linear, 0, valley, 1e-12, 0.25);
	/* Noise of ±3 % on the measurements: within 4 % of the optimum. */
	check_finds("categorical × infeasible region", realistic_space, 4, realistic, 0.04, 0.25);
}

/* Shaped like goodput-sim's landscapes: the cost falls with the batch until
 * the SLA caps it (flat from 128 up), and falls by 2 % with every halving
 * of the chunk down to the smallest one, the optimum on the grid's edge;
 * fp8 is 30 % cheaper than none, awq 15 %. Measurements carry ±3 % noise. */
static void flat_edge(const struct opt_space *s, const struct opt_config *c, const struct opt_history *h,
		      struct opt_trial *t)
{
	const char *q = text(s, c, "quantization");
	double b = MIN(num(s, c, "max_num_seqs"), 128), mbt = num(s, c, "max_num_batched_tokens");

	*t = (struct opt_trial){ .config = *c, .outcome = OPT_OUTCOME_MEASURED };
	t->cost = (1 + 64 / b) * pow(1.02, log2(mbt / 256)) *
		  (strcmp(q, "fp8") == 0   ? 0.7
		   : strcmp(q, "awq") == 0 ? 0.85
					   : 1.0);
	if (h->n > 0) /* noise-free for true_min() */
		t->cost *= noise(h->n);
}

static const char *flat_edge_space = "{\"max_num_seqs\": {\"min\": 4, \"max\": 512, \"scale\": \"log2\"},"
				     "\"max_num_batched_tokens\": {\"min\": 256, \"max\": 16384, \"scale\": \"log2\"},"
				     "\"quantization\": [\"none\", \"fp8\", \"awq\"], \"tensor_parallel\": [1]}";

/* The optimum sits on the smallest chunk with the batch anywhere from 128
 * up: the local check walks down to the edge. The incumbent (lowest mean
 * measured so far) is within 3 % (the noise) of the optimum after at most
 * 15 % of the grid's configurations have been deployed, and stays so. */
static void test_edge_optimum(void)
{
	_cleanup_(opt_space_freep) struct opt_space *s = space_new(flat_edge_space, 1);
	double best = true_min(s, flat_edge);
	uint64_t grid = opt_space_count(s);
	struct opt_history h, prefix;
	struct opt_candidate c;
	struct opt_settings set;
	struct opt_history empty = { 0 };
	char key[OPT_KEY_MAX];

	for (uint64_t seed = 0; seed < 3; seed++) {
		size_t reached = SIZE_MAX;

		opt_settings_init(&set);
		set.seed = seed;
		opt_history_init(&h);
		c = study(s, &set, flat_edge, &h, 1000);
		CHECK_INT_EQ(c.ask, OPT_ASK_DONE);
		CHECK(c.best.valid);
		/* The incumbent after each deployment, by the true cost. */
		for (size_t k = 1; k <= h.n; k++) {
			struct opt_result inc;
			struct opt_trial truth;

			prefix = (struct opt_history){ .trials = h.trials, .n = k, .allocated = k };
			opt_best(s, &prefix, &inc, NULL);
			if (!inc.valid)
				continue;
			flat_edge(s, &inc.config, &empty, &truth);
			if (truth.cost <= best * 1.03 && reached == SIZE_MAX)
				reached = k;
			else if (truth.cost > best * 1.03)
				reached = SIZE_MAX;
		}
		CHECK_INT_EQ(opt_config_key(s, &c.best.config, key, sizeof(key)), 0);
		fprintf(stderr,
			"flat edge (seed %" PRIu64 "): within 3 %% after %zu deployments, %u of %" PRIu64
			" deployed, best %s\n",
			seed, reached, c.evaluated, grid, key);
		CHECK_MSG(reached <= 0.15 * (double)grid, "within 3 %% after %zu deployments", reached);
		CHECK_STR_EQ(text(s, &c.best.config, "quantization"), "fp8");
		CHECK(num(s, &c.best.config, "max_num_batched_tokens") <= 512);
		opt_history_done(&h);
	}
}

/* Once the local check holds, the point it converged on is measured again
 * (asked as a confirmation during the search), at most once; the re-probes
 * count against max_trials; replay through them is exact; confirm_probes 0
 * asks for none. */
static void test_reprobe(void)
{
	_cleanup_(opt_space_freep) struct opt_space *s = space_new(flat_edge_space, 1);
	struct opt_history h, part;
	struct opt_candidate c;
	struct opt_settings set;
	size_t reprobes = 0, final_confirms = 0;

	opt_settings_init(&set);
	opt_history_init(&h);
	for (;;) {
		struct error err = { 0 };
		struct opt_trial t;

		CHECK_MSG(opt_next(s, &set, &h, &c, &err) == 0, "%s", err.msg);
		if (c.ask == OPT_ASK_DONE)
			break;
		if (c.ask == OPT_ASK_CONFIRM && c.phase == OPT_PHASE_SEARCH) {
			struct opt_result mean;

			/* Only a measured configuration, the best of its
			 * combination, and not one measured twice already. */
			reprobes++;
			opt_best(s, &h, &mean, NULL);
			for (size_t i = 0, n = 0; i < h.n; i++)
				if (memcmp(&h.trials[i].config, &c.config, sizeof(c.config)) == 0) {
					CHECK_INT_EQ(h.trials[i].outcome, OPT_OUTCOME_MEASURED);
					CHECK_MSG(++n == 1, "re-probed twice");
				}
		} else if (c.ask == OPT_ASK_CONFIRM)
			final_confirms++;
		flat_edge(s, &c.config, &h, &t);
		t.confirm = c.ask == OPT_ASK_CONFIRM;
		CHECK_INT_EQ(opt_history_add(&h, &t), 0);
	}
	fprintf(stderr, "re-probes: %zu in the search, %zu final confirmations, %zu trials\n", reprobes, final_confirms,
		h.n);
	CHECK(reprobes >= 2); /* one per searched combination at least */
	CHECK(final_confirms <= 2);

	/* Resumed from any prefix of the history: the same trials. */
	for (size_t k = 0; k < h.n; k += 2) {
		opt_history_init(&part);
		for (size_t i = 0; i < k; i++)
			CHECK_INT_EQ(opt_history_add(&part, &h.trials[i]), 0);
		study(s, &set, flat_edge, &part, 1000);
		CHECK_INT_EQ(part.n, h.n);
		CHECK_MSG(memcmp(part.trials, h.trials, h.n * sizeof(h.trials[0])) == 0, "resume after %zu diverged",
			  k);
		opt_history_done(&part);
	}

	/* max_trials counts every deployment, re-probes and the final
	 * confirmations included: the search leaves them their reserve. */
	opt_history_done(&h);
	opt_settings_init(&set);
	set.max_trials = (unsigned)(reprobes > 0 ? 20 : 0);
	opt_history_init(&h);
	c = study(s, &set, flat_edge, &h, 1000);
	CHECK_INT_EQ(c.reason, OPT_DONE_BUDGET);
	CHECK_INT_EQ(h.n, 20);
	CHECK(h.trials[19].confirm && h.trials[18].confirm);
	opt_history_done(&h);
	for (unsigned n = 1; n <= 6; n++) {
		set.max_trials = n;
		opt_history_init(&h);
		c = study(s, &set, flat_edge, &h, 1000);
		CHECK_INT_EQ(h.n, n);
		CHECK(!h.trials[0].confirm);
		opt_history_done(&h);
	}

	/* confirm_probes 0: no configuration is measured twice. */
	opt_settings_init(&set);
	set.confirm_probes = 0;
	opt_history_init(&h);
	c = study(s, &set, flat_edge, &h, 1000);
	CHECK_INT_EQ(c.ask, OPT_ASK_DONE);
	for (size_t i = 0; i < h.n; i++) {
		CHECK(!h.trials[i].confirm);
		for (size_t j = 0; j < i; j++)
			CHECK(memcmp(&h.trials[i].config, &h.trials[j].config, sizeof(h.trials[i].config)) != 0);
	}
	opt_history_done(&h);
}

/* A crash is retried once (attempt 2); two crashes give the configuration up. */
static void flaky(const struct opt_space *s, const struct opt_config *c, const struct opt_history *h,
		  struct opt_trial *t)
{
	valley(s, c, h, t);
	if (num(s, c, "max_num_seqs") >= 128)
		t->outcome = OPT_OUTCOME_FAILED;
}

static void test_failures(void)
{
	_cleanup_(opt_space_freep) struct opt_space *s =
		space_new("{\"max_num_seqs\": {\"min\": 16, \"max\": 1024, \"scale\": \"log2\"},"
			  "\"max_num_batched_tokens\": {\"min\": 1024, \"max\": 8192, \"scale\": \"log2\"}}",
			  0);
	struct opt_history h;
	struct opt_candidate c;
	struct opt_settings set;
	struct error err = { 0 };
	size_t failed = 0, retried = 0;

	opt_settings_init(&set);
	opt_history_init(&h);
	/* Screening asks for 128 (half-way up the grid): it crashes, is retried. */
	CHECK_INT_EQ(opt_next(s, &set, &h, &c, &err), 0);
	CHECK(num(s, &c.config, "max_num_seqs") == 128);
	CHECK_INT_EQ(c.attempt, 1);
	CHECK_INT_EQ(opt_history_add(&h, &(struct opt_trial){ .config = c.config, .outcome = OPT_OUTCOME_FAILED }), 0);
	CHECK_INT_EQ(opt_next(s, &set, &h, &c, &err), 0);
	CHECK(num(s, &c.config, "max_num_seqs") == 128);
	CHECK_INT_EQ(c.attempt, 2);

	c = study(s, &set, flaky, &h, 1000);
	CHECK_INT_EQ(c.ask, OPT_ASK_DONE);
	for (size_t i = 0; i < h.n; i++) {
		size_t same = 0;

		if (h.trials[i].outcome != OPT_OUTCOME_FAILED)
			continue;
		failed++;
		for (size_t j = 0; j < h.n; j++)
			same += memcmp(&h.trials[j].config, &h.trials[i].config, sizeof(h.trials[i].config)) == 0;
		CHECK_INT_EQ(same, 2);
		retried++;
	}
	CHECK(failed >= 2 && failed % 2 == 0);
	CHECK(num(s, &c.best.config, "max_num_seqs") == 64);
	opt_history_done(&h);
}

static void test_budget_exhaustion_confirm(void)
{
	_cleanup_(opt_space_freep) struct opt_space *s = space_new(realistic_space, 4);
	_cleanup_(opt_space_freep) struct opt_space *tiny =
		space_new("{\"max_num_seqs\": [32, 64, 128], \"max_num_batched_tokens\": [4096]}", 0);
	struct opt_history h;
	struct opt_candidate c;
	struct opt_settings set;
	size_t confirms = 0;

	opt_settings_init(&set);
	set.max_trials = 11;
	opt_history_init(&h);
	c = study(s, &set, realistic, &h, 1000);
	CHECK_INT_EQ(c.reason, OPT_DONE_BUDGET);
	CHECK_INT_EQ(c.evaluated, 9);
	/* 9 search trials, then one confirmation each of the best and
	 * runner-up: 11 deployments in all, as max_trials says. */
	for (size_t i = 0; i < h.n; i++)
		confirms += h.trials[i].confirm;
	CHECK_INT_EQ(confirms, 2);
	CHECK_INT_EQ(h.n, 11);
	CHECK(c.best.valid && c.runner_up.valid);
	CHECK_INT_EQ(c.best.n, 2);
	CHECK(c.best.spread > 0 && c.best.spread < 0.07);
	CHECK(c.best.cost <= c.runner_up.cost);
	opt_history_done(&h);

	/* Every configuration tried: exhausted. Without confirmations the
	 * history holds each configuration once. */
	opt_settings_init(&set);
	set.confirm_probes = 0;
	opt_history_init(&h);
	c = study(tiny, &set, valley, &h, 1000);
	CHECK_INT_EQ(c.reason, OPT_DONE_EXHAUSTED);
	CHECK_INT_EQ(h.n, 3);
	CHECK_INT_EQ(c.evaluated, 3);
	CHECK_STR_EQ(opt_done_reason_to_string(c.reason), "exhausted");
	opt_history_done(&h);
}

/* llama.cpp on a CPU host: more slots than one break the TPOT tail, and
 * so does the smallest batch pair (-b 256 -ub 256); one slot's cost falls
 * as the batch grows. */
static void slots(const struct opt_space *s, const struct opt_config *c, const struct opt_history *h,
		  struct opt_trial *t)
{
	double b = num(s, c, "max_num_batched_tokens");

	*t = (struct opt_trial){ .config = *c, .outcome = OPT_OUTCOME_MEASURED };
	if (num(s, c, "max_num_seqs") > 1 || b == 256)
		t->outcome = OPT_OUTCOME_SLA_NEVER_MET;
	else
		t->cost = b == 2048 ? 1.67 : 1.84;
	(void)h;
}

static size_t count_with(const struct opt_space *s, const struct opt_history *h, const char *knob, double v)
{
	size_t n = 0;

	for (size_t i = 0; i < h->n; i++)
		n += num(s, &h->trials[i].config, knob) == v;
	return n;
}

/* A small knob (--parallel {1, 2, 4}) has every value measured once before
 * the search refines one, and before it may say "converged" — even when
 * the screen's points all break the SLA; the baseline covers the values it
 * holds without a second deployment. */
static void test_small_knob_levels(void)
{
	const char *js =
		"{\"search_space\": {\"max_num_seqs\": [1, 2, 4], \"max_num_batched_tokens\": [256, 512, 2048],"
		" \"ubatch_size\": [256, 512]}, \"constraints\": [{\"allowed\": ["
		"{\"max_num_batched_tokens\": 2048, \"ubatch_size\": 512},"
		"{\"max_num_batched_tokens\": 512, \"ubatch_size\": 512},"
		"{\"max_num_batched_tokens\": 256, \"ubatch_size\": 256}]}]}";
	const char *extra[] = { "ubatch_size", NULL };
	struct opt_space_options o = { .extra_knobs = extra };
	_cleanup_(cJSON_Deletep) cJSON *j = NULL;
	_cleanup_(opt_space_freep) struct opt_space *s = NULL;
	struct error err = { 0 };

	CHECK_MSG(json_parse_strict("test", js, strlen(js), &j, &err) == 0, "%s", err.msg);
	CHECK_MSG(opt_space_from_json(cJSON_GetObjectItem(j, "search_space"), "search_space",
				      cJSON_GetObjectItem(j, "constraints"), "constraints", &o, &s, &err) == 0,
		  "%s", err.msg);
	for (int with_baseline = 1; with_baseline >= 0; with_baseline--) {
		struct opt_trial base = { .outcome = OPT_OUTCOME_MEASURED, .cost = 1.67 };
		struct opt_settings set;
		struct opt_candidate c;
		struct opt_history h;
		size_t four = SIZE_MAX;

		/* the engine's defaults: one slot, -b 2048 -ub 512, measured first */
		CHECK_INT_EQ(opt_config_from_key(s, "max_num_seqs=1,max_num_batched_tokens=2048,ubatch_size=512",
						 &base.config, &err),
			     0);
		opt_settings_init(&set);
		set.confirm_probes = 0;
		set.max_trials = 12;
		set.baseline = with_baseline ? &base.config : NULL;
		opt_history_init(&h);
		CHECK_INT_EQ(opt_history_add(&h, &base), 0);
		c = study(s, &set, slots, &h, 100);
		CHECK_INT_EQ(c.ask, OPT_ASK_DONE);
		CHECK(c.reason == OPT_DONE_CONVERGED || c.reason == OPT_DONE_EXHAUSTED);
		for (double v = 1; v <= 4; v *= 2)
			CHECK_MSG(count_with(s, &h, "max_num_seqs", v) >= 1, "--parallel %g never deployed", v);
		for (size_t i = 0; i < h.n && four == SIZE_MAX; i++)
			if (num(s, &h.trials[i].config, "max_num_seqs") == 4)
				four = i;
		/* one deployment per slot count first: 4 comes with the screen,
		 * not after a refinement of another slot count */
		CHECK_MSG(four <= 3, "--parallel 4 first deployed as trial %zu", four);
		CHECK(c.best.valid);
		CHECK_INT_EQ(num(s, &c.best.config, "max_num_batched_tokens"), 2048);
		if (with_baseline) {
			/* the baseline is the trial of --parallel 1: never deployed again */
			size_t again = 0;

			for (size_t i = 1; i < h.n; i++)
				again += memcmp(&h.trials[i].config, &base.config, sizeof(base.config)) == 0;
			CHECK_INT_EQ(again, 0);
			CHECK_INT_EQ(four, 2);
		}
		opt_history_done(&h);
	}
}

static void test_names_and_validation(void)
{
	_cleanup_(opt_space_freep) struct opt_space *s = space_new("{\"max_num_seqs\": [32, 64]}", 0);
	struct opt_history h;
	struct opt_candidate c;
	struct opt_settings set;
	struct error err = { 0 };
	enum opt_outcome o;

	for (int i = 0; i < _OPT_OUTCOME_MAX; i++) {
		CHECK_INT_EQ(opt_outcome_from_string(opt_outcome_to_string((enum opt_outcome)i), &o), 0);
		CHECK_INT_EQ(o, i);
	}
	CHECK_INT_EQ(opt_outcome_from_string("oom", &o), -EINVAL);
	opt_history_init(&h);
	CHECK_INT_EQ(opt_history_add(&h, &(struct opt_trial){ .outcome = OPT_OUTCOME_MEASURED, .cost = NAN }), -EINVAL);
	CHECK_INT_EQ(opt_history_add(&h, &(struct opt_trial){ .outcome = OPT_OUTCOME_MEASURED, .cost = 0 }), -EINVAL);
	/* A configuration off the grid is refused. */
	CHECK_INT_EQ(
		opt_history_add(&h, &(struct opt_trial){ .config = { .idx = { 5 } }, .outcome = OPT_OUTCOME_FAILED }),
		0);
	opt_settings_init(&set);
	CHECK_INT_EQ(opt_next(s, &set, &h, &c, &err), -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "trial 0");
	opt_history_done(&h);
}

int main(void)
{
	test_names_and_validation();
	test_deterministic_resume();
	test_pending();
	test_oom_dominance();
	test_oom_inferred();
	test_finds_optimum();
	test_edge_optimum();
	test_reprobe();
	test_failures();
	test_budget_exhaustion_confirm();
	test_small_knob_levels();
	return 0;
}
