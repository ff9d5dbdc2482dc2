-- The claim metrics (src/metrics.rs) without shared memory: the counts are
-- rows of webhook_dedup._count_log (editions/sql/internal/counts.sql)
-- until run_maintenance() or flush_metrics() moves them into
-- webhook_dedup.claim_counts.

--@ webhook_dedup.metrics_live
-- the counts not yet flushed (the log's, and this session's waiting ones),
-- as the native edition's counter table holds them; writes nothing (a
-- reader's view, on a read-only transaction too)
BEGIN
  RETURN QUERY SELECT a.bucket, a.minute, a.source, a.event_type, a.counts
                 FROM webhook_dedup._aggregate_counts(ARRAY(SELECT c FROM webhook_dedup._logged_counts() AS c
                                                            UNION ALL
                                                            SELECT w FROM webhook_dedup._waiting_counts() AS w)) AS a;
END

--@ webhook_dedup.flush_metrics
-- flush now; returns how many rows were written
BEGIN
  PERFORM webhook_dedup._write_counts();
  RETURN webhook_dedup._flush_counts();
END
