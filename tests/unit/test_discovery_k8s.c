// SPDX-License-Identifier: Apache-2.0
/* discovery_k8s, the pure part: Service and EndpointSlice objects -> the Services snapshot
 * (golden table: opt-in annotations, port resolution, ready / terminating / not-ready endpoints,
 * skipped Services), list pages and watch events (ADDED / MODIFIED / DELETED, BOOKMARK, ERROR 410,
 * garbage), the line splitter fed split at every byte, the bounds, the snapshot fingerprint, and
 * the file source's optional route / model / terminating fields. The HTTP side is tested against
 * the test API server in tests/e2e/test_discovery_k8s.sh. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/buf.h"
#include "discovery/discovery.h"
#include "core/log.h"
#include "route/policy.h"
#include "tap.h"

/* Objects as the API server writes them (only the fields that matter, plus some that do not). */
#define SVC_T(ns, name, type, cip, ports, ann)                                                     \
	"{\"metadata\":{\"namespace\":\"" ns "\",\"name\":\"" name                                 \
	"\",\"uid\":\"u1\",\"resourceVersion\":\"7\",\"labels\":{\"app\":\"x\"},"                  \
	"\"annotations\":" ann "},\"spec\":{\"type\":\"" type "\",\"clusterIP\":\"" cip            \
	"\",\"clusterIPs\":[\"" cip "\"],\"ports\":" ports ",\"selector\":{\"app\":\"x\"}},"       \
	"\"status\":{\"loadBalancer\":{}}}"
#define SVC(ns, name, cip, ports, ann) SVC_T(ns, name, "ClusterIP", cip, ports, ann)
#define PORT(name, port) "{\"name\":\"" name "\",\"protocol\":\"TCP\",\"port\":" #port "}"
#define UPORT(name, port) "{\"name\":\"" name "\",\"protocol\":\"UDP\",\"port\":" #port "}"
#define NOPORTNAME(port) "{\"protocol\":\"TCP\",\"port\":" #port "}"
#define SLICE(ns, name, svc, ports, eps)                                                           \
	"{\"metadata\":{\"namespace\":\"" ns "\",\"name\":\"" name "\",\"resourceVersion\":\"8\"," \
	"\"labels\":{\"kubernetes.io/service-name\":\"" svc "\",\"endpointslice.kubernetes.io/"    \
	"managed-by\":\"endpointslice-controller.k8s.io\"}},\"addressType\":\"IPv4\","             \
	"\"ports\":" ports ",\"endpoints\":" eps "}"
#define EP(ip, pod, cond)                                                                          \
	"{\"addresses\":[\"" ip "\"],\"conditions\":" cond ",\"nodeName\":\"n1\",\"targetRef\":"   \
	"{\"kind\":\"Pod\",\"namespace\":\"ml\",\"name\":\"" pod "\"}}"
#define EP_NOREF(ip, cond) "{\"addresses\":[\"" ip "\"],\"conditions\":" cond "}"
#define READY "{\"ready\":true,\"serving\":true,\"terminating\":false}"
#define UNSET "{}"
#define TERM "{\"ready\":false,\"serving\":true,\"terminating\":true}"
#define TERM_GONE "{\"ready\":false,\"serving\":false,\"terminating\":true}"
#define NOT_READY "{\"ready\":false,\"serving\":true,\"terminating\":false}"
#define KV "{\"kvsplice.io/route\":\"kv\"}"
#define HTTP8000 "[" PORT("http", 8000) "]"

struct row {
	const char *services; /* items of a ServiceList */
	const char *slices;   /* items of an EndpointSliceList */
	const char *want;     /* render() of the snapshot */
	const char *desc;
};

