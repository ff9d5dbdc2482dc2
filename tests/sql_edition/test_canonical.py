"""RFC 8785 in the SQL edition (editions/sql/internal/canonical.sql), the
pieces webhook_receive's fingerprint rules will use: numbers written as
ECMAScript writes them, checked against RFC 8785's own table (Appendix B,
"Number Serialization Samples": the IEEE 754 value in hex, the expected
text), the table serde_json_canonicalizer (the native edition's) is
tested with too.
"""

import struct

import pytest

# RFC 8785, Appendix B
SAMPLES = [
    ("0000000000000000", "0"), ("8000000000000000", "0"), ("0000000000000001", "5e-324"),
    ("8000000000000001", "-5e-324"), ("7fefffffffffffff", "1.7976931348623157e+308"),
    ("ffefffffffffffff", "-1.7976931348623157e+308"), ("4340000000000000", "9007199254740992"),
    ("c340000000000000", "-9007199254740992"), ("4430000000000000", "295147905179352830000"),
    ("44b52d02c7e14af5", "9.999999999999997e+22"), ("44b52d02c7e14af6", "1e+23"),
    ("44b52d02c7e14af7", "1.0000000000000001e+23"), ("444b1ae4d6e2ef4e", "999999999999999700000"),
    ("444b1ae4d6e2ef4f", "999999999999999900000"), ("444b1ae4d6e2ef50", "1e+21"),
    ("3eb0c6f7a0b5ed8c", "9.999999999999997e-7"), ("3eb0c6f7a0b5ed8d", "0.000001"),
    ("41b3de4355555553", "333333333.3333332"), ("41b3de4355555554", "333333333.33333325"),
    ("41b3de4355555555", "333333333.3333333"), ("41b3de4355555556", "333333333.3333334"),
    ("41b3de4355555557", "333333333.33333343"), ("becbf647612f3696", "-0.0000033333333333333333"),
    ("43143ff3c1cb0959", "1424953923781206.2"),
]


@pytest.mark.parametrize("bits, expected", SAMPLES)
def test_numbers_are_written_as_rfc_8785_writes_them(sql, bits, expected):
    value = struct.unpack(">d", bytes.fromhex(bits))[0]
    with sql.connect() as conn:
        # under a session that asks for fewer digits too: the helper pins its own
        conn.execute("SET extra_float_digits = 0")
        assert conn.execute("SELECT webhook_dedup._es_number(%s::float8)", (value,)).fetchone()[0] == expected


def es_number(x: float) -> str:
    """ECMAScript's NumberToString from Python's repr (also the shortest
    digits that read back, the closest of them): an independent check."""
    if x == 0:
        return "0"
    sign = "-" if x < 0 else ""
    mantissa, _, exp = repr(abs(x)).partition("e")
    whole, _, frac = mantissa.partition(".")
    digits = (whole + frac).lstrip("0")
    n = len(whole) + int(exp or 0) - (len(whole + frac) - len((whole + frac).lstrip("0")))
    digits = digits.rstrip("0")
    k = len(digits)
    if k <= n <= 21:
        out = digits + "0" * (n - k)
    elif 0 < n <= 21:
        out = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        out = "0." + "0" * -n + digits
    else:
        out = digits[0] + ("." + digits[1:] if k > 1 else "") + "e" + ("+" if n - 1 >= 0 else "-") + str(abs(n - 1))
    return sign + out


def test_random_doubles_are_written_as_ecmascript_writes_them(sql):
    import random
    rng = random.Random(8785)
    values = [struct.unpack(">d", struct.pack(">Q", rng.getrandbits(64)))[0] for _ in range(3000)]
    values += [rng.uniform(-1e6, 1e6) for _ in range(1000)] + [float(rng.randint(-2**60, 2**60)) for _ in range(500)]
    values = [v for v in values if v == v and abs(v) != float("inf")]
    assert es_number(1e23) == "1e+23" and es_number(1e21) == "1e+21" and es_number(1e-7) == "1e-7"
    with sql.connect() as conn:
        got = conn.execute("SELECT webhook_dedup._es_number(v) FROM unnest(%s::float8[]) WITH ORDINALITY AS u(v, i)"
                           " ORDER BY i", (values,)).fetchall()
    wrong = [(v, g[0], es_number(v)) for v, g in zip(values, got) if g[0] != es_number(v)]
    assert not wrong, wrong[:5]


def test_strings_and_member_order_are_rfc_8785s(sql):
    # strings as json.dumps(..., ensure_ascii=False) writes them (the same
    # rules: the short escapes, \u00xx below U+0020, nothing else escaped);
    # names in UTF-16 code-unit order, a character past U+FFFF (a surrogate
    # pair, D8xx) before one of U+E000..U+FFFF
    import json
    strings = ["", "a", '"', "\\", "\b\t\n\f\r", "\x01\x1f\x7f", "é€😀", "\u2028/<>", "x" * 300, "€\ue000😀\uffff"]
    with sql.connect() as conn:
        for s in strings:
            assert conn.execute("SELECT webhook_dedup._jcs_string(%s)", (s,)).fetchone()[0] == json.dumps(s, ensure_ascii=False)
        names = ["b", "a", "aa", "€", "😀", "\ue000", "\uffff", "A", "", "\x7f", "é"]
        got = [r[0] for r in conn.execute("SELECT n FROM unnest(%s::text[]) AS n ORDER BY webhook_dedup._utf16_key(n)",
                                          (names,)).fetchall()]
    assert got == sorted(names, key=lambda n: n.encode("utf-16-be")), got


