// SPDX-License-Identifier: Apache-2.0
/* kvbench's trace module (tools/kvbench/trace.c, built in here: unit tests link only libkvs.a):
 * hash ids to tokens (fixed, equal for equal ids, in the safe range), the B/512 scaling and the
 * last-block cut and clamp, max_tokens, the ideal reuse on hand-computed traces, every format
 * error with its line number, skip/limit, and the file reader agreeing with the in-memory one. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tap.h"

#include "../../tools/kvbench/trace.c"

/* Parses text (all rows). Returns trace_parse's result; err gets its message. */
static int parse(const char *text, struct trace *t, char *err, size_t errlen)
{
	err[0] = '\0';
	return trace_parse(text, strlen(text), 0, 0, t, err, errlen);
}

static void test_tokens(void)
{
	/* Golden values: the generator is part of the trace format's replay (a change would make
	 * runs of different versions send different prompts), so it is pinned. */
	static const struct {
		uint64_t id;
		uint32_t pos, want;
	} golden[] = {
	    {0, 0, 48055},
	    {0, 1, 133430},
	    {1, 0, 25158},
	    {123456789, 511, 102821},
	};
	uint32_t lo = UINT32_MAX, hi = 0;
	bool same_block = true;

	for (size_t i = 0; i < sizeof(golden) / sizeof(golden[0]); i++)
		CHECK_EQ(trace_token(golden[i].id, golden[i].pos), golden[i].want,
			 "trace_token is the pinned splitmix64 of (id, position)");
	for (uint64_t id = 0; id < 1000; id++)
		for (uint32_t p = 0; p < TRACE_FORMAT_BLOCK; p++) {
			uint32_t v = trace_token(id, p);

			lo = v < lo ? v : lo;
			hi = v > hi ? v : hi;
		}
	CHECK(lo >= TRACE_TOKEN_FIRST && hi < TRACE_TOKEN_FIRST + TRACE_TOKEN_COUNT,
	      "512,000 tokens all in [%u, %u) (got %u..%u)", TRACE_TOKEN_FIRST,
	      TRACE_TOKEN_FIRST + TRACE_TOKEN_COUNT, lo, hi);
	CHECK(hi < 151643, "no token is a Qwen3 special or added token (ids from 151643)");
	CHECK(hi - lo > TRACE_TOKEN_COUNT * 9 / 10, "tokens spread over the range");
	for (uint32_t p = 0; p < 16; p++)
		same_block &= trace_token(7, p) == trace_token(8, p);
	CHECK(!same_block, "different ids give different blocks");
}

static void test_prompts(void)
{
	const char *text = "{\"timestamp\":0,\"input_length\":1536,\"output_length\":1,"
			   "\"hash_ids\":[5,6,7]}\n"
			   "{\"timestamp\":1,\"input_length\":1300,\"output_length\":1,"
			   "\"hash_ids\":[5,6,8]}\n";
	struct trace t;
	char err[256];
	uint32_t a[1536], b[1536], a16[48], again[48];
	uint64_t la, lb;

	CHECK_EQ(parse(text, &t, err, sizeof(err)), 0, "two rows parse");
	CHECK_EQ(t.n, 2, "two rows kept");
	la = trace_prompt_len(&t.rows[0], 512, NULL);
	lb = trace_prompt_len(&t.rows[1], 512, NULL);
	CHECK_EQ(la, 1536, "row 0: 3 full blocks of 512");
	CHECK_EQ(lb, 1300, "row 1: 2 full blocks + 276");
	trace_prompt(&t, &t.rows[0], 512, a);
	trace_prompt(&t, &t.rows[1], 512, b);
	CHECK(!memcmp(a, b, 1024 * sizeof(uint32_t)), "a shared leading run of ids: equal tokens");
	CHECK(memcmp(a + 1024, b + 1024, 276 * sizeof(uint32_t)), "different ids: other tokens");
	CHECK_EQ(a[600], trace_token(6, 600 - 512), "token 600 is id 6's token 88");
	trace_prompt(&t, &t.rows[0], 16, a16);
	CHECK(!memcmp(a16, a, 16 * sizeof(uint32_t)) && !memcmp(a16 + 16, a + 512, 64) &&
		  !memcmp(a16 + 32, a + 1024, 64),
	      "B=16: each block is the first 16 tokens of the same id's block of 512");
	trace_prompt(&t, &t.rows[0], 16, again);
	CHECK(!memcmp(a16, again, sizeof(again)), "the same row gives the same prompt again");
	trace_free(&t);
}

