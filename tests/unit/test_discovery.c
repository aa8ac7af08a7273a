// SPDX-License-Identifier: Apache-2.0
/* discovery: the services file format (golden table of good and bad files), lookups, snapshot
 * references, and the file source's change detection. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "discovery/discovery.h"
#include "tap.h"

struct bad_case {
	const char *json;
	const char *err_has; /* substring of the reason */
	const char *desc;
};

static const struct bad_case bad_cases[] = {
    {"", "not valid JSON", "empty file"},
    {"{\"services\": [", "not valid JSON", "truncated"},
    {"{}", "must be an array", "no services key"},
    {"{\"services\":{}}", "must be an array", "services not an array"},
    {"{\"services\":[{\"cluster_ip\":\"10.0.0.1\",\"port\":80}]}", "name", "no name"},
    {"{\"services\":[{\"name\":\"a\",\"cluster_ip\":\"10.0.0\",\"port\":80}]}", "cluster_ip",
     "bad cluster ip"},
    {"{\"services\":[{\"name\":\"a\",\"cluster_ip\":\"10.0.0.1\",\"port\":0}]}", "port", "port 0"},
    {"{\"services\":[{\"name\":\"a\",\"cluster_ip\":\"10.0.0.1\",\"port\":70000}]}", "port",
     "port too large"},
    {"{\"services\":[{\"name\":\"a\",\"cluster_ip\":\"10.0.0.1\",\"port\":80.5}]}", "port",
     "fractional port"},
    {"{\"services\":[{\"name\":\"a\",\"cluster_ip\":\"10.0.0.1\",\"port\":80},"
     "{\"name\":\"a\",\"cluster_ip\":\"10.0.0.2\",\"port\":80}]}",
     "duplicate name", "duplicate service name"},
    {"{\"services\":[{\"name\":\"a\",\"cluster_ip\":\"10.0.0.1\",\"port\":80},"
     "{\"name\":\"b\",\"cluster_ip\":\"10.0.0.1\",\"port\":80}]}",
     "same cluster_ip", "duplicate vip"},
    {"{\"services\":[{\"name\":\"a\",\"cluster_ip\":\"10.0.0.1\",\"port\":80,\"endpoints\":"
     "[{\"ip\":\"10.1.0.1\"}]}]}",
     "port", "endpoint without port"},
    {"{\"services\":[{\"name\":\"a\",\"cluster_ip\":\"10.0.0.1\",\"port\":80,\"endpoints\":"
     "[{\"ip\":\"x\",\"port\":1}]}]}",
     "ip", "endpoint bad ip"},
    {"{\"services\":[{\"name\":\"a\",\"cluster_ip\":\"10.0.0.1\",\"port\":80,\"endpoints\":"
     "[{\"ip\":\"10.1.0.1\",\"port\":1,\"events_port\":-1}]}]}",
     "events_port", "bad events port"},
    {"{\"services\":[{\"name\":\"a\",\"cluster_ip\":\"10.0.0.1\",\"port\":80,\"endpoints\":"
     "[{\"ip\":\"10.1.0.1\",\"port\":1},{\"ip\":\"10.1.0.1\",\"port\":1}]}]}",
     "twice", "duplicate endpoint"},
    {"{\"services\":[{\"name\":\"a\",\"cluster_ip\":\"10.0.0.1\",\"port\":80,\"endpoints\":{}}]}",
     "endpoints", "endpoints not an array"},
};

static const char good[] =
    "{\"services\":[{\"name\":\"qwen\",\"cluster_ip\":\"10.96.0.50\",\"port\":8000,"
    "\"endpoints\":[{\"name\":\"w1\",\"ip\":\"10.0.1.2\",\"port\":8000,\"events_port\":20080,"
    "\"replay_port\":20081},{\"ip\":\"10.0.1.3\",\"port\":8001}]},"
    "{\"name\":\"empty\",\"cluster_ip\":\"10.96.0.51\",\"port\":80}]}";

static void test_bad(void)
{
	for (size_t i = 0; i < sizeof(bad_cases) / sizeof(bad_cases[0]); i++) {
		struct services *s = NULL;
		char err[256] = "";
		int rc = discovery_parse(bad_cases[i].json, strlen(bad_cases[i].json), &s, err,
					 sizeof(err));

		CHECK(rc == -22 && !s && strstr(err, bad_cases[i].err_has), "%s refused: %s",
		      bad_cases[i].desc, err);
	}
}

