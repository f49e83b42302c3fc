/* Measured workloads in the generator: lengths drawn from a histogram keep
 * every bucket's share and the mean asked for; a rate profile shapes the
 * arrivals and scales with the rate; request logs of the three kinds are
 * read, sorted and dated, and their errors name the line; a trace replays a
 * log's arrivals exactly and scales them; the workload block reads what it
 * writes and names the key it refuses; `--workload FILE` keeps the shape
 * and takes the counts from the flags. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "json-util.h"
#include "macro.h"
#include "workload-flags.h"
#include "workload-json.h"
#include "workload.h"
#include "tests.h"

static char tmpdir[] = "/tmp/goodput-test-measured-XXXXXX";
static char written[32][512];
static size_t n_written;

static const char *write_file(const char *name, const char *text)
{
	char *path;
	FILE *f;

	CHECK(n_written < ELEMENTSOF(written));
	path = written[n_written++];
	snprintf(path, sizeof(written[0]), "%s/%s", tmpdir, name);
	f = fopen(path, "we");
	CHECK(f);
	fputs(text, f);
	CHECK(fclose(f) == 0);
	return path;
}

static struct probe_workload *gen(const struct probe_workload_config *cfg)
{
	struct probe_workload *w = NULL;
	struct error err = { 0 };
	int r = probe_workload_generate(cfg, &w, &err);

	CHECK_MSG(r == 0, "%s", error_str(&err, r));
	return w;
}

/* vLLM-like 1-2-5 buckets holding a lognormal-ish prompt distribution. */
static void sample_histogram(struct probe_length_histogram *h)
{
	static const double le[] = { 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000 };
	static const double count[] = { 0, 0, 0, 0, 0, 0, 3, 25, 133, 79, 18, 2 };

	*h = (struct probe_length_histogram){ .n = ELEMENTSOF(le) };
	memcpy(h->le, le, sizeof(le));
	memcpy(h->count, count, sizeof(count));
}

static void test_histogram_lengths(void)
{
	struct probe_workload_config cfg;
	_cleanup_(probe_workload_freep) struct probe_workload *w = NULL, *u = NULL;
	double total = 260, got[12] = { 0 }, sum = 0, sum_u = 0;
	size_t n = 40000;

	probe_workload_config_init(&cfg);
	cfg.num_prompts = (uint32_t)n;
	cfg.lengths_only = true;
	cfg.seed = 3;
	cfg.input.kind = PROBE_DIST_HISTOGRAM;
	sample_histogram(&cfg.input.hist);
	cfg.input.mean = 612.5;
	cfg.output = (struct probe_length_dist){ .kind = PROBE_DIST_FIXED, .mean = 16 };
	w = gen(&cfg);
	for (size_t i = 0; i < n; i++) {
		uint32_t len = w->requests[i].input_len;
		size_t b = 0;

		while (len > cfg.input.hist.le[b])
			b++;
		CHECK_MSG(b < 12 && len >= 1, "length %u outside the buckets", len);
		got[b]++;
		sum += len;
	}
	/* every bucket keeps its share (4 standard deviations of a binomial) */
	for (size_t b = 0; b < 12; b++) {
		double p = cfg.input.hist.count[b] / total, sd = sqrt(n * p * (1 - p));

		CHECK_MSG(fabs(got[b] - n * p) <= 4 * sd + 1, "bucket %zu: %g draws, expected %g", b, got[b], n * p);
	}
	/* the mean asked for, not the buckets' midpoints */
	CHECK_REL(sum / n, 612.5, 0.01);
	/* without a mean: lengths uniform inside the buckets' smooth curve, the mean of the midpoints */
	cfg.input.mean = NAN;
	u = gen(&cfg);
	for (size_t i = 0; i < n; i++)
		sum_u += u->requests[i].input_len;
	CHECK(fabs(sum_u / n - probe_histogram_mean_uniform(&cfg.input.hist)) <
	      0.15 * probe_histogram_mean_uniform(&cfg.input.hist));
	CHECK_REL(probe_length_dist_mean(&cfg.input), probe_histogram_mean_uniform(&cfg.input.hist), 1e-12);
}

