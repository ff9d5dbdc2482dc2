"""README.md's "What it costs" against the latest run in docs/benchmarks.md.

The README once quoted an older run (ed41394) while docs/benchmarks.md
held three later ones. The README's numbers must come from the latest
run: this test parses both files and asserts that every ratio the README
quotes is the latest run's, and that the README names that run's commit
and date. No database, no benchmark: text only.

How docs/benchmarks.md records a run (section "The run"), and so what is
parsed here:

- the main run: a paragraph saying `finished on <YYYY-MM-DD> at <HH:MM> UTC,
  on commit <sha>`, then a table with one row per workload (columns
  workload, compared with, target, measured, before, 0.1.0);
- every later run: a paragraph that starts `**The run on <sha>**`, names
  its date (`<YYYY-MM-DD> <HH:MM> UTC`) and gives each ratio in prose, in
  the phrases of `PROSE` below (`CPU per claim 1.49× a plain insert`,
  `new keys 0.77× the plain insert (...) and 1.05× the PL/pgSQL claim`,
  ...).

The latest run is the one with the latest date and time, wherever it is in
the file. A run added in the same format is found and parsed without a
change here (`test_a_new_run_in_the_same_format_becomes_the_latest`); a run
whose format this parser cannot read fails `test_every_run_parses` instead
of being skipped.

The README side: each ratio quoted in the section is recognised by the
phrase around it (`README` below): a metric of the run, a target (checked
against the table's target column) or a 0.1.0 figure (checked against the
table's 0.1.0 column). A ratio in the section that none of these phrases
covers fails the test: a number the test cannot tie to the latest run is
not let through.
"""

import re
from dataclasses import dataclass, field
from datetime import date, timedelta
from decimal import Decimal
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
BENCHMARKS = ROOT / "docs" / "benchmarks.md"

NUMBER = r"\d+(?:\.\d+)?"
RATIO = NUMBER + "×"
SHA = r"[0-9a-f]{7,40}"

# Tokens of the phrase templates below: {R} a ratio, captured; {r} a ratio,
# not captured; {S} seconds, captured; {P} an optional parenthetical (a
# min-max range, a note). Bold markers around a number are allowed, and any
# run of whitespace (a line break of a reflowed paragraph) matches a space.
TOKENS = {
    "{R}": r"\**(" + NUMBER + r")×\**",
    "{r}": r"\**" + RATIO + r"\**",
    "{S}": r"\**(" + NUMBER + r")\**\s+s\b",
    "{P}": r"(?:\s*\([^()]*\))?",
}


def phrase(template):
    """A regex for a phrase template (see TOKENS)."""
    out = []
    for part in re.split(r"(\{[RrSP]\}|\s+)", template):
        if not part:
            continue
        if part in TOKENS:
            out.append(TOKENS[part])
        elif part.isspace():
            out.append(r"\s+")
        else:
            out.append(re.escape(part))
    return re.compile("".join(out))


# What each metric is called in a run's prose in docs/benchmarks.md.
PROSE = {
    "cpu": "CPU per claim {R}",
    "new_insert": "new keys {R} the plain insert",
    "new_plpgsql": "new keys {r} the plain insert{P} and {R} the PL/pgSQL claim",
    "dup_insert": "30% duplicates {R}",
    "dup_plpgsql": "30% duplicates {r}{P} and {R}",
    "complete_insert": "claim + complete {R}",
    "complete_plpgsql": "claim + complete {r}{P} and {R}",
    "receive": "`webhook_receive` {R} pgcrypto",
    "guard": "the replay guard {R}",
    "aged": "aged {R}",
    "p99": "p99 with 10 M keys {R}",
    "expiry": "claims during expiry {R}",
    "wal": "WAL {R}",
    "wal_lz4": "lz4 {R}",
    "bulk_s": "100,000 keys in one transaction in {S}",
    "citus": "Citus coordinator {R}",
    "storm": "retry storm {R}",
    "receive_reference": "and {R} the hand-written reference with the same guarantees",
}

