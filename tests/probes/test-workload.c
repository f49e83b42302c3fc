/* The workload generator: the same seed gives the same requests; lengths and
 * arrival gaps follow their distributions; prefixes are shared as asked;
 * datasets are read as documented and their errors name file, line and
 * field; and the shared flags parse as `vllm bench serve` spells them. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <unistd.h>

#include "macro.h"
#include "workload-flags.h"
#include "workload.h"
#include "tests.h"

static struct probe_workload *gen(const struct probe_workload_config *cfg)
{
	struct probe_workload *w = NULL;
	struct error err = { 0 };
	int r = probe_workload_generate(cfg, &w, &err);

	CHECK_MSG(r == 0, "%s", error_str(&err, r));
	return w;
}

/* Request i's prompt ids, made as the client makes them (static: one call at a time per slot). */
static const uint32_t *ids_of(const struct probe_workload *w, size_t i, int slot)
{
	static uint32_t buf[2][4096];

	CHECK(w->requests[i].input_len <= 4096);
	CHECK_INT_EQ(probe_workload_prompt_ids(w, &w->requests[i], buf[slot]), 0);
	return buf[slot];
}

static void test_defaults_and_determinism(void)
{
	struct probe_workload_config cfg;
	_cleanup_(probe_workload_freep) struct probe_workload *a = NULL, *b = NULL, *c = NULL, *d = NULL;

	probe_workload_config_init(&cfg);
	CHECK(cfg.dataset == PROBE_DATASET_RANDOM && cfg.input.mean == 1024 && cfg.output.mean == 128);
	CHECK(cfg.num_prompts == 1000 && cfg.arrival == PROBE_ARRIVAL_INF && cfg.seed == 0);

	cfg.num_prompts = 50;
	cfg.num_warmup = 3;
	cfg.input = (struct probe_length_dist){ .kind = PROBE_DIST_UNIFORM, .mean = 64, .range_ratio = 0.5 };
	cfg.output = (struct probe_length_dist){ .kind = PROBE_DIST_NORMAL, .mean = 32, .stddev = 8 };
	cfg.arrival = PROBE_ARRIVAL_POISSON;
	cfg.request_rate = 5;
	cfg.seed = 42;
	a = gen(&cfg);
	b = gen(&cfg);
	CHECK_INT_EQ(a->n_requests, 53);
	for (size_t i = 0; i < a->n_requests; i++) {
		CHECK_INT_EQ(a->requests[i].index, i);
		CHECK(a->requests[i].warmup == (i < 3));
		CHECK_INT_EQ(a->requests[i].input_len, b->requests[i].input_len);
		CHECK_INT_EQ(a->requests[i].output_len, b->requests[i].output_len);
		CHECK_INT_EQ(a->requests[i].arrival_usec, b->requests[i].arrival_usec);
		CHECK(memcmp(ids_of(a, i, 0), ids_of(b, i, 1), a->requests[i].input_len * 4) == 0);
		for (uint32_t k = 0; k < a->requests[i].input_len; k++)
			CHECK(ids_of(a, i, 0)[k] >= PROBE_TOKEN_ID_MIN && ids_of(a, i, 0)[k] < PROBE_TOKEN_ID_MAX);
		CHECK(probe_workload_prompt_text(a, &a->requests[i]) == NULL);
		/* the same prompt whenever it is made */
		CHECK(memcmp(ids_of(a, i, 0), ids_of(a, i, 1), a->requests[i].input_len * 4) == 0);
	}
	/* warm-ups at 0; the measured run starts at 0 and arrivals increase */
	CHECK(a->requests[0].arrival_usec == 0 && a->requests[2].arrival_usec == 0 && a->requests[3].arrival_usec == 0);
	CHECK(a->requests[4].arrival_usec > 0);
	for (size_t i = 4; i < a->n_requests; i++)
		CHECK(a->requests[i].arrival_usec >= a->requests[i - 1].arrival_usec);

	/* another rate keeps the prompts and lengths; another seed changes them */
	cfg.request_rate = 50;
	c = gen(&cfg);
	CHECK(c->requests[10].arrival_usec != a->requests[10].arrival_usec);
	CHECK_INT_EQ(c->requests[10].input_len, a->requests[10].input_len);
	CHECK(memcmp(ids_of(c, 10, 0), ids_of(a, 10, 1), a->requests[10].input_len * 4) == 0);
	/* another prompt variant (a rate search's next point) other ids, the same lengths */
	cfg.prompt_variant = 1;
	_cleanup_(probe_workload_freep) struct probe_workload *v = gen(&cfg);
	CHECK_INT_EQ(v->requests[10].input_len, a->requests[10].input_len);
	CHECK(memcmp(ids_of(v, 10, 0), ids_of(a, 10, 1), a->requests[10].input_len * 4) != 0);
	cfg.prompt_variant = 0;
	/* another length, the same seed (a RAG run after a chat run against one
	 * server): no prompt begins as its counterpart did, or the server's
	 * prefix cache would find what the workload never shared */
	{
		struct probe_workload_config other = cfg;
		size_t same_start = 0;

		other.input = (struct probe_length_dist){ .kind = PROBE_DIST_FIXED, .mean = 200 };
		cfg.input = (struct probe_length_dist){ .kind = PROBE_DIST_FIXED, .mean = 20 };
		_cleanup_(probe_workload_freep) struct probe_workload *shortw = gen(&cfg);
		_cleanup_(probe_workload_freep) struct probe_workload *longw = gen(&other);
		for (size_t i = 0; i < shortw->n_requests; i++)
			same_start += memcmp(ids_of(shortw, i, 0), ids_of(longw, i, 1), 4 * 4) == 0;
		CHECK_MSG(same_start == 0, "%zu of %zu prompts begin alike", same_start, shortw->n_requests);
		cfg.input = a->config.input;
	}
	cfg.seed = 43;
	d = gen(&cfg);
	size_t same = 0;
	for (size_t i = 0; i < d->n_requests; i++)
		same += d->requests[i].input_len == a->requests[i].input_len;
	CHECK(same < d->n_requests / 2);
}