static void test_rate_profile(void)
{
	struct probe_workload_config cfg;
	_cleanup_(probe_workload_freep) struct probe_workload *w = NULL, *f = NULL;
	size_t in_first = 0, n;
	double last, half;

	probe_workload_config_init(&cfg);
	cfg.num_prompts = 3000;
	cfg.lengths_only = true;
	cfg.input.mean = 8;
	cfg.output.mean = 4;
	cfg.arrival = PROBE_ARRIVAL_POISSON;
	/* 2 req/s until noon, 6 req/s after; a day in 100 s, starting at midnight */
	cfg.profile = (struct probe_rate_profile){
		.n = 2, .second_of_day = { 0, 43200 }, .rate = { 2, 6 }, .start = 0, .speed = 864
	};
	CHECK_REL(probe_rate_profile_mean(&cfg.profile), 4, 1e-12);
	CHECK(probe_rate_profile_at(&cfg.profile, 3600) == 2 && probe_rate_profile_at(&cfg.profile, 50000) == 6);
	cfg.request_rate = 4; /* the profile's own mean: its own levels */
	w = gen(&cfg);
	n = w->n_requests;
	for (size_t i = 0; i < n && w->requests[i].arrival_usec < 50 * 1000000ull; i++)
		in_first++;
	/* 50 s at 2/s, then 6/s: the second half of each day holds three times the first's */
	last = (double)w->requests[n - 1].arrival_usec / 1e6;
	CHECK_MSG(fabs((double)in_first - 100) < 40, "first 50 s: %zu arrivals, expected ~100", in_first);
	CHECK_MSG(fabs(last / 750 - 1) < 0.1, "3000 arrivals over %g s, expected ~750 (4/s)", last);
	CHECK(!probe_workload_arrivals_scale(&cfg));
	/* twice the mean rate: the same curve, twice as dense */
	cfg.request_rate = 8;
	f = gen(&cfg);
	half = (double)f->requests[n - 1].arrival_usec / 1e6;
	CHECK_REL(half, last / 2, 0.02);
	/* a profile needs arrivals it can shape, and a rate above 0 */
	{
		struct error err = { 0 };
		struct probe_workload *x = NULL;

		cfg.arrival = PROBE_ARRIVAL_TRACE;
		cfg.samples_path = "/nonexistent";
		CHECK(probe_workload_generate(&cfg, &x, &err) == -EINVAL);
		CHECK_STR_CONTAINS(err.msg, "rate_profile");
		cfg.arrival = PROBE_ARRIVAL_POISSON;
		cfg.profile.rate[0] = cfg.profile.rate[1] = 0;
		CHECK(probe_workload_generate(&cfg, &x, &err) == -EINVAL);
		CHECK_STR_CONTAINS(err.msg, "every rate is 0");
	}
}

