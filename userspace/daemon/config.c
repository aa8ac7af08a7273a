// SPDX-License-Identifier: Apache-2.0
/* config: the daemon's flags, defaults and checks (config.h). */
#include "daemon/config.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "core/log.h"
#include "kv/approx.h"
#include "kv/blockhash.h"
#include "kv/events_decode.h"
#include "node/bpfctl.h"
#include "node/keeper.h"
#include "node/nodesetup.h"
#include "route/router.h"
#include "route/scrape.h"

void daemon_cfg_default(struct daemon_cfg *c)
{
	struct router_cfg rd;

	memset(c, 0, sizeof(*c));
	c->services_max = DISCOVERY_FILE_DEFAULT_MAX;
	discovery_k8s_cfg_default(&c->k8s);
	proxy_opts_default(&c->proxy);
	opt_parse_addr(DAEMON_DEFAULT_LISTEN, &c->proxy.listen[0]);
	c->proxy.nlisten = 1;
	c->pin_dir = BPFCTL_DEFAULT_PIN_DIR;
	c->node_dev = NODESETUP_DEFAULT_DEVICE;
	c->mark = DAEMON_DEFAULT_MARK;
	c->router = "kv";
	router_cfg_default(&rd);
	c->tokcache = (size_t)rd.tokcache_bytes;
	c->scrape_ms = rd.scrape_interval_ms;
	c->models_ms = rd.models_interval_ms;
	c->scrape_max_body = rd.scrape_max_body;
	c->scrape_max_head = rd.scrape_max_head;
	c->scrape_timeout_ms = rd.scrape_timeout_ms;
	c->approx_ttl_ms = (int)(rd.approx_ttl_s * 1000);
	c->approx_max = (uint32_t)rd.approx_max_entries;
	policy_kv_defaults(&c->kv);
	c->events = true;
	c->events_topic = "";
	index_cfg_default(&c->index);
	c->index_max_entries = c->index.max_entries;
	events_cfg_default(&c->ev);
	c->kv_queue_batches = (uint32_t)c->ev.max_pending;
	c->sync_wait_ms = 1000;
	c->keeper_hold_ms = KEEPER_HOLD_MS;
	c->keeper_queue_ms = -1;
	opt_parse_addr(DAEMON_DEFAULT_ADMIN, &c->admin);
	admin_opts_default(&c->admin_opts);
	c->log_level = LOG_INFO;
}

int daemon_cfg_check(const struct daemon_cfg *c)
{
	if (!c->services == !c->kubernetes) {
		fprintf(stderr, "kvsplice: give --services FILE or --kubernetes (see --help)\n");
		return -1;
	}
	if (c->intercept_endpoints && !c->mark) {
		fprintf(stderr, "kvsplice: --intercept-endpoints needs --mark (kvsplice's own "
				"connects go to those endpoints)\n");
		return -1;
	}
	if (c->metrics.sin_family && c->metrics.sin_port) {
		bool same = c->metrics.sin_port == c->admin.sin_port &&
			    c->metrics.sin_addr.s_addr == c->admin.sin_addr.s_addr;

		for (int i = 0; !same && i < c->proxy.nlisten; i++)
			same = c->metrics.sin_port == c->proxy.listen[i].sin_port &&
			       c->metrics.sin_addr.s_addr == c->proxy.listen[i].sin_addr.s_addr;
		if (same) {
			fprintf(stderr,
				"kvsplice: --metrics must differ from --admin and --listen\n");
			return -1;
		}
	}
	return 0;
}

/* --listen: repeatable; the first one replaces the default address. */
static int parse_listen(void *cfg, const char *arg)
{
	struct daemon_cfg *c = cfg;

	if (!c->listen_set) {
		c->proxy.nlisten = 0;
		c->listen_set = true;
	}
	if (c->proxy.nlisten == PROXY_MAX_LISTEN ||
	    opt_parse_addr(arg, &c->proxy.listen[c->proxy.nlisten]) < 0)
		return -1;
	c->proxy.nlisten++;
	return 0;
}

