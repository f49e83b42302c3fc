/* perfmodel.c — the roofline step-time model of goodput-sim (PERFMODEL.md
 * §3, §6); the memory budget, start-up checks and start-up time are in
 * perf-memory.c.
 *
 * A step's time is the SUM of per-operator rooflines, because GEMMs and
 * attention run as separate kernels: max(compute, bytes) for the GEMMs (all
 * linear weights and the lm_head streamed once per step whatever the batch),
 * max(compute, KV bytes) for attention, the TP all-reduces (two per layer,
 * latency-bound at decode sizes), and the engine's fixed, per-sequence and
 * per-token CPU overheads. sim_perf_init resolves everything that does not
 * depend on the batch, so a step costs a few multiplications; the engine calls
 * it once per step.
 *
 * Refinements beyond emumodel.py's step_time (documented, off the ±5 % grid):
 * the MI300X software derate (§6) multiplies the efficiencies; with TP larger
 * than the KV heads the KV is replicated, so the KV bytes per GPU are divided
 * by the KV heads instead of by TP (§2); tied embeddings count the shared
 * matrix once. */

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "json-util.h"
#include "macro.h"
#include "perfmodel.h"

/* ---- quantization and KV dtype names ---- */

static const char *const quant_names[_SIM_QUANT_MAX] = {
	[SIM_QUANT_NONE] = "none",
	[SIM_QUANT_FP8] = "fp8",
	[SIM_QUANT_INT8] = "int8",
	[SIM_QUANT_AWQ] = "awq",
};

const char *sim_quant_to_string(enum sim_quant q)
{
	return q < _SIM_QUANT_MAX ? quant_names[q] : NULL;
}

int sim_quant_from_string(const char *s, enum sim_quant *ret)
{
	static const struct {
		const char *name;
		enum sim_quant q;
	} table[] = {
		{ "none", SIM_QUANT_NONE },  { "bf16", SIM_QUANT_NONE },      { "fp16", SIM_QUANT_NONE },
		{ "auto", SIM_QUANT_NONE },  { "fp8", SIM_QUANT_FP8 },        { "int8", SIM_QUANT_INT8 },
		{ "w8a8", SIM_QUANT_INT8 },  { "awq", SIM_QUANT_AWQ },        { "w4a16", SIM_QUANT_AWQ },
		{ "gptq", SIM_QUANT_AWQ },   { "awq_marlin", SIM_QUANT_AWQ }, { "gptq_marlin", SIM_QUANT_AWQ },
		{ "marlin", SIM_QUANT_AWQ }, { "w8a8_int8", SIM_QUANT_INT8 }, { "w8a8_fp8", SIM_QUANT_FP8 },
		{ "eetq", SIM_QUANT_INT8 },
	};

	if (!s)
		return -EINVAL;
	for (size_t i = 0; i < ELEMENTSOF(table); i++)
		if (strcasecmp(s, table[i].name) == 0) {
			*ret = table[i].q;
			return 0;
		}
	return -EINVAL;
}

const char *sim_kv_dtype_to_string(enum sim_kv_dtype k)
{
	return k == SIM_KV_AUTO ? "auto" : k == SIM_KV_FP8 ? "fp8" : NULL;
}

int sim_kv_dtype_from_string(const char *s, enum sim_kv_dtype *ret)
{
	if (!s)
		return -EINVAL;
	if (strcasecmp(s, "auto") == 0 || strcasecmp(s, "bf16") == 0 || strcasecmp(s, "fp16") == 0 ||
	    strcasecmp(s, "f16") == 0)
		*ret = SIM_KV_AUTO;
	else if (strcasecmp(s, "fp8") == 0 || strcasecmp(s, "fp8_e4m3") == 0 || strcasecmp(s, "fp8_e5m2") == 0 ||
		 strcasecmp(s, "fp8_e4m3fn") == 0 || strcasecmp(s, "q8_0") == 0)
		*ret = SIM_KV_FP8; /* one byte per value (llama.cpp's q8_0 cache too) */
	else
		return -EINVAL;
	return 0;
}

/* ---- models from config.json ---- */

