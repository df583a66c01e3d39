"""Client compatibility: Cloudflare's official Python SDK (`cloudflare` 5.9.0) against `clef serve`.

Run by tests/sdk/run.sh, which starts the server and sets
  CLEF_SDK_BASE  http://127.0.0.1:PORT (the server's root)
  CLEF_SDK_KEY   the server's --api-key
Standalone: CLEF_SDK_BASE=... CLEF_SDK_KEY=... target/sdk/venv/bin/python tests/sdk/python/test_sdk.py -v

Every SDK answer is compared, exactly (same keys in the same order, same numbers), with what the
server returns for the same request on POST /v1/systemone, called with urllib and with the
`model` field added.
"""

from __future__ import annotations

import base64
import json
import os
import pathlib
import sys
import unittest
import urllib.error
import urllib.request
from typing import Any

import cloudflare
import httpx
import jsonschema

BASE = os.environ.get("CLEF_SDK_BASE", "").rstrip("/")
KEY = os.environ.get("CLEF_SDK_KEY", "")
ACCOUNT = "acc"  # any value: the server ignores the account segment
MODEL = "clef-flash"
PNG = (pathlib.Path(__file__).resolve().parent.parent / "fixtures" / "gradient-32.png").read_bytes()
PNG_B64 = base64.b64encode(PNG).decode("ascii")

QUESTIONS = {
    "urgent": {"type": "noul", "instructions": "Is this support request urgent?"},
    "team": {
        "type": "choice",
        "instructions": "Which team should handle it?",
        "criteria": {"billing": "Payments, refunds, invoices", "technical": "Outages, crashes, errors"},
    },
    "severity": {
        "type": "score",
        "instructions": "How severe is the problem?",
        "criteria": ["minor", "major", "critical"],
    },
}


def http(method: str, path: str, body: Any = None, token: str | None = KEY) -> tuple[int, Any]:
    """The stdlib reference client: (status, parsed JSON body)."""
    data = None if body is None else json.dumps(body).encode("utf-8")
    req = urllib.request.Request(BASE + path, data=data, method=method)
    req.add_header("Content-Type", "application/json")
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def reference(model: str, fields: dict[str, Any]) -> Any:
    """The bare answer of POST /v1/systemone for the same request with `model` set."""
    status, answer = http("POST", "/v1/systemone", {"model": model, **{k: v for k, v in fields.items() if k != "model"}})
    assert status == 200, (status, answer)
    return answer


class Recorder:
    """An httpx request hook that keeps what the SDK put on the wire."""

    def __init__(self) -> None:
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> None:
        request.read()
        self.requests.append(request)

    @property
    def last(self) -> httpx.Request:
        return self.requests[-1]


def make_client(token: str = KEY, recorder: Recorder | None = None) -> cloudflare.Cloudflare:
    hooks = {"request": [recorder]} if recorder else {}
    return cloudflare.Cloudflare(
        api_token=token,
        base_url=f"{BASE}/client/v4",
        max_retries=0,  # a refusal must surface at once, not after retries
        timeout=60.0,
        http_client=cloudflare.DefaultHttpxClient(event_hooks=hooks),
    )


