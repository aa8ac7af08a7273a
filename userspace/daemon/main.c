// SPDX-License-Identifier: Apache-2.0
/* main: the kvsplice daemon. Parses flags, loads the tokenizers and the Services, opens (or takes
 * over) the BPF interception, follows the workers' KV events into the index, runs the proxy, the
 * router and the admin server on one epoll loop, reloads the Services on SIGHUP or when the file
 * changes (or, with --kubernetes, applies each snapshot the API server source hands over), drains
 * on SIGTERM/SIGINT, then takes off the node what it put there (nodesetup.h: the node address,
 * the pinned BPF state; --keep-on-exit keeps both). When the node lacks something interception
 * needs, it logs why and stays out of the way (run_degraded). `kvsplice detach` removes the pinned
 * BPF state.
 *
 * Restarts. A kvsplice started while another runs for the same proxy address takes its listening
 * sockets over (handover.h: fd passing, chosen over an SO_REUSEPORT pair because the proxy
 * listener is what BPF's one-entry sockmap holds; passed, it is the same socket, so it never
 * leaves the map and nothing queued on it is reset). Start-up order: everything loaded, then the
 * sockets taken, BPF attached and the listener registered, the admin answering, and only then
 * READY to the old process, which stops accepting, drains (its responses say "Connection:
 * close") and exits; a SIGTERM it gets afterwards (Kubernetes deleting the old pod) changes
 * nothing, and its exit leaves the node setup to its successor (node_exit_undoes). SIGTERM with
 * no successor: the listener leaves the sockmap first (new connects fall open to the Service's
 * DNAT), what is queued is still accepted and served, then the drain. */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "daemon/admin.h"
#include "kv/approx.h"
#include "node/bpfctl.h"
#include "discovery/discovery.h"
#include "kv/events.h"
#include "node/handover.h"
#include "node/keeper.h"
#include "kv/index.h"
#include "core/log.h"
#include "core/loop.h"
#include "core/metrics.h"
#include "prompt/models.h"
#include "node/nodesetup.h"
#include "route/policy.h"
#include "proxy/proxy.h"
#include "route/router.h"
#include "route/scrape.h"
#include "node/supervisor.h"
#include "route/workers.h"

#define DEFAULT_LISTEN "169.254.20.11:15001"
#define DEFAULT_ADMIN "127.0.0.1:15000"
#define DEFAULT_PIN_DIR BPFCTL_DEFAULT_PIN_DIR
#define DEFAULT_MARK 0x6b76 /* "kv" */
/* Where the default tokenizer is looked for when --tokenizer is not given: beside the binary (a
 * source tree's build/), then where the container image installs it. */
#define TOKENIZER_REL "/../models/qwen3/tokenizer.json"
#define TOKENIZER_SYS "/usr/share/kvsplice/models/qwen3/tokenizer.json"

struct daemon {
	struct loop *loop;
	struct metrics *metrics;
	struct router *router;
	struct models *models;
	struct proxy *proxy;
	struct admin *admin;
	struct bpfctl *bpf;
	struct discovery_source *src;
	struct services *svcs;
	struct loop_ev src_ev; /* the source's notify fd (Kubernetes), -1 when it has none */
	bool synced; /* the source handed over its first snapshot: BPF selection, interception and
		      * /readyz wait for it (Kubernetes: the first lists) */
	struct loop_ev sig;
	bool stop, hup;
	/* restarts (handover.h): our listeners offered to a successor (NULL: --no-handover, or
	 * not serving yet); the connection to the process we took them from, to say READY on once
	 * we serve them (-1: none), and its pid */
	struct handover *handover;
	bool no_handover;
	bool handed_over; /* a successor serves them: draining */
	/* fail-open across a crash (keeper.h): the keeper holding a second reference to the
	 * registered listener (NULL: --no-keeper, no BPF, or not serving yet) */
	struct keeper *keeper;
	struct keeper_opts kopts;
	bool no_keeper;
	/* serving waits for the workers' initial syncs (events_initial_syncs), sync_wait_ms at
	 * most: routing on an index that does not know the caches yet would place every prefix
	 * as new. serve_at: when the wait started (0: not waiting); serving: started */
	int sync_wait_ms;
	uint64_t serve_at;
	bool serving;
	int hconn;
	pid_t old_pid;
	uint64_t *reloads, *reload_errors;
	int64_t *nservices, *nendpoints;
	/* KV events (--events): the index is written on this loop's thread only */
	struct index *index;
	struct events *events;
	struct loop_ev events_ev;
	int events_more;
	const char *events_topic;
	/* node setup (nodesetup.h), taken off again by a final exit (node_exit) */
	struct nodesetup *node; /* the node address, when --node-address */
	const char *bpf_pins;	/* the pin directory once BPF is set up, else NULL */
	bool keep_on_exit;
	int64_t *node_ready;
};

/* Long options: one table gives getopt its options and error messages their names. */
enum {
	O_SERVICES = 256,
	O_SERVICES_MAX,
	O_LISTEN,
	O_ADMIN,
	O_ADMIN_MAX_CONNS,
	O_ADMIN_MAX_HEAD,
	O_ADMIN_TO,
	O_NO_BPF,
	O_CGROUP,
	O_PIN_DIR,
	O_MARK,
	O_ROUTER,
	O_RELAY,
	O_MAX_HEAD,
	O_MAX_BODY,
	O_HEADER_TO,
	O_IDLE_TO,
	O_CONNECT_TO,
	O_DRAIN_TO,
	O_POOL,
	O_POOL_TO,
	O_MAX_CONNS,
	O_MAX_CONNS_IP,
	O_MAX_BUFFERED,
	O_NO_XFF,
	O_LISTEN_BACKLOG,
	O_KV_QUEUE,
	O_KV_QUEUE_TOTAL,
	O_KV_QUEUE_BATCHES,
	O_KV_EVENT_MAX,
	O_KV_EVENT_QUEUE,
	O_KV_REPLAY_TO,
	O_PORT_FILE,
	O_LOG,
	O_EVENTS,
	O_NO_EVENTS,
	O_EVENTS_TOPIC,
	O_BLOCK_SIZE,
	O_HASH_SEED,
	O_INDEX_MAX,
	O_INDEX_WORKERS,
	O_TOKENIZER,
	O_MODEL_TOKENIZER,
	O_NO_TOKENIZER,
	O_SCRAPE,
	O_SCRAPE_MAX_BODY,
	O_SCRAPE_MAX_HEAD,
	O_SCRAPE_TO,
	O_APPROX_TTL,
	O_APPROX_MAX,
	O_SPILL_FACTOR,
	O_SPILL_SLACK,
	O_KEY_SLACK,
	O_BALANCE_SLACK,
	O_REPLICA_GAP,
	O_REPLICA_ROOM,
	O_REPLICA_ALL,
	O_SPILL_GAP,
	O_SPILL_GAP_REMOTE,
	O_BACKLOG,
	O_TOKCACHE,
	O_WHOLE_PROMPT,
	O_KUBERNETES,
	O_K8S_API,
	O_K8S_TOKEN,
	O_K8S_CA,
	O_K8S_NAMESPACE,
	O_K8S_LIST_MAX,
	O_K8S_EVENT_MAX,
	O_NODE_ADDRESS,
	O_NODE_DEVICE,
	O_KEEP_ON_EXIT,
	O_NO_HANDOVER,
	O_NO_KEEPER,
	O_SYNC_WAIT,
	O_KEEPER_QUEUE,
	O_KEEPER_HOLD,
};
static const struct option longopts[] = {
    {"services", required_argument, 0, O_SERVICES},
    {"services-max-bytes", required_argument, 0, O_SERVICES_MAX},
    {"listen", required_argument, 0, O_LISTEN},
    {"admin", required_argument, 0, O_ADMIN},
    {"admin-max-conns", required_argument, 0, O_ADMIN_MAX_CONNS},
    {"admin-max-head", required_argument, 0, O_ADMIN_MAX_HEAD},
    {"admin-timeout", required_argument, 0, O_ADMIN_TO},
    {"no-bpf", no_argument, 0, O_NO_BPF},
    {"cgroup", required_argument, 0, O_CGROUP},
    {"pin-dir", required_argument, 0, O_PIN_DIR},
    {"mark", required_argument, 0, O_MARK},
    {"router", required_argument, 0, O_ROUTER},
    {"relay", required_argument, 0, O_RELAY},
    {"max-head", required_argument, 0, O_MAX_HEAD},
    {"max-body", required_argument, 0, O_MAX_BODY},
    {"header-timeout", required_argument, 0, O_HEADER_TO},
    {"idle-timeout", required_argument, 0, O_IDLE_TO},
    {"connect-timeout", required_argument, 0, O_CONNECT_TO},
    {"drain-timeout", required_argument, 0, O_DRAIN_TO},
    {"pool-size", required_argument, 0, O_POOL},
    {"pool-idle-timeout", required_argument, 0, O_POOL_TO},
    {"max-conns", required_argument, 0, O_MAX_CONNS},
    {"max-conns-per-ip", required_argument, 0, O_MAX_CONNS_IP},
    {"no-forwarded-for", no_argument, 0, O_NO_XFF},
    {"max-buffered", required_argument, 0, O_MAX_BUFFERED},
    {"listen-backlog", required_argument, 0, O_LISTEN_BACKLOG},
    {"kv-queue-bytes", required_argument, 0, O_KV_QUEUE},
    {"kv-queue-total-bytes", required_argument, 0, O_KV_QUEUE_TOTAL},
    {"kv-queue-batches", required_argument, 0, O_KV_QUEUE_BATCHES},
    {"kv-event-max-bytes", required_argument, 0, O_KV_EVENT_MAX},
    {"kv-event-queue", required_argument, 0, O_KV_EVENT_QUEUE},
    {"kv-replay-timeout", required_argument, 0, O_KV_REPLAY_TO},
    {"port-file", required_argument, 0, O_PORT_FILE},
    {"log-level", required_argument, 0, O_LOG},
    {"events", no_argument, 0, O_EVENTS},
    {"no-events", no_argument, 0, O_NO_EVENTS},
    {"events-topic", required_argument, 0, O_EVENTS_TOPIC},
    {"block-size", required_argument, 0, O_BLOCK_SIZE},
    {"hash-seed", required_argument, 0, O_HASH_SEED},
    {"index-max-entries", required_argument, 0, O_INDEX_MAX},
    {"index-max-workers", required_argument, 0, O_INDEX_WORKERS},
    {"tokenizer", required_argument, 0, O_TOKENIZER},
    {"model-tokenizer", required_argument, 0, O_MODEL_TOKENIZER},
    {"no-tokenizer", no_argument, 0, O_NO_TOKENIZER},
    {"scrape-interval", required_argument, 0, O_SCRAPE},
    {"scrape-max-body", required_argument, 0, O_SCRAPE_MAX_BODY},
    {"scrape-max-head", required_argument, 0, O_SCRAPE_MAX_HEAD},
    {"scrape-timeout", required_argument, 0, O_SCRAPE_TO},
    {"approx-ttl", required_argument, 0, O_APPROX_TTL},
    {"approx-max-entries", required_argument, 0, O_APPROX_MAX},
    {"kv-spill-factor", required_argument, 0, O_SPILL_FACTOR},
    {"kv-spill-slack", required_argument, 0, O_SPILL_SLACK},
    {"kv-key-slack", required_argument, 0, O_KEY_SLACK},
    {"kv-balance-slack", required_argument, 0, O_BALANCE_SLACK},
    {"kv-replica-gap", required_argument, 0, O_REPLICA_GAP},
    {"kv-replica-room", required_argument, 0, O_REPLICA_ROOM},
    {"kv-replica-all", required_argument, 0, O_REPLICA_ALL},
    {"kv-spill-gap", required_argument, 0, O_SPILL_GAP},
    {"kv-spill-gap-remote", required_argument, 0, O_SPILL_GAP_REMOTE},
    {"kv-backlog", required_argument, 0, O_BACKLOG},
    {"tokenizer-cache", required_argument, 0, O_TOKCACHE},
    {"whole-prompt", no_argument, 0, O_WHOLE_PROMPT},
    {"kubernetes", no_argument, 0, O_KUBERNETES},
    {"k8s-api", required_argument, 0, O_K8S_API},
    {"k8s-token", required_argument, 0, O_K8S_TOKEN},
    {"k8s-ca", required_argument, 0, O_K8S_CA},
    {"k8s-namespace", required_argument, 0, O_K8S_NAMESPACE},
    {"k8s-list-max-bytes", required_argument, 0, O_K8S_LIST_MAX},
    {"k8s-event-max-bytes", required_argument, 0, O_K8S_EVENT_MAX},
    {"node-address", required_argument, 0, O_NODE_ADDRESS},
    {"node-device", required_argument, 0, O_NODE_DEVICE},
    {"keep-on-exit", no_argument, 0, O_KEEP_ON_EXIT},
    {"no-handover", no_argument, 0, O_NO_HANDOVER},
    {"no-keeper", no_argument, 0, O_NO_KEEPER},
    {"sync-wait", required_argument, 0, O_SYNC_WAIT},
    {"keeper-queue", required_argument, 0, O_KEEPER_QUEUE},
    {"keeper-hold", required_argument, 0, O_KEEPER_HOLD},
    {"help", no_argument, 0, 'h'},
    {0, 0, 0, 0},
};

