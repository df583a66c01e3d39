// Client compatibility: Cloudflare's official Node SDK (npm `cloudflare` 7.3.0) against `clef serve`.
//
// Run by tests/sdk/run.sh, which starts the server and sets
//   CLEF_SDK_BASE  http://127.0.0.1:PORT (the server's root)
//   CLEF_SDK_KEY   the server's --api-key
// Standalone: CLEF_SDK_BASE=... CLEF_SDK_KEY=... node --test tests/sdk/node/sdk.test.mjs
//
// Every SDK answer is compared, exactly (same keys in the same order, same numbers), with what the
// server returns for the same request on POST /v1/systemone, called with plain fetch and with
// the `model` field added.

import { before, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import Cloudflare from 'cloudflare';
import { VERSION as SDK_VERSION } from 'cloudflare/version';

const BASE = (process.env.CLEF_SDK_BASE ?? '').replace(/\/+$/, '');
const KEY = process.env.CLEF_SDK_KEY ?? '';
const ACCOUNT = 'acc'; // any value: the server ignores the account segment
const MODEL = 'clef-flash';
const PNG_B64 = readFileSync(new URL('../fixtures/gradient-32.png', import.meta.url)).toString('base64');

const QUESTIONS = {
  urgent: { type: 'noul', instructions: 'Is this support request urgent?' },
  team: {
    type: 'choice',
    instructions: 'Which team should handle it?',
    criteria: { billing: 'Payments, refunds, invoices', technical: 'Outages, crashes, errors' },
  },
  severity: {
    type: 'score',
    instructions: 'How severe is the problem?',
    criteria: ['minor', 'major', 'critical'],
  },
};

if (!BASE) throw new Error('CLEF_SDK_BASE is not set (run tests/sdk/run.sh)');

/** The reference client: { status, body } of a plain fetch. */
async function http(method, path, body, token = KEY) {
  const headers = { 'content-type': 'application/json' };
  if (token) headers.authorization = `Bearer ${token}`;
  const resp = await fetch(BASE + path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(60_000),
  });
  return { status: resp.status, body: await resp.json() };
}

/** The bare answer of POST /v1/systemone for the same request with `model` set. */
async function reference(model, fields) {
  const { model: _ignored, ...rest } = fields;
  const { status, body } = await http('POST', '/v1/systemone', { model, ...rest });
  assert.equal(status, 200, JSON.stringify(body));
  return body;
}

/** A client whose fetch records what the SDK put on the wire. */
function makeClient(apiToken = KEY) {
  const wire = [];
  const client = new Cloudflare({
    apiToken,
    baseURL: `${BASE}/client/v4`,
    maxRetries: 0, // a refusal must surface at once, not after retries
    timeout: 60_000,
    fetch: async (url, init) => {
      wire.push({ url: String(url), init });
      return fetch(url, init);
    },
  });
  return { client, wire };
}

function assertSameAnswer(got, want) {
  assert.deepStrictEqual(got, want);
  assert.equal(JSON.stringify(got), JSON.stringify(want)); // key order too
}

function assertWire(wire, model, expectModelField) {
  const { url, init } = wire.at(-1);
  // the SDK percent-encodes the slashes of the model name
  assert.equal(new URL(url).pathname, `/client/v4/accounts/${ACCOUNT}/ai/run/${model.replaceAll('/', '%2F')}`);
  assert.equal(new Headers(init.headers).get('authorization'), `Bearer ${KEY}`);
  const sent = JSON.parse(init.body);
  assert.equal('model' in sent, expectModelField, init.body.slice(0, 200));
  return sent;
}

async function assertRefused(promise, ErrorClass, status, code) {
  await assert.rejects(promise, (err) => {
    assert.ok(err instanceof ErrorClass, `${err?.constructor?.name}: ${err?.message}`);
    assert.ok(err instanceof Cloudflare.APIError);
    assert.equal(err.status, status, err.message);
    assert.deepEqual(err.errors.map((e) => e.code), [code]); // the SDK exposes the envelope's errors
    assert.equal(err.error.success, false);
    assert.equal(err.error.result, null);
    return true;
  });
}

let served = [];
let maxContext = 0;
const { client, wire } = makeClient();

