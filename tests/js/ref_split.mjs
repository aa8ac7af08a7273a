// SPDX-License-Identifier: Apache-2.0
// The reference for userspace/prompt/regex: the matches of a Split regex as Hugging Face tokenizers
// 0.22 (npm @anush008/tokenizers, Oniguruma on Unicode 16) finds them. A probe tokenizer.json per
// pattern: no normalizer, the Split pre-tokenizer alone, a WordLevel model with only an unk token
// (each piece becomes one [UNK] with its offsets). Two probes, behaviour Isolated (every piece:
// matches and the gaps between them) and Removed (the gaps only): the matches are the Isolated
// pieces that are not Removed pieces. Empty matches make no piece, so they are not reported.
//   node tests/js/ref_split.mjs --pattern NAME|--regex RE [FILE] < in.jsonl > out.jsonl
//     {"text": ...} per line -> {"m": [[start, end], ...]} per line (byte offsets in the UTF-8 of
//     the text, non-empty matches in order). A line that is not valid UTF-8 is read with U+FFFD
//     replacement first. NAME: llama3, qwen2, deepseek_b1, deepseek_b2, deepseek_b3, gptoss, nemo
//     (read from models/<family>/tokenizer.json), or "list" to print them as JSON.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '../..');
const tk = createRequire(path.join(root, 'tests/js/package.json'))('@anush008/tokenizers');

// Family -> [tokenizer.json, index of the Split in its pre-tokenizer Sequence]
const FAMILIES = {
	llama3: ['llama3_2', 0],
	qwen2: ['qwen3', 0],
	deepseek_b1: ['deepseek_v3', 0],
	deepseek_b2: ['deepseek_v3', 1],
	deepseek_b3: ['deepseek_v3', 2],
	gptoss: ['gptoss', 0],
	nemo: ['mistral_nemo', 0],
};

const preTokenizers = new Map(); // model -> its pre_tokenizer (the files are large: read once)
export function familyPattern(name) {
	const f = FAMILIES[name];
	if (!f) throw new Error(`unknown pattern name ${name} (${Object.keys(FAMILIES).join(', ')})`);
	if (!preTokenizers.has(f[0])) {
		// the pre_tokenizer sits before post_processor and the vocabulary: parse that part alone
		const text = readFileSync(path.join(root, 'models', f[0], 'tokenizer.json'), 'utf8');
		const a = text.search(/"pre_tokenizer"\s*:/), b = text.search(/,\s*"post_processor"\s*:/);
		const pt = a >= 0 && b > a ? JSON.parse(text.slice(text.indexOf(':', a) + 1, b)) : JSON.parse(text).pre_tokenizer;
		preTokenizers.set(f[0], pt);
	}
	const j = { pre_tokenizer: preTokenizers.get(f[0]) };
	const split = j.pre_tokenizer.type === 'Sequence' ? j.pre_tokenizer.pretokenizers[f[1]] : j.pre_tokenizer;
	if (split.type !== 'Split' || !split.pattern.Regex) throw new Error(`${name}: not a Split regex`);
	return split.pattern.Regex;
}
export const familyNames = Object.keys(FAMILIES);

const probe = (regex, behavior) =>
	tk.Tokenizer.fromString(
		JSON.stringify({
			version: '1.0', truncation: null, padding: null, added_tokens: [], normalizer: null,
			pre_tokenizer: { type: 'Split', pattern: { Regex: regex }, behavior, invert: false },
			post_processor: null, decoder: null,
			model: { type: 'WordLevel', vocab: { '[UNK]': 0 }, unk_token: '[UNK]' },
		}),
	);

// A matcher: text -> [[byteStart, byteEnd], ...] of the non-empty matches.
export function refMatcher(regex) {
	const iso = probe(regex, 'Isolated');
	const rem = probe(regex, 'Removed');
	return async (text) => {
		if (!text.length) return [];
		const [a, b] = await Promise.all([
			iso.encode(text, null, { addSpecialTokens: false }),
			rem.encode(text, null, { addSpecialTokens: false }),
		]);
		const gaps = new Set(b.getOffsets().map(([s, e]) => `${s},${e}`));
		// offsets count code points: to bytes
		const cps = [...text];
		const byteAt = new Array(cps.length + 1);
		byteAt[0] = 0;
		for (let i = 0; i < cps.length; i++) byteAt[i + 1] = byteAt[i] + Buffer.byteLength(cps[i]);
		return a
			.getOffsets()
			.filter(([s, e]) => !gaps.has(`${s},${e}`))
			.map(([s, e]) => [byteAt[s], byteAt[e]]);
	};
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
	const args = process.argv.slice(2);
	const take = (name) => {
		const i = args.indexOf(name);
		if (i < 0) return undefined;
		const v = args[i + 1];
		args.splice(i, 2);
		return v;
	};
	const name = take('--pattern');
	const re = take('--regex');
	if (name === 'list') {
		console.log(JSON.stringify(Object.fromEntries(familyNames.map((n) => [n, familyPattern(n)]))));
		process.exit(0);
	}
	if (!name === !re) {
		console.error('usage: ref_split.mjs --pattern NAME|--regex RE [FILE] < in.jsonl');
		process.exit(2);
	}
	const match = refMatcher(re ?? familyPattern(name));
	const data = args.length ? readFileSync(args[0]) : readFileSync(0);
	const dec = new TextDecoder('utf-8');
	const out = [];
	for (const raw of dec.decode(data).split('\n')) {
		const line = raw.replace(/\r$/, '');
		if (!line.trim()) continue;
		out.push(JSON.stringify({ m: await match(JSON.parse(line).text) }));
	}
	process.stdout.write(out.join('\n') + (out.length ? '\n' : ''));
}
