#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Reference for userspace/prompt/jinja: Python's jinja2 in the environment transformers builds
for vLLM (transformers/utils/chat_template_utils.py, _compile_jinja_template):
ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
extensions=[AssistantTracker, jinja2.ext.loopcontrols]), tojson = json.dumps(x,
ensure_ascii=False, indent=, separators=, sort_keys=), globals raise_exception(msg) (a
TemplateError) and strftime_now(fmt) (datetime.now().strftime(fmt); here a fixed clock, as
tests/unit/test_jinja --render uses: --clock UNIX,UTC_OFFSET_SECONDS).

Usage: ref_jinja.py [--config] [--clock S,OFF] TEMPLATE < vars.jsonl > out.jsonl
       ref_jinja.py --cases < cases.jsonl > out.jsonl   (lines {"template": T, "vars": V})
TEMPLATE is the template text, or with --config a tokenizer_config.json whose "chat_template"
is rendered. Each input line is a JSON object of variables (json.loads, as vLLM reads a request);
each output line {"status":"ok","text":...} or {"status":KIND,"why":...}, KIND one of syntax,
raised, undefined, security, type (every other exception), as userspace/prompt/jinja.h names
them. A template that does not load gives that error on every line."""
import json
import sys
from datetime import datetime, timedelta, timezone

import jinja2
import jinja2.ext
import jinja2.nodes
import jinja2.sandbox


class AssistantTracker(jinja2.ext.Extension):
    """transformers' {% generation %}: renders its body (the mask bookkeeping is not needed)."""
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_render", []), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


class RaisedError(jinja2.exceptions.TemplateError):
    pass


def make_env(clock):
    def raise_exception(message):
        raise RaisedError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    unix, off = clock
    # datetime.now(): the server's naive local time.
    now = datetime.fromtimestamp(unix, timezone(timedelta(seconds=off))).replace(tzinfo=None)
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True,
        extensions=[AssistantTracker, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: now.strftime(fmt)
    return env


def kind(e):
    if isinstance(e, RaisedError):
        return "raised"
    if isinstance(e, jinja2.exceptions.SecurityError):
        return "security"
    if isinstance(e, jinja2.exceptions.UndefinedError):
        return "undefined"
    if isinstance(e, (jinja2.exceptions.TemplateSyntaxError,
                      jinja2.exceptions.TemplateAssertionError)):
        return "syntax"
    if isinstance(e, SyntaxError):
        return "syntax"
    if isinstance(e, RecursionError):
        return "limit"
    return "type"


def render_one(env, src, variables):
    try:
        template = env.from_string(src)
        return {"status": "ok", "text": template.render(**variables)}
    except Exception as e:  # noqa: BLE001 - reported, compared by the caller
        return {"status": kind(e), "why": str(e)}


def write(out, res):
    try:
        out.write(json.dumps(res, ensure_ascii=False) + "\n")
    except UnicodeEncodeError:
        out.write(json.dumps({"status": "type", "why": "unencodable output"}) + "\n")
    out.flush()


def main():
    args = sys.argv[1:]
    if args[:1] == ["--cases"]:
        env = make_env((1700000000, 0))
        for line in sys.stdin:
            if line.strip():
                c = json.loads(line)
                write(sys.stdout, render_one(env, c["template"], c["vars"]))
        return
    config = False
    clock = (1700000000, 0)
    while args and args[0].startswith("--"):
        if args[0] == "--config":
            config = True
            args = args[1:]
        elif args[0] == "--clock":
            a, b = args[1].split(",")
            clock = (int(a), int(b))
            args = args[2:]
        else:
            sys.exit("usage: ref_jinja.py [--config] [--clock S,OFF] TEMPLATE")
    with open(args[0], encoding="utf-8") as f:
        src = json.load(f)["chat_template"] if config else f.read()
    load_error = None
    try:
        template = make_env(clock).from_string(src)
    except Exception as e:  # noqa: BLE001 - reported per line
        load_error = e
    out = sys.stdout
    for line in sys.stdin:
        if not line.strip():
            continue
        if load_error is not None:
            res = {"status": kind(load_error), "why": str(load_error)}
        else:
            try:
                res = {"status": "ok", "text": template.render(**json.loads(line))}
            except Exception as e:  # noqa: BLE001 - reported, compared by the caller
                res = {"status": kind(e), "why": str(e)}
        write(out, res)


if __name__ == "__main__":
    main()
