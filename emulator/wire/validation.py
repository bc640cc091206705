"""Server-side input validation against botocore's service models, in AWS's (Coral) wording.

botocore checks only minimums (and required members) on the client, so the emulator enforces the
model's maxima, patterns, enums, ranges and required members itself, the way the real service's
Coral layer does, before any handler runs:

    validate_input(operation_model("sagemaker", "CreateEndpoint").input_shape, params)

raises `ValidationFailed` carrying every violation found, in one message::

    1 validation error detected: Value 'my_ep' at 'endpointName' failed to satisfy constraint:
    Member must satisfy regular expression pattern: ^[a-zA-Z0-9](-*[a-zA-Z0-9])*
    2 validation errors detected: {item}; {item}

Each item is ``Value '{value}' at '{path}' failed to satisfy constraint: {constraint}`` with one
of the constraints ``Member must satisfy regular expression pattern: {pattern as in the model}``,
``Member must have length less than or equal to {max}`` / ``... greater than or equal to {min}``
(strings, lists, maps, bytes blobs), ``Member must have value less than or equal to {max}`` /
``... greater than or equal to {min}`` (numbers), ``Member must satisfy enum value set: [a, b]``
(model order), or ``Value null at '{path}' failed to satisfy constraint: Member must not be null``
for a missing (or JSON null) required member.

Conventions (where AWS's exact behaviour is unknown, these are our choices):

* Paths: member names with the first letter lower-cased (``EndpointName`` -> ``endpointName``),
  nested with ``.``; list items as ``{list}.{i}.member`` with a 1-based index
  (``productionVariants.1.member.variantName``); map values as ``{map}.{key}``
  (``environment.MY_VAR``); a bad map key is reported at ``{map}`` as
  ``Value '{key}' at '{map}' failed to satisfy constraint: Map keys must satisfy constraint:
  [{constraint}]``, one item per violated constraint.
* Order: structure members in model member order (missing-required and invalid alike); within one
  member: type, enum, pattern, length/value maximum, length/value minimum; for a list or map its own
  length first, then its entries in order.
* Sensitive members (``sensitive`` in the model, or anything nested in a sensitive shape) print
  ``Value at '{path}' ...``: the value never appears in the message. Lists, maps and structures
  whose subtree holds a sensitive shape are likewise never printed.
* Values print as given (strings verbatim, however long); numbers as Python prints them, booleans
  as ``true``/``false``, lists as ``[a, b]``, maps/structures as ``{k=v, ...}`` (Java's style),
  bytes as Java's ByteBuffer does.
* Wrong JSON types (a string where an integer is modelled, a list where a structure is...) are
  deserialisation errors, as in AWS's Coral layer: when any is found, only those are reported,
  each as ``Member must be of type {integer|string|list|...}``, in a ``MalformedRequest``
  (json-1.1: SerializationException, 400; runtime and CloudWatch: ValidationError). Coral's own
  text for them is its deserialiser's (``STRING_VALUE can not be converted to an Integer``);
  naming the member is our choice. So are numbers outside their type's range (integer: 32 bits,
  long: 64 bits, no NaN or infinity) and timestamps that are no timestamp (epoch seconds, ISO 8601
  text or a datetime, years 1 to 9999: emulator.wire.timestamps).
  Members bound to HTTP headers/URI/query (rest-json runtime) may be given as the raw strings:
  integers and booleans are parsed (``"60"``, ``"true"``) before their constraints are checked.
* Unknown members are ignored, as AWS does. Blobs given as ``bytes``/``bytearray``/``memoryview``
  are length-checked; blobs given as (base64) ``str`` are not. Union "exactly one member" rules
  are not checked.
* Lengths are Python ``len`` (code points); Java counts UTF-16 units, which differs only for
  characters outside the BMP.

Patterns are Java regexes applied to the whole value, translated for the ``regex`` package by
emulator.wire.java_patterns (see there for what is translated and how long values are matched).

Validators are compiled once per shape (closures, cached per shape name and model), so a request
costs a dict walk plus a cached regex answer per string member.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import botocore.model

from emulator.errors import MalformedRequest, ValidationFailed
from emulator.wire.validation_messages import TYPE_CONSTRAINT
from emulator.wire.validators import Check, validator_for

__all__ = ["validate_input"]


_top_level: dict[int, tuple[botocore.model.Shape, Check]] = {}


def validate_input(shape: botocore.model.Shape, params: Mapping[str, Any]) -> None:
    """Check `params` (an operation's input members, PascalCase keys) against `shape` (its
    input structure). Raises ValidationFailed listing every violation in Coral's wording."""
    entry = _top_level.get(id(shape))
    if entry is not None and entry[0] is shape:
        check = entry[1]
    else:  # the shape object is kept alive by the entry, so its id cannot be reused
        check = validator_for(shape)
        _top_level[id(shape)] = (shape, check)
    errors: list[str] = []
    check(params, "", errors)
    if not errors:
        return
    malformed = [e for e in errors if TYPE_CONSTRAINT in e]
    if malformed:  # Coral's deserialiser fails before its validator runs
        raise MalformedRequest(_summary(malformed))
    raise ValidationFailed(_summary(errors))


def _summary(errors: list[str]) -> str:
    if len(errors) == 1:
        return f"1 validation error detected: {errors[0]}"
    return f"{len(errors)} validation errors detected: " + "; ".join(errors)
