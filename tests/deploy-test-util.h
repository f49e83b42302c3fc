/* deploy-test-util.h — what the deployer tests (tests/deploy/, and
 * tests/engines/test-deploy-systemd.c) share: recording the deployment's
 * state callbacks and running the loop until one arrives. */
#pragma once

#include <stdbool.h>

#include "deploy.h"
#include "tests.h"
#include "time-util.h"

/* What deploy_test_on_event saw: the last state and how many callbacks. */
struct deploy_outcome {
	bool done;
	enum deploy_state state;
	unsigned calls;
};

/* A deploy_event_fn; userdata is a struct deploy_outcome. */
static inline void deploy_test_on_event(struct deployment *d, enum deploy_state state, void *userdata)
{
	struct deploy_outcome *o = userdata;

	o->state = state;
	o->calls++;
	o->done = true;
}

/* Clears *flag and runs the loop until a callback sets it; fails the test
 * after timeout_usec. */
static inline void deploy_test_run(sd_event *e, bool *flag, uint64_t timeout_usec)
{
	uint64_t deadline = mono_usec() + timeout_usec;

	*flag = false;
	while (!*flag && mono_usec() < deadline)
		CHECK(sd_event_run(e, 100 * USEC_PER_MSEC) >= 0);
	CHECK_MSG(*flag, "nothing happened within %.0f s", usec_to_sec(timeout_usec));
}
