'use strict';
// job.js: the work of one GitHub delivery, in withClaim's transaction (client): a row of
// your own and a chat message to send (an outbox intent: sender.js delivers it),
// committed with the key's completion, or none of them
const wd = require('webhook-dedup');

module.exports = async function job(client, delivery, body) {
  const event = JSON.parse(body);                     // the raw bytes whose signature was checked
  // first, fenced by the claim token: throws wd.LeaseLost when another worker holds the key
  // now (webhook_outbox_put returned NULL); withClaim then rolls back: 'lease_lost'
  await wd.outboxPut(client, delivery, 'notify', 'chat', { text: `${delivery.eventType} ${event.action}` });
  await client.query('INSERT INTO github_events (idem_key, action) VALUES ($1, $2)', [delivery.idemKey, event.action]);
  return { received: delivery.eventType };            // stored: every duplicate is answered with it
};
