"""The rehearsal's report again from its JSON (e.g. after an interrupted run), growth refitted.

    python benchmarks/rehearse.py rehearsal-work/rehearsal.json [more.json ...]

Runs no stage: `challenge-welding rehearse --sizes ...` measures; this re-reads its
figures (the sizes that finished) and prints the same tables. Several JSONs (e.g. the small
sizes in one run, the full size in another) are merged into one table, sizes in order, and
the growth is fitted over all of them; each run's machine, date and load are printed.
"""

import json
import sys

from challenge_welding.flows.rehearse import capacity, growth, text_report


def merged(results: list[dict]) -> dict:
    """One result from several runs: the sizes of all (the later run wins a repeated size)."""
    by_n = {s["n"]: s for r in results for s in r["sizes"]}
    out = {**results[0], "sizes": [by_n[n] for n in sorted(by_n)]}
    out.pop("growth", None)
    out.pop("capacity", None)
    return out


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    results = [json.loads(open(path).read()) for path in argv]
    result = merged(results)
    if len(result["sizes"]) >= 2:
        result["growth"] = growth(result["sizes"])
        result["capacity"] = capacity(result["sizes"], result["growth"])
    for path, r in zip(argv, results):
        m = r["machine"]
        print(f"{path}: sizes {[s['n'] for s in r['sizes']]}; {m['cpu']}, {m['cores']} cores; "
              f"{m['date_utc']}; load {m['load_1_5_15']} at start, {m.get('load_at_end')} at end")
    print(text_report(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
