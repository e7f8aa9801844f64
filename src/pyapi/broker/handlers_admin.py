"""Handlers of the admin APIs: CreateTopics, DeleteTopics, CreatePartitions, ElectLeaders,
AlterPartitionReassignments, ListPartitionReassignments, DescribeCluster, DescribeLogDirs, DescribeConfigs,
AlterConfigs, IncrementalAlterConfigs."""

from __future__ import annotations

import dataclasses

from .. import errors
from ..config import KAFKA_NAMES, BrokerConfig, _Key
from ..dynamic_config import LOG_SYNONYMS, config_text
from ..errors import SeglogError
from ..replication.throttle import DYNAMIC_BROKER_KEYS, LONG_MAX
from ..protocol.schema import NIL_UUID
from ..security.acls import AclOperation as Op
from ..security.acls import ResourceType as Res
from ..topic_names import validate_topic_name
from .handler_support import (CONFIG_SOURCE_DEFAULT, CONFIG_SOURCE_TOPIC, EXCESSIVE_BATCH, LIST_CONFIGS,
                              MAX_RECORDS_PER_USER_OP, OP_APPEND, OP_DELETE, OP_SET, OP_SUBTRACT, RESOURCE_BROKER,
                              RESOURCE_TOPIC, TOPIC_KEYS, _err, _off_loop, authorized_operations, by_topic, config_type,
                              error_fields)

BROKER_KEYS = {f.metadata["key"].kafka: f.metadata["key"] for f in dataclasses.fields(BrokerConfig)
               if "key" in f.metadata}
RATE_KEY = _Key("leader.replication.throttled.rate", "long")       # the type of every rate (DYNAMIC_BROKER_KEYS)
BROKER_LIST_DEFAULTS = {f.metadata["key"].kafka: config_text(f.default) for f in dataclasses.fields(BrokerConfig)
                        if "key" in f.metadata and f.metadata["key"].kind == "list"}
"""Kafka's default of each broker list config (IncrementalAlterConfigs APPEND / SUBTRACT start from it)."""


