/* test-engine-roles.c — the commands of a disaggregated configuration's
 * roles, as an operator would type them for each shipped engine that has
 * roles: each worker is the engine's command for its side's knobs plus its
 * role's connector flags, its own side-channel port; the router names every
 * worker the way the engine's proxy takes them (vLLM's toy proxy: hosts and
 * ports lists; SGLang's router: --prefill URL BOOTSTRAP_PORT per worker).
 * Also the knobs each side gets, the shape read from a configuration, and a
 * profile without roles refusing. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cost.h"
#include "engine-profile.h"
#include "json-util.h"
#include "macro.h"
#include "tests.h"

static cJSON *J(const char *s)
{
	struct error err = { 0 };
	cJSON *j = NULL;

	CHECK_MSG(json_parse_strict("test", s, strlen(s), &j, &err) == 0, "%s", err.msg);
	return j;
}

static struct engine_profile *load(const char *name)
{
	struct engine_profile *p = NULL;
	struct error err = { 0 };

	CHECK_MSG(engine_profile_find(name, TEST_SOURCE_ROOT "/configs/engines", &p, &err) == 0, "%s", err.msg);
	return p;
}

static struct study *study(const char *engine)
{
	char spec[1024];
	_cleanup_(cJSON_Deletep) cJSON *j = NULL;
	struct study_options opts = { 0 };
	struct study *s = NULL;
	struct error err = { 0 };

	snprintf(spec, sizeof(spec),
		 "{\"name\": \"pd\", \"engine\": \"%s\", \"model\": {\"name\": \"meta-llama/Llama-3.1-8B-Instruct\"},"
		 " \"gpu\": {\"type\": \"H100\", \"count\": 4, \"price_per_gpu_hour\": 3},"
		 " \"search_space\": {\"max_num_seqs\": [64]}, \"sla\": {\"ttft_ms\": 1000, \"tpot_ms\": 50},"
		 " \"workload\": {\"input_len\": 100, \"output_len\": 10, \"num_prompts\": 10}, \"budget\": "
		 "{\"max_trials\": 4}}",
		 engine);
	j = J(spec);
	CHECK_MSG(study_from_json(j, &opts, &s, &err) == 0, "%s", err.msg);
	return s;
}

/* argv joined with spaces, env likewise. */
static void joined(char **v, char *buf, size_t size)
{
	size_t len = 0;

	buf[0] = '\0';
	for (size_t i = 0; v && v[i] && len < size; i++)
		len += (size_t)snprintf(buf + len, size - len, "%s%s", i ? " " : "", v[i]);
}

static const char *const knobs_pd =
	"{\"shape\": \"disaggregated\", \"prefill_workers\": 2, \"decode_workers\": 1, \"prefill_tensor_parallel\": 1,"
	" \"decode_tensor_parallel\": 2, \"prefill_max_num_batched_tokens\": 8192, \"decode_max_num_seqs\": 128,"
	" \"quantization\": \"fp8\"}";

static void test_shape_and_knobs(void)
{
	_cleanup_(cJSON_Deletep) cJSON *k = J(knobs_pd), *pre = NULL, *dec = NULL, *agg = NULL;
	struct opt_pd_shape s;
	char buf[512];

	CHECK(opt_knobs_pd_shape(k, &s));
	CHECK_INT_EQ(s.prefill_workers, 2);
	CHECK_INT_EQ(s.decode_workers, 1);
	CHECK_INT_EQ(s.prefill_tp, 1);
	CHECK_INT_EQ(s.decode_tp, 2);
	CHECK_INT_EQ(opt_pd_shape_gpus(&s), 4);
	CHECK(engine_role_knobs(k, ENGINE_ROLE_PREFILL, &pre) == 0);
	CHECK(engine_role_knobs(k, ENGINE_ROLE_DECODE, &dec) == 0);
	study_knobs_json_text(pre, buf, sizeof(buf));
	CHECK_STR_CONTAINS(buf, "max_num_batched_tokens=8192");
	CHECK_STR_CONTAINS(buf, "tp=1");
	CHECK_STR_CONTAINS(buf, "fp8");
	CHECK(!strstr(buf, "max_num_seqs"));
	CHECK(!strstr(buf, "workers"));
	study_knobs_json_text(dec, buf, sizeof(buf));
	CHECK_STR_CONTAINS(buf, "max_num_seqs=128");
	CHECK_STR_CONTAINS(buf, "tp=2");
	CHECK(!strstr(buf, "8192"));

	agg = J("{\"shape\": \"aggregated\", \"tensor_parallel\": 2}");
	CHECK(!opt_knobs_pd_shape(agg, &s));
}

