"""Every public name of TensorFlow 2.21 and Keras 3 resolves: implemented, or refused clearly.

The list is data: `tapegpu/testing/api_surface/names.txt` (regenerated from TensorFlow's API
golden files and Keras 3's `keras/api/` by the scripts beside it). A name that tapegpu does not
implement resolves to a *refusal*: an object that raises `NotImplementedError` naming the name,
why it is not there and what to use instead, when called or when an attribute of it is read;
never an AttributeError. A name that is in neither list is still an AttributeError (a typo stays
a typo).

Mechanics: each tapegpu namespace that stands for listed modules (`tg` for `tf`, `tg.math` for
`tf.math`, `tg.keras.layers` for `keras.layers` and `tf.keras.layers`, ...) gets a module
`__getattr__` (PEP 562), called only for names the namespace lacks. Listed modules tapegpu lacks
(`tf.tpu`, `tf.raw_ops`, ...) are created on first access as empty namespaces whose names are
all refusals.

>>> tg.raw_ops.MatMul(a=1, b=2)
Traceback (most recent call last):
NotImplementedError: tf.raw_ops.MatMul is not available in tapegpu: tf.raw_ops exposes TensorFlow's C++ kernels one by one, and tapegpu has no such kernel layer. Instead: the public op of the same purpose (tg.matmul, tg.math.*, tg.nn.*, ...)
"""
import os
import types

_NAMES_FILE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                           "testing", "api_surface", "names.txt")
_names = None

RULES_TPU = ("TPUs: tapegpu runs on NVIDIA GPUs and CPUs",
             "tg.distribute.MirroredStrategy (several GPUs) or OneDeviceStrategy")

