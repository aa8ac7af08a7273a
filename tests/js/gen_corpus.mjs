// SPDX-License-Identifier: Apache-2.0
// Writes the tokenizer parity corpus as JSONL to stdout: {"cat": CATEGORY, "text": STRING} per line,
// deterministic for a seed (default 1). Lines of category "invalid_utf8" carry raw ill-formed UTF-8
// bytes inside the JSON string: a reader decodes the line as UTF-8 with U+FFFD replacement (as a
// JSON decoder in front of the engine would) before parsing it.
// Usage: node tests/js/gen_corpus.mjs [--seed N] [--scale K] [--added TOKENIZER] [--special]
//   K multiplies the counts (default 1); --added takes a tokenizer.json (or its directory) whose
//   added tokens' contents go into the added_tokens category beside Qwen's; --special gives every
//   other line "add_special_tokens": true.
import { readFileSync, statSync } from 'node:fs';
const args = process.argv.slice(2);
const opt = (name, def) => {
	const i = args.indexOf(name);
	return i >= 0 ? Number(args[i + 1]) : def;
};
const seed = opt('--seed', 1);
const scale = opt('--scale', 1);
const special = args.includes('--special');
const addedPath = (() => {
	const i = args.indexOf('--added');
	if (i < 0) return null;
	const p = args[i + 1];
	return statSync(p).isDirectory() ? `${p}/tokenizer.json` : p;
})();
const familyAdded = addedPath ? JSON.parse(readFileSync(addedPath, 'utf8')).added_tokens.map((a) => a.content) : [];

// mulberry32: small, seeded, good enough to spread test cases.
let state = seed >>> 0;
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

const out = [];
const sp = () => special && out.length % 2 === 1;
const emit = (cat, text) => out.push(Buffer.from(JSON.stringify(sp() ? { cat, add_special_tokens: true, text } : { cat, text }) + '\n'));
// A line whose text is parts: strings (escaped as JSON) and Buffers (raw bytes, >= 0x80 only).
const emitRaw = (cat, parts) => {
	const chunks = [Buffer.from(`{"cat":${JSON.stringify(cat)},${sp() ? '"add_special_tokens":true,' : ''}"text":"`)];
	for (const p of parts) chunks.push(typeof p === 'string' ? Buffer.from(JSON.stringify(p).slice(1, -1)) : p);
	chunks.push(Buffer.from('"}\n'));
	out.push(Buffer.concat(chunks));
};
const N = (n) => Math.max(1, Math.round(n * scale));

const words = ('the of and to in is that it was for on are as with his they at be this have from or one had by ' +
	'word but not what all were we when your can said there use an each which she do how their if will up ' +
	'other about out many then them these so some her would make like him into time has look two more write go ' +
	'see number no way could people my than first water been call who oil its now find long down day did get ' +
	'come made may part tokenizer router cache prefix engine vLLM Kubernetes latency throughput GPU').split(' ');
const punct = ['.', ',', '!', '?', ';', ':', '...', ' -', ' —', '"', "'", '(', ')', '[', ']', '–', '…', '«', '»', '“', '”'];
const sentence = () => {
	let s = rep(3 + ri(14), () => pick(words) + (rnd() < 0.1 ? pick(punct) : '') + ' ').trim();
	if (rnd() < 0.5) s = s[0].toUpperCase() + s.slice(1);
	if (rnd() < 0.1) s = s.toUpperCase();
	return s + pick(['.', '!', '?', '.', '.', ':', '']);
};

// --- prose
for (let i = 0; i < N(250); i++) emit('prose', rep(1 + ri(6), () => sentence() + pick([' ', ' ', '  ', '\n', '\n\n'])));

