"""Render the results of a suite run (section results from bench.suite) as RESULTS.md."""

from __future__ import annotations

import os
import re
import time


def _cell(value) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


HIDDEN = ("table", "data", "summary", "guard")   # row keys that are not table columns


def tables(rows: list[dict]) -> list[str]:
    """Markdown tables of section rows: grouped by their optional "table" key, columns = the first row's keys
    (minus the HIDDEN ones), in order."""
    out: list[str] = []
    groups: dict[str, list[dict]] = {}
    for r in rows:
        groups.setdefault(r.get("table", ""), []).append(r)
    for title, group in groups.items():
        cols = [k for k in group[0] if k not in HIDDEN]
        if title:
            out += [f"**{title}**", ""]
        out.append("| " + " | ".join(_cell(c.strip()) for c in cols) + " |")
        out.append("|" + "---|" * len(cols))
        for r in group:
            out.append("| " + " | ".join(_cell(r.get(c, "")) for c in cols) + " |")
        out.append("")
    return out


def target_rows(results: list[dict]) -> list[dict]:
    """The rows sections marked as a target of an issue (a "summary" dict: figure, measured, target, met)."""
    out = []
    for r in results:
        for row in r.get("rows", []):
            s = row.get("summary")
            if s:
                out.append({"section": r["title"], **s})
    return out


def targets_table(results: list[dict]) -> list[str]:
    rows = target_rows(results)
    if not rows:
        return []
    missed = [t for t in rows if str(t["met"]).lower() not in ("yes", "true")]
    lines = ["| section | figure | target | measured (median) | met |", "|---|---|---|---|---|"]
    lines += [f"| {_cell(t['section'])} | {_cell(t['figure'])} | {_cell(t['target'])} | {_cell(t['measured'])} | "
              f"{_cell(t['met'])} |" for t in rows]
    return ["## Targets", "", f"Every issue target this run measured: {len(rows) - len(missed)} of {len(rows)} met. "
            "Each row is repeated, with its same-run baseline, in its section below.", "", *lines, ""]


def guard_rows(results: list[dict]) -> list[dict]:
    """The figures sections guard against regressions (a "guard" dict on a row, or a list of them: figure, value,
    floor, a same-run ratio and the lowest value it may take), each with whether it held (value >= floor).
    `python -m bench` exits 1 when one did not."""
    out = []
    for r in results:
        for row in r.get("rows", []):
            g = row.get("guard")
            for one in (g if isinstance(g, list) else [g] if g else []):
                out.append({"section": r["title"], **one, "held": one["value"] >= one["floor"]})
    return out


def guards_table(results: list[dict]) -> list[str]:
    rows = guard_rows(results)
    if not rows:
        return []
    lines = ["| section | figure (same-run ratio) | measured | floor | held |", "|---|---|---|---|---|"]
    lines += [f"| {_cell(g['section'])} | {_cell(g['figure'])} | {g['value']:.2f}x | {g['floor']:.2f}x | "
              f"{'yes' if g['held'] else '**no: regression**'} |" for g in rows]
    return ["## Regression guards", "", "Same-run ratios that must not fall below a floor: `python -m bench` exits "
            "with status 1 when one does.", "", *lines, ""]


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
        *[_section_link(r) for r in results],
        "",
        *targets_table(results),
        *guards_table(results),
    ]
    for r in results:
        lines += section_lines(r)
    with open(path, "w") as f:
        f.write("\n".join(lines).rstrip() + "\n")


def _section_link(r: dict) -> str:
    return (f"- [{r['title']}](#{_anchor(r['title'])}) ({r['seconds']:.0f} s)"
            + (" — **failed**" if r.get("error") else "")
            + (f" — skipped: {r['skipped']}" if r.get("skipped") else ""))


def section_lines(r: dict, remeasured: str = "") -> list[str]:
    """One section of RESULTS.md: title, source and time, notes, tables, charts (`remeasured`: a line saying the
    section comes from another run than the rest of the file)."""
    lines = [f"## {r['title']}", "", f"_`bench/{r['module']}.py`, {r['seconds']:.0f} s_", ""]
    if remeasured:
        lines += [remeasured, ""]
    for note in r.get("notes", []):
        lines += [note, ""]
    if r.get("skipped"):
        lines += [f"**Skipped** (an optional dependency is missing): {r['skipped']}", ""]
    if r.get("error"):
        lines += ["**This section failed:**", "", "```", r["error"].rstrip(), "```", ""]
    if r.get("rows"):
        lines += tables(r["rows"])
    for name, caption in r.get("charts", []):
        lines += [f"![{caption}](charts/{name})", "", f"*{caption}*", ""]
    return lines


def _replace_rows(text: str, heading: str, title: str, new: list[str]) -> str:
    """In the table under `## heading`, put `new` in place of the rows of section `title` (where its first row
    was, else at the table's end)."""
    block = re.search(r"^## " + re.escape(heading) + r"\n.*?(?=^## |\Z)", text, re.S | re.M)
    if block is None:
        return text
    body = block.group(0)
    mine = re.compile(r"^\| " + re.escape(_cell(title)) + r" \|.*\n", re.M)
    first = mine.search(body)
    at = first.start() if first else len(body.rstrip("\n")) + 1
    kept = mine.sub("", body)
    at = min(at, len(kept))
    body = kept[:at] + "".join(line + "\n" for line in new) + kept[at:]
    return text[:block.start()] + body + text[block.end():]


def update(path: str, command: str, started: float, results: list[dict]) -> None:
    """Replace in an existing RESULTS.md the sections of `results` (their text, their line in the Sections list,
    their rows of the Targets and Regression guards tables, and the count of targets met); everything else, the
    other sections' figures included, is kept as the run named at its top wrote it."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(started))
    for r in results:
        pattern = re.compile(r"^## " + re.escape(r["title"]) + r"\n.*?(?=^## |\Z)", re.S | re.M)
        if not pattern.search(text):
            raise SystemExit(f"{path} has no section {r['title']!r}: run python -m bench to write it")
        lines = section_lines(r, f"This section alone was measured again by `{command}` on {when} (the rest of "
                                 "this file comes from the run named at the top).")
        text = pattern.sub(lambda _: "\n".join(lines).rstrip("\n") + "\n\n", text, count=1)
        text = re.sub(r"^- \[" + re.escape(r["title"]) + r"\]\(.*$", lambda _: _section_link(r), text, count=1,
                      flags=re.M)
        text = _replace_rows(text, "Targets", r["title"], targets_table([r])[6:-1])
        text = _replace_rows(text, "Regression guards", r["title"], guards_table([r])[6:-1])
    write_recounted(path, text)


def write_recounted(path: str, text: str) -> None:
    """Write a RESULTS.md `text` to `path` (a new file renamed over the old one), its count of targets met
    recomputed from its Targets table."""
    table = re.search(r"^## Targets\n.*?(?=^## |\Z)", text, re.S | re.M)
    if table:
        met = [line.rstrip(" |").rsplit("| ", 1)[-1].strip().lower() in ("yes", "true")
               for line in table.group(0).splitlines()[6:] if line.startswith("| ")]
        text = re.sub(r"^Every issue target this run measured: \d+ of \d+ met\.",
                      f"Every issue target this run measured: {sum(met)} of {len(met)} met.", text, count=1,
                      flags=re.M)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def load_average() -> str:
    return " / ".join(f"{x:.2f}" for x in os.getloadavg()) + " (1/5/15 min)"
