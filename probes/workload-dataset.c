/* workload-dataset.c — reads prompt datasets for the workload generator:
 * ShareGPT-format JSON and goodput's JSONL.
 *
 * ShareGPT: an array of {"conversations": [{"from": "human", "value": ...},
 * {"from": "gpt", "value": ...}, ...]}. The prompt is the first human turn and
 * the reference output is the gpt turn after it; entries without both are
 * skipped (as vLLM does), but an entry whose fields have the wrong type is an
 * error that names the file, the entry and the field, since that means the
 * file is not what the user thinks it is.
 *
 * JSONL: one {"prompt": "...", "output_len": N} per line (output_len
 * optional, other keys ignored, blank lines skipped); errors name file, line
 * and field. Lengths are counted by the word rule (workload.h). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "array.h"
#include "file-util.h"
#include "json-util.h"
#include "macro.h"
#include "workload-internal.h"

struct probe_dataset_entries *probe_dataset_free(struct probe_dataset_entries *d)
{
	if (!d)
		return NULL;
	for (size_t i = 0; i < d->n; i++)
		free(d->entries[i].prompt);
	free(d->entries);
	free(d);
	return NULL;
}

static int add_entry(struct probe_dataset_entries *d, size_t *cap, const char *prompt, uint32_t output_len)
{
	struct probe_dataset_entry *e;

	if (ARRAY_GROW(d->entries, *cap, d->n) < 0)
		return -ENOMEM;
	e = &d->entries[d->n];
	e->prompt = strdup(prompt);
	if (!e->prompt)
		return -ENOMEM;
	e->input_len = probe_count_words(prompt);
	e->output_len = output_len;
	d->n++;
	return 0;
}

/* Checks a prompt's length by the word rule; 0 words is refused by the caller. */
static int check_prompt_len(const char *path, const char *where, const char *prompt, struct error *err)
{
	uint32_t n = probe_count_words(prompt);

	if (n > PROBE_MAX_TOKENS_PER_REQUEST)
		return error_set(err, -E2BIG, "%s: %s: prompt has %" PRIu32 " words, more than %u", path, where, n,
				 PROBE_MAX_TOKENS_PER_REQUEST);
	return 0;
}

/* One ShareGPT entry: 1 = usable (prompt/output set), 0 = skip, < 0 = error. */
static int sharegpt_entry(const char *path, size_t idx, const cJSON *entry, const char **ret_prompt,
			  uint32_t *ret_output, struct error *err)
{
	const cJSON *conv, *turn;
	const char *prompt = NULL;
	size_t t = 0;

	if (!cJSON_IsObject(entry))
		return error_set(err, -EINVAL, "%s: entry %zu: expected an object", path, idx);
	conv = cJSON_GetObjectItemCaseSensitive(entry, "conversations");
	if (!conv || cJSON_IsNull(conv))
		return 0;
	if (!cJSON_IsArray(conv))
		return error_set(err, -EINVAL, "%s: entry %zu: conversations: expected an array", path, idx);
	cJSON_ArrayForEach(turn, conv)
	{
		const cJSON *from, *value;

		if (!cJSON_IsObject(turn))
			return error_set(err, -EINVAL, "%s: entry %zu: conversations[%zu]: expected an object", path,
					 idx, t);
		from = cJSON_GetObjectItemCaseSensitive(turn, "from");
		value = cJSON_GetObjectItemCaseSensitive(turn, "value");
		if (!cJSON_IsString(from))
			return error_set(err, -EINVAL, "%s: entry %zu: conversations[%zu].from: expected a string",
					 path, idx, t);
		if (!cJSON_IsString(value))
			return error_set(err, -EINVAL, "%s: entry %zu: conversations[%zu].value: expected a string",
					 path, idx, t);
		if (!prompt && strcmp(from->valuestring, "human") == 0 && probe_count_words(value->valuestring) > 0) {
			prompt = value->valuestring;
		} else if (prompt && strcmp(from->valuestring, "gpt") == 0) {
			uint32_t out = probe_count_words(value->valuestring);
			char where[64];

			if (out == 0)
				return 0;
			snprintf(where, sizeof(where), "entry %zu", idx);
			if (check_prompt_len(path, where, prompt, err) < 0)
				return -E2BIG;
			*ret_prompt = prompt;
			*ret_output = MIN(out, PROBE_MAX_TOKENS_PER_REQUEST);
			return 1;
		}
		t++;
	}
	return 0;
}

