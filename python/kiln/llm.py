"""kiln.llm: run a Hugging Face checkpoint: Mixture-of-Experts (qwen3_moe, lfm2_moe), hybrid
Gated DeltaNet MoE (qwen3_5_moe, qwen3_next) or dense (qwen3).

    model = kiln.llm.load("path/to/Qwen3-30B-A3B", dtype="fp8")
    logits = model.forward(model.tokenizer.encode("Hello"))   # numpy float32 [T, vocab]
    print(model.generate("Hello", max_new_tokens=32))

A model holds one sequence: ``forward`` appends tokens to it (its KV cache), ``reset``
starts a new one, and ``generate`` always starts a new one. Threads may share a model:
its calls take turns, each running whole (a ``generate`` from start to end), so they
give the results they give one after another.
"""

import json
import operator

from . import _kiln

__all__ = ["load", "make_model", "Model", "Tokenizer"]


def _checked_seed(seed):
    """The seed as an int in [0, 2**64 - 1]: the generator's seed is unsigned 64-bit, and a
    negative one would otherwise reach the binding as an argument-type mismatch."""
    try:
        value = operator.index(seed)
    except TypeError:
        raise TypeError(f"seed must be an int, got {type(seed).__name__}") from None
    if not 0 <= value < 2**64:
        raise ValueError(f"seed must be in [0, 2**64 - 1], got {value}")
    return value


class Tokenizer:
    """The model folder's tokenizer.json (byte-level BPE)."""

    def __init__(self, model):
        self._model = model

    def encode(self, text, add_special_tokens=True):
        """Text -> list of token ids (adds the BOS token when the tokenizer asks for one)."""
        return self._model.encode(text, add_special_tokens)

    def decode(self, ids, skip_special_tokens=False):
        """Token ids -> text."""
        return self._model.decode(list(ids), skip_special_tokens)

    def chat_prompt(self, user, system="", enable_thinking=True):
        """The prompt text for one user turn, ending with the generation prompt: rendered
        with the model's chat template (``enable_thinking=False`` passed through, which
        Qwen3 / Qwen3.5 templates answer with the empty think block), or ChatML when the
        folder has no template."""
        return self._model.chat_prompt(user, system, enable_thinking)

    @property
    def has_chat_template(self):
        """Whether the model folder has a chat template kiln can render."""
        return self._model.has_chat_template

    def apply_chat_template(self, conversation, tools=None, documents=None, chat_template=None,
                            add_generation_prompt=False, continue_final_message=False, tokenize=True,
                            **kwargs):
        """transformers' ``apply_chat_template``: renders ``conversation`` (a list of
        ``{"role": ..., "content": ...}`` dicts, or a list of such lists) with the model's
        chat template, or ``chat_template`` when given. Further keyword arguments
        (``enable_thinking=False``, ...) become template variables. Returns the text with
        ``tokenize=False``, else its token ids (encoded without adding special tokens:
        the template writes them)."""
        if continue_final_message:
            raise NotImplementedError("apply_chat_template: continue_final_message is not supported")
        if conversation and isinstance(conversation[0], (list, tuple)):
            return [self.apply_chat_template(chat, tools, documents, chat_template, add_generation_prompt,
                                             False, tokenize, **kwargs) for chat in conversation]
        variables = dict(kwargs)
        variables["tools"] = tools
        variables["documents"] = documents
        text = self._model.apply_chat_template(json.dumps(list(conversation), ensure_ascii=False),
                                               bool(add_generation_prompt),
                                               json.dumps(variables, ensure_ascii=False), chat_template)
        return self.encode(text, add_special_tokens=False) if tokenize else text

    @property
    def eos_ids(self):
        return list(self._model.eos_ids)


class Model:
    """A loaded model and the state of one sequence. Use :func:`load` to make one."""

    def __init__(self, handle):
        self._model = handle
        self.tokenizer = Tokenizer(handle)

    @property
    def info(self):
        """Architecture, sizes, weight format, memory and load time, as a dict."""
        return self._model.info

    @property
    def position(self):
        """Tokens in the current sequence."""
        return self._model.position

    def reset(self):
        """Starts a new sequence (empties the KV cache)."""
        self._model.reset()

    def forward(self, token_ids, last_only=False):
        """Appends ``token_ids`` to the sequence; returns float32 logits as a numpy array,
        one row per position ([T, vocab]), or only the last row ([1, vocab]) with
        ``last_only``."""
        return self._model.forward(list(token_ids), not last_only).numpy()

    def generate(self, prompt, max_new_tokens=128, *, temperature=0.0, top_k=0, top_p=1.0, min_p=0.0,
                 repetition_penalty=1.0, seed=0, chat=False, system="", on_text=None, return_details=False,
                 enable_thinking=True):
        """Generates text for ``prompt`` on a new sequence. Greedy by default; sampling with
        ``temperature`` > 0 (then ``top_k``, ``top_p``, ``min_p``, ``seed``). ``on_text(piece)``
        receives the text as it is produced (return False to stop). ``enable_thinking=False``
        (with ``chat``) pre-fills the empty think block. Returns the text, or a
        dict with tokens, timings and the stop reason when ``return_details``."""
        result = self._model.generate(prompt, max_new_tokens, temperature, top_k, top_p, min_p,
                                      repetition_penalty, _checked_seed(seed), chat, system, on_text,
                                      enable_thinking)
        return result if return_details else result["text"]


def load(path, dtype="as-stored", *, max_context=0, cache_dtype=None, device=None):
    """Loads a Hugging Face folder (config.json, *.safetensors, tokenizer.json).

    dtype: "as-stored" (zero-copy; MoE experts copied into huge pages when memory
    allows), "bf16", "f32", or "fp8" (linear and expert weights
    quantised to float8_e4m3fn with per-row scales while loading). max_context: tokens
    the KV cache holds (0: the model's limit, at most 4096). cache_dtype: kiln.float32 or
    kiln.bfloat16 (default follows the weights). device: "cpu" (default) or "vulkan" (a
    name or a kiln.device): the weights go up once and the KV cache lives there; a model
    needing an op the device lacks raises NotImplementedError naming it.
    """
    return Model(_kiln._LlmModel.load(str(path), dtype, max_context, cache_dtype, device))


def make_model(out_dir, arch="qwen3_moe", preset="tiny", *, layers=None, fp8=False, seed=0):
    """Writes a deterministic synthetic checkpoint in the exact Hugging Face layout (what
    ``kiln make-model`` writes): random weights, so its text is meaningless. arch:
    "qwen3_moe", "lfm2_moe", "qwen3", "qwen3_next" or "qwen3_5_moe"; preset: "tiny", "demo",
    "qwen3-30b-a3b", "lfm2-8b-a1b", "qwen3-8b", "qwen3-next-80b-a3b", "qwen3.5-35b-a3b";
    fp8 writes a block-scaled FP8 checkpoint."""
    _kiln._make_synthetic_model(str(out_dir), arch, preset, layers, fp8, _checked_seed(seed))
