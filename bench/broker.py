"""The Kafka-protocol broker (issue 4) under confluent-kafka (librdkafka), next to librdkafka's own mock cluster
measured in the same run with the same client code.

    python -m bench.broker [--messages 1000000] [--runs 3] [--dir /tmp/seglog-bench-broker] [--quick]

Both servers run in subprocesses of their own (their own GIL and threads; the client process is the same for
both): `seglog broker` (seglog.broker.run_forever, default broker config) and librdkafka's in-process mock
cluster (``rd_kafka_mock_cluster_new`` in a helper process, topics made with ``rd_kafka_mock_topic_create``).
Figures, medians of --runs runs each:

- produce msg/s: 100-byte values, no key, no compression, 1 and 6 partitions, acks=1 and acks=all
  (linger.ms=5, batch.num.messages=10000), from the first produce() to flush() returning;
- consume msg/s: Consumer.consume(10000) with assign() (no group) from the beginning; the mock cluster keeps
  only ~5 MB per partition, so both servers hold 40,000 records per partition and the consumer reads them
  again (seek to the beginning) until --messages records were read;
- produce latency at a fixed 10,000 msg/s (acks=all, linger.ms=0, 1 partition): p50/p99 of librdkafka's
  per-message latency (produce() to delivery report), 3 s after 0.5 s of warm-up;
- server RSS with 1,000 partitions (10 topics x 100, 10 records in each) after a consumer read them all.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

TITLE = "Kafka-protocol broker vs librdkafka's mock cluster (issue 4)"
LIBRARIES = ["confluent-kafka"]

VALUE = (b'{"id":123456,"user":"u04242","event":"click","ts":1700000000000,"v":"' + b"x" * 100)[:98] + b'"}'
CONSUME_PER_PARTITION = 40_000            # the mock cluster prunes partitions above ~5 MB
LATENCY_RATE = 10_000
LATENCY_SECONDS = 3.0

# Runs the mock cluster in its own process: prints its bootstrap servers, then obeys stdin lines
# "create TOPIC PARTITIONS" (answers "ok ERR") until stdin closes.
MOCK_SERVER = r"""
import ctypes, glob, os, sys
import confluent_kafka
libdir = os.path.join(os.path.dirname(confluent_kafka.__file__), "..", "confluent_kafka.libs")
cands = glob.glob(os.path.join(libdir, "librdkafka*.so*"))
lib = ctypes.CDLL(cands[0] if cands else "librdkafka.so.1")
P = ctypes.c_void_p
lib.rd_kafka_conf_new.restype = P
lib.rd_kafka_new.restype = P
lib.rd_kafka_new.argtypes = [ctypes.c_int, P, ctypes.c_char_p, ctypes.c_size_t]
lib.rd_kafka_mock_cluster_new.restype = P
lib.rd_kafka_mock_cluster_new.argtypes = [P, ctypes.c_int]
lib.rd_kafka_mock_cluster_bootstraps.restype = ctypes.c_char_p
lib.rd_kafka_mock_cluster_bootstraps.argtypes = [P]
lib.rd_kafka_mock_topic_create.argtypes = [P, ctypes.c_char_p, ctypes.c_int, ctypes.c_int]
err = ctypes.create_string_buffer(512)
rk = lib.rd_kafka_new(0, lib.rd_kafka_conf_new(), err, 512)
mc = lib.rd_kafka_mock_cluster_new(rk, 1)
print("listening on " + lib.rd_kafka_mock_cluster_bootstraps(mc).decode(), flush=True)
for line in sys.stdin:
    cmd, topic, n = line.split()
    print("ok", lib.rd_kafka_mock_topic_create(mc, topic.encode(), int(n), 1), flush=True)
