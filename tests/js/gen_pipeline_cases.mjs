// SPDX-License-Identifier: Apache-2.0
// Writes tests/unit/data/tokenizer_pipeline.json: a small character-level tokenizer.json (base) and
// cases, each a patch of it (top-level keys replaced; "model.X" keys inside the model), a text,
// add_special_tokens and the ids the reference (Hugging Face tokenizers 0.22, npm
// @anush008/tokenizers) gives. tests/unit/test_tokenizer_pipeline.c checks the C tokenizer against
// them, one pipeline piece a case. Usage: node tests/js/gen_pipeline_cases.mjs > FILE
import { mkdtempSync, writeFileSync } from 'node:fs';
import tk from '@anush008/tokenizers';

const vocab = { '<unk>': 0, '<s>': 1, '</s>': 2 };
for (let b = 0; b < 256; b++) vocab[`<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`] = 3 + b;
const chars = ['\u2581', 'a', 'b', 'c', 'd', '-', 'x', ' ', '<', '>', 'X', '[', ']', 'n'];
for (const c of chars) vocab[c] = Object.keys(vocab).length;
const merges = [['\u2581', 'a'], ['a', 'b'], ['b', 'c'], ['-', '-'], ['a', '-'], ['\u2581a', 'b'], ['ab', 'c'], ['x', 'x'], ['-', 'b']];
for (const [l, r] of merges) vocab[l + r] = Object.keys(vocab).length;
const tok = (id, content, o = {}) => ({ id, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true, ...o });
const base = {
	version: '1.0', truncation: null, padding: null,
	added_tokens: [tok(0, '<unk>'), tok(1, '<s>'), tok(2, '</s>'), tok(282, '<X>'), tok(283, '[n a]', { normalized: true, special: false }),
		tok(284, '<ls>', { lstrip: true }), tok(285, '<rs>', { rstrip: true }), tok(286, 'sw', { single_word: true, special: false })],
	normalizer: null, pre_tokenizer: null, post_processor: null, decoder: null,
	model: { type: 'BPE', dropout: null, unk_token: '<unk>', continuing_subword_prefix: null, end_of_word_suffix: null,
		fuse_unk: true, byte_fallback: true, ignore_merges: false, vocab, merges: merges.map(([l, r]) => `${l} ${r}`) },
};
const rep = (from, to) => ({ type: 'Replace', pattern: { String: from }, content: to });
const split = (pat, behavior, invert = false) => ({ type: 'Split', pattern: pat, behavior, invert });
const llama2 = { type: 'Sequence', normalizers: [{ type: 'Prepend', prepend: '\u2581' }, rep(' ', '\u2581')] };
const tmpl = (single) => ({ type: 'TemplateProcessing', single, pair: single, special_tokens: {
	'<s>': { id: '<s>', ids: [1], tokens: ['<s>'] }, '</s>': { id: '</s>', ids: [2], tokens: ['</s>'] } } });