# Why a name is refused and what to use instead, by the longest matching prefix.
RULES = {
    "": ("tapegpu does not implement it",
         "the implemented names are listed in docs/api_coverage.md; tapegpu's nearest "
         "equivalent, or the computation written with tg ops"),
    "tf.raw_ops": ("tf.raw_ops exposes TensorFlow's C++ kernels one by one, and tapegpu has no "
                   "such kernel layer", "the public op of the same purpose (tg.matmul, "
                   "tg.math.*, tg.nn.*, ...)"),
    "tf.compat.v1": ("it belongs to TF1's graph-mode API (sessions, placeholders, collections, "
                     "variable scopes, queues), which has no meaning in eager tapegpu",
                     "the TF2 way: run eagerly or in a tg.function, tg.Variable for "
                     "get_variable, keras optimizers for tf.compat.v1.train.*Optimizer, "
                     "tg.train.Checkpoint for Saver"),
    "tf.tpu": ("TPUs: tapegpu runs on NVIDIA GPUs and CPUs",
               "tg.device('gpu') and tapegpu.distribute for several GPUs"),
    "tf.experimental.dtensor": ("this part of DTensor is not implemented (tapegpu's DTensor "
                                "runs in one process, layouts as metadata of global tensors)",
                                "tg.experimental.dtensor's pack/unpack/relayout/DVariable, "
                                "tg.train.Checkpoint for checkpoints"),
    "tf.distribute": ("this part of tf.distribute is not implemented (tapegpu has "
                      "MirroredStrategy, MultiWorkerMirroredStrategy over MPI, "
                      "OneDeviceStrategy, CentralStorageStrategy, ClusterSpec and the "
                      "TF_CONFIG and simple cluster resolvers)",
                      "tapegpu.distribute (Horovod's API over MPI and NCCL) for several "
                      "processes or GPUs"),
    "tf.distribute.experimental.ParameterServerStrategy": (
        "parameter servers need TensorFlow's gRPC runtime and remote workers",
        "tg.distribute.MultiWorkerMirroredStrategy (synchronous, over MPI)"),
    "tf.distribute.experimental.coordinator": (
        "the cluster coordinator schedules functions on TensorFlow's remote workers",
        "tg.distribute.MultiWorkerMirroredStrategy (synchronous, over MPI)"),
    "tf.distribute.Server": ("tapegpu's processes talk over MPI, not TensorFlow's gRPC servers",
                             "python -m tapegpu.distribute.run -n N script.py (or mpiexec)"),
    "tf.config.experimental_connect_to_cluster": (
        "tapegpu's processes talk over MPI, not TensorFlow's gRPC servers",
        "python -m tapegpu.distribute.run -n N script.py and "
        "tg.distribute.MultiWorkerMirroredStrategy"),
    "tf.config.experimental_connect_to_host": (
        "tapegpu's processes talk over MPI, not TensorFlow's gRPC servers",
        "python -m tapegpu.distribute.run -n N script.py"),
    "tf.distribute.TPUStrategy": RULES_TPU,
    "tf.distribute.experimental.TPUStrategy": RULES_TPU,
    "tf.distribute.cluster_resolver.TPUClusterResolver": RULES_TPU,
    "tf.distribute.ParameterServerStrategy": (
        "parameter servers need TensorFlow's gRPC runtime and remote workers",
        "tg.distribute.MultiWorkerMirroredStrategy (synchronous, over MPI)"),
    "tf.distribute.coordinator": (
        "the cluster coordinator schedules functions on TensorFlow's remote workers",
        "tg.distribute.MultiWorkerMirroredStrategy (synchronous, over MPI)"),
    "tf.lite": ("TensorFlow Lite converts TF graphs to .tflite flatbuffers; tapegpu has no TF "
                "graphs", "tg.saved_model.save for tapegpu's own export"),
    "tf.feature_column": ("this feature column is not implemented (tg.feature_column has "
                          "numeric, bucketized, vocabulary-list and identity categorical, "
                          "indicator and embedding columns)", "those columns, Keras "
                          "preprocessing layers or tg ops in a tg.data map"),
    "tf.estimator": ("Estimators (removed in TF 2.16) are not implemented", "tg.keras.Model"),
    "tf.xla": ("XLA compiles TF graphs; tapegpu has no XLA", "tg.function (traced, fused)"),
    "tf.mlir": ("MLIR bridges TF graphs; tapegpu has no TF graphs", "tg.function(...).graph"),
    "tf.sysconfig": ("it describes TensorFlow's C++ build (headers, libraries, flags)",
                     "python -m tapegpu info"),
    "tf.queue": ("this queue is not implemented (tg.queue has FIFOQueue)",
                 "tg.queue.FIFOQueue or tg.data.Dataset"),
    "tf.lookup": ("this lookup table is not implemented (tg.lookup has StaticHashTable and "
                  "KeyValueTensorInitializer)", "tg.lookup.StaticHashTable, or "
                  "keras.layers.StringLookup/IntegerLookup where available"),
    "tf.lookup.StaticVocabularyTable": ("it hashes out-of-vocabulary keys into buckets with "
                                        "TensorFlow's FarmHash Fingerprint64, which tapegpu "
                                        "does not have", "tg.lookup.StaticHashTable with a "
                                        "default_value for the other keys"),
    "tf.quantization": ("quantized kernels are not implemented", "float16 tensors (tg.cast)"),
    "tf.sparse": ("this sparse-tensor function is not implemented (tg.sparse has SparseTensor, "
                  "to_dense, from_dense, sparse_dense_matmul and a few more)",
                  "tg.sparse.to_dense, then the dense op"),
    "tf.ragged": ("this ragged-tensor function is not implemented (tg.ragged has RaggedTensor, "
                  "constant, range, map_flat_values and the row-partition helpers)",
                  "RaggedTensor.to_tensor() or flat_values, then the dense op"),
    "tf.signal": ("this tf.signal function is not implemented (tg.signal has rfft, irfft, "
                  "rfft2d, irfft2d, frame, stft and the Hann/Hamming windows)", "numpy.fft on "
                  ".numpy() values (not differentiable) or the transform written with tg ops"),
    "tf.profiler": ("TensorFlow's profiler service is not implemented", "tg.profiler() "
                    "(FLOPs, bytes and kernel launches per op)"),
    "tf.profiler.experimental": ("TensorFlow's profiler writes XPlane traces for TensorBoard's "
                                 "profile plugin, which tapegpu does not produce",
                                 "tg.profiler() (FLOPs, bytes and kernel launches per op)"),
    "tf.summary.trace_on": ("it records TF graphs and profiles for TensorBoard's graph plugin; "
                            "tapegpu has no TF GraphDefs", "print(tg.function(f)"
                            ".get_concrete_function(x).graph) and tg.profiler()"),
    "tf.summary.trace_export": ("it writes TF graphs and profiles for TensorBoard's graph "
                                "plugin; tapegpu has no TF GraphDefs", "print(tg.function(f)"
                                ".get_concrete_function(x).graph) and tg.profiler()"),
    "tf.summary.trace_off": ("it stops a TF graph/profile trace (tf.summary.trace_on), which "
                             "tapegpu does not record", "nothing to stop"),
    "tf.feature_column.make_parse_example_spec": (
        "it returns tf.io parsing specs (FixedLenFeature, VarLenFeature) for parsing "
        "tf.train.Example protos, which tapegpu's feature columns do not use", "feed the "
        "feature dict directly (tg.data.Dataset.from_tensor_slices(dict(dataframe)))"),
    "tf.image.sample_distorted_bounding_box": ("TF's random search for a box covering "
                                               "min_object_covered of the boxes is not "
                                               "implemented", "tg.image.random_crop or "
                                               "stateless_random_crop"),
    "tf.data.experimental.dense_to_ragged_batch": ("batching into RaggedTensors is not "
                                                   "implemented in tg.data", "padded_batch, or "
                                                   "batch elements of one shape"),
    "tf.types.experimental.TraceType": ("tg.function keys its traces by its own argument keys; "
                                        "there is no tracing-type protocol to implement",
                                        "pass tensors and hashable Python values"),
    "tf.autograph": ("AutoGraph rewrites Python control flow into graph ops; tg.function "
                     "traces instead", "tg.cond / tg.while_loop in a tg.function"),
    "tf.graph_util": ("it edits TF GraphDefs; tapegpu has no TF graphs",
                      "tg.function(...).get_concrete_function().graph"),
    "tf.saved_model": ("this part of TF's SavedModel format is not implemented",
                       "tg.saved_model.save / tg.saved_model.load"),
    "tf.types": ("TF's type-annotation protocols are not implemented", "tg.Tensor, "
                 "tg.Variable and tg.TensorSpec"),
    "tf.io.decode_proto": ("it decodes any protocol buffer by its descriptor (TensorFlow's "
                           "descriptor pool), which tapegpu does not have; it encodes and "
                           "decodes the record protos only (tg.train.Example, SequenceExample, "
                           "TensorProto)", "the message's Python class (tg.train.Example."
                           "FromString, or protobuf's generated class), then tg.constant"),
    "tf.io.encode_proto": ("it encodes any protocol buffer by its descriptor (TensorFlow's "
                           "descriptor pool), which tapegpu does not have",
                           "the message's Python class and its SerializeToString(), e.g. "
                           "tg.train.Example(...).SerializeToString()"),
    "tf.io.write_graph": ("it writes a TensorFlow GraphDef; tapegpu has no TF graphs",
                          "print(tg.function(f).get_concrete_function(...).graph), or "
                          "tg.saved_model.save"),
    "keras.distribution": ("Keras' JAX-backend distribution API is not implemented",
                           "tapegpu.distribute"),
    "keras.quantizers": ("Keras' quantizers are not implemented", "float16 weights"),
    "keras.export": ("Keras' export formats are not implemented", "tg.saved_model.save"),
    "keras.saving": ("tapegpu has no .keras whole-model file format",
                     "model.save_weights / model.load_weights, tg.train.Checkpoint or "
                     "tg.saved_model"),
    "keras.dtype_policies": ("Keras' dtype policies are not implemented",
                             "the layers' dtype= argument"),
    "keras.mixed_precision": ("mixed-precision policies are not implemented",
                              "the layers' dtype= argument"),
    "keras.wrappers": ("the scikit-learn wrappers are not implemented", "model.fit / predict "
                       "called from your own estimator class"),
    "keras.visualization": ("Keras' plotting helpers are not implemented",
                            "matplotlib on model.predict's output"),
    "keras.distillation": ("Keras' distillation API is not implemented", "a custom "
                           "train_step with both models"),
    "keras.legacy": ("Keras' legacy saving is not implemented", "model.save_weights"),
    "keras.backend": ("this Keras 2 backend function is not implemented", "the keras.ops or "
                      "tg function of the same name"),
    "keras.applications": ("this application model is not implemented",
                           "the implemented ones: see docs/api_coverage.md"),
}
for _ns in ("tf.io", "tf.image"):  # the image formats tapegpu's codecs do not read
    RULES[f"{_ns}.decode_webp"] = ("WebP decoding is not implemented (tapegpu reads PNG, GIF, "
                                   "BMP, and JPEG through Pillow)", "numpy.asarray("
                                   "PIL.Image.open(path)) (Pillow reads WebP), then tg.constant")
    RULES[f"{_ns}.decode_jxl"] = ("JPEG XL decoding is not implemented (tapegpu reads PNG, "
                                  "GIF, BMP, and JPEG through Pillow)", "a JPEG XL decoder "
                                  "(e.g. Pillow with a JPEG XL plugin), then tg.constant")
