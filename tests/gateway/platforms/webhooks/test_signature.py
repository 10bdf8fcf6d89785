"""HMAC signatures: GitHub's X-Hub-Signature-256 and the generic X-Hygieia-Signature."""

from __future__ import annotations

from gateway.platforms.webhooks.signature import delivery_id, sign, verify

SECRET = b"topsecret"
BODY = b'{"zen":"Keep it logically awesome."}'
NOW = 1_800_000_000.0


def test_sign_matches_githubs_documented_example() -> None:
    # From GitHub's "Validating webhook deliveries": secret "It's a Secret to Everybody".
    expected = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
    assert sign(b"It's a Secret to Everybody", b"Hello, World!") == expected


def test_a_github_signature_of_the_body_verifies() -> None:
    headers = {"x-hub-signature-256": sign(SECRET, BODY)}
    assert verify("github", SECRET, BODY, headers, now=NOW, max_skew=300).ok


def test_a_github_signature_of_another_body_fails() -> None:
    headers = {"x-hub-signature-256": sign(SECRET, BODY + b" ")}
    verdict = verify("github", SECRET, BODY, headers, now=NOW, max_skew=300)
    assert not verdict.ok and "does not match" in verdict.reason


def test_a_missing_signature_header_is_named() -> None:
    verdict = verify("github", SECRET, BODY, {}, now=NOW, max_skew=300)
    assert not verdict.ok and "x-hub-signature-256" in verdict.reason


def test_a_generic_signature_with_a_fresh_timestamp_verifies() -> None:
    headers = {"x-hygieia-signature": sign(SECRET, BODY, "1800000010"), "x-hygieia-timestamp": "1800000010"}
    assert verify("generic", SECRET, BODY, headers, now=NOW, max_skew=300).ok


def test_a_generic_signature_with_a_stale_timestamp_fails() -> None:
    stamp = str(int(NOW) - 301)
    headers = {"x-hygieia-signature": sign(SECRET, BODY, stamp), "x-hygieia-timestamp": stamp}
    verdict = verify("generic", SECRET, BODY, headers, now=NOW, max_skew=300)
    assert not verdict.ok and "away from now" in verdict.reason


def test_stripping_the_timestamp_breaks_a_timestamped_signature() -> None:
    headers = {"x-hygieia-signature": sign(SECRET, BODY, "1800000000")}
    assert not verify("generic", SECRET, BODY, headers, now=NOW, max_skew=300).ok


def test_a_github_signature_is_not_accepted_by_a_generic_route() -> None:
    headers = {"x-hub-signature-256": sign(SECRET, BODY)}
    assert not verify("generic", SECRET, BODY, headers, now=NOW, max_skew=300).ok


def test_without_a_delivery_id_an_identical_body_is_the_same_delivery() -> None:
    assert delivery_id("generic", {}, BODY) == delivery_id("generic", {}, BODY)
    assert delivery_id("generic", {}, BODY) != delivery_id("generic", {}, BODY + b" ")


def test_the_senders_delivery_id_is_used_when_given() -> None:
    assert delivery_id("github", {"x-github-delivery": "72d3162e"}, BODY) == "72d3162e"


def test_a_long_delivery_id_is_kept_as_its_digest_and_stays_distinct() -> None:
    first = delivery_id("generic", {"x-hygieia-delivery": "a" * 500}, BODY)
    other = delivery_id("generic", {"x-hygieia-delivery": "a" * 499 + "b"}, BODY)
    assert len(first) <= 64 and first != other
