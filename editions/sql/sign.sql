-- Signing as each provider signs (src/api/verify.rs, webhook_sign; the
-- signers of crates/webhook-dedup-core/src/signature/): the headers a
-- sender would send, their names as the core's signers spell them
-- (_sign_headers, written from the core), or Mailgun's signature member.

--@ webhook_dedup.webhook_sign
DECLARE
  scheme_name pg_catalog.text;
  signable boolean;
  signs_url boolean;
  key pg_catalog.bytea;
  unix_s bigint;
  unix_us numeric;
  t pg_catalog.text;
  hmac_algorithm pg_catalog.text;
  hmac_encoding pg_catalog.text;
  frame record;
  tagged record;
  mac pg_catalog.bytea;
  values pg_catalog.text[];
  suffix pg_catalog.bytea;
  ts pg_catalog.text;
BEGIN
  scheme_name := webhook_dedup._signing_scheme(scheme, payload);
  SELECT s.signable, s.signs_url INTO signable, signs_url FROM webhook_dedup._schemes() AS s
   WHERE s.name OPERATOR(pg_catalog.=) scheme_name;
  IF NOT signable THEN
    RAISE EXCEPTION 'webhook_sign cannot sign scheme %: it is signed with the provider''s private key', scheme_name
      USING ERRCODE = 'invalid_parameter_value', HINT = 'Its secrets are public keys, which verify signatures but cannot make them.';
  END IF;
  -- signature::check_secrets, of one secret
  IF secret IS NULL THEN
    RAISE EXCEPTION 'every element of secrets must not be NULL' USING ERRCODE = 'null_value_not_allowed';
  ELSIF secret OPERATOR(pg_catalog.=) '' THEN
    RAISE EXCEPTION 'secret 1 of 1 is empty' USING ERRCODE = 'invalid_parameter_value';
  ELSIF webhook_dedup._trim(secret) OPERATOR(pg_catalog.<>) secret THEN
    RAISE EXCEPTION 'secret 1 of 1 has leading or trailing whitespace' USING ERRCODE = 'invalid_parameter_value',
      HINT = 'Secrets are used byte for byte; a trailing newline copied from a file is the usual cause.';
  END IF;
  key := (webhook_dedup._scheme_keys(scheme_name, ARRAY[secret]))[1];
  PERFORM webhook_dedup._check_at(at);
  SELECT h.algorithm_name, h.encoding_name INTO hmac_algorithm, hmac_encoding
    FROM webhook_dedup._hmac_spec(scheme_name, signature_header, signature_prefix, algorithm, encoding) AS h;
  -- sign.rs, sign
  IF url IS NOT NULL AND NOT signs_url THEN
    RAISE EXCEPTION 'url applies only to schemes twilio, square and hubspot, not %', scheme_name
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  unix_us := EXTRACT(epoch FROM at) OPERATOR(pg_catalog.*) 1000000;
  unix_s := pg_catalog.floor(EXTRACT(epoch FROM at))::bigint;
  t := unix_s::pg_catalog.text;
  IF scheme_name OPERATOR(pg_catalog.=) ANY (ARRAY['square', 'hubspot', 'twilio']) AND url IS NULL THEN
    RAISE EXCEPTION 'url (for schemes twilio, square and hubspot) must not be NULL' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  IF scheme_name OPERATOR(pg_catalog.=) ANY (ARRAY['standard', 'twitch']) AND msg_id IS NULL THEN
    RAISE EXCEPTION 'msg_id (for schemes standard and twitch) must not be NULL' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  CASE WHEN scheme_name OPERATOR(pg_catalog.=) ANY (ARRAY['github', 'shopify', 'typeform', 'twitter', 'intercom', 'square']) THEN
    SELECT * INTO tagged FROM webhook_dedup._tagged_frames() AS f WHERE f.scheme OPERATOR(pg_catalog.=) scheme_name;
    mac := webhook_dedup._hmac(tagged.algorithm, key,
                               CASE WHEN scheme_name OPERATOR(pg_catalog.=) 'square' THEN pg_catalog.convert_to(url, 'UTF8') ELSE ''::pg_catalog.bytea END
                               OPERATOR(pg_catalog.||) payload);
    values := ARRAY[tagged.tag OPERATOR(pg_catalog.||)
                    CASE WHEN tagged.encoding OPERATOR(pg_catalog.=) 'hex' THEN pg_catalog.encode(mac, 'hex')
                                         ELSE pg_catalog.translate(pg_catalog.encode(mac, 'base64'), E'\n', '') END];
  WHEN scheme_name OPERATOR(pg_catalog.=) ANY (ARRAY['stripe', 'paddle', 'calendly']) THEN
    SELECT * INTO frame FROM webhook_dedup._timestamped_frames() AS f WHERE f.scheme OPERATOR(pg_catalog.=) scheme_name;
    mac := webhook_dedup._hmac('sha256', key, pg_catalog.convert_to(t OPERATOR(pg_catalog.||) frame.joiner, 'UTF8')
                                              OPERATOR(pg_catalog.||) payload);
    values := ARRAY[frame.timestamp_key OPERATOR(pg_catalog.||) '=' OPERATOR(pg_catalog.||) t
                    OPERATOR(pg_catalog.||) frame.separator OPERATOR(pg_catalog.||) frame.signature_key
                    OPERATOR(pg_catalog.||) '='
                    OPERATOR(pg_catalog.||) CASE WHEN frame.encoding OPERATOR(pg_catalog.=) 'hex' THEN pg_catalog.encode(mac, 'hex')
                                            ELSE pg_catalog.translate(pg_catalog.encode(mac, 'base64'), E'\n', '') END];
  WHEN scheme_name OPERATOR(pg_catalog.=) ANY (ARRAY['slack', 'zoom']) THEN
    mac := webhook_dedup._hmac('sha256', key, pg_catalog.convert_to('v0:' OPERATOR(pg_catalog.||) t OPERATOR(pg_catalog.||) ':', 'UTF8')
                                              OPERATOR(pg_catalog.||) payload);
    values := ARRAY[t, 'v0=' OPERATOR(pg_catalog.||) pg_catalog.encode(mac, 'hex')];
  WHEN scheme_name OPERATOR(pg_catalog.=) 'standard' THEN
    mac := webhook_dedup._hmac('sha256', key, pg_catalog.convert_to(msg_id OPERATOR(pg_catalog.||) '.' OPERATOR(pg_catalog.||) t
                                                                    OPERATOR(pg_catalog.||) '.', 'UTF8') OPERATOR(pg_catalog.||) payload);
    values := ARRAY[msg_id, t, 'v1,' OPERATOR(pg_catalog.||) pg_catalog.translate(pg_catalog.encode(mac, 'base64'), E'\n', '')];
  WHEN scheme_name OPERATOR(pg_catalog.=) 'hubspot' THEN
    IF COALESCE(method, '') OPERATOR(pg_catalog.=) '' THEN
      RAISE EXCEPTION 'scheme hubspot needs the request method (argument method)' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    ts := pg_catalog.floor(unix_us OPERATOR(pg_catalog./) 1000)::bigint::pg_catalog.text;
    mac := webhook_dedup._hmac('sha256', key, pg_catalog.convert_to(method OPERATOR(pg_catalog.||) webhook_dedup._hubspot_signed_uri(url), 'UTF8')
                                              OPERATOR(pg_catalog.||) payload OPERATOR(pg_catalog.||) pg_catalog.convert_to(ts, 'UTF8'));
    values := ARRAY[ts, pg_catalog.translate(pg_catalog.encode(mac, 'base64'), E'\n', '')];
  WHEN scheme_name OPERATOR(pg_catalog.=) 'linear' THEN
    values := ARRAY[pg_catalog.encode(webhook_dedup._hmac('sha256', key, payload), 'hex')];
  WHEN scheme_name OPERATOR(pg_catalog.=) 'twitch' THEN
    ts := pg_catalog.to_char(pg_catalog.timezone('UTC', at), 'YYYY-MM-DD"T"HH24:MI:SS.US') OPERATOR(pg_catalog.||) '000Z';
    mac := webhook_dedup._hmac('sha256', key, pg_catalog.convert_to(msg_id OPERATOR(pg_catalog.||) ts, 'UTF8') OPERATOR(pg_catalog.||) payload);
    values := ARRAY[msg_id, ts, 'sha256=' OPERATOR(pg_catalog.||) pg_catalog.encode(mac, 'hex')];
  WHEN scheme_name OPERATOR(pg_catalog.=) 'twilio' THEN
    -- twilio.rs, sign: the URL alone when it carries bodySHA256
    suffix := CASE WHEN webhook_dedup._twilio_body_hash(url) IS NOT NULL THEN ''::pg_catalog.bytea
                   ELSE webhook_dedup._twilio_form_suffix(payload) END;
    values := ARRAY[pg_catalog.translate(pg_catalog.encode(webhook_dedup._hmac('sha1', key, pg_catalog.convert_to(url, 'UTF8')
                                                                                            OPERATOR(pg_catalog.||) suffix),
                                                           'base64'), E'\n', '')];
  WHEN scheme_name OPERATOR(pg_catalog.=) 'mailgun' THEN
    IF msg_id IS NULL THEN
      RAISE EXCEPTION 'msg_id (the token, for scheme mailgun) must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    RETURN pg_catalog.jsonb_build_object('signature', pg_catalog.jsonb_build_object(
      'timestamp', t, 'token', msg_id,
      'signature', pg_catalog.encode(webhook_dedup._hmac('sha256', key, pg_catalog.convert_to(t OPERATOR(pg_catalog.||) msg_id, 'UTF8')), 'hex')));
  ELSE -- hmac
    IF signature_header IS NULL THEN
      RAISE EXCEPTION 'scheme hmac needs signature_header' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    mac := webhook_dedup._hmac(hmac_algorithm, key, payload);
    RETURN pg_catalog.jsonb_build_object(signature_header, COALESCE(signature_prefix, '')
      OPERATOR(pg_catalog.||) CASE WHEN hmac_encoding OPERATOR(pg_catalog.=) 'hex' THEN pg_catalog.encode(mac, 'hex')
                                   ELSE pg_catalog.translate(pg_catalog.encode(mac, 'base64'), E'\n', '') END);
  END CASE;
  RETURN (SELECT pg_catalog.jsonb_object_agg(h.name, values[h.n]) FROM webhook_dedup._sign_headers() AS h
           WHERE h.scheme OPERATOR(pg_catalog.=) scheme_name);
END