for _k in [k for k in RULES if k.startswith("keras.")]:
    RULES["tf." + _k] = RULES[_k]
for _k in [k for k in RULES if k.startswith("tf.") and not k.startswith("tf.compat")]:
    RULES.setdefault("tf.compat.v1." + _k[3:], RULES[_k])


# Names implemented in modules imported when first used (their imports are slow):
# {dotted name: "module:attribute"}.
LAZY = {
    "tf.test.TestCase": "tapegpu.compat.tf_test:TestCase",
    "tf.test.main": "tapegpu.compat.tf_test:main",
    "tf.test.Benchmark": "tapegpu.compat.tf_test:Benchmark",
    "tf.test.benchmark_config": "tapegpu.compat.tf_test:benchmark_config",
    "tf.sparse": "tapegpu.sparse",
    "tf.SparseTensor": "tapegpu.sparse:SparseTensor",
    "tf.ragged": "tapegpu.ragged",
    "tf.RaggedTensor": "tapegpu.ragged:RaggedTensor",
    **{f"tf.compat.v1.image.{_n}": f"tapegpu.compat.v1_image:{_n}" for _n in (
        "resize_images", "resize_bilinear", "resize_bicubic", "resize_nearest_neighbor",
        "resize_area")},
    # TF1's names of tg.io's record and file functions (tapegpu/io)
    "tf.compat.v1.io.tf_record_iterator": "tapegpu.io.records:tf_record_iterator",
    "tf.compat.v1.io.TFRecordCompressionType": "tapegpu.io.records:TFRecordCompressionType",
    "tf.compat.v1.python_io.tf_record_iterator": "tapegpu.io.records:tf_record_iterator",
    "tf.compat.v1.python_io.TFRecordCompressionType":
        "tapegpu.io.records:TFRecordCompressionType",
    "tf.compat.v1.python_io.TFRecordOptions": "tapegpu.io.records:TFRecordOptions",
    "tf.compat.v1.python_io.TFRecordWriter": "tapegpu.io.records:TFRecordWriter",
    # smaller names (tapegpu/compat/tf_more.py)
    "tf.version": "tapegpu.compat.tf_more:version",
    "tf.autograph": "tapegpu.compat.tf_more:autograph",
    "tf.experimental.numpy.random": "tapegpu.compat.tf_more:numpy_random",
    "tf.experimental.numpy.copy": "tapegpu.compat.tf_more:numpy_copy",
    "tf.experimental.numpy.newaxis": "tapegpu.compat.tf_more:newaxis",
    "tf.nn.scale_regularization_loss": "tapegpu.compat.tf_more:scale_regularization_loss",
    "tf.nn.top_k": "tapegpu.ops.shape:top_k",
    "tf.saturate_cast": "tapegpu.compat.tf_more:saturate_cast",
    "tf.dtypes.saturate_cast": "tapegpu.compat.tf_more:saturate_cast",
    "tf.random.split": "tapegpu.compat.tf_more:split",
    "tf.random.log_uniform_candidate_sampler":
        "tapegpu.compat.tf_more:log_uniform_candidate_sampler",
    "tf.random.uniform_candidate_sampler": "tapegpu.compat.tf_more:uniform_candidate_sampler",
    "tf.nn.nce_loss": "tapegpu.compat.tf_more:nce_loss",
    "tf.nn.sampled_softmax_loss": "tapegpu.compat.tf_more:sampled_softmax_loss",
    "tf.data.experimental.Counter": "tapegpu.compat.tf_more:Counter",
    "tf.data.experimental.assert_cardinality": "tapegpu.compat.tf_more:assert_cardinality",
    # extension types and dispatch (tapegpu/extension_type.py)
    "tf.experimental.ExtensionType": "tapegpu.extension_type:ExtensionType",
    "tf.experimental.BatchableExtensionType": "tapegpu.extension_type:BatchableExtensionType",
    "tf.experimental.ExtensionTypeSpec": "tapegpu.extension_type:ExtensionTypeSpec",
    "tf.experimental.dispatch_for_api": "tapegpu.extension_type:dispatch_for_api",
    "tf.experimental.dispatch_for_unary_elementwise_apis": "tapegpu.extension_type:dispatch_for_unary_elementwise_apis",
    "tf.experimental.dispatch_for_binary_elementwise_apis": "tapegpu.extension_type:dispatch_for_binary_elementwise_apis",
    "tf.experimental.unregister_dispatch_for": "tapegpu.extension_type:unregister_dispatch_for",
    "tf.type_spec_from_value": "tapegpu.extension_type:type_spec_from_value",
    # feature columns (tapegpu/feature_column.py)
    "tf.feature_column": "tapegpu.feature_column",
    "tf.keras.layers.DenseFeatures": "tapegpu.feature_column:DenseFeatures",
    "tf.compat.v1.feature_column.input_layer": "tapegpu.feature_column:input_layer",
    "keras.utils.plot_model": "tapegpu.keras.plot_model:plot_model",
    "tf.keras.utils.plot_model": "tapegpu.keras.plot_model:plot_model",
    "keras.layers.CategoryEncoding": "tapegpu.keras.encoding_layers:CategoryEncoding",
    "tf.keras.layers.CategoryEncoding": "tapegpu.keras.encoding_layers:CategoryEncoding",
    "keras.layers.Discretization": "tapegpu.keras.encoding_layers:Discretization",
    "tf.keras.layers.Discretization": "tapegpu.keras.encoding_layers:Discretization",
    "keras.layers.IntegerLookup": "tapegpu.keras.encoding_layers:IntegerLookup",
    "tf.keras.layers.IntegerLookup": "tapegpu.keras.encoding_layers:IntegerLookup",
    "keras.saving.register_keras_serializable": "tapegpu.keras.custom_objects:register_keras_serializable",
    "keras.saving.get_registered_name": "tapegpu.keras.custom_objects:get_registered_name",
    "keras.saving.get_registered_object": "tapegpu.keras.custom_objects:get_registered_object",
    "keras.saving.get_custom_objects": "tapegpu.keras.custom_objects:get_custom_objects",
    "keras.saving.custom_object_scope": "tapegpu.keras.custom_objects:custom_object_scope",
    "keras.saving.CustomObjectScope": "tapegpu.keras.custom_objects:CustomObjectScope",
    "tf.keras.saving.register_keras_serializable": "tapegpu.keras.custom_objects:register_keras_serializable",
    "tf.keras.saving.get_registered_name": "tapegpu.keras.custom_objects:get_registered_name",
    "tf.keras.saving.get_registered_object": "tapegpu.keras.custom_objects:get_registered_object",
    "tf.keras.saving.get_custom_objects": "tapegpu.keras.custom_objects:get_custom_objects",
    "tf.keras.saving.custom_object_scope": "tapegpu.keras.custom_objects:custom_object_scope",
    "tf.keras.saving.CustomObjectScope": "tapegpu.keras.custom_objects:CustomObjectScope",
    "keras.utils.register_keras_serializable": "tapegpu.keras.custom_objects:register_keras_serializable",
    "keras.utils.get_registered_name": "tapegpu.keras.custom_objects:get_registered_name",
    "keras.utils.get_registered_object": "tapegpu.keras.custom_objects:get_registered_object",
    "keras.utils.get_custom_objects": "tapegpu.keras.custom_objects:get_custom_objects",
    "keras.utils.custom_object_scope": "tapegpu.keras.custom_objects:custom_object_scope",
    "keras.utils.CustomObjectScope": "tapegpu.keras.custom_objects:CustomObjectScope",
    "tf.keras.utils.register_keras_serializable": "tapegpu.keras.custom_objects:register_keras_serializable",
    "tf.keras.utils.get_registered_name": "tapegpu.keras.custom_objects:get_registered_name",
    "tf.keras.utils.get_registered_object": "tapegpu.keras.custom_objects:get_registered_object",
    "tf.keras.utils.get_custom_objects": "tapegpu.keras.custom_objects:get_custom_objects",
    "tf.keras.utils.custom_object_scope": "tapegpu.keras.custom_objects:custom_object_scope",
    "tf.keras.utils.CustomObjectScope": "tapegpu.keras.custom_objects:CustomObjectScope",
    "keras.activations.serialize": "tapegpu.keras.custom_objects:serialize",
    "keras.activations.deserialize": "tapegpu.keras.custom_objects:deserialize",
    "tf.keras.activations.serialize": "tapegpu.keras.custom_objects:serialize",
    "tf.keras.activations.deserialize": "tapegpu.keras.custom_objects:deserialize",
    "tf.keras.losses.kullback_leibler_divergence": "tapegpu.models.losses:kl_divergence",
    "tf.lookup": "tapegpu.lookup",
    "tf.dtypes.complex": "tapegpu.ops.binary:complex",
    "tf.signal": "tapegpu.signal",
    "tf.queue": "tapegpu.queue",
    "keras.callbacks.BackupAndRestore": "tapegpu.keras.backup:BackupAndRestore",
    "tf.keras.callbacks.BackupAndRestore": "tapegpu.keras.backup:BackupAndRestore",
}
LAZY.update({f"tf.compat.v1.gfile.{_n}": f"tapegpu.io.gfile_v1:{_n}" for _n in (
    "Copy", "DeleteRecursively", "Exists", "FastGFile", "GFile", "Glob", "IsDirectory",
    "ListDirectory", "MakeDirs", "MkDir", "Open", "Remove", "Rename", "Stat", "Walk")})
