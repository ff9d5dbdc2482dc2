#!/usr/bin/env python3
"""Draw a PNG of what contrib/grafana/webhook_dedup.json shows, from a real
database: not a Grafana screenshot, a matplotlib picture of the same panels.

It reads what Prometheus would scrape: it runs the queries of
contrib/postgres_exporter/webhook_dedup.yaml (the exporter's own SQL, over the
webhook_dedup views) and names their columns as postgres_exporter does
(<query name>_<column>, with the query's LABEL columns as labels and a
`server` label). Then it evaluates each panel's PromQL on those series with a
small evaluator of the PromQL the dashboard uses (selectors with matchers,
sum/max/min/avg/count with by/without, / and *, `or`, vector(n); `$source`
is "All"), and draws the panels where the dashboard's gridPos puts them, with
the same titles, units, thresholds and legends. Collapsed rows are drawn
closed, as Grafana opens the dashboard.

History: the views keep no past, Prometheus does. The per-minute counts of
webhook_dedup.duplicate_metrics_by_minute allow one thing: the query
webhook_dedup_last_hour (the only one reading that view) is run again as a
scrape at the end of every past minute would have run it (its view's rows
restricted to the hour before that minute), so those panels get a line with
one point per minute. Minutes older than the view's own hour are not in it:
the early points are exact only if the traffic is younger than an hour, as
after the demo. Panels over the other queries (open keys, maintenance) show
the value now, drawn as bars.

Usage: against a database with traffic, the libpq environment variables
(PGHOST, PGPORT, PGUSER, PGDATABASE) pointing at it, as a role that can read
the views (a superuser, or one granted pg_monitor or webhook_dedup_reader):

    python3 -m venv /tmp/grafana-venv
    /tmp/grafana-venv/bin/pip install -r contrib/grafana/requirements.txt
    /tmp/grafana-venv/bin/python contrib/grafana/render_preview.py --out docs/img/dashboard.png

docs/img/dashboard.png comes from the demo's traffic: ./scripts/demo.sh
removes its cluster when it ends, so the picture was made by doing what it
does on a cluster that stays (scripts/lib.sh's cluster_start, CREATE
EXTENSION, examples/receiver/roles.sql, then examples/receiver/receiver.py
--fault-injection and examples/replay/replay.py with the same arguments as
demo.sh, the replay run again with other --seed values a minute apart), and
running this script while the counts were under an hour old.
"""

import argparse
import json
import re
from datetime import timedelta, timezone
from pathlib import Path

import psycopg
import yaml

# matplotlib is imported where it draws, so that tests/contrib/test_grafana.py
# can check the PromQL evaluator below without it.

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "contrib" / "grafana" / "webhook_dedup.json"
EXPORTER = ROOT / "contrib" / "postgres_exporter" / "webhook_dedup.yaml"
HISTORY_VIEW = "FROM webhook_dedup.duplicate_metrics_by_minute"
# The same view, as a scrape at %(at)s would have seen it, up to (not including) the minute %(upto)s.
HISTORY_AT = ("FROM (SELECT * FROM webhook_dedup.duplicate_metrics_by_minute"
              " WHERE bucket >= date_trunc('minute', %(at)s::timestamptz - interval '1 hour', 'UTC')"
              " AND bucket < %(upto)s::timestamptz) AS duplicate_metrics_by_minute")

# Grafana's named colours (light theme shades).
COLORS = {"green": "#56A64B", "yellow": "#E0B400", "orange": "#FF780A", "red": "#E02F44", "blue": "#3274D9",
          "text": "#24292E", "muted": "#6E7781"}
PALETTE = ["#7EB26D", "#EAB839", "#6ED0E0", "#EF843C", "#E24D42", "#1F78C1", "#BA43A9", "#705DA0", "#508642",
           "#CCA300", "#447EBC", "#C15C17"]


# ------------------------------------------------------------------ series