def json_value(rng, depth=0):
    """A JSON text: numbers of every kind (integers around 2^53, floats,
    exponents, a value past the doubles' range), strings with escapes and
    characters past U+FFFF, repeated names, nesting."""
    kind = rng.choice(["num", "num", "str", "obj", "arr", "lit"] if depth < 3 else ["num", "str", "lit"])
    if kind == "num":
        return rng.choice(["0", "-0", "1", "2.50", "1e2", "1E-7", "9007199254740992", "9007199254740993",
                           "-9007199254740993", "123456789012345678901234567890", "1.5e300", "1e400", "0.1",
                           "333333333.33333329", "4.35", str(rng.uniform(-1e9, 1e9)), str(rng.randint(-10**6, 10**6))])
    if kind == "str":
        return rng.choice(['"a"', '"\\u00e9"', '"\\ud83d\\ude00"', '"\\n\\t\\""', '"\\u001f"', '"€"', '"\\/"', '""'])
    if kind == "lit":
        return rng.choice(["true", "false", "null"])
    if kind == "arr":
        return "[" + ",".join(json_value(rng, depth + 1) for _ in range(rng.randint(0, 3))) + "]"
    names = ['"a"', '"b"', '"€"', '"\\ud83d\\ude00"', '"\\ue000"', '"A"', '"a"', '"~"', '"x/y"']
    return "{" + ",".join(f"{rng.choice(names)}: {json_value(rng, depth + 1)}" for _ in range(rng.randint(0, 4))) + "}"


def test_covered_values_fingerprint_as_the_native_edition_does(native, sql):
    # the native edition's fingerprint of a custom source's covered values
    # (webhook_receive, keys.fingerprint: 0x01 and SHA-256 of the canonical
    # text, or SHA-256 of the raw body) against the SQL edition's canonical
    # text of the same body and pointers
    import hashlib
    import hmac as hmac_module
    import json
    import random
    import os
    rng = random.Random(f"{os.environ.get('WEBHOOK_DEDUP_DIFFERENTIAL_SEED', '43')}-canonical")
    pointers = ["/a", "/b", "/a/b", "/a/0", "/a/01", "/b/1", "/x~1y", "/~0", "/", "", "/€", "/a/-1", "/b/+1"]
    with native.connect() as a, sql.connect() as b:
        a.execute("DELETE FROM webhook_dedup.keys WHERE source = 'jcs'")
        a.execute("DELETE FROM webhook_dedup.sources WHERE source = 'jcs'")
        checked = canonical = 0
        for n in range(300):
            chosen = rng.sample(pointers, rng.randint(1, 4))
            a.execute("INSERT INTO webhook_dedup.sources (source, event_id_from, fingerprint_pointers)"
                      " VALUES ('jcs', '/id', %s) ON CONFLICT (source) DO UPDATE"
                      " SET fingerprint_pointers = EXCLUDED.fingerprint_pointers", (chosen,))
            members = [f'"{k}": {json_value(rng)}' for k in rng.sample(["a", "b", "x/y", "~", "€", ""], rng.randint(1, 4))]
            body = ("{" + ", ".join([f'"id": "e{n}"'] + members) + "}").encode()
            mac = hmac_module.new(b"s", body, hashlib.sha256).hexdigest()
            got = a.execute("SELECT outcome, reject_reason FROM webhook_dedup.webhook_receive('hmac', %s, %s::jsonb,"
                            " ARRAY['s'], source => 'jcs', signature_header => 'X-Sig')",
                            (body, json.dumps({"X-Sig": mac}))).fetchone()
            text = b.execute("SELECT webhook_dedup._canonical_values(%s, %s::text[])", (body, chosen)).fetchone()[0]
            if got == (None, "missing_event_id"):
                # no JSON to serde_json (a number past the doubles' range): the
                # native edition reads no id; the SQL edition's canonical text is none
                assert text is None, (body, text)
                continue
            assert got[0] == "claimed", (got, body)
            stored = bytes(a.execute("SELECT fingerprint FROM webhook_dedup.keys WHERE source = 'jcs' AND idem_key = %s",
                                     (f"jcs:e{n}",)).fetchone()[0])
            expected = (b"\x01" + hashlib.sha256(text.encode()).digest()) if text is not None else hashlib.sha256(body).digest()
            assert stored == expected, (body, chosen, text)
            checked += 1
            canonical += text is not None
    assert checked > 200 and 100 < canonical < checked, (checked, canonical)