LAZY.update({f"tf.compat.v1.{_n}": f"tapegpu.io:{_n}" for _n in (
    "FixedLenFeature", "FixedLenSequenceFeature", "VarLenFeature", "SparseFeature",
    "decode_csv", "decode_raw", "decode_base64", "encode_base64", "decode_compressed",
    "decode_json_example",
    "parse_example", "parse_single_example", "parse_single_sequence_example", "parse_tensor",
    "serialize_tensor", "serialize_sparse", "serialize_many_sparse", "deserialize_many_sparse")})


def _lazy(dotted):
    """The object LAZY names for `dotted`, its module imported now; a module standing for a
    listed module answers the names it lacks with refusals, as the others."""
    import importlib
    module, _, attr = LAZY[dotted].partition(":")
    obj = importlib.import_module(module)
    for key, value in LAZY.items():  # however it was first reached (tg.SparseTensor first)
        if value == module:
            hook(obj, key)
    return getattr(obj, attr) if attr else obj


def names():
    """{dotted name: kind ('m' module, 'c' class, 'f' function or value)} of the listed API."""
    global _names
    if _names is None:
        out = {}
        try:
            with open(_NAMES_FILE, encoding="utf-8") as f:
                for line in f:
                    name, _, kind = line.strip().partition(" ")
                    if name:
                        out[name] = kind or "f"
        except OSError:  # an install without the data: no refusals, plain AttributeErrors
            pass
        _names = out
    return _names


