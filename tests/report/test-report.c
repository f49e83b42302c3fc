/* test-report.c — the report library on synthetic studies: the numbers in
 * the Markdown equal the store's, every trial is listed with its failure,
 * a study where nothing met the SLA says so, the table-only fallback when
 * gnuplot is missing, plan arithmetic against hand-computed cases, and
 * compare's verdicts, GPU telemetry shown when recorded and "unavailable" otherwise. */
#include <errno.h>
#include <ftw.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "json-util.h"
#include "macro.h"
#include "report-fixture.h"
#include "report.h"
#include "space.h"
#include "store.h"
#include "study.h"
#include "tests.h"
#include "workload.h"

static char dir[] = "/tmp/test-report-XXXXXX";

static int rm_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	return remove(path);
}

static struct report *load(struct store *s, const char *name, const struct report_options *o)
{
	struct report *r = NULL;
	struct error err = { 0 };

	CHECK_MSG(report_load(s, name, o, &r, &err) >= 0, "%s", err.msg);
	return r;
}

static char *markdown(struct store *s, const char *name)
{
	char *md = NULL;
	struct error err = { 0 };

	CHECK_MSG(report_markdown(s, name, NULL, &md, &err) >= 0, "%s", err.msg);
	return md;
}

static void test_markdown_best(struct store *s)
{
	_cleanup_(freep) char *md = markdown(s, FIX_A);
	char cost[64];

	/* the best configuration, its cost (the mean of its two measurements) and goodput as stored */
	snprintf(cost, sizeof(cost), "$%.4f per million tokens, the mean of 2 measurements",
		 (fix_cost(1, FIX_A_BEST_GOODPUT) + fix_cost(1, FIX_A_CONFIRM_GOODPUT)) / 2);
	CHECK_STR_CONTAINS(md, cost);
	CHECK_STR_CONTAINS(md, "Best configuration: max\\_num\\_seqs=32 max\\_num\\_batched\\_tokens=1024 fp8 tp=1");
	CHECK_STR_CONTAINS(md, "max goodput 250.0 tokens/s at 4.00 req/s");
	/* the launch command as the best trial (the third) was launched: stored
	 * with it, never rebuilt from a profile found now (its port is the trial's) */
	CHECK_STR_CONTAINS(md, "goodput-sim serve --model llama-3.1-70b --gpu L40S --gpus 4");
	CHECK_STR_CONTAINS(md, "--port 41003");
	CHECK_STR_CONTAINS(md, "CUDA_VISIBLE_DEVICES=0 goodput-sim");
	/* the study's fixed engine flags, as given */
	CHECK_STR_CONTAINS(md, "engine arguments (after the profile's flags) | --seed '7 8'");
	CHECK_STR_CONTAINS(md, "--max-num-seqs 32 --max-num-batched-tokens 1024");
	CHECK_STR_CONTAINS(md, "--quantization fp8");
	/* every section */
	const char *sections[] = { "## Scenario",
				   "## Workload",
				   "## SLA",
				   "## Search space and budget",
				   "## Best configuration",
				   "## Re-probed best",
				   "## All trials",
				   "## Cost landscape",
				   "## Search progress",
				   "## GPU memory and server state" };
	for (size_t i = 0; i < ELEMENTSOF(sections); i++)
		CHECK_STR_CONTAINS(md, sections[i]);
	/* scenario: versions from the host JSON */
	CHECK_STR_CONTAINS(md, "goodput-sim 0.1.0");
	CHECK_STR_CONTAINS(md, "L40S, 4 on the host, $0.99 per GPU-hour");
	/* every trial with its failure reason */
	CHECK_STR_CONTAINS(md, "CUDA out of memory (trial 4)");
	CHECK_STR_CONTAINS(
		md,
		"| 4 | search | max\\_num\\_seqs=64 max\\_num\\_batched\\_tokens=2048 fp8 tp=1 | infeasible | oom |");
	CHECK_STR_CONTAINS(md, "| 5 | search | max\\_num\\_seqs=32 max\\_num\\_batched\\_tokens=2048 none tp=2 | "
			       "infeasible | sla\\_never\\_met |");
	CHECK_STR_CONTAINS(md, "| failed | crashed |");
	CHECK_STR_CONTAINS(md, "server exited with status 1");
	char row7[128];
	snprintf(row7, sizeof(row7), "| done | - | 6.00 | 380.0 | %.4f |", fix_cost(2, 380));
	CHECK_STR_CONTAINS(md, row7);
	CHECK_STR_CONTAINS(md, "| 3 ★ | search |");
	CHECK_STR_CONTAINS(md, "| 8 | confirm |");
	/* SLA and the re-probe spread (250 and 240 tokens/s) */
	CHECK_STR_CONTAINS(md, "SLA: ttft\\<=2000ms tpot\\<=100ms @90%.");
	CHECK_STR_CONTAINS(md, "measured 2 times");
	CHECK_STR_CONTAINS(md, "| max goodput (tokens/s) | 245.0 | 240.0 | 250.0 | 4.1% |");
	/* the workload regenerated: uniform 512 ± 25 % */
	CHECK_STR_CONTAINS(md, "uniform 512 ± 25% tokens");
	CHECK_STR_CONTAINS(md, "| tokens | min | mean | p50 | p90 | p99 | max |");
	/* 2 of 9 infeasible, 1 failed */
	CHECK_STR_CONTAINS(md, "2 of 9 trials were infeasible and 1 failed");
	/* the sweep: a trial without a cost, and the curve with its sweet spot */
	CHECK_STR_CONTAINS(md, "| 9 | sweep |");
	CHECK_STR_CONTAINS(md, "done (a sweep: no cost)");
	CHECK_STR_CONTAINS(md, "the study swept it: 8 request rates from 0.80 to 4.40 req/s, 20 % to 110 % of its "
			       "max rate under the SLA (4.00 req/s)");
	CHECK_STR_CONTAINS(md, "Sweet spot: 250.0 tokens/s of goodput at 4.00 req/s");
	/* GPU telemetry recorded: at the max-goodput point, in the best's load
	 * points (the 4.00 req/s row ends with util mean/peak, memory mean/peak)
	 * and in the server section */
	char gpu[160];
	snprintf(gpu, sizeof(gpu), "| GPU utilisation mean / peak (%%) | %.0f / %.0f |", FIX_GPU_UTIL_MEAN,
		 FIX_GPU_UTIL_PEAK);
	CHECK_STR_CONTAINS(md, gpu);
	snprintf(gpu, sizeof(gpu), "| GPU memory used mean / peak (MiB) | %.0f / %.0f |", FIX_GPU_MEM_MEAN,
		 FIX_GPU_MEM_PEAK);
	CHECK_STR_CONTAINS(md, gpu);
	CHECK_STR_CONTAINS(md,
			   "| KV peak % | GPU util % mean | GPU util % peak | GPU mem MiB mean | GPU mem MiB peak |");
	snprintf(gpu, sizeof(gpu), "| 4.00 | search | 91.0 | yes |");
	CHECK_STR_CONTAINS(md, gpu);
	snprintf(gpu, sizeof(gpu), "| 55 | %.0f | %.0f | %.0f | %.0f |\n", FIX_GPU_UTIL_MEAN, FIX_GPU_UTIL_PEAK,
		 FIX_GPU_MEM_MEAN, FIX_GPU_MEM_PEAK);
	CHECK_STR_CONTAINS(md, gpu);
	/* the server table: trial 3's row with KV/running/waiting/preemptions then the GPU figures */
	snprintf(gpu, sizeof(gpu),
		 "| 3 | max\\_num\\_seqs=32 max\\_num\\_batched\\_tokens=1024 fp8 tp=1 | 55 | 16 | 0 | 0 | %.0f | %.0f "
		 "| %.0f | %.0f |",
		 FIX_GPU_UTIL_MEAN, FIX_GPU_UTIL_PEAK, FIX_GPU_MEM_MEAN, FIX_GPU_MEM_PEAK);
	CHECK_STR_CONTAINS(md, gpu);
	CHECK(!strstr(md, "GPU telemetry: unavailable"));
}

