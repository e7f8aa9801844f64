"""DescribeClientQuotas and AlterClientQuotas (KIP-546), authorized as Kafka's: DescribeConfigs on the cluster
to describe, AlterConfigs on the cluster to alter (CLUSTER_AUTHORIZATION_FAILED otherwise). The configs are
the broker's seglog.quotas store (its data dir alone, ZooKeeper in a cluster: every broker answers for all)."""

from __future__ import annotations

from ..errors import ClusterAuthorizationFailedError, SeglogError
from ..protocol import ApiKey
from ..quotas.entities import entity_from_wire, entity_to_wire
from ..security.acls import AclOperation, ResourceType
from .handler_support import _off_loop
from .security_handlers import CLUSTER_DENIED


async def handle_describe_client_quotas(handlers, header, body):
    broker = handlers.broker
    if not broker.allowed(AclOperation.DESCRIBE_CONFIGS, ResourceType.CLUSTER):
        return {"error_code": ClusterAuthorizationFailedError.code, "error_message": CLUSTER_DENIED, "entries": None}
    components = [(c["entity_type"], c["match_type"], c["match"]) for c in body["components"]]
    try:
        found = await _off_loop(broker.quotas.describe, components, body["strict"])
    except SeglogError as e:
        return {"error_code": e.code, "error_message": str(e), "entries": None}
    return {"error_code": 0, "error_message": None, "entries": [
        {"entity": entity_to_wire(entity), "values": [{"key": k, "value": v} for k, v in sorted(values.items())]}
        for entity, values in found.items()]}


async def handle_alter_client_quotas(handlers, header, body):
    broker = handlers.broker
    allowed = broker.allowed(AclOperation.ALTER_CONFIGS, ResourceType.CLUSTER)
    results = []
    for entry in body["entries"]:
        result = {"error_code": 0, "error_message": None, "entity": entry["entity"]}
        results.append(result)
        if not allowed:
            result.update(error_code=ClusterAuthorizationFailedError.code, error_message=CLUSTER_DENIED)
            continue
        try:
            entity = entity_from_wire(entry["entity"])
            await _off_loop(broker.quotas.alter, entity, [(op["key"], op["value"], op["remove"]) for op in entry["ops"]],
                            body["validate_only"])
        except SeglogError as e:
            result.update(error_code=e.code, error_message=str(e))
    return {"entries": results}


QUOTA_HANDLERS = {
    ApiKey.DESCRIBE_CLIENT_QUOTAS: handle_describe_client_quotas,
    ApiKey.ALTER_CLIENT_QUOTAS: handle_alter_client_quotas,
}