static void test_scaling(void)
{
	static const struct {
		uint64_t input;
		size_t nids;
		uint32_t bt;
		uint64_t want_len;
		uint32_t want_last;
		bool want_clamped;
		const char *what;
	} rows[] = {
	    {40160, 79, 512, 40160, 224, false, "the sample's row 1 as recorded"},
	    {40160, 79, 16, 1255, 7, false, "B=16: round(1255.0), 78 full blocks + 7"},
	    {40160, 79, 32, 2510, 14, false, "B=32: 2510 = 78 * 32 + 14"},
	    {1024, 2, 16, 32, 16, false, "whole blocks stay whole"},
	    {256, 1, 16, 8, 8, false, "one partial block"},
	    {16, 1, 16, 1, 1, false, "0.5 rounds up"},
	    {1400, 3, 16, 44, 12, false, "1400 * 16 / 512 = 43.75 -> 44"},
	    {513, 2, 16, 17, 1, false, "a last block rounding to 0 keeps 1 token"},
	    {1030, 3, 16, 33, 1, false, "1030 / 32 = 32.19 -> 32 = 2 blocks: the third keeps 1"},
	    {767, 2, 1, 2, 1, false, "B=1: 767 / 512 rounds to 1, the second id keeps its token"},
	    {100, 3, 16, 33, 1, true, "more ids than the length fills: 1 token each past the rest"},
	    {2000, 2, 16, 32, 16, true, "a length past its last id: whole blocks only"},
	    {2000, 2, 512, 1024, 512, true, "the same at 512"},
	    {1, 1, 512, 1, 1, false, "one token"},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct trace_row r = {.input_length = rows[i].input, .nids = rows[i].nids};
		bool clamped = !rows[i].want_clamped;
		uint64_t len = trace_prompt_len(&r, rows[i].bt, &clamped);

		CHECK(
		    len == rows[i].want_len &&
			trace_block_len(&r, rows[i].bt, rows[i].nids - 1) == rows[i].want_last &&
			clamped == rows[i].want_clamped &&
			(rows[i].nids < 2 || trace_block_len(&r, rows[i].bt, 0) == rows[i].bt) &&
			trace_block_len(&r, rows[i].bt, rows[i].nids) == 0,
		    "scaling: %s (input %llu, %zu ids, B=%u: want %llu, last %u%s; got %llu, last "
		    "%u%s)",
		    rows[i].what, (unsigned long long)rows[i].input, rows[i].nids, rows[i].bt,
		    (unsigned long long)rows[i].want_len, rows[i].want_last,
		    rows[i].want_clamped ? ", clamped" : "", (unsigned long long)len,
		    trace_block_len(&r, rows[i].bt, rows[i].nids - 1), clamped ? ", clamped" : "");
	}
}

static void test_max_tokens(void)
{
	static const struct {
		uint64_t out;
		uint32_t bt, cap, want;
		const char *what;
	} rows[] = {
	    {64, 16, 0, 2, "64 at B=16"},	 {10, 16, 0, 1, "rounds to 0: at least 1"},
	    {0, 512, 0, 1, "0: at least 1"},	 {16, 16, 0, 1, "0.5 rounds up"},
	    {48, 16, 0, 2, "1.5 rounds up"},	 {800, 16, 0, 25, "800 at B=16"},
	    {800, 512, 64, 64, "capped"},	 {800, 512, 0, 800, "no cap: as recorded"},
	    {893, 32, 100, 56, "under the cap"},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct trace_row r = {.output_length = rows[i].out};

		CHECK_EQ(trace_max_tokens(&r, rows[i].bt, rows[i].cap), rows[i].want, rows[i].what);
	}
}

/* The same four rows as the comment in test_ideal, one JSON line each. */
static const char IDEAL4[] =
    "{\"timestamp\":0,\"input_length\":1536,\"output_length\":8,\"hash_ids\":[1,2,3]}\n"
    "{\"timestamp\":10,\"input_length\":1400,\"output_length\":8,\"hash_ids\":[1,2,4]}\n"
    "{\"timestamp\":20,\"input_length\":2048,\"output_length\":8,\"hash_ids\":[1,2,4,5]}\n"
    "{\"timestamp\":30,\"input_length\":1536,\"output_length\":8,\"hash_ids\":[1,2,3]}\n";