"""

def _rss(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def _cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Server:
    """A server subprocess printing 'listening on HOST:PORT'."""

    name = ""

    def __init__(self, args: list[str], **popen):
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, **popen)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            m = re.search(r"listening on (\S+)", line)
            if m:
                self.banner = line
                self.bootstrap = m.group(1).rstrip(",")
                metrics = re.search(r"metrics on :(\d+)", line)
                self.metrics_port = int(metrics.group(1)) if metrics else None
                return
            if not line and self.proc.poll() is not None:
                break
        self.proc.kill()
        raise RuntimeError(f"{args[:3]} did not start")

    @property
    def pid(self) -> int:
        return self.proc.pid

    def rss(self) -> int:
        return _rss(self.pid)

    def cpu(self) -> float:
        return _cpu_seconds(self.pid)

    def create_topic(self, topic: str, partitions: int) -> None:
        """Create `topic` with `partitions` partitions, replication factor 1 (each server its own way)."""
        raise TypeError(f"{type(self).__name__} cannot create topics")

    def metrics(self) -> dict | None:
        """The server's own request metrics (seglog's /metrics.json), None if it has none."""
        if not getattr(self, "metrics_port", None):
            return None
        import json
        import urllib.request
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics.json", timeout=10) as r:
            return json.load(r)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc.stdout.close()


class SeglogServer(Server):
    """`seglog broker --data-dir DIR --port 0 --metrics-port 0` (default settings otherwise)."""

    name = "seglog broker"

    def __init__(self, data_dir: str):
        os.makedirs(data_dir, exist_ok=True)
        super().__init__([sys.executable, "-m", "seglog", "broker", "--data-dir", data_dir, "--port", "0",
                          "--metrics-port", "0", "--log-level", "WARNING"])

    def create_topic(self, topic: str, partitions: int) -> None:
        from confluent_kafka.admin import AdminClient, NewTopic
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


class MockServer(Server):
    name = "librdkafka mock cluster"

    def __init__(self):
        super().__init__([sys.executable, "-c", MOCK_SERVER], stdin=subprocess.PIPE)

    def create_topic(self, topic: str, partitions: int) -> None:
        self.proc.stdin.write(f"create {topic} {partitions}\n")
        self.proc.stdin.flush()
        answer = self.proc.stdout.readline().split()
        if answer != ["ok", "0"]:
            raise RuntimeError(f"mock topic {topic}: {answer}")

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        super().close()


# -- the client side: identical for both servers -----------------------------------------------------------------

def _wait_for_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        t = admin.list_topics(topic, timeout=10).topics.get(topic)
        if t is not None and t.error is None and len(t.partitions) == partitions:
            return
        time.sleep(0.05)
    raise RuntimeError(f"topic {topic} never showed {partitions} partitions")


def produce_rate(server: Server, topic: str, partitions: int, acks: str, n: int,
                 conf: dict | None = None) -> tuple[float, float]:
    """(msg/s, server CPU cores) of n 100-byte records, from the first produce() to flush() returning. `conf`:
    client settings that replace the defaults (another listener's bootstrap.servers, security.protocol ...)."""
    from confluent_kafka import Producer
    server.create_topic(topic, partitions)
    _wait_for_topic(server.bootstrap, topic, partitions)
    p = Producer({"bootstrap.servers": server.bootstrap, "acks": acks, "linger.ms": 5,
                  "batch.num.messages": 10_000, "batch.size": 1_000_000, "compression.type": "none",
                  "queue.buffering.max.messages": max(n + 10, 100_000), "queue.buffering.max.kbytes": 2_000_000,
                  "enable.idempotence": False, **(conf or {})})
    p.produce(topic, VALUE)                    # connections and metadata before the clock starts
    p.flush(30)
    produce, poll, value = p.produce, p.poll, VALUE
    cpu0, t = server.cpu(), time.perf_counter()
    for i in range(n):
        try:
            produce(topic, value)
        except BufferError:
            poll(0.001)
            produce(topic, value)
    left = p.flush(120)
    dt = time.perf_counter() - t
    cpu = (server.cpu() - cpu0) / dt
    if left:
        raise RuntimeError(f"{left} messages not delivered")
    return n / dt, cpu


def kcat_produce_rate(server: Server, topic: str, n: int, data_file: str) -> tuple[float, float] | None:
    """(msg/s, server CPU cores) of `kcat -P` (librdkafka's C producer, no Python in the loop) sending n lines of
    100 B to one partition with acks=all, process start to exit; None without kcat."""
    kcat = shutil.which("kcat") or shutil.which("kafkacat")
    if kcat is None:
        return None
    server.create_topic(topic, 1)
    _wait_for_topic(server.bootstrap, topic, 1)
    cpu0, t = server.cpu(), time.perf_counter()
    with open(data_file, "rb") as f:
        res = subprocess.run([kcat, "-b", server.bootstrap, "-t", topic, "-P", "-p", "0", "-X", "acks=all",
                              "-X", "linger.ms=5", "-X", "batch.num.messages=10000",
                              "-X", f"queue.buffering.max.messages={n + 10}"], stdin=f, capture_output=True)
    dt = time.perf_counter() - t
    if res.returncode != 0:
        raise RuntimeError(f"kcat -P failed: {res.stderr.decode(errors='replace')[-500:]}")
    return n / dt, (server.cpu() - cpu0) / dt


def fill(server: Server, topic: str, partitions: int, per_partition: int) -> None:
    from confluent_kafka import Producer
    server.create_topic(topic, partitions)
    _wait_for_topic(server.bootstrap, topic, partitions)
    p = Producer({"bootstrap.servers": server.bootstrap, "linger.ms": 5, "batch.num.messages": 10_000,
                  "queue.buffering.max.messages": 2_000_000, "queue.buffering.max.kbytes": 2_000_000})
    for part in range(partitions):
        for _ in range(per_partition):
            p.produce(topic, VALUE, partition=part)
        p.poll(0)
    if p.flush(120):
        raise RuntimeError("fill: messages not delivered")


def consume_rate(server: Server, topic: str, partitions: int, per_partition: int, total: int,
                 conf: dict | None = None) -> tuple[float, float]:
    """(msg/s, server CPU cores) reading the topic again and again from the beginning. Each pass is timed from
    its first consume() that returns messages to its last one, so the assign()/ListOffsets round trips of a
    pass start (a cost of re-reading, not of consuming) stay out of the figure. `conf` as for produce_rate."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": server.bootstrap, "group.id": "bench", "enable.auto.commit": False,
                  "fetch.queue.backoff.ms": 1, "queued.min.messages": 1_000_000, "fetch.wait.max.ms": 100,
                  "enable.partition.eof": False, **(conf or {})})
    start = [TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)]
    per_pass = partitions * per_partition
    c.assign(start)                            # warm-up pass: connections, page cache
    got = 0
    while got < per_pass:
        got += len(c.consume(10_000, 5.0))
    passes = max(1, total // per_pass)
    n, busy, cpu = 0, 0.0, 0.0
    for _ in range(passes):
        c.assign(start)
        got = len(c.consume(10_000, 5.0))      # the pass starts when the first messages are there
        cpu0, t = server.cpu(), time.perf_counter()
        while got < per_pass:
            msgs = c.consume(10_000, 5.0)
            if not msgs:
                raise RuntimeError("consumer stalled")
            got += len(msgs)
            n += len(msgs)
        busy += time.perf_counter() - t
        cpu += server.cpu() - cpu0
    c.close()
    return n / busy, cpu / busy


def _count_records(records) -> int:
    """Records in a fetch response's record batches, from their headers (recordsCount at byte 57)."""
    n, pos, end = 0, 0, len(records)
    while pos + 61 <= end:
        length = int.from_bytes(records[pos + 8:pos + 12], "big")
        if pos + 12 + length > end:
            break                                  # a partial batch at the end of the response
        n += int.from_bytes(records[pos + 57:pos + 61], "big")
        pos += 12 + length
    return n


class RawClient:
    """One blocking connection speaking Kafka through seglog's protocol codec (no Kafka client library):
    what the server costs without a client's per-message work."""

    def __init__(self, bootstrap: str):
        import socket
        host, port = bootstrap.split(",")[0].rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=30)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.cid = 0

    def send(self, api_key: int, version: int, body: dict):
        from seglog.protocol import RequestHeader, encode_request
        self.cid += 1
        header = RequestHeader(api_key, version, self.cid, "bench-raw")
        self.sock.sendall(b"".join(encode_request(header, body)))
        return header

    def recv(self, header) -> dict:
        from seglog.protocol import decode_response
        size = int.from_bytes(self._exactly(4), "big")
        return decode_response(header, self._exactly(size))

    def _exactly(self, n: int) -> bytearray:
        buf = bytearray(n)
        view, got = memoryview(buf), 0
        while got < n:
            k = self.sock.recv_into(view[got:])
            if not k:
                raise ConnectionError("server closed the connection")
            got += k
        return buf

    def close(self) -> None:
        self.sock.close()


