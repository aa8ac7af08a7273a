/* SPDX-License-Identifier: Apache-2.0 */
/* loop: a thin epoll event loop (level-triggered). Each watched fd is a struct loop_ev embedded in
 * its owner; the callback gets the ev back and finds its owner with container_of. Closing an fd
 * inside a callback is safe for the rest of the batch only if the owner's memory lives until the
 * batch ends and ev->fd is set to -1 (the loop skips such events): owners free after loop_run
 * returns. Not thread-safe: one loop per thread. */
#ifndef KVS_LOOP_H
#define KVS_LOOP_H

#include <stddef.h>
#include <stdint.h>

#define container_of(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))

struct loop;

struct loop_ev {
	int fd;
	uint32_t events; /* currently registered interest (EPOLLIN, EPOLLOUT, ...) */
	int added;	 /* registered with epoll */
	void (*cb)(struct loop_ev *ev, uint32_t events);
};

/* Creates a loop. Returns 0 and *out, or a negative errno. */
int loop_new(struct loop **out);
void loop_free(struct loop *l);

/* Sets the interest of ev->fd to events (adds it on first use; 0 keeps it registered with no
 * interest). A no-op when unchanged. Returns 0 or a negative errno. */
int loop_set(struct loop *l, struct loop_ev *ev, uint32_t events);
/* Removes ev->fd from the loop (for an fd that stays open). */
void loop_del(struct loop *l, struct loop_ev *ev);
/* Forgets ev without a system call: for an fd about to be closed (closing its last reference
 * removes it from epoll). */
static inline void loop_forget(struct loop_ev *ev)
{
	ev->added = 0;
	ev->events = 0;
}

/* Is an event ready now? (Nothing is consumed: the loop is level-triggered, the next loop_run
 * reports it.) For work done a slice at a time while the loop is idle. */
int loop_ready(struct loop *l);
/* Waits up to timeout_ms (-1: forever) and dispatches the ready events. Returns the number
 * dispatched or a negative errno (-EINTR is returned as 0). */
int loop_run(struct loop *l, int timeout_ms);

#endif
