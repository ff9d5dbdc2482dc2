# The worker of the persist-then-process variant (examples/README.md): the
# receiver, started with WEBHOOK_MODE=enqueue, stores each verified delivery
# and answers 200 at once; this process takes the stored deliveries from
# webhook_next and runs the same two-step job (shop.rb) for each.
# Run it with `ruby worker.rb`; stop it with SIGTERM (or Ctrl-C). Start as
# many as you like: webhook_next never hands one key to two workers.

require 'date'
require_relative 'shop'

LEASE = ENV['WEBHOOK_LEASE'] # a PostgreSQL interval; nil (NULL): the extension's default
BATCH = 10
IDLE_SLEEP_S = 0.5 # how long to wait when nothing is due
# Tests only: die at this point (Shop::CRASH_AFTER_*) in the first job whose attempt is 1.
FAULT = ENV['WORKER_FAULT']

# Up to BATCH due keys (new, whose lease expired, or failed and due again),
# each leased to this worker. Its own autocommitted statement: the leases are
# committed, and skipped by every other worker, when it returns.
NO_PAYLOAD = "no stored payload: the key was claimed without its body, and its provider's redelivery brings it"
NEXT = 'SELECT * FROM webhook_dedup.webhook_next(lease => $1::interval, batch => $2)'

# The job of one stored delivery. webhook_next gives the raw payload and the
# event type, but no event time (webhook_receive does): the worker reads it
# from the body as the provider's profile says (event_time below).
def run_job(conn, row)
  # webhook_next hands out every due key, and a key claimed without its body
  # (webhook_claim, or webhook_receive in claim mode) whose holder died is due
  # once its lease lapses: there is no payload to run the job on. Recorded as a
  # retryable failure below, like any failed job: the provider's redelivery
  # claims it again through the receiver, or its attempts run out into a dead
  # letter.
  raise ArgumentError, NO_PAYLOAD if row['payload'].nil?

  payload = conn.unescape_bytea(row['payload']) # bytea comes back as text (\x...)
  event = Shop.parse_event(payload)
  job = Shop::Job.new(source: row['source'], idem_key: row['idem_key'], claim_token: row['claim_token'],
                      attempt: Integer(row['attempt']), event_type: row['event_type'],
                      last_step: row['last_step'], subject: Shop.subject_of(event),
                      event_time: event_time(row['source'], event))
  fault = FAULT if job.attempt == 1
  Shop.process(conn, job, fault: fault)
  puts "#{job.idem_key}: completed (attempt #{job.attempt})"
rescue Shop::LeaseLost => e
  # Our lease expired and another worker took the key over: nothing to undo.
  puts "#{row['idem_key']}: lease lost, #{e.message}"
rescue StandardError => e
  # The job failed (its transaction was rolled back): record it, and the key
  # is retried after a backoff, or dead-lettered after too many attempts.
  warn "#{row['idem_key']}: #{e.class}: #{e.message.strip}"
  fail_job(conn, row, e)
end

# When the event happened, read from the body as webhook_receive reads it (the
# provider's profile, webhook_dedup.providers): Stripe's `created` (Unix
# seconds), Standard Webhooks' `timestamp` (RFC 3339); GitHub sends none. nil
# when there is none or it does not parse: no subject update. Returns
# timestamptz text for PostgreSQL. (A source whose event_time_from you set in
# webhook_dedup.sources needs the same change here.)
def event_time(source, event)
  return nil unless event

  case source
  when 'stripe' then unix_seconds(event['created'])
  when 'standard' then rfc3339(event['timestamp'])
  end
end

# A JSON integer (or its digits in a string), as the profile's unix_seconds.
def unix_seconds(value)
  text = value.to_s.strip if value.is_a?(Integer) || value.is_a?(String)
  return nil unless text&.match?(/\A[0-9]{1,12}\z/)

  time = Time.at(Integer(text, 10)).utc
  time.iso8601 if time.year <= 9999
end

# An RFC 3339 date-time string (2024-05-01T12:00:00.123456Z, with an offset or
# Z), as the profile's rfc3339: digits past the microsecond are dropped. (A
# leap second, :60, gives nil here.)
RFC3339 = Regexp.new('\A([0-9]{4})-([0-9]{2})-([0-9]{2})[Tt ]([0-9]{2}):([0-9]{2}):([0-9]{2})' \
                     '(?:\.([0-9]+))?(?:[Zz]|([+-])([0-9]{2}):([0-9]{2}))\z')

def rfc3339(value)
  m = RFC3339.match(value.strip) if value.is_a?(String)
  return nil unless m

  year, month, day, hour, minute, second = m.captures.first(6).map { |part| Integer(part, 10) }
  sign, offset_hours, offset_minutes = m[8] || '+', m[9] || '00', m[10] || '00'
  valid = year >= 1 && Date.valid_date?(year, month, day, Date::GREGORIAN) &&
          hour <= 23 && minute <= 59 && second <= 59 &&
          Integer(offset_hours, 10) <= 23 && Integer(offset_minutes, 10) <= 59
  return nil unless valid # no such day or time

  fraction = (m[7] || '')[0, 6].ljust(6, '0')
  "#{m[1]}-#{m[2]}-#{m[3]}T#{m[4]}:#{m[5]}:#{m[6]}.#{fraction}#{sign}#{offset_hours}:#{offset_minutes}"
end

def fail_job(conn, row, error)
  conn.reset if conn.status == PG::CONNECTION_BAD
  conn.exec_params('SELECT webhook_dedup.webhook_fail($1, $2, $3, $4, retryable => true)',
                   [row['source'], row['idem_key'], row['claim_token'], "#{error.class}: #{error.message.strip}"])
rescue PG::Error => e
  # Not even that: the lease expires and another worker takes the key over.
  warn "webhook_fail: #{e.message}"
end

# A clean stop: SIGTERM (or Ctrl-C) lets the jobs already leased finish, then
# the loop ends. (A trap handler should only set a flag.)
stopping = false
%w[TERM INT].each { |signal| Signal.trap(signal) { stopping = true } }
$stdout.sync = true

conn = PG.connect # the libpq environment variables: PGHOST, PGUSER=shop_receiver, ...
puts "worker started (pid #{Process.pid})"
until stopping
  begin
    conn.reset if conn.status == PG::CONNECTION_BAD # dropped (server restart): reconnect
    rows = conn.exec_params(NEXT, [LEASE, BATCH]).to_a
  rescue PG::Error => e
    warn "webhook_next: #{e.message}"
    rows = []
  end
  sleep IDLE_SLEEP_S if rows.empty?
  rows.each { |row| run_job(conn, row) }
end
conn.close
puts 'worker stopped'
