// SPDX-License-Identifier: Apache-2.0
// The reference tokenizer: Hugging Face tokenizers 0.22 (npm @anush008/tokenizers) over a
// tokenizer.json, with the same command line and JSONL format as build/kvtok.
//   node tests/js/ref_tokenize.mjs --tokenizer PATH [FILE] < in.jsonl > out.jsonl
//     PATH is a tokenizer.json or a directory holding tokenizer.json (and tokenizer_config.json).
//     {"text": ..., "add_special_tokens": true|false} per line (other keys ignored; default
//     false) -> {"ids": [...]} per line, same order; each line is decoded as UTF-8 with U+FFFD
//     replacement first (ill-formed bytes become U+FFFD, as a JSON decoder in front of the engine
//     would hand them over).
//     add_special_tokens with a directory whose tokenizer_config.json sets add_bos_token or
//     add_eos_token: the reference knows only tokenizer.json, so the ids are made here as
//     transformers makes them (it rebuilds the post-processor from those keys as
//     "[bos] $A [eos]": DeepSeek V3's file adds no BOS, its config asks for one): the text is
//     encoded without special tokens and the bos_token / eos_token ids put around it.
//   node tests/js/ref_tokenize.mjs --tokenizer PATH --bench FILE [--runs N]
//     encodes FILE's text repeatedly and prints JSON with the median microseconds per encode.
import { existsSync, readFileSync, statSync } from 'node:fs';
import tk from '@anush008/tokenizers';

const args = process.argv.slice(2);
const take = (name) => {
	const i = args.indexOf(name);
	if (i < 0) return undefined;
	const v = args[i + 1];
	args.splice(i, 2);
	return v;
};
const path = take('--tokenizer');
const benchFile = take('--bench');
const runs = Number(take('--runs') ?? 200);
if (!path) {
	console.error('usage: ref_tokenize.mjs --tokenizer PATH [FILE] | --bench FILE [--runs N]');
	process.exit(2);
}
const rss0 = process.memoryUsage().rss;
const tl0 = process.hrtime.bigint();
const isDir = statSync(path).isDirectory();
const tok = tk.Tokenizer.fromFile(isDir ? `${path}/tokenizer.json` : path);
const loadMs = Number(process.hrtime.bigint() - tl0) / 1e6;
const loadRss = process.memoryUsage().rss - rss0;
// tokenizer_config.json's override of the post-processor (see above), or null
let around = null;
if (isDir && existsSync(`${path}/tokenizer_config.json`)) {
	const cfg = JSON.parse(readFileSync(`${path}/tokenizer_config.json`, 'utf8'));
	if (typeof cfg.add_bos_token === 'boolean' || typeof cfg.add_eos_token === 'boolean') {
		const file = JSON.parse(readFileSync(`${path}/tokenizer.json`, 'utf8'));
		const idOf = (t) => {
			const c = typeof t === 'string' ? t : t?.content;
			const a = file.added_tokens.find((x) => x.content === c);
			const id = a ? a.id : file.model.vocab[c];
			if (id === undefined) throw new Error(`config token ${c} not found`);
			return id;
		};
		around = { before: cfg.add_bos_token ? [idOf(cfg.bos_token)] : [], after: cfg.add_eos_token ? [idOf(cfg.eos_token)] : [] };
	}
}
const encode = async (text, special = false) => {
	if (special && around) {
		const ids = (await tok.encode(text, null, { addSpecialTokens: false })).getIds();
		return [...around.before, ...ids, ...around.after];
	}
	return (await tok.encode(text, null, { addSpecialTokens: special })).getIds();
};

if (benchFile) {
	const text = new TextDecoder('utf-8').decode(readFileSync(benchFile));
	for (let i = 0; i < Math.max(5, runs / 10); i++) await encode(text);
	const t = [];
	const c0 = process.cpuUsage();
	let n = 0;
	for (let i = 0; i < runs; i++) {
		const t0 = process.hrtime.bigint();
		n = (await encode(text)).length;
		t.push(Number(process.hrtime.bigint() - t0) / 1000);
	}
	t.sort((a, b) => a - b);
	const dc = process.cpuUsage(c0); // all of node's threads (the encode runs on a worker thread)
	const cpuMean = (dc.user + dc.system) / runs;
	console.log(JSON.stringify({ bytes: Buffer.byteLength(text), ids: n, runs, median_us: t[runs >> 1], min_us: t[0], p90_us: t[Math.floor(runs * 0.9)], cpu_mean_us: cpuMean, load_rss_bytes: loadRss, load_ms: loadMs }));
} else {
	const data = args.length ? readFileSync(args[0]) : readFileSync(0);
	const dec = new TextDecoder('utf-8');
	const out = [];
	let start = 0;
	while (start < data.length) {
		let end = data.indexOf(10, start);
		if (end < 0) end = data.length;
		const line = dec.decode(data.subarray(start, end)).replace(/\r$/, '');
		start = end + 1;
		if (!line.trim()) continue;
		let obj;
		try {
			obj = JSON.parse(line);
		} catch {
			out.push(JSON.stringify({ error: 'not a JSON object' }));
			continue;
		}
		if (typeof obj?.text !== 'string') {
			out.push(JSON.stringify({ error: 'expected {"text": string}' }));
			continue;
		}
		out.push(JSON.stringify({ ids: await encode(obj.text, obj.add_special_tokens === true) }));
	}
	process.stdout.write(out.join('\n') + (out.length ? '\n' : ''));
}
