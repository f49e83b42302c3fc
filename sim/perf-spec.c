/* perf-spec.c — speculative decoding in goodput-sim's performance model
 * (sim/PERFMODEL.md §8): the acceptance of drafts, the drafter's cost and
 * memory, and how often prompt lookup finds something to propose.
 *
 * A step with speculation verifies, for each decoding sequence, its own
 * token and its k drafts in one forward of the model (the batch's
 * verify_tokens: more GEMM rows, more logits rows, more attention queries
 * over the same KV), and then drafts the next k tokens. What that buys is
 * the accepted prefix of the drafts plus the bonus token: 1 + E[accepted]
 * tokens per step instead of one. At a small batch a step is bound by
 * streaming the weights, so k more rows are nearly free and the gain is
 * close to 1 + E[accepted]; as the batch grows the step turns compute-bound
 * and every verified token costs its FLOPs, accepted or not, so the gain
 * shrinks and becomes a loss — what vLLM's and llama.cpp's documentation
 * warn of at high load. The engine (engine.c) samples each sequence's
 * accepted count from the conditional acceptance of each position.
 *
 * The drafter's own cost: a draft model runs k one-token forwards per step
 * (memory-bound: its weights streamed k times) plus a pass over each
 * prompt chunk; an EAGLE or MTP head is one decoder layer that shares the
 * model's embeddings and lm_head (so each of its forwards streams one layer
 * and the lm_head); n-gram lookup is host work per sequence and step (the
 * profile's ngram_seq_us: vLLM 0.6's per-sequence lookup and batch
 * expansion, which is what slows n-gram at high load). A drafting
 * forward is a replayed CUDA graph: the engine's per-step scheduling
 * overhead is not paid again, only a launch cost. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "macro.h"
#include "parse.h"
#include "perfmodel.h"

/* Launch cost of one drafting forward (graph replay), s: assumed, of the
 * order of a CUDA graph launch plus the sampler; see PERFMODEL.md §8. */
#define DRAFT_STEP_FIXED_S 0.2e-3

static const char *const method_names[_SIM_SPEC_MAX] = {
	[SIM_SPEC_NONE] = "none",   [SIM_SPEC_NGRAM] = "ngram", [SIM_SPEC_DRAFT_MODEL] = "draft_model",
	[SIM_SPEC_EAGLE] = "eagle", [SIM_SPEC_MTP] = "mtp",
};

const char *sim_spec_method_to_string(enum sim_spec_method m)
{
	return m < _SIM_SPEC_MAX ? method_names[m] : NULL;
}

int sim_spec_method_from_string(const char *s, enum sim_spec_method *ret)
{
	static const struct {
		const char *name;
		enum sim_spec_method m;
	} table[] = {
		{ "none", SIM_SPEC_NONE },
		{ "ngram", SIM_SPEC_NGRAM },
		{ "[ngram]", SIM_SPEC_NGRAM },
		{ "ngram_gpu", SIM_SPEC_NGRAM },
		{ "draft_model", SIM_SPEC_DRAFT_MODEL },
		{ "draft", SIM_SPEC_DRAFT_MODEL },
		{ "standalone", SIM_SPEC_DRAFT_MODEL },
		{ "eagle", SIM_SPEC_EAGLE },
		{ "eagle3", SIM_SPEC_EAGLE },
		{ "mtp", SIM_SPEC_MTP },
		{ "deepseek_mtp", SIM_SPEC_MTP },
		{ "nextn", SIM_SPEC_MTP },
	};

	if (!s)
		return -EINVAL;
	for (size_t i = 0; i < ELEMENTSOF(table); i++)
		if (strcasecmp(s, table[i].name) == 0) {
			*ret = table[i].m;
			return 0;
		}
	return -EINVAL;
}

/* ---- acceptance ---- */

/* Unconditional per-position rates p[0..n) into conditional ones. */
static int acceptance_from_rates(const double *p, uint32_t n, const char *what, struct sim_spec_acceptance *ret,
				 struct error *err)
{
	struct sim_spec_acceptance a = { .n = n };

