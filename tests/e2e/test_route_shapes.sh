#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The chain kvsplice computes is the one the worker caches, for every prompt shape: two kvsim
# workers (KV events + replay on 127.0.0.1) behind build/kvsplice --no-bpf (router kv, events
# followed from the --services file, default tokenizer beside the binary). Per shape, request A
# goes through the proxy, then (once kvsplice's index has caught up with the worker's events)
# request B sharing A's prompt, or a prefix of it. For B:
#   - it is routed to the worker that served A (x-kvsim-worker = /debug/route "endpoint");
#   - /debug/route's record has predicted_cached_tokens == the usage cached_tokens the worker
#     reported == the expected value (whole blocks of 16 of the shared tokens, at most
#     prompt_tokens - 1), and prompt_tokens == the usage prompt_tokens;
#   - fallback null, view "events".
# If kvsplice read a prompt differently from the worker (other tokens, other template rendering,
# another body), its chain would miss: predicted 0 while the worker reports > 0.
# Shapes: completions with a string, a list of one string, a batch of two strings, token ids, a
# list of token-id lists; chat with system+user, with tools (an integer in the JSON schema), with
# enable_thinking false, with add_generation_prompt false; two of them streamed (usage read from
# SSE). A negative control (a multimodal content part) must fall back (not_exact, view text) and
# still get the worker's own answer. /metrics: the outcome matrix counts every B as hit/hit. A
# prompt past the model's context gets the worker's 400, and its record, read the instant the
# answer is in, counts all of its tokens (the rest kvsplice left for its idle loop, settled by the
# read).
set -u
cd "$(dirname "$0")/../.." || exit 1
source tests/lib/tap.sh
source tools/kvsim/cluster.sh
PY=/usr/bin/python3
for b in build/kvsplice build/kvsim build/kvtok; do
	[ -x "$b" ] || { echo "not ok - $b not built (make all)"; exit 1; }
