// SPDX-License-Identifier: Apache-2.0
// Verifies the Unicode tables the C tokenizer ships (userspace/prompt/unicode_tables, dumped by
// build/kvunicode) against the reference itself (Hugging Face tokenizers 0.22, npm
// @anush008/tokenizers), code point by code point:
//   1. regex classes: a probe tokenizer (the Qwen2 Split regex, no normalizer, a WordLevel model
//      that turns each piece into one [UNK] with its offsets) shows how the reference splits
//      "a X a", "X X a" and "a X X a"; that gives X's class as the reference's regex engine sees it
//      (letter, number, White_Space, \r\n, other), compared with the C table;
//   2. the contraction rule (?i:'s|'t|'re|'ve|'m|'ll|'d) for every letter, against the C fold table;
//   3. end to end (C classes, NFC data and algorithm): probe lines (X beside letters, digits,
//      spaces, the combining marks U+0301, U+0316, U+0334, U+0345) and every canonical
//      composition known to Node's Unicode (decomposed and composed) are tokenized by build/kvtok
//      and by the reference; ids must be equal (decode is injective, so any NFC difference shows);
//   4. regex properties: every General_Category \p{..}, \s \d \w and their negations, through the
//      split-regex engine (build/bench/regex) against the reference's Oniguruma.
// Prints TAP lines (ok / not ok) with the first differences; exits 1 on any difference.
// Usage (repo root, after make deps && make):
//   node tests/js/verify_unicode.mjs [--tokenizer PATH] [--sample K] [--skip-e2e] [--skip-props]
//   --sample K: every K-th code point, plus every code point where the C class changes, every
//   letter that folds to ASCII and every code point NFC may change (default: all 1,112,063).
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '../..');
const args = process.argv.slice(2);
const tokIdx = args.indexOf('--tokenizer');
const tokPath = path.resolve(root, tokIdx >= 0 ? args[tokIdx + 1] : 'models/qwen3/tokenizer.json');
const skipE2e = args.includes('--skip-e2e');
const skipProps = args.includes('--skip-props');
const sIdx = args.indexOf('--sample');
const sample = sIdx >= 0 ? Number(args[sIdx + 1]) : 1;
const tk = createRequire(path.join(root, 'tests/js/package.json'))('@anush008/tokenizers');

const S = (c) => String.fromCodePoint(c);
const isScalar = (c) => c < 0xd800 || (c > 0xdfff && c < 0x110000);
const hex = (c) => 'U+' + c.toString(16).toUpperCase().padStart(4, '0');
let failures = 0;

// --- expected: the C tables ---
const dump = execFileSync(path.join(root, 'build/kvunicode'), { maxBuffer: 1 << 24 });
const CP = 0x110000;
const cls = (c) => dump[c] & 3;
const nfcFlag = (c) => (dump[c] & 4) !== 0;
const foldOf = (c) => dump[CP + c];
const expectClass = (c) => (c === 10 || c === 13 ? 'NL' : ['O', 'L', 'N', 'WS'][cls(c)]);
const report = (what, n, diffs) => {
	console.log(`${diffs.length ? 'not ok' : 'ok'} - ${what}: ${n} probed, ${diffs.length} differ`);
	for (const d of diffs.slice(0, 20)) console.log('#   ' + d);
	failures += diffs.length;
};

// --- probe tokenizer: pieces as offsets (in code points) ---
const tokJson = JSON.parse(readFileSync(tokPath, 'utf8'));
const split = tokJson.pre_tokenizer.pretokenizers[0];
const probe = tk.Tokenizer.fromString(
	JSON.stringify({
		version: '1.0', truncation: null, padding: null, added_tokens: [], normalizer: null,
		pre_tokenizer: split, post_processor: null, decoder: null,
		model: { type: 'WordLevel', vocab: { '[UNK]': 0 }, unk_token: '[UNK]' },
	}),
);
// Runs many probes in one encode: each probe followed by the separator "1" (a number is always a
// piece of its own and every probe ends in a letter, so the probes cannot interact). Returns, per
// probe, its pieces' lengths in code points.
async function pieces(probes) {
	const out = [];
	for (let i = 0; i < probes.length; i += 2000) {
		const batch = probes.slice(i, i + 2000);
		const starts = [];
		let pos = 0, text = '';
		for (const p of batch) {
			starts.push(pos);
			text += p + '1';
			pos += [...p].length + 1;
		}
		const offs = (await probe.encode(text, null, { addSpecialTokens: false })).getOffsets();
		let k = 0;
		for (let b = 0; b < batch.length; b++) {
			const end = starts[b] + [...batch[b]].length;
			const lens = [];
			while (k < offs.length && offs[k][1] <= end) lens.push(offs[k][1] - offs[k][0]), k++;
			k++; // the separator
			out.push(lens);
		}
	}
	return out;
}

