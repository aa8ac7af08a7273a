// SPDX-License-Identifier: Apache-2.0
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdbool.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "discovery/discovery.h"
#include "core/log.h"

int services_new(size_t n, struct services **out)
{
	struct services *s = calloc(1, sizeof(*s));

	if (!s)
		return -ENOMEM;
	s->refs = 1;
	s->v = calloc(n ? n : 1, sizeof(*s->v));
	if (!s->v) {
		free(s);
		return -ENOMEM;
	}
	s->n = n;
	for (size_t i = 0; i < n; i++)
		s->v[i].id = (uint32_t)(i + 1);
	*out = s;
	return 0;
}

struct services *services_get(struct services *s)
{
	if (s)
		s->refs++;
	return s;
}

void services_put(struct services *s)
{
	if (!s || --s->refs > 0)
		return;
	for (size_t i = 0; i < s->n; i++)
		free(s->v[i].endpoints);
	free(s->v);
	free(s);
}

const struct service *services_find_vip(const struct services *s, uint32_t ip, uint16_t port)
{
	for (size_t i = 0; s && i < s->n; i++)
		if (s->v[i].vip.sin_addr.s_addr == ip && s->v[i].vip.sin_port == port)
			return &s->v[i];
	return NULL;
}

const struct service *services_find_name(const struct services *s, const char *name)
{
	for (size_t i = 0; s && i < s->n; i++)
		if (strcmp(s->v[i].name, name) == 0)
			return &s->v[i];
	return NULL;
}

static struct discovery_routes routes;

void discovery_set_routes(const struct discovery_routes *r)
{
	routes = r ? *r : (struct discovery_routes){0};
}

bool discovery_route_known(const char *name)
{
	return !routes.known || routes.known(name);
}

const char *discovery_route_names(void)
{
	return routes.names ? routes.names() : "any name";
}

static int get_name(const cJSON *o, const char *key, char *out, bool required)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

	if (!v && !required) {
		out[0] = '\0';
		return 0;
	}
	if (!cJSON_IsString(v) || !v->valuestring[0] ||
	    strlen(v->valuestring) >= DISCOVERY_NAME_MAX)
		return -1;
	strcpy(out, v->valuestring);
	return 0;
}

static int get_port(const cJSON *o, const char *key, uint16_t *out, bool required)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

	if (!v && !required) {
		*out = 0;
		return 0;
	}
	if (!cJSON_IsNumber(v) || v->valuedouble < 1 || v->valuedouble > 65535 ||
	    v->valuedouble != (double)(int)v->valuedouble)
		return -1;
	*out = (uint16_t)v->valueint;
	return 0;
}

/* An optional string of fewer than n bytes ("" when absent). */
static int get_str(const cJSON *o, const char *key, char *out, size_t n)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

	out[0] = '\0';
	if (!v)
		return 0;
	if (!cJSON_IsString(v) || strlen(v->valuestring) >= n)
		return -1;
	strcpy(out, v->valuestring);
	return 0;
}

/* An optional boolean (false when absent). */
static int get_bool(const cJSON *o, const char *key, bool *out)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

	*out = cJSON_IsTrue(v);
	return v && !cJSON_IsBool(v) ? -1 : 0;
}

static int get_ip(const cJSON *o, const char *key, struct in_addr *out)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

	if (!cJSON_IsString(v) || inet_pton(AF_INET, v->valuestring, out) != 1)
		return -1;
	return 0;
}

#define FAIL(...)                                                                                  \
	do {                                                                                       \
		snprintf(err, errlen, __VA_ARGS__);                                                \
		rc = -EINVAL;                                                                      \
		goto cleanup;                                                                      \
	} while (0)

