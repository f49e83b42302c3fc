/* constraint.c — the constraints between a search space's knobs (space.h
 * describes what a study may write): parsing each item of "constraints"
 * into a test, an implication between two tests, or an allowed-combinations
 * list, and checking a configuration against them.
 *
 * A value test keeps the set of value indices it accepts as a bit mask, so
 * a test on a categorical knob ("quantization in [fp8, awq]") costs one AND
 * per configuration; such tests name knobs of at most 64 values. Comparisons
 * between numeric knobs are evaluated on the values, and also say how far a
 * configuration is from meeting them, which the search uses to pull NLopt
 * back towards allowed ground. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cost.h"
#include "json-util.h"
#include "macro.h"
#include "space-internal.h"
#include "space.h"

#define VALUE_MAX 64

static const char *skip_space(const char *s)
{
	while (isspace((unsigned char)*s))
		s++;
	return s;
}

static bool is_word_char(char c)
{
	return isalnum((unsigned char)c) || (c && strchr("_.+-", c));
}

/* A bare word (a knob name or a value): [A-Za-z0-9_.+-]+ into buf. */
static const char *read_word(const char *s, char *buf, size_t size)
{
	size_t n = 0;

	s = skip_space(s);
	while (is_word_char(*s) && n + 1 < size)
		buf[n++] = *s++;
	buf[n] = 0;
	return s;
}

/* The index of knob k's value written as text, or -ENOENT. */
static int value_index(const struct opt_space *space, int k, const char *text)
{
	const struct opt_knob *knob = &space->knobs[k];

	for (size_t i = 0; i < knob->n_values; i++) {
		struct opt_config c = { 0 };
		char buf[64];

		c.idx[k] = (uint16_t)i;
		if (strcmp(opt_config_text(space, &c, (size_t)k, buf, sizeof(buf)), text) == 0)
			return (int)i;
		if (knob->kind != OPT_KNOB_LIST_STRING) {
			char *end;
			double v = strtod(text, &end);

			if (end != text && !*end && v == knob->numbers[i])
				return (int)i;
		}
	}
	return -ENOENT;
}

/* One side of a comparison: "knob", "N", or "N * knob". Advances *s. */
static int parse_term(const struct opt_space *space, const char **s, int *ret_knob, double *ret_coef, double *ret_const)
{
	const char *q = skip_space(*s);
	char *end;
	double num = 1;

	if (isdigit((unsigned char)*q) || *q == '.' || *q == '-') {
		num = strtod(q, &end);
		if (end == q || !isfinite(num))
			return -EINVAL;
		q = skip_space(end);
		if (*q != '*') {
			*s = q;
			*ret_knob = -1;
			*ret_coef = 0;
			*ret_const = num;
			return 0;
		}
		q = skip_space(q + 1);
	}
	if (isalpha((unsigned char)*q) || *q == '_') {
		char name[OPT_KNOB_NAME_MAX];
		size_t n = 0;
		int k;

		while ((isalnum((unsigned char)*q) || *q == '_') && n + 1 < sizeof(name))
			name[n++] = *q++;
		name[n] = 0;
		k = opt_space_knob_index(space, name);
		if (k < 0 || space->knobs[k].kind == OPT_KNOB_LIST_STRING)
			return -ENOENT;
		*s = q;
		*ret_knob = k;
		*ret_coef = num;
		*ret_const = 0;
		return 0;
	}
	return -EINVAL;
}

static const struct {
	const char *op;
	enum opt_cmp cmp;
} ops[] = {
	{ ">=", OPT_CMP_GE }, { "<=", OPT_CMP_LE }, { "==", OPT_CMP_EQ },
	{ "!=", OPT_CMP_NE }, { ">", OPT_CMP_GT },  { "<", OPT_CMP_LT },
};

static const char *read_op(const char *s, enum opt_cmp *ret)
{
	s = skip_space(s);
	for (size_t i = 0; i < ELEMENTSOF(ops); i++)
		if (strncmp(s, ops[i].op, strlen(ops[i].op)) == 0) {
			*ret = ops[i].cmp;
			return s + strlen(ops[i].op);
		}
	return NULL;
}