static void test_samples(void)
{
	_cleanup_(probe_samples_freep) struct probe_samples *p = NULL, *o = NULL, *q = NULL;
	struct probe_samples *x = NULL;
	struct error err = { 0 };
	const char *path;
	int r;

	/* the probe's own lines, out of order, one failed */
	path = write_file("probe.jsonl",
			  "{\"load_point\":0,\"index\":1,\"success\":true,\"send_usec\":5500000,\"input_tokens\":20,"
			  "\"output_tokens\":7,\"timestamp\":1700000000.5}\n"
			  "{\"load_point\":0,\"index\":0,\"success\":true,\"send_usec\":5000000,\"input_tokens\":10,"
			  "\"output_tokens\":5,\"timestamp\":1700000000.0}\n"
			  "\n"
			  "{\"load_point\":0,\"index\":2,\"success\":false,\"send_usec\":5600000,\"input_tokens\":9,"
			  "\"output_tokens\":0}\n");
	r = probe_samples_load(path, &p, &err);
	CHECK_MSG(r == 0, "%s", error_str(&err, r));
	CHECK(p->format == PROBE_SAMPLES_PROBE && p->n == 2 && p->skipped_failed == 1 && p->have_time);
	CHECK(p->t_usec[0] == 0 && p->t_usec[1] == 500000 && p->input[0] == 10 && p->output[1] == 7);
	CHECK(p->first_realtime == 1700000000.0);
	CHECK_REL(probe_samples_rate(p), 2, 1e-12);

	/* OpenAI pairs: RFC 3339 with an offset, the response's created, usage in the response */
	path = write_file("openai.jsonl",
			  "{\"timestamp\":\"2025-03-01T10:00:01.5+01:00\",\"request\":{\"model\":\"m\"},"
			  "\"response\":{\"usage\":{\"prompt_tokens\":100,\"completion_tokens\":0}}}\n"
			  "{\"request\":{},\"response\":{\"created\":1740819600,\"usage\":{\"prompt_tokens\":50,"
			  "\"completion_tokens\":9}}}\n");
	r = probe_samples_load(path, &o, &err);
	CHECK_MSG(r == 0, "%s", error_str(&err, r));
	/* 10:00:01.5+01:00 is 09:00:01.5Z, 1.5 s after created (09:00:00Z) */
	CHECK(o->format == PROBE_SAMPLES_OPENAI && o->n == 2 && o->first_realtime == 1740819600.0);
	CHECK(o->input[0] == 50 && o->input[1] == 100 && o->t_usec[1] == 1500000);
	CHECK(o->output[1] == 1); /* a completion of 0 tokens asks for 1 */

	/* plain lines without times */
	path = write_file("plain.jsonl",
			  "{\"input_len\": 7, \"output_len\": 3}\n{\"input_len\": 8, \"output_len\": 4}\n");
	r = probe_samples_load(path, &q, &err);
	CHECK(r == 0 && q->format == PROBE_SAMPLES_PLAIN && !q->have_time && q->n == 2 && isnan(probe_samples_rate(q)));

	/* errors name the line and the field */
	path = write_file("bad.jsonl", "{\"input_len\": 7, \"output_len\": 3}\n{\"input_len\": 7}\n");
	CHECK(probe_samples_load(path, &x, &err) == -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "bad.jsonl:2.output_len: missing");
	path = write_file("mixed.jsonl", "{\"input_len\": 7, \"output_len\": 3}\n{\"send_usec\": 1}\n");
	CHECK(probe_samples_load(path, &x, &err) == -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "mixed.jsonl:2: a line of another kind");
	path = write_file("notime.jsonl", "{\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":1}}\n");
	CHECK(probe_samples_load(path, &x, &err) == -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "notime.jsonl:1: timestamp");
	path = write_file("other.jsonl", "{\"prompt\": \"hello\"}\n");
	CHECK(probe_samples_load(path, &x, &err) == -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "other.jsonl:1: expected a `goodput probe --save-requests` line");
	/* a log is a regular file, read with the dataset files' limits */
	CHECK(probe_samples_load(tmpdir, &x, &err) < 0);
	CHECK_STR_CONTAINS(err.msg, tmpdir);
	CHECK_STR_CONTAINS(err.msg, "directory");
}

static void test_trace(void)
{
	struct probe_workload_config cfg;
	_cleanup_(probe_workload_freep) struct probe_workload *w = NULL, *s = NULL, *shuffled = NULL;
	const char *path = write_file("trace.jsonl", "{\"input_len\": 10, \"output_len\": 1, \"t\": 0}\n"
						     "{\"input_len\": 20, \"output_len\": 2, \"t\": 0.25}\n"
						     "{\"input_len\": 30, \"output_len\": 3, \"t\": 1.0}\n");

	probe_workload_config_init(&cfg);
	cfg.lengths_only = true;
	cfg.samples_path = path;
	cfg.input.kind = cfg.output.kind = PROBE_DIST_SAMPLES;
	cfg.arrival = PROBE_ARRIVAL_TRACE;
	cfg.request_rate = INFINITY; /* the log's own pace */
	cfg.num_prompts = 5;
	w = gen(&cfg);
	/* the log in order, then again one mean gap (0.5 s) after its end */
	CHECK(w->requests[0].arrival_usec == 0 && w->requests[1].arrival_usec == 250000 &&
	      w->requests[2].arrival_usec == 1000000);
	CHECK(w->requests[3].arrival_usec == 1500000 && w->requests[4].arrival_usec == 1750000);
	CHECK(w->requests[1].input_len == 20 && w->requests[1].output_len == 2 && w->requests[3].input_len == 10);
	/* at twice its rate (the log's is 2 req/s), twice as dense */
	cfg.request_rate = 4;
	s = gen(&cfg);
	CHECK(s->requests[2].arrival_usec == 500000 && s->requests[4].arrival_usec == 875000);
	CHECK(probe_workload_arrivals_scale(&cfg));
	/* samples lengths with other arrivals: each of the log's lengths once per
	 * pass over it, in an order shuffled by the seed */
	{
		char text[50 * 48];
		size_t used = 0, moved = 0;
		unsigned seen[51] = { 0 };

		for (unsigned i = 1; i <= 50; i++)
			used += (size_t)snprintf(text + used, sizeof(text) - used,
						 "{\"input_len\": %u, \"output_len\": %u}\n", i, i + 100);
		cfg.samples_path = write_file("lengths.jsonl", text);
		cfg.arrival = PROBE_ARRIVAL_POISSON;
		cfg.request_rate = 1;
		cfg.num_prompts = 50;
		shuffled = gen(&cfg);
		for (size_t i = 0; i < 50; i++) {
			const struct probe_request_spec *q = &shuffled->requests[i];

			CHECK(q->input_len >= 1 && q->input_len <= 50 && q->output_len == q->input_len + 100);
			seen[q->input_len]++;
			moved += q->input_len != i + 1;
		}
		for (unsigned i = 1; i <= 50; i++)
			CHECK(seen[i] == 1);
		CHECK(moved > 25);
	}
}

