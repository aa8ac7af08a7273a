// SPDX-License-Identifier: Apache-2.0
// Reference chat-template renderer for the parity test (tests/e2e/test_chat_parity.sh): renders a
// /v1/chat/completions request as vLLM does, with npm @huggingface/jinja running the unmodified
// chat_template of models/qwen3/tokenizer_config.json.
//
// What vLLM does before the template is mirrored here from its source (2026):
// vllm/renderers/chat_utils/parse_chat_message_content.py (content -> one string: text parts
// joined with "\n", falsy texts dropped; reasoning -> reasoning_content on assistant messages;
// empty tool_calls dropped), vllm/entrypoints/openai/chat_completion/protocol.py (the before
// validator renaming reasoning_content to reasoning; build_chat_params: add_generation_prompt
// default true, reasoning_effort -> enable_thinking, merge_kwargs).
//
// One deviation of @huggingface/jinja 0.5.11 from Python's jinja2 is corrected: its
// str.strip/lstrip/rstrip ignore the chars argument (strip('\n') strips all whitespace there);
// vLLM runs Python, where only the given chars are stripped. The patch below makes them behave as
// Python's str methods; nothing else in the library is touched.
//
// Modes:
//   node ref_chat.mjs [--config PATH] < requests.jsonl   one {"status":"ok","text":...} a line
//                                                        ({"status":"error","why":...} if jinja throws)
//   node ref_chat.mjs --gen DIR [--seed N] [--count N]   writes DIR/cases.jsonl, DIR/requests.jsonl
//   node ref_chat.mjs --ids-inputs DIR                   writes DIR/ok_requests.jsonl, DIR/ok_texts.jsonl
//   node ref_chat.mjs --check DIR                        compares DIR/ref.jsonl, DIR/c.jsonl (and
//                                                        DIR/py.jsonl if there) against
//                                                        DIR/cases.jsonl, prints TAP lines
import fs from "node:fs";
import readline from "node:readline";
import { pathToFileURL } from "node:url";
import { Interpreter, Template } from "@huggingface/jinja";

const args = process.argv.slice(2);
const opt = (name, dflt) => {
	const i = args.indexOf(name);
	return i >= 0 ? args[i + 1] : dflt;
};

// ---- Python str.strip/lstrip/rstrip semantics for @huggingface/jinja -----------------------
const PY_WS = " \t\n\v\f\r\x1c\x1d\x1e\x1f\x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005" +
	"\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000";
function pyStrip(s, chars, left, right) {
	const set = new Set(Array.from(chars ?? PY_WS));
	const cps = Array.from(s);
	let a = 0, b = cps.length;
	if (left) while (a < b && set.has(cps[a])) a++;
	if (right) while (b > a && set.has(cps[b - 1])) b--;
	return cps.slice(a, b).join("");
}
const origMember = Interpreter.prototype.evaluateMemberExpression;
Interpreter.prototype.evaluateMemberExpression = function (expr, environment) {
	const name = !expr.computed && expr.property.type === "Identifier" ? expr.property.value : null;
	if (name === "strip" || name === "lstrip" || name === "rstrip") {
		const object = this.evaluate(expr.object, environment);
		if (object.type === "StringValue") {
			const StringValue = object.constructor;
			const FunctionValue = object.builtins.get("upper").constructor;
			return new FunctionValue((fargs) => {
				const c = fargs[0];
				const chars = !c || c.type === "NullValue" || c.type === "UndefinedValue" ? null : c.value;
				return new StringValue(pyStrip(object.value, chars, name !== "rstrip", name !== "lstrip"));
			});
		}
	}
	return origMember.call(this, expr, environment);
};

// jinja2's trim filter is str(value).strip(): Python's white space (the library's JavaScript trim
// keeps U+001C..U+001F and U+0085 and strips U+FEFF), and None prints "None".
const origFilter = Interpreter.prototype.applyFilter;
let StringValueClass = null;
Interpreter.prototype.applyFilter = function (operand, filterNode, environment) {
	if (filterNode.type === "Identifier" && filterNode.value === "trim") {
		if (operand.type === "StringValue") {
			StringValueClass = operand.constructor;
			return new StringValueClass(pyStrip(operand.value, null, true, true));
		}
		if (StringValueClass && operand.type === "NullValue") return new StringValueClass("None");
		if (StringValueClass && operand.type === "UndefinedValue") return new StringValueClass("");
	}
	return origFilter.call(this, operand, filterNode, environment);
};
new Template("{{ 'x' | trim }}").render({}); // meets a StringValue: its class, for None

