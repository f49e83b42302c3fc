/* test-perfmodel.c — the performance model of goodput-sim: presets and name
 * matching, Hugging Face configs, profile overrides, the step time against
 * emumodel.py's oracle (tests/sim/oracle-steps.txt, argv[1]), the physical
 * sanity a user would check, memory/KV capacity and vLLM's start-up errors. */

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sim-test-util.h"

static void test_presets(void)
{
	struct sim_model m;
	struct error err = { 0 };

	CHECK(sim_model_preset("meta-llama/Llama-3.1-8B-Instruct", &m, &err) == 0);
	CHECK_STR_EQ(m.name, "llama-3.1-8b");
	CHECK(sim_model_preset("LLAMA-3.1-70B", &m, &err) == 0);
	CHECK_STR_EQ(m.name, "llama-3.1-70b");
	CHECK(sim_model_preset("meta-llama/Llama-3.3-70B-Instruct-FP8", &m, &err) == 0);
	CHECK_STR_EQ(m.name, "llama-3.1-70b");
	CHECK(sim_model_preset("Qwen/Qwen2.5-7B-Instruct", &m, &err) == 0);
	CHECK_STR_EQ(m.name, "qwen2.5-7b");
	CHECK(sim_model_preset("huggyllama/llama-7b", &m, &err) == 0);
	CHECK_STR_EQ(m.name, "llama-7b");
	CHECK(sim_model_preset("meta-llama/Llama-2-70b-hf", &m, &err) == 0);
	CHECK_STR_EQ(m.name, "llama-2-70b");
	CHECK(sim_model_preset("gpt-5", &m, &err) == -ENOENT);
	CHECK_STR_CONTAINS(err.msg, "gpt-5");
	/* The architecture gives the published parameter counts. */
	CHECK(sim_model_preset("llama-3.1-8b", &m, &err) == 0);
	CHECK_REL(sim_model_params_from_arch(&m), 8.03e9, 0.01);
	CHECK(sim_model_preset("llama-3.1-70b", &m, &err) == 0);
	CHECK_REL(sim_model_params_from_arch(&m), 70.55e9, 0.01);

	CHECK(sim_gpu_find("h100"));
	CHECK_STR_EQ(sim_gpu_find("NVIDIA-H100-80GB")->name, "H100");
	CHECK_STR_EQ(sim_gpu_find("A100-SXM4-80GB")->name, "A100");
	CHECK_STR_EQ(sim_gpu_find("mi300x")->name, "MI300X");
	CHECK(!sim_gpu_find("A10"));
	CHECK(!sim_gpu_find("A100-40GB"));
	CHECK(sim_gpu_find("L40S")->fp8_flops > 0);
	CHECK(sim_gpu_find("A100")->fp8_flops == 0);

	enum sim_quant q;
	CHECK(sim_quant_from_string("AWQ", &q) == 0 && q == SIM_QUANT_AWQ);
	CHECK(sim_quant_from_string("none", &q) == 0 && q == SIM_QUANT_NONE);
	CHECK(sim_quant_from_string("q4", &q) == -EINVAL);
	CHECK_STR_EQ(sim_quant_to_string(SIM_QUANT_INT8), "int8");
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "we");

	CHECK(f);
	fputs(text, f);
	fclose(f);
}

