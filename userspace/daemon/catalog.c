// SPDX-License-Identifier: Apache-2.0
#include "daemon/catalog.h"
#include "daemon/admin.h"
#include "daemon/daemon.h"
#include "daemon/tokenizers.h"
#include "kv/events.h"
#include "kv/index.h"
#include "node/bpfctl.h"
#include "proxy/proxy.h"
#include "route/router.h"
#include "route/scrape.h"

static const struct {
	const char *key, *text;
} whens[CATALOG_WHEN_COUNT] = {
    [CATALOG_ALWAYS] = {"always", "every run, also the degraded one (node not ready: only the "
				  "admin server answers, /readyz says why)"},
    [CATALOG_SERVING] = {"serving", "once the node is ready (not in the degraded run)"},
    [CATALOG_EVENTS] = {"events", "serving with KV events (`--events`, the default; not "
				  "`--no-events`)"},
    [CATALOG_BPF] = {"bpf", "serving with BPF interception (not `--no-bpf`)"},
    [CATALOG_FILE] = {"file", "serving with Services from a file (`--services FILE`)"},
    [CATALOG_K8S] = {"kubernetes", "serving with Services from the API server (`--kubernetes`)"},
    [CATALOG_SCRAPE] = {"scrape", "serving and reading the workers' /metrics (the default; not "
				  "`--scrape-interval 0`)"},
};

const char *catalog_when_key(enum catalog_when w)
{
	return (unsigned)w < CATALOG_WHEN_COUNT ? whens[w].key : "?";
}

const char *catalog_when_text(enum catalog_when w)
{
	return (unsigned)w < CATALOG_WHEN_COUNT ? whens[w].text : "?";
}

/* In layer order, then by module. */
const struct catalog_metrics catalog_metrics[] = {
    /* events_metrics writes its own, then the index's */
    {"kv/events.c", events_families, &events_nfamilies, CATALOG_EVENTS},
    {"kv/index.c", index_families, &index_nfamilies, CATALOG_EVENTS},
    {"route/router_debug.c", router_families, &router_nfamilies, CATALOG_SERVING},
    /* written by scraper_metrics, which the router's collector calls */
    {"route/scrape.c", scrape_families, &scrape_nfamilies, CATALOG_SCRAPE},
    {"node/bpfctl.c", bpfctl_families, &bpfctl_nfamilies, CATALOG_BPF},
    {"proxy/proxy.c", proxy_families, &proxy_nfamilies, CATALOG_SERVING},
    {"daemon/admin.c", admin_families, &admin_nfamilies, CATALOG_ALWAYS},
    {"daemon/tokenizers.c", tokenizers_families, &tokenizers_nfamilies, CATALOG_SERVING},
    {"daemon/daemon.c", daemon_always_families, &daemon_always_nfamilies, CATALOG_ALWAYS},
    {"daemon/daemon.c", daemon_serving_families, &daemon_serving_nfamilies, CATALOG_SERVING},
    {"daemon/daemon.c", daemon_file_families, &daemon_file_nfamilies, CATALOG_FILE},
    {"daemon/daemon.c", daemon_k8s_families, &daemon_k8s_nfamilies, CATALOG_K8S},
};
const size_t catalog_nmetrics = sizeof(catalog_metrics) / sizeof(catalog_metrics[0]);

/* Every module's families are in the list above. */
const bool catalog_metrics_complete = true;
const char *const catalog_metrics_pending[] = {NULL};
