// SPDX-License-Identifier: Apache-2.0
/* discovery_k8s: the Kubernetes source of discovery.h. Services that carry the annotation
 * kvsplice.io/route, and their endpoints from discovery.k8s.io/v1 EndpointSlices, read from the API
 * server the way client-go's informers do: list (paged), then watch from the list's
 * resourceVersion with bookmarks; a watch that ends is resumed from the last version seen; a
 * version the server no longer has (410 Gone, as an HTTP status or as an ERROR event) means a
 * fresh list; every failure is retried with exponential backoff and jitter; the token file is read
 * again for every request (so a rotated token is picked up) and at once after a 401. What the
 * objects become is discovery_k8s_view.c's job.
 *
 * Threading. One dedicated thread owns everything here but the mailbox: a curl multi handle with
 * the two requests (Services, EndpointSlices), the view, the token. It hands complete snapshots
 * over through a one-slot mailbox (mutex) and an eventfd the daemon's epoll loop watches; poll()
 * only takes the newest snapshot. Why a thread and not curl's socket callbacks on the daemon's
 * loop: a list of a big cluster is megabytes of JSON to parse and a snapshot to rebuild from tens
 * of thousands of objects, and TLS handshakes cost milliseconds; on the loop that runs the proxy,
 * all of it would be added to requests' latency. Snapshots are immutable once handed over, and the
 * thread keeps no reference to them (the reference count is not atomic, so exactly one thread may
 * hold one at any time). curl runs with CURLOPT_NOSIGNAL; the thread blocks every signal.
 *
 * Bounds: one list page (cfg list_max_bytes) and one watch event (cfg event_max_bytes); past them
 * the request is abandoned, logged, and the kind listed again after a backoff.
 *
 * Stand-in: none here. Its tests run it against tests/e2e/k8s_api.py, a local HTTPS server with
 * the same list/watch protocol (no API server can run on the development machines). */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <xxhash.h>

#include "core/buf.h"
#include "core/clock.h"
#include "discovery/discovery.h"
#include "core/log.h"
#include "core/mix.h"

/* Objects asked per list page. */
#ifndef K8S_LIST_LIMIT
#define K8S_LIST_LIMIT 500
#endif
/* Error response body kept for the log, bytes. */
#ifndef K8S_ERR_BODY_MAX
#define K8S_ERR_BODY_MAX 4096
#endif
/* Largest service-account token, bytes (a projected token is about 1 KB). */
#ifndef K8S_TOKEN_MAX
#define K8S_TOKEN_MAX 16384
#endif
/* Defaults of struct discovery_k8s_cfg, ms. */
#ifndef K8S_BACKOFF_MIN_MS
#define K8S_BACKOFF_MIN_MS 500
#endif
#ifndef K8S_BACKOFF_MAX_MS
#define K8S_BACKOFF_MAX_MS 30000
#endif
#ifndef K8S_REQUEST_TIMEOUT_MS
#define K8S_REQUEST_TIMEOUT_MS 30000
#endif
/* A watch that ends sooner than this with no event counts as a failure (backoff), ms. */
#ifndef K8S_WATCH_MIN_MS
#define K8S_WATCH_MIN_MS 1000
#endif

/* A resourceVersion kept, bytes (etcd revisions are decimal 64-bit numbers). */
#define K8S_RV_MAX 64

/* --- the source: one thread, two requests ---------------------------------------------------- */

enum res_abort {
	AB_NONE,
	AB_GONE,  /* ERROR event 410: relist */
	AB_BAD,	  /* not a watch event, or out of memory: relist after a backoff */
	AB_BIG,	  /* an event or a list page past its bound */
	AB_ERROR, /* ERROR event of another kind */
	AB_STOP,  /* the daemon asked for a relist or is stopping */
};

struct k8s_src;

/* One kind's list/watch cycle. */
struct k8s_res {
	struct k8s_src *k;
	enum k8s_kind kind;
	char path[256];		 /* "/api/v1/services" */
	CURL *easy;		 /* the request in flight, or NULL */
	struct curl_slist *hdrs; /* its headers */
	bool watching;		 /* the request in flight is a watch */
	bool listed;		 /* a complete list was taken in once */
	bool relist;		 /* the next request is a list */
	char rv[K8S_RV_MAX];	 /* where a watch resumes */
	char *cont;		 /* continue token of a paged list under way, or NULL */
	struct buf body;	 /* a list page, or an error response */
	struct k8s_lines lines;	 /* the watch stream */
	uint64_t next_ms;	 /* no request before (backoff) */
	uint64_t started_ms;
	unsigned failures; /* in a row */
	unsigned long events;
	uint64_t token_hash; /* of the token the request carries */
	enum res_abort abort;
	char why[256];
	char curlerr[CURL_ERROR_SIZE];
};

