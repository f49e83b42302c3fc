/* bench-sim-stub.c — stands in for bench-sim.c when goodput-sim's core is not
 * built: --sim then reports that it is unavailable. */
#include <errno.h>

#include "bench-landscape.h"

int bench_sim_eval(const char *model, const char *gpu, unsigned gpus, const struct bench_workload *w,
		   const struct opt_space *space, const struct opt_config *c, struct bench_point *ret,
		   struct error *err)
{
	return error_set(err, -EOPNOTSUPP, "--sim: goodput-sim's core is not built into this benchmark");
}
