/* spawn-util.h — blocking SIGCHLD for code that forks and watches its
 * children itself; child.h starts and watches children for everyone else. */
#pragma once

/* Blocks SIGCHLD in the calling process, as sd_event_add_child() requires
 * (the same as child_block_sigchld). Returns 0 or a negative errno. */
int spawn_block_sigchld(void);
