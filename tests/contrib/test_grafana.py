"""contrib/grafana/webhook_dedup.json against the metrics that
contrib/postgres_exporter/webhook_dedup.yaml defines. No database, no Grafana:
the two files are parsed and compared.

How postgres_exporter names the metrics of a custom query file
(prometheus-community/postgres_exporter, cmd/postgres_exporter):
- queries.go, parseUserQueries: each top-level key of the file is a metric
  namespace; its `metrics` list maps column names to a usage;
- postgres_exporter.go, makeDescMap: a COUNTER or GAUGE column becomes
  `prometheus.NewDesc(fmt.Sprintf("%s_%s", namespace, columnName), ...,
  variableLabels, serverLabels)`, where variableLabels are the query's LABEL
  columns and serverLabels the exporter's constant `server` label (server.go,
  `serverLabelName`); LABEL and DISCARD columns become no metric. Before
  that, makeDescMap replaces the first "pg" of the namespace with
  --metric-prefix (`strings.Replace(namespace, "pg", *metricPrefix, 1)`), a
  no-op by default; a query name without "pg" keeps its name whatever the
  flag says, which is checked below.
So the query `webhook_dedup_last_hour` with the GAUGE column `deliveries`
is the metric `webhook_dedup_last_hour_deliveries{source, server}`, plus the
`instance` and `job` labels Prometheus adds to every scraped series.

Every PromQL expression is tokenised: string literals, Grafana variables,
range and subquery brackets, durations and numbers are dropped, label
matchers and `by`/`without`/`on`/`ignoring`/`group_*` label lists are taken
out (their labels checked), and every identifier left must be a PromQL
function or aggregation followed by its call, a PromQL keyword, or a metric
the exporter file defines. A misspelt metric (`webhok_dedup_x`), an unknown
function or a stray word fails.
"""

import json
import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "contrib" / "grafana" / "webhook_dedup.json"
EXPORTER = ROOT / "contrib" / "postgres_exporter" / "webhook_dedup.yaml"

# The dashboard schema version current Grafana writes: schemaversion.LATEST_VERSION
# in grafana/grafana apps/dashboard/pkg/migration/schemaversion/migrations.go.
SCHEMA_VERSION = 42

# Labels every series has without being a LABEL column: postgres_exporter's
# constant `server` label, and the target labels Prometheus adds on scrape.
BUILTIN_LABELS = {"server", "instance", "job"}

# The panels the dashboard must have, and metrics each must show.
REQUIRED_PANELS = {
    "Duplicate ratio per source": {"webhook_dedup_last_hour_duplicate_ratio"},
    "Outcomes over time": {f"webhook_dedup_last_hour_{c}" for c in
                           ("deliveries", "first_claims", "reclaims", "duplicates", "conflicts", "completions")},
    "Stuck claims": {"webhook_dedup_open_keys_expired_leases"},
    "Dead letters": {"webhook_dedup_open_keys_keys"},
    "Oldest pending age": {"webhook_dedup_open_keys_oldest_pending_age_seconds"},
    # and every rejected_<reason> column of the exporter file (checked in its test)
    "Signature rejections by reason": set(),
}

# PromQL (Prometheus docs, querying/functions and querying/operators).
AGGREGATIONS = {"sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values", "bottomk",
                "topk", "quantile", "limitk", "limit_ratio"}