/* Largest --index-max-workers: the index's bound, and no more than a Service's endpoints. */
#define INDEX_WORKERS_LIMIT (WORKERS_MAX < INDEX_MAX_WORKERS ? WORKERS_MAX : INDEX_MAX_WORKERS)

/* The kv tunable set by option opt. */
static double *kv_opt(struct policy_kv_opts *k, int opt)
{
	switch (opt) {
	case O_SPILL_FACTOR:
		return &k->spill_factor;
	case O_SPILL_SLACK:
		return &k->spill_slack;
	case O_KEY_SLACK:
		return &k->key_slack;
	case O_BALANCE_SLACK:
		return &k->balance_slack;
	case O_REPLICA_GAP:
		return &k->replica_gap;
	case O_REPLICA_ROOM:
		return &k->replica_room;
	case O_REPLICA_ALL:
		return &k->replica_all;
	case O_BACKLOG:
		return &k->backlog;
	case O_SPILL_GAP_REMOTE:
		return &k->spill_gap_remote;
	default:
		return &k->spill_gap;
	}
}

/* The long name of option value opt, for messages. */
static const char *opt_name(int opt)
{
	for (const struct option *o = longopts; o->name; o++)
		if (o->val == opt)
			return o->name;
	return "?";
}

static void usage(FILE *f)
{
	fprintf(
	    f,
	    "Usage: kvsplice [OPTIONS]\n"
	    "       kvsplice detach [--pin-dir DIR]\n"
	    "\n"
	    "Transparent, KV-cache-aware router for vLLM workers behind a Kubernetes Service.\n"
	    "\n"
	    "Options:\n"
	    "  --services FILE          Services and endpoints (JSON; reloaded on SIGHUP and on\n"
	    "                           change); this or --kubernetes is required\n"
	    "  --services-max-bytes SIZE  largest --services file read; a larger one is\n"
	    "                           refused (at start: exit; later: the last one kept;\n"
	    "                           default %uM)\n"
	    "  --kubernetes             Services and endpoints from the API server: Services\n"
	    "                           annotated kvsplice.io/route, their EndpointSlices\n"
	    "                           (in-cluster service account; see "
	    "userspace/discovery/discovery.h)\n"
	    "  --k8s-api URL            API server (default https://$KUBERNETES_SERVICE_HOST:\n"
	    "                           $KUBERNETES_SERVICE_PORT)\n"
	    "  --k8s-token FILE         bearer token, read again on each (re)connect and 401\n"
	    "                           (default: the service account's token)\n"
	    "  --k8s-ca FILE            CA bundle (default: the service account's ca.crt)\n"
	    "  --k8s-namespace NS       only Services of namespace NS (default: all)\n"
	    "  --k8s-list-max-bytes SIZE  largest list response page read from the API server;\n"
	    "                           a larger one is abandoned and listed again after a\n"
	    "                           backoff (default %uM)\n"
	    "  --k8s-event-max-bytes SIZE  largest watch event (one object) read, the same\n"
	    "                           way (default %uM)\n"
	    "  --listen ADDR:PORT       proxy address connects are handed to; repeatable\n"
	    "                           (default " DEFAULT_LISTEN ")\n"
	    "  --admin ADDR:PORT        admin HTTP: /healthz /readyz /metrics /debug/route\n"
	    "                           /debug/workers /debug/index\n"
	    "                           (default " DEFAULT_ADMIN ")\n"
	    "  --admin-max-conns N      admin connections open at once; a new one beyond\n"
	    "                           closes the oldest (default %d)\n"
	    "  --admin-max-head SIZE    admin request head limit, larger: 431 (default %dK)\n"
	    "  --admin-timeout SECS     an admin connection is closed after this long\n"
	    "                           (default %d)\n"
	    "  --no-bpf                 no interception: serve connections made to --listen\n"
	    "                           directly (Service = the one whose port is the listener's\n"
	    "                           port, else the only Service)\n"
	    "  --cgroup DIR             cgroup v2 directory the BPF programs attach to\n"
	    "                           (default: the cgroup2 mount root)\n"
	    "  --pin-dir DIR            bpffs directory of the pinned state "
	    "(default " DEFAULT_PIN_DIR ")\n"
	    "  --node-address A[/N]     put A (the --listen address; /32 by default) on the\n"
	    "                           node: on --node-device, created as a dummy device when\n"
	    "                           absent, set up; both removed again at exit\n"
	    "  --node-device NAME       (default " NODESETUP_DEFAULT_DEVICE ")\n"
	    "  --keep-on-exit           leave the node address and the pinned BPF state when\n"
	    "                           exiting (by default a final exit removes both; either\n"
	    "                           way connects go the kube-proxy way once kvsplice is gone)\n"
	    "  --mark N                 SO_MARK of upstream sockets, never intercepted (default "
	    "0x%x)\n"
	    "  --router POLICY          endpoint choice per request: kv (default; capacity-aware\n"
	    "                           prefix placement), dynamo (Dynamo's cost), round-robin,\n"
	    "                           random, approx (kv without events: routed blocks assumed\n"
	    "                           cached for --approx-ttl)\n"
	    "  --tokenizer PATH         tokenizer.json for every model without its own (default:\n"
	    "                           BINARY_DIR" TOKENIZER_REL ", else\n"
	    "                           " TOKENIZER_SYS ")\n"
	    "  --model-tokenizer NAME=PATH  tokenizer.json of served model NAME; repeatable\n"
	    "  --no-tokenizer           no default tokenizer (text prompts route approximately)\n"
	    "  --scrape-interval SECS   how often each worker's /metrics is read for load;\n"
	    "                           0 turns it off (default 0.25)\n"
	    "  --scrape-max-body SIZE   largest worker /metrics body read; a larger one fails\n"
	    "                           the scrape (default %uM)\n"
	    "  --scrape-max-head SIZE   longest worker /metrics answer head read; a longer one\n"
	    "                           fails the scrape (default %uK)\n"
	    "  --scrape-timeout SECS    deadline of one scrape, connect to last byte; a worker\n"
	    "                           missing it 3 times in a row is down (default %g)\n"
	    "  --approx-ttl SECS        approximate view: how long routed blocks count as cached\n"
	    "                           (default 120)\n"
	    "  --approx-max-entries N   approximate view: (worker, block) pairs held (about 32\n"
	    "                           bytes each); past it those closest to expiry go first\n"
	    "                           (default %u)\n"
	    "  --kv-spill-factor X      kv: a worker is under pressure past X times the average\n"
	    "                           load (default 2) ...\n"
	    "  --kv-spill-slack N       ... and N requests above it (default 4)\n"
	    "  --kv-key-slack N         kv: prefixes a worker may hold above its share when a new\n"
	    "                           one is placed (default 0)\n"
	    "  --kv-balance-slack N     kv: requests above the average a worker may have and "
	    "still\n"
	    "                           take a prefix it holds before a replica is used (default "
	    "0)\n"
	    "  --kv-replica-gap N       kv: a worker with room gets a new replica of a busy "
	    "prefix\n"
	    "                           when N requests below its holders (default 4)\n"
	    "  --kv-replica-room F      kv: ... or an idle worker 1 below, while all workers'\n"
	    "                           prefixes fill under F of their KV caches (default 0.35;\n"
	    "                           0: off)\n"
	    "  --kv-replica-all F       kv: caches are rich when every prefix the cluster holds\n"
	    "                           fits in F of every worker's KV cache: any worker 1 below\n"
	    "                           the holders then takes a replica, and the least loaded\n"
	    "                           holder is taken (default 0.6; 0: off)\n"
	    "  --kv-spill-gap N         kv: a holder short of free KV blocks spills a request "
	    "only\n"
	    "                           to a worker N requests less loaded (default 2)\n"
	    "  --kv-spill-gap-remote N  kv: ... plus N times the share of the load it knows only\n"
	    "                           from the workers' metrics (other nodes'; default 2)\n"
	    "  --kv-backlog X           kv: a worker owing more than X times the request's "
	    "prefill\n"
	    "                           blocks beyond the best place counts as busy (0.25; 0: "
	    "off)\n"
	    "  --tokenizer-cache SIZE   encoding cache per tokenizer (repeated messages and "
	    "pieces\n"
	    "                           read once; 0: off; default 64M)\n"
	    "  --whole-prompt           tokenize a text prompt whole before choosing (default:\n"
	    "                           as far as a worker's cache reaches, the rest once the\n"
	    "                           request is sent)\n"
	    "  --relay copy|splice      how response bodies are moved (default splice)\n"
	    "  --max-head SIZE          request head limit, larger: 431 (default 64K)\n"
	    "  --max-body SIZE          request body limit, larger: 413 (default 32M)\n"
	    "  --header-timeout SECS    to read a whole request once it started (default 30)\n"
	    "  --idle-timeout SECS      keep-alive wait; silence of a relay; an endpoint silent\n"
	    "                           this long after a request gets 504 (default 300)\n"
	    "  --connect-timeout SECS   per upstream connect attempt (default 3)\n"
	    "  --drain-timeout SECS     after SIGTERM, then close everything (default 30)\n"
	    "  --pool-size N            idle upstream connections kept per endpoint (default 64)\n"
	    "  --pool-idle-timeout SECS idle upstream connections closed after (default 4)\n"
	    "  --max-conns N            client connections at once; more are answered 503\n"
	    "                           with Retry-After and closed; 0: no limit (default %d;\n"
	    "                           measured: about 6 KiB each when idle, user + kernel)\n"
	    "  --max-conns-per-ip N     the same per client address (default %d)\n"
	    "  --max-buffered SIZE      bytes buffered over all client connections (request\n"
	    "                           bodies are held whole: RSS grows by about as much); a\n"
	    "                           request that would pass it is answered 503 with\n"
	    "                           Retry-After; 0: no limit (default %zuM)\n"
	    "  --listen-backlog N       connections the kernel queues for the proxy before it\n"
	    "                           accepts them (capped by net.core.somaxconn; default %d)\n"
	    "  --no-forwarded-for       do not tell workers the client's address (by default a\n"
	    "                           request goes on with X-Forwarded-For: its values, then\n"
	    "                           the client's address: workers see the node's otherwise)\n"
	    "  --port-file FILE         write \"LISTEN_PORT ADMIN_PORT\" there once ready\n"
	    "  --no-handover            neither take the listening sockets over from a kvsplice\n"
	    "                           running for the same --listen address (restart without\n"
	    "                           loss: it drains and exits once this one serves) nor offer\n"
	    "                           them to a successor\n"
	    "  --sync-wait SECS         at start, serve (register the listener, /readyz) only\n"
	    "                           once every worker's initial KV event sync is done, or\n"
	    "                           this long at most (default 1; 0: at once)\n"
	    "  --no-keeper              no keeper process: a crash (SIGKILL) of kvsplice then\n"
	    "                           resets the connects BPF sent it while it died (by\n"
	    "                           default a keeper holds the listener, relays those to\n"
	    "                           the Service and hands the listener to the next kvsplice)\n"
	    "  --keeper-hold SECS       after a crash, how long the keeper waits for the next\n"
	    "                           kvsplice to take the listener (default %d)\n"
	    "  --keeper-queue SECS      after a crash, connects keep queueing for the next\n"
	    "                           kvsplice this long before the keeper falls open (default\n"
	    "                           1 as a container's PID 1, which starts it again; else 0)\n"
	    "  --no-events              do not follow the workers' vLLM KV events (by default "
	    "every\n"
	    "                           endpoint with an events_port in --services is followed\n"
	    "                           into the block index, synced from its replay_port at\n"
	    "                           once; /debug/index shows it)\n"
	    "  --events-topic T         ZMQ topic of the KV events (default \"\": all)\n"
	    "  --block-size N           KV block size in tokens (default 16)\n"
	    "  --hash-seed N            seed of kvsplice's own block hash (default 1337)\n"
	    "  --index-max-entries N    bound on (worker, block) pairs indexed (default 4M,\n"
	    "                           about 50-80 bytes each)\n"
	    "  --index-max-workers N    workers whose KV events are followed at once (default\n"
	    "                           256, at most %u; each 2 bits per indexed block): past\n"
	    "                           it an endpoint is seen as holding no block (logged)\n"
	    "  --kv-queue-bytes SIZE    KV event payload bytes held per worker while its replay\n"
	    "                           runs; past it the replay is given up (default %uM)\n"
	    "  --kv-queue-total-bytes SIZE  the same over all workers (default %uM)\n"
	    "  --kv-queue-batches N     KV event batches held per worker while its replay runs\n"
	    "                           (however few bytes; default %u)\n"
	    "  --kv-event-max-bytes SIZE  largest KV event message read from a worker; a\n"
	    "                           larger one is dropped unread, counted (default %uM)\n"
	    "  --kv-event-queue N       KV event messages libzmq holds per worker until kvsplice\n"
	    "                           reads them (ZMQ receive high-water mark; past it the\n"
	    "                           worker's publisher drops: a gap, then a replay;\n"
	    "                           default %d)\n"
	    "  --kv-replay-timeout SECS a worker's replay, or its sync on joining, not answered\n"
	    "                           whole within this long is given up (default %g)\n"
	    "  --log-level LEVEL        error|warn|info|debug (default info)\n"
	    "  -h, --help               this text\n"
	    "\n"
	    "Signals: SIGTERM/SIGINT stop accepting (interception falls open at once), drain,\n"
	    "exit; SIGHUP reloads --services (with --kubernetes: lists again).\n"
	    "If the node lacks what interception needs (cgroup v2, bpffs, BTF, capabilities,\n"
	    "program types, the node address), kvsplice logs why and stays out of the way:\n"
	    "nothing intercepted, /readyz 503 with the reason, kvsplice_node_ready 0.\n"
	    "A restart: start the new kvsplice while the old one runs; it takes the listeners\n"
	    "over and the old one drains and exits.\n",
	    (unsigned)(DISCOVERY_FILE_DEFAULT_MAX >> 20),
	    (unsigned)(DISCOVERY_K8S_DEFAULT_LIST_MAX >> 20),
	    (unsigned)(DISCOVERY_K8S_DEFAULT_EVENT_MAX >> 20), ADMIN_DEFAULT_MAX_CONNS,
	    ADMIN_DEFAULT_MAX_HEAD >> 10, ADMIN_DEFAULT_TIMEOUT_MS / 1000, DEFAULT_MARK,
	    (unsigned)(SCRAPE_DEFAULT_MAX_BODY >> 20), (unsigned)(SCRAPE_DEFAULT_MAX_HEAD >> 10),
	    SCRAPE_DEFAULT_TIMEOUT_MS / 1000.0, (unsigned)APPROX_DEFAULT_MAX_ENTRIES,
	    PROXY_DEFAULT_MAX_CONNS, PROXY_DEFAULT_MAX_CONNS_PER_IP,
	    PROXY_DEFAULT_MAX_BUFFERED >> 20, PROXY_DEFAULT_BACKLOG, KEEPER_HOLD_MS / 1000,
	    INDEX_WORKERS_LIMIT, (unsigned)(EVENTS_DEFAULT_MAX_PENDING_BYTES >> 20),
	    (unsigned)(EVENTS_DEFAULT_MAX_PENDING_TOTAL_BYTES >> 20),
	    (unsigned)EVENTS_DEFAULT_MAX_PENDING, (unsigned)(EVENTS_DEFAULT_MAX_PAYLOAD >> 20),
	    EVENTS_DEFAULT_RCVHWM, EVENTS_DEFAULT_REPLAY_TIMEOUT_MS / 1000.0);
}