static double mean_of(const struct probe_workload *w, bool input, double *ret_sd)
{
	double s = 0, s2 = 0, n = (double)w->n_requests;

	for (size_t i = 0; i < w->n_requests; i++) {
		double v = input ? w->requests[i].input_len : w->requests[i].output_len;
		s += v;
		s2 += v * v;
	}
	*ret_sd = sqrt(s2 / n - (s / n) * (s / n));
	return s / n;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return (x > y) - (x < y);
}

static void test_length_distributions(void)
{
	struct probe_workload_config cfg;
	double sd, m;

	probe_workload_config_init(&cfg);
	cfg.num_prompts = 5000;
	cfg.lengths_only = true;
	cfg.seed = 7;

	/* uniform: vLLM's [int(1000·0.5), int(1000·1.5)]; mean 1000, sd 500/sqrt(3)=288.7 (se of the mean 4) */
	cfg.input = (struct probe_length_dist){ .kind = PROBE_DIST_UNIFORM, .mean = 1000, .range_ratio = 0.5 };
	/* normal 200 ± 40 */
	cfg.output = (struct probe_length_dist){ .kind = PROBE_DIST_NORMAL, .mean = 200, .stddev = 40 };
	_cleanup_(probe_workload_freep) struct probe_workload *w = gen(&cfg);
	uint32_t lo = UINT32_MAX, hi = 0;
	for (size_t i = 0; i < w->n_requests; i++) {
		lo = MIN(lo, w->requests[i].input_len);
		hi = MAX(hi, w->requests[i].input_len);
	}
	CHECK(lo >= 500 && hi <= 1500 && lo < 510 && hi > 1490);
	m = mean_of(w, true, &sd);
	CHECK_REL(m, 1000, 0.015);
	CHECK_REL(sd, 288.7, 0.05);
	m = mean_of(w, false, &sd);
	CHECK_REL(m, 200, 0.01);
	CHECK_REL(sd, 40, 0.05);

	/* lognormal: median 300, sigma 0.5 -> mean 300·e^(0.125) = 339.9; fixed */
	cfg.input = (struct probe_length_dist){ .kind = PROBE_DIST_LOGNORMAL, .mean = 300, .stddev = 0.5 };
	cfg.output = (struct probe_length_dist){ .kind = PROBE_DIST_FIXED, .mean = 77 };
	_cleanup_(probe_workload_freep) struct probe_workload *l = gen(&cfg);
	_cleanup_(freep) uint32_t *v = calloc(l->n_requests, sizeof(uint32_t));
	CHECK(v);
	for (size_t i = 0; i < l->n_requests; i++) {
		v[i] = l->requests[i].input_len;
		CHECK_INT_EQ(l->requests[i].output_len, 77);
	}
	qsort(v, l->n_requests, sizeof(uint32_t), cmp_u32);
	CHECK_REL(v[l->n_requests / 2], 300, 0.04);
	CHECK_REL(mean_of(l, true, &sd), 339.9, 0.04);

	/* clamping: a normal with a huge sd stays within [min, max] */
	cfg.input = (struct probe_length_dist){
		.kind = PROBE_DIST_NORMAL, .mean = 100, .stddev = 1000, .min = 10, .max = 150
	};
	_cleanup_(probe_workload_freep) struct probe_workload *cl = gen(&cfg);
	for (size_t i = 0; i < cl->n_requests; i++)
		CHECK(cl->requests[i].input_len >= 10 && cl->requests[i].input_len <= 150);
}

static void gap_stats(const struct probe_workload *w, double *ret_mean, double *ret_cv)
{
	double s = 0, s2 = 0, n = (double)w->n_requests - 1;

	for (size_t i = 1; i < w->n_requests; i++) {
		double g = (double)(w->requests[i].arrival_usec - w->requests[i - 1].arrival_usec) / 1e6;
		s += g;
		s2 += g * g;
	}
	*ret_mean = s / n;
	*ret_cv = sqrt(s2 / n - *ret_mean * *ret_mean) / *ret_mean;
}