const all = [];
for (let c = 0; c < CP; c++) {
	if (!isScalar(c) || c === 0x31 /* the separator */) continue;
	if (sample > 1 && c % sample && cls(c) === cls(c - 1) && cls(c) === cls(c + 1) && !foldOf(c) && !nfcFlag(c)) continue;
	all.push(c);
}
{
	const t1 = await pieces(all.map((c) => 'a' + S(c) + 'a'));
	const t2 = await pieces(all.map((c) => S(c) + S(c) + 'a'));
	const t3 = await pieces(all.map((c) => 'a' + S(c) + S(c) + 'a'));
	const diffs = [];
	for (let i = 0; i < all.length; i++) {
		let got;
		if (t1[i].length === 1) got = 'L';
		else if (t1[i].length === 2) got = t2[i][0] === 2 ? 'O' : 'WS';
		else got = t3[i].length === 4 ? 'N' : 'NL';
		const want = expectClass(all[i]);
		if (got !== want) diffs.push(`${hex(all[i])} reference ${got}, tables ${want}`);
	}
	report('regex classes (\\p{L}, \\p{N}, \\s, \\r\\n) of the C table against the reference', `${all.length} code points`, diffs);
}

// --- contractions: for every letter X, which of 's 't 'm 'd 're 've 'll X stands for ---
{
	const f = (c) => String.fromCharCode(foldOf(c));
	const letters = all.filter((c) => cls(c) === 1);
	const shapes = [
		[(x) => "'" + x + 'b', (c) => 'stmd'.includes(f(c)) && f(c).length === 1, [2, 1]],
		[(x) => "'" + x + 'eb', (c) => 'rv'.includes(f(c)) && f(c).length === 1, [3, 1]],
		[(x) => "'" + x + 'lb', (c) => f(c) === 'l', [3, 1]],
		[(x) => "'r" + x + 'b', (c) => f(c) === 'e', [3, 1]],
		[(x) => "'v" + x + 'b', (c) => f(c) === 'e', [3, 1]],
		[(x) => "'l" + x + 'b', (c) => f(c) === 'l', [3, 1]],
	];
	const diffs = [];
	for (const [mk, want, shape] of shapes) {
		const got = await pieces(letters.map((c) => mk(S(c))));
		for (let i = 0; i < letters.length; i++) {
			const isC = got[i].length === 2 && got[i][0] === shape[0] && got[i][1] === shape[1];
			if (isC !== want(letters[i])) diffs.push(`${hex(letters[i])} in ${JSON.stringify(mk('X'))}: reference ${isC}`);
		}
	}
	report('contraction rule (case folding) of the C table against the reference', `${letters.length} letters x ${shapes.length} shapes`, diffs);
}

// --- end to end through build/kvtok ---
if (!skipE2e) {
	const lines = [];
	const per = 128;
	const one = (x) => `a${x}a ${x}${x}a 9${x}${x}9 ${x}\u0301 a${x}\u0334 a\u0345${x}\u0316 ${x}\u0316\u0301 \u1100${x} \uac00${x}`;
	const e2e = sample > 1 ? all.filter((c) => nfcFlag(c) || c % (sample * 16) === 0) : all;
	for (let i = 0; i < e2e.length; i += per) lines.push(e2e.slice(i, i + per).map((c) => one(S(c))).join('\n'));
	const comps = [];
	for (let c = 0; c < 0x110000; c++) {
		if (!isScalar(c)) continue;
		const d = S(c).normalize('NFD');
		if (d !== S(c)) comps.push(`${d}|${S(c)}|${d}\u0334|x${S(c).normalize('NFC')}`);
	}
	for (let i = 0; i < comps.length; i += per) lines.push(comps.slice(i, i + per).join(' '));
	const dir = mkdtempSync(path.join(tmpdir(), 'kvs-verify-'));
	try {
		writeFileSync(path.join(dir, 'in.jsonl'), lines.map((t) => JSON.stringify({ text: t })).join('\n') + '\n');
		const opts = { maxBuffer: 1 << 30, cwd: root };
		const c = execFileSync(path.join(root, 'build/kvtok'), ['--tokenizer', tokPath], { ...opts, input: readFileSync(path.join(dir, 'in.jsonl')) }).toString().split('\n');
		const r = execFileSync('node', ['tests/js/ref_tokenize.mjs', '--tokenizer', tokPath, path.join(dir, 'in.jsonl')], opts).toString().split('\n');
		const diffs = [];
		for (let i = 0; i < lines.length; i++)
			if (c[i] !== r[i]) diffs.push(`line ${i + 1}: ${JSON.stringify(lines[i].slice(0, 100))}…`);
		report('end to end (C classes and NFC) through kvtok against the reference', `${lines.length} lines (${e2e.length} code points, ${comps.length} decomposable)`, diffs);
	} finally {
		rmSync(dir, { recursive: true, force: true });
	}
}

