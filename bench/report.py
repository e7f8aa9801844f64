"""Render the results of a suite run (section results from bench.suite) as RESULTS.md."""

from __future__ import annotations

import os
import time


def _cell(value) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def tables(rows: list[dict]) -> list[str]:
    """Markdown tables of section rows: grouped by their optional "table" key, columns = the first row's keys
    (minus "table" and "data"), in order."""
    out: list[str] = []
    groups: dict[str, list[dict]] = {}
    for r in rows:
        groups.setdefault(r.get("table", ""), []).append(r)
    for title, group in groups.items():
        cols = [k for k in group[0] if k not in ("table", "data")]
        if title:
            out += [f"**{title}**", ""]
        out.append("| " + " | ".join(_cell(c.strip()) for c in cols) + " |")
        out.append("|" + "---|" * len(cols))
        for r in group:
            out.append("| " + " | ".join(_cell(r.get(c, "")) for c in cols) + " |")
        out.append("")
    return out


def _anchor(title: str) -> str:
    keep = "".join(ch for ch in title.lower() if ch.isalnum() or ch in " -_")
    return keep.replace(" ", "-")


def write(path: str, command: str, started: float, seconds: float, runs: int, machine: list, versions: list,
          results: list[dict], load_end: str) -> None:
    lines = [
        "# seglog benchmark results",
        "",
        f"Produced by `{command}` on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(started))} in "
        f"{seconds / 60:.1f} min. Figures are medians of {runs} runs unless a section says otherwise; every ratio "
        "compares figures measured in this same run. What each figure means: [README.md](README.md).",
        "",
        "## Machine",
        "",
        "| | |",
        "|---|---|",
        *[f"| {k} | {_cell(v)} |" for k, v in machine],
        f"| load average at end | {load_end} |",
        "",
        "## Versions",
        "",
        "| | |",
        "|---|---|",
        *[f"| {k} | {_cell(v)} |" for k, v in versions],
        "",
        "## Sections",
        "",
        *[f"- [{r['title']}](#{_anchor(r['title'])}) ({r['seconds']:.0f} s)"
          + (" — **failed**" if r.get("error") else "") for r in results],
        "",
    ]
    for r in results:
        lines += [f"## {r['title']}", "", f"_`bench/{r['module']}.py`, {r['seconds']:.0f} s_", ""]
        for note in r.get("notes", []):
            lines += [note, ""]
        if r.get("error"):
            lines += ["**This section failed:**", "", "```", r["error"].rstrip(), "```", ""]
        if r.get("rows"):
            lines += tables(r["rows"])
        for name, caption in r.get("charts", []):
            lines += [f"![{caption}](charts/{name})", "", f"*{caption}*", ""]
    with open(path, "w") as f:
        f.write("\n".join(lines).rstrip() + "\n")


def load_average() -> str:
    return " / ".join(f"{x:.2f}" for x in os.getloadavg()) + " (1/5/15 min)"
