// SPDX-License-Identifier: Apache-2.0
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "workload.h"

static const char *const WORDS[] = {
    "time",	  "year",	"people",      "way",	       "day",	       "man",
    "thing",	  "woman",	"life",	       "child",	       "world",	       "school",
    "state",	  "family",	"student",     "group",	       "country",      "problem",
    "hand",	  "part",	"place",       "case",	       "week",	       "company",
    "system",	  "program",	"question",    "work",	       "government",   "number",
    "night",	  "point",	"home",	       "water",	       "room",	       "mother",
    "area",	  "money",	"story",       "fact",	       "month",	       "lot",
    "right",	  "study",	"book",	       "eye",	       "job",	       "word",
    "business",	  "issue",	"side",	       "kind",	       "head",	       "house",
    "service",	  "friend",	"father",      "power",	       "hour",	       "game",
    "line",	  "end",	"member",      "law",	       "car",	       "city",
    "community",  "name",	"president",   "team",	       "minute",       "idea",
    "kid",	  "body",	"information", "back",	       "parent",       "face",
    "others",	  "level",	"office",      "door",	       "health",       "person",
    "art",	  "war",	"history",     "party",	       "result",       "change",
    "morning",	  "reason",	"research",    "girl",	       "guy",	       "moment",
    "air",	  "teacher",	"force",       "education",    "foot",	       "boy",
    "age",	  "policy",	"music",       "market",       "sense",	       "nation",
    "plan",	  "college",	"interest",    "death",	       "experience",   "effect",
    "class",	  "control",	"care",	       "field",	       "development",  "role",
    "effort",	  "rate",	"heart",       "drug",	       "show",	       "leader",
    "light",	  "voice",	"wife",	       "police",       "mind",	       "price",
    "report",	  "decision",	"son",	       "view",	       "relationship", "town",
    "road",	  "arm",	"difference",  "value",	       "building",     "action",
    "model",	  "season",	"society",     "tax",	       "director",     "position",
    "player",	  "record",	"paper",       "space",	       "ground",       "form",
    "event",	  "official",	"matter",      "center",       "couple",       "site",
    "project",	  "activity",	"star",	       "table",	       "need",	       "court",
    "oil",	  "situation",	"cost",	       "industry",     "figure",       "street",
    "image",	  "phone",	"data",	       "picture",      "practice",     "piece",
    "land",	  "product",	"doctor",      "wall",	       "patient",      "worker",
    "news",	  "test",	"movie",       "north",	       "love",	       "support",
    "technology", "step",	"baby",	       "computer",     "type",	       "attention",
    "film",	  "tree",	"source",      "organization", "hair",	       "window",
    "evidence",	  "population", "site",	       "blue",	       "green",	       "red",
    "river",	  "mountain",	"cloud",       "stone",	       "garden",       "bridge",
    "train",	  "ship",	"letter",      "song",	       "dream",	       "island",
    "forest",	  "summer",	"winter",      "spring",       "energy",       "network",
    "signal",	  "memory",	"engine",      "market",       "letter",       "ocean",
    "animal",	  "bird",	"horse",       "fish",	       "glass",	       "metal",
    "paper",	  "color",	"sound",       "table",	       "chair",	       "kitchen",
    "window",	  "number",	"simple",      "strong",       "quick",	       "bright",
    "quiet",	  "happy",	"early",       "late",	       "open",	       "small",
    "large",	  "young",	"long",	       "short",	       "high",	       "low",
    "clear",	  "dark"};

static uint64_t rng_next(uint64_t *s)
{
	uint64_t x = (*s += 0x9e3779b97f4a7c15ull);

	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static double rng_unit(uint64_t *s)
{
	return (double)(rng_next(s) >> 11) / 9007199254740992.0;
}

struct pool {
	const char **w;
	size_t n;
};

static int pool_build(struct pool *p, const struct tokenizer *t)
{
	size_t n = sizeof(WORDS) / sizeof(WORDS[0]);
	char piece[64];

	p->w = calloc(n, sizeof(*p->w));
	if (!p->w)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		struct tok_ids ids = {0};
		bool dup = false;

		for (size_t k = 0; k < p->n; k++)
			dup |= strcmp(p->w[k], WORDS[i]) == 0;
		snprintf(piece, sizeof(piece), " %s", WORDS[i]);
		if (!dup && tokenizer_encode(t, piece, strlen(piece), &ids) == 0 && ids.n == 1)
			p->w[p->n++] = WORDS[i];
		tok_ids_free(&ids);
	}
	return p->n >= 32 ? 0 : -EINVAL;
}

static int add_words(struct buf *b, const struct pool *p, uint64_t *rng, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		if (buf_printf(b, " %s", p->w[rng_next(rng) % p->n]))
			return -ENOMEM;
	return 0;
}

static uint32_t vary(uint32_t base, uint32_t pct, uint64_t *rng)
{
	double f;

	if (!pct)
		return base;
	f = 1.0 + ((rng_unit(rng) * 2.0) - 1.0) * pct / 100.0;
	return (uint32_t)fmax(1.0, floor(base * f + 0.5));
}

