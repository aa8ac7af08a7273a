/* SPDX-License-Identifier: Apache-2.0 */
/* config: everything the daemon's flags set, in one struct, with its defaults function and its
 * option table (core/options.h). main() fills a daemon_cfg with daemon_cfg_default, parses the
 * flags into it with daemon_options, checks it with daemon_cfg_check and hands it to daemon_run
 * (daemon.h); `kvsplice --help`, `--print-config` and docs/reference/flags.md (`kvref flags`)
 * come from the same table. */
#ifndef KVS_DAEMON_CONFIG_H
#define KVS_DAEMON_CONFIG_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/options.h"
#include "daemon/admin.h"
#include "discovery/discovery.h"
#include "kv/events.h"
#include "kv/index.h"
#include "proxy/proxy.h"
#include "route/policy.h"
#include "route/workers.h"

#define DAEMON_DEFAULT_LISTEN "169.254.20.11:15001"
#define DAEMON_DEFAULT_ADMIN "127.0.0.1:15000"
#define DAEMON_DEFAULT_MARK 0x6b76 /* "kv" */
/* --model-tokenizer entries at most */
#define DAEMON_MAX_MODEL_TOKENIZERS 32
/* Where the default tokenizer is looked for when --tokenizer is not given: beside the binary (a
 * source tree's build/), then where the container image installs it. */
#define DAEMON_TOKENIZER_REL "/../models/qwen3/tokenizer.json"
#define DAEMON_TOKENIZER_SYS "/usr/share/kvsplice/models/qwen3/tokenizer.json"
/* Largest --index-max-workers: the index's bound, and no more than a Service's endpoints. */
#define DAEMON_MAX_WORKERS_LIMIT (WORKERS_MAX < INDEX_MAX_WORKERS ? WORKERS_MAX : INDEX_MAX_WORKERS)

struct daemon_cfg {
	/* Services */
	const char *services; /* the --services file, or NULL with kubernetes */
	size_t services_max;
	bool kubernetes;
	struct discovery_k8s_cfg k8s;
	/* interception and the node */
	struct proxy_opts proxy; /* its listen[] (--listen) and the proxy's limits */
	bool listen_set;	 /* a --listen replaced the default address */
	bool no_bpf;
	const char *cgroup; /* NULL: the cgroup2 mount root */
	const char *pin_dir;
	const char *node_addr; /* NULL: none put on the node */
	const char *node_dev;
	bool keep_on_exit;
	uint32_t mark;
	bool intercept_endpoints; /* --intercept-endpoints */
	/* routing */
	const char *router;
	const char *tokenizer; /* NULL: DAEMON_TOKENIZER_REL beside the binary, else _SYS */
	const char *model_tok[DAEMON_MAX_MODEL_TOKENIZERS]; /* "NAME=PATH" */
	const char *tokenizer_root; /* the Services' kvsplice.io/model-tokenizers DIRs are under
				       it; NULL: refused */
	size_t nmodel_tok;
	const char *chat_tmpl[DAEMON_MAX_MODEL_TOKENIZERS + 1]; /* "[NAME=]FILE" */
	size_t nchat_tmpl;
	const char *chat_kwargs; /* --default-chat-template-kwargs JSON, or NULL */
	bool trust_request_tmpl; /* --trust-request-chat-template */
	bool no_tokenizer;
	size_t tokcache; /* 0: off */
	bool whole_prompt;
	int scrape_ms; /* 0: off */
	int models_ms; /* /v1/models reads; 0: off */
	size_t scrape_max_body, scrape_max_head;
	int scrape_timeout_ms;
	int approx_ttl_ms;
	uint32_t approx_max;
	struct policy_kv_opts kv;
	/* KV events */
	bool events;
	const char *events_topic;
	struct index_cfg index;
	uint64_t index_max_entries;
	struct events_cfg ev;
	uint32_t kv_queue_batches;
	/* restarts and crashes */
	bool no_handover, no_keeper;
	int sync_wait_ms;
	int keeper_hold_ms;
	int keeper_queue_ms; /* -1: KEEPER_QUEUE_MS as a container's PID 1 (supervised), else 0 */
	/* admin and logs */
	struct sockaddr_in admin;
	struct sockaddr_in metrics; /* sin_family 0: off */
	struct admin_opts admin_opts;
	const char *port_file;
	int log_level; /* enum log_level */
};

/* Fills c with the defaults: what the daemon runs with when no flag is given. */
void daemon_cfg_default(struct daemon_cfg *c);
/* Checks what the table cannot check alone (one Services source, ...). Returns 0, or -1 with a
 * message on stderr (exit 2). */
int daemon_cfg_check(const struct daemon_cfg *c);

/* The option table of `kvsplice` and of `kvsplice detach` (its one option: --pin-dir). */
extern const struct opt_table daemon_options;
extern const struct opt_table daemon_detach_options;

#endif
