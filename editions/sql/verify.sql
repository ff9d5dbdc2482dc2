-- Signature verification (src/api/verify.rs): webhook_verify,
-- webhook_verify_detail and the typed conveniences, over _verify
-- (editions/sql/internal/signature*.sql): every HMAC scheme; the
-- public-key ones (discord, sendgrid, standard's v1a) answer 0A000 naming
-- the native edition.

--@ webhook_dedup.webhook_verify_detail
DECLARE
  folded pg_catalog.jsonb;
BEGIN
  IF secrets IS NULL THEN
    RAISE EXCEPTION 'secrets must not be NULL' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  folded := webhook_dedup._headers(headers);
  RETURN QUERY SELECT v.valid, v.reason, v.secret_index, v.signed_at
                 FROM webhook_dedup._verify(scheme, payload, folded, secrets, tolerance, at, url, method,
                                            signature_header, signature_prefix, algorithm, encoding) AS v;
END

--@ webhook_dedup.webhook_verify
DECLARE
  folded pg_catalog.jsonb;
BEGIN
  IF secrets IS NULL THEN
    RAISE EXCEPTION 'secrets must not be NULL' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  folded := webhook_dedup._headers(headers);
  RETURN (webhook_dedup._verify(scheme, payload, folded, secrets, tolerance, at, url, method,
                                signature_header, signature_prefix, algorithm, encoding)).valid;
END

--@ webhook_dedup.webhook_verify_github
BEGIN
  IF secret IS NULL THEN
    RAISE EXCEPTION 'secret must not be NULL' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  RETURN (webhook_dedup._verify('github', payload,
                                webhook_dedup._header_pairs('x-hub-signature-256', signature_header),
                                ARRAY[secret], NULL, 'epoch', NULL, NULL, NULL, NULL, NULL, NULL)).valid;
END

--@ webhook_dedup.webhook_verify_shopify
BEGIN
  IF secret IS NULL THEN
    RAISE EXCEPTION 'secret must not be NULL' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  RETURN (webhook_dedup._verify('shopify', payload,
                                webhook_dedup._header_pairs('x-shopify-hmac-sha256', hmac_header),
                                ARRAY[secret], NULL, 'epoch', NULL, NULL, NULL, NULL, NULL, NULL)).valid;
END

--@ webhook_dedup.webhook_verify_stripe
BEGIN
  IF secret IS NULL THEN
    RAISE EXCEPTION 'secret must not be NULL' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  RETURN (webhook_dedup._verify('stripe', payload,
                                webhook_dedup._header_pairs('stripe-signature', signature_header),
                                ARRAY[secret], tolerance, at, NULL, NULL, NULL, NULL, NULL, NULL)).valid;
END

--@ webhook_dedup.webhook_verify_paddle
BEGIN
  IF secret IS NULL THEN
    RAISE EXCEPTION 'secret must not be NULL' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  RETURN (webhook_dedup._verify('paddle', payload,
                                webhook_dedup._header_pairs('paddle-signature', signature_header),
                                ARRAY[secret], tolerance, at, NULL, NULL, NULL, NULL, NULL, NULL)).valid;
END

--@ webhook_dedup.webhook_verify_slack
BEGIN
  IF secret IS NULL THEN
    RAISE EXCEPTION 'secret must not be NULL' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  RETURN (webhook_dedup._verify('slack', payload,
                                webhook_dedup._header_pairs('x-slack-request-timestamp', timestamp_header,
                                                            'x-slack-signature', signature_header),
                                ARRAY[secret], tolerance, at, NULL, NULL, NULL, NULL, NULL, NULL)).valid;
END

--@ webhook_dedup.webhook_verify_standard
BEGIN
  IF secret IS NULL THEN
    RAISE EXCEPTION 'secret must not be NULL' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  RETURN (webhook_dedup._verify('standard', payload,
                                webhook_dedup._header_pairs('webhook-id', msg_id, 'webhook-timestamp', msg_timestamp,
                                                            'webhook-signature', signature_header),
                                ARRAY[secret], tolerance, at, NULL, NULL, NULL, NULL, NULL, NULL)).valid;
END

--@ webhook_dedup.webhook_verify_twilio
BEGIN
  IF url IS NULL THEN
    RAISE EXCEPTION 'url must not be NULL' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  IF auth_token IS NULL THEN
    RAISE EXCEPTION 'secret must not be NULL' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  RETURN (webhook_dedup._verify('twilio', payload, webhook_dedup._header_pairs('x-twilio-signature', signature_header),
                                ARRAY[auth_token], NULL, 'epoch', url, NULL, NULL, NULL, NULL, NULL)).valid;
END

--@ webhook_dedup.webhook_hmac
DECLARE
  name pg_catalog.text := pg_catalog.translate(algorithm, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz');
BEGIN
  IF name OPERATOR(pg_catalog.<>) ALL (ARRAY['sha1', 'sha256', 'sha512']) THEN
    RAISE EXCEPTION 'unknown HMAC algorithm "%" (sha1, sha256 or sha512)', algorithm USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF pg_catalog.length(secret) OPERATOR(pg_catalog.=) 0 THEN
    RAISE EXCEPTION 'secret must not be empty' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  RETURN webhook_dedup._hmac(name, secret, payload);
END