_lines = []


def _text_lines():
    """names.txt's lines ([] for an install without it), read once."""
    if not _lines:
        try:
            with open(_NAMES_FILE, encoding="utf-8") as f:
                _lines.extend(f.read().split("\n"))
        except OSError:
            pass
    return _lines


def _listed_modules():
    """The listed modules, sorted: read from the file's lines, so that `import tapegpu` does not
    build the table of every name (`names()` does, when a name a namespace lacks is first
    looked up)."""
    return sorted(line[:-2] for line in _text_lines() if line.endswith(" m"))


def _children(dotted):
    """[(name, kind)] of the listed names directly or deeper under `dotted`."""
    prefix = dotted + "."
    return [tuple(line.split(" ", 1)) for line in _text_lines() if line.startswith(prefix)]


def reason(dotted):
    """(why, instead) for a refused name: the rule of its longest listed prefix."""
    parts = dotted.split(".")
    for n in range(len(parts), -1, -1):
        key = ".".join(parts[:n])
        if key in RULES:
            return RULES[key]
    return RULES[""]


def message(dotted):
    why, instead = reason(dotted)
    return f"{dotted} is not available in tapegpu: {why}. Instead: {instead}"


class _Refused(type):
    """The type of refusals: calling one (or instantiating a subclass) raises, and so does
    reading a public attribute of it."""

    def __call__(cls, *args, **kwargs):
        raise NotImplementedError(message(cls._tapegpu_refused))

    def __getattr__(cls, name):
        if name.startswith("_"):
            raise AttributeError(name)
        raise NotImplementedError(message(f"{cls._tapegpu_refused}.{name}"))

    def __repr__(cls):
        return f"<refused {cls._tapegpu_refused}: {reason(cls._tapegpu_refused)[0]}>"


