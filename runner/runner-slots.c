/* runner-slots.c — the study's GPUs as slots, and what may start beside what.
 *
 * A study may use the GPUs of gpu.devices (host indices, CUDA's numbering);
 * a trial with tensor_parallel = k holds k of them while it runs. Sets are
 * packed by TP: a trial takes an aligned block (positions s..s+k−1 of the
 * device list with s a multiple of k) in the part of the host that is
 * already most occupied, so that whole blocks stay free for larger TPs;
 * only when no aligned block is free does it take a contiguous one, then
 * any k free GPUs — always on one node (gpu.per_node: a server's GPUs are
 * never split across nodes). A GPU that a foreign process holds (a server refused it
 * as busy) is left alone for a while. A trial that does not fit reserves
 * the aligned block that drains first (runner_slots_reserve): trials
 * behind it may start only outside it, so it is never starved.
 *
 * The probe's capacity: all probes in flight share one event loop, so the
 * tokens/s they stream together must stay within what one core serves
 * (RUNNER_PROBE_CAPACITY_TPS). Each trial is charged with the saturated
 * throughput measured so far for its TP (scaled from another TP when its
 * own is unknown; nothing before the first measurement); a trial whose
 * charge would push the total past 70 % of the capacity waits, unless
 * nothing else runs. The estimates come from stored load points only, so
 * a dry run and a resumed study hold the same trials back. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "runner-internal.h"
#include "time-util.h"

#define PROBE_HEADROOM 0.7

static uint64_t mask_of(unsigned from, unsigned n)
{
	return (n >= 64 ? ~UINT64_C(0) : ((UINT64_C(1) << n) - 1)) << from;
}

static unsigned popcount(uint64_t m)
{
	return (unsigned)__builtin_popcountll(m);
}

bool runner_alone_on_node(const struct runner *r)
{
	return r->study->deploy.method == STUDY_DEPLOY_SLURM;
}

unsigned runner_trial_slots(const struct runner_trial *t)
{
	const struct runner *r = t->runner;

	if (t->proposal.alone && runner_alone_on_node(r))
		return MIN(MAX(r->study->gpu.per_node, t->tp), r->n_gpus);
	return t->tp;
}

unsigned runner_slots_free(const struct runner *r)
{
	return r->n_gpus - popcount((r->gpus_busy | r->gpus_blocked) & mask_of(0, r->n_gpus));
}

unsigned runner_config_gpus(const struct runner *r, const struct opt_config *c)
{
	return MIN(opt_config_gpus(r->study->space, c), r->n_gpus);
}

unsigned runner_min_gpus(const struct runner *r)
{
	const struct opt_space *s = r->study->space;
	unsigned m = 1;

	/* the product of each GPU knob's smallest value: no configuration needs fewer */
	for (size_t k = 0; k < s->n_knobs; k++)
		if ((strcmp(s->knobs[k].name, OPT_KNOB_TENSOR_PARALLEL) == 0 ||
		     strcmp(s->knobs[k].name, OPT_KNOB_DATA_PARALLEL) == 0 ||
		     strcmp(s->knobs[k].name, OPT_KNOB_PIPELINE_PARALLEL) == 0) &&
		    s->knobs[k].numbers) {
			unsigned least = r->n_gpus;

			for (size_t i = 0; i < s->knobs[k].n_values; i++)
				if (s->knobs[k].numbers[i] >= 1 && s->knobs[k].numbers[i] < least)
					least = (unsigned)s->knobs[k].numbers[i];
			m *= least;
		}
	return MIN(MAX(m, 1u), r->n_gpus);
}

bool runner_side_by_side(const struct runner *r)
{
	return r->parallel > 1 && (runner_on_cluster(r) || r->n_gpus / runner_min_gpus(r) >= 2);
}

/* Whether [s, s+n) lies on one node. */
static bool one_node(const struct runner *r, unsigned s, unsigned n)
{
	unsigned per = r->study->gpu.per_node ? r->study->gpu.per_node : r->n_gpus;

	return s / per == (s + n - 1) / per;
}

/* n free GPUs of one node outside taken (the first node that has them). */
static bool any_on_a_node(const struct runner *r, unsigned n, uint64_t taken, uint64_t *ret)
{
	unsigned per = r->study->gpu.per_node ? r->study->gpu.per_node : r->n_gpus;

	for (unsigned from = 0; from < r->n_gpus; from += per) {
		unsigned len = MIN(per, r->n_gpus - from);
		uint64_t set = 0;

		if (len - popcount(taken & mask_of(from, len)) < n)
			continue;
		for (unsigned i = from, got = 0; got < n; i++)
			if (!(taken & (UINT64_C(1) << i))) {
				set |= UINT64_C(1) << i;
				got++;
			}
		*ret = set;
		return true;
	}
	return false;
}

/* How busy the blocks around [s, s+n) are: the busy GPUs in the enclosing
 * aligned block of 2n, then of 4n, ... packed into one number so that the
 * innermost level weighs most. */
