"""Build a tiny, randomly initialised causal LM with a real tokenizer, for the hf: backend tests.

Nothing is downloaded: the tokenizer is a byte-level BPE trained here with the `tokenizers`
library on a few sentences (so digits exist both bare, "2", and with a leading space, "Ġ2"),
wrapped in transformers' fast tokenizer class with a small jinja chat template; the model is a
2-layer Llama with hidden size 32. Both are written with `save_pretrained`.
"""

from __future__ import annotations

from pathlib import Path

CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}<|end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)
SPECIAL_TOKENS = ["<pad>", "<s>", "</s>", "<|system|>", "<|user|>", "<|assistant|>", "<|end|>"]

_SENTENCES = [
    "You are a relevance judge. Rate the passage for the query.",
    "Query: how tall is the eiffel tower",
    "Passage: The tower is 330 metres tall and stands in Paris.",
    "Does the passage answer the query? Yes or No.",
    "Yes, the passage answers it. No, it does not.",
    "Final score: 0 Final score: 1 Final score: 2 Final score: 3",
    "Grade: 0 Grade: 1 Grade: 2 Grade: 3 Answer: Yes Answer: No",
    "0 1 2 3 0123 3210 a score of 2 a score of 3",
    "the passage is highly relevant, somewhat relevant, or not relevant at all",
]


def build_tokenizer(chat_template: str | None = CHAT_TEMPLATE):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=420,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_SENTENCES * 20, trainer=trainer)
    kwargs = {"chat_template": chat_template} if chat_template is not None else {}
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<pad>",
        additional_special_tokens=SPECIAL_TOKENS[3:],
        **kwargs,
    )


def build_model(tokenizer, seed: int = 0):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        # wide initial weights, so the random model has clear preferences rather than a flat distribution
        initializer_range=0.5,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    model.eval()
    return model


def build_tiny_model(folder: str | Path, *, chat_template: str | None = CHAT_TEMPLATE, seed: int = 0) -> Path:
    """Write a tiny model + tokenizer to `folder` (created) and return it."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer = build_tokenizer(chat_template)
    model = build_model(tokenizer, seed=seed)
    tokenizer.save_pretrained(folder)
    model.save_pretrained(folder)
    return folder
