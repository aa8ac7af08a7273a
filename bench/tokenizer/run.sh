#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Tokenizer benchmark: the same 10 KB mixed prompt (bench/tokenizer/prompt.mjs) through build/kvtok
# (C) and through the reference (Hugging Face tokenizers 0.22 via npm @anush008/tokenizers), in one
# run. Prints a table (median / min / p90 µs per encode, speed-up, loaded-tokenizer memory) and
# writes JSON to build/bench/tokenizer.json (or $OUT). Checks first that both give the same ids.
# Usage: bash bench/tokenizer/run.sh [RUNS_C] [RUNS_REF]     (defaults 2000 and 200)
set -euo pipefail
cd "$(dirname "$0")/../.."
tokjson=${KVTOK_TOKENIZER:-models/qwen3/tokenizer.json}
out=${OUT:-build/bench/tokenizer.json}
runs_c=${1:-2000}
runs_ref=${2:-200}
tmp=$(mktemp -d /tmp/kvs-tokbench.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$(dirname "$out")"

node bench/tokenizer/prompt.mjs >"$tmp/prompt.txt"
node -e 'process.stdout.write(JSON.stringify({text: require("fs").readFileSync(process.argv[1], "utf8")}) + "\n")' \
	"$tmp/prompt.txt" >"$tmp/prompt.jsonl"
build/kvtok --tokenizer "$tokjson" <"$tmp/prompt.jsonl" >"$tmp/c.ids"
node tests/js/ref_tokenize.mjs --tokenizer "$tokjson" "$tmp/prompt.jsonl" >"$tmp/ref.ids"
if cmp -s "$tmp/c.ids" "$tmp/ref.ids"; then same=true; else same=false; fi

build/kvtok --tokenizer "$tokjson" --bench "$tmp/prompt.txt" --runs "$runs_c" >"$tmp/c.json"
node tests/js/ref_tokenize.mjs --tokenizer "$tokjson" --bench "$tmp/prompt.txt" --runs "$runs_ref" >"$tmp/ref.json"

node - "$tmp/c.json" "$tmp/ref.json" "$same" "$out" <<'JS'
const fs = require('fs');
const [cPath, rPath, same, out] = process.argv.slice(2);
const c = JSON.parse(fs.readFileSync(cPath, 'utf8'));
const r = JSON.parse(fs.readFileSync(rPath, 'utf8'));
const mb = (b) => (b / 1048576).toFixed(1) + ' MB';
const row = (a) => console.log('| ' + a.join(' | ') + ' |');
console.log(`prompt: ${c.bytes} bytes, ${c.ids} ids; ids equal: ${same}`);
row(['tokenizer', 'median µs', 'min µs', 'p90 µs', 'CPU mean µs', 'MB/s (median)', 'load ms', 'memory after load']);
row(['---', '---:', '---:', '---:', '---:', '---:', '---:', '---']);
row(['kvtok (C)', c.median_us.toFixed(1), c.min_us.toFixed(1), c.p90_us.toFixed(1), c.cpu_mean_us.toFixed(1),
	(c.bytes / c.median_us).toFixed(1), c.load_ms.toFixed(0), `${mb(c.tokenizer_bytes)} heap (RSS +${mb(c.load_rss_bytes)})`]);
row(['HF tokenizers 0.22 (node)', r.median_us.toFixed(1), r.min_us.toFixed(1), r.p90_us.toFixed(1), r.cpu_mean_us.toFixed(0),
	(r.bytes / r.median_us).toFixed(1), r.load_ms.toFixed(0), `RSS +${mb(r.load_rss_bytes)}`]);
const ratio = r.median_us / c.median_us;
console.log(`speed-up (median / median): ${ratio.toFixed(0)}x; (min / min): ${(r.min_us / c.min_us).toFixed(0)}x; ` +
	`(CPU mean / CPU mean): ${(r.cpu_mean_us / c.cpu_mean_us).toFixed(0)}x`);
fs.writeFileSync(out, JSON.stringify({ date: new Date().toISOString(), ids_equal: same === 'true', kvtok: c, reference: r,
	speedup_median: ratio, speedup_min: r.min_us / c.min_us, speedup_cpu_mean: r.cpu_mean_us / c.cpu_mean_us }, null, 1) + '\n');
console.log(`wrote ${out}`);
JS
