"""The IndexTTS install check: what `dubstudio doctor` runs and what a host runs before it
loads its model.

Each check gives one line: OK, WARN (works, but not as configured) or FAIL, what was
found, and what to do when it is not right. A model directory is checked without loading
any weights: checkpoint shapes are read from the files' headers (the pickle inside a
torch.save zip archive, the JSON header of a safetensors file), so the check takes
seconds even for multi-gigabyte checkpoints and needs no GPU memory.

Only the standard library is needed to check the files; torch (and PyYAML, which
IndexTTS's OmegaConf brings along) are used where present. docs/engines.md shows a run.
"""

import collections
import json
import os
import pickle
import re
import struct
import subprocess
import sys
import zipfile

OK, WARN, FAIL, SKIP = "OK", "WARN", "FAIL", "SKIP"

# What each release ships in its model directory (besides config.yaml and hf_cache/).
MODEL_FILES = {
    "2": ("gpt.pth", "s2mel.pth", "bpe.model", "wav2vec2bert_stats.pt", "feat1.pt", "feat2.pt"),
    "2.5": ("gpt.pth", "s2mel.pth", "codec.pth", "multilingual_zh_ja_yue_char_del.tiktoken",
            "wav2vec2bert_stats.pt", "feat1.pt", "feat2.pt"),
}
# config.yaml's version for each release.
CONFIG_VERSIONS = {"2": "2.0", "2.5": "2.5"}
# The helper models the constructors look for under <model-dir>/hf_cache/ (what
# indextts.utils.model_download.ensure_models_available would download).
HF_CACHE = {
    "2": (
        ("w2v-BERT 2.0", "w2v-bert-2.0", ("config.json", "preprocessor_config.json", "model.safetensors")),
        ("semantic codec (MaskGCT)", "semantic_codec_model.safetensors", ()),
        ("CAMPPlus", "campplus_cn_common.bin", ()),
        ("BigVGAN", "bigvgan", ("config.json", "bigvgan_generator.pt")),
    ),
    "2.5": (
        ("w2v-BERT 2.0", "w2v-bert-2.0", ("config.json", "preprocessor_config.json", "model.safetensors")),
        ("CAMPPlus", "campplus_cn_common.bin", ()),
        ("BigVGAN", "bigvgan", ("config.json", "bigvgan_generator.pt")),
    ),
}
# Free accelerator memory a host needs to load and serve a short line (measured on an
# IndexTTS-2-shaped workload: 5.0 GB seen by NVML after load, plus a request's peak),
# and what the Qwen emotion model adds.
NEED_VRAM = 6 << 30
NEED_VRAM_QWEN = 3 << 29  # 1.5 GiB
MIN_PYTHON = (3, 10)


class Result:
    """One check's outcome."""

    def __init__(self, name, status, detail, fix=""):
        self.name = name
        self.status = status
        self.detail = detail
        self.fix = fix

    def line(self):
        s = f"{self.status:<4} {self.name}: {self.detail}"
        if self.fix and self.status in (FAIL, WARN):
            s += f" -> {self.fix}"
        return s

    def as_dict(self):
        return {"name": self.name, "status": self.status, "detail": self.detail, "fix": self.fix}


class CheckError(Exception):
    """A host refused to load because its install check failed."""

    def __init__(self, results):
        self.results = results
        failed = [r for r in results if r.status == FAIL]
        super().__init__("; ".join(f"{r.name}: {r.detail}" + (f" ({r.fix})" if r.fix else "") for r in failed))


# ---------------------------------------------------------------------------------------
# Reading the files


