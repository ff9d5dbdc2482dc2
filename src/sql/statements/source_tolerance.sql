-- The replay window webhook_receive uses for a source when the call gives
-- none: webhook_dedup.sources.tolerance (no row, or NULL: the provider's
-- default). $1 source.
SELECT s.tolerance FROM webhook_dedup.sources AS s WHERE s.source OPERATOR(pg_catalog.=) $1
