"""``python -m tests.conformance``: run kafka-python's own integration suite against a seglog broker and print the
table CONFORMANCE.md records (see kafka_python.py). Exit status 1 when a test fails that KNOWN_FAILURES does not
name."""

import argparse
import sys

from .kafka_python import markdown, run


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.conformance", description=__doc__)
    ap.add_argument("selection", nargs="*", help="files or node ids under the suite's test/integration "
                                                 "(default: all of it)")
    args = ap.parse_args(argv)
    results = run(args.selection or None)
    print(markdown(results))
    for o in results.fixed:
        print(f"passes now, remove from KNOWN_FAILURES: {o.test}", file=sys.stderr)
    return 1 if results.unexpected else 0


if __name__ == "__main__":
    sys.exit(main())
