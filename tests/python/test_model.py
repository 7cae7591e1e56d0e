"""folio.load and Model: logits against numpy's reading of the checkpoint, the loss
against folio eval, text against folio generate, attention against the logits' model."""
import json
import sys

import numpy as np
import pytest

import folio
from conftest import ROOT, TINY, folio as folio_cmd

sys.path.insert(0, str(ROOT / "scripts"))
import folio_numpy  # noqa: E402  (scripts/folio_numpy.py: the model in numpy alone)


def test_logits_equal_numpy_forward(run):
    model = folio.load(str(run))
    weights, config, _ = folio_numpy.load(str(run))
    ids = model.tokenizer.encode("First Citizen:\nWe")[:16]
    ours = model.logits(np.array(ids))
    assert ours.shape == (len(ids), config["vocab_size"]) and ours.dtype == np.float32
    theirs = folio_numpy.forward(weights, config, np.array([ids]))[0]
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-5)


def test_loss_equals_folio_eval(run, corpus, tmp_path):
    model = folio.load(str(run))
    text = corpus.read_text()[:3000]
    (tmp_path / "t.txt").write_text(text)
    cli = json.loads(folio_cmd("eval", "--checkpoint", run, "--data", tmp_path / "t.txt", "--split", "all", "--json",
                               "--threads", "1"))
    ours = model.loss(text)
    assert ours["tokens"] == cli["tokens"] and ours["bytes"] == cli["bytes"]
    assert ours["nats_per_token"] == pytest.approx(cli["loss"], rel=1e-5)
    assert ours["bits_per_byte"] == pytest.approx(cli["bits_per_byte"], rel=1e-5)
    # The same figure from the logits, through numpy's cross-entropy: one eval path.
    ids = np.array(model.tokenizer.encode(text[:17]))
    logits = model.logits(ids[:16]).astype(np.float64)
    logp = logits - np.log(np.exp(logits - logits.max(1, keepdims=True)).sum(1, keepdims=True)) - logits.max(1, keepdims=True)
    nats = -logp[np.arange(16), ids[1:17]].mean()
    assert model.loss(text[:17])["nats_per_token"] == pytest.approx(nats, rel=1e-5)


@pytest.mark.parametrize("seed,prompt", [(1337, "ROMEO:"), (7, "\n"), (2**64 - 1, "Wh")])
def test_generate_equals_folio_generate(run, seed, prompt):
    model = folio.load(str(run))
    text = model.generate(prompt, max_new_tokens=60, temperature=0.9, top_k=10, seed=seed)
    cli = folio_cmd("generate", "--checkpoint", run, "--prompt", prompt.replace("\n", "\\n"), "--max-new-tokens", 60,
                    "--temperature", 0.9, "--top-k", 10, "--seed", seed, "--threads", "1")
    assert (prompt + text + "\n").encode() == cli
    assert "".join(model.stream(prompt, max_new_tokens=60, temperature=0.9, top_k=10, seed=seed)) == text


def test_generate_defaults_and_stop(run):
    model = folio.load(str(run))
    cli = folio_cmd("generate", "--checkpoint", run, "--max-new-tokens", 40)
    assert ("\n" + model.generate(max_new_tokens=40) + "\n").encode() == cli
    text = model.generate("A", max_new_tokens=200, temperature=0, seed=1)
    stop = text[20:22]
    cut = model.generate("A", max_new_tokens=200, temperature=0, seed=1, stop=[stop, "never-there"])
    assert cut == text[:text.index(stop)]


def test_tokenizer_round_trip(run):
    tok = folio.load(str(run)).tokenizer
    assert tok.vocab_size == folio.load(str(run)).config["vocab_size"]
    assert tok.decode(tok.encode("Hello, world")) == "Hello, world"
    assert tok.end_of_text is None and tok.kind == "char"


def test_attention_is_causal_softmax(run):
    model = folio.load(str(run))
    a = model.attention("To be, or not")
    c = model.config
    assert a.shape == (c["n_layer"], c["n_head"], 13, 13)
    np.testing.assert_allclose(a.sum(-1), 1.0, atol=1e-5)
    assert np.all(np.triu(a, 1) == 0)
    # Longer than the context: the last block_size tokens.
    assert model.attention("x" * 40).shape[-1] == c["block_size"]


def test_attention_equals_folio_attention(run):
    # folio attention's table, 3 decimals: rows are queries, the first column the labels.
    model = folio.load(str(run))
    prompt = "To be, or"
    weights = model.attention(prompt)
    for layer, head in [(0, 0), (1, 1)]:
        table = folio_cmd("attention", "--checkpoint", run, "--prompt", prompt, "--layer", layer, "--head", head,
                          "--threads", "1").decode().splitlines()[2:]
        shown = np.array([[float(v) for v in row.split()[1:]] for row in table])
        np.testing.assert_allclose(weights[layer, head], shown, rtol=0, atol=5e-4 + 1e-6)


