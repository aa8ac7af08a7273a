// SPDX-License-Identifier: Apache-2.0
// kvevents: vLLM KV events from the command line, on the kvsplice decoder and index.
//   kvevents decode [--block-size N] [--seed N] FILE...
//       each FILE is one raw batch payload (msgpack), applied in order as one worker's stream;
//       prints one JSON line per decoded event, {"file":..,"error":..} for a payload that does
//       not decode, and a last line {"index":[[engine,own,tiers],...],"stats":{..}}.
//   kvevents watch [--block-size N] [--seed N] [--topic T] [--replay-timeout-ms N]
//                  [--no-initial-replay] [--max-pending-bytes N] [--max-pending-total-bytes N]
//                  NAME=PUB_ENDPOINT[,REPLAY_ENDPOINT] ...
//       subscribes to each worker (the --max-pending-* options set events_cfg's live queue
//       bounds, bytes) and reads commands on stdin, one per line:
//       dump | metrics | debug | add NAME=PUB[,REPLAY] | remove NAME | resync NAME | quit |
//       query [LORA:]T1,T2,...   (token ids: chain-hash them, query the index; prints
//                                 {"depth":[..],"gpu_depth":[..]} by worker id)
//       (dump: one JSON line {"workers":[{"name","id","blocks":[[engine,own,tiers]..]}..]};
//        metrics: Prometheus text then "# END"; debug: the /debug/index JSON;
//        add / remove / resync: {"add"|"remove"|"resync": 0 or -errno}).
// Used by the golden-vector and live ZMQ tests, and handy to watch a real worker.
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kv/blockhash.h"
#include "core/buf.h"
#include "kv/events.h"
#include "kv/index.h"
#include "core/log.h"

static void usage(void)
{
	fprintf(stderr,
		"usage: kvevents decode [--block-size N] [--seed N] FILE...\n"
		"       kvevents watch [--block-size N] [--seed N] [--topic T] "
		"[--replay-timeout-ms N] [--no-initial-replay]\n"
		"                      [--max-pending-bytes N] [--max-pending-total-bytes N] "
		"NAME=PUB[,REPLAY]...\n");
}

struct decode_ctx {
	struct index *idx;
	struct buf out;
	const char *file;
};

static int print_event(void *arg, const struct events_event *e)
{
	struct decode_ctx *c = arg;
	static const char *const types[] = {"BlockStored", "BlockRemoved", "AllBlocksCleared"};
	struct buf *o = &c->out;

	buf_reset(o);
	buf_puts(o, "{\"file\":");
	buf_json_str(o, c->file, strlen(c->file));
	buf_printf(o, ",\"type\":\"%s\",\"hashes\":[", types[e->type]);
	for (size_t i = 0; i < e->n_hashes; i++)
		buf_printf(o, "%s%" PRIu64, i ? "," : "", e->hashes[i]);
	buf_puts(o, "]");
	if (e->type == EVENTS_BLOCK_STORED) {
		if (e->has_parent)
			buf_printf(o, ",\"parent\":%" PRIu64, e->parent);
		else
			buf_puts(o, ",\"parent\":null");
		buf_printf(o, ",\"block_size\":%u,\"token_ids\":[", e->block_size);
		for (size_t i = 0; i < e->n_tokens; i++)
			buf_printf(o, "%s%u", i ? "," : "", e->tokens[i]);
		buf_puts(o, "],\"lora_name\":");
		if (e->lora_name)
			buf_json_str(o, e->lora_name, e->lora_len);
		else
			buf_puts(o, "null");
		if (e->has_lora_id)
			buf_printf(o, ",\"lora_id\":%" PRId64, e->lora_id);
		else
			buf_puts(o, ",\"lora_id\":null");
		size_t k = 0;
		for (size_t i = 0; e->extra && i < e->n_hashes; i++)
			k += e->extra_len[i] != 0;
		buf_printf(o, ",\"extra_blocks\":%zu", k);
	}
	if (e->type != EVENTS_ALL_CLEARED)
		buf_printf(o, ",\"medium\":\"%s\"", e->tier == INDEX_TIER_GPU ? "gpu" : "cpu");
	if (e->has_group)
		buf_printf(o, ",\"group_idx\":%" PRId64, e->group_idx);
	buf_printf(o, ",\"other_kind\":%s}\n", e->other_kind ? "true" : "false");
	fwrite(o->data, 1, o->len, stdout);
	events_apply_event(c->idx, 0, e);
	return 0;
}

static void print_block(void *arg, uint64_t engine, uint64_t own, unsigned tiers)
{
	int *first = arg;

	printf("%s[%" PRIu64 ",%" PRIu64 ",%u]", *first ? "" : ",", engine, own, tiers);
	*first = 0;
}

static char *slurp(const char *path, size_t *n)
{
	FILE *f = fopen(path, "rb");
	struct buf b = {0};
	char tmp[65536];
	size_t r;

	if (!f)
		return NULL;
	while ((r = fread(tmp, 1, sizeof(tmp), f)) > 0)
		if (buf_append(&b, tmp, r)) {
			fclose(f);
			buf_free(&b);
			return NULL;
		}
	fclose(f);
	*n = b.len;
	if (!b.data)
		return strdup("");
	return b.data;
}