def fetch_loop(fetch, server: Server, topic: str, partitions: int, per_partition: int,
               total: int) -> tuple[float, float, float]:
    """(msg/s, bytes/s of record batches, server CPU cores) of Fetch v11 requests of 1 MiB per partition
    (librdkafka's default) sent one after the other from offset 0 to the end, again and again, counting records
    from the batch headers only. `fetch(body)` sends one Fetch v11 request and returns its decoded response."""

    def one_pass() -> tuple[int, int]:
        offsets = dict.fromkeys(range(partitions), 0)
        n = nbytes = 0
        while offsets:
            response = fetch({
                "replica_id": -1, "max_wait_ms": 100, "min_bytes": 1, "max_bytes": 50 << 20, "isolation_level": 0,
                "session_id": 0, "session_epoch": -1,
                "topics": [{"topic": topic, "partitions": [{"partition": p, "fetch_offset": o,
                                                            "partition_max_bytes": 1 << 20}
                                                           for p, o in offsets.items()]}]})
            for t in response["responses"]:
                for part in t["partitions"]:
                    recs = part["records"] or b""
                    k = _count_records(recs)
                    n += k
                    nbytes += len(recs)
                    offsets[part["partition_index"]] += k
                    if offsets[part["partition_index"]] >= per_partition:
                        del offsets[part["partition_index"]]
        return n, nbytes
    one_pass()                                     # warm-up
    passes = max(1, total // (partitions * per_partition))
    cpu0, t = server.cpu(), time.perf_counter()
    done = [one_pass() for _ in range(passes)]
    dt = time.perf_counter() - t
    return sum(d[0] for d in done) / dt, sum(d[1] for d in done) / dt, (server.cpu() - cpu0) / dt


def raw_fetch_rate(server: Server, topic: str, partitions: int, per_partition: int, total: int) -> tuple[float, float]:
    """(msg/s, server CPU cores) of fetch_loop over one RawClient connection."""
    from seglog.protocol import ApiKey
    c = RawClient(server.bootstrap)
    try:
        rate, _bytes, cpu = fetch_loop(lambda body: c.recv(c.send(ApiKey.FETCH, 11, body)), server, topic,
                                       partitions, per_partition, total)
        return rate, cpu
    finally:
        c.close()


def produce_latency(server: Server, topic: str) -> tuple[float, float, float]:
    """(p50, p99, max) ms of librdkafka's per-message latency (produce() to delivery report) at LATENCY_RATE
    msg/s with acks=all and linger.ms=0: LATENCY_RATE/1000 messages every millisecond, LATENCY_SECONDS after
    0.5 s of warm-up."""
    from confluent_kafka import Producer
    server.create_topic(topic, 1)
    _wait_for_topic(server.bootstrap, topic, 1)
    lat: list[float] = []
    warm = [True]

    def report(err, msg):
        if err is None and not warm[0]:
            lat.append(msg.latency())
    p = Producer({"bootstrap.servers": server.bootstrap, "acks": "all", "linger.ms": 0,
                  "enable.idempotence": False})
    p.produce(topic, VALUE)
    p.flush(30)
    per_tick = LATENCY_RATE // 1000
    start = time.perf_counter()
    i = 0
    while True:
        due = start + i / 1000
        delay = due - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        if due - start > 0.5:
            warm[0] = False
        if due - start > 0.5 + LATENCY_SECONDS:
            break
        for _ in range(per_tick):
            p.produce(topic, VALUE, on_delivery=report)
        p.poll(0)
        i += 1
    p.flush(30)
    ms = sorted(x * 1000 for x in lat)
    return ms[len(ms) // 2], ms[int(len(ms) * 0.99)], ms[-1]


def raw_produce_latency(server: Server, topic: str) -> tuple[float, float, float]:
    """(p50, p99, max) ms of Produce v8 requests (acks=all) of 10 records of 100 B each, sent every millisecond
    (LATENCY_RATE records per second) over one connection, one in flight, for LATENCY_SECONDS after 0.5 s of
    warm-up; measured from the scheduled send time (a late send counts as waiting) to the response."""
    import struct
    from kafka.record.default_records import DefaultRecordBatchBuilder
    from seglog.protocol import ApiKey, RequestHeader, decode_response, encode_request
    server.create_topic(topic, 1)
    _wait_for_topic(server.bootstrap, topic, 1)
    per_request = LATENCY_RATE // 1000
    builder = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, batch_size=1 << 20)
    for i in range(per_request):
        builder.append(i, timestamp=1_700_000_000_000, key=None, value=VALUE, headers=[])
    body = {"transactional_id": None, "acks": -1, "timeout_ms": 30_000,
            "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": bytes(builder.build())}]}]}
    frame = bytearray(b"".join(encode_request(RequestHeader(ApiKey.PRODUCE, 8, 0, "bench-raw"), body)))
    c = RawClient(server.bootstrap)
    try:
        lat = []
        start = time.perf_counter()
        for i in range(int((0.5 + LATENCY_SECONDS) * 1000)):
            due = start + i / 1000
            delay = due - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            struct.pack_into(">i", frame, 8, i + 1)          # correlation id
            c.sock.sendall(frame)
            resp = c._exactly(int.from_bytes(c._exactly(4), "big"))
            done = time.perf_counter()
            r = decode_response(RequestHeader(ApiKey.PRODUCE, 8, i + 1, "bench-raw"), resp)
            if r["responses"][0]["partition_responses"][0]["error_code"]:
                raise RuntimeError(f"raw produce failed: {r}")
            if i >= 500:
                lat.append(done - due)
    finally:
        c.close()
    ms = sorted(x * 1000 for x in lat)
    return ms[len(ms) // 2], ms[int(len(ms) * 0.99)], ms[-1]


def rss_with_partitions(server: Server, prefix: str, topics: int = 10, per_topic: int = 100) -> tuple[int, int]:
    """(RSS before, RSS after) creating topics x per_topic partitions, 10 records in each, all read once."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
    time.sleep(0.2)
    before = server.rss()
    names = [f"{prefix}{i}" for i in range(topics)]
    for name in names:
        server.create_topic(name, per_topic)
    for name in names:
        _wait_for_topic(server.bootstrap, name, per_topic)
    p = Producer({"bootstrap.servers": server.bootstrap, "linger.ms": 5})
    for name in names:
        for part in range(per_topic):
            for _ in range(10):
                p.produce(name, VALUE, partition=part)
    if p.flush(60):
        raise RuntimeError("rss: messages not delivered")
    c = Consumer({"bootstrap.servers": server.bootstrap, "group.id": "rss", "enable.auto.commit": False})
    c.assign([TopicPartition(name, part, OFFSET_BEGINNING) for name in names for part in range(per_topic)])
    got, deadline = 0, time.monotonic() + 60
    while got < topics * per_topic * 10 and time.monotonic() < deadline:
        got += len(c.consume(10_000, 1.0))
    c.close()
    time.sleep(0.5)
    return before, server.rss()


# -- the table --------------------------------------------------------------------------------------------------

def _fmt_rate(r: float) -> str:
    return f"{r / 1e6:.2f} M msg/s" if r >= 1e6 else f"{r / 1e3:.0f} k msg/s"


def _spread(values: list[float]) -> str:
    return f" ({min(values) / 1e3:.0f}-{max(values) / 1e3:.0f} k)" if len(values) > 1 else ""


def measure(root: str, n: int, runs: int, say=print) -> list[dict]:
    rows: list[dict] = []

    def row(figure, seglog, mock, ratio="", target="", met=""):
        rows.append({"figure": figure, "seglog broker": seglog, "librdkafka mock cluster": mock,
                     "seglog / mock": ratio, "target": target, "met": met})
        if met and not figure.startswith(" "):     # a verdict on a target; indented rows detail the row above
            rows[-1]["summary"] = {"figure": figure, "target": target, "met": met,
                                   "measured": seglog + (f"; {ratio} of the mock cluster" if ratio else "")}
        say(f"  {figure:<48} {seglog:>22} {mock:>22} {ratio:>7}  {target} {met}")

    seq = iter(range(10**6))
    load_start = os.getloadavg()[0]
    seglog = SeglogServer(os.path.join(root, "seglog-data"))
    mock = MockServer()
    servers = [seglog, mock]
    try:
        cpu_per_msg = {s.name: [] for s in servers}
        for partitions in (1, 6):
            for acks in ("1", "all"):
                rates = {s.name: [] for s in servers}
                for r in range(runs):
                    for s in (servers if r % 2 == 0 else servers[::-1]):      # alternate who goes first
                        rate, cpu = produce_rate(s, f"produce-{next(seq)}", partitions, acks, n)
                        rates[s.name].append(rate)
                        cpu_per_msg[s.name].append(cpu / rate)
                sg, mk = (statistics.median(rates[s.name]) for s in servers)
                met = "yes" if sg >= 0.5 * mk and sg >= 500_000 else "NO"
                row(f"produce, {partitions} partition{'s' if partitions > 1 else ''}, acks={acks}",
                    _fmt_rate(sg) + _spread(rates[seglog.name]), _fmt_rate(mk) + _spread(rates[mock.name]),
                    f"{sg / mk:.2f}x", ">= 0.5x mock and >= 500 k msg/s", met)
        sc, mc = (statistics.median(cpu_per_msg[s.name]) * 1e6 for s in servers)
        row("  server CPU per produced message", f"{sc:.2f} us", f"{mc:.2f} us", f"{sc / mc:.2f}x")
        data_file = os.path.join(root, "lines.txt")
        with open(data_file, "wb") as f:
            f.write((VALUE + b"\n") * n)
        kc = {s.name: [] for s in servers}
        for r in range(runs):
            for s in (servers if r % 2 == 0 else servers[::-1]):
                got = kcat_produce_rate(s, f"kcat-{next(seq)}", n, data_file)
                if got is not None:
                    kc[s.name].append(got)
        os.remove(data_file)
        if kc[seglog.name]:
            sg, mk = (statistics.median(x[0] for x in kc[s.name]) for s in servers)
            scpu, mcpu = (statistics.median(x[1] for x in kc[s.name]) for s in servers)
            row("  produce with kcat -P (C client), 1 partition, acks=all",
                f"{_fmt_rate(sg)}, {scpu:.2f} cores", f"{_fmt_rate(mk)}, {mcpu:.2f} cores", f"{sg / mk:.2f}x",
                ">= 0.5x mock and >= 500 k msg/s", "yes" if sg >= 0.5 * mk and sg >= 500_000 else "NO")

        for partitions in (1, 6):
            rates = {s.name: [] for s in servers}
            cpus = {s.name: [] for s in servers}
            raw = {s.name: [] for s in servers}
            raw_cpu = {s.name: [] for s in servers}
            for s in servers:
                topic = f"consume-{next(seq)}"
                fill(s, topic, partitions, CONSUME_PER_PARTITION)
                for _ in range(runs):
                    rate, cpu = consume_rate(s, topic, partitions, CONSUME_PER_PARTITION, n)
                    rates[s.name].append(rate)
                    cpus[s.name].append(cpu)
                    rate, cpu = raw_fetch_rate(s, topic, partitions, CONSUME_PER_PARTITION, 4 * n)
                    raw[s.name].append(rate)
                    raw_cpu[s.name].append(cpu)
            sg, mk = (statistics.median(rates[s.name]) for s in servers)
            plural = "s" if partitions > 1 else ""
            row(f"consume, {partitions} partition{plural}", _fmt_rate(sg) + _spread(rates[seglog.name]),
                _fmt_rate(mk) + _spread(rates[mock.name]), f"{sg / mk:.2f}x", ">= 1 M msg/s",
                "yes" if sg >= 1_000_000 else "NO")
            row(f"  server CPU while consuming, {partitions} partition{plural}",
                f"{statistics.median(cpus[seglog.name]):.2f} cores", f"{statistics.median(cpus[mock.name]):.2f} cores")
            sg, mk = (statistics.median(raw[s.name]) for s in servers)
            row(f"  raw Fetch v11 loop (no client library), {partitions} partition{plural}",
                f"{_fmt_rate(sg)}, {statistics.median(raw_cpu[seglog.name]):.2f} cores",
                f"{_fmt_rate(mk)}, {statistics.median(raw_cpu[mock.name]):.2f} cores", f"{sg / mk:.2f}x")

        lats = {s.name: [] for s in servers}
        broker_side = []
        raw_lats = {s.name: [] for s in servers}
        for _ in range(runs):
            for s in servers:
                lats[s.name].append(produce_latency(s, f"latency-{next(seq)}"))
                if s is seglog:
                    m = seglog.metrics()
                    if m and "produce" in m["latency"]:
                        broker_side.append((m["latency"]["produce"]["p50_ms"], m["latency"]["produce"]["p99_ms"]))
                raw_lats[s.name].append(raw_produce_latency(s, f"raw-latency-{next(seq)}"))
        (s50, s99, smax), (m50, m99, mmax) = ([statistics.median(x[i] for x in lats[s.name]) for i in range(3)]
                                              for s in servers)
        row(f"produce latency p99 at {LATENCY_RATE // 1000}k msg/s, acks=all", f"{s99:.2f} ms", f"{m99:.2f} ms",
            f"{s99 / m99:.2f}x", "< 5 ms", "yes" if s99 < 5 else "NO")
        row("  p50 / max", f"{s50:.2f} / {smax:.1f} ms", f"{m50:.2f} / {mmax:.1f} ms")
        if broker_side:
            row("  inside the broker (its produce metrics) p50 / p99",
                f"{statistics.median(b[0] for b in broker_side):.2f} / "
                f"{statistics.median(b[1] for b in broker_side):.2f} ms", "-")
        (s50, s99, smax), (m50, m99, mmax) = ([statistics.median(x[i] for x in raw_lats[s.name]) for i in range(3)]
                                              for s in servers)
        row("  raw Produce v8 (10 records) every ms, round trip p50 / p99 / max",
            f"{s50:.2f} / {s99:.2f} / {smax:.1f} ms", f"{m50:.2f} / {m99:.2f} / {mmax:.1f} ms", f"{s99 / m99:.2f}x")
    finally:
        for s in servers:
            s.close()

    # memory with 1,000 partitions: fresh servers
    seglog = SeglogServer(os.path.join(root, "seglog-rss"))
    mock = MockServer()
    try:
        (sb, sa), (mb_, ma) = rss_with_partitions(seglog, "rss"), rss_with_partitions(mock, "rss")
    finally:
        seglog.close()
        mock.close()
    row("server RSS with 1,000 partitions", f"{sa / 1e6:.0f} MB", f"{ma / 1e6:.0f} MB", f"{sa / ma:.2f}x",
        "< 300 MB", "yes" if sa < 300e6 else "NO")
    row("  server RSS before creating them", f"{sb / 1e6:.0f} MB", f"{mb_ / 1e6:.0f} MB")
    row("machine load average (1 min) at start / end", f"{load_start:.1f} / {os.getloadavg()[0]:.1f}", "same run",
        "", f"{os.cpu_count()} cores", "")
    return rows


def markdown(rows: list[dict]) -> str:
    cols = [c for c in rows[0] if c != "summary"]
    out = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    out += ["| " + " | ".join(str(r[c]) for c in cols) + " |" for r in rows]
    return "\n".join(out)


def run(ctx) -> list[dict]:
    """bench.suite section."""
    from bench import suite
    suite.require("confluent_kafka", hint="pip install confluent-kafka")
    n = 100_000 if ctx.quick else 1_000_000
    runs = 1 if ctx.quick else ctx.runs
    ctx.note(f"confluent-kafka {_client_version()} against `seglog broker` and librdkafka's mock cluster, each in "
             f"its own process, same client code; {n:,} messages of 100 B per produce figure, medians of {runs} "
             "runs. Also `python -m bench.broker`.")
    return measure(ctx.dir, n, runs, say=lambda s: print(s, flush=True))


def _client_version() -> str:
    import confluent_kafka
    return f"{confluent_kafka.__version__} (librdkafka {confluent_kafka.libversion()[0]})"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--messages", type=int, default=1_000_000)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--dir", default=None)
    p.add_argument("--quick", action="store_true", help="100,000 messages, 1 run")
    a = p.parse_args(argv)
    if a.quick:
        a.messages, a.runs = 100_000, 1
    root = a.dir or tempfile.mkdtemp(prefix="seglog-bench-broker-")
    os.makedirs(root, exist_ok=True)
    print(f"seglog broker benchmark: confluent-kafka {_client_version()}, {a.messages:,} messages of 100 B, "
          f"median of {a.runs} runs, in {root}", flush=True)
    try:
        rows = measure(root, a.messages, a.runs)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print()
    print(markdown(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