static const struct row rows[] = {
    {SVC("ml", "qwen", "10.96.0.50", HTTP8000, KV),
     SLICE("ml", "qwen-a", "qwen", HTTP8000, "[" EP("10.244.1.5", "vllm-0", READY) "]"),
     "ml/qwen 10.96.0.50:8000 kv: vllm-0=10.244.1.5:8000", "opted in, one ready endpoint"},
    {SVC("ml", "qwen", "10.96.0.50", HTTP8000, "{\"other\":\"x\"}"),
     SLICE("ml", "qwen-a", "qwen", HTTP8000, "[" EP("10.244.1.5", "vllm-0", READY) "]"), "",
     "no kvsplice.io/route: not served"},
    {SVC("ml", "qwen", "10.96.0.50", HTTP8000, KV),
     SLICE(
	 "ml", "qwen-a", "qwen", HTTP8000,
	 "[" EP("10.244.1.5", "a", READY) "," EP("10.244.1.6", "b", TERM) "," EP(
	     "10.244.1.7", "c", NOT_READY) "," EP("10.244.1.8", "d",
						  UNSET) "," EP("10.244.1.9", "e", TERM_GONE) "]"),
     "ml/qwen 10.96.0.50:8000 kv: a=10.244.1.5:8000 b=10.244.1.6:8000(T) d=10.244.1.8:8000 "
     "e=10.244.1.9:8000(T)",
     "ready serves, terminating kept and marked, serving-but-not-ready left out, unset = ready"},
    {SVC("ml", "qwen", "10.96.0.50", "[" PORT("metrics", 9000) "," PORT("http", 8000) "]", KV),
     SLICE("ml", "qwen-a", "qwen", "[" PORT("metrics", 9090) "," PORT("http", 8080) "]",
	   "[" EP("10.244.1.5", "a", READY) "]"),
     "ml/qwen 10.96.0.50:8000 kv: a=10.244.1.5:8080",
     "two ports: the one named http, resolved to the slice port of that name"},
    {SVC("ml", "qwen", "10.96.0.50", "[" PORT("metrics", 9000) "," PORT("api", 8000) "]", KV),
     SLICE("ml", "qwen-a", "qwen", "[" PORT("metrics", 9090) "," PORT("api", 8080) "]",
	   "[" EP("10.244.1.5", "a", READY) "]"),
     "", "two ports, none named http, no kvsplice.io/port: skipped"},
    {SVC("ml", "qwen", "10.96.0.50", "[" PORT("metrics", 9000) "," PORT("api", 8000) "]",
	 "{\"kvsplice.io/route\":\"kv\",\"kvsplice.io/port\":\"api\"}"),
     SLICE("ml", "qwen-a", "qwen", "[" PORT("metrics", 9090) "," PORT("api", 8080) "]",
	   "[" EP("10.244.1.5", "a", READY) "]"),
     "ml/qwen 10.96.0.50:8000 kv: a=10.244.1.5:8080", "kvsplice.io/port by name"},
    {SVC("ml", "qwen", "10.96.0.50", "[" PORT("metrics", 9000) "," PORT("api", 8000) "]",
	 "{\"kvsplice.io/route\":\"kv\",\"kvsplice.io/port\":\"9000\"}"),
     SLICE("ml", "qwen-a", "qwen", "[" PORT("metrics", 9090) "," PORT("api", 8080) "]",
	   "[" EP("10.244.1.5", "a", READY) "]"),
     "ml/qwen 10.96.0.50:9000 kv: a=10.244.1.5:9090", "kvsplice.io/port by number"},
    {SVC("ml", "qwen", "10.96.0.50", HTTP8000,
	 "{\"kvsplice.io/route\":\"kv\",\"kvsplice.io/port\":\"grpc\"}"),
     SLICE("ml", "qwen-a", "qwen", HTTP8000, "[" EP("10.244.1.5", "a", READY) "]"), "",
     "kvsplice.io/port naming no port: skipped"},
    {SVC("ml", "qwen", "10.96.0.50", "[" NOPORTNAME(80) "]", KV),
     SLICE("ml", "qwen-a", "qwen", "[" NOPORTNAME(8000) "]", "[" EP("10.244.1.5", "a", READY) "]"),
     "ml/qwen 10.96.0.50:80 kv: a=10.244.1.5:8000", "one unnamed port"},
    {SVC("ml", "qwen", "10.96.0.50", "[" UPORT("dns", 53) "]", KV),
     SLICE("ml", "qwen-a", "qwen", "[" UPORT("dns", 53) "]", "[" EP("10.244.1.5", "a", READY) "]"),
     "", "UDP only: skipped"},
    {SVC("ml", "qwen", "10.96.0.50",
	 "[" PORT("http", 8000) "," PORT("kv-events", 20080) "," PORT("kv-replay", 20081) "]",
	 "{\"kvsplice.io/route\":\"dynamo\",\"kvsplice.io/events-port\":\"20090\","
	 "\"kvsplice.io/replay-port\":\"kv-replay\",\"kvsplice.io/model\":\"Qwen/Qwen3-0.6B\"}"),
     SLICE("ml", "qwen-a", "qwen",
	   "[" PORT("http", 8000) "," PORT("kv-events", 30080) "," PORT("kv-replay", 30081) "]",
	   "[" EP("10.244.1.5", "a", READY) "]"),
     "ml/qwen 10.96.0.50:8000 dynamo model=Qwen/Qwen3-0.6B: a=10.244.1.5:8000+e20090+r30081",
     "events port by number, replay port by name (the slice's number), policy and model"},
    {SVC("ml", "qwen", "10.96.0.50", HTTP8000,
	 "{\"kvsplice.io/route\":\"kv\",\"kvsplice.io/events-port\":\"kv-events\"}"),
     SLICE("ml", "qwen-a", "qwen", HTTP8000, "[" EP("10.244.1.5", "a", READY) "]"),
     "ml/qwen 10.96.0.50:8000 kv: a=10.244.1.5:8000",
     "events port name not among the slice's ports: served without events"},
    {SVC("ml", "qwen", "10.96.0.50", HTTP8000,
	 "{\"kvsplice.io/route\":\"kv\",\"kvsplice.io/events-port\":\"70000\"}"),
     SLICE("ml", "qwen-a", "qwen", HTTP8000, "[" EP("10.244.1.5", "a", READY) "]"), "",
     "events port out of range: skipped"},
    {SVC("ml", "qwen", "10.96.0.50", HTTP8000, "{\"kvsplice.io/route\":\"fastest\"}"),
     SLICE("ml", "qwen-a", "qwen", HTTP8000, "[" EP("10.244.1.5", "a", READY) "]"), "",
     "unknown policy: skipped"},
    {SVC("ml", "qwen", "10.96.0.50", HTTP8000, "{\"kvsplice.io/route\":\"round-robin\"}"),
     SLICE("ml", "qwen-a", "qwen", HTTP8000, "[" EP("10.244.1.5", "a", READY) "]"),
     "ml/qwen 10.96.0.50:8000 round-robin: a=10.244.1.5:8000", "another policy"},
    {SVC("ml", "qwen", "None", HTTP8000, KV),
     SLICE("ml", "qwen-a", "qwen", HTTP8000, "[" EP("10.244.1.5", "a", READY) "]"), "",
     "headless: skipped"},
    {SVC_T("ml", "qwen", "ExternalName", "", HTTP8000, KV), "", "", "ExternalName: skipped"},
    {SVC("ml", "qwen", "fd00::10", HTTP8000, KV), "", "", "IPv6 only: skipped"},
    {"{\"metadata\":{\"namespace\":\"ml\",\"name\":\"qwen\",\"annotations\":" KV "},"
     "\"spec\":{\"clusterIP\":\"fd00::10\",\"clusterIPs\":[\"fd00::10\",\"10.96.0.51\"],"
     "\"ports\":" HTTP8000 "}}",
     SLICE("ml", "qwen-a", "qwen", HTTP8000, "[" EP("10.244.1.5", "a", READY) "]"),
     "ml/qwen 10.96.0.51:8000 kv: a=10.244.1.5:8000", "dual stack, IPv6 first: the IPv4 one"},
    {SVC("ml", "qwen", "10.96.0.50", HTTP8000, KV),
     SLICE("ml", "qwen-a", "qwen", HTTP8000, "[" EP("10.244.1.5", "a", READY) "]") "," SLICE(
	 "other", "qwen-b", "qwen", HTTP8000,
	 "[" EP("10.244.2.5", "x",
		READY) "]") ",{\"metadata\":{\"namespace\":\"ml\",\"name\":"
			    "\"nolabel\"},\"addressType\":\"IPv4\",\"ports\":" HTTP8000
			    ",\"endpoints\":[" EP("10.244.3.5", "y", READY) "]}",
     "ml/qwen 10.96.0.50:8000 kv: a=10.244.1.5:8000",
     "slices of the same name in another namespace, and without the label, are not its own"},
    {SVC("ml", "qwen", "10.96.0.50", HTTP8000, KV),
     SLICE("ml", "qwen-a", "qwen", HTTP8000, "[" EP("10.244.1.5", "a", TERM) "]") "," SLICE(
	 "ml", "qwen-b", "qwen", HTTP8000,
	 "[" EP("10.244.1.5", "a", READY) "," EP("10.244.0.10", "c", READY) "," EP("10.244.0.9",
										   "b", READY) "]"),
     "ml/qwen 10.96.0.50:8000 kv: b=10.244.0.9:8000 c=10.244.0.10:8000 a=10.244.1.5:8000",
     "one pod in two slices: once, ready wins; sorted by address (10.244.0.9 < .10)"},
    {SVC("ml", "qwen", "10.96.0.50", HTTP8000, KV),
     SLICE("ml", "qwen-a", "qwen", HTTP8000, "[" EP_NOREF("10.244.1.5", READY) "]"),
     "ml/qwen 10.96.0.50:8000 kv: 10.244.1.5=10.244.1.5:8000", "no targetRef: named by address"},
    {SVC("ml", "qwen", "10.96.0.50", HTTP8000, KV),
     "{\"metadata\":{\"namespace\":\"ml\",\"name\":\"qwen-a\",\"labels\":{\"kubernetes.io/"
     "service-name\":\"qwen\"}},\"addressType\":\"IPv4\",\"ports\":null,\"endpoints\":null}",
     "ml/qwen 10.96.0.50:8000 kv:", "null ports and endpoints (an empty slice): no endpoint"},
    {SVC("ml", "qwen", "10.96.0.50", HTTP8000, KV),
     "{\"metadata\":{\"namespace\":\"ml\",\"name\":\"qwen-a\",\"labels\":{\"kubernetes.io/"
     "service-name\":\"qwen\"}},\"addressType\":\"IPv6\",\"ports\":" HTTP8000 ",\"endpoints\":["
     "{\"addresses\":[\"fd00::5\"],\"conditions\":" READY "}]}",
     "ml/qwen 10.96.0.50:8000 kv:", "IPv6 slice: ignored"},
    {SVC("a-namespace-with-a-rather-long-name", "and-a-service-whose-name-is-long-as-well",
	 "10.96.0.50", HTTP8000, KV),
     "", "", "namespace/name of 64 bytes or more: skipped"},
    {SVC("ml", "b", "10.96.0.52", HTTP8000, KV) "," SVC("ml", "a", "10.96.0.51", HTTP8000, KV), "",
     "ml/a 10.96.0.51:8000 kv: | ml/b 10.96.0.52:8000 kv:",
     "Services sorted by namespace/name, without endpoints"},
};