def exporter_series(conn, queries, server):
    """The series postgres_exporter would export now, and the history of
    the queries over duplicate_metrics_by_minute: ({metric: [(labels, value)]},
    [(time, {metric: [(labels, value)]})], set of metrics with history)."""
    now = conn.execute("SELECT now()").fetchone()[0].astimezone(timezone.utc)
    current, historic, history_metrics = {}, {}, set()
    for name, spec in queries.items():
        sql = spec["query"]
        current.update(run_query(conn, name, spec, sql, {}, server))
        if sql.count(HISTORY_VIEW) != 1:
            continue
        if "%" in sql:
            raise SystemExit(f"{name}: a % in the query would be read as a parameter; extend render_preview.py")
        sql_at = sql.replace(HISTORY_VIEW, HISTORY_AT)
        first = conn.execute("SELECT min(bucket) FROM webhook_dedup.duplicate_metrics_by_minute").fetchone()[0]
        if first is None:
            continue
        first = first.astimezone(timezone.utc)
        if first <= now - timedelta(minutes=59):
            print("note: the view holds counts from an hour ago; points before now miss what is older")
        minute = first + timedelta(minutes=1)
        while minute <= now:
            historic.setdefault(minute, {}).update(
                run_query(conn, name, spec, sql_at, {"at": minute, "upto": minute}, server))
            minute += timedelta(minutes=1)
        historic.setdefault(now, {}).update(
            run_query(conn, name, spec, sql_at, {"at": now, "upto": "infinity"}, server))
        history_metrics |= {m for m in current if m.startswith(name + "_")}
    return now, current, sorted(historic.items()), history_metrics


def run_query(conn, name, spec, sql, params, server):
    """One scrape of one query, named as postgres_exporter names it:
    <query name>_<column> for GAUGE and COUNTER columns, labelled with the
    LABEL columns and `server`."""
    columns = [next(iter(m.items())) for m in spec["metrics"]]
    cur = conn.execute(sql, params)
    names = [c.name for c in cur.description]
    if names != [c for c, _ in columns]:
        raise SystemExit(f"{name}: the query returns {names}, its metrics name {[c for c, _ in columns]}")
    out = {f"{name}_{c}": [] for c, meta in columns if meta["usage"] in ("GAUGE", "COUNTER")}
    for row in cur.fetchall():
        labels = {"server": server}
        labels.update({c: str(v) for (c, meta), v in zip(columns, row) if meta["usage"] == "LABEL"})
        for (c, meta), v in zip(columns, row):
            if meta["usage"] in ("GAUGE", "COUNTER") and v is not None:
                out[f"{name}_{c}"].append((labels, float(v)))
    return out


# ------------------------------------------------------------------ PromQL (the dashboard's subset)

TOKEN = re.compile(r'\s*(?:(?P<num>\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)|(?P<str>"(?:[^"\\]|\\.)*")|'
                   r'(?P<ident>[a-zA-Z_:][a-zA-Z0-9_:]*)|(?P<op>=~|!~|!=|[-+*/(){},=]))')
AGGREGATIONS = {"sum": sum, "max": max, "min": min, "avg": lambda v: sum(v) / len(v), "count": len}
# one precedence level: left to right is right for / and * (+ and - would need another level)
BINARY = {"/": lambda a, b: a / b if b else float("nan"), "*": lambda a, b: a * b}