done
dir=$(mktemp -d /tmp/kvs-shapes.XXXXXX)
kvs_pid=""
cleanup() {
	if [ -n "$kvs_pid" ]; then
		kill "$kvs_pid" 2>/dev/null
		wait "$kvs_pid" 2>/dev/null
	fi
	kvsim_stop
	rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

# 4096 blocks per worker: nothing is evicted during the test (the expected values assume it).
KVSIM_LOGDIR=$dir KVSIM_WITH_EVENTS=1 kvsim_start 2 --num-blocks 4096 --time-scale 50 ||
	{ echo "not ok - kvsim workers started"; exit 1; }
IFS=, read -r u0 u1 <<<"$KVSIM_URLS"
kvsim_services >"$dir/services.json"
build/kvsplice --services "$dir/services.json" --no-bpf --listen 127.0.0.1:0 --admin 127.0.0.1:0 \
	--port-file "$dir/ports" --log-level warn 2>"$dir/kvsplice.log" &
kvs_pid=$!
for _ in $(seq 100); do [ -s "$dir/ports" ] && break; sleep 0.05; done
read -r lport aport <"$dir/ports" 2>/dev/null
# (tap.sh's ok returns 0 whatever it prints: the exit is tested on its own)
[ -n "${aport:-}" ]
ok $? "kvsplice started (proxy ${lport:-?}, admin ${aport:-?})"
[ -n "${aport:-}" ] || { cat "$dir/kvsplice.log" >&2; exit 1; }

# The driver prints the TAP lines and exits non-zero when one of them is "not ok".
$PY - "$lport" "$aport" "$u0" "$u1" <<'PYEOF'
import http.client, json, random, re, subprocess, sys, time, traceback, urllib.request

LPORT, APORT = int(sys.argv[1]), int(sys.argv[2])
WORKER_URL = {"w0": sys.argv[3], "w1": sys.argv[4]}
MODEL = "Qwen/Qwen3-0.6B"
BS = 16
failed = 0


def crashed(kind, value, tb):
    print("not ok - the driver raised %s: %s" % (kind.__name__, value))
    for line in "".join(traceback.format_exception(kind, value, tb)).splitlines():
        print("#   " + line)
    sys.exit(1)


sys.excepthook = crashed


def tap(cond, what, diag=None):
    global failed
    print(("ok - " if cond else "not ok - ") + what)
    if not cond:
        failed += 1
        if diag is not None:
            for line in str(diag).splitlines():
                print("#   " + line)
    sys.stdout.flush()
    return cond


def get_json(url):
    return json.loads(urllib.request.urlopen(url, timeout=10).read())


def send(path, body):
    """POST body through kvsplice on a fresh connection; returns (status, worker header,
    usage dict or None, choices count, client 'ip:port' as kvsplice records it, raw text)."""
    c = http.client.HTTPConnection("127.0.0.1", LPORT, timeout=10)
    c.connect()
    me = "%s:%d" % c.sock.getsockname()[:2]
    c.request("POST", path, body=json.dumps(body),
              headers={"Content-Type": "application/json"})
    r = c.getresponse()
    raw = r.read().decode("utf-8", "replace")
    worker = r.getheader("x-kvsim-worker")
    status = r.status
    c.close()
    usage, nchoices = None, None
    if body.get("stream"):
        # SSE: the usage comes in its own chunk (choices []) just before [DONE]
        idx = set()
        for line in raw.split("\n"):
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            ev = json.loads(line[6:])
            for ch in ev.get("choices", []):
                idx.add(ch.get("index"))
            if ev.get("usage"):
                usage = ev["usage"]
        nchoices = len(idx)
    elif status == 200:
        resp = json.loads(raw)
        usage, nchoices = resp.get("usage"), len(resp.get("choices", []))
    return status, worker, usage, nchoices, me, raw


def record(client):
    """The newest /debug/route record of this client connection, once router_done completed
    it (status set): the proxy may finish its accounting just after the client read the end."""
    rec = None
    for _ in range(100):
        routes = get_json("http://127.0.0.1:%d/debug/route" % APORT)["routes"]
        rec = next((x for x in routes if x["client"] == client), None)
        if rec is not None and rec["status"] != 0:
            return rec
        time.sleep(0.02)
    return rec


def wait_index(worker):
    """Waits until kvsplice's index of worker has consumed every event batch the worker has
    published so far: next_seq equal to kvsim's, and as many blocks as kvsim holds distinct
    hashes (a block recomputed by a later request, e.g. B = A, is stored twice by the engine
    under one hash; the index keeps it once). kvsim publishes a step's events in the same loop
    turn that sends its tokens, so after A's response the worker's seq is final for A."""
    want = get_json(WORKER_URL[worker] + "/debug/cache")
    nhash = len({blk["hash_hex"] for blk in want["blocks"]})
    w = None
    for _ in range(200):
        idx = get_json("http://127.0.0.1:%d/debug/index" % APORT)
        w = next((x for x in idx["workers"] if x["name"] == "qwen/" + worker), None)
        if w and w["next_seq"] == want["events_next_seq"] and w["blocks_gpu"] == nhash:
            return True, None
        time.sleep(0.02)
    return False, {"kvsim": {"events_next_seq": want["events_next_seq"],
                             "cached_blocks": want["cached_blocks"], "distinct_hashes": nhash},
                   "kvsplice": w}


def kvtok(texts):
    """Token ids of each text (add_special_tokens false = true for Qwen3), by build/kvtok."""
    inp = "".join(json.dumps({"text": t}) + "\n" for t in texts)
    out = subprocess.run(["build/kvtok", "--tokenizer", "models/qwen3/tokenizer.json"],
                         input=inp.encode(), capture_output=True, timeout=30, check=True)
    return [json.loads(l)["ids"] for l in out.stdout.decode().splitlines()]


def cached_of(shared, n):
    """vLLM: whole blocks of the shared tokens, at most n - 1 tokens, for a prompt of n."""
    return min(shared // BS * BS, (n - 1) // BS * BS)


WORDS = ("river stone cloud paper window garden silver market engine harbor lantern meadow "
         "signal copper forest bridge castle winter summer orange violet thunder candle "
         "mirror anchor valley desert island planet rocket pencil basket ladder hammer "
         "kernel socket buffer packet router cache worker prefix token block chain index "
         "alpha beta gamma delta sigma omega quiet rapid gentle bright hollow narrow ancient "
         "modern simple careful distant curious").split()


def text(seed, nwords=330):
    """Deterministic prose of about 1.2 tokens a word, unique from its first words on: a
    tag, then sentences with punctuation, numbers and line breaks."""
    rng = random.Random(seed)
    out = ["Document %d (%s)." % (seed, "".join(rng.choice("abcdefghijklmnop") for _ in range(8)))]
    sent = []
    for i in range(nwords):
        w = rng.choice(WORDS)
        sent.append(w.capitalize() if not sent else w)
        if rng.random() < 0.05:
            sent.append(str(rng.randrange(1, 2000)))
        if len(sent) > rng.randrange(6, 16):
            out.append(" ".join(sent) + rng.choice([".", ",", ";", ".\n", "!"]))
            sent = []
    out.append(" ".join(sent) + ".\n")
    return " ".join(out)


def ids(seed, n):
    rng = random.Random(seed)
    return [rng.randrange(1, 150000) for _ in range(n)]


TOOLS = [{"type": "function", "function": {
    "name": "get_forecast", "description": "Weather forecast for a city.",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "City name"},
        "days": {"type": "integer", "minimum": 1, "maximum": 14}},
        "required": ["city", "days"]}}}]


