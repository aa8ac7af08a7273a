// SPDX-License-Identifier: Apache-2.0
/* routecheck: see routecheck.h. */
#include <errno.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "core/buf.h"
#include "routecheck.h"

/* Admin requests give up after this long, seconds. */
#ifndef RC_TIMEOUT_S
#define RC_TIMEOUT_S 5
#endif

/* GETs path from admin into body (the body only, NUL-terminated). Returns 0, or -1 (message on
 * stderr) on a connection error, a timeout or a status other than 200. */
static int rc_get(const struct sockaddr_in *admin, const char *path, struct buf *body)
{
	struct timeval tv = {.tv_sec = RC_TIMEOUT_S};
	struct buf in = {0};
	char req[256];
	const char *eoh;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), rc = -1, len;

	if (fd < 0)
		goto cleanup;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (connect(fd, (const struct sockaddr *)admin, sizeof(*admin)) < 0)
		goto cleanup;
	len = snprintf(req, sizeof(req),
		       "GET %s HTTP/1.1\r\nHost: admin\r\nConnection: close\r\n\r\n", path);
	if (write(fd, req, (size_t)len) != len)
		goto cleanup;
	/* the admin server closes the connection after its answer */
	for (;;) {
		ssize_t r;

		if (buf_reserve(&in, 65536) < 0)
			goto cleanup;
		r = read(fd, in.data + in.len, in.cap - in.len - 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			goto cleanup;
		if (r == 0)
			break;
		in.len += (size_t)r;
	}
	in.data[in.len] = '\0';
	eoh = strstr(in.data, "\r\n\r\n");
	if (!eoh || strncmp(in.data, "HTTP/1.1 200 ", 13) != 0) {
		errno = EPROTO;
		goto cleanup;
	}
	buf_reset(body);
	if (buf_append(body, eoh + 4, in.len - (size_t)(eoh + 4 - in.data)) < 0 ||
	    buf_reserve(body, 1) < 0)
		goto cleanup;
	body->data[body->len] = '\0';
	rc = 0;
cleanup:
	if (rc)
		fprintf(stderr, "routecheck: GET %s from the admin server: %s\n", path,
			strerror(errno));
	if (fd >= 0)
		close(fd);
	buf_free(&in);
	return rc;
}

/* The sum of the samples of metric name (exact name, any labels) whose labels contain label
 * (NULL: all) in Prometheus text; *found set when one was seen. */
static double rc_metric(const char *text, const char *name, const char *label, bool *found)
{
	size_t nl = strlen(name);
	double sum = 0;

	for (const char *l = text; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
		const char *end = strchr(l, '\n'), *v;

		if (*l == '#' || strncmp(l, name, nl) != 0 || (l[nl] != ' ' && l[nl] != '{'))
			continue;
		if (!end)
			end = l + strlen(l);
		v = l + nl;
		if (*v == '{') {
			const char *close = memchr(v, '}', (size_t)(end - v));

			if (!close)
				continue;
			if (label && !memmem(v, (size_t)(close - v), label, strlen(label)))
				continue;
			v = close + 1;
		} else if (label) {
			continue;
		}
		sum += strtod(v, NULL);
		*found = true;
	}
	return sum;
}

int routecheck_snap(const struct sockaddr_in *admin, struct rc_snap *out)
{
	struct buf body = {0};
	bool have_sum = false, have_count = false, unused = false;

	if (rc_get(admin, "/metrics", &body) < 0)
		return -1;
	out->dec_sum_s =
	    rc_metric(body.data, "kvsplice_route_decision_seconds_sum", NULL, &have_sum);
	out->dec_count =
	    rc_metric(body.data, "kvsplice_route_decision_seconds_count", NULL, &have_count);
	out->fallbacks = rc_metric(body.data, "kvsplice_route_fallbacks_total", NULL, &unused);
	out->prompt_tokens =
	    rc_metric(body.data, "kvsplice_route_tokens_total", "kind=\"prompt\"", &unused);
	buf_free(&body);
	if (!have_sum || !have_count) {
		fprintf(stderr, "routecheck: /metrics has no kvsplice_route_decision_seconds\n");
		return -1;
	}
	return 0;
}

static int rc_cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double rc_median(double *v, int n)
{
	if (n <= 0)
		return 0;
	qsort(v, (size_t)n, sizeof(*v), rc_cmp);
	return v[n / 2];
}

static double rc_num(const cJSON *o, const char *key)
{
	const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, key);

	return cJSON_IsNumber(x) ? x->valuedouble : -1;
}

int routecheck_read(const struct sockaddr_in *admin, const char *target,
		    const struct rc_snap *before, const struct rc_snap *after,
		    struct rc_result *out)
{
	struct buf body = {0};
	cJSON *root = NULL;
	const cJSON *routes, *x;
	double *dus = NULL, *tok = NULL, *blk = NULL, *dblk = NULL;
	int n = 0, rc = -1, cap;