static int make_req(struct wl_req *r, const struct buf *prefix, uint32_t prefix_tokens,
		    uint32_t suffix_tokens, const struct pool *p, uint64_t *rng,
		    const struct tokenizer *t, char *err, size_t errlen)
{
	struct buf b = {0};
	int rc;

	if (buf_append(&b, prefix->data, prefix->len) || add_words(&b, p, rng, suffix_tokens)) {
		buf_free(&b);
		return -ENOMEM;
	}
	r->text = b.data;
	r->text_len = b.len;
	if (tokenizer_encode(t, r->text, r->text_len, &r->ids))
		return -ENOMEM;
	if (r->ids.n != (size_t)prefix_tokens + suffix_tokens) {
		snprintf(err, errlen,
			 "a prompt of %u words gave %zu tokens (not one token per word)",
			 prefix_tokens + suffix_tokens, r->ids.n);
		rc = -EINVAL;
		return rc;
	}
	return 0;
}

int wl_build(struct workload *w, const struct wl_opts *o, const struct tokenizer *t, char *err,
	     size_t errlen)
{
	struct pool pool = {0};
	struct buf *prefixes = NULL;
	uint32_t *plen = NULL;
	double *cdf = NULL, sum = 0;
	uint64_t rng;
	int rc;

	memset(w, 0, sizeof(*w));
	w->o = *o;
	if (o->prefix_types == 0) {
		snprintf(err, errlen, "no prefix types");
		return -EINVAL;
	}
	if ((rc = pool_build(&pool, t))) {
		snprintf(err, errlen, "the tokenizer has too few one-token words");
		goto cleanup;
	}
	rc = -ENOMEM;
	prefixes = calloc(o->prefix_types, sizeof(*prefixes));
	plen = calloc(o->prefix_types, sizeof(*plen));
	cdf = calloc(o->prefix_types, sizeof(*cdf));
	w->warm = calloc(o->prefix_types, sizeof(*w->warm));
	w->reqs = calloc(o->requests ? o->requests : 1, sizeof(*w->reqs));
	if (!prefixes || !plen || !cdf || !w->warm || !w->reqs)
		goto cleanup;
	for (uint32_t i = 0; i < o->prefix_types; i++) {
		/* the prefix texts from their own seed, so that clients with different --seed
		 * (request order, suffixes) can share one prefix set */
		rng = (o->prefix_seed_set ? o->prefix_seed : o->seed) * 1000003ull + i + 1;
		plen[i] = vary(o->prefix_tokens, o->mixed_pct, &rng);
		if (add_words(&prefixes[i], &pool, &rng, plen[i]))
			goto cleanup;
		sum += o->zipf_s > 0 ? 1.0 / pow(i + 1, o->zipf_s) : 1.0;
		cdf[i] = sum;
	}
	for (uint32_t i = 0; i < o->prefix_types; i++) {
		rng = o->seed * 7919ull + 0x5157ull + i;
		w->warm[i].prefix = i;
		if ((rc = make_req(&w->warm[i], &prefixes[i], plen[i],
				   vary(o->suffix_tokens, o->mixed_pct, &rng), &pool, &rng, t, err,
				   errlen)))
			goto cleanup;
	}
	rng = o->seed ^ 0xa5a5a5a5ull;
	for (size_t k = 0; k < o->requests; k++) {
		double u = rng_unit(&rng) * sum;
		uint32_t pi = 0;
		uint64_t r2 = o->seed * 0x100000001b3ull + k + 0x77;

		while (pi + 1 < o->prefix_types && cdf[pi] <= u)
			pi++;
		w->reqs[k].prefix = pi;
		if ((rc = make_req(&w->reqs[k], &prefixes[pi], plen[pi],
				   vary(o->suffix_tokens, o->mixed_pct, &r2), &pool, &r2, t, err,
				   errlen)))
			goto cleanup;
	}
	rc = 0;
cleanup:
	if (rc == -ENOMEM)
		snprintf(err, errlen, "out of memory");
	for (uint32_t i = 0; prefixes && i < o->prefix_types; i++)
		buf_free(&prefixes[i]);
	free(prefixes);
	free(plen);
	free(cdf);
	free(pool.w);
	if (rc)
		wl_free(w);
	return rc;
}

void wl_free(struct workload *w)
{
	for (uint32_t i = 0; w->warm && i < w->o.prefix_types; i++) {
		free(w->warm[i].text);
		tok_ids_free(&w->warm[i].ids);
	}
	for (size_t k = 0; w->reqs && k < w->o.requests; k++) {
		free(w->reqs[k].text);
		tok_ids_free(&w->reqs[k].ids);
	}
	free(w->warm);
	free(w->reqs);
	w->warm = w->reqs = NULL;
}

struct wl_words {
	struct pool pool;
};

int wl_words_new(const struct tokenizer *t, struct wl_words **out)
{
	struct wl_words *w = calloc(1, sizeof(*w));
	int rc;

	*out = NULL;
	if (!w)
		return -ENOMEM;
	if ((rc = pool_build(&w->pool, t))) {
		free(w->pool.w);
		free(w);
		return rc;
	}
	*out = w;
	return 0;
}

void wl_words_free(struct wl_words *w)
{
	if (w)
		free(w->pool.w);
	free(w);
}

int wl_words_add(const struct wl_words *w, uint64_t seed, uint32_t n, struct buf *out)
{
	uint64_t rng = seed;

	return add_words(out, &w->pool, &rng, n);
}
