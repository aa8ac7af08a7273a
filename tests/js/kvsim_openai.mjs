// SPDX-License-Identifier: Apache-2.0
// The official `openai` npm client against kvsim (test_kvsim.sh): streaming and non-streaming
// completions and chat completions, SSE parsed by the client itself. Prints TAP lines.
// usage: node kvsim_openai.mjs BASE_URL
import OpenAI from 'openai';

const base = process.argv[2];
const client = new OpenAI({ baseURL: base + '/v1', apiKey: 'none', maxRetries: 0 });
let failed = 0;
const ok = (c, what) => {
	console.log(`${c ? 'ok' : 'not ok'} - openai client: ${what}`);
	if (!c) failed++;
};

const prompt = ' the cache of the model is a block of the worker'.repeat(8);

// Non-streaming completion.
const r1 = await client.completions.create({ model: 'Qwen/Qwen3-0.6B', prompt, max_tokens: 5 });
ok(r1.object === 'text_completion' && r1.choices[0].finish_reason === 'length',
	'non-stream completion object');
ok(r1.usage.completion_tokens === 5 && r1.usage.prompt_tokens > 16, 'usage counts');
ok(r1.usage.prompt_tokens_details.cached_tokens === 0, 'cached_tokens present (0 on a miss)');

// Streaming completion with usage.
const s = await client.completions.create({
	model: 'Qwen/Qwen3-0.6B', prompt, max_tokens: 6, stream: true,
	stream_options: { include_usage: true },
});
let text = '', chunks = 0, usage = null, finish = null;
for await (const c of s) {
	chunks++;
	if (c.choices.length) {
		text += c.choices[0].text;
		if (c.choices[0].finish_reason) finish = c.choices[0].finish_reason;
	}
	if (c.usage) usage = c.usage;
}
ok(chunks === 7, `6 token chunks + 1 usage chunk (got ${chunks})`);
ok(finish === 'length', 'finish_reason length on the last token');
ok(text.startsWith(r1.choices[0].text) && text.length > r1.choices[0].text.length,
	'same prompt, same deterministic output');
ok(usage && usage.prompt_tokens_details.cached_tokens ===
	Math.floor((r1.usage.prompt_tokens - 1) / 16) * 16,
	`streamed usage: cached_tokens = whole blocks of prompt-1 (${usage && usage.prompt_tokens_details.cached_tokens})`);

// Chat, streaming.
const cs = await client.chat.completions.create({
	model: 'Qwen/Qwen3-0.6B', max_tokens: 4, stream: true,
	messages: [{ role: 'system', content: 'You are short.' }, { role: 'user', content: prompt }],
	stream_options: { include_usage: true },
});
let role = null, ctext = '', cusage = null;
for await (const c of cs) {
	if (c.choices.length && c.choices[0].delta.role) role = c.choices[0].delta.role;
	if (c.choices.length && c.choices[0].delta.content) ctext += c.choices[0].delta.content;
	if (c.usage) cusage = c.usage;
}
ok(role === 'assistant' && ctext.length > 0, 'chat stream: role chunk then content');
ok(cusage && cusage.completion_tokens === 4 &&
	typeof cusage.prompt_tokens_details.cached_tokens === 'number', 'chat stream usage');

// Chat, non-streaming.
const c1 = await client.chat.completions.create({
	model: 'Qwen/Qwen3-0.6B', max_tokens: 3,
	messages: [{ role: 'user', content: 'hello' }],
});
ok(c1.object === 'chat.completion' && c1.choices[0].message.role === 'assistant',
	'non-stream chat completion');

// Errors as OpenAI errors.
try {
	await client.completions.create({ model: 'nope', prompt: 'x', max_tokens: 1 });
	ok(false, 'unknown model refused');
} catch (e) {
	ok(e.status === 404 && /does not exist/.test(e.message), 'unknown model: 404 NotFoundError');
}
try {
	await client.completions.create({ model: 'Qwen/Qwen3-0.6B', prompt: ' the'.repeat(5000), max_tokens: 1 });
	ok(false, 'too long prompt refused');
} catch (e) {
	ok(e.status === 400 && /maximum context length/.test(e.message),
		'prompt over --max-model-len: 400 with vLLM\'s message');
}
const models = await client.models.list();
ok(models.data.length === 1 && models.data[0].id === 'Qwen/Qwen3-0.6B', 'GET /v1/models');
process.exit(failed ? 1 : 0);
