"""The rehearsal's report again from its JSON (e.g. after an interrupted run), growth refitted.

    python benchmarks/rehearse.py rehearsal-work/rehearsal.json

Runs no stage: `challenge-welding rehearse --sizes ...` measures; this re-reads its
figures (the sizes that finished) and prints the same tables.
"""

import json
import sys

from challenge_welding.flows.rehearse import capacity, growth, text_report


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    result = json.loads(open(argv[0]).read())
    if len(result["sizes"]) >= 2:
        result["growth"] = growth(result["sizes"])
        result["capacity"] = capacity(result["sizes"], result["growth"])
    print(text_report(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