def read_config(path):
    """Returns config.yaml as a dict: with PyYAML when installed (IndexTTS's OmegaConf
    depends on it), else with read_simple_yaml."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    try:
        import yaml  # noqa: PLC0415
    except ImportError:
        return read_simple_yaml(text)
    doc = yaml.safe_load(text)
    if not isinstance(doc, dict):
        raise ValueError("config.yaml is not a mapping")
    return doc


def read_simple_yaml(text):
    """Reads the YAML subset IndexTTS's config.yaml uses: nested mappings by indentation,
    scalars, quoted strings and inline [a, b] lists."""
    root = {}
    stack = [(-1, root)]
    for raw in text.splitlines():
        line = raw.split(" #", 1)[0].rstrip() if not raw.lstrip().startswith("#") else ""
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip(" "))
        key, sep, value = line.strip().partition(":")
        if not sep:
            raise ValueError(f"config.yaml: cannot read line {raw!r}")
        while stack[-1][0] >= indent:
            stack.pop()
        parent = stack[-1][1]
        value = value.strip()
        if value == "":
            child = {}
            parent[key.strip()] = child
            stack.append((indent, child))
        else:
            parent[key.strip()] = _scalar(value)
    return root


def _scalar(v):
    if v.startswith("[") and v.endswith("]"):
        return [_scalar(x.strip()) for x in v[1:-1].split(",") if x.strip()]
    if len(v) >= 2 and v[0] == v[-1] and v[0] in "'\"":
        return v[1:-1]
    if v in ("true", "false"):
        return v == "true"
    for conv in (int, float):
        try:
            return conv(v)
        except ValueError:
            pass
    return v


class _Stub:
    """Stands for a class or function named in a checkpoint's pickle."""

    def __init__(self, module, name):
        self.module, self.name = module, name

    def __call__(self, *args):
        if self.name == "_rebuild_tensor_v2" or self.name == "_rebuild_tensor":
            return TensorHeader(tuple(args[2]))
        if self.name == "_rebuild_parameter" or self.name == "_rebuild_parameter_with_state":
            return args[0]
        if self.module == "collections" and self.name == "OrderedDict":
            # A real OrderedDict: a state dict's carries _metadata, set by BUILD.
            return collections.OrderedDict(*args)
        if self.name.endswith("Storage") or self.name == "dtype":
            return self
        raise pickle.UnpicklingError(f"checkpoint calls {self.module}.{self.name}, which a state dict does not")


class TensorHeader:
    """A tensor's shape, read from a checkpoint without its data."""

    def __init__(self, shape):
        self.shape = shape

    def __repr__(self):
        return f"TensorHeader{self.shape}"


class _HeaderUnpickler(pickle.Unpickler):
    # Only what torch.save writes for a state dict; anything else is refused, like
    # torch.load(weights_only=True) does.
    allowed = {("collections", "OrderedDict"), ("torch._utils", "_rebuild_tensor_v2"),
               ("torch._utils", "_rebuild_tensor"), ("torch._utils", "_rebuild_parameter"),
               ("torch._utils", "_rebuild_parameter_with_state"), ("torch", "dtype")}

    def find_class(self, module, name):
        if (module, name) in self.allowed or (module in ("torch", "torch.storage") and name.endswith("Storage")):
            return _Stub(module, name)
        raise pickle.UnpicklingError(f"checkpoint refers to {module}.{name}, which a state dict does not")

    def persistent_load(self, pid):
        return pid  # a storage reference: the data stays in the archive


def read_torch_shapes(path):
    """Returns {name: shape} of the tensors in a torch.save zip archive (what torch has
    written since 1.6), reading only its pickle: no tensor data is loaded. A state dict
    under "model" (how IndexTTS's trainer saves) is unwrapped."""
    with zipfile.ZipFile(path) as z:
        pkl = [n for n in z.namelist() if n.endswith("/data.pkl") or n == "data.pkl"]
        if not pkl:
            raise ValueError(f"{os.path.basename(path)} is not a torch.save archive (no data.pkl)")
        with z.open(pkl[0]) as f:
            doc = _HeaderUnpickler(f).load()
    if isinstance(doc, dict) and isinstance(doc.get("model"), dict):
        doc = doc["model"]
    if not isinstance(doc, dict):
        raise ValueError(f"{os.path.basename(path)} does not hold a state dict")
    return {k: v.shape for k, v in doc.items() if isinstance(v, TensorHeader)}