/* One line per Service: "NAME VIP POLICY[ model=M]: EP=ADDR[+ePORT][+rPORT][(T)] ..." */
static void render(const struct services *s, struct buf *out)
{
	buf_reset(out);
	for (size_t i = 0; i < s->n; i++) {
		const struct service *v = &s->v[i];
		char ip[INET_ADDRSTRLEN];

		inet_ntop(AF_INET, &v->vip.sin_addr, ip, sizeof(ip));
		buf_printf(out, "%s%s %s:%u %s%s%s:", i ? " | " : "", v->name, ip,
			   ntohs(v->vip.sin_port), v->policy, v->model[0] ? " model=" : "",
			   v->model);
		for (size_t k = 0; k < v->nendpoints; k++) {
			const struct endpoint *e = &v->endpoints[k];

			inet_ntop(AF_INET, &e->addr.sin_addr, ip, sizeof(ip));
			buf_printf(out, " %s=%s:%u", e->name, ip, ntohs(e->addr.sin_port));
			if (e->events_port)
				buf_printf(out, "+e%u", e->events_port);
			if (e->replay_port)
				buf_printf(out, "+r%u", e->replay_port);
			if (e->terminating)
				buf_puts(out, "(T)");
		}
	}
	if (!out->data)
		buf_puts(out, "");
}

