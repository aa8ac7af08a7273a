// SPDX-License-Identifier: Apache-2.0
// The reference tokenizer: Hugging Face tokenizers 0.22 (npm @anush008/tokenizers) over a
// tokenizer.json, with the same command line and JSONL format as build/kvtok.
//   node tests/js/ref_tokenize.mjs --tokenizer PATH [FILE] < in.jsonl > out.jsonl
//     {"text": ...} per line (other keys ignored) -> {"ids": [...]} per line, same order; each
//     line is decoded as UTF-8 with U+FFFD replacement first (ill-formed bytes become U+FFFD, as a
//     JSON decoder in front of the engine would hand them over).
//   node tests/js/ref_tokenize.mjs --tokenizer PATH --bench FILE [--runs N]
//     encodes FILE's text repeatedly and prints JSON with the median microseconds per encode.
import { readFileSync } from 'node:fs';
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
const tok = tk.Tokenizer.fromFile(path);
const loadMs = Number(process.hrtime.bigint() - tl0) / 1e6;
const loadRss = process.memoryUsage().rss - rss0;
const encode = async (text) => (await tok.encode(text, null, { addSpecialTokens: false })).getIds();

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
		out.push(JSON.stringify({ ids: await encode(obj.text) }));
	}
	process.stdout.write(out.join('\n') + (out.length ? '\n' : ''));
}
