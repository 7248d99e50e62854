"""SigV4 verification against requests signed by botocore itself."""

from __future__ import annotations

import datetime

import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from faasrl.gateway import sigv4

URL = ("http://127.0.0.1:8080/2015-03-31/functions/"
       "arn%3Aaws%3Alambda%3Aus-east-1%3A000000000000%3Afunction%3Aactor/invocations"
       "?Qualifier=%24LATEST")


def signed(body: bytes = b'{"a": 1}', key: str = "faasrl", secret: str = "s3cret",
           service: str = "lambda") -> tuple[list[tuple[str, str]], datetime.datetime]:
    request = AWSRequest("POST", URL, data=body,
                         headers={"X-Amz-Invocation-Type": "RequestResponse",
                                  "Content-Type": "application/json"})
    SigV4Auth(Credentials(key, secret), service, "eu-west-1").add_auth(request)
    signed_at = datetime.datetime.strptime(request.headers["X-Amz-Date"], "%Y%m%dT%H%M%SZ")
    headers = [(k, v) for k, v in request.headers.items()]
    headers.append(("Host", "127.0.0.1:8080"))
    return headers, signed_at.replace(tzinfo=datetime.UTC)


def check(headers, body=b'{"a": 1}', secret="s3cret", now=None, url=URL):
    return sigv4.verify(method="POST", url=url, headers=headers, body=body,
                        access_key_id="faasrl", secret_access_key=secret, max_skew_s=300,
                        now=now)


def test_a_good_signature_passes_and_names_its_region():
    headers, at = signed()
    assert check(headers, now=at) == "eu-west-1"
    assert check(headers, now=at + datetime.timedelta(seconds=299)) == "eu-west-1"


@pytest.mark.parametrize("change, kind", [
    ({"secret": "other"}, "InvalidSignatureException"),
    ({"body": b'{"a": 2}'}, "InvalidSignatureException"),
    ({"url": URL.replace("actor", "learner")}, "InvalidSignatureException"),
    ({"url": URL.replace("%24LATEST", "7")}, "InvalidSignatureException"),
])
def test_anything_changed_after_signing_fails(change, kind):
    headers, at = signed()
    with pytest.raises(sigv4.SignatureError) as err:
        check(headers, **{"now": at, **change})
    assert err.value.kind == kind


def test_clock_skew_key_id_service_and_missing_signature():
    headers, at = signed()
    with pytest.raises(sigv4.SignatureError, match="Signature expired"):
        check(headers, now=at + datetime.timedelta(seconds=301))
    with pytest.raises(sigv4.SignatureError, match="Signature expired"):
        check(headers, now=at - datetime.timedelta(seconds=301))
    other, at = signed(key="AKIDX")
    with pytest.raises(sigv4.SignatureError) as err:
        check(other, now=at)
    assert err.value.kind == "UnrecognizedClientException"
    s3, at = signed(service="s3")
    with pytest.raises(sigv4.SignatureError, match="correct service"):
        check(s3, now=at)
    with pytest.raises(sigv4.SignatureError) as err:
        check([("Host", "x")], now=at)
    assert err.value.kind == "MissingAuthenticationTokenException"
    changed = [(k, "Event" if k == "X-Amz-Invocation-Type" else v) for k, v in headers]
    with pytest.raises(sigv4.SignatureError, match="does not match"):
        check(changed, now=at)