// ---- vLLM's request handling -----------------------------------------------------------------
const TEXT_KEY = { text: "text", input_text: "text", output_text: "text", refusal: "refusal", thinking: "thinking" };

function flatten(content) {
	if (content === null || content === undefined) return "";
	if (typeof content === "string") return content;
	const texts = [];
	for (const part of content) {
		const t = typeof part === "string" ? part : part[TEXT_KEY[part.type]];
		if (t) texts.push(t); // Python truthiness: None and "" are dropped
	}
	return texts.join("\n");
}

function conversation(messages) {
	return messages.map((m) => {
		const out = { role: m.role, content: flatten(m.content) };
		let reasoning = m.reasoning ?? null;
		if (reasoning === null && m.reasoning_content != null) reasoning = m.reasoning_content;
		if (m.role === "assistant") {
			if (Array.isArray(m.tool_calls) && m.tool_calls.length > 0) out.tool_calls = m.tool_calls;
			if (reasoning !== null) {
				out.reasoning = reasoning;
				out.reasoning_content = reasoning;
			}
		} else if (m.role === "tool" && m.tool_call_id !== undefined) {
			out.tool_call_id = m.tool_call_id;
		}
		if (typeof m.name === "string") out.name = m.name;
		return out;
	});
}

function templateKwargs(req) {
	const user = req.chat_template_kwargs ?? {};
	const extra = {
		add_generation_prompt: req.add_generation_prompt ?? true,
		continue_final_message: req.continue_final_message ?? false,
		documents: req.documents ?? null,
		reasoning_effort: req.reasoning_effort ?? null,
	};
	if (extra.reasoning_effort !== null && !("enable_thinking" in user))
		extra.enable_thinking = extra.reasoning_effort !== "none";
	const merged = { ...user };
	for (const [k, v] of Object.entries(extra)) if (v !== null && v !== "auto") merged[k] = v;
	return merged;
}

export function makeRenderer(configPath) {
	const cfg = JSON.parse(fs.readFileSync(configPath, "utf8"));
	const template = new Template(cfg.chat_template);
	return (req) => {
		const tools = req.tools && req.tools.length ? req.tools : null;
		const ctx = { ...templateKwargs(req), messages: conversation(req.messages), tools };
		return template.render(ctx);
	};
}

// ---- seeded case generator -------------------------------------------------------------------
function rng(seed) {
	let a = seed >>> 0;
	return () => {
		a = (a + 0x6d2b79f5) >>> 0;
		let t = a;
		t = Math.imul(t ^ (t >>> 15), t | 1);
		t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
		return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
	};
}