static int show_listen(const void *cfg, char *buf, size_t n)
{
	const struct daemon_cfg *c = cfg;
	size_t at = 0;

	buf[0] = '\0';
	for (int i = 0; i < c->proxy.nlisten && at < n; i++) {
		char a[INET_ADDRSTRLEN];

		inet_ntop(AF_INET, &c->proxy.listen[i].sin_addr, a, sizeof(a));
		at += (size_t)snprintf(buf + at, n - at, "%s%s:%u", i ? "\n" : "", a,
				       ntohs(c->proxy.listen[i].sin_port));
	}
	return c->proxy.nlisten > 0;
}

static int parse_model_tok(void *cfg, const char *arg)
{
	struct daemon_cfg *c = cfg;
	const char *eq = strchr(arg, '=');

	if (!eq || eq == arg || !eq[1] || c->nmodel_tok == DAEMON_MAX_MODEL_TOKENIZERS)
		return -1;
	c->model_tok[c->nmodel_tok++] = arg;
	return 0;
}

static int show_model_tok(const void *cfg, char *buf, size_t n)
{
	const struct daemon_cfg *c = cfg;

	return opt_show_list(c->model_tok, c->nmodel_tok, '\n', buf, n);
}

/* --chat-template: "NAME=FILE" for model NAME, "FILE" (no '=') for the default tokenizer's. */
static int parse_chat_tmpl(void *cfg, const char *arg)
{
	struct daemon_cfg *c = cfg;
	const char *eq = strchr(arg, '=');

	if (!arg[0] || (eq && (eq == arg || !eq[1])) ||
	    c->nchat_tmpl == DAEMON_MAX_MODEL_TOKENIZERS + 1)
		return -1;
	c->chat_tmpl[c->nchat_tmpl++] = arg;
	return 0;
}

static int show_chat_tmpl(const void *cfg, char *buf, size_t n)
{
	const struct daemon_cfg *c = cfg;

	return opt_show_list(c->chat_tmpl, c->nchat_tmpl, '\n', buf, n);
}

static int check_router(const char *arg)
{
	if (policy_find(arg))
		return 0;
	fprintf(stderr, "kvsplice: unknown --router %s (%s)\n", arg, policy_names());
	return OPT_SAID;
}

/* --default-chat-template-kwargs: a JSON object, as vLLM takes it. */
static int check_chat_kwargs(const char *arg)
{
	cJSON *j = cJSON_Parse(arg);
	bool ok = cJSON_IsObject(j);

	cJSON_Delete(j);
	if (ok)
		return 0;
	fprintf(stderr, "kvsplice: --default-chat-template-kwargs %s: not a JSON object\n", arg);
	return OPT_SAID;
}

static int check_node_address(const char *arg)
{
	struct in_addr a;
	int prefix;

	return nodesetup_parse_address(arg, &a, &prefix);
}

/* A network device name: 1 to 15 bytes, no '/'. */
static int check_node_device(const char *arg)
{
	return *arg && strlen(arg) < 16 && !strchr(arg, '/') ? 0 : -1;
}

static const char *const relay_names[] = {"copy", "splice", NULL};
static const char *const log_names[] = {"error", "warn", "info", "debug", NULL};

#define F(f) offsetof(struct daemon_cfg, f)
#define MS_MAX 2e9 /* about 23 days */
#define SIZE_MAX_OPT 0x1p50

/* The --pin-dir entry, shared by kvsplice and kvsplice detach. */
#define PIN_DIR_OPT                                                                                \
	{                                                                                          \
		"pin-dir", OPT_STR, F(pin_dir), "DIR", 0, 0,                                       \
		    "bpffs directory of the pinned BPF state"                                      \
	}