const S = (id) => ({ SpecialToken: { id, type_id: 0 } }), A = { Sequence: { id: 'A', type_id: 0 } };
const cases = [
	['no normalizer, no pre-tokenizer: one word', {}, 'abc ab'],
	['Replace " " -> "▁"', { normalizer: rep(' ', '\u2581') }, 'ab ab  c'],
	['Prepend then Replace, per segment between added tokens (Llama 2)', { normalizer: llama2 }, 'ab c<X>ab<X><X> a'],
	['Prepend: an empty segment gets nothing', { normalizer: llama2 }, '<X>'],
	['empty Sequence normalizer', { normalizer: { type: 'Sequence', normalizers: [] } }, 'ab c'],
	['NFC in a Sequence with Replace', { normalizer: { type: 'Sequence', normalizers: [{ type: 'NFC' }, rep('\u00e9', 'x')] } }, 'ae\u0301b\u00e9'],
	['byte_fallback: characters not in the vocab as <0xXX>', {}, 'a\u00e9\u20acb'],
	['unk, fused', { 'model.byte_fallback': false }, 'a\u00e9\u20acb\u00e9'],
	['unk, not fused', { 'model.byte_fallback': false, 'model.fuse_unk': false }, 'a\u00e9\u20acb\u00e9'],
	['neither unk nor byte_fallback: dropped', { 'model.byte_fallback': false, 'model.unk_token': null }, 'a\u00e9b'],
	['ignore_merges: a whole vocab word as is', { 'model.ignore_merges': true }, 'abc'],
	['Split "-" Isolated', { pre_tokenizer: split({ String: '-' }, 'Isolated') }, 'a--b-c-'],
	['Split "-" Removed', { pre_tokenizer: split({ String: '-' }, 'Removed') }, 'a--b-c-'],
	['Split "-" MergedWithPrevious', { pre_tokenizer: split({ String: '-' }, 'MergedWithPrevious') }, '-a--b-c-'],
	['Split "-" MergedWithNext', { pre_tokenizer: split({ String: '-' }, 'MergedWithNext') }, '-a--b-c-'],
	['Split "-" Contiguous', { pre_tokenizer: split({ String: '-' }, 'Contiguous') }, '-a--b-c-'],
	['Split "-" Isolated, inverted', { pre_tokenizer: split({ String: '-' }, 'Isolated', true) }, 'a--b-c-'],
	['Split "-" MergedWithPrevious, inverted', { pre_tokenizer: split({ String: '-' }, 'MergedWithPrevious', true) }, 'ab--b-c-'],
	['Split regex [a-c]+ MergedWithNext', { pre_tokenizer: split({ Regex: '[a-c]+' }, 'MergedWithNext') }, '-ab-bc--a'],
	['Split regex with empty matches (x*)', { pre_tokenizer: split({ Regex: 'x*' }, 'Isolated') }, 'axxbx'],
	['Sequence of two Splits', { pre_tokenizer: { type: 'Sequence', pretokenizers: [split({ String: 'c' }, 'Isolated'), split({ Regex: '-+' }, 'Isolated')] } }, 'ab-cab--c'],
	['Split " " MergedWithPrevious after Replace (Gemma 3: never matches)', { normalizer: rep(' ', '\u2581'), pre_tokenizer: split({ String: ' ' }, 'MergedWithPrevious') }, 'ab ab c'],
	['normalized added token: matched by its normalized content on the normalized text', { normalizer: rep(' ', '\u2581') }, 'b[n a]c [n\u2581a]'],
	['normalized added token without normalizer', {}, 'b[n a]c'],
	['lstrip', {}, 'ab  <ls>c'],
	['rstrip', {}, 'ab<rs>  c'],
	['single_word: only between non-word characters', {}, 'sw asw sw- swa -sw'],
	['non-normalized before normalized: the earlier pass wins', {}, '[n a]<X>'],
	['TemplateProcessing <s> $A </s>, add_special_tokens', { post_processor: tmpl([S('<s>'), A, S('</s>')]) }, 'ab', true],
	['TemplateProcessing, add_special_tokens false', { post_processor: tmpl([S('<s>'), A, S('</s>')]) }, 'ab', false],
	['TemplateProcessing in a Sequence, empty text', { post_processor: { type: 'Sequence', processors: [{ type: 'ByteLevel', add_prefix_space: true, trim_offsets: false, use_regex: true }, tmpl([S('<s>'), A])] } }, '', true],
];
const dir = mkdtempSync('/tmp/kvs-pipecases-');
const out = { base, cases: [] };
for (let i = 0; i < cases.length; i++) {
	const [desc, patch, text, special = false] = cases[i];
	const j = structuredClone(base);
	for (const [k, v] of Object.entries(patch)) {
		if (k.startsWith('model.')) j.model[k.slice(6)] = v;
		else j[k] = v;
	}
	const p = `${dir}/${i}.json`;
	writeFileSync(p, JSON.stringify(j));
	const t = tk.Tokenizer.fromFile(p);
	const ids = (await t.encode(text, null, { addSpecialTokens: special })).getIds();
	out.cases.push({ desc, patch, text, add_special_tokens: special, ids });
}
process.stdout.write(JSON.stringify(out, null, 0).replace(/\{"desc"/g, '\n{"desc"') + '\n');
