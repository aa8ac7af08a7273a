#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Second reference for the chat-template parity test: Python's jinja2, the engine vLLM itself
renders with (through transformers), configured as transformers configures it
(ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loopcontrols, tojson without ASCII
escaping, raise_exception/strftime_now globals), running a tokenizer_config.json's chat_template
unmodified (argument 1; models/qwen3's by default), with the tokenizer's special tokens and the
content format vLLM detects. The request handling before the template mirrors vLLM's source, as in
tests/js/ref_chat.mjs (see there). Reads one request a line on stdin, writes
{"status":"ok","text":...} (or {"status":"error","why":...}) a line.
With --dump-vars FILE (after the arguments) it also writes, a line per request, the variables the
template got ({"template": "default" or "tool_use", "vars": {...}, "cut": bool}, or null where the
request failed before the template): tests/js/jinja_crosscheck.mjs renders them again with
@huggingface/jinja."""
import json
import re
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


def wrap(content):
    """The "openai" content format (wrap_dicts): a list of text parts, empty ones kept."""
    if content is None:
        return []
    if isinstance(content, str):
        content = [{"type": "text", "text": content}]
    out = []
    for part in content:
        t = part if isinstance(part, str) else part.get(TEXT_KEY[part["type"]])
        out.append({"type": "text", "text": t})
    return out


def loops_over_content(src):
    """vLLM's content-format detection, as chat.c reads it: a for loop over a message's content."""
    return re.search(r"\{%[-+]?\s*for\s[^%]*\sin\s[^%]*content", src) is not None


def conversation(messages, openai_format=False):
    conv = []
    for m in messages:
        m = dict(m)
        rc = m.pop("reasoning_content", None)  # protocol.py's "before" validator
        if rc is not None and m.get("reasoning") is None:
            m["reasoning"] = rc
        content = wrap(m.get("content")) if openai_format else flatten(m.get("content"))
        out = {"role": m["role"], "content": content}
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
        "reasoning_effort": req.get("reasoning_effort"),
    }
    if extra["reasoning_effort"] is not None and "enable_thinking" not in user:
        extra["enable_thinking"] = extra["reasoning_effort"] != "none"
    return user | {k: v for k, v in extra.items() if v not in (None, "auto")}


EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh", "max")


def request_check(req, trust=False):
    """What vLLM refuses (400) before the template: a request chat_template (unless trusted, then
    a non-string one), documents that are not a list of string maps, an unknown reasoning_effort,
    continue_final_message with add_generation_prompt."""
    if req.get("chat_template") is not None:
        if not trust:
            raise ValueError("Chat template is passed with request, but "
                             "--trust-request-chat-template is not set")
        if not isinstance(req["chat_template"], str):
            raise ValueError("chat_template is not a string")
    if req.get("reasoning_effort") is not None and req["reasoning_effort"] not in EFFORTS:
        raise ValueError("reasoning_effort is not a known value")
    docs = req.get("documents")
    if docs is not None and not (isinstance(docs, list) and all(
            isinstance(d, dict) and all(isinstance(v, str) for v in d.values()) for d in docs)):
        raise ValueError("documents is not a list of objects of strings")
    if req.get("continue_final_message") and req.get("add_generation_prompt", True):
        raise ValueError("continue_final_message and add_generation_prompt are not compatible")


def continue_final(text, conv):
    """transformers' continue_final_message: cut the rendering after the final message's text."""
    final = conv[-1]["content"]
    if isinstance(final, (list, tuple)):
        for block in reversed(final):
            if "text" in block:
                final = block["text"]
                break
        else:
            raise ValueError("continue_final_message is set but we could not find any text to "
                             "continue in the final message!")
    if final.strip() not in text:
        raise ValueError("continue_final_message is set but the final message does not appear "
                         "in the chat after applying the chat template!")
    loc = text.rindex(final.strip())
    if text[loc:loc + len(final.lstrip())] == final:
        return text[:loc + len(final.lstrip())]
    return text[:loc + len(final.strip())]


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
    dump = None
    trust = "--trust-request-chat-template" in sys.argv
    if trust:
        sys.argv.remove("--trust-request-chat-template")
    if "--dump-vars" in sys.argv:
        k = sys.argv.index("--dump-vars")
        dump = open(sys.argv[k + 1], "w", encoding="utf-8")
        del sys.argv[k:k + 2]
    path = sys.argv[1] if len(sys.argv) > 1 else "models/qwen3/tokenizer_config.json"
    with open(path, encoding="utf-8") as f:
        cfg = json.load(f)
    env = make_env()
    # vLLM's --chat-template FILE replaces the config's templates (read in text mode)
    if len(sys.argv) > 2:
        with open(sys.argv[2], encoding="utf-8") as f:
            src = f.read()
    else:
        src = cfg["chat_template"]
    named = {}
    if isinstance(src, list):  # named templates: "tool_use" when tools are sent
        named = {t["name"]: t["template"] for t in src}
        src = named.get("default") or named.get("tool_use")
    template = env.from_string(src)
    tool_template = env.from_string(named["tool_use"]) if "tool_use" in named else template
    openai_format = loops_over_content(src)
    # transformers hands the template the tokenizer's special tokens (special_tokens_map)
    special = {}
    for k in ("bos_token", "eos_token", "unk_token", "pad_token"):
        v = cfg.get(k)
        special[k] = v.get("content") if isinstance(v, dict) else v
    out = sys.stdout
    for line in sys.stdin:
        if not line.strip():
            continue
        given = None
        try:
            req = json.loads(line)
            request_check(req, trust)
            kw = template_kwargs(req)
            # `request.chat_template or default_template`: "" is the model's template too
            own = (req.get("chat_template") or None) if trust else None
            # vLLM: the request's template replaces the model's, with its own content format
            fmt = loops_over_content(own) if own is not None else openai_format
            conv = conversation(req["messages"], fmt)
            postprocess_tool_calls(conv)
            tools = tool_dicts(req.get("tools"))
            tm = env.from_string(own) if own is not None else tool_template if tools else template
            given = {"template": "request" if own is not None else
                     "tool_use" if tools and "tool_use" in named else "default",
                     "vars": dict(messages=conv, tools=tools, documents=req.get("documents"),
                                  **(special | kw)),
                     "cut": bool(req.get("continue_final_message"))}
            text = tm.render(messages=conv, tools=tools, documents=req.get("documents"),
                             **(special | kw))
            if req.get("continue_final_message"):
                text = continue_final(text, conv)
            out.write(json.dumps({"status": "ok", "text": text}, ensure_ascii=False) + "\n")
        except Exception as e:  # noqa: BLE001 - reported, compared by the caller
            out.write(json.dumps({"status": "error", "why": str(e)}) + "\n")
        if dump:
            try:
                dump.write(json.dumps(given, ensure_ascii=False, allow_nan=False) + "\n")
            except ValueError:  # NaN or Infinity: not JSON, so not cross-checked
                dump.write(json.dumps({"skip": "a non-finite number"}) + "\n")


if __name__ == "__main__":
    main()