def refusal(dotted):
    """The refusal object standing for `dotted` (a name tapegpu does not implement).

    >>> f = tg.compat.surface.refusal("tf.raw_ops.Foo")
    >>> f()
    Traceback (most recent call last):
    NotImplementedError: tf.raw_ops.Foo is not available in tapegpu: tf.raw_ops exposes TensorFlow's C++ kernels one by one, and tapegpu has no such kernel layer. Instead: the public op of the same purpose (tg.matmul, tg.math.*, tg.nn.*, ...)
    """
    last = dotted.rsplit(".", 1)[-1]
    return _Refused(last, (), {"_tapegpu_refused": dotted, "__doc__": message(dotted),
                               "__module__": "tapegpu.compat.surface"})


def is_refused(obj):
    """Whether `obj` is a refusal (a stub, a namespace of stubs, or a function marked so)."""
    try:
        return bool(getattr(obj, "_tapegpu_refused", None))
    except Exception:  # noqa: BLE001  (an object whose attributes raise is not a refusal)
        return False


def refused_function(dotted, why, instead):
    """A function that raises NotImplementedError naming `dotted`, `why` and `instead` (for a
    name whose refusal needs its own words)."""
    def fn(*args, **kwargs):
        raise NotImplementedError(f"{dotted} is not available in tapegpu: {why}. "
                                  f"Instead: {instead}")
    fn.__name__ = dotted.rsplit(".", 1)[-1]
    fn.__doc__ = f"{dotted}: not available in tapegpu ({why}). Instead: {instead}."
    fn._tapegpu_refused = True
    return fn