struct k8s_src {
	struct discovery_source src;
	char *api, *token_path, *ca_path;
	int watch_min_s, watch_max_s, backoff_min_ms, backoff_max_ms, timeout_ms;
	size_t list_max, event_max; /* bytes of a list page, of a watch event */
	/* shared with the daemon's thread */
	pthread_mutex_t mu;
	struct services *pending; /* newest snapshot not taken yet (mu) */
	bool relist_asked;	  /* (mu) */
	atomic_bool stop;
	int efd;      /* eventfd: a snapshot is pending */
	CURLM *multi; /* curl_multi_wakeup is the only call made from the daemon's thread */
	pthread_t thr;
	bool started;
	/* the thread's own */
	struct k8s_view *view;
	struct k8s_res res[2];
	uint64_t rnd, generation, last_fp;
	bool published;
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;

static void curl_init(void)
{
	curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

/* Reads the token file: at most K8S_TOKEN_MAX bytes, trailing white space dropped, no control
 * characters (it goes into a header). Returns 0 and a malloc'ed *out, or a negative errno. */
static int token_read(const char *path, char **out)
{
	FILE *f = fopen(path, "re");
	char *t;
	size_t n;

	if (!f)
		return -errno;
	t = malloc(K8S_TOKEN_MAX + 1);
	if (!t) {
		fclose(f);
		return -ENOMEM;
	}
	n = fread(t, 1, K8S_TOKEN_MAX + 1, f);
	fclose(f);
	while (n && (t[n - 1] == '\n' || t[n - 1] == '\r' || t[n - 1] == ' ' || t[n - 1] == '\t'))
		n--;
	t[n < K8S_TOKEN_MAX ? n : K8S_TOKEN_MAX] = '\0';
	if (n == 0 || n > K8S_TOKEN_MAX) {
		free(t);
		return n ? -EFBIG : -ENODATA;
	}
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)t[i] < 0x20 || t[i] == 0x7f) {
			free(t);
			return -EINVAL;
		}
	*out = t;
	return 0;
}

static uint64_t token_hash_now(const char *path)
{
	char *t = NULL;
	uint64_t h;

	if (token_read(path, &t) < 0)
		return 0;
	h = XXH3_64bits(t, strlen(t));
	free(t);
	return h;
}

/* Schedules the next attempt after a failure: min * 2^(failures-1), at most max, then "equal
 * jitter" (half of it fixed, half at random) so nodes that lost the API server together do not
 * come back together. */
static void res_fail(struct k8s_res *r, uint64_t now)
{
	struct k8s_src *k = r->k;
	uint64_t d = (uint64_t)k->backoff_min_ms << (r->failures < 16 ? r->failures : 16);

	if (d > (uint64_t)k->backoff_max_ms)
		d = (uint64_t)k->backoff_max_ms;
	d = d / 2 + mix_next(&k->rnd) % (d / 2 + 1);
	r->failures++;
	r->next_ms = now + d;
}

static int res_line(const char *line, size_t len, void *arg)
{
	struct k8s_res *r = arg;
	char rv[K8S_RV_MAX];
	enum k8s_event ev;

	if (!len)
		return 0;
	ev = k8s_view_event(r->k->view, r->kind, line, len, rv, sizeof(rv), r->why, sizeof(r->why));
	if (rv[0])
		strcpy(r->rv, rv);
	switch (ev) {
	case K8S_EV_APPLIED:
		r->events++;
		return 0;
	case K8S_EV_BOOKMARK:
		return 0;
	case K8S_EV_GONE:
		r->abort = AB_GONE;
		return 1;
	case K8S_EV_ERROR:
		r->abort = AB_ERROR;
		return 1;
	default:
		r->abort = AB_BAD;
		return 1;
	}
}