// --- code
const code = [
	'int main(int argc, char **argv)\n{\n\treturn 0;\n}\n',
	'def f(x):\n    return x ** 2  # square\n\n\nprint(f(3))\n',
	'const add = (a, b) => a + b;\nexport default { add };\n',
	'{"key": [1, 2.5, -3e10, true, null], "nested": {"a": "b\\n"}}',
	'for (size_t i = 0; i < n; i++) {\n\t\tif (v[i] != 0x7f) x += v[i] << 3;\n}',
	'SELECT id, name FROM users WHERE age >= 21 ORDER BY name DESC;',
	'#include <stdio.h>\n#define MAX(a,b) ((a)>(b)?(a):(b))\n',
	'    if x is not None and y != "":\n        raise ValueError(f"bad {x!r}")\n',
	'fn main() { let v: Vec<u8> = vec![0; 16]; println!("{:?}", v); }',
	'<div class="a">&nbsp;<span>x</span></div>\r\n',
	'$ ls -la /tmp && echo "$HOME" | grep -E \'^/r[o]+t$\' || true',
	'a=1;b=2\t\t# tabs\n\t  \tmixed = indent\n',
	'x = [i*i for i in range(10) if i%2==0]\n',
	'--- a/file.c\n+++ b/file.c\n@@ -1,3 +1,4 @@\n-old\n+new\n',
];
for (let i = 0; i < N(250); i++) {
	let s = rep(1 + ri(4), () => pick(code));
	if (rnd() < 0.3) s = s.replace(/\n/g, '\r\n');
	if (rnd() < 0.3) s = s.replace(/ {4}/g, '\t');
	emit('code', s);
}

// --- whitespace runs
const ws = [' ', '  ', '\t', '\n', '\r\n', '\r', '\u2581', '\u2581\u2581', '    ', '\n\n\n', '\u00a0', '\u3000', '\u0085', '\u2028', '\u2029', '\u000b', '\f', '\u2003', '\u200b', '\ufeff', '\u1680', '\u180e', '\u202f', '\u205f'];
for (let i = 0; i < N(250); i++)
	emit('whitespace', rep(1 + ri(10), () => (rnd() < 0.5 ? pick(words) : pick(punct)) + rep(ri(8), () => pick(ws))) + (rnd() < 0.5 ? rep(ri(5), () => pick(ws)) : ''));

// --- \r\n mixes
for (let i = 0; i < N(120); i++)
	emit('crlf', rep(1 + ri(8), () => sentence() + pick(['\r\n', '\n', '\r', '\r\n\r\n', ' \r\n', '\r\n ', '\n\r', '\t\r\n', '  \n  ', '!\r\n', '"\n'])));

// --- digits
const digitChars = ['0', '1', '7', '9', '٣', '١', '۴', '१', '১', '๓', '１', '２', '²', '³', '½', '¾', 'Ⅻ', 'ⅷ', '①', '⑩', '〇', '𝟘', '𝟙', '〸'];
for (let i = 0; i < N(150); i++) {
	const kind = ri(5);
	let s;
	if (kind === 0) s = String(ri(1e9)) + pick(['', '.', ',']) + String(ri(1e6));
	else if (kind === 1) s = rep(1 + ri(40), () => String(ri(10)));
	else if (kind === 2) s = `${pick(words)} ${ri(100000)} ${pick(words)}${ri(100)}x${ri(10)} ${-ri(50)}.${ri(99)}%`;
	else if (kind === 3) s = rep(1 + ri(12), () => pick(digitChars) + (rnd() < 0.3 ? pick(words) : ''));
	else s = `v${ri(10)}.${ri(10)}.${ri(100)} 0x${ri(1 << 30).toString(16)} 1e-${ri(20)} ${ri(10)}:${ri(60)}:${ri(60)}`;
	emit('digits', s);
}

// --- contractions in any case, incl. U+017F (long s) and the Kelvin sign
const conts = ['s', 't', 're', 've', 'm', 'll', 'd', 'S', 'T', 'RE', 'Re', 'rE', 'VE', 'Ve', 'M', 'LL', 'Ll', 'lL', 'D', 'ſ', 'ſt', 'K', 'l', 'r', 'v', 'e', 'x'];
const quotes = ["'", "'", "'", '’', '`'];
for (let i = 0; i < N(200); i++)
	emit('contractions', rep(1 + ri(6), () => pick(['', ' ', pick(words), 'I', 'you', 'we', 'they', 'it']) + pick(quotes) + pick(conts) + pick(['', ' ', 'a', 'x', 'ing', '!', '\n', "'", pick(words)])));

