"""The OpenAPI document of `judgeblender serve` (GET /openapi.json), written by hand: the app
is plain Starlette, and the document is what a Java, Go or JavaScript team generates a client
from, so it says what the server answers in the words docs/serve.md uses."""

from __future__ import annotations

from typing import Any

from .. import __version__


def _error() -> dict[str, Any]:
    return {"description": "an error", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}


def document(limits: Any) -> dict[str, Any]:
    """The document, with this server's limits in its descriptions."""
    pair = {"type": "object", "required": ["qid", "docid"], "additionalProperties": False,
            "properties": {"qid": {"type": ["string", "integer"]}, "docid": {"type": ["string", "integer"]},
                           "query": {"type": "string", "description": "left out: looked up in the server's --queries"},
                           "passage": {"type": "string",
                                       "description": "left out: looked up in the server's --corpus"}}}
    member = {"type": "object", "properties": {"label": {"type": ["integer", "null"], "minimum": 0, "maximum": 3},
                                               "valid": {"type": "boolean"}, "reason": {"type": ["string", "null"]},
                                               "expected": {"type": ["number", "null"]}}}
    result = {"type": "object", "required": ["qid", "docid", "label", "valid", "judges", "details"],
              "properties": {"qid": {"type": "string"}, "docid": {"type": "string"},
                             "label": {"type": ["integer", "null"], "minimum": 0, "maximum": 3,
                                       "description": "null when no valid label: never a made-up one"},
                             "valid": {"type": "boolean"},
                             "reason": {"type": ["string", "null"], "description": "why the label is null"},
                             "expected": {"type": ["number", "null"],
                                          "description": "a single judge's expected grade (logprobs mode)"},
                             "judges": {"type": "object", "additionalProperties": member},
                             "details": {"type": "object", "description": "the record `judgeblender judge` writes "
                                                                          "to its details file for this pair"}}}
    secured = [{"bearer": []}]
    return {
        "openapi": "3.1.0",
        "info": {"title": "judgeblender serve", "version": __version__,
                 "description": "Relevance judgments on the TREC 0-3 scale from an LLM judge or a panel of them."},
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": {"Pair": pair, "Result": result,
                        "Error": {"type": "object", "required": ["error"],
                                  "properties": {"error": {"type": "string"}, "field": {"type": "string"}}}},
        },
        "paths": {
            "/v1/judge": {"post": {
                "summary": "Judge pairs; results in the request's order",
                "description": f"At most {limits.max_pairs} pairs and {limits.max_body} bytes per request, "
                               f"{limits.max_queue} requests admitted at once (once their bodies are read), "
                               f"{limits.max_reading} bodies received at once, each within "
                               f"{limits.read_timeout_s:g} s.",
                "security": secured,
                "requestBody": {"required": True, "content": {"application/json": {"schema": {
                    "type": "object", "required": ["pairs"], "additionalProperties": False,
                    "properties": {"pairs": {"type": "array", "minItems": 1, "maxItems": limits.max_pairs,
                                             "items": {"$ref": "#/components/schemas/Pair"}}}}}}},
                "responses": {
                    "200": {"description": "every pair answered", "content": {"application/json": {"schema": {
                        "type": "object", "properties": {"results": {"type": "array",
                                                                     "items": {"$ref": "#/components/schemas/Result"}},
                                                         "stats": {"type": "array", "items": {"type": "object"}}}}}}},
                    "400": _error(), "401": _error(), "408": _error(), "413": _error(),
                    "429": {**_error(), "headers": {"Retry-After": {"schema": {"type": "integer"}}}},
                    "502": {"description": "model calls failed: the results say which pairs; send it again"},
                    "503": _error()}}},
            "/v1/panel": {"get": {"summary": "What is serving: members, blend, calibration figures",
                                  "security": secured, "responses": {"200": {"description": "the panel"},
                                                                     "401": _error()}}},
            "/v1/health": {"get": {"summary": "Liveness (no token needed)",
                                   "responses": {"200": {"description": "serving"}}}},
            "/metrics": {"get": {"summary": "Prometheus text: requests, calls made, store hits, invalid answers, "
                                            "latency", "security": secured,
                                 "responses": {"200": {"description": "Prometheus exposition format"},
                                               "401": _error()}}},
            "/openapi.json": {"get": {"summary": "This document", "security": secured,
                                      "responses": {"200": {"description": "OpenAPI 3.1"}}}},
        },
    }
