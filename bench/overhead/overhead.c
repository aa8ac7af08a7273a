// SPDX-License-Identifier: Apache-2.0
/* bench/overhead: latency a request gains by going through kvsplice, side by side in one run:
 * the same requests to the upstream directly and through kvsplice (--no-bpf, on loopback, its
 * default router and tokenizer), alternating request by request so noise hits both alike.
 * Requests, each over one keep-alive connection and with a new connection per request (as
 * kvbench does):
 *   - GET with a small answer;
 *   - POST of a 10 KB JSON body to a path that is not OpenAI's (kvsplice reads it whole before
 *     choosing, but does not tokenize it);
 *   - chat 10 KB: POST /v1/chat/completions of a ~10 KB conversation (system prompt, three
 *     user/assistant turns, a last user message; the text of bench/tokenizer/prompt.mjs), the
 *     last message numbered per request so no cache could flatter it. kvsplice parses it,
 *     renders the chat template, tokenizes, hashes the blocks, looks them up and scores the
 *     workers: the full routing decision (docs/benchmarks.md#overhead). After each chat case the
 * bench reads kvsplice's /debug/route and /metrics (routecheck.h) and fails when the requests were
 * not decided on tokens; it prints the decision's own cost beside the added latency.
 *   - chat 10 KB, new text: the same conversation with the words of every message shuffled
 *     anew for each request (at spaces, inside the JSON strings: the length and the language stay,
 *     no message is ever seen twice). kvsplice's encoding cache then finds no message it read
 *     before, only BPE pieces (words) it met in earlier ones, as Hugging Face's tokenizer's own
 *     word cache does: the case of a new conversation in a known language.
 * The upstream answers every request but /big and /chunked with ~200 bytes of JSON with usage,
 * as a worker would (bench/lib/benchnet.h). Prints p50/p99 per path and the difference; writes
 * JSON.
 * With --target HOST:PORT --label NAME (up to 3 times) it measures those addresses instead, the
 * first being the reference (bench/overhead/netns.sh: the DNAT path, the intercepted path, the
 * pod directly, inside the netns node).
 * --serve PORT runs only the upstream, on 0.0.0.0:PORT (the worker pod of netns.sh).
 * --route-check HOST:PORT only checks the chat decisions of the kvsplice whose admin server is
 * there (netns.sh, after a --target run; the /metrics part then covers the whole run).
 * --case TEXT runs only the cases whose name holds TEXT (e.g. "chat 10 KB, keep", to profile one).
 * --kvsplice-arg FLAG (repeatable) passes FLAG to kvsplice, e.g. --tokenizer-cache=0 for the
 * cold-text case (no encoding cache: every message tokenized anew).
 * Beside the round trip it reports the part of the added time spent before the upstream had the
 * whole request (the upstream stamps it; it runs in this process): kvsplice decides on as many
 * tokens as a worker's cache reaches and tokenizes the rest once the request is sent, while the
 * worker computes. The upstream here answers at once, so that rest still delays the answer; a real
 * worker's prefill (milliseconds for a 10 KB prompt) hides it, and what adds to the time to the
 * first token is then the part before the worker has the request, plus the relay of the answer.
 * Usage: build/bench/overhead [--n N] [--json FILE] [--kvsplice BIN] [--kvsplice-arg FLAG]...
 *                             [--case TEXT]
 *                             [--target HOST:PORT --label NAME]... | --serve PORT
 *                             | --route-check HOST:PORT */
#include <getopt.h>

#include "../lib/benchnet.h"
#include "routecheck.h"

#define NCASES 7
/* The chat requests' path, and the model they name (the default tokenizer is Qwen3's). */
#define CHAT_TARGET "/v1/chat/completions"
#define CHAT_MODEL "Qwen/Qwen3-0.6B"
/* Bytes of message text in a chat request (the 10 KB prompt of bench/tokenizer). */
#ifndef CHAT_TEXT_BYTES
#define CHAT_TEXT_BYTES 10240
#endif
/* Warm-up requests per case and path, not counted. */
#define WARMUP 100

enum kind { K_GET, K_POST, K_CHAT, K_CHAT_NEW, K_MAX };

struct kase {
	const char *name;
	enum kind kind;
	bool newconn;
};

