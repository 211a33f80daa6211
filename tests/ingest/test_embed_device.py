"""QORTEX_EMBED_DEVICE: auto picks CUDA only when torch sees a GPU; the CPU path is the plain
model's; the CUDA path (fp16, a larger batch) runs only where a GPU is, and agrees with fp32."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from qortex_core.embed import SentenceTransformerConfig, SentenceTransformerEmbedder
from qortex_core.embed_device import EmbedPlacement, choose_placement, cuda_available
from qortex_core.errors import ConfigError

TEXTS = [
    "The Eiffel Tower stands in Paris.",
    "Marie Curie won two Nobel prizes.",
    "Alice moved to Lisbon in March 2024.",
    "A quiet river runs through the valley.",
] * 4
needs_gpu = pytest.mark.skipif(not cuda_available(), reason="torch sees no CUDA device")
needs_cpu_torch = pytest.mark.skipif(cuda_available(), reason="a CUDA device is present")


@needs_cpu_torch
def test_auto_and_cpu_keep_the_cpu_batch_without_a_gpu() -> None:
    assert choose_placement("auto", 48) == EmbedPlacement("cpu", False, 48)
    assert choose_placement("cpu", 48) == EmbedPlacement("cpu", False, 48)


@needs_cpu_torch
def test_cuda_without_a_gpu_is_one_config_error() -> None:
    with pytest.raises(ConfigError, match="torch sees no CUDA device"):
        choose_placement("cuda")


def test_the_int8_model_is_cpu_only() -> None:
    with pytest.raises(ConfigError, match="int8"):
        choose_placement("cuda", int8=True)
    assert choose_placement("auto", 64, int8=True).device == "cpu"


def test_a_bad_device_variable_is_one_line_and_exit_2() -> None:
    env = dict(os.environ, QORTEX_EMBED_DEVICE="gpu", HF_HUB_OFFLINE="1")
    proc = subprocess.run(
        [sys.executable, "-m", "qortex_cli", "bench", "embed", "--passages", "8"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "qortex: error: QORTEX_EMBED_DEVICE='gpu' is not one of: auto, cpu, cuda"
    ]


def _plain(device: str) -> np.ndarray:
    from sentence_transformers import SentenceTransformer

    from qortex_core.embed import bundled_model_path

    model = SentenceTransformer(bundled_model_path(), device=device, local_files_only=True)
    return np.asarray(model.encode(TEXTS, normalize_embeddings=True), dtype=np.float32)


def test_the_cpu_path_is_plain_fp32_encode() -> None:
    ours = SentenceTransformerEmbedder(SentenceTransformerConfig(device="cpu")).embed(TEXTS)
    assert ours.dtype == np.float32
    np.testing.assert_allclose(ours, _plain("cpu"), atol=1e-5)


@needs_gpu
def test_cuda_runs_fp16_with_a_larger_batch_and_agrees_with_fp32() -> None:
    embedder = SentenceTransformerEmbedder(SentenceTransformerConfig(device="cuda"))
    vectors = embedder.embed(TEXTS)
    assert embedder.placement.half and embedder.placement.batch_size > 64
    cosines = np.sum(vectors * _plain("cpu"), axis=1)
    assert vectors.dtype == np.float32 and float(cosines.min()) >= 0.999