static int list(struct k8s_view *v, enum k8s_kind kind, const char *items, char *rv)
{
	struct buf b = {0};
	char cont[256], err[256];
	int rc;

	buf_printf(&b,
		   "{\"kind\":\"%s\",\"apiVersion\":\"v1\",\"metadata\":{\"resourceVersion\":"
		   "\"10\"},\"items\":[%s]}",
		   kind == K8S_SERVICES ? "ServiceList" : "EndpointSliceList", items);
	rc = k8s_view_list(v, kind, b.data, b.len, true, cont, sizeof(cont), rv, 32, err,
			   sizeof(err));
	buf_free(&b);
	return rc;
}

static void test_rows(void)
{
	struct buf out = {0};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct k8s_view *v = NULL;
		struct services *s = NULL;
		char rv[32] = "";

		k8s_view_new(&v);
		if (!CHECK(list(v, K8S_SERVICES, rows[i].services, rv) == 0 &&
			       list(v, K8S_SLICES, rows[i].slices, rv) == 0 &&
			       strcmp(rv, "10") == 0 && k8s_view_snapshot(v, &s, NULL) == 0,
			   "%s: lists taken, snapshot made", rows[i].desc)) {
			k8s_view_free(v);
			continue;
		}
		render(s, &out);
		if (!CHECK(strcmp(out.data, rows[i].want) == 0, "%s", rows[i].desc))
			printf("#   got  '%s'\n#   want '%s'\n", out.data, rows[i].want);
		services_put(s);
		k8s_view_free(v);
	}
	buf_free(&out);
}

/* A watch event line for obj. */
static const char *ev(const char *type, const char *obj)
{
	static char line[8192];

	snprintf(line, sizeof(line), "{\"type\":\"%s\",\"object\":%s}", type, obj);
	return line;
}

static enum k8s_event apply(struct k8s_view *v, enum k8s_kind kind, const char *line, char *rv)
{
	char err[256];

	return k8s_view_event(v, kind, line, strlen(line), rv, 32, err, sizeof(err));
}

static const char *snap(struct k8s_view *v, struct buf *out)
{
	struct services *s = NULL;

	buf_reset(out);
	if (k8s_view_snapshot(v, &s, NULL) < 0)
		return "(snapshot failed)";
	render(s, out);
	services_put(s);
	return out->data;
}

