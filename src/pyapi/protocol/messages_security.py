"""Schemas of the security APIs: SaslHandshake, SaslAuthenticate, DescribeUserScramCredentials,
AlterUserScramCredentials, DescribeAcls, CreateAcls, DeleteAcls, and the delegation-token APIs (Create, Renew,
Expire, Describe: flexible from v2; v3 of Create and Describe add the owner and requester principals).

Written from Kafka's message JSON specs. SaslAuthenticate v2, both SCRAM credential APIs and the ACL APIs from v2
are flexible; the ACL APIs' pattern types come with v1 (v0 means LITERAL).
"""

from .schema import NEVER_FLEXIBLE, Api, array, field

SASL_HANDSHAKE = Api(17, "SaslHandshake", (0, 1), flexible=NEVER_FLEXIBLE, request=(
    field("mechanism", "string"),
), response=(
    field("error_code", "int16"),
    field("mechanisms", "[]string"),
))

SASL_AUTHENTICATE = Api(36, "SaslAuthenticate", (0, 2), flexible=2, request=(
    field("auth_bytes", "bytes"),
), response=(
    field("error_code", "int16"),
    field("error_message", "string", nullable="0+"),
    field("auth_bytes", "bytes"),
    field("session_lifetime_ms", "int64", "1+"),
))

DESCRIBE_USER_SCRAM_CREDENTIALS = Api(50, "DescribeUserScramCredentials", (0, 0), flexible=0, request=(
    array("users", field("name", "string"), nullable="0+"),
), response=(
    field("throttle_time_ms", "int32"),
    field("error_code", "int16"),
    field("error_message", "string", nullable="0+"),
    array("results",
          field("user", "string"),
          field("error_code", "int16"),
          field("error_message", "string", nullable="0+"),
          array("credential_infos",
                field("mechanism", "int8"),
                field("iterations", "int32"))),
))

ALTER_USER_SCRAM_CREDENTIALS = Api(51, "AlterUserScramCredentials", (0, 0), flexible=0, request=(
    array("deletions",
          field("name", "string"),
          field("mechanism", "int8")),
    array("upsertions",
          field("name", "string"),
          field("mechanism", "int8"),
          field("iterations", "int32"),
          field("salt", "bytes"),
          field("salted_password", "bytes")),
), response=(
    field("throttle_time_ms", "int32"),
    array("results",
          field("user", "string"),
          field("error_code", "int16"),
          field("error_message", "string", nullable="0+")),
))

DESCRIBE_ACLS = Api(29, "DescribeAcls", (0, 3), flexible=2, request=(
    field("resource_type_filter", "int8"),
    field("resource_name_filter", "string", nullable="0+"),
    field("pattern_type_filter", "int8", "1+", default=3),
    field("principal_filter", "string", nullable="0+"),
    field("host_filter", "string", nullable="0+"),
    field("operation", "int8"),
    field("permission_type", "int8"),
), response=(
    field("throttle_time_ms", "int32"),
    field("error_code", "int16"),
    field("error_message", "string", nullable="0+"),
    array("resources",
          field("resource_type", "int8"),
          field("resource_name", "string"),
          field("pattern_type", "int8", "1+", default=3),
          array("acls",
                field("principal", "string"),
                field("host", "string"),
                field("operation", "int8"),
                field("permission_type", "int8"))),
))

CREATE_ACLS = Api(30, "CreateAcls", (0, 3), flexible=2, request=(
    array("creations",
          field("resource_type", "int8"),
          field("resource_name", "string"),
          field("resource_pattern_type", "int8", "1+", default=3),
          field("principal", "string"),
          field("host", "string"),
          field("operation", "int8"),
          field("permission_type", "int8")),
), response=(
    field("throttle_time_ms", "int32"),
    array("results",
          field("error_code", "int16"),
          field("error_message", "string", nullable="0+")),
))

