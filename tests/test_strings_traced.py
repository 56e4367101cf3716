"""Every tg.strings function inside tg.function: three calls on different text give what the
eager calls give. String functions compute on the host from a tensor's value, not through
recorded ops: a trace guards the value (a new one retraces) rather than keeping the first
call's text as a constant (tapegpu/strings.py `_strings`)."""
import numpy as np
import pytest

import tapegpu as tg

SINGLE_DEVICE = True  # strings live on the host whatever the device

WORDS = [["Hello World", "tf.strings"], ["ab cd ef", "X"], ["Ünïcode  text", "z9 8"]]


def _words(call):
    return tg.constant(WORDS[call])


# name: (the function on its tensor arguments, the arguments of call 0, 1, 2)
CASES = {
    "length": (tg.strings.length, lambda c: [_words(c)]),
    "lower": (tg.strings.lower, lambda c: [_words(c)]),
    "upper": (tg.strings.upper, lambda c: [_words(c)]),
    "strip": (tg.strings.strip, lambda c: [tg.constant([f"  {w} " for w in WORDS[c]])]),
    "join": (lambda a, b: tg.strings.join([a, b], separator="|"),
             lambda c: [_words(c), _words((c + 1) % 3)]),
    "reduce_join": (lambda a: tg.strings.reduce_join(a, separator="+"), lambda c: [_words(c)]),
    "regex_replace": (lambda a: tg.strings.regex_replace(a, r"[aeiou]", "#"),
                      lambda c: [_words(c)]),
    "regex_full_match": (lambda a: tg.strings.regex_full_match(a, r".*o.*"),
                         lambda c: [_words(c)]),
    "to_number": (tg.strings.to_number, lambda c: [tg.constant([str(1.5 * c + 1), "-2"])]),
    "as_string": (tg.strings.as_string, lambda c: [tg.constant([1.5 + c, 2.0])]),
    "substr": (lambda a: tg.strings.substr(a, 1, 3), lambda c: [_words(c)]),
    "split": (tg.strings.split, lambda c: [_words(c)]),
    "bytes_split": (tg.strings.bytes_split, lambda c: [tg.constant(WORDS[c][1])]),
    "unicode_decode": (lambda a: tg.strings.unicode_decode(a, "UTF-8"), lambda c: [_words(c)]),
    "unicode_encode": (lambda a: tg.strings.unicode_encode(a, "UTF-8"),
                       lambda c: [tg.constant([104 + c, 233])]),
    "unicode_split": (lambda a: tg.strings.unicode_split(a, "UTF-8"), lambda c: [_words(c)]),
    "to_hash_bucket_fast": (lambda a: tg.strings.to_hash_bucket_fast(a, 7),
                            lambda c: [_words(c)]),
    "to_hash_bucket": (lambda a: tg.strings.to_hash_bucket(a, 7), lambda c: [_words(c)]),
    "to_hash_bucket_strong": (lambda a: tg.strings.to_hash_bucket_strong(a, 7, [1, 2]),
                              lambda c: [_words(c)]),
    "ngrams": (lambda a: tg.strings.ngrams(tg.strings.split(a), 2),
               lambda c: [tg.constant(WORDS[c][0])]),
    "unicode_transcode": (lambda a: tg.strings.unicode_transcode(a, "UTF-8", "UTF-16-BE"),
                          lambda c: [_words(c)]),
    "unicode_decode_with_offsets": (
        lambda a: tg.strings.unicode_decode_with_offsets(a, "UTF-8"), lambda c: [_words(c)]),
    "unicode_split_with_offsets": (
        lambda a: tg.strings.unicode_split_with_offsets(a, "UTF-8"), lambda c: [_words(c)]),
    "unsorted_segment_join": (
        lambda a, ids: tg.strings.unsorted_segment_join(a, ids, 2, separator=":"),
        lambda c: [_words(c), tg.constant([1, 0] if c != 1 else [0, 0])]),
}


def _plain(value):
    """Comparable Python values: tensors as lists, ragged tensors as nested lists."""
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "to_list"):
        return value.to_list()
    return np.asarray(value.numpy()).tolist()


def test_every_strings_function_is_checked():
    assert sorted(CASES) == sorted(tg.strings.__all__)


@pytest.mark.parametrize("name", sorted(CASES))
def test_traced_matches_eager_over_calls_with_different_text(name):
    fn, args_of = CASES[name]
    traced = tg.function(fn)
    seen = []
    for call in range(3):
        args = args_of(call)  # arguments of the traced function: a new value at each call
        want = _plain(fn(*args))
        assert _plain(traced(*args)) == want, f"{name}, call {call}"
        seen.append(want)
    assert seen[0] != seen[1], f"{name}: the calls must differ for the check to mean anything"