def chat(sys_seed, user, extra=None, **kw):
    msgs = [{"role": "system", "content": text(sys_seed)}, {"role": "user", "content": user}]
    body = {"model": MODEL, "messages": msgs + (extra or []), "max_tokens": 4}
    body.update(kw)
    return body


def comp(prompt, **kw):
    body = {"model": MODEL, "prompt": prompt, "max_tokens": 4}
    body.update(kw)
    return body


STREAM = {"stream": True, "stream_options": {"include_usage": True}}
FOLLOW_UP = [{"role": "assistant", "content": "Zebra quartz answer, first turn."},
             {"role": "user", "content": "Xylophone: and the follow-up question?"}]

# Each shape: name, path, A, B, and how many tokens B shares with A:
#   "same"  B's prompt is A's (shared = B's prompt_tokens)
#   "A"     A's prompt is a token prefix of B's (shared = A's reported prompt_tokens; chat: A's
#           rendering ends with "<|im_start|>assistant\n" or "<|im_end|>\n", B continues it)
#   int     shared tokens known from the token ids
#   "tok"   text prompts with different endings: common prefix of build/kvtok's ids
P1 = text(101)
T4, T5 = ids(104, 333), ids(105, 352)
X4, Y4 = ids(1041, 40), ids(1042, 40)
Y4[0] = X4[0] % 149999 + 1  # the endings differ from their first token
SHAPES = [
    ("completions, string prompt", "/v1/completions",
     comp(P1 + "Zebra ending one, with its own words."),
     comp(P1 + "Quokka ending two is different."), "tok"),
    # streamed: the usage is read from the SSE stream (kvsplice's scanner and ours)
    ("completions, list of one string (stream)", "/v1/completions",
     comp([text(102)]), comp([text(102)], **STREAM), "same"),
    # A batch is routed on its FIRST prompt. kvsim serves only the first prompt of a batch
    # (one choice; usage of the first prompt alone), so its usage compares with kvsplice's
    # prediction as for a single prompt. vLLM would answer every prompt, sum prompt_tokens over
    # the batch and report the LAST prompt's cached_tokens (serving_completion), so against
    # vLLM the usage of a batch does not describe the routed (first) prompt.
    ("completions, batch of two strings", "/v1/completions",
     comp([text(103), text(1031)]), comp([text(103), text(1032)]), "same"),
    ("completions, token ids", "/v1/completions", comp(T4 + X4), comp(T4 + Y4), len(T4)),
    ("completions, list of token-id lists", "/v1/completions",
     comp([T5]), comp([T5 + ids(1051, 50)]), "A"),
    ("chat, system + user", "/v1/chat/completions",
     chat(106, "Summarize the document above."),
     chat(106, "Summarize the document above.", FOLLOW_UP), "A"),
    ("chat, tools with an integer in the schema", "/v1/chat/completions",
     chat(107, "What is the forecast for Lyon for 3 days?", tools=TOOLS),
     chat(107, "What is the forecast for Lyon for 3 days?", tools=TOOLS), "same"),
    ("chat, enable_thinking false (stream)", "/v1/chat/completions",
     chat(108, "List three words.", chat_template_kwargs={"enable_thinking": False}),
     chat(108, "List three words.", chat_template_kwargs={"enable_thinking": False},
          **STREAM), "same"),
    ("chat, add_generation_prompt false", "/v1/chat/completions",
     chat(109, "Continue the text.", add_generation_prompt=False),
     chat(109, "Continue the text.", [{"role": "user", "content": "Yet another line."}],
          add_generation_prompt=False), "A"),
]

