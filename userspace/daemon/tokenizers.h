/* SPDX-License-Identifier: Apache-2.0 */
/* tokenizers: the tokenizers the Services name (kvsplice.io/model-tokenizers in Kubernetes,
 * "model_tokenizers" in a --services file): "NAME=DIR[,NAME=DIR]", each DIR a directory under
 * --tokenizer-root (a ConfigMap volume, or a host path of Hugging Face snapshots mounted into the
 * DaemonSet) holding NAME's tokenizer.json and tokenizer_config.json.
 *
 * Loading a tokenizer takes about a second (a 150 K vocabulary), so it never runs on the loop
 * thread: a loader thread reads each new one (models_load) and the loop installs it
 * (models_install) when the thread says it is done (a pipe the loop polls). Meanwhile the model
 * has a pending entry: its text requests are fallbacks "no_tokenizer", never read with another
 * model's tokenizer. A name no Service names any more is dropped (the default reads it again);
 * a --model-tokenizer entry always wins over an annotation. Refused, with a log line and
 * kvsplice_tokenizer_loads_total{result="refused"}: a DIR that is absolute, holds a ".."
 * component or is empty, and every entry when there is no --tokenizer-root (a Service's author
 * must not make the daemon read files outside the directory the operator mounted).
 *
 * Threading: every function but the loader's runs on the loop thread. */
#ifndef KVS_DAEMON_TOKENIZERS_H
#define KVS_DAEMON_TOKENIZERS_H

#include "core/loop.h"
#include "core/metrics.h"
#include "discovery/discovery.h"
#include "prompt/models.h"

/* Run-time tokenizers followed at most (names over all Services). */
#ifndef TOKENIZERS_MAX
#define TOKENIZERS_MAX 64
#endif

struct tokenizers;

/* Its /metrics families (daemon/catalog.c lists them). */
extern const struct metrics_family tokenizers_families[];
extern const size_t tokenizers_nfamilies;

/* A loader for models m (installed on loop's thread), DIRs under root (NULL: every entry
 * refused). metrics may be NULL. 0 and *out, or a negative errno. */
int tokenizers_new(const char *root, struct models *m, struct loop *loop, struct metrics *metrics,
		   struct tokenizers **out);
/* Stops the loader (waits for a load under way) and frees. NULL is fine. */
void tokenizers_free(struct tokenizers *t);

/* A new Services snapshot: loads the tokenizers it names that are not loaded yet, drops those it
 * no longer names. */
void tokenizers_sync(struct tokenizers *t, const struct services *s);

/* Splits one "NAME=DIR" entry of a list (pure, for tests): entry[0..len) into name and dir
 * (NUL-terminated, at most n bytes each). Returns 0, or -EINVAL with why: no '=', an empty name,
 * an absolute DIR, a ".." component, an empty DIR, too long. */
int tokenizers_entry(const char *entry, size_t len, char *name, char *dir, size_t n,
		     const char **why);

#endif
