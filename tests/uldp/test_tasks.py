from __future__ import annotations

import pytest

from fedprivacy.errors import ParameterError
from fedprivacy.uldp.tasks import task_for


def test_task_for() -> None:
    assert task_for("heart_disease", "binary", 13, 2).metric_name == "accuracy"
    assert task_for("tcga_brca", "survival", 39, 0).metric_name == "c_index"
    assert task_for("mnist", "multiclass", 784, 10).model_name == "paper-mnist-cnn"
    assert task_for("creditcard-synthetic", "binary", 30, 2).model_name == "fraudnet"
    with pytest.raises(ParameterError, match="dataset"):
        task_for("cifar10", "multiclass", 3072, 10)
    with pytest.raises(ParameterError, match="task"):
        task_for("tcga_brca", "binary", 39, 2)
