#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Chat-template rendering benchmark, side by side in one run: userspace/prompt/chat (build/bench/chat)
# against the reference renderer (@huggingface/jinja running the Qwen3 template, with vLLM's
# request handling: tests/js/ref_chat.mjs) on four request shapes. Checks first that both render
# the same text. Prints a table and writes JSON to build/bench/chat.json (or $OUT).
# Usage: bash bench/chat/run.sh [RUNS_C] [RUNS_REF]      (defaults 2000 and 300)
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-build/bench/chat.json}
runs_c=${1:-2000}
runs_ref=${2:-300}
tmp=$(mktemp -d /tmp/kvs-chatbench.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$(dirname "$out")"

node --input-type=module -e '
const prose = "The quick brown fox jumps over the lazy dog; 你好，世界. ";
const rep = (s, n) => s.repeat(n);
const shapes = [
	["short: system + user", { messages: [
		{ role: "system", content: "You are a helpful assistant." },
		{ role: "user", content: "What is the capital of France?" }] }],
	["20 turns with reasoning", { messages: [{ role: "system", content: "You are a helpful assistant." },
		...Array.from({ length: 20 }, (_, i) => [
			{ role: "user", content: rep(prose, 4) + i },
			{ role: "assistant", content: "<think>\n" + rep("Let me think. ", 10) + "\n</think>\n\n" + rep(prose, 3) }]).flat(),
		{ role: "user", content: "And now?" }], chat_template_kwargs: { enable_thinking: false } }],
	["agent: tool results, list content", { messages: [{ role: "user", content: "Fix the bug." },
		...Array.from({ length: 10 }, () => [
			{ role: "assistant", content: "Running the tests.", tool_calls: [] },
			{ role: "tool", content: [{ type: "text", text: rep("PASS test_x\n", 40) }, { type: "text", text: "FAIL test_y" }] }]).flat()] }],
	["one 100 KB user message", { messages: [{ role: "user", content: rep(prose, 1700) }] }],
];
for (const [name, req] of shapes) console.log(JSON.stringify({ name, req }));
' >"$tmp/shapes.jsonl"
node -e 'for (const l of require("fs").readFileSync(process.argv[1], "utf8").trim().split("\n"))
	console.log(JSON.stringify(JSON.parse(l).req))' "$tmp/shapes.jsonl" >"$tmp/requests.jsonl"

build/tests/test_chat --render <"$tmp/requests.jsonl" >"$tmp/c.jsonl"
node tests/js/ref_chat.mjs <"$tmp/requests.jsonl" >"$tmp/ref.jsonl"
if cmp -s "$tmp/c.jsonl" "$tmp/ref.jsonl"; then same=true; else same=false; fi

build/bench/chat "$tmp/requests.jsonl" "$runs_c" >"$tmp/c_times.jsonl"
node --input-type=module -e '
import fs from "node:fs";
import { makeRenderer } from "./tests/js/ref_chat.mjs";
const render = makeRenderer("models/qwen3/tokenizer_config.json");
const runs = Number(process.argv[2]);
for (const line of fs.readFileSync(process.argv[1], "utf8").trim().split("\n")) {
	const req = JSON.parse(line);
	for (let i = 0; i < Math.max(10, runs / 10); i++) render(req);
	const t = [];
	for (let i = 0; i < runs; i++) {
		const t0 = process.hrtime.bigint();
		render(JSON.parse(line));
		t.push(Number(process.hrtime.bigint() - t0) / 1000);
	}
	t.sort((a, b) => a - b);
	console.log(JSON.stringify({ ref_us: t[runs >> 1] }));
}' "$tmp/requests.jsonl" "$runs_ref" >"$tmp/ref_times.jsonl"

node -e '
const fs = require("fs");
const rd = (p) => fs.readFileSync(p, "utf8").trim().split("\n").map((l) => JSON.parse(l));
const [shapes, c, ref] = [rd(process.argv[1]), rd(process.argv[2]), rd(process.argv[3])];
const same = process.argv[5] === "true";
const rows = shapes.map((s, i) => ({ shape: s.name, ...c[i], ref_us: ref[i].ref_us, speedup: ref[i].ref_us / c[i].parse_render_us }));
const pad = (s, n) => String(s).padEnd(n);
console.log(`same text as the reference: ${same}`);
console.log(pad("shape", 36) + pad("request B", 11) + pad("prompt B", 10) + pad("C parse+render µs", 19) + pad("C render µs", 13) + pad("ref µs", 10) + "C vs ref");
for (const r of rows)
	console.log(pad(r.shape, 36) + pad(r.request_bytes, 11) + pad(r.prompt_bytes, 10) + pad(r.parse_render_us.toFixed(1), 19) +
		pad(r.render_us.toFixed(1), 13) + pad(r.ref_us.toFixed(1), 10) + r.speedup.toFixed(0) + "x");
fs.writeFileSync(process.argv[4], JSON.stringify({ same_text: same, rows }, null, 1) + "\n");
' "$tmp/shapes.jsonl" "$tmp/c_times.jsonl" "$tmp/ref_times.jsonl" "$out" "$same"
echo "wrote $out"
