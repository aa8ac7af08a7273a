// SPDX-License-Identifier: Apache-2.0
/* tokenizers: see tokenizers.h. One loader thread; jobs and results pass through two lists under
 * one mutex, and a pipe wakes the loop when a result is there. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/log.h"
#include "daemon/tokenizers.h"

#define NAME_MAX_LEN 256

enum { TF_LOADS, TF_COUNT };
const struct metrics_family tokenizers_families[TF_COUNT] = {
    [TF_LOADS] = {"kvsplice_tokenizer_loads_total", METRICS_COUNTER,
		  "Tokenizers named by the Services (kvsplice.io/model-tokenizers) loaded off the "
		  "serving thread, by result (ok, failed: unreadable or not reproduced exactly; "
		  "refused: outside --tokenizer-root, or no --tokenizer-root).",
		  "result"},
};
const size_t tokenizers_nfamilies = TF_COUNT;

enum { LOAD_OK, LOAD_FAILED, LOAD_REFUSED, LOAD_NRESULTS };
static const char *const result_names[LOAD_NRESULTS] = {"ok", "failed", "refused"};

struct job {
	struct job *next;
	char name[NAME_MAX_LEN];
	char dir[PATH_MAX];
	char path[PATH_MAX];
	struct models_loaded *l;
	int rc;
	char err[256];
	double ms;
};

/* A name followed, on the loop thread. */
struct ent {
	char name[NAME_MAX_LEN];
	char dir[PATH_MAX];
	bool loaded, seen;
};

struct tokenizers {
	char *root;
	struct models *m;
	struct loop *loop;
	struct loop_ev ev; /* the read end of the pipe */
	int wfd;
	uint64_t *loads[LOAD_NRESULTS];
	struct ent ent[TOKENIZERS_MAX];
	size_t nent;
	pthread_t thr;
	bool started;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct job *todo, *done; /* under mu */
	bool stop;		 /* under mu */
};

int tokenizers_entry(const char *entry, size_t len, char *name, char *dir, size_t n,
		     const char **why)
{
	const char *eq, *d, *p;
	size_t nl, dl;

	while (len && (*entry == ' ' || *entry == '\t'))
		entry++, len--;
	while (len && (entry[len - 1] == ' ' || entry[len - 1] == '\t'))
		len--;
	eq = memchr(entry, '=', len);
	if (!eq) {
		*why = "no '=' (NAME=DIR)";
		return -EINVAL;
	}
	nl = (size_t)(eq - entry);
	d = eq + 1;
	dl = len - nl - 1;
	if (!nl) {
		*why = "an empty model name";
		return -EINVAL;
	}
	if (!dl) {
		*why = "an empty directory";
		return -EINVAL;
	}
	if (nl >= n || dl >= n) {
		*why = "too long";
		return -EINVAL;
	}
	if (d[0] == '/') {
		*why = "an absolute directory (it must be under --tokenizer-root)";
		return -EINVAL;
	}
	for (p = d; p < d + dl;) {
		const char *s = memchr(p, '/', (size_t)(d + dl - p));
		size_t cl = s ? (size_t)(s - p) : (size_t)(d + dl - p);

		if (cl == 2 && p[0] == '.' && p[1] == '.') {
			*why = "a '..' component (it must stay under --tokenizer-root)";
			return -EINVAL;
		}
		p += cl + 1;
	}
	memcpy(name, entry, nl);
	name[nl] = '\0';
	memcpy(dir, d, dl);
	dir[dl] = '\0';
	return 0;
}

