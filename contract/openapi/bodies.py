"""Body schemas of the OpenAPI document that pydantic alone does not state.

The models say "a sub-job carries training_config or inference_config" in a validator;
the document must say it in JSON Schema so any tool generates only bodies the service
accepts: one variant per ``job_type`` (a discriminated ``oneOf``), one per
``operation_type``, error bodies in every dialect the spec allows (spec §3.6), and
sample DSSST1 bodies, built by the kit's own codec, so a generic tool can also send a
frame the service executes.
"""

from __future__ import annotations

import copy
from typing import Any

from pydantic import BaseModel

from contract import models as m
from contract import wire
from contract.limits import MAX_BODY_BYTES
from contract.models.catalog import ALL_MODELS, TRAINING_MODELS

REF = "#/components/schemas/{model}"

#: job_type -> (schema name, the config it takes, the config it must not carry, models).
_SUB_JOB_VARIANTS: dict[str, tuple[str, str, str, tuple[str, ...]]] = {
    "training": ("TrainingSubJobConfig", "training_config", "inference_config", TRAINING_MODELS),
    "sampling": ("SamplingSubJobConfig", "inference_config", "training_config", ALL_MODELS),
    "log_probability": ("LogProbabilitySubJobConfig", "inference_config", "training_config", ALL_MODELS),
}
_CONFIG_MODEL = {"training_config": "TrainingConfig", "inference_config": "InferenceConfig"}


def _ref(name: str) -> dict[str, str]:
    return {"$ref": REF.format(model=name)}


def schema_ref(model: type[BaseModel], components: dict[str, Any]) -> dict[str, str]:
    """Add ``model`` (and the models it uses) to ``components``; a ``$ref`` to it."""
    schema = model.model_json_schema(ref_template=REF, by_alias=True)
    for name, sub in schema.pop("$defs", {}).items():
        components.setdefault(name, sub)
    components.setdefault(model.__name__, schema)
    return _ref(model.__name__)


#: A discriminator value -> (variant name, the property schemas it overrides, its required list).
Variants = dict[str, tuple[str, dict[str, Any], list[str]]]


def _discriminated(components: dict[str, Any], name: str, prop: str, description: str,
                   variants: Variants) -> None:
    """Replace ``components[name]`` with a ``oneOf`` of its variants, discriminated by
    ``prop`` (see :data:`Variants`)."""
    base = components[name]
    mapping: dict[str, str] = {}
    for value, (title, props, required) in variants.items():
        variant = copy.deepcopy(base)
        variant["properties"].update({prop: {"type": "string", "const": value}, **props})
        variant["required"] = required
        variant["title"] = title
        components[title] = variant
        mapping[value] = REF.format(model=title)
    components[name] = {
        "title": name,
        "description": description,
        "oneOf": [{"$ref": ref} for ref in mapping.values()],
        "discriminator": {"propertyName": prop, "mapping": mapping},
    }


def refine_sub_job_configs(components: dict[str, Any]) -> None:
    """``SubJobConfig`` becomes a ``oneOf`` discriminated by ``job_type`` (spec §8.1):
    each variant requires its own config, forbids the other one and names the models the
    service caches for that job type (spec §1.4: inference-only models cannot train)."""
    base = components["SubJobConfig"]
    variants: Variants = {}
    for job_type, (name, own, other, models) in _SUB_JOB_VARIANTS.items():
        props = {
            "model_name": {**base["properties"]["model_name"], "enum": list(models)},
            own: _ref(_CONFIG_MODEL[own]),
            other: {"type": "null", "description": f"Not taken by a {job_type} sub-job."},
        }
        variants[job_type] = (name, props, sorted({*base.get("required", []), own}))
    _discriminated(components, "SubJobConfig", "job_type",
                   "Exactly one type-specific config, chosen by job_type (spec §8.1).", variants)


def refine_operation_envelope(components: dict[str, Any]) -> None:
    """``OperationEnvelope`` becomes a ``oneOf`` by ``operation_type`` whose ``payload``
    is that operation's payload model (spec §7)."""
    variants: Variants = {}
    for op, payload in m.OPERATION_PAYLOADS.items():
        name = "".join(part.title() for part in op.split("-")) + "Operation"
        required = payload.model_json_schema().get("required")
        variants[op] = (name, {"payload": _ref(payload.__name__)},
                        ["operation_type", "payload"] if required else ["operation_type"])
    _discriminated(components, "OperationEnvelope", "operation_type",
                   "One operation; payload by operation_type (spec §7).", variants)


def operation_answers(components: dict[str, Any]) -> dict[str, Any]:
    """An operation's answer: its type's inline answer model, or a submission to poll."""
    refs = [schema_ref(model, components) for model in dict.fromkeys(m.OPERATION_ANSWERS.values())]
    return {"description": "The operation's inline answer (models.OPERATION_ANSWERS by "
                           "operation_type), or {request_id, job_id} to poll.", "anyOf": refs}