static size_t res_write(char *data, size_t size, size_t nmemb, void *arg)
{
	struct k8s_res *r = arg;
	size_t n = size * nmemb;
	long code = 0;
	int rc;

	if (atomic_load(&r->k->stop)) {
		r->abort = AB_STOP;
		return 0;
	}
	curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &code);
	if (code != 200) { /* an error: keep the start of its Status for the log */
		size_t room = K8S_ERR_BODY_MAX - r->body.len;

		buf_append(&r->body, data, n < room ? n : room);
		return n;
	}
	if (!r->watching) {
		if (r->body.len + n > r->k->list_max) {
			snprintf(r->why, sizeof(r->why),
				 "list page larger than %zu bytes (--k8s-list-max-bytes)",
				 r->k->list_max);
			r->abort = AB_BIG;
			return 0;
		}
		if (buf_append(&r->body, data, n) < 0) {
			snprintf(r->why, sizeof(r->why), "out of memory");
			r->abort = AB_BAD;
			return 0;
		}
		return n;
	}
	rc = k8s_lines_feed(&r->lines, data, n, res_line, r);
	if (rc == -E2BIG) {
		snprintf(r->why, sizeof(r->why),
			 "watch event larger than %zu bytes (--k8s-event-max-bytes)",
			 r->k->event_max);
		r->abort = AB_BIG;
	} else if (rc == -ENOMEM) {
		snprintf(r->why, sizeof(r->why), "out of memory");
		r->abort = AB_BAD;
	}
	return rc ? 0 : n;
}

