// SPDX-License-Identifier: Apache-2.0
/* router_prompt: reading a request for its prompt (route/router_int.h has the map of the router's
 * files): the endpoint, the model, the tokens and the block chain, or the fallback view of the raw
 * body bytes; a text prompt tokenized lazily, only as far as a worker's cache reaches, its rest
 * once the request is sent (router_work, a slice at a time). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/metrics.h"
#include "kv/blockhash.h"
#include "kv/events_decode.h"
#include "kv/index.h"
#include "prompt/models.h"
#include "prompt/openai.h"
#include "prompt/tokenizer.h"
#include "route/router_int.h"
#include "route/workers.h"

static int chain_reserve(struct flight *f, size_t n)
{
	uint64_t *p;

	if (f->cap >= n)
		return 0;
	p = realloc(f->chain, (n ? n : 1) * sizeof(*p));
	if (!p)
		return -ENOMEM;
	f->chain = p;
	f->cap = n;
	return 0;
}

/* The encoding cache of tokenizer t (created on first use), or NULL (off, or out of slots). */
static struct tok_cache *tcache_of(struct router *r, const struct tokenizer *t)
{
	if (!t || r->tokcache_bytes <= 0)
		return NULL;
	for (size_t i = 0; i < sizeof(r->tc) / sizeof(r->tc[0]); i++) {
		if (r->tc[i].tok == t)
			return r->tc[i].cache;
		if (!r->tc[i].tok) {
			r->tc[i].cache = tok_cache_new((size_t)r->tokcache_bytes);
			if (r->tc[i].cache)
				r->tc[i].tok = t;
			return r->tc[i].cache;
		}
	}
	return NULL;
}

/* The fallback view: the raw body bytes in ROUTER_TEXT_CHUNK-byte blocks. */
static int read_text(struct router *r, const struct router_request *req, struct flight *f)
{
	size_t n = req->body_len / ROUTER_TEXT_CHUNK;

	if (n > ROUTER_MAX_BLOCKS)
		n = ROUTER_MAX_BLOCKS;
	if (chain_reserve(f, n))
		return -ENOMEM;
	f->n = blockhash_bytes_chain(r->hseed, ROUTER_TEXT_CHUNK, req->body, req->body_len,
				     f->chain, n);
	f->nblocks = (uint32_t)f->n;
	f->view = VIEW_TEXT;
	return 0;
}

static enum fallback fallback_of(int rc, const char *why)
{
	if (rc == -ENOMEM)
		return FB_NOMEM;
	if (rc == OPENAI_INVALID)
		return why && strstr(why, "not valid JSON") ? FB_NOT_JSON : FB_INVALID;
	if (why && strcmp(why, "no tokenizer loaded") == 0)
		return FB_NO_TOKENIZER;
	return FB_NOT_EXACT;
}

/* The request body read for its prompt: tokenized whole, or with lazy its text kept untokenized
 * (r->oq.text_pending) for read_text_prompt. */
static int parse(struct router *r, bool lazy, const struct model_tok *mt, enum openai_endpoint ep,
		 const struct router_request *req, const char **why)
{
	const struct tokenizer *t = mt ? mt->tok : NULL;

	return openai_parse_with(t, mt && mt->chat_ok ? mt->chat : NULL, tcache_of(r, t), lazy, ep,
				 req->body, req->body_len, &r->oq, why);
}

/* Appends to f's chain the hashes of the full blocks of tokens[0..n) past those it has (tokens
 * holds the whole prompt so far). Returns 0 or -ENOMEM. */
static int chain_extend(struct router *r, struct flight *f, const uint32_t *tokens, size_t n)
{
	size_t nb = n / r->bs;

	if (nb > ROUTER_MAX_BLOCKS)
		nb = ROUTER_MAX_BLOCKS;
	if (nb <= f->n)
		return 0;
	if (chain_reserve(f, nb))
		return -ENOMEM;
	if (!f->n) {
		/* block 0: chained to the root, with its extra keys (vLLM's cache_salt) */
		f->chain[0] = blockhash_block(r->hseed, f->root, tokens, r->bs, f->extra0.data,
					      f->extra0.len);
		f->n = 1;
	}
	f->n += blockhash_chain(r->hseed, r->bs, f->chain[f->n - 1], tokens + f->n * r->bs,
				(nb - f->n) * r->bs, f->chain + f->n, nb - f->n);
	return 0;
}