static void test_ideal(void)
{
	/* By hand, B=16 (one id = one 16-token KV block when full):
	 *   [1,2,3]   1536 -> 48 tokens                         cached 0
	 *   [1,2,4]   1400 -> 44 (16+16+12): shares [1,2] = 32  cached 32
	 *   [1,2,4,5] 2048 -> 64: [1,2] 32 + 12 of id 4's cut block = 44, whole blocks: 32
	 *   [1,2,3]   1536 -> 48: all 48 shared, at most 47: whole blocks 32
	 * 204 tokens, 96 cached. At B=512: 1536, 1400 (1024 shared), 2048 (1400 shared: 1392
	 * in whole blocks), 1536 (at most 1535: 1520): 6520 tokens, 3936 cached. */
	static const struct {
		uint32_t bt;
		uint64_t prompt, cached, rows[4];
		size_t hits;
	} cases[] = {
	    {16, 204, 96, {0, 32, 32, 32}, 3},
	    {512, 6520, 3936, {0, 1024, 1392, 1520}, 3},
	};
	struct trace t;
	char err[256];

	CHECK_EQ(parse(IDEAL4, &t, err, sizeof(err)), 0, "the 4-row trace parses");
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct trace_reuse u;
		uint64_t per[4];

		CHECK_EQ(trace_ideal(&t, cases[i].bt, 16, &u, per), 0, "trace_ideal runs");
		CHECK(u.prompt_tokens == cases[i].prompt && u.cached_tokens == cases[i].cached &&
			  u.hit_rows == cases[i].hits,
		      "B=%u: %llu tokens, %llu cached, %zu rows hit (got %llu, %llu, %zu)",
		      cases[i].bt, (unsigned long long)cases[i].prompt,
		      (unsigned long long)cases[i].cached, cases[i].hits,
		      (unsigned long long)u.prompt_tokens, (unsigned long long)u.cached_tokens,
		      u.hit_rows);
		CHECK(!memcmp(per, cases[i].rows, sizeof(per)), "B=%u: per row %llu %llu %llu %llu",
		      cases[i].bt, (unsigned long long)per[0], (unsigned long long)per[1],
		      (unsigned long long)per[2], (unsigned long long)per[3]);
		CHECK(u.ratio == (double)cases[i].cached / cases[i].prompt, "B=%u: the ratio",
		      cases[i].bt);
	}
	trace_free(&t);
}