/* A study whose load points have no GPU figures (NVML unavailable) says so
 * in the best configuration and in the server section, and shows no GPU columns. */
static void test_gpu_unavailable(struct store *s)
{
	_cleanup_(freep) char *md = markdown(s, FIX_B);
	const char *p;
	int n = 0;

	CHECK_STR_CONTAINS(md, "GPU telemetry: unavailable (no NVML on the host)");
	for (p = md; (p = strstr(p, "GPU telemetry: unavailable (no NVML on the host)")); p++)
		n++;
	CHECK(n == 2);
	CHECK(!strstr(md, "GPU util % mean"));
	CHECK(!strstr(md, "GPU utilisation mean / peak"));
}

static void test_nothing_meets(struct store *s)
{
	_cleanup_(freep) char *md = markdown(s, FIX_C);

	CHECK_STR_CONTAINS(md, "No configuration met the SLA: of 3 trials, 0 finished without meeting it, 2 were "
			       "infeasible and 1 failed");
	CHECK_STR_CONTAINS(md, "there is no best configuration to launch");
	CHECK_STR_CONTAINS(md, "health never answered");
	CHECK(!strstr(md, "★"));
}

static void test_files_without_gnuplot(struct store *s)
{
	struct report_options o = { .gnuplot = "/nonexistent/gnuplot" };
	_cleanup_(report_freep) struct report *r = load(s, FIX_A, &o);
	struct report_files f = { 0 };
	struct error err = { 0 };
	char out[256];
	_cleanup_(fclosep) FILE *h = NULL;
	char buf[65536];
	size_t n;

	snprintf(out, sizeof(out), "%s/nognuplot", dir);
	CHECK_MSG(report_write_files(r, out, &f, &err) >= 0, "%s", err.msg);
	CHECK_INT_EQ(f.n_plots, 0);
	CHECK_STR_CONTAINS(f.plot_note, "gnuplot (/nonexistent/gnuplot) is not installed");
	h = fopen(f.html_path, "re");
	CHECK(h);
	n = fread(buf, 1, sizeof(buf) - 1, h);
	buf[n] = '\0';
	CHECK_STR_CONTAINS(buf, "this report has tables only");
	CHECK_STR_CONTAINS(buf, "<h2 id=\"trials\">All trials</h2>");
	CHECK(!strstr(buf, "<svg"));
	report_files_done(&f);
}