FUNCTIONS = {
    "abs", "absent", "absent_over_time", "ceil", "changes", "clamp", "clamp_max", "clamp_min", "day_of_month",
    "day_of_week", "day_of_year", "days_in_month", "delta", "deriv", "exp", "floor", "histogram_avg",
    "histogram_count", "histogram_fraction", "histogram_quantile", "histogram_stddev", "histogram_stdvar",
    "histogram_sum", "double_exponential_smoothing", "holt_winters", "hour", "idelta", "increase", "irate",
    "label_join", "label_replace", "ln", "log2", "log10", "minute", "month", "predict_linear", "rate", "resets",
    "round", "scalar", "sgn", "sort", "sort_desc", "sort_by_label", "sort_by_label_desc", "sqrt", "time",
    "timestamp", "vector", "year", "avg_over_time", "min_over_time", "max_over_time", "sum_over_time",
    "count_over_time", "quantile_over_time", "stddev_over_time", "stdvar_over_time", "last_over_time",
    "present_over_time", "mad_over_time", "acos", "acosh", "asin", "asinh", "atan", "atanh", "cos", "cosh", "sin",
    "sinh", "tan", "tanh", "deg", "rad", "pi", "start", "end",
}
KEYWORDS = {"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring", "group_left",
            "group_right", "atan2", "inf", "nan"}
LABEL_LIST_KEYWORDS = ("by", "without", "on", "ignoring", "group_left", "group_right")

IDENT = r"[a-zA-Z_:][a-zA-Z0-9_:]*"


def load_exporter():
    """{metric name: set of its LABEL columns}, and the raw query file."""
    queries = yaml.safe_load(EXPORTER.read_text())
    metrics = {}
    for name, spec in queries.items():
        columns = [next(iter(m.items())) for m in spec["metrics"]]
        labels = {column for column, meta in columns if meta["usage"] == "LABEL"}
        for column, meta in columns:
            if meta["usage"] in ("GAUGE", "COUNTER"):
                metrics[f"{name}_{column}"] = labels
    return metrics, queries


def load_dashboard():
    return json.loads(DASHBOARD.read_text())


def all_panels(panels):
    """Every panel, rows' nested panels included (a collapsed row keeps its panels in its own list)."""
    for panel in panels:
        yield panel
        yield from all_panels(panel.get("panels", []))


def data_panels(dashboard):
    return [p for p in all_panels(dashboard["panels"]) if p["type"] != "row"]


def targets(dashboard):
    for panel in data_panels(dashboard):
        for target in panel.get("targets", []):
            yield panel, target