static void test_hf_config(void)
{
	char dir[] = "/tmp/test-perfmodel-XXXXXX", path[256];
	struct sim_model m, preset;
	struct error err = { 0 };

	CHECK(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/config.json", dir);
	/* Llama-3.1-8B's config.json (the relevant keys). */
	write_file(path,
		   "{\"architectures\": [\"LlamaForCausalLM\"], \"hidden_size\": 4096, \"intermediate_size\": 14336,"
		   " \"max_position_embeddings\": 131072, \"num_attention_heads\": 32, \"num_hidden_layers\": 32,"
		   " \"num_key_value_heads\": 8, \"rope_theta\": 500000.0, \"tie_word_embeddings\": false,"
		   " \"torch_dtype\": \"bfloat16\", \"vocab_size\": 128256}");
	CHECK_MSG(sim_model_from_hf_config(path, &m, &err) == 0, "%s", err.msg);
	CHECK(sim_model_preset("llama-3.1-8b", &preset, &err) == 0);
	CHECK_INT_EQ(m.head_dim, 128);
	CHECK_INT_EQ(m.kv_heads, 8);
	CHECK_INT_EQ(m.max_position, 131072);
	CHECK_REL(m.params, preset.params, 0.01);

	/* A tied small model (Qwen2.5-0.5B-like) with an explicit head_dim. */
	write_file(path, "{\"hidden_size\": 896, \"intermediate_size\": 4864, \"num_attention_heads\": 14,"
			 " \"num_hidden_layers\": 24, \"num_key_value_heads\": 2, \"head_dim\": 64,"
			 " \"vocab_size\": 151936, \"max_position_embeddings\": 32768, \"tie_word_embeddings\": true}");
	CHECK_MSG(sim_model_from_hf_config(path, &m, &err) == 0, "%s", err.msg);
	CHECK(m.tied);
	CHECK_REL(m.params, 0.494e9, 0.03);

	/* Missing and wrong fields are named. */
	write_file(path, "{\"hidden_size\": 896, \"num_attention_heads\": 14}");
	CHECK(sim_model_from_hf_config(path, &m, &err) < 0);
	CHECK_STR_CONTAINS(err.msg, "num_hidden_layers");
	write_file(path, "{\"hidden_size\": 4096, \"intermediate_size\": 14336, \"num_attention_heads\": 32,"
			 " \"num_hidden_layers\": 32, \"vocab_size\": 32000, \"num_local_experts\": 8}");
	CHECK(sim_model_from_hf_config(path, &m, &err) == -EOPNOTSUPP);
	CHECK_STR_CONTAINS(err.msg, "num_local_experts");
	unlink(path);
	rmdir(dir);
}

static void test_profile_json(void)
{
	struct sim_profile p, t;
	struct error err = { 0 };
	cJSON *j;

	CHECK(sim_profile_preset("vllm", &p, &err) == 0);
	CHECK(sim_profile_preset("trtllm", &t, &err) == 0);
	CHECK(p.mfu_bf16 == 0.50 && t.mfu_bf16 == 0.60 && p.mfu_bf16_a100 == 0.65 && p.t_fixed_ms == 1.0);

	j = cJSON_Parse("{\"mfu_bf16\": 0.55, \"t_fixed_ms\": 0.7}");
	CHECK(sim_profile_apply_json(&p, j, "f.json", &err) == 0);
	cJSON_Delete(j);
	CHECK(p.mfu_bf16 == 0.55 && p.t_fixed_ms == 0.7 && p.mbu_w == 0.75);

	j = cJSON_Parse("{\"base\": \"trtllm\", \"mbu_w\": 0.9}");
	CHECK(sim_profile_apply_json(&p, j, "f.json", &err) == 0);
	cJSON_Delete(j);
	CHECK(p.mfu_bf16 == 0.60 && p.mbu_w == 0.9);

	j = cJSON_Parse("{\"mfu_bf61\": 0.5}");
	CHECK(sim_profile_apply_json(&p, j, "f.json", &err) == -EINVAL);
	cJSON_Delete(j);
	CHECK_STR_CONTAINS(err.msg, "mfu_bf61");
	CHECK_STR_CONTAINS(err.msg, "unknown key");

	j = cJSON_Parse("{\"mbu_kv\": 0}");
	CHECK(sim_profile_apply_json(&p, j, "f.json", &err) == -EINVAL);
	cJSON_Delete(j);
	CHECK_STR_CONTAINS(err.msg, "mbu_kv");

	/* Round trip: every field by name. */
	CHECK(sim_profile_to_json(&t, &j) == 0);
	CHECK(sim_profile_preset("vllm", &p, &err) == 0);
	CHECK(sim_profile_apply_json(&p, j, "round-trip", &err) == 0);
	cJSON_Delete(j);
	CHECK(memcmp(&p, &t, sizeof(p)) == 0);
}

/* (b) the step time against emumodel.py's step_time. */
static void test_oracle(const char *path)
{
	FILE *f = fopen(path, "re");
	char line[512];
	size_t n = 0;
	double worst = 0;

	CHECK_MSG(f, "cannot open %s", path);
	while (fgets(line, sizeof(line), f)) {
		char model[32], gpu[16], quant[16], prof[16];
		unsigned tp, kvb, nd, ctx, nc, cl, co;
		double ms, got;

		if (line[0] == '#' || line[0] == '\n')
			continue;
		CHECK_MSG(sscanf(line, "%31s %15s %15s %u %u %15s %u %u %u %u %u %lf", model, gpu, quant, &tp, &kvb,
				 prof, &nd, &ctx, &nc, &cl, &co, &ms) == 12,
			  "bad fixture line: %s", line);
		struct sim_perf p = perf_of(model, gpu, quant, tp, (int)kvb, prof);
		got = step_of(&p, nd, ctx, nc, cl, co, NULL) * 1e3;
		CHECK_MSG(fabs(got - ms) <= 0.05 * ms, "%s: C %.4f ms vs oracle %.4f ms", line, got, ms);
		worst = fmax(worst, fabs(got - ms) / ms);
		n++;
	}
	fclose(f);
	CHECK(n > 100);
	printf("oracle: %zu batch shapes, worst deviation %.2g%%\n", n, worst * 100);
}

/* (c) physical sanity. */
static void test_sanity(void)
{
	struct sim_step_parts a, b;
	struct sim_perf p = perf_of("llama-3.1-8b", "H100", "none", 1, 2, "vllm");

	/* Short context: 64× the batch costs far less than 64× the time (weights read once). */
	double t1 = step_of(&p, 1, 256, 0, 0, 0, &a), t64 = step_of(&p, 64, 256, 0, 0, 0, &b);
	CHECK(t64 < 2.0 * t1);
	CHECK(!a.gemm_compute_bound && !b.gemm_compute_bound);
	/* Long contexts: KV reads dominate the step. */
	step_of(&p, 64, 32768, 0, 0, 0, &a);
	CHECK(a.attn > a.gemm && !a.attn_compute_bound);
	CHECK(a.attn > 0.5 * a.total);
	/* Prefill is compute-bound. */
	step_of(&p, 0, 0, 1, 4096, 0, &a);
	CHECK(a.gemm_compute_bound);
	CHECK(a.gemm > 5 * (p.w_stream / p.bw_w));

	/* fp8 beats bf16 at large batch on H100 and H200, not on A100 (no FP8 compute). */
	const char *const hopper[] = { "H100", "H200" };
	for (size_t i = 0; i < 2; i++) {
		struct sim_perf bf = perf_of("llama-3.1-8b", hopper[i], "none", 1, 2, "vllm");
		struct sim_perf f8 = perf_of("llama-3.1-8b", hopper[i], "fp8", 1, 2, "vllm");
		CHECK(step_of(&f8, 512, 256, 1, 1024, 0, NULL) < 0.9 * step_of(&bf, 512, 256, 1, 1024, 0, NULL));
		CHECK(step_of(&f8, 0, 0, 1, 4096, 0, NULL) < step_of(&bf, 0, 0, 1, 4096, 0, NULL));
	}
	struct sim_perf abf = perf_of("llama-3.1-8b", "A100", "none", 1, 2, "vllm");
	struct sim_perf af8 = perf_of("llama-3.1-8b", "A100", "fp8", 1, 2, "vllm");
	CHECK(step_of(&af8, 0, 0, 1, 4096, 0, NULL) >= 0.97 * step_of(&abf, 0, 0, 1, 4096, 0, NULL));
	CHECK(step_of(&af8, 512, 256, 1, 1024, 0, NULL) >= 0.99 * step_of(&abf, 512, 256, 1, 1024, 0, NULL));
	/* (its smaller weights still help a memory-bound decode) */
	CHECK(step_of(&af8, 1, 256, 0, 0, 0, NULL) < 0.8 * step_of(&abf, 1, 256, 0, 0, 0, NULL));

	/* awq (W4A16): faster at small batch, slower at large batch. */
	struct sim_perf bf = perf_of("llama-3.1-70b", "H100", "none", 4, 2, "vllm");
	struct sim_perf aw = perf_of("llama-3.1-70b", "H100", "awq", 4, 2, "vllm");
	CHECK(step_of(&aw, 1, 1024, 0, 0, 0, NULL) < step_of(&bf, 1, 1024, 0, 0, 0, NULL));
	CHECK(step_of(&aw, 8, 1024, 0, 0, 0, NULL) < step_of(&bf, 8, 1024, 0, 0, 0, NULL));
	CHECK(step_of(&aw, 512, 1024, 1, 2048, 0, NULL) > step_of(&bf, 512, 1024, 1, 2048, 0, NULL));

	/* TP=2 lowers the decode step (TPOT) of a 70B model. */
	struct sim_perf t2 = perf_of("llama-3.1-70b", "H100", "fp8", 2, 2, "vllm");
	struct sim_perf t4 = perf_of("llama-3.1-70b", "H100", "fp8", 4, 2, "vllm");
	CHECK(step_of(&t4, 32, 1024, 0, 0, 0, NULL) < 0.85 * step_of(&t2, 32, 1024, 0, 0, 0, NULL));
	/* ... but sub-linearly: more GPUs, less throughput per GPU. */
	CHECK(step_of(&t4, 32, 1024, 0, 0, 0, NULL) > 0.5 * step_of(&t2, 32, 1024, 0, 0, 0, NULL));

	/* PERFMODEL's reference tables (§6) reproduce. */
	struct sim_perf bf4 = perf_of("llama-3.1-70b", "H100", "none", 4, 2, "vllm");
	CHECK_REL(step_of(&bf4, 1, 1024, 0, 0, 0, NULL) * 1e3, 19.8, 0.03);
	CHECK_REL(step_of(&bf4, 256, 1024, 0, 0, 0, NULL) * 1e3, 48.1, 0.03);
	struct sim_perf aw1 = perf_of("llama-3.1-70b", "H100", "awq", 1, 2, "vllm");
	CHECK_REL(step_of(&aw1, 256, 1024, 0, 0, 0, NULL) * 1e3, 139, 0.03);
	CHECK_REL(step_of(&p, 1, 1024, 0, 0, 0, NULL) * 1e3, 7.1, 0.03);
	/* MI300X carries the software derate: slower than its raw roofline (4.9 ms). */
	struct sim_perf mi = perf_of("llama-3.1-8b", "MI300X", "none", 1, 2, "vllm");
	CHECK(step_of(&mi, 1, 1024, 0, 0, 0, NULL) * 1e3 > 5.0);
}

/* vLLM's rule (§4.3): the KV cache gets memory × fraction − weights − activations. */
static const struct sim_memory_policy *vllm(double gmu)
{
	static struct sim_memory_policy p;

	p = (struct sim_memory_policy){ .rules = SIM_MEMORY_VLLM, .fraction = gmu };
	return &p;
}

static int check(const struct sim_perf *p, const struct sim_memory_policy *pol, uint32_t gpus, uint32_t len,
		 uint32_t seqs, uint32_t mbt, struct sim_startup_check *c, struct error *err)
{
	return sim_perf_check_startup(p, pol, gpus, len, seqs, mbt, c, err);
}

static void test_memory_and_startup(void)
{
	struct sim_memory mem;
	struct sim_startup_check c;
	struct error err = { 0 };
	struct sim_perf p = perf_of("llama-3.1-8b", "H100", "none", 1, 2, "vllm");

	/* KV capacity (§4.3): ≈414k tokens at gmu 0.9 for 8B on H100 (emumodel's reserve). */
	sim_perf_memory(&p, vllm(0.9), 8192, 1024, 16, &mem);
	CHECK(mem.act_peak > 1.5 * SIM_GIB && mem.act_peak < 2.5 * SIM_GIB);
	CHECK_REL((double)mem.kv_tokens, 414500, 0.05);
	CHECK(mem.kv_tokens % 16 == 0 && mem.num_blocks * 16 == mem.kv_tokens);
	CHECK(check(&p, vllm(0.9), 1, 131072, 1024, 8192, &c, &err) == 0);
	CHECK_INT_EQ(c.cause, SIM_STARTUP_OK);
	CHECK_INT_EQ(c.max_model_len_used, 131072);

	/* FP8 KV doubles the capacity per byte. */
	struct sim_perf pf = perf_of("llama-3.1-8b", "H100", "none", 1, 1, "vllm");
	struct sim_memory memf;
	sim_perf_memory(&pf, vllm(0.9), 8192, 1024, 16, &memf);
	CHECK_REL((double)memf.kv_tokens, 2.0 * mem.kv_tokens, 0.01);

	/* 70B BF16 on one H100: the weights (131 GiB) do not fit the GPU at all. */
	struct sim_perf big = perf_of("llama-3.1-70b", "H100", "none", 1, 2, "vllm");
	CHECK(check(&big, vllm(0.9), 1, 4096, 1024, 8192, &c, &err) == -EFBIG);
	CHECK_INT_EQ(c.cause, SIM_STARTUP_WEIGHTS);
	CHECK_STR_CONTAINS(err.msg, "CUDA out of memory");

	/* 70B FP8 on one H100 (80 GB) at gmu 0.95: fits, but not a 131072 context (Lambda: ≈4k
	 * served); at gmu 0.9 the weights (65.7 GiB) fit the GPU but leave the budget nothing. */
	struct sim_perf f8 = perf_of("llama-3.1-70b", "H100", "fp8", 1, 2, "vllm");
	CHECK(check(&f8, vllm(0.9), 1, 4096, 256, 2048, &c, &err) == -ENOMEM);
	CHECK_INT_EQ(c.cause, SIM_STARTUP_CACHE_BLOCKS);
	CHECK_STR_CONTAINS(err.msg,
			   "No available memory for the cache blocks. Try increasing `gpu_memory_utilization`");
	sim_perf_memory(&f8, vllm(0.95), 2048, 256, 16, &mem);
	CHECK(mem.kv_tokens > 2048 && mem.kv_tokens < 32768);
	CHECK(check(&f8, vllm(0.95), 1, 131072, 256, 2048, &c, &err) == -ENOSPC);
	CHECK_INT_EQ(c.cause, SIM_STARTUP_KV_CACHE);
	CHECK_INT_EQ(c.est_max_model_len, mem.kv_tokens);
	CHECK_STR_CONTAINS(err.msg, "To serve at least one request with the models's max seq len (131072), (");
	CHECK_STR_CONTAINS(err.msg, " GiB KV cache is needed, which is larger than the available KV cache memory (");
	CHECK_STR_CONTAINS(err.msg, "estimated maximum model length is");
	CHECK_STR_CONTAINS(err.msg, "decreasing `max_model_len`");
	CHECK(check(&f8, vllm(0.95), 1, 2048, 256, 2048, &c, &err) == 0);
	/* vLLM refuses a fraction above 1. */
	CHECK(check(&f8, vllm(1.5), 1, 2048, 256, 2048, &c, &err) == -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "GPU memory utilization must be less than 1.0. Got 1.5.");

	/* SGLang and TensorRT-LLM serve what fits; TensorRT-LLM refuses it when told to fail fast. */
	struct sim_memory_policy sg = { .rules = SIM_MEMORY_SGLANG, .fraction = 0.95 };
	CHECK(check(&f8, &sg, 1, 131072, 256, 2048, &c, &err) == 0);
	CHECK(c.max_model_len_used < 131072 && c.max_model_len_used == c.mem.kv_tokens);
	struct sim_memory_policy trt = { .rules = SIM_MEMORY_TRTLLM, .fraction = 0.9 };
	CHECK(check(&f8, &trt, 1, 131072, 256, 2048, &c, &err) == 0);
	CHECK(c.max_model_len_used < 131072);
	trt.fail_fast = true;
	CHECK(check(&f8, &trt, 1, 131072, 256, 2048, &c, &err) == -ENOSPC);
	CHECK_INT_EQ(c.cause, SIM_STARTUP_KV_CACHE);
	/* SGLang's static fraction holds the weights too: too small a fraction leaves no KV pool. */
	sg.fraction = 0.8;
	CHECK(check(&f8, &sg, 1, 4096, 256, 2048, &c, &err) == -ENOMEM);
	CHECK_INT_EQ(c.cause, SIM_STARTUP_CACHE_BLOCKS);
	/* TGI refuses the length, with no suggestion of its own. */
	struct sim_memory_policy tgi = { .rules = SIM_MEMORY_TGI, .fraction = 0.95 };
	CHECK(check(&f8, &tgi, 1, 131072, 256, 2048, &c, &err) == -ENOSPC);
	/* llama.cpp allocates its whole context: 8B F16 with a 131072-token context
	 * is 16 GiB of KV; 1M tokens do not fit an 80 GB GPU. */
	struct sim_memory_policy lc = { .rules = SIM_MEMORY_LLAMACPP, .kv_tokens = 131072 };
	CHECK(check(&p, &lc, 1, 16384, 8, 512, &c, &err) == 0);
	CHECK_INT_EQ(c.mem.kv_tokens, 131072);
	lc.kv_tokens = 1048576;
	CHECK(check(&p, &lc, 1, 131072, 8, 512, &c, &err) == -ENOSPC);
	CHECK_INT_EQ(c.cause, SIM_STARTUP_KV_CACHE);
	CHECK_INT_EQ(c.est_max_model_len, 1048576); /* llama.cpp suggests nothing: a fact, not advice */

	/* TP checks. */
	struct sim_perf t2 = perf_of("llama-3.1-70b", "H100", "none", 4, 2, "vllm");
	CHECK(check(&t2, vllm(0.9), 2, 4096, 256, 2048, &c, &err) == -EINVAL);
	CHECK_INT_EQ(c.cause, SIM_STARTUP_CONFIG);
	CHECK_STR_CONTAINS(err.msg, "tensor_parallel_size");
	struct sim_perf q3 = perf_of("qwen2.5-7b", "H100", "none", 8, 2, "vllm");
	CHECK(check(&q3, vllm(0.9), 8, 4096, 256, 2048, NULL, &err) == -EINVAL);
	CHECK_STR_CONTAINS(err.msg,
			   "Total number of attention heads (28) must be divisible by tensor parallel size (8)");
	CHECK(check(&p, vllm(0.9), 1, 200000, 256, 2048, NULL, &err) == -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "max_model_len (200000)");
	CHECK(check(&p, vllm(0.9), 1, 4096, 512, 256, NULL, &err) == -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "max_num_batched_tokens (256) must be greater than or equal to max_num_seqs (512)");

	/* Start-up (§4.5): 8B TP1 ≈ 40–70 s warm; 70B TP4 longer. */
	double s8 = sim_perf_startup_sec(&p), s70 = sim_perf_startup_sec(&t2);
	CHECK(s8 >= 35 && s8 <= 70);
	CHECK(s70 > s8 && s70 <= 180);

	/* The start-up model: 16.06 GB of 8B weights at 2 GB/s, 20 s init, 15 s graphs;
	 * 70B TP4: 141.1 GB, 20 + 3 × 5 s init. */
	struct sim_startup_model sm;
	struct sim_startup_phases ph;
	sim_startup_model_init(&sm);
	CHECK(!sm.enabled && sm.weights_read_gbps == 2 && sm.init_seconds == 20 && sm.graph_capture_seconds == 15);
	sim_startup_model_phases(&p, &sm, &ph);
	CHECK_REL(ph.weights_gb, 16.06, 0.01);
	CHECK_REL(ph.weights_s, ph.weights_gb / 2, 1e-12);
	CHECK(ph.init_s == 20 && ph.graphs_s == 15);
	CHECK_REL(ph.total_s, ph.weights_gb / 2 + 35, 1e-12);
	sim_startup_model_phases(&t2, &sm, &ph);
	CHECK(ph.init_s == 35);
	CHECK_REL(ph.weights_gb, 141.1, 0.01);
}

int main(int argc, char **argv)
{
	test_presets();
	test_hf_config();
	test_profile_json();
	test_sanity();
	test_memory_and_startup();
	if (argc > 1)
		test_oracle(argv[1]);
	else
		fprintf(stderr, "no oracle fixture given: skipping the oracle comparison\n");
	return 0;
}