static void test_errors(void)
{
	static const struct {
		const char *text;
		size_t skip, limit;
		const char *want; /* the whole message */
	} rows[] = {
	    {"not json\n", 0, 0, "line 1: bad JSON near column 1"},
	    {"{\"timestamp\":0,\"input_length\":1,\"output_length\":1,\"hash_ids\":[1]}\n"
	     "{\"timestamp\":1",
	     0, 0, "line 2: bad JSON near column 14"},
	    {"\n\n  \n{", 0, 0, "line 4: bad JSON near column 1"},
	    {"{\"timestamp\":0,\"input_length\":1,\"output_length\":1,\"hash_ids\":[1]} x\n", 0, 0,
	     "line 1: bad JSON near column 67 (text after the object)"},
	    {"{\"timestamp\":0,\"input_length\":1,,\"output_length\":1}\n", 0, 0,
	     "line 1: bad JSON near column 34"},
	    {"[1,2]\n", 0, 0, "line 1: not a JSON object"},
	    {"{\"input_length\":1,\"output_length\":1,\"hash_ids\":[1]}\n", 0, 0,
	     "line 1: missing field \"timestamp\""},
	    {"{\"timestamp\":0,\"output_length\":1,\"hash_ids\":[1]}\n", 0, 0,
	     "line 1: missing field \"input_length\""},
	    {"{\"timestamp\":0,\"input_length\":1,\"hash_ids\":[1]}\n", 0, 0,
	     "line 1: missing field \"output_length\""},
	    {"{\"timestamp\":0,\"input_length\":1,\"output_length\":1}\n", 0, 0,
	     "line 1: missing field \"hash_ids\""},
	    {"{\"timestamp\":\"0\",\"input_length\":1,\"output_length\":1,\"hash_ids\":[1]}\n", 0,
	     0, "line 1: \"timestamp\" is not a number"},
	    {"{\"timestamp\":0,\"input_length\":\"1\",\"output_length\":1,\"hash_ids\":[1]}\n", 0,
	     0, "line 1: \"input_length\" is not a number"},
	    {"{\"timestamp\":0,\"input_length\":null,\"output_length\":1,\"hash_ids\":[1]}\n", 0, 0,
	     "line 1: \"input_length\" is not a number"},
	    {"{\"timestamp\":0,\"input_length\":-5,\"output_length\":1,\"hash_ids\":[1]}\n", 0, 0,
	     "line 1: negative \"input_length\" (-5)"},
	    {"{\"timestamp\":0,\"input_length\":5,\"output_length\":-1,\"hash_ids\":[1]}\n", 0, 0,
	     "line 1: negative \"output_length\" (-1)"},
	    {"{\"timestamp\":0,\"input_length\":1.5,\"output_length\":1,\"hash_ids\":[1]}\n", 0, 0,
	     "line 1: \"input_length\" is not an integer (1.5)"},
	    {"{\"timestamp\":0,\"input_length\":2000000000,\"output_length\":1,\"hash_ids\":[1]}\n",
	     0, 0, "line 1: \"input_length\" 2000000000 is above 1073741824"},
	    {"{\"timestamp\":0,\"input_length\":1,\"output_length\":1,\"hash_ids\":{}}\n", 0, 0,
	     "line 1: \"hash_ids\" is not an array"},
	    {"{\"timestamp\":0,\"input_length\":600,\"output_length\":1,\"hash_ids\":[1,-2]}\n", 0,
	     0, "line 1: hash_ids[1] is not a non-negative integer"},
	    {"{\"timestamp\":0,\"input_length\":600,\"output_length\":1,\"hash_ids\":[1,\"a\"]}\n",
	     0, 0, "line 1: hash_ids[1] is not a non-negative integer"},
	    {"{\"timestamp\":0,\"input_length\":6,\"output_length\":1,\"hash_ids\":[1.5]}\n", 0, 0,
	     "line 1: hash_ids[0] is not a non-negative integer"},
	    {"{\"timestamp\":0,\"input_length\":10,\"output_length\":1,\"hash_ids\":[]}\n", 0, 0,
	     "line 1: empty \"hash_ids\" with input_length 10"},
	    {"{\"timestamp\":0,\"input_length\":0,\"output_length\":1,\"hash_ids\":[]}\n", 0, 0,
	     "line 1: input_length 0: an empty prompt (vLLM refuses it)"},
	    {"{\"timestamp\":5,\"input_length\":1,\"output_length\":1,\"hash_ids\":[1]}\n\n"
	     "{\"timestamp\":3,\"input_length\":1,\"output_length\":1,\"hash_ids\":[1]}\n",
	     0, 0,
	     "line 3: timestamp 3 is before the previous row's 5 (rows must be sorted by time)"},
	    {"{\"timestamp\":0,\"input_length\":1,\"output_length\":1,\"hash_ids\":[1]}\n"
	     "{\"timestamp\":1,\"input_length\":-1,\"output_length\":1,\"hash_ids\":[1]}\n"
	     "{\"timestamp\":2,\"input_length\":1,\"output_length\":1,\"hash_ids\":[1]}\n",
	     2, 0, "line 2: negative \"input_length\" (-1)"},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct trace t;
		char err[256] = "";
		int rc = trace_parse(rows[i].text, strlen(rows[i].text), rows[i].skip,
				     rows[i].limit, &t, err, sizeof(err));

		CHECK(rc == -EINVAL && !strcmp(err, rows[i].want), "refused: %s (got %d, \"%s\")",
		      rows[i].want, rc, err);
		trace_free(&t);
	}
}