class Expr:
    """What a PromQL expression refers to: metric names, and the labels it
    uses in matchers (per metric) and in label lists."""

    def __init__(self, expr, known_metrics):
        self.metrics = []          # every metric name, in order
        self.matched = []          # (metric or None, label) of each {label op "value"}
        self.listed = []           # (keyword, label) of each by (...)/without (...)/on (...)/...
        self.errors = []
        text = expr
        # string literals: "..." and '...' with backslash escapes, `...` raw
        text = re.sub(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`', ' "" ', text)
        # Grafana variables outside strings: $var, ${var}, ${var:fmt}, [[var]]
        text = re.sub(r"\$\{[^}]*\}|\$\w+|\[\[[^\]]*\]\]", " ", text)
        # label matchers: {label op "", ...}, attached to the metric right before them if any
        def matcher(m):
            owner = m.group(1)
            for part in filter(None, (p.strip() for p in m.group(2).split(","))):
                lm = re.fullmatch(rf'({IDENT})\s*(=~|!~|!=|=)\s*""', part)
                if not lm:
                    self.errors.append(f"cannot read label matcher {part!r} in {expr!r}")
                    continue
                self.matched.append((owner, lm.group(1)))
            return f" {owner or ''} "
        text = re.sub(rf"({IDENT})?\s*\{{([^{{}}]*)\}}", matcher, text)
        # label lists after by/without/on/ignoring/group_left/group_right
        def label_list(m):
            for label in filter(None, (p.strip() for p in m.group(2).split(","))):
                if not re.fullmatch(IDENT, label):
                    self.errors.append(f"cannot read label {label!r} in {m.group(0)!r} of {expr!r}")
                self.listed.append((m.group(1), label))
            return " "
        text = re.sub(rf"\b({'|'.join(LABEL_LIST_KEYWORDS)})\s*\(([^()]*)\)", label_list, text)
        # range and subquery selectors [5m], [1h:1m], @ modifiers' numbers, durations, numbers
        text = re.sub(r"\[[^\]]*\]", " ", text)
        text = re.sub(r"\b\d+(?:\.\d+)?(?:ms|s|m|h|d|w|y)(?:\d+(?:ms|s|m|h|d|w|y))*\b", " ", text)
        text = re.sub(r"(?<![\w.])(?:0x[0-9a-fA-F]+|\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)", " ", text)
        text = text.replace('""', " ")
        for m in re.finditer(IDENT, text):
            word = m.group(0)
            called = re.match(r"\s*\(", text[m.end():]) is not None
            grouped = re.match(r"\s*(by|without)\b", text[m.end():]) is not None
            if word in AGGREGATIONS:
                if not (called or grouped):
                    self.errors.append(f"aggregation {word} without its operand in {expr!r}")
            elif word in FUNCTIONS:
                if not called:
                    self.errors.append(f"function {word} not called in {expr!r}")
            elif word.lower() in KEYWORDS:
                pass
            elif word in known_metrics and not called:
                self.metrics.append(word)
            else:
                self.errors.append(f"{word!r} is neither a PromQL function or keyword nor a metric "
                                   f"{EXPORTER.name} defines, in {expr!r}")
        # whatever is not an identifier must be PromQL punctuation or operators
        leftover = re.sub(IDENT, " ", text)
        stray = re.sub(r"[\s()+\-*/%^<>=!,@]", "", leftover)
        if stray:
            self.errors.append(f"unexpected {stray!r} in {expr!r}")
        self.has_aggregation = any(re.search(rf"\b{a}\b\s*(\(|by\b|without\b)", text) for a in AGGREGATIONS)


def legend_labels(legend):
    return re.findall(r"\{\{\s*([^}\s]+)\s*\}\}", legend or "")


# ---------------------------------------------------------------- the checks


def test_the_dashboard_is_importable_dashboard_json():
    d = load_dashboard()
    assert isinstance(d.get("uid"), str) and re.fullmatch(r"[A-Za-z0-9_-]{1,40}", d["uid"]), d.get("uid")
    assert isinstance(d.get("title"), str) and d["title"].strip()
    assert d.get("schemaVersion") == SCHEMA_VERSION
    assert d.get("id") is None, "an importable dashboard has no database id"
    assert isinstance(d.get("panels"), list) and d["panels"]
    ids = [p.get("id") for p in all_panels(d["panels"])]
    assert all(isinstance(i, int) for i in ids), ids
    assert len(ids) == len(set(ids)), f"panel ids repeat: {sorted(ids)}"
    for panel in all_panels(d["panels"]):
        assert panel.get("type") and panel.get("title"), panel.get("id")
        pos = panel.get("gridPos", {})
        assert set(pos) == {"h", "w", "x", "y"} and all(isinstance(v, int) for v in pos.values()), panel["title"]
        assert pos["w"] > 0 and pos["h"] > 0 and pos["x"] >= 0 and pos["y"] >= 0, panel["title"]
        assert pos["x"] + pos["w"] <= 24, f"{panel['title']} is wider than Grafana's 24 columns"
        if panel["type"] == "row":
            assert pos["h"] == 1 and pos["w"] == 24, panel["title"]
            if not panel.get("collapsed"):
                assert not panel.get("panels"), f"an open row {panel['title']} keeps no panels of its own"
        refs = [t.get("refId") for t in panel.get("targets", [])]
        assert len(refs) == len(set(refs)) and all(refs), f"{panel['title']}: refIds {refs}"
    # panels that are shown together must not overlap: the top level, and each collapsed row's own panels
    for group in [d["panels"]] + [p.get("panels", []) for p in d["panels"] if p["type"] == "row"]:
        cells = {}
        for panel in group:
            pos = panel["gridPos"]
            for x in range(pos["x"], pos["x"] + pos["w"]):
                for y in range(pos["y"], pos["y"] + pos["h"]):
                    assert (x, y) not in cells, f"{panel['title']} overlaps {cells[(x, y)]}"
                    cells[(x, y)] = panel["title"]


def test_the_datasource_is_chosen_on_import():
    d = load_dashboard()
    inputs = {i["name"]: i for i in d["__inputs"]}
    assert inputs["DS_PROMETHEUS"]["type"] == "datasource"
    assert inputs["DS_PROMETHEUS"]["pluginId"] == "prometheus"
    variables = {v["name"]: v for v in d["templating"]["list"]}
    ds = variables["datasource"]
    assert ds["type"] == "datasource" and ds["query"] == "prometheus"
    # the import dialog replaces ${DS_PROMETHEUS}: it must be used, here as the variable's default
    assert ds["current"]["value"] == "${DS_PROMETHEUS}"
    for panel, target in targets(d):
        for ref in (panel["datasource"], target["datasource"]):
            assert ref == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]
    assert variables["source"]["datasource"] == {"type": "prometheus", "uid": "${datasource}"}


def test_the_source_variable_lists_sources_of_an_exported_metric():
    metrics, _ = load_exporter()
    d = load_dashboard()
    source = {v["name"]: v for v in d["templating"]["list"]}["source"]
    assert source["type"] == "query" and source["multi"] is True and source["includeAll"] is True
    query = source["query"]["query"] if isinstance(source["query"], dict) else source["query"]
    assert source["definition"] == query
    m = re.fullmatch(rf"label_values\(\s*({IDENT})\s*,\s*({IDENT})\s*\)", query)
    assert m, query
    metric, label = m.groups()
    assert metric in metrics, f"{metric} is not a metric of {EXPORTER.name}"
    assert label == "source" and label in metrics[metric]


def test_every_panel_has_a_query():
    for panel in data_panels(load_dashboard()):
        assert panel.get("targets"), f"panel {panel['title']!r} has no target"
        for target in panel["targets"]:
            assert target.get("expr", "").strip(), f"panel {panel['title']!r}, target {target.get('refId')}"


def test_every_expression_names_only_metrics_the_exporter_defines():
    metrics, queries = load_exporter()
    # makeDescMap renames the first "pg" of a namespace after --metric-prefix
    assert not [q for q in queries if "pg" in q], "a query name with 'pg' changes with --metric-prefix"
    problems = []
    for panel, target in targets(load_dashboard()):
        parsed = Expr(target["expr"], metrics)
        problems += [f"{panel['title']}: {e}" for e in parsed.errors]
        if not parsed.metrics:
            problems.append(f"{panel['title']}: no metric in {target['expr']!r}")
    assert not problems, "\n".join(problems)


def test_every_label_is_a_label_of_its_metric():
    metrics, _ = load_exporter()
    d = load_dashboard()
    variables = {v["name"] for v in d["templating"]["list"]}
    problems = []
    for panel, target in targets(d):
        expr = target["expr"]
        parsed = Expr(expr, metrics)
        # every label all the expression's metrics share (what survives a join), plus the built-in ones
        common = set.intersection(*(metrics[m] for m in parsed.metrics)) if parsed.metrics else set()
        for owner, label in parsed.matched:
            allowed = (metrics[owner] if owner in metrics else common) | BUILTIN_LABELS
            if label not in allowed:
                problems.append(f"{panel['title']}: {{{label}=...}} on {owner}, which has labels {sorted(allowed)}")
        for keyword, label in parsed.listed:
            if label not in common | BUILTIN_LABELS:
                problems.append(f"{panel['title']}: {keyword} ({label}) in {expr!r}; its metrics share "
                                f"{sorted(common)}")
        grouped = {label for keyword, label in parsed.listed if keyword == "by"}
        for label in legend_labels(target.get("legendFormat")):
            if label not in common | BUILTIN_LABELS:
                problems.append(f"{panel['title']}: legend {{{{{label}}}}}, not a label of {parsed.metrics}")
            elif parsed.has_aggregation and label not in grouped:
                problems.append(f"{panel['title']}: legend {{{{{label}}}}} but the aggregation in {expr!r} "
                                f"keeps no {label} (no by ({label}))")
        for name in re.findall(r"\$\{?(\w+)", expr):
            if name not in variables and not name.startswith("__"):
                problems.append(f"{panel['title']}: ${name} is no variable of the dashboard")
    assert not problems, "\n".join(problems)


def test_the_panels_the_issue_asks_for_are_there():
    metrics, _ = load_exporter()
    by_title = {p["title"]: p for p in data_panels(load_dashboard())}
    reasons = {m for m in metrics if m.startswith("webhook_dedup_last_hour_rejected_")}
    assert len(reasons) == 7, reasons
    for title, wanted in REQUIRED_PANELS.items():
        assert title in by_title, f"no panel titled {title!r}"
        used = {m for t in by_title[title]["targets"] for m in Expr(t["expr"], metrics).metrics}
        if title == "Signature rejections by reason":
            wanted = reasons
        assert wanted <= used, f"{title!r} does not show {sorted(wanted - used)}"


def test_every_exported_metric_is_on_the_dashboard():
    """A column added to the exporter file shows up on the dashboard, or this fails."""
    metrics, _ = load_exporter()
    used = {m for _, t in targets(load_dashboard()) for m in Expr(t["expr"], metrics).metrics}
    assert set(metrics) - used == set()


@pytest.mark.parametrize("expr, problem", [
    ('sum(webhok_dedup_last_hour_deliveries{source=~"$source"})', "'webhok_dedup_last_hour_deliveries'"),
    ("webhook_dedup_last_hour_deliveriez", "'webhook_dedup_last_hour_deliveriez'"),
    ("rat(webhook_dedup_last_hour_deliveries[5m])", "'rat'"),
    ("sum(webhook_dedup_last_hour_deliveries) / up", "'up'"),
    ("webhook_dedup_last_hour_deliveries(1)", "'webhook_dedup_last_hour_deliveries'"),
    ("rate", "function rate not called"),
    ('webhook_dedup_last_hour_deliveries{source~"x"}', "cannot read label matcher"),
])
def test_the_expression_reader_refuses(expr, problem):
    """The reader behind the checks above fails on what it should."""
    metrics, _ = load_exporter()
    assert any(problem in e for e in Expr(expr, metrics).errors), Expr(expr, metrics).errors


def test_the_expression_reader_reads():
    metrics, _ = load_exporter()
    e = Expr('sum by (source, state) (rate(webhook_dedup_open_keys_keys{source=~"$source", state!="a,b"}'
             '[$__rate_interval] offset 5m)) / on (source) group_left() '
             'max(webhook_dedup_last_hour_deliveries{source="x"} @ 1700000000) > 0.5e1 or vector(1)', metrics)
    assert e.errors == []
    assert e.metrics == ["webhook_dedup_open_keys_keys", "webhook_dedup_last_hour_deliveries"]
    assert e.matched == [("webhook_dedup_open_keys_keys", "source"), ("webhook_dedup_open_keys_keys", "state"),
                         ("webhook_dedup_last_hour_deliveries", "source")]
    assert e.listed == [("by", "source"), ("by", "state"), ("on", "source")]


def test_the_preview_script_can_evaluate_every_panel():
    """contrib/grafana/render_preview.py draws docs/img/dashboard.png by
    evaluating each panel's PromQL with a small evaluator of its own: every
    expression of the dashboard must be within what it reads."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("render_preview", DASHBOARD.parent / "render_preview.py")
    preview = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(preview)
    metrics, _ = load_exporter()
    data = {m: [({"server": "s", **{label: "x" for label in labels}}, 1.0)] for m, labels in metrics.items()}
    for panel in data_panels(load_dashboard()):
        preview.evaluate_panel(panel, data, {"source": ".*"})
