"""A faust-streaming word count, the kind of app issue 12 restarted after kill -9: it counts the words of the
topic ``words`` (key and value: the word) in a table and commits every 0.5 s.

    python faust_wordcount.py BOOTSTRAP DATA_DIR [SESSION_S]

Faust runs aiokafka underneath (its own partition assignor, a changelog topic for the table). The session
and rebalance timeouts default to faust's 60 s; the tests pass a shorter one.
"""

import sys

import faust


def make_app(bootstrap: str, data_dir: str, session_s: float = 60.0) -> faust.App:
    app = faust.App("wordcount", broker=f"kafka://{bootstrap}", store="memory://", datadir=data_dir,
                    topic_partitions=2, web_enabled=False, broker_commit_interval=0.5,
                    broker_session_timeout=session_s, broker_rebalance_timeout=session_s,
                    broker_heartbeat_interval=min(3.0, session_s / 5))
    words = app.topic("words", key_serializer="raw", value_serializer="raw")
    counts = app.Table("counts", default=int)

    @app.agent(words)
    async def count(stream):
        async for word in stream:
            counts[word.decode()] += 1

    return app


if __name__ == "__main__":
    bootstrap, data_dir = sys.argv[1], sys.argv[2]
    session = float(sys.argv[3]) if len(sys.argv) > 3 else 60.0
    app = make_app(bootstrap, data_dir, session)
    sys.argv = [sys.argv[0], "worker", "--loglevel", "warn", "--without-web"]
    app.main()