	if (n == 0 || n > SIM_SPEC_MAX_TOKENS)
		return error_set(err, -EINVAL, "%s: expected 1 to %d acceptance rates", what, SIM_SPEC_MAX_TOKENS);
	for (uint32_t i = 0; i < n; i++) {
		if (!isfinite(p[i]) || p[i] <= 0 || p[i] > 1)
			return error_set(err, -EINVAL, "%s[%u]: expected a rate in (0, 1], got %g", what, i, p[i]);
		if (i > 0 && p[i] > p[i - 1])
			return error_set(err, -EINVAL,
					 "%s[%u]: %g is above the rate of position %u (%g): a draft position is "
					 "accepted only after every earlier one",
					 what, i, p[i], i - 1, p[i - 1]);
		a.cond[i] = i == 0 ? p[0] : p[i] / p[i - 1];
	}
	*ret = a;
	return 0;
}

int sim_spec_acceptance_parse(const char *text, struct sim_spec_acceptance *ret, struct error *err)
{
	double p[SIM_SPEC_MAX_TOKENS];
	uint32_t n = 0;
	const char *s = text;

	if (!text || !*text)
		return error_set(err, -EINVAL, "--spec-acceptance: expected a rate or a comma-separated curve");
	for (;;) {
		char item[64], what[48];
		const char *c = strchr(s, ',');
		size_t len = c ? (size_t)(c - s) : strlen(s);
		int r;

		if (n >= SIM_SPEC_MAX_TOKENS)
			return error_set(err, -EINVAL, "--spec-acceptance: at most %d positions", SIM_SPEC_MAX_TOKENS);
		snprintf(item, sizeof(item), "%.*s", (int)MIN(len, sizeof(item) - 1), s);
		snprintf(what, sizeof(what), "--spec-acceptance[%u]", n);
		r = parse_double(what, item, 0, 1, &p[n], err);
		if (r < 0)
			return r;
		n++;
		if (!c)
			break;
		s = c + 1;
	}
	if (n == 1) {
		/* One α: the i.i.d. case, every position the same conditional rate. */
		if (p[0] <= 0)
			return error_set(err, -EINVAL, "--spec-acceptance: expected a rate in (0, 1], got %g", p[0]);
		*ret = (struct sim_spec_acceptance){ .n = 1, .cond = { p[0] } };
		return 0;
	}
	return acceptance_from_rates(p, n, "--spec-acceptance", ret, err);
}

int sim_spec_acceptance_from_json(const cJSON *j, const char *what, struct sim_spec_acceptance *ret, struct error *err)
{
	double p[SIM_SPEC_MAX_TOKENS];
	const cJSON *e;
	uint32_t n = 0;

	if (cJSON_IsNumber(j)) {
		if (!isfinite(j->valuedouble) || j->valuedouble <= 0 || j->valuedouble > 1)
			return error_set(err, -EINVAL, "%s: expected a rate in (0, 1], got %g", what, j->valuedouble);
		*ret = (struct sim_spec_acceptance){ .n = 1, .cond = { j->valuedouble } };
		return 0;
	}
	if (!cJSON_IsArray(j))
		return error_set(err, -EINVAL, "%s: expected a rate or an array of per-position rates", what);
	cJSON_ArrayForEach(e, j)
	{
		if (n >= SIM_SPEC_MAX_TOKENS)
			return error_set(err, -EINVAL, "%s: at most %d positions", what, SIM_SPEC_MAX_TOKENS);
		if (!cJSON_IsNumber(e))
			return error_set(err, -EINVAL, "%s[%u]: expected a number", what, n);
		p[n++] = e->valuedouble;
	}
	return acceptance_from_rates(p, n, what, ret, err);
}

