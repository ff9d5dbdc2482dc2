'use strict';
// express.js: a GitHub webhook receiver on Express 5 (PORT, default 3000; the libpq variables)
const express = require('express');
const wd = require('webhook-dedup');
const job = require('./job');

const pool = wd.createPool();                        // timestamptz kept as PostgreSQL's text
const app = express();
let errorAnswer;                                     // http_answer('error'): asked at start-up, since
                                                     // a database that fails cannot be asked then
app.post('/webhooks/github', express.raw({ type: '*/*', limit: '25mb' }), async (req, res) => {
  const body = await wd.rawBodyFromNode(req);
  const delivery = await wd.receive(pool, 'github', body, wd.headersFromNode(req),
                                    { lease: '30 seconds' });   // the job commits well within it
  if (!delivery.mustProcess) return wd.sendNode(res, delivery.answer);  // a duplicate or a conflict
                                                     // (both 200), 401, 503 with Retry-After, ...
  const done = await wd.withClaim(pool, delivery, (client) => job(client, delivery, body));
  if (done.status === 'completed') return wd.sendNode(res, wd.answerAfter(delivery, done.result));
  const answer = done.status === 'lease_lost' ? await wd.httpAnswer(pool, 'lease_lost') : errorAnswer;
  wd.sendNode(res, { ...answer, outcome: delivery.outcome });   // 503 or 500: the provider retries
});

app.use((err, req, res, next) => {                   // Express 5 sends a rejected handler here
  if (err.status === 413) return res.sendStatus(413);          // over 25 MB
  console.error(err);
  wd.sendNode(res, errorAnswer);                     // the database failed: 500, the provider retries
});

wd.prepareReceiver(pool).then((answer) => {          // connects, checks the extension and the grant
  errorAnswer = answer;
  const server = app.listen(Number(process.env.PORT ?? 3000), '127.0.0.1', () =>
    console.log(`listening on http://127.0.0.1:${server.address().port}`));
  process.on('SIGTERM', () => server.close(() => pool.end()));
}, (err) => {
  console.error(`cannot start: ${err.message}`);   // says what to run or grant
  process.exit(1);
});
