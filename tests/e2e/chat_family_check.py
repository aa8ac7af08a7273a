#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# Compares, for one model family, build/kvtok's chat ids against the reference: Python jinja2's
# rendering (tests/e2e/ref_chat.py, what vLLM runs) tokenized by Hugging Face tokenizers.
#   chat_family_check.py FAMILY PY.jsonl REF_IDS.jsonl C.jsonl
# PY.jsonl: ref_chat.py's line per request; REF_IDS.jsonl: the reference ids of the ok ones, in
# order; C.jsonl: kvtok's line per request ({"ids"} or {"error"}). Prints a TAP line: every request
# the reference renders gets equal ids or a refusal from C (counted, never wrong ids); every
# request the reference fails (the template raised, or vLLM refuses it) is an error in C too,
# carrying the template's message where the template raised.
import json
import sys

fam, py_path, ref_path, c_path = sys.argv[1:5]
py = [json.loads(l) for l in open(py_path, encoding="utf-8") if l.strip()]
ref = [l.strip() for l in open(ref_path, encoding="utf-8") if l.strip()]
c = [json.loads(l) for l in open(c_path, encoding="utf-8") if l.strip()]
if len(py) != len(c):
    print("not ok - %s: line counts differ (reference %d, C %d)" % (fam, len(py), len(c)))
    sys.exit(1)
equal = wrong = refused = raised_ok = raised_bad = refused_err = 0
first_bad = []
k = 0
for i, (p, x) in enumerate(zip(py, c)):
    if p["status"] == "ok":
        want = ref[k]
        k += 1
        if "ids" in x:
            if json.dumps({"ids": x["ids"]}, separators=(",", ":")) == want:
                equal += 1
            else:
                wrong += 1
                first_bad.append(i)
        else:
            refused += 1
    else:
        if "ids" in x:  # the reference fails (a raise, or a request vLLM refuses): C must too
            raised_bad += 1
            first_bad.append(i)
        elif p["why"] in x["error"]:
            raised_ok += 1  # the template raised, and C carries its message
        else:
            refused_err += 1
total = len(py)
ok = wrong == 0 and raised_bad == 0
print("%s - %s: %d requests: %d equal ids, %d wrong, %d refused by C (counted fallbacks); of the "
      "%d the reference fails, %d fail in C with the template's own message, %d are refused "
      "for their own reason, %d got ids" %
      ("ok" if ok else "not ok", fam, total, equal, wrong, refused,
       raised_ok + refused_err + raised_bad, raised_ok, refused_err, raised_bad))
for i in first_bad[:3]:
    print("#   line %d: reference %s / C %s" % (i + 1, json.dumps(py[i])[:300], json.dumps(c[i])[:300]))
sys.exit(0 if ok else 1)