static void test_block(void)
{
	static const char text[] =
		"{\"input_len_histogram\": {\"le\": [10, 100, 1000], \"count\": [1, 5, 2]}, \"input_len\": 120,"
		" \"output_len\": 32, \"rate_profile\": [[\"09:00\", 2], [\"17:30\", 0.5]], \"burstiness\": 2,"
		" \"percentiles\": [50, 99], \"captured\": {\"source\": \"metrics\"}}";
	_cleanup_(cJSON_Deletep) cJSON *j = NULL, *out = NULL, *bad = NULL;
	struct probe_workload_spec spec = { 0 }, back = { 0 };
	struct error err = { 0 };
	int r;

	CHECK(json_parse_strict("block", text, strlen(text), &j, &err) == 0);
	probe_workload_config_init(&spec.config);
	r = probe_workload_from_json(j, "workload", &spec, &err);
	CHECK_MSG(r == 0, "%s", error_str(&err, r));
	CHECK(spec.config.input.kind == PROBE_DIST_HISTOGRAM && spec.config.input.hist.n == 3);
	CHECK(spec.config.input.mean == 120 && spec.config.output.kind == PROBE_DIST_FIXED);
	CHECK(spec.config.arrival == PROBE_ARRIVAL_GAMMA && spec.config.profile.n == 2);
	CHECK(spec.config.profile.start == 9 * 3600 && spec.config.profile.second_of_day[1] == 17 * 3600 + 1800);
	/* no rate given: the profile's mean (2/s for 8.5 h, 0.5/s for 15.5 h) */
	CHECK_REL(spec.config.request_rate, (2 * 8.5 + 0.5 * 15.5) / 24, 1e-12);
	CHECK(spec.n_percentiles == 2 && spec.captured && cJSON_IsObject(spec.captured));

	/* written and read back: the same shape */
	out = cJSON_CreateObject();
	CHECK(probe_workload_shape_to_json(&spec.config, out) == 0);
	probe_workload_config_init(&back.config);
	r = probe_workload_from_json(out, "", &back, &err);
	CHECK_MSG(r == 0, "%s", error_str(&err, r));
	CHECK(back.config.input.kind == PROBE_DIST_HISTOGRAM && back.config.input.mean == 120);
	CHECK(memcmp(&back.config.input.hist, &spec.config.input.hist, sizeof(back.config.input.hist)) == 0);
	CHECK(back.config.burstiness == 2 && back.config.request_rate == spec.config.request_rate);
	CHECK(memcmp(&back.config.profile, &spec.config.profile, sizeof(back.config.profile)) == 0);

	/* refusals name the key */
	{
		static const struct {
			const char *text, *msg;
		} cases[] = {
			{ "{\"input_len_dist\": \"histogram\"}", "workload.input_len_histogram: missing" },
			{ "{\"input_len_dist\": \"fixed\", \"input_len_histogram\": {\"le\": [1], \"count\": [1]}}",
			  "workload.input_len_histogram: only with input_len_dist histogram" },
			{ "{\"input_len_histogram\": {\"le\": [10, 5], \"count\": [1, 1]}}",
			  "workload.input_len_histogram.le[1]: expected a bound above the one before" },
			{ "{\"input_len_histogram\": {\"le\": [10], \"count\": [1, 1]}}",
			  "the same number of entries" },
			{ "{\"input_len_dist\": \"samples\"}", "workload.samples_path: missing" },
			{ "{\"arrival\": \"trace\"}", "workload.samples_path: missing (arrival trace" },
			{ "{\"rate_profile\": [[\"25:00\", 1]]}", "workload.rate_profile[0]: expected [\"HH:MM\"" },
			{ "{\"rate_profile\": [[\"10:00\", 1], [\"09:00\", 1]]}", "must come after the point before" },
			{ "{\"rate_profile_speed\": 2}", "workload.rate_profile: missing" },
			{ "{\"rate_profile\": [[\"10:00\", 1]], \"arrival\": \"inf\"}",
			  "rate_profile: needs poisson, gamma or constant" },
		};

		for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
			struct probe_workload_spec s = { 0 };

			cJSON_Delete(bad);
			bad = NULL;
			CHECK(json_parse_strict("case", cases[i].text, strlen(cases[i].text), &bad, &err) == 0);
			probe_workload_config_init(&s.config);
			CHECK_MSG(probe_workload_from_json(bad, "workload", &s, &err) == -EINVAL, "case %zu accepted",
				  i);
			CHECK_STR_CONTAINS(err.msg, cases[i].msg);
		}
	}
}