/* Starts r's next request: a list page or a watch from r->rv. */
static void res_start(struct k8s_res *r, uint64_t now)
{
	struct k8s_src *k = r->k;
	struct buf url = {0}, auth = {0};
	char *token = NULL, *esc = NULL;
	int rc, timeout_s;

	rc = token_read(k->token_path, &token);
	if (rc < 0) {
		log_warn("k8s", "token %s: %s", k->token_path, strerror(-rc));
		res_fail(r, now);
		return;
	}
	r->token_hash = XXH3_64bits(token, strlen(token));
	r->easy = curl_easy_init();
	if (!r->easy)
		goto nomem;
	r->watching = !r->relist;
	timeout_s = k->watch_min_s +
		    (int)(mix_next(&k->rnd) % (uint64_t)(k->watch_max_s - k->watch_min_s + 1));
	if (r->watching) {
		esc = curl_easy_escape(r->easy, r->rv, 0);
		rc = buf_printf(&url,
				"%s%s?watch=1&allowWatchBookmarks=true&resourceVersion=%s"
				"&timeoutSeconds=%d",
				k->api, r->path, esc ? esc : "", timeout_s);
	} else {
		rc = buf_printf(&url, "%s%s?limit=%d", k->api, r->path, K8S_LIST_LIMIT);
		if (r->cont && rc == 0) {
			esc = curl_easy_escape(r->easy, r->cont, 0);
			rc = esc ? buf_printf(&url, "&continue=%s", esc) : -ENOMEM;
		}
	}
	if (rc < 0 || buf_printf(&auth, "Authorization: Bearer %s", token) < 0 ||
	    !(r->hdrs = curl_slist_append(NULL, auth.data)) ||
	    !curl_slist_append(r->hdrs, "Accept: application/json"))
		goto nomem;
	curl_easy_setopt(r->easy, CURLOPT_URL, url.data);
	curl_easy_setopt(r->easy, CURLOPT_PROTOCOLS_STR, "https");
	curl_easy_setopt(r->easy, CURLOPT_HTTPHEADER, r->hdrs);
	curl_easy_setopt(r->easy, CURLOPT_CAINFO, k->ca_path);
	curl_easy_setopt(r->easy, CURLOPT_SSL_VERIFYPEER, 1L);
	curl_easy_setopt(r->easy, CURLOPT_SSL_VERIFYHOST, 2L);
	curl_easy_setopt(r->easy, CURLOPT_USERAGENT, "kvsplice");
	curl_easy_setopt(r->easy, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(r->easy, CURLOPT_ACCEPT_ENCODING, "");
	curl_easy_setopt(r->easy, CURLOPT_CONNECTTIMEOUT_MS, (long)k->timeout_ms);
	curl_easy_setopt(r->easy, CURLOPT_TIMEOUT_MS,
			 r->watching ? (timeout_s + 30) * 1000L : (long)k->timeout_ms);
	curl_easy_setopt(r->easy, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(r->easy, CURLOPT_TCP_KEEPIDLE, 30L);
	curl_easy_setopt(r->easy, CURLOPT_TCP_KEEPINTVL, 10L);
	curl_easy_setopt(r->easy, CURLOPT_WRITEFUNCTION, res_write);
	curl_easy_setopt(r->easy, CURLOPT_WRITEDATA, r);
	curl_easy_setopt(r->easy, CURLOPT_PRIVATE, r);
	curl_easy_setopt(r->easy, CURLOPT_ERRORBUFFER, r->curlerr);
	r->curlerr[0] = '\0';
	r->abort = AB_NONE;
	r->events = 0;
	r->why[0] = '\0';
	r->lines.len = 0;
	r->lines.max = k->event_max;
	buf_reset(&r->body);
	r->started_ms = now;
	if (curl_multi_add_handle(k->multi, r->easy) != CURLM_OK)
		goto nomem;
	log_debug("k8s", "GET %s", url.data);
	goto cleanup;
nomem:
	log_error("k8s", "%s: cannot start a request (out of memory)", k8s_kind_name(r->kind));
	curl_slist_free_all(r->hdrs);
	r->hdrs = NULL;
	if (r->easy)
		curl_easy_cleanup(r->easy);
	r->easy = NULL;
	res_fail(r, now);
cleanup:
	curl_free(esc);
	buf_free(&url);
	buf_free(&auth);
	free(token);
}

/* Ends r's request in flight (if any) without looking at its outcome. */
static void res_drop(struct k8s_res *r)
{
	if (!r->easy)
		return;
	curl_multi_remove_handle(r->k->multi, r->easy);
	curl_easy_cleanup(r->easy);
	curl_slist_free_all(r->hdrs);
	r->easy = NULL;
	r->hdrs = NULL;
}

/* The message of a Status error body, or the start of the body. */
static void status_message(const struct buf *b, char *out, size_t n)
{
	cJSON *root = cJSON_ParseWithLength(b->data ? b->data : "", b->len);
	const cJSON *mj = cJSON_GetObjectItemCaseSensitive(root, "message");
	const char *m = cJSON_IsString(mj) ? mj->valuestring : NULL;

	snprintf(out, n, "%.200s", m ? m : b->data ? b->data : "");
	for (char *p = out; *p; p++)
		if (*p == '\n' || *p == '\r')
			*p = ' ';
	cJSON_Delete(root);
}

/* A list page arrived whole. */
static void res_list_done(struct k8s_res *r, uint64_t now)
{
	struct k8s_src *k = r->k;
	char cont[4096], rv[K8S_RV_MAX] = "", err[256] = "";
	int rc = k8s_view_list(k->view, r->kind, r->body.data ? r->body.data : "", r->body.len,
			       !r->cont, cont, sizeof(cont), rv, sizeof(rv), err, sizeof(err));

	free(r->cont);
	r->cont = NULL;
	if (rc < 0) {
		log_warn("k8s", "%s list: %s", k8s_kind_name(r->kind),
			 rc == -ENOMEM ? "out of memory" : err);
		res_fail(r, now);
		return;
	}
	r->next_ms = now;
	if (cont[0]) { /* the next page */
		if (!(r->cont = strdup(cont)))
			res_fail(r, now);
		return;
	}
	if (!rv[0]) {
		log_warn("k8s", "%s list without a resourceVersion: listing again",
			 k8s_kind_name(r->kind));
		res_fail(r, now);
		return;
	}
	snprintf(r->rv, sizeof(r->rv), "%s", rv);
	log_info("k8s", "%s listed at resourceVersion %s (%zu kept)", k8s_kind_name(r->kind), r->rv,
		 k8s_view_count(k->view, r->kind));
	r->listed = true;
	r->relist = false;
	r->failures = 0;
}

/* r's request ended with result. */
static void res_done(struct k8s_res *r, CURLcode result, uint64_t now)
{
	struct k8s_src *k = r->k;
	const char *what = k8s_kind_name(r->kind), *op = r->watching ? "watch" : "list";
	long code = 0;
	char msg[256];

	curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &code);
	res_drop(r);
	switch (r->abort) {
	case AB_GONE:
		log_info("k8s", "%s watch: resourceVersion %s is gone (410): listing again", what,
			 r->rv);
		r->relist = true;
		r->next_ms = now;
		return;
	case AB_BAD:
	case AB_BIG:
		log_warn("k8s", "%s %s: %s: listing again", what, op, r->why);
		r->relist = true;
		free(r->cont);
		r->cont = NULL;
		res_fail(r, now);
		return;
	case AB_ERROR:
		log_warn("k8s", "%s: %s: reconnecting", what, r->why);
		res_fail(r, now);
		return;
	case AB_STOP:
		r->next_ms = now;
		return;
	case AB_NONE:
		break;
	}
	if (result == CURLE_OPERATION_TIMEDOUT && r->watching && code == 200) {
		result = CURLE_OK; /* our own bound on a watch the server did not end */
	} else if (result != CURLE_OK) {
		log_warn("k8s", "%s %s: %s%s%s", what, op, curl_easy_strerror(result),
			 r->curlerr[0] ? ": " : "", r->curlerr);
		res_fail(r, now);
		return;
	}
	switch (code) {
	case 200:
		if (!r->watching) {
			res_list_done(r, now);
			return;
		}
		log_debug("k8s", "%s watch ended after %llu ms, %lu events: resuming at %s", what,
			  (unsigned long long)(now - r->started_ms), r->events, r->rv);
		if (!r->events && now - r->started_ms < K8S_WATCH_MIN_MS) {
			res_fail(r, now); /* a server that ends watches at once: do not spin */
			return;
		}
		r->failures = 0;
		r->next_ms = now;
		return;
	case 401:
		if (token_hash_now(k->token_path) != r->token_hash) {
			log_info("k8s", "%s %s: 401 Unauthorized; the token file changed: retrying",
				 what, op);
			r->next_ms = now;
			return;
		}
		log_warn("k8s",
			 "%s %s: 401 Unauthorized with the token of %s: retrying (the token is "
			 "read again each time)",
			 what, op, k->token_path);
		res_fail(r, now);
		return;
	case 403:
		status_message(&r->body, msg, sizeof(msg));
		log_error("k8s",
			  "%s %s: 403 Forbidden (%s): the ServiceAccount needs get/list/watch on "
			  "Services and discovery.k8s.io EndpointSlices (deploy/rbac.yaml)",
			  what, op, msg);
		res_fail(r, now);
		return;
	case 410: /* a watch or a continue token too old */
		log_info("k8s", "%s %s: 410 Gone: listing again", what, op);
		r->relist = true;
		free(r->cont);
		r->cont = NULL;
		r->next_ms = now;
		return;
	default:
		status_message(&r->body, msg, sizeof(msg));
		log_warn("k8s", "%s %s: HTTP %ld: %s", what, op, code, msg);
		res_fail(r, now);
		return;
	}
}

/* Hands a snapshot over when the view makes one that differs from the last one handed over. */
static void publish(struct k8s_src *k)
{
	struct services *s = NULL, *old;
	uint64_t fp = 0, one = 1;

	if (k8s_view_snapshot(k->view, &s, &fp) < 0) {
		log_error("k8s", "snapshot: out of memory (kept the previous one)");
		return;
	}
	if (k->published && fp == k->last_fp) {
		services_put(s);
		return;
	}
	s->generation = ++k->generation;
	pthread_mutex_lock(&k->mu);
	old = k->pending; /* never seen by the daemon: this thread's to drop */
	k->pending = s;
	pthread_mutex_unlock(&k->mu);
	services_put(old);
	k->last_fp = fp;
	k->published = true;
	if (write(k->efd, &one, sizeof(one)) != sizeof(one))
		log_debug("k8s", "eventfd: %s", strerror(errno));
}

static void *k8s_thread(void *arg)
{
	struct k8s_src *k = arg;
	sigset_t all;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL); /* signals are the daemon thread's */
	while (!atomic_load(&k->stop)) {
		uint64_t now = clock_ms(), wait = 1000;
		bool relist;
		CURLMsg *m;
		int running, left;

		pthread_mutex_lock(&k->mu);
		relist = k->relist_asked;
		k->relist_asked = false;
		pthread_mutex_unlock(&k->mu);
		for (int i = 0; i < 2; i++) {
			struct k8s_res *r = &k->res[i];

			if (relist) {
				res_drop(r);
				free(r->cont);
				r->cont = NULL;
				r->relist = true;
				r->next_ms = now;
			}
			if (!r->easy && now >= r->next_ms)
				res_start(r, now);
		}
		curl_multi_perform(k->multi, &running);
		while ((m = curl_multi_info_read(k->multi, &left))) {
			struct k8s_res *r = NULL;

			if (m->msg != CURLMSG_DONE)
				continue;
			curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&r);
			if (r)
				res_done(r, m->data.result, clock_ms());
		}
		if (k->res[0].listed && k->res[1].listed && k8s_view_dirty(k->view))
			publish(k);
		now = clock_ms();
		for (int i = 0; i < 2; i++)
			if (!k->res[i].easy)
				wait = k->res[i].next_ms <= now		? 0
				       : k->res[i].next_ms - now < wait ? k->res[i].next_ms - now
									: wait;
		curl_multi_poll(k->multi, NULL, 0, (int)wait, NULL);
	}
	for (int i = 0; i < 2; i++)
		res_drop(&k->res[i]);
	return NULL;
}