static int parse_addr(const char *s, struct sockaddr_in *out)
{
	char host[64];
	const char *colon = strrchr(s, ':');
	char *end;
	long port;

	if (!colon || (size_t)(colon - s) >= sizeof(host))
		return -1;
	memcpy(host, s, (size_t)(colon - s));
	host[colon - s] = '\0';
	port = strtol(colon + 1, &end, 10);
	if (*end || end == colon + 1 || port < 0 || port > 65535)
		return -1;
	memset(out, 0, sizeof(*out));
	out->sin_family = AF_INET;
	out->sin_port = htons((uint16_t)port);
	return inet_pton(AF_INET, host, &out->sin_addr) == 1 ? 0 : -1;
}

/* "1.5" seconds, "250ms", "2s" -> milliseconds, or -1 (also for NaN, infinities, negative
 * values and anything past 2e9 ms: converting those to int would be undefined behaviour). */
static int parse_ms(const char *s)
{
	char *end;
	double v = strtod(s, &end), ms;

	if (end == s || !(v >= 0))
		return -1;
	if (strcmp(end, "ms") == 0)
		ms = v;
	else if (!*end || strcmp(end, "s") == 0)
		ms = v * 1000;
	else
		return -1;
	return ms <= 2e9 ? (int)ms : -1;
}

