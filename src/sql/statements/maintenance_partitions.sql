-- Bounds and schema-qualified, quoted names of the range partitions of webhook_dedup.keys, read from
-- pg_get_expr; run with DateStyle ISO and TimeZone UTC (src/maintenance/).
SELECT b.lo, b.hi,
       pg_catalog.quote_ident(n.nspname) OPERATOR(pg_catalog.||) '.' OPERATOR(pg_catalog.||)
         pg_catalog.quote_ident(c.relname) AS qualified_name
   FROM pg_catalog.pg_inherits i
   JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) i.inhrelid
   JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace
   CROSS JOIN LATERAL pg_catalog.regexp_match(
          pg_catalog.pg_get_expr(c.relpartbound, c.oid),
          '^FOR VALUES FROM \(''([^'']+)''\) TO \(''([^'']+)''\)$') AS m(parts)
   CROSS JOIN LATERAL (SELECT m.parts[1]::pg_catalog.timestamptz AS lo,
                              m.parts[2]::pg_catalog.timestamptz AS hi) AS b
  WHERE i.inhparent OPERATOR(pg_catalog.=) 'webhook_dedup.keys'::pg_catalog.regclass
    AND m.parts IS NOT NULL