static const struct kase cases[NCASES] = {
    {"GET small, keep-alive", K_GET, false},
    {"POST 10 KB, keep-alive", K_POST, false},
    {"chat 10 KB, keep-alive", K_CHAT, false},
    {"GET small, new connection", K_GET, true},
    {"POST 10 KB, new connection", K_POST, true},
    {"chat 10 KB, new connection", K_CHAT, true},
    {"chat 10 KB, new text, keep-alive", K_CHAT_NEW, false},
};

static int connect_to(const struct sockaddr_in *a)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

	if (fd < 0)
		return -1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(fd, (const struct sockaddr *)a, sizeof(*a)) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* One request; returns its latency in µs or -1, and in *to_worker the µs until the upstream had
 * all of it (the in-process upstream only). *fd is the keep-alive connection. */
static double one(const struct kase *k, const struct sockaddr_in *a, int *fd, const struct buf *req,
		  struct buf *rb, double *to_worker)
{
	double t0 = bn_now(), t;

	if (k->newconn || *fd < 0) {
		if (*fd >= 0)
			close(*fd);
		*fd = connect_to(a);
		if (*fd < 0)
			return -1;
	}
	if (bn_exchange(*fd, req->data, req->len, rb, NULL) < 0)
		return -1;
	t = (bn_now() - t0) * 1e6;
	*to_worker = (bn_arrival - t0) * 1e6;
	if (k->newconn) {
		close(*fd);
		*fd = -1;
	}
	return t;
}

/* The parts of bench/tokenizer/prompt.mjs's 10 KB prompt, in its order: English prose, code,
 * JSON, Chinese, Korean, emoji, tabs and \r\n. */
static const char *const chat_parts[] = {
    "You are a helpful assistant. Answer the question below as precisely as you can, and cite "
    "the relevant lines. If you don't know, say so; we'll check the answer against the "
    "logs.\n\n",
    "def route(request, workers):\n    \"\"\"Pick the worker with the longest cached "
    "prefix.\"\"\"\n    best = max(workers, key=lambda w: w.overlap(request.blocks))\n    "
    "return best if best.load < 0.9 else None\n\n",
    "{\"model\": \"Qwen/Qwen3-8B\", \"temperature\": 0.7, \"max_tokens\": 512, \"stream\": "
    "true, \"stop\": [\"<|im_end|>\"]}\n",
    "int hash_block(const uint32_t *ids, size_t n, uint64_t parent)\n{\n\treturn "
    "XXH3_64bits_withSeed(ids, n * 4, parent);\n}\r\n",
    "请用中文总结以下内容：缓存感知的路由器可以显著降低首个令牌的延迟。我们在三台机器上测试了这个"
    "方案。\n",
    "다음 내용을 한국어로 요약해 주세요: 캐시를 고려한 라우팅은 첫 토큰 지연 시간을 줄입니다.\n",
    "Results 🚀: p50 = 12.5 ms, p99 = 87.3 ms (n = 10,000); hit rate 73.2% ✅ vs. 41.0% ❌ for "
    "round-robin 🤖.\n",
    "    - step 1:\tparse the request\n    - step 2:\ttokenize   (exactly like the engine)\n    "
    "- step 3:\tscore workers\n\n",
    "The quick brown fox jumps over the lazy dog. THE QUICK BROWN FOX! It's "
    "2026-11-29T08:00:00Z; they've been here since 09:15, haven't they?\n",
};
#define NPARTS (sizeof(chat_parts) / sizeof(chat_parts[0]))

/* The chat request body: the parts taken as prompt.mjs takes them (part i*7 mod 9) and dealt
 * out to a system prompt, three user/assistant turns and a last user message that starts with
 * "Request NNNNNNNN." (the number each request changes), CHAT_TEXT_BYTES of text in all. Sets
 * *num_off to the offset of the number in body. */
/* Where each message's JSON string content lies in the K_CHAT_NEW request (build_chat_body sets
 * them for every chat body; build_req makes them absolute for K_CHAT_NEW, built last). */
#define CHAT_MSGS 8
static size_t msg_off[CHAT_MSGS], msg_len[CHAT_MSGS];

