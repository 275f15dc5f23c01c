#!/usr/bin/env python3
"""Builds a stand-in IndexTTS model directory (tests only): every file the real release
ships, in the real formats, but tiny. gpt.pth is a torch.save zip archive whose tensors
have the real shapes over one-element storages (stride 0), so the install check reads the
same pickle header it reads from the real checkpoint; the safetensors files have valid
headers; bpe.model is a SentencePiece protobuf with the real number of pieces. The weights
themselves are meaningless.

    python3 tts/hosts/standin_model.py DIR [--variant 2|2.5] [--fault NAME ...]

Faults (for the install check's tests): config_version, shape, vocabulary,
missing_cache, lfs_pointer. testdata/standin-model/<variant>/ holds a fault-free
directory built with this script, which the Go tests start hosts on.
"""

import argparse
import json
import os
import struct
import sys
import zipfile

# config.yaml's gpt section and version, per release (from the published configs).
GPT = {
    "2": {"number_text_tokens": 12000, "version": "2.0"},
    "2.5": {"number_text_tokens": 60509, "version": 2.5},
}
MODEL_DIM = 1280
MAX_MEL_TOKENS = 1815
MAX_TEXT_TOKENS = 600
NUMBER_MEL_CODES = 8194

CONFIG = """\
dataset:
    bpe_model: bpe.model
    sample_rate: 24000
gpt:
    model_dim: {dim}
    max_mel_tokens: {max_mel}
    max_text_tokens: {max_text}
    heads: 20
    layers: 24
    number_text_tokens: {vocab}
    number_mel_codes: {mel_codes}
    start_mel_token: 8192
    stop_mel_token: 8193
    start_text_token: 0
    stop_text_token: 1
gpt_checkpoint: gpt.pth
w2v_stat: wav2vec2bert_stats.pt
s2mel_checkpoint: s2mel.pth
emo_matrix: feat2.pt
spk_matrix: feat1.pt
emo_num: [3, 17, 2, 8, 4, 5, 10, 24]
qwen_emo_path: qwen0.6bemo4-merge/
vocoder:
    type: "bigvgan"
    name: "bigvgan"
version: {version}
"""


def _unicode(s):
    b = s.encode("utf-8")
    return b"X" + struct.pack("<I", len(b)) + b


def _int(n):
    return b"J" + struct.pack("<i", n)


def _tuple(values):
    return b"(" + b"".join(_int(v) for v in values) + b"t"


def _ordered_dict():
    return b"ccollections\nOrderedDict\n)R"


def torch_state_dict_pickle(shapes):
    """The pickle torch.save writes for a state dict of float tensors {name: shape} (an
    OrderedDict with _metadata), each tensor viewing a one-element storage with stride 0
    (storage key = its index)."""
    out = [b"\x80\x02", _ordered_dict(), b"("]
    for i, (name, shape) in enumerate(shapes.items()):
        out.append(_unicode(name))
        out.append(b"ctorch._utils\n_rebuild_tensor_v2\n(")
        out.append(b"(" + _unicode("storage") + b"ctorch\nFloatStorage\n" + _unicode(str(i)) + _unicode("cpu")
                   + _int(1) + b"tQ")
        out.append(_int(0) + _tuple(shape) + _tuple([0] * len(shape)) + b"\x89" + _ordered_dict() + b"tR")
    # state_dict() is an OrderedDict with a _metadata attribute (per-module versions),
    # which pickle restores with BUILD after the items.
    out.append(b"u}" + _unicode("_metadata") + _ordered_dict() + b"(" + _unicode("") + b"}" + _unicode("version")
               + _int(1) + b"susb.")
    return b"".join(out)


def write_torch_archive(path, shapes):
    """Writes a torch.save zip archive ("archive/data.pkl", "archive/data/<key>")."""
    root = os.path.splitext(os.path.basename(path))[0]
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        def put(name, data):  # a fixed date: the same bytes on every build
            z.writestr(zipfile.ZipInfo(f"{root}/{name}", date_time=(1980, 1, 1, 0, 0, 0)), data)

        put("data.pkl", torch_state_dict_pickle(shapes))
        put("byteorder", "little")
        for i in range(len(shapes)):
            put(f"data/{i}", struct.pack("<f", 0.0))
        put("version", "3\n")


def write_safetensors(path, shapes):
    header, offset = {}, 0
    for name, shape in shapes.items():
        header[name] = {"dtype": "F32", "shape": list(shape), "data_offsets": [offset, offset + 4]}
        offset += 4
    h = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"\0" * offset)


