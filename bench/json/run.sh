#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Request-body parsing, side by side in one run: cJSON against json_parse (userspace/core/json.h) on
# the bodies kvsplice reads: bench/overhead's 10 KB chat request (bench/tokenizer's prompt in a
# system prompt, three turns and a last message, as JSON.stringify writes it: UTF-8 as is), the
# same with every non-ASCII character escaped (\uXXXX, as Python's json.dumps writes it by
# default), a completions request of 3,000 token ids, and a small chat request. Prints a table,
# writes JSON to build/bench/json.json (or $OUT). Usage: bash bench/json/run.sh [RUNS] (500)
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-build/bench/json.json}
runs=${1:-500}
tmp=$(mktemp -d /tmp/kvs-jsonbench.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$(dirname "$out")"

node bench/tokenizer/prompt.mjs >"$tmp/prompt.txt"
node - "$tmp" <<'JS'
const fs = require('fs');
const dir = process.argv[2];
const t = fs.readFileSync(dir + '/prompt.txt', 'utf8'), n = t.length, cut = (a, b) => t.slice(Math.floor(a * n / 5), Math.floor(b * n / 5));
const m = [{ role: 'system', content: cut(0, 1) }];
for (let i = 1; i < 4; i++) m.push({ role: 'user', content: cut(i, i + 0.5) }, { role: 'assistant', content: cut(i + 0.5, i + 1) });
m.push({ role: 'user', content: cut(4, 5) });
const chat = JSON.stringify({ model: 'qwen3', messages: m, max_tokens: 16 });
fs.writeFileSync(dir + '/chat_10k_utf8.json', chat);
fs.writeFileSync(dir + '/chat_10k_escaped.json', chat.replace(/[\u0080-\uffff]/g, (c) => '\\u' + c.charCodeAt(0).toString(16).padStart(4, '0')));
fs.writeFileSync(dir + '/completions_3000_ids.json', JSON.stringify({ model: 'qwen3', prompt: Array.from({ length: 3000 }, (_, i) => (i * 7919) % 151643), max_tokens: 16 }));
fs.writeFileSync(dir + '/chat_small.json', JSON.stringify({ model: 'qwen3', messages: [{ role: 'system', content: 'You are a helpful assistant.' }, { role: 'user', content: 'What is the capital of France?' }], temperature: 0.7, stream: true }));
JS
build/bench/json --runs "$runs" "$tmp"/chat_10k_utf8.json "$tmp"/chat_10k_escaped.json \
	"$tmp"/completions_3000_ids.json "$tmp"/chat_small.json | sed "s|$tmp/||" >"$out"
node - "$out" <<'JS'
const rows = require('fs').readFileSync(process.argv[2], 'utf8').trim().split('\n').map(JSON.parse);
console.log('| body | bytes | strict reader | cJSON µs | json_parse µs | speed-up |');
console.log('| --- | ---: | --- | ---: | ---: | ---: |');
for (const r of rows)
	console.log(`| ${r.file} | ${r.bytes} | ${r.strict ? 'read' : 'left to cJSON'} | ${r.cjson_us.toFixed(2)} | ${r.json_parse_us.toFixed(2)} | ${(r.cjson_us / r.json_parse_us).toFixed(1)}x |`);
JS