/* "4096", "64K", "32M", "1G" -> bytes, or 0 on error (also for NaN, infinities, values below 1
 * and above 2^50: no buffer of a petabyte, and no undefined conversion to size_t). */
static size_t parse_size(const char *s)
{
	char *end;
	double v = strtod(s, &end), bytes;
	double mul = 1;

	if (end == s || !(v > 0))
		return 0;
	switch (*end) {
	case 'k':
	case 'K':
		mul = 1024;
		end++;
		break;
	case 'm':
	case 'M':
		mul = 1024 * 1024;
		end++;
		break;
	case 'g':
	case 'G':
		mul = 1024.0 * 1024 * 1024;
		end++;
		break;
	}
	if (*end == 'i' || *end == 'B')
		end += *end == 'i' ? (end[1] == 'B' ? 2 : 1) : 1;
	bytes = v * mul;
	if (*end || !(bytes >= 1 && bytes <= 0x1p50))
		return 0;
	return (size_t)bytes;
}

/* A count "0".."1000000000" -> its value, or -1. */
static int parse_count(const char *s)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (end == s || *end || errno || v < 0 || v > 1000000000)
		return -1;
	return (int)v;
}

/* The bounds of the Services source in use, as gauges: the file's (k NULL) or the API server's.
 * 0 or -ENOMEM. */
static int discovery_limit_gauges(struct daemon *d, const struct discovery_k8s_cfg *k,
				  size_t file_max)
{
	static const char *const help[] = {
	    "Largest --services file read; a larger one is refused (--services-max-bytes).",
	    "Largest list response page read from the API server; a larger one is abandoned "
	    "and listed again (--k8s-list-max-bytes).",
	    "Largest watch event read from the API server; a larger one is abandoned and "
	    "listed again (--k8s-event-max-bytes)."};
	int64_t *g[3] = {NULL};

	if (!k) {
		g[0] = metrics_gauge(d->metrics, "kvsplice_services_limit_bytes", NULL, help[0]);
		if (!g[0])
			return -ENOMEM;
		metrics_gauge_set(g[0],
				  (int64_t)(file_max ? file_max : DISCOVERY_FILE_DEFAULT_MAX));
		return 0;
	}
	g[1] = metrics_gauge(d->metrics, "kvsplice_k8s_limit_list_bytes", NULL, help[1]);
	g[2] = metrics_gauge(d->metrics, "kvsplice_k8s_limit_event_bytes", NULL, help[2]);
	if (!g[1] || !g[2])
		return -ENOMEM;
	metrics_gauge_set(g[1], (int64_t)(k->list_max_bytes ? k->list_max_bytes
							    : DISCOVERY_K8S_DEFAULT_LIST_MAX));
	metrics_gauge_set(g[2], (int64_t)(k->event_max_bytes ? k->event_max_bytes
							     : DISCOVERY_K8S_DEFAULT_EVENT_MAX));
	return 0;
}

static void bpf_collector(struct buf *out, void *arg)
{
	struct daemon *d = arg;

	bpfctl_metrics(d->bpf, out);
}

static void admin_collector(struct buf *out, void *arg)
{
	struct daemon *d = arg;

	if (d->admin)
		admin_metrics(d->admin, out);
}

static void events_cb(struct loop_ev *ev, uint32_t events)
{
	struct daemon *d = container_of(ev, struct daemon, events_ev);

	d->events_more = events_poll(d->events, 0);
}

static void events_collector(struct buf *out, void *arg)
{
	struct daemon *d = arg;

	events_metrics(d->events, out);
}

static int debug_index(struct buf *body, const char *query, const char **content_type, void *arg)
{
	struct daemon *d = arg;

	*content_type = "application/json";
	return events_debug_json(d->events, body) ? 500 : 200;
}

/* Applies a new snapshot: the BPF Service selection first (exactly s's: also what a previous
 * process left pinned), then events, the router and the proxy. */
static void services_apply(struct daemon *d, struct services *s)
{
	size_t neps = 0;

	if (d->bpf && d->synced && !d->handed_over) /* before: what a previous process pinned
						     * stays; after: the successor's */
		bpfctl_sync_services(d->bpf, s);
	if (d->events && events_sync_services(d->events, s, d->events_topic) != 0)
		log_warn("main", "events: not every endpoint could be followed");
	router_set_services(d->router, s);
	proxy_set_services(d->proxy, s);
	services_put(d->svcs);
	d->svcs = s;
	for (size_t i = 0; i < s->n; i++)
		neps += s->v[i].nendpoints;
	metrics_gauge_set(d->nservices, (int64_t)s->n);
	metrics_gauge_set(d->nendpoints, (int64_t)neps);
	log_info("main", "services: %zu service(s), %zu endpoint(s) (generation %llu)", s->n, neps,
		 (unsigned long long)s->generation);
}

static const struct handover_ops handover_ops;

/* Once the Services are known: the listener goes into BPF's sockmap (interception starts), the
 * proxy accepts (listeners taken over wait for this), /readyz says yes; then the process the
 * listeners were taken from hears READY (it stops accepting and drains), and ours are offered to
 * a successor. Returns 0, or a negative errno when the listener could not be registered
 * (connects keep going the kube-proxy way; the caller stops). */
static int serving_start(struct daemon *d)
{
	struct sockaddr_in key;
	int rc;

	if (d->bpf && (rc = bpfctl_set_listener(d->bpf, proxy_listen_fd(d->proxy, 0))) < 0) {
		log_error("main", "BPF listener registration: %s", strerror(-rc));
		return rc;
	}
	if (d->bpf && !d->no_keeper && !d->keeper) {
		d->kopts.listen_fd = proxy_listen_fd(d->proxy, 0);
		proxy_listen_addr(d->proxy, 0, &d->kopts.addr);
		if (keeper_spawn(&d->kopts, &d->keeper) < 0)
			log_warn("main",
				 "no keeper: a crash will reset what is queued for the proxy");
	}
	proxy_accept(d->proxy, true);
	if (d->admin && !d->stop)
		admin_set_ready(d->admin, true);
	if (d->hconn >= 0) {
		rc = handover_ready(d->hconn);
		d->hconn = -1;
		if (rc < 0)
			log_warn("main", "handover: pid %d did not hear READY (%s)",
				 (int)d->old_pid, strerror(-rc));
	}
	if (!d->no_handover && !d->handover && proxy_listen_addr(d->proxy, 0, &key) == 0 &&
	    key.sin_port && handover_listen(d->loop, &key, &handover_ops, d, &d->handover) < 0)
		log_warn("main", "cannot offer the listeners to a successor");
	return 0;
}

/* Serving starts once the workers' initial syncs are done, or sync_wait_ms after it could. A
 * failure to register the listener stops the daemon (connects keep going the kube-proxy way). */