/* Option tables name the leading fields and leave the rest zero. */
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
static const struct opt daemon_opts[] = {
    {"Services", OPT_SECTION},
    {"services", OPT_STR, F(services), "FILE", 0, 0,
     "Services and endpoints (JSON; reloaded on SIGHUP and on change); this or --kubernetes is "
     "required",
     OPT_NO_DEFAULT},
    {"services-max-bytes", OPT_SIZE, F(services_max), NULL, 1, SIZE_MAX_OPT,
     "largest --services file read; a larger one is refused (at start: exit; later: the last "
     "one is kept)"},
    {"kubernetes", OPT_FLAG, F(kubernetes), NULL, 0, 0,
     "Services and endpoints from the API server: Services annotated kvsplice.io/route and "
     "their EndpointSlices (in-cluster service account; see userspace/discovery/discovery.h)"},
    {"k8s-api", OPT_STR, F(k8s.api), "URL", 0, 0, "the API server",
     .dflt = "https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT"},
    {"k8s-token", OPT_STR, F(k8s.token_path), "FILE", 0, 0,
     "bearer token, read again on each (re)connect and on a 401",
     .dflt = "the service account's token"},
    {"k8s-ca", OPT_STR, F(k8s.ca_path), "FILE", 0, 0, "CA bundle of the API server",
     .dflt = "the service account's ca.crt"},
    {"k8s-namespace", OPT_STR, F(k8s.ns), "NS", 0, 0, "only Services of namespace NS",
     .dflt = "all namespaces"},
    {"k8s-list-max-bytes", OPT_SIZE, F(k8s.list_max_bytes), NULL, 1, SIZE_MAX_OPT,
     "largest list response page read from the API server; a larger one is abandoned and "
     "listed again after a backoff"},
    {"k8s-event-max-bytes", OPT_SIZE, F(k8s.event_max_bytes), NULL, 1, SIZE_MAX_OPT,
     "largest watch event (one object) read, the same way"},

    {"Interception and the node", OPT_SECTION},
    {"listen", OPT_FUNC, 0, "ADDR:PORT", 0, 0, "proxy address connects are handed to; repeatable",
     .parse = parse_listen, .show = show_listen},
    {"no-bpf", OPT_FLAG, F(no_bpf), NULL, 0, 0,
     "no interception: serve connections made to --listen directly (the Service is the one "
     "whose port is the listener's port, else the only Service)"},
    {"cgroup", OPT_STR, F(cgroup), "DIR", 0, 0, "cgroup v2 directory the BPF programs attach to",
     .dflt = "the cgroup2 mount root"},
    PIN_DIR_OPT,
    {"node-address", OPT_STR, F(node_addr), "A[/N]", 0, 0,
     "put A (the --listen address; /32 by default) on the node, on --node-device (created as "
     "a dummy device when absent); both are removed again at exit",
     .check = check_node_address},
    {"node-device", OPT_STR, F(node_dev), "NAME", 0, 0, "device --node-address goes on",
     .check = check_node_device},
    {"keep-on-exit", OPT_FLAG, F(keep_on_exit), NULL, 0, 0,
     "leave the node address and the pinned BPF state when exiting (by default a final exit "
     "removes both; either way connects go the kube-proxy way once kvsplice is gone)"},
    {"mark", OPT_U32, F(mark), "N", 0, 0, "SO_MARK of upstream sockets, never intercepted",
     OPT_HEX | OPT_BASE0},
    {"intercept-endpoints", OPT_FLAG, F(intercept_endpoints), NULL, 0, 0,
     "also take a connect aimed at an endpoint (pod IP:port) of a selected Service as that "
     "Service's: for nodes where a socket load balancer (Cilium's kube-proxy replacement) "
     "translates the ClusterIP before kvsplice's program runs. A client that connects to such a "
     "pod on purpose is routed too (docs/kubernetes.md); needs --mark"},

    {"Routing", OPT_SECTION},
    {"router", OPT_STR, F(router), "POLICY", 0, 0,
     "endpoint choice per request: kv (capacity-aware prefix placement), dynamo (Dynamo's "
     "cost), round-robin, random, approx (kv without events: routed blocks assumed cached for "
     "--approx-ttl)",
     .check = check_router},
    {"tokenizer", OPT_STR, F(tokenizer), "PATH", 0, 0,
     "tokenizer directory (tokenizer.json, tokenizer_config.json) or tokenizer.json of every model "
     "without its own",
     .dflt = "BINARY_DIR" DAEMON_TOKENIZER_REL ", else " DAEMON_TOKENIZER_SYS},
    {"model-tokenizer", OPT_FUNC, 0, "NAME=PATH", 0, 0,
     "tokenizer directory or tokenizer.json of served model NAME; repeatable", OPT_NO_DEFAULT,
     .parse = parse_model_tok, .show = show_model_tok},
    {"chat-template", OPT_FUNC, 0, "[NAME=]FILE", 0, 0,
     "chat template file of served model NAME (without NAME=: of --tokenizer's), as the "
     "workers' vLLM --chat-template: it replaces tokenizer_config.json's; repeatable",
     OPT_NO_DEFAULT, .parse = parse_chat_tmpl, .show = show_chat_tmpl},
    {"default-chat-template-kwargs", OPT_STR, F(chat_kwargs), "JSON", 0, 0,
     "the workers' vLLM --default-chat-template-kwargs: kwargs every chat template gets, under "
     "each request's chat_template_kwargs (numbers in it make chat requests fallbacks: their "
     "spelling is not kept)",
     .dflt = "none", .check = check_chat_kwargs},
    {"trust-request-chat-template", OPT_FLAG, F(trust_request_tmpl), NULL, 0, 0,
     "the workers' vLLM runs with --trust-request-chat-template: a request's own chat_template "
     "is rendered (compiled once, the last 16 kept; bounded like every template) rather than "
     "routed as vLLM's 400"},
    {"tokenizer-root", OPT_STR, F(tokenizer_root), "DIR", 0, 0,
     "directory of the tokenizers Services name (kvsplice.io/model-tokenizers: NAME=DIR, DIR "
     "under it holding tokenizer.json and tokenizer_config.json), loaded off the serving thread",
     .dflt = "none: those annotations are refused"},
    {"no-tokenizer", OPT_FLAG, F(no_tokenizer), NULL, 0, 0,
     "no default tokenizer (text prompts route approximately)"},
    {"tokenizer-cache", OPT_SIZE, F(tokcache), NULL, 0, SIZE_MAX_OPT,
     "encoding cache per tokenizer: repeated messages and pieces are read once (0: off)"},
    {"whole-prompt", OPT_FLAG, F(whole_prompt), NULL, 0, 0,
     "tokenize a text prompt whole before choosing (by default: as far as a worker's cache "
     "reaches, the rest once the request is sent)"},
    {"scrape-interval", OPT_MS, F(scrape_ms), NULL, 0, MS_MAX,
     "how often each worker's /metrics is read for load (0: off)"},
    {"models-interval", OPT_MS, F(models_ms), NULL, 0, MS_MAX,
     "how often each worker's /v1/models is read for the models and LoRA adapters it serves, "
     "and at once when it comes back or restarts (0: off: every worker takes every model)"},
    {"scrape-max-body", OPT_SIZE, F(scrape_max_body), NULL, 1, SIZE_MAX_OPT,
     "largest worker /metrics body read; a larger one fails the scrape"},
    {"scrape-max-head", OPT_SIZE, F(scrape_max_head), NULL, 1, SIZE_MAX_OPT,
     "longest worker /metrics answer head read; a longer one fails the scrape"},
    {"scrape-timeout", OPT_MS, F(scrape_timeout_ms), NULL, 1, MS_MAX,
     "deadline of one scrape, connect to last byte; a worker missing it 3 times in a row is "
     "down"},
    {"approx-ttl", OPT_MS, F(approx_ttl_ms), NULL, 1, MS_MAX,
     "approximate view: how long routed blocks count as cached"},
    {"approx-max-entries", OPT_U32, F(approx_max), "N", 1, 1e9,
     "approximate view: (worker, block) pairs held (about 32 bytes each); past it those "
     "closest to expiry go first"},
    {"", OPT_INCLUDE, F(kv), .sub = policy_kv_options, .nsub = POLICY_KV_NOPTIONS},

    {"Proxy", OPT_SECTION},
    {"relay", OPT_CHOICE, F(proxy.relay), NULL, 0, 0, "how response bodies are moved",
     .choices = relay_names},
    {"max-head", OPT_SIZE, F(proxy.max_head), NULL, 1, SIZE_MAX_OPT,
     "request head limit; a larger head is answered 431"},
    {"max-body", OPT_SIZE, F(proxy.max_body), NULL, 1, SIZE_MAX_OPT,
     "request body limit; a larger body is answered 413"},
    {"header-timeout", OPT_MS, F(proxy.header_timeout_ms), NULL, 1, MS_MAX,
     "to read a whole request once it started"},
    {"idle-timeout", OPT_MS, F(proxy.idle_timeout_ms), NULL, 1, MS_MAX,
     "keep-alive wait; silence of a relay; an endpoint silent this long after a request gets "
     "504"},
    {"connect-timeout", OPT_MS, F(proxy.connect_timeout_ms), NULL, 1, MS_MAX,
     "per upstream connect attempt"},
    {"drain-timeout", OPT_MS, F(proxy.drain_timeout_ms), NULL, 0, MS_MAX,
     "after SIGTERM, then everything is closed"},
    {"pool-size", OPT_INT, F(proxy.pool_max), "N", 0, 1e9,
     "idle upstream connections kept per endpoint"},
    {"pool-idle-timeout", OPT_MS, F(proxy.pool_idle_timeout_ms), NULL, 0, MS_MAX,
     "idle upstream connections are closed after this long"},
    {"max-conns", OPT_INT, F(proxy.max_conns), "N", 0, 1e9,
     "client connections at once; more are answered 503 with Retry-After and closed (0: no "
     "limit; measured: about 6 KiB each when idle, user + kernel)"},
    {"max-conns-per-ip", OPT_INT, F(proxy.max_conns_per_ip), "N", 0, 1e9,
     "the same per client address (0: no limit)"},
    {"max-buffered", OPT_SIZE, F(proxy.max_buffered), NULL, 0, SIZE_MAX_OPT,
     "bytes buffered over all client connections (request bodies are held whole: RSS grows by "
     "about as much); a request that would pass it is answered 503 with Retry-After (0: no "
     "limit)"},
    {"listen-backlog", OPT_INT, F(proxy.backlog), "N", 1, 1e9,
     "connections the kernel queues for the proxy before it accepts them (capped by "
     "net.core.somaxconn)"},
    {"no-forwarded-for", OPT_CLEAR, F(proxy.forwarded_for), NULL, 0, 0,
     "do not tell workers the client's address (by default a request goes on with "
     "X-Forwarded-For: its values, then the client's address)"},

    {"KV events and the index", OPT_SECTION},
    {"events", OPT_FLAG, F(events), NULL, 0, 0,
     "follow the workers' vLLM KV events (the default): every endpoint with an events_port is "
     "followed into the block index, synced from its replay_port at once; /debug/index shows "
     "it"},
    {"no-events", OPT_CLEAR, F(events), NULL, 0, 0, "do not follow the workers' KV events"},
    {"events-topic", OPT_STR, F(events_topic), "T", 0, 0, "ZMQ topic of the KV events (\"\": all)"},
    {"block-size", OPT_U32, F(index.block_size), "N", 1, BLOCKHASH_MAX_BLOCK_SIZE,
     "KV block size in tokens"},
    {"hash-seed", OPT_U64, F(index.seed), "N", 0, 0, "seed of kvsplice's own block hash",
     OPT_BASE0},
    {"index-max-entries", OPT_U64, F(index_max_entries), "N", 1, 0,
     "bound on (worker, block) pairs indexed (about 50-80 bytes each)", OPT_BASE0},
    {"index-max-workers", OPT_U32, F(index.max_workers), "N", 1, DAEMON_MAX_WORKERS_LIMIT,
     "workers whose KV events are followed at once (each 2 bits per indexed block); past it an "
     "endpoint is seen as holding no block (logged)"},
    {"kv-queue-bytes", OPT_SIZE, F(ev.max_pending_bytes), NULL, 1, SIZE_MAX_OPT,
     "KV event payload bytes held per worker while its replay runs; past it the replay is "
     "given up"},
    {"kv-queue-total-bytes", OPT_SIZE, F(ev.max_pending_total_bytes), NULL, 1, SIZE_MAX_OPT,
     "the same over all workers"},
    {"kv-queue-batches", OPT_U32, F(kv_queue_batches), "N", 1, 1e9,
     "KV event batches held per worker while its replay runs (however few bytes)"},
    {"kv-event-max-bytes", OPT_SIZE, F(ev.max_payload), NULL, 1, SIZE_MAX_OPT,
     "largest KV event message read from a worker; a larger one is dropped unread, counted"},
    {"kv-event-queue", OPT_INT, F(ev.rcvhwm), "N", 1, 1e9,
     "KV event messages libzmq holds per worker until kvsplice reads them (ZMQ receive "
     "high-water mark; past it the worker's publisher drops: a gap, then a replay)"},
    {"kv-replay-timeout", OPT_MS, F(ev.replay_timeout_ms), NULL, 1, MS_MAX,
     "a worker's replay, or its sync on joining, not answered whole within this long is given "
     "up"},

    {"Restarts and crashes", OPT_SECTION},
    {"no-handover", OPT_FLAG, F(no_handover), NULL, 0, 0,
     "neither take the listening sockets over from a kvsplice running for the same --listen "
     "address (a restart without loss: it drains and exits once this one serves) nor offer "
     "them to a successor"},
    {"sync-wait", OPT_MS, F(sync_wait_ms), NULL, 0, MS_MAX,
     "at start, serve (register the listener, /readyz) only once every worker's initial KV "
     "event sync is done, or this long at most (0: at once)"},
    {"no-keeper", OPT_FLAG, F(no_keeper), NULL, 0, 0,
     "no keeper process: a crash (SIGKILL) of kvsplice then resets the connects BPF sent it "
     "while it died (by default a keeper holds the listener, relays those to the Service and "
     "hands the listener to the next kvsplice)"},
    {"keeper-hold", OPT_MS, F(keeper_hold_ms), NULL, 0, MS_MAX,
     "after a crash, how long the keeper waits for the next kvsplice to take the listener"},
    {"keeper-queue", OPT_MS, F(keeper_queue_ms), NULL, 0, MS_MAX,
     "after a crash, connects keep queueing for the next kvsplice this long before the keeper "
     "falls open",
     .dflt = "1s as a container's PID 1 (which starts kvsplice again), else 0"},

    {"Admin and logs", OPT_SECTION},
    {"admin", OPT_ADDR, F(admin), NULL, 0, 0,
     "admin HTTP: /healthz /readyz /metrics /debug/route /debug/workers /debug/index "
     "/debug/daemon"},
    {"metrics", OPT_ADDR, F(metrics), NULL, 0, 0,
     "a second listener for Prometheus: /metrics /healthz /readyz only, no /debug pages (e.g. "
     "0.0.0.0:15002 while --admin stays on 127.0.0.1); off when not given",
     OPT_NO_DEFAULT},
    {"admin-max-conns", OPT_INT, F(admin_opts.max_conns), "N", 1, 1e9,
     "admin connections open at once; a new one beyond closes the oldest"},
    {"admin-max-head", OPT_SIZE, F(admin_opts.max_head), NULL, 1, SIZE_MAX_OPT,
     "admin request head limit; a larger head is answered 431"},
    {"admin-timeout", OPT_MS, F(admin_opts.timeout_ms), NULL, 1, MS_MAX,
     "an admin connection is closed after this long"},
    {"port-file", OPT_STR, F(port_file), "FILE", 0, 0,
     "write \"LISTEN_PORT ADMIN_PORT\" there once ready", OPT_NO_DEFAULT},
    {"log-level", OPT_CHOICE, F(log_level), NULL, 0, 0, "what is logged", .choices = log_names},
};