# Which row of the main run's table each metric is: (workload, compared
# with), each a regex searched in its cell.
TABLE = {
    "cpu": (r"^CPU per call", r""),
    "new_insert": (r"new keys$", r"plain `INSERT"),
    "new_plpgsql": (r"new keys$", r"PL/pgSQL claim"),
    "dup_insert": (r"30% duplicates$", r"plain insert"),
    "dup_plpgsql": (r"30% duplicates$", r"PL/pgSQL claim"),
    "complete_insert": (r"^claim \+ complete", r"plain insert \+ update"),
    "complete_plpgsql": (r"^claim \+ complete", r"PL/pgSQL claim \+ complete"),
    "receive": (r"^`webhook_receive`", r"pgcrypto"),
    "guard": (r"", r"replay_guard = false"),
    "aged": (r"after 30 days", r""),
    "p99": (r"^claim p99", r""),
    "expiry": (r"backlog of", r""),
    "wal": (r"^WAL bytes per claim", r""),
    "wal_lz4": (r"wal_compression = lz4", r""),
    "bulk_s": (r"one transaction claiming 100,000 keys", r""),
}

# Every run must give these (the Citus, storm and same-guarantees receive
# scenarios are newer than some runs).
CORE = set(TABLE)

# What each metric is called in the README's "What it costs".
README_PHRASES = {
    "cpu": "CPU per `webhook_claim` of a new key: {R}",
    "new_insert": "throughput against the plain insert: {R} for new keys",
    "dup_insert": "{R} with 30% duplicates (which",
    "complete_insert": "{R} for claim + complete against insert + update",
    "receive": "`webhook_receive` of a signed GitHub delivery: {R} a pgcrypto check",
    "guard": "{R} the same call with the guard off",
    "new_plpgsql": "PL/pgSQL claim with the same semantics: {R} for new keys",
    "dup_plpgsql": "{R} with 30% duplicates (target",
    "complete_plpgsql": "{R} for claim + complete.",
    "aged": "default retention {R} a fresh install",
    "p99": "p99 latency with 10 M keys {R}",
    "expiry": "1 M expired keys {R}",
    "bulk_s": "100,000 in {S}",
    "wal": "eventual removal: {R} the plain insert",
    "wal_lz4": "{R} with `wal_compression = lz4`",
    "citus": "through the coordinator {R}",
    "storm": "a retry storm (90% duplicates of completed keys): {R}",
    "receive_reference": "{R} a hand-written reference with the same guarantees",
}

# A list of ratios after "target(s)" or "0.1.0:" ("0.95× and 0.9×",
# "0.32× to 0.37×", "at most 2×").
RATIO_LIST = r"((?:at\s+(?:most|least)\s+)?" + RATIO + r"(?:(?:,\s*|\s+and\s+|\s+to\s+)" + RATIO + r")*)"
TARGETS = re.compile(r"\btargets?\s+" + RATIO_LIST)
OLD = re.compile(r"\b0\.1\.0:\s+" + RATIO_LIST)


@dataclass
class Run:
    commit: str
    date: str
    time: str | None
    metrics: dict = field(default_factory=dict)
    where: str = ""

    @property
    def when(self):
        return (self.date, self.time or "")


def section(text, heading):
    """The text under `## heading`, up to the next `## `."""
    m = re.search(r"^## " + re.escape(heading) + r"\s*$(.*?)(?=^## |\Z)", text, re.M | re.S)
    if not m:
        pytest.fail(f"no section '## {heading}'", pytrace=False)
    return m.group(1)


def paragraphs(text):
    return [p.strip() for p in re.split(r"\n\s*\n", text) if p.strip()]


def table_rows(text):
    """The rows of the first markdown table in text, as lists of cells."""
    rows = []
    for line in text.splitlines():
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if not all(re.fullmatch(r":?-+:?", c) for c in cells):
                rows.append(cells)
        elif rows:
            break
    return rows


def main_table(bench):
    """The main run's table: header and rows as dicts by column name."""
    rows = table_rows(section(bench, "The run"))
    if len(rows) < 2:
        pytest.fail("docs/benchmarks.md, 'The run': no table of the main run", pytrace=False)
    header = rows[0]
    need = {"workload", "compared with", "target"}
    if not need <= set(header) or not any(h.startswith("measured") for h in header):
        pytest.fail(f"docs/benchmarks.md: the main run's table has columns {header}", pytrace=False)
    return header, [dict(zip(header, r)) for r in rows[1:]]


def column(header, prefix):
    found = [h for h in header if h.startswith(prefix)]
    if len(found) != 1:
        pytest.fail(f"docs/benchmarks.md: no single column '{prefix}...' in {header}", pytrace=False)
    return found[0]


