'use strict';
// Runs the Next.js receiver: checks the database first (a refusal is one
// line, "cannot start: ...", and exit status 1), then serves the built app
// (`next build` first) with Next's own request handler on 127.0.0.1:$PORT.
// The route handler (app/webhooks/[provider]/route.js) finds what it shares
// with this process on globalThis.webhookDedup: the pool, the answer to a
// database error (read here: when the database fails it cannot be asked)
// and the job, which is the Express example's (../express/job.js, as are the
// worker and the sender: Node code that no web framework shapes).
//
// Configuration: as ../express/server.js (PGHOST, PGPORT, PGUSER,
// PGDATABASE; PORT, HOST; WEBHOOK_LEASE, WEBHOOK_WAIT, WEBHOOK_MODE;
// WEBHOOK_FAULT_INJECTION=1, tests only).

process.env.NEXT_TELEMETRY_DISABLED = '1';
const http = require('node:http');
const next = require('next');
const wd = require('webhook-dedup');
const { createPool, runReceived } = require('../express/job');

const PORT = Number(process.env.PORT || 3000);
const HOST = process.env.HOST || '127.0.0.1';
const MODE = process.env.WEBHOOK_MODE || 'claim';

async function main() {
  if (!['claim', 'enqueue'].includes(MODE)) throw new Error(`WEBHOOK_MODE must be claim or enqueue, not ${MODE}`);
  const pool = createPool();
  // Fail fast when the database is unreachable, lacks the extension, or
  // the role may not call webhook_receive (the error says what to do).
  const errorAnswer = await wd.prepareReceiver(pool);
  globalThis.webhookDedup = { wd, pool, errorAnswer, runReceived };
  const app = next({ dev: false, dir: __dirname, hostname: HOST, port: PORT });
  await app.prepare();
  const handle = app.getRequestHandler();
  const server = http.createServer((req, res) => handle(req, res));
  server.on('error', (err) => {
    console.error(`cannot listen on ${HOST}:${PORT}:`, err.message);
    process.exit(1);
  });
  server.listen(PORT, HOST, () => console.log(`listening on http://${HOST}:${PORT} (mode ${MODE})`));
  // A clean stop: finish the requests in flight, then close the pool.
  const stop = () => {
    server.close(() => pool.end().finally(() => process.exit(0)));
    server.closeIdleConnections();
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}

main().catch((err) => {
  console.error('cannot start:', err.message);
  process.exit(1);
});