void sim_spec_acceptance_default(enum sim_spec_method m, struct sim_spec_acceptance *ret)
{
	double a;

	switch (m) {
	case SIM_SPEC_NGRAM:
		a = 0.6; /* once a continuation is found in the context (§8) */
		break;
	case SIM_SPEC_DRAFT_MODEL:
		a = 0.7;
		break;
	case SIM_SPEC_EAGLE:
		a = 0.75;
		break;
	case SIM_SPEC_MTP:
		a = 0.85; /* DeepSeek-V3: 85–90 % for its second token */
		break;
	default:
		a = 0;
		break;
	}
	*ret = (struct sim_spec_acceptance){ .n = a > 0, .cond = { a } };
}

double sim_spec_acceptance_at(const struct sim_spec_acceptance *a, uint32_t i)
{
	if (a->n == 0)
		return 0;
	return a->cond[MIN(i, a->n - 1)];
}

double sim_spec_expected_tokens(const struct sim_spec_acceptance *a, uint32_t k)
{
	double sum = 1, run = 1;

	for (uint32_t i = 0; i < k; i++) {
		run *= sim_spec_acceptance_at(a, i);
		sum += run;
	}
	return sum;
}

void sim_spec_acceptance_format(const struct sim_spec_acceptance *a, uint32_t k, char *buf, size_t size)
{
	double run = 1;
	size_t len = 0;

	buf[0] = 0;
	if (a->n <= 1) {
		snprintf(buf, size, "%g", a->n ? a->cond[0] : 0.0);
		return;
	}
	for (uint32_t i = 0; i < MAX(k, a->n) && len < size; i++) {
		int w;

		run *= sim_spec_acceptance_at(a, i);
		w = snprintf(buf + len, size - len, "%s%.2f", i ? "," : "", run);
		if (w < 0)
			break;
		len += (size_t)w;
	}
}

/* ---- the drafter ---- */

/* An EAGLE or MTP head: one decoder layer of the model beside it; EAGLE
 * also fuses the token embedding and the hidden state (fc: 2d → d). Its
 * embeddings and lm_head are the model's. */
static void head_model(const struct sim_model *m, enum sim_spec_method method, struct sim_model *ret)
{
	struct sim_model h = *m;
	double d = m->hidden;

	h.layers = 1;
	h.tied = true; /* one vocabulary matrix: the model's lm_head, streamed by every drafting forward */
	h.params = sim_model_params_from_arch(&h) + (method == SIM_SPEC_EAGLE ? 2.0 * d * d : 0.0);
	snprintf(h.name, sizeof(h.name), "%s head of %.100s", method == SIM_SPEC_EAGLE ? "EAGLE" : "MTP", m->name);
	*ret = h;
}