static int cmd_decode(struct index *idx, int argc, char **argv)
{
	struct events_decoder *d;
	struct decode_ctx c = {.idx = idx};
	struct events_decode_counts cnt = {0};
	struct buf o = {0};
	int first = 1;

	events_decoder_new(&d);
	for (int i = 0; i < argc; i++) {
		size_t n = 0;
		char *p = slurp(argv[i], &n);
		if (!p) {
			fprintf(stderr, "kvevents: %s: %s\n", argv[i], strerror(errno));
			return 1;
		}
		c.file = argv[i];
		index_write_lock(idx);
		if (events_decode(d, p, n, print_event, &c, &cnt, NULL) < 0) {
			buf_reset(&o);
			buf_puts(&o, "{\"file\":");
			buf_json_str(&o, argv[i], strlen(argv[i]));
			buf_puts(&o, ",\"error\":\"bad batch\"}\n");
			fwrite(o.data, 1, o.len, stdout);
		}
		index_write_unlock(idx);
		free(p);
	}
	printf("{\"index\":[");
	index_worker_foreach(idx, 0, print_block, &first);
	buf_reset(&o);
	index_debug_json(idx, NULL, 0, &o);
	printf(
	    "],\"counts\":{\"batches\":%" PRIu64 ",\"bad_batches\":%" PRIu64 ",\"events\":%" PRIu64
	    ",\"bad_events\":%" PRIu64 ",\"unknown_events\":%" PRIu64 "},\"stats\":%s}\n",
	    cnt.batches, cnt.bad_batches, cnt.events, cnt.bad_events, cnt.unknown_events, o.data);
	buf_free(&o);
	buf_free(&c.out);
	events_decoder_free(d);
	return 0;
}

/* NAME=PUB[,REPLAY] → worker added at the lowest free id. */
static int add_spec(struct events *ev, uint32_t maxw, const char *spec, const char *topic)
{
	char *s = strdup(spec), *eq, *comma;
	int rc = -EINVAL;

	if (!s)
		return -ENOMEM;
	eq = strchr(s, '=');
	if (!eq)
		goto cleanup;
	*eq = 0;
	comma = strchr(eq + 1, ',');
	if (comma)
		*comma = 0;
	for (uint32_t id = 0; id < maxw; id++) {
		rc = events_worker_add(ev, id, s, eq + 1, comma ? comma + 1 : NULL, topic);
		if (rc != -EEXIST)
			break;
	}
cleanup:
	if (rc)
		fprintf(stderr, "kvevents: cannot add worker '%s': %s\n", spec, strerror(-rc));
	free(s);
	return rc;
}

static void dump(struct events *ev, struct index *idx, uint32_t maxw)
{
	int firstw = 1;

	printf("{\"workers\":[");
	for (uint32_t id = 0; id < maxw; id++) {
		struct events_worker_stats st;
		int first = 1;
		if (events_worker_stats(ev, id, &st))
			continue;
		printf("%s{\"id\":%u,\"next_seq\":%" PRIu64 ",\"blocks\":[", firstw ? "" : ",", id,
		       st.next_seq);
		index_worker_foreach(idx, id, print_block, &first);
		printf("]}");
		firstw = 0;
	}
	printf("]}\n");
}

/* "query [LORA:]1,2,3": what the router will do with a request's token ids. */
static void query(struct index *idx, char *arg)
{
	uint32_t maxw = index_max_workers(idx), bs = index_block_size(idx);
	uint32_t *depth = calloc(maxw, sizeof(*depth)), *gd = calloc(maxw, sizeof(*gd));
	uint32_t *toks = malloc(strlen(arg) * sizeof(*toks) / 2 + 16);
	uint64_t *chain = malloc((strlen(arg) / 2 / bs + 2) * sizeof(*chain));
	char *colon = strchr(arg, ':'), *p = colon ? colon + 1 : arg;
	uint64_t root = colon ? blockhash_root(index_seed(idx), arg, (size_t)(colon - arg)) : 0;
	size_t n = 0, nb;

	if (!depth || !gd || !toks || !chain) {
		printf("{\"error\":\"out of memory\"}\n");
		goto cleanup;
	}
	while (*p) {
		char *e;
		toks[n++] = (uint32_t)strtoul(p, &e, 10);
		p = *e ? e + 1 : e;
	}
	nb = blockhash_chain(index_seed(idx), bs, root, toks, n, chain, n / bs + 1);
	index_query(idx, chain, nb, depth, gd, maxw);
	printf("{\"blocks\":%zu,\"depth\":[", nb);
	for (uint32_t w = 0; w < maxw; w++)
		printf("%s%u", w ? "," : "", depth[w]);
	printf("],\"gpu_depth\":[");
	for (uint32_t w = 0; w < maxw; w++)
		printf("%s%u", w ? "," : "", gd[w]);
	printf("]}\n");
cleanup:
	free(depth);
	free(gd);
	free(toks);
	free(chain);
}

