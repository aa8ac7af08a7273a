// SPDX-License-Identifier: Apache-2.0
// Writes the split-regex parity corpus as JSONL to stdout: {"cat": CATEGORY, "text": STRING} per
// line, deterministic for a seed. It is the tokenizer corpus (tests/js/gen_corpus.mjs at the same
// seed and scale; its ill-formed lines read with U+FFFD replacement, since the reference only sees
// well-formed text) plus categories aimed at the regex engine:
//   u15_16       letters, marks and digits assigned in Unicode 15 and 16 (U+1C89, U+A7CB, Garay...)
//   gc_mix       random strings over a pool with members of every General_Category
//   boundary     each code point where the General_Category changes, beside letters, digits,
//                spaces and punctuation (with --boundary-every K: every K-th boundary)
//   prefixes     every prefix and every suffix (at code point boundaries) of tricky strings:
//                the end of the text is where lookahead and backtracking differ
//   contractions 's 't 're 've 'm 'll 'd in every case mix, with U+017F and U+212A
//   ws_runs      runs of every White_Space character, \r\n, before and after other characters
// Usage: node tests/js/gen_regex_corpus.mjs [--seed N] [--scale K] [--boundary-every K] [--max-len L]
//   --max-len L: leave out strings longer than L UTF-16 units (the long runs, for a quick run)
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const args = process.argv.slice(2);
const opt = (name, def) => {
	const i = args.indexOf(name);
	return i >= 0 ? Number(args[i + 1]) : def;
};
const seed = opt('--seed', 1);
const scale = opt('--scale', 1);
const every = opt('--boundary-every', 1);
const maxLen = opt('--max-len', Infinity);

let state = (seed * 2654435761) >>> 0;
const rnd = () => {
	state = (state + 0x6d2b79f5) >>> 0;
	let t = state;
	t = Math.imul(t ^ (t >>> 15), t | 1);
	t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
	return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
};
const ri = (n) => Math.floor(rnd() * n);
const pick = (a) => a[ri(a.length)];
const rep = (n, f) => Array.from({ length: n }, f).join('');
const N = (n) => Math.max(1, Math.round(n * scale));
const S = (c) => String.fromCodePoint(c);

const lines = [];
const emit = (cat, text) => text.length <= maxLen && lines.push(JSON.stringify({ cat, text: text.toWellFormed() }));

// --- the tokenizer corpus, well-formed
const base = execFileSync('node', [path.join(here, 'gen_corpus.mjs'), '--seed', String(seed), '--scale', String(scale)], {
	maxBuffer: 1 << 30,
	stdio: ['ignore', 'pipe', 'ignore'],
});
const dec = new TextDecoder('utf-8');
for (const line of dec.decode(base).split('\n')) {
	if (!line) continue;
	const o = JSON.parse(line);
	emit(o.cat, o.text);
}

// --- General_Category of every code point, as Node's Unicode sees it (newer than the
// reference's 16.0: the differences are exactly what the boundary strings should probe)
const GC = ['Lu', 'Ll', 'Lt', 'Lm', 'Lo', 'Mn', 'Mc', 'Me', 'Nd', 'Nl', 'No', 'Pc', 'Pd', 'Ps', 'Pe', 'Pi', 'Pf', 'Po',
	'Sm', 'Sc', 'Sk', 'So', 'Zs', 'Zl', 'Zp', 'Cc', 'Cf', 'Co', 'Cn'];
const gcIdx = new Uint8Array(0x110000).fill(GC.length - 1); // Cn unless found
{
	let all = '';
	const chunk = [];
	for (let c = 0; c < 0x110000; c++) {
		if (c >= 0xd800 && c <= 0xdfff) continue;
		chunk.push(c);
		if (chunk.length === 4096 || c === 0x10ffff) {
			all += String.fromCodePoint(...chunk);
			chunk.length = 0;
		}
	}
	for (let g = 0; g < GC.length - 1; g++)
		for (const m of all.matchAll(new RegExp(`\\p{gc=${GC[g]}}+`, 'gu')))
			for (const ch of m[0]) gcIdx[ch.codePointAt(0)] = g;
}
const byGc = new Map(GC.map((g) => [g, []]));
const boundaries = [];
let prev = -1;
for (let c = 0; c < 0x110000; c++) {
	if (c >= 0xd800 && c <= 0xdfff) continue;
	const g = gcIdx[c];
	if (g !== prev) boundaries.push(c);
	prev = g;
	const l = byGc.get(GC[g]);
	if (l.length < 4000 && (c < 0x3000 || rnd() < 0.05)) l.push(c);
}