static void test_unknown_study(struct store *s)
{
	struct report *r = NULL;
	struct error err = { 0 };

	CHECK_INT_EQ(report_load(s, "no-such-study", NULL, &r, &err), -ENOENT);
	CHECK_STR_CONTAINS(err.msg, "no study named 'no-such-study'");
}

/* The combinations the memory pre-flight ruled out reach --json and the text
 * whole and one by one, however many there are (here far more than 512
 * bytes of names) and whatever their names hold (a comma). */
static void test_predicted_infeasible_long(void)
{
	_cleanup_(cJSON_Deletep) cJSON *pre = cJSON_CreateObject(), *o = cJSON_CreateObject();
	_cleanup_(freep) char *text = NULL;
	cJSON *list = cJSON_AddArrayToObject(pre, "combinations");
	struct store_study row = { 0 };
	struct store_study_best b = { 0 };
	struct report_findings f;
	const cJSON *a;
	char names[41][64], expect[41 * 66] = "";
	size_t len = 0, size = 0;
	FILE *m;

	CHECK(list);
	for (size_t i = 0; i < ELEMENTSOF(names) + 1; i++) {
		cJSON *c = cJSON_CreateObject(), *small;
		char name[64];

		CHECK(c && cJSON_AddItemToArray(list, c));
		if (i == 20)
			snprintf(name, sizeof(name), "fits tp=8");
		else if (i == 7)
			snprintf(name, sizeof(name), "quantization=gptq,int4 tp=1 max_num_seqs=%zu", i);
		else
			snprintf(name, sizeof(name), "quantization=awq tp=1 max_num_seqs=%zu", 1000 + i);
		CHECK(cJSON_AddStringToObject(c, "combination", name));
		small = cJSON_AddObjectToObject(c, "smallest");
		CHECK(small && cJSON_AddStringToObject(small, "fit", i == 20 ? "fits" : "does not fit"));
		if (i != 20) {
			size_t k = i < 20 ? i : i - 1;

			snprintf(names[k], sizeof(names[k]), "%s", name);
			len += (size_t)snprintf(expect + len, sizeof(expect) - len, "%s%s", k ? ", " : "", name);
		}
	}
	CHECK(len > 1024);
	CHECK(row.preflight_json = cJSON_PrintUnformatted(pre));
	CHECK(report_findings_of(&row, NULL, &b, NULL, &f) >= 0);
	CHECK_INT_EQ(f.n_predicted_infeasible, ELEMENTSOF(names));

	CHECK(report_findings_json(&f, o) >= 0);
	a = cJSON_GetObjectItemCaseSensitive(o, "predicted_infeasible");
	CHECK(cJSON_IsArray(a));
	CHECK_INT_EQ(cJSON_GetArraySize(a), ELEMENTSOF(names));
	for (size_t i = 0; i < ELEMENTSOF(names); i++)
		CHECK_STR_EQ(cJSON_GetStringValue(cJSON_GetArrayItem(a, (int)i)), names[i]);

	CHECK(m = open_memstream(&text, &size));
	report_findings_print_predicted(&f, m);
	CHECK(fclose(m) == 0);
	CHECK_STR_EQ(text, expect);
	report_findings_done(&f);
	free(row.preflight_json);
}