static uint64_t neighbourhood(const struct runner *r, unsigned s, unsigned n)
{
	uint64_t score = 0;

	for (unsigned m = 2 * n; m < 2 * r->n_gpus && m <= 64; m *= 2) {
		unsigned from = s / m * m, len = MIN(m, r->n_gpus - from);

		score = score * 65 + popcount(r->gpus_busy & mask_of(from, len));
	}
	return score;
}

int runner_slots_find(const struct runner *r, unsigned n, uint64_t prefer, uint64_t exclude, uint64_t *ret)
{
	uint64_t taken = r->gpus_busy | r->gpus_blocked | exclude, best = 0;
	uint64_t best_score = 0;
	bool found = false;

	if (n == 0 || n > r->n_gpus)
		return -EINVAL;
	if (prefer && popcount(prefer) == n && !(prefer & taken) && !(prefer & ~mask_of(0, r->n_gpus))) {
		*ret = prefer;
		return 0;
	}
	/* aligned blocks, in the most occupied neighbourhood */
	for (unsigned s = 0; s + n <= r->n_gpus; s += n) {
		uint64_t m = mask_of(s, n), score;

		if ((m & taken) || !one_node(r, s, n))
			continue;
		score = neighbourhood(r, s, n);
		if (!found || score > best_score) {
			best = m;
			best_score = score;
			found = true;
		}
	}
	/* then any contiguous block, then any n GPUs (of one node) */
	for (unsigned s = 0; !found && s + n <= r->n_gpus; s++)
		if (!(mask_of(s, n) & taken) && one_node(r, s, n)) {
			best = mask_of(s, n);
			found = true;
		}
	if (!found)
		found = any_on_a_node(r, n, taken, &best);
	if (!found)
		return -EBUSY;
	*ret = best;
	return 0;
}

uint64_t runner_slots_reserve(const struct runner *r, unsigned n)
{
	uint64_t best = 0;
	unsigned best_busy = UINT32_MAX;

	if (n == 0 || n > r->n_gpus)
		return mask_of(0, r->n_gpus);
	for (unsigned s = 0; s + n <= r->n_gpus; s += n) {
		unsigned busy = popcount((r->gpus_busy | r->gpus_blocked) & mask_of(s, n));

		if (busy < best_busy && one_node(r, s, n)) {
			best = mask_of(s, n);
			best_busy = busy;
		}
	}
	return best ? best : mask_of(0, r->n_gpus);
}

void runner_slots_format(const struct runner *r, uint64_t set, char *buf, size_t size)
{
	size_t len = 0;

	buf[0] = 0;
	for (unsigned i = 0; i < r->n_gpus && len < size; i++)
		if (set & (UINT64_C(1) << i)) {
			int k = snprintf(buf + len, size - len, "%s%u", len ? "," : "", r->study->gpu.devices[i]);

			if (k < 0)
				break;
			len += (size_t)k;
		}
}

uint64_t runner_slots_parse(const struct runner *r, const char *text)
{
	uint64_t set = 0;
	const char *p = text;

	while (p && *p) {
		char *end;
		unsigned long v = strtoul(p, &end, 10);

		if (end == p)
			return 0;
		for (unsigned i = 0; i < r->n_gpus; i++)
			if (r->study->gpu.devices[i] == v)
				set |= UINT64_C(1) << i;
		p = *end == ',' ? end + 1 : NULL;
	}
	return set;
}

int runner_slots_position(const struct runner *r, unsigned device)
{
	for (unsigned i = 0; i < r->n_gpus; i++)
		if (r->study->gpu.devices[i] == device)
			return (int)i;
	return -ENOENT;
}

/* ---- the probe's capacity ---- */

void runner_probe_note(struct runner *r, unsigned tp, double saturated_tps)
{
	if (tp >= 1 && tp <= STUDY_GPUS_MAX && isfinite(saturated_tps) && saturated_tps > r->probe_tps_by_tp[tp])
		r->probe_tps_by_tp[tp] = saturated_tps;
}

double runner_probe_estimate(const struct runner *r, unsigned tp)
{
	double est = 0;

	if (tp >= 1 && tp <= STUDY_GPUS_MAX && r->probe_tps_by_tp[tp] > 0)
		return r->probe_tps_by_tp[tp];
	for (unsigned j = 1; j <= STUDY_GPUS_MAX; j++)
		if (r->probe_tps_by_tp[j] > 0)
			est = MAX(est, r->probe_tps_by_tp[j] * tp / j);
	return est;
}

double runner_probe_capacity(const struct runner *r)
{
	return r->opts.probe_capacity_tps > 0 ? r->opts.probe_capacity_tps : RUNNER_PROBE_CAPACITY_TPS;
}

bool runner_probe_fits(const struct runner *r, double add_tps)
{
	double load = add_tps;
	bool running = false;

	/* each running trial at what is known now (a trial that started before
	 * anything was measured is charged once something is) */
	for (size_t i = 0; i < r->n_trials; i++)
		if (r->trials[i]->running) {
			load += runner_probe_estimate(r, r->trials[i]->tp);
			running = true;
		}
	return !running || load <= PROBE_HEADROOM * runner_probe_capacity(r);
}
