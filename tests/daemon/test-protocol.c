/* test-protocol.c — the control protocol's request parser and response
 * builders, and goodputd.json parsing: what a client gets told for each
 * malformed request, and which configurations are refused. */
#include <math.h>
#include <string.h>

#include "daemon-config.h"
#include "macro.h"
#include "protocol.h"
#include "tests.h"

static int parse(const char *line, struct ctl_request *r, struct error *err)
{
	return ctl_request_parse(line, strlen(line), r, err);
}

static void expect_error(const char *line, const char *want)
{
	struct ctl_request r = { 0 };
	struct error err = { 0 };
	int k = parse(line, &r, &err);

	CHECK_MSG(k < 0, "%s was accepted", line);
	CHECK_STR_CONTAINS(err.msg, want);
	CHECK(r.json == NULL);
}

static void test_requests(void)
{
	struct ctl_request r = { 0 };
	struct error err = { 0 };

	CHECK_INT_EQ(parse("{\"command\":\"status\"}", &r, &err), 0);
	CHECK_INT_EQ(r.command, CTL_STATUS);
	CHECK(!ctl_command_changes_state(r.command));
	ctl_request_done(&r);

	/* Not UTF-8: refused before anything is read from it. */
	CHECK_INT_EQ(parse("{\"command\":\"best\",\"study\":\"a\xff\"}", &r, &err), -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "request: invalid UTF-8 at line 1, column 29");

	CHECK_INT_EQ(
		parse(" {\"command\":\"best\",\"model\":\"m\",\"engine\":\"vllm\",\"label\":\"chat\",\"id\":\"x\"} ",
		      &r, &err),
		0);
	CHECK_STR_EQ(r.model, "m");
	CHECK_STR_EQ(r.engine, "vllm");
	CHECK_STR_EQ(r.label, "chat");
	CHECK(cJSON_IsString(r.id));
	ctl_request_done(&r);

	CHECK_INT_EQ(parse("{\"command\":\"submit\",\"study\":{\"name\":\"a\"}}", &r, &err), 0);
	CHECK(cJSON_IsObject(r.spec));
	CHECK(ctl_command_changes_state(r.command));
	ctl_request_done(&r);

	CHECK_INT_EQ(parse("{\"command\":\"pause\"}", &r, &err), 0);
	CHECK(r.study == NULL);
	ctl_request_done(&r);
	CHECK_INT_EQ(parse("{\"command\":\"pause\",\"study\":null}", &r, &err), 0); /* null: as if absent */
	CHECK(r.study == NULL);
	ctl_request_done(&r);

	CHECK_INT_EQ(parse("{\"command\":\"report\",\"study\":\"a\",\"html\":true}", &r, &err), 0);
	CHECK_INT_EQ(r.command, CTL_REPORT);
	CHECK_STR_EQ(r.study, "a");
	CHECK(r.html);
	CHECK(!ctl_command_changes_state(r.command));
	ctl_request_done(&r);
	CHECK_INT_EQ(parse("{\"command\":\"report\",\"study\":\"a\"}", &r, &err), 0);
	CHECK(!r.html);
	ctl_request_done(&r);

	expect_error("{\"command\":\"report\"}", "study: missing");
	expect_error("{\"command\":\"report\",\"study\":\"a\",\"html\":1}", "html: expected true or false");
	expect_error("{\"command\":\"report\",\"study\":\"a\",\"model\":\"m\"}", "model: unknown key");
	expect_error("", "empty");
	expect_error("nonsense", "invalid JSON");
	expect_error("{\"command\":\"status\"} {}", "unexpected data");
	expect_error("42", "expected a JSON object");
	expect_error("{}", "command: missing");
	expect_error("{\"command\":\"STATUS\"}", "unknown command");
	expect_error("{\"Command\":\"status\"}", "command: missing");
	expect_error("{\"command\":\"status\",\"study\":\"x\"}", "study: unknown key");
	expect_error("{\"command\":\"trials\"}", "study: missing");
	expect_error("{\"command\":\"cancel\",\"study\":5}", "study");
	expect_error("{\"command\":\"submit\",\"study\":\"name\"}", "as an object");
	expect_error("{\"command\":\"best\"}", "needs \"study\"");
	expect_error("{\"command\":\"best\",\"study\":\"a\",\"model\":\"m\"}", "either");
	expect_error("{\"command\":\"status\",\"id\":[1]}", "id: expected a number or a string, got [1]");
	expect_error("{\"command\":\"status\",\"Id\":1}", "Id: unknown key");
	expect_error("{\"command\":\"best\",\"model\":\"m\",\"engine\":7}", "engine: expected a string, got 7");
	expect_error("{\"command\":\"status\",\"command\":\"list\"}", "duplicate");
}