// --- regex properties: every \p{..} the split-regex engine knows, and \s \d \w, through the
// engine itself (build/bench/regex --split, userspace/prompt/regex over the unicode_prop table)
// against the reference's Oniguruma, on strings of the probed code points one after another
// (a one-code-point pattern matches each member on its own). The sample (--sample K): every K-th
// code point and every code point where Node's General_Category changes, with its neighbours.
if (!skipProps) {
	const { refMatcher } = await import('./ref_split.mjs');
	const GC = ['Lu', 'Ll', 'Lt', 'Lm', 'Lo', 'Mn', 'Mc', 'Me', 'Nd', 'Nl', 'No', 'Pc', 'Pd', 'Ps', 'Pe', 'Pi', 'Pf', 'Po',
		'Sm', 'Sc', 'Sk', 'So', 'Zs', 'Zl', 'Zp', 'Cc', 'Cf', 'Co', 'Cn'];
	const props = [...GC.map((g) => `\\p{${g}}`), '\\p{L}', '\\p{M}', '\\p{N}', '\\p{P}', '\\p{S}', '\\p{Z}', '\\p{C}',
		'\\p{LC}', '\\P{L}', '\\s', '\\d', '\\w', '\\S', '\\W', '.'];
	let cps = [];
	if (sample > 1) {
		const gcRe = GC.slice(0, -1).map((g) => [g, new RegExp(`^\\p{gc=${g}}$`, 'u')]);
		const gcAt = (c) => {
			const x = S(c);
			for (const [g, re] of gcRe) if (re.test(x)) return g;
			return 'Cn';
		};
		const keep = new Set();
		let prev = null;
		for (let c = 0; c < CP; c++) {
			if (!isScalar(c)) continue;
			if (c % sample === 0) keep.add(c);
			if (c % 16 === 0 || c < 0x3400) {
				// coarse scan, fine where blocks are mixed
				const g = gcAt(c);
				if (g !== prev) for (let d = Math.max(0, c - 16); d <= c; d++) if (isScalar(d)) keep.add(d);
				prev = g;
			}
		}
		cps = [...keep].sort((a, b) => a - b);
	} else {
		for (let c = 0; c < CP; c++) if (isScalar(c)) cps.push(c);
	}
	const per = 8192;
	const texts = [];
	for (let i = 0; i < cps.length; i += per) texts.push(String.fromCodePoint(...cps.slice(i, i + per)));
	const hexIn = texts.map((t) => Buffer.from(t).toString('hex')).join('\n') + '\n';
	for (const p of props) {
		const c = execFileSync(path.join(root, 'build/bench/regex'), ['--split', '--regex', p], { input: hexIn, maxBuffer: 1 << 30 })
			.toString()
			.split('\n');
		const ref = refMatcher(p);
		const diffs = [];
		for (let i = 0; i < texts.length; i++) {
			const want = (await ref(texts[i])).map(([a, b]) => `${a},${b}`).join(' ');
			if (want === c[i]) continue;
			// the first code point where they differ
			const w = new Set(want.split(' ')), g = new Set(c[i].split(' '));
			let off = 0;
			for (const ch of texts[i]) {
				const k = `${off},${off + Buffer.byteLength(ch)}`;
				if (w.has(k) !== g.has(k)) {
					diffs.push(`${hex(ch.codePointAt(0))}: reference ${w.has(k) ? 'in' : 'not in'} ${p}`);
					if (diffs.length > 20) break;
				}
				off += Buffer.byteLength(ch);
			}
		}
		report(`regex property ${p} of the engine against the reference`, `${cps.length} code points`, diffs);
	}
}
console.log(`# ${failures ? `FAIL: ${failures} differences` : 'OK: the C tables agree with the reference'}`);
process.exit(failures ? 1 : 0);