static int k8s_poll(struct discovery_source *src, int force, struct services **out)
{
	struct k8s_src *k = (struct k8s_src *)src;
	struct services *s;
	uint64_t x;

	if (read(k->efd, &x, sizeof(x)) < 0 && errno != EAGAIN)
		log_debug("k8s", "eventfd: %s", strerror(errno));
	pthread_mutex_lock(&k->mu);
	s = k->pending;
	k->pending = NULL;
	if (force)
		k->relist_asked = true;
	pthread_mutex_unlock(&k->mu);
	if (force)
		curl_multi_wakeup(k->multi);
	if (!s)
		return 0;
	*out = s;
	return 1;
}

static int k8s_notify_fd(struct discovery_source *src)
{
	return ((struct k8s_src *)src)->efd;
}

static void k8s_free(struct discovery_source *src)
{
	struct k8s_src *k = (struct k8s_src *)src;

	if (!k)
		return;
	atomic_store(&k->stop, true);
	if (k->started) {
		curl_multi_wakeup(k->multi);
		pthread_join(k->thr, NULL);
	}
	for (int i = 0; i < 2; i++) {
		res_drop(&k->res[i]);
		free(k->res[i].cont);
		buf_free(&k->res[i].body);
		k8s_lines_free(&k->res[i].lines);
	}
	if (k->multi)
		curl_multi_cleanup(k->multi);
	services_put(k->pending);
	k8s_view_free(k->view);
	if (k->efd >= 0)
		close(k->efd);
	pthread_mutex_destroy(&k->mu);
	free(k->api);
	free(k->token_path);
	free(k->ca_path);
	free(k);
}