def error_body_schemas(components: dict[str, Any]) -> dict[str, str]:
    """The error body in both dialects (spec §3.6): the kit's ``{code: str, message}``
    envelope, the spec's ``{message, code: int}``, or a ``{detail: [...]}`` list."""
    schema_ref(m.ErrorEnvelope, components)
    detail = {"type": "array", "items": _ref("ErrorDetail")}
    components["SpecError"] = {
        "title": "SpecError", "type": "object", "required": ["message", "code"],
        "description": "The spec's form: the HTTP status as an integer code (spec §3.6).",
        "properties": {"message": {"type": "string"}, "code": {"type": "integer"}, "detail": detail},
    }
    components["ValidationError"] = {
        "title": "ValidationError", "type": "object", "required": ["detail"],
        "description": "A validation list naming each bad field by loc (spec §3.6).",
        "properties": {"detail": detail},
    }
    components["ErrorBody"] = {
        "title": "ErrorBody",
        "description": "Any error form a conformant server may answer; the kit's fake uses "
                       "ErrorEnvelope (a string code, decided).",
        "anyOf": [_ref("ErrorEnvelope"), _ref("SpecError"), _ref("ValidationError")],
    }
    return _ref("ErrorBody")


def relax_dialects(components: dict[str, Any]) -> None:
    """Answer fields the spec dialect spells differently (spec §6.8): a poll's ``error``
    may be ``""`` or a string; ``last_lr`` a number or a list of numbers (spec §6.2)."""
    step = components.get("StepResult")
    if step is not None:
        step["properties"]["last_lr"] = {
            "anyOf": [{"type": "number"}, {"type": "array", "items": {"type": "number"}}],
            "description": "A number, or one per parameter group (spec §6.2).",
        }


# --- DSSST1 bodies -------------------------------------------------------------------------

def _ascii(data: bytes) -> bool:
    return all(b < 0x80 for b in data)


def _ascii_frame(make: Any) -> bytes:
    """The first of ``make(n)`` whose bytes are all ASCII, so the JSON document carries the
    frame byte for byte (a length field of 0x80..0xff in a byte would not be)."""
    for n in range(1, 256):
        frame: bytes = make(n)
        if _ascii(frame):
            return frame
    raise AssertionError("no ASCII sample frame")  # pragma: no cover - found within a few steps


def _one_chunk(frame: bytes, route: str) -> bytes:
    """``frame`` as a one-chunk request group; the group id (one per route: a group belongs
    to one route) is padded until the chunk is ASCII too."""
    def make(n: int) -> bytes:
        group = f"openapi-sample-{route}-" + "0" * n
        return wire.encode_byte_chunks(frame, "request", route, force_chunk=True, chunk_group_id=group)[0]
    return _ascii_frame(make)


def sample_bodies() -> dict[str, str]:
    """route name -> one valid body (a one-chunk group, or generate's plain frame), as text:
    a tiny forward batch (token ids as a JSON list: no torch needed) and one prompt."""
    meta = wire.standard_request_metadata()
    fwd = _ascii_frame(lambda n: wire.dumps({"kwargs": {"input_ids": [list(range(1, n + 4))]}}, metadata=meta))
    gen = _ascii_frame(lambda n: wire.dumps(
        {"prompts": ["Hello" + "!" * n], "sampling_params": {"max_tokens": 4}}, metadata=meta))
    out = {"forward_backward": _one_chunk(fwd, "forward-backward"),
           "forward_no_grad": _one_chunk(fwd, "forward-no-grad"),
           "generate": gen}
    return {name: data.decode("ascii") for name, data in out.items()}


def octet_body(route_name: str, description: str) -> dict[str, Any]:
    """A DSSST1 body: any bytes up to the body limit, the sample named as one instance."""
    binary = {"type": "string", "format": "binary", "maxLength": MAX_BODY_BYTES,
              "description": f"{description} (spec §9); at most {MAX_BODY_BYTES} bytes per "
                             "request, bigger frames go as request chunks."}
    sample = sample_bodies().get(route_name)
    schema: dict[str, Any] = binary if sample is None else {
        "anyOf": [binary, {"const": sample, "description": "A sample body built by the kit's "
                           "codec (one valid instance of the binary form)."}],
    }
    return {"required": True, "description": description,
            "content": {wire.OCTET_STREAM: {"schema": schema}}}


def json_bytes_body(model: type[BaseModel], components: dict[str, Any], description: str) -> dict[str, Any]:
    """generate-stream: the JSON object itself, sent as UTF-8 bytes under octet-stream
    (spec §2.3); tools serialise an object body for this media type as its JSON text."""
    return {"required": True, "description": description,
            "content": {wire.OCTET_STREAM: {"schema": schema_ref(model, components)}}}


def dumps_sample(name: str) -> bytes:
    """The sample body of ``name`` as bytes (for tests and tools)."""
    return sample_bodies()[name].encode("ascii")


__all__ = ["dumps_sample", "error_body_schemas", "json_bytes_body", "octet_body", "operation_answers",
           "refine_operation_envelope", "refine_sub_job_configs", "relax_dialects",
           "sample_bodies", "schema_ref"]