def write_sentencepiece(path, pieces):
    """A SentencePiece ModelProto with `pieces` entries (field 1), each piece "p<i>"."""
    out = bytearray()
    for i in range(pieces):
        word = b"p%d" % i
        inner = b"\x0a" + bytes([len(word)]) + word
        out += b"\x0a" + bytes([len(inner)]) + inner
    with open(path, "wb") as f:
        f.write(bytes(out))


def _write(path, data=b"stand-in\n"):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


FAULTS = ("config_version", "shape", "vocabulary", "missing_cache", "lfs_pointer")


def build(root, variant="2", faults=(), max_mel_tokens=MAX_MEL_TOKENS):
    """Writes the stand-in model directory for variant into root; faults break it on
    purpose (see FAULTS). max_mel_tokens sizes the GPT's mel position table."""
    for f in faults:
        if f not in FAULTS:
            raise ValueError(f"unknown fault {f!r}")
    os.makedirs(root, exist_ok=True)
    vocab = GPT[variant]["number_text_tokens"]
    version = GPT[variant]["version"]
    if "config_version" in faults:
        version = "2.5" if variant == "2" else "2.0"
    with open(os.path.join(root, "config.yaml"), "w", encoding="utf-8") as f:
        f.write(CONFIG.format(dim=MODEL_DIM, max_mel=max_mel_tokens, max_text=MAX_TEXT_TOKENS, vocab=vocab,
                              mel_codes=NUMBER_MEL_CODES, version=version))
    ckpt_vocab = GPT["2.5" if variant == "2" else "2"]["number_text_tokens"] if "shape" in faults else vocab
    gpt = os.path.join(root, "gpt.pth")
    if "lfs_pointer" in faults:
        _write(gpt, "version https://git-lfs.github.com/spec/v1\noid sha256:00\nsize 3500000000\n")
    else:
        write_torch_archive(gpt, {
            "text_embedding.weight": (ckpt_vocab + 1, MODEL_DIM),
            "mel_embedding.weight": (NUMBER_MEL_CODES, MODEL_DIM),
            "mel_pos_embedding.emb.weight": (max_mel_tokens + 3, MODEL_DIM),
            "text_pos_embedding.emb.weight": (MAX_TEXT_TOKENS + 2, MODEL_DIM),
            "mel_head.weight": (NUMBER_MEL_CODES, MODEL_DIM),
        })
    write_torch_archive(os.path.join(root, "s2mel.pth"), {"net.cfm.estimator.x_embedder.weight": (512, 80)})
    for name in ("wav2vec2bert_stats.pt", "feat1.pt", "feat2.pt"):
        write_torch_archive(os.path.join(root, name), {"stand_in": (73, 1024)})
    if variant == "2":
        write_sentencepiece(os.path.join(root, "bpe.model"), vocab - 10 if "vocabulary" in faults else vocab)
    else:
        write_torch_archive(os.path.join(root, "codec.pth"), {"stand_in": (8192, 8)})
        _write(os.path.join(root, "multilingual_zh_ja_yue_char_del.tiktoken"), "IQ== 0\nIg== 1\n")
    cache = os.path.join(root, "hf_cache")
    w2v = os.path.join(cache, "w2v-bert-2.0")
    _write(os.path.join(w2v, "config.json"), '{"model_type": "wav2vec2-bert"}\n')
    _write(os.path.join(w2v, "preprocessor_config.json"), '{"feature_size": 80}\n')
    os.makedirs(w2v, exist_ok=True)
    write_safetensors(os.path.join(w2v, "model.safetensors"), {"feature_projection.projection.weight": (1024, 160)})
    if variant == "2":
        write_safetensors(os.path.join(cache, "semantic_codec_model.safetensors"), {"quantizer.codebook": (8192, 8)})
    if "missing_cache" not in faults:
        _write(os.path.join(cache, "campplus_cn_common.bin"))
    _write(os.path.join(cache, "bigvgan", "config.json"), '{"num_mels": 80, "sampling_rate": 22050}\n')
    write_torch_archive(os.path.join(cache, "bigvgan", "bigvgan_generator.pt"), {"conv_pre.weight": (1536, 80, 7)})
    _write(os.path.join(root, "qwen0.6bemo4-merge", "config.json"), '{"model_type": "qwen3"}\n')
    return root


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("dir")
    p.add_argument("--variant", default="2", choices=sorted(GPT))
    p.add_argument("--fault", action="append", default=[], choices=FAULTS)
    opts = p.parse_args(argv)
    build(opts.dir, opts.variant, opts.fault)
    return 0


if __name__ == "__main__":
    sys.exit(main())