static void test_arrivals(void)
{
	struct probe_workload_config cfg;
	double mean, cv;

	probe_workload_config_init(&cfg);
	cfg.num_prompts = 20000;
	cfg.lengths_only = true;
	cfg.seed = 3;
	cfg.request_rate = 10;

	/* Poisson: exponential gaps, mean 1/rate, CV 1 (se of the CV ~0.7% at n=20000) */
	cfg.arrival = PROBE_ARRIVAL_POISSON;
	_cleanup_(probe_workload_freep) struct probe_workload *p = gen(&cfg);
	gap_stats(p, &mean, &cv);
	CHECK_REL(mean, 0.1, 0.03);
	CHECK_REL(cv, 1.0, 0.04);

	/* gamma, shape = burstiness: CV = 1/sqrt(burstiness) */
	cfg.arrival = PROBE_ARRIVAL_GAMMA;
	cfg.burstiness = 0.25;
	_cleanup_(probe_workload_freep) struct probe_workload *g1 = gen(&cfg);
	gap_stats(g1, &mean, &cv);
	CHECK_REL(mean, 0.1, 0.06);
	CHECK_REL(cv, 2.0, 0.08);
	cfg.burstiness = 4;
	_cleanup_(probe_workload_freep) struct probe_workload *g2 = gen(&cfg);
	gap_stats(g2, &mean, &cv);
	CHECK_REL(mean, 0.1, 0.02);
	CHECK_REL(cv, 0.5, 0.04);

	/* constant and inf */
	cfg.arrival = PROBE_ARRIVAL_CONSTANT;
	cfg.num_prompts = 5;
	_cleanup_(probe_workload_freep) struct probe_workload *k = gen(&cfg);
	for (size_t i = 0; i < 5; i++)
		CHECK_INT_EQ(k->requests[i].arrival_usec, i * 100000);
	cfg.arrival = PROBE_ARRIVAL_INF;
	_cleanup_(probe_workload_freep) struct probe_workload *inf = gen(&cfg);
	for (size_t i = 0; i < 5; i++)
		CHECK_INT_EQ(inf->requests[i].arrival_usec, 0);
}

static void test_prefix_and_text(void)
{
	struct probe_workload_config cfg;
	_cleanup_(freep) char *text = NULL;

	probe_workload_config_init(&cfg);
	cfg.num_prompts = 10;
	cfg.input.mean = 20;
	cfg.prefix_len = 16;
	cfg.prefix_group_size = 4;
	_cleanup_(probe_workload_freep) struct probe_workload *w = gen(&cfg);
	const struct probe_request_spec *r = w->requests;

	for (size_t i = 0; i < 10; i++) {
		CHECK_INT_EQ(r[i].input_len, 36); /* prefix on top, as vLLM's --random-prefix-len */
		CHECK_INT_EQ(r[i].prefix_id, i / 4 + 1);
	}
	CHECK(memcmp(ids_of(w, 0, 0), ids_of(w, 3, 1), 16 * 4) == 0);
	CHECK(memcmp(ids_of(w, 0, 0), ids_of(w, 4, 1), 16 * 4) != 0);
	CHECK(memcmp(ids_of(w, 4, 0), ids_of(w, 7, 1), 16 * 4) == 0);
	CHECK(memcmp(ids_of(w, 0, 0) + 16, ids_of(w, 1, 1) + 16, 20 * 4) != 0);

	/* the word rule: the text form has one word per id */
	text = probe_request_prompt_text(w, &r[0]);
	CHECK(text);
	CHECK_INT_EQ(probe_count_words(text), 36);
	char first[16];
	snprintf(first, sizeof(first), "w%u ", ids_of(w, 0, 0)[0]);
	CHECK(strncmp(text, first, strlen(first)) == 0);
	CHECK_INT_EQ(probe_count_words("  a\tb\n\nc  "), 3);
	CHECK_INT_EQ(probe_count_words(""), 0);
	CHECK_INT_EQ(probe_count_words(NULL), 0);

	/* group size 0: everyone shares one prefix */
	cfg.prefix_group_size = 0;
	_cleanup_(probe_workload_freep) struct probe_workload *all = gen(&cfg);
	CHECK_INT_EQ(all->requests[9].prefix_id, 1);
	CHECK(memcmp(ids_of(all, 0, 0), ids_of(all, 9, 1), 16 * 4) == 0);
}

/* Conversations: a turn resends the previous turn's prompt and answer, then
 * a message of its own; turns of one conversation come `conversations`
 * requests apart. Repetition: copied segments a bigram lookup finds. */