static void test_good(void)
{
	struct services *s = NULL;
	const struct service *q;
	char err[256] = "";
	int rc = discovery_parse(good, strlen(good), &s, err, sizeof(err));

	if (!CHECK(rc == 0 && s, "good file parses (%s)", err))
		return;
	CHECK_EQ(s->n, 2, "two services");
	q = services_find_vip(s, inet_addr("10.96.0.50"), htons(8000));
	CHECK(q && strcmp(q->name, "qwen") == 0 && q->id == 1, "find by ClusterIP:port");
	CHECK(!services_find_vip(s, inet_addr("10.96.0.50"), htons(8001)), "other port: none");
	CHECK(services_find_name(s, "empty") && services_find_name(s, "empty")->nendpoints == 0,
	      "service without endpoints");
	CHECK_EQ(q->nendpoints, 2, "two endpoints");
	CHECK(strcmp(q->endpoints[0].name, "w1") == 0 && q->endpoints[0].events_port == 20080 &&
		  q->endpoints[0].replay_port == 20081 &&
		  q->endpoints[0].addr.sin_port == htons(8000),
	      "endpoint fields");
	CHECK(strcmp(q->endpoints[1].name, "10.0.1.3") == 0 && q->endpoints[1].events_port == 0,
	      "unnamed endpoint named by its ip; optional ports 0");
	services_get(s);
	services_put(s);
	CHECK_EQ(s->refs, 1, "get/put keep the snapshot");
	services_put(s);
}

static void test_file_source(void)
{
	char path[] = "/tmp/kvs-disc-XXXXXX";
	int fd = mkstemp(path);
	struct discovery_source *src;
	struct services *s = NULL;
	FILE *f;

	if (!CHECK(fd >= 0, "temp file"))
		return;
	f = fdopen(fd, "w");
	fputs(good, f);
	fclose(f);
	CHECK(discovery_file_source(path, 0, &src) == 0, "file source");
	CHECK(src->poll(src, 0, &s) == 1 && s && s->generation == 1, "first poll loads");
	services_put(s);
	s = NULL;
	CHECK(src->poll(src, 0, &s) == 0 && !s, "unchanged file: nothing new");
	CHECK(src->poll(src, 1, &s) == 1 && s && s->generation == 2, "forced poll reloads");
	services_put(s);
	s = NULL;
	f = fopen(path, "w");
	fputs("{\"services\":[]}\n", f);
	fclose(f);
	CHECK(src->poll(src, 0, &s) == 1 && s && s->n == 0, "changed file (size) reloads");
	services_put(s);
	s = NULL;
	f = fopen(path, "w");
	fputs("{broken", f);
	fclose(f);
	CHECK(src->poll(src, 0, &s) < 0 && !s, "broken file: error, no snapshot");
	unlink(path);
	CHECK(src->poll(src, 0, &s) < 0 && !s, "missing file: error");
	src->free(src);
}

/* max_bytes: a file of exactly the bound is read, one byte more is refused unread (-EFBIG). */
static void test_file_max_bytes(void)
{
	static const struct {
		size_t under; /* max_bytes = the file's size - under */
		int rc;
		const char *what;
	} rows[] = {
	    {0, 1, "max_bytes: a file of exactly the bound is read"},
	    {1, -EFBIG, "max_bytes: a file one byte over the bound is refused (-EFBIG)"},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		char path[] = "/tmp/kvs-disc-XXXXXX";
		int fd = mkstemp(path);
		struct discovery_source *src;
		struct services *s = NULL;
		FILE *f;
		int rc;

		if (!CHECK(fd >= 0, "temp file"))
			return;
		f = fdopen(fd, "w");
		fputs(good, f);
		fclose(f);
		if (!CHECK(discovery_file_source(path, strlen(good) - rows[i].under, &src) == 0,
			   "%s: file source", rows[i].what)) {
			unlink(path);
			return;
		}
		rc = src->poll(src, 0, &s);
		CHECK(rc == rows[i].rc && !s == (rc < 0), "%s (got %d)", rows[i].what, rc);
		services_put(s);
		src->free(src);
		unlink(path);
	}
}

int main(void)
{
	test_bad();
	test_good();
	test_file_max_bytes();
	test_file_source();
	return tap_done();
}
