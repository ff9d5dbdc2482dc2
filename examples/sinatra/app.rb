# A webhook receiver in Sinatra whose whole correctness lives in SQL
# (webhook_dedup). It follows examples/README.md; run it with `ruby app.rb`
# (README.md beside this file says how to set it up).
#
# Providers deliver *at least once*: they retry on timeouts and non-2xx
# answers, sometimes send the same delivery twice at the same moment, and
# anyone can POST to this URL. One SQL call, webhook_receive, verifies the
# signature over the exact raw body bytes with the keys stored in the
# database (this app holds no secret), derives the idempotency key from the
# provider's event id and claims it. Its row carries the HTTP answer the
# database computed for every outcome (http_status, http_headers and
# response, the JSON body), which this app sends as it is: it decides no
# status itself. A claimed delivery runs the two-step job of shop.rb first.

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
# How long a copy of a delivery that another worker is processing waits for
# it ('2 seconds'; '0': not at all); nil (NULL): the provider's default_wait.
WAIT = ENV['WEBHOOK_WAIT']
MODE = ENV.fetch('WEBHOOK_MODE', 'claim') # 'claim' or 'enqueue' (a worker processes)
FAULT_INJECTION = ENV['WEBHOOK_FAULT_INJECTION'] == '1' # tests only: honour X-Demo-Fault
MAX_BODY_BYTES = 25 * 1024 * 1024 # GitHub's cap; refuse larger bodies unread
THREADS = 5 # Puma's threads, so concurrent deliveries are served concurrently
JSON_HEADERS = { 'Content-Type' => 'application/json' }.freeze # answers of our own (404, 413)

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
                    'boolean, interval, timestamp with time zone, text, text, text, text, text, text, interval)'

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
# The answer to a database error (500), the same for every provider: read
# now, since the database cannot be asked when it fails.
ERROR_ANSWER = with_db { |conn| conn.exec("SELECT * FROM webhook_dedup.http_answer('error')").first }

# Every call of webhook_receive: one statement, autocommitted (no BEGIN), so
# the claim is committed, and seen by every other worker, when it returns.
RECEIVE = <<~SQL
  SELECT * FROM webhook_dedup.webhook_receive($1, $2::bytea, $3::jsonb, url => $4, lease => $5::interval, mode => $6,
                                              wait => $7::interval)
SQL

get '/healthz' do
  json_answer(200, JSON_HEADERS, { status: 'ok' })
end

post '/webhooks/:provider' do |provider|
  pass unless PROVIDERS.include?(provider) # no other route matches: 404
  halt json_answer(413, JSON_HEADERS, { error: 'payload too large' }) if request.content_length.to_i > MAX_BODY_BYTES

  request.body.rewind # in case something read it before us
  body = request.body.read # the exact bytes the provider signed (a binary String)
  url = URL_SIGNING_SCHEMES.include?(provider) ? request.url : nil
  with_db do |conn|
    # bytea: the raw bytes as a binary parameter (format: 1), never
    # re-serialised JSON: one byte changed and the signature no longer verifies.
    claim = conn.exec_params(RECEIVE, [provider, { value: body, format: 1 }, headers_json(request.env),
                                       url, LEASE, MODE, WAIT]).first
    if %w[claimed reclaimed].include?(claim['outcome'])
      run_job(conn, provider, body, claim)
    else
      # Every other outcome, and every refusal (outcome NULL), is answered
      # as the database says (examples/README.md's table).
      answer_row(claim, claim['outcome'])
    end
  end
end

helpers do
  def run_job(conn, provider, body, claim)
    job = Shop::Job.new(source: provider, idem_key: claim['idem_key'], claim_token: claim['claim_token'],
                        attempt: Integer(claim['attempt']), event_type: claim['event_type'],
                        last_step: claim['last_step'], event_time: claim['event_time'],
                        subject: Shop.subject_of(Shop.parse_event(body)))
    # Fault injection fires on the key's first attempt only, so the retry works.
    fault = request.env['HTTP_X_DEMO_FAULT'] if FAULT_INJECTION && job.attempt == 1
    result = Shop.process(conn, job, fault: fault)
    resumed = job.last_step ? { 'X-Webhook-Resumed-From' => job.last_step } : {}
    # The claim's status and headers, with our result as the body.
    answer_row(claim, claim['outcome'], body: result, extra: resumed)
  rescue Shop::LeaseLost => e
    # Our lease expired and another worker reclaimed the key: the step was
    # rolled back, and the provider's retry gets that worker's answer.
    warn "#{provider} #{job.idem_key}: lease lost to another worker; #{e.message}"
    lost = conn.exec_params("SELECT * FROM webhook_dedup.http_answer('lease_lost', $1)", [provider]).first
    answer_row(lost, claim['outcome'])
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

  # The answer the database computed: a row's http_status, http_headers and
  # response (webhook_receive's or http_answer's; the pg gem gives each as
  # text, jsonb as JSON text), or `body` (our own result, after the job) in
  # its place. X-Webhook-Outcome (and X-Webhook-Resumed-From, in `extra`)
  # are only for the tests and the curious.
  def answer_row(row, outcome, body: nil, extra: {})
    headers = JSON.parse(row['http_headers']).merge(extra)
    headers['X-Webhook-Outcome'] = outcome if outcome
    json_answer(Integer(row['http_status']), headers, body || row['response'])
  end

  # A JSON answer with exactly these headers (Content-Type among them).
  # `body` is a Hash, or JSON text from the database, sent as is.
  def json_answer(status, headers, body)
    [status, headers, body.is_a?(String) ? body : JSON.generate(body)]
  end
end

not_found do
  json_answer(404, JSON_HEADERS, { error: 'not found' })
end

# A database error (or any other): http_answer('error'), a 500, and the
# provider retries. The details go to the log (Sinatra's dump_errors), never
# to the caller.
error do
  answer_row(ERROR_ANSWER, nil)
end