DELETE_ACLS = Api(31, "DeleteAcls", (0, 3), flexible=2, request=(
    array("filters",
          field("resource_type_filter", "int8"),
          field("resource_name_filter", "string", nullable="0+"),
          field("pattern_type_filter", "int8", "1+", default=3),
          field("principal_filter", "string", nullable="0+"),
          field("host_filter", "string", nullable="0+"),
          field("operation", "int8"),
          field("permission_type", "int8")),
), response=(
    field("throttle_time_ms", "int32"),
    array("filter_results",
          field("error_code", "int16"),
          field("error_message", "string", nullable="0+"),
          array("matching_acls",
                field("error_code", "int16"),
                field("error_message", "string", nullable="0+"),
                field("resource_type", "int8"),
                field("resource_name", "string"),
                field("pattern_type", "int8", "1+", default=3),
                field("principal", "string"),
                field("host", "string"),
                field("operation", "int8"),
                field("permission_type", "int8"))),
))

# delegation tokens: seglog answers them as a Kafka broker without delegation.token.secret.key (no tokens)
CREATE_DELEGATION_TOKEN = Api(38, "CreateDelegationToken", (0, 3), flexible=2, request=(
    field("owner_principal_type", "string", "3+", nullable="3+"),
    field("owner_principal_name", "string", "3+", nullable="3+"),
    array("renewers",
          field("principal_type", "string"),
          field("principal_name", "string")),
    field("max_lifetime_ms", "int64"),
), response=(
    field("error_code", "int16"),
    field("principal_type", "string"),
    field("principal_name", "string"),
    field("token_requester_principal_type", "string", "3+"),
    field("token_requester_principal_name", "string", "3+"),
    field("issue_timestamp_ms", "int64"),
    field("expiry_timestamp_ms", "int64"),
    field("max_timestamp_ms", "int64"),
    field("token_id", "string"),
    field("hmac", "bytes"),
    field("throttle_time_ms", "int32"),
))

RENEW_DELEGATION_TOKEN = Api(39, "RenewDelegationToken", (0, 2), flexible=2, request=(
    field("hmac", "bytes"),
    field("renew_period_ms", "int64"),
), response=(
    field("error_code", "int16"),
    field("expiry_timestamp_ms", "int64"),
    field("throttle_time_ms", "int32"),
))

EXPIRE_DELEGATION_TOKEN = Api(40, "ExpireDelegationToken", (0, 2), flexible=2, request=(
    field("hmac", "bytes"),
    field("expiry_time_period_ms", "int64"),
), response=(
    field("error_code", "int16"),
    field("expiry_timestamp_ms", "int64"),
    field("throttle_time_ms", "int32"),
))

DESCRIBE_DELEGATION_TOKEN = Api(41, "DescribeDelegationToken", (0, 3), flexible=2, request=(
    array("owners",
          field("principal_type", "string"),
          field("principal_name", "string"),
          nullable="0+"),
), response=(
    field("error_code", "int16"),
    array("tokens",
          field("principal_type", "string"),
          field("principal_name", "string"),
          field("token_requester_principal_type", "string", "3+"),
          field("token_requester_principal_name", "string", "3+"),
          field("issue_timestamp", "int64"),
          field("expiry_timestamp", "int64"),
          field("max_timestamp", "int64"),
          field("token_id", "string"),
          field("hmac", "bytes"),
          array("renewers",
                field("principal_type", "string"),
                field("principal_name", "string"))),
    field("throttle_time_ms", "int32"),
))

APIS = (DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS, SASL_HANDSHAKE, SASL_AUTHENTICATE, DESCRIBE_USER_SCRAM_CREDENTIALS,
        ALTER_USER_SCRAM_CREDENTIALS, CREATE_DELEGATION_TOKEN, RENEW_DELEGATION_TOKEN, EXPIRE_DELEGATION_TOKEN,
        DESCRIBE_DELEGATION_TOKEN)
