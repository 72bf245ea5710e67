"""Schemathesis against the live `memdir serve`: every operation of /openapi.json, fed
generated (valid and invalid) requests with the token, never answers 5xx and always answers
what the schema says (status codes, content types, bodies)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import hypothesis
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase
from schemathesis import GenerationMode
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)
from schemathesis.schemas import APIOperation

from server_support import Server, running_server

EXAMPLES = 25  # per operation and generation mode: bounded, so the run stays under a minute
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance,
          response_headers_conformance, response_schema_conformance]


@pytest.fixture
def live(home: Path, repo: Path) -> Iterator[Server]:
    with running_server(home, repo) as srv:
        # Something to find, list, get, patch and inject (generated ids rarely exist).
        with srv.client() as client:
            for content, kind in (("Prefers tabs in Makefiles", "preference"),
                                  ("Release needs two approvals", "policy")):
                answer = client.post("/api/memory/store", json={"content": content,
                                                                "type": kind})
                assert answer.status_code == 201, answer.text
        yield srv


def _check(operation: APIOperation, live: Server, mode: GenerationMode) -> None:
    strategy = operation.as_strategy(mode, headers=live.headers)

    @hypothesis.given(case=strategy)
    @hypothesis.settings(max_examples=EXAMPLES, derandomize=True, deadline=None,
                         database=None, suppress_health_check=list(HealthCheck),
                         phases=[Phase.explicit, Phase.generate])
    def run(case: schemathesis.Case) -> None:
        response = case.call_and_validate(headers=live.headers, checks=CHECKS, timeout=30)
        assert response.status_code < 500
        if response.status_code >= 400:
            error = response.json()["error"]
            assert set(error) == {"code", "message", "hint"} and error["hint"]

    run()


@pytest.mark.slow
def test_api_conforms_to_its_schema(live: Server) -> None:
    # Loaded by hand rather than through schemathesis' pytest plugin: the schema only exists
    # once the server runs, and the plugin's lazy loading does not work with pytest 9.
    schema = schemathesis.openapi.from_url(f"{live.url}/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 12
    negative: list[str] = []
    for operation in operations:
        _check(operation, live, GenerationMode.POSITIVE)
        try:
            _check(operation, live, GenerationMode.NEGATIVE)
            negative.append(operation.label)
        except hypothesis.errors.Unsatisfiable:
            pass  # every input is valid (no parameters, or only free text): nothing to break
    print("invalid input sent to:", negative)
    assert {"POST /api/memory/store", "GET /api/memory/context",
            "PATCH /api/memory/{id}"} <= set(negative)


def test_schema_documents_the_api(live: Server) -> None:
    doc = live.request("GET", "/openapi.json", auth=False).json()
    paths = doc["paths"]
    for path in ("/api/memory/search", "/api/memory/context", "/api/memory/store",
                 "/api/memory/extract", "/api/memory/recall", "/api/memory",
                 "/api/memory/stats", "/api/memory/{id}", "/api/memory/{id}/archive",
                 "/api/memory/{id}/restore", "/healthz"):
        assert path in paths, path
    store = paths["/api/memory/store"]["post"]
    assert "201" in store["responses"] and "422" in store["responses"]
    body = store["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    fields = doc["components"]["schemas"][body.rsplit("/", 1)[1]]["properties"]
    assert {"content", "type", "scope", "relevance", "tags"} <= set(fields)
    assert fields["content"]["description"]
    limit = next(p for p in paths["/api/memory/context"]["get"]["parameters"]
                 if p["name"] == "limit")
    assert limit["schema"]["maximum"] == 20 and limit["schema"]["default"] == 5
