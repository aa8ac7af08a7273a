// SPDX-License-Identifier: Apache-2.0
// Compares two JSONL id files line by line, grouped by the corpus's "cat" field, and prints one TAP
// line per category ("ok - CAT: N/N equal"), with the first differences of a failing category.
// Usage: node tests/js/compare_ids.mjs CORPUS.jsonl EXPECTED.jsonl ACTUAL.jsonl [LABEL]
import { readFileSync } from 'node:fs';

const [corpusPath, expPath, actPath, label = 'C vs reference'] = process.argv.slice(2);
const lines = (p) => readFileSync(p, 'utf8').split('\n').filter((l) => l.trim());
const corpus = lines(corpusPath).map((l) => JSON.parse(l));
const exp = lines(expPath);
const act = lines(actPath);
let failed = 0;
if (exp.length !== corpus.length || act.length !== corpus.length) {
	console.log(`not ok - ${label}: line counts differ (corpus ${corpus.length}, expected ${exp.length}, actual ${act.length})`);
	process.exit(1);
}
const cats = new Map();
for (let i = 0; i < corpus.length; i++) {
	const c = corpus[i].cat ?? 'all';
	if (!cats.has(c)) cats.set(c, { n: 0, bad: [] });
	const e = cats.get(c);
	e.n++;
	if (exp[i] !== act[i]) e.bad.push(i);
}
for (const [c, e] of cats) {
	if (!e.bad.length) {
		console.log(`ok - ${label}: ${c}: ${e.n}/${e.n} strings give equal ids`);
		continue;
	}
	failed++;
	console.log(`not ok - ${label}: ${c}: ${e.n - e.bad.length}/${e.n} strings give equal ids`);
	for (const i of e.bad.slice(0, 3)) {
		const text = corpus[i].text;
		console.log(`#   line ${i + 1}: text ${JSON.stringify(text.length > 200 ? text.slice(0, 200) + '…' : text)}`);
		console.log(`#     expected ${exp[i].slice(0, 300)}`);
		console.log(`#     actual   ${act[i].slice(0, 300)}`);
	}
}
console.log(`# ${corpus.length} strings in ${cats.size} categories`);
process.exit(failed ? 1 : 0);
