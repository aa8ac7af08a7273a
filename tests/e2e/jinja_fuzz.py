#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Differential fuzzing of userspace/prompt/jinja against Python's jinja2: random small templates
(every statement, operator, filter, test and method the interpreter implements, white-space
control in all its forms, loop attributes, macros, namespaces, errors) with random variables,
rendered by build/tests/test_jinja --cases and by tests/e2e/ref_jinja.py --cases, compared:
the same status, the same text when rendered, the same message for raise_exception,
UndefinedError and SecurityError. A case the C side refuses as unsupported is counted apart.

Usage: jinja_fuzz.py [--count N] [--seed S] [--bin PATH] [--show K] [--cases FILE]
(--cases: compare the given {"template":...,"vars":...} lines instead, e.g. test_jinja --table)
Exits 1 on any mismatch."""
import argparse
import json
import os
import random
import subprocess
import sys

NAMES = ["a", "b", "s", "t", "l", "d", "n", "f", "u", "e", "m"]
FILTERS = ["trim", "tojson", "length", "count", "list", "string", "join", "first", "last",
           "upper", "lower", "items", "capitalize", "title", "abs", "int", "float", "reverse",
           "default", "replace", "map", "select", "reject", "selectattr", "rejectattr", "d"]
TESTS = ["defined", "undefined", "none", "string", "mapping", "iterable", "false", "true",
         "number", "boolean", "sequence", "integer", "float", "odd", "even", "callable",
         "lower", "upper"]
ARG_TESTS = ["equalto", "eq", "ne", "lt", "gt", "le", "ge", "divisibleby", "sameas", "in"]
METHODS = [("strip", 0), ("strip", 1), ("lstrip", 1), ("rstrip", 1), ("split", 0), ("split", 1),
           ("rsplit", 2), ("startswith", 1), ("endswith", 1), ("replace", 2), ("upper", 0),
           ("lower", 0), ("title", 0), ("capitalize", 0), ("find", 1), ("count", 1),
           ("join", 1), ("items", 0), ("keys", 0), ("values", 0), ("get", 1), ("get", 2),
           ("index", 1), ("append", 1), ("pop", 0), ("update", 1)]
STRS = ["", "a", "ab c", "  x y  ", "A-b c", "é", "日本", "🤖z", "it's", 'q"d', "a\\nb", "\\t",
        "x,y,,z", "<think>", "1", "4.5", "-3", "\\\\", "\\x41"]


class Gen:
    def __init__(self, rng):
        self.r = rng
        self.loops = 0
        self.loopvars = []
        self.macros = []

    def pick(self, xs):
        return self.r.choice(xs)

    def strlit(self):
        s = self.pick(STRS)
        q = self.pick(["'", '"'])
        return q + s.replace(q, "\\" + q) + q

    def literal(self, d):
        k = self.r.randrange(10)
        if k == 0:
            return str(self.r.randint(-5, 50))
        if k == 1:
            return self.pick(["0.5", "1.0", "2.25", "1e-05", "1e16", "3.0", "-1.5"])
        if k in (2, 3):
            return self.strlit()
        if k == 4:
            return self.pick(["true", "false", "none", "True", "None"])
        if k == 5 and d < 3:
            return "[" + ", ".join(self.expr(d + 1) for _ in range(self.r.randint(0, 3))) + "]"
        if k == 6 and d < 3:
            return "{" + ", ".join(f"{self.strlit()}: {self.expr(d + 1)}"
                                   for _ in range(self.r.randint(0, 3))) + "}"
        if k == 7 and d < 3:
            n = self.r.randint(0, 3)
            items = [self.expr(d + 1) for _ in range(n)]
            return "(" + ", ".join(items) + ("," if n == 1 else "") + ")"
        return str(self.r.randint(0, 3))

    def name(self):
        pool = NAMES + self.loopvars * 3
        if self.loops and self.r.random() < 0.2:
            return "loop." + self.pick(["index", "index0", "first", "last", "length",
                                        "revindex", "revindex0", "previtem", "nextitem"])
        return self.pick(pool)

    def primary(self, d):
        if d > 4:
            return self.pick([self.literal(9), self.name()])
        k = self.r.randrange(12)
        if k < 3:
            return self.literal(d)
        if k < 6:
            return self.name()
        if k == 6:
            return f"{self.primary(d + 1)}.{self.pick(['x', 'y', 'k', 'content', 'role', '0', '_a', '__class__'])}"
        if k == 7:
            return f"{self.primary(d + 1)}[{self.expr(d + 1)}]"
        if k == 8:
            parts = [self.pick(["", str(self.r.randint(-3, 3))]) for _ in range(self.r.randint(2, 3))]
            return f"{self.name()}[{':'.join(parts)}]"  # a literal would be folded
        if k == 9:
            m, n = self.pick(METHODS)
            args = ", ".join(self.expr(d + 1) for _ in range(n))
            return f"{self.primary(d + 1)}.{m}({args})"
        if k == 10 and self.macros:
            mname, nparams = self.pick(self.macros)
            args = [self.expr(d + 1) for _ in range(self.r.randint(0, nparams + 1))]
            return f"{mname}({', '.join(args)})"
        return f"({self.expr(d + 1)})"

    def filt(self, d):
        f = self.pick(FILTERS)
        if f == "join":
            return f"join({self.strlit()})" if self.r.random() < 0.7 else "join"
        if f == "tojson":
            return self.pick(["tojson", "tojson(indent=2)", "tojson(sort_keys=true)",
                              "tojson(separators=(',', ':'))", "tojson(ensure_ascii=true)",
                              "tojson(indent=0)"])
        if f in ("default", "d"):
            return f"{f}({self.expr(d + 1)})" + ("" if self.r.random() < 0.7 else "")
        if f == "replace":
            return f"replace({self.strlit()}, {self.strlit()})"
        if f == "trim" and self.r.random() < 0.3:
            return f"trim({self.strlit()})"
        if f == "map":
            return self.pick(["map('upper')", "map('string')", "map(attribute='x')",
                              "map(attribute='k', default=0)", "map('length')"])
        if f in ("select", "reject"):
            return self.pick([f, f"{f}('odd')", f"{f}('defined')", f"{f}('string')",
                              f"{f}('equalto', 1)", f"{f}('==', 'x')", f"{f}('!=', 2)",
                              f"{f}('nosuch')", f"{f}('in', [1, 'x'])"])
        if f in ("selectattr", "rejectattr"):
            return self.pick([f"{f}('x')", f"{f}('k', 'defined')", f"{f}('x', 'equalto', 1)",
                              f"{f}('role', 'undefined')"])
        if f == "int" and self.r.random() < 0.3:
            return "int(7)"
        return f

    def unary(self, d):
        e = self.primary(d)
        while self.r.random() < 0.3 and d < 5:
            e = f"{e}|{self.filt(d)}"
        if self.r.random() < 0.15:
            # parenthesized: a bare name after a test is its argument to jinja2
            if self.r.random() < 0.5:
                e = f"({e} is {'not ' if self.r.random() < 0.3 else ''}{self.pick(TESTS)})"
            elif self.r.random() < 0.8:
                e = f"({e} is {self.pick(ARG_TESTS)}({self.expr(d + 1)}))"
            else:
                e = f"({e} is {self.pick(ARG_TESTS)} {self.literal(9)})"
        if self.r.random() < 0.05:
            e = "-" + e
        return e

    def expr(self, d=0):
        if d > 5:
            return self.primary(d)
        k = self.r.randrange(14)
        if k < 7:
            return self.unary(d)
        if k < 10:
            op = self.pick(["+", "-", "*", "/", "//", "%", "~", "==", "!=", "<", ">", "<=",
                            ">=", "in", "not in", "and", "or", "**"])
            left, right = self.unary(d + 1), self.unary(d + 1)
            if op in ("*", "**"):
                right = str(self.r.randint(-2, 4))
            return f"{left} {op} {right}"
        if k == 10:
            return f"not {self.unary(d + 1)}"
        # conditional expressions parenthesized: jinja2 takes none bare in {% if %}
        if k == 11:
            return f"({self.unary(d + 1)} if {self.expr(d + 1)} else {self.unary(d + 1)})"
        if k == 12:
            return f"({self.unary(d + 1)} if {self.expr(d + 1)})"
        return f"{self.unary(d + 1)} < {self.unary(d + 1)} < {self.unary(d + 1)}"

    def ws(self):
        return self.pick(["", "", " ", "\n", "  \n", "\n    ", "\t", "x", "\n\n", " y "])

    def open_(self, kind):
        sign = self.pick(["", "", "-", "+"]) if kind == "%" else self.pick(["", "", "-"])
        return "{" + kind + sign + " "

    def close(self, kind):
        sign = self.pick(["", "", "-"])
        return " " + sign + ("%}" if kind == "%" else "}}")

    def block(self, d, n=None):
        out = []
        for _ in range(n if n is not None else self.r.randint(1, 4)):
            out.append(self.ws())
            out.append(self.stmt(d))
        out.append(self.ws())
        return "".join(out)

    def tag(self, body):
        return self.open_("%") + body + self.close("%")

    def stmt(self, d):
        k = self.r.randrange(14 if d < 3 else 4)
        if k < 3:
            return self.open_("{") + self.expr() + self.close("{")
        if k == 3:
            return self.pick(["{# c #}", "{#- c -#}", "{# x\n #}"])
        if k in (4, 5):
            s = self.tag(f"if {self.expr()}") + self.block(d + 1)
            if self.r.random() < 0.3:
                s += self.tag(f"elif {self.expr()}") + self.block(d + 1)
            if self.r.random() < 0.4:
                s += self.tag("else") + self.block(d + 1)
            return s + self.tag("endif")
        if k in (6, 7):
            var = self.pick(["x", "y", "i"])
            target = var if self.r.random() < 0.8 else "k, v"
            it = self.pick(["l", "s", "d", "range(4)", "d.items()", "d|items", "[1, 2, 3]",
                            "u", "t", "e", "m", "'ab'", "l[::-1]"]) \
                if self.r.random() < 0.8 else self.expr()
            cond = f" if {self.expr()}" if self.r.random() < 0.2 else ""
            self.loops += 1
            self.loopvars.append(var)
            body = self.block(d + 1)
            if self.r.random() < 0.2:
                body += self.tag(self.pick(["if loop.index > 1", "if x is defined", "if true"])) + \
                    self.tag(self.pick(["break", "continue"])) + self.tag("endif")
            self.loopvars.pop()
            self.loops -= 1
            s = self.tag(f"for {target} in {it}{cond}") + body
            if self.r.random() < 0.2:
                s += self.tag("else") + self.block(d + 1)
            return s + self.tag("endfor")
        if k == 8:
            return self.tag(f"set {self.pick(NAMES[:6] + ['x', 'z'])} = {self.expr()}")
        if k == 9:
            return self.tag(f"set ns.{self.pick(['p', 'q'])} = {self.expr()}")
        if k == 10 and not self.loops:
            name = f"mac{len(self.macros)}"
            params = self.pick([[], ["p"], ["p", "q='Q'"], ["p=1"]])
            self.macros.append((name, len(params)))
            body = self.block(d + 1)
            return self.tag(f"macro {name}({', '.join(params)})") + body + self.tag("endmacro")
        if k == 11:
            return self.tag("set z") + self.block(d + 1, 1) + self.tag("endset")
        if k == 12:
            return self.tag("generation") + self.block(d + 1, 1) + self.tag("endgeneration")
        return self.open_("{") + self.pick(
            ["raise_exception('boom ' ~ a)", "range(a)|list", "namespace(p=1).p",
             "strftime_now('%Y-%m-%d')", "dict(x=1)", "[a, b]|tojson",
             "raise_exception(s)"]) + self.close("{")

    def template(self):
        head = "{% set ns = namespace(p=0, q='') %}" if self.r.random() < 0.5 else ""
        return head + self.block(0, self.r.randint(1, 5)) + self.pick(["", "\n", "\n\n"])


def variables(rng):
    def val(d):
        k = rng.randrange(9 if d < 2 else 6)
        if k == 0:
            return rng.randint(-3, 20)
        if k == 1:
            return rng.choice([0.5, 1.0, 2.5, -0.0, 1e-05, 1e16])
        if k in (2, 3):
            return rng.choice(["", "a", "ab c", " x ", "é日本🤖", "it's", 'q"d', "x,y", "1", "Hi"])
        if k == 4:
            return rng.choice([True, False, None])
        if k == 5:
            return rng.choice(["role", "user"])
        if k == 6:
            return [val(d + 1) for _ in range(rng.randint(0, 3))]
        return {rng.choice(["x", "y", "k", "role", "content", "_a", "items"]): val(d + 1)
                for _ in range(rng.randint(0, 3))}
    v = {"a": rng.randint(0, 6), "b": rng.choice([1.5, 2.0, -1e-05]),
         "s": rng.choice(["hello world", "  pad  ", "é日本", "a,b,,c", "<think>x</think>y", ""]),
         "t": rng.choice(["x", "", "1.5", "42"]),
         "l": [val(1) for _ in range(rng.randint(0, 4))],
         "d": {k: val(1) for k in rng.sample(["x", "y", "k", "role", "content", "_a"],
                                              rng.randint(0, 4))},
         "n": None, "f": rng.choice([True, False]),
         "e": [], "m": [{"role": rng.choice(["user", "bot"]), "x": rng.randint(0, 2)}
                        for _ in range(rng.randint(0, 3))]}
    return v


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=10000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--bin", default="build/tests/test_jinja")
    ap.add_argument("--show", type=int, default=5)
    ap.add_argument("--cases")
    a = ap.parse_args()
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    rng = random.Random(a.seed)
    cases = []
    if a.cases:
        with open(a.cases, encoding="utf-8") as f:
            cases = [line.rstrip("\n") for line in f if line.strip()]
    for _ in range(0 if a.cases else a.count):
        cases.append(json.dumps({"template": Gen(rng).template(), "vars": variables(rng)},
                                ensure_ascii=False, separators=(",", ":")))
    data = ("\n".join(cases) + "\n").encode()
    c = subprocess.run([a.bin, "--cases"], input=data, capture_output=True, check=True)
    p = subprocess.run([sys.executable, os.path.join(root, "tests/e2e/ref_jinja.py"), "--cases"],
                       input=data, capture_output=True, check=True)
    cl, pl = c.stdout.decode().split("\n")[:-1], p.stdout.decode().split("\n")[:-1]
    if len(cl) != len(cases) or len(pl) != len(cases):
        print(f"{len(cases)} cases, {len(cl)} C lines, {len(pl)} Python lines")
        sys.exit(1)
    stats = {}
    mism = unsup = 0
    for i, (x, y) in enumerate(zip(cl, pl)):
        cr, pr = json.loads(x), json.loads(y)
        stats[pr["status"]] = stats.get(pr["status"], 0) + 1
        if cr["status"] == "unsupported":
            unsup += 1
            continue
        same = cr["status"] == pr["status"]
        if same and cr["status"] == "ok":
            same = cr["text"] == pr["text"]
        elif same and cr["status"] in ("raised", "undefined", "security"):
            same = cr["why"] == pr["why"]
        if not same:
            mism += 1
            if mism <= a.show:
                print(f"case {i}:\n  {cases[i]}\n  C  {x[:300]}\n  PY {y[:300]}")
    ks = " ".join(f"{k}={v}" for k, v in sorted(stats.items()))
    print(f"cases={len(cases)} mismatches={mism} unsupported_in_C={unsup}  python: {ks}")
    sys.exit(1 if mism else 0)


if __name__ == "__main__":
    main()