bool router_model_ok(const struct flight *f, const struct worker *w)
{
	enum workers_serve s;

	if (!f->model_filter || !w)
		return true;
	s = workers_serves(w, f->model, strlen(f->model), NULL);
	if (s == WORKERS_SERVE_UNKNOWN)
		return f->model_unknown_ok;
	return s == (f->model_adapter ? WORKERS_SERVE_ADAPTER : WORKERS_SERVE_BASE);
}

/* Who serves model (NULL: the request names none) among svc's workers, into f (model_filter,
 * model_adapter, model_unknown_ok, root); returns the tokenizer entry to read it with (an
 * adapter's own, else its base model's, else the default), and in *served whether any worker of
 * svc may take it. A worker whose list is not known yet may take the Service's model
 * (kvsplice.io/model; any model that is no known worker's adapter when the Service names none):
 * before the first /v1/models answers, and without scraping, every worker is a candidate, as
 * before models were read. */
static const struct model_tok *model_resolve(struct router *r, const struct service *svc,
					     const char *model, struct flight *f, bool *served)
{
	char parent[SCRAPE_MODEL_NAME_MAX + 1] = "";
	size_t len = model ? strlen(model) : 0, nbase = 0, nad = 0, nunk = 0;
	const struct model_tok *mt;

	f->model_filter = f->model_adapter = f->model_unknown_ok = false;
	f->root = 0;
	*served = true;
	if (!model || len > SCRAPE_MODEL_NAME_MAX)
		return models_find(r->models, model ? model : svc->model[0] ? svc->model : NULL);
	for (size_t k = 0; k < svc->nendpoints; k++) {
		struct worker *w = router_worker_of(r, svc, k);
		const char *par = NULL;

		switch (w ? workers_serves(w, model, len, &par) : WORKERS_SERVE_UNKNOWN) {
		case WORKERS_SERVE_UNKNOWN:
			nunk++;
			break;
		case WORKERS_SERVE_NO:
			break;
		case WORKERS_SERVE_BASE:
			nbase++;
			break;
		case WORKERS_SERVE_ADAPTER:
			if (!nad++)
				snprintf(parent, sizeof(parent), "%s", par);
			break;
		}
	}
	memcpy(f->model, model, len + 1);
	f->model_filter = true;
	f->model_adapter = nad > 0 && !nbase;
	f->model_unknown_ok =
	    !f->model_adapter && !nad && (!svc->model[0] || !strcmp(svc->model, model));
	*served = (f->model_adapter ? nad : nbase) + (f->model_unknown_ok ? nunk : 0) > 0;
	if (!f->model_adapter)
		return models_find(r->models, model);
	f->root = blockhash_root(r->hseed, model, len);
	mt = models_find_exact(r->models, model);
	return mt ? mt : models_find(r->models, parent);
}

/* With the tokens so far, the prompt's size: exact when all are there, else the tokens so far
 * plus the bytes left at the rate of the bytes done (natural text varies by a few per cent). */
static void prompt_size(struct router *r, struct flight *f)
{
	double est = (double)f->toks.n;

	f->partial = !f->ts.done;
	if (f->partial && f->ts.pos)
		est += (double)(f->text.len - f->ts.pos) * (double)f->toks.n / (double)f->ts.pos;
	f->prompt_tokens = est < UINT32_MAX ? (uint32_t)est : UINT32_MAX;
	f->nblocks = f->prompt_tokens / r->bs;
	if (f->nblocks > ROUTER_MAX_BLOCKS)
		f->nblocks = ROUTER_MAX_BLOCKS;
	if (f->nblocks < f->n)
		f->nblocks = (uint32_t)f->n;
}

/* A text prompt (r->oq.text): tokenized with t in growing steps, each step's new blocks hashed,
 * until the last block hashed is one no worker holds or computes for a request in flight (every
 * worker's match, and its overlap with the requests in flight there, then ends inside the chain,
 * so the decision sees them exactly) or the text ends. Measured: a never-seen 10 KB prompt is
 * decided on its first ROUTER_LAZY_TOKENS tokens instead of ~2,500 (docs/benchmarks.md). */