static void test_sim(void)
{
	_cleanup_(engine_profile_freep) struct engine_profile *p = load("sim");
	_cleanup_(study_freep) struct study *s = study("sim");
	_cleanup_(cJSON_Deletep) cJSON *k = J(knobs_pd);
	_cleanup_(engine_command_done) struct engine_command w = { 0 }, r = { 0 };
	const struct engine_worker_address pre[] = { { "127.0.0.1", 8101, 5601 }, { "127.0.0.1", 8102, 5602 } },
					   dec[] = { { "127.0.0.1", 8103, 5603 } };
	const unsigned devices[] = { 2, 3 };
	struct error err = { 0 };
	char buf[2048];

	CHECK(p->roles.present);
	CHECK_MSG(engine_profile_render_worker(p, s, k, ENGINE_ROLE_DECODE, "127.0.0.1", 0, 5603, devices, 2, false, &w,
					       &err) == 0,
		  "%s", err.msg);
	joined(w.argv, buf, sizeof(buf));
	CHECK_STR_CONTAINS(buf, "--tensor-parallel-size 2");
	CHECK_STR_CONTAINS(buf, "--max-num-seqs 128");
	CHECK_STR_CONTAINS(buf, "--quantization fp8");
	CHECK_STR_CONTAINS(buf, "--kv-transfer-config {\"kv_connector\":\"NixlConnector\",\"kv_role\":\"kv_both\"}");
	joined(w.env, buf, sizeof(buf));
	CHECK_STR_CONTAINS(buf, "CUDA_VISIBLE_DEVICES=2,3");
	CHECK_STR_CONTAINS(buf, "VLLM_NIXL_SIDE_CHANNEL_PORT=5603");

	CHECK_MSG(engine_profile_render_router(p, s, "127.0.0.1", 0, false, pre, 2, dec, 1, &r, &err) == 0, "%s",
		  err.msg);
	joined(r.argv, buf, sizeof(buf));
	CHECK_STR_CONTAINS(buf, "proxy --host 127.0.0.1 --port 0 --prefiller-hosts 127.0.0.1 127.0.0.1 "
				"--prefiller-ports 8101 8102 --decoder-hosts 127.0.0.1 --decoder-ports 8103");
}

static void test_sglang(void)
{
	_cleanup_(engine_profile_freep) struct engine_profile *p = load("sglang");
	_cleanup_(study_freep) struct study *s = study("sglang");
	_cleanup_(cJSON_Deletep) cJSON *k = J(knobs_pd);
	_cleanup_(engine_command_done) struct engine_command w = { 0 }, r = { 0 };
	const struct engine_worker_address pre[] = { { "10.0.0.1", 30001, 8998 }, { "10.0.0.2", 30001, 8999 } },
					   dec[] = { { "10.0.0.3", 30002, 0 } };
	struct error err = { 0 };
	char buf[2048];

	CHECK_MSG(engine_profile_render_worker(p, s, k, ENGINE_ROLE_PREFILL, "0.0.0.0", 30001, 8998, NULL, 0, false, &w,
					       &err) == 0,
		  "%s", err.msg);
	joined(w.argv, buf, sizeof(buf));
	CHECK_STR_CONTAINS(buf, "--chunked-prefill-size 8192");
	CHECK_STR_CONTAINS(buf, "--disaggregation-mode prefill --disaggregation-transfer-backend nixl "
				"--disaggregation-bootstrap-port 8998");
	CHECK_MSG(engine_profile_render_router(p, s, "0.0.0.0", 8000, false, pre, 2, dec, 1, &r, &err) == 0, "%s",
		  err.msg);
	joined(r.argv, buf, sizeof(buf));
	CHECK_STR_EQ(buf, "python3 -m sglang_router.launch_router --pd-disaggregation --prefill http://10.0.0.1:30001 "
			  "8998 --prefill http://10.0.0.2:30001 8999 --decode http://10.0.0.3:30002 --host 0.0.0.0 "
			  "--port 8000");
}

