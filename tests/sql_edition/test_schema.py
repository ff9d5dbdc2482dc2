"""One schema, two implementations (issue 43, item 1): the SQL edition
installed through pg_tle has the native edition's tables, columns,
indexes, constraints, views, triggers, composite types, roles, grants,
comments and function signatures (names, argument names and defaults,
result types, volatility, strictness, parallel safety, SECURITY DEFINER and
pinned settings, who may execute them), read from each server's catalogs.
Only the functions' bodies and languages differ, and the SQL edition's
internal helpers (named `_...`), which nobody but the owner may execute
(but the pure ones of the functions that run as their caller).
"""

import re

SCHEMA = "webhook_dedup"

# The archive's day partitions are made ahead by maintenance (the native
# edition's worker runs it within seconds of the start), not by the install
# script: they are data of a run, compared by the maintenance tests.
# The SQL edition's internal relations (named `_...`, its count log) are
# its own, like its helpers: test_the_helpers_are_the_owners_alone checks them.
NOT_A_DAY = "NOT {0} ~ '(^|[.])archive_[0-9]{{8}}(_|$)' AND NOT {0} ~ '(^|[.])_'"

# Each query returns rows that must be equal in both editions; each names
# what it compares.
CATALOG = {
    "relations (kind, persistence, access privileges, comment)": """
        SELECT c.relname, c.relkind, c.relpersistence, c.relacl::text, obj_description(c.oid, 'pg_class')
          FROM pg_class AS c WHERE c.relnamespace = 'webhook_dedup'::regnamespace
           AND """ + NOT_A_DAY.format("c.relname") + """ ORDER BY 1""",
    "columns (type, NOT NULL, default, collation, column privileges, comment)": """
        SELECT c.relname, a.attnum, a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull,
               pg_get_expr(d.adbin, d.adrelid), co.collname, a.attacl::text, col_description(c.oid, a.attnum)
          FROM pg_class AS c JOIN pg_attribute AS a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
          LEFT JOIN pg_attrdef AS d ON d.adrelid = c.oid AND d.adnum = a.attnum
          LEFT JOIN pg_collation AS co ON co.oid = a.attcollation AND a.attcollation <> 100
         WHERE c.relnamespace = 'webhook_dedup'::regnamespace AND """ + NOT_A_DAY.format("c.relname") + """ ORDER BY 1, 2""",
    "indexes": """
        SELECT i.indexrelid::regclass::text, pg_get_indexdef(i.indexrelid)
          FROM pg_index AS i JOIN pg_class AS c ON c.oid = i.indrelid
         WHERE c.relnamespace = 'webhook_dedup'::regnamespace AND """ + NOT_A_DAY.format("c.relname") + """
         ORDER BY 1""",
    "constraints": """
        SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid)
          FROM pg_constraint WHERE connamespace = 'webhook_dedup'::regnamespace
           AND """ + NOT_A_DAY.format("conrelid::regclass::text") + """ ORDER BY 1, 2""",
    "views": """
        SELECT c.relname, pg_get_viewdef(c.oid)
          FROM pg_class AS c WHERE c.relnamespace = 'webhook_dedup'::regnamespace AND c.relkind IN ('v', 'm')
         ORDER BY 1""",
    "triggers": """
        SELECT tgrelid::regclass::text, tgname, pg_get_triggerdef(oid)
          FROM pg_trigger WHERE NOT tgisinternal AND """ + NOT_A_DAY.format("tgrelid::regclass::text") + """
           AND tgrelid IN (SELECT oid FROM pg_class WHERE relnamespace = 'webhook_dedup'::regnamespace)
         ORDER BY 1, 2""",
    "composite types": """
        SELECT t.typname, a.attnum, a.attname, format_type(a.atttypid, a.atttypmod)
          FROM pg_type AS t JOIN pg_class AS c ON c.oid = t.typrelid AND c.relkind = 'c'
          JOIN pg_attribute AS a ON a.attrelid = c.oid AND a.attnum > 0
         WHERE t.typnamespace = 'webhook_dedup'::regnamespace ORDER BY 1, 2""",
    "functions of the API (signature, properties, privileges, comment)": """
        SELECT p.proname, pg_get_function_arguments(p.oid), pg_get_function_result(p.oid), p.prokind,
               p.provolatile, p.proisstrict, p.proparallel, p.prosecdef, p.proconfig, p.proretset,
               p.proacl::text, obj_description(p.oid, 'pg_proc')
          FROM pg_proc AS p WHERE p.pronamespace = 'webhook_dedup'::regnamespace AND p.proname !~ '^_'
         ORDER BY 1, 2""",
    "roles": """
        SELECT rolname, rolcanlogin, rolsuper, rolcreaterole, rolcreatedb, rolinherit, rolbypassrls
          FROM pg_roles WHERE rolname LIKE 'webhook_dedup%' ORDER BY 1""",
    "role memberships": """
        SELECT r.rolname, m.rolname FROM pg_auth_members AS a
          JOIN pg_roles AS r ON r.oid = a.roleid JOIN pg_roles AS m ON m.oid = a.member
         WHERE r.rolname LIKE 'webhook_dedup%' OR m.rolname LIKE 'webhook_dedup%' ORDER BY 1, 2""",
    "the extension (version, configuration tables dumped by pg_dump)": """
        SELECT e.extname, e.extversion, e.extrelocatable, n.nspname,
               ARRAY(SELECT c::regclass::text FROM unnest(e.extconfig) AS c ORDER BY 1), e.extcondition
          FROM pg_extension AS e JOIN pg_namespace AS n ON n.oid = e.extnamespace
         WHERE e.extname = 'webhook_dedup'""",
    "schema privileges and comment": """
        SELECT nspacl::text, obj_description(oid, 'pg_namespace') FROM pg_namespace WHERE nspname = 'webhook_dedup'""",
}