double sim_model_params_from_arch(const struct sim_model *m)
{
	double d = m->hidden, q = (double)m->heads * m->head_dim, kv = (double)m->kv_heads * m->head_dim;
	double per_layer = d * q + 2.0 * d * kv + q * d + 3.0 * d * m->ffn + 2.0 * d;
	double emb = (double)m->vocab * d;

	return emb * (m->tied ? 1.0 : 2.0) + m->layers * per_layer + d;
}

int sim_model_from_hf_json(const cJSON *j, const char *what, struct sim_model *ret, struct error *err)
{
	struct sim_model m = { 0 };
	uint32_t experts = 0;
	const char *name = NULL;
	int r;

	if (!cJSON_IsObject(j))
		return error_set(err, -EINVAL, "%s: expected a JSON object (a Hugging Face config.json)", what);

	const struct {
		const char *key;
		uint32_t *slot;
		uint32_t max;
	} req[] = {
		{ "hidden_size", &m.hidden, 1u << 18 },    { "num_hidden_layers", &m.layers, 4096 },
		{ "num_attention_heads", &m.heads, 4096 }, { "intermediate_size", &m.ffn, 1u << 22 },
		{ "vocab_size", &m.vocab, 1u << 24 },
	};
	for (size_t i = 0; i < ELEMENTSOF(req); i++) {
		uint64_t v;

		r = json_require_u64(j, what, req[i].key, 1, req[i].max, &v, err);
		if (r < 0)
			return r;
		*req[i].slot = (uint32_t)v;
	}
	m.kv_heads = m.heads;
	r = json_get_u32(j, what, "num_key_value_heads", 1, m.heads, &m.kv_heads, err);
	if (r < 0)
		return r;
	if (m.heads % m.kv_heads != 0)
		return error_set(err, -EINVAL, "%s.num_key_value_heads: %u does not divide num_attention_heads %u",
				 what, m.kv_heads, m.heads);
	m.head_dim = 0;
	r = json_get_u32(j, what, "head_dim", 1, 4096, &m.head_dim, err);
	if (r < 0)
		return r;
	if (m.head_dim == 0) {
		if (m.hidden % m.heads != 0)
			return error_set(err, -EINVAL,
					 "%s: hidden_size %u is not a multiple of num_attention_heads %u and head_dim "
					 "is missing",
					 what, m.hidden, m.heads);
		m.head_dim = m.hidden / m.heads;
	}
	m.max_position = 2048;
	r = json_get_u32(j, what, "max_position_embeddings", 1, 1u << 24, &m.max_position, err);
	if (r < 0)
		return r;
	r = json_get_bool(j, what, "tie_word_embeddings", &m.tied, err);
	if (r < 0)
		return r;
	/* A mixture of experts streams all experts but computes with the active ones;
	 * this model is for dense ones only. */
	for (const char *const *k =
		     (const char *const[]){ "num_local_experts", "num_experts", "n_routed_experts", NULL };
	     *k; k++) {
		r = json_get_u32(j, what, *k, 0, UINT32_MAX, &experts, err);
		if (r < 0)
			return r;
		if (experts > 1)
			return error_set(err, -EOPNOTSUPP,
					 "%s.%s: %u experts: mixture-of-experts models are not supported (dense only)",
					 what, *k, experts);
	}
	if (json_get_string(j, what, "_name_or_path", SIM_NAME_MAX - 1, &name, NULL) <= 0)
		name = what;
	snprintf(m.name, sizeof(m.name), "%s", name);
	m.params = sim_model_params_from_arch(&m);
	*ret = m;
	return 0;
}

int sim_model_from_hf_config(const char *path, struct sim_model *ret, struct error *err)
{
	_cleanup_(cJSON_Deletep) cJSON *j = NULL;
	int r;

	r = json_parse_file(path, 1u << 20, &j, err);
	if (r < 0)
		return r;
	return sim_model_from_hf_json(j, path, ret, err);
}

/* ---- profiles ---- */