/* "[v1, v2, ...]" (or one bare value) of knob k into a mask. Advances *s. */
static int parse_values(const struct opt_space *space, int k, const char **s, bool list, uint64_t *ret,
			const char *path, const char *text, struct error *err)
{
	const char *q = skip_space(*s);
	uint64_t mask = 0;

	if (list) {
		if (*q != '[')
			return error_set(err, -EINVAL, "%s: \"%s\": expected [value, ...] after \"in\"", path, text);
		q++;
	}
	for (;;) {
		char word[VALUE_MAX];
		int i;

		q = read_word(q, word, sizeof(word));
		if (!word[0])
			return error_set(err, -EINVAL, "%s: \"%s\": expected a value of %s", path, text,
					 space->knobs[k].name);
		i = value_index(space, k, word);
		if (i < 0)
			return error_set(err, -EINVAL, "%s: \"%s\": %s is not a value of %s in the search space", path,
					 text, word, space->knobs[k].name);
		mask |= UINT64_C(1) << i;
		q = skip_space(q);
		if (!list)
			break;
		if (*q == ']') {
			q++;
			break;
		}
		if (*q != ',')
			return error_set(err, -EINVAL, "%s: \"%s\": expected ',' or ']' in the list of values", path,
					 text);
		q++;
	}
	*s = q;
	*ret = mask;
	return 0;
}

/* A value test "knob == v", "knob != v", "knob in [...]" when the first word
 * names a knob and the test is one; 0 when it is not (a comparison), 1 when
 * parsed. */
static int parse_value_test(const struct opt_space *space, const char **s, struct opt_test *t, const char *path,
			    const char *text, struct error *err)
{
	const struct opt_knob *knob;
	char name[OPT_KNOB_NAME_MAX];
	const char *q = read_word(*s, name, sizeof(name)), *after;
	enum opt_cmp cmp = OPT_CMP_EQ;
	bool in = false;
	uint64_t mask = 0;
	int k, r;

	k = opt_space_knob_index(space, name);
	if (k < 0)
		return 0;
	knob = &space->knobs[k];
	q = skip_space(q);
	if (strncmp(q, "in", 2) == 0 && !is_word_char(q[2])) {
		in = true;
		after = q + 2;
	} else {
		after = read_op(q, &cmp);
		if (!after || (cmp != OPT_CMP_EQ && cmp != OPT_CMP_NE))
			return knob->kind == OPT_KNOB_LIST_STRING
				       ? error_set(err, -EINVAL, "%s: \"%s\": %s takes == != or in", path, text, name)
				       : 0;
		if (knob->kind != OPT_KNOB_LIST_STRING)
			return 0; /* a numeric comparison, which may name knobs on the right */
	}
	if (knob->n_values > 64)
		return error_set(err, -EINVAL, "%s: \"%s\": %s has more than 64 values; compare it instead", path, text,
				 name);
	r = parse_values(space, k, &after, in, &mask, path, text, err);
	if (r < 0)
		return r;
	*t = (struct opt_test){ .is_set = true, .knob = k, .values = cmp == OPT_CMP_NE ? ~mask : mask };
	*s = after;
	return 1;
}

/* One test, up to the end of [*s, end). */
static int parse_test(const struct opt_space *space, const char *s, const char *end, struct opt_test *t,
		      const char *path, const char *text, struct error *err)
{
	char buf[256];
	const char *q;
	int r;

	if ((size_t)(end - s) >= sizeof(buf))
		return error_set(err, -EINVAL, "%s: \"%s\" is too long", path, text);
	memcpy(buf, s, (size_t)(end - s));
	buf[end - s] = 0;
	q = buf;
	r = parse_value_test(space, &q, t, path, text, err);
	if (r < 0)
		return r;
	if (r == 0) {
		*t = (struct opt_test){ .knob = -1 };
		q = buf;
		r = parse_term(space, &q, &t->lhs_knob, &t->lhs_coef, &t->lhs_const);
		if (r == 0) {
			q = read_op(q, &t->cmp);
			r = q ? parse_term(space, &q, &t->rhs_knob, &t->rhs_coef, &t->rhs_const) : -EINVAL;
		}
		if (r == -ENOENT)
			return error_set(err, -EINVAL,
					 "%s: \"%s\" compares a knob that is not a numeric knob of the search space "
					 "(test string knobs with ==, != or in)",
					 path, text);
		if (r < 0)
			return error_set(err, -EINVAL,
					 "%s: expected \"KNOB OP KNOB\" (OP one of >= <= > < == !=, a side may be N or "
					 "N * KNOB), \"KNOB == VALUE\", \"KNOB in [VALUE, ...]\" or \"TEST => TEST\", "
					 "got \"%s\"",
					 path, text);
		if (t->lhs_knob < 0 && t->rhs_knob < 0)
			return error_set(err, -EINVAL, "%s: \"%s\" compares two constants", path, text);
	}
	if (*skip_space(q))
		return error_set(err, -EINVAL, "%s: \"%s\": unexpected \"%s\"", path, text, skip_space(q));
	return 0;
}

