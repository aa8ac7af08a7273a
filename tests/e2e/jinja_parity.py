#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Chat-template parity of userspace/prompt/jinja against Python's jinja2 (tests/e2e/ref_jinja.py):
seeded variables for each family's tokenizer_config.json chat_template, rendered by both
(build/tests/test_jinja --render --config, and ref_jinja.py), compared line by line.

The variables are what transformers' apply_chat_template hands the template for vLLM: messages
(system prompts, multi-turn, tool calls with arguments as dicts or strings, tool results, content
parts, reasoning_content, unicode and white space, and orders that make Llama/Gemma/Mistral
templates raise), tools with nested JSON schemas (ints and floats), add_generation_prompt both
ways, the tokenizer's special tokens (bos_token, eos_token, ...), and kwargs (enable_thinking,
tools_in_user_message, date_string, custom_tools). Rendering equal means the same text; for an
error, the same kind, and the same message for raise_exception and UndefinedError. A case the C
side refuses as unsupported counts apart (it must not be an ok rendering in Python to pass
silently: it is listed).

Usage: jinja_parity.py [--count N] [--seed S] [--families a,b] [--bin PATH] [--keep DIR]
Prints one line per family (cases, equal, mismatches, unsupported, ok/raised/... counts) and
exits 1 on any mismatch."""
import argparse
import json
import os
import random
import subprocess
import sys
import tempfile

FAMILIES = ["llama3_2", "deepseek_v3", "gemma3", "mistral_nemo", "qwen2_5", "qwen3", "llama2",
            "gptoss"]

WORDS = ["hello", "world", "What's", "the", "weather", "in", "Paris?", "Ünïcödé", "数据", "🤖",
         "tab\there", "line\nbreak", "  padded  ", "<think>", "</think>", "<tool_response>",
         "</tool_response>", "{\"json\": 1}", "quote\"s", "back\\slash", "''", "\r\n", "x" * 40,
         "[INST]", "<|im_start|>", "1.0", "-0", "é", "\u00a0", "\u2028"]


def text(rng, lo=0, hi=12):
    n = rng.randint(lo, hi)
    s = " ".join(rng.choice(WORDS) for _ in range(n))
    if rng.random() < 0.1:
        s = "\n" + s + "\n\n"
    return s


def number(rng):
    return rng.choice([0, 1, -3, 42, 10**12, 1.0, 0.5, -2.25, 1e-05, 1e16, 3.14159, 100.0,
                       1.5e300, 7])


def schema(rng, depth=0):
    kind = rng.choice(["string", "integer", "number", "boolean", "object", "array", "enum"]
                      if depth < 2 else ["string", "integer", "number", "boolean"])
    s = {"type": kind}
    if rng.random() < 0.6:
        s["description"] = text(rng, 1, 6)
    if kind == "object":
        s["properties"] = {f"p{i}_{rng.choice(WORDS)[:4]}": schema(rng, depth + 1)
                           for i in range(rng.randint(0, 3))}
        if s["properties"] and rng.random() < 0.5:
            s["required"] = list(s["properties"])[:1]
    elif kind == "array":
        s["items"] = schema(rng, depth + 1)
    elif kind == "enum":
        s = {"type": "string", "enum": [rng.choice(WORDS) for _ in range(rng.randint(1, 3))]}
    elif kind in ("integer", "number") and rng.random() < 0.5:
        s["minimum"] = number(rng)
        s["maximum"] = number(rng)
    elif rng.random() < 0.3:
        s["default"] = rng.choice([None, True, False, "x", number(rng)])
    return s


def tool(rng):
    fn = {"name": rng.choice(["get_weather", "search", "calc", "lookup_ü", "run"]) +
          str(rng.randint(0, 9)),
          "description": text(rng, 0, 8) if rng.random() < 0.8 else None,
          "parameters": {"type": "object",
                         "properties": {f"a{i}": schema(rng) for i in range(rng.randint(0, 4))}}}
    if rng.random() < 0.2:
        fn["strict"] = rng.choice([True, False])
    if rng.random() < 0.1:
        fn["return"] = {"type": "string"}
    return {"type": "function", "function": fn}


def call_id(rng):
    alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    n = 9 if rng.random() < 0.85 else rng.choice([5, 12])
    return "".join(rng.choice(alphabet) for _ in range(n))


def arguments(rng):
    args = {f"a{i}": rng.choice([text(rng, 0, 3), number(rng), True, None, [1, "x"],
                                 {"k": number(rng)}]) for i in range(rng.randint(0, 3))}
    if rng.random() < 0.25:
        return json.dumps(args, ensure_ascii=rng.random() < 0.5)  # a string, as sent
    return args


def content(rng, fmt):
    if fmt == "openai" and rng.random() < 0.5:
        parts = []
        for _ in range(rng.randint(1, 3)):
            parts.append({"type": "image"} if rng.random() < 0.2 else
                         {"type": "text", "text": text(rng)})
        return parts
    return text(rng)


def messages(rng, fmt, family):
    """A conversation; mostly the shape each family's template accepts (vLLM hands "string"
    format templates "" for a null content), sometimes one it refuses."""
    msgs = []
    tools_ok = family != "gemma3"
    if rng.random() < 0.5:
        msgs.append({"role": "system", "content": content(rng, fmt) if fmt == "openai"
                     else text(rng)})
    turns = rng.randint(1, 6)
    broken = rng.random() < 0.08
    for t in range(turns):
        msgs.append({"role": "user", "content": content(rng, fmt)})
        if t == turns - 1 and rng.random() < 0.6:
            break
        if tools_ok and rng.random() < 0.3:
            calls = [{"id": call_id(rng), "type": "function",
                      "function": {"name": rng.choice(["get_weather", "search"]),
                                   "arguments": arguments(rng)}}
                     for _ in range(1 if rng.random() < 0.7 else 2)]
            if family == "deepseek_v3" and rng.random() < 0.9:
                for c in calls:
                    c["function"]["arguments"] = json.dumps(c["function"]["arguments"])
            empty = None if family == "deepseek_v3" or rng.random() < 0.2 else ""
            m = {"role": "assistant", "tool_calls": calls,
                 "content": empty if rng.random() < 0.6 else text(rng)}
            msgs.append(m)
            for c in calls:
                r = {"role": "tool", "content": text(rng, 1, 8)}
                if rng.random() < 0.9:
                    r["tool_call_id"] = c["id"]
                msgs.append(r)
            msgs.append({"role": "assistant", "content": text(rng)})
        else:
            m = {"role": "assistant", "content": content(rng, fmt) if fmt == "openai"
                 else text(rng)}
            if rng.random() < 0.3:
                m["reasoning_content"] = text(rng, 1, 6)
            elif rng.random() < 0.2:
                m["content"] = "<think>\n" + text(rng, 1, 4) + "\n</think>\n\n" + text(rng)
            msgs.append(m)
    if broken:
        i = rng.randrange(len(msgs))
        msgs.insert(i, {"role": rng.choice(["user", "assistant", "system", "developer"]),
                        "content": text(rng)})
    if rng.random() < 0.03:
        msgs = []
    return msgs


def special_tokens(config):
    out = {}
    for k in ["bos_token", "eos_token", "unk_token", "pad_token", "sep_token", "cls_token",
              "mask_token"]:
        v = config.get(k)
        if isinstance(v, dict):
            v = v.get("content")
        if isinstance(v, str):
            out[k] = v
    return out


def case(rng, family, specials):
    fmt = "openai" if family == "gemma3" else "string"
    v = {"messages": messages(rng, fmt, family)}
    r = rng.random()
    if r < 0.35:
        v["tools"] = [tool(rng) for _ in range(rng.randint(1, 3))]
    elif r < 0.45:
        v["tools"] = None
    v["add_generation_prompt"] = rng.random() < 0.7
    if rng.random() < 0.9:
        v.update(specials)
    if rng.random() < 0.3:
        v["enable_thinking"] = rng.choice([True, False, None, 0])
    if family == "llama3_2":
        if rng.random() < 0.3:
            v["tools_in_user_message"] = rng.choice([True, False])
        if rng.random() < 0.2:
            v["date_string"] = "01 Jan 2030"
        if rng.random() < 0.05:
            v["custom_tools"] = [tool(rng)]
    if rng.random() < 0.1:
        v["documents"] = [{"title": "t", "text": text(rng)}]
    return v


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=500)
    ap.add_argument("--seed", type=int, default=20261202)
    ap.add_argument("--families", default=",".join(FAMILIES))
    ap.add_argument("--bin", default="build/tests/test_jinja")
    ap.add_argument("--keep")
    a = ap.parse_args()
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    tmp = a.keep or tempfile.mkdtemp(prefix="kvs-jinja-parity.")
    os.makedirs(tmp, exist_ok=True)
    failed = 0
    for fam in a.families.split(","):
        cfg_path = os.path.join(root, "models", fam, "tokenizer_config.json")
        with open(cfg_path, encoding="utf-8") as f:
            cfg = json.load(f)
        if not isinstance(cfg.get("chat_template"), str):
            print(f"{fam:13} no chat_template in tokenizer_config.json: skipped")
            continue
        rng = random.Random(f"{a.seed}-{fam}")
        specials = special_tokens(cfg)
        cases = [json.dumps(case(rng, fam, specials), ensure_ascii=rng.random() < 0.3)
                 for _ in range(a.count)]
        vpath = os.path.join(tmp, f"{fam}.vars.jsonl")
        with open(vpath, "w", encoding="utf-8") as f:
            f.write("\n".join(cases) + "\n")
        with open(vpath, "rb") as f:
            c = subprocess.run([a.bin, "--render", "--config", cfg_path], stdin=f,
                               capture_output=True, check=True).stdout.decode().split("\n")[:-1]
        with open(vpath, "rb") as f:
            p = subprocess.run([sys.executable, os.path.join(root, "tests/e2e/ref_jinja.py"),
                                "--config", cfg_path], stdin=f, capture_output=True,
                               check=True).stdout.decode().split("\n")[:-1]
        equal = mism = unsup = 0
        kinds = {}
        for i, (cl, pl) in enumerate(zip(c, p)):
            cr, pr = json.loads(cl), json.loads(pl)
            kinds[pr["status"]] = kinds.get(pr["status"], 0) + 1
            if cr["status"] == "unsupported":
                unsup += 1
                print(f"  {fam} case {i}: unsupported in C ({cr['why']}), Python {pr['status']}")
                continue
            same = cr["status"] == pr["status"]
            if same and cr["status"] == "ok":
                same = cr["text"] == pr["text"]
            elif same and cr["status"] in ("raised", "undefined", "security"):
                same = cr["why"] == pr["why"]
            if same:
                equal += 1
            else:
                mism += 1
                if mism <= 3:
                    print(f"  {fam} case {i} differs:\n    vars {cases[i][:300]}\n"
                          f"    C  {json.dumps(cr, ensure_ascii=False)[:400]}\n"
                          f"    PY {json.dumps(pr, ensure_ascii=False)[:400]}")
        if len(c) != len(p) or len(c) != len(cases):
            print(f"  {fam}: {len(cases)} cases, {len(c)} C lines, {len(p)} Python lines")
            mism += 1
        failed += mism
        ks = " ".join(f"{k}={v}" for k, v in sorted(kinds.items()))
        print(f"{fam:13} cases={len(cases)} equal={equal} mismatches={mism} "
              f"unsupported={unsup}  python: {ks}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