static const struct {
	const char *name;
	size_t offset;
	bool positive; /* must be > 0, else >= 0 */
} profile_fields[] = {
#define F(n, pos)                                                                                                      \
	{                                                                                                              \
#n, offsetof(struct sim_profile, n), pos                                                               \
	}
	F(mfu_bf16, true),
	F(mfu_bf16_a100, true),
	F(mfu_fp8, true),
	F(mfu_int8, true),
	F(mbu_w, true),
	F(mbu_kv, true),
	F(f_attn, true),
	F(awq_q_eff, true),
	F(awq_q_eff_tokens, false),
	F(busbw_frac, true),
	F(t_fixed_ms, false),
	F(c_seq_us, false),
	F(c_tok_us, false),
	F(t_tp_ms, false),
	F(engine_efficiency, true),
	F(ngram_seq_us, false),
	F(act_graphs_gib, false),
	F(act_base_gib, false),
	F(act_nccl_gib, false),
	F(start_proc_s, false),
	F(start_tp_s, false),
	F(load_gbps, true),
	F(start_compile_s, false),
	F(start_profile_s, false),
	F(start_graphs_s, false),
#undef F
};

const char *sim_profile_field_name(size_t i)
{
	return i < ELEMENTSOF(profile_fields) ? profile_fields[i].name : NULL;
}

double *sim_profile_field(struct sim_profile *p, size_t i)
{
	return i < ELEMENTSOF(profile_fields) ? (double *)((char *)p + profile_fields[i].offset) : NULL;
}

int sim_profile_apply_json(struct sim_profile *p, const cJSON *j, const char *what, struct error *err)
{
	struct sim_profile n = *p;
	const cJSON *c;
	int r;

	if (!cJSON_IsObject(j))
		return error_set(err, -EINVAL, "%s: expected a JSON object of profile constants", what);
	/* "base" first, whatever its position, so the other keys override it. */
	c = cJSON_GetObjectItemCaseSensitive(j, "base");
	if (c) {
		if (!cJSON_IsString(c))
			return error_set(err, -EINVAL, "%s.base: expected \"vllm\" or \"trtllm\"", what);
		r = sim_profile_preset(c->valuestring, &n, err);
		if (r < 0)
			return error_prefix(err, r, "%s.base", what);
	}
	cJSON_ArrayForEach(c, j)
	{
		size_t i;

		if (!c->string)
			continue;
		for (const cJSON *d = j->child; d && d != c; d = d->next)
			if (d->string && strcmp(d->string, c->string) == 0)
				return error_set(err, -EINVAL, "%s.%s: duplicate key", what, c->string);
		if (strcmp(c->string, "base") == 0)
			continue;
		for (i = 0; i < ELEMENTSOF(profile_fields); i++)
			if (strcmp(c->string, profile_fields[i].name) == 0)
				break;
		if (i == ELEMENTSOF(profile_fields))
			return error_set(err, -EINVAL,
					 "%s.%s: unknown key (a profile constant is one of mfu_bf16, "
					 "mbu_w, t_fixed_ms, ...; see `goodput-sim --help`)",
					 what, c->string);
		if (!cJSON_IsNumber(c) || !isfinite(c->valuedouble) || c->valuedouble < 0 ||
		    (profile_fields[i].positive && c->valuedouble <= 0))
			return error_set(err, -EINVAL, "%s.%s: expected a finite number %s 0", what, c->string,
					 profile_fields[i].positive ? ">" : ">=");
		*sim_profile_field(&n, i) = c->valuedouble;
	}
	*p = n;
	return 0;
}

int sim_profile_load_file(struct sim_profile *p, const char *path, struct error *err)
{
	_cleanup_(cJSON_Deletep) cJSON *j = NULL;
	int r;

	r = json_parse_file(path, 1u << 20, &j, err);
	if (r < 0)
		return r;
	return sim_profile_apply_json(p, j, path, err);
}

int sim_profile_to_json(const struct sim_profile *p, cJSON **ret)
{
	_cleanup_(cJSON_Deletep) cJSON *j = cJSON_CreateObject();
	struct sim_profile copy = *p;

	if (!j)
		return -ENOMEM;
	for (size_t i = 0; i < ELEMENTSOF(profile_fields); i++)
		if (json_add_number(j, profile_fields[i].name, *sim_profile_field(&copy, i)) < 0)
			return -ENOMEM;
	*ret = TAKE_PTR(j);
	return 0;
}