int sim_spec_init(struct sim_spec *s, struct sim_perf *p, enum sim_spec_method m, uint32_t k,
		  const struct sim_model *draft_model, uint32_t draft_tp, struct error *err)
{
	struct sim_spec n = { .method = m, .k = k, .draft_step_fixed = DRAFT_STEP_FIXED_S };
	struct sim_profile prof = p->profile;
	struct sim_model dm;
	double emb;
	int r;

	p->draft_weights_gpu = p->draft_kv_bytes_token_gpu = 0;
	if (m == SIM_SPEC_NONE) {
		*s = (struct sim_spec){ .method = SIM_SPEC_NONE };
		return 0;
	}
	if (k < 1 || k > SIM_SPEC_MAX_TOKENS)
		return error_set(err, -EINVAL, "num_speculative_tokens: expected 1 to %d, got %u", SIM_SPEC_MAX_TOKENS,
				 k);
	if (m == SIM_SPEC_NGRAM) {
		n.ngram_seq_usec = p->profile.ngram_seq_us;
		*s = n;
		return 0;
	}
	if (m == SIM_SPEC_DRAFT_MODEL) {
		if (!draft_model)
			return error_set(err, -EINVAL,
					 "ValueError: a draft model is required for speculative method draft_model "
					 "(speculative_config.model)");
		if (draft_model->vocab != p->model.vocab)
			return error_set(err, -EINVAL,
					 "ValueError: the draft model %s has a vocabulary of %u tokens, the target %s "
					 "one of %u: speculative decoding needs the same tokenizer",
					 draft_model->name, draft_model->vocab, p->model.name, p->model.vocab);
		if (draft_tp == 0)
			draft_tp = p->tp;
		if (draft_tp != 1 && draft_tp != p->tp)
			return error_set(err, -EINVAL,
					 "ValueError: draft_tensor_parallel_size (%u) cannot be other value than 1 or "
					 "target model tensor_parallel_size (%u)",
					 draft_tp, p->tp);
		dm = *draft_model;
	} else {
		draft_tp = p->tp;
		head_model(&p->model, m, &dm);
	}
	/* The drafter's forwards are graph replays: no scheduling overhead of their own. */
	prof.t_fixed_ms = prof.c_seq_us = prof.c_tok_us = prof.t_tp_ms = 0;
	r = sim_perf_init(&n.draft, &dm, &p->gpu, SIM_QUANT_NONE, p->kv_dtype, draft_tp, &prof, err);
	if (r < 0)
		return error_prefix(err, r, "speculative decoding");
	emb = (double)dm.vocab * dm.hidden * 2.0;
	/* A head's embeddings and lm_head are the model's: resident once, with the model. */
	p->draft_weights_gpu = (m == SIM_SPEC_DRAFT_MODEL ? n.draft.w_resident : n.draft.w_resident - emb) / draft_tp;
	p->draft_kv_bytes_token_gpu = n.draft.kv_bytes_token_gpu;
	*s = n;
	return 0;
}

double sim_spec_draft_time(const struct sim_spec *s, uint32_t n_seqs, uint64_t ctx_sum, uint64_t chunk_tokens)
{
	struct sim_batch dec = { 0 }, pre = { 0 };
	double t;

	if (s->method == SIM_SPEC_NONE || (n_seqs == 0 && chunk_tokens == 0))
		return 0;
	if (s->method == SIM_SPEC_NGRAM)
		return n_seqs * s->ngram_seq_usec * 1e-6;
	dec.n_decode = n_seqs;
	dec.decode_ctx_sum = ctx_sum;
	t = n_seqs ? s->k * (sim_perf_step_time(&s->draft, &dec, NULL) + s->draft_step_fixed) : 0;
	if (chunk_tokens) {
		/* The drafter keeps its own KV of the prompt: one pass over the chunks. */
		sim_batch_add_chunk(&pre, chunk_tokens, 0);
		t += sim_perf_step_time(&s->draft, &pre, NULL);
	}
	return t;
}

/* ---- prompt lookup ---- */

double sim_spec_lookup_rate(const uint32_t *ids, uint32_t n)
{
	uint64_t *set;
	size_t cap = 16, mask, hits = 0;

	if (!ids || n < 3)
		return 0;
	while (cap < 2 * (size_t)n)
		cap <<= 1;
	mask = cap - 1;
	set = calloc(cap, sizeof(*set));
	if (!set)
		return 0;
	/* At position i the context ends in the bigram (ids[i−2], ids[i−1]): lookup proposes when
	 * that bigram occurred before, ending at i − 2 at the latest. */
	for (uint32_t i = 2; i < n; i++) {
		uint64_t key = ((uint64_t)ids[i - 2] << 32 | ids[i - 1]) + 1, prev;
		size_t h;

		if (i >= 3) {
			prev = ((uint64_t)ids[i - 3] << 32 | ids[i - 2]) + 1;
			for (h = (size_t)((prev * UINT64_C(0x9e3779b97f4a7c15)) >> 20) & mask; set[h] && set[h] != prev;
			     h = (h + 1) & mask)
				;
			set[h] = prev;
		}
		for (h = (size_t)((key * UINT64_C(0x9e3779b97f4a7c15)) >> 20) & mask; set[h]; h = (h + 1) & mask)
			if (set[h] == key) {
				hits++;
				break;
			}
	}
	free(set);
	return (double)hits / (double)(n - 2);
}
