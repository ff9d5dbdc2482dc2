'use strict';
// worker.js: does the job of the deliveries a receiver stored with
// receive(..., { mode: 'enqueue' }) (the libpq variables)
const wd = require('webhook-dedup');
const job = require('./job');

const pool = wd.createPool();
const worker = new wd.Worker(pool, (delivery) =>
  wd.withClaim(pool, delivery, (client) => job(client, delivery, delivery.payload)),
  { source: 'github', lease: '30 seconds', batch: 10 });
worker.start().then(() => pool.end());
process.on('SIGTERM', () => worker.stop());          // finishes the deliveries it holds, then ends