static void build_chat_body(struct buf *body, size_t *num_off)
{
	static const char *const roles[] = {"system",	 "user", "assistant", "user",
					    "assistant", "user", "assistant", "user"};
	const size_t nmsg = sizeof(roles) / sizeof(roles[0]), share = CHAT_TEXT_BYTES / 8;
	struct buf text = {0};
	size_t total = 0, part = 0;

	buf_printf(body, "{\"model\":\"%s\",\"messages\":[", CHAT_MODEL);
	for (size_t m = 0; m < nmsg; m++) {
		bool last = m == nmsg - 1;

		buf_reset(&text);
		if (last)
			buf_puts(&text, "Request 00000000. ");
		/* whole parts, a share each; the last message takes what is left */
		while (last ? total + text.len < CHAT_TEXT_BYTES : text.len < share) {
			buf_puts(&text, chat_parts[(part * 7) % NPARTS]);
			part++;
		}
		total += text.len;
		buf_printf(body, "%s{\"role\":\"%s\",\"content\":", m ? "," : "", roles[m]);
		if (last)
			*num_off = body->len + 1 + strlen("Request ");
		msg_off[m] = body->len + 1;
		buf_json_str(body, text.data, text.len);
		msg_len[m] = body->len - 1 - msg_off[m];
		buf_puts(body, "}");
	}
	buf_puts(body, "],\"max_tokens\":64}");
	buf_free(&text);
}

/* The request of a kind, whole. For K_CHAT *num_off gets the offset of the per-request number
 * in b (chat_number rewrites it). */
static void build_req(struct buf *b, enum kind kind, const char *host, size_t *num_off)
{
	struct buf body = {0};
	const char *target = "/small";

	buf_reset(b);
	if (kind == K_GET) {
		buf_printf(b, "GET /small HTTP/1.1\r\nHost: %s\r\n\r\n", host);
		return;
	}
	if (kind == K_POST) {
		buf_puts(&body, "{\"model\":\"qwen\",\"max_tokens\":1,\"prompt\":\"");
		while (body.len < 10200)
			buf_puts(&body, "The quick brown fox jumps over the lazy dog. ");
		buf_puts(&body, "\"}");
	} else {
		build_chat_body(&body, num_off);
		target = CHAT_TARGET;
	}

	buf_printf(b,
		   "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
		   "Content-Length: %zu\r\n\r\n",
		   target, host, body.len);
	if (kind == K_CHAT || kind == K_CHAT_NEW)
		*num_off += b->len;
	if (kind == K_CHAT_NEW)
		for (size_t m = 0; m < CHAT_MSGS; m++)
			msg_off[m] += b->len;
	buf_append(b, body.data, body.len);
	buf_free(&body);
}

/* Numbers the chat request anew (8 digits in place: the length does not change), so that no two
 * requests of the run share their last message. */
static void chat_number(struct buf *b, size_t num_off)
{
	static unsigned seq;
	char d[9];

	snprintf(d, sizeof(d), "%08u", ++seq % 100000000u);
	memcpy(b->data + num_off, d, 8);
}

/* Shuffles the words (runs between single spaces) of every message of the K_CHAT_NEW request b
 * in place, anew on each call: the same bytes in another order, so the JSON stays valid (an
 * escape never holds a space) and the length does not change. */
static void chat_shuffle(struct buf *b)
{
	static uint64_t rng = 0x9e3779b97f4a7c15ull;
	static char tmp[CHAT_TEXT_BYTES * 2];
	static size_t ws[sizeof(tmp) + 1], wl[sizeof(tmp) + 1]; /* a word per byte at most, + 1 */

	for (size_t m = 0; m < CHAT_MSGS; m++) {
		char *t = b->data + msg_off[m];
		size_t len = msg_len[m], nw = 0, at = 0;

		if (len > sizeof(tmp))
			continue;
		for (size_t i = 0; i <= len; i++)
			if (i == len || t[i] == ' ') {
				ws[nw] = at;
				wl[nw++] = i - at;
				at = i + 1;
			}
		for (size_t i = nw - 1; i > 0; i--) {
			size_t j, x;

			rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
			j = (size_t)(rng % (i + 1));
			x = ws[i], ws[i] = ws[j], ws[j] = x;
			x = wl[i], wl[i] = wl[j], wl[j] = x;
		}
		at = 0;
		for (size_t i = 0; i < nw; i++) {
			memcpy(tmp + at, t + ws[i], wl[i]);
			at += wl[i];
			if (i + 1 < nw)
				tmp[at++] = ' ';
		}
		memcpy(t, tmp, len);
	}
}