static void plan_case(double load, bool by_tokens, double headroom, double cap, unsigned gpr, double price,
		      unsigned per_host, double tpr, uint64_t replicas, uint64_t gpus, uint64_t hosts, double usd)
{
	struct report_plan p;
	struct error err = { 0 };

	CHECK_MSG(report_plan_compute(load, by_tokens, headroom, cap, gpr, price, per_host, tpr, &p, &err) >= 0, "%s",
		  err.msg);
	CHECK_INT_EQ(p.replicas, replicas);
	CHECK_INT_EQ(p.gpus, gpus);
	CHECK_INT_EQ(p.hosts, hosts);
	CHECK_REL(p.usd_per_hour, usd, 1e-12);
}

static void test_plan(struct store *s)
{
	struct report_plan p;
	struct error err = { 0 };

	/* 10 req/s × 1.2 / 4 req/s = 3 exactly: 3 replicas, not 4 */
	plan_case(10, false, 0.2, 4, 1, 0.99, 4, 0, 3, 3, 1, 2.97);
	/* 10.1 × 1.2 / 4 = 3.03 → 4 replicas of TP 2 = 8 GPUs = 2 hosts of 4 */
	plan_case(10.1, false, 0.2, 4, 2, 2.5, 4, 0, 4, 8, 2, 20);
	/* no headroom, tokens: 1000 / 250 = 4 */
	plan_case(1000, true, 0, 250, 1, 1, 8, 0, 4, 4, 1, 4);
	/* a tiny load still needs one replica */
	plan_case(0.01, false, 0.5, 4, 4, 3, 0, 0, 1, 4, 0, 12);
	/* 7 × 1.5 / 2 = 5.25 → 6 */
	plan_case(7, false, 0.5, 2, 1, 1, 4, 0, 6, 6, 2, 6);
	/* effective $/Mtok at the load: 1000 tok/s on 4 GPUs at $1 = 4 $/h / 3.6 Mtok/h */
	CHECK(report_plan_compute(1000, true, 0, 250, 1, 1, 0, 0, &p, &err) >= 0);
	CHECK_REL(p.usd_per_mtok, 4.0 / 3.6, 1e-12);
	CHECK_REL(p.utilisation, 1.0, 1e-12);
	CHECK_INT_EQ(report_plan_compute(0, false, 0, 1, 1, 1, 0, 0, &p, &err), -EINVAL);
	CHECK_INT_EQ(report_plan_compute(1, false, -0.1, 1, 1, 1, 0, 0, &p, &err), -EINVAL);

	/* against the study: best = 4 req/s / 250 tokens/s, TP 1, $0.99, hosts of 4 */
	_cleanup_(report_freep) struct report *r = load(s, FIX_A, NULL);
	CHECK(report_plan_study(r, 20, false, 0.2, &p, &err) >= 0);
	CHECK_INT_EQ(p.replicas, 6); /* 24 / 4 */
	CHECK_INT_EQ(p.gpus, 6);
	CHECK_INT_EQ(p.hosts, 2);
	CHECK_REL(p.usd_per_hour, 6 * 0.99, 1e-12);
	CHECK(report_plan_study(r, 1000, true, 0.25, &p, &err) >= 0);
	CHECK_INT_EQ(p.replicas, 5); /* 1250 / 250 */
	_cleanup_(report_freep) struct report *c = load(s, FIX_C, NULL);
	CHECK_INT_EQ(report_plan_study(c, 1, false, 0.2, &p, &err), -ENOENT);
	CHECK_STR_CONTAINS(err.msg, "no configuration met the SLA");
}

/* A day at 2 req/s (00–08, 18–24), 8 (08–12) and 30 (12–18), 20 % headroom:
 * the best (2 GPUs, 10 req/s) needs 2, 2 and 8 GPUs; the runner-up (1 GPU,
 * 4 req/s) 1, 3 and 9: it is cheaper in the 14 quiet hours. */