static int parse_flags(int argc, char **argv, struct probe_workload_flags *f, struct error *err)
{
	int opt, r;

	probe_workload_flags_init(f);
	optind = 0;
	while ((opt = getopt_long(argc, argv, "", probe_workload_flags_options(), NULL)) >= 0) {
		r = probe_workload_flags_handle(opt, optarg, argc, argv, f, err);
		if (r <= 0)
			return r < 0 ? r : -EINVAL;
	}
	return probe_workload_flags_finish(f, err);
}

static void test_workload_flag(void)
{
	const char *path = write_file(
		"block.json",
		"{\"input_len_dist\": \"lognormal\", \"input_len\": 300,"
		" \"input_len_std\": 0.5, \"output_len_dist\": \"fixed\", \"output_len\": 20, \"num_prompts\": 40,"
		" \"request_rate\": 3, \"percentiles\": [95]}");
	struct probe_workload_flags f;
	struct error err = { 0 };
	char *ok[] = { "x", "--workload", (char *)path, "--num-prompts", "7", "--seed", "5", NULL };
	char *rate[] = { "x", "--workload", (char *)path, "--request-rate", "inf", NULL };
	char *shape[] = { "x", "--workload", (char *)path, "--random-input-len", "10", NULL };
	int r;

	r = parse_flags(7, ok, &f, &err);
	CHECK_MSG(r == 0, "%s", error_str(&err, r));
	CHECK(f.workload.input.kind == PROBE_DIST_LOGNORMAL && f.workload.input.mean == 300);
	CHECK(f.workload.num_prompts == 7 && f.workload.seed == 5 && f.workload.request_rate == 3);
	CHECK(f.workload.arrival == PROBE_ARRIVAL_POISSON && f.n_percentiles == 1 && f.percentiles[0] == 95);
	probe_workload_flags_done(&f);

	r = parse_flags(5, rate, &f, &err);
	CHECK(r == 0 && f.workload.arrival == PROBE_ARRIVAL_INF && f.workload.num_prompts == 40);
	probe_workload_flags_done(&f);

	CHECK(parse_flags(5, shape, &f, &err) == -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "--random-input-len: not with --workload");
	probe_workload_flags_done(&f);
}

int main(void)
{
	CHECK(mkdtemp(tmpdir));
	test_histogram_lengths();
	test_rate_profile();
	test_samples();
	test_trace();
	test_block();
	test_workload_flag();
	for (size_t i = 0; i < n_written; i++)
		(void)unlink(written[i]);
	(void)rmdir(tmpdir);
	return 0;
}
