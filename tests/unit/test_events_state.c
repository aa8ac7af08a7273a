// SPDX-License-Identifier: Apache-2.0
// events_state: the move table of a worker's KV-event stream (kv/events_state.h) walked whole.
// Every (state, input) pair is checked against the moves written out below, so a move added to or
// dropped from the table without this list fails here; every pair not listed must be refused.
// Then the paths the runtime takes (joining, a gap, a failed sync, a lost publisher) as chains of
// moves, and the names /debug/index shows.
#include <string.h>

#include "kv/events_state.h"
#include "tap.h"

struct move {
	enum events_state from;
	enum events_input in;
	enum events_state to;
};

#define M(f, i, t)                                                                                 \
	{                                                                                          \
		EVENTS_ST_##f, EVENTS_IN_##i, EVENTS_ST_##t                                        \
	}
static const struct move legal[] = {
    M(FREE, ADD, WAITING),

    M(WAITING, SYNC, SYNCING),
    M(WAITING, TAKE, LIVE),
    M(WAITING, FORGET, WAITING),
    M(WAITING, REMOVE, FREE),

    M(TAKING, SYNC, SYNCING),
    M(TAKING, TAKE, LIVE),
    M(TAKING, FORGET, WAITING),
    M(TAKING, REMOVE, FREE),

    M(SYNCING, SYNC_FED, SYNCING_FED),
    M(SYNCING, REPLAY_OK, TAKING),
    M(SYNCING, REPLAY_BAD, TAKING),
    M(SYNCING, FORGET, WAITING),
    M(SYNCING, REMOVE, FREE),

    M(SYNCING_FED, REPLAY_OK, LIVE),
    M(SYNCING_FED, REPLAY_BAD, TAKING),
    M(SYNCING_FED, FORGET, WAITING),
    M(SYNCING_FED, REMOVE, FREE),

    M(REPLAYING, REPLAY_OK, LIVE),
    M(REPLAYING, REPLAY_BAD, TAKING),
    M(REPLAYING, FORGET, WAITING),
    M(REPLAYING, REMOVE, FREE),

    M(LIVE, GAP, REPLAYING),
    M(LIVE, RESTART, WAITING),
    M(LIVE, FORGET, WAITING),
    M(LIVE, REMOVE, FREE),
};
#undef M
#define NLEGAL (sizeof(legal) / sizeof(legal[0]))

static const struct move *find(enum events_state s, enum events_input in)
{
	for (size_t k = 0; k < NLEGAL; k++)
		if (legal[k].from == s && legal[k].in == in)
			return &legal[k];
	return NULL;
}

/* Follows ins[0..n) from s; EVENTS_ST_INVALID as soon as one is refused. */
static enum events_state walk(enum events_state s, const enum events_input *ins, size_t n)
{
	for (size_t i = 0; i < n && s != EVENTS_ST_INVALID; i++)
		s = events_state_next(s, ins[i]);
	return s;
}
#define WALK(s, ...)                                                                               \
	walk(EVENTS_ST_##s, (const enum events_input[]){__VA_ARGS__},                              \
	     sizeof((const enum events_input[]){__VA_ARGS__}) / sizeof(enum events_input))

