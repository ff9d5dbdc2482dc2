# A webhook receiver in Sinatra whose whole correctness lives in SQL
# (webhook_dedup). It follows examples/README.md; run it with `ruby app.rb`
# (README.md beside this file says how to set it up).
#
# Providers deliver *at least once*: they retry on timeouts and non-2xx
# answers, sometimes send the same delivery twice at the same moment, and
# anyone can POST to this URL. One SQL call, webhook_receive, verifies the
# signature over the exact raw body bytes with the keys stored in the
# database (this app holds no secret), derives the idempotency key from the
# provider's event id and claims it. The outcome decides the answer, and a
# claimed delivery runs the two-step job of shop.rb.

require 'json'
require 'sinatra'
require 'connection_pool'
require_relative 'shop'

PROVIDERS = %w[github stripe standard].freeze # the routes (and scheme names) served
# Schemes whose signature covers the request URL (docs/sql-reference.md,
# webhook_verify's `url`). webhook_receive refuses a `url` for any other
# scheme (SQLSTATE 22023), so we pass NULL for github, stripe and standard.
# If you add one of these providers, its URL is passed (and hubspot also
# needs `method => 'POST'`). Behind a proxy, Rack builds request.url from the
# X-Forwarded-Proto and X-Forwarded-Host headers, which the proxy must set.
URL_SIGNING_SCHEMES = %w[twilio square hubspot].freeze

LEASE = ENV['WEBHOOK_LEASE'] # a PostgreSQL interval; nil (NULL): the extension's default
MODE = ENV.fetch('WEBHOOK_MODE', 'claim') # 'claim' or 'enqueue' (a worker processes)
FAULT_INJECTION = ENV['WEBHOOK_FAULT_INJECTION'] == '1' # tests only: honour X-Demo-Fault
MAX_BODY_BYTES = 25 * 1024 * 1024 # GitHub's cap; refuse larger bodies unread
THREADS = 5 # Puma's threads, so concurrent deliveries are served concurrently

abort "WEBHOOK_MODE must be claim or enqueue, not #{MODE.inspect}" unless %w[claim enqueue].include?(MODE)

set :environment, :production # no development error pages (they would show DB errors)
set :server, 'puma'
set :bind, ENV.fetch('HOST', '127.0.0.1')
set :port, Integer(ENV.fetch('PORT', '4567'))
set :server_settings, Threads: "0:#{THREADS}", environment: 'production' # Puma's own setting

# A pool of database connections, one per Puma thread (connection_pool, a
# Debian package), each opened on first use with the libpq environment
# variables (PGHOST, PGPORT, PGUSER=shop_receiver, PGDATABASE) and kept, so a
# delivery does not pay for a new connection. A request holds its connection
# from webhook_receive to its answer.
DB = ConnectionPool.new(size: THREADS, timeout: 5) { PG.connect }

def with_db
  DB.with do |conn|
    conn.reset if conn.status == PG::CONNECTION_BAD # dropped (server restart): reconnect
    yield conn
  end
end

# The webhook_receive this app calls (webhook_dedup 0.2.0 and later), by its
# exact signature, as it resolves on the search path: a missing extension is
# found at start-up, not on the first delivery (FastAPI and Express probe the
# same way).
RECEIVE_SIGNATURE = 'webhook_dedup.webhook_receive(text, bytea, jsonb, text[], text, text, text, text, text, interval, ' \
                    'boolean, interval, timestamp with time zone, text, text, text, text, text, text)'

# Fail fast at start-up rather than on the first delivery.
begin
  probe = with_db do |conn|
    conn.exec_params('SELECT to_regprocedure($1) IS NOT NULL AS installed, ' \
                     "coalesce(has_function_privilege(to_regprocedure($1), 'EXECUTE'), false) AS allowed, " \
                     'current_database() AS database, current_user AS role',
                     [RECEIVE_SIGNATURE]).first
  end
rescue PG::Error => e
  abort "cannot start: cannot connect to the database: #{e.message.strip}"
end
unless probe['installed'] == 't'
  abort "cannot start: webhook_dedup is not installed in database #{probe['database']} (or is too old): " \
        'run CREATE EXTENSION webhook_dedup (or ALTER EXTENSION webhook_dedup UPDATE)'
end
unless probe['allowed'] == 't'
  abort "cannot start: role #{probe['role']} may not call webhook_dedup.webhook_receive in database " \
        "#{probe['database']}: GRANT webhook_dedup_receiver TO #{probe['role']}"
end

# Every call of webhook_receive: one statement, autocommitted (no BEGIN), so
# the claim is committed, and seen by every other worker, when it returns.
RECEIVE = <<~SQL
  SELECT * FROM webhook_dedup.webhook_receive($1, $2::bytea, $3::jsonb, url => $4, lease => $5::interval, mode => $6)
SQL

get '/healthz' do
  json_answer(200, nil, { status: 'ok' })
end