static void test_rows(void)
{
	const char *text =
	    "{\"timestamp\":0,\"input_length\":10,\"output_length\":1,\"hash_ids\":[1],"
	    "\"session_id\":\"a\",\"extra\":{\"x\":[1,2]}}\r\n"
	    "\n"
	    "{\"timestamp\":0,\"input_length\":600,\"output_length\":2,\"hash_ids\":[1,2]}\n"
	    "  {\"hash_ids\":[3],\"output_length\":3,\"input_length\":30,\"timestamp\":7.5}  \n"
	    "{\"timestamp\":9,\"input_length\":40,\"output_length\":4,\"hash_ids\":[4]}\n"
	    "{\"timestamp\":1,\"input_length\":-1}"; /* past the limit: never read */
	struct trace t;
	char err[256] = "";
	int rc;

	rc = trace_parse(text, strlen(text), 0, 4, &t, err, sizeof(err));
	CHECK(rc == 0 && t.n == 4,
	      "extra fields, CRLF, blank lines, any key order; limit 4 stops "
	      "before a bad line (rc %d, %zu rows, %s)",
	      rc, t.n, err);
	CHECK(t.n == 4 && t.rows[0].line == 1 && t.rows[1].line == 3 && t.rows[2].line == 4 &&
		  t.rows[3].line == 5,
	      "line numbers count blank lines");
	CHECK(t.n == 4 && t.rows[2].t_ms == 7.5 && t.rows[2].input_length == 30 &&
		  t.rows[2].output_length == 3 && t.rows[1].nids == 2 &&
		  t.ids[t.rows[1].ids_off + 1] == 2 && t.ids[t.rows[3].ids_off] == 4,
	      "fields read");
	trace_free(&t);
	rc = trace_parse(text, strlen(text), 2, 2, &t, err, sizeof(err));
	CHECK(rc == 0 && t.n == 2 && t.rows[0].line == 4 && t.rows[1].line == 5 &&
		  t.ids[t.rows[0].ids_off] == 3 && t.nids == 2,
	      "skip 2 rows, keep 2: rows at lines 4 and 5, only their ids kept");
	trace_free(&t);
	rc = trace_parse(text, strlen(text), 9, 0, &t, err, sizeof(err));
	CHECK(rc == -EINVAL && !strcmp(err, "line 6: negative \"input_length\" (-1)"),
	      "without a limit the last line is read (%s)", err);
	trace_free(&t);
	rc = trace_parse("", 0, 0, 0, &t, err, sizeof(err));
	CHECK(rc == 0 && t.n == 0, "an empty text: no rows");
	trace_free(&t);
}

/* trace_load on a temporary copy of text gives what trace_parse gives. */
static void test_load(void)
{
	char path[] = "/tmp/test_trace.XXXXXX", err[512] = "";
	int fd = mkstemp(path);
	struct trace a, b;
	struct trace_reuse ua, ub;
	const char *fixture = "tests/kvsim/traces/small.jsonl";
	int rc;

	CHECK(fd >= 0 && write(fd, IDEAL4, strlen(IDEAL4)) == (ssize_t)strlen(IDEAL4),
	      "temporary trace written");
	if (fd >= 0)
		close(fd);
	rc = trace_load(path, 1, 2, &a, err, sizeof(err));
	CHECK(rc == 0 && a.n == 2 && a.rows[0].line == 2 && a.rows[1].line == 3,
	      "trace_load: skip 1, limit 2 (rc %d, %s)", rc, err);
	trace_parse(IDEAL4, strlen(IDEAL4), 1, 2, &b, err, sizeof(err));
	CHECK(a.n == b.n && a.nids == b.nids && !memcmp(a.ids, b.ids, a.nids * sizeof(*a.ids)),
	      "trace_load and trace_parse agree");
	trace_ideal(&a, 16, 16, &ua, NULL);
	trace_ideal(&b, 16, 16, &ub, NULL);
	CHECK(ua.cached_tokens == ub.cached_tokens && ua.cached_tokens == 32,
	      "the slice [1,2,4], [1,2,4,5] alone: 32 cached");
	trace_free(&a);
	trace_free(&b);
	unlink(path);
	rc = trace_load(path, 0, 0, &a, err, sizeof(err));
	CHECK(rc == -ENOENT && strstr(err, path) && strstr(err, "No such file"),
	      "a missing file: -ENOENT naming it (%s)", err);
	trace_free(&a);
	/* The kvsim test's fixture (its header gives the figures): run from the repository root,
	 * as tests/run.sh does. */
	if (access(fixture, R_OK) != 0) {
		printf("ok - the kvsim fixture's ideal ratio # SKIP %s not found\n", fixture);
		return;
	}
	rc = trace_load(fixture, 0, 0, &a, err, sizeof(err));
	CHECK(rc == 0 && a.n == 30, "the kvsim fixture: 30 rows (%s)", err);
	trace_ideal(&a, 16, 16, &ua, NULL);
	CHECK(ua.prompt_tokens == 1574 && ua.cached_tokens == 752 && ua.hit_rows == 18,
	      "the kvsim fixture at B=16: 1574 tokens, 752 cached, 18 rows hit (got %llu, %llu, "
	      "%zu)",
	      (unsigned long long)ua.prompt_tokens, (unsigned long long)ua.cached_tokens,
	      ua.hit_rows);
	trace_free(&a);
}

int main(void)
{
	test_tokens();
	test_prompts();
	test_scaling();
	test_max_tokens();
	test_ideal();
	test_errors();
	test_rows();
	test_load();
	return tap_done();
}
