"""The built-in Keras models (worker side: imports TensorFlow and Keras).

Contract: :func:`build` returns a :class:`Built` for an inference workload of
:data:`tfperf.core.workloads.BUILTINS`, a size and a batch: the Keras model, seeded sample inputs
and the analytic FLOPs per call (a training built-in is a factory of
:mod:`tfperf.worker.trainmodels`, measured as the user's training step). Weights and inputs
depend only on (name, size, batch), so two builds, in one process or two, are identical.
Works with Keras 3 and with the Keras 2 of TensorFlow 2.15.

The classifiers (``mobilenetv2``, ``resnet50``, ``mlp``) return logits, not
a softmax: with random weights a softmax over 10 or 1000 classes is nearly uniform, and an
accuracy check could not tell a degraded variant from an exact one. An inference model with
BatchNormalization layers also gets moving statistics measured on seeded images
(:func:`calibrate_batchnorm`), as a trained network has: without them MobileNetV2's signal
decays layer after layer to logits of ~1e-11, and with them every layer sees unit-scale
activations and the logits spread over several units.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tfperf.core.workloads import SEED, get_builtin
from tfperf.worker import flops as flops_mod
from tfperf.worker.inputs import generate, keras_input_specs


@dataclass
class Built:
    """A built-in workload, built: the model, its inputs, and what one call costs."""

    model: Any
    inputs: dict[str, Any]
    flops_per_call: int | None
    flops_source: str
    notes: list[str] = field(default_factory=list)


def _lstm(keras: Any, p: dict[str, Any]) -> Any:
    inp = keras.Input((p["steps"], p["features"]), name="sequence")
    return keras.Model(inp, keras.layers.LSTM(p["units"])(inp), name="lstm")


def _encoder(keras: Any, p: dict[str, Any]) -> Any:
    layers = keras.layers
    inp = keras.Input((p["seq"], p["d_model"]), name="embeddings")
    x = inp
    for i in range(p["layers"]):
        att = layers.MultiHeadAttention(
            num_heads=p["heads"], key_dim=p["d_model"] // p["heads"], name=f"attention_{i}"
        )(x, x)
        x = layers.LayerNormalization(name=f"norm_att_{i}")(layers.Add()([x, att]))
        ffn = layers.Dense(p["ffn"], activation="relu", name=f"ffn_in_{i}")(x)
        ffn = layers.Dense(p["d_model"], name=f"ffn_out_{i}")(ffn)
        x = layers.LayerNormalization(name=f"norm_ffn_{i}")(layers.Add()([x, ffn]))
    return keras.Model(inp, x, name="encoder")


def _images(keras: Any, p: dict[str, Any]) -> Any:
    return keras.Input((p["image"], p["image"], 3), name="images")


def _mobilenetv2(keras: Any, p: dict[str, Any]) -> Any:
    return keras.applications.MobileNetV2(
        input_tensor=_images(keras, p),
        alpha=p["alpha"],
        weights=None,
        classes=p["classes"],
        classifier_activation=None,
    )


def _bottleneck(keras: Any, x: Any, filters: int, stride: int, project: bool) -> Any:
    """ResNet v1 bottleneck block, as in ``keras.applications.ResNet50``."""
    layers = keras.layers
    eps = 1.001e-5
    shortcut = x
    if project:
        shortcut = layers.Conv2D(4 * filters, 1, strides=stride)(x)
        shortcut = layers.BatchNormalization(epsilon=eps)(shortcut)
    x = layers.Conv2D(filters, 1, strides=stride)(x)
    x = layers.Activation("relu")(layers.BatchNormalization(epsilon=eps)(x))
    x = layers.Conv2D(filters, 3, padding="same")(x)
    x = layers.Activation("relu")(layers.BatchNormalization(epsilon=eps)(x))
    x = layers.BatchNormalization(epsilon=eps)(layers.Conv2D(4 * filters, 1)(x))
    return layers.Activation("relu")(layers.Add()([shortcut, x]))


def _resnet50(keras: Any, p: dict[str, Any]) -> Any:
    """ResNet-50 v1 (``keras.applications.ResNet50`` layer for layer) with ``p["blocks"]``
    bottleneck blocks per stage and ``p["width"]`` filters in the first stage (3-4-6-3 and 64:
    ResNet-50 itself; the tiny size keeps the structure with one narrow block per stage)."""
    layers = keras.layers
    inp = _images(keras, p)
    x = layers.ZeroPadding2D(3)(inp)
    x = layers.Conv2D(p["width"], 7, strides=2)(x)
    x = layers.Activation("relu")(layers.BatchNormalization(epsilon=1.001e-5)(x))
    x = layers.MaxPooling2D(3, strides=2)(layers.ZeroPadding2D(1)(x))
    for stage, blocks in enumerate(p["blocks"]):
        filters = p["width"] * 2**stage
        for block in range(blocks):
            stride = 2 if block == 0 and stage > 0 else 1
            x = _bottleneck(keras, x, filters, stride, project=block == 0)
    x = layers.GlobalAveragePooling2D()(x)
    out = layers.Dense(p["classes"], name="predictions")(x)  # logits
    return keras.Model(inp, out, name="resnet50")


def _mlp(keras: Any, p: dict[str, Any]) -> Any:
    inp = keras.Input((p["features"],), name="features")
    x = inp
    for i, width in enumerate(p["hidden"]):
        x = keras.layers.Dense(width, activation="relu", name=f"hidden_{i}")(x)
    return keras.Model(inp, keras.layers.Dense(p["classes"], name="logits")(x), name="mlp")


def _wide_deep(keras: Any, p: dict[str, Any]) -> Any:
    layers = keras.layers
    cat = keras.Input((p["categorical"],), dtype="int32", name="categorical")
    dense = keras.Input((p["dense"],), name="dense")
    emb = layers.Flatten()(layers.Embedding(p["vocab"], p["embed_dim"], name="embedding")(cat))
    deep = layers.Concatenate()([emb, dense])
    for i, width in enumerate(p["hidden"]):
        deep = layers.Dense(width, activation="relu", name=f"deep_{i}")(deep)
    deep = layers.Dense(1, name="deep_out")(deep)
    wide = layers.Dense(1, name="wide")(dense)
    out = layers.Activation("sigmoid")(layers.Add()([wide, deep]))
    return keras.Model([cat, dense], out, name="wide_deep")


BUILDERS: dict[str, Callable[[Any, dict[str, Any]], Any]] = {
    "lstm": _lstm,
    "encoder": _encoder,
    "mobilenetv2": _mobilenetv2,
    "resnet50": _resnet50,
    "mlp": _mlp,
    "wide-deep": _wide_deep,
}
"""Model builder of each built-in: ``builder(keras, size_params) -> keras.Model``."""


CALIBRATION_SEED = SEED + 2
"""Seed of the images that set the BatchNormalization statistics (not the sample inputs)."""


def calibrate_batchnorm(keras: Any, model: Any, image: int) -> int:
    """Set each BatchNormalization's moving mean and variance to the batch statistics of seeded
    standard-normal images of ``image`` pixels, as one training-mode pass with momentum 0 does;
    returns the calibration batch (enough images that the last, 32x smaller, feature map still
    gives 64 values per channel). Inference then reproduces that pass exactly."""
    norms = [la for la in model.layers if isinstance(la, keras.layers.BatchNormalization)]
    if not norms:
        return 0
    batch = max(2, -(-64 * 32 * 32 // (image * image)))
    images = generate(keras_input_specs(model), batch, CALIBRATION_SEED)
    momenta = [la.momentum for la in norms]
    for layer in norms:
        layer.momentum = 0.0
    try:
        model(images, training=True)
    finally:
        for layer, momentum in zip(norms, momenta):  # noqa: B905 (Python 3.9)
            layer.momentum = momentum
    return batch


def build(name: str, size: str = "standard", batch: int = 1) -> Built:
    """Build built-in ``name`` at ``size`` with ``batch`` samples per call (seeded)."""
    import keras

    info = get_builtin(name)
    params = info.params(size)
    keras.backend.clear_session()  # layer names (and so input names) restart from scratch
    keras.utils.set_random_seed(SEED)
    model = BUILDERS[name](keras, params)
    if "image" in params:
        calibrate_batchnorm(keras, model, params["image"])
    inputs = generate(keras_input_specs(model), batch, SEED)
    flops, source = flops_mod.builtin_flops(name, params, batch)
    if source == "unknown":
        flops, source = flops_mod.keras_layer_flops(model, batch)
    return Built(model, inputs, flops, source)