static void test_turns_and_repetition(void)
{
	struct probe_workload_config cfg;
	struct error err = { 0 };
	uint32_t seen = 0, hits = 0;

	probe_workload_config_init(&cfg);
	cfg.num_prompts = 12;
	cfg.input.mean = 20;
	cfg.output.mean = 10;
	cfg.prefix_len = 8;
	cfg.prefix_group_size = 1000;
	cfg.turns = 3;
	_cleanup_(probe_workload_freep) struct probe_workload *w = gen(&cfg);
	const struct probe_request_spec *r = w->requests;

	/* 12 requests, 3 turns: 4 conversations; request i is turn i / 4 of conversation i % 4 */
	for (size_t i = 0; i < 4; i++) {
		CHECK_INT_EQ(r[i].input_len, 8 + 20);
		CHECK_INT_EQ(r[i + 4].input_len, 8 + 20 + 10 + 20);
		CHECK_INT_EQ(r[i + 8].input_len, 8 + 20 + 10 + 20 + 10 + 20);
		/* each turn starts with the one before it */
		CHECK(memcmp(ids_of(w, i, 0), ids_of(w, i + 4, 1), r[i].input_len * 4) == 0);
		CHECK(memcmp(ids_of(w, i + 4, 0), ids_of(w, i + 8, 1), r[i + 4].input_len * 4) == 0);
		/* and differs from another conversation's after the shared prefix */
		CHECK(memcmp(ids_of(w, i, 0) + 8, ids_of(w, (i + 1) % 4, 1) + 8, 20 * 4) != 0);
	}

	/* repetition: about that share of positions continue a bigram seen before */
	probe_workload_config_init(&cfg);
	cfg.num_prompts = 4;
	cfg.input.mean = 4000;
	cfg.prompt_repetition = 0.6;
	_cleanup_(probe_workload_freep) struct probe_workload *rep = gen(&cfg);
	for (size_t i = 0; i < rep->n_requests; i++) {
		const uint32_t *ids = ids_of(rep, i, 0);

		for (uint32_t k = 3; k < rep->requests[i].input_len; k++) {
			bool hit = false;

			for (uint32_t j = 1; j + 1 < k && !hit; j++)
				hit = ids[j - 1] == ids[k - 2] && ids[j] == ids[k - 1];
			hits += hit;
			seen++;
		}
	}
	CHECK_MSG(fabs((double)hits / seen - 0.6) < 0.1, "lookup finds %.3f", (double)hits / seen);
	cfg.prompt_repetition = 0;
	_cleanup_(probe_workload_freep) struct probe_workload *plain = gen(&cfg);
	CHECK(memcmp(ids_of(plain, 0, 0), ids_of(rep, 0, 1), 8 * 4) == 0); /* the first segment is fresh in both */

	/* only for synthetic prompts, and a share below 1 */
	cfg.prompt_repetition = 1.0;
	{
		struct probe_workload *bad = NULL;

		CHECK(probe_workload_generate(&cfg, &bad, &err) == -EINVAL);
		CHECK_STR_CONTAINS(err.msg, "prompt_repetition");
	}
}

static char dir[] = "/tmp/goodput-test-workload-XXXXXX";

static const char *write_file(const char *name, const char *content)
{
	static char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "we");
	CHECK(f);
	fputs(content, f);
	fclose(f);
	return path;
}

static int try_dataset(enum probe_dataset kind, const char *path, struct error *err)
{
	struct probe_workload_config cfg;
	struct probe_workload *w = NULL;
	int r;

	probe_workload_config_init(&cfg);
	cfg.dataset = kind;
	cfg.dataset_path = path;
	cfg.num_prompts = 4;
	*err = (struct error){ 0 };
	r = probe_workload_generate(&cfg, &w, err);
	probe_workload_free(w);
	return r;
}