static void test_watch(void)
{
	struct k8s_view *v = NULL;
	struct buf out = {0};
	char rv[32];
	enum k8s_event e;

	k8s_view_new(&v);
	list(v, K8S_SERVICES, SVC("ml", "qwen", "10.96.0.50", HTTP8000, KV), rv);
	list(v, K8S_SLICES, "", rv);
	CHECK_STREQ(snap(v, &out), "ml/qwen 10.96.0.50:8000 kv:", "listed: the Service alone");
	CHECK(!k8s_view_dirty(v), "a snapshot clears dirty");

	e = apply(v, K8S_SLICES,
		  ev("ADDED",
		     SLICE("ml", "qwen-a", "qwen", HTTP8000, "[" EP("10.244.1.5", "a", READY) "]")),
		  rv);
	CHECK(e == K8S_EV_APPLIED && strcmp(rv, "8") == 0 && k8s_view_dirty(v),
	      "ADDED slice: applied, its resourceVersion, dirty");
	CHECK_STREQ(snap(v, &out), "ml/qwen 10.96.0.50:8000 kv: a=10.244.1.5:8000",
		    "endpoint added");
	e = apply(v, K8S_SLICES,
		  ev("ADDED",
		     SLICE("ml", "web-a", "web", HTTP8000, "[" EP("10.244.9.5", "w", READY) "]")),
		  rv);
	CHECK(e == K8S_EV_APPLIED && !k8s_view_dirty(v),
	      "a slice of a Service that did not opt in: kept, but nothing to rebuild");
	apply(v, K8S_SLICES,
	      ev("MODIFIED",
		 SLICE("ml", "qwen-a", "qwen", HTTP8000,
		       "[" EP("10.244.1.5", "a", TERM) "," EP("10.244.1.6", "b", READY) "]")),
	      rv);
	CHECK_STREQ(snap(v, &out),
		    "ml/qwen 10.96.0.50:8000 kv: a=10.244.1.5:8000(T) b=10.244.1.6:8000",
		    "MODIFIED: one terminating, one added");
	apply(v, K8S_SLICES,
	      ev("MODIFIED",
		 SLICE("ml", "qwen-a", "qwen", HTTP8000, "[" EP("10.244.1.6", "b", READY) "]")),
	      rv);
	CHECK_STREQ(snap(v, &out), "ml/qwen 10.96.0.50:8000 kv: b=10.244.1.6:8000",
		    "MODIFIED: the terminating one gone");

	e = apply(v, K8S_SERVICES,
		  "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"Service\",\"apiVersion\":\"v1\","
		  "\"metadata\":{\"resourceVersion\":\"12345\"}}}",
		  rv);
	CHECK(e == K8S_EV_BOOKMARK && strcmp(rv, "12345") == 0 && !k8s_view_dirty(v),
	      "BOOKMARK: its resourceVersion, nothing changed");

	apply(v, K8S_SERVICES,
	      ev("MODIFIED", SVC("ml", "qwen", "10.96.0.50", HTTP8000, "{\"x\":\"y\"}")), rv);
	CHECK_STREQ(snap(v, &out), "", "annotation removed: the Service is gone");
	apply(v, K8S_SERVICES, ev("MODIFIED", SVC("ml", "qwen", "10.96.0.50", HTTP8000, KV)), rv);
	CHECK_STREQ(snap(v, &out), "ml/qwen 10.96.0.50:8000 kv: b=10.244.1.6:8000",
		    "annotation back: served again with the slices kept meanwhile");
	apply(v, K8S_SLICES, ev("DELETED", SLICE("ml", "qwen-a", "qwen", HTTP8000, "[]")), rv);
	CHECK_STREQ(snap(v, &out), "ml/qwen 10.96.0.50:8000 kv:", "DELETED slice");
	apply(v, K8S_SERVICES, ev("DELETED", SVC("ml", "qwen", "10.96.0.50", HTTP8000, KV)), rv);
	CHECK_STREQ(snap(v, &out), "", "DELETED Service");
	e = apply(v, K8S_SERVICES, ev("DELETED", SVC("ml", "never", "10.96.0.50", HTTP8000, KV)),
		  rv);
	CHECK(e == K8S_EV_APPLIED && !k8s_view_dirty(v), "DELETED of an unknown object: no change");

	e = apply(v, K8S_SERVICES,
		  "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"apiVersion\":\"v1\","
		  "\"metadata\":{},\"status\":\"Failure\",\"message\":\"too old resource version: "
		  "1 (2)\",\"reason\":\"Expired\",\"code\":410}}",
		  rv);
	CHECK(e == K8S_EV_GONE, "ERROR 410: gone (relist)");
	e = apply(v, K8S_SERVICES,
		  "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"code\":500,"
		  "\"message\":\"etcd\"}}",
		  rv);
	CHECK(e == K8S_EV_ERROR, "ERROR 500: error (reconnect)");
	CHECK(apply(v, K8S_SERVICES, "{\"type\":\"ADDED\"", rv) == K8S_EV_BAD,
	      "truncated JSON: bad");
	CHECK(apply(v, K8S_SERVICES, "[1,2]", rv) == K8S_EV_BAD, "not an event: bad");
	CHECK(apply(v, K8S_SERVICES, ev("RENAMED", SVC("ml", "q", "10.0.0.1", HTTP8000, KV)), rv) ==
		  K8S_EV_BAD,
	      "unknown type: bad");
	e = apply(v, K8S_SERVICES, ev("ADDED", "{\"metadata\":{\"name\":\"x\"}}"), rv);
	CHECK(e == K8S_EV_APPLIED && !k8s_view_dirty(v),
	      "an object without a namespace: left out, the stream goes on");
	k8s_view_free(v);
	buf_free(&out);
}

