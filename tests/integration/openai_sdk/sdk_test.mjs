// The official OpenAI Node SDK against a prfaas gateway serving a GGUF: chat and
// completions, streamed and not. Run by test_openai_sdk (which starts the deployment and
// says, from the model's own tokenizer and chat template, how many prompt tokens each
// request must report). Exits non-zero with a message on the first failed check.
//
//   PRFAAS_BASE_URL   http://127.0.0.1:PORT/v1
//   PRFAAS_MODEL      the served model id
//   PRFAAS_EXPECT     JSON: {"completion_prompt_tokens": N, "chat_prompt_tokens": N}
import OpenAI from 'openai';

const expect = JSON.parse(process.env.PRFAAS_EXPECT);
const model = process.env.PRFAAS_MODEL;
const client = new OpenAI({ baseURL: process.env.PRFAAS_BASE_URL, apiKey: 'unused', maxRetries: 0 });

let failures = 0;
function check(cond, what, got) {
  if (!cond) {
    failures++;
    console.error(`FAILED: ${what}${got === undefined ? '' : ': ' + JSON.stringify(got)}`);
  } else {
    console.log(`ok: ${what}`);
  }
}

const prompt = 'Prefill-as-a-Service ships the KVCache of hybrid models across datacenters.';
const messages = [
  { role: 'system', content: 'You are terse.' },
  { role: 'user', content: 'What crosses the datacenter link?' },
];

// Completions, not streamed.
const c = await client.completions.create({ model, prompt, max_tokens: 12, temperature: 0, seed: 1 });
check(c.object === 'text_completion', 'completion object', c.object);
check(c.model === model, 'completion model', c.model);
check(typeof c.created === 'number' && c.created > 1.7e9, 'completion created is a unix time', c.created);
check(c.choices.length === 1 && typeof c.choices[0].text === 'string', 'completion text');
check(c.choices[0].finish_reason === 'length' || c.choices[0].finish_reason === 'stop',
      'completion finish_reason', c.choices[0].finish_reason);
check(c.usage.prompt_tokens === expect.completion_prompt_tokens,
      'completion usage.prompt_tokens in the model\'s tokens', c.usage);
check(c.usage.completion_tokens >= 1 && c.usage.completion_tokens <= 12, 'completion usage.completion_tokens', c.usage);
check(c.usage.total_tokens === c.usage.prompt_tokens + c.usage.completion_tokens, 'completion usage.total_tokens');

// Completions, streamed, with usage: the same text as unstreamed (greedy).
let text = '';
let usage = null;
let finish = null;
const cs = await client.completions.create({ model, prompt, max_tokens: 12, temperature: 0, seed: 1,
                                              stream: true, stream_options: { include_usage: true } });
for await (const chunk of cs) {
  if (chunk.usage) usage = chunk.usage;
  for (const ch of chunk.choices) {
    text += ch.text;
    if (ch.finish_reason) finish = ch.finish_reason;
  }
}
check(text === c.choices[0].text, 'streamed completion text equals the unstreamed one', { text, was: c.choices[0].text });
check(finish === c.choices[0].finish_reason, 'streamed completion finish_reason', finish);
check(usage && usage.prompt_tokens === expect.completion_prompt_tokens, 'streamed completion usage', usage);

// Chat, not streamed: the GGUF's chat template makes the prompt.
const r = await client.chat.completions.create({ model, messages, max_tokens: 10, temperature: 0,
                                                 logprobs: true, top_logprobs: 2 });
check(r.object === 'chat.completion', 'chat object', r.object);
check(r.choices[0].message.role === 'assistant', 'chat message role');
check(typeof r.choices[0].message.content === 'string', 'chat message content');
check(r.usage.prompt_tokens === expect.chat_prompt_tokens,
      'chat usage.prompt_tokens counts the chat template\'s tokens', r.usage);
const lp = r.choices[0].logprobs;
check(lp && Array.isArray(lp.content) && lp.content.length === r.usage.completion_tokens,
      'chat logprobs: one entry per output token', lp && lp.content.length);
check(lp && lp.content.every(e => e.logprob <= 0 && e.top_logprobs.length === 2 && Array.isArray(e.bytes)),
      'chat logprobs entries: logprob, two alternatives, bytes');

// Chat, streamed: role first, then content deltas, then the finish, then usage.
let content = '';
let role = null;
let chatUsage = null;
let chatFinish = null;
const rs = await client.chat.completions.create({ model, messages, max_tokens: 10, temperature: 0,
                                                  stream: true, stream_options: { include_usage: true } });
for await (const chunk of rs) {
  if (chunk.usage) chatUsage = chunk.usage;
  for (const ch of chunk.choices) {
    if (ch.delta.role) role = ch.delta.role;
    if (ch.delta.content) content += ch.delta.content;
    if (ch.finish_reason) chatFinish = ch.finish_reason;
  }
}
check(role === 'assistant', 'streamed chat role', role);
check(content === r.choices[0].message.content, 'streamed chat content equals the unstreamed one', { content });
check(chatFinish === r.choices[0].finish_reason, 'streamed chat finish_reason', chatFinish);
check(chatUsage && chatUsage.prompt_tokens === expect.chat_prompt_tokens, 'streamed chat usage', chatUsage);

// A field prfaas does not honour is a 400 naming it, which the SDK surfaces as such.
try {
  await client.chat.completions.create({ model, messages, response_format: { type: 'json_object' } });
  check(false, 'response_format json_object is refused');
} catch (e) {
  check(e instanceof OpenAI.BadRequestError && e.param === 'response_format',
        'response_format json_object is a 400 naming it', { status: e.status, param: e.param });
}

// The models list.
const list = await client.models.list();
check(list.data.some(m => m.id === model), 'models.list names the model');

if (failures > 0) {
  console.error(`${failures} check(s) failed`);
  process.exit(1);
}
console.log('all OpenAI SDK checks passed');