static void test_datasets(void)
{
	struct probe_workload_config cfg;
	struct error err;
	const char *p;

	CHECK(mkdtemp(dir));
	p = write_file("share.json", "[{\"conversations\": [{\"from\": \"human\", \"value\": \"hello there you\"},"
				     "  {\"from\": \"gpt\", \"value\": \"one two three four five\"}]},"
				     " {\"conversations\": [{\"from\": \"human\", \"value\": \"no answer\"}]},"
				     " {\"id\": 7},"
				     " {\"conversations\": [{\"from\": \"system\", \"value\": \"be nice\"}, {\"from\": "
				     "\"human\", \"value\": \"a b\"},"
				     "  {\"from\": \"gpt\", \"value\": \"x\"}]}]");
	probe_workload_config_init(&cfg);
	cfg.dataset = PROBE_DATASET_SHAREGPT;
	cfg.dataset_path = p;
	cfg.num_prompts = 6;
	_cleanup_(probe_workload_freep) struct probe_workload *w = gen(&cfg);
	size_t n3 = 0, n2 = 0;
	for (size_t i = 0; i < 6; i++) {
		const struct probe_request_spec *r = &w->requests[i];
		CHECK(probe_workload_prompt_text(w, r) && !probe_workload_has_ids(w));
		CHECK_INT_EQ(probe_workload_prompt_ids(w, r, (uint32_t[8]){ 0 }), -ENODATA);
		if (r->input_len == 3) {
			CHECK_STR_EQ(probe_workload_prompt_text(w, r), "hello there you");
			CHECK_INT_EQ(r->output_len, 5);
			n3++;
		} else {
			CHECK_INT_EQ(r->input_len, 2);
			CHECK_INT_EQ(r->output_len, 1);
			n2++;
		}
	}
	CHECK(n3 == 3 && n2 == 3); /* two usable entries, reused cyclically */
	cfg.dataset_output_len = 9;
	_cleanup_(probe_workload_freep) struct probe_workload *w9 = gen(&cfg);
	CHECK_INT_EQ(w9->requests[0].output_len, 9);

	p = write_file("custom.jsonl",
		       "{\"prompt\": \"alpha beta\", \"output_len\": 12}\n\n{\"prompt\": \"gamma\", \"extra\": 1}\n");
	probe_workload_config_init(&cfg);
	cfg.dataset = PROBE_DATASET_CUSTOM;
	cfg.dataset_path = p;
	cfg.num_prompts = 3;
	_cleanup_(probe_workload_freep) struct probe_workload *c = gen(&cfg);
	CHECK_STR_EQ(probe_workload_prompt_text(c, &c->requests[0]), "alpha beta");
	CHECK_INT_EQ(c->requests[0].output_len, 12);
	CHECK_STR_EQ(probe_workload_prompt_text(c, &c->requests[1]), "gamma");
	CHECK_INT_EQ(c->requests[1].output_len, 128); /* from the output distribution */
	CHECK_STR_EQ(probe_workload_prompt_text(c, &c->requests[2]), "alpha beta");
	/* each entry is kept once, however many requests take it */
	CHECK(c->requests[0].entry == c->requests[2].entry && c->requests[0].entry != c->requests[1].entry);
	cfg.lengths_only = true;
	_cleanup_(probe_workload_freep) struct probe_workload *lo = gen(&cfg);
	CHECK(!lo->dataset && !probe_workload_prompt_text(lo, &lo->requests[0]));
	CHECK_INT_EQ(lo->requests[0].input_len, 2);

	/* errors name file, line or entry, and field */
	CHECK_INT_EQ(try_dataset(PROBE_DATASET_CUSTOM, "/nonexistent/x.jsonl", &err), -ENOENT);
	CHECK_STR_CONTAINS(err.msg, "/nonexistent/x.jsonl");
	p = write_file("bad1.jsonl", "{\"prompt\": \"ok\"}\n{\"prompt\": \"x\", \"output_len\": -3}\n");
	CHECK(try_dataset(PROBE_DATASET_CUSTOM, p, &err) < 0);
	CHECK_STR_CONTAINS(err.msg, "bad1.jsonl:2");
	CHECK_STR_CONTAINS(err.msg, "output_len");
	p = write_file("bad2.jsonl", "{\"prompt\": \"ok\"}\n{\"text\": \"x\"}\n");
	CHECK(try_dataset(PROBE_DATASET_CUSTOM, p, &err) < 0);
	CHECK_STR_CONTAINS(err.msg, "bad2.jsonl:2");
	CHECK_STR_CONTAINS(err.msg, "prompt");
	p = write_file("bad3.jsonl", "{\"prompt\": \"ok\"}\n\n{\"prompt\": \"x\",\n");
	CHECK(try_dataset(PROBE_DATASET_CUSTOM, p, &err) < 0);
	CHECK_STR_CONTAINS(err.msg, "bad3.jsonl:3");
	p = write_file("empty.jsonl", "\n\n");
	CHECK(try_dataset(PROBE_DATASET_CUSTOM, p, &err) < 0);
	CHECK_STR_CONTAINS(err.msg, "no prompts");
	p = write_file("bad4.json",
		       "[{\"conversations\": [{\"from\": \"human\", \"value\": \"a\"}]},\n {\"conversations\": {}}]");
	CHECK(try_dataset(PROBE_DATASET_SHAREGPT, p, &err) < 0);
	CHECK_STR_CONTAINS(err.msg, "bad4.json: entry 1: conversations");
	p = write_file("bad5.json", "[{\"conversations\": [{\"from\": \"human\", \"value\": 5}]}]");
	CHECK(try_dataset(PROBE_DATASET_SHAREGPT, p, &err) < 0);
	CHECK_STR_CONTAINS(err.msg, "entry 0: conversations[0].value");
	p = write_file("bad6.json", "[\n{\"conversations\": [}\n]");
	CHECK(try_dataset(PROBE_DATASET_SHAREGPT, p, &err) < 0);
	CHECK_STR_CONTAINS(err.msg, "bad6.json");
	CHECK_STR_CONTAINS(err.msg, "line 2");
	p = write_file("bad7.json", "{\"conversations\": []}");
	CHECK(try_dataset(PROBE_DATASET_SHAREGPT, p, &err) < 0);
	CHECK_STR_CONTAINS(err.msg, "array");
	p = write_file("bad8.json", "[{\"conversations\": [{\"from\": \"human\", \"value\": \"a\"}]}]");
	CHECK(try_dataset(PROBE_DATASET_SHAREGPT, p, &err) < 0);
	CHECK_STR_CONTAINS(err.msg, "no usable entry");

	/* config errors */
	probe_workload_config_init(&cfg);
	cfg.num_prompts = 0;
	CHECK(probe_workload_generate(&cfg, &(struct probe_workload *){ NULL }, &err) == -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "num_prompts");
	probe_workload_config_init(&cfg);
	cfg.arrival = PROBE_ARRIVAL_GAMMA;
	CHECK(probe_workload_generate(&cfg, &(struct probe_workload *){ NULL }, &err) == -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "request_rate");
	probe_workload_config_init(&cfg);
	cfg.num_prompts = PROBE_MAX_REQUESTS;
	cfg.num_warmup = 1;
	CHECK(probe_workload_generate(&cfg, &(struct probe_workload *){ NULL }, &err) == -E2BIG);
}

