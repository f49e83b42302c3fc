/* spawn-util.c — see spawn-util.h; child.c does the work. */
#include "spawn-util.h"

#include "child.h"

int spawn_block_sigchld(void)
{
	return child_block_sigchld();
}