hits = 0
for name, path, a, b, shared in SHAPES:
    sa, wa, ua, na, _, rawa = send(path, a)
    if not tap(sa == 200 and wa in WORKER_URL and ua,
               "%s: A answered 200 by a worker (%s)" % (name, wa), rawa[:500]):
        continue
    good, why = wait_index(wa)
    if not tap(good, "%s: kvsplice's index caught up with %s's events" % (name, wa), why):
        continue
    sb, wb, ub, nb, me, rawb = send(path, b)
    if not tap(sb == 200 and ub, "%s: B answered 200" % name, rawb[:500]):
        continue
    rec = record(me)
    if not tap(rec is not None, "%s: B has a /debug/route record" % name):
        continue
    tap(wb == wa and rec["endpoint"] == wa,
        "%s: B routed to A's worker %s (served by %s, endpoint %s, reason %s)"
        % (name, wa, wb, rec["endpoint"], rec.get("reason")))
    n = ub["prompt_tokens"]
    reported = (ub.get("prompt_tokens_details") or {}).get("cached_tokens")
    if shared == "same":
        expected = cached_of(n, n)
    elif shared == "A":
        expected = cached_of(ua["prompt_tokens"], n)
    elif shared == "tok":
        ta, tb = kvtok([a["prompt"], b["prompt"]])
        tap(len(ta) == ua["prompt_tokens"] and len(tb) == n,
            "%s: kvtok counts A and B as the worker did (%d, %d)" % (name, len(ta), len(tb)))
        common = 0
        while common < min(len(ta), len(tb)) and ta[common] == tb[common]:
            common += 1
        expected = cached_of(common, n)
    else:
        expected = cached_of(shared, n)
    tap(rec["predicted_cached_tokens"] == reported == expected and expected > 0 and
        rec["reported_cached_tokens"] == reported,
        "%s: predicted cached %s = reported %s = expected %d (recorded reported %s)"
        % (name, rec["predicted_cached_tokens"], reported, expected,
           rec["reported_cached_tokens"]))
    tap(rec["prompt_tokens"] == n,
        "%s: prompt_tokens %s = usage prompt_tokens %d" % (name, rec["prompt_tokens"], n))
    tap(rec["fallback"] is None and rec["view"] == "events",
        "%s: fallback %s, view %s" % (name, json.dumps(rec["fallback"]), rec["view"]))
    if "batch" in name:
        tap(nb == 1, "%s: kvsim answers a batch with its first prompt only (%s choice(s))"
            % (name, nb))
    hits += 1

# Negative control: a multimodal part cannot be tokenized exactly. kvsplice routes it on the raw
# bytes (fallback not_exact, view text) and passes the worker's own answer through (kvsim, like
# vLLM without a vision model, refuses it with a 400); never a kvsplice error.
mm = chat(110, "")
mm["messages"][1]["content"] = [
    {"type": "text", "text": "What is in this picture?"},
    {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}]
s, w, _, _, me, raw = send("/v1/chat/completions", mm)
tap(w in WORKER_URL and (200 <= s < 300 or 400 <= s < 500),
    "multimodal chat: the worker's own answer passed through (status %d from %s)" % (s, w),
    raw[:500])
rec = record(me)
tap(rec is not None and rec["fallback"] == "not_exact" and rec["view"] == "text",
    "multimodal chat: fallback not_exact, view text (%s, %s)"
    % (rec and rec["fallback"], rec and rec["view"]))

# /metrics: every B counted predicted hit / reported hit, every A miss / miss, nothing crossed.
m = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % APORT, timeout=10).read().decode()
out = {}
for p, r, v in re.findall(
        r'^kvsplice_route_outcomes_total\{predicted="(\w+)",reported="(\w+)"\} (\d+)', m, re.M):
    out[(p, r)] = int(v)
tap(out.get(("hit", "hit")) == hits == len(SHAPES),
    'kvsplice_route_outcomes_total{predicted="hit",reported="hit"} = %s (B requests: %d)'
    % (out.get(("hit", "hit")), hits))
tap(out.get(("hit", "miss")) == 0 and out.get(("miss", "hit")) == 0,
    "no predicted/reported disagreement in the outcome matrix (%s)"
    % ", ".join("%s/%s=%d" % (k[0], k[1], v) for k, v in sorted(out.items())))
