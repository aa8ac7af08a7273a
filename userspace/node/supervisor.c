// SPDX-License-Identifier: Apache-2.0
/* supervisor: see supervisor.h. */
#include "node/supervisor.h"

#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/log.h"

static volatile sig_atomic_t daemon_pid, stop_sig;
static bool child;

bool supervisor_child(void)
{
	return child;
}

/* Forwards a stop or reload to the daemon (async-signal-safe: kill only). */
static void on_signal(int sig)
{
	if (sig != SIGHUP)
		stop_sig = sig;
	if (daemon_pid > 0)
		kill((pid_t)daemon_pid, sig);
}

static void handlers(void (*h)(int))
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = h;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
}

/* Reaps children (the daemon's keeper, other orphans) until daemon is reaped (returns 1 and
 * *status), or, when daemon is 0, for ms milliseconds or until a stop is asked (returns 0). */
static int reap(pid_t daemon, int *status, int ms)
{
	uint64_t until = clock_ms() + (uint64_t)(ms > 0 ? ms : 0);

	for (;;) {
		int st;
		pid_t r = waitpid(-1, &st, daemon ? 0 : WNOHANG);

		if (daemon && r == daemon) {
			*status = st;
			return 1;
		}
		if (r > 0 || (r < 0 && errno == EINTR))
			continue;
		if (daemon) /* no child left to wait for: cannot happen while it runs */
			return 0;
		if (clock_ms() >= until || stop_sig)
			return 0;
		struct timespec ts = {0, 20 * 1000000L};

		nanosleep(&ts, NULL);
	}
}

int supervisor_run(void)
{
	int backoff = SUPERVISOR_BACKOFF_MIN_MS, starts = 0;

	if (getpid() != 1)
		return -1;
	handlers(on_signal);
	for (;;) {
		uint64_t started = clock_ms();
		pid_t pid;
		int st;

		pid = fork();
		if (pid < 0) {
			log_error("init", "fork: %s", strerror(errno));
			return 1;
		}
		if (pid == 0) {
			handlers(SIG_DFL); /* the daemon sets up its own */
			child = true;
			return -1;
		}
		daemon_pid = pid;
		starts++;
		if (starts == 1)
			log_info("init",
				 "PID 1: kvsplice runs as pid %d and is started again if it is "
				 "killed (the keeper relays meanwhile)",
				 (int)pid);
		if (stop_sig) /* asked to stop before the daemon existed */
			kill(pid, stop_sig);
		if (!reap(pid, &st, 0))
			return 1;
		daemon_pid = 0;
		if (WIFEXITED(st)) {
			log_info("init", "kvsplice exited with status %d", WEXITSTATUS(st));
			return WEXITSTATUS(st);
		}
		if (stop_sig) {
			log_info("init", "kvsplice ended by signal %d while stopping",
				 WTERMSIG(st));
			return 128 + WTERMSIG(st);
		}
		if (clock_ms() - started >= SUPERVISOR_STABLE_MS)
			backoff = SUPERVISOR_BACKOFF_MIN_MS;
		log_warn("init",
			 "kvsplice (pid %d) was killed by signal %d; starting it again in %d ms",
			 (int)pid, WTERMSIG(st), backoff);
		reap(0, &st, backoff);
		if (stop_sig)
			return 128 + stop_sig;
		backoff = backoff * 2 > SUPERVISOR_BACKOFF_MAX_MS ? SUPERVISOR_BACKOFF_MAX_MS
								  : backoff * 2;
	}
}