def read_safetensors_shapes(path):
    """Returns {name: shape} from a safetensors file's JSON header."""
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise ValueError(f"{os.path.basename(path)} is too short for a safetensors file")
        (n,) = struct.unpack("<Q", head)
        if n > 100 << 20 or n > os.path.getsize(path) - 8:
            raise ValueError(f"{os.path.basename(path)} has no valid safetensors header")
        header = json.loads(f.read(n))
    return {k: tuple(v["shape"]) for k, v in header.items() if k != "__metadata__"}


def count_sentencepiece_pieces(path):
    """Counts the vocabulary of a SentencePiece model (ModelProto field 1, "pieces")."""
    with open(path, "rb") as f:
        data = f.read()
    i, pieces = 0, 0
    while i < len(data):
        key, i = _varint(data, i)
        field, wire = key >> 3, key & 7
        if wire == 0:
            _, i = _varint(data, i)
        elif wire == 1:
            i += 8
        elif wire == 2:
            n, i = _varint(data, i)
            i += n
            if field == 1:
                pieces += 1
        elif wire == 5:
            i += 4
        else:
            raise ValueError(f"{os.path.basename(path)} is not a SentencePiece model")
        if i > len(data):
            raise ValueError(f"{os.path.basename(path)} is truncated")
    return pieces


def _varint(data, i):
    shift = value = 0
    while True:
        if i >= len(data):
            raise ValueError("truncated varint")
        b = data[i]
        i += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, i
        shift += 7


def _lfs_pointer(path):
    """True when path is a Git LFS pointer instead of the file (a clone without LFS)."""
    try:
        if os.path.getsize(path) > 1024:
            return False
        with open(path, "rb") as f:
            return f.read(40).startswith(b"version https://git-lfs")
    except OSError:
        return False


def human(n):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


# ---------------------------------------------------------------------------------------
# The checks


def check_install(model_dir, variant, cfg_path=None, qwen_emo=False, cuda_kernel=None, startup=False, device=None):
    """Runs every check and returns the results in order. startup=True is what a host
    runs before loading: the BigVGAN kernel is left to the model's constructor (it
    builds it), and free memory only warns (the pool budgets the GPU). A host started
    with --device cpu needs no CUDA device."""
    cfg_path = cfg_path or os.path.join(model_dir, "config.yaml")
    out = [check_python()]
    torch = None
    try:
        import torch  # noqa: PLC0415
    except Exception as e:  # noqa: BLE001 (a broken install raises more than ImportError)
        out.append(Result("torch", FAIL, f"cannot import torch: {e}",
                          "run the host with the Python of the IndexTTS environment (HOST_PYTHON; scripts/indextts_env.sh)"))
    else:
        out.append(Result("torch", OK, f"torch {getattr(torch, '__version__', '?')}"))
        if device and str(device).startswith("cpu"):
            out.append(Result("cuda", OK, "not needed: the host runs on the CPU (--device cpu)"))
        else:
            out.append(check_cuda(torch))
        if not startup:
            out.append(check_imports(variant))
    out.extend(check_model_files(model_dir, variant))
    cfg = None
    if not os.path.isfile(cfg_path):
        out.append(Result("config", FAIL, f"{cfg_path} is missing", "copy the config.yaml that ships with the weights"))
    else:
        try:
            cfg = read_config(cfg_path)
        except Exception as e:  # noqa: BLE001
            out.append(Result("config", FAIL, f"cannot read {cfg_path}: {e}", "copy the config.yaml that ships with the weights"))
    if cfg is not None:
        out.append(check_config_version(cfg, variant))
        out.extend(check_shapes(cfg, model_dir, variant))
    out.extend(check_hf_cache(model_dir, variant))
    out.append(check_qwen(cfg, model_dir, qwen_emo))
    if not startup:
        out.append(check_kernel(torch, cuda_kernel))
    out.append(check_vram(torch, qwen_emo, warn_only=startup))
    return out


def check_python():
    v = sys.version_info
    detail = f"Python {v.major}.{v.minor}.{v.micro} at {sys.executable}"
    if (v.major, v.minor) < MIN_PYTHON:
        return Result("python", FAIL, detail, f"IndexTTS needs Python {MIN_PYTHON[0]}.{MIN_PYTHON[1]} or newer")
    return Result("python", OK, detail)