int discovery_parse(const char *json, size_t len, struct services **out, char *err, size_t errlen)
{
	cJSON *root = cJSON_ParseWithLength(json, len);
	const cJSON *arr, *js;
	struct services *s = NULL;
	int rc = -ENOMEM;
	size_t i = 0;

	if (!root)
		FAIL("not valid JSON");
	arr = cJSON_GetObjectItemCaseSensitive(root, "services");
	if (!cJSON_IsArray(arr))
		FAIL("\"services\" must be an array");
	if (services_new((size_t)cJSON_GetArraySize(arr), &s) < 0)
		goto cleanup;
	cJSON_ArrayForEach(js, arr)
	{
		struct service *sv = &s->v[i];
		const cJSON *eps = cJSON_GetObjectItemCaseSensitive(js, "endpoints"), *je;
		uint16_t port;
		size_t k = 0;

		if (!cJSON_IsObject(js) || get_name(js, "name", sv->name, true))
			FAIL("service %zu: \"name\" must be a non-empty string (< %d bytes)", i,
			     DISCOVERY_NAME_MAX);
		if (get_ip(js, "cluster_ip", &sv->vip.sin_addr))
			FAIL("service %s: \"cluster_ip\" must be an IPv4 address", sv->name);
		if (get_port(js, "port", &port, true))
			FAIL("service %s: \"port\" must be 1..65535", sv->name);
		sv->vip.sin_family = AF_INET;
		sv->vip.sin_port = htons(port);
		if (get_str(js, "route", sv->policy, sizeof(sv->policy)) ||
		    (sv->policy[0] && !discovery_route_known(sv->policy)))
			FAIL("service %s: \"route\" must be one of %s", sv->name,
			     discovery_route_names());
		if (get_str(js, "model", sv->model, sizeof(sv->model)))
			FAIL("service %s: \"model\" must be a string (< %d bytes)", sv->name,
			     DISCOVERY_MODEL_MAX);
		if (get_str(js, "model_tokenizers", sv->tokenizers, sizeof(sv->tokenizers)))
			FAIL("service %s: \"model_tokenizers\" must be a string (< %d bytes)",
			     sv->name, DISCOVERY_TOKENIZERS_MAX);
		for (size_t j = 0; j < i; j++) {
			if (strcmp(s->v[j].name, sv->name) == 0)
				FAIL("service %s: duplicate name", sv->name);
			if (s->v[j].vip.sin_addr.s_addr == sv->vip.sin_addr.s_addr &&
			    s->v[j].vip.sin_port == sv->vip.sin_port)
				FAIL("service %s: same cluster_ip:port as %s", sv->name,
				     s->v[j].name);
		}
		if (eps && !cJSON_IsArray(eps))
			FAIL("service %s: \"endpoints\" must be an array", sv->name);
		sv->nendpoints = eps ? (size_t)cJSON_GetArraySize(eps) : 0;
		sv->endpoints =
		    calloc(sv->nendpoints ? sv->nendpoints : 1, sizeof(struct endpoint));
		if (!sv->endpoints)
			goto cleanup;
		i++;
		cJSON_ArrayForEach(je, eps)
		{
			struct endpoint *ep = &sv->endpoints[k];

			if (!cJSON_IsObject(je) || get_name(je, "name", ep->name, false))
				FAIL("service %s endpoint %zu: bad \"name\"", sv->name, k);
			if (get_ip(je, "ip", &ep->addr.sin_addr))
				FAIL("service %s endpoint %zu: \"ip\" must be an IPv4 address",
				     sv->name, k);
			if (get_port(je, "port", &port, true))
				FAIL("service %s endpoint %zu: \"port\" must be 1..65535", sv->name,
				     k);
			ep->addr.sin_family = AF_INET;
			ep->addr.sin_port = htons(port);
			if (get_port(je, "events_port", &ep->events_port, false) ||
			    get_port(je, "replay_port", &ep->replay_port, false))
				FAIL("service %s endpoint %zu: events_port / replay_port must be "
				     "1..65535",
				     sv->name, k);
			if (get_bool(je, "terminating", &ep->terminating))
				FAIL("service %s endpoint %zu: \"terminating\" must be true or "
				     "false",
				     sv->name, k);
			if (!ep->name[0])
				inet_ntop(AF_INET, &ep->addr.sin_addr, ep->name, sizeof(ep->name));
			for (size_t j = 0; j < k; j++)
				if (sv->endpoints[j].addr.sin_addr.s_addr ==
					ep->addr.sin_addr.s_addr &&
				    sv->endpoints[j].addr.sin_port == ep->addr.sin_port)
					FAIL("service %s: endpoint %s listed twice", sv->name,
					     ep->name);
			k++;
		}
	}
	*out = s;
	s = NULL;
	rc = 0;
cleanup:
	services_put(s); /* unfilled entries are zeroed: freeing them is a no-op */
	cJSON_Delete(root);
	return rc;
}