/* ---- the deployment ---- */

static double weight_bytes_per_param(enum sim_quant q)
{
	switch (q) {
	case SIM_QUANT_FP8:
	case SIM_QUANT_INT8:
		return 1.0;
	case SIM_QUANT_AWQ:
		return 0.53; /* 4 bit + group-128 scales */
	default:
		return 2.0;
	}
}

int sim_perf_init(struct sim_perf *p, const struct sim_model *m, const struct sim_gpu *g, enum sim_quant q,
		  enum sim_kv_dtype kv, uint32_t tp, const struct sim_profile *prof, struct error *err)
{
	struct sim_perf n = { .model = *m, .gpu = *g, .profile = *prof, .quant = q, .kv_dtype = kv, .tp = tp, .pp = 1 };
	double emb = (double)m->vocab * m->hidden, derate = g->sw_derate > 0 ? g->sw_derate : 1.0;
	double mfu_bf16 = g->a100_mfu ? prof->mfu_bf16_a100 : prof->mfu_bf16, peak;

	if (tp == 0)
		return error_set(err, -EINVAL, "--tensor-parallel-size: must be at least 1");
	if (q >= _SIM_QUANT_MAX || kv >= _SIM_KV_MAX)
		return error_set(err, -EINVAL, "quantization or KV dtype out of range");
	if (m->layers == 0 || m->hidden == 0 || m->heads == 0 || m->kv_heads == 0 || m->head_dim == 0 || m->vocab == 0)
		return error_set(err, -EINVAL, "model %s: incomplete architecture", m->name);

	n.p_lin = m->params - emb * (m->tied ? 1.0 : 2.0);
	if (n.p_lin <= 0)
		return error_set(err, -EINVAL, "model %s: %.3g parameters leave none outside the embeddings", m->name,
				 m->params);
	/* The lm_head stays bf16 in every quantized checkpoint; the embedding is a
	 * gather (resident, not streamed). */
	n.w_stream = n.p_lin * weight_bytes_per_param(q) + emb * 2.0;
	n.w_resident = n.w_stream + (m->tied ? 0.0 : emb * 2.0);
	n.kv_bytes_token = 2.0 * m->layers * m->kv_heads * m->head_dim * (kv == SIM_KV_FP8 ? 1.0 : 2.0);
	n.kv_bytes_token_gpu = n.kv_bytes_token / (tp <= m->kv_heads ? tp : m->kv_heads);

	switch (q) {
	case SIM_QUANT_FP8:
		/* Without FP8 tensor cores (A100) FP8 is weight-only (Marlin W8A16): bf16 math. */
		peak = g->fp8_flops > 0 ? g->fp8_flops * prof->mfu_fp8 : g->bf16_flops * mfu_bf16;
		break;
	case SIM_QUANT_INT8:
		peak = g->int8_flops * prof->mfu_int8;
		break;
	default:
		peak = g->bf16_flops * mfu_bf16;
		break;
	}
	peak *= derate;
	n.gemm_peak_small = peak;
	n.gemm_peak_large = q == SIM_QUANT_AWQ ? peak * prof->awq_q_eff : peak;
	n.bw_w = g->hbm_bw * prof->mbu_w * derate;
	n.bw_kv = g->hbm_bw * prof->mbu_kv * derate;
	n.attn_flops_rate = g->bf16_flops * prof->f_attn * derate;
	*p = n;
	return 0;
}

int sim_perf_set_pipeline(struct sim_perf *p, uint32_t pp, struct error *err)
{
	const struct sim_model *m = &p->model;
	uint32_t div = p->tp <= m->kv_heads ? p->tp : m->kv_heads;

	if (pp == 0)
		return error_set(err, -EINVAL, "--pipeline-parallel-size: must be at least 1");
	if (pp > m->layers)
		return error_set(err, -EINVAL,
				 "ValueError: pipeline_parallel_size (%u) is larger than the number of hidden layers "
				 "(%u) of %s",
				 pp, m->layers, m->name);
	p->pp = pp;
	/* Each stage keeps the KV of its own layers only. */
	p->kv_bytes_token_gpu = p->kv_bytes_token / div / pp;
	return 0;
}