// --- Korean, Chinese, Japanese
const korean = ['안녕하세요', '한국어', '토크나이저', '캐시', '라우터가', '요청을', '보냅니다', '서울', '감사합니다', '데이터'];
const chinese = ['你好', '世界', '分词器', '缓存', '路由', '请求', '模型', '我们的', '中文测试', '。', '，', '！', '“引号”'];
const japanese = ['こんにちは', 'トークナイザー', '東京', 'キャッシュ', 'です。', 'ｶﾀｶﾅ', 'ー'];
for (let i = 0; i < N(120); i++) emit('korean', rep(1 + ri(10), () => pick(korean) + pick([' ', '', '. ', ', ', '\n', '1', 'a'])));
for (let i = 0; i < N(120); i++) emit('chinese', rep(1 + ri(12), () => pick(rnd() < 0.8 ? chinese : japanese) + pick(['', '', ' ', '1', 'AI', '\n'])));

// --- emoji
const emoji = ['😀', '👍🏽', '👨‍👩‍👧‍👦', '🇺🇸', '🇯🇵', '❤️', '1️⃣', '#️⃣', '🏳️‍🌈', '🤖', '✨', '🔥', '🧑🏿‍💻', '☕', '©', '™', '🫠', '🪿'];
for (let i = 0; i < N(120); i++) emit('emoji', rep(1 + ri(8), () => pick(emoji) + pick(['', ' ', pick(words), '!', '\n', ''])));

// --- combining characters and NFC changes
const bases = ['a', 'e', 'o', 'u', 'A', 'E', 'n', 'c', 'C', 's', 'ε', 'α', 'ω', 'и', 'ي', 'क', 'ᄀ', '가', 'ㄱ', ' ', '1', '!', 'ſ'];
const marks = [
	'\u0300', '\u0301', '\u0302', '\u0303', '\u0308', '\u030a', '\u0323', '\u0327', '\u0328', '\u0316', '\u0334', '\u0345',
	'\u0313', '\u0314', '\u0342', '\u05b0', '\u0651', '\u064b', '\u093c', '\u094d', '\u0e38', '\u302a', '\u3099', '\u309a',
	'\u1ac1', '\u1dfa', '\u1abf', '\u0f71', '\u0f72', '\u0f74', '\u20d0', '\u20e3', '\u0cc2', '\u0cd5', '\u0dcf', '\u102e',
	'\u1161', '\u1175', '\u11a7', '\u11a8', '\u11c2', '\u11c3', '\u0340', '\u0341', '\u0343', '\u0344', '\u{1d165}', '\u{1d16d}',
];
const nfcChange = ['\u212b', '\u2126', '\u212a', '\uf900', '\ufa10', '\u{2f800}', '\u0958', '\u1f71', '\u0374', '\u037e',
	'\u0387', 'e\u0301', 'A\u030a', '\u1100\u1161\u11a8', '\u1100\u1161', '\uac00\u11a8', '\uac00\u11a7', '\u0b47\u0b3e',
	'\u0cc6\u0cc2\u0cd5', '\u0dd9\u0dcf\u0dca', '\u1025\u102e', '\u05d9\u05b4', '\u{11099}\u{110ba}', '\u{1133e}\u{11347}',
	'\u{11347}\u{1133e}', '\u{114b9}\u{114b0}', '\u{115b8}\u{115af}', '\u{11935}\u{11930}', '\u{16121}\u{1611f}', '\u{16d63}\u{16d67}',
	'\u{11382}\u{113c9}', '\u{105c9}', '\u1e9b\u0323', 'q\u0307\u0323', '\u0958\u093c', 'ﬁ', '①', 'ｶﾞ'];