fb = re.search(r'^kvsplice_route_fallbacks_total\{cause="not_exact"\} (\d+)', m, re.M)
tap(fb is not None and int(fb.group(1)) == 1,
    "kvsplice_route_fallbacks_total{cause=\"not_exact\"} = 1 (%s)" % (fb and fb.group(1)))

# A prompt past the model's context, which the worker (kvsim, as vLLM) answers with a 400 at once:
# the client gets the worker's own answer. kvsplice decided on its first tokens and, the request
# done, left the rest to its idle loop; /debug/route, read the instant the answer is in, counts
# the whole prompt (a read settles what is done first).
long_text = text(150, nwords=24000)
ntok = len(kvtok([long_text])[0])
ac = http.client.HTTPConnection("127.0.0.1", APORT, timeout=10)
ac.connect()
c = http.client.HTTPConnection("127.0.0.1", LPORT, timeout=30)
c.connect()
me = "%s:%d" % c.sock.getsockname()[:2]
c.request("POST", "/v1/completions", body=json.dumps(comp(long_text)),
          headers={"Content-Type": "application/json"})
r = c.getresponse()
raw = r.read().decode("utf-8", "replace")
ac.request("GET", "/debug/route")
rec = next((x for x in json.loads(ac.getresponse().read())["routes"] if x["client"] == me), None)
ac.close()
c.close()
tap(r.status == 400 and "maximum context length" in raw and rec is not None and
    rec["status"] == 400 and rec["prompt_tokens"] == ntok and rec["blocks"] == ntok // BS and
    rec["decided_on_blocks"] < rec["blocks"],
    "a %d-token prompt answered 400 at once: the worker's answer passed on, its record read "
    "right after counts every token (%s) and block (%s), decided on %s"
    % (ntok, rec and rec["prompt_tokens"], rec and rec["blocks"],
       rec and rec["decided_on_blocks"]), "status %d %s %s" % (r.status, raw[:200], rec))

# Prefill backlog: a request's blocks count in its worker's backlog until the first body byte of
# its response (the first token), not for the whole stream.
st = chat(140, " Tell me a very long story.")
st.update({"stream": True, "max_tokens": 3000})
c = http.client.HTTPConnection("127.0.0.1", LPORT, timeout=30)
c.request("POST", "/v1/chat/completions", body=json.dumps(st),
          headers={"Content-Type": "application/json"})
r = c.getresponse()
first = r.fp.readline() if r.status == 200 else b""
while first and not first.startswith(b"data: "):
    first = r.fp.readline()
ws = get_json("http://127.0.0.1:%d/debug/workers" % APORT)["workers"]
busy = [x for x in ws if x["inflight"] == 1]
tap(first.startswith(b"data: ") and len(busy) == 1 and busy[0]["prefill_blocks"] == 0 and
    all(x["prefill_blocks"] == 0 for x in ws),
    "stream past its first chunk: in flight on %s, prefill backlog %s"
    % (busy and busy[0]["name"], [x["prefill_blocks"] for x in ws]),
    "status %d %s" % (r.status, json.dumps(ws)[:800]))
# Its prompt (a system text never sent before) was decided on its first ~256 tokens, and the rest
# was tokenized once it was sent: mid-stream (router_done not yet called) its record and its
# worker's active blocks already hold the whole chain.
rec = get_json("http://127.0.0.1:%d/debug/route" % APORT)["routes"][0]
tap(busy and rec["decided_on_blocks"] < rec["blocks"] == rec["prompt_tokens"] // BS and
    busy[0]["active_blocks"] == rec["blocks"],
    "mid-stream: decided on %s of %s blocks, the rest tokenized once sent (%s prompt tokens, "
    "its worker's active blocks %s)"
    % (rec["decided_on_blocks"], rec["blocks"], rec["prompt_tokens"],
       busy and busy[0]["active_blocks"]), json.dumps(rec)[:600])
c.close()  # the client leaves mid-stream (the chunk framing was read past above)
sys.exit(1 if failed else 0)
PYEOF
rc=$?
kill -0 "$kvs_pid" 2>/dev/null
alive=$?
ok "$alive" "kvsplice still running after the requests"
[ "$alive" -eq 0 ] || { cat "$dir/kvsplice.log" >&2; rc=1; }
[ "$rc" -eq 0 ] && tap_done
