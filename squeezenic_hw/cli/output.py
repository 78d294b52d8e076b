"""Result output shared by every CLI command: ``--format table|csv|json``.

JSON is for scripts: each command documents its keys in ``docs/cli.md`` and
keeps them stable. Tables and CSV carry the same columns in the same order.
"""

import csv
import io
import json
import math

FORMATS = ("table", "csv", "json")


def add_format_option(parser, *, extra=()):
    parser.add_argument(
        "--format", choices=FORMATS + tuple(extra), default="table",
        help="output format (default: table; json has stable keys, see docs/cli.md)")


def _cell(value):
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return str(value)
        return f"{value:.6g}"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if value is None:
        return "-"
    return str(value)


def render_table(rows, columns, *, title=None):
    """Render ``rows`` (list of dicts) as an aligned text table of ``columns``."""
    header = [c for c in columns]
    body = [[_cell(row.get(c)) for c in columns] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in body)) if body else len(h)
              for i, h in enumerate(header)]
    # right-align columns of numbers (missing values, shown as "-", don't count)
    numeric = [any(_is_number(row.get(c)) for row in rows)
               and all(_is_number(row.get(c)) or row.get(c) is None for row in rows)
               for c in columns]

    def fmt(cells):
        return "  ".join(c.rjust(w) if num else c.ljust(w)
                         for c, w, num in zip(cells, widths, numeric, strict=True)).rstrip()

    lines = []
    if title:
        lines.append(title)
    lines.append(fmt(header))
    lines.append("  ".join("-" * w for w in widths))
    lines.extend(fmt(r) for r in body)
    return "\n".join(lines) + "\n"


def _is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def render(rows, columns, fmt, *, title=None, json_obj=None):
    """Render rows in ``fmt``. ``json_obj`` replaces the default JSON list of rows."""
    if fmt == "json":
        obj = json_obj if json_obj is not None else [
            {c: row.get(c) for c in columns} for row in rows]
        return json.dumps(obj, indent=2, default=_json_default) + "\n"
    if fmt == "csv":
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(columns)
        for row in rows:
            writer.writerow(["" if row.get(c) is None else row.get(c) for c in columns])
        return buf.getvalue()
    if fmt == "markdown":
        return markdown_table(rows, columns)
    return render_table(rows, columns, title=title)


def _json_default(value):
    try:
        import numpy as np
        if isinstance(value, np.generic):
            return value.item()
    except ImportError:  # pragma: no cover
        pass
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def _md_cell(value):
    if isinstance(value, bool):
        return "yes" if value else "no"
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value).replace("|", "\\|")


def markdown_table(rows, columns):
    """A GitHub-flavoured Markdown table; numeric columns right-aligned."""
    def numeric(c):
        vals = [r.get(c) for r in rows if r.get(c) is not None]
        return bool(vals) and all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                  for v in vals)

    lines = ["| " + " | ".join(columns) + " |",
             "|" + "|".join("---:" if numeric(c) else "---" for c in columns) + "|"]
    lines += ["| " + " | ".join(_md_cell(r.get(c)) for c in columns) + " |" for r in rows]
    return "\n".join(lines) + "\n"