static void serving_poll(struct daemon *d)
{
	uint64_t now = clock_ms();
	size_t syncing;

	if (d->serving || !d->serve_at || d->stop)
		return;
	syncing = events_initial_syncs(d->events);
	if (syncing && now < d->serve_at + (uint64_t)d->sync_wait_ms)
		return;
	if (syncing)
		log_warn("main", "serving with %zu worker(s) not synced after %d ms (--sync-wait)",
			 syncing, d->sync_wait_ms);
	else if (d->events)
		log_info("main", "workers synced in %llu ms: serving",
			 (unsigned long long)(now - d->serve_at));
	d->serving = true;
	if (serving_start(d) < 0)
		d->stop = true;
}

/* The source's first snapshot came after start-up (Kubernetes). */
static void interception_start(struct daemon *d)
{
	d->serve_at = clock_ms();
	serving_poll(d);
}

static void services_poll(struct daemon *d, bool force)
{
	struct services *s = NULL;
	int rc = d->src->poll(d->src, force, &s);

	if (rc == 1) {
		bool first = !d->synced;

		metrics_inc(d->reloads);
		d->synced = true;
		services_apply(d, s);
		if (first)
			interception_start(d);
	} else if (rc < 0) {
		metrics_inc(d->reload_errors);
	}
}

/* The source says a snapshot is waiting (Kubernetes): take it now, not at the next second. */
static void src_cb(struct loop_ev *ev, uint32_t events)
{
	services_poll(container_of(ev, struct daemon, src_ev), false);
}

static void signal_cb(struct loop_ev *ev, uint32_t events)
{
	struct daemon *d = container_of(ev, struct daemon, sig);
	struct signalfd_siginfo si;

	while (read(ev->fd, &si, sizeof(si)) == sizeof(si)) {
		if (si.ssi_signo == SIGHUP)
			d->hup = true;
		else
			d->stop = true;
	}
}

/* handover_ops: the listening sockets still open (the proxy's, the admin's). */
static int handover_offer(void *arg, struct handover_fd *out, int max)
{
	struct daemon *d = arg;
	int n = 0;

	for (int i = 0; i < PROXY_MAX_LISTEN && n < max; i++) {
		int fd = proxy_listen_fd(d->proxy, i);

		if (fd >= 0 && proxy_listen_addr(d->proxy, i, &out[n].addr) == 0) {
			out[n].fd = fd;
			out[n++].kind = HANDOVER_PROXY;
		}
	}
	if (n < max && admin_listen_fd(d->admin) >= 0) {
		out[n].fd = admin_listen_fd(d->admin);
		admin_addr(d->admin, &out[n].addr);
		out[n++].kind = HANDOVER_ADMIN;
	}
	return n;
}

/* handover_ops: the successor serves our listeners (and its listener is in the sockmap). */
static void handover_done_cb(void *arg, pid_t successor)
{
	struct daemon *d = arg;

	log_info("main", "pid %d took the listeners over: draining, then exiting", (int)successor);
	d->handed_over = true;
	admin_set_ready(d->admin, false);
	admin_release_listener(d->admin);
	proxy_handed_over(d->proxy);
	/* the listener is the successor's (and its keeper's) now: ours must not take it out of the
	 * sockmap if this process dies while draining */
	keeper_release(d->keeper);
	d->keeper = NULL;
}

static const struct handover_ops handover_ops = {handover_offer, handover_done_cb};

/* Sockets a running kvsplice passed (n of them): the proxy's go to po->listen_fd by address, the
 * admin's to *admin_fd when it is on admin_sa; any other is closed (its connections stay with
 * the old process only if it still holds it: it does not, after READY). */
static void handover_assign(struct handover_fd *h, int n, struct proxy_opts *po,
			    const struct sockaddr_in *admin_sa, int *admin_fd)
{
	for (int k = 0; k < n; k++) {
		bool used = false;

		for (int i = 0; h[k].kind == HANDOVER_PROXY && !used && i < po->nlisten; i++)
			if (po->listen_fd[i] < 0 &&
			    po->listen[i].sin_addr.s_addr == h[k].addr.sin_addr.s_addr &&
			    po->listen[i].sin_port == h[k].addr.sin_port) {
				po->listen_fd[i] = h[k].fd;
				used = true;
			}
		if (h[k].kind == HANDOVER_ADMIN && *admin_fd < 0 &&
		    (admin_sa->sin_addr.s_addr == h[k].addr.sin_addr.s_addr &&
		     (admin_sa->sin_port == h[k].addr.sin_port || !admin_sa->sin_port))) {
			*admin_fd = h[k].fd;
			used = true;
		}
		if (!used) {
			char a[INET_ADDRSTRLEN];

			inet_ntop(AF_INET, &h[k].addr.sin_addr, a, sizeof(a));
			log_warn("main",
				 "handover: the previous process listened on %s:%u, not "
				 "configured here: closed",
				 a, ntohs(h[k].addr.sin_port));
			close(h[k].fd);
		}
	}
}

/* Before /metrics or a /debug page is read: the requests done, counted whole. */
static void admin_before(void *arg)
{
	struct daemon *d = arg;

	if (d->router)
		router_settle(d->router);
}

static int debug_route(struct buf *body, const char *query, const char **ctype, void *arg)
{
	struct daemon *d = arg;

	*ctype = "application/json";
	return router_debug_json(d->router, body) < 0 ? 500 : 200;
}

static int debug_workers(struct buf *body, const char *query, const char **ctype, void *arg)
{
	struct daemon *d = arg;

	*ctype = "application/json";
	return router_workers_json(d->router, body) < 0 ? 500 : 200;
}

/* The default tokenizer: beside the binary (a source tree), else the image's; NULL if none. */
static const char *default_tokenizer(char *buf, size_t n)
{
	char exe[4096];
	ssize_t l = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	if (l > 0) {
		char *slash;

		exe[l] = '\0';
		slash = strrchr(exe, '/');
		if (slash) {
			*slash = '\0';
			if ((size_t)snprintf(buf, n, "%s%s", exe, TOKENIZER_REL) < n &&
			    access(buf, R_OK) == 0)
				return buf;
		}
	}
	return access(TOKENIZER_SYS, R_OK) == 0 ? TOKENIZER_SYS : NULL;
}

/* Node setup before anything is loaded: the kernel probe when BPF is on (cgroup[n] becomes the
 * attach point), then the node address when node_addr is given. Returns 0, or -1 with the reason
 * in why[whylen] (logged): the caller then stays out of the way (run_degraded). */
static int node_setup(struct daemon *d, bool bpf, char *cgroup, size_t n, const char *pin_dir,
		      const char *node_addr, const char *node_dev, char *why, size_t whylen)
{
	struct nodesetup_probe_cfg pc = {.cgroup = cgroup, .pin_dir = pin_dir};
	struct in_addr addr;
	int prefix;

	if (bpf && nodesetup_probe(&pc, cgroup, n, why, whylen) > 0)
		return -1;
	if (node_addr && (nodesetup_parse_address(node_addr, &addr, &prefix) < 0 ||
			  nodesetup_address_up(node_dev, addr, prefix, &d->node, why, whylen) < 0))
		return -1;
	return 0;
}

/* Fail-open (nodesetup.h says why this and not an exit): nothing attached, nothing listening on
 * the proxy address; only the admin server answers (/readyz 503 with why) until SIGTERM/SIGINT.
 * Returns the exit code. */
static int run_degraded(struct daemon *d, const struct sockaddr_in *admin_sa,
			const struct admin_opts *ao, const sigset_t *mask, const char *why)
{
	int rc;

	log_error("main", "node not ready, staying out of the way (no interception: connects go "
			  "the kube-proxy way); fix the above and restart kvsplice");
	metrics_gauge_set(d->node_ready, 0);
	if ((rc = admin_new(d->loop, admin_sa, -1, ao, d->metrics, &d->admin)) < 0 ||
	    (rc = metrics_add_collector(d->metrics, admin_collector, d)) < 0)
		return 1;
	admin_set_not_ready_reason(d->admin, why);
	d->sig.fd = signalfd(-1, mask, SFD_NONBLOCK | SFD_CLOEXEC);
	d->sig.cb = signal_cb;
	if (d->sig.fd < 0 || loop_set(d->loop, &d->sig, EPOLLIN) < 0) {
		log_error("main", "signalfd: %s", strerror(errno));
		return 1;
	}
	while (!d->stop) {
		if ((rc = loop_run(d->loop, 1000)) < 0) {
			log_error("main", "epoll: %s", strerror(-rc));
			return 1;
		}
		admin_tick(d->admin);
	}
	log_info("main", "stopping (node was not ready)");
	return 0;
}

/* Whether this exit takes the node setup off. The one place that decides: by default a final
 * exit leaves nothing behind; --keep-on-exit keeps it; a process whose listeners a successor
 * took over must keep it too (the successor runs on it). */
static bool node_exit_undoes(const struct daemon *d)
{
	return !d->keep_on_exit && !d->handed_over;
}

/* Closes the BPF handles and, when node_exit_undoes, detaches and unpins the BPF state and takes
 * the node address off (after the proxy closed its listeners). */
static void node_exit(struct daemon *d)
{
	bool undo = node_exit_undoes(d);

	bpfctl_close(d->bpf);
	d->bpf = NULL;
	if (undo && d->bpf_pins) {
		if (bpfctl_detach(d->bpf_pins) == 0)
			log_info("main", "BPF interception detached, %s unpinned", d->bpf_pins);
	}
	if (undo)
		nodesetup_undo(d->node);
	else
		nodesetup_free(d->node);
	d->node = NULL;
}