def test_config_values_have_their_own_types(run):
    # The seed was a str and a width a float, as the checkpoint's JSON holds them.
    config = folio.load(str(run)).config
    assert config["seed"] == 1337 and type(config["seed"]) is int
    assert type(config["ffn_hidden"]) is int and type(config["n_layer"]) is int
    assert type(config["dropout"]) is float and type(config["qk_norm"]) is bool
    gpt = folio.nn.GPT(vocab_size=10, block_size=8, n_layer=1, n_head=2, n_embd=16, ffn_hidden=48, seed=7)
    assert gpt.config["ffn_hidden"] == 48 and type(gpt.config["ffn_hidden"]) is int
    assert gpt.config["seed"] == 7
    with pytest.raises(ValueError, match="ffn_hidden must be a whole number, got 48.5"):
        folio.nn.GPT(vocab_size=10, block_size=8, n_layer=1, n_head=2, n_embd=16, ffn_hidden=48.5)


def test_chat_names_what_is_wrong_with_its_messages(run):
    model = folio.load(str(run))
    # One message, or a text, is not a conversation (it iterated as keys or characters,
    # and was refused as "each message must be a dict").
    for wrong, kind in (({"role": "user", "content": "hi"}, "dict"), ("hi", "str"), (3, "int")):
        with pytest.raises(TypeError, match=f"messages must be a list of .* dicts, got {kind}"):
            model.chat(wrong)
    # A character the model lacks is placed in its message, not in the plain template's
    # text around it ("System:\nbe brief\n\nUser:\n" before it put it at position 24).
    with pytest.raises(ValueError, match=r"^\[chat\] message 1 \(user\): \[tokenizer\] character .* at position 2 "):
        model.chat([{"role": "system", "content": "be brief"}, {"role": "user", "content": "ab\x01"}])


def test_chat_refuses_a_conversation_longer_than_the_context(tmp_path, corpus):
    # As /v1/chat/completions and folio chat do: a conversation whose prompt (the template
    # included) leaves the reply no room in the context is refused, not cut to its last
    # block_size tokens, which would lose the system message and the template's start.
    # A plain generate still reads a long prompt's last block_size tokens.
    block = 40
    out = tmp_path / "wide"
    args = list(TINY)
    args[args.index("--block-size") + 1] = str(block)
    folio_cmd("train", "--data", corpus, "--out", out, *args)
    model = folio.load(str(out))
    template = len(model.tokenizer.encode("System:\nbe brief\n\nUser:\n\n\nAssistant:\n"))

    def chat(chars):
        return model.chat([{"role": "system", "content": "be brief"}, {"role": "user", "content": "a" * chars}],
                          max_new_tokens=3, greedy=True)

    fits = block - 1 - template  # the prompt and the reply's first token fill the context
    assert isinstance(chat(fits), str)
    with pytest.raises(ValueError, match=f"maximum context length is {block} tokens. However, your messages "
                                         f"resulted in {block} tokens"):
        chat(fits + 1)
    with pytest.raises(ValueError, match=f"resulted in {400 + template} tokens"):
        chat(400)
    assert isinstance(model.generate("a" * 400, max_new_tokens=3), str)


def with_prompt_start(path, bos):
    """Rewrites a checkpoint's metadata as folio import writes it for a GGUF whose tokenizer
    asks for BOS before prompts (add_bos_token): tokenizer_prompt_start names the BOS."""
    raw = path.read_bytes()
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + n])
    header["__metadata__"]["tokenizer_prompt_start"] = str(bos)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # the data stays 8-byte aligned
    path.write_bytes(len(text).to_bytes(8, "little") + text + raw[8 + n:])


def test_attention_puts_the_bos_first_as_folio_attention_does(corpus, tmp_path):
    # A model whose tokenizer asks for a BOS before prompts: folio attention runs it
    # first (labelled <bos>); the module ran the prompt alone, a forward pass of other
    # tokens, so the two differed in shape and in every weight.
    out = tmp_path / "bos"
    folio_cmd("train", "--data", corpus, "--out", out, "--tokenizer", "bpe", "--vocab-size", "400", *TINY)
    with_prompt_start(out / "model.safetensors", 1)
    model = folio.load(str(out))
    prompt = "To be, or"
    weights = model.attention(prompt)
    assert weights.shape[-1] == len(model.tokenizer.encode(prompt)) + 1
    for layer, head in [(0, 0), (1, 1)]:
        table = folio_cmd("attention", "--checkpoint", out, "--prompt", prompt, "--layer", layer, "--head", head,
                          "--threads", "1").decode().splitlines()[2:]
        assert table[0].split()[0] == "<bos>"
        shown = np.array([[float(v) for v in row.split()[1:]] for row in table])
        np.testing.assert_allclose(weights[layer, head], shown, rtol=0, atol=5e-4 + 1e-6)