class PromQL:
    """Evaluates one expression on {metric: [(labels, value)]}; raises on
    anything outside the subset, so a new kind of panel query fails loudly."""

    def __init__(self, expr, variables):
        for name, value in variables.items():
            expr = expr.replace("${" + name + "}", value).replace("$" + name, value)
        self.expr, self.tokens, pos = expr, [], 0
        while pos < len(expr):
            m = TOKEN.match(expr, pos)
            if not m or m.end() == pos:
                if expr[pos:].strip():
                    raise ValueError(f"cannot read {expr[pos:]!r} in {expr!r}")
                break
            kind = m.lastgroup
            self.tokens.append((kind, m.group(kind)))
            pos = m.end()

    def evaluate(self, data):
        self.data, self.i = data, 0
        result = self.or_expr()
        if self.i != len(self.tokens):
            raise ValueError(f"unexpected {self.tokens[self.i][1]!r} in {self.expr!r}")
        return result

    def peek(self, value=None):
        if self.i < len(self.tokens) and (value is None or self.tokens[self.i][1] == value):
            return self.tokens[self.i]
        return None

    def take(self, value=None):
        token = self.peek(value)
        if token is None:
            raise ValueError(f"expected {value or 'more'} at token {self.i} of {self.expr!r}")
        self.i += 1
        return token[1]

    def or_expr(self):
        left = self.arith()
        while self.peek("or"):
            self.take()
            right = self.arith()
            seen = {frozenset(lab.items()) for lab, _ in left}
            left = left + [(lab, v) for lab, v in right if frozenset(lab.items()) not in seen]
        return left

    def arith(self):
        left = self.unary()
        while self.peek() and self.peek()[1] in BINARY:
            op = BINARY[self.take()]
            right = self.unary()
            if isinstance(left, float) or isinstance(right, float):
                if isinstance(left, float) and isinstance(right, float):
                    left = op(left, right)
                elif isinstance(left, float):
                    left = [(lab, op(left, v)) for lab, v in right]
                else:
                    left = [(lab, op(v, right)) for lab, v in left]
            else:  # one-to-one matching on identical label sets
                rhs = {frozenset(lab.items()): v for lab, v in right}
                left = [(lab, op(v, rhs[frozenset(lab.items())])) for lab, v in left
                        if frozenset(lab.items()) in rhs]
        return left

    def unary(self):
        kind, value = self.peek() or (None, None)
        if value == "(":
            self.take("(")
            inner = self.or_expr()
            self.take(")")
            return inner
        if kind == "num":
            return float(self.take())
        if value in AGGREGATIONS:
            return self.aggregation()
        if value == "vector":
            self.take()
            self.take("(")
            number = float(self.take())
            self.take(")")
            return [({}, number)]
        if kind == "ident":
            return self.selector()
        raise ValueError(f"unsupported {value!r} in {self.expr!r}")

    def grouping(self):
        if self.peek("by") or self.peek("without"):
            mode = self.take()
            self.take("(")
            labels = []
            while not self.peek(")"):
                labels.append(self.take())
                if self.peek(","):
                    self.take(",")
            self.take(")")
            return mode, labels
        return None

    def aggregation(self):
        fn = AGGREGATIONS[self.take()]
        grouping = self.grouping()
        self.take("(")
        inner = self.or_expr()
        self.take(")")
        grouping = grouping or self.grouping() or ("by", [])
        groups = {}
        for labels, value in inner:
            if grouping[0] == "by":
                key = {k: labels[k] for k in grouping[1] if k in labels}
            else:
                key = {k: v for k, v in labels.items() if k not in grouping[1]}
            groups.setdefault(frozenset(key.items()), []).append(value)
        return [(dict(key), fn(values)) for key, values in groups.items()]

    def selector(self):
        metric = self.take()
        if metric not in self.data:
            raise ValueError(f"no metric {metric} in the exporter's queries ({self.expr!r})")
        matchers = []
        if self.peek("{"):
            self.take("{")
            while not self.peek("}"):
                label, op, text = self.take(), self.take(), self.take()
                matchers.append((label, op, json.loads(text)))
                if self.peek(","):
                    self.take(",")
            self.take("}")
        out = []
        for labels, value in self.data[metric]:
            ok = True
            for label, op, text in matchers:
                have = labels.get(label, "")
                hit = re.fullmatch(text, have) is not None if op in ("=~", "!~") else have == text
                ok &= hit if op in ("=", "=~") else not hit
            if ok:
                out.append((labels, value))
        return out


def legend(fmt, labels, expr):
    if fmt:
        return re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda m: labels.get(m.group(1), ""), fmt)
    return "{" + ", ".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}" if labels else expr


# ------------------------------------------------------------------ drawing


def fmt_value(value, defaults):
    for mapping in defaults.get("mappings", []):
        if mapping.get("type") == "value":
            for key, result in mapping["options"].items():
                if float(key) == value:
                    return result["text"]
    unit, decimals = defaults.get("unit", "short"), defaults.get("decimals")
    if unit == "percentunit":
        return f"{value * 100:.{1 if decimals is None else decimals}f}%"
    if unit == "s":
        for size, name in ((86400, "day"), (3600, "hour"), (60, "min")):
            if abs(value) >= size:
                return f"{value / size:.1f} {name}"
        return f"{value:.0f} s"
    if decimals == 0 or float(value).is_integer():
        return f"{value:,.0f}"
    return f"{value:.3g}"


def threshold_color(value, defaults):
    color = None
    for step in defaults.get("thresholds", {}).get("steps", []):
        if step["value"] is None or value >= step["value"]:
            color = step["color"]
    return COLORS.get(color, color or COLORS["text"])


def evaluate_panel(panel, data, variables):
    series = []
    for target in panel["targets"]:
        query = PromQL(target["expr"], variables)
        result = query.evaluate(data)
        if isinstance(result, float):
            result = [({}, result)]
        for labels, value in sorted(result, key=lambda lv: sorted(lv[0].items())):
            series.append((legend(target.get("legendFormat"), labels, target["expr"]), value))
    return series


def panel_metrics(panel):
    return {w for t in panel["targets"] for w in re.findall(r"webhook_dedup_[a-z0-9_]+", t["expr"])}