def check_imports(variant):
    """Imports IndexTTS's model module (and with it transformers, librosa, OmegaConf...),
    as the host will: a moved environment or a checkout off PYTHONPATH fails here."""
    module = {"2": "indextts.infer_v2", "2.5": "indextts.infer_v2_5"}[variant]
    try:
        import importlib  # noqa: PLC0415

        mod = importlib.import_module(module)
        getattr(mod, "IndexTTS2")
    except Exception as e:  # noqa: BLE001
        return Result("imports", FAIL, f"cannot import {module}: {type(e).__name__}: {e}",
                      "put the index-tts checkout on PYTHONPATH (INDEXTTS_DIR) and use its environment (HOST_PYTHON)")
    where = os.path.dirname(os.path.dirname(os.path.abspath(mod.__file__)))
    env = sys.prefix if sys.prefix == sys.base_prefix else f"{sys.prefix} (base {sys.base_prefix})"
    return Result("imports", OK, f"{module} from {where}; environment {env}")


def check_cuda(torch):
    try:
        available = torch.cuda.is_available()
    except Exception as e:  # noqa: BLE001
        available, err = False, e
    else:
        err = None
    cuda = getattr(getattr(torch, "version", None), "cuda", None)
    driver = _driver_version()
    if not available:
        why = f": {err}" if err else ""
        return Result("cuda", FAIL, f"torch sees no CUDA device{why} (torch built for CUDA {cuda or 'none'}, driver {driver})",
                      "install the NVIDIA driver (CUDA 12.8 or newer) and a CUDA build of torch; check CUDA_VISIBLE_DEVICES")
    name = ""
    try:
        name = torch.cuda.get_device_name(0)
    except Exception:  # noqa: BLE001
        pass
    return Result("cuda", OK, f"CUDA {cuda}, driver {driver}, {name or 'device 0'}")


def _driver_version():
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return "unknown (no nvidia-smi)"
    v = out.stdout.strip().splitlines()
    return v[0].strip() if out.returncode == 0 and v else "unknown"


def check_model_files(model_dir, variant):
    if not os.path.isdir(model_dir):
        return [Result("model dir", FAIL, f"{model_dir} does not exist",
                       f"download the IndexTTS-{variant} checkpoints there (docs/engines.md, Installing IndexTTS offline)")]
    out = []
    for name in MODEL_FILES[variant]:
        out.append(_file_result("model " + name, os.path.join(model_dir, name),
                                f"download IndexTeam/IndexTTS-{variant} into {model_dir}"))
    return out


def _file_result(label, path, fix):
    if not os.path.isfile(path):
        return Result(label, FAIL, f"{path} is missing", fix)
    size = os.path.getsize(path)
    if size == 0:
        return Result(label, FAIL, f"{path} is empty", fix)
    if _lfs_pointer(path):
        return Result(label, FAIL, f"{path} is a Git LFS pointer, not the file", "fetch it with `git lfs pull` or `hf download`")
    return Result(label, OK, human(size))


def check_config_version(cfg, variant):
    want = CONFIG_VERSIONS[variant]
    got = cfg.get("version")
    if got is None:
        return Result("config version", FAIL, f"config.yaml has no version (want {want})",
                      f"use the config.yaml of IndexTTS-{variant}")
    if str(got) != want:
        return Result("config version", FAIL, f"config.yaml says version {got}, the host runs IndexTTS-{variant}",
                      f"use the config.yaml of IndexTTS-{variant}, or start the host with --variant matching the weights")
    return Result("config version", OK, f"version {got}")