static int cmd_detach(int argc, char **argv)
{
	const char *pin_dir = DEFAULT_PIN_DIR;
	int rc;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--pin-dir") == 0 && i + 1 < argc) {
			pin_dir = argv[++i];
		} else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
			printf("Usage: kvsplice detach [--pin-dir DIR]\n"
			       "Detaches and unpins kvsplice's BPF programs and maps.\n");
			return 0;
		} else {
			fprintf(stderr, "kvsplice detach: unknown argument %s\n", argv[i]);
			return 2;
		}
	}
	rc = bpfctl_detach(pin_dir);
	if (rc < 0) {
		fprintf(stderr, "kvsplice detach: %s: %s\n", pin_dir, strerror(-rc));
		return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct daemon d = {.sig.fd = -1, .src_ev.fd = -1, .hconn = -1};
	struct discovery_k8s_cfg kcfg = {0};
	bool kubernetes = false;
	size_t services_max = 0; /* 0: discovery.h default */
	struct proxy_opts po;
	struct sockaddr_in admin_sa;
	struct admin_opts ao = {0}; /* 0: admin.h defaults */

	discovery_set_routes(&policy_routes);
	const char *services = NULL, *pin_dir = DEFAULT_PIN_DIR, *router = "kv", *port_file = NULL;
	const char *node_addr = NULL, *node_dev = NULL;
	char why[256] = "";
	const char *tokenizer = NULL, *model_tok[32];
	char tokbuf[4096];
	size_t nmodel_tok = 0;
	bool no_tokenizer = false;
	struct policy_kv_opts kvo;
	struct router_cfg rcfg = {.tokcache_bytes = -1};
	char cgroup[4096] = "";
	bool no_bpf = false;
	uint32_t mark = DEFAULT_MARK;
	int opt, rc, exit_code = 1, v;
	sigset_t mask;
	uint64_t last_poll = 0, stop_ms = 0;
	bool with_events = true;
	struct index_cfg icfg = {0};
	size_t kv_queue = 0, kv_queue_total = 0;  /* 0: events.h defaults */
	int kv_queue_batches = 0;		  /* 0: events.h default */
	size_t kv_event_max = 0;		  /* 0: events.h default */
	int kv_event_queue = 0, kv_replay_ms = 0; /* 0: events.h defaults */
	struct handover_fd hfds[HANDOVER_MAX_FDS];
	int nhfds = 0, admin_fd = -1;

	if (argc > 1 && strcmp(argv[1], "detach") == 0)
		return cmd_detach(argc - 1, argv + 1);
	if (argc > 1 && strcmp(argv[1], "--keeper") == 0)
		return keeper_main(argc, argv);
	/* a container's PID 1: stay a tiny init, the daemon runs as its child (supervisor.h) */
	if ((rc = supervisor_run()) >= 0)
		return rc;
	d.kopts.hold_ms = KEEPER_HOLD_MS;
	/* a supervised daemon is started again at once: connects wait for it (keeper.h) */
	d.kopts.queue_ms = supervisor_child() ? KEEPER_QUEUE_MS : 0;
	d.sync_wait_ms = 1000;
	proxy_opts_default(&po);
	policy_kv_defaults(&kvo);
	parse_addr(DEFAULT_ADMIN, &admin_sa);
	while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (opt) {
		case O_SERVICES:
			services = optarg;
			break;
		case O_SERVICES_MAX:
			if (!(services_max = parse_size(optarg)))
				goto bad_arg;
			break;
		case O_KUBERNETES:
			kubernetes = true;
			break;
		case O_K8S_API:
			kcfg.api = optarg;
			break;
		case O_K8S_TOKEN:
			kcfg.token_path = optarg;
			break;
		case O_K8S_CA:
			kcfg.ca_path = optarg;
			break;
		case O_K8S_NAMESPACE:
			kcfg.ns = optarg;
			break;
		case O_K8S_LIST_MAX:
			if (!(kcfg.list_max_bytes = parse_size(optarg)))
				goto bad_arg;
			break;
		case O_K8S_EVENT_MAX:
			if (!(kcfg.event_max_bytes = parse_size(optarg)))
				goto bad_arg;
			break;
		case O_LISTEN:
			if (po.nlisten == PROXY_MAX_LISTEN ||
			    parse_addr(optarg, &po.listen[po.nlisten]))
				goto bad_arg;
			po.nlisten++;
			break;
		case O_ADMIN:
			if (parse_addr(optarg, &admin_sa))
				goto bad_arg;
			break;
		case O_ADMIN_MAX_CONNS:
			if ((ao.max_conns = parse_count(optarg)) < 1)
				goto bad_arg;
			break;
		case O_ADMIN_MAX_HEAD:
			if (!(ao.max_head = parse_size(optarg)))
				goto bad_arg;
			break;
		case O_ADMIN_TO:
			if ((ao.timeout_ms = parse_ms(optarg)) <= 0)
				goto bad_arg;
			break;
		case O_NO_BPF:
			no_bpf = true;
			break;
		case O_CGROUP:
			snprintf(cgroup, sizeof(cgroup), "%s", optarg);
			break;
		case O_PIN_DIR:
			pin_dir = optarg;
			break;
		case O_NODE_ADDRESS: {
			struct in_addr a;
			int p;

			if (nodesetup_parse_address(optarg, &a, &p) < 0)
				goto bad_arg;
			node_addr = optarg;
			break;
		}
		case O_NODE_DEVICE:
			if (!*optarg || strlen(optarg) >= 16 || strchr(optarg, '/'))
				goto bad_arg;
			node_dev = optarg;
			break;
		case O_KEEP_ON_EXIT:
			d.keep_on_exit = true;
			break;
		case O_MARK: {
			char *end;
			unsigned long m = strtoul(optarg, &end, 0);

			if (*end || m > UINT32_MAX)
				goto bad_arg;
			mark = (uint32_t)m;
			break;
		}
		case O_ROUTER:
			router = optarg;
			break;
		case O_RELAY:
			if ((v = proxy_relay_parse(optarg)) < 0)
				goto bad_arg;
			po.relay = (enum proxy_relay)v;
			break;
		case O_MAX_HEAD:
			if (!(po.max_head = parse_size(optarg)))
				goto bad_arg;
			break;
		case O_MAX_BODY:
			if (!(po.max_body = parse_size(optarg)))
				goto bad_arg;
			break;
		case O_HEADER_TO:
			if ((po.header_timeout_ms = parse_ms(optarg)) <= 0)
				goto bad_arg;
			break;
		case O_IDLE_TO:
			if ((po.idle_timeout_ms = parse_ms(optarg)) <= 0)
				goto bad_arg;
			break;
		case O_CONNECT_TO:
			if ((po.connect_timeout_ms = parse_ms(optarg)) <= 0)
				goto bad_arg;
			break;
		case O_DRAIN_TO:
			if ((po.drain_timeout_ms = parse_ms(optarg)) < 0)
				goto bad_arg;
			break;
		case O_POOL:
			po.pool_max = atoi(optarg);
			if (po.pool_max < 0)
				goto bad_arg;
			break;
		case O_POOL_TO:
			if ((po.pool_idle_timeout_ms = parse_ms(optarg)) < 0)
				goto bad_arg;
			break;
		case O_MAX_CONNS:
			if ((po.max_conns = parse_count(optarg)) < 0)
				goto bad_arg;
			break;
		case O_MAX_CONNS_IP:
			if ((po.max_conns_per_ip = parse_count(optarg)) < 0)
				goto bad_arg;
			break;
		case O_NO_XFF:
			po.forwarded_for = false;
			break;
		case O_LISTEN_BACKLOG:
			if ((po.backlog = parse_count(optarg)) < 1)
				goto bad_arg;
			break;
		case O_KV_QUEUE:
			if (!(kv_queue = parse_size(optarg)))
				goto bad_arg;
			break;
		case O_KV_QUEUE_TOTAL:
			if (!(kv_queue_total = parse_size(optarg)))
				goto bad_arg;
			break;
		case O_KV_QUEUE_BATCHES:
			if ((kv_queue_batches = parse_count(optarg)) < 1)
				goto bad_arg;
			break;
		case O_KV_EVENT_MAX:
			if (!(kv_event_max = parse_size(optarg)))
				goto bad_arg;
			break;
		case O_KV_EVENT_QUEUE:
			if ((kv_event_queue = parse_count(optarg)) < 1)
				goto bad_arg;
			break;
		case O_KV_REPLAY_TO:
			if ((kv_replay_ms = parse_ms(optarg)) <= 0)
				goto bad_arg;
			break;
		case O_MAX_BUFFERED:
			if (strcmp(optarg, "0") == 0)
				po.max_buffered = 0;
			else if (!(po.max_buffered = parse_size(optarg)))
				goto bad_arg;
			break;
		case O_PORT_FILE:
			port_file = optarg;
			break;
		case O_LOG:
			if ((v = log_parse_level(optarg)) < 0)
				goto bad_arg;
			log_set_level((enum log_level)v);
			break;
		case O_EVENTS:
			with_events = true;
			break;
		case O_NO_EVENTS:
			with_events = false;
			break;
		case O_TOKENIZER:
			tokenizer = optarg;
			break;
		case O_NO_TOKENIZER:
			no_tokenizer = true;
			break;
		case O_MODEL_TOKENIZER:
			if (!strchr(optarg, '=') || strchr(optarg, '=') == optarg ||
			    nmodel_tok == sizeof(model_tok) / sizeof(model_tok[0]))
				goto bad_arg;
			model_tok[nmodel_tok++] = optarg;
			break;
		case O_SCRAPE:
			if ((v = parse_ms(optarg)) < 0)
				goto bad_arg;
			rcfg.scrape_interval_ms = v ? v : -1;
			break;
		case O_SCRAPE_MAX_BODY:
			if (!(rcfg.scrape_max_body = parse_size(optarg)))
				goto bad_arg;
			break;
		case O_SCRAPE_MAX_HEAD:
			if (!(rcfg.scrape_max_head = parse_size(optarg)))
				goto bad_arg;
			break;
		case O_SCRAPE_TO:
			if ((rcfg.scrape_timeout_ms = parse_ms(optarg)) <= 0)
				goto bad_arg;
			break;
		case O_APPROX_TTL:
			if ((v = parse_ms(optarg)) <= 0)
				goto bad_arg;
			rcfg.approx_ttl_s = v / 1000.0;
			break;
		case O_APPROX_MAX:
			if ((v = parse_count(optarg)) < 1)
				goto bad_arg;
			rcfg.approx_max_entries = (size_t)v;
			break;
		case O_SPILL_FACTOR:
		case O_SPILL_SLACK:
		case O_KEY_SLACK:
		case O_BALANCE_SLACK:
		case O_REPLICA_GAP:
		case O_REPLICA_ROOM:
		case O_REPLICA_ALL:
		case O_SPILL_GAP:
		case O_SPILL_GAP_REMOTE:
		case O_BACKLOG: {
			char *end;
			double x = strtod(optarg, &end);

			if (*end || end == optarg || !(x >= 0) || x > 1e6 ||
			    (opt == O_SPILL_FACTOR && x < 1))
				goto bad_arg;
			*kv_opt(&kvo, opt) = x;
			break;
		}
		case O_WHOLE_PROMPT:
			rcfg.whole_prompt = true;
			break;
		case O_TOKCACHE:
			if (strcmp(optarg, "0") == 0)
				rcfg.tokcache_bytes = 0;
			else if (!(rcfg.tokcache_bytes = (long)parse_size(optarg)))
				goto bad_arg;
			break;
		case O_EVENTS_TOPIC:
			d.events_topic = optarg;
			break;
		case O_NO_HANDOVER:
			d.no_handover = true;
			break;
		case O_KEEPER_QUEUE:
			if ((d.kopts.queue_ms = parse_ms(optarg)) < 0)
				goto bad_arg;
			break;
		case O_SYNC_WAIT:
			if ((d.sync_wait_ms = parse_ms(optarg)) < 0)
				goto bad_arg;
			break;
		case O_NO_KEEPER:
			d.no_keeper = true;
			break;
		case O_KEEPER_HOLD:
			if ((d.kopts.hold_ms = parse_ms(optarg)) < 0) {
				fprintf(stderr, "kvsplice: bad --keeper-hold %s\n", optarg);
				return 2;
			}
			break;
		case O_BLOCK_SIZE: {
			char *end;
			unsigned long b = strtoul(optarg, &end, 10);

			if (*end || b == 0 || b > BLOCKHASH_MAX_BLOCK_SIZE)
				goto bad_arg;
			icfg.block_size = (uint32_t)b;
			break;
		}
		case O_HASH_SEED: {
			char *end;

			icfg.seed = strtoull(optarg, &end, 0);
			if (*end || end == optarg)
				goto bad_arg;
			icfg.seed_set = true;
			break;
		}
		case O_INDEX_MAX: {
			char *end;

			icfg.max_entries = strtoull(optarg, &end, 0);
			if (*end || !icfg.max_entries)
				goto bad_arg;
			break;
		}
		case O_INDEX_WORKERS: {
			char *end;
			unsigned long v = strtoul(optarg, &end, 10);

			if (*end || end == optarg || !v || v > INDEX_WORKERS_LIMIT)
				goto bad_arg;
			icfg.max_workers = (uint32_t)v;
			break;
		}
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
		continue;
	bad_arg:
		fprintf(stderr, "kvsplice: bad value for --%s: %s\n", opt_name(opt), optarg);
		return 2;
	}
	if (optind < argc) {
		fprintf(stderr, "kvsplice: unexpected argument %s (see --help)\n", argv[optind]);
		return 2;
	}
	if (!services == !kubernetes) {
		fprintf(stderr, "kvsplice: give --services FILE or --kubernetes (see --help)\n");
		return 2;
	}
	if (po.nlisten == 0) {
		parse_addr(DEFAULT_LISTEN, &po.listen[0]);
		po.nlisten = 1;
	}
	if (node_addr) {
		struct in_addr a;
		int p, i;

		nodesetup_parse_address(node_addr, &a, &p);
		for (i = 0; i < po.nlisten && po.listen[i].sin_addr.s_addr != a.s_addr; i++)
			;
		if (i == po.nlisten)
			log_warn("main", "--node-address %s is no --listen address", node_addr);
	}
	po.mark = mark;
	d.kopts.pin_dir = pin_dir;
	d.kopts.own_mark = mark;
	d.kopts.idle_ms = po.idle_timeout_ms;

	/* SIGPIPE off (writes to a closed peer fail with EPIPE); the others through signalfd */
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	sigprocmask(SIG_BLOCK, &mask, NULL);

	if (!policy_find(router)) {
		fprintf(stderr, "kvsplice: unknown --router %s (%s)\n", router, policy_names());
		return 2;
	}
	if ((rc = loop_new(&d.loop)) < 0 || (rc = metrics_new(&d.metrics)) < 0 ||
	    (rc = models_new(&d.models)) < 0)
		goto cleanup;
	d.node_ready =
	    metrics_gauge(d.metrics, "kvsplice_node_ready", NULL,
			  "1 when the node has what interception needs (kernel probe, "
			  "node address); 0: kvsplice stays out of the way, /readyz says "
			  "why.");
	if (node_setup(&d, !no_bpf, cgroup, sizeof(cgroup), pin_dir, node_addr, node_dev, why,
		       sizeof(why)) < 0) {
		exit_code = run_degraded(&d, &admin_sa, &ao, &mask, why);
		goto cleanup;
	}
	metrics_gauge_set(d.node_ready, 1);
	if (!tokenizer && !no_tokenizer)
		tokenizer = default_tokenizer(tokbuf, sizeof(tokbuf));
	for (size_t i = 0; i <= nmodel_tok; i++) {
		char err[256], name[256];
		const char *path = i < nmodel_tok ? strchr(model_tok[i], '=') + 1 : tokenizer;

		if (i == nmodel_tok && (!tokenizer || no_tokenizer))
			break;
		if (i < nmodel_tok)
			snprintf(name, sizeof(name), "%.*s", (int)(path - 1 - model_tok[i]),
				 model_tok[i]);
		rc = models_add(d.models, i < nmodel_tok ? name : NULL, path, err, sizeof(err));
		if (rc < 0) {
			fprintf(stderr, "kvsplice: tokenizer %s: %s\n", path,
				rc == -ENOMEM ? "out of memory" : err);
			exit_code = 2;
			goto cleanup;
		}
	}
	if (!models_count(d.models))
		log_warn("main", "no tokenizer: text prompts are routed on the approximate view "
				 "(give --tokenizer)");
	d.reloads = metrics_counter(d.metrics, "kvsplice_services_reloads_total", NULL,
				    "Services snapshots loaded.");
	d.reload_errors = metrics_counter(d.metrics, "kvsplice_services_reload_errors_total", NULL,
					  "Services reloads refused (the previous one is kept).");
	d.nservices = metrics_gauge(d.metrics, "kvsplice_services", NULL, "Services served.");
	d.nendpoints =
	    metrics_gauge(d.metrics, "kvsplice_endpoints", NULL, "Endpoints over all Services.");

	if (with_events) {
		struct events_cfg ecfg = {0};

		index_new(&icfg, &d.index);
		ecfg.index = d.index;
		ecfg.max_pending_bytes = kv_queue;
		ecfg.max_pending_total_bytes = kv_queue_total;
		ecfg.max_pending = (size_t)kv_queue_batches;
		ecfg.max_payload = kv_event_max;
		ecfg.rcvhwm = kv_event_queue;
		ecfg.replay_timeout_ms = kv_replay_ms;
		if (d.index)
			events_new(&ecfg, &d.events);
		if (!d.events) {
			log_error("main", "events: cannot start (%s)",
				  strerror(errno ? errno : ENOMEM));
			rc = -ENOMEM;
			goto cleanup;
		}
		d.events_ev.fd = events_fd(d.events);
		d.events_ev.cb = events_cb;
		if ((rc = loop_set(d.loop, &d.events_ev, EPOLLIN)) < 0 ||
		    (rc = metrics_add_collector(d.metrics, events_collector, &d)) < 0)
			goto cleanup;
	}
	rcfg.policy = router;
	rcfg.kv = &kvo;
	rcfg.index = d.index;
	rcfg.events = d.events;
	rcfg.models = d.models;
	rcfg.metrics = d.metrics;
	rcfg.loop = d.loop;
	rcfg.mark = mark;
	rcfg.seed = (uint64_t)getpid() ^ (uint64_t)time(NULL);
	if ((rc = router_new(&rcfg, &d.router)) < 0)
		goto cleanup;
	if (kubernetes) {
		char err[256] = "";

		rc = discovery_k8s_source(&kcfg, &d.src, err, sizeof(err));
		if (rc < 0) {
			fprintf(stderr, "kvsplice: --kubernetes: %s\n",
				err[0] ? err : strerror(-rc));
			exit_code = 2;
			goto cleanup;
		}
	} else if ((rc = discovery_file_source(services, services_max, &d.src)) < 0) {
		goto cleanup;
	}
	if ((rc = discovery_limit_gauges(&d, kubernetes ? &kcfg : NULL, services_max)) < 0)
		goto cleanup;
	{
		struct services *s = NULL;

		rc = d.src->poll(d.src, 1, &s);
		if (rc < 0) {
			fprintf(stderr, "kvsplice: cannot load --services %s: %s\n", services,
				rc == -EFBIG ? "larger than --services-max-bytes" : strerror(-rc));
			exit_code = 2;
			goto cleanup;
		}
		/* Kubernetes: nothing listed yet. Until the first snapshot the proxy and the router
		 * have no Service, the pinned BPF selection stays as a previous process left it,
		 * the listener is not registered (connects go the kube-proxy way) and /readyz says
		 * no. */
		d.synced = rc == 1;
		if (rc == 0 && (rc = services_new(0, &s)) < 0)
			goto cleanup;
		/* everything is loaded: take the listeners of a kvsplice running for this address
		 */
		if (!d.no_handover) {
			nhfds = handover_take(&po.listen[0], hfds, HANDOVER_MAX_FDS, &d.hconn,
					      &d.old_pid);
			if (nhfds < 0)
				log_error("main",
					  "a kvsplice (pid %d) runs for this address but did not "
					  "hand its listeners over: %s",
					  (int)d.old_pid, strerror(-nhfds));
			else if (nhfds > 0)
				log_info("main", "taking over %d listening socket(s) from pid %d",
					 nhfds, (int)d.old_pid);
			handover_assign(hfds, nhfds > 0 ? nhfds : 0, &po, &admin_sa, &admin_fd);
		}
		rc = proxy_new(&po, d.loop, d.metrics, d.router, &d.proxy);
		for (int i = 0; i < po.nlisten; i++)
			po.listen_fd[i] = -1; /* the proxy's now, even on failure */
		if (rc < 0) {
			services_put(s);
			goto cleanup;
		}
		/* sockets taken over are in the sockmap already: connects BPF sends there wait
		 * in the backlog (the old process still accepts them) until we serve */
		if (nhfds > 0 && !d.synced)
			proxy_accept(d.proxy, false);
		if (!no_bpf) {
			struct bpfctl_opts bo = {
			    .cgroup_path = cgroup,
			    .pin_dir = pin_dir,
			    .proxy = po.listen[0],
			    .own_mark = mark,
			};

			d.bpf_pins = pin_dir; /* a failure below may have pinned some */
			rc = bpfctl_open(&bo, &d.bpf);
			if (rc < 0) {
				log_error("main",
					  "BPF: %s (use --no-bpf to run without interception)",
					  strerror(-rc));
				services_put(s);
				goto cleanup;
			}
			proxy_set_bpf(d.proxy, d.bpf);
		}
		services_apply(&d, s);
	}
	rc = admin_new(d.loop, &admin_sa, admin_fd, &ao, d.metrics, &d.admin);
	admin_fd = -1; /* the admin's now, even on failure */
	if (rc < 0)
		goto cleanup;
	admin_before_read(d.admin, admin_before, &d);
	if ((rc = metrics_add_collector(d.metrics, bpf_collector, &d)) < 0 ||
	    (rc = metrics_add_collector(d.metrics, admin_collector, &d)) < 0 ||
	    (rc = admin_handle(d.admin, "/debug/route", debug_route, &d)) < 0 ||
	    (rc = admin_handle(d.admin, "/debug/workers", debug_workers, &d)) < 0)
		goto cleanup;
	if (d.events && (rc = admin_handle(d.admin, "/debug/index", debug_index, &d)) < 0)
		goto cleanup;
	d.sig.fd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
	d.sig.cb = signal_cb;
	if (d.sig.fd < 0 || (rc = loop_set(d.loop, &d.sig, EPOLLIN)) < 0) {
		log_error("main", "signalfd: %s", strerror(errno));
		goto cleanup;
	}
	/* Interception starts now (or with the source's first snapshot): the listener goes into
	 * BPF's sockmap. */
	if (d.synced) {
		d.serve_at = clock_ms();
		serving_poll(&d);
		if (d.stop)
			goto cleanup;
	}
	{
		struct sockaddr_in la, aa;
		char ls[INET_ADDRSTRLEN], as[INET_ADDRSTRLEN];

		proxy_listen_addr(d.proxy, 0, &la);
		admin_addr(d.admin, &aa);
		inet_ntop(AF_INET, &la.sin_addr, ls, sizeof(ls));
		inet_ntop(AF_INET, &aa.sin_addr, as, sizeof(as));
		log_info("main",
			 "kvsplice ready: proxy %s:%u, admin %s:%u, bpf %s, router %s, relay %s%s",
			 ls, ntohs(la.sin_port), as, ntohs(aa.sin_port), d.bpf ? "on" : "off",
			 router_policy(d.router), proxy_relay_name(po.relay),
			 nhfds > 0 ? ", listeners taken over" : "");
		if (port_file) {
			char tmp[4096];
			FILE *f;

			snprintf(tmp, sizeof(tmp), "%s.tmp", port_file);
			f = fopen(tmp, "w");
			if (!f ||
			    fprintf(f, "%u %u\n", ntohs(la.sin_port), ntohs(aa.sin_port)) < 0 ||
			    fclose(f) != 0 || rename(tmp, port_file) < 0) {
				log_error("main", "--port-file %s: %s", port_file, strerror(errno));
				goto cleanup;
			}
		}
	}
	if (d.src->notify_fd) {
		d.src_ev.fd = d.src->notify_fd(d.src);
		d.src_ev.cb = src_cb;
		if ((rc = loop_set(d.loop, &d.src_ev, EPOLLIN)) < 0)
			goto cleanup;
	}
	admin_set_ready(d.admin, d.serving);

	while (!proxy_done(d.proxy)) {
		uint64_t now;

		rc = loop_run(d.loop, d.events_more || router_busy(d.router) ? 0 : 100);
		if (rc < 0) {
			log_error("main", "epoll: %s", strerror(-rc));
			goto cleanup;
		}
		/* the rest of sent prompts (router_sent), a slice a turn and more while no event
		 * waits: bytes to relay and requests to decide come first */
		while (router_work(d.router) && !loop_ready(d.loop))
			;
		proxy_tick(d.proxy);
		router_tick(d.router);
		admin_tick(d.admin);
		handover_tick(d.handover);
		serving_poll(&d);
		if (d.events_more) /* events left input unread: the fd may not signal it again */
			d.events_more = events_poll(d.events, 0);
		now = clock_ms();
		if (d.hup || now - last_poll >= 1000) {
			services_poll(&d, d.hup);
			d.hup = false;
			last_poll = now;
		}
		if (d.stop && !stop_ms)
			stop_ms = now;
		/* a successor taking the listeners over finishes first (for HANDOVER_TIMEOUT_MS at
		 * most): its READY makes this a drain, not a stop */
		if (d.stop && !proxy_draining(d.proxy) &&
		    (!handover_pending(d.handover) || now >= stop_ms + HANDOVER_TIMEOUT_MS)) {
			log_info("main", "stopping: new connects fall open, draining");
			admin_set_ready(d.admin, false);
			proxy_stop(d.proxy);
			/* nothing to hand over any more: a new process binds once the listeners
			 * close (proxy_new retries the bind) */
			handover_free(d.handover);
			d.handover = NULL;
		}
	}
	log_info("main", "drained, exiting");
	exit_code = 0;
cleanup:
	/* In order (drained, handed over): the keeper leaves. Otherwise it stays, and takes over
	 * what our listener still holds once this process is gone, as after a crash. */
	if (exit_code == 0)
		keeper_release(d.keeper);
	if (d.hconn >= 0)
		close(d.hconn); /* never READY: the old process keeps its listeners */
	if (admin_fd >= 0)
		close(admin_fd);
	for (int i = 0; i < po.nlisten; i++)
		if (po.listen_fd[i] >= 0)
			close(po.listen_fd[i]);
	handover_free(d.handover);
	if (d.sig.fd >= 0) {
		loop_del(d.loop, &d.sig);
		close(d.sig.fd);
	}
	if (d.src_ev.fd >= 0)
		loop_del(d.loop, &d.src_ev);
	admin_free(d.admin);
	proxy_free(d.proxy);
	if (d.events) {
		loop_del(d.loop, &d.events_ev);
		events_free(d.events);
	}
	index_free(d.index);
	node_exit(&d);
	services_put(d.svcs);
	if (d.src)
		d.src->free(d.src);
	router_free(d.router);
	models_free(d.models);
	metrics_free(d.metrics);
	loop_free(d.loop);
	return exit_code;
}
