/* fuzz-protocol.c — libFuzzer target for goodputd's control protocol: any
 * request line is parsed (or refused with a message) without a crash, leak
 * or out-of-bounds read, and every answer the daemon would send for it —
 * the error echoing a field, or the parsed request echoed back — is one line
 * of valid UTF-8 JSON. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "protocol.h"
#include "utf8.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_line(const cJSON *answer)
{
	char *line = NULL;
	size_t len = 0;
	cJSON *back;

	if (!answer || ctl_format_line(answer, &line, &len) < 0)
		return;
	/* One line, valid UTF-8, parseable JSON. */
	if (len == 0 || line[len - 1] != '\n' || memchr(line, '\n', len - 1) || !utf8_is_valid(line, len))
		abort();
	back = cJSON_ParseWithLength(line, len);
	if (!back)
		abort();
	cJSON_Delete(back);
	free(line);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ctl_request req = { 0 };
	struct error err = { 0 };
	cJSON *answer;
	int r;

	r = ctl_request_parse((const char *)data, size, &req, &err);
	if (r < 0) {
		if (!err.msg[0])
			abort(); /* a refusal always says why */
		answer = ctl_response_error(NULL, "%s", err.msg);
		check_line(answer);
		cJSON_Delete(answer);
		return 0;
	}
	if (req.command >= _CTL_COMMAND_MAX || !req.json)
		abort();
	answer = ctl_response_ok(req.id);
	if (answer && req.study)
		(void)cJSON_AddStringToObject(answer, "study", req.study);
	if (answer && req.spec)
		(void)cJSON_AddItemToObject(answer, "spec", cJSON_Duplicate(req.spec, true));
	check_line(answer);
	cJSON_Delete(answer);
	ctl_request_done(&req);
	return 0;
}