/* Reads the /metrics counters of the kvsplice at admin; exits on failure. */
static void snap_or_die(const struct sockaddr_in *admin, struct rc_snap *s, struct bn_kvs *kvs)
{
	if (routecheck_snap(admin, s) == 0)
		return;
	if (kvs && kvs->pid > 0)
		bn_kvs_stop(kvs);
	exit(1);
}

static int parse_addr(const char *s, struct sockaddr_in *a)
{
	char host[64];
	const char *c = strrchr(s, ':');

	if (!c || (size_t)(c - s) >= sizeof(host))
		return -1;
	snprintf(host, sizeof(host), "%.*s", (int)(c - s), s);
	memset(a, 0, sizeof(*a));
	a->sin_family = AF_INET;
	a->sin_port = htons((uint16_t)atoi(c + 1));
	return inet_pton(AF_INET, host, &a->sin_addr) == 1 ? 0 : -1;
}

/* --route-check: the chat decisions of a kvsplice run elsewhere (its last ROUTER_LOG ones, and
 * its /metrics since it started). Returns the exit code. */
static int route_check(const char *admin_s)
{
	struct sockaddr_in admin;
	struct rc_snap s;
	struct rc_result r;

	if (parse_addr(admin_s, &admin) < 0)
		return 2;
	if (routecheck_snap(&admin, &s) < 0 ||
	    routecheck_read(&admin, CHAT_TARGET, &s, NULL, &r) < 0)
		return 1;
	if (!routecheck_ok(&r, 1, "chat via kvsplice"))
		return 1;
	printf("kvsplice decided the chat requests on tokens: ");
	routecheck_print(stdout, &r);
	printf("(the /metrics part covers every request kvsplice routed since it started, GET and "
	       "POST /small included)\n");
	return 0;
}

#define MAXP 3

