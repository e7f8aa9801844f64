"""A faust-streaming app with ``processing_guarantee="exactly_once"`` (aiokafka transactional producers, one
per assigned partition, KIP-447's transactional id per partition): it upper-cases the records of ``words`` into
``upper``.

    python faust_eos.py BOOTSTRAP DATA_DIR
"""

import sys

import faust


def make_app(bootstrap: str, data_dir: str) -> faust.App:
    app = faust.App("eosupper", broker=f"kafka://{bootstrap}", store="memory://", datadir=data_dir,
                    topic_partitions=2, web_enabled=False, broker_commit_interval=0.5,
                    processing_guarantee="exactly_once", broker_session_timeout=10, broker_rebalance_timeout=10,
                    broker_heartbeat_interval=2)
    words = app.topic("words", key_serializer="raw", value_serializer="raw")
    upper = app.topic("upper", key_serializer="raw", value_serializer="raw")

    @app.agent(words)
    async def shout(stream):
        async for word in stream:
            await upper.send(key=word, value=word.upper())

    return app


if __name__ == "__main__":
    app = make_app(sys.argv[1], sys.argv[2])
    sys.argv = [sys.argv[0], "worker", "--loglevel", "warn", "--without-web"]
    app.main()