static int read_text_prompt(struct router *r, struct flight *f, const struct tokenizer *t)
{
	size_t want = ROUTER_LAZY_TOKENS, nd = index_max_workers(r->idx);
	int rc, d;

	buf_free(&f->text);
	f->text = r->oq.text; /* handed over: r->oq is reused by the next request */
	r->oq.text = (struct buf){0};
	r->oq.text_pending = false;
	f->tok = t;
	f->toks.n = 0;
	tok_stream_free(&f->ts);
	tok_stream_init_special(&f->ts, f->text.data ? f->text.data : "", f->text.len,
				r->oq.add_special_tokens);
	if (router_scratch(r, 0, nd ? nd : 1))
		return -ENOMEM;
	for (;;) {
		if ((rc = tokenizer_encode_more(t, tcache_of(r, t), &f->ts, want, &f->toks)) < 0 ||
		    (rc = chain_extend(r, f, f->toks.v, f->toks.n)) < 0)
			return rc;
		if (f->ts.done || f->n >= ROUTER_MAX_BLOCKS)
			break;
		/* no worker holds the last block, and none computes it for a request in flight
		 * (the policies read the overlap with those too: active, fresh) */
		if (f->n && (d = index_query(r->idx, f->chain, f->n, r->depth, NULL, nd)) >= 0 &&
		    (size_t)d < f->n && !workers_block_in_flight(r->ws, f->chain[f->n - 1]))
			break;
		want = f->toks.n * 2;
	}
	prompt_size(r, f);
	return 0;
}

/* The rest of f's prompt, tokenized and hashed: its chain, token count and worker accounting
 * become exact (router_sent; router_done when it was never sent). f is out of the queue, or
 * RETIRED (freed next). */
void router_prompt_finish(struct router *r, struct flight *f)
{
	struct worker *w = f->slot != UINT32_MAX ? workers_at(r->ws, f->slot) : NULL;
	struct route_rec *rec;
	size_t n0 = f->n;
	uint32_t nb0 = f->nblocks;

	if (!f->partial)
		return;
	if (tokenizer_encode_more(f->tok, tcache_of(r, f->tok), &f->ts, SIZE_MAX, &f->toks) < 0)
		return; /* out of memory: the estimates stay */
	if (w)
		router_flight_unreg(r, f);
	if (chain_extend(r, f, f->toks.v, f->toks.n) < 0)
		f->n = n0;
	prompt_size(r, f);
	if (w && router_flight_reg(r, f, f->slot) < 0) {
		router_prefill_done(r,
				    f); /* as router_pick does when it cannot add: off the worker */
		router_decode_off(r, f);
		f->slot = UINT32_MAX;
	} else if (w && f->prefill) { /* its backlog there: the blocks it does not hold, exact */
		uint32_t d = nb0 - f->prefill, p = f->nblocks > d ? f->nblocks - d : 0;

		workers_prefill_move(w, f->prefill, p);
		f->prefill = p;
	}
	rec = router_rec_find(r, f->rec_seq);
	if (rec) {
		rec->prompt_tokens = f->prompt_tokens;
		rec->blocks = (uint32_t)f->n;
	}
}

/* Reads req into flight f and rec: the endpoint, the model, the tokens and the chain, or the
 * fallback view. */