int main(int argc, char **argv)
{
	const char *json = "build/bench/overhead.json", *bin = "build/kvsplice";
	const char *targets[MAXP], *labels[MAXP] = {0};
	int n = 4000, opt, npaths = 0, ntargets = 0, nlabels = 0, rc = 1;
	struct bn_kvs kvs = {0};
	struct sockaddr_in addr[MAXP], admin = {0};
	const char *pname[MAXP] = {"direct", "kvsplice", ""};
	static double lat[NCASES][MAXP][100000], arr[NCASES][MAXP][100000];
	double qa[NCASES][2][2]; /* to the worker: [path][p50, p99] (in-process upstream) */
	double cpu_us[NCASES] = {0}, q[NCASES][MAXP][2];
	struct rc_result route[NCASES];
	bool routed[NCASES] = {0}, ran[NCASES] = {0};
	struct buf req[K_MAX] = {{0}}, rb = {0};
	size_t num_off = 0, new_off = 0;
	const char *kargs[16] = {0}, *only = NULL;
	int nkargs = 0;
	FILE *f;
	static const struct option lo[] = {{"n", 1, 0, 'n'},	       {"json", 1, 0, 'j'},
					   {"kvsplice", 1, 0, 'k'},    {"target", 1, 0, 't'},
					   {"label", 1, 0, 'l'},       {"serve", 1, 0, 's'},
					   {"route-check", 1, 0, 'r'}, {"kvsplice-arg", 1, 0, 'a'},
					   {"case", 1, 0, 'c'},	       {0, 0, 0, 0}};

	while ((opt = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (opt) {
		case 'n':
			n = atoi(optarg);
			break;
		case 'j':
			json = optarg;
			break;
		case 'k':
			bin = optarg;
			break;
		case 'c': /* only the cases whose name holds this text (profiling one case) */
			only = optarg;
			break;
		case 'a': /* one more flag for kvsplice, e.g. --tokenizer-cache=0 */
			if (nkargs == 15)
				return 2;
			kargs[nkargs++] = optarg;
			break;
		case 't':
			if (ntargets == MAXP)
				return 2;
			targets[ntargets++] = optarg;
			break;
		case 'l':
			if (nlabels == MAXP)
				return 2;
			labels[nlabels++] = optarg;
			break;
		case 's':
			if (bn_upstream_start_at(true, atoi(optarg)) < 0) {
				perror("overhead --serve");
				return 1;
			}
			for (;;)
				pause();
		case 'r':
			return route_check(optarg);
		default:
			fprintf(
			    stderr,
			    "usage: %s [--n N] [--json FILE] [--kvsplice BIN] [--kvsplice-arg "
			    "FLAG]... [--case TEXT] "
			    "[--target HOST:PORT --label NAME]... | --serve PORT | --route-check "
			    "HOST:PORT\n",
			    argv[0]);
			return 2;
		}
	}
	if (n < 100 || n > 100000 || nlabels > ntargets)
		return 2;
	signal(SIGPIPE, SIG_IGN);
	memset(addr, 0, sizeof(addr));
	if (ntargets) {
		for (int t = 0; t < ntargets; t++) {
			if (parse_addr(targets[t], &addr[t]) < 0)
				return 2;
			pname[t] = labels[t] ? labels[t] : targets[t];
		}
		npaths = ntargets;
	} else {
		int up = bn_upstream_start();

		if (up < 0 || bn_kvs_start(&kvs, bin, up, kargs)) {
			fprintf(stderr, "overhead: cannot start the upstream or %s\n", bin);
			goto cleanup;
		}
		for (int p = 0; p < 2; p++) {
			addr[p].sin_family = AF_INET;
			addr[p].sin_addr.s_addr = htonl(INADDR_LOOPBACK);
			addr[p].sin_port = htons((uint16_t)(p ? kvs.port : up));
		}
		admin = addr[1];
		admin.sin_port = htons((uint16_t)kvs.admin_port);
		npaths = 2;
	}
	for (int k = 0; k < K_MAX; k++)
		build_req(&req[k], (enum kind)k, "bench", k == K_CHAT_NEW ? &new_off : &num_off);
	for (int c = 0; c < NCASES; c++) {
		const struct kase *k = &cases[c];
		struct buf *r = &req[k->kind];
		bool check = (k->kind == K_CHAT || k->kind == K_CHAT_NEW) && kvs.pid > 0;
		int fd[MAXP] = {-1, -1, -1};
		struct rc_snap s0, s1;
		double c0;

		if (only && !strstr(k->name, only))
			continue;
		ran[c] = true;
		/* warm-up: connections, pools, caches */
		for (int i = 0; i < WARMUP; i++)
			for (int p = 0; p < npaths; p++) {
				double us;

				if (k->kind == K_CHAT)
					chat_number(r, num_off);
				else if (k->kind == K_CHAT_NEW)
					chat_shuffle(r);
				one(k, &addr[p], &fd[p], r, &rb, &us);
			}
		if (check)
			snap_or_die(&admin, &s0, &kvs);
		c0 = kvs.pid > 0 ? bn_cpu(kvs.pid) : 0;
		for (int i = 0; i < n; i++)
			for (int p = 0; p < npaths; p++) {
				double us;

				if (k->kind == K_CHAT)
					chat_number(r, num_off);
				else if (k->kind == K_CHAT_NEW)
					chat_shuffle(r);
				us = one(k, &addr[p], &fd[p], r, &rb, &arr[c][p][i]);
				if (us < 0) {
					fprintf(stderr, "overhead: %s via %s failed\n", k->name,
						pname[p]);
					goto cleanup;
				}
				lat[c][p][i] = us;
			}
		if (kvs.pid > 0)
			cpu_us[c] = (bn_cpu(kvs.pid) - c0) * 1e6 / n;
		for (int p = 0; p < npaths; p++)
			if (fd[p] >= 0)
				close(fd[p]);
		if (check) {
			/* every timed request made one decision, none fell back, all had tokens */
			snap_or_die(&admin, &s1, &kvs);
			if (routecheck_read(&admin, CHAT_TARGET, &s0, &s1, &route[c]) < 0 ||
			    !routecheck_ok(&route[c], n, k->name))
				goto cleanup;
			routed[c] = true;
		}
	}
	printf(
	    "overhead: %d requests per case and path, the paths alternating request by request\n\n",
	    n);
	printf("| request |");
	for (int p = 0; p < npaths; p++)
		printf(" %s p50 µs | %s p99 µs |", pname[p], pname[p]);
	for (int p = 1; p < npaths; p++)
		printf(" %s added p50 µs | added p99 µs |", pname[p]);
	if (kvs.pid > 0)
		printf(
		    " added until the worker has it p50 µs | p99 µs | kvsplice CPU µs/request |");
	printf("\n| --- |");
	for (int p = 0; p < 2 * npaths + 2 * (npaths - 1) + 3 * (kvs.pid > 0); p++)
		printf(" ---: |");
	printf("\n");
	f = fopen(json, "w");
	if (f)
		fprintf(f, "{\"n\": %d, \"cases\": [", n);
	for (int c = 0, sep = 0; c < NCASES; c++) {
		if (!ran[c])
			continue;
		for (int p = 0; p < npaths; p++) {
			q[c][p][0] = bn_quantile(lat[c][p], n, 0.5);
			q[c][p][1] = bn_quantile(lat[c][p], n, 0.99);
			if (kvs.pid > 0) {
				qa[c][p][0] = bn_quantile(arr[c][p], n, 0.5);
				qa[c][p][1] = bn_quantile(arr[c][p], n, 0.99);
			}
		}
		printf("| %s |", cases[c].name);
		for (int p = 0; p < npaths; p++)
			printf(" %.1f | %.1f |", q[c][p][0], q[c][p][1]);
		for (int p = 1; p < npaths; p++)
			printf(" %.1f | %.1f |", q[c][p][0] - q[c][0][0], q[c][p][1] - q[c][0][1]);
		if (kvs.pid > 0)
			printf(" %.1f | %.1f | %.1f |", qa[c][1][0] - qa[c][0][0],
			       qa[c][1][1] - qa[c][0][1], cpu_us[c]);
		printf("\n");
		if (f) {
			fprintf(f, "%s{\"case\": \"%s\"", sep++ ? ", " : "", cases[c].name);
			for (int p = 0; p < npaths; p++)
				fprintf(f, ", \"%s\": {\"p50_us\": %.1f, \"p99_us\": %.1f}",
					pname[p], q[c][p][0], q[c][p][1]);
			if (kvs.pid > 0)
				fprintf(f,
					", \"added_p50_us\": %.1f, \"added_p99_us\": %.1f, "
					"\"added_to_worker_p50_us\": %.1f, "
					"\"added_to_worker_p99_us\": %.1f, "
					"\"kvsplice_cpu_us_per_request\": %.2f",
					q[c][1][0] - q[c][0][0], q[c][1][1] - q[c][0][1],
					qa[c][1][0] - qa[c][0][0], qa[c][1][1] - qa[c][0][1],
					cpu_us[c]);
			if (routed[c]) {
				const struct rc_result *x = &route[c];

				fprintf(f,
					", \"decision\": {\"view\": \"%s\", \"records\": %d, "
					"\"prompt_tokens_p50\": %.0f, \"blocks_p50\": %.0f, "
					"\"decided_blocks_p50\": %.0f, "
					"\"decision_us_p50\": %.1f, \"decision_us_max\": %.1f, "
					"\"decisions\": %.0f, \"histogram_mean_us\": %.2f, "
					"\"prompt_tokens_mean\": %.1f, \"fallbacks\": %.0f}",
					x->view, x->records, x->prompt_tokens_p50, x->blocks_p50,
					x->decided_blocks_p50, x->decision_us_p50,
					x->decision_us_max, x->decisions, x->mean_decision_us,
					x->mean_prompt_tokens, x->fallbacks);
			}
			fprintf(f, "}");
		}
	}
	if (f) {
		fprintf(f, "]}\n");
		fclose(f);
	}
	for (int c = 0, first = 1; c < NCASES; c++) {
		double a50 = q[c][1][0] - q[c][0][0], a99 = q[c][1][1] - q[c][0][1];

		if (!routed[c])
			continue;
		if (first)
			printf("\nkvsplice decided the chat requests on tokens (its default router "
			       "and tokenizer); goal (docs/benchmarks.md): full decision <= 100 µs "
			       "p50, <= "
			       "500 µs "
			       "p99 added vs direct\n");
		first = 0;
		printf("- %s: added %.1f / %.1f µs (goal %s), %.1f / %.1f µs of it before the "
		       "worker had the request; ",
		       cases[c].name, a50, a99, a50 <= 100 && a99 <= 500 ? "met" : "NOT met",
		       qa[c][1][0] - qa[c][0][0], qa[c][1][1] - qa[c][0][1]);
		routecheck_print(stdout, &route[c]);
	}
	rc = 0;
cleanup:
	if (kvs.pid > 0)
		bn_kvs_stop(&kvs);
	for (int k = 0; k < K_MAX; k++)
		buf_free(&req[k]);
	buf_free(&rb);
	return rc;
}
