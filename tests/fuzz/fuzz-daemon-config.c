/* fuzz-daemon-config.c — libFuzzer target for goodputd.json: any bytes
 * parsed as the configuration file is, accepted within its limits or
 * refused with a message, with no crash, leak or out-of-bounds access. */
#include <stdint.h>
#include <stdlib.h>

#include "daemon-config.h"
#include "json-util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct daemon_config *c = NULL;
	struct error err = { 0 };
	cJSON *j = NULL;
	double price;
	int r;

	if (json_parse_strict("goodputd.json", (const char *)data, size, &j, &err) < 0)
		return 0;
	r = daemon_config_from_json(j, "goodputd.json", &c, &err);
	cJSON_Delete(j);
	if (r < 0) {
		if (!err.msg[0] || c)
			abort();
		return 0;
	}
	if (c->limits.max_connections < 1 || c->limits.reserved_connections >= c->limits.max_connections ||
	    c->limits.max_connections_per_uid < 1)
		abort();
	(void)daemon_config_price(c, "H100", &price);
	daemon_config_free(c);
	return 0;
}
