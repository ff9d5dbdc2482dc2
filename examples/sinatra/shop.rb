# The job every delivery runs, shared by the receiver (app.rb) and the worker
# (worker.rb): two steps, each done exactly once because each commits its own
# writes together with its record in webhook_dedup, in ONE transaction
# (examples/README.md, "The job"):
#
#   1. the notification's outbox intent (webhook_dedup.webhook_outbox_put) and
#      webhook_dedup.webhook_checkpoint(..., 'notified'); sender.rb delivers it
#   2. the side effect, the subject's update and webhook_dedup.webhook_complete(..., result)
#
# If the process dies in between, whatever it had not committed is gone; once
# the lease expires the key is reclaimed with last_step = 'notified' (if step
# 1 had committed), and the job resumes at step 2 instead of notifying twice.
# The checkpoint must sit in its step's own transaction: committed after the
# step, a crash between the two would redo the step; committed before it, a
# crash between the two would skip a step that never happened.

require 'json'
require 'pg'
require 'time'

module Shop
  NOTIFIED = 'notified' # the checkpoint of step 1
  # Step 1's outbox intent: its operation (one notification per event: part
  # of its downstream idempotency key) and the senders that take it (sender.rb).
  NOTIFY_OPERATION = 'notify'
  NOTIFY_TARGET = 'notifications'

  # Fault injection (tests only): the points where a process dies like kill -9.
  CRASH_AFTER_CLAIM = 'crash-after-claim'           # step 1's intent written, not committed
  CRASH_AFTER_CHECKPOINT = 'crash-after-checkpoint' # step 1 committed, step 2 not begun
  # And a slow job: it sleeps this long between the steps (holding the claim,
  # no lock), so that a copy of the delivery arrives while it is processed.
  SLOW = 'slow'
  SLOW_SECONDS = 3

  # One claimed (or leased) key and what the job needs to know about its event.
  Job = Struct.new(:source, :idem_key, :claim_token, :attempt, :event_type,
                   :last_step, :event_time, :subject, keyword_init: true)

  # webhook_checkpoint or webhook_complete returned false: our lease expired
  # and another worker reclaimed the key. The step is that worker's now, so
  # ours is rolled back (raising inside conn.transaction does the ROLLBACK).
  class LeaseLost < StandardError; end

  module_function

  # Runs the steps not done yet and returns the result stored by
  # webhook_complete, as the jsonb text PostgreSQL prints. Raises LeaseLost
  # (the receiver answers http_answer('lease_lost'): 503) or a PG::Error.
  # `fault` (tests only) is one of the CRASH_* names, SLOW, or nil.
  def process(conn, job, fault: nil)
    if job.last_step != NOTIFIED # a reclaim after step 1 committed skips it
      notify(conn, job, fault)
      die!(fault) if fault == CRASH_AFTER_CHECKPOINT
      sleep SLOW_SECONDS if fault == SLOW
    end
    complete(conn, job)
  end

  # Step 1: the notification's outbox intent and its checkpoint commit
  # together, or not at all. The notification is a call to another service
  # (think: an e-mail to the customer), which cannot join this transaction:
  # what commits here is the intent to send it (docs/outbox.md), which
  # sender.rb delivers with a downstream idempotency key derived from the event.
  def notify(conn, job, fault)
    conn.transaction do
      # First: fenced by our claim token, it takes the key's row lock, so a
      # concurrent reclaim of this key waits for our COMMIT and sees both
      # writes or neither. NULL: our lease was reclaimed (nothing written).
      request = JSON.generate(source: job.source, idem_key: job.idem_key, event_type: job.event_type)
      put = conn.exec_params('SELECT webhook_dedup.webhook_outbox_put($1, $2, $3, $4, $5, $6::jsonb)',
                             [job.source, job.idem_key, job.claim_token, NOTIFY_OPERATION, NOTIFY_TARGET, request])
      # Dying here, before COMMIT, is what a crash looks like to the server:
      # it rolls the open transaction back; only the claim survives.
      die!(fault) if fault == CRASH_AFTER_CLAIM
      checkpointed = conn.exec_params('SELECT webhook_dedup.webhook_checkpoint($1, $2, $3, $4)',
                                      [job.source, job.idem_key, job.claim_token, NOTIFIED])
      unless put.getisnull(0, 0) == false && checkpointed.getvalue(0, 0) == 't'
        raise LeaseLost, 'notification rolled back'
      end
    end
  end

  # Step 2: the side effect, the subject's state and the completion commit
  # together, or not at all.
  def complete(conn, job)
    conn.transaction do
      side_effect_id = conn.exec_params(<<~SQL, [job.source, job.idem_key, job.event_type, job.attempt]).getvalue(0, 0)
        INSERT INTO shop.side_effects (source, idem_key, event_type, attempt)
        VALUES ($1, $2, $3, $4) RETURNING id
      SQL
      apply_to_subject(conn, job)
      result = JSON.generate(status: 200, side_effect_id: Integer(side_effect_id))
      # webhook_complete stores `result` for later duplicates. We read the
      # stored value back ($4::jsonb) and answer with it: jsonb normalises the
      # text (key order, spacing), and this way the first answer is the same
      # bytes as every duplicate's, which gets that jsonb text too.
      row = conn.exec_params('SELECT webhook_dedup.webhook_complete($1, $2, $3, $4::jsonb) AS completed, $4::jsonb AS result',
                             [job.source, job.idem_key, job.claim_token, result]).first
      raise LeaseLost, 'side effect rolled back' unless row['completed'] == 't'
      row['result']
    end
  end

  # The subject's latest state. Providers deliver out of order: the table's
  # webhook_monotonic_guard trigger skips an event older than the stored one
  # (the upsert then changes zero rows), so a late, stale event is processed
  # (it got its side effect) but does not move the subject back.
  def apply_to_subject(conn, job)
    return unless job.subject && job.event_time

    conn.exec_params(<<~SQL, [job.source, job.subject, job.event_type, job.event_time])
      INSERT INTO shop.subjects (source, subject, last_event_type, source_updated_at)
      VALUES ($1, $2, $3, $4::timestamptz)
      ON CONFLICT (source, subject) DO UPDATE
        SET last_event_type = EXCLUDED.last_event_type,
            source_updated_at = EXCLUDED.source_updated_at
    SQL
  end

  # The body as a JSON object, or nil (a form-encoded GitHub delivery, ...).
  def parse_event(body)
    event = JSON.parse(body)
    event if event.is_a?(Hash)
  rescue JSON::ParserError
    nil
  end

  # The object the event is about: data.object.id (Stripe), else data.id
  # (Standard Webhooks), else none (GitHub). `event` is from parse_event.
  def subject_of(event)
    data = event && event['data']
    return nil unless data.is_a?(Hash)

    object = data['object']
    id = (object['id'] if object.is_a?(Hash)) || data['id']
    id&.to_s
  end

  # Fault injection: die at once, like `kill -9`: no answer, no ensure
  # blocks, no COMMIT, no clean-up. The server sees the connection drop and
  # rolls back whatever transaction was open.
  def die!(fault)
    warn "fault injection: #{fault}, dying"
    Process.kill('KILL', Process.pid)
  end
end