static void test_plan_day(struct store *s)
{
	_cleanup_(report_freep) struct report *r = load(s, FIX_E, NULL);
	_cleanup_(cJSON_Deletep) cJSON *j = NULL;
	_cleanup_(freep) char *text = NULL;
	struct probe_rate_profile p = {
		.n = 4, .second_of_day = { 0, 8 * 3600, 12 * 3600, 18 * 3600 }, .rate = { 2, 8, 30, 2 }, .speed = 1
	};
	struct report_plan_day d;
	struct error err = { 0 };
	size_t len = 0;
	FILE *f;

	CHECK_MSG(report_plan_day_study(r, &p, 0.2, &d, &err) >= 0, "%s", err.msg);
	CHECK(d.have_runner_up && d.capacity == 10 && d.gpus_per_replica == 2 && d.runner_up_capacity == 4);
	CHECK(d.hours[3].load == 2 && d.hours[3].best.gpus == 2 && d.hours[3].runner_up.gpus == 1);
	CHECK(d.hours[3].runner_up_cheaper && !d.hours[9].runner_up_cheaper && !d.hours[13].runner_up_cheaper);
	CHECK(d.hours[13].best.replicas == 4 && d.hours[13].runner_up.replicas == 9);
	CHECK_INT_EQ(d.runner_up_hours, 14);
	CHECK_REL(d.usd_best, 84 * FIX_PRICE, 1e-12);
	CHECK_REL(d.usd_runner_up, 80 * FIX_PRICE, 1e-12);
	CHECK_REL(d.usd_mixed, 70 * FIX_PRICE, 1e-12);
	CHECK_INT_EQ(d.peak_gpus_best, 8);
	f = open_memstream(&text, &len);
	CHECK(f);
	report_plan_day_print(r, &d, f);
	CHECK(fclose(f) == 0);
	CHECK_STR_CONTAINS(
		text, "03:00        2         1     2     1.98                     1     1     0.99  <- runner-up");
	CHECK_STR_CONTAINS(text, "$/day with the best: 83.16 (peak 8 GPUs)");
	CHECK_STR_CONTAINS(text, "in the 14 hours it is cheaper: 69.30 (16.7% less)");
	CHECK(report_plan_day_to_json(r, &d, &j) >= 0);
	CHECK(cJSON_GetArraySize(cJSON_GetObjectItem(j, "hours")) == 24);
	CHECK(cJSON_GetObjectItem(j, "usd_per_day_mixed")->valuedouble == d.usd_mixed);
	/* a study whose best is on one GPU: its runner-up on two never wins a quiet hour */
	_cleanup_(report_freep) struct report *a = load(s, FIX_A, NULL);
	CHECK(report_plan_day_study(a, &p, 0.2, &d, &err) >= 0);
	CHECK(d.have_runner_up && d.runner_up_hours == 0 && d.usd_mixed == d.usd_best);
}

/* Production traffic recorded for study A beside its workload (uniform 512
 * ± 25 % input, 64 ± 25 % output): two hours of one endpoint summed, the
 * distance at the buckets, the rate by hour, a flagged hour. */
static void test_production(struct store *s)
{
	static const char shape[] =
		"{\"input_len_dist\":\"histogram\",\"input_len\":%g,\"input_len_histogram\":{\"le\":[100,500,1000],"
		"\"count\":[%g,%g,%g]},\"output_len_dist\":\"histogram\",\"output_len\":60,\"output_len_histogram\":"
		"{\"le\":[50,100],\"count\":[%g,%g]},\"arrival\":\"poisson\",\"request_rate\":2}";
	char text[2][512];
	struct store_traffic_shape t = { .watch = "http://prod:8000/metrics",
					 .study = FIX_A,
					 .seconds = 3600,
					 .peak_rate = 5,
					 .burstiness = 1,
					 .prefix_hit_rate = NAN,
					 .drift = 0.1,
					 .rate_change = NAN };
	struct error err = { 0 };
	_cleanup_(freep) char *md = NULL;
	struct tm tm = { .tm_year = 125, .tm_mon = 2, .tm_mday = 1, .tm_hour = 9, .tm_isdst = -1 };
	time_t nine = mktime(&tm);

	snprintf(text[0], sizeof(text[0]), shape, 300.0, 10.0, 80.0, 10.0, 40.0, 60.0);
	snprintf(text[1], sizeof(text[1]), shape, 600.0, 0.0, 50.0, 50.0, 40.0, 60.0);
	for (int h = 0; h < 2; h++) {
		t.hour_usec = (uint64_t)(nine + h * 3600) * 1000000;
		t.requests = t.arrivals = h ? 7200 : 3600; /* 1 and 2 req/s */
		t.flagged = h == 1;
		t.drift = h ? 0.55 : 0.1;
		t.shape_json = text[h];
		CHECK_MSG(store_traffic_upsert(s, &t, &err) == 0, "%s", err.msg);
	}
	md = markdown(s, FIX_A);
	CHECK_STR_CONTAINS(md, "## Production traffic");
	CHECK_STR_CONTAINS(md,
			   "The traffic goodputd's watch recorded from http://prod:8000/metrics (1 endpoint) against "
			   "this study, in 2 hours");
	CHECK_STR_CONTAINS(md, "10800 requests");
	/* 10 + 0, 80 + 50, 10 + 50 requests in the buckets; the hours' means weighted by what their
	 * histograms counted (100 each); the tuned lengths, 384..640, are half below 500, production's 70 % */
	CHECK_STR_CONTAINS(md, "| input length, mean | 510.4 | 450.0 |");
	CHECK_STR_CONTAINS(md, "| input length, p50 | 505 | ≤ 500 |");
	CHECK_STR_CONTAINS(md, "| input length, p90 | 618 | ≤ 1000 |");
	CHECK_STR_CONTAINS(md, "| input length, KS distance at the buckets | - | 0.2");
	CHECK_STR_CONTAINS(md, "| output length, KS distance at the buckets | - | 0.3");
	CHECK_STR_CONTAINS(md, "| mean rate (req/s) | - | 1.500 |");
	CHECK_STR_CONTAINS(md, "| 09:00 | 1.000 | - |");
	CHECK_STR_CONTAINS(md, "| 10:00 | 2.000 | - |");
	CHECK_STR_CONTAINS(md, "Drift was flagged in 1 hour (the largest length distance 0.55)");
	/* a dry run of the study is compared with the same traffic; another study has none */
	_cleanup_(freep) char *other = markdown(s, FIX_B);
	CHECK(!strstr(other, "Production traffic"));
}