class AdminHandlers:
    """CreateTopics, DeleteTopics, CreatePartitions, DescribeCluster, DescribeLogDirs, DescribeConfigs,
    AlterConfigs, IncrementalAlterConfigs: a part of handlers.Handlers (``self.broker``, ``self.node``,
    ``self.config``)."""

    # -- admin ------------------------------------------------------------------------------------------------

    def may_create_topic(self, name: str) -> bool:
        """Create on the cluster or on the topic (Kafka's rule for CreateTopics and auto-creation)."""
        return self.broker.allowed(Op.CREATE, Res.CLUSTER) or self.broker.allowed(Op.CREATE, Res.TOPIC, name)

    def check_topic(self, name: str, operation: Op) -> None:
        if not self.broker.allowed(operation, Res.TOPIC, name):
            raise errors.TopicAuthorizationFailedError(f"Not authorized to access topics: [{name}]")

    async def handle_create_topics(self, header, body):
        records = 0
        for t in body["topics"]:
            n = self.config.num_partitions if t["num_partitions"] == -1 else t["num_partitions"]
            records += 1 + max(n, 0)
        if records > MAX_RECORDS_PER_USER_OP:
            return {"topics": _excessive(body["topics"])}
        results = []
        strict = header.api_version >= 6           # controller_mutation_rate: refused (v6+) or throttled after
        for t in body["topics"]:
            name = t["name"]
            try:
                if not self.may_create_topic(name):
                    raise errors.TopicAuthorizationFailedError(f"Not authorized to create topic {name}")
                configs = {c["name"]: c["value"] for c in t["configs"] if c["value"] is not None}
                partitions = None if t["num_partitions"] == -1 else t["num_partitions"]
                rf = None if t["replication_factor"] == -1 else t["replication_factor"]
                assignment = None
                if t["assignments"]:
                    if partitions is not None or rf is not None:
                        raise errors.InvalidRequestError(
                            "Both numPartitions or replicationFactor and replicasAssignments were set. "
                            "Both cannot be used at the same time.")
                    assignment = {a["partition_index"]: a["broker_ids"] for a in t["assignments"]}
                    if len(assignment) != len(t["assignments"]):
                        raise errors.InvalidReplicaAssignmentError(
                            "Partitions should be a consecutive 0-based integer sequence")
                    partitions, rf = len(assignment), len(t["assignments"][0]["broker_ids"])
                mutating = not body["validate_only"]
                if mutating and strict:
                    self.broker.check_mutations()
                await _off_loop(self.broker.view.create_topic, name, partitions, configs, rf,
                                validate_only=body["validate_only"], timeout_ms=body["timeout_ms"],
                                assignment=assignment)
                if mutating:
                    self.broker.record_mutations(self.config.num_partitions if partitions is None else partitions,
                                                 strict)
                created = self._created_topic(partitions, rf, configs)
                if not self.broker.allowed(Op.DESCRIBE_CONFIGS, Res.TOPIC, name):    # v5+: configs withheld
                    created.update(configs=[], topic_config_error_code=errors.TopicAuthorizationFailedError.code)
                results.append({"name": name, "error_code": 0, "error_message": None, **created})
            except SeglogError as e:
                results.append({"name": name, "error_code": _err(e), "error_message": str(e)})
        return {"topics": results}

    def _created_topic(self, partitions: int | None, rf: int | None, configs: dict) -> dict:
        """CreateTopics v5+ describes each created topic: its partition count, replication factor and configs."""
        values = self.node.config.log_config().with_kafka(configs).to_kafka()
        return {"num_partitions": self.config.num_partitions if partitions is None else partitions,
                "replication_factor": self.config.default_replication_factor if rf is None else rf,
                "configs": [{"name": k, "value": values[k], "read_only": False, "is_sensitive": False,
                             "config_source": CONFIG_SOURCE_TOPIC if k in configs else CONFIG_SOURCE_DEFAULT}
                            for k in KAFKA_NAMES]}

    async def handle_delete_topics(self, header, body):
        """DeleteTopics; v6+ names each topic by name or by topic id (exactly one), as Kafka: both in one entry
        fail the whole request INVALID_REQUEST, neither fails that entry; an id no topic has is UNKNOWN_TOPIC_ID;
        an id whose topic the principal may not describe answers TOPIC_AUTHORIZATION_FAILED without its name.
        v6+ answers carry the id as asked (zero for a topic named)."""
        if header.api_version < 6:
            asked = [(name, None) for name in body["topic_names"]]
        else:
            asked = [(t["name"], None if t["topic_id"].int == 0 else t["topic_id"]) for t in body["topics"]]
            if any(name is not None and tid is not None for name, tid in asked):
                e = errors.InvalidRequestError("Topic name and topic ID can not both be specified.")
                return {"responses": [{"name": t["name"], "topic_id": t["topic_id"], "error_code": e.code,
                                       "error_message": str(e)} for t in body["topics"]]}
        out = []
        strict = header.api_version >= 5           # controller_mutation_rate: refused (v5+) or throttled after
        for name, tid in asked:
            answer = {"name": name, "topic_id": tid or NIL_UUID, "error_code": 0, "error_message": None}
            try:
                if tid is not None:
                    answer["name"] = name = self.broker.view.topic_name(tid)
                    if not self.broker.allowed(Op.DESCRIBE, Res.TOPIC, name):
                        answer["name"] = None
                        raise errors.TopicAuthorizationFailedError("Not authorized to describe the topic of id "
                                                                   f"{tid}")
                elif name is None:
                    raise errors.InvalidRequestError("Neither topic name nor id were specified.")
                self.check_topic(name, Op.DELETE)
                partitions = self._partition_count(name)
                if strict and partitions:
                    self.broker.check_mutations()
                await _off_loop(self.broker.view.delete_topic, name)
                self.broker.record_mutations(partitions, strict)
            except SeglogError as e:
                answer.update(error_code=_err(e), error_message=str(e))
            out.append(answer)
        return {"responses": out}

    def _partition_count(self, name: str) -> int:
        """The topic's partition count, 0 for a topic unknown here (the request's own call says so)."""
        try:
            return self.broker.view.topic_partitions(name)[0]
        except SeglogError:
            return 0

    async def handle_create_partitions(self, header, body):
        records = 0
        for t in body["topics"]:
            try:
                records += max(t["count"] - self.broker.view.topic_partitions(t["name"])[0], 0)
            except SeglogError:
                pass                                     # answered per topic below
        if records > MAX_RECORDS_PER_USER_OP:
            return {"results": _excessive(body["topics"])}
        out = []
        strict = header.api_version >= 3           # controller_mutation_rate: refused (v3+) or throttled after
        for t in body["topics"]:
            try:
                self.check_topic(t["name"], Op.ALTER)
                assignments = None if t["assignments"] is None else [a["broker_ids"] for a in t["assignments"]]
                added = max(t["count"] - self._partition_count(t["name"]), 0)
                if strict and not body["validate_only"]:
                    self.broker.check_mutations()
                await _off_loop(self.broker.view.create_partitions, t["name"], t["count"],
                                validate_only=body["validate_only"], timeout_ms=body["timeout_ms"],
                                assignments=assignments)
                if not body["validate_only"]:
                    self.broker.record_mutations(added, strict)
                out.append({"name": t["name"], "error_code": 0, "error_message": None})
            except SeglogError as e:
                out.append({"name": t["name"], "error_code": _err(e), "error_message": str(e)})
        return {"results": out}

    async def handle_elect_leaders(self, header, body):
        """ElectLeaders (v0 preferred; v1+ election_type 0 preferred, 1 unclean) through the view: the controller
        elects in a cluster, a lone broker never needs to. Results per topic, per partition asked (null: all).
        Needs Alter on the cluster: else CLUSTER_AUTHORIZATION_FAILED for the request and each partition asked."""
        election_type = body["election_type"] if header.api_version >= 1 else 0
        if election_type not in (0, 1):
            return {"error_code": errors.InvalidRequestError.code, "replica_election_results": []}
        asked = None if body["topic_partitions"] is None else [
            (t["topic"], p) for t in body["topic_partitions"] for p in dict.fromkeys(t["partitions"])]
        top = 0
        if self.broker.allowed(Op.ALTER, Res.CLUSTER):
            results = await _off_loop(self.broker.view.elect_leaders, asked, election_type == 1)
        else:
            denied = errors.ClusterAuthorizationFailedError("Cluster authorization failed (Alter on the cluster)")
            top, results = denied.code, dict.fromkeys(asked or (), denied)
        answers = by_topic(results.items(), lambda p, e: {"partition_id": p, **error_fields(e)})
        return {"error_code": top, "replica_election_results": [{"topic": t, "partition_result": parts}
                                                              for t, parts in answers.items()]}

    async def handle_alter_partition_reassignments(self, header, body):
        """AlterPartitionReassignments (KIP-455) through the view: the controller starts or cancels (replicas
        null) each partition's reassignment; another broker answers NOT_CONTROLLER (clients go to the controller).
        Needs Alter on the cluster: else CLUSTER_AUTHORIZATION_FAILED at the top and for each partition, as
        Kafka's error response."""
        changes = {(t["name"], p["partition_index"]): p["replicas"] for t in body["topics"] for p in t["partitions"]}
        if not self.broker.allowed(Op.ALTER, Res.CLUSTER):
            e = errors.ClusterAuthorizationFailedError("Cluster authorization failed (Alter on the cluster)")
            return {"error_code": e.code, "error_message": str(e),
                    "responses": _reassignment_results(dict.fromkeys(changes, e))}
        try:
            results = await _off_loop(self.broker.view.alter_partition_reassignments, changes)
        except SeglogError as e:                              # NOT_CONTROLLER
            return {"error_code": _err(e), "error_message": str(e), "responses": []}
        return {"error_code": 0, "error_message": None, "responses": _reassignment_results(results)}

    async def handle_list_partition_reassignments(self, header, body):
        """ListPartitionReassignments: the partitions being reassigned (of those asked; null: all), with their
        full replica set and the replicas being added and removed. Describe on the cluster."""
        asked = None if body["topics"] is None else [(t["name"], p) for t in body["topics"]
                                                     for p in t["partition_indexes"]]
        if not self.broker.allowed(Op.DESCRIBE, Res.CLUSTER):
            return {"error_code": errors.ClusterAuthorizationFailedError.code,
                    "error_message": "Cluster authorization failed (Describe on the cluster)", "topics": []}
        try:
            found = await _off_loop(self.broker.view.list_partition_reassignments, asked)
        except SeglogError as e:
            return {"error_code": _err(e), "error_message": str(e), "topics": []}
        answers = by_topic(sorted(found.items()), lambda p, ra: {
            "partition_index": p, "replicas": list(ra.replicas), "adding_replicas": list(ra.adding),
            "removing_replicas": list(ra.removing)})
        return {"error_code": 0, "error_message": None,
                "topics": [{"name": t, "partitions": parts} for t, parts in answers.items()]}

    async def handle_describe_cluster(self, header, body):
        view = self.broker.view
        if body["endpoint_type"] != 1:                # 2: KRaft controllers, which a broker is not
            return {"error_code": errors.MismatchedEndpointTypeError.code, "cluster_id": self.node.cluster_id or "",
                    "endpoint_type": body["endpoint_type"],
                    "error_message": "The request was sent to an endpoint of type BROKER, but we wanted an "
                                     "endpoint of type CONTROLLER"}
        operations = -2147483648                      # not asked for (KIP-430); 0 without Describe on the cluster
        if body.get("include_cluster_authorized_operations"):
            operations = (authorized_operations(self.broker, Res.CLUSTER)
                          if self.broker.allowed(Op.DESCRIBE, Res.CLUSTER) else 0)
        return {"error_code": 0, "error_message": None, "cluster_id": self.node.cluster_id or "",
                "controller_id": view.controller_id(), "cluster_authorized_operations": operations,
                "brokers": [{"broker_id": b["node_id"], "host": b["host"], "port": b["port"], "rack": b["rack"]}
                            for b in view.brokers()]}

    async def handle_describe_log_dirs(self, header, body):
        """Each log dir of this broker: the partitions it holds (of the topics asked for, or all; future logs of
        replicas moving there with is_future_key), their sizes and offset lags, and the disk's total and usable
        bytes (v4+). Describe on the cluster, else no log dir and CLUSTER_AUTHORIZATION_FAILED (v3+)."""
        if not self.broker.allowed(Op.DESCRIBE, Res.CLUSTER):
            return {"error_code": errors.ClusterAuthorizationFailedError.code, "results": []}
        asked = None if body["topics"] is None else {(t["topic"], p) for t in body["topics"] for p in t["partitions"]}
        found = await self.broker.on_disk(self.node.describe_log_dirs, asked)
        return {"error_code": 0, "results": [
            {"error_code": 0, "log_dir": d["path"], "total_bytes": d["total_bytes"], "usable_bytes": d["usable_bytes"],
             "topics": [{"name": t, "partitions": parts} for t, parts in by_topic(
                 [((t, p), (size, lag, future)) for t, p, size, lag, future in d["partitions"]], lambda p, r: {
                     "partition_index": p, "partition_size": r[0], "offset_lag": r[1], "is_future_key": r[2]}
             ).items()]}
            for d in found]}

    async def handle_alter_replica_log_dirs(self, header, body):
        """AlterReplicaLogDirs: move this broker's replicas of the partitions named to the log dirs named
        (seglog.node.Node.alter_replica_log_dirs); per partition NONE or the error. Alter on the cluster, else
        CLUSTER_AUTHORIZATION_FAILED for every partition."""
        moves = {(t["name"], p): d["path"] for d in body["dirs"] for t in d["topics"] for p in t["partitions"]}
        if not self.broker.allowed(Op.ALTER, Res.CLUSTER):
            done = dict.fromkeys(moves, errors.ClusterAuthorizationFailedError("Cluster authorization failed"))
        else:
            done = await self.broker.on_disk(self.node.alter_replica_log_dirs, moves)
        answers = by_topic(sorted(done.items()), lambda p, e: {"partition_index": p, "error_code": _err(e) if e else 0})
        return {"results": [{"topic_name": t, "partitions": parts} for t, parts in answers.items()]}

    async def handle_describe_configs(self, header, body):
        results = []
        for r in body["resources"]:
            keys = r["configuration_keys"] or None              # as Kafka: null or empty asks for every config
            try:
                self._check_configs(r["resource_type"], r["resource_name"], Op.DESCRIBE_CONFIGS)
                synonyms = bool(body.get("include_synonyms"))
                if r["resource_type"] == RESOURCE_TOPIC:
                    configs = self._topic_configs(r["resource_name"], keys, synonyms)
                elif r["resource_type"] == RESOURCE_BROKER:
                    configs = self._broker_configs(r["resource_name"], keys, synonyms)
                else:
                    raise errors.InvalidRequestError(f"unsupported resource type {r['resource_type']}")
                results.append({"error_code": 0, "error_message": None, "resource_type": r["resource_type"],
                                "resource_name": r["resource_name"], "configs": configs})
            except SeglogError as e:
                results.append({"error_code": _err(e), "error_message": str(e), "resource_type": r["resource_type"],
                                "resource_name": r["resource_name"], "configs": []})
        return {"results": results}

    async def handle_alter_configs(self, header, body):
        """AlterConfigs: each topic's overrides become exactly the configs given (Kafka's replace semantics)."""
        def new_overrides(name: str, configs) -> dict[str, str]:
            out = {}
            for c in configs:
                if c["value"] is None:
                    raise errors.InvalidRequestError(f"Null value not supported for : {c['name']}")
                out[c["name"]] = c["value"]
            return out
        return {"responses": await self._alter_configs(body, new_overrides,
                                                       lambda current, configs: new_overrides("", configs))}

    async def handle_incremental_alter_configs(self, header, body):
        """IncrementalAlterConfigs: SET / DELETE each named config, APPEND / SUBTRACT items of a list config
        (cleanup.policy), over the topic's current overrides."""
        def new_broker_configs(current: dict[str, str], configs) -> dict[str, str]:
            """As Kafka's prepareIncrementalConfigs over the entity's stored dynamic configs: APPEND / SUBTRACT
            of a list config start from its stored value, else from Kafka's default."""
            for c in configs:
                key, op, value = c["name"], c["config_operation"], c["value"]
                if op == OP_SET:
                    if value is None:
                        raise errors.InvalidRequestError(f"Null value not supported for : {key}")
                    current[key] = value
                elif op == OP_DELETE:
                    current.pop(key, None)
                elif op in (OP_APPEND, OP_SUBTRACT):
                    verb = "append" if op == OP_APPEND else "subtract"
                    if key not in BROKER_LIST_DEFAULTS:
                        raise errors.InvalidConfigError(f"Config value {verb} is not allowed for config key: {key}")
                    items = [v.strip() for v in current.get(key, BROKER_LIST_DEFAULTS[key]).split(",") if v.strip()]
                    given = [v.strip() for v in (value or "").split(",") if v.strip()]
                    items = items + [v for v in given if v not in items] if op == OP_APPEND else \
                        [v for v in items if v not in given]
                    current[key] = ",".join(items)
                else:
                    raise errors.InvalidRequestError(f"Unknown config operation {op} for config key: {key}")
            return current

        def new_overrides(name: str, configs) -> dict[str, str]:
            overrides = self.broker.view.topic_overrides(name)
            effective = None
            for c in configs:
                key, op, value = c["name"], c["config_operation"], c["value"]
                if key not in KAFKA_NAMES:
                    raise errors.InvalidConfigError(f"Unknown topic config name: {key}")
                if op == OP_SET:
                    if value is None:
                        raise errors.InvalidRequestError(f"Null value not supported for : {key}")
                    overrides[key] = value
                elif op == OP_DELETE:
                    overrides.pop(key, None)
                elif op in (OP_APPEND, OP_SUBTRACT):
                    verb = "append" if op == OP_APPEND else "subtract"
                    if key not in LIST_CONFIGS:
                        raise errors.InvalidConfigError(f"Config value {verb} is not allowed for config key: {key}")
                    if effective is None:
                        effective = self.node.config.log_config().with_kafka(overrides).to_kafka()
                    current = [v for v in overrides.get(key, effective[key]).split(",") if v.strip()]
                    items = [v.strip() for v in (value or "").split(",") if v.strip()]
                    if op == OP_APPEND:
                        current += [v for v in items if v not in current]
                    else:
                        current = [v for v in current if v not in items]
                    overrides[key] = ",".join(current)
                else:
                    raise errors.InvalidRequestError(f"Unknown config operation {op} for config key: {key}")
            return overrides
        return {"responses": await self._alter_configs(body, new_overrides, new_broker_configs)}

    async def _alter_configs(self, body, new_overrides, new_broker_configs) -> list[dict]:
        """The per-resource answers of an (Incremental)AlterConfigs request. Topic resources: the new overrides
        (``new_overrides(topic, configs)``) are validated as a whole, then stored (not with validate_only).
        Broker resources (this broker's id, or "" for every broker's default): the entity's new dynamic configs
        (``new_broker_configs(current, configs)``) are checked and stored by the view, which applies them at
        once (seglog.dynamic_config); a config seglog cannot change at run time is INVALID_REQUEST."""
        seen: dict[tuple[int, str], int] = {}
        for r in body["resources"]:
            key = (r["resource_type"], r["resource_name"])
            seen[key] = seen.get(key, 0) + 1
        out = []
        for r in body["resources"]:
            rtype, name = r["resource_type"], r["resource_name"]
            answer = {"error_code": 0, "error_message": None, "resource_type": rtype, "resource_name": name}
            try:
                if seen[(rtype, name)] > 1:
                    raise errors.InvalidRequestError(f"Error due to duplicate resource {name!r} of type {rtype}")
                self._check_configs(rtype, name, Op.ALTER_CONFIGS)
                names = [c["name"] for c in r["configs"]]
                if len(set(names)) != len(names):
                    raise errors.InvalidRequestError("Error due to duplicate config keys")
                if rtype == RESOURCE_TOPIC:
                    validate_topic_name(name)
                    self.broker.view.topic_partitions(name)              # UNKNOWN_TOPIC_OR_PARTITION
                    overrides = new_overrides(name, r["configs"])
                    await _off_loop(self.broker.view.alter_topic_config, name, overrides,
                                    validate_only=body["validate_only"])
                elif rtype == RESOURCE_BROKER:
                    if name not in ("", str(self.config.broker_id)):
                        raise errors.InvalidRequestError(f"Unexpected broker id, expected {self.config.broker_id} "
                                                         f"or empty string, but received {name}")
                    await _off_loop(self.broker.view.alter_broker_config, name,
                                    lambda current, configs=r["configs"]: new_broker_configs(current, configs),
                                    validate_only=body["validate_only"])
                else:
                    raise errors.InvalidRequestError(f"Unsupported resource type {rtype}: seglog alters the configs "
                                                     f"of topics ({RESOURCE_TOPIC}) only")
            except SeglogError as e:
                answer.update(error_code=_err(e), error_message=str(e))
            out.append(answer)
        return out

    def _check_configs(self, resource_type: int, name: str, operation: Op) -> None:
        """DescribeConfigs / AlterConfigs on the topic (TOPIC_AUTHORIZATION_FAILED) or, for a broker's
        configs, on the cluster (CLUSTER_AUTHORIZATION_FAILED)."""
        if resource_type == RESOURCE_TOPIC:
            self.check_topic(name, operation)
        elif resource_type == RESOURCE_BROKER:
            self.broker.authorize_cluster(operation)

    def _topic_configs(self, name: str, keys, synonyms: bool):
        """A topic's configs: its overrides (TOPIC_CONFIG), else the broker config each falls back to, with that
        one's source (Kafka's createTopicConfigEntry over its TopicConfigSynonyms)."""
        overrides = self.broker.view.topic_overrides(name)
        dynamic = self.node.dynamic
        values = self.node.config.log_config().with_kafka(overrides).to_kafka()
        out = []
        for k in KAFKA_NAMES:
            if keys is not None and k not in keys:
                continue
            found = dynamic.source_of(LOG_SYNONYMS[k]) if k in LOG_SYNONYMS else []
            if k in overrides:
                found.insert(0, (k, values[k], CONFIG_SOURCE_TOPIC))
            source = found[0][2] if found else CONFIG_SOURCE_DEFAULT
            out.append({"name": k, "value": values[k], "read_only": False, "config_source": source,
                        "is_default": source == CONFIG_SOURCE_DEFAULT, "is_sensitive": False,
                        "synonyms": _synonyms(found) if synonyms else [],
                        "config_type": config_type(TOPIC_KEYS[k]), "documentation": None})
        return out

    def _broker_configs(self, name: str, keys, synonyms: bool):
        """This broker's configs (``name`` its id), each with its source and whether it is dynamic here
        (read_only false exactly for the configs the view changes at run time); for the default resource
        (``name`` ""), the dynamic defaults set, as Kafka describes them."""
        if name not in ("", str(self.config.broker_id)):
            raise errors.InvalidRequestError(f"this is broker {self.config.broker_id}, not {name}")
        dynamic, dynamic_names = self.node.dynamic, self.broker.view.dynamic_names
        per_broker = name != ""
        if per_broker:
            current = dynamic.current
            values = {key.kafka: (config_text(getattr(current, f.name)), key)
                      for f in dataclasses.fields(current) if (key := f.metadata.get("key")) is not None}
            for k in DYNAMIC_BROKER_KEYS:       # seglog.replication.throttle; unset: no limit
                if k in dynamic_names:
                    values[k] = (dynamic.broker.get(k, dynamic.default.get(k, str(LONG_MAX))), RATE_KEY)
        else:
            values = {k: (v, BROKER_KEYS.get(k, RATE_KEY)) for k, v in sorted(dynamic.default.items())}
        out = []
        for k, (value, key) in values.items():
            if keys is not None and k not in keys:
                continue
            found = dynamic.source_of(k, per_broker)
            source = found[0][2] if found else CONFIG_SOURCE_DEFAULT
            out.append({"name": k, "value": None if key.secret else value, "read_only": k not in dynamic_names,
                        "config_source": source, "is_default": source == CONFIG_SOURCE_DEFAULT,
                        "is_sensitive": key.secret, "synonyms": _synonyms(found, key.secret) if synonyms else [],
                        "config_type": config_type(key), "documentation": None})
        return out


def _synonyms(found, secret: bool = False) -> list[dict]:
    """DescribeConfigs synonyms (v1+) of (name, value, source) entries; a secret's values are null."""
    return [{"name": n, "value": None if secret else v, "source": src} for n, v, src in found]


def _excessive(topics: list[dict]) -> list[dict]:
    """The answer to an admin request over MAX_RECORDS_PER_USER_OP: POLICY_VIOLATION for every topic."""
    return [{"name": t["name"], "error_code": errors.PolicyViolationError.code, "error_message": EXCESSIVE_BATCH}
            for t in topics]

def _reassignment_results(results: dict) -> list[dict]:
    """AlterPartitionReassignments' per-topic answers from {(topic, partition): None or the error}."""
    return [{"name": t, "partitions": parts}
            for t, parts in by_topic(results.items(), lambda p, e: {"partition_index": p, **error_fields(e)}).items()]