/* Runs a getopt_long loop over argv with the shared options merged in. */
static int parse_flags(char **argv, struct probe_workload_flags *f, struct error *err, int *ret_optind)
{
	static const struct option own[] = { { "json", no_argument, NULL, 300 }, { NULL, 0, NULL, 0 } };
	_cleanup_(freep) struct option *opts = NULL;
	int argc = 0, c, r;

	while (argv[argc])
		argc++;
	probe_workload_flags_init(f);
	CHECK_INT_EQ(probe_workload_flags_merge_options(own, &opts), 0);
	optind = 0;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) >= 0) {
		if (c == 300)
			continue;
		r = probe_workload_flags_handle(c, optarg, argc, argv, f, err);
		if (r < 0)
			return r;
		if (r == 0)
			return error_set(err, -EINVAL, "unknown option");
	}
	*ret_optind = optind;
	return probe_workload_flags_finish(f, err);
}

#define ARGV(...) ((char *[]){ "prog", __VA_ARGS__, NULL })

static void test_flags(void)
{
	struct probe_workload_flags f;
	struct error err = { 0 };
	int ind, r;

	r = parse_flags(ARGV("--request-rate", "4", "--burstiness", "0.5", "--goodput", "ttft:500", "tpot:50", "--json",
			     "--num-prompts", "10", "--random-range-ratio", "0.2", "--metric-percentiles", "50,99.9",
			     "--percentile-metrics", "ttft,e2el", "--seed", "9", "--ignore-eos", "extra"),
			&f, &err, &ind);
	CHECK_MSG(r == 0, "%s", err.msg);
	CHECK(f.workload.arrival == PROBE_ARRIVAL_GAMMA && f.workload.request_rate == 4 &&
	      f.workload.burstiness == 0.5);
	CHECK_INT_EQ(f.sla.n_bounds, 2);
	CHECK(f.sla.attainment == 0.9);
	CHECK_INT_EQ(f.workload.num_prompts, 10);
	CHECK(f.workload.input.kind == PROBE_DIST_UNIFORM && f.workload.output.range_ratio == 0.2);
	CHECK(f.n_percentiles == 2 && f.percentiles[1] == 99.9);
	CHECK_INT_EQ(f.percentile_metrics, 1u << PROBE_METRIC_TTFT | 1u << PROBE_METRIC_E2EL);
	CHECK(f.workload.seed == 9 && f.workload.ignore_eos);

	/* defaults: everything at once, as vLLM */
	CHECK_INT_EQ(parse_flags(ARGV("--num-prompts", "5"), &f, &err, &ind), 0);
	CHECK(f.workload.arrival == PROBE_ARRIVAL_INF && isinf(f.workload.request_rate));
	CHECK_INT_EQ(parse_flags(ARGV("--request-rate", "3"), &f, &err, &ind), 0);
	CHECK(f.workload.arrival == PROBE_ARRIVAL_POISSON);
	CHECK_INT_EQ(
		parse_flags(ARGV("--request-rate", "3", "--arrival", "constant", "--sla", "ttft:100,p99:tpot:20",
				 "--attainment", "0.95", "--input-len-dist", "lognormal", "--input-len-std", "0.3"),
			    &f, &err, &ind),
		0);
	CHECK(f.workload.arrival == PROBE_ARRIVAL_CONSTANT && f.sla.attainment == 0.95 && f.sla.n_bounds == 2);
	CHECK(f.workload.input.kind == PROBE_DIST_LOGNORMAL && f.workload.input.stddev == 0.3);

	const struct {
		char **argv;
		const char *needle;
	} bad[] = {
		{ ARGV("--goodput", "ttft:1", "--sla", "ttft:1"), "--goodput and --sla" },
		{ ARGV("--arrival", "constant"), "finite --request-rate" },
		{ ARGV("--request-rate", "fast"), "--request-rate" },
		{ ARGV("--request-rate", "2", "--arrival", "inf"), "--arrival inf" },
		{ ARGV("--request-rate", "2", "--arrival", "poisson", "--burstiness", "3"), "--burstiness" },
		{ ARGV("--input-len-dist", "normal"), "--input-len-std" },
		{ ARGV("--input-len-dist", "zipf"), "zipf" },
		{ ARGV("--dataset-name", "sharegpt"), "--dataset-path" },
		{ ARGV("--dataset-path", "x.json"), "--dataset-path" },
		{ ARGV("--dataset-name", "foo"), "foo" },
		{ ARGV("--num-prompts", "0"), "--num-prompts" },
		{ ARGV("--attainment", "0.9"), "--attainment" },
		{ ARGV("--attainment", "1.5", "--sla", "ttft:1"), "--attainment" },
		{ ARGV("--sla", "ttft:x"), "--sla" },
		{ ARGV("--goodput", "ttft:1", "bogus:2"), "--goodput" },
		{ ARGV("--metric-percentiles", "50,120"), "--metric-percentiles" },
		{ ARGV("--percentile-metrics", "ttft,foo"), "foo" },
		{ ARGV("--prefix-group-size", "4"), "--random-prefix-len" },
	};
	for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
		err = (struct error){ 0 };
		r = parse_flags(bad[i].argv, &f, &err, &ind);
		CHECK_MSG(r < 0, "case %zu parsed", i);
		CHECK_STR_CONTAINS(err.msg, bad[i].needle);
	}

	/* the option table has unique vals >= 1000 and help mentions each flag */
	const struct option *o = probe_workload_flags_options();
	char *help = NULL;
	size_t size = 0;
	FILE *hf = open_memstream(&help, &size);
	CHECK(hf);
	probe_workload_flags_help(hf);
	fclose(hf);
	for (size_t i = 0; o[i].name; i++) {
		CHECK(o[i].val >= PROBE_WORKLOAD_FLAG_BASE);
		CHECK_MSG(strstr(help, o[i].name), "help lacks --%s", o[i].name);
	}
	free(help);
}

