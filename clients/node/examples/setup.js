'use strict';
// setup.js: once, as the database's owner: APP_ROLE (the role the app connects as),
// GITHUB_WEBHOOK_SECRET (the GitHub webhook's secret) and the libpq variables
const wd = require('webhook-dedup');

async function main() {
  const pool = wd.createPool({ max: 1 });
  await pool.query('CREATE TABLE IF NOT EXISTS github_events (idem_key text PRIMARY KEY, action text)');
  for (const grant of ['GRANT webhook_dedup_receiver TO %I', 'GRANT INSERT ON github_events TO %I']) {
    const { rows: [{ sql }] } = await pool.query('SELECT format($1, $2::text) AS sql', [grant, process.env.APP_ROLE]);
    await pool.query(sql);
  }
  // the receiver holds no secret: the database verifies with the keys stored here
  // (a bind parameter: never written to the server's log)
  await pool.query("SELECT webhook_dedup.add_secret('github', $1)", [process.env.GITHUB_WEBHOOK_SECRET]);
  await pool.end();
}

main().catch((err) => { console.error(`setup failed: ${err.message}`); process.exit(1); });