static void test_responses(void)
{
	_cleanup_(cJSON_Deletep) cJSON *id = cJSON_CreateNumber(3);
	_cleanup_(cJSON_Deletep) cJSON *ok = ctl_response_ok(id);
	_cleanup_(cJSON_Deletep) cJSON *bad = ctl_response_error(NULL, "no study named \"%s\"", "x\ny");
	_cleanup_(freep) char *line = NULL;
	size_t len = 0;

	CHECK(ok && bad);
	CHECK_INT_EQ(ctl_format_line(ok, &line, &len), 0);
	CHECK_STR_EQ(line, "{\"ok\":true,\"id\":3}\n");
	CHECK_INT_EQ(len, strlen(line));
	free(line);
	line = NULL;
	CHECK_INT_EQ(ctl_format_line(bad, &line, &len), 0);
	/* One line whatever the message holds. */
	CHECK(strchr(line, '\n') == line + len - 1);
	CHECK_STR_CONTAINS(line, "\"ok\":false");
	free(line);
	line = NULL;

	/* Never invalid UTF-8 on the wire, whatever a string holds (a message
	 * cut in the middle of a character). */
	_cleanup_(cJSON_Deletep) cJSON *cut = ctl_response_error(NULL, "no study named \"%.5s\"", "gr\xC3\xBC\xC3\x9F");
	CHECK(cut);
	CHECK_INT_EQ(ctl_format_line(cut, &line, &len), 0);
	CHECK_STR_EQ(line, "{\"ok\":false,\"error\":\"no study named \\\"gr\xC3\xBC\xEF\xBF\xBD\\\"\"}\n");
}

static int config_from(const char *text, struct daemon_config **ret, struct error *err)
{
	_cleanup_(cJSON_Deletep) cJSON *j = cJSON_Parse(text);

	CHECK(j);
	return daemon_config_from_json(j, "goodputd.json", ret, err);
}

static void test_config(void)
{
	_cleanup_(daemon_config_freep) struct daemon_config *c = NULL;
	struct error err = { 0 };
	double price = 0;

	CHECK_INT_EQ(daemon_config_new_default(&c), 0);
	CHECK_INT_EQ(c->limits.max_request_bytes, 1024 * 1024);
	CHECK_INT_EQ(c->limits.reserved_connections, 64);
	CHECK(c->socket_group == NULL);
	c = daemon_config_free(c);

	CHECK_INT_EQ(config_from("{\"socket_group\":\"root\",\"prices\":{\"H100\":2.5},"
				 "\"limits\":{\"max_connections\":8,\"idle_timeout\":0.5}}",
				 &c, &err),
		     0);
	CHECK_INT_EQ(c->socket_gid, 0);
	CHECK_INT_EQ(c->limits.max_connections, 8);
	CHECK_INT_EQ(c->limits.reserved_connections, 1); /* an eighth */
	CHECK_INT_EQ(c->limits.max_connections_per_uid, 32);
	CHECK_INT_EQ(c->limits.idle_timeout_usec, 500000);
	CHECK_INT_EQ(daemon_config_price(c, "h100", &price), 0);
	CHECK(price == 2.5);
	CHECK_INT_EQ(daemon_config_price(c, "A100", &price), -ENOENT);
	c = daemon_config_free(c);

	CHECK(config_from("{\"socket_groupp\":\"root\"}", &c, &err) < 0);
	CHECK_STR_CONTAINS(err.msg, "socket_groupp: unknown key");
	CHECK(config_from("{\"socket_group\":\"no-such-group-here\"}", &c, &err) < 0);
	CHECK_STR_CONTAINS(err.msg, "no-such-group-here");
	CHECK(config_from("{\"limits\":{\"max_connections\":0}}", &c, &err) < 0);
	CHECK_STR_CONTAINS(err.msg, "limits.max_connections");
	CHECK(config_from("{\"limits\":{\"max_connections\":8,\"reserved_connections\":8}}", &c, &err) < 0);
	CHECK_STR_CONTAINS(err.msg, "limits.reserved_connections: 8 leaves no connection for anyone else");
	CHECK(config_from("{\"limits\":{\"max_connections_per_uid\":0}}", &c, &err) < 0);
	CHECK_STR_CONTAINS(err.msg, "limits.max_connections_per_uid");
	CHECK(config_from("{\"prices\":{\"H100\":\"cheap\"}}", &c, &err) < 0);
	CHECK_STR_CONTAINS(err.msg, "prices.H100");
	CHECK(config_from("{\"limits\":{\"max_request_bytes\":4096,\"idle_timeot\":1}}", &c, &err) < 0);
	CHECK_STR_CONTAINS(err.msg, "goodputd.json: limits.idle_timeot: unknown key");
	CHECK(config_from("{\"engines_dir\":\"/a\",\"engines_dir\":\"/b\"}", &c, &err) < 0);
	CHECK_STR_CONTAINS(err.msg, "engines_dir: duplicate key");
	CHECK(config_from("{\"limits\":{\"max_request_bytes\":512}}", &c, &err) < 0);
	CHECK_STR_CONTAINS(err.msg, "limits.max_request_bytes: expected an integer in [1024, 67108864], got 512");
	CHECK(c == NULL);
	CHECK_INT_EQ(config_from("{\"limits\":{\"max_request_bytes\":4096}}", &c, &err), 0);
	CHECK_INT_EQ(c->limits.max_request_bytes, 4096);
	CHECK_INT_EQ(c->limits.max_connections, 512); /* the defaults stay */
	c = daemon_config_free(c);

	CHECK_INT_EQ(daemon_config_load("/nonexistent/goodputd.json", true, &c, &err), 0);
	c = daemon_config_free(c);
	CHECK(daemon_config_load("/nonexistent/goodputd.json", false, &c, &err) < 0);
}

