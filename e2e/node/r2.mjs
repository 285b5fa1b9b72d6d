// review2: one npm openai call through hooksproxy, described by R2_SPEC
// (JSON), reported as one JSON line on stdout. Driven by
// e2e/clients_review_test.go.
//
// R2_SPEC: {base, records, token, prompt, messages?, stream, tools?,
//           headers?, maxRetries?, timeout?, abortAfterChunks?}
import OpenAI from 'openai';

const spec = JSON.parse(process.env.R2_SPEC);
const opts = { baseURL: spec.base, apiKey: 'test-key' };
if (spec.maxRetries !== undefined && spec.maxRetries !== null) opts.maxRetries = spec.maxRetries;
if (spec.timeout) opts.timeout = spec.timeout;
const client = new OpenAI(opts);
const fn = (name, ...props) => ({
  type: 'function',
  function: { name, parameters: { type: 'object', properties: Object.fromEntries(props.map((p) => [p, { type: 'string' }])) } },
});
const tools = [fn('get_weather', 'city', 'unit', 'detail', 'api_key'), fn('get_time', 'timezone', 'format'), fn('delete_files', 'path')];

const out = { ok: false };
const t0 = Date.now();
const params = { model: 'gpt-4o-mini', messages: spec.messages ?? [{ role: 'user', content: spec.prompt }] };
if (spec.tools) params.tools = tools;
if (spec.stream) params.stream = true;
const reqOpts = { headers: spec.headers ?? {} };
const ac = new AbortController();
reqOpts.signal = ac.signal;
try {
  const { data, response } = await client.chat.completions.create(params, reqOpts).withResponse();
  out.session = response.headers.get('x-agent-hooks-session');
  out.status = response.status;
  if (spec.stream) {
    let content = '';
    let chunks = 0;
    let finish = null;
    const calls = [];
    for await (const chunk of data) {
      chunks++;
      for (const c of chunk.choices) {
        if (c.delta?.content) content += c.delta.content;
        for (const tc of c.delta?.tool_calls ?? []) {
          const call = (calls[tc.index] ??= { id: '', name: '', arguments: '' });
          if (tc.id) call.id = tc.id;
          if (tc.function?.name) call.name += tc.function.name;
          if (tc.function?.arguments) call.arguments += tc.function.arguments;
        }
        if (c.finish_reason) finish = c.finish_reason;
      }
      if (spec.abortAfterChunks && chunks >= spec.abortAfterChunks) {
        ac.abort();
      }
    }
    Object.assign(out, { content, chunks, finish, calls });
  } else {
    const m = data.choices[0].message;
    out.content = m.content;
    out.finish = data.choices[0].finish_reason;
    out.calls = (m.tool_calls ?? []).map((c) => ({ id: c.id, name: c.function.name, arguments: c.function.arguments }));
  }
  out.ok = true;
} catch (e) {
  out.error = {
    name: e?.constructor?.name,
    status: e?.status,
    type: e?.type ?? e?.error?.type,
    code: e?.code ?? e?.error?.code,
    message: String(e?.message ?? e).slice(0, 300),
    shouldRetry: e?.headers?.get?.('x-should-retry') ?? null,
    session: e?.headers?.get?.('x-agent-hooks-session') ?? null,
  };
  out.session = out.error.session;
}
out.elapsed = Date.now() - t0;
// Records right after the answer, as a client holding it would look.
if (spec.records && out.session) {
  try {
    const r = await fetch(`${spec.records}?session=${encodeURIComponent(out.session)}`, { headers: { Authorization: `Bearer ${spec.token}` } });
    const j = await r.json();
    out.records = (j.records ?? []).map((x) => `${x.sequence}:${x.interception_point}:${x.verdict?.decision}${x.verdict?.reason ? ':' + x.verdict.reason : ''}`);
  } catch (e) {
    out.recordsError = String(e);
  }
}
console.log(JSON.stringify(out));