def _namespace(dotted):
    ns = types.ModuleType("tapegpu." + dotted.split(".", 1)[1] if "." in dotted else "tapegpu",
                          f"{dotted}: not implemented by tapegpu ({reason(dotted)[0]}); each of "
                          f"its names raises NotImplementedError saying what to use instead.")
    ns._tapegpu_refused = dotted
    hook(ns, dotted)
    return ns


def hook(module, *prefixes):
    """Give `module` (a namespace standing for the listed modules `prefixes`) a `__getattr__`
    that answers listed names it lacks with refusals (and listed submodules with namespaces of
    refusals); other names stay AttributeErrors. Prefixes accumulate over calls."""
    d = module.__dict__
    known = d.get("_tapegpu_prefixes")
    if known is not None:
        known.extend(p for p in prefixes if p not in known)
        return module
    known = d["_tapegpu_prefixes"] = list(prefixes)
    previous = d.get("__getattr__")
    cache = {}

    def __getattr__(name):
        if previous is not None:
            try:
                return previous(name)
            except AttributeError:
                pass
        if name in cache:
            return cache[name]
        if not name.startswith("_") or name == "__version__":
            table = names()
            for prefix in known:
                dotted = f"{prefix}.{name}"
                if dotted in LAZY:
                    cache[name] = _lazy(dotted)
                    return cache[name]
                kind = table.get(dotted)
                if kind is not None:
                    cache[name] = _namespace(dotted) if kind == "m" else refusal(dotted)
                    if kind == "m":
                        hook(cache[name], *[f"{p}.{name}" for p in known
                                            if f"{p}.{name}" in table])
                    return cache[name]
        raise AttributeError(f"module {module.__name__!r} has no attribute {name!r}")

    d["__getattr__"] = __getattr__
    return module