for (let i = 0; i < N(300); i++) {
	const k = ri(3);
	let s;
	if (k === 0) s = rep(1 + ri(6), () => pick(bases) + rep(ri(5), () => pick(marks)) + pick(['', ' ', pick(words)]));
	else if (k === 1) s = rep(1 + ri(6), () => pick(nfcChange) + pick(['', ' ', pick(bases), pick(marks)]));
	else s = rep(1 + ri(4), () => pick(words)).normalize(pick(['NFD', 'NFC', 'NFKD'])) + pick(['é', 'É', 'ñ', 'ü', 'Å']).normalize('NFD') + pick(marks);
	emit('combining', s);
}

// --- added-token strings inside text
const added = ['<|endoftext|>', '<|im_start|>', '<|im_end|>', '<|object_ref_start|>', '<|object_ref_end|>', '<|box_start|>',
	'<|box_end|>', '<|quad_start|>', '<|quad_end|>', '<|vision_start|>', '<|vision_end|>', '<|vision_pad|>', '<|image_pad|>',
	'<|video_pad|>', '<tool_call>', '</tool_call>', '<|fim_prefix|>', '<|fim_middle|>', '<|fim_suffix|>', '<|fim_pad|>',
	'<|repo_name|>', '<|file_sep|>', '<tool_response>', '</tool_response>', '<think>', '</think>',
	'<bos>', '<eos>', '<s>', '</s>', '<unk>', '<start_of_turn>', '<end_of_turn>', '<|begin_of_text|>', '<|eot_id|>',
	'<|start_header_id|>', '<\uff5cbegin\u2581of\u2581sentence\uff5c>', '<\uff5cUser\uff5c>', '<|start|>', '<|channel|>', '<|message|>',
	'[INST]', '[/INST]', '<h1>', '</div>', '<0x41>'];
// the family's own added tokens (--added): a sample, so many (Gemma 3 has 6,415) stay a mix
for (let i = 0; i < Math.min(familyAdded.length, 60); i++) added.push(familyAdded[Math.floor(((i * 2654435761) >>> 0) % familyAdded.length)]);
const nearMiss = ['<|im_start', '<|im_end|', '<im_end>', '<|IM_END|>', '< think>', '<think', '</think', '<<|im_end|>>', '<|', '|>', '<', '<tool_call', '<|endoftext||>'];
for (let i = 0; i < N(200); i++)
	emit('added_tokens', rep(1 + ri(8), () => pick([pick(added), pick(added), pick(nearMiss), pick(words), ' ', '\n', sentence(), 'x']) + pick(['', '', ' ', '\n', pick(added)])));
emit('added_tokens', '<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n');
emit('added_tokens', added.join(''));
emit('added_tokens', added.join(' '));

// --- letters and digits added in Unicode 15.0, 15.1 and 16.0 (the reference's tables are 16.0)
const u16 = [[0x11f00, 0x11f5a], [0x1e4d0, 0x1e4fa], [0x31350, 0x323af], [0x2ebf0, 0x2ee5d], [0x16d40, 0x16d7a], [0x105c0, 0x105f4],
	[0x11bc0, 0x11bf0], [0x1e5d0, 0x1e5fb], [0x116d0, 0x116e4], [0x10d40, 0x10d8f], [0x1c89, 0x1c8b], [0xa7cb, 0xa7ce], [0x1df25, 0x1df2b],
	[0x10efc, 0x10f00], [0x1e030, 0x1e06e], [0x11380, 0x113e3], [0x1f8b0, 0x1f8bc], [0x1cc00, 0x1ccfa]];
for (let i = 0; i < N(150); i++)
	emit('unicode16', rep(1 + ri(10), () => {
		const [a, b] = pick(u16);
		return rep(1 + ri(4), () => String.fromCodePoint(a + ri(b - a))) + pick(['', ' ', '1', pick(words), '\n', "'s"]);
	}));

