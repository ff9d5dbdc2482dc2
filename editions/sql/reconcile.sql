-- Events a provider sent that never arrived (src/api/reconcile.rs):
-- unseen lists them (key_unseen.sql, the native store's statement);
-- reconcile enqueues one fetched from the provider's API under the
-- source's rules as webhook_receive applies them (_applied_rules,
-- _accepts, _fingerprint in editions/sql/internal/receive.sql).

--@ webhook_dedup.unseen
DECLARE
  ids pg_catalog.text[] := '{}';
  keys pg_catalog.text[] := '{}';
  id pg_catalog.text;
BEGIN
  IF source IS NULL THEN
    RAISE EXCEPTION 'source must not be NULL' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  PERFORM webhook_dedup._check_source(source);
  IF event_ids IS NULL THEN
    RAISE EXCEPTION 'event_ids must not be NULL' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  IF COALESCE(pg_catalog.cardinality(event_ids), 0) OPERATOR(pg_catalog.>) 100000 THEN
    RAISE EXCEPTION 'event_ids has % entries; the limit is 100000', pg_catalog.cardinality(event_ids)
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  -- each id once, in the order given, its key as webhook_key derives it
  FOREACH id IN ARRAY COALESCE(event_ids, '{}') LOOP
    IF id IS NULL THEN
      RAISE EXCEPTION 'an element of event_ids must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    CONTINUE WHEN id OPERATOR(pg_catalog.=) ANY (ids);
    keys := keys OPERATOR(pg_catalog.||) webhook_dedup._key_derive(source, id, webhook_dedup._key_escape(id), environment,
                                                                   account, operation);
    ids := ids OPERATOR(pg_catalog.||) id;
  END LOOP;
  RETURN QUERY SELECT u.event_id FROM webhook_dedup._s_key_unseen(source, ids, keys) AS u(event_id pg_catalog.text);
END

--@ webhook_dedup.reconcile
DECLARE
  idem_key pg_catalog.text;
  settings record;
  scheme_name pg_catalog.text;
  rules record;
  fingerprint pg_catalog.bytea;
  raw pg_catalog.bytea;
BEGIN
  IF source IS NULL THEN
    RAISE EXCEPTION 'source must not be NULL' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  PERFORM webhook_dedup._check_source(source);
  IF event_id IS NULL THEN
    RAISE EXCEPTION 'event_id must not be NULL' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  IF payload IS NULL THEN
    RAISE EXCEPTION 'payload must not be NULL' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  idem_key := webhook_dedup._key_derive(source, event_id, webhook_dedup._key_escape(event_id), environment, account,
                                        operation);
  settings := webhook_dedup._source_settings(source);
  IF NOT webhook_dedup._accepts(settings.accept_event_types, event_type) THEN
    RETURN 'ignored';
  END IF;
  -- the scheme of the source's provider, else of its name (Scheme::parse,
  -- none for another name): the fingerprint its rule covers, so that the
  -- provider's own later retry is a duplicate, not a conflict
  BEGIN
    scheme_name := webhook_dedup._scheme_parse(COALESCE(settings.provider, source));
  EXCEPTION WHEN invalid_parameter_value THEN
    scheme_name := NULL;
  END;
  IF scheme_name IS NULL THEN
    fingerprint := pg_catalog.sha256(payload);
  ELSE
    rules := webhook_dedup._applied_rules(scheme_name, settings.event_id_from, settings.event_type_from,
                                          settings.event_time_from, settings.event_time_format,
                                          settings.fingerprint_pointers, settings.replay_guard);
    SELECT x.fingerprint, x.raw INTO fingerprint, raw
      FROM webhook_dedup._fingerprint(rules.fingerprint_rule, rules.pointers, payload, NULL) AS x;
  END IF;
  RETURN webhook_dedup._enqueue(source, idem_key, payload, fingerprint, raw, event_type, headers, true, event_id,
                                headers, true);
END