static cJSON *compare(struct store *s, const char *a, const char *b)
{
	_cleanup_(report_freep) struct report *ra = load(s, a, NULL);
	_cleanup_(report_freep) struct report *rb = load(s, b, NULL);
	cJSON *j = NULL;

	CHECK(report_compare_json(ra, rb, &j) >= 0);
	return j;
}

static const char *jstr(const cJSON *j, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, k);

	return cJSON_IsString(v) ? v->valuestring : "(missing)";
}

static void test_compare(struct store *s)
{
	_cleanup_(cJSON_Deletep) cJSON *ab = compare(s, FIX_A, FIX_B);
	_cleanup_(cJSON_Deletep) cJSON *ad = compare(s, FIX_A, FIX_D);
	_cleanup_(cJSON_Deletep) cJSON *aa = compare(s, FIX_A, FIX_A);
	_cleanup_(cJSON_Deletep) cJSON *ca = compare(s, FIX_C, FIX_A);
	_cleanup_(cJSON_Deletep) cJSON *ac = compare(s, FIX_A, FIX_C);

	/* B: the old best never met the SLA; a different, cheaper winner */
	CHECK_STR_EQ(jstr(ab, "old_best"), "misses_sla");
	CHECK(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(ab, "same_winner")));
	CHECK(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(ab, "same_workload")));
	CHECK(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(ab, "same_sla")));
	/* (each study's cost: A's the mean of its two measurements) */
	CHECK_REL(cJSON_GetObjectItemCaseSensitive(ab, "cost_change")->valuedouble,
		  fix_cost(1, FIX_B_BEST_GOODPUT) /
				  ((fix_cost(1, FIX_A_BEST_GOODPUT) + fix_cost(1, FIX_A_CONFIRM_GOODPUT)) / 2) -
			  1,
		  1e-9);
	/* D never tried A's best */
	CHECK_STR_EQ(jstr(ad, "old_best"), "not_measured");
	/* a study against itself: same winner, no change, old best meets the SLA */
	CHECK_STR_EQ(jstr(aa, "old_best"), "meets_sla");
	CHECK(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(aa, "same_winner")));
	CHECK_REL(cJSON_GetObjectItemCaseSensitive(aa, "cost_change")->valuedouble + 1, 1.0, 1e-12);
	/* A study with no best has nothing to check */
	CHECK_STR_EQ(jstr(ca, "old_best"), "none");
	CHECK(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(ca, "cost_change")));
	/* A's best in C: never measured there */
	CHECK_STR_EQ(jstr(ac, "old_best"), "not_measured");

	/* the printed text */
	_cleanup_(report_freep) struct report *ra = load(s, FIX_A, NULL);
	_cleanup_(report_freep) struct report *rb = load(s, FIX_B, NULL);
	_cleanup_(freep) char *text = NULL;
	size_t len = 0;
	enum report_old_best v;
	FILE *f = open_memstream(&text, &len);
	CHECK(f);
	CHECK(report_compare_print(ra, rb, f, &v) >= 0);
	fclose(f);
	CHECK_INT_EQ(v, REPORT_OLD_BEST_MISSES_SLA);
	CHECK_STR_CONTAINS(text, "a different configuration won in B");
	CHECK_STR_CONTAINS(text, "cost change: -51.0%"); /* A: the mean of two measurements */
	CHECK_STR_CONTAINS(text, "NO LONGER MEETS THE SLA");
}

