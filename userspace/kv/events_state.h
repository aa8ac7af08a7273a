/* SPDX-License-Identifier: Apache-2.0 */
/* events_state: where one worker's KV-event stream stands, as one value, and the moves between
 * values (the sequence rules of events.h; the whole story in docs/internals/events.md).
 *
 * A worker slot of the events runtime is in exactly one state. What used to be separate marks
 * (in use, sequence known, replay running, that replay an initial sync, that sync fed, take the
 * stream as it comes) are read off the state; the only marks kept beside it are the bits of
 * events_flags, which change independently of it (a lost publisher comes back whatever the
 * stream did meanwhile).
 *
 * Every change of state goes through events_state_next(state, input): the table in
 * events_state.c. An input that has no move from a state is refused (EVENTS_ST_INVALID): the
 * runtime asserts on it. */
#ifndef KVS_EVENTS_STATE_H
#define KVS_EVENTS_STATE_H

#include <stdbool.h>

/* The states of a worker slot. */
enum events_state {
	EVENTS_ST_FREE,	   /* no worker in this slot */
	EVENTS_ST_WAITING, /* no position in the stream: the first live batch with seq > 0 starts
			    * an initial sync (if there is a replay endpoint), else gives it */
	EVENTS_ST_TAKING,  /* no position, after an initial sync that failed or found nothing, or
			    * a replay given up: the next live batch gives it, no sync asked */
	EVENTS_ST_SYNCING, /* initial sync (replay from 0) running, nothing delivered yet; live
			    * batches are queued */
	EVENTS_ST_SYNCING_FED, /* initial sync running and delivering: the position is the
				* replay's */
	EVENTS_ST_REPLAYING,   /* gap replay running: the worker is stale, live batches queued */
	EVENTS_ST_LIVE,	       /* position known: each batch at it is applied */
	EVENTS_ST_COUNT,
	EVENTS_ST_INVALID = EVENTS_ST_COUNT /* events_state_next: no such move */
};

/* What moves a worker from one state to the next. */
enum events_input {
	EVENTS_IN_ADD,	      /* subscribed (events_worker_add) */
	EVENTS_IN_SYNC,	      /* an initial sync asked (replay from 0) */
	EVENTS_IN_SYNC_FED,   /* the initial sync delivered its first batch */
	EVENTS_IN_GAP,	      /* a gap replay asked (from the expected seq) */
	EVENTS_IN_REPLAY_OK,  /* the replay's terminator: complete */
	EVENTS_IN_REPLAY_BAD, /* the replay given up (timeout, short, refused, live queue full) */
	EVENTS_IN_TAKE,	      /* a live batch gives the position */
	EVENTS_IN_RESTART,    /* a live batch below the position: the worker restarted */
	EVENTS_IN_FORGET,     /* publisher lost, or resync: blocks and position forgotten */
	EVENTS_IN_REMOVE,     /* unsubscribed (events_worker_remove, events_free) */
	EVENTS_IN_COUNT
};

/* Marks beside the state, independent of it and of each other. */
enum events_flags {
	EVENTS_F_PUB_LOST = 1u << 0,	  /* the SUB lost its publisher: synced again once back */
	EVENTS_F_CHECK_RESTART = 1u << 1, /* the position at the loss is kept, to tell a restart */
};

/* The state input leads to from s, or EVENTS_ST_INVALID when there is no such move. */
enum events_state events_state_next(enum events_state s, enum events_input in);

/* Names, for logs and /debug/index ("free", "waiting", ...; "?" out of range). */
const char *events_state_name(enum events_state s);
const char *events_input_name(enum events_input in);

/* What the states mean for the runtime. */
static inline bool events_state_replaying(enum events_state s)
{
	return s == EVENTS_ST_SYNCING || s == EVENTS_ST_SYNCING_FED || s == EVENTS_ST_REPLAYING;
}
/* An initial sync (replay from 0) is running. */
static inline bool events_state_initial(enum events_state s)
{
	return s == EVENTS_ST_SYNCING || s == EVENTS_ST_SYNCING_FED;
}
/* The expected seq (next_seq) is meaningful. */
static inline bool events_state_has_seq(enum events_state s)
{
	return s == EVENTS_ST_SYNCING_FED || s == EVENTS_ST_REPLAYING || s == EVENTS_ST_LIVE;
}

#endif