def axis_formatter(defaults):
    from matplotlib.ticker import FuncFormatter
    return FuncFormatter(lambda v, _: fmt_value(v, {**defaults, "mappings": []}))


def draw_stat(ax, panel, now_series, history):
    defaults = panel["fieldConfig"]["defaults"]
    if not now_series:
        ax.text(0.5, 0.42, defaults.get("noValue", "No data"), ha="center", va="center", fontsize=22,
                color=COLORS["muted"], transform=ax.transAxes)
        return
    values = [v for _, v in now_series]
    text = "   ".join(fmt_value(v, defaults) for v in values)
    if history and len(values) == 1:
        times = [t for t, _ in history]
        points = [s[0][1] if s else float("nan") for _, s in history]
        spark = ax.inset_axes([0, 0, 1, 0.42])
        spark.fill_between(times, points, color=threshold_color(values[0], defaults), alpha=0.18, linewidth=0)
        spark.plot(times, points, color=threshold_color(values[0], defaults), linewidth=1)
        spark.set_axis_off()
        spark.set_ylim(bottom=0)
    ax.text(0.5, 0.62 if history else 0.45, text, ha="center", va="center", fontsize=22 if len(text) < 10 else 16,
            fontweight="bold",
            color=threshold_color(max(values), defaults), transform=ax.transAxes)


def draw_timeseries(ax, panel, history):
    import matplotlib.dates as mdates
    defaults = panel["fieldConfig"]["defaults"]
    names = []
    for _, series in history:
        for name, _ in series:
            if name not in names:
                names.append(name)
    times = [t for t, _ in history]
    for i, name in enumerate(names):
        points = [dict(series).get(name, float("nan")) for _, series in history]
        ax.plot(times, points, color=PALETTE[i % len(PALETTE)], linewidth=1.4, label=name)
    ax.set_ylim(bottom=defaults.get("min", None))
    ax.yaxis.set_major_formatter(axis_formatter(defaults))
    span = (times[-1] - times[0]).total_seconds() / 60 if times else 0
    step = next((s for s in (1, 2, 5, 10, 15, 30) if span / s <= 7), 60)
    ax.xaxis.set_major_locator(mdates.MinuteLocator(byminute=range(0, 60, step), tz=timezone.utc))
    ax.xaxis.set_major_formatter(mdates.DateFormatter("%H:%M", tz=timezone.utc))
    ax.tick_params(labelsize=7, colors=COLORS["muted"])
    ax.grid(True, color="#E4E7EB", linewidth=0.6)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    if names:
        ax.legend(fontsize=6.5, loc="upper left", ncol=2 if len(names) > 4 else 1, frameon=False,
                  handlelength=1.2, columnspacing=0.8, labelspacing=0.25)


def draw_bars(ax, panel, series):
    defaults = panel["fieldConfig"]["defaults"]
    if not series:
        ax.text(0.5, 0.5, "no series now", ha="center", va="center", color=COLORS["muted"], fontsize=9,
                transform=ax.transAxes)
        ax.set_axis_off()
    else:
        names = [n for n, _ in series][::-1]
        values = [v for _, v in series][::-1]
        colors = [threshold_color(v, defaults) if panel["type"] == "bargauge" else PALETTE[i % len(PALETTE)]
                  for i, v in enumerate(values)]
        ax.barh(range(len(names)), values, color=colors, height=0.6)
        ax.set_yticks(range(len(names)), names)
        top = max(values + [1])
        for y, v in enumerate(values):
            ax.text(v + top * 0.02, y, fmt_value(v, defaults), va="center", fontsize=8, color=COLORS["text"])
        ax.set_xlim(0, top * 1.2)
        ax.set_ylim(len(names) - 0.4 - max(len(names), 4), len(names) - 0.4)  # bars from the top
        ax.tick_params(labelsize=7.5, colors=COLORS["text"], length=0)
        ax.xaxis.set_visible(False)
        for side in ("top", "right", "bottom"):
            ax.spines[side].set_visible(False)