post '/webhooks/:provider' do |provider|
  pass unless PROVIDERS.include?(provider) # no other route matches: 404
  halt json_answer(413, nil, { error: 'payload too large' }) if request.content_length.to_i > MAX_BODY_BYTES

  request.body.rewind # in case something read it before us
  body = request.body.read # the exact bytes the provider signed (a binary String)
  url = URL_SIGNING_SCHEMES.include?(provider) ? request.url : nil
  with_db do |conn|
    # bytea: the raw bytes as a binary parameter (format: 1), never
    # re-serialised JSON: one byte changed and the signature no longer verifies.
    claim = conn.exec_params(RECEIVE, [provider, { value: body, format: 1 }, headers_json(request.env),
                                       url, LEASE, MODE]).first
    answer(conn, provider, body, claim)
  end
end

helpers do
  # The HTTP answer follows webhook_receive's outcome (examples/README.md).
  def answer(conn, provider, body, claim)
    outcome = claim['outcome']
    # A provider's control message (Slack's url_verification, ...): nothing stored.
    return json_answer(200, outcome, claim['response']) if outcome == 'handshake'
    # Not signed with a stored key: nothing at all was written.
    # (The pg gem returns every column as text: a boolean is 't' or 'f'.)
    return json_answer(401, nil, { error: 'invalid signature' }) unless claim['verified'] == 't'
    return json_answer(400, nil, { error: 'the event id is missing' }) if claim['reject_reason'] == 'missing_event_id'

    case outcome
    when 'claimed', 'reclaimed' then run_job(conn, provider, body, claim)
    # Another worker holds a live lease: the provider retries later.
    when 'in_progress' then json_answer(409, outcome, { error: 'being processed' }, 'Retry-After' => '1')
    # The result stored by the first completion (jsonb text, as the first
    # answer was): a redelivery gets the same bytes. In enqueue mode the key may
    # not be completed yet, and has no result.
    when 'duplicate' then json_answer(200, outcome, claim['result'] || { status: 'duplicate' })
    when 'ignored' then json_answer(200, outcome, { status: 'ignored' }) # a type the source does not accept
    when 'conflict' then json_answer(422, outcome, { error: 'this event id came with other content' })
    # A failed attempt whose retry is not due yet.
    when 'retry_later' then json_answer(503, outcome, { error: 'retry scheduled' }, 'Retry-After' => '30')
    # Parked for an operator (webhook_resolve): the provider may stop retrying.
    when 'unknown_outcome', 'dead_lettered' then json_answer(202, outcome, { status: outcome })
    when 'accepted' then json_answer(202, outcome, { status: 'accepted' }) # enqueue mode: a worker processes it
    else raise "unexpected outcome #{outcome.inspect}"
    end
  end

  def run_job(conn, provider, body, claim)
    job = Shop::Job.new(source: provider, idem_key: claim['idem_key'], claim_token: claim['claim_token'],
                        attempt: Integer(claim['attempt']), event_type: claim['event_type'],
                        last_step: claim['last_step'], event_time: claim['event_time'],
                        subject: Shop.subject_of(Shop.parse_event(body)))
    # Fault injection fires on the key's first attempt only, so the retry works.
    fault = request.env['HTTP_X_DEMO_FAULT'] if FAULT_INJECTION && job.attempt == 1
    result = Shop.process(conn, job, fault: fault)
    resumed = job.last_step ? { 'X-Webhook-Resumed-From' => job.last_step } : {}
    json_answer(200, claim['outcome'], result, resumed)
  rescue Shop::LeaseLost => e
    # Our lease expired and another worker reclaimed the key: the step was
    # rolled back, and the provider's retry gets that worker's answer.
    json_answer(409, claim['outcome'], { error: "lease lost to another worker; #{e.message}" }, 'Retry-After' => '1')
  end

  # Every request header as a JSON object with lower-cased names, as
  # webhook_receive expects. Rack keeps them in env as HTTP_X_GITHUB_EVENT
  # (plus CONTENT_TYPE, CONTENT_LENGTH); we turn them back into x-github-event.
  # Puma joins a repeated header into one value ("a, b"), so there are no
  # arrays here. HTTP_VERSION is Puma's copy of the request line's version, not
  # a header.
  def headers_json(env)
    headers = {}
    env.each do |key, value|
      name = if key.start_with?('HTTP_') && key != 'HTTP_VERSION' then key.delete_prefix('HTTP_')
             elsif %w[CONTENT_TYPE CONTENT_LENGTH].include?(key) then key
             end
      # JSON text is UTF-8: bytes that are not (rare, never in a signature
      # header) become U+FFFD rather than failing the request.
      headers[name.downcase.tr('_', '-')] = value.dup.force_encoding(Encoding::UTF_8).scrub if name
    end
    JSON.generate(headers)
  end

  # A JSON answer with the outcome in X-Webhook-Outcome (only for the tests and
  # the curious). `body` is a Hash, or JSON text from the database, sent as is.
  def json_answer(status, outcome, body, extra_headers = {})
    headers = { 'Content-Type' => 'application/json' }.merge(extra_headers)
    headers['X-Webhook-Outcome'] = outcome if outcome
    [status, headers, body.is_a?(String) ? body : JSON.generate(body)]
  end
end

not_found do
  json_answer(404, nil, { error: 'not found' })
end

# A database error (or any other): 500, and the provider retries. The details
# go to the log (Sinatra's dump_errors), never to the caller.
error do
  json_answer(500, nil, { error: 'internal error' })
end