/* One load point of a levers trial: rate, p50 TPOT, met, and the server's figures. */
static struct store_load_point lever_point(double rate, double tpot, bool met, const char *server)
{
	struct store_load_point p = {
		.request_rate = rate, .p50_tpot_ms = tpot, .sla_met = met, .attainment = met ? 0.95 : 0.6
	};

	if (server)
		CHECK(asprintf(&p.result_json, "{\"server\": %s}", server) >= 0);
	return p;
}

/* The levers of an answer (report-levers.c): speculation named with its k and
 * the acceptance the server counted, the same configuration without it side by
 * side over the load steps and the rate from which it stops paying, the prefix
 * cache's hit rate, the replicas' layout; and "none won" with what speculation
 * would have cost when the answer does not speculate. */
static void test_levers(void)
{
	const char *space_json = "{\"spec_method\": [\"none\", \"ngram\"], \"spec_tokens\": [3, 5], "
				 "\"data_parallel\": [1, 2], \"tensor_parallel\": [1, 2]}";
	_cleanup_(cJSON_Deletep) cJSON *sj = cJSON_Parse(space_json);
	_cleanup_(cJSON_Deletep) cJSON *kon =
		cJSON_Parse("{\"spec_method\": \"ngram\", \"spec_tokens\": 3, \"data_parallel\": 2, "
			    "\"tensor_parallel\": 1, \"prefix_caching\": \"on\"}");
	_cleanup_(cJSON_Deletep) cJSON *koff = cJSON_Parse("{\"spec_method\": \"none\", \"data_parallel\": 2, "
							   "\"tensor_parallel\": 1, \"prefix_caching\": \"on\"}");
	static const char *const extra[] = { OPT_KNOB_SPEC_METHOD, OPT_KNOB_SPEC_TOKENS, OPT_KNOB_DATA_PARALLEL, NULL };
	struct opt_space_options so = { .gpus = 8, .extra_knobs = extra };
	struct study st = { 0 };
	struct error err = { 0 };
	struct store_load_point on_lps[] = {
		lever_point(1, 5, true, NULL),
		lever_point(2, 6, true, NULL),
		lever_point(4, 9, true,
			    "{\"prefix_cache_hit_rate\": 0.42, \"spec_acceptance_rate\": 0.7, "
			    "\"spec_mean_acceptance_length\": 2.53}"),
		lever_point(8, 20, false, NULL),
	};
	struct store_load_point off_lps[] = {
		lever_point(1, 8, true, NULL),
		lever_point(3, 8.5, true, NULL),
		lever_point(6, 11, true, NULL),
		lever_point(9, 14, false, NULL),
	};
	struct store_trial ton = { .max_rate = 4, .cost_per_mtok = 1.0 },
			   toff = { .max_rate = 6, .cost_per_mtok = 1.1 };
	struct report_levers_trial v[2] = {
		{ .t = &ton, .knobs = kon, .lps = on_lps, .n_lps = ELEMENTSOF(on_lps) },
		{ .t = &toff, .knobs = koff, .lps = off_lps, .n_lps = ELEMENTSOF(off_lps) },
	};
	struct report_levers lv;
	_cleanup_(freep) char *text = NULL;
	size_t len = 0;
	FILE *f;

	CHECK(sj && kon && koff);
	CHECK_MSG(opt_space_from_json(sj, "search_space", NULL, NULL, &so, &st.space, &err) >= 0, "%s", err.msg);

	/* the answer speculates */
	CHECK(report_levers_of(&st, v, 2, 0, &lv) >= 0);
	CHECK(lv.spec_in_space);
	CHECK_STR_EQ(lv.method, "ngram");
	CHECK_INT_EQ(lv.k, 3);
	CHECK_REL(lv.acceptance, 0.7, 1e-9);
	CHECK(lv.counterpart_same);
	CHECK_STR_EQ(lv.counterpart, "no speculation");
	CHECK_STR_CONTAINS(lv.speculation, "ngram k=3: 70 % of drafts accepted, 2.53 tokens per step");
	CHECK_STR_CONTAINS(lv.speculation, "no speculation with the other knobs the same costs +10 %");
	/* both sides' steps in rate order, the other side interpolated; at 6
	 * req/s speculation's TPOT (14.5 ms, between 9 and 20) is above 11 ms */
	CHECK_INT_EQ(lv.n_steps, 8);
	for (size_t i = 1; i < lv.n_steps; i++)
		CHECK(lv.steps[i - 1].rate <= lv.steps[i].rate);
	CHECK(lv.have_compare);
	CHECK_REL(lv.stops_paying_rate, 6, 1e-9);
	for (size_t i = 0; i < lv.n_steps; i++)
		if (lv.steps[i].rate == 3) {
			CHECK(!lv.steps[i].from_on);
			CHECK_REL(lv.steps[i].on_tpot_ms, 7.5, 1e-9);
			CHECK_REL(lv.steps[i].off_tpot_ms, 8.5, 1e-9);
		}
	CHECK_REL(lv.prefix_hit_rate, 0.42, 1e-9);
	CHECK_INT_EQ(lv.dp, 2);
	CHECK_INT_EQ(lv.gpus, 2);
	CHECK_STR_CONTAINS(lv.layout, "2 replicas × TP 1 × PP 1 = 2 GPUs behind one endpoint");
	f = open_memstream(&text, &len);
	CHECK(f);
	report_levers_print(&lv, "  ", f);
	fclose(f);
	CHECK_STR_CONTAINS(text, "  speculation:     ngram k=3");
	CHECK_STR_CONTAINS(text, "stops paying from about 6.00 requests/s");
	CHECK_STR_CONTAINS(text, "  prefix cache:    on, 42.0 % of prompt tokens found at the max rate");
	CHECK_STR_CONTAINS(text, "  replicas:        2 replicas");
	{
		_cleanup_(cJSON_Deletep) cJSON *o = cJSON_CreateObject();
		const cJSON *l;

		CHECK(o && report_levers_json(&lv, o) >= 0);
		l = cJSON_GetObjectItemCaseSensitive(o, "levers");
		CHECK_STR_EQ(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(l, "spec_method")), "ngram");
		CHECK_INT_EQ(cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(l, "spec_tokens")), 3);
		CHECK_INT_EQ(cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(l, "data_parallel")), 2);
		CHECK_REL(cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(l, "spec_stops_paying_rate")), 6, 1e-9);
	}

	/* speculation costs more: the answer does not speculate and says what it would have cost */
	toff.cost_per_mtok = 0.9;
	CHECK(report_levers_of(&st, v, 2, 1, &lv) >= 0);
	CHECK_STR_EQ(lv.method, "none");
	CHECK_INT_EQ(lv.k, 0);
	CHECK_STR_CONTAINS(lv.speculation, "none won: the cheapest with speculation (ngram k=3, the other knobs the "
					   "same) costs +11 %");
	CHECK_STR_EQ(lv.counterpart, "ngram k=3");
	CHECK_REL(lv.stops_paying_rate, 6, 1e-9); /* the same two trials, seen from the other side */

	/* no configuration with speculation measured */
	ton.cost_per_mtok = NAN;
	CHECK(report_levers_of(&st, v, 2, 1, &lv) >= 0);
	CHECK_STR_CONTAINS(lv.speculation, "none won: no configuration with speculation met the SLA");
	CHECK(!lv.have_compare);

	for (size_t i = 0; i < ELEMENTSOF(on_lps); i++)
		free(on_lps[i].result_json);
	opt_space_free(st.space);
}

int main(void)
{
	_cleanup_(store_closep) struct store *s = NULL;
	struct error err = { 0 };
	char db[256];

	CHECK(mkdtemp(dir));
	snprintf(db, sizeof(db), "%s/t.db", dir);
	CHECK_MSG(store_open(db, NULL, &s, &err) >= 0, "%s", err.msg);
	fix_fill(s);
	test_markdown_best(s);
	test_gpu_unavailable(s);
	test_nothing_meets(s);
	test_files_without_gnuplot(s);
	test_unknown_study(s);
	test_predicted_infeasible_long();
	test_plan(s);
	fix_fill_two_sizes(s);
	test_plan_day(s);
	test_compare(s);
	test_production(s);
	test_levers();
	store_close(TAKE_PTR(s));
	CHECK(nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS) == 0);
	return 0;
}