static void test_vllm_job_and_binary(void)
{
	_cleanup_(engine_profile_freep) struct engine_profile *p = load("vllm");
	_cleanup_(study_freep) struct study *s = study("vllm");
	_cleanup_(cJSON_Deletep) cJSON *k = J(knobs_pd);
	_cleanup_(engine_command_done) struct engine_command w = { 0 }, r = { 0 };
	const struct engine_worker_address one[] = { { "node1", 40001, 40002 } };
	struct error err = { 0 };
	char buf[2048];

	/* a job: the ports are the launcher's to fill in on its node */
	CHECK_MSG(engine_profile_render_worker(p, s, k, ENGINE_ROLE_PREFILL, "0.0.0.0", 0, 0, NULL, 0, true, &w,
					       &err) == 0,
		  "%s", err.msg);
	joined(w.argv, buf, sizeof(buf));
	CHECK_STR_CONTAINS(buf, "--port " ENGINE_PORT_PLACEHOLDER);
	joined(w.env, buf, sizeof(buf));
	CHECK_STR_CONTAINS(buf, "VLLM_NIXL_SIDE_CHANNEL_PORT=" ENGINE_AUX_PORT_PLACEHOLDER);
	/* vLLM does not install its proxy: the study names it */
	CHECK(engine_profile_render_router(p, s, "0.0.0.0", 8192, false, one, 1, one, 1, &r, &err) == 0);
	CHECK_STR_EQ(r.argv[0], "toy_proxy_server.py");
	engine_command_done(&r);
	s->deploy.router_binary = "/opt/vllm/toy_proxy_server.py";
	CHECK(engine_profile_render_router(p, s, "0.0.0.0", 8192, false, one, 1, one, 1, &r, &err) == 0);
	CHECK_STR_EQ(r.argv[0], "/opt/vllm/toy_proxy_server.py");
	joined(r.argv, buf, sizeof(buf));
	CHECK_STR_CONTAINS(buf, "--prefiller-hosts node1 --prefiller-ports 40001 --decoder-hosts node1");
}

static void test_no_roles(void)
{
	_cleanup_(engine_profile_freep) struct engine_profile *p = load("tgi");
	_cleanup_(study_freep) struct study *s = study("tgi");
	_cleanup_(cJSON_Deletep) cJSON *k = J(knobs_pd);
	struct engine_command w = { 0 };
	struct error err = { 0 };

	CHECK(!p->roles.present);
	CHECK(engine_profile_render_worker(p, s, k, ENGINE_ROLE_PREFILL, NULL, 1, 2, NULL, 0, false, &w, &err) ==
	      -EOPNOTSUPP);
	CHECK_STR_CONTAINS(err.msg, "does not serve disaggregated");
}

/* A router's group must name the workers it repeats for. */
static void test_bad_profile(void)
{
	static const char *const bad =
		"{\"name\": \"x\", \"argv\": [\"x\"], \"knobs\": {}, \"health\": {\"path\": \"/h\"},"
		" \"roles\": {\"prefill\": {}, \"decode\": {}, \"router\": {\"argv\": [\"r\", [\"--w\"]],"
		" \"health\": {\"path\": \"/h\"}}}}";
	_cleanup_(cJSON_Deletep) cJSON *j = J(bad);
	struct engine_profile *p = NULL;
	struct error err = { 0 };

	CHECK(engine_profile_from_json(j, "x.json", &p, &err) == -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "roles.router.argv[1]: a group names the workers");
}

