"""Which S3 stores send their payloads unsigned: only where the transport guards the bytes
(TLS, or a loopback endpoint), and never against a choice the user made."""

from __future__ import annotations

import pytest

from langgraph_pg_durable.store import open_store, unsigned_payload_fits


@pytest.mark.parametrize(
    ("url", "config", "environ", "fits"),
    [
        ("s3://bucket/prefix", {}, {}, True),  # AWS itself, over HTTPS
        ("s3a://bucket/prefix", {"region": "eu-west-1"}, {}, True),
        ("s3://bucket/p", {"endpoint": "https://minio.example:9000"}, {}, True),
        ("s3://bucket/p", {"aws_endpoint": "http://127.0.0.1:8333"}, {}, True),
        ("s3://bucket/p", {"AWS_ENDPOINT": "http://localhost:8333"}, {}, True),
        ("s3://bucket/p", {"endpoint": "http://[::1]:8333"}, {}, True),
        ("s3://bucket/p", {"endpoint": "http://10.0.0.5:9000"}, {}, False),  # plain HTTP over a network
        ("s3://bucket/p", {"endpoint": "http://minio.internal:9000"}, {}, False),
        ("s3://bucket/p", {}, {"AWS_ENDPOINT": "http://minio.internal:9000"}, False),
        ("s3://bucket/p", {}, {"AWS_ENDPOINT_URL": "https://r2.example"}, True),
        ("s3://bucket/p", {"unsigned_payload": False}, {}, False),  # the user's choice stands
        ("s3://bucket/p", {"aws_unsigned_payload": "false"}, {}, False),
        ("s3://bucket/p", {}, {"AWS_UNSIGNED_PAYLOAD": "false"}, False),
        ("gs://bucket/p", {}, {}, False),
        ("file:///tmp/objects", {}, {}, False),
        ("memory://", {}, {}, False),
    ],
)
def test_unsigned_only_where_the_transport_guards_the_bytes(url: str, config: dict, environ: dict, fits: bool) -> None:
    assert unsigned_payload_fits(url, config, environ) is fits


def test_an_s3_store_opened_from_a_url_sends_unsigned_payloads_to_a_loopback_endpoint() -> None:
    store = open_store("s3://bucket/prefix", {"config": {"endpoint": "http://127.0.0.1:9", "region": "us-east-1"}})
    assert store.config["unsigned_payload"] == "true"
    signed = open_store("s3://bucket/prefix", {"config": {"endpoint": "http://10.1.2.3:9", "region": "us-east-1"}})
    assert "unsigned_payload" not in signed.config
