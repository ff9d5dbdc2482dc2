// POST /webhooks/{github,stripe,standard}: the Express example's receiver as
// a Next.js route handler, on the Fetch API (a Request in, a Response out).
// The raw body is `await request.arrayBuffer()` (wd.rawBodyFromFetch: never
// request.json(), whose re-serialisation is other bytes than were signed),
// the headers a Headers object (wd.headersFromFetch), and the answer the
// Response the database computed (wd.toResponse). serve.js sets
// globalThis.webhookDedup (the pool, the job, the error answer) before it
// serves.

export const dynamic = 'force-dynamic';
export const runtime = 'nodejs'; // node-postgres needs Node's sockets

const PROVIDERS = new Set(['github', 'stripe', 'standard']);
// Schemes that sign the request URL (none of the three): they need `url`,
// any other scheme refuses one (SQLSTATE 22023).
const URL_SIGNING_SCHEMES = new Set(['twilio', 'square', 'hubspot']);
const JSON_HEADERS = { 'Content-Type': 'application/json' };

// An answer with the tests' X-Webhook-Outcome (not needed by the pattern).
function respond(wd, computed, { body, outcome, resumedFrom } = {}) {
  const headers = { ...computed.headers };
  if (outcome) headers['X-Webhook-Outcome'] = outcome;
  if (resumedFrom) headers['X-Webhook-Resumed-From'] = resumedFrom;
  return wd.toResponse({ status: computed.status, headers, body: body === undefined ? computed.body : body });
}

export async function POST(request, { params }) {
  const { wd, pool, errorAnswer, runReceived } = globalThis.webhookDedup;
  const { provider } = await params;
  if (!PROVIDERS.has(provider)) return respond(wd, { status: 404, headers: JSON_HEADERS, body: { error: 'not found' } });
  try {
    const body = await wd.rawBodyFromFetch(request);
    const delivery = await wd.receive(pool, provider, body, wd.headersFromFetch(request.headers), {
      url: URL_SIGNING_SCHEMES.has(provider) ? request.url : undefined,
      lease: process.env.WEBHOOK_LEASE || undefined,
      mode: process.env.WEBHOOK_MODE || 'claim',
      wait: process.env.WEBHOOK_WAIT || undefined,
    });
    const outcome = delivery.outcome;
    if (!delivery.mustProcess) return respond(wd, delivery.answer, { outcome });
    const fault = process.env.WEBHOOK_FAULT_INJECTION === '1' ? request.headers.get('x-demo-fault') : undefined;
    const done = await runReceived(pool, delivery, body, fault ?? undefined);
    if (!done.completed) return respond(wd, await wd.httpAnswer(pool, 'lease_lost', { scheme: provider }), { outcome });
    return respond(wd, delivery.answer, { body: done.result, outcome, resumedFrom: done.resumedFrom });
  } catch (err) {
    if (err instanceof wd.BodyTooLarge) {
      return respond(wd, { status: 413, headers: JSON_HEADERS, body: { error: 'Payload Too Large' } });
    }
    // the provider retries a 5xx; the details go to the log only
    console.error(`POST /webhooks/${provider}:`, err);
    return respond(wd, errorAnswer);
  }
}
