/* study-budget.c — how long a study's budget has left to run, in one
 * place: the runner's progress lines and goodputd's STATUS and `status`,
 * and the live report's header all show this estimate.
 *
 * The estimate is the plainest one that stays true when trials run side by
 * side: the study's wall clock per finished trial so far, times the trials
 * its budget has left, and never past the wall-time budget. */
#include "study.h"

#include "time-util.h"

uint64_t study_budget_eta_usec(uint64_t elapsed_usec, unsigned finished, unsigned max_trials,
			       uint64_t max_wall_time_usec)
{
	uint64_t eta = 0, wall_left = USEC_INFINITY;

	if (max_wall_time_usec != USEC_INFINITY && max_wall_time_usec > 0)
		wall_left = max_wall_time_usec > elapsed_usec ? max_wall_time_usec - elapsed_usec : 0;
	if (finished > 0 && max_trials > finished)
		eta = (uint64_t)((double)elapsed_usec / finished * (max_trials - finished));
	else if (max_trials == 0 || finished == 0)
		eta = wall_left; /* no rate yet, or no trial budget: the wall clock bounds it */
	return eta < wall_left ? eta : wall_left;
}
