// SPDX-License-Identifier: Apache-2.0
/* discdump: runs one discovery source as the daemon does (an event loop that polls it when its
 * notify fd fires, and once a second) and prints every snapshot it hands over, one JSON line each,
 * so tests can watch what reaches the routing state without the rest of the daemon
 * (tests/e2e/test_discovery_k8s.sh). Every second it also prints a heartbeat with the longest
 * time the loop spent inside poll() and the longest gap between two loop turns: the proof that the
 * source never blocks the loop, whatever the API server does. A test helper, not a tool.
 *
 * usage: discdump --kubernetes [--api URL] [--token FILE] [--ca FILE] [--namespace NS]
 *                 [--watch-timeout S] [--backoff-min MS] [--backoff-max MS]
 *                 [--request-timeout MS] [--seconds N] [--log-level L]
 *        discdump --services FILE [--seconds N]
 * Output lines:
 *   {"generation":3,"services":[{"name":"ns/svc","vip":"10.96.0.50:8000","route":"kv",
 *     "model":"m","endpoints":[{"name":"pod","addr":"10.244.1.5:8000","events_port":20080,
 *     "replay_port":20081,"terminating":false}]}]}
 *   {"heartbeat":12,"max_poll_us":35,"max_gap_ms":101}
 * SIGTERM / SIGINT: frees the source (its thread stops) and exits 0. */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/clock.h"
#include "discovery/discovery.h"
#include "core/log.h"
#include "route/policy.h"

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	stop = 1;
}

static void print_snapshot(const struct services *s)
{
	struct buf b = {0};

	buf_printf(&b, "{\"generation\":%llu,\"services\":[", (unsigned long long)s->generation);
	for (size_t i = 0; i < s->n; i++) {
		const struct service *v = &s->v[i];
		char ip[INET_ADDRSTRLEN];

		inet_ntop(AF_INET, &v->vip.sin_addr, ip, sizeof(ip));
		buf_printf(&b, "%s{\"name\":", i ? "," : "");
		buf_json_str(&b, v->name, strlen(v->name));
		buf_printf(&b, ",\"vip\":\"%s:%u\",\"route\":", ip, ntohs(v->vip.sin_port));
		buf_json_str(&b, v->policy, strlen(v->policy));
		buf_puts(&b, ",\"model\":");
		buf_json_str(&b, v->model, strlen(v->model));
		buf_puts(&b, ",\"endpoints\":[");
		for (size_t k = 0; k < v->nendpoints; k++) {
			const struct endpoint *e = &v->endpoints[k];

			inet_ntop(AF_INET, &e->addr.sin_addr, ip, sizeof(ip));
			buf_printf(&b, "%s{\"name\":", k ? "," : "");
			buf_json_str(&b, e->name, strlen(e->name));
			buf_printf(&b,
				   ",\"addr\":\"%s:%u\",\"events_port\":%u,\"replay_port\":%u,"
				   "\"terminating\":%s}",
				   ip, ntohs(e->addr.sin_port), e->events_port, e->replay_port,
				   e->terminating ? "true" : "false");
		}
		buf_puts(&b, "]}");
	}
	buf_puts(&b, "]}");
	if (b.data)
		printf("%s\n", b.data);
	fflush(stdout);
	buf_free(&b);
}

int main(int argc, char **argv)
{
	discovery_set_routes(&policy_routes);
	static const struct option opts[] = {
	    {"kubernetes", no_argument, 0, 'k'},
	    {"services", required_argument, 0, 'f'},
	    {"api", required_argument, 0, 'a'},
	    {"token", required_argument, 0, 't'},
	    {"ca", required_argument, 0, 'c'},
	    {"namespace", required_argument, 0, 'n'},
	    {"watch-timeout", required_argument, 0, 'w'},
	    {"backoff-min", required_argument, 0, 'b'},
	    {"backoff-max", required_argument, 0, 'B'},
	    {"request-timeout", required_argument, 0, 'r'},
	    {"seconds", required_argument, 0, 's'},
	    {"log-level", required_argument, 0, 'l'},
	    {0, 0, 0, 0},
	};
	struct discovery_k8s_cfg cfg;
	struct discovery_source *src = NULL;
	const char *file = NULL;
	bool k8s = false;
	char err[256] = "";
	double seconds = 0;
	uint64_t t0, last_turn, last_beat, last_poll = 0, max_poll_us = 0, max_gap_ms = 0,
					   beats = 0;
	int opt, rc;

	discovery_k8s_cfg_default(&cfg);
	while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (opt) {
		case 'k':
			k8s = true;
			break;
		case 'f':
			file = optarg;
			break;
		case 'a':
			cfg.api = optarg;
			break;
		case 't':
			cfg.token_path = optarg;
			break;
		case 'c':
			cfg.ca_path = optarg;
			break;
		case 'n':
			cfg.ns = optarg;
			break;
		case 'w':
			cfg.watch_timeout_min_s = cfg.watch_timeout_max_s = atoi(optarg);
			break;
		case 'b':
			cfg.backoff_min_ms = atoi(optarg);
			break;
		case 'B':
			cfg.backoff_max_ms = atoi(optarg);
			break;
		case 'r':
			cfg.request_timeout_ms = atoi(optarg);
			break;
		case 's':
			seconds = atof(optarg);
			break;
		case 'l':
			if ((rc = log_parse_level(optarg)) < 0)
				return 2;
			log_set_level((enum log_level)rc);
			break;
		default:
			fprintf(stderr,
				"usage: discdump --kubernetes [options] | --services FILE\n");
			return 2;
		}
	}
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	signal(SIGPIPE, SIG_IGN);
	if (k8s)
		rc = discovery_k8s_source(&cfg, &src, err, sizeof(err));
	else if (file)
		rc = discovery_file_source(file, DISCOVERY_FILE_DEFAULT_MAX, &src);
	else
		rc = -EINVAL;
	if (rc < 0) {
		fprintf(stderr, "discdump: %s\n", err[0] ? err : strerror(-rc));
		return 1;
	}
	t0 = last_turn = last_beat = clock_ms();
	while (!stop && (seconds <= 0 || clock_ms() - t0 < seconds * 1000)) {
		struct pollfd pfd = {.fd = src->notify_fd ? src->notify_fd(src) : -1,
				     .events = POLLIN};
		uint64_t now, p0, us;
		struct services *s = NULL;

		poll(&pfd, 1, 20);
		now = clock_ms();
		if (now - last_turn > max_gap_ms)
			max_gap_ms = now - last_turn;
		last_turn = now;
		if ((pfd.revents & POLLIN) || now - last_poll >= 1000) {
			p0 = clock_ns();
			rc = src->poll(src, 0, &s);
			us = (clock_ns() - p0) / 1000;
			if (us > max_poll_us)
				max_poll_us = us;
			last_poll = now;
			if (rc == 1) {
				print_snapshot(s);
				services_put(s);
			}
		}
		if (now - last_beat >= 1000) {
			printf("{\"heartbeat\":%llu,\"max_poll_us\":%llu,\"max_gap_ms\":%llu}\n",
			       (unsigned long long)++beats, (unsigned long long)max_poll_us,
			       (unsigned long long)max_gap_ms);
			fflush(stdout);
			last_beat = now;
		}
	}
	src->free(src);
	return 0;
}