struct file_source {
	struct discovery_source src;
	char *path;
	size_t max_bytes; /* larger files are refused */
	struct stat last;
	int have_last;
	uint64_t generation;
};

static struct file_source *container_of_file(struct discovery_source *src)
{
	return (struct file_source *)src; /* src is the first member */
}

/* Reads the whole file at path into *text (NUL-terminated, *len bytes). 0, -EFBIG when it is
 * larger than max bytes (nothing read), -ENOMEM, or open/read's negative errno. */
static int file_read(const char *path, size_t max, char **text, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), rc = 0;
	struct stat st;
	char *p = NULL;
	size_t n = 0;

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0) {
		rc = -errno;
		goto cleanup;
	}
	if ((uint64_t)st.st_size > max) {
		log_error("discovery",
			  "%s: %lld bytes, larger than the bound of %zu (--services-max-bytes)",
			  path, (long long)st.st_size, max);
		rc = -EFBIG;
		goto cleanup;
	}
	p = malloc((size_t)st.st_size + 1);
	if (!p) {
		rc = -ENOMEM;
		goto cleanup;
	}
	while (n < (size_t)st.st_size) {
		ssize_t r = read(fd, p + n, (size_t)st.st_size - n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	p[n] = '\0';
	*text = p;
	*len = n;
	p = NULL;
cleanup:
	free(p);
	close(fd);
	return rc;
}

static int file_poll(struct discovery_source *src, int force, struct services **out)
{
	struct file_source *f = container_of_file(src);
	char err[256] = "", *text = NULL;
	struct stat st;
	size_t len = 0;
	int rc;

	if (stat(f->path, &st) < 0)
		return -errno;
	if (!force && f->have_last && st.st_mtim.tv_sec == f->last.st_mtim.tv_sec &&
	    st.st_mtim.tv_nsec == f->last.st_mtim.tv_nsec && st.st_size == f->last.st_size &&
	    st.st_ino == f->last.st_ino)
		return 0;
	f->last = st;
	f->have_last = 1;
	rc = file_read(f->path, f->max_bytes, &text, &len);
	if (rc) {
		if (rc != -EFBIG) /* logged with the bound */
			log_error("discovery", "%s: %s", f->path, strerror(-rc));
		return rc;
	}
	rc = discovery_parse(text, len, out, err, sizeof(err));
	free(text);
	if (rc) {
		log_error("discovery", "%s: %s", f->path, rc == -EINVAL ? err : strerror(-rc));
		return rc;
	}
	(*out)->generation = ++f->generation;
	return 1;
}

static void file_free(struct discovery_source *src)
{
	struct file_source *f = container_of_file(src);

	free(f->path);
	free(f);
}

int discovery_file_source(const char *path, size_t max_bytes, struct discovery_source **out)
{
	struct file_source *f = calloc(1, sizeof(*f));

	if (!f || !(f->path = strdup(path))) {
		free(f);
		return -ENOMEM;
	}
	f->max_bytes = max_bytes ? max_bytes : SIZE_MAX; /* 0: no bound */
	f->src.kind = "file";
	f->src.poll = file_poll;
	f->src.free = file_free;
	*out = &f->src;
	return 0;
}
