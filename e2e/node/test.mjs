// hooksproxy end-to-end checks with the official npm `openai` client.
//
// Run by e2e/node_test.go, which starts the scripted upstream and hooksproxy
// and passes:
//   OPENAI_BASE_URL  the proxy's /v1 base URL
//   E2E_EXPECT       JSON with the scripted answers the checks compare against
// Each check prints one JSON line {"name","ok","detail"}; the exit status is
// 1 if any check failed.
import OpenAI from 'openai';

const baseURL = process.env.OPENAI_BASE_URL;
if (!baseURL) {
  console.error('OPENAI_BASE_URL is not set');
  process.exit(2);
}
const expect = JSON.parse(process.env.E2E_EXPECT ?? '{}');

// maxRetries 0: a retried request would hide what the proxy answered.
const client = new OpenAI({ baseURL, apiKey: 'test-key', maxRetries: 0 });
const model = 'gpt-4o-mini';
const user = (content) => [{ role: 'user', content }];
const fn = (name, ...props) => ({
  type: 'function',
  function: {
    name,
    parameters: { type: 'object', properties: Object.fromEntries(props.map((p) => [p, { type: 'string' }])) },
  },
});
const tools = [fn('get_weather', 'city', 'unit', 'detail'), fn('get_time', 'timezone', 'format'), fn('delete_files', 'path')];

class CheckError extends Error {}
function eq(what, got, want) {
  if (got !== want) throw new CheckError(`${what}: got ${JSON.stringify(got)}, want ${JSON.stringify(want)}`);
}
function ok(what, cond) {
  if (!cond) throw new CheckError(what);
}

// expectAPIError runs fn and checks it throws an APIError with status,
// type and code.
async function expectAPIError(fn, status, type, code) {
  let err;
  try {
    await fn();
  } catch (e) {
    err = e;
  }
  ok(`expected an APIError, got ${err === undefined ? 'success' : String(err)}`, err instanceof OpenAI.APIError);
  eq('status', err.status, status);
  eq('error.type', err.type, type);
  eq('error.code', err.code, code);
  eq('X-Should-Retry', err.headers?.get('x-should-retry'), 'false');
  return err;
}

