"""HF's GPT-2 directory to a GGUF file, through llama.cpp's own gguf-py (its TensorNameMap,
SpecialVocab and GGUFWriter), as llama.cpp's converter does for GPT2LMHeadModel
(conversion/gpt2.py in its source) but without torch or transformers, which that
converter imports and this machine lacks. folio's own GGUF exporter takes no part: the
names, the hparams keys and the tokenizer's layout all come from llama.cpp's code.
    PYTHONPATH=LLAMA_CPP/gguf-py python3 hf_gpt2_ggufpy.py HF_DIR OUT.gguf [f32|q8_0]
q8_0 stores the matrices as the converter's --outtype q8_0 does: every 2-D tensor but the
position table in Q8_0 blocks (gguf-py's bit-exact port of ggml's quantizer), the
vectors in F32.
"""
import json
import pathlib
import struct
import sys

import numpy as np
import gguf


def load_safetensors(path):
    """name -> float32 array; the file's own header says where each tensor lies."""
    raw = pathlib.Path(path).read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    header.pop("__metadata__", None)
    out = {}
    for name, v in header.items():
        assert v["dtype"] == "F32", (name, v["dtype"])
        begin, end = v["data_offsets"]
        out[name] = np.frombuffer(raw[8 + n + begin:8 + n + end], "<f4").reshape(v["shape"])
    return out


def main(hf_dir, out_path, dtype="f32"):
    if dtype not in ("f32", "q8_0"):
        sys.exit(f"the dtype must be f32 or q8_0, got {dtype!r}")
    hf = pathlib.Path(hf_dir)
    hparams = json.loads((hf / "config.json").read_text(encoding="utf-8"))
    n_layer = hparams["n_layer"]
    arch = gguf.MODEL_ARCH.GPT2
    writer = gguf.GGUFWriter(out_path, gguf.MODEL_ARCH_NAMES[arch])

    # The hparams GPT2Model.set_gguf_parameters writes, from the same config.json keys.
    writer.add_block_count(n_layer)
    writer.add_context_length(hparams["n_ctx"])
    writer.add_embedding_length(hparams["n_embd"])
    writer.add_feed_forward_length(4 * hparams["n_embd"])
    writer.add_head_count(hparams["n_head"])
    writer.add_layer_norm_eps(hparams["layer_norm_epsilon"])
    writer.add_file_type(gguf.LlamaFileType.ALL_F32 if dtype == "f32" else gguf.LlamaFileType.MOSTLY_Q8_0)

    # The tokenizer as the converter's _set_vocab_gpt2 writes it. It reads vocab.json
    # through transformers' AutoTokenizer; here vocab.json is read directly, in id order.
    # GPT-2's one added token, <|endoftext|>, is special there, so CONTROL here.
    vocab = json.loads((hf / "vocab.json").read_text(encoding="utf-8"))
    n_vocab = hparams["vocab_size"]
    by_id = {i: t for t, i in vocab.items()}
    assert sorted(by_id) == list(range(n_vocab)), "vocab.json's ids are not 0..vocab_size-1"
    tokens = [by_id[i] for i in range(n_vocab)]
    types = [gguf.TokenType.CONTROL if t == "<|endoftext|>" else gguf.TokenType.NORMAL for t in tokens]
    writer.add_tokenizer_model("gpt2")
    # get_vocab_base_pre names GPT-2's pre-tokenizer "gpt-2" by hashing its tokens of a
    # test string; the hash needs transformers, and the vocabulary is GPT-2's own.
    writer.add_tokenizer_pre("gpt-2")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    # merges.txt and bos/eos (config.json's bos_token_id, eos_token_id) by gguf-py itself.
    special = gguf.SpecialVocab(hf, load_merges=True, n_vocab=n_vocab)
    assert special.merges, "SpecialVocab found no merges"
    assert special.special_token_ids.get("bos") == 50256 and special.special_token_ids.get("eos") == 50256, special
    special.add_to_gguf(writer)

    # Tensors: gguf-py's map from HF's names to llama.cpp's. GPT-2's Conv1D layers store
    # their weights (in, out); llama.cpp's matrices are (out, in) like nn.Linear's, so the
    # converter transposes c_attn, c_proj and c_fc (modify_tensors), and so does this.
    names = gguf.get_tensor_name_map(arch, n_layer)
    for name, data in load_safetensors(hf / "model.safetensors").items():
        if name.endswith((".attn.bias", ".attn.masked_bias")):
            continue  # the causal mask buffers: not weights
        if name.endswith((".c_attn.weight", ".c_proj.weight", ".c_fc.weight")):
            data = data.T
        new_name = names.get_name(name, try_suffixes=(".weight", ".bias"))
        if new_name is None:
            sys.exit(f"gguf-py's TensorNameMap has no name for {name}")
        data = np.ascontiguousarray(data, dtype=np.float32)
        if dtype == "q8_0" and data.ndim == 2 and new_name != "position_embd.weight" and data.shape[1] % 32 == 0:
            writer.add_tensor(new_name, gguf.quants.quantize(data, gguf.GGMLQuantizationType.Q8_0),
                              raw_dtype=gguf.GGMLQuantizationType.Q8_0)
        else:
            writer.add_tensor(new_name, data)
        print(f"{name} -> {new_name} {list(data.shape)}")

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    print(f"wrote {out_path}: {len(tokens)} tokens, {len(special.merges)} merges")


if __name__ == "__main__":
    main(*sys.argv[1:4])