int probe_dataset_load_sharegpt(const char *path, struct probe_dataset_entries **ret, struct error *err)
{
	_cleanup_(cJSON_Deletep) cJSON *root = NULL;
	_cleanup_(probe_dataset_freep) struct probe_dataset_entries *d = NULL;
	const cJSON *entry;
	size_t idx = 0, cap = 0;
	int r;

	r = json_parse_file(path, (size_t)PROBE_MAX_DATASET_BYTES, &root, err);
	if (r < 0)
		return r;
	if (!cJSON_IsArray(root))
		return error_set(err, -EINVAL, "%s: expected a JSON array of ShareGPT entries", path);
	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	cJSON_ArrayForEach(entry, root)
	{
		const char *prompt = NULL;
		uint32_t out = 0;

		r = sharegpt_entry(path, idx, entry, &prompt, &out, err);
		if (r < 0)
			return r;
		if (r > 0) {
			r = add_entry(d, &cap, prompt, out);
			if (r < 0)
				return error_set(err, r, "%s: out of memory", path);
		}
		idx++;
	}
	if (d->n == 0)
		return error_set(
			err, -EINVAL,
			"%s: no usable entry among %zu (each needs a \"human\" turn followed by a \"gpt\" turn)", path,
			idx);
	*ret = TAKE_PTR(d);
	return 0;
}

int probe_read_lines(const char *path, probe_line_fn fn, void *userdata, struct error *err)
{
	_cleanup_(closep) int fd = -1;
	_cleanup_(fclosep) FILE *f = NULL;
	_cleanup_(freep) char *line = NULL;
	size_t linecap = 0, lineno = 0;
	uint64_t total = 0;
	struct stat st;
	ssize_t n;
	int r;

	r = file_open_regular(path, 0, &fd, &st, err);
	if (r < 0)
		return r;
	f = fdopen(fd, "re");
	if (!f)
		return error_set(err, -errno, "%s: %s", path, strerror(errno));
	fd = -1; /* the stream owns it */
	if ((uint64_t)st.st_size > PROBE_MAX_DATASET_BYTES)
		return error_set(err, -EFBIG, "%s: larger than %" PRIu64 " bytes", path,
				 (uint64_t)PROBE_MAX_DATASET_BYTES);
	while ((n = getline(&line, &linecap, f)) >= 0) {
		lineno++;
		total += (uint64_t)n;
		if (total > PROBE_MAX_DATASET_BYTES)
			return error_set(err, -EFBIG, "%s: larger than %" PRIu64 " bytes", path,
					 (uint64_t)PROBE_MAX_DATASET_BYTES);
		if ((size_t)n > PROBE_MAX_DATASET_LINE)
			return error_set(err, -E2BIG, "%s:%zu: line longer than %u bytes", path, lineno,
					 PROBE_MAX_DATASET_LINE);
		if (memchr(line, '\0', (size_t)n))
			return error_set(err, -EINVAL, "%s:%zu: contains a NUL byte", path, lineno);
		r = fn(lineno, line, (size_t)n, userdata, err);
		if (r < 0)
			return r;
	}
	if (ferror(f))
		return error_set(err, -EIO, "%s: read error", path);
	return 0;
}

struct jsonl {
	const char *path;
	struct probe_dataset_entries *d;
	size_t cap;
};

static int jsonl_line(size_t lineno, const char *line, size_t len, void *userdata, struct error *err)
{
	static const char *const ws = " \t\r\n";
	struct jsonl *j = userdata;
	const char *path = j->path;
	_cleanup_(cJSON_Deletep) cJSON *obj = NULL;
	const char *prompt = NULL;
	uint32_t out = 0;
	char where[64];
	int r;

	if (strspn(line, ws) == len)
		return 0; /* blank line */
	snprintf(where, sizeof(where), "%s:%zu", path, lineno);
	r = json_parse_strict(where, line, len, &obj, err);
	if (r < 0)
		return r;
	if (!cJSON_IsObject(obj))
		return error_set(err, -EINVAL, "%s: expected an object {\"prompt\": ..., \"output_len\": ...}", where);
	r = json_require_string(obj, "", "prompt", 0, &prompt, err);
	if (r < 0)
		return error_prefix(err, r, "%s", where);
	if (probe_count_words(prompt) == 0)
		return error_set(err, -EINVAL, "%s: prompt: has no words", where);
	r = json_get_u32(obj, "", "output_len", 1, PROBE_MAX_TOKENS_PER_REQUEST, &out, err);
	if (r < 0)
		return error_prefix(err, r, "%s", where);
	r = check_prompt_len(path, where + strlen(path) + 1, prompt, err);
	if (r < 0)
		return r;
	r = add_entry(j->d, &j->cap, prompt, out);
	if (r < 0)
		return error_set(err, r, "%s: out of memory", path);
	return 0;
}

int probe_dataset_load_jsonl(const char *path, struct probe_dataset_entries **ret, struct error *err)
{
	_cleanup_(probe_dataset_freep) struct probe_dataset_entries *d = calloc(1, sizeof(*d));
	struct jsonl j = { .path = path, .d = d };
	int r;

	if (!d)
		return -ENOMEM;
	r = probe_read_lines(path, jsonl_line, &j, err);
	if (r < 0)
		return r;
	if (d->n == 0)
		return error_set(err, -EINVAL, "%s: no prompts (expected one JSON object per line)", path);
	*ret = TAKE_PTR(d);
	return 0;
}