before(async () => {
  const { status, body } = await http('GET', '/v1/models');
  assert.equal(status, 200);
  served = body.data.map((entry) => entry.id);
  maxContext = body.data[0].clef.max_context;
});

test('0 the pinned SDK and the served names', () => {
  assert.equal(SDK_VERSION, '7.3.0');
  for (const name of ['clef', 'clef-flash']) assert.ok(served.includes(name), served.join(','));
});

test('1 noul, choice and score in one request', async () => {
  const fields = { model: MODEL, state: 'Checkout has been failing for every customer for the last hour.', questions: QUESTIONS };
  const got = await client.ai.run(`@cf/cloudflare/${MODEL}`, { account_id: ACCOUNT, ...fields });
  assertWire(wire, `@cf/cloudflare/${MODEL}`, true);
  assertSameAnswer(got, await reference(MODEL, fields));
  assert.deepEqual(Object.keys(got.answers), ['urgent', 'team', 'severity']);
  assert.deepEqual(Object.values(got.answers).map((a) => a.type), ['noul', 'choice', 'score']);
  assert.ok(got.usage.input_tokens > 0);
});

test('2 a request with images', async () => {
  const fields = {
    model: MODEL,
    state: 'A customer attached a screenshot.',
    questions: { warm: { type: 'noul', instructions: 'Is the picture mostly warm colours?' } },
    // both image item forms: a data URL and {content_type, base64}
    images: [`data:image/png;base64,${PNG_B64}`, { content_type: 'image/png', base64: PNG_B64 }],
  };
  const got = await client.ai.run(`@cf/cloudflare/${MODEL}`, { account_id: ACCOUNT, ...fields });
  const sent = assertWire(wire, `@cf/cloudflare/${MODEL}`, true);
  assert.equal(sent.images.length, 2);
  assertSameAnswer(got, await reference(MODEL, fields));
  const { images: _images, ...textOnly } = fields;
  const text = await reference(MODEL, textOnly);
  assert.ok(got.usage.input_tokens > text.usage.input_tokens, 'the images reached the prompt');
});

test('3 a body without model is answered by the URL model', async (t) => {
  const fields = { state: 'I was charged twice for my subscription this month.', questions: QUESTIONS };
  for (const name of served) {
    await t.test(name, async () => {
      const got = await client.ai.run(`@cf/cloudflare/${name}`, { account_id: ACCOUNT, ...fields });
      assertWire(wire, `@cf/cloudflare/${name}`, false);
      assertSameAnswer(got, await reference(name, fields));
      assert.equal(got.model, name);
    });
  }
});

test('3b a body model that disagrees with the URL is 400/7000', async () => {
  const fields = { model: 'clef', state: 'x', questions: { u: { type: 'noul', instructions: 'Urgent?' } } };
  await assertRefused(client.ai.run('@cf/cloudflare/clef-flash', { account_id: ACCOUNT, ...fields }), Cloudflare.BadRequestError, 400, 7000);
});

test('4a an unknown top-level field is 422/5012', async () => {
  const fields = { state: 'x', questions: { u: { type: 'noul', instructions: 'Urgent?' } }, temperature_typo: 1 };
  await assertRefused(
    client.ai.run(`@cf/cloudflare/${MODEL}`, { account_id: ACCOUNT, ...fields }),
    Cloudflare.UnprocessableEntityError,
    422,
    5012,
  );
});

test('4b a state over the context is 413/5021', async () => {
  const fields = { state: 'word '.repeat(maxContext), questions: { u: { type: 'noul', instructions: 'Urgent?' } } };
  // no dedicated SDK class for 413: the base APIError
  await assertRefused(client.ai.run(`@cf/cloudflare/${MODEL}`, { account_id: ACCOUNT, ...fields }), Cloudflare.APIError, 413, 5021);
});

test('5 a wrong token is AuthenticationError / 401', async () => {
  const { client: wrong } = makeClient(`${KEY}-wrong`);
  const fields = { state: 'x', questions: { u: { type: 'noul', instructions: 'Urgent?' } } };
  await assertRefused(wrong.ai.run(`@cf/cloudflare/${MODEL}`, { account_id: ACCOUNT, ...fields }), Cloudflare.AuthenticationError, 401, 10000);
});

