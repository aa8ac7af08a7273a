#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Variables for the interpreter's benchmark (bench/chat/jinja.sh).

  jinja_vars.py shapes CONFIG     the benchmark's request shapes as template variables for the
                                  family of tokenizer_config.json CONFIG (its special tokens)
  jinja_vars.py vllm < requests   each /v1/chat/completions request (Qwen3 corpus of
                                  tests/js/ref_chat.mjs --gen) mapped to the variables vLLM hands
                                  the template, by tests/e2e/ref_chat.py's functions; a request
                                  that mapping refuses gives the line null"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "tests", "e2e"))

PROSE = "The quick brown fox jumps over the lazy dog; 你好，世界. "
TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Weather of a city, now or forecast.",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "The city"},
        "days": {"type": "integer", "minimum": 1, "maximum": 14},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        "threshold": {"type": "number", "default": 0.5}},
        "required": ["city"]}}}]


def specials(cfg):
    out = {}
    for k in ["bos_token", "eos_token", "unk_token", "pad_token"]:
        v = cfg.get(k)
        v = v.get("content") if isinstance(v, dict) else v
        if isinstance(v, str):
            out[k] = v
    return out


def shapes(cfg):
    gemma = "start_of_turn" in cfg["chat_template"]

    def c(text):
        return [{"type": "text", "text": text}] if gemma else text
    ten_kb = [{"role": "system", "content": c("You are a helpful assistant.")}]
    for i in range(8):
        ten_kb.append({"role": "user", "content": c(PROSE * 10 + str(i))})
        ten_kb.append({"role": "assistant", "content": c(PROSE * 10)})
    ten_kb.append({"role": "user", "content": c("And now?")})
    out = [
        ("short: system + user", {"messages": [
            {"role": "system", "content": c("You are a helpful assistant.")},
            {"role": "user", "content": c("What is the capital of France?")}]}),
        ("10 KB: 8 turns", {"messages": ten_kb}),
        ("10 KB + a tool", {"messages": ten_kb, "tools": TOOLS}),
        ("one 100 KB user message", {"messages": [{"role": "user",
                                                   "content": c(PROSE * 1700)}]}),
    ]
    sp = specials(cfg)
    return [(name, dict(v, add_generation_prompt=True, **sp)) for name, v in out]


def main():
    if sys.argv[1] == "shapes":
        with open(sys.argv[2], encoding="utf-8") as f:
            cfg = json.load(f)
        for name, v in shapes(cfg):
            print(json.dumps({"name": name, "vars": v}, ensure_ascii=False))
        return
    import ref_chat
    for line in sys.stdin:
        try:
            req = json.loads(line)
            kw = ref_chat.template_kwargs(req)
            kw.pop("documents", None)
            conv = ref_chat.conversation(req["messages"])
            ref_chat.postprocess_tool_calls(conv)
            v = dict(messages=conv, tools=ref_chat.tool_dicts(req.get("tools")),
                     documents=req.get("documents"), **kw)
            print(json.dumps(v, ensure_ascii=False, separators=(",", ":")))
        except Exception:  # noqa: BLE001 - the request is left out of the comparison
            print("null")


if __name__ == "__main__":
    main()
