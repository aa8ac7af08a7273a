// SPDX-License-Identifier: Apache-2.0
// The official `openai` npm client, unmodified, streaming one chat completion from a base URL.
// Prints one JSON line: {"content": ..., "chunks": N, "finish_reason": ..., "model": ...}.
// usage: node openai_stream.mjs BASE_URL [MODEL]     e.g. http://10.96.0.50:8000/v1
// Without MODEL, the first one of GET /models (client.models.list()) is used.
import OpenAI from 'openai';

const baseURL = process.argv[2] || 'http://10.96.0.50:8000/v1';
const client = new OpenAI({ baseURL, apiKey: 'sk-kvsplice-test', maxRetries: 0, timeout: 30000 });
let model = process.argv[3];
if (!model) {
	const models = await client.models.list();
	model = models.data[0].id;
}

const stream = await client.chat.completions.create({
	model,
	messages: [
		{ role: 'system', content: 'You are a test.' },
		{ role: 'user', content: 'Say hello through the node.' },
	],
	max_tokens: 16,
	stream: true,
});
let content = '';
let chunks = 0;
let finish = null;
for await (const chunk of stream) {
	chunks++;
	const c = chunk.choices?.[0];
	if (c?.delta?.content) content += c.delta.content;
	if (c?.finish_reason) finish = c.finish_reason;
}
console.log(JSON.stringify({ content, chunks, finish_reason: finish, model }));