static void test_pages(void)
{
	struct k8s_view *v = NULL;
	struct buf out = {0};
	char cont[64], rv[32], err[256];
	const char *p1 =
	    "{\"kind\":\"ServiceList\",\"metadata\":{\"resourceVersion\":\"20\","
	    "\"continue\":\"tok1\"},\"items\":[" SVC("ml", "a", "10.96.0.51", HTTP8000, KV) "]}";
	const char *p2 = "{\"kind\":\"ServiceList\",\"metadata\":{\"resourceVersion\":\"20\"},"
			 "\"items\":[" SVC("ml", "b", "10.96.0.52", HTTP8000, KV) "]}";
	const char *only_b = "{\"kind\":\"ServiceList\",\"metadata\":{\"resourceVersion\":\"30\"},"
			     "\"items\":[" SVC("ml", "b", "10.96.0.52", HTTP8000, KV) "]}";
	int rc;

	k8s_view_new(&v);
	list(v, K8S_SLICES, "", rv);
	rc = k8s_view_list(v, K8S_SERVICES, p1, strlen(p1), true, cont, sizeof(cont), rv,
			   sizeof(rv), err, sizeof(err));
	CHECK(rc == 0 && strcmp(cont, "tok1") == 0, "page 1: its continue token");
	CHECK_STREQ(snap(v, &out), "", "a list in pages replaces the view only when complete");
	rc = k8s_view_list(v, K8S_SERVICES, p2, strlen(p2), false, cont, sizeof(cont), rv,
			   sizeof(rv), err, sizeof(err));
	CHECK(rc == 0 && !cont[0] && strcmp(rv, "20") == 0, "page 2: last, the resourceVersion");
	CHECK_STREQ(snap(v, &out), "ml/a 10.96.0.51:8000 kv: | ml/b 10.96.0.52:8000 kv:",
		    "both pages in the view");
	rc = k8s_view_list(v, K8S_SERVICES, only_b, strlen(only_b), true, cont, sizeof(cont), rv,
			   sizeof(rv), err, sizeof(err));
	CHECK_STREQ(snap(v, &out), "ml/b 10.96.0.52:8000 kv:",
		    "a relist replaces the view: what it lacks is gone");
	rc = k8s_view_list(v, K8S_SERVICES, p1, strlen(p1), true, cont, sizeof(cont), rv,
			   sizeof(rv), err, sizeof(err));
	rc = k8s_view_list(v, K8S_SERVICES, "{\"items\":", 9, false, cont, sizeof(cont), rv,
			   sizeof(rv), err, sizeof(err));
	CHECK(rc == -EINVAL && strstr(err, "not a list"), "a broken page: refused (%s)", err);
	CHECK_STREQ(snap(v, &out),
		    "ml/b 10.96.0.52:8000 kv:", "a list that fails half way changes nothing");
	k8s_view_free(v);
	buf_free(&out);
}

/* Bounds: a slice past the API's endpoint limit is left out; a Service's endpoints are cut at
 * K8S_MAX_ENDPOINTS (1024), the lowest addresses kept. */
