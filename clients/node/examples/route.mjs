// route.mjs: the receiver on the Fetch API, as a Next.js route handler (app/webhooks/github/route.js)
// or on Hono: app.post('/webhooks/github', (c) => POST(c.req.raw))
import * as wd from 'webhook-dedup';
import job from './job.js';

const pool = wd.createPool();
// at start-up, the answer for when the database fails (Next.js also loads this module to build it)
const errorAnswer = process.env.NEXT_PHASE === 'phase-production-build' ? null : await wd.prepareReceiver(pool);

export async function POST(request) {
  try {
    const body = await wd.rawBodyFromFetch(request);  // BodyTooLarge past 25 MB
    const delivery = await wd.receive(pool, 'github', body, wd.headersFromFetch(request.headers),
                                      { lease: '30 seconds' });
    if (!delivery.mustProcess) return wd.toResponse(delivery.answer);
    const done = await wd.withClaim(pool, delivery, (client) => job(client, delivery, body));
    if (done.status === 'completed') return wd.toResponse(wd.answerAfter(delivery, done.result));
    const answer = done.status === 'lease_lost' ? await wd.httpAnswer(pool, 'lease_lost') : errorAnswer;
    return wd.toResponse({ ...answer, outcome: delivery.outcome });
  } catch (err) {
    if (err instanceof wd.BodyTooLarge) return new Response(null, { status: 413 });
    console.error(err);
    return wd.toResponse(errorAnswer);                // the database failed: 500, the provider retries
  }
}