function generate(seed, count) {
	const r = rng(seed);
	const pick = (xs) => xs[Math.floor(r() * xs.length)];
	const chance = (p) => r() < p;
	const WORDS = ["hello", "world", "The", "quick", "fox", "  spaced  ", "\t", "\n", "\n\n", " ",
		"<think>", "</think>", "<tool_response>", "</tool_response>", "<|im_start|>", "<|im_end|>",
		"안녕하세요", "你好，世界", "🤖", "👩‍👩‍👧", "é", "e\u0301", "Ω", "١٢٣", "x\u0001y", "\r\n",
		"don't", "I'M", "42", "3.14", "{\"json\": [1, 2]}", "def f(x):\n    return x", "\\", "\"", "…"];
	const text = (maxWords = 8) => {
		const n = Math.floor(r() * (maxWords + 1));
		let s = "";
		for (let i = 0; i < n; i++) s += (chance(0.6) ? " " : "") + pick(WORDS);
		return s;
	};
	const unicodeText = () => {
		let s = "";
		const n = 1 + Math.floor(r() * 20);
		for (let i = 0; i < n; i++) {
			const kind = r();
			let cp;
			if (kind < 0.3) cp = 0x20 + Math.floor(r() * 0x5f);
			else if (kind < 0.5) cp = 0xac00 + Math.floor(r() * 11172);
			else if (kind < 0.65) cp = 0x4e00 + Math.floor(r() * 20000);
			else if (kind < 0.8) cp = 0x1f300 + Math.floor(r() * 0x300);
			else if (kind < 0.9) cp = 0x300 + Math.floor(r() * 0x70);
			else cp = pick([0x0a, 0x09, 0x85, 0xa0, 0x2028, 0x3000, 0xfeff, 0x200b, 0x1c]);
			s += String.fromCodePoint(cp);
		}
		return s;
	};
	const thinkContent = () => {
		const shapes = [
			() => `<think>\n${text()}\n</think>\n\n${text()}`,
			() => `<think>${text()}</think>${text()}`,
			() => `${text()}</think>${text()}`,
			() => `\n\n<think>\n\n${text()}\n\n</think>\n\n\n${text()}\n\n`,
			() => `<think>${text()}<think>${text()}</think>${text()}</think>${text()}`,
			() => `<think> \n${text()} \n</think> \n${text()}`,
			() => text(),
		];
		return pick(shapes)();
	};
	const listContent = (t) => {
		const parts = [];
		const n = Math.floor(r() * 5);
		for (let i = 0; i < n; i++) {
			const k = r();
			if (k < 0.4) parts.push({ type: "text", text: t() });
			else if (k < 0.5) parts.push(t());
			else if (k < 0.6) parts.push({ type: "text", text: "" });
			else if (k < 0.65) parts.push({ type: "text", text: null });
			else if (k < 0.75) parts.push({ type: "input_text", text: t() });
			else if (k < 0.85) parts.push({ type: "refusal", refusal: t() });
			else if (k < 0.95) parts.push({ type: "thinking", thinking: t(), closed: true });
			else parts.push({ type: "output_text", text: t(), cache_control: { type: "ephemeral" } });
		}
		return parts;
	};
	const content = (t = text) => {
		const k = r();
		if (k < 0.7) return t();
		if (k < 0.9) return listContent(t);
		return k < 0.95 ? null : "";
	};
	const kwargsAndFlags = (req) => {
		const k = r();
		if (k < 0.25) req.chat_template_kwargs = { enable_thinking: false };
		else if (k < 0.45) req.chat_template_kwargs = { enable_thinking: true };
		else if (k < 0.5) req.chat_template_kwargs = { enable_thinking: null, unrelated: 1 };
		else if (k < 0.55) req.chat_template_kwargs = {};
		else if (k < 0.6) req.chat_template_kwargs = { enable_thinking: pick([0, "false", "auto", [], {}]) };
		if (chance(0.25)) req.add_generation_prompt = chance(0.5);
		// reasoning_effort: enable_thinking derived from it unless the kwargs name it
		if (chance(0.1)) req.reasoning_effort = pick(["none", "minimal", "low", "medium", "high", "max", null]);
		return req;
	};
	const conversationOf = (kind) => {
		const msgs = [];
		if (chance(0.6)) msgs.push({ role: "system", content: content() });
		const turns = 1 + Math.floor(r() * 5);
		for (let i = 0; i < turns; i++) {
			const t = kind === "unicode" ? unicodeText : text;
			msgs.push({ role: "user", content: content(t) });
			if (kind === "tools" && chance(0.7)) {
				msgs.push({ role: "assistant", content: chance(0.5) ? null : thinkContent(), tool_calls: chance(0.5) ? [] : null });
				const nt = 1 + Math.floor(r() * 3);
				for (let j = 0; j < nt; j++) msgs.push({ role: "tool", tool_call_id: `call_${j}`, content: content() });
				if (chance(0.3)) msgs.push({ role: "user", content: `<tool_response>${text()}</tool_response>` });
			}
			if (i < turns - 1 || chance(0.4)) {
				const a = { role: "assistant", content: kind === "list" ? content() : thinkContent() };
				if (kind === "reasoning" || chance(0.15)) {
					const rk = r();
					if (rk < 0.4) a.reasoning = text();
					else if (rk < 0.6) a.reasoning_content = text();
					else if (rk < 0.7) a.reasoning = "";
					else if (rk < 0.8) { a.reasoning = null; a.reasoning_content = text(); }
				}
				msgs.push(a);
			}
			if (kind === "edge" && chance(0.4)) msgs.push({ role: pick(["developer", "function", "System", "system"]), content: text() });
		}
		if (kind === "tools" && chance(0.3)) msgs.push({ role: "tool", content: text() });
		return msgs;
	};
	const unsupported = () => {
		const base = { messages: [{ role: "user", content: text() }] };
		const k = Math.floor(r() * 6);
		if (k === 0) base.messages[0].content = [{ type: "input_audio", input_audio: { data: "", format: "wav" } }];
		if (k === 1) base.messages[0].content = [{ type: "text", text: "t", uuid: "u" }];
		if (k === 2) base.messages[0].content = [{ type: "text", text: "see" }, { type: "image_url", image_url: { url: "data:," } }];
		if (k === 3) { base.continue_final_message = true; base.add_generation_prompt = false; }
		if (k === 4) base.messages.unshift({ role: "system", content: "x-anthropic-billing-header: cch=1\nS" });
		if (k === 5) base.messages[0].content = "nul\u0000inside";
		return base;
	};
	const invalid = () => {
		const k = Math.floor(r() * 5);
		if (k === 4) return { messages: [{ role: "user", content: "u" }], reasoning_effort: "huge" };
		if (k === 0) return { messages: [] };
		if (k === 1) return { messages: [{ content: "no role" }] };
		if (k === 2) return { messages: [{ role: "user", content: 7 }] };
		return { messages: [{ role: "user", content: [{ type: "bogus" }] }] };
	};
	// ---- tool use: JSON text with chosen number spellings, escapes, repeated keys, spacing ----
	const NUMS = ["0", "1", "-1", "1.0", "-0", "-0.0", "0.5", "1e-7", "1E+22", "1e22", "123456789012345678901234567890",
		"3.14159", "2.5e-05", "1e16", "1e15", "100.0", "0.1", "5e-324", "1.7976931348623157e308", "4.35", "2.675",
		"1e-4", "0.0001", "12345.678e-3", "9007199254740993", "8.0", "1.5e300", "2.2250738585072014e-308",
		"0.30000000000000004", "123e0", "1e-5", "9.999999999999999e15", "1234567890123456.7", "0.000123", "7e-10"];
	const f64 = new Float64Array(1), u32 = new Uint32Array(f64.buffer);
	const randomNumber = () => {
		const k = r();
		if (k < 0.4) return pick(NUMS);
		if (k < 0.55) return String(Math.floor(r() * 1e6) - 5e5);
		if (k < 0.7) return String(2 ** (Math.floor(r() * 200) - 100) * (chance(0.5) ? 1 : 3));
		do {
			u32[0] = Math.floor(r() * 2 ** 32);
			u32[1] = Math.floor(r() * 2 ** 32);
		} while (!Number.isFinite(f64[0]));
		const x = f64[0];
		return pick([String(x), x.toExponential(20), x.toPrecision(17), x.toExponential()]);
	};
	const ws = () => pick(["", "", " ", "\n", "  ", "\t"]);
	const rawString = () => pick([
		() => JSON.stringify(text(3)),
		() => JSON.stringify(unicodeText()),
		() => '"caf\\u00e9 \\ud83d\\ude00 \\/ \\" \\\\ \\b\\f\\n\\r\\t \\u001f \\u2028"',
		() => '"plain"',
	])();
	const rawJson = (depth = 0) => {
		const k = r();
		if (depth > 3 || k < 0.3) return pick([randomNumber, rawString, () => pick(["true", "false", "null"])])();
		if (k < 0.55) {
			const n = Math.floor(r() * 4);
			return "[" + ws() + Array.from({ length: n }, () => rawJson(depth + 1)).join(ws() + "," + ws()) + ws() + "]";
		}
		const n = Math.floor(r() * 5);
		const members = Array.from({ length: n }, () => `${pick(['"a"', '"b"', '"type"', '"ключ"', '"x y"', rawString()])}${ws()}:${ws()}${rawJson(depth + 1)}`);
		return "{" + ws() + members.join(ws() + "," + ws()) + ws() + "}";
	};
	const schema = () => `{"type": "object", "properties": {"location": {"type": "string", "description": ${rawString()}},` +
		` "days": {"type": "integer", "minimum": ${randomNumber()}, "maximum": ${randomNumber()}, "default": ${randomNumber()}},` +
		` "extra": ${rawJson(1)}, "dup": 1, "dup": ${rawJson(2)}}, "required": ["location"]}`;
	const toolUse = () => {
		const placeholders = [];
		const tools = Array.from({ length: 1 + Math.floor(r() * 3) }, (_, i) => {
			const fn = { name: pick(["get_weather", "search", "run_code", "検索", "a\"b"]) };
			const d = r();
			if (d < 0.6) fn.description = text(6);
			else if (d < 0.8) fn.description = null;
			if (chance(0.85)) {
				fn.parameters = `__P${i}__`;
				placeholders.push([`"__P${i}__"`, chance(0.8) ? schema() : rawJson(0).startsWith("{") ? "{}" : "null"]);
			} else if (chance(0.5)) fn.parameters = null;
			if (chance(0.25)) fn.strict = chance(0.5);
			return chance(0.8) ? { type: "function", function: fn } : { function: fn };
		});
		const args = () => {
			const k = r();
			if (k < 0.1) return "";
			if (k < 0.15) return JSON.stringify(text(3));
			if (k < 0.2) return randomNumber();
			if (k < 0.3) return ws() + rawJson(1) + ws();
			return `{"location": ${rawString()},${ws()}"days": ${randomNumber()}, "nested": ${rawJson(1)}, "k": 1, "k": ${rawJson(2)}}`;
		};
		const msgs = [];
		if (chance(0.6)) msgs.push({ role: "system", content: content() });
		const turns = 1 + Math.floor(r() * 3);
		for (let i = 0; i < turns; i++) {
			msgs.push({ role: "user", content: content() });
			const calls = Array.from({ length: 1 + Math.floor(r() * 3) }, (_, j) => ({
				id: `call_${i}_${j}`, type: "function", function: { name: pick(["get_weather", "search", "x"]), arguments: args() } }));
			msgs.push({ role: "assistant", content: pick([null, "", thinkContent(), "\n", "Let me check."]), tool_calls: calls });
			for (const c of calls) msgs.push({ role: "tool", tool_call_id: c.id, content: content() });
			if (chance(0.6)) msgs.push({ role: "assistant", content: thinkContent() });
		}
		const req = kwargsAndFlags({ model: "qwen3", messages: msgs, tools });
		let raw = JSON.stringify(req);
		// JSON whitespace newlines would split the JSONL line: spaces instead (strings are escaped)
		for (const [ph, val] of placeholders) raw = raw.replace(ph, () => val.replace(/\n/g, " ")); // no $-patterns
		return { request: JSON.parse(raw), raw };
	};
	const toolUnsupported = () => {
		const k = Math.floor(r() * 5);
		const base = { messages: [{ role: "user", content: "q" }], tools: [{ type: "function", function: { name: "f" } }] };
		if (k === 0) base.messages.push({ role: "assistant", content: "", tool_calls: [{ id: "c", type: "function", function: { name: "f", arguments: pick(["{bad", "  ", "NaN", "{\"a\": Infinity}", "[1,]", "\"\\ud800\""]) } }] });
		if (k === 1) base.tools[0].function.strict = null;
		if (k === 2) base.tools[0].defer_loading = true;
		if (k === 3) base.tools[0].function.cache_control = { type: "ephemeral" };
		if (k === 4) base.tools[0].function.parameters = { big: 1e999 };
		let raw = JSON.stringify(base);
		if (k === 4) raw = raw.replace("null", "1e999");
		return { request: JSON.parse(raw.replace("1e999", "0")), raw };
	};

	// continue_final_message (a prefill: the rendering stops inside the last message, which
	// chat.c leaves to the interpreter) and documents (valid ones reach the template as they are)
	const continued = () => {
		const msgs = [];
		if (chance(0.5)) msgs.push({ role: "system", content: text() });
		msgs.push({ role: "user", content: content() });
		const k = Math.floor(r() * 6);
		if (k <= 2) {
			const last = pick([text(), "  " + text(), text() + "  \n", "\n" + text() + "\n\n", "", "   ",
				"<think>\n" + text(), [{ type: "text", text: text() }, { type: "text", text: text() + " " }]]);
			msgs.push({ role: "assistant", content: last });
			const req = { model: "qwen3", messages: msgs, continue_final_message: true };
			if (k === 2) return { category: "continue", expect: "invalid", request: req }; // with add_generation_prompt
			req.add_generation_prompt = false;
			return { category: "continue", expect: "unsupported", request: req };
		}
		const docs = [{ title: text(2), text: text() }, { text: unicodeText() }];
		if (k === 3) return { category: "documents", expect: "ok", request: { model: "qwen3", messages: msgs, documents: docs } };
		if (k === 4) return { category: "documents", expect: "ok", request: { model: "qwen3", messages: msgs, documents: [] } };
		return { category: "invalid", expect: "invalid", request: { model: "qwen3", messages: msgs, documents: pick([[{ title: 1 }], "doc", [["a"]], { a: "b" }]) } };
	};
	const kinds = ["basic", "reasoning", "tools", "list", "unicode", "edge", "tool_use"];
	const cases = [];
	for (let i = 0; i < count; i++) {
		const k = r();
		if (k < 0.07) cases.push({ category: "unsupported", expect: "unsupported", request: unsupported() });
		else if (k < 0.1) cases.push({ category: "invalid", expect: "invalid", request: invalid() });
		else if (k < 0.15) cases.push(continued());
		else {
			const kind = kinds[i % kinds.length];
			if (kind === "tool_use") {
				if (chance(0.12)) cases.push({ category: "tool_unsupported", expect: "unsupported", ...toolUnsupported() });
				else cases.push({ category: kind, expect: "ok", ...toolUse() });
				continue;
			}
			cases.push({ category: kind, expect: "ok", request: kwargsAndFlags({ model: "qwen3", messages: conversationOf(kind) }) });
		}
	}
	return cases;
}

