"""contract_tests.multi_model.plan_model_data: which model data a single-model and a multi-model container
of the image get, from --model-data and --multi-model-data and the image's multi-models label."""

from __future__ import annotations

from pathlib import Path

from contract_tests.multi_model import ModelDataPlan, plan_model_data


def test_without_the_label_model_data_is_single_model_data() -> None:
    assert plan_model_data("s3://b/models/", None, labelled=False) == ModelDataPlan("s3://b/models/", None)
    assert plan_model_data("m.tar.gz", "s3://b/p/", labelled=False) == ModelDataPlan("m.tar.gz", "s3://b/p/")
    assert plan_model_data(None, None, labelled=False) == ModelDataPlan(None, None)


def test_with_the_label_one_artifact_serves_both() -> None:
    for url in ("s3://b/model.tar.gz", "/data/model.tar.gz", "file:///data/model.tar.gz"):
        assert plan_model_data(url, None, labelled=True) == ModelDataPlan(url, url)


def test_with_the_label_a_prefix_is_the_multi_model_data_and_its_first_artifact_the_single(
    tmp_path: Path,
) -> None:
    assert plan_model_data("s3://b/models/", None, labelled=True) == ModelDataPlan(
        None, "s3://b/models/", single_from_prefix=True
    )
    (tmp_path / "team").mkdir()
    (tmp_path / "team" / "a.tar.gz").write_bytes(b"")
    assert plan_model_data(str(tmp_path), None, labelled=True) == ModelDataPlan(
        None, str(tmp_path), single_from_prefix=True
    )


def test_with_the_label_a_model_folder_is_single_model_data_only(tmp_path: Path) -> None:
    (tmp_path / "model.pth").write_bytes(b"")
    assert plan_model_data(str(tmp_path), None, labelled=True) == ModelDataPlan(str(tmp_path), None)
    url = f"file://{tmp_path}"
    assert plan_model_data(url, None, labelled=True) == ModelDataPlan(url, None)


def test_the_prefix_given_apart_leaves_model_data_to_the_single_model_checks() -> None:
    assert plan_model_data("s3://b/m.tar.gz", "s3://b/p/", labelled=True) == ModelDataPlan(
        "s3://b/m.tar.gz", "s3://b/p/"
    )
    assert plan_model_data(None, "s3://b/p/", labelled=True) == ModelDataPlan(None, "s3://b/p/")
