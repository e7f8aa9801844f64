#!/usr/bin/env bash
# Install every test dependency (Debian packages when missing, then the Python ones) and run the whole suite.
# Extra arguments go to pytest, e.g. `bash tests/run.sh -x -k log`.
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
command -v java >/dev/null 2>&1 || missing+=(openjdk-17-jre-headless)
[ -e /usr/share/java/zookeeper.jar ] || missing+=(zookeeper)
command -v kcat >/dev/null 2>&1 || command -v kafkacat >/dev/null 2>&1 || missing+=(kafkacat)
if [ ${#missing[@]} -gt 0 ]; then
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    echo "installing Debian packages: ${missing[*]}"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

python3 -m pip install -q --disable-pip-version-check ".[test]"
# Two workers, each test module kept on one of them (its cluster, ZooKeeper or Spark session started once): most
# of the suite waits on brokers, ZooKeeper sessions and clients rather than on the CPU. SEGLOG_TEST_WORKERS=0
# runs it in this one process.
exec python3 -m pytest -n "${SEGLOG_TEST_WORKERS:-2}" --dist loadfile "$@"