/* Request i of a and b agree: lengths, arrival, prefix, entry, prompt. */
static void check_same_request(struct probe_workload *a, const struct probe_request_spec *x, struct probe_workload *b,
			       const struct probe_request_spec *y)
{
	static uint32_t ia[4096], ib[4096];

	CHECK_INT_EQ(x->index, y->index);
	CHECK(x->warmup == y->warmup);
	CHECK_INT_EQ(x->arrival_usec, y->arrival_usec);
	CHECK_INT_EQ(x->input_len, y->input_len);
	CHECK_INT_EQ(x->output_len, y->output_len);
	CHECK_INT_EQ(x->prefix_id, y->prefix_id);
	CHECK_INT_EQ(x->entry, y->entry);
	if (probe_workload_has_ids(a)) {
		CHECK(x->input_len <= 4096);
		CHECK_INT_EQ(probe_workload_prompt_ids(a, x, ia), 0);
		CHECK_INT_EQ(probe_workload_prompt_ids(b, y, ib), 0);
		CHECK_MSG(memcmp(ia, ib, x->input_len * sizeof(uint32_t)) == 0, "request %u: other prompt ids",
			  x->index);
	} else
		CHECK_STR_EQ(probe_workload_prompt_text(a, x), probe_workload_prompt_text(b, y));
}

/* FNV-1a over a generated workload's requests and prompt ids: the
 * sequence a seed makes, pinned (a study's seed must mean the same
 * requests in every version). */
static uint64_t workload_hash(struct probe_workload *w)
{
	static uint32_t ids[4096];
	uint64_t h = UINT64_C(1469598103934665603);

	for (size_t i = 0; i < w->n_requests; i++) {
		const struct probe_request_spec *q = &w->requests[i];
		uint64_t f[7] = { q->index,      q->warmup,    q->arrival_usec, q->input_len,
				  q->output_len, q->prefix_id, q->entry };
		const unsigned char *b = (const unsigned char *)f;

		for (size_t k = 0; k < sizeof(f); k++)
			h = (h ^ b[k]) * UINT64_C(1099511628211);
		CHECK(q->input_len <= 4096);
		CHECK_INT_EQ(probe_workload_prompt_ids(w, q, ids), 0);
		b = (const unsigned char *)ids;
		for (size_t k = 0; k < q->input_len * sizeof(uint32_t); k++)
			h = (h ^ b[k]) * UINT64_C(1099511628211);
	}
	return h;
}

/* An opened workload (made as it is read, the probe's) gives exactly the
 * generated one's requests, read in order, with the arrivals far ahead,
 * with gaps, and stepping back. */