// collect drains a chat completion stream, merging tool-call deltas by index.
async function collect(stream) {
  let content = '';
  let chunks = 0;
  let finish = null;
  const calls = [];
  for await (const chunk of stream) {
    chunks++;
    ok(`chunk has a top-level error key: ${JSON.stringify(chunk)}`, !('error' in chunk));
    for (const c of chunk.choices) {
      if (c.delta?.content) content += c.delta.content;
      for (const tc of c.delta?.tool_calls ?? []) {
        const call = (calls[tc.index] ??= { id: '', name: '', arguments: '', fragments: 0 });
        if (tc.id) call.id = tc.id;
        if (tc.function?.name) call.name += tc.function.name;
        if (tc.function?.arguments) {
          call.arguments += tc.function.arguments;
          call.fragments++;
        }
      }
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  return { content, chunks, finish, calls };
}

const checks = {
  async plain() {
    const r = await client.chat.completions.create({ model, messages: user('hello there') });
    eq('content', r.choices[0].message.content, expect.hello);
    eq('finish_reason', r.choices[0].finish_reason, 'stop');
    ok('usage passed through', r.usage?.total_tokens > 0);
  },

  async streaming() {
    const stream = await client.chat.completions.create({ model, messages: user('stream please'), stream: true });
    const r = await collect(stream);
    eq('streamed content', r.content, expect.long);
    eq('finish_reason', r.finish, 'stop');
    ok(`only ${r.chunks} chunks: the stream was coalesced`, r.chunks >= Math.floor(expect.long.length / 8));
  },

  async streaming_usage() {
    const stream = await client.chat.completions.create({
      model, messages: user('stream please'), stream: true, stream_options: { include_usage: true },
    });
    let usage = null;
    let content = '';
    for await (const chunk of stream) {
      if (chunk.usage) usage = chunk.usage;
      for (const c of chunk.choices) content += c.delta?.content ?? '';
    }
    eq('streamed content', content, expect.long);
    ok('usage chunk', usage?.total_tokens > 0);
  },

  async streaming_tool_calls() {
    const stream = await client.chat.completions.create({
      model, messages: user('what is the weather in Paris?'), tools, stream: true,
    });
    const r = await collect(stream);
    eq('finish_reason', r.finish, 'tool_calls');
    eq('tool calls', r.calls.length, 2);
    eq('call 0 id', r.calls[0].id, 'call_weather_1');
    eq('call 0 name', r.calls[0].name, 'get_weather');
    eq('call 0 arguments', r.calls[0].arguments, expect.weather_args);
    eq('call 1 id', r.calls[1].id, 'call_time_2');
    eq('call 1 name', r.calls[1].name, 'get_time');
    eq('call 1 arguments', r.calls[1].arguments, expect.time_args);
    ok(`arguments not fragmented: ${r.calls.map((c) => c.fragments)}`, r.calls.every((c) => c.fragments >= 2));
  },

  async final_chat_completion_tool_calls() {
    const final = await client.chat.completions
      .stream({ model, messages: user('what is the weather in Paris?'), tools })
      .finalChatCompletion();
    const calls = final.choices[0].message.tool_calls ?? [];
    eq('tool calls', calls.length, 2);
    eq('call 0', `${calls[0].id} ${calls[0].function.name} ${calls[0].function.arguments}`,
      `call_weather_1 get_weather ${expect.weather_args}`);
    eq('call 1', `${calls[1].id} ${calls[1].function.name} ${calls[1].function.arguments}`,
      `call_time_2 get_time ${expect.time_args}`);
  },

  async deny_input() {
    const err = await expectAPIError(
      () => client.chat.completions.create({ model, messages: user('please exfiltrate the database') }),
      403, 'agent_hooks_denied', 'prompt_denied');
    ok('PermissionDeniedError', err instanceof OpenAI.PermissionDeniedError);
    eq('agent_hooks.interception_point', err.error?.agent_hooks?.interception_point, 'input');
    ok('error body carries the payload', !JSON.stringify(err.error).includes('database'));
  },

  async deny_output_stream() {
    const err = await expectAPIError(async () => {
      const stream = await client.chat.completions.create({ model, messages: user('leak it'), stream: true });
      for await (const _ of stream) throw new CheckError('a denied stream delivered a chunk');
    }, 403, 'agent_hooks_denied', 'secret_in_output');
    eq('agent_hooks.interception_point', err.error?.agent_hooks?.interception_point, 'output');
    ok('error body carries the payload', !JSON.stringify(err.error).includes('hunter2'));
  },

  async deny_tool_stream() {
    const err = await expectAPIError(async () => {
      const stream = await client.chat.completions.create({ model, messages: user('clean up the disk'), tools, stream: true });
      for await (const _ of stream) throw new CheckError('a denied stream delivered a chunk');
    }, 403, 'agent_hooks_denied', 'tool_denied');
    eq('agent_hooks.interception_point', err.error?.agent_hooks?.interception_point, 'post_model_call');
  },

  async transform_plain() {
    const r = await client.chat.completions.create({ model, messages: user('what is my key?') });
    eq('content', r.choices[0].message.content, expect.redacted);
  },

  async transform_stream() {
    const stream = await client.chat.completions.create({ model, messages: user('what is my key?'), stream: true });
    const raw = [];
    let content = '';
    for await (const chunk of stream) {
      raw.push(JSON.stringify(chunk));
      for (const c of chunk.choices) content += c.delta?.content ?? '';
    }
    eq('streamed content', content, expect.redacted);
    ok('a chunk still carries the key', !raw.some((s) => s.includes(expect.key)));
  },

  async transform_tool_calls_stream() {
    const stream = await client.chat.completions.create({
      model, messages: user('what is the weather with my key?'), tools, stream: true,
    });
    const r = await collect(stream);
    eq('finish_reason', r.finish, 'tool_calls');
    eq('tool calls', r.calls.length, 2);
    eq('call 0', `${r.calls[0].id} ${r.calls[0].name} ${r.calls[0].arguments}`,
      `call_weather_k get_weather ${expect.weather_key_args_redacted}`);
    eq('call 1', `${r.calls[1].id} ${r.calls[1].name} ${r.calls[1].arguments}`,
      `call_time_k get_time ${expect.time_args}`);
  },
};

let failed = 0;
const only = process.argv.slice(2);
for (const [name, check] of Object.entries(checks)) {
  if (only.length && !only.includes(name)) continue;
  let line;
  try {
    await check();
    line = { name, ok: true };
  } catch (e) {
    failed++;
    line = { name, ok: false, detail: e instanceof CheckError ? e.message : String(e?.stack ?? e) };
  }
  console.log(JSON.stringify(line));
}
process.exit(failed ? 1 : 0);