// ---- modes -----------------------------------------------------------------------------------
async function renderMode() {
	const render = makeRenderer(opt("--config", "models/qwen3/tokenizer_config.json"));
	const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
	const out = [];
	for await (const line of rl) {
		if (!line.trim()) continue;
		try {
			out.push(JSON.stringify({ status: "ok", text: render(JSON.parse(line)) }));
		} catch (e) {
			out.push(JSON.stringify({ status: "error", why: String(e.message ?? e) }));
		}
	}
	process.stdout.write(out.length ? out.join("\n") + "\n" : "");
}

function readJsonl(path) {
	return fs.readFileSync(path, "utf8").split("\n").filter((l) => l.trim()).map((l) => JSON.parse(l));
}

function checkMode(dir) {
	const cases = readJsonl(`${dir}/cases.jsonl`);
	const ref = readJsonl(`${dir}/ref.jsonl`);
	const c = readJsonl(`${dir}/c.jsonl`);
	// Optional second reference: Python's jinja2 (tests/e2e/ref_chat.py), as vLLM renders.
	const py = fs.existsSync(`${dir}/py.jsonl`) ? readJsonl(`${dir}/py.jsonl`) : null;
	let failed = 0;
	const stats = new Map();
	const report = (cat, ok, detail) => {
		const s = stats.get(cat) ?? { n: 0, bad: [] };
		s.n++;
		if (!ok) s.bad.push(detail);
		stats.set(cat, s);
	};
	if (ref.length !== cases.length || c.length !== cases.length || (py && py.length !== cases.length)) {
		console.log(`not ok - parity: line counts differ (cases ${cases.length}, ref ${ref.length}, c ${c.length}, py ${py?.length})`);
		return 1;
	}
	cases.forEach((cs, i) => {
		if (cs.expect === "ok") {
			// @huggingface/jinja's tojson is not Python's json.dumps (number spelling, spacing): tool
			// definitions and tool-call arguments are compared with Python's jinja2 only.
			const hfOk = cs.category === "tool_use" || (ref[i].status === "ok" && ref[i].text === c[i].text);
			let good = c[i].status === "ok" && hfOk && (py || cs.category !== "tool_use");
			if (py) good &&= py[i].status === "ok" && py[i].text === c[i].text;
			report(cs.category, good, `case ${i}: ref ${JSON.stringify(ref[i]).slice(0, 400)}\n#   c   ${JSON.stringify(c[i]).slice(0, 400)}` +
				(py ? `\n#   py  ${JSON.stringify(py[i]).slice(0, 400)}` : ""));
		} else {
			report(cs.category, c[i].status === cs.expect, `case ${i}: want ${cs.expect}, c says ${JSON.stringify(c[i])}`);
		}
	});
	let total = 0;
	for (const [cat, s] of stats) {
		total += s.n;
		const what = cats[cat] ?? cat;
		if (s.bad.length === 0) console.log(`ok - parity ${cat}: ${s.n} ${what}`);
		else {
			failed++;
			console.log(`not ok - parity ${cat}: ${s.bad.length} of ${s.n} ${what} differ`);
			for (const d of s.bad.slice(0, 5)) console.log(`#   ${d}`);
		}
	}
	const okCases = cases.filter((x) => x.expect === "ok").length;
	const refs = py ? "@huggingface/jinja and Python jinja2" : "@huggingface/jinja";
	console.log(`${okCases >= 50 ? "ok" : "not ok"} - parity: ${okCases} rendered conversations compared with ${refs} (>= 50), ${total} cases in all`);
	return failed || okCases < 50 ? 1 : 0;
}
const cats = {
	basic: "conversations render as the references render them",
	reasoning: "multi-turn conversations with reasoning render identically",
	tools: "conversations with tool messages render identically",
	list: "conversations with list content render identically",
	unicode: "unicode conversations render identically",
	edge: "conversations with other roles and later system turns render identically",
	unsupported: "requests with audio, uuids, images, continue_final_message, ... are refused as unsupported",
	tool_use: "conversations with tools and tool calls render as Python's jinja2 renders them (json.dumps)",
	tool_unsupported: "tool requests vLLM versions render differently are refused as unsupported",
	invalid: "malformed requests are refused as invalid",
	continue: "continue_final_message: refused by chat.c (the interpreter renders it), invalid with add_generation_prompt",
	documents: "requests with documents render as the references render them",
};

