-- webhook_advance: one atomic upsert on the watermark of (source, entity).
-- The row changes (and the statement returns a row, so the caller applies
-- the event) only when the event is newer than everything seen for the
-- entity: a later source_updated_at; or the same one with the same event id
-- (an idempotent re-apply); or the same one with a greater sequence, when
-- both events carry one. Any other tie is refused: without a sequence two
-- different events at the same instant cannot be ordered, so the one applied
-- first stays. Under READ COMMITTED a concurrent advance of the same entity
-- waits for its row lock and this WHERE is re-checked against the newest
-- version, so the watermark ends at the newest event whatever the order.
-- $1 source, $2 entity_id, $3 source_updated_at, $4 event_id, $5 sequence,
-- $6 now.
INSERT INTO webhook_dedup.watermarks AS w
    (source, entity_id, source_updated_at, event_id, sequence, updated_at)
  VALUES ($1, $2, $3, $4, $5, $6)
  ON CONFLICT (source, entity_id) DO UPDATE
    SET source_updated_at = EXCLUDED.source_updated_at, event_id = EXCLUDED.event_id,
        sequence = EXCLUDED.sequence, updated_at = EXCLUDED.updated_at
    WHERE EXCLUDED.source_updated_at OPERATOR(pg_catalog.>) w.source_updated_at
       OR (EXCLUDED.source_updated_at OPERATOR(pg_catalog.=) w.source_updated_at
           AND ((EXCLUDED.event_id IS NOT NULL AND EXCLUDED.event_id OPERATOR(pg_catalog.=) w.event_id)
                OR (EXCLUDED.sequence IS NOT NULL AND w.sequence IS NOT NULL
                    AND EXCLUDED.sequence OPERATOR(pg_catalog.>) w.sequence)))
  RETURNING true
