"""`tg.keras.layers`: Keras 3's layers, one module per family as Keras lays them out.

    base.py            Layer: building, dtypes, config, weights, losses, masks passed on
    core.py            Dense, Embedding, Masking, Lambda, Identity; Input, InputLayer (and
                       the functional API's symbolic KerasTensor)
    activations.py     Activation, ReLU, LeakyReLU, PReLU, ELU, Softmax; get_activation
    convolutional.py   Conv1D/2D/3D, Conv1D/2DTranspose, DepthwiseConv2D, SeparableConv2D
    pooling.py         Max/AveragePooling1D/2D/3D, GlobalMax/AveragePooling1D/2D/3D
    normalization.py   BatchNormalization, LayerNormalization, UnitNormalization,
                       GroupNormalization
    regularization.py  Dropout, SpatialDropout1D/2D/3D, GaussianNoise, GaussianDropout,
                       ActivityRegularization
    reshaping.py       Flatten, Reshape, Permute, RepeatVector, ZeroPadding1D/2D,
                       Cropping1D/2D, UpSampling1D/2D
    merging.py         Add, Subtract, Multiply, Average, Maximum, Minimum, Concatenate, Dot
                       (and add, subtract, ...: Keras' functional forms)
    rnn.py             SimpleRNN, LSTM, GRU, their cells, RNN, StackedRNNCells,
                       Bidirectional, TimeDistributed
    attention.py       MultiHeadAttention, Attention, AdditiveAttention
    text.py            StringLookup, TextVectorization
    preprocessing.py   Rescaling, Normalization, Resizing, CenterCrop, the Random* image
                       augmentation layers

`tg.layers` holds the same classes (and `Sequential`, a `tg.keras.Model`).
"""
from .activations import ELU, Activation, LeakyReLU, PReLU, ReLU, Softmax
from .attention import AdditiveAttention, Attention, MultiHeadAttention
from .base import Layer
from .convolutional import (Conv1D, Conv1DTranspose, Conv2D, Conv2DTranspose, Conv3D,
                            Convolution1D, Convolution1DTranspose, Convolution2D,
                            Convolution2DTranspose, Convolution3D, DepthwiseConv2D,
                            SeparableConv2D)
from .core import Dense, Embedding, Identity, Input, InputLayer, Lambda, Masking
from .merging import (Add, Average, Concatenate, Dot, Maximum, Minimum, Multiply, Subtract, add,
                      average, concatenate, dot, maximum, minimum, multiply, subtract)
from .normalization import (BatchNormalization, GroupNormalization, LayerNormalization,
                            UnitNormalization)
from .pooling import (AveragePooling1D, AveragePooling2D, AveragePooling3D, AvgPool1D,
                      AvgPool2D, AvgPool3D, GlobalAveragePooling1D, GlobalAveragePooling2D,
                      GlobalAveragePooling3D, GlobalAvgPool1D, GlobalAvgPool2D, GlobalAvgPool3D,
                      GlobalMaxPool1D, GlobalMaxPool2D, GlobalMaxPool3D, GlobalMaxPooling1D,
                      GlobalMaxPooling2D, GlobalMaxPooling3D, MaxPool1D, MaxPool2D, MaxPool3D,
                      MaxPooling1D, MaxPooling2D, MaxPooling3D)
from .preprocessing import (CenterCrop, Normalization, RandomBrightness, RandomContrast,
                            RandomCrop, RandomFlip, RandomRotation, RandomTranslation,
                            RandomZoom, Rescaling, Resizing)
from .regularization import (ActivityRegularization, Dropout, GaussianDropout, GaussianNoise,
                             SpatialDropout1D, SpatialDropout2D, SpatialDropout3D)
from .reshaping import (Cropping1D, Cropping2D, Flatten, Permute, RepeatVector, Reshape,
                        UpSampling1D, UpSampling2D, ZeroPadding1D, ZeroPadding2D)
from .text import StringLookup, TextVectorization
from .rnn import (GRU, LSTM, RNN, Bidirectional, GRUCell, LSTMCell, SimpleRNN, SimpleRNNCell,
                  StackedRNNCells, TimeDistributed)

# the layer classes (Keras' spellings included: MaxPool2D is MaxPooling2D), Input and the merge
# layers' functional forms
__all__ = sorted([name for name, value in dict(globals()).items()
                  if isinstance(value, type) and not name.startswith("_")] +
                 ["Input", "add", "subtract", "multiply", "average", "maximum", "minimum",
                  "concatenate", "dot"])