double sim_perf_step_time(const struct sim_perf *p, const struct sim_batch *b, struct sim_step_parts *ret_parts)
{
	const struct sim_model *m = &p->model;
	const struct sim_profile *pr = &p->profile;
	double T = (double)sim_batch_tokens(b), tp = p->tp, pp = p->pp ? p->pp : 1;
	/* logits: each sequence's last position, and every draft position a sequence verifies */
	double n_seq = (double)b->n_decode + b->n_chunks, n_logits = n_seq + (double)b->verify_tokens;
	struct sim_step_parts s = { 0 };

	if (T <= 0) {
		if (ret_parts)
			*ret_parts = s;
		return 0;
	}

	/* GEMMs: linear layers over every token, logits only for each sequence's last position. */
	double f_gemm = 2.0 * p->p_lin * T + 2.0 * (double)m->hidden * m->vocab * n_logits;
	double peak = T > pr->awq_q_eff_tokens ? p->gemm_peak_large : p->gemm_peak_small;
	double t_gc = f_gemm / (tp * peak), t_gm = p->w_stream / (tp * p->bw_w);
	s.gemm = MAX(t_gc, t_gm);
	s.gemm_compute_bound = t_gc > t_gm;

	/* Attention: decode reads its whole context; a chunk at offset o attends o + c/2 on average;
	 * a sequence's draft tokens attend its context too, but read its KV only once (one kernel
	 * over all of its query positions). KV bytes per GPU count one stage's layers: × pp for
	 * the whole model. */
	double ctx = (double)b->decode_ctx_sum;
	double f_attn = 4.0 * m->layers * (double)m->heads * m->head_dim * (ctx + b->chunk_attn + b->verify_ctx);
	double kv_read = p->kv_bytes_token_gpu * pp * (ctx + (double)b->chunk_offset_sum);
	double t_ac = f_attn / (tp * p->attn_flops_rate), t_am = kv_read / p->bw_kv;
	s.attn = MAX(t_ac, t_am);
	s.attn_compute_bound = t_ac > t_am;

	/* Two ring all-reduces per layer of T·d bf16 activations. */
	if (p->tp > 1) {
		double bytes = T * m->hidden * 2.0;
		s.comm = 2.0 * m->layers *
			 (p->gpu.ar_alpha + 2.0 * (tp - 1) / tp * bytes / (pr->busbw_frac * p->gpu.link_bw));
	}

	/* The per-sequence CPU cost (§4.4: sampling, output processing) goes with each sampled
	 * position: a verified draft is sampled too (rejection sampling), an accepted one processed. */
	s.ovh = pr->t_fixed_ms * 1e-3 + pr->c_seq_us * 1e-6 * n_logits + pr->c_tok_us * 1e-6 * T +
		pr->t_tp_ms * 1e-3 * (tp - 1);
	if (pp > 1) {
		/* One point-to-point send of T·d bf16 activations per hop between stages. */
		s.p2p = p->gpu.ar_alpha + T * m->hidden * 2.0 / (pr->busbw_frac * p->gpu.link_bw);
		s.total = (s.ovh + s.gemm + s.attn + s.comm + (pp - 1) * s.p2p) / pr->engine_efficiency;
		s.stage = MAX((s.gemm + s.attn + s.comm) / pp + s.p2p, s.ovh) / pr->engine_efficiency;
	} else {
		s.total = (s.gemm + s.attn + s.comm + s.ovh) / pr->engine_efficiency;
		s.stage = s.total;
	}
	if (ret_parts)
		*ret_parts = s;
	return s.total;
}

void sim_perf_default_batch(const struct sim_gpu *g, uint32_t *ret_max_num_batched_tokens, uint32_t *ret_max_num_seqs)
{
	bool big = g->mem_bytes >= 70.0 * SIM_GIB && !g->a100_mfu;

	*ret_max_num_batched_tokens = big ? 8192 : 2048;
	*ret_max_num_seqs = big ? 1024 : 256;
}
