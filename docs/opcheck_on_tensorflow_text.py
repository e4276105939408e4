"""opcheck finds tensorflow-text's four crashes from ordinary samples (docs/opcheck.md).

    pip install --no-deps "tensorflow-text==2.21.*"     # beside TensorFlow 2.21 and tf_stopgrad
    python docs/opcheck_on_tensorflow_text.py

Each sample is non-empty, of rank 1 or more, and its strings hold tokens: the crashes come from
the edge samples opcheck derives from them, in a fresh process that each crash ends. The crash on
a scalar is reached through the raw op behind text.ngrams, whose Python refuses a scalar first.
"""

import os

import numpy as np
import tensorflow as tf
import tensorflow_text as text
from tensorflow_text.python.ops.whitespace_tokenizer import gen_whitespace_tokenizer

from tf_stopgrad.testing import opcheck


def ngrams(words):
    return text.ngrams(words, 2, reduction_type=text.Reduction.STRING_JOIN)


NGRAMS_OP = tf.load_op_library(os.path.join(os.path.dirname(text.__file__),
                                            "python/ops/_ngrams_op.so"))


def ngrams_string_join(words):
    return NGRAMS_OP.tf_text_ngrams_string_join(words, [], width=2, string_separator=" ", axis=-1)


def whitespace_tokenize(strings):
    codepoints = tf.strings.unicode_decode(strings, "UTF-8")
    return gen_whitespace_tokenizer.whitespace_tokenize_with_offsets(
        codepoints.flat_values, codepoints.row_splits)


def find_source_offsets(strings, offsets):
    return text.find_source_offsets(text.normalize_utf8_with_offsets_map(strings)[1], offsets)


WORDS = np.array([[b"the", b"quick", b"fox"], [b"a", b"lazy", b"dog"]], object)
SENTENCES = np.array([b"caf\xc3\xa9 au lait", b"na\xc3\xafve"], object)  # café au lait, naïve
ORDINARY_SAMPLES = {  # non-empty, of rank 1 or more, with strings that hold tokens
    ngrams: [(WORDS,)],
    ngrams_string_join: [(WORDS,)],
    whitespace_tokenize: [(np.array([b"the quick fox", b"a dog"], object),)],
    find_source_offsets: [(SENTENCES, np.array([[0, 3], [1, 2]], np.int64))],
}

for fn, samples in ORDINARY_SAMPLES.items():
    results = opcheck(fn, samples, library="tensorflow_text", checks=["crash", "edges"])
    print(f"{fn.__name__}:\n{results}\n", flush=True)