def snapshot(edition, query):
    with edition.connect() as conn:
        return conn.execute(query).fetchall()


def test_each_catalog_is_the_same_in_both_editions(native, sql):
    differ = []
    for what, query in CATALOG.items():
        a, b = snapshot(native, query), snapshot(sql, query)
        assert a, f"{what}: the native edition shows nothing (the query is wrong)"
        if a != b:
            only_native = [r for r in a if r not in b][:5]
            only_sql = [r for r in b if r not in a][:5]
            differ.append(f"{what}:\n  native only: {only_native}\n  SQL edition only: {only_sql}")
    assert not differ, "\n".join(differ)


def test_the_functions_differ_in_body_and_language_only(native, sql):
    # every function of the native edition is there; those written in Rust
    # are PL/pgSQL or SQL in the SQL edition, the others are the same text
    query = """
        SELECT p.oid::regprocedure::text, l.lanname, md5(p.prosrc)
          FROM pg_proc AS p JOIN pg_language AS l ON l.oid = p.prolang
         WHERE p.pronamespace = 'webhook_dedup'::regnamespace AND p.proname !~ '^_' ORDER BY 1"""
    a = {f: (lang, src) for f, lang, src in snapshot(native, query)}
    b = {f: (lang, src) for f, lang, src in snapshot(sql, query)}
    assert a.keys() == b.keys()
    rust = {f for f, (lang, _) in a.items() if lang == "c"}
    assert len(rust) > 40, "the native edition's functions written in Rust are found"
    for f in a:
        if f in rust:
            assert b[f][0] in ("plpgsql", "sql"), f
        else:
            assert b[f] == a[f], f"{f} is written in SQL in both editions and must be the same text"