// --- Unicode 15 and 16 additions (ranges from the UCD DerivedAge of 15.0 and 16.0)
const newer = [[0x1c89, 0x1c8a], [0xa7cb, 0xa7cd], [0xa7da, 0xa7dc], [0x10d40, 0x10d65], [0x10d69, 0x10d85], [0x10d8e, 0x10d8f],
	[0x10ec2, 0x10ec4], [0x10efc, 0x10eff], [0x113a0, 0x113d5], [0x11bc0, 0x11be1], [0x11bf0, 0x11bf9], [0x11f00, 0x11f59],
	[0x16100, 0x16139], [0x16d40, 0x16d79], [0x1cc00, 0x1ccf9], [0x1e4d0, 0x1e4f9], [0x1e5d0, 0x1e5fa], [0x1e5ff, 0x1e5ff],
	[0x31350, 0x323af], [0x2ebf0, 0x2ee5d], [0x1f8b0, 0x1f8bb], [0x0cf3, 0x0cf3], [0x1e030, 0x1e08f], [0x0897, 0x0897]];
const newerCp = () => {
	const [a, b] = pick(newer);
	return S(a + ri(b - a + 1));
};
const ctx = [' ', '', '', 'a', 'A', '1', "'", '.', '\n', '\r\n', '  ', '\u00e9', '\u4e2d', '\u0301'];
for (let i = 0; i < N(600); i++) emit('u15_16', rep(1 + ri(12), () => newerCp() + (rnd() < 0.4 ? pick(ctx) : '')));

// --- a pool with members of every category
const pool = [];
for (const g of GC) {
	const l = byGc.get(g);
	for (let k = 0; k < 12 && l.length; k++) pool.push(S(l[ri(l.length)]));
}
pool.push(' ', ' ', '\t', '\n', '\r', '\r\n', "'", "'s", "'T", "'ll", '/', '//', 'a', 'Z', '9', '\u017f', '\u212a', '\u4e00',
	'\u9fa5', '\u9fa6', '\u3040', '\u303f', '\u309f', '\u30a0', '\u30ff', '\u3100', '\u01c5', '\u02b0', '\u0301');
for (let i = 0; i < N(1500); i++) emit('gc_mix', rep(1 + ri(24), () => pick(pool)));

// --- class boundaries
for (let b = 0; b < boundaries.length; b += every) {
	const c = boundaries[b];
	const x = S(c), y = c > 0 && !(c - 1 >= 0xd800 && c - 1 <= 0xdfff) ? S(c - 1) : 'a';
	emit('boundary', `a${x}a ${x}${x}1 ${y}${x} ${x}${y}${y}\n${x}  ${x}'s${x}\r\n${x}A${x}`);
}

// --- every prefix and suffix of tricky strings
const tricky = [
	"I'm  \tdon'T x'\u017f \u212a'LL ab12345c\r\n\r\n  \n x  ",
	'   \u3000\u00a0x\u0085 \u2028\n',
	'\u4e2d\u6587\u30c6\u30b9\u30c8\u3072\u3089\u9fa5\u9fa6 \u3040 abc\u0301\u0308 \u0915\u093f',
	'\u1c89\u1c8a\u01c5ungla HELLOworld Hello WORLD\u02b0x \u{10d40}\u{10d41}\u{10d42}\u{10d43}',
	'a/b//c /\n/\r\n!!\n\n?? x.\r\n',
	'$x=@y#z ~!" ?!a [\\]^_`{|}~z',
	'\u{1f600}\u{1f44d}\u{1f3fd}e\u0301\u200d x\u20dd',
	' \t \r \n \u000b\f x',
];
for (let i = 0; i < N(20); i++) tricky.push(rep(4 + ri(10), () => pick(pool)));
for (const t of tricky) {
	const cps = [...t];
	for (let k = 1; k <= cps.length; k++) emit('prefixes', cps.slice(0, k).join(''));
	for (let k = 1; k < cps.length; k++) emit('prefixes', cps.slice(k).join(''));
}

// --- contractions
const conts = ['s', 't', 're', 've', 'm', 'll', 'd', 'S', 'T', 'RE', 'rE', 'Re', 'VE', 'vE', 'M', 'LL', 'lL', 'Ll', 'D',
	'\u017f', 'K', '\u212a', 'r', 'v', 'l', 'e', 'E', 'x', '1', ' ', "'", '\u0301', '\u00e9', 'se', 'ts', 'led'];
for (let i = 0; i < N(800); i++)
	emit('contractions', rep(1 + ri(6), () => pick(['', ' ', 'a', 'A', 'I', 'we', '\u4e2d', '1', '.', '\u02b0']) + "'" + pick(conts) + pick(conts)));

// --- white space runs
const white = [' ', '\t', '\n', '\r', '\u000b', '\f', '\u0085', '\u00a0', '\u1680', '\u2000', '\u2005', '\u200a', '\u2028',
	'\u2029', '\u202f', '\u205f', '\u3000', '\u180e', '\u200b', '\ufeff'];
for (let i = 0; i < N(800); i++)
	emit('ws_runs', rep(1 + ri(4), () => pick(['', 'a', '1', '!', '\u4e2d', "'s", '\u0301', '/']) + rep(ri(9), () => pick(white))));

process.stdout.write(lines.join('\n') + '\n');
console.error(`gen_regex_corpus: ${lines.length} strings (seed ${seed}, scale ${scale}, ${boundaries.length} category boundaries)`);