def render(dashboard, now, current, history, history_metrics, out, width, height, dpi):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle
    variables = {"source": ".*"}
    panels = dashboard["panels"]
    rows = max(p["gridPos"]["y"] + p["gridPos"]["h"] for p in panels)
    fig = plt.figure(figsize=(width / dpi, height / dpi), dpi=dpi, facecolor="white")
    top, bottom, left, right, gap = 0.935, 0.035, 0.008, 0.992, 0.006
    fig.text(left, 0.975, dashboard["title"], fontsize=14, fontweight="bold", color=COLORS["text"], va="center")
    span = f"{history[0][0]:%H:%M} to {now:%H:%M} UTC, one point a minute" if history else "now"
    fig.text(left + 0.14, 0.975, f"Data source: Prometheus    Source: All    Time: {span}",
             fontsize=9, color=COLORS["muted"], va="center")
    fig.text(right, 0.975, f"{now:%Y-%m-%d %H:%M} UTC", fontsize=9, color=COLORS["muted"], va="center", ha="right")
    fig.text(left, 0.012, "Drawn by contrib/grafana/render_preview.py (matplotlib, not a Grafana screenshot): the "
             "panels' PromQL evaluated on the rows of contrib/postgres_exporter/webhook_dedup.yaml's queries, "
             "from the demo's traffic (docs/metrics.md, Grafana dashboard).", fontsize=7.5, color=COLORS["muted"])
    unit = (top - bottom) / rows
    for panel in panels:
        pos = panel["gridPos"]
        x0 = left + (right - left) * pos["x"] / 24 + gap / 2
        w = (right - left) * pos["w"] / 24 - gap
        y1 = top - unit * pos["y"] - gap / 2
        h = unit * pos["h"] - gap
        if panel["type"] == "row":
            fig.patches.append(Rectangle((x0, y1 - h), w, h, transform=fig.transFigure, color="#F4F5F5"))
            nested = len(panel.get("panels", []))
            fig.text(x0 + 0.004, y1 - h / 2, f"\u25b8 {panel['title']}" + (
                f"   ({nested} panels, collapsed)" if panel.get("collapsed") else ""), fontsize=9.5,
                fontweight="bold", color=COLORS["text"], va="center")
            continue
        frame = fig.add_axes([x0, y1 - h, w, h])
        frame.set_xticks([])
        frame.set_yticks([])
        for spine in frame.spines.values():
            spine.set_color("#D0D7DE")
        frame.text(0.015, 1 - 0.1 * 4 / pos["h"], panel["title"], transform=frame.transAxes, fontsize=9,
                   fontweight="bold", color=COLORS["text"], va="center")
        title_h = 0.17 * 4 / pos["h"]
        has_history = panel_metrics(panel) <= history_metrics
        series_now = evaluate_panel(panel, current, variables)
        series_history = [(t, evaluate_panel(panel, data, variables)) for t, data in history] if has_history else []
        if panel["type"] == "stat":
            inner = frame.inset_axes([0.02, 0.04, 0.96, 0.94 - title_h])
            inner.set_axis_off()
            draw_stat(inner, panel, series_now, series_history)
        elif panel["type"] == "timeseries" and has_history:
            inner = frame.inset_axes([0.075, 0.1, 0.9, 0.88 - title_h])
            draw_timeseries(inner, panel, series_history)
        elif panel["type"] in ("timeseries", "bargauge"):
            inner = frame.inset_axes([0.3, 0.06, 0.62, 0.9 - title_h])
            draw_bars(inner, panel, series_now)
            if panel["type"] == "timeseries":
                frame.text(0.99, 0.02, "the value now: the views keep no history (Prometheus does)", ha="right",
                           va="bottom", fontsize=6.5, color=COLORS["muted"], transform=frame.transAxes)
        else:
            raise SystemExit(f"render_preview.py cannot draw a {panel['type']} panel ({panel['title']})")
    fig.savefig(out, dpi=dpi, facecolor="white")
    plt.close(fig)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(ROOT / "docs" / "img" / "dashboard.png"))
    parser.add_argument("--width", type=int, default=1400, help="pixels")
    parser.add_argument("--height", type=int, default=900, help="pixels")
    parser.add_argument("--dpi", type=int, default=100)
    parser.add_argument("--dsn", default="", help="libpq connection string; default: PGHOST/PGPORT/... env vars")
    args = parser.parse_args(argv)
    dashboard = json.loads(DASHBOARD.read_text())
    queries = yaml.safe_load(EXPORTER.read_text())
    with psycopg.connect(args.dsn, autocommit=True) as conn:
        host = conn.info.host
        # postgres_exporter labels every metric with server="<host>:<port>" of its connection
        server = f"{'localhost' if host.startswith('/') else host}:{conn.info.port}"
        now, current, history, history_metrics = exporter_series(conn, queries, server)
    render(dashboard, now, current, history, history_metrics, args.out, args.width, args.height, args.dpi)
    print(f"wrote {args.out}: {len(history)} minutes of history, {sum(len(v) for v in current.values())} series now")


if __name__ == "__main__":
    main()
