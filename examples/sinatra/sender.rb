# The sender: delivers the notifications the job writes to the outbox.
#
# Step 1 of the job (shop.rb) commits an intent, webhook_outbox_put(...,
# 'notify', 'notifications', request), together with its checkpoint. This
# process takes due intents of the target 'notifications' with
# webhook_outbox_next (each leased to it, with a lease token), POSTs each
# request to the notification service at NOTIFY_URL with the intent's
# downstream idempotency key as the Idempotency-Key header, and reports:
#
# - 2xx: webhook_outbox_ack, with the service's JSON answer;
# - 3xx (redirects are not followed: a POST must not become a GET) and 4xx
#   other than 408, 409 and 429 (the request is wrong and will stay wrong):
#   webhook_outbox_fail(retryable => false), a dead letter for an operator;
# - anything else (5xx, 408, 409, 429, a refused connection, a timeout):
#   webhook_outbox_fail, retried after a backoff. A timeout may come after
#   the service acted: the retry carries the same key, and the service
#   answers it with the first call's result instead of acting again.
#
# If this process dies between the call and the report, the intent's lease
# lapses and the next sender sends it again, with the same key. Run as many
# as you like: webhook_outbox_next never hands one intent to two senders
# (docs/outbox.md).
#
# Run it with `ruby sender.rb`. Configuration: the libpq variables,
# NOTIFY_URL (required), SENDER_LEASE (a PostgreSQL interval; unset:
# '30 seconds'), SENDER_FAULT (tests only: crash-before-call or
# crash-after-call, fired on an intent's first attempt). Stops cleanly on
# SIGTERM (or Ctrl-C) after the intents in hand.

require 'json'
require 'net/http'
require 'uri'
require_relative 'shop'

URL = ENV['NOTIFY_URL']
LEASE = ENV.fetch('SENDER_LEASE', '30 seconds')
FAULT = ENV['SENDER_FAULT']
# One intent per lease: a batch's leases start together, and a slow service
# would let the last ones lapse while the first are sent (docs/outbox.md,
# "One call per lease").
BATCH = 1
IDLE_SLEEP_S = 0.2
CALL_TIMEOUT_S = 10 # keep it well under the lease

NEXT = 'SELECT id, lease_token, downstream_key, request, attempt ' \
       'FROM webhook_dedup.webhook_outbox_next($1, $2::interval, $3)'

unless URL
  warn "cannot start: NOTIFY_URL is not set (the notification service's URL)"
  exit 1
end

# POST the request; [status, the JSON answer], status nil when nothing came back.
def call(key, request)
  uri = URI(URL)
  http = Net::HTTP.new(uri.host, uri.port)
  http.use_ssl = uri.scheme == 'https'
  http.open_timeout = http.read_timeout = CALL_TIMEOUT_S # Net::HTTP follows no redirect
  response = http.post(uri.request_uri, request, 'Content-Type' => 'application/json', 'Idempotency-Key' => key)
  answer = begin
    JSON.parse(response.body) if response.body && !response.body.empty?
  rescue JSON::ParserError
    nil
  end
  [Integer(response.code), answer]
rescue StandardError => e # refused, reset, timed out
  warn "#{key}: no answer: #{e.class}: #{e.message}"
  [nil, nil]
end

def send_intent(conn, intent)
  attempt = Integer(intent['attempt'])
  fault = FAULT if attempt == 1
  Shop.die!(fault) if fault == 'crash-before-call'
  key = intent['downstream_key']
  status, answer = call(key, intent['request']) # request: the jsonb text, sent as it is
  Shop.die!(fault) if fault == 'crash-after-call' # the service acted; the ack never comes
  if status && status >= 200 && status < 300
    conn.exec_params('SELECT webhook_dedup.webhook_outbox_ack($1, $2, $3::jsonb)',
                     [intent['id'], intent['lease_token'], JSON.generate(answer)])
    puts "#{key}: delivered (attempt #{attempt})"
    return
  end
  # 5xx, a timeout, 408 and 429 may pass; 409 is Stripe's "this key is in use
  # by a request in flight"; other 4xx and 3xx will not get better
  retryable = status.nil? || status >= 500 || [408, 409, 429].include?(status)
  state = conn.exec_params('SELECT webhook_dedup.webhook_outbox_fail($1, $2, $3, retryable => $4)',
                           [intent['id'], intent['lease_token'], status ? "HTTP #{status}" : 'no answer',
                            retryable]).getvalue(0, 0)
  warn "#{key}: attempt #{attempt} failed (HTTP #{status.inspect}): #{state}"
end

stopping = false
%w[TERM INT].each { |signal| Signal.trap(signal) { stopping = true } }
$stdout.sync = true

# Autocommit (no BEGIN): each lease and each report commits at once, so no
# transaction stays open during a call.
conn = PG.connect
puts "sender started (target #{Shop::NOTIFY_TARGET}, lease #{LEASE})"
until stopping
  begin
    conn.reset if conn.status == PG::CONNECTION_BAD # dropped (server restart): reconnect
    intents = conn.exec_params(NEXT, [Shop::NOTIFY_TARGET, LEASE, BATCH]).to_a
  rescue PG::Error => e
    warn "webhook_outbox_next: #{e.message}"
    intents = []
  end
  sleep IDLE_SLEEP_S if intents.empty?
  intents.each { |intent| send_intent(conn, intent) } # leased to us: send them even when asked to stop
end
conn.close
puts 'sender stopped'
