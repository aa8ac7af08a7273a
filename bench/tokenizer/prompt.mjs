// SPDX-License-Identifier: Apache-2.0
// Writes the benchmark's 10 KB mixed prompt (deterministic) to stdout: a chat-like mix of English
// prose, code, JSON, numbers, Chinese, Korean, emoji, whitespace and \r\n, cut to 10,240 bytes at
// a character boundary. With --english: 10 KB of English prose on ONE line instead (for Gemma 3 and
// Llama 2 that is one BPE word: their normalizer makes spaces "▁" and nothing splits it).
const parts = [
	'You are a helpful assistant. Answer the question below as precisely as you can, and cite the ' +
		"relevant lines. If you don't know, say so; we'll check the answer against the logs.\n\n",
	'def route(request, workers):\n    """Pick the worker with the longest cached prefix."""\n' +
		'    best = max(workers, key=lambda w: w.overlap(request.blocks))\n    return best if best.load < 0.9 else None\n\n',
	'{"model": "Qwen/Qwen3-8B", "temperature": 0.7, "max_tokens": 512, "stream": true, "stop": ["<|im_end|>"]}\n',
	'int hash_block(const uint32_t *ids, size_t n, uint64_t parent)\n{\n\treturn XXH3_64bits_withSeed(ids, n * 4, parent);\n}\r\n',
	'请用中文总结以下内容：缓存感知的路由器可以显著降低首个令牌的延迟。我们在三台机器上测试了这个方案。\n',
	'다음 내용을 한국어로 요약해 주세요: 캐시를 고려한 라우팅은 첫 토큰 지연 시간을 줄입니다.\n',
	'Results 🚀: p50 = 12.5 ms, p99 = 87.3 ms (n = 10,000); hit rate 73.2% ✅ vs. 41.0% ❌ for round-robin 🤖.\n',
	'    - step 1:\tparse the request\n    - step 2:\ttokenize   (exactly like the engine)\n    - step 3:\tscore workers\n\n',
	'The quick brown fox jumps over the lazy dog. THE QUICK BROWN FOX! It\'s 2026-11-29T08:00:00Z; ' +
		"they've been here since 09:15, haven't they?\n",
];
const english = ['The router reads each request, finds the worker whose cache holds the longest prefix of it, and sends it there.',
	"If no worker holds any of it, the least loaded one gets it; we'll see how often that happens in the logs.",
	'Caching the prompt saves the prefill of every shared token, which is most of the latency of a long conversation.',
	'Each block of sixteen tokens is hashed with its parent, so two prompts share blocks exactly as long as they agree.',
	'The quick brown fox jumps over the lazy dog, and nobody minds, because it has done so every morning since 1999.'];
let s = '';
if (process.argv.includes('--english')) for (let i = 0; Buffer.byteLength(s) < 10240; i++) s += english[(i * 3) % english.length] + ' ';
else for (let i = 0; Buffer.byteLength(s) < 10240; i++) s += parts[(i * 7) % parts.length];
let b = Buffer.from(s).subarray(0, 10240);
while ((b[b.length - 1] & 0xc0) === 0x80 || b[b.length - 1] >= 0xc0) b = b.subarray(0, b.length - 1); // whole chars only
process.stdout.write(new TextDecoder('utf-8', { fatal: true }).decode(b));