class SdkCompat(unittest.TestCase):
    maxDiff = None

    @classmethod
    def setUpClass(cls) -> None:
        if not BASE:
            raise unittest.SkipTest("CLEF_SDK_BASE is not set (run tests/sdk/run.sh)")
        status, models = http("GET", "/v1/models")
        assert status == 200, (status, models)
        cls.served = [entry["id"] for entry in models["data"]]
        cls.max_context = models["data"][0]["clef"]["max_context"]
        cls.recorder = Recorder()
        cls.client = make_client(recorder=cls.recorder)

    def assert_same_answer(self, got: Any, want: Any) -> None:
        self.assertEqual(got, want)
        # key order too: the SDK hands back the parsed JSON unchanged
        self.assertEqual(json.dumps(got), json.dumps(want))

    def assert_wire(self, model: str, expect_model_field: bool) -> dict[str, Any]:
        request = self.recorder.last
        # the SDK percent-encodes the slashes of the model name
        self.assertEqual(
            request.url.raw_path.decode("ascii"),
            f"/client/v4/accounts/{ACCOUNT}/ai/run/" + model.replace("/", "%2F"),
        )
        self.assertEqual(request.headers["authorization"], f"Bearer {KEY}")
        sent = json.loads(request.content)
        self.assertEqual("model" in sent, expect_model_field, sent)
        return sent

    def test_0_pinned_sdk_and_served_names(self) -> None:
        self.assertEqual(cloudflare.__version__, "5.9.0")
        for name in ("clef", "clef-flash"):
            self.assertIn(name, self.served)

    def test_1_noul_choice_score(self) -> None:
        fields = {"model": MODEL, "state": "Checkout has been failing for every customer for the last hour.", "questions": QUESTIONS}
        got = self.client.ai.run(f"@cf/cloudflare/{MODEL}", account_id=ACCOUNT, extra_body=fields)
        self.assert_wire(f"@cf/cloudflare/{MODEL}", expect_model_field=True)
        want = reference(MODEL, fields)
        self.assert_same_answer(got, want)
        self.assertEqual(list(got["answers"]), ["urgent", "team", "severity"])
        self.assertEqual([a["type"] for a in got["answers"].values()], ["noul", "choice", "score"])
        self.assertIn(got["answers"]["team"]["choice"], ("billing", "technical"))
        self.assertGreater(got["usage"]["input_tokens"], 0)

    def test_2_image(self) -> None:
        fields = {
            "model": MODEL,
            "state": "A customer attached a screenshot.",
            "questions": {"warm": {"type": "noul", "instructions": "Is the picture mostly warm colours?"}},
            # both image item forms: a data URL and {content_type, base64}
            "images": [f"data:image/png;base64,{PNG_B64}", {"content_type": "image/png", "base64": PNG_B64}],
        }
        got = self.client.ai.run(f"@cf/cloudflare/{MODEL}", account_id=ACCOUNT, extra_body=fields)
        sent = self.assert_wire(f"@cf/cloudflare/{MODEL}", expect_model_field=True)
        self.assertEqual(len(sent["images"]), 2)
        want = reference(MODEL, fields)
        self.assert_same_answer(got, want)
        text_only = reference(MODEL, {k: v for k, v in fields.items() if k != "images"})
        self.assertGreater(got["usage"]["input_tokens"], text_only["usage"]["input_tokens"], "the images reached the prompt")

    def test_3_body_without_model(self) -> None:
        fields = {"state": "I was charged twice for my subscription this month.", "questions": QUESTIONS}
        for name in self.served:
            with self.subTest(model=name):
                got = self.client.ai.run(f"@cf/cloudflare/{name}", account_id=ACCOUNT, extra_body=fields)
                self.assert_wire(f"@cf/cloudflare/{name}", expect_model_field=False)
                self.assert_same_answer(got, reference(name, fields))
                self.assertEqual(got["model"], name)

    def test_3b_disagreeing_model_is_400(self) -> None:
        fields = {"model": "clef", "state": "x", "questions": {"u": {"type": "noul", "instructions": "Urgent?"}}}
        with self.assertRaises(cloudflare.BadRequestError) as caught:
            self.client.ai.run("@cf/cloudflare/clef-flash", account_id=ACCOUNT, extra_body=fields)
        self.assertEqual(caught.exception.status_code, 400)
        self.assertEqual(caught.exception.errors[0].code, 7000)

    def test_4a_unknown_field_is_422(self) -> None:
        fields = {"state": "x", "questions": {"u": {"type": "noul", "instructions": "Urgent?"}}, "temperature_typo": 1}
        with self.assertRaises(cloudflare.UnprocessableEntityError) as caught:
            self.client.ai.run(f"@cf/cloudflare/{MODEL}", account_id=ACCOUNT, extra_body=fields)
        err = caught.exception
        self.assertIsInstance(err, cloudflare.APIStatusError)
        self.assertEqual(err.status_code, 422)
        self.assertEqual([e.code for e in err.errors], [5012])  # the SDK parses the envelope's errors
        self.assertIn("temperature_typo", err.errors[0].message)
        self.assertEqual(err.body["success"], False)
        self.assertIsNone(err.body["result"])

    def test_4b_state_over_context_is_413(self) -> None:
        fields = {"state": "word " * self.max_context, "questions": {"u": {"type": "noul", "instructions": "Urgent?"}}}
        with self.assertRaises(cloudflare.APIStatusError) as caught:
            self.client.ai.run(f"@cf/cloudflare/{MODEL}", account_id=ACCOUNT, extra_body=fields)
        err = caught.exception
        self.assertEqual(err.status_code, 413)  # no dedicated SDK class for 413
        self.assertEqual([e.code for e in err.errors], [5021])
        self.assertEqual(err.body["success"], False)

    def test_5_wrong_token_is_401(self) -> None:
        client = make_client(token=KEY + "-wrong")
        fields = {"state": "x", "questions": {"u": {"type": "noul", "instructions": "Urgent?"}}}
        with self.assertRaises(cloudflare.AuthenticationError) as caught:
            client.ai.run(f"@cf/cloudflare/{MODEL}", account_id=ACCOUNT, extra_body=fields)
        self.assertEqual(caught.exception.status_code, 401)
        self.assertEqual([e.code for e in caught.exception.errors], [10000])

    def test_6_schema_discovery(self) -> None:
        """`ai.models.schema.get`, what client libraries call to check the address and the
        token: the served model's input and output JSON schemas, which accept the requests
        and answers of this suite and refuse what the server refuses."""
        got = self.client.ai.models.schema.get(account_id=ACCOUNT, model=f"@cf/cloudflare/{MODEL}")
        request = self.recorder.last
        self.assertEqual(request.url.path, f"/client/v4/accounts/{ACCOUNT}/ai/models/schema")
        self.assertEqual(request.url.params["model"], f"@cf/cloudflare/{MODEL}")
        schemas = got if isinstance(got, dict) else got.to_dict()
        inp, out = schemas["input"], schemas["output"]
        for schema in (inp, out):
            jsonschema.Draft202012Validator.check_schema(schema)
        fields = {"state": "Checkout has been failing for every customer for the last hour.", "questions": QUESTIONS}
        jsonschema.validate(fields, inp)
        jsonschema.validate(dict(fields, model=MODEL), inp)
        answer = self.client.ai.run(f"@cf/cloudflare/{MODEL}", account_id=ACCOUNT, extra_body=fields)
        jsonschema.validate(answer, out)
        with self.assertRaises(jsonschema.ValidationError):
            jsonschema.validate(dict(fields, temperature=0.2), inp)  # the server's 422
        with self.assertRaises(jsonschema.ValidationError):
            jsonschema.validate(dict(fields, model="gpt-4"), inp)  # the server's 400/7000
        wrong = make_client(token=KEY + "-wrong")
        with self.assertRaises(cloudflare.AuthenticationError):
            wrong.ai.models.schema.get(account_id=ACCOUNT, model=f"@cf/cloudflare/{MODEL}")


if __name__ == "__main__":
    result = unittest.main(exit=False, verbosity=2).result
    ok = result.wasSuccessful() and result.testsRun > 0 and not result.skipped
    print(f"SDK python (cloudflare {cloudflare.__version__}): {'PASS' if ok else 'FAIL'} "
          f"({result.testsRun} tests, {len(result.failures)} failures, {len(result.errors)} errors, {len(result.skipped)} skipped)")
    sys.exit(0 if ok else 1)