// --- seeded random Unicode (every plane, biased to interesting ranges; no surrogates)
const ranges = [[0x20, 0x7f], [0x0, 0x20], [0x80, 0x250], [0x300, 0x370], [0x370, 0x530], [0x590, 0x800], [0x900, 0xe00],
	[0x1100, 0x1200], [0x1a00, 0x1e00], [0x2000, 0x2070], [0x2070, 0x3000], [0x3000, 0x3100], [0x3130, 0x3190], [0x4e00, 0x9fff],
	[0xac00, 0xd7a4], [0xe000, 0xe100], [0xf900, 0xfb00], [0xfb00, 0xfffe], [0x10000, 0x10400], [0x10400, 0x16000],
	[0x16000, 0x1d000], [0x1d000, 0x1f000], [0x1f000, 0x1fb00], [0x1fb00, 0x30000], [0x30000, 0x110000], [0xfff0, 0x10000]];
const randCp = () => {
	const [a, b] = pick(ranges);
	let c = a + ri(b - a);
	if (c >= 0xd800 && c <= 0xdfff) c = 0xfffd;
	return String.fromCodePoint(c);
};
for (let i = 0; i < N(500); i++) emit('random_unicode', rep(1 + ri(30), () => (rnd() < 0.2 ? pick([' ', "'", '\n', pick(words)]) : randCp())));

// --- ill-formed UTF-8 (raw bytes), read as U+FFFD per maximal subpart
const badBytes = [[0x80], [0xbf], [0xc0, 0x80], [0xc1, 0xbf], [0xc3], [0xe2, 0x82], [0xe0, 0x80, 0x80], [0xed, 0xa0, 0x80],
	[0xed, 0xbf, 0xbf], [0xf0, 0x9f], [0xf0, 0x9f, 0x98], [0xf4, 0x90, 0x80, 0x80], [0xf5], [0xf8, 0x88, 0x80, 0x80, 0x80],
	[0xfe], [0xff], [0xef], [0xef, 0xbf], [0xc3, 0xc3, 0xa9], [0xe2, 0x28, 0xa1], [0xf0, 0x28, 0x8c, 0xbc], [0xef, 0xbf, 0xbd]];
for (let i = 0; i < N(120); i++) {
	const parts = [];
	for (let j = 0, n = 1 + ri(8); j < n; j++) {
		parts.push(pick([pick(words), ' ', "'", 'é', '한', '😀', '<|im_end|>', '\n', randCp()]));
		parts.push(Buffer.from(rnd() < 0.8 ? pick(badBytes) : Array.from({ length: 1 + ri(4) }, () => 0x80 + ri(0x80))));
	}
	emitRaw('invalid_utf8', parts);
}
emitRaw('invalid_utf8', [Buffer.from([0xe2, 0x82])]);
emitRaw('invalid_utf8', ['abc', Buffer.from([0xf0, 0x9f, 0x98])]);

// --- control characters, NUL
for (let i = 0; i < N(30); i++) emit('control', rep(1 + ri(10), () => pick(['\u0000', '\u0001', '\u001b[0m', '\u007f', '\u0080', '\u009f', pick(words), ' '])));

// --- very long runs
const big = [
	['a', 100000], [' ', 100000], ['!', 50000], ['ab', 20000], ['\n', 30000], ['1', 20000], ['한', 30000], ['😀', 10000],
	['\t', 20000], [' \n', 20000], ['é', 30000], ['e\u0301', 20000], ["'s", 20000], ['<|im_end|>', 5000],
];
// (a scale below 1 shortens them too: the suite's short corpora stay quick)
const L = (n) => Math.max(1, Math.round(n * Math.min(1, scale)));
for (const [u, n] of big) emit('long_runs', u.repeat(L(n)));
emit('long_runs', rep(L(2000), () => sentence() + ' '));
emit('long_runs', 'x' + ' '.repeat(L(50000)) + 'y');
emit('long_runs', 'a' + '\u0345\u0334'.repeat(L(20000)) + ' a' + '\u0301\u0316\u0300'.repeat(L(5000))); // marks in reverse canonical order
emit('long_runs', rep(L(3000), () => pick(code)));

process.stdout.write(Buffer.concat(out));
console.error(`gen_corpus: ${out.length} strings (seed ${seed}, scale ${scale})`);