void router_prompt_read(struct router *r, const struct service *svc,
			const struct router_request *req, struct flight *f, struct route_rec *rec)
{
	enum openai_endpoint ep = OPENAI_NONE;
	const struct model_tok *mt;
	const char *why = NULL;
	size_t plen = req->target_len;
	bool lazy, served = true;
	int rc;

	f->n = f->nblocks = 0;
	f->partial = false;
	f->view = VIEW_NONE;
	f->wants_usage = false;
	f->prompt_tokens = 0;
	f->root = 0;
	f->model_filter = false;
	buf_reset(&f->extra0);
	rec->fallback = FB_NONE;
	if (req->method) {
		const char *q = memchr(req->target, '?', req->target_len);

		if (q)
			plen = (size_t)(q - req->target);
		ep = openai_endpoint_of(req->method, req->method_len, req->target, plen);
	}
	if (ep == OPENAI_NONE)
		return;
	f->wants_usage = true;
	f->view = f->pol->ops->source == POLICY_SRC_APPROX ||
			  (!r->idx && f->pol->ops->source != POLICY_SRC_NONE)
		      ? VIEW_APPROX
		  : f->pol->ops->source == POLICY_SRC_EVENTS ? VIEW_EVENTS
							     : VIEW_NONE;
	lazy = f->view == VIEW_EVENTS && !r->whole_prompt;
	mt = models_find(r->models, svc->model[0] ? svc->model : NULL);
	openai_req_free(&r->oq);
	rc = parse(r, lazy, mt, ep, req, &why);
	if (rc == OPENAI_OK) {
		/* the model's workers, and its own tokenizer (several models configured, or an
		 * adapter read with its base model's): read again with it */
		const struct model_tok *m2 = model_resolve(r, svc, r->oq.model, f, &served);

		if (m2 != mt && m2) {
			mt = m2;
			openai_req_free(&r->oq);
			rc = parse(r, lazy, mt, ep, req, &why);
		}
	}
	if (r->oq.model)
		snprintf(rec->model, sizeof(rec->model), "%s", r->oq.model);
	if (rc == OPENAI_OK && !mt)
		rc = OPENAI_UNSUPPORTED, why = "no tokenizer loaded";
	/* cache_salt: block 0's extra keys, [salt] (after the LoRA name, which the root stands
	 * for), as the index hashes them from that block's BlockStored */
	if (rc == OPENAI_OK && r->oq.cache_salt) {
		const char *k = r->oq.cache_salt;
		size_t kl = strlen(k);

		if (events_extra_strings(&k, &kl, 1, &f->extra0) < 0)
			rc = -ENOMEM;
	}
	if (!served) {
		/* no worker of the Service serves it: each answers as vLLM would (404) */
		rec->fallback = FB_MODEL;
		f->model_filter = false;
	} else if (rc == OPENAI_OK && ep == OPENAI_CHAT && !mt->chat_ok)
		rec->fallback = mt->chat_kind == MODEL_CHAT_HARMONY   ? FB_HARMONY
				: mt->chat_kind == MODEL_CHAT_MISTRAL ? FB_MISTRAL
								      : FB_TEMPLATE;
	else if (rc != OPENAI_OK)
		rec->fallback = fallback_of(rc, why);
	if (rec->fallback != FB_NONE) {
		if (r->st.fallbacks[rec->fallback])
			metrics_inc(r->st.fallbacks[rec->fallback]);
		if (f->pol->ops->source != POLICY_SRC_NONE && read_text(r, req, f) < 0)
			f->n = 0;
		return;
	}
	if (r->oq.text_pending) {
		rc = read_text_prompt(r, f, mt->tok);
		if (rc == -E2BIG) {
			/* a split out of its step budget: no exact ids, so the approximate view */
			rec->fallback = FB_NOT_EXACT;
			if (r->st.fallbacks[rec->fallback])
				metrics_inc(r->st.fallbacks[rec->fallback]);
			f->n = f->nblocks = 0;
			if (f->pol->ops->source != POLICY_SRC_NONE && read_text(r, req, f) < 0)
				f->n = 0;
		} else if (rc < 0) {
			f->n = f->nblocks = 0;
		}
		return;
	}
	f->prompt_tokens = (uint32_t)r->oq.prompt.n;
	if (f->view == VIEW_NONE)
		return;
	if (chain_extend(r, f, r->oq.prompt.v, r->oq.prompt.n) < 0)
		f->n = 0;
	f->nblocks = (uint32_t)f->n;
}

bool router_prompt_slice(struct router *r, struct flight *f)
{
	return tokenizer_encode_more(f->tok, tcache_of(r, f->tok), &f->ts,
				     f->toks.n + ROUTER_SLICE_TOKENS, &f->toks) < 0 ||
	       chain_extend(r, f, f->toks.v, f->toks.n) < 0 || f->ts.done ||
	       f->n >= ROUTER_MAX_BLOCKS;
}
