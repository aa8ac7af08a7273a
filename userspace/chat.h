/* SPDX-License-Identifier: Apache-2.0 */
/* chat: renders a /v1/chat/completions request into the prompt text the engine tokenizes, exactly
 * as vLLM renders the Qwen3 chat template (tokenizer_config.json's chat_template through jinja,
 * add_generation_prompt defaulting to true, chat_template_kwargs honoured). What the renderer
 * cannot reproduce exactly is reported, never approximated, so the caller can fall back and count
 * it. Stateless and thread-safe. */
#ifndef KVS_CHAT_H
#define KVS_CHAT_H

#include <cjson/cJSON.h>

#include "buf.h"

enum chat_status {
	CHAT_OK = 0,
	CHAT_UNSUPPORTED = 1, /* valid request, but not rendered exactly here (why says what) */
	CHAT_INVALID = 2,     /* malformed messages (why says what) */
};

/* Renders the request object (its "messages", "add_generation_prompt", "continue_final_message",
 * "chat_template_kwargs", "tools", ...) and appends the prompt text to out. Returns a
 * chat_status, or -ENOMEM; on CHAT_UNSUPPORTED / CHAT_INVALID, *why points to a static message. */
int chat_render(const cJSON *request, struct buf *out, const char **why);

#endif
