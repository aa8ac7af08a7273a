// SPDX-License-Identifier: Apache-2.0
// events_state: the move table of events_state.h. One row a state, one column an input; a
// zero entry is no move (the states are numbered from 1 in the table so that 0 can say so).
#include "kv/events_state.h"

#define TO(s) ((unsigned char)(EVENTS_ST_##s + 1))

static const unsigned char next[EVENTS_ST_COUNT][EVENTS_IN_COUNT] = {
    [EVENTS_ST_FREE] =
	{
	    [EVENTS_IN_ADD] = TO(WAITING),
	},
    [EVENTS_ST_WAITING] =
	{
	    [EVENTS_IN_SYNC] = TO(SYNCING),
	    [EVENTS_IN_TAKE] = TO(LIVE),
	    [EVENTS_IN_FORGET] = TO(WAITING),
	    [EVENTS_IN_REMOVE] = TO(FREE),
	},
    [EVENTS_ST_TAKING] =
	{
	    /* its publisher back after a loss: synced as on joining */
	    [EVENTS_IN_SYNC] = TO(SYNCING),
	    [EVENTS_IN_TAKE] = TO(LIVE),
	    [EVENTS_IN_FORGET] = TO(WAITING),
	    [EVENTS_IN_REMOVE] = TO(FREE),
	},
    [EVENTS_ST_SYNCING] =
	{
	    [EVENTS_IN_SYNC_FED] = TO(SYNCING_FED),
	    /* an empty answer: nothing buffered there, the live stream taken as it comes */
	    [EVENTS_IN_REPLAY_OK] = TO(TAKING),
	    [EVENTS_IN_REPLAY_BAD] = TO(TAKING),
	    [EVENTS_IN_FORGET] = TO(WAITING),
	    [EVENTS_IN_REMOVE] = TO(FREE),
	},
    [EVENTS_ST_SYNCING_FED] =
	{
	    [EVENTS_IN_REPLAY_OK] = TO(LIVE),
	    [EVENTS_IN_REPLAY_BAD] = TO(TAKING),
	    [EVENTS_IN_FORGET] = TO(WAITING),
	    [EVENTS_IN_REMOVE] = TO(FREE),
	},
    [EVENTS_ST_REPLAYING] =
	{
	    [EVENTS_IN_REPLAY_OK] = TO(LIVE),
	    [EVENTS_IN_REPLAY_BAD] = TO(TAKING),
	    [EVENTS_IN_FORGET] = TO(WAITING),
	    [EVENTS_IN_REMOVE] = TO(FREE),
	},
    [EVENTS_ST_LIVE] =
	{
	    [EVENTS_IN_GAP] = TO(REPLAYING),
	    [EVENTS_IN_RESTART] = TO(WAITING),
	    [EVENTS_IN_FORGET] = TO(WAITING),
	    [EVENTS_IN_REMOVE] = TO(FREE),
	},
};

enum events_state events_state_next(enum events_state s, enum events_input in)
{
	if ((unsigned)s >= EVENTS_ST_COUNT || (unsigned)in >= EVENTS_IN_COUNT || !next[s][in])
		return EVENTS_ST_INVALID;
	return (enum events_state)(next[s][in] - 1);
}

const char *events_state_name(enum events_state s)
{
	static const char *const names[EVENTS_ST_COUNT] = {
	    [EVENTS_ST_FREE] = "free",
	    [EVENTS_ST_WAITING] = "waiting",
	    [EVENTS_ST_TAKING] = "taking",
	    [EVENTS_ST_SYNCING] = "syncing",
	    [EVENTS_ST_SYNCING_FED] = "syncing_fed",
	    [EVENTS_ST_REPLAYING] = "replaying",
	    [EVENTS_ST_LIVE] = "live",
	};

	return (unsigned)s < EVENTS_ST_COUNT ? names[s] : "?";
}

const char *events_input_name(enum events_input in)
{
	static const char *const names[EVENTS_IN_COUNT] = {
	    [EVENTS_IN_ADD] = "add",
	    [EVENTS_IN_SYNC] = "sync",
	    [EVENTS_IN_SYNC_FED] = "sync_fed",
	    [EVENTS_IN_GAP] = "gap",
	    [EVENTS_IN_REPLAY_OK] = "replay_ok",
	    [EVENTS_IN_REPLAY_BAD] = "replay_bad",
	    [EVENTS_IN_TAKE] = "take",
	    [EVENTS_IN_RESTART] = "restart",
	    [EVENTS_IN_FORGET] = "forget",
	    [EVENTS_IN_REMOVE] = "remove",
	};

	return (unsigned)in < EVENTS_IN_COUNT ? names[in] : "?";
}