/* A study spec with deploy.shape and space (a JSON object's inside), read with profile p's knobs. */
static int shaped_study(const struct engine_profile *p, const char *shape, const char *space, struct study **ret,
			struct error *err)
{
	char spec[2048];
	_cleanup_(cJSON_Deletep) cJSON *j = NULL;
	struct study_options opts = { .extra_knobs = p->extra_knobs };

	snprintf(spec, sizeof(spec),
		 "{\"name\": \"pd\", \"engine\": \"%s\", \"model\": {\"name\": \"llama-3.1-70b\"},"
		 " \"gpu\": {\"type\": \"H100\", \"count\": 8, \"price_per_gpu_hour\": 3},"
		 " \"search_space\": {%s}, \"sla\": {\"ttft_ms\": 3000, \"tpot_ms\": 20},"
		 " \"workload\": {\"input_len\": 4000, \"output_len\": 200, \"num_prompts\": 10},"
		 " \"deploy\": {\"shape\": \"%s\"}}",
		 p->name, space, shape);
	j = J(spec);
	return study_from_json(j, &opts, ret, err);
}

static void test_study_shape(void)
{
	_cleanup_(engine_profile_freep) struct engine_profile *sim = load("sim"), *tgi = load("tgi");
	struct study *s = NULL;
	struct error err = { 0 };
	char *text;
	int k;

	/* both: the search's "shape" knob; each shape its own knobs */
	CHECK_MSG(shaped_study(sim, "both",
			       "\"tensor_parallel\": [4, 8], \"prefill_workers\": [1, 2], "
			       "\"decode_tensor_parallel\": [2, 4], \"prefill_max_num_batched_tokens\": [8192]",
			       &s, &err) == 0,
		  "%s", err.msg);
	k = opt_space_knob_index(s->space, "shape");
	CHECK(k >= 0 && s->space->knobs[k].n_values == 2);
	CHECK_MSG(engine_profile_check_study(sim, s, &err) == 0, "%s", err.msg);
	/* the stored spec (the shape knob added) reads back the same */
	text = study_to_string(s);
	study_free(s);
	s = NULL;
	{
		_cleanup_(cJSON_Deletep) cJSON *j = J(text);
		struct study_options opts = { .extra_knobs = sim->extra_knobs };

		CHECK_MSG(study_from_json(j, &opts, &s, &err) == 0, "stored spec: %s", err.msg);
		CHECK_INT_EQ(s->space->knobs[opt_space_knob_index(s->space, "shape")].n_values, 2);
	}
	free(text);
	/* an engine without roles serves aggregated only */
	CHECK(engine_profile_check_study(tgi, s, &err) == -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "deploy.shape: engine tgi has no prefill and decode roles");
	study_free(s);
	s = NULL;

	/* disaggregated alone: one shape, one server's knobs refused */
	CHECK(shaped_study(sim, "disaggregated", "\"max_num_seqs\": [64, 128], \"decode_workers\": [1, 2]", &s, &err) ==
	      -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "search_space.max_num_seqs: one server's knob");
	CHECK_STR_CONTAINS(err.msg, "decode_max_num_seqs");
	/* aggregated (the default): a side's knob asks for the shape */
	CHECK(shaped_study(sim, "aggregated", "\"decode_workers\": [1, 2]", &s, &err) == -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "search_space.decode_workers: a knob of disaggregated serving");
	/* a side's knob the engine has no flag for is not a knob */
	CHECK(shaped_study(sim, "both", "\"prefill_speculation\": [1]", &s, &err) == -EINVAL);
}

int main(void)
{
	test_study_shape();
	test_shape_and_knobs();
	test_sim();
	test_sglang();
	test_vllm_job_and_binary();
	test_no_roles();
	test_bad_profile();
	return 0;
}
