"""The one sentence a worker reports for an error, from the messages TensorFlow, Keras and
OpenVINO really raise (texts as they printed them)."""

from __future__ import annotations

from tfperf.worker.serve import error_message
from tfperf.worker.workload import call_error_sentence

KERAS_IN_TF_FUNCTION = (
    "in user code:\n\n    File \"/tmp/w/tfperf/prepare.py\", line 141, in call  *\n"
    "        return loaded.call_model(tensors)\n"
    "    File \"/venv/keras/src/utils/traceback_utils.py\", line 122, in error_handler  **\n"
    "        raise e.with_traceback(filtered_tb) from None\n\n"
    "    ValueError: Exception encountered when calling Sequential.call().\n    \n"
    "    \x1b[1mInput 0 with name 'None' of layer 'dense' is incompatible with the layer: "
    "expected axis -1 of input shape to have value 4, but received input with shape (1, 7)"
    "\x1b[0m\n    \n    Arguments received by Sequential.call():\n"
    "      \u2022 inputs=tf.Tensor(shape=(1, 7), dtype=float32)\n      \u2022 training=False\n"
)
TF_MATMUL = (
    "{{function_node __wrapped__MatMul_device_/job:localhost/replica:0/task:0/device:CPU:0}} "
    "Matrix size-incompatible: In[0]: [1,7], In[1]: [4,3] [Op:MatMul] name: "
)
OPENVINO_INFER = (
    "Exception from src/inference/src/cpp/infer_request.cpp:224:\n"
    "Check 'getShape().isCompatible(dims)' failed at "
    "src/plugins/intel_cpu/src/memory_desc/cpu_memory_desc.h:99:\n"
    "ParameterMismatch: Can not clone with new dims. Descriptor's shape: {0 - ?} is "
    "incompatible with provided dimensions: {1, 13}.\n\n"
)


def test_a_keras_error_inside_a_tf_function_is_reduced_to_its_reason():
    sentence = call_error_sentence(ValueError(KERAS_IN_TF_FUNCTION))
    assert sentence == (
        "ValueError: Input 0 with name 'None' of layer 'dense' is incompatible with the layer: "
        "expected axis -1 of input shape to have value 4, but received input with shape (1, 7)"
    )


def test_a_tensorflow_op_error_keeps_its_own_line():
    sentence = call_error_sentence(RuntimeError(TF_MATMUL))
    assert "Matrix size-incompatible: In[0]: [1,7], In[1]: [4,3]" in sentence


def test_an_openvino_error_reports_its_reason_not_its_source_location():
    message = error_message(RuntimeError(OPENVINO_INFER))
    assert message["op"] == "error" and message["kind"] == "RuntimeError"
    assert message["message"].startswith("ParameterMismatch: Can not clone with new dims")