static void *loader_main(void *arg)
{
	struct tokenizers *t = arg;

	pthread_mutex_lock(&t->mu);
	for (;;) {
		struct job *j;

		while (!t->todo && !t->stop)
			pthread_cond_wait(&t->cv, &t->mu);
		if (t->stop)
			break;
		j = t->todo;
		t->todo = j->next;
		pthread_mutex_unlock(&t->mu);
		{
			double t0 = clock_s();

			j->rc = models_load(j->path, &j->l, j->err, sizeof(j->err));
			j->ms = (clock_s() - t0) * 1000;
		}
		pthread_mutex_lock(&t->mu);
		j->next = t->done;
		t->done = j;
		if (write(t->wfd, "x", 1) < 0) {
			/* the pipe is full: the loop has a wake-up pending already */
		}
	}
	pthread_mutex_unlock(&t->mu);
	return NULL;
}

static struct ent *ent_of(struct tokenizers *t, const char *name)
{
	for (size_t i = 0; i < t->nent; i++)
		if (strcmp(t->ent[i].name, name) == 0)
			return &t->ent[i];
	return NULL;
}

static void count(struct tokenizers *t, int r)
{
	if (t->loads[r])
		metrics_inc(t->loads[r]);
}

/* The loader finished jobs: each installed, unless its name was dropped or given another
 * directory meanwhile. */
static void on_done(struct loop_ev *ev, uint32_t events)
{
	struct tokenizers *t = container_of(ev, struct tokenizers, ev);
	struct job *j, *next;
	char b[64];

	(void)events;
	while (read(t->ev.fd, b, sizeof(b)) > 0)
		;
	pthread_mutex_lock(&t->mu);
	j = t->done;
	t->done = NULL;
	pthread_mutex_unlock(&t->mu);
	for (; j; j = next) {
		struct ent *e = ent_of(t, j->name);

		next = j->next;
		if (!e || strcmp(e->dir, j->dir) != 0) {
			models_loaded_free(j->l);
		} else if (j->rc == 0) {
			if (models_install(t->m, j->name, j->path, j->l) == 0) {
				e->loaded = true;
				log_info("tokenizers", "model %s: tokenizer %s loaded (%.0f ms)",
					 j->name, j->path, j->ms);
				count(t, LOAD_OK);
			}
		} else {
			log_warn("tokenizers",
				 "model %s: tokenizer %s: %s (its text requests are fallbacks)",
				 j->name, j->path, j->err);
			count(t, LOAD_FAILED);
		}
		free(j);
	}
}

int tokenizers_new(const char *root, struct models *m, struct loop *loop, struct metrics *metrics,
		   struct tokenizers **out)
{
	struct tokenizers *t = calloc(1, sizeof(*t));
	int p[2] = {-1, -1}, rc;

	*out = NULL;
	if (!t)
		return -ENOMEM;
	t->m = m;
	t->loop = loop;
	t->wfd = -1;
	t->ev.fd = -1;
	pthread_mutex_init(&t->mu, NULL);
	pthread_cond_init(&t->cv, NULL);
	if (root && !(t->root = strdup(root))) {
		rc = -ENOMEM;
		goto fail;
	}
	for (int r = 0; metrics && r < LOAD_NRESULTS; r++) {
		char lb[64];

		snprintf(lb, sizeof(lb), "result=\"%s\"", result_names[r]);
		if (!(t->loads[r] =
			  metrics_counter_of(metrics, &tokenizers_families[TF_LOADS], lb))) {
			rc = -ENOMEM;
			goto fail;
		}
	}
	if (pipe2(p, O_NONBLOCK | O_CLOEXEC) < 0) {
		rc = -errno;
		goto fail;
	}
	t->ev.fd = p[0];
	t->wfd = p[1];
	t->ev.cb = on_done;
	if ((rc = loop_set(loop, &t->ev, EPOLLIN)) < 0)
		goto fail;
	if ((rc = -pthread_create(&t->thr, NULL, loader_main, t)) < 0)
		goto fail;
	t->started = true;
	*out = t;
	return 0;
fail:
	tokenizers_free(t);
	return rc;
}

