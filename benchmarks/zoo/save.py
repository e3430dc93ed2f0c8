"""Save a zoo model the way a user with a saved model has it: a .keras file (Keras models
only), a SavedModel exported for serving, and the sample inputs as .npz (keyed by input name),
plus the outputs TensorFlow gave on them in this process (``<name>.reference.npz``).

Usage: ``python benchmarks/zoo/save.py NAME [NAME ...] --out DIR [--tiny]``. Prints one JSON
line per model: ``{"name", "keras": path | null, "savedmodel": path, "inputs": path,
"reference": path}``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from pathlib import Path

import numpy as np
import tensorflow as tf

HERE = Path(__file__).resolve().parent


def _input_names(model, count: int) -> list[str]:
    names = [t.name.split(":")[0] for t in getattr(model, "inputs", None) or []]
    return names if len(names) == count else [f"input_{i}" for i in range(count)]


def _as_list(model, inputs) -> tuple[list[str], list[np.ndarray]]:
    if isinstance(inputs, dict):
        return list(inputs), list(inputs.values())
    arrays = list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
    return _input_names(model, len(arrays)), arrays


def _export_module(module, names, arrays, path: Path) -> None:
    specs = [
        tf.TensorSpec((None, *a.shape[1:]), tf.as_dtype(a.dtype), name=n)
        for n, a in zip(names, arrays, strict=True)
    ]
    signature = module.__call__.get_concrete_function(*specs)
    tf.saved_model.save(module, str(path), signatures={"serving_default": signature})


def _outputs(model, inputs) -> list[np.ndarray]:
    if isinstance(model, tf.keras.Model):
        result = model(inputs, training=False)
    elif isinstance(inputs, (list, tuple)):
        result = model(*inputs)
    else:
        result = model(inputs)
    flat = tf.nest.flatten(result)
    return [np.asarray(t) for t in flat]


def save(name: str, out: Path, tiny: bool) -> dict:
    module = importlib.import_module(name)
    model, inputs = (module.make_tiny if tiny else module.make)()
    names, arrays = _as_list(model, inputs)
    paths = {"name": name, "keras": None}
    if isinstance(model, tf.keras.Model):
        paths["keras"] = str(out / f"{name}.keras")
        model.save(paths["keras"])
        model.export(str(out / f"{name}_savedmodel"), verbose=False)
    else:
        _export_module(model, names, arrays, out / f"{name}_savedmodel")
    paths["savedmodel"] = str(out / f"{name}_savedmodel")
    paths["inputs"] = str(out / f"{name}.npz")
    np.savez(paths["inputs"], **dict(zip(names, arrays, strict=True)))
    paths["reference"] = str(out / f"{name}.reference.npz")
    reference = _outputs(model, inputs)
    np.savez(paths["reference"], **{f"output_{i}": a for i, a in enumerate(reference)})
    return paths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="+")
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--tiny", action="store_true")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    sys.path.insert(0, str(HERE))
    for name in args.names:
        print(json.dumps(save(name, args.out, args.tiny)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