static void test_bounds(void)
{
	struct k8s_view *v = NULL;
	struct services *s = NULL;
	struct buf items = {0}, eps = {0};
	char rv[32];

	k8s_view_new(&v);
	list(v, K8S_SERVICES, SVC("ml", "qwen", "10.96.0.50", HTTP8000, KV), rv);
	for (int sl = 0; sl < 3; sl++) {
		int n = sl == 2 ? 1001 : 600;

		buf_reset(&eps);
		for (int i = 0; i < n; i++)
			buf_printf(&eps, "%s{\"addresses\":[\"10.%d.%d.%d\"],\"conditions\":{}}",
				   i ? "," : "", 100 + sl, i / 250, i % 250 + 1);
		buf_printf(&items,
			   "%s{\"metadata\":{\"namespace\":\"ml\",\"name\":\"s%d\",\"labels\":{"
			   "\"kubernetes.io/service-name\":\"qwen\"}},\"addressType\":\"IPv4\","
			   "\"ports\":" HTTP8000 ",\"endpoints\":[%s]}",
			   sl ? "," : "", sl, eps.data);
	}
	CHECK(list(v, K8S_SLICES, items.data, rv) == 0, "a list with a 1001-endpoint slice");
	if (CHECK(k8s_view_snapshot(v, &s, NULL) == 0 && s->n == 1, "snapshot")) {
		const struct service *q = &s->v[0];

		CHECK_EQ(q->nendpoints, 1024,
			 "cut at 1024 endpoints (the 1001-endpoint slice out)");
		CHECK(q->endpoints[0].addr.sin_addr.s_addr == inet_addr("10.100.0.1") &&
			  q->endpoints[1023].addr.sin_addr.s_addr == inet_addr("10.101.1.174"),
		      "the lowest addresses kept");
		services_put(s);
	}
	k8s_view_free(v);
	buf_free(&items);
	buf_free(&eps);
}

static void test_fingerprint(void)
{
	struct k8s_view *a = NULL, *b = NULL;
	struct services *sa = NULL, *sb = NULL, *sc = NULL;
	uint64_t fa = 0, fb = 0, fc = 0;
	char rv[32];
	const char *svc = SVC("ml", "qwen", "10.96.0.50", HTTP8000, KV);
	const char *sl =
	    SLICE("ml", "qwen-a", "qwen", HTTP8000,
		  "[" EP("10.244.1.5", "a", READY) "," EP("10.244.1.6", "b", READY) "]");
	const char *sl2 =
	    SLICE("ml", "qwen-a", "qwen", HTTP8000,
		  "[" EP("10.244.1.6", "b", READY) "," EP("10.244.1.5", "a", READY) "]");

	k8s_view_new(&a);
	k8s_view_new(&b);
	list(a, K8S_SERVICES, svc, rv);
	list(a, K8S_SLICES, sl, rv);
	list(b, K8S_SERVICES, svc, rv);
	list(b, K8S_SLICES, sl2, rv);
	k8s_view_snapshot(a, &sa, &fa);
	k8s_view_snapshot(b, &sb, &fb);
	CHECK(fa && fa == fb, "the same content in another order: the same fingerprint");
	apply(b, K8S_SLICES,
	      ev("MODIFIED",
		 SLICE("ml", "qwen-a", "qwen", HTTP8000,
		       "[" EP("10.244.1.6", "b", READY) "," EP("10.244.1.5", "a", TERM) "]")),
	      rv);
	k8s_view_snapshot(b, &sc, &fc);
	CHECK(fc != fa, "an endpoint turning terminating: another fingerprint");
	CHECK(sa->generation == 0 && sa->refs == 1, "a new snapshot: generation 0, one reference");
	services_put(sa);
	services_put(sb);
	services_put(sc);
	k8s_view_free(a);
	k8s_view_free(b);
}

/* The line splitter. */
struct collect {
	struct buf all;
	int n, stop_at;
};

static int on_line(const char *line, size_t len, void *arg)
{
	struct collect *c = arg;

	buf_printf(&c->all, "[%.*s]", (int)len, line);
	return ++c->n == c->stop_at ? 7 : 0;
}

static void test_lines(void)
{
	static const char stream[] = "{\"a\":1}\n{\"b\":22}\r\n\n{\"c\":333}\npartial";
	const char *want = "[{\"a\":1}][{\"b\":22}][][{\"c\":333}]";
	size_t n = strlen(stream);
	bool all_ok = true;
	struct k8s_lines l = {.max = 64};
	struct collect c = {0};

	for (size_t cut = 0; cut <= n; cut++) {
		c.n = 0;
		buf_reset(&c.all);
		l.len = 0;
		if (k8s_lines_feed(&l, stream, cut, on_line, &c) ||
		    k8s_lines_feed(&l, stream + cut, n - cut, on_line, &c) ||
		    strcmp(c.all.data ? c.all.data : "", want) != 0 || l.len != 7)
			all_ok = false;
	}
	CHECK(all_ok, "lines split at every byte: the same lines, the partial one kept");
	c.n = 0;
	buf_reset(&c.all);
	l.len = 0;
	for (size_t i = 0; i < n && all_ok; i++)
		if (k8s_lines_feed(&l, stream + i, 1, on_line, &c))
			all_ok = false;
	CHECK(all_ok && strcmp(c.all.data, want) == 0, "lines fed byte by byte");
	l.len = 0;
	CHECK_EQ(k8s_lines_feed(&l,
				"0123456789012345678901234567890123456789012345678901234567890123"
				"456789\n",
				71, on_line, &c),
		 -E2BIG, "a line past the bound: -E2BIG");
	CHECK_EQ(l.len, 0, "... and the buffer emptied");
	l.len = 0;
	c.n = 0;
	c.stop_at = 2;
	buf_reset(&c.all);
	CHECK_EQ(k8s_lines_feed(&l, "x\ny\nz\n", 6, on_line, &c), 7,
		 "the callback's nonzero return stops the feed");
	CHECK_STREQ(c.all.data, "[x][y]", "... after the line that returned it");
	k8s_lines_free(&l);
	buf_free(&c.all);
}