/* A namespace name as the API accepts it (a DNS label). */
static bool ns_valid(const char *ns)
{
	size_t n = strlen(ns);

	if (!n || n > 63 || ns[0] == '-' || ns[n - 1] == '-')
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((ns[i] >= 'a' && ns[i] <= 'z') || (ns[i] >= '0' && ns[i] <= '9') ||
		      ns[i] == '-'))
			return false;
	return true;
}

void discovery_k8s_cfg_default(struct discovery_k8s_cfg *c)
{
	memset(c, 0, sizeof(*c));
	c->watch_timeout_min_s = 300;
	c->watch_timeout_max_s = 600;
	c->backoff_min_ms = K8S_BACKOFF_MIN_MS;
	c->backoff_max_ms = K8S_BACKOFF_MAX_MS;
	c->request_timeout_ms = K8S_REQUEST_TIMEOUT_MS;
	c->list_max_bytes = DISCOVERY_K8S_DEFAULT_LIST_MAX;
	c->event_max_bytes = DISCOVERY_K8S_DEFAULT_EVENT_MAX;
}

int discovery_k8s_source(const struct discovery_k8s_cfg *cfg, struct discovery_source **out,
			 char *err, size_t errlen)
{
	const char *host = getenv("KUBERNETES_SERVICE_HOST"),
		   *port = getenv("KUBERNETES_SERVICE_PORT");
	const char *ns = cfg->ns && cfg->ns[0] ? cfg->ns : NULL;
	struct k8s_src *k;
	struct buf api = {0};
	int rc = -ENOMEM;

	if (cfg->watch_timeout_min_s <= 0 || cfg->watch_timeout_max_s < cfg->watch_timeout_min_s ||
	    cfg->backoff_min_ms <= 0 || cfg->backoff_max_ms <= 0 || cfg->request_timeout_ms <= 0) {
		snprintf(err, errlen,
			 "watch timeouts, backoffs and the request timeout must be above 0");
		return -EINVAL;
	}
	if (cfg->api) {
		if (strncmp(cfg->api, "https://", 8) != 0 || !cfg->api[8]) {
			snprintf(err, errlen, "the API address must be https://HOST:PORT (got %s)",
				 cfg->api);
			return -EINVAL;
		}
		if (buf_puts(&api, cfg->api) < 0)
			return -ENOMEM;
		while (api.len && api.data[api.len - 1] == '/')
			api.data[--api.len] = '\0';
	} else if (host && *host && port && *port) {
		if (buf_printf(&api, strchr(host, ':') ? "https://[%s]:%s" : "https://%s:%s", host,
			       port) < 0)
			return -ENOMEM;
	} else {
		snprintf(err, errlen,
			 "not in a cluster: KUBERNETES_SERVICE_HOST / KUBERNETES_SERVICE_PORT are "
			 "not set (give the API address)");
		return -EINVAL;
	}
	if (ns && !ns_valid(ns)) {
		snprintf(err, errlen, "namespace \"%s\" is not a DNS label", ns);
		buf_free(&api);
		return -EINVAL;
	}
	k = calloc(1, sizeof(*k));
	if (!k) {
		buf_free(&api);
		return -ENOMEM;
	}
	k->efd = -1;
	pthread_mutex_init(&k->mu, NULL);
	k->api = api.data;
	k->token_path = strdup(cfg->token_path ? cfg->token_path : DISCOVERY_K8S_TOKEN);
	k->ca_path = strdup(cfg->ca_path ? cfg->ca_path : DISCOVERY_K8S_CA);
	k->watch_min_s = cfg->watch_timeout_min_s;
	k->watch_max_s = cfg->watch_timeout_max_s;
	k->backoff_min_ms = cfg->backoff_min_ms;
	k->backoff_max_ms = cfg->backoff_max_ms;
	if (k->backoff_max_ms < k->backoff_min_ms)
		k->backoff_max_ms = k->backoff_min_ms;
	k->timeout_ms = cfg->request_timeout_ms;
	/* 0 is no bound: half the address space, so sums never wrap */
	k->list_max = cfg->list_max_bytes ? cfg->list_max_bytes : SIZE_MAX / 2;
	k->event_max = cfg->event_max_bytes ? cfg->event_max_bytes : SIZE_MAX / 2;
	k->rnd = clock_ns() ^ ((uint64_t)getpid() << 32);
	k->src.kind = "kubernetes";
	k->src.poll = k8s_poll;
	k->src.free = k8s_free;
	k->src.notify_fd = k8s_notify_fd;
	if (!k->token_path || !k->ca_path)
		goto fail;
	if (access(k->ca_path, R_OK) < 0 || access(k->token_path, R_OK) < 0) {
		rc = -errno;
		snprintf(err, errlen, "%s: %s",
			 access(k->ca_path, R_OK) < 0 ? k->ca_path : k->token_path, strerror(-rc));
		rc = -EINVAL;
		goto fail;
	}
	for (int i = 0; i < 2; i++) {
		struct k8s_res *r = &k->res[i];

		r->k = k;
		r->kind = (enum k8s_kind)i;
		r->relist = true;
		snprintf(r->path, sizeof(r->path), "%s%s%s%s",
			 i == K8S_SERVICES ? "/api/v1" : "/apis/discovery.k8s.io/v1",
			 ns ? "/namespaces/" : "", ns ? ns : "",
			 i == K8S_SERVICES ? "/services" : "/endpointslices");
	}
	pthread_once(&curl_once, curl_init);
	if (curl_init_rc != CURLE_OK) {
		snprintf(err, errlen, "libcurl: %s", curl_easy_strerror(curl_init_rc));
		rc = -EINVAL;
		goto fail;
	}
	if (k8s_view_new(&k->view) < 0 || !(k->multi = curl_multi_init()))
		goto fail;
	k->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (k->efd < 0) {
		rc = -errno;
		snprintf(err, errlen, "eventfd: %s", strerror(-rc));
		goto fail;
	}
	rc = -pthread_create(&k->thr, NULL, k8s_thread, k);
	if (rc < 0) {
		snprintf(err, errlen, "thread: %s", strerror(-rc));
		goto fail;
	}
	k->started = true;
	log_info("k8s", "watching Services and EndpointSlices at %s%s%s", k->api,
		 ns ? " in namespace " : "", ns ? ns : "");
	*out = &k->src;
	return 0;
fail:
	if (rc == -ENOMEM && err[0] == '\0')
		snprintf(err, errlen, "out of memory");
	k8s_free(&k->src);
	return rc;
}