static void defaults(void *cfg)
{
	daemon_cfg_default(cfg);
}

const struct opt_table daemon_options = {
    .prog = "kvsplice",
    .synopsis = "Usage: kvsplice [OPTIONS]\n"
		"       kvsplice detach [--pin-dir DIR]\n",
    .about = "Transparent, KV-cache-aware router for vLLM workers behind a Kubernetes Service. "
	     "SECS takes seconds (1.5, 2s) or milliseconds (250ms); SIZE takes bytes (4096, 64K, "
	     "32M, 1G).",
    .epilog = "Signals: SIGTERM/SIGINT stop accepting (interception falls open at once), drain,\n"
	      "exit; SIGHUP reloads --services (with --kubernetes: lists again).\n"
	      "If the node lacks what interception needs (cgroup v2, bpffs, BTF, capabilities,\n"
	      "program types, the node address), kvsplice logs why and stays out of the way:\n"
	      "nothing intercepted, /readyz 503 with the reason, kvsplice_node_ready 0.\n"
	      "A restart: start the new kvsplice while the old one runs; it takes the listeners\n"
	      "over and the old one drains and exits.\n",
    .v = daemon_opts,
    .n = sizeof(daemon_opts) / sizeof(daemon_opts[0]),
    .cfg_size = sizeof(struct daemon_cfg),
    .defaults = defaults,
};

static const struct opt detach_opts[] = {PIN_DIR_OPT};

const struct opt_table daemon_detach_options = {
    .prog = "kvsplice detach",
    .synopsis = "Usage: kvsplice detach [--pin-dir DIR]\n",
    .about = "Detaches and unpins kvsplice's BPF programs and maps.",
    .v = detach_opts,
    .n = 1,
    .cfg_size = sizeof(struct daemon_cfg),
    .defaults = defaults,
};