def install(root, keras):
    """Hook every tapegpu namespace that stands for a listed module (called once, at the end of
    `import tapegpu`): `tf.X...` is `root.X...`, `tf.keras.X...` and `keras.X...` are
    `keras.X...`, and `tf.compat.v1`'s tree is `root.compat.v1`'s."""
    hook(root, "tf")
    hook(keras, "keras", "tf.keras")
    modules = _listed_modules()
    for dotted in modules:
        parts = dotted.split(".")
        if parts[0] == "tf" and len(parts) > 1 and parts[1] == "keras":
            obj, rest = keras, parts[2:]
        elif parts[0] == "keras":
            obj, rest = keras, parts[1:]
        else:
            obj, rest = root, parts[1:]
        parent = None
        for part in rest:
            parent, obj = obj, vars(obj).get(part) if hasattr(obj, "__dict__") else None
            if obj is None:
                break
            if isinstance(obj, types.SimpleNamespace) and isinstance(parent, types.ModuleType):
                # a namespace object standing for a listed module becomes a module (the same
                # attributes), so that it can answer the names it lacks
                module = types.ModuleType(f"{parent.__name__}.{part}", getattr(obj, "__doc__", None))
                module.__dict__.update(vars(obj))
                setattr(parent, part, module)
                obj = module
        if isinstance(obj, types.ModuleType):
            hook(obj, dotted)
        elif isinstance(obj, type) and not isinstance(obj, _Refused):
            # a class standing for a module (tg.profiler): its listed names it lacks are set
            prefix = dotted + "."
            for name, kind in _children(dotted):
                child = name[len(prefix):]
                if "." not in child and not hasattr(obj, child):
                    setattr(obj, child, _namespace(name) if kind == "m" else refusal(name))


def resolve(dotted):
    """The tapegpu object for a listed dotted name: `tf.X` is `tg.X`, `keras.X` and
    `tf.keras.X` are `tg.keras.X` (a refusal where tapegpu lacks it; AttributeError for a name
    in neither list).

    >>> tg.compat.surface.resolve("tf.math.reduce_sum") is tg.math.reduce_sum
    True
    """
    import tapegpu
    parts = dotted.split(".")
    if parts[0] == "keras":
        obj, rest = tapegpu.keras, parts[1:]
    elif parts[0] == "tf" and parts[1:2] == ["keras"]:
        obj, rest = tapegpu.keras, parts[2:]
    elif parts[0] == "tf":
        obj, rest = tapegpu, parts[1:]
    else:
        raise ValueError(f"resolve: {dotted!r} starts with neither 'tf.' nor 'keras.'")
    for part in rest:
        obj = getattr(obj, part)
    return obj


def alias_namespace(dotted, target_dotted, doc=None):
    """A namespace for the listed module `dotted` whose names are those of `target_dotted`
    where both lists have them (`tf.compat.v1.nn.relu` is `tg.nn.relu`), submodules alike, and
    refusals for the rest."""
    ns = types.ModuleType("tapegpu." + dotted.split(".", 1)[1], doc or
                          f"{dotted}: the names it shares with {target_dotted} are tapegpu's; "
                          f"the others raise NotImplementedError saying what to use instead.")
    cache = {}

    def __getattr__(name):
        if name.startswith("_"):
            raise AttributeError(name)
        if name in cache:
            return cache[name]
        table = names()
        mine, theirs = f"{dotted}.{name}", f"{target_dotted}.{name}"
        if mine in table and table[mine] == "m":
            cache[name] = alias_namespace(mine, theirs)
            return cache[name]
        if mine in table and theirs in table:
            try:
                target = resolve(theirs)
            except (AttributeError, NotImplementedError):
                target = None
            if target is not None and not is_refused(target):
                return target
        raise AttributeError(f"module {ns.__name__!r} has no attribute {name!r}")

    ns.__getattr__ = __getattr__
    hook(ns, dotted)
    return ns


def status(dotted):
    """'implemented', 'refused' (a refusal, or reading it raises NotImplementedError) or
    'missing' (an AttributeError: a gap the API test reports) for a listed name.

    >>> tg.compat.surface.status("tf.GradientTape"), tg.compat.surface.status("tf.tpu.XLAOptions")
    ('implemented', 'refused')
    """
    try:
        obj = resolve(dotted)
    except NotImplementedError:
        return "refused"
    except AttributeError:
        return "missing"
    return "refused" if is_refused(obj) else "implemented"