static int parse_string(struct opt_space *space, const char *text, const char *path, struct opt_constraint *c,
			struct error *err)
{
	const char *arrow = strstr(text, "=>");
	int r;

	if (!arrow)
		return parse_test(space, text, text + strlen(text), &c->test, path, text, err);
	if (strstr(arrow + 2, "=>"))
		return error_set(err, -EINVAL, "%s: \"%s\": one => per constraint", path, text);
	c->kind = OPT_CONSTRAINT_IMPLIES;
	r = parse_test(space, text, arrow, &c->test, path, text, err);
	if (r >= 0)
		r = parse_test(space, arrow + 2, text + strlen(text), &c->then, path, text, err);
	return r;
}

/* One value (or a list of values) of knob k in an allowed entry. */
static int allowed_values(const struct opt_space *space, int k, const cJSON *v, const char *path, uint64_t *ret,
			  struct error *err)
{
	const cJSON *item, *list = cJSON_IsArray(v) ? v : NULL;
	uint64_t mask = 0;
	size_t i = 0;

	if (space->knobs[k].n_values > 64)
		return error_set(err, -EINVAL, "%s: %s has more than 64 values; use a comparison", path,
				 space->knobs[k].name);
	cJSON_ArrayForEach(item, list)
	{
		uint64_t one;
		char p[256];
		int r;

		snprintf(p, sizeof(p), "%s[%zu]", path, i++);
		r = allowed_values(space, k, item, p, &one, err);
		if (r < 0)
			return r;
		mask |= one;
	}
	if (!cJSON_IsArray(v)) {
		char buf[64];
		int idx;

		if (cJSON_IsString(v))
			snprintf(buf, sizeof(buf), "%s", v->valuestring);
		else if (cJSON_IsNumber(v))
			snprintf(buf, sizeof(buf), "%.17g", v->valuedouble);
		else
			return error_set(err, -EINVAL, "%s: expected a value of %s or a list of them", path,
					 space->knobs[k].name);
		idx = value_index(space, k, buf);
		if (idx < 0)
			return error_set(err, -EINVAL, "%s: %s is not a value of %s in the search space", path, buf,
					 space->knobs[k].name);
		mask = UINT64_C(1) << idx;
	} else if (!mask)
		return error_set(err, -EINVAL, "%s: empty list", path);
	*ret = mask;
	return 0;
}

static int parse_allowed(struct opt_space *space, const cJSON *obj, const char *path, struct opt_constraint *c,
			 struct error *err)
{
	const cJSON *list = cJSON_GetObjectItemCaseSensitive(obj, "allowed"), *entry;
	char p[256];
	size_t n;

	if (!cJSON_IsArray(list) || cJSON_GetArraySize(obj) != 1)
		return error_set(err, -EINVAL, "%s: expected a string or {\"allowed\": [{KNOB: VALUE, ...}, ...]}",
				 path);
	n = (size_t)cJSON_GetArraySize(list);
	if (n < 1 || n > OPT_ALLOWED_MAX)
		return error_set(err, -EINVAL, "%s.allowed: expected 1 to %d combinations", path, OPT_ALLOWED_MAX);
	c->kind = OPT_CONSTRAINT_ALLOWED;
	c->allowed = calloc(n, sizeof(*c->allowed));
	if (!c->allowed)
		return -ENOMEM;
	c->n_allowed = n;
	snprintf(c->text, sizeof(c->text), "allowed combinations (%zu)", n);
	n = 0;
	cJSON_ArrayForEach(entry, list)
	{
		struct opt_allowed_entry *e = &c->allowed[n];
		const cJSON *kv;

		snprintf(p, sizeof(p), "%s.allowed[%zu]", path, n++);
		if (!cJSON_IsObject(entry) || !entry->child)
			return error_set(err, -EINVAL, "%s: expected an object {KNOB: VALUE, ...}", p);
		for (size_t i = 0; i < OPT_KNOBS_MAX; i++)
			e->values[i] = UINT64_MAX;
		cJSON_ArrayForEach(kv, entry)
		{
			char kp[320];
			int k = opt_space_knob_index(space, kv->string), r;

			json_path_join(kp, sizeof(kp), p, kv->string);
			if (k < 0)
				return error_set(err, -EINVAL, "%s: not a knob of the search space", kp);
			r = allowed_values(space, k, kv, kp, &e->values[k], err);
			if (r < 0)
				return r;
		}
	}
	return 0;
}

int opt_space_add_constraint(struct opt_space *space, const cJSON *item, const char *text, const char *path,
			     struct error *err)
{
	struct opt_constraint c = { 0 };
	int r;

