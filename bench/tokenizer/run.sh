#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Tokenizer benchmark: the same 10 KB texts (bench/tokenizer/prompt.mjs: the mixed prompt, and with
# --english 10 KB of English prose on one line) through build/kvtok (C) and through the reference
# (Hugging Face tokenizers 0.22 via npm @anush008/tokenizers), in one run, for each tokenizer given.
# Prints a table per tokenizer (median / min / p90 µs per encode, speed-up, loaded-tokenizer
# memory) and writes JSON to build/bench/tokenizer.json (or $OUT). Checks first that both give the
# same ids. kvtok runs twice a round: plain, and with --cache (each encode through a new piece
# cache, as the daemon's router meets a text it has not seen; the reference keeps its own word
# cache warm across runs).
# Usage: bash bench/tokenizer/run.sh [--tokenizer PATH]... [--families "F1 F2" | --all]
#                                    [--base KVTOK] [RUNS_C] [RUNS_REF]
#   PATH: a tokenizer.json or a models/<family> directory (default: models/qwen3/tokenizer.json,
#   or $KVTOK_TOKENIZER); --families F: models/F for each; --all: every models/<family>;
#   --base KVTOK: a second kvtok binary (e.g. a build of another commit) measured beside build/kvtok
#   in the same run, its runs alternating with build/kvtok's; RUNS_C / RUNS_REF default 2000 / 200.
set -euo pipefail
cd "$(dirname "$0")/../.."
toks=() base=""
while [ $# -gt 0 ]; do
	case "$1" in
	--tokenizer) toks+=("$2"); shift 2 ;;
	--families) for f in $2; do toks+=("models/$f"); done; shift 2 ;;
	--all) for f in models/*/; do toks+=("${f%/}"); done; shift ;;
	--base) base=$2; shift 2 ;;
	*) break ;;
	esac
done
[ ${#toks[@]} -gt 0 ] || toks=("${KVTOK_TOKENIZER:-models/qwen3/tokenizer.json}")
out=${OUT:-build/bench/tokenizer.json}
runs_c=${1:-2000}
runs_ref=${2:-200}
tmp=$(mktemp -d /tmp/kvs-tokbench.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$(dirname "$out")"

node bench/tokenizer/prompt.mjs >"$tmp/mixed.txt"
node bench/tokenizer/prompt.mjs --english >"$tmp/english.txt"
for x in mixed english; do
	node -e 'process.stdout.write(JSON.stringify({text: require("fs").readFileSync(process.argv[1], "utf8")}) + "\n")' \
		"$tmp/$x.txt" >"$tmp/$x.jsonl"
done
i=0
for tok in "${toks[@]}"; do
	for x in mixed english; do
		build/kvtok --tokenizer "$tok" <"$tmp/$x.jsonl" >"$tmp/c.ids"
		node tests/js/ref_tokenize.mjs --tokenizer "$tok" "$tmp/$x.jsonl" >"$tmp/ref.ids"
		if cmp -s "$tmp/c.ids" "$tmp/ref.ids"; then same=true; else same=false; fi
		: >"$tmp/c.$i.json"
		: >"$tmp/b.$i.json"
		: >"$tmp/k.$i.json"
		# build/kvtok and --base alternate in rounds so both see the same machine
		for r in 1 2 3 4; do
			build/kvtok --tokenizer "$tok" --bench "$tmp/$x.txt" --runs $(((runs_c + 3) / 4)) >>"$tmp/c.$i.json"
			build/kvtok --tokenizer "$tok" --bench "$tmp/$x.txt" --runs $(((runs_c + 3) / 4)) --cache \
				>>"$tmp/k.$i.json"
			[ -z "$base" ] || "$base" --tokenizer "$tok" --bench "$tmp/$x.txt" --runs $(((runs_c + 3) / 4)) >>"$tmp/b.$i.json"
		done
		node tests/js/ref_tokenize.mjs --tokenizer "$tok" --bench "$tmp/$x.txt" --runs "$runs_ref" >"$tmp/r.$i.json"
		printf '%s\t%s\t%s\t%s\n' "$tok" "$x" "$same" "$i" >>"$tmp/index.tsv"
		i=$((i + 1))
	done
done

node - "$tmp" "$out" "$base" <<'JS'
const fs = require('fs');
const [tmp, out, base] = process.argv.slice(2);
const mb = (b) => (b / 1048576).toFixed(1) + ' MB';
const row = (a) => console.log('| ' + a.join(' | ') + ' |');
// the rounds of one binary: median of the round medians, min of the mins, the last round's rest
const rounds = (p) => {
	const rs = fs.readFileSync(p, 'utf8').split('\n').filter((l) => l.trim()).map((l) => JSON.parse(l));
	if (!rs.length) return null;
	const med = rs.map((r) => r.median_us).sort((a, b) => a - b);
	return { ...rs[rs.length - 1], median_us: med[med.length >> 1], min_us: Math.min(...rs.map((r) => r.min_us)),
		p90_us: Math.max(...rs.map((r) => r.p90_us)), rounds: rs.length };
};
const results = [];
let lastTok = null;
for (const line of fs.readFileSync(`${tmp}/index.tsv`, 'utf8').split('\n').filter(Boolean)) {
	const [tok, text, same, i] = line.split('\t');
	const c = rounds(`${tmp}/c.${i}.json`), b = base ? rounds(`${tmp}/b.${i}.json`) : null;
	const k = rounds(`${tmp}/k.${i}.json`);
	const r = JSON.parse(fs.readFileSync(`${tmp}/r.${i}.json`, 'utf8'));
	if (tok !== lastTok) {
		console.log(`\n### ${tok}\n`);
		row(['text', 'tokenizer', 'median µs', 'min µs', 'p90 µs', 'MB/s (median)', 'speed-up (median)', 'load ms', 'memory after load']);
		row(['---', '---', '---:', '---:', '---:', '---:', '---:', '---:', '---']);
		lastTok = tok;
	}
	const name = `${text} (${c.bytes} B, ${c.ids} ids, ids equal: ${same})`;
	const one = (label, x, rss) => row([name, label, x.median_us.toFixed(1), x.min_us.toFixed(1), x.p90_us.toFixed(1),
		(x.bytes / x.median_us).toFixed(1), (r.median_us / x.median_us).toFixed(0) + 'x', x.load_ms.toFixed(0), rss]);
	one('kvtok (C)', c, `${mb(c.tokenizer_bytes)} heap (RSS +${mb(c.load_rss_bytes)})`);
	one('kvtok (C), a new piece cache each encode (--cache)', k, '');
	if (b) one(`base ${base}`, b, `${mb(b.tokenizer_bytes)} heap (RSS +${mb(b.load_rss_bytes)})`);
	row([name, 'HF tokenizers 0.22 (node)', r.median_us.toFixed(1), r.min_us.toFixed(1), r.p90_us.toFixed(1),
		(r.bytes / r.median_us).toFixed(1), '1x', r.load_ms.toFixed(0), `RSS +${mb(r.load_rss_bytes)}`]);
	results.push({ tokenizer: tok, text, ids_equal: same === 'true', kvtok: c, kvtok_cache: k, base: b, reference: r,
		speedup_median: r.median_us / c.median_us, speedup_min: r.min_us / c.min_us,
		speedup_cache_median: r.median_us / k.median_us, speedup_cache_min: r.min_us / k.min_us });
}
fs.writeFileSync(out, JSON.stringify({ date: new Date().toISOString(), results }, null, 1) + '\n');
console.log(`\nwrote ${out}`);
JS
