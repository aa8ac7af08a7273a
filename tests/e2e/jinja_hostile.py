#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Hostile templates against userspace/prompt/jinja's bounds (struct jinja_limits, defaults):
deep nesting, huge and nested loops, range(10**9), unbounded and exponential recursion,
string and list blow-ups, output floods, deep containers printed and dumped. Each is written to
a scratch directory and rendered once by build/tests/test_jinja --render under /usr/bin/time;
each must end (in an error: a bound, the sandbox's range limit, a refusal at load; or rendered,
for those that fit the bounds) within 5 s (room for a busy machine; about 1 s quiet) and
300 MB of peak RSS, and never crash. Prints one line per template: status, seconds, peak RSS,
message.

Usage: jinja_hostile.py [--bin PATH] [--keep DIR]   (exit 1 if any template escapes a bound)"""
import argparse
import os
import subprocess
import sys
import tempfile
import json

TEMPLATES = {
    "deep_if": "{% if true %}" * 10000 + "x" + "{% endif %}" * 10000,
    "deep_parens": "{{ " + "(" * 100000 + "1" + ")" * 100000 + " }}",
    "deep_lists": "{{ " + "[" * 100000 + "]" * 100000 + " }}",
    "deep_filters": "{{ x" + "|string" * 100000 + " }}",
    "long_plus_chain": "{{ " + " + ".join(["'a'"] * 100000) + " }}",
    "many_tokens": "{{ " + ",".join(["1"] * 200000) + " }}",
    "unclosed_comment": "{#" + "x" * 1000000,
    "nested_loops": "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}"
                    "{% endfor %}",
    "range_1e9": "{{ range(10**9)|length }}",
    "recursive_macro": "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
    "exponential_macro": "{% macro f(n) %}{% if n %}{{ f(n - 1) }}{{ f(n - 1) }}{% endif %}"
                         "{% endmacro %}{{ f(60) }}",
    "string_mul": "{{ 'x' * 1000000000 }}",
    "empty_mul": "{{ ('' * 10**18)|length }}{{ ([] * 10**18)|length }}",
    "string_doubling": "{% set ns = namespace(s='x') %}{% for i in range(64) %}"
                       "{% set ns.s = ns.s + ns.s %}{% endfor %}{{ ns.s|length }}",
    "list_doubling": "{% set ns = namespace(l=[1]) %}{% for i in range(64) %}"
                     "{% set ns.l = ns.l + ns.l %}{% endfor %}{{ ns.l|length }}",
    "list_mul_print": "{% set l = ['x' * 1000] * 1000000 %}{{ l }}",
    "output_flood": "{% for i in range(100000) %}{% for j in range(100) %}{{ 'xxxxxxxxxx' }}"
                    "{% endfor %}{% endfor %}",
    "deep_list_print": "{% set ns = namespace(x=[]) %}{% for i in range(100000) %}"
                       "{% set ns.x = [ns.x] %}{% endfor %}{{ ns.x }}",
    "tojson_bomb": "{% set ns = namespace(x=[1]) %}{% for i in range(30) %}"
                   "{% set ns.x = [ns.x, ns.x] %}{% endfor %}{{ ns.x|tojson(indent=100) }}",
    "replace_bomb": "{% set ns = namespace(s='ab') %}{% for i in range(40) %}"
                    "{% set ns.s = ns.s|replace('a', 'aa') %}{% endfor %}",
    "join_bomb": "{% set l = range(100000)|list %}{{ (l|join(',' * 1000))|length }}",
    "busy_steps": "{% for i in range(100000) %}{% for j in range(9) %}"
                  "{% if i > j and not (i < j) or j == i %}{% endif %}{% endfor %}{% endfor %}",
    "dict_growth": "{% set ns = namespace(d={}) %}{% for i in range(100000) %}"
                   "{% set ns.d = dict(ns.d, k=i) %}{% endfor %}",
    "split_bomb": "{% set s = 'a ' * 2000000 %}{{ s.split()|length }}",
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="build/tests/test_jinja")
    ap.add_argument("--keep")
    a = ap.parse_args()
    tmp = a.keep or tempfile.mkdtemp(prefix="kvs-jinja-hostile.")
    os.makedirs(tmp, exist_ok=True)
    bad = 0
    print(f"{'template':20} {'status':12} {'seconds':>8} {'peak RSS':>9}  message")
    for name, text in TEMPLATES.items():
        path = os.path.join(tmp, name + ".j2")
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        timef = os.path.join(tmp, name + ".time")
        p = subprocess.run(["/usr/bin/time", "-f", "%e %M", "-o", timef, a.bin, "--render", path],
                           input=b"{\"x\": 1}\n", capture_output=True, timeout=60)
        with open(timef) as f:
            secs, rss_kb = f.read().split()[-2:]
        out = p.stdout.decode(errors="replace").strip()
        try:
            res = json.loads(out)
        except ValueError:
            res = {"status": "crash", "why": p.stderr.decode(errors="replace")[-200:]}
        ok = (p.returncode == 0 and res["status"] != "crash" and float(secs) < 5.0
              and int(rss_kb) < 300 * 1024)
        bad += not ok
        print(f"{name:20} {res['status']:12} {float(secs):8.2f} {int(rss_kb) / 1024:7.1f}MB  "
              f"{res.get('why', '')[:70]}{'' if ok else '   <-- ESCAPED A BOUND'}")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