def table_run(bench):
    """The main run: its commit and date from its paragraph, its metrics
    from the table's measured column."""
    text = section(bench, "The run")
    m = re.search(r"finished\s+on\s+(\d{4}-\d{2}-\d{2})\s+at\s+(\d{2}:\d{2})\s+UTC,"
                  r"\s+on\s+commit\s+(" + SHA + ")", text)
    if not m:
        pytest.fail("docs/benchmarks.md, 'The run': no 'finished on <date> at <HH:MM> UTC, on commit <sha>'",
                    pytrace=False)
    run = Run(commit=m.group(3), date=m.group(1), time=m.group(2), where="the table of 'The run'")
    header, rows = main_table(bench)
    measured = column(header, "measured")
    for metric, (workload, compared) in TABLE.items():
        hits = [r for r in rows
                if re.search(workload, r["workload"]) and re.search(compared, r["compared with"])]
        if len(hits) != 1:
            pytest.fail(f"docs/benchmarks.md, the main run's table: {len(hits)} rows for {metric} "
                        f"(workload /{workload}/, compared with /{compared}/)", pytrace=False)
        cell = hits[0][measured]
        pattern = r"\((" + NUMBER + r")\s+s\)" if metric == "bulk_s" else TOKENS["{R}"]
        value = re.search(pattern, cell)
        if not value:
            pytest.fail(f"docs/benchmarks.md, the main run's table: no value for {metric} in '{cell}'",
                        pytrace=False)
        run.metrics[metric] = Decimal(value.group(1))
    return run


def prose_runs(bench):
    """Every `**The run on <sha>**` paragraph, its metrics read by PROSE."""
    runs = []
    for para in paragraphs(bench):
        head = re.match(r"\*\*The run on `?(" + SHA + r")`?\*\*", para)
        if not head:
            continue
        text = re.sub(r"\s+", " ", para)
        when = re.search(r"(\d{4}-\d{2}-\d{2})(?:,?\s+(?:at\s+)?(\d{2}:\d{2})\s+UTC)?", text)
        if not when:
            pytest.fail(f"docs/benchmarks.md: the run on {head.group(1)} names no date (YYYY-MM-DD)", pytrace=False)
        run = Run(commit=head.group(1), date=when.group(1), time=when.group(2),
                  where=f"the paragraph '**The run on {head.group(1)}**'")
        for metric, template in PROSE.items():
            m = phrase(template).search(text)
            if m:
                run.metrics[metric] = Decimal(m.group(1))
        runs.append(run)
    return runs


def all_runs(bench):
    return [table_run(bench)] + prose_runs(bench)


def latest(runs):
    best = max(runs, key=lambda r: r.when)
    ties = [r for r in runs if r.date == best.date and r is not best]
    if ties and (best.time is None or any(r.time is None or r.time == best.time for r in ties)):
        pytest.fail(f"docs/benchmarks.md: runs {[best.commit] + [r.commit for r in ties]} share the date "
                    f"{best.date} and their times do not say which is the latest", pytrace=False)
    return best


def what_it_costs(readme):
    return section(readme, "What it costs")


@dataclass
class Quotes:
    metrics: dict  # metric -> Decimal
    targets: list  # Decimal
    old: list  # Decimal (0.1.0)
    uncovered: list  # (ratio text, context)


def readme_quotes(text):
    """Every ratio (and the seconds of the bulk claim) the section quotes,
    sorted by what it is; `uncovered` holds the ratios no phrase covers."""
    covered = []  # spans of the numbers accounted for
    metrics = {}
    for metric, template in README_PHRASES.items():
        found = list(phrase(template).finditer(text))
        if len(found) > 1:
            pytest.fail(f"README 'What it costs': the phrase for {metric} occurs {len(found)} times", pytrace=False)
        if found:
            metrics[metric] = Decimal(found[0].group(1))
            covered.append(found[0].span(1))
    targets, old = [], []
    for pattern, into in ((TARGETS, targets), (OLD, old)):
        for m in pattern.finditer(text):
            for n in re.finditer(NUMBER + "×", m.group(1)):
                start = m.start(1) + n.start()
                into.append(Decimal(n.group(0)[:-1]))
                covered.append((start, start + len(n.group(0)) - 1))
    uncovered = []
    for n in re.finditer(r"(?<![\d.])" + NUMBER + "×", text):
        start, end = n.start(), n.end() - 1
        if not any(a <= start and end <= b for a, b in covered):
            context = re.sub(r"\s+", " ", text[max(0, start - 60):end + 30])
            uncovered.append((n.group(0), context))
    return Quotes(metrics, targets, old, uncovered)