	memset(out, 0, sizeof(*out));
	if (before) {
		struct rc_snap z = {0};
		const struct rc_snap *b = after ? before : &z, *a = after ? after : before;

		out->decisions = a->dec_count - b->dec_count;
		out->fallbacks = a->fallbacks - b->fallbacks;
		if (out->decisions > 0) {
			out->mean_decision_us =
			    (a->dec_sum_s - b->dec_sum_s) * 1e6 / out->decisions;
			out->mean_prompt_tokens =
			    (a->prompt_tokens - b->prompt_tokens) / out->decisions;
		}
	}
	if (rc_get(admin, "/debug/route", &body) < 0)
		goto cleanup;
	root = cJSON_ParseWithLength(body.data, body.len);
	routes = cJSON_GetObjectItemCaseSensitive(root, "routes");
	x = cJSON_GetObjectItemCaseSensitive(root, "router");
	snprintf(out->router, sizeof(out->router), "%s", cJSON_IsString(x) ? x->valuestring : "?");
	if (!cJSON_IsArray(routes)) {
		fprintf(stderr, "routecheck: /debug/route has no \"routes\" array\n");
		goto cleanup;
	}
	cap = cJSON_GetArraySize(routes);
	dus = calloc((size_t)cap + 1, sizeof(*dus));
	tok = calloc((size_t)cap + 1, sizeof(*tok));
	blk = calloc((size_t)cap + 1, sizeof(*blk));
	dblk = calloc((size_t)cap + 1, sizeof(*dblk));
	if (!dus || !tok || !blk || !dblk)
		goto cleanup;
	cJSON_ArrayForEach(x, routes)
	{
		const cJSON *t = cJSON_GetObjectItemCaseSensitive(x, "target");
		const cJSON *view = cJSON_GetObjectItemCaseSensitive(x, "view");
		const cJSON *fb = cJSON_GetObjectItemCaseSensitive(x, "fallback");
		const char *v = cJSON_IsString(view) ? view->valuestring : "?";

		if (!cJSON_IsString(t) || strcmp(t->valuestring, target) != 0)
			continue;
		if (strcmp(v, "events") != 0 && strcmp(v, "approx") != 0)
			out->bad_view++;
		if (!n)
			snprintf(out->view, sizeof(out->view), "%s", v);
		else if (strcmp(out->view, v) != 0)
			snprintf(out->view, sizeof(out->view), "mixed");
		if (!cJSON_IsNull(fb))
			out->bad_fallback++;
		dus[n] = rc_num(x, "decision_us");
		tok[n] = rc_num(x, "prompt_tokens");
		blk[n] = rc_num(x, "blocks");
		dblk[n] = rc_num(x, "decided_on_blocks");
		if (tok[n] <= 0)
			out->no_tokens++;
		if (dus[n] > out->decision_us_max)
			out->decision_us_max = dus[n];
		n++;
	}
	out->records = n;
	out->decision_us_p50 = rc_median(dus, n);
	out->prompt_tokens_p50 = rc_median(tok, n);
	out->blocks_p50 = rc_median(blk, n);
	out->decided_blocks_p50 = rc_median(dblk, n);
	rc = 0;
cleanup:
	cJSON_Delete(root);
	free(dus);
	free(tok);
	free(blk);
	free(dblk);
	buf_free(&body);
	return rc;
}

bool routecheck_ok(const struct rc_result *r, double min_decisions, const char *what)
{
	bool ok = true;

	if (!r->records) {
		fprintf(stderr, "overhead: %s: /debug/route holds no record of these requests\n",
			what);
		ok = false;
	}
	if (r->bad_view) {
		fprintf(
		    stderr,
		    "overhead: %s: %d of %d decisions had a view other than events/approx (%s)\n",
		    what, r->bad_view, r->records, r->view);
		ok = false;
	}
	if (r->bad_fallback || r->fallbacks > 0) {
		fprintf(
		    stderr,
		    "overhead: %s: not decided on tokens: %d of %d /debug/route records have a "
		    "fallback, /metrics counts %.0f fallbacks (kvsplice_route_fallbacks_total)\n",
		    what, r->bad_fallback, r->records, r->fallbacks);
		ok = false;
	}
	if (r->no_tokens || r->mean_prompt_tokens <= 0) {
		fprintf(
		    stderr,
		    "overhead: %s: %d of %d decisions had prompt_tokens 0; /metrics: %.1f prompt "
		    "tokens per decision\n",
		    what, r->no_tokens, r->records, r->mean_prompt_tokens);
		ok = false;
	}
	if (r->decisions < min_decisions) {
		fprintf(stderr, "overhead: %s: /metrics counts %.0f decisions, expected %.0f\n",
			what, r->decisions, min_decisions);
		ok = false;
	}
	return ok;
}

void routecheck_print(FILE *f, const struct rc_result *r)
{
	fprintf(f,
		"router %s, view %s, fallback none; /debug/route (last %d): prompt_tokens p50 "
		"%.0f, blocks p50 %.0f (decided on %.0f), decision_us p50 %.1f, max %.1f; "
		"/metrics over %.0f decisions: "
		"kvsplice_route_decision_seconds mean %.1f µs, %.0f prompt tokens per decision, "
		"%.0f fallbacks\n",
		r->router, r->view, r->records, r->prompt_tokens_p50, r->blocks_p50,
		r->decided_blocks_p50, r->decision_us_p50, r->decision_us_max, r->decisions,
		r->mean_decision_us, r->mean_prompt_tokens, r->fallbacks);
}
