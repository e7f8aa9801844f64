"""seglog.broker: the Kafka-protocol broker over a seglog Node.

``seglog.serve(data_dir)`` runs one on a free loopback port in a background thread (for tests and embedding);
`data_dir` is one directory or several (a list, or "a,b" as Kafka's ``log.dirs``)::

    with seglog.serve(tmp_path) as broker:
        KafkaProducer(bootstrap_servers=broker.bootstrap_servers)

``seglog broker --data-dir data --port 9092`` (or ``--config server.properties``) runs one in the foreground.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import threading
from typing import Any, Mapping

from ..config import BrokerConfig
from ..errors import InvalidConfigError
from ..node import Node
from .server import Broker

__all__ = ["Broker", "RunningBroker", "serve", "run_forever"]

log = logging.getLogger("seglog.broker")
DEFAULT_AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"


def _config(data_dir, config, overrides) -> BrokerConfig:
    """A BrokerConfig from a config (or properties), plus Kafka-named overrides and the data dir."""
    if config is None:
        config = BrokerConfig()
    elif not isinstance(config, BrokerConfig):
        config = BrokerConfig.from_properties(config)
    changes = dict(overrides or {})
    if data_dir is not None:
        changes["log.dirs"] = (os.fspath(data_dir) if isinstance(data_dir, (str, os.PathLike))
                               else ",".join(map(os.fspath, data_dir)))
    return config.with_kafka(changes) if changes else config


class RunningBroker:
    """A broker running on its own event loop in a background thread. ``bootstrap_servers`` is
    "host:port"; ``node`` the Node it serves (usable in-process at the same time); ``stop()`` shuts it down
    cleanly (also on leaving the ``with`` block)."""

    def __init__(self, data_dir, config=None, *, host: str = "127.0.0.1", port: int = 0,
                 metrics_port: int | None = None, metadata_store=None, ssl=None, sasl_users=None, acls=None,
                 **overrides):
        overrides = {k.replace("_", "."): v for k, v in overrides.items()}
        if acls is not None and not (overrides.get("authorizer.class.name")
                                     or (isinstance(config, Mapping) and config.get("authorizer.class.name"))):
            overrides["authorizer.class.name"] = DEFAULT_AUTHORIZER
        ssl_context = None
        if ssl is not None or sasl_users is not None:
            if "listeners" in overrides or (config is not None and "listeners" in dict(config)):
                raise InvalidConfigError("ssl= and sasl_users= choose the listener: leave listeners out")
            protocol = {(True, True): "SASL_SSL", (True, False): "SSL", (False, True): "SASL_PLAINTEXT"}[
                (ssl is not None, sasl_users is not None)]
            overrides["listeners"] = f"{protocol}://{host}:{port}"
            if isinstance(ssl, Mapping):
                overrides.update(ssl)
            elif ssl is not None:
                ssl_context = ssl
        self.config = _config(data_dir, config, overrides)
        self.node = Node(self.config.log_dirs, self.config)
        try:
            if metadata_store is None and self.config.zookeeper_connect:
                metadata_store = zookeeper_store(self.config)
            self.broker = Broker(self.node, self.config, host=host, port=port, metrics_port=metrics_port,
                                 metadata_store=metadata_store, ssl_context=ssl_context, sasl_users=sasl_users)
            refused = [(b, e) for b, e in zip(acls or (), self.broker.authorizer.create_acls(list(acls or ())))
                       if e is not None] if acls else []
            if refused:
                raise InvalidConfigError(f"acls: {refused[0][0]} refused: {refused[0][1]}")
        except BaseException:
            self.node.close()
            raise
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="seglog-broker", daemon=True)
        self._thread.start()
        self._ready.wait()
        if self._error is not None:
            self._thread.join()
            self.node.close()
            raise self._error

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_until_complete(self.broker.start())
        except BaseException as e:
            self._error = e
            self._ready.set()
            return
        self._ready.set()
        stopper = self._loop.create_task(self._stop_when_failed())
        self._loop.run_forever()
        stopper.cancel()
        self._loop.run_until_complete(self.broker.stop())
        self._loop.close()

    async def _stop_when_failed(self) -> None:
        await self.broker.wait_failed()
        self._loop.stop()

    @property
    def host(self) -> str:
        return self.broker.advertised_host()

    @property
    def port(self) -> int:
        return self.broker.port

    @property
    def bootstrap_servers(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def metrics_port(self) -> int | None:
        return self.broker.metrics_port

    def metrics(self) -> dict:
        return self.broker.metrics.snapshot()

    def stop(self) -> None:
        """Close connections and the node (flush, clean-shutdown markers). Idempotent."""
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join()

    def __enter__(self) -> "RunningBroker":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def serve(data_dir, config: BrokerConfig | Mapping[str, Any] | None = None, *, host: str = "127.0.0.1",
          port: int = 0, metrics_port: int | None = None, ssl=None, sasl_users: Mapping[str, str] | None = None,
          acls=None, **overrides) -> RunningBroker:
    """Start a broker on `data_dir` (a free port on 127.0.0.1 by default) in a background thread.

    ``ssl`` (a server ``ssl.SSLContext``, or a mapping of Kafka's ssl.* settings such as
    ``{"ssl.keystore.location": "server.pem"}``) and ``sasl_users`` ({user: password}, accepted by PLAIN,
    SCRAM-SHA-256 and SCRAM-SHA-512) make its one listener SSL, SASL_PLAINTEXT or SASL_SSL.

    ``acls`` (seglog.security.acls.AclBinding objects, e.g. ``AclBinding.allow("User:alice", "Read", "Topic",
    "orders")``) turns authorization on (authorizer.class.name, unless given, is Kafka's AclAuthorizer) and adds
    them to the data dir's ACLs; ``super_users="User:admin"`` and ``allow_everyone_if_no_acl_found=True`` are
    Kafka's super.users and allow.everyone.if.no.acl.found. The in-process Node is never checked.

    ``metrics_port``: serve /metrics and /metrics.json there too (0: a free port, see ``.metrics_port``).
    Keyword overrides use config names with '_' for '.' (e.g. ``auto_create_topics_enable=False``); being
    Python code, an unknown keyword is an error (InvalidConfigError), while unknown names in `config` (a
    server.properties mapping) are logged as a WARNING and ignored, as Kafka treats its properties file."""
    return RunningBroker(data_dir, config, host=host, port=port, metrics_port=metrics_port, ssl=ssl,
                         sasl_users=sasl_users, acls=acls, **overrides)


def zookeeper_store(config: BrokerConfig):
    """The ZooKeeper metadata store named by zookeeper.connect (host:port[/chroot])."""
    try:
        from ..cluster.zk import ZooKeeperMetadataStore
    except ImportError as e:
        raise InvalidConfigError(f"zookeeper.connect needs kazoo ({e}): pip install 'seglog[cluster]'") from e
    return ZooKeeperMetadataStore(config.zookeeper_connect, session_timeout=config.zookeeper_session_timeout_ms / 1000)


def run_forever(config: BrokerConfig, *, metrics_port: int | None = None) -> int:
    """Run a broker in the foreground until SIGINT/SIGTERM, then shut down cleanly. Returns an exit code: 0, or 1
    when a cluster member stopped because its data directory failed (Broker.log_dir_failed).
    With zookeeper.connect set it joins that cluster; otherwise it is a lone broker."""
    node = Node(config.log_dirs, config)
    try:
        store = zookeeper_store(config) if config.zookeeper_connect else None
        broker = Broker(node, config, metrics_port=metrics_port, metadata_store=store)
    except BaseException:
        node.close()
        raise

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        stopping = asyncio.ensure_future(stop.wait())
        starting = asyncio.ensure_future(broker.start())
        await asyncio.wait([starting, stopping], return_when=asyncio.FIRST_COMPLETED)
        if not starting.done():          # as Kafka's shutdown hook during start-up: stop, do not finish starting
            log.warning("broker %d: told to stop while starting; giving the start up", config.broker_id)
            broker.abandon_start()
            try:
                await starting
            except Exception as e:       # noqa: BLE001 - the start was given up: how it ended does not matter
                log.info("broker %d: start given up (%s)", config.broker_id, e)
            await broker.stop()
            return
        starting.result()                    # the start's error, if it failed (asyncio.run cancels `stopping`)
        print(f"seglog broker {config.broker_id} listening on "
              + ", ".join(f"{':'.join(map(str, broker.listener_address(li)))} ({li.name})" for li in broker.listeners)
              + (f", metrics on :{broker.metrics_port}" if broker.metrics_port else ""), flush=True)
        waits = [stopping, asyncio.ensure_future(broker.wait_failed())]
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waits:
                w.cancel()
            await broker.stop()

    try:
        asyncio.run(main())
    except BaseException:
        node.close()
        raise
    return 1 if broker.log_dir_failure is not None else 0