def problems(quotes, run, header_rows):
    """What in the README's quotes disagrees with `run` and the main table."""
    out = []
    for ratio, context in quotes.uncovered:
        out.append(f"{ratio} is quoted but tied to no metric, target or 0.1.0 figure (…{context}…): "
                   f"write it with one of the phrases of README_PHRASES, or teach this test the new one")
    for metric, value in quotes.metrics.items():
        if metric not in run.metrics:
            out.append(f"{metric} {value} is quoted, but the latest run ({run.commit}, {run.where}) has no "
                       f"such number (phrase: '{PROSE[metric]}')")
        elif run.metrics[metric] != value:
            out.append(f"{metric}: the README quotes {value}, the latest run ({run.commit}) measured "
                       f"{run.metrics[metric]}")
    header, rows = header_rows
    target_values = {Decimal(n) for r in rows for n in re.findall(r"(" + NUMBER + ")×", r["target"])}
    for value in quotes.targets:
        if value not in target_values:
            out.append(f"target {value}× is quoted, but no row of the main table has it "
                       f"(targets: {sorted(target_values)})")
    old_column = column(header, "0.1.0")
    old_values = {Decimal(n) for r in rows for n in re.findall(r"(" + NUMBER + ")×", r[old_column])}
    for value in quotes.old:
        if value not in old_values:
            out.append(f"0.1.0's {value}× is quoted, but the table's 0.1.0 column has no such ratio "
                       f"({sorted(old_values)})")
    return out


@pytest.fixture(scope="module")
def bench():
    return BENCHMARKS.read_text()


@pytest.fixture(scope="module")
def readme():
    return README.read_text()


def test_every_run_parses(bench):
    """Every run in docs/benchmarks.md is found with every core metric: a
    run written in another format fails here rather than being skipped
    (and the latest run could then be one the parser missed)."""
    runs = all_runs(bench)
    assert len(runs) >= 2, [r.commit for r in runs]
    for run in runs:
        missing = sorted(CORE - set(run.metrics))
        assert not missing, f"{run.where} ({run.commit}): no {missing} in the format this test reads"
    commits = [r.commit for r in runs]
    assert len(commits) == len(set(commits)), f"a commit has two runs: {commits}"


def test_readme_names_the_latest_run(bench, readme):
    run = latest(all_runs(bench))
    text = what_it_costs(readme)
    named = re.findall(r"\bcommit\s+`?(" + SHA + r")`?", text)
    assert named == [run.commit], f"README 'What it costs' names commits {named}; the latest run is {run.commit}"
    dates = re.findall(r"\b\d{4}-\d{2}-\d{2}\b", text)
    assert dates == [run.date], f"README 'What it costs' names dates {dates}; the latest run is of {run.date}"
    others = {r.commit for r in all_runs(bench)} - {run.commit}
    stale = sorted(c for c in others if re.search(r"\b" + c + r"\b", text))
    assert not stale, f"README 'What it costs' quotes older runs {stale}"


def test_every_ratio_the_readme_quotes_is_the_latest_runs(bench, readme):
    run = latest(all_runs(bench))
    quotes = readme_quotes(what_it_costs(readme))
    assert len(quotes.metrics) >= 5, f"README 'What it costs' quotes too few recognised numbers: {quotes.metrics}"
    found = problems(quotes, run, main_table(bench))
    assert not found, "\n".join(found)


def test_a_new_run_in_the_same_format_becomes_the_latest(bench, readme):
    """The test keys on the format: a run appended in the format of the
    latest one, a day later and with other numbers, is the latest, and the
    README (still quoting the old one) disagrees with it on every metric."""
    runs = all_runs(bench)
    old = latest(runs)
    paragraph = next((p for p in paragraphs(bench) if p.startswith(f"**The run on {old.commit}**")), None)
    if paragraph is None:
        pytest.skip("the latest run is the table run; the prose format is covered by test_every_run_parses")
    new_date = (date.fromisoformat(old.date) + timedelta(days=1)).isoformat()
    bumped = re.sub(NUMBER + "×", lambda m: f"{Decimal(m.group(0)[:-1]) + Decimal('0.01')}×", paragraph)
    bumped = re.sub(r"in (" + NUMBER + r") s\b", lambda m: f"in {Decimal(m.group(1)) + Decimal('0.1')} s", bumped)
    bumped = bumped.replace(old.commit, "f00dfee", 1).replace(old.date, new_date, 1)
    runs = all_runs(bench + "\n\n" + bumped + "\n")
    new = latest(runs)
    assert (new.commit, new.date) == ("f00dfee", new_date)
    assert set(new.metrics) == set(old.metrics)
    quotes = readme_quotes(what_it_costs(readme))
    disagree = [p for p in problems(quotes, new, main_table(bench)) if "measured" in p]
    assert len(disagree) == len(quotes.metrics), disagree
