// SPDX-License-Identifier: Apache-2.0
// Split-regex parity: the matches of userspace/prompt/regex (build/bench/regex --split --regex) against
// the reference's (tests/js/ref_split.mjs: HF tokenizers 0.22, Oniguruma) for each family pattern,
// on every string of a corpus (tests/js/gen_regex_corpus.mjs); and the tokenizer's hand-written
// state machines for the patterns that have one (build/bench/regex --split --sm: Qwen2, Llama 3,
// gpt-oss, Mistral-Nemo) against the same reference. Prints a TAP line per pattern with the first
// differences; exits 1 on any difference.
// Usage: node tests/js/regex_parity.mjs CORPUS.jsonl [--patterns llama3,qwen2,...]
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { familyNames, familyPattern, refMatcher } from './ref_split.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '../..');
const args = process.argv.slice(2);
const pIdx = args.indexOf('--patterns');
const names = pIdx >= 0 ? args.splice(pIdx, 2)[1].split(',') : familyNames;
if (args.length !== 1) {
	console.error('usage: regex_parity.mjs CORPUS.jsonl [--patterns a,b]');
	process.exit(2);
}
const items = readFileSync(args[0], 'utf8')
	.split('\n')
	.filter((l) => l.trim())
	.map((l) => JSON.parse(l));
const hex = items.map((o) => Buffer.from(o.text, 'utf8').toString('hex')).join('\n') + '\n';
const fmt = (m) => m.map(([a, b]) => `${a},${b}`).join(' ');
let failures = 0;

// One pattern: its TAP lines and number of differences. The patterns run side by side (the
// reference encodes on libuv's worker threads, the C side in its own process).
async function parity(name, sm) {
	const t0 = Date.now();
	const label = sm ? `${name} state machine` : name;
	const cargs = sm ? ['--split', '--sm', name] : ['--split', '--regex', familyPattern(name)];
	const out = [];
	let c;
	try {
		c = await new Promise((resolve, reject) => {
			const ch = execFile(path.join(root, 'build/bench/regex'), cargs, { cwd: root, maxBuffer: 1 << 30 },
				(err, stdout, stderr) => (err ? reject(Object.assign(err, { stderr })) : resolve(stdout.split('\n'))));
			ch.stdin.end(hex);
		});
	} catch (e) {
		out.push(`not ok - ${label}: build/bench/regex --split failed (${e.code}): ${String(e.stderr).slice(0, 200)}`);
		return [out, 1];
	}
	const ref = refMatcher(familyPattern(name));
	const diffs = [];
	const B = 64;
	for (let i = 0; i < items.length; i += B) {
		const got = await Promise.all(items.slice(i, i + B).map((o) => ref(o.text)));
		for (let k = 0; k < got.length; k++) {
			const want = fmt(got[k]);
			if (want !== c[i + k]) diffs.push({ i: i + k, want, got: c[i + k] });
		}
	}
	const secs = ((Date.now() - t0) / 1000).toFixed(1);
	out.push(`${diffs.length ? 'not ok' : 'ok'} - ${label}: ${items.length} strings, ${diffs.length} differ from the reference (${secs} s)`);
	for (const d of diffs.slice(0, 8)) {
		const o = items[d.i];
		out.push(`#   line ${d.i + 1} (${o.cat}) ${JSON.stringify(o.text.slice(0, 80))}`);
		out.push(`#     reference ${d.want.slice(0, 200)}`);
		out.push(`#     ${sm ? 'machine' : 'engine '}   ${String(d.got).slice(0, 200)}`);
	}
	return [out, diffs.length];
}

const machines = ['qwen2', 'llama3', 'gptoss', 'nemo'].filter((m) => names.includes(m));
const runs = [...names.map((n) => parity(n, false)), ...machines.map((n) => parity(n, true))];
for (const [out, n] of await Promise.all(runs)) {
	console.log(out.join('\n'));
	failures += n;
}
process.exit(failures ? 1 : 0);
