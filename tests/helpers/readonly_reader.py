"""Reader process for test_readers: follows another process's log with readonly=True until it holds TOTAL records.

    python readonly_reader.py DIR TOTAL

Checks every record it sees (offset-derived content, contiguous offsets) and that the end offset never goes
back; prints JSON {"seen": records checked, "ends": distinct end offsets seen}. Any problem raises (exit 1).
"""

import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from helpers.content import check_records     # noqa: E402
from seglog import Log                         # noqa: E402


def main() -> None:
    directory, total = sys.argv[1], int(sys.argv[2])
    deadline = time.monotonic() + 60
    ends, pos = [], 0
    with Log(directory, readonly=True) as log:
        while pos < total:
            assert time.monotonic() < deadline, f"stuck at {pos} of {total} records; ends seen {ends[-5:]}"
            log.refresh()
            end = log.end_offset
            assert not ends or end >= ends[-1], f"end offset went back from {ends[-1]} to {end}"
            if not ends or end > ends[-1]:
                ends.append(end)
            check_records(log.records(pos, end), pos, end)
            pos = end
            time.sleep(0.005)
    print(json.dumps({"seen": pos, "ends": len(ends)}))


if __name__ == "__main__":
    main()