/* "watch": each entry read by its own table, defaults filled, refusals named. */
static void test_config_watch(void)
{
	_cleanup_(daemon_config_freep) struct daemon_config *c = NULL;
	struct error err = { 0 };

	CHECK_INT_EQ(
		config_from(
			"{\"watch\":[{\"metrics_url\":\"http://a:8000/metrics\",\"study\":\"chat\"},"
			"{\"metrics_url\":\"https://b/metrics\",\"study\":\"rag\",\"interval\":\"5m\","
			"\"threshold\":0.3,\"retune\":\"queue\",\"window\":\"22:00-06:00\",\"engine\":\"sglang\"}]}",
			&c, &err),
		0);
	CHECK(c->n_watch == 2);
	CHECK_STR_EQ(c->watch[0].study, "chat");
	CHECK(c->watch[0].interval_usec == 60000000 && c->watch[0].threshold == 0.2 &&
	      c->watch[0].rate_threshold == 1 && c->watch[0].consecutive == 2 && c->watch[0].min_requests == 20 &&
	      c->watch[0].retune == DAEMON_RETUNE_NOTIFY && !c->watch[0].window && !c->watch[0].engine);
	CHECK(c->watch[1].interval_usec == 300000000 && c->watch[1].threshold == 0.3 &&
	      c->watch[1].retune == DAEMON_RETUNE_QUEUE);
	CHECK_STR_EQ(c->watch[1].window, "22:00-06:00");
	CHECK_STR_EQ(c->watch[1].engine, "sglang");
	c = daemon_config_free(c);
	{
		static const struct {
			const char *text, *msg;
		} bad[] = {
			{ "{\"watch\":[{\"study\":\"x\"}]}", "watch[0].metrics_url: missing" },
			{ "{\"watch\":[{\"metrics_url\":\"ftp://x\",\"study\":\"x\"}]}",
			  "watch[0].metrics_url: expected an http" },
			{ "{\"watch\":[{\"metrics_url\":\"http://x\",\"study\":\"x\",\"retune\":\"now\"}]}",
			  "watch[0].retune" },
			{ "{\"watch\":[{\"metrics_url\":\"http://x\",\"study\":\"x\",\"window\":\"9-5\"}]}",
			  "watch[0].window: expected \"HH:MM-HH:MM\"" },
			/* refused as the re-tune's spec would refuse it, not when drift queues it */
			{ "{\"watch\":[{\"metrics_url\":\"http://x\",\"study\":\"x\",\"window\":\"22:00-24:30\"}]}",
			  "watch[0].window: expected \"HH:MM-HH:MM\"" },
			{ "{\"watch\":[{\"metrics_url\":\"http://x\",\"study\":\"x\",\"treshold\":1}]}",
			  "watch[0].treshold: unknown key" },
			{ "{\"watch\":[{\"metrics_url\":\"http://x\",\"study\":\"a\"},{\"metrics_url\":\"http://x\","
			  "\"study\":\"b\"}]}",
			  "watch[1].metrics_url: \"http://x\" is watched already" },
			{ "{\"watch\":[1]}", "watch[0]: expected an object" },
		};

		for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
			CHECK_MSG(config_from(bad[i].text, &c, &err) < 0, "%s accepted", bad[i].text);
			CHECK_STR_CONTAINS(err.msg, bad[i].msg);
		}
	}
}

int main(void)
{
	test_requests();
	test_responses();
	test_config();
	test_config_watch();
	return 0;
}
