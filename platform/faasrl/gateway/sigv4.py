"""AWS Signature Version 4 verification, for the gateway's Lambda Invoke API.

The signature is recomputed with botocore's own signer (``SigV4Auth``: canonical request,
string to sign, signing key) over exactly the headers the client says it signed, then compared
in constant time; no SigV4 crypto is written here. A request is refused when its key id is not
the configured one, its date is outside the allowed clock skew, its credential scope is not for
``lambda``, or a signed payload hash does not match the body.
"""

from __future__ import annotations

import datetime
import hashlib
import hmac
from collections.abc import Sequence

from botocore.auth import SIGV4_TIMESTAMP, SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

ALGORITHM = "AWS4-HMAC-SHA256"


class SignatureError(Exception):
    """Why a request's signature was refused; ``kind`` is AWS's error code for it."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind, self.message = kind, message


def _parse_authorization(value: str) -> tuple[list[str], list[str], str]:
    """(credential scope parts, signed header names, signature) of an Authorization header."""
    algorithm, _, rest = value.strip().partition(" ")
    if algorithm != ALGORITHM:
        raise SignatureError("IncompleteSignatureException",
                             f"Authorization: expected {ALGORITHM}, got {algorithm!r}")
    parts = {}
    for item in rest.split(","):
        key, _, val = item.strip().partition("=")
        parts[key] = val
    missing = [k for k in ("Credential", "SignedHeaders", "Signature") if not parts.get(k)]
    if missing:
        raise SignatureError("IncompleteSignatureException",
                             f"Authorization: missing {', '.join(missing)}")
    scope = parts["Credential"].split("/")
    if len(scope) != 5 or scope[4] != "aws4_request":
        raise SignatureError("IncompleteSignatureException",
                             "Authorization: Credential must be KEY/DATE/REGION/SERVICE/"
                             "aws4_request")
    return scope, parts["SignedHeaders"].split(";"), parts["Signature"]


def access_key_id(headers: Sequence[tuple[str, str]]) -> str | None:
    """The access key id a request says it is signed by, unverified; None when it carries no
    well-formed signature (``verify`` says why)."""
    value = next((v for k, v in headers if k.lower() == "authorization"), None)
    try:
        return _parse_authorization(value)[0][0] if value is not None else None
    except SignatureError:
        return None


def verify(*, method: str, url: str, headers: Sequence[tuple[str, str]], body: bytes,
           access_key_id: str, secret_access_key: str, service: str = "lambda",
           max_skew_s: float = 900.0, now: datetime.datetime | None = None) -> str:
    """Check a request's SigV4 signature; returns the region it was signed for.

    ``url`` is the request's URL as sent (scheme, Host, raw path, raw query); ``headers`` its
    header pairs as received. Raises ``SignatureError``.
    """
    values: dict[str, list[str]] = {}
    for name, value in headers:
        values.setdefault(name.lower(), []).append(value)
    auth_header = values.get("authorization")
    if not auth_header:
        raise SignatureError("MissingAuthenticationTokenException",
                             "the request is not signed (no Authorization header)")
    scope, signed, signature = _parse_authorization(auth_header[0])
    key_id, day, region, scope_service, _ = scope
    if not hmac.compare_digest(key_id.encode(), access_key_id.encode()):
        raise SignatureError("UnrecognizedClientException",
                             "The security token included in the request is invalid.")
    if scope_service != service:
        raise SignatureError("InvalidSignatureException",
                             f"Credential should be scoped to correct service: '{service}'.")
    if "host" not in signed:
        raise SignatureError("InvalidSignatureException", "the Host header must be signed")
    stamp = (values.get("x-amz-date") or [""])[0]
    try:
        signed_at = datetime.datetime.strptime(stamp, SIGV4_TIMESTAMP).replace(
            tzinfo=datetime.UTC)
    except ValueError:
        raise SignatureError("IncompleteSignatureException",
                             "X-Amz-Date: missing or not YYYYMMDD'T'HHMMSS'Z'") from None
    now = now or datetime.datetime.now(datetime.UTC)
    if abs((now - signed_at).total_seconds()) > max_skew_s:
        raise SignatureError("InvalidSignatureException",
                             f"Signature expired: {stamp} is more than {max_skew_s:g} s from "
                             f"the server's time {now.strftime(SIGV4_TIMESTAMP)}.")
    if day != stamp[:8]:
        raise SignatureError("InvalidSignatureException",
                             "Credential date does not match X-Amz-Date.")
    content_hash = (values.get("x-amz-content-sha256") or [None])[0]
    if content_hash is not None and not hmac.compare_digest(
            content_hash.encode(), hashlib.sha256(body).hexdigest().encode()):
        raise SignatureError("InvalidSignatureException",
                             "X-Amz-Content-SHA256 does not match the body")
    missing = [h for h in signed if h not in values]
    if missing:
        raise SignatureError("InvalidSignatureException",
                             f"signed headers not in the request: {', '.join(missing)}")

    request = AWSRequest(method=method, url=url, data=body,
                         headers={h: ",".join(values[h]) for h in signed})
    request.context["timestamp"] = stamp
    signer = SigV4Auth(Credentials(key_id, secret_access_key), service, region)
    if signer.signed_headers(signer.headers_to_sign(request)) != ";".join(signed):
        raise SignatureError("InvalidSignatureException",
                             "SignedHeaders holds headers that SigV4 does not sign")
    canonical = signer.canonical_request(request)
    expected = signer.signature(signer.string_to_sign(request, canonical), request)
    if not hmac.compare_digest(expected.encode(), signature.encode()):
        raise SignatureError(
            "InvalidSignatureException",
            "The request signature we calculated does not match the signature you provided. "
            "Check your AWS Secret Access Key and signing method.")
    return region