def check_shapes(cfg, model_dir, variant):
    """config.yaml's GPT sizes against gpt.pth's tensor shapes: IndexTTS loads checkpoints
    leniently, so a config of another release gives noise instead of an error."""
    gpt = cfg.get("gpt") if isinstance(cfg.get("gpt"), dict) else {}
    name = cfg.get("gpt_checkpoint") or "gpt.pth"
    path = os.path.join(model_dir, str(name).strip())
    fix = "use the config.yaml that ships with these weights (the config of another release does not fit)"
    if not os.path.isfile(path):
        return [Result("gpt shapes", FAIL, f"{path} is missing", fix)]
    try:
        shapes = read_torch_shapes(path)
    except Exception as e:  # noqa: BLE001
        return [Result("gpt shapes", FAIL, f"cannot read {os.path.basename(path)}: {e}", "download the checkpoint again")]
    try:
        dim = int(gpt["model_dim"])
        expect = {
            "text_embedding.weight": (int(gpt["number_text_tokens"]) + 1, dim, "number_text_tokens + 1"),
            "mel_embedding.weight": (int(gpt["number_mel_codes"]), dim, "number_mel_codes"),
            "mel_pos_embedding.emb.weight": (int(gpt["max_mel_tokens"]) + 3, dim, "max_mel_tokens + 3"),
            "text_pos_embedding.emb.weight": (int(gpt["max_text_tokens"]) + 2, dim, "max_text_tokens + 2"),
        }
    except (KeyError, TypeError, ValueError) as e:
        return [Result("gpt shapes", FAIL, f"config.yaml lacks gpt.{e}", fix)]
    problems = []
    for key, (rows, cols, what) in expect.items():
        got = shapes.get(key)
        if got is None:
            problems.append(f"{key} is not in {os.path.basename(path)}")
        elif tuple(got) != (rows, cols):
            problems.append(f"{key} is {list(got)}, config.yaml gives [{rows}, {cols}] ({what})")
    if problems:
        return [Result("gpt shapes", FAIL, "; ".join(problems), fix)]
    out = [Result("gpt shapes", OK, f"vocabulary {gpt['number_text_tokens']}, {gpt['max_mel_tokens']} mel positions, "
                                    f"{gpt['max_text_tokens']} text positions, dim {dim}")]
    if variant == "2":
        bpe = os.path.join(model_dir, str((cfg.get("dataset") or {}).get("bpe_model", "bpe.model")).strip())
        if os.path.isfile(bpe) and not _lfs_pointer(bpe):
            try:
                n = count_sentencepiece_pieces(bpe)
            except ValueError as e:
                out.append(Result("vocabulary", FAIL, str(e), "download bpe.model again"))
            else:
                if n != int(gpt["number_text_tokens"]):
                    out.append(Result("vocabulary", FAIL, f"bpe.model has {n} pieces, config.yaml says "
                                      f"number_text_tokens {gpt['number_text_tokens']}", fix))
                else:
                    out.append(Result("vocabulary", OK, f"bpe.model has {n} pieces"))
    return out


def check_hf_cache(model_dir, variant):
    out = []
    cache = os.path.join(model_dir, "hf_cache")
    fix = ("fill hf_cache/ on a connected machine (ensure_models_available, docs/engines.md step 3): "
           "offline, IndexTTS would try to download it")
    for label, name, inside in HF_CACHE[variant]:
        path = os.path.join(cache, name)
        if not inside:
            r = _file_result("hf_cache " + label, path, fix)
            if r.status == OK and name.endswith(".safetensors"):
                r = _safetensors_result("hf_cache " + label, path, r.detail)
            out.append(r)
            continue
        if not os.path.isdir(path):
            out.append(Result("hf_cache " + label, FAIL, f"{path}/ is missing", fix))
            continue
        missing = [f for f in inside if not os.path.isfile(os.path.join(path, f))]
        if missing:
            out.append(Result("hf_cache " + label, FAIL, f"{path}/ lacks {', '.join(missing)}", fix))
            continue
        bad = [f for f in inside if _lfs_pointer(os.path.join(path, f)) or os.path.getsize(os.path.join(path, f)) == 0]
        if bad:
            out.append(Result("hf_cache " + label, FAIL, f"{path}/ has empty or LFS-pointer files: {', '.join(bad)}", fix))
            continue
        size = sum(os.path.getsize(os.path.join(path, f)) for f in inside)
        r = Result("hf_cache " + label, OK, human(size))
        for f in inside:
            if f.endswith(".safetensors"):
                r = _safetensors_result("hf_cache " + label, os.path.join(path, f), r.detail)
        out.append(r)
    return out