static int cmd_watch(struct index *idx, const struct events_cfg *ecfg, const char *topic, int argc,
		     char **argv)
{
	struct events *ev;
	events_new(ecfg, &ev);
	uint32_t maxw = index_max_workers(idx);
	static char line[1 << 20];
	struct buf o = {0};
	int rc = 0;

	if (!ev) {
		fprintf(stderr, "kvevents: %s\n", strerror(errno));
		return 1;
	}
	for (int i = 0; i < argc; i++)
		if (add_spec(ev, maxw, argv[i], topic))
			rc = 1;
	setvbuf(stdin, NULL, _IONBF, 0);
	while (!rc) {
		struct pollfd p[2] = {{.fd = events_fd(ev), .events = POLLIN},
				      {.fd = 0, .events = POLLIN}};
		int n = poll(p, 2, events_timeout_ms(ev));
		if (n < 0 && errno != EINTR)
			break;
		while (events_poll(ev, 0) == 1)
			;
		if (!(p[1].revents & (POLLIN | POLLHUP)))
			continue;
		/* stdin is line-oriented; read one line byte by byte (unbuffered, so poll stays
		 * truthful) */
		size_t k = 0;
		char ch;
		ssize_t r;
		while ((r = read(0, &ch, 1)) == 1 && ch != '\n' && k + 1 < sizeof(line))
			line[k++] = ch;
		line[k] = 0;
		if (r <= 0 && !k)
			break;
		while (events_poll(ev, 0) == 1) /* anything that arrived meanwhile first */
			;
		if (!strcmp(line, "quit")) {
			break;
		} else if (!strcmp(line, "dump")) {
			dump(ev, idx, maxw);
		} else if (!strcmp(line, "metrics") || !strcmp(line, "debug")) {
			buf_reset(&o);
			if (line[0] == 'm')
				events_metrics(ev, &o);
			else
				events_debug_json(ev, &o);
			fwrite(o.data, 1, o.len, stdout);
			printf("%s", line[0] == 'm' ? "# END\n" : "\n");
		} else if (!strncmp(line, "query ", 6)) {
			query(idx, line + 6);
		} else if (!strncmp(line, "add ", 4)) {
			printf("{\"add\":%d}\n", add_spec(ev, maxw, line + 4, topic));
		} else if (!strncmp(line, "remove ", 7)) {
			int id = events_worker_find(ev, line + 7);
			printf("{\"remove\":%d}\n",
			       id < 0 ? id : events_worker_remove(ev, (uint32_t)id));
		} else if (!strncmp(line, "resync ", 7)) {
			int id = events_worker_find(ev, line + 7);
			printf("{\"resync\":%d}\n",
			       id < 0 ? id : events_worker_resync(ev, (uint32_t)id));
		} else if (k) {
			printf("{\"error\":\"unknown command\"}\n");
		}
		fflush(stdout);
	}
	buf_free(&o);
	events_free(ev);
	return rc;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"block-size", required_argument, NULL, 'b'},
	    {"seed", required_argument, NULL, 's'},
	    {"topic", required_argument, NULL, 't'},
	    {"replay-timeout-ms", required_argument, NULL, 'r'},
	    {"no-initial-replay", no_argument, NULL, 'n'},
	    {"max-pending-bytes", required_argument, NULL, 'p'},
	    {"max-pending-total-bytes", required_argument, NULL, 'P'},
	    {"log-level", required_argument, NULL, 'l'},
	    {"help", no_argument, NULL, 'h'},
	    {0},
	};
	struct index_cfg icfg;
	index_cfg_default(&icfg);
	icfg.max_workers = 256;
	struct events_cfg ecfg;
	events_cfg_default(&ecfg);
	const char *topic = "";
	struct index *idx;
	int c, rc;

	if (argc < 2) {
		usage();
		return 2;
	}
	optind = 2;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'b':
			icfg.block_size = (uint32_t)strtoul(optarg, NULL, 10);
			break;
		case 's':
			icfg.seed = strtoull(optarg, NULL, 0);
			break;
		case 't':
			topic = optarg;
			break;
		case 'r':
			ecfg.replay_timeout_ms = atoi(optarg);
			break;
		case 'n':
			ecfg.no_initial_replay = true;
			break;
		case 'p':
			ecfg.max_pending_bytes = strtoull(optarg, NULL, 0);
			break;
		case 'P':
			ecfg.max_pending_total_bytes = strtoull(optarg, NULL, 0);
			break;
		case 'l':
			if (log_parse_level(optarg) < 0) {
				usage();
				return 2;
			}
			log_set_level((enum log_level)log_parse_level(optarg));
			break;
		default:
			usage();
			return c == 'h' ? 0 : 2;
		}
	}
	index_new(&icfg, &idx);
	if (!idx) {
		fprintf(stderr, "kvevents: bad index configuration\n");
		return 2;
	}
	ecfg.index = idx;
	if (!strcmp(argv[1], "decode"))
		rc = cmd_decode(idx, argc - optind, argv + optind);
	else if (!strcmp(argv[1], "watch"))
		rc = cmd_watch(idx, &ecfg, topic, argc - optind, argv + optind);
	else {
		usage();
		rc = 2;
	}
	index_free(idx);
	return rc;
}