static void test_opened(void)
{
	struct probe_workload_config cfg[4];
	const char *custom;
	struct error err = { 0 };

	custom =
		write_file("opened.jsonl", "{\"prompt\": \"alpha beta\", \"output_len\": 12}\n{\"prompt\": \"gamma\"}\n"
					   "{\"prompt\": \"d e f g\"}\n");
	for (size_t c = 0; c < ELEMENTSOF(cfg); c++) {
		probe_workload_config_init(&cfg[c]);
		cfg[c].num_prompts = 120;
		cfg[c].num_warmup = 3;
		cfg[c].seed = 42 + c;
		cfg[c].input = (struct probe_length_dist){ .kind = PROBE_DIST_UNIFORM, .mean = 60, .range_ratio = 0.5 };
		cfg[c].output =
			(struct probe_length_dist){ .kind = PROBE_DIST_UNIFORM, .mean = 20, .range_ratio = 0.5 };
		cfg[c].arrival = PROBE_ARRIVAL_POISSON;
		cfg[c].request_rate = 7;
	}
	/* a capped point's window, shared prefixes, another prompt variant */
	cfg[0].prefix_len = 16;
	cfg[0].prefix_group_size = 8;
	cfg[0].prompt_variant = 2;
	cfg[0].arrival_window_s = 10;
	/* conversations resending their turns, repetition */
	cfg[1].turns = 3;
	cfg[1].prefix_len = 8;
	cfg[1].prefix_group_size = 5;
	cfg[1].prompt_repetition = 0.3;
	/* a dataset's texts, outputs partly drawn */
	cfg[2].dataset = PROBE_DATASET_CUSTOM;
	cfg[2].dataset_path = custom;
	cfg[2].prompt_variant = 1;
	/* gamma arrivals warped by a rate profile */
	cfg[3].arrival = PROBE_ARRIVAL_GAMMA;
	cfg[3].burstiness = 0.5;
	cfg[3].profile = (struct probe_rate_profile){
		.n = 3, .second_of_day = { 0, 30000, 60000 }, .rate = { 1, 5, 2 }, .start = 25000, .speed = 1440
	};

	for (size_t c = 0; c < ELEMENTSOF(cfg); c++) {
		_cleanup_(probe_workload_freep) struct probe_workload *g = gen(&cfg[c]), *o = NULL, *o2 = NULL;
		struct probe_request_spec q;
		size_t n = g->n_requests;

		CHECK_MSG(probe_workload_open(&cfg[c], &o, &err) == 0, "%s", err.msg);
		CHECK(!o->requests && o->n_requests == n);
		/* every arrival first, as a load point's timer reads them ahead of the sending */
		for (size_t i = 0; i < n; i++)
			CHECK_INT_EQ(probe_workload_arrival(o, i), g->requests[i].arrival_usec);
		CHECK_INT_EQ(probe_workload_arrival(o, n), UINT64_MAX);
		for (size_t i = 0; i < n; i++) {
			CHECK_INT_EQ(probe_workload_request(o, i, &q), 0);
			check_same_request(o, &q, g, &g->requests[i]);
		}
		CHECK_INT_EQ(probe_workload_request(o, n, &q), -ERANGE);

		/* gaps and steps back, each arrival asked before its request */
		CHECK_MSG(probe_workload_open(&cfg[c], &o2, &err) == 0, "%s", err.msg);
		for (size_t i = 0; i < n; i += 7) {
			CHECK_INT_EQ(probe_workload_arrival(o2, MIN(i + 11, n - 1)),
				     g->requests[MIN(i + 11, n - 1)].arrival_usec);
			CHECK_INT_EQ(probe_workload_arrival(o2, i), g->requests[i].arrival_usec);
			CHECK_INT_EQ(probe_workload_request(o2, i, &q), 0);
			check_same_request(o2, &q, g, &g->requests[i]);
		}
		CHECK_INT_EQ(probe_workload_request(o2, 5, &q), 0);
		check_same_request(o2, &q, g, &g->requests[5]);
		CHECK_INT_EQ(probe_workload_arrival(o2, 4), g->requests[4].arrival_usec);
		CHECK_INT_EQ(probe_workload_arrival(o2, n - 1), g->requests[n - 1].arrival_usec);
		CHECK_INT_EQ(probe_workload_arrival(o2, 9), g->requests[9].arrival_usec);
		CHECK_INT_EQ(probe_workload_request(o2, n - 1, &q), 0);
		check_same_request(o2, &q, g, &g->requests[n - 1]);

		/* the generated sequence itself, pinned for two seeds */
		if (c == 0)
			CHECK_INT_EQ(workload_hash(g), UINT64_C(0x59cbfc86a45d5767));
		if (c == 1)
			CHECK_INT_EQ(workload_hash(g), UINT64_C(0xbd9b2bf66dfff3d0));
	}
	/* a check's error comes from open as from generate */
	cfg[0].num_prompts = 0;
	CHECK(probe_workload_open(&cfg[0], &(struct probe_workload *){ NULL }, &err) == -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "num_prompts");
}

static void cleanup_dir(void)
{
	static const char *const names[] = { "share.json", "custom.jsonl", "bad1.jsonl", "bad2.jsonl",
					     "bad3.jsonl", "empty.jsonl",  "bad4.json",  "bad5.json",
					     "bad6.json",  "bad7.json",    "bad8.json",  "opened.jsonl" };
	char path[256];

	for (size_t i = 0; i < ELEMENTSOF(names); i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		unlink(path);
	}
	rmdir(dir);
}

int main(void)
{
	test_defaults_and_determinism();
	test_length_distributions();
	test_arrivals();
	test_prefix_and_text();
	test_turns_and_repetition();
	test_datasets();
	test_opened();
	cleanup_dir();
	test_flags();
	return 0;
}
