"""`seglog broker` and `seglog zookeeper`: run a Kafka-protocol broker or the Debian ZooKeeper in the foreground.

    seglog broker --data-dir data --port 9092                  one broker, embedded defaults
    seglog broker --config server.properties [--override k=v]  Kafka's server.properties names
    seglog broker --broker-id 1 --port 9093 --zookeeper 127.0.0.1:2181/seglog --data-dir d1   a cluster member
    seglog zookeeper --data-dir zk --port 2181
"""

from __future__ import annotations

import atexit
import logging
import os
import signal

from ..config import BrokerConfig, read_properties
from ..errors import InvalidConfigError
from ..security.listeners import protocol_map
from ..security.protocols import parse_listeners
from .common import CliError


def register(sub) -> None:
    b = sub.add_parser("broker", help="run a Kafka-protocol broker in the foreground (Ctrl-C stops it cleanly)",
                       description=cmd_broker.__doc__)
    b.add_argument("--config", metavar="server.properties", help="a Kafka server.properties file")
    b.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                   help="a broker setting by its Kafka name (repeatable), over --config")
    b.add_argument("--data-dir", help="log.dirs: a directory, or several comma-separated (default ./data)")
    b.add_argument("--host", help="the address to listen on (default 127.0.0.1)")
    b.add_argument("--port", type=int, help="the port to listen on (default 9092; 0 picks a free one)")
    b.add_argument("--broker-id", type=int, help="broker.id (default 0)")
    b.add_argument("--zookeeper", metavar="HOST:PORT[/CHROOT]",
                   help="zookeeper.connect: join the cluster coordinated there (default: a lone broker)")
    b.add_argument("--metrics-port", type=int, help="serve /metrics (Prometheus) and /metrics.json over HTTP")
    b.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    b.set_defaults(func=cmd_broker)

    z = sub.add_parser("zookeeper", help="run the Debian ZooKeeper as a plain loopback process",
                       description=cmd_zookeeper.__doc__)
    z.add_argument("--data-dir", default="zk", help="ZooKeeper's data directory (default ./zk)")
    z.add_argument("--port", type=int, default=2181, help="client port (default 2181)")
    z.add_argument("--tick-time-ms", type=int, default=2000, help="ZooKeeper's tickTime (default 2000)")
    z.set_defaults(func=cmd_zookeeper)


def broker_config(args) -> BrokerConfig:
    """server.properties (if given), then --override, then the dedicated flags."""
    props: dict[str, str] = dict(read_properties(args.config)) if args.config else {}
    for item in args.override:
        key, sep, value = item.partition("=")
        if not sep:
            raise CliError(f"--override needs KEY=VALUE, not {item!r}", 2)
        props[key.strip()] = value.strip()
    config = BrokerConfig.from_properties(props)      # unknown names: one WARNING each, as Kafka logs them
    flags = {}
    if args.data_dir is not None:
        flags["log.dirs"] = args.data_dir
    if args.broker_id is not None:
        flags["broker.id"] = args.broker_id
    if args.zookeeper is not None:
        flags["zookeeper.connect"] = args.zookeeper
    if args.host is not None or args.port is not None:
        # --host/--port replace the first listener's address
        (name, host, port), *others = parse_listeners(config.listeners, protocol_map=protocol_map(config))
        host = args.host if args.host is not None else host
        if ":" in host and not host.startswith("["):
            host = f"[{host}]"                           # an IPv6 address
        rest = "".join(f",{n}://[{h}]:{p}" if ":" in h else f",{n}://{h}:{p}" for n, h, p in others)
        flags["listeners"] = f"{name}://{host}:{args.port if args.port is not None else port}{rest}"
    return config.with_kafka(flags) if flags else config


def cmd_broker(args) -> int:
    """Run one broker until Ctrl-C or SIGTERM, then shut down cleanly (flush, clean-shutdown markers). A lone
    broker needs nothing else; with --zookeeper (zookeeper.connect) it joins that cluster: ZooKeeper elects the
    controller, partitions are replicated to the brokers holding their replicas."""
    logging.basicConfig(level=getattr(logging, args.log_level),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from ..broker import run_forever
    if args.metrics_port is not None and not 0 <= args.metrics_port <= 65535:
        raise CliError(f"--metrics-port {args.metrics_port} is not a port (0..65535)", 2)
    try:
        status = run_forever(broker_config(args), metrics_port=args.metrics_port)
    except InvalidConfigError as e:                   # a bad setting is bad usage: exit status 2
        raise CliError(str(e), 2) from None
    # stopped: a SIGTERM from now on must not make the exit status its own (-15 to a supervisor, hiding a failed log
    # dir's 1): while the interpreter joins the thread pools' threads it ends the process at once with the status;
    # once it tears its modules down (where Python resets its handlers to the default, and any thread still
    # running may take the signal) it is ignored
    signal.signal(signal.SIGTERM, lambda signum, frame: os._exit(status))
    atexit.register(signal.signal, signal.SIGTERM, signal.SIG_IGN)
    return status


def cmd_zookeeper(args) -> int:
    """Run the Debian package's ZooKeeper (apt-get install zookeeper) on 127.0.0.1 until Ctrl-C or SIGTERM."""
    from ..cluster.zookeeper_server import find_installation, run_foreground
    if find_installation() is None:
        raise CliError("ZooKeeper is not installed: apt-get install zookeeper (it needs java)")
    if not 0 < args.port <= 65535:
        raise CliError(f"--port {args.port} is not a port (1..65535)", 2)
    try:
        return run_foreground(args.data_dir, args.port, tick_time_ms=args.tick_time_ms)
    except (RuntimeError, TimeoutError, OSError) as e:   # port or data dir taken, java failing: one line each
        raise CliError(str(e)) from None