static void test_file_fields(void)
{
	static const char good[] =
	    "{\"services\":[{\"name\":\"q\",\"cluster_ip\":\"10.96.0.50\",\"port\":8000,"
	    "\"route\":\"dynamo\",\"model\":\"Qwen/"
	    "Qwen3-0.6B\",\"endpoints\":[{\"ip\":\"10.0.0.1\","
	    "\"port\":8000,\"terminating\":true},{\"ip\":\"10.0.0.2\",\"port\":8000}]}]}";
	static const char bad_route[] =
	    "{\"services\":[{\"name\":\"q\",\"cluster_ip\":\"10.96.0.50\","
	    "\"port\":8000,\"route\":\"fastest\"}]}";
	static const char bad_term[] =
	    "{\"services\":[{\"name\":\"q\",\"cluster_ip\":\"10.96.0.50\",\"port\":8000,"
	    "\"endpoints\":[{\"ip\":\"10.0.0.1\",\"port\":1,\"terminating\":1}]}]}";
	struct services *s = NULL;
	char err[256] = "";

	if (CHECK(discovery_parse(good, strlen(good), &s, err, sizeof(err)) == 0,
		  "file: route, model, terminating accepted (%s)", err)) {
		CHECK(strcmp(s->v[0].policy, "dynamo") == 0 &&
			  strcmp(s->v[0].model, "Qwen/Qwen3-0.6B") == 0 &&
			  s->v[0].endpoints[0].terminating && !s->v[0].endpoints[1].terminating,
		      "file: the fields reach the snapshot");
		services_put(s);
	}
	s = NULL;
	CHECK(discovery_parse(bad_route, strlen(bad_route), &s, err, sizeof(err)) == -EINVAL &&
		  strstr(err, "route"),
	      "file: an unknown route refused (%s)", err);
	CHECK(discovery_parse(bad_term, strlen(bad_term), &s, err, sizeof(err)) == -EINVAL &&
		  strstr(err, "terminating"),
	      "file: a terminating that is not a boolean refused (%s)", err);
}

static void test_source_config(void)
{
	struct discovery_k8s_cfg cfg;
	struct discovery_source *src = NULL;
	char err[256] = "";

	discovery_k8s_cfg_default(&cfg);
	cfg.backoff_min_ms = 0;
	CHECK(discovery_k8s_source(&cfg, &src, err, sizeof(err)) == -EINVAL &&
		  strstr(err, "above 0"),
	      "a 0 backoff: refused (%s)", err);
	discovery_k8s_cfg_default(&cfg);
	cfg.watch_timeout_max_s = 100;
	CHECK(discovery_k8s_source(&cfg, &src, err, sizeof(err)) == -EINVAL,
	      "a watch timeout range upside down: refused (%s)", err);
	discovery_k8s_cfg_default(&cfg);
	unsetenv("KUBERNETES_SERVICE_HOST");
	CHECK(discovery_k8s_source(&cfg, &src, err, sizeof(err)) == -EINVAL &&
		  strstr(err, "KUBERNETES_SERVICE_HOST"),
	      "no API address outside a cluster: refused (%s)", err);
	cfg.api = "http://127.0.0.1:1";
	CHECK(discovery_k8s_source(&cfg, &src, err, sizeof(err)) == -EINVAL && strstr(err, "https"),
	      "a plain http API address: refused (%s)", err);
	cfg.api = "https://127.0.0.1:1";
	cfg.ca_path = "/nonexistent/ca.crt";
	CHECK(discovery_k8s_source(&cfg, &src, err, sizeof(err)) == -EINVAL &&
		  strstr(err, "/nonexistent/ca.crt"),
	      "an unreadable CA file: refused (%s)", err);
	cfg.ca_path = "/dev/null";
	cfg.token_path = "/dev/null";
	cfg.ns = "Not_A_Label";
	CHECK(discovery_k8s_source(&cfg, &src, err, sizeof(err)) == -EINVAL &&
		  strstr(err, "namespace"),
	      "a namespace that is not a DNS label: refused (%s)", err);
}

int main(void)
{
	log_set_level(LOG_ERROR);
	discovery_set_routes(&policy_routes);
	test_rows();
	test_watch();
	test_pages();
	test_bounds();
	test_fingerprint();
	test_lines();
	test_file_fields();
	test_source_config();
	return tap_done();
}
