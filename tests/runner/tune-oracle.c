/* tune-oracle.c — the ground truth of the tune tests: evaluates every
 * allowed configuration of a study's space in virtual time (the same
 * runner_dry_evaluate a dry run uses) and prints, as JSON, the cost of each
 * and the best. Usage: tune-oracle STUDY.json [ENGINES_DIR] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "engine-profile.h"
#include "json-util.h"
#include "macro.h"
#include "runner-dryrun.h"
#include "study.h"

int main(int argc, char **argv)
{
	_cleanup_(cJSON_Deletep) cJSON *j = NULL, *out = NULL;
	_cleanup_(engine_profile_freep) struct engine_profile *p = NULL;
	_cleanup_(study_freep) struct study *s = NULL;
	_cleanup_(freep) struct opt_config *configs = NULL;
	_cleanup_(cjson_freep) char *text = NULL;
	struct study_options so = { 0 };
	struct error err = { 0 };
	const char *engine;
	cJSON *arr;
	double best = INFINITY;
	size_t n = 0, best_i = 0;
	int r;

	if (argc < 2) {
		fprintf(stderr, "usage: tune-oracle STUDY.json [ENGINES_DIR]\n");
		return 2;
	}
	r = json_parse_file(argv[1], STUDY_SPEC_MAX_BYTES, &j, &err);
	if (r >= 0)
		r = json_require_string(j, "", "engine", 256, &engine, &err);
	if (r >= 0)
		r = engine_profile_find(engine, argc > 2 ? argv[2] : NULL, &p, &err);
	if (r >= 0) {
		so.extra_knobs = p->extra_knobs;
		r = study_from_json(j, &so, &s, &err);
	}
	if (r >= 0)
		r = opt_space_enumerate(s->space, &configs, &n);
	if (r < 0) {
		fprintf(stderr, "tune-oracle: %s\n", error_str(&err, r));
		return 1;
	}
	out = cJSON_CreateObject();
	arr = cJSON_AddArrayToObject(out, "configs");
	if (!arr)
		return 1;
	for (size_t i = 0; i < n; i++) {
		struct runner_dry_result *res = malloc(sizeof(*res));
		char key[OPT_KEY_MAX];
		cJSON *o = cJSON_CreateObject();

		if (!res || !o || !cJSON_AddItemToArray(arr, o))
			return 1;
		r = runner_dry_evaluate(s, &configs[i], 0, res, &err);
		if (r < 0) {
			fprintf(stderr, "tune-oracle: %s\n", error_str(&err, r));
			return 1;
		}
		opt_config_key(s->space, &configs[i], key, sizeof(key));
		if (json_add_string(o, "key", key) < 0 ||
		    (isfinite(res->cost_per_mtok) && json_add_number(o, "cost", res->cost_per_mtok) < 0))
			return 1;
		if (isfinite(res->cost_per_mtok) && res->cost_per_mtok < best) {
			best = res->cost_per_mtok;
			best_i = i;
		}
		free(res);
	}
	if (isfinite(best)) {
		char key[OPT_KEY_MAX];

		opt_config_key(s->space, &configs[best_i], key, sizeof(key));
		if (json_add_number(out, "best_cost", best) < 0 || json_add_string(out, "best_key", key) < 0)
			return 1;
	}
	text = cJSON_PrintUnformatted(out);
	if (!text)
		return 1;
	printf("%s\n", text);
	return 0;
}