def _safetensors_result(label, path, size):
    try:
        n = len(read_safetensors_shapes(path))
    except Exception as e:  # noqa: BLE001
        return Result(label, FAIL, f"{path}: {e}", "download it again")
    return Result(label, OK, f"{size}, {n} tensors")


def check_qwen(cfg, model_dir, qwen_emo):
    if not qwen_emo:
        return Result("qwen emotion model", SKIP, "not loaded (--no-qwen-emo): emotion mode text is refused")
    rel = str((cfg or {}).get("qwen_emo_path") or "qwen0.6bemo4-merge/").strip()
    path = os.path.join(model_dir, rel)
    if not os.path.isfile(os.path.join(path, "config.json")):
        return Result("qwen emotion model", FAIL, f"{path} has no config.json",
                      "copy the Qwen emotion model directory that ships with the checkpoints, or run with --no-qwen-emo")
    return Result("qwen emotion model", OK, path)


def check_kernel(torch, cuda_kernel):
    """Builds (or loads) BigVGAN's fused CUDA kernel the way IndexTTS2's constructor does,
    so the first host start does not spend minutes on nvcc, and says which will run."""
    if cuda_kernel is False:
        return Result("bigvgan kernel", OK, "plain torch (--no-cuda-kernel)")
    if torch is None or not _cuda_available(torch):
        return Result("bigvgan kernel", OK, "plain torch (no CUDA)")
    try:
        import importlib  # noqa: PLC0415

        importlib.import_module("indextts.s2mel.modules.bigvgan.alias_free_activation.cuda.activation1d")
    except Exception as e:  # noqa: BLE001 (a failed nvcc/ninja build raises anything)
        msg = str(e).strip().splitlines()
        return Result("bigvgan kernel", WARN, f"plain torch: the CUDA kernel did not build ({msg[-1] if msg else type(e).__name__})",
                      "install nvcc and ninja matching torch's CUDA, or start hosts with --no-cuda-kernel")
    return Result("bigvgan kernel", OK, "custom CUDA kernel")


def _cuda_available(torch):
    try:
        return bool(torch.cuda.is_available())
    except Exception:  # noqa: BLE001
        return False


def check_vram(torch, qwen_emo, warn_only=False):
    if torch is None or not _cuda_available(torch):
        return Result("free vram", SKIP, "no CUDA device")
    try:
        free, total = torch.cuda.mem_get_info()
    except Exception as e:  # noqa: BLE001
        return Result("free vram", WARN, f"cannot read: {e}")
    need = NEED_VRAM + (NEED_VRAM_QWEN if qwen_emo else 0)
    detail = f"{human(free)} free of {human(total)} (one host needs about {human(need)})"
    if free < need:
        return Result("free vram", WARN if warn_only else FAIL, detail,
                      "stop other processes on this GPU or pick another (CUDA_VISIBLE_DEVICES)")
    return Result("free vram", OK, detail)


def failed(results):
    return [r for r in results if r.status == FAIL]


def main(argv=None):
    import argparse  # noqa: PLC0415

    p = argparse.ArgumentParser(description="Checks an IndexTTS install for dubstudio's host.")
    p.add_argument("--model-dir", required=True)
    p.add_argument("--cfg")
    p.add_argument("--variant", default="2", choices=sorted(MODEL_FILES))
    p.add_argument("--qwen-emo", action="store_true")
    p.add_argument("--no-cuda-kernel", dest="cuda_kernel", action="store_false", default=None)
    p.add_argument("--json", action="store_true", help="one JSON object per line")
    opts = p.parse_args(argv)
    results = check_install(opts.model_dir, opts.variant, opts.cfg, opts.qwen_emo, opts.cuda_kernel)
    print_results(results, opts.json)
    return 1 if failed(results) else 0


def print_results(results, as_json=False, out=None):
    out = out or sys.stdout
    for r in results:
        print(json.dumps(r.as_dict()) if as_json else r.line(), file=out)
    out.flush()


if __name__ == "__main__":
    sys.exit(main())