int main(void)
{
	int wrong = 0, refused = 0, moves = 0;

	/* every pair: the listed move, or refused */
	for (int s = 0; s < EVENTS_ST_COUNT; s++)
		for (int in = 0; in < EVENTS_IN_COUNT; in++) {
			const struct move *m = find((enum events_state)s, (enum events_input)in);
			enum events_state to =
			    events_state_next((enum events_state)s, (enum events_input)in);

			if (m) {
				moves++;
				if (to != m->to) {
					wrong++;
					CHECK(0, "%s --%s--> %s, want %s",
					      events_state_name((enum events_state)s),
					      events_input_name((enum events_input)in),
					      events_state_name(to), events_state_name(m->to));
				}
			} else if (to != EVENTS_ST_INVALID) {
				wrong++;
				CHECK(0, "%s --%s--> %s: a move not in the list",
				      events_state_name((enum events_state)s),
				      events_input_name((enum events_input)in),
				      events_state_name(to));
			} else {
				refused++;
			}
		}
	CHECK_EQ(moves, (int)NLEGAL, "every listed move is in the table");
	CHECK_EQ(wrong, 0, "no pair leads elsewhere than listed");
	CHECK_EQ(refused, EVENTS_ST_COUNT * EVENTS_IN_COUNT - (int)NLEGAL,
		 "every other pair is refused");

	/* out of range: refused, never read past the table */
	CHECK_EQ(events_state_next(EVENTS_ST_INVALID, EVENTS_IN_ADD), EVENTS_ST_INVALID,
		 "no move from EVENTS_ST_INVALID");
	CHECK_EQ(events_state_next(EVENTS_ST_LIVE, EVENTS_IN_COUNT), EVENTS_ST_INVALID,
		 "no move on an input out of range");
	CHECK_EQ(events_state_next((enum events_state) - 1, EVENTS_IN_ADD), EVENTS_ST_INVALID,
		 "no move from a negative state");

	/* a few refusals spelled out: what the runtime must never do */
	CHECK_EQ(events_state_next(EVENTS_ST_FREE, EVENTS_IN_REMOVE), EVENTS_ST_INVALID,
		 "a free slot cannot be removed");
	CHECK_EQ(events_state_next(EVENTS_ST_LIVE, EVENTS_IN_ADD), EVENTS_ST_INVALID,
		 "a slot in use cannot be added again");
	CHECK_EQ(events_state_next(EVENTS_ST_REPLAYING, EVENTS_IN_GAP), EVENTS_ST_INVALID,
		 "no second replay while one runs");
	CHECK_EQ(events_state_next(EVENTS_ST_REPLAYING, EVENTS_IN_SYNC_FED), EVENTS_ST_INVALID,
		 "a gap replay is not an initial sync");
	CHECK_EQ(events_state_next(EVENTS_ST_WAITING, EVENTS_IN_GAP), EVENTS_ST_INVALID,
		 "no gap without a position");
	CHECK_EQ(events_state_next(EVENTS_ST_WAITING, EVENTS_IN_REPLAY_OK), EVENTS_ST_INVALID,
		 "no replay end without a replay");

	/* the runtime's paths as chains of moves */
	CHECK_EQ(WALK(FREE, EVENTS_IN_ADD, EVENTS_IN_SYNC, EVENTS_IN_SYNC_FED, EVENTS_IN_REPLAY_OK),
		 EVENTS_ST_LIVE, "joining: synced from the buffer, then live");
	CHECK_EQ(WALK(FREE, EVENTS_IN_ADD, EVENTS_IN_SYNC, EVENTS_IN_REPLAY_OK, EVENTS_IN_TAKE),
		 EVENTS_ST_LIVE, "joining an empty buffer: taking, then the first batch");
	CHECK_EQ(WALK(LIVE, EVENTS_IN_GAP, EVENTS_IN_REPLAY_BAD, EVENTS_IN_TAKE), EVENTS_ST_LIVE,
		 "a gap not filled: given up, the stream taken again");
	CHECK_EQ(
	    WALK(LIVE, EVENTS_IN_RESTART, EVENTS_IN_SYNC, EVENTS_IN_REPLAY_BAD, EVENTS_IN_SYNC),
	    EVENTS_ST_SYNCING, "a restart, a failed sync, the publisher back: syncing");
	CHECK_EQ(WALK(SYNCING_FED, EVENTS_IN_FORGET, EVENTS_IN_REMOVE), EVENTS_ST_FREE,
		 "forgotten mid-sync, then removed: free");
	CHECK_EQ(WALK(TAKING, EVENTS_IN_SYNC_FED), EVENTS_ST_INVALID,
		 "a chain with a refused move ends refused");

	/* what the runtime reads off the states */
	for (int s = 0; s < EVENTS_ST_COUNT; s++) {
		enum events_state e = (enum events_state)s;
		int rep = e == EVENTS_ST_SYNCING || e == EVENTS_ST_SYNCING_FED ||
			  e == EVENTS_ST_REPLAYING;
		int seq =
		    e == EVENTS_ST_SYNCING_FED || e == EVENTS_ST_REPLAYING || e == EVENTS_ST_LIVE;

		CHECK(events_state_replaying(e) == rep && events_state_has_seq(e) == seq &&
			  events_state_initial(e) == (rep && e != EVENTS_ST_REPLAYING),
		      "%s: replaying %d, has seq %d", events_state_name(e), rep, seq);
	}

	/* names: one each, distinct, "?" out of range */
	for (int s = 0; s < EVENTS_ST_COUNT; s++)
		for (int t = s + 1; t < EVENTS_ST_COUNT; t++)
			if (!strcmp(events_state_name((enum events_state)s),
				    events_state_name((enum events_state)t)))
				CHECK(0, "state names %d and %d are the same", s, t);
	CHECK_STREQ(events_state_name(EVENTS_ST_SYNCING_FED), "syncing_fed", "a state's name");
	CHECK_STREQ(events_state_name(EVENTS_ST_INVALID), "?", "no name out of range");
	CHECK_STREQ(events_input_name(EVENTS_IN_REPLAY_BAD), "replay_bad", "an input's name");
	CHECK_STREQ(events_input_name(EVENTS_IN_COUNT), "?", "no input name out of range");
	return tap_done();
}
