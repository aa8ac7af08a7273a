#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Second reference for the chat-template parity test: Python's jinja2, the engine vLLM itself
renders with (through transformers), configured as transformers configures it
(ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loopcontrols, tojson without ASCII
escaping, raise_exception/strftime_now globals), running models/qwen3/tokenizer_config.json's
chat_template unmodified. The request handling before the template mirrors vLLM's source, as in
tests/js/ref_chat.mjs (see there). Reads one request a line on stdin, writes
{"status":"ok","text":...} (or {"status":"error","why":...}) a line."""
import json
import sys
from datetime import datetime

import jinja2
import jinja2.ext
import jinja2.sandbox

TEXT_KEY = {"text": "text", "input_text": "text", "output_text": "text",
            "refusal": "refusal", "thinking": "thinking"}


def flatten(content):
    if content is None:
        return ""
    if isinstance(content, str):
        content = [{"type": "text", "text": content}]
    texts = []
    for part in content:
        t = part if isinstance(part, str) else part.get(TEXT_KEY[part["type"]])
        if t:  # vLLM keeps only truthy parse results
            texts.append(t)
    return "\n".join(texts)


def conversation(messages):
    conv = []
    for m in messages:
        m = dict(m)
        rc = m.pop("reasoning_content", None)  # protocol.py's "before" validator
        if rc is not None and m.get("reasoning") is None:
            m["reasoning"] = rc
        out = {"role": m["role"], "content": flatten(m.get("content"))}
        if m["role"] == "assistant":
            if m.get("tool_calls") is not None:
                out["tool_calls"] = list(m["tool_calls"])
            if m.get("reasoning") is not None:
                out["reasoning"] = out["reasoning_content"] = m["reasoning"]
        elif m["role"] == "tool" and "tool_call_id" in m:
            out["tool_call_id"] = m["tool_call_id"]
        if isinstance(m.get("name"), str):
            out["name"] = m["name"]
        conv.append(out)
    for m in conv:  # _postprocess_messages: empty tool_calls dropped
        if m["role"] == "assistant" and m.get("tool_calls") == []:
            m.pop("tool_calls")
    return conv


def tool_dicts(tools):
    """ChatCompletionToolsParam.model_dump() of each tool, as vLLM passes tools to the template."""
    if not tools:
        return None
    out = []
    for t in tools:
        fn = t["function"]
        d = {"name": fn["name"], "description": fn.get("description"),
             "parameters": fn.get("parameters")}
        if fn.get("strict") is not None:
            d["strict"] = fn["strict"]
        out.append({"type": "function", "function": d})
    return out


def postprocess_tool_calls(conv):
    """vLLM's _postprocess_messages: arguments strings become what json.loads makes of them."""
    for m in conv:
        for item in m.get("tool_calls") or []:
            args = item["function"].get("arguments")
            if isinstance(args, str):
                try:
                    item["function"]["arguments"] = json.loads(args)
                except json.JSONDecodeError:
                    item["function"]["arguments"] = {}
            elif not isinstance(args, (dict, list)):
                item["function"]["arguments"] = {}


def template_kwargs(req):
    user = req.get("chat_template_kwargs") or {}
    extra = {
        "add_generation_prompt": req.get("add_generation_prompt", True),
        "continue_final_message": req.get("continue_final_message", False),
        "documents": req.get("documents"),
        "reasoning_effort": req.get("reasoning_effort"),
    }
    if extra["reasoning_effort"] is not None and "enable_thinking" not in user:
        extra["enable_thinking"] = extra["reasoning_effort"] != "none"
    return user | {k: v for k, v in extra.items() if v not in (None, "auto")}


def make_env():
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    env = jinja2.sandbox.ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    return env


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "models/qwen3/tokenizer_config.json"
    with open(path, encoding="utf-8") as f:
        template = make_env().from_string(json.load(f)["chat_template"])
    out = sys.stdout
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            req = json.loads(line)
            kw = template_kwargs(req)
            kw.pop("documents", None)
            conv = conversation(req["messages"])
            postprocess_tool_calls(conv)
            text = template.render(messages=conv, tools=tool_dicts(req.get("tools")),
                                   documents=req.get("documents"), **kw)
            out.write(json.dumps({"status": "ok", "text": text}, ensure_ascii=False) + "\n")
        except Exception as e:  # noqa: BLE001 - reported, compared by the caller
            out.write(json.dumps({"status": "error", "why": str(e)}) + "\n")


if __name__ == "__main__":
    main()