const isMain = process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href;
if (!isMain) {
	// imported (bench/chat/run.sh uses makeRenderer): no mode runs
} else if (args.includes("--gen")) {
	const dir = opt("--gen");
	const cases = generate(Number(opt("--seed", "1")), Number(opt("--count", "200")));
	fs.writeFileSync(`${dir}/cases.jsonl`, cases.map((c) => JSON.stringify(c)).join("\n") + "\n");
	fs.writeFileSync(`${dir}/requests.jsonl`, cases.map((c) => c.raw ?? JSON.stringify(c.request)).join("\n") + "\n");
} else if (args.includes("--ids-inputs")) {
	// For the token-id comparison: the requests of the cases that render, and the reference's
	// rendering of each as {"text", "cat"} (for ref_tokenize.mjs and compare_ids.mjs).
	const dir = opt("--ids-inputs");
	const cases = readJsonl(`${dir}/cases.jsonl`);
	// The rendering to tokenize: Python jinja2's (what vLLM runs) when there, else @huggingface/jinja's
	const ref = fs.existsSync(`${dir}/py.jsonl`) ? readJsonl(`${dir}/py.jsonl`) : readJsonl(`${dir}/ref.jsonl`);
	const keep = cases.map((c, i) => i).filter((i) => cases[i].expect === "ok" && ref[i].status === "ok");
	fs.writeFileSync(`${dir}/ok_requests.jsonl`, keep.map((i) => cases[i].raw ?? JSON.stringify(cases[i].request)).join("\n") + "\n");
	fs.writeFileSync(`${dir}/ok_texts.jsonl`, keep.map((i) => JSON.stringify({ text: ref[i].text, cat: cases[i].category })).join("\n") + "\n");
} else if (args.includes("--check")) {
	process.exitCode = checkMode(opt("--check"));
} else {
	await renderMode();
}