def test_the_helpers_are_the_owners_alone(sql):
    # an internal helper runs with its caller's rights, and only the API's
    # SECURITY DEFINER functions (the owner) may call one; but for the
    # pure helpers of the API functions that run as their caller
    # (verification, keys, signing, answers: editions/sql/internal/
    # privileges.sql), which any role may run and which name no relation,
    # and the count log's reader, which metrics_live's readers may run
    with sql.connect() as conn:
        helpers = conn.execute("""
            SELECT p.oid::regprocedure::text, p.proacl::text, p.prosecdef, pg_get_functiondef(p.oid)
              FROM pg_proc AS p WHERE p.pronamespace = 'webhook_dedup'::regnamespace AND p.proname ~ '^_'
             ORDER BY 1""").fetchall()
        assert helpers, "the SQL edition has internal helpers"
        relations = {r[0] for r in conn.execute(
            "SELECT relname FROM pg_class WHERE relnamespace = 'webhook_dedup'::regnamespace")}
        granted, public = [], []
        for f, acl, secdef, definition in helpers:
            grantees = sorted(r[0] for r in conn.execute(
                "SELECT CASE a.grantee WHEN 0 THEN 'PUBLIC' ELSE pg_get_userbyid(a.grantee) END"
                " FROM aclexplode(%s::aclitem[]) AS a, pg_proc AS p"
                " WHERE p.oid = %s::regprocedure AND a.grantee <> p.proowner", (acl or "{}", f)))
            if acl is None:
                grantees = ["PUBLIC (default)"]
            if not grantees:
                continue
            if f == "webhook_dedup._logged_counts()" and grantees == ["pg_monitor", "webhook_dedup_reader"]:
                continue
            # the body (after the header, whose RETURNS may name a row type), comments left out
            body = re.sub(r"--[^\n]*", "", re.split(r"\n(?:AS |RETURN |BEGIN ATOMIC)", definition, maxsplit=1)[-1])
            named = sorted({n for n in re.findall(r"webhook_dedup\.([a-z_][a-z0-9_]*)\b(?!\s*\()", body)} & relations)
            if grantees == ["PUBLIC"] and not secdef and not named:
                public.append(f)
                continue
            granted.append((f, grantees, secdef, named))
        assert not granted, f"helpers executable by someone else than the owner: {granted}"
        assert "webhook_dedup._verify(text,bytea,jsonb,text[],interval,timestamp with time zone,text,text,text,text," \
               "text,text,boolean)" in public, "the pure helpers are there to be checked"
        # and its internal relations (the count log) are the owner's too
        internal = conn.execute("""
            SELECT c.relname, c.relacl::text FROM pg_class AS c
             WHERE c.relnamespace = 'webhook_dedup'::regnamespace AND c.relname ~ '^_'""").fetchall()
        assert internal, "the SQL edition has internal relations"
        readable = [(r, acl) for r, acl in internal
                    if acl is None or conn.execute(
                        "SELECT count(*) FROM aclexplode(%s::aclitem[]) AS a, pg_class AS c"
                        " WHERE c.relname = %s AND c.relnamespace = 'webhook_dedup'::regnamespace"
                        " AND a.grantee <> c.relowner", (acl, r)).fetchone()[0]]
        assert not readable, f"internal relations someone else than the owner may use: {readable}"


def test_every_function_has_its_sql_body(sql):
    # Every function of the API is written in the SQL edition: none is
    # left with the assembler's placeholder body, which refuses with 0A000
    # naming the native edition (the release build refuses to assemble
    # with one: crates/webhook-dedup-sql-edition, Missing::Refuse).
    with sql.connect() as conn:
        missing = [r[0] for r in conn.execute("""
            SELECT p.oid::regprocedure::text FROM pg_proc AS p
             WHERE p.pronamespace = 'webhook_dedup'::regnamespace AND p.proname !~ '^_'
               AND p.prosrc LIKE '%is not in the SQL edition yet%' ORDER BY 1""")]
        assert not missing, f"not in the SQL edition yet: {', '.join(missing)}"