void tokenizers_free(struct tokenizers *t)
{
	struct job *lists[2], *j, *next;

	if (!t)
		return;
	if (t->started) {
		pthread_mutex_lock(&t->mu);
		t->stop = true;
		pthread_cond_signal(&t->cv);
		pthread_mutex_unlock(&t->mu);
		pthread_join(t->thr, NULL);
	}
	if (t->ev.fd >= 0) {
		loop_del(t->loop, &t->ev);
		close(t->ev.fd);
	}
	if (t->wfd >= 0)
		close(t->wfd);
	lists[0] = t->todo;
	lists[1] = t->done;
	for (int k = 0; k < 2; k++)
		for (j = lists[k]; j; j = next) {
			next = j->next;
			models_loaded_free(j->l);
			free(j);
		}
	pthread_mutex_destroy(&t->mu);
	pthread_cond_destroy(&t->cv);
	free(t->root);
	free(t);
}

/* Queues the load of e (its directory under the root). */
static void queue(struct tokenizers *t, const struct ent *e)
{
	struct job *j = calloc(1, sizeof(*j));

	if (!j) {
		log_warn("tokenizers", "model %s: out of memory", e->name);
		return;
	}
	snprintf(j->name, sizeof(j->name), "%s", e->name);
	snprintf(j->dir, sizeof(j->dir), "%s", e->dir);
	if ((size_t)snprintf(j->path, sizeof(j->path), "%.2000s/%.2000s/tokenizer.json", t->root,
			     e->dir) >= sizeof(j->path) ||
	    strlen(t->root) > 2000 || strlen(e->dir) > 2000) {
		log_warn("tokenizers", "model %s: path too long", e->name);
		free(j);
		return;
	}
	pthread_mutex_lock(&t->mu);
	j->next = t->todo;
	t->todo = j;
	pthread_cond_signal(&t->cv);
	pthread_mutex_unlock(&t->mu);
}

/* One entry of Service svc's list. */
static void take(struct tokenizers *t, const char *svc, const char *s, size_t len)
{
	char name[NAME_MAX_LEN], dir[PATH_MAX];
	const char *why = NULL;
	struct ent *e;

	if (tokenizers_entry(s, len, name, dir, sizeof(name), &why) < 0 || !t->root) {
		log_warn("tokenizers", "service %s: model tokenizer '%.*s' refused: %s", svc,
			 (int)len, s, why ? why : "no --tokenizer-root");
		count(t, LOAD_REFUSED);
		return;
	}
	e = ent_of(t, name);
	if (e) {
		e->seen = true;
		if (strcmp(e->dir, dir) != 0) { /* another directory: load it; the old one serves */
			snprintf(e->dir, sizeof(e->dir), "%s", dir);
			queue(t, e);
		}
		return;
	}
	if (t->nent == TOKENIZERS_MAX) {
		log_warn("tokenizers", "service %s: model %s: already %d tokenizers followed", svc,
			 name, TOKENIZERS_MAX);
		return;
	}
	e = &t->ent[t->nent++];
	memset(e, 0, sizeof(*e));
	snprintf(e->name, sizeof(e->name), "%s", name);
	snprintf(e->dir, sizeof(e->dir), "%s", dir);
	e->seen = true;
	if (models_install_pending(t->m, name) < 0)
		log_warn("tokenizers", "model %s: out of memory", name);
	queue(t, e);
}

void tokenizers_sync(struct tokenizers *t, const struct services *s)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->nent; i++)
		t->ent[i].seen = false;
	for (size_t i = 0; s && i < s->n; i++) {
		const char *p = s->v[i].tokenizers;

		while (*p) {
			const char *c = strchr(p, ',');
			size_t len = c ? (size_t)(c - p) : strlen(p);

			if (len)
				take(t, s->v[i].name, p, len);
			p += len + (c ? 1 : 0);
		}
	}
	for (size_t i = 0; i < t->nent;) {
		if (t->ent[i].seen) {
			i++;
			continue;
		}
		log_info("tokenizers", "model %s: no Service names its tokenizer any more",
			 t->ent[i].name);
		models_remove(t->m, t->ent[i].name);
		t->ent[i] = t->ent[--t->nent];
	}
}
