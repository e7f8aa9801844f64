"""Schemas of the security APIs: SaslHandshake, SaslAuthenticate, DescribeUserScramCredentials,
AlterUserScramCredentials.

Written from Kafka's message JSON specs. SaslAuthenticate v2 and both SCRAM credential APIs are flexible.
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

APIS = (SASL_HANDSHAKE, SASL_AUTHENTICATE, DESCRIBE_USER_SCRAM_CREDENTIALS, ALTER_USER_SCRAM_CREDENTIALS)