	if (space->n_constraints >= OPT_CONSTRAINTS_MAX)
		return error_set(err, -E2BIG, "%s: more than %d constraints", path, OPT_CONSTRAINTS_MAX);
	if (item && cJSON_IsObject(item))
		r = parse_allowed(space, item, path, &c, err);
	else if (item && !cJSON_IsString(item))
		return error_set(err, -EINVAL, "%s: expected a string or {\"allowed\": [...]}", path);
	else {
		if (item)
			text = item->valuestring;
		snprintf(c.text, sizeof(c.text), "%s", text);
		r = parse_string(space, text, path, &c, err);
	}
	if (r < 0) {
		free(c.allowed);
		return r;
	}
	space->constraints[space->n_constraints++] = c;
	return 0;
}

/* ---- checking ---- */

static bool holds(enum opt_cmp cmp, double a, double b)
{
	switch (cmp) {
	case OPT_CMP_GE:
		return a >= b;
	case OPT_CMP_LE:
		return a <= b;
	case OPT_CMP_GT:
		return a > b;
	case OPT_CMP_LT:
		return a < b;
	case OPT_CMP_EQ:
		return a == b;
	default:
		return a != b;
	}
}

static double side(const struct opt_space *space, const struct opt_config *c, int knob, double coef, double constant)
{
	return knob < 0 ? constant : coef * space->knobs[knob].numbers[c->idx[knob]];
}

/* 0 when the test holds, else how far it is from holding (>= 1). */
static double test_violation(const struct opt_space *space, const struct opt_test *t, const struct opt_config *c)
{
	double a, b;

	if (t->is_set)
		return (t->values >> c->idx[t->knob]) & 1 ? 0 : 1;
	a = side(space, c, t->lhs_knob, t->lhs_coef, t->lhs_const);
	b = side(space, c, t->rhs_knob, t->rhs_coef, t->rhs_const);
	if (holds(t->cmp, a, b))
		return 0;
	return 1 + (a > 0 && b > 0 ? fabs(log2(a / b)) : fabs(a - b) / (fabs(b) + 1));
}

static bool entry_matches(const struct opt_space *space, const struct opt_allowed_entry *e, const struct opt_config *c)
{
	for (size_t k = 0; k < space->n_knobs; k++)
		if (!((e->values[k] >> c->idx[k]) & 1))
			return false;
	return true;
}

static double constraint_violation(const struct opt_space *space, const struct opt_constraint *k,
				   const struct opt_config *c)
{
	switch (k->kind) {
	case OPT_CONSTRAINT_TEST:
		return test_violation(space, &k->test, c);
	case OPT_CONSTRAINT_IMPLIES:
		return test_violation(space, &k->test, c) > 0 ? 0 : test_violation(space, &k->then, c);
	case OPT_CONSTRAINT_ALLOWED:
		for (size_t i = 0; i < k->n_allowed; i++)
			if (entry_matches(space, &k->allowed[i], c))
				return 0;
		return 1;
	}
	return 1;
}

bool opt_knob_active(const struct opt_space *space, const struct opt_config *config, size_t k)
{
	return k >= space->n_knobs || !space->when[k] || test_violation(space, space->when[k], config) == 0;
}

/* What a configuration breaks beside its constraints: an inactive knob off
 * its first value, more GPUs than the host has. */
static double built_in_violation(const struct opt_space *space, const struct opt_config *config)
{
	double v = 0;

	for (size_t k = 0; k < space->n_knobs; k++)
		v += !opt_knob_active(space, config, k) && config->idx[k] != 0;
	if (space->gpus > 0 && opt_config_gpus(space, config) > space->gpus)
		v += 1 + log2((double)opt_config_gpus(space, config) / space->gpus);
	return v;
}

bool opt_space_allowed(const struct opt_space *space, const struct opt_config *config)
{
	if (built_in_violation(space, config) > 0)
		return false;
	for (size_t i = 0; i < space->n_constraints; i++)
		if (constraint_violation(space, &space->constraints[i], config) > 0)
			return false;
	return true;
}

double opt_space_violation(const struct opt_space *space, const struct opt_config *config)
{
	double v = built_in_violation(space, config);

	for (size_t i = 0; i < space->n_constraints; i++)
		v += constraint_violation(space, &space->constraints[i], config);
	return v;
}

int opt_space_parse_test(const struct opt_space *space, const char *text, const char *path, struct opt_test *ret,
			 struct error *err)
{
	return parse_test(space, text, text + strlen(text), ret, path, text, err);
}

bool opt_test_names(const struct opt_test *t, int k)
{
	return t->is_set ? t->knob == k : t->lhs_knob == k || t->rhs_knob == k;
}
