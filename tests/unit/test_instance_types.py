"""The instance-type table against botocore's model: every hosting type has a row, with sane figures."""

from __future__ import annotations

import re

import botocore.session

from emulator.model.instance_types import INSTANCE_TYPES, AcceleratorKind, Architecture, lookup


def _hosting_types() -> list[str]:
    model = botocore.session.get_session().get_service_model("sagemaker")
    return list(model.shape_for("ProductionVariantInstanceType").enum)


def test_every_hosting_type_of_botocores_model_has_a_row() -> None:
    missing = [name for name in _hosting_types() if lookup(name) is None]
    assert missing == []


def test_the_table_holds_no_type_botocore_does_not_list() -> None:
    assert sorted(set(INSTANCE_TYPES) - set(_hosting_types())) == []


def test_figures_of_well_known_types() -> None:
    m5 = lookup("ml.m5.large")
    assert m5 is not None and (m5.vcpus, m5.memory_gib, m5.gpus, m5.architecture) == (
        2,
        8.0,
        0,
        Architecture.X86_64,
    )
    g5 = lookup("ml.g5.12xlarge")
    assert g5 is not None and (g5.vcpus, g5.memory_gib, g5.gpus, g5.accelerator_model) == (
        48,
        192.0,
        4,
        "NVIDIA A10G",
    )
    c4 = lookup("ml.c4.8xlarge")
    assert c4 is not None and (c4.vcpus, c4.memory_gib) == (36, 60.0)
    t2 = lookup("ml.t2.medium")
    assert t2 is not None and (t2.vcpus, t2.memory_gib) == (2, 4.0)
    inf2 = lookup("ml.inf2.24xlarge")
    assert inf2 is not None and (inf2.accelerators, inf2.gpus, inf2.accelerator_kind) == (
        6,
        0,
        AcceleratorKind.NEURON,
    )
    assert m5.describe() == "ml.m5.large (2 vCPUs, 8 GiB, amd64)"
    assert lookup("ml.g5.xlarge").describe() == "ml.g5.xlarge (4 vCPUs, 16 GiB, 1 NVIDIA A10G, amd64)"  # type: ignore[union-attr]


def test_graviton_families_are_arm64_and_the_rest_amd64() -> None:
    # Graviton: a c/m/r family whose generation is followed by "g" (c6g, m7g... r7gd), and the GB200's Grace
    for name, row in INSTANCE_TYPES.items():
        graviton = re.fullmatch(r"[cmr][0-9]g[a-z]*", row.family) is not None or row.family == "p6e-gb200"
        assert row.architecture is (Architecture.ARM64 if graviton else Architecture.X86_64), name


def test_unknown_types_have_no_row() -> None:
    assert lookup("ml.zz9.large") is None and lookup(None) is None and lookup("") is None
