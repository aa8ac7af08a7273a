// SPDX-License-Identifier: Apache-2.0
// Cross-check of the chat reference: the variables Python's jinja2 rendered a family's template
// with (tests/e2e/ref_chat.py --dump-vars) rendered again by a second, independent engine, npm
// @huggingface/jinja (with ref_chat.mjs's correction of str.strip(chars)), and the two texts
// compared. The Python harness is the reference kvsplice is held to; this shows that what it
// renders is what Jinja means, not a quirk of the harness.
//   node jinja_crosscheck.mjs FAMILY CONFIG [--chat-template FILE] PY.jsonl VARS.jsonl
// Prints one TAP line: every request both engines render gives the same text, or the difference
// is one @huggingface/jinja is known for (below); every request jinja2 raises on raises here too.
// Known differences of @huggingface/jinja 0.5.11, counted apart and never as equal:
//   - numbers: JavaScript has one number type, so a JSON 1.0 prints as 1 (Python keeps 1.0), and
//     integers beyond 2**53 lose digits;
//   - tojson: its own serialiser, not Python's json.dumps (spacing, escapes);
//   - undefined: jinja2 raises on a member or item of an undefined value (messages[0].role of an
//     empty list), the library gives undefined and renders on.
// A request counts under "known" only when its variables hold a float or a big integer, it sends
// tools or tool calls to a template that applies tojson, or jinja2 raised on an undefined value
// where the library rendered; every other difference fails.
import fs from "node:fs";
import "./ref_chat.mjs"; // its str.strip(chars) patch of @huggingface/jinja
import { Template } from "@huggingface/jinja";

const args = process.argv.slice(2);
let tmplFile = null;
const ti = args.indexOf("--chat-template");
if (ti >= 0) tmplFile = args.splice(ti, 2)[1];
const [family, configPath, pyPath, varsPath] = args;
const readJsonl = (p) => fs.readFileSync(p, "utf8").split("\n").filter((l) => l.trim()).map((l) => JSON.parse(l));

const cfg = JSON.parse(fs.readFileSync(configPath, "utf8"));
let src = tmplFile ? fs.readFileSync(tmplFile, "utf8").replace(/\r\n?/g, "\n") : cfg.chat_template;
const named = {};
if (Array.isArray(src)) {
	for (const t of src) named[t.name] = t.template;
	src = named.default ?? named.tool_use;
}
const templates = { default: new Template(src), tool_use: named.tool_use ? new Template(named.tool_use) : null };
const usesTojson = /tojson/.test(src + (named.tool_use ?? ""));

// Python's strftime for the directives templates use, on the machine's clock (as ref_chat.py).
const MON = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
const MONTH = ["January", "February", "March", "April", "May", "June", "July", "August", "September",
	"October", "November", "December"];
const DAY = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"];
function strftime(fmt) {
	const d = new Date();
	const p2 = (x) => String(x).padStart(2, "0");
	const map = {
		d: p2(d.getDate()), b: MON[d.getMonth()], B: MONTH[d.getMonth()], Y: String(d.getFullYear()),
		m: p2(d.getMonth() + 1), y: p2(d.getFullYear() % 100), H: p2(d.getHours()), M: p2(d.getMinutes()),
		S: p2(d.getSeconds()), a: DAY[d.getDay()].slice(0, 3), A: DAY[d.getDay()], "%": "%",
	};
	return fmt.replace(/%(.)/g, (m, c) => map[c] ?? m);
}

// transformers' continue_final_message cut, as ref_chat.py applies it.
const PY_WS = /^[ \t\n\v\f\r\x1c-\x1f\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+|[ \t\n\v\f\r\x1c-\x1f\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+$/g;
const PY_LWS = /^[ \t\n\v\f\r\x1c-\x1f\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+/;
function cut(text, messages) {
	let fin = messages[messages.length - 1].content;
	if (Array.isArray(fin)) {
		const b = [...fin].reverse().find((x) => "text" in x);
		if (!b) throw new Error("no text to continue");
		fin = b.text;
	}
	const st = fin.replace(PY_WS, ""), lst = fin.replace(PY_LWS, "");
	const loc = text.lastIndexOf(st);
	if (loc < 0) throw new Error("the final message does not appear");
	return text.slice(loc, loc + lst.length) === fin ? text.slice(0, loc + lst.length) : text.slice(0, loc + st.length);
}

// Does v hold a value the library prints differently (a float or a big integer)? JSON.parse has
// already merged 1.0 into 1, so the raw line is searched for them.
const numberish = (line) => {
	const bare = line.replace(/"(?:[^"\\]|\\.)*"/g, '""'); // the numbers outside strings
	return /[0-9](\.[0-9]|[eE][-+]?[0-9])/.test(bare) || /[0-9]{16,}/.test(bare);
};

const py = readJsonl(pyPath);
const varsLines = fs.readFileSync(varsPath, "utf8").split("\n").filter((l) => l.trim());
if (py.length !== varsLines.length) {
	console.log(`not ok - ${family}: line counts differ (${py.length} renderings, ${varsLines.length} variable sets)`);
	process.exit(1);
}
let equal = 0, bothRaise = 0, known = 0, before = 0;
const bad = [];
varsLines.forEach((line, i) => {
	const g = JSON.parse(line);
	if (g === null || g.skip) { // failed before the template (vLLM's checks), or not JSON
		before++;
		return;
	}
	let text = null, err = null;
	try {
		const t = templates[g.template] ?? templates.default;
		text = t.render({
			...g.vars,
		});
		if (g.cut) text = cut(text, g.vars.messages);
	} catch (e) {
		err = String(e.message ?? e);
	}
	const p = py[i];
	if (p.status === "ok" && text === p.text) equal++;
	else if (p.status !== "ok" && err !== null) bothRaise++;
	else if (numberish(line) || (usesTojson && (g.vars.tools || g.vars.messages.some((m) => m.tool_calls))) ||
		(p.status !== "ok" && err === null && /has no element|is undefined|has no attribute/.test(p.why))) {
		known++;
	} else bad.push({ i, py: p, js: err !== null ? { error: err } : { text } });
});
const ok = bad.length === 0 && equal > 0;
console.log(`${ok ? "ok" : "not ok"} - ${family}: @huggingface/jinja against Python's jinja2 on ${varsLines.length} requests: ` +
	`${equal} equal, ${bothRaise} raise in both, ${known} differ where the library is known to (numbers, tojson, undefined members), ` +
	`${bad.length} other differences; ${before} refused before the template or not JSON`);
for (const b of bad.slice(0, 3)) console.log(`#   line ${b.i + 1}: py ${JSON.stringify(b.py).slice(0, 300)}\n#   js ${JSON.stringify(b.js).slice(0, 300)}`);
process.exit(ok ? 0 : 1);
