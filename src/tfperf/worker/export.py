"""Worker side: write a Keras model file as a SavedModel that any candidate TensorFlow can load.

``python -m tfperf.worker.export SRC DST`` (run in the baseline environment; imports
TensorFlow). Keras 2 (TensorFlow <= 2.15) cannot read Keras 3 ``.keras`` files, but every
TensorFlow 2 reads a SavedModel, so builds are compared on the same exported graph. Exits 0 when
``DST`` was written; otherwise prints one line on stderr and exits 3.
"""

from __future__ import annotations

import sys


def export(src: str, dst: str) -> None:
    """Load ``src`` (.keras / .h5) and export it as an inference SavedModel at ``dst``."""
    import keras

    model = keras.models.load_model(src, compile=False)
    if hasattr(model, "export"):
        model.export(dst)
    else:  # Keras 2
        import tensorflow as tf

        tf.saved_model.save(model, dst)


def main(argv: list[str] | None = None) -> int:
    """Entry point; see the module docstring."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print("usage: python -m tfperf.worker.export SRC DST", file=sys.stderr)
        return 2
    try:
        export(args[0], args[1])
    except Exception as exc:  # the parent turns this line into a UserError
        print(f"{type(exc).__name__}: {exc}".splitlines()[0][:300], file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
